//! The docker provider behind the `Provider` interface: a workload is a
//! container, a member's data a volume, a seed's ingress Envoy with the
//! gateway agent beside it (`gateway`).

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use super::engine::{ContainerSpec, Engine};
use super::{cpu, images, seed, up, LABEL_LAB, LABEL_ROLE, LABEL_SEED};
use crate::pki::Ca;
use crate::progress::Progress;
use crate::state::{ApiServerState, LabState, MemberState};
use cpmlab_provider::{
    node_address, node_client, probe_client, ClientSpec, DownReport, FileSpec, NodeSpec, Output,
    Provider, SeedOps, Signal, Up, UpRequest, Workload, WorkloadState, AGENT_BIN, CLIENT_OUT,
    NODE_HOST,
};

pub struct DockerProvider {
    pub engine: Engine,
}

impl DockerProvider {
    /// Connects to the Docker engine (exit 3 with the fix when it cannot).
    pub async fn connect() -> Result<DockerProvider> {
        Ok(DockerProvider {
            engine: Engine::connect().await?,
        })
    }
}

#[async_trait::async_trait]
impl Provider for DockerProvider {
    /// Checks that nothing of another lab of that name is in the way
    /// (`up::preflight`: a lab already up as asked is left as it is), then
    /// builds the lab step by step, `req.cancel` checked between steps.
    async fn up(&self, req: &UpRequest, progress: &Progress) -> Result<Up> {
        if let Some(state) = up::preflight(&self.engine, req).await? {
            return Ok(Up::AlreadyUp(Box::new(state)));
        }
        Ok(Up::Created(Box::new(
            up::create(&self.engine, req, progress).await?,
        )))
    }

    async fn down(&self, state_root: &Path, lab: &str) -> Result<DownReport> {
        super::down::down(&self.engine, lab, state_root).await
    }

    async fn labs(&self) -> Result<Vec<String>> {
        self.engine.lab_names().await
    }

    async fn workloads(&self, lab: Option<&str>) -> Result<Vec<Workload>> {
        let mut out: Vec<Workload> = self
            .engine
            .containers(lab)
            .await?
            .into_iter()
            .filter_map(|c| {
                let labels = c.labels.unwrap_or_default();
                let name = c
                    .names
                    .and_then(|n| n.into_iter().next())?
                    .trim_start_matches('/')
                    .to_string();
                Some(Workload {
                    name,
                    lab: labels.get(LABEL_LAB)?.clone(),
                    role: labels.get(LABEL_ROLE).cloned().unwrap_or_default(),
                    seed: labels.get(LABEL_SEED).cloned(),
                    state: workload_state_of(&c.state.map(|s| s.to_string()).unwrap_or_default()),
                    cpu_ns: c.id.as_deref().and_then(cpu::container_ns),
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn start_client(&self, state: &LabState, client: &ClientSpec) -> Result<()> {
        let name = probe_client(state);
        if let Some(node) = &client.node {
            if let Err(e) = self.start_node(state, node).await {
                // Nothing half-created: the node goes with the failure.
                let _ = self.engine.remove_container(&node_client(state)).await;
                return Err(e);
            }
        }
        self.check_image_parts(state, &client.image_parts).await?;
        let mut argv = vec![AGENT_BIN.to_string()];
        argv.extend(client.args.iter().cloned());
        let volumes = vec![(client.out.display().to_string(), CLIENT_OUT.into())];
        let spec = client_workload(state, &name, "probe", PROBE_HOST, argv, volumes)?;
        let spec = ContainerSpec {
            files: client.files.clone(),
            ..spec
        };
        self.engine.create_container(&spec).await?;
        up::start_released(&self.engine, state, &name).await
    }
}

#[async_trait::async_trait]
impl SeedOps for DockerProvider {
    fn name(&self) -> &'static str {
        "docker"
    }

    async fn workload_state(&self, workload: &str) -> Result<WorkloadState> {
        Ok(workload_state_of(
            &self.engine.container_state(workload).await?,
        ))
    }

    async fn signal(&self, workload: &str, signal: Signal) -> Result<()> {
        let name = match signal {
            Signal::Term => "SIGTERM",
            Signal::Kill => "SIGKILL",
        };
        self.engine.signal(workload, name).await
    }

    async fn freeze(&self, workload: &str, frozen: bool) -> Result<()> {
        if frozen {
            self.engine.pause(workload).await
        } else {
            self.engine.unpause(workload).await
        }
    }

    async fn stop(&self, workload: &str, grace: Duration) -> Result<()> {
        let secs = i32::try_from(grace.as_secs()).unwrap_or(i32::MAX);
        self.engine.stop(workload, secs).await
    }

    async fn start(&self, state: &LabState, workload: &str) -> Result<()> {
        up::start_released(&self.engine, state, workload).await
    }

    async fn release(&self, state: &LabState, workload: &str) -> Result<()> {
        up::release_one(&self.engine, state, workload).await
    }

    async fn start_member(
        &self,
        state: &LabState,
        ca: &Ca,
        m: &MemberState,
        cluster: &[(String, String)],
    ) -> Result<()> {
        // An earlier attempt's container and data are replaced.
        self.remove(state, &m.container, Some(&m.volume)).await?;
        seed::start_joining_member(&self.engine, state, ca, m, cluster).await
    }

    fn restores_members(&self) -> bool {
        true
    }

    async fn start_restored_member(
        &self,
        state: &LabState,
        ca: &Ca,
        m: &MemberState,
        snapshot: &[u8],
        restore: &[String],
    ) -> Result<()> {
        // An earlier attempt's container and data are replaced.
        self.remove(state, &m.container, Some(&m.volume)).await?;
        seed::start_restored_member(&self.engine, state, ca, m, snapshot, restore).await
    }

    async fn start_empty_member(&self, state: &LabState, ca: &Ca, m: &MemberState) -> Result<()> {
        // An earlier attempt's container and data are replaced.
        self.remove(state, &m.container, Some(&m.volume)).await?;
        seed::start_empty_member(&self.engine, state, ca, m).await
    }

    async fn download(&self, workload: &str, path: &str) -> Result<Vec<u8>> {
        self.engine.download(workload, path).await
    }

    async fn start_apiserver(
        &self,
        state: &LabState,
        ca: &Ca,
        a: &ApiServerState,
        etcd_servers: &[String],
        sa: &(String, String),
    ) -> Result<()> {
        self.remove(state, &a.container, None).await?;
        seed::start_apiserver(&self.engine, state, ca, a, etcd_servers, sa).await
    }

    async fn remove(&self, state: &LabState, workload: &str, data: Option<&str>) -> Result<()> {
        if let Some(run) = &state.probe_run {
            crate::probe::container_logs::keep(self, run, &[workload.to_string()]).await;
        }
        self.engine.remove_container(workload).await?;
        if let Some(volume) = data {
            self.engine.remove_volume(volume).await?;
        }
        Ok(())
    }

    async fn sync_gateway(&self, state: &LabState, seed: &str) -> Result<()> {
        seed::sync_gateway(&self.engine, state, seed).await
    }

    async fn wait_gateway_serves(
        &self,
        state: &LabState,
        seed: &str,
        cancel: &crate::errors::Cancel,
    ) -> Result<()> {
        seed::wait_served(&self.engine, state, seed, cancel).await
    }

    async fn set_dns(&self, state: &LabState, records: &[(&str, &[Ipv4Addr])]) -> Result<()> {
        seed::dns_set(&self.engine, state, records).await
    }

    async fn exec(&self, workload: &str, argv: &[&str]) -> Result<Output> {
        self.engine.exec(workload, argv, false).await
    }

    async fn exec_netlink(
        &self,
        state: &LabState,
        workload: &str,
        argv: &[&str],
    ) -> Result<Output> {
        match &state.emulation {
            Some(e) => {
                let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
                self.engine
                    .run_in_netns(workload, &state.name, &e.netlink_image, &argv, &[])
                    .await
            }
            None => self.engine.exec(workload, argv, false).await,
        }
    }

    async fn upload(&self, workload: &str, files: &[FileSpec]) -> Result<()> {
        self.engine.upload(workload, files).await
    }

    async fn logs(&self, workload: &str) -> Result<Vec<u8>> {
        self.engine.logs(workload).await
    }

    async fn member_metrics(&self, m: &MemberState, timeout: Duration) -> Result<String> {
        // The host reaches every container on the lab's networks.
        http_get(&format!("{}:2381", m.ip), "/metrics", timeout)
            .await
            .map_err(|e| anyhow::anyhow!(e))
    }
}

/// A workload on the clients network at host number `host`, in the lab
/// image behind the barrier (routed through the router once released).
fn client_workload(
    state: &LabState,
    name: &str,
    role: &str,
    host: u8,
    cmd: Vec<String>,
    volumes: Vec<(String, String)>,
) -> Result<ContainerSpec> {
    let clients = state
        .network(crate::topology::CLIENTS)
        .context("the lab has no clients network")?;
    Ok(ContainerSpec {
        name: name.to_string(),
        lab: state.name.clone(),
        role: role.into(),
        seed: None,
        image: state.image.clone(),
        cmd: up::behind_barrier(state, cmd),
        networks: vec![(clients.docker_name.clone(), clients.subnet.host(host))],
        cap_add: vec![],
        sysctls: up::lab_sysctls(state),
        volumes,
        devices: vec![],
        files: vec![],
    })
}

impl DockerProvider {
    /// Refuses, with the fix, a client that runs a Go part the lab's image
    /// was made without (the parts this host had built when it was).
    async fn check_image_parts(&self, state: &LabState, wanted: &[String]) -> Result<()> {
        if wanted.is_empty() {
            return Ok(());
        }
        let baked = images::parts_of(&self.engine, &state.image)
            .await?
            .unwrap_or_default();
        let missing: Vec<&str> = wanted
            .iter()
            .map(String::as_str)
            .filter(|w| !baked.iter().any(|b| b == w))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let fix = missing
            .iter()
            .filter_map(|m| crate::go_parts::PARTS.iter().find(|p| p.name == *m))
            .map(|p| format!("{} {}", p.installer, p.name))
            .collect::<Vec<_>>()
            .join(" and ");
        Err(crate::errors::EnvNotReady::new(
            format!(
                "the probes run {} (the informer-go lane, leader-election candidates), which the lab image {} was made without",
                missing.join(", "),
                state.image
            ),
            format!("run `{fix}` (scripts/setup does), then `cpmlab down` and `cpmlab up` (the image is made at `up`)"),
        )
        .into())
    }

    /// The shoot node: on the clients network, routed through the router
    /// as the probe agent is; started, then waited for until it serves.
    async fn start_node(&self, state: &LabState, node: &NodeSpec) -> Result<()> {
        let name = node_client(state);
        let ip = node_address(state).context("the lab has no clients network")?;
        // One left by a run that crashed is in the way: it goes.
        self.engine.remove_container(&name).await?;
        let spec = ContainerSpec {
            files: node.files.clone(),
            ..client_workload(state, &name, "node", NODE_HOST, node.cmd.clone(), vec![])?
        };
        self.engine.create_container(&spec).await?;
        up::start_released(&self.engine, state, &name).await?;
        let (port, path) = &node.ready;
        let addr = format!("{ip}:{port}");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            match http_get_version(&addr, path, Duration::from_secs(2), "1.1").await {
                Ok(_) => return Ok(()),
                Err(e) if std::time::Instant::now() > deadline => {
                    anyhow::bail!(
                        "the shoot node {name} did not serve http://{addr}{path} within 30 s: {e} \
                         (see `docker logs {name}`)"
                    )
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}

/// A plain HTTP GET (etcd's metrics listener speaks no TLS).
async fn http_get(addr: &str, path: &str, timeout: Duration) -> Result<String, String> {
    http_get_version(addr, path, timeout, "1.0").await
}

/// A plain HTTP GET in HTTP/`version` (Envoy answers HTTP/1.0 with 426),
/// the connection closed after the answer.
async fn http_get_version(
    addr: &str,
    path: &str,
    timeout: Duration,
    version: &str,
) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let work = async {
        let sock: std::net::SocketAddr =
            addr.parse().map_err(|e| format!("address {addr}: {e}"))?;
        let mut s = crate::lab_net::connect(sock)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        s.write_all(
            format!("GET {path} HTTP/{version}\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        match text.split_once("\r\n\r\n") {
            Some((head, body)) if head.starts_with("HTTP/1.") && head.contains(" 200 ") => {
                Ok(body.to_string())
            }
            Some((head, _)) => Err(head.lines().next().unwrap_or("").to_string()),
            None => Err("no HTTP answer".into()),
        }
    };
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {timeout:?}")))
}

/// Docker's container states as the interface's.
fn workload_state_of(docker: &str) -> WorkloadState {
    match docker {
        "running" | "restarting" => WorkloadState::Running,
        "paused" => WorkloadState::Paused,
        "missing" => WorkloadState::Missing,
        "created" => WorkloadState::Created,
        _ => WorkloadState::Stopped,
    }
}

/// Host number of the probe agent's container on the clients network.
pub const PROBE_HOST: u8 = 5;
