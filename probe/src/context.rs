//! What every lane of the probe agent shares: the probes' object names,
//! the agent's configuration, and the context a lane records through
//! (`Ctx`: the transport, the clock, the records' channel, the last
//! acknowledged counter). The agent makes one; the lanes (its own, the
//! kube-rs informer, client-go's) only use it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use tokio::sync::mpsc;

use super::record::{ConnMode, Outcome, ProbeKind, Record};
use super::transport::{Answer, Failure, Refused, Transport};

pub const NAMESPACE: &str = "cpmlab-probes";
pub const COUNTER: &str = "probe-counter";
pub const TARGET: &str = "probe-target";
/// How long the informer may take, after the writer stopped, to see the
/// last acknowledged write.
pub const INFORMER_CATCH_UP: Duration = Duration::from_secs(10);
/// A write in flight this long stops holding the next one back.
pub const WRITE_HOLD: Duration = Duration::from_secs(1);
/// The most writes in flight at once; a tick that finds this many out is
/// not sent (the lanes' coverage shows the gap).
pub const WRITES_IN_FLIGHT: usize = 32;

/// The first certificate of a PEM bundle, DER-encoded.
pub(super) fn first_cert_der(pem: &str) -> Result<Vec<u8>> {
    use rustls::pki_types::pem::PemObject;
    let der = rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
        .context("the CA file holds no PEM certificate")?;
    Ok(der.to_vec())
}

#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// The API server and how to reach it.
    pub target: super::target::Target,
    /// The namespace of the probes' objects (`NAMESPACE` in the lab; its
    /// own per run when more than one agent probes one server).
    pub namespace: String,
    pub out: PathBuf,
    /// Requests per second per probe and mode.
    pub rate: f64,
    pub timeout: Duration,
    pub probes: Vec<ProbeKind>,
    pub modes: Vec<ConnMode>,
    /// How long the late-dns lane's resolver keeps an answer past its TTL.
    pub late_dns: Duration,
    /// New ConfigMaps per second in the load namespace (0: no load).
    pub write_rate: f64,
    pub write_bytes: usize,
    pub seeds_by_addr: Vec<(std::net::Ipv4Addr, String)>,
    /// client-go's lanes: its informer and the leader-election candidates.
    pub clientgo: Option<super::clientgo_config::ClientGo>,
    /// The shoot node's apiserver-proxy, for the `node` lane.
    pub node: Option<std::net::SocketAddr>,
    /// The shoot API's seed-bound name, for the `seed-bound` lane.
    pub seed_bound_name: Option<String>,
}

pub(super) struct Ctx {
    pub(super) t: Transport,
    pub(super) cfg: ProbeConfig,
    pub(super) t0: Instant,
    pub(super) wall0: SystemTime,
    pub(super) seq: AtomicU64,
    pub(super) out: mpsc::UnboundedSender<Record>,
    /// The highest counter value the API acknowledged (0: none yet).
    pub(super) last_acked: AtomicU64,
    /// The lab CA, DER, for clients that take certificates that way.
    pub(super) ca_der: Vec<u8>,
}

impl Ctx {
    /// Whether a lane that has seen counter value `seen` has seen every
    /// write the API acknowledged (the stream lanes' catch-up at the end).
    pub(super) fn has_seen_last_ack(&self, seen: u64) -> bool {
        seen >= self.last_acked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The seed behind a gateway address, for servers that do not say.
    pub(super) fn seed_of(&self, addr: Option<std::net::SocketAddr>) -> Option<String> {
        let std::net::SocketAddr::V4(a) = addr? else {
            return None;
        };
        self.cfg
            .seeds_by_addr
            .iter()
            .find(|(ip, _)| ip == a.ip())
            .map(|(_, s)| s.clone())
    }

    /// The agent's start, ms since the epoch (monotonic times count from it).
    pub(super) fn wall0_ms(&self) -> f64 {
        self.wall0
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64() * 1e3)
            .unwrap_or(0.0)
    }

    pub(super) fn stamp(&self, at: Instant) -> (f64, f64) {
        let mono = at.duration_since(self.t0).as_secs_f64() * 1e3;
        let wall = self
            .wall0
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64() * 1e3)
            .unwrap_or(0.0)
            + mono;
        (wall, mono)
    }

    pub(super) fn record(&self, probe: ProbeKind, mode: ConnMode, start: Instant) -> Record {
        let (wall, mono) = self.stamp(start);
        Record::new(
            self.seq.fetch_add(1, Ordering::Relaxed),
            probe,
            mode,
            (wall, mono),
            start.elapsed().as_secs_f64() * 1e3,
            Outcome::Ok,
        )
    }

    pub(super) fn emit(&self, r: Record) {
        let _ = self.out.send(r);
    }

    /// Records an attempt the server refused unprocessed; returns its seq,
    /// for the retry's `retry_of`.
    pub(super) fn record_refused(
        &self,
        probe: ProbeKind,
        mode: ConnMode,
        event: Option<&str>,
        rf: Refused,
    ) -> u64 {
        let mut r = self.record(probe, mode, rf.started);
        r.duration_ms = rf.ended.duration_since(rf.started).as_secs_f64() * 1e3;
        r.event = event.map(str::to_string);
        let seq = r.seq;
        self.fail(&mut r, rf.failure);
        self.emit(r);
        seq
    }

    /// A failure, with the seed whose gateway the connection went to (the
    /// API servers there are the request's path to etcd).
    pub(super) fn fail(&self, r: &mut Record, f: Failure) {
        r.outcome = f.outcome;
        r.error = Some(f.error);
        r.seed = r.seed.take().or_else(|| self.seed_of(f.addr));
        r.addr = f.addr.map(|a| a.to_string());
    }

    pub(super) fn answered(&self, r: &mut Record, rep: &Answer) {
        r.http_status = Some(rep.status);
        r.seed = rep.seed.clone();
        r.server = rep.server.clone();
        r.addr = Some(rep.addr.to_string());
    }
}
