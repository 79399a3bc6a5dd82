//! The host's way into the lab where the lab's networks are not this
//! host's bridges (`lab_net`): each connection is `cpmlab agent relay
//! ADDR` run with `docker exec` in the toolbox of the lab whose network
//! holds ADDR, its attached stdin and stdout the connection (an address
//! no lab's network holds is connected to directly). Only the
//! Docker API is used, so it works wherever the engine is: a Docker
//! Desktop or Colima VM, a remote `DOCKER_HOST`, or cpmlab in a container
//! with only the engine's socket.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use anyhow::{Context, Result};
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::engine::Engine;
use crate::lab_net::{Dialed, LabStream, Relay};
use crate::{LABEL_LAB, LABEL_ROLE};

/// The role of the container the relay runs in.
const TOOLBOX_ROLE: &str = "toolbox";

pub struct ExecRelay {
    engine: Engine,
    toolboxes: Toolboxes,
    /// Why the lab is relayed to, for `describe`.
    because: String,
}

/// The toolbox found for each lab subnet (CIDR, container), so that a
/// connection costs one exec, not two listings first; an entry goes when
/// an exec in its toolbox cannot be created (the lab went or was remade).
type Toolboxes = std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>;

impl ExecRelay {
    /// A relay through `engine`; `because` says why the lab is not
    /// reached directly (for messages and run.log).
    pub fn new(engine: Engine, because: String) -> ExecRelay {
        ExecRelay {
            engine,
            toolboxes: Toolboxes::default(),
            because,
        }
    }
}

impl Relay for ExecRelay {
    fn dial(&self, addr: SocketAddr) -> Dialed {
        let engine = self.engine.clone();
        let toolboxes = self.toolboxes.clone();
        Box::pin(async move {
            dial(&engine, &toolboxes, addr)
                .await
                .map_err(|e| io::Error::new(io::ErrorKind::ConnectionRefused, format!("{e:#}")))
        })
    }

    fn describe(&self) -> String {
        format!(
            "relayed: `docker exec <lab>-toolbox cpmlab agent relay` per connection, over the Docker API ({})",
            self.because
        )
    }
}

/// Whether the engine's default bridge has its gateway on this host
/// (`lab_net::is_local`): then the lab's bridges are this host's too, and
/// its addresses are reached directly. `Err` says why not, or why it is not
/// known; `Ok` says why it is. Unknown (no bridge to inspect, or no
/// gateway on it) counts as local, the relay being for engines known to be
/// elsewhere, except in a container (`/.dockerenv`, `/run/.containerenv`):
/// a container given the engine's socket is not the engine's host.
pub async fn bridge_is_local(engine: &Engine) -> std::result::Result<String, String> {
    let in_container = ["/.dockerenv", "/run/.containerenv"]
        .iter()
        .any(|f| std::path::Path::new(f).exists());
    let unknown = |why: String| {
        if in_container {
            Err(format!("{why}, and this process runs in a container"))
        } else {
            Ok(why)
        }
    };
    let net = match engine
        .api
        .inspect_network(
            "bridge",
            None::<bollard::query_parameters::InspectNetworkOptions>,
        )
        .await
    {
        Ok(net) => net,
        Err(e) => {
            return unknown(format!(
                "the engine's `bridge` network could not be inspected ({e})"
            ))
        }
    };
    // Docker 20.10's `bridge` may name its subnet without its gateway,
    // which is then the subnet's first address (the daemon's default
    // `bip`): taken as the gateway where none is named.
    let gateways: Vec<std::net::IpAddr> = net
        .ipam
        .and_then(|i| i.config)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| {
            c.gateway
                .and_then(|g| g.parse().ok())
                .or_else(|| c.subnet.as_deref().and_then(first_address))
        })
        .collect();
    if gateways.is_empty() {
        return unknown("the engine's `bridge` network names no gateway and no IPv4 subnet".into());
    }
    match gateways.iter().find(|g| crate::lab_net::is_local(**g)) {
        Some(g) => Ok(format!("the engine's bridge gateway {g} is this host's")),
        None => Err(format!(
            "the engine's bridge gateway {} is not this host's",
            gateways[0]
        )),
    }
}

/// The first address of IPv4 subnet `a.b.c.d/n` (n < 31), where Docker
/// puts a bridge's gateway unless told otherwise.
fn first_address(cidr: &str) -> Option<std::net::IpAddr> {
    let (net, len) = cidr.split_once('/')?;
    let (net, len) = (net.parse::<Ipv4Addr>().ok()?, len.parse::<u32>().ok()?);
    if len >= 31 {
        return None;
    }
    let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
    Some(Ipv4Addr::from((u32::from(net) & mask) + 1).into())
}

/// `a.b.c.d/n` holds `ip`.
fn subnet_holds(cidr: &str, ip: Ipv4Addr) -> bool {
    let Some((net, len)) = cidr.split_once('/') else {
        return false;
    };
    let (Ok(net), Ok(len)) = (net.parse::<Ipv4Addr>(), len.parse::<u32>()) else {
        return false;
    };
    if len > 32 {
        return false;
    }
    let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
    u32::from(net) & mask == u32::from(ip) & mask
}

/// The running toolbox of the lab one of whose networks holds `ip`, with
/// that network's subnet; None where no lab's network does (an address
/// outside the lab, reached directly).
async fn toolbox_for(engine: &Engine, ip: Ipv4Addr) -> Result<Option<(String, String)>> {
    let nets = engine
        .api
        .list_networks(Some(
            bollard::query_parameters::ListNetworksOptionsBuilder::default()
                .filters(&std::collections::HashMap::from([(
                    "label",
                    vec![LABEL_LAB],
                )]))
                .build(),
        ))
        .await
        .context("list the labs' networks")?;
    let found = nets.iter().find_map(|n| {
        let subnet = n
            .ipam
            .as_ref()?
            .config
            .as_ref()?
            .iter()
            .filter_map(|c| c.subnet.as_deref())
            .find(|s| subnet_holds(s, ip))?;
        Some((
            subnet.to_string(),
            n.labels.as_ref()?.get(LABEL_LAB)?.clone(),
        ))
    });
    let Some((subnet, lab)) = found else {
        return Ok(None);
    };
    let boxes = engine
        .api
        .list_containers(Some(
            bollard::query_parameters::ListContainersOptionsBuilder::default()
                .filters(&std::collections::HashMap::from([(
                    "label",
                    vec![
                        format!("{LABEL_LAB}={lab}"),
                        format!("{LABEL_ROLE}={TOOLBOX_ROLE}"),
                    ],
                )]))
                .build(),
        ))
        .await
        .context("list the lab's toolbox")?;
    boxes
        .iter()
        .filter(|c| c.state.as_ref().is_some_and(|s| s.to_string() == "running"))
        .find_map(|c| {
            c.names
                .as_ref()?
                .first()
                .map(|n| n.trim_start_matches('/').to_string())
        })
        .with_context(|| format!("lab {lab} has no running toolbox to relay through"))
        .map(|t| Some((subnet, t)))
}

async fn dial(engine: &Engine, toolboxes: &Toolboxes, addr: SocketAddr) -> Result<LabStream> {
    let SocketAddr::V4(v4) = addr else {
        anyhow::bail!("{addr}: the lab's addresses are IPv4");
    };
    let ip = *v4.ip();
    let known = toolboxes
        .lock()
        .unwrap()
        .iter()
        .find(|(subnet, _)| subnet_holds(subnet, ip))
        .cloned();
    if let Some((subnet, toolbox)) = known {
        match create_relay(engine, &toolbox, addr).await {
            Ok(exec) => return attach(engine, &toolbox, &exec, addr).await,
            // Gone or remade: looked up again below.
            Err(_) => toolboxes.lock().unwrap().retain(|(s, _)| *s != subnet),
        }
    }
    let Some((subnet, toolbox)) = toolbox_for(engine, ip).await? else {
        let s = tokio::net::TcpStream::connect(addr)
            .await
            .with_context(|| format!("connect {addr} (not a lab address: directly)"))?;
        let _ = s.set_nodelay(true);
        return Ok(Box::new(s));
    };
    let exec = create_relay(engine, &toolbox, addr).await?;
    toolboxes.lock().unwrap().push((subnet, toolbox.clone()));
    attach(engine, &toolbox, &exec, addr).await
}

/// Creates (not starts) the exec of `cpmlab agent relay ADDR` in `toolbox`.
async fn create_relay(engine: &Engine, toolbox: &str, addr: SocketAddr) -> Result<String> {
    let cmd = vec![
        cpmlab_provider::AGENT_BIN.to_string(),
        "agent".into(),
        "relay".into(),
        addr.to_string(),
    ];
    let exec = engine
        .api
        .create_exec(
            toolbox,
            CreateExecOptions {
                cmd: Some(cmd),
                attach_stdin: Some(true),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                ..Default::default()
            },
        )
        .await
        .with_context(|| format!("exec the relay to {addr} in {toolbox}"))?;
    Ok(exec.id)
}

/// Starts the relay's exec and returns its streams once it says it is
/// connected.
async fn attach(engine: &Engine, toolbox: &str, exec: &str, addr: SocketAddr) -> Result<LabStream> {
    let StartExecResults::Attached { mut output, input } = engine
        .api
        .start_exec(exec, None::<bollard::exec::StartExecOptions>)
        .await
        .with_context(|| format!("start the relay to {addr} in {toolbox}"))?
    else {
        anyhow::bail!("the relay to {addr} in {toolbox} started detached");
    };
    // The relay's first byte says it is connected; stderr before it, or its
    // end, says why not.
    let mut stderr = String::new();
    loop {
        match output.next().await {
            Some(Ok(LogOutput::StdOut { message })) if !message.is_empty() => {
                anyhow::ensure!(
                    message[0] == cpmlab_lab::agent::relay::CONNECTED,
                    "the relay to {addr} in {toolbox} began with {:?}",
                    String::from_utf8_lossy(&message)
                );
                return Ok(Box::new(ExecStream {
                    output,
                    input,
                    pending: message.slice(1..),
                }));
            }
            Some(Ok(LogOutput::StdErr { message })) => {
                stderr.push_str(&String::from_utf8_lossy(&message))
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                return Err(e).with_context(|| format!("the relay to {addr} in {toolbox}"))
            }
            None => anyhow::bail!(
                "{addr} through {toolbox}: {}",
                stderr.trim().lines().last().unwrap_or("the relay ended")
            ),
        }
    }
}

type Output = Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;

/// An exec's attached streams as one byte stream: stdout read, stdin
/// written.
struct ExecStream {
    output: Output,
    input: Pin<Box<dyn AsyncWrite + Send>>,
    pending: Bytes,
}

impl AsyncRead for ExecStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            if !self.pending.is_empty() {
                let n = self.pending.len().min(buf.remaining());
                let chunk = self.pending.split_to(n);
                buf.put_slice(&chunk);
                return Poll::Ready(Ok(()));
            }
            match self.output.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(io::Error::other(e))),
                Poll::Ready(Some(Ok(LogOutput::StdOut { message }))) => self.pending = message,
                Poll::Ready(Some(Ok(_))) => {}
            }
        }
    }
}

impl AsyncWrite for ExecStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.input.as_mut().poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        self.input.as_mut().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        self.input.as_mut().poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bridge_without_a_named_gateway_has_its_subnet_s_first_address() {
        assert_eq!(
            first_address("172.17.0.0/16"),
            Some(Ipv4Addr::new(172, 17, 0, 1).into())
        );
        assert_eq!(
            first_address("10.213.1.128/25"),
            Some(Ipv4Addr::new(10, 213, 1, 129).into())
        );
        assert_eq!(first_address("10.0.0.4/31"), None);
        assert_eq!(first_address("fd00::/64"), None);
        assert_eq!(first_address("garbage"), None);
    }

    #[test]
    fn a_subnet_holds_its_addresses_only() {
        assert!(subnet_holds("10.213.1.0/24", [10, 213, 1, 30].into()));
        assert!(!subnet_holds("10.213.1.0/24", [10, 213, 2, 30].into()));
        assert!(subnet_holds("0.0.0.0/0", [1, 2, 3, 4].into()));
        assert!(!subnet_holds("10.213.1.0/33", [10, 213, 1, 1].into()));
        assert!(!subnet_holds("nonsense", [10, 213, 1, 1].into()));
    }
}
