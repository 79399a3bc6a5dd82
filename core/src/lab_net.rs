//! How this process reaches the lab's addresses. On a Linux host whose
//! engine is local, the lab's Docker networks are host bridges and a plain
//! TCP connect reaches any lab address. Where the engine runs in a VM
//! (Docker Desktop, Colima, Rancher Desktop, WSL2's Docker Desktop), on
//! another machine, or cpmlab itself runs in a container, the lab's
//! addresses are not reachable from here, and every connection goes
//! through a relay the provider registers ([`set_relay`]: the docker
//! provider's runs `cpmlab agent relay` in the lab's toolbox through the
//! Docker API). Every connection the host side opens to a lab address
//! comes through [`connect`]; DNS asks over TCP where relayed.
//!
//! Code that runs inside the lab's containers never registers a relay: it
//! reaches the lab directly.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use tokio::io::{AsyncRead, AsyncWrite};

/// A byte stream to a lab address.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

pub type LabStream = Box<dyn Stream>;

pub type Dialed = Pin<Box<dyn Future<Output = std::io::Result<LabStream>> + Send>>;

/// Opens connections to lab addresses from somewhere that reaches them.
pub trait Relay: Send + Sync + 'static {
    fn dial(&self, addr: SocketAddr) -> Dialed;
    /// For messages: how connections go (`docker exec in the lab's toolbox`).
    fn describe(&self) -> String;
}

static RELAY: OnceLock<Arc<dyn Relay>> = OnceLock::new();
static DIRECT_BECAUSE: OnceLock<String> = OnceLock::new();

/// Sends every later [`connect`] through `relay`. Once per process: false
/// when one was set already.
pub fn set_relay(relay: Arc<dyn Relay>) -> bool {
    RELAY.set(relay).is_ok()
}

/// Why connections go direct, for [`describe`] (what the engine's bridge
/// showed, or that `ACCESS_ENV` said so). Once per process.
pub fn set_direct_because(why: String) {
    let _ = DIRECT_BECAUSE.set(why);
}

/// Whether connections go through a relay.
pub fn relayed() -> bool {
    RELAY.get().is_some()
}

/// How connections to the lab go, for messages.
pub fn describe() -> String {
    RELAY
        .get()
        .map(|r| r.describe())
        .unwrap_or_else(|| match DIRECT_BECAUSE.get() {
            Some(why) => format!(
                "direct (the lab's networks are this host's bridges: {why}; {ACCESS_ENV}=relay goes through the lab's toolbox)"
            ),
            None => "direct (the lab's networks are this host's bridges)".into(),
        })
}

/// A connection to `addr`, a lab address: direct, or through the relay.
pub async fn connect(addr: SocketAddr) -> std::io::Result<LabStream> {
    match RELAY.get() {
        Some(r) => r.dial(addr).await,
        None => {
            let s = tokio::net::TcpStream::connect(addr).await?;
            let _ = s.set_nodelay(true);
            Ok(Box::new(s))
        }
    }
}

/// How this process should reach the lab: `CPMLAB_LAB_ACCESS` (`direct` or
/// `relay`), else what [`is_local`] finds for the engine's bridge.
pub const ACCESS_ENV: &str = "CPMLAB_LAB_ACCESS";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Direct,
    Relay,
}

/// The access `ACCESS_ENV` asks for (None: to be found out); an error
/// names a value that is neither.
pub fn wanted_access() -> Result<Option<Access>, String> {
    match std::env::var(ACCESS_ENV).ok().as_deref() {
        Some("direct") => Ok(Some(Access::Direct)),
        Some("relay") => Ok(Some(Access::Relay)),
        Some("") | None => Ok(None),
        Some(other) => Err(format!(
            "{ACCESS_ENV}={other}: want `direct` (the lab's networks are this host's bridges) or `relay` (through the lab's toolbox, over the Docker API)"
        )),
    }
}

/// Whether `ip` is an address of this network namespace (binding to it
/// succeeds only then). The engine's bridge gateway is local exactly where
/// the engine's bridges are this host's: a Linux host running its own
/// engine (in a container or not). On Docker Desktop, Colima, a remote
/// engine, or in a container given only the socket, it is not.
pub fn is_local(ip: std::net::IpAddr) -> bool {
    std::net::UdpSocket::bind((ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_namespace_s_addresses_are_local() {
        assert!(is_local([127, 0, 0, 1].into()));
        // TEST-NET-1 (RFC 5737): no host has it.
        assert!(!is_local([192, 0, 2, 1].into()));
    }
}
