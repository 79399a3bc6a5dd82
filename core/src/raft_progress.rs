//! The leader's replication progress per peer, as raft keeps it: etcd
//! publishes its raft node's status as the expvar `raft.status`
//! (`server/etcdserver/raft.go`) on `/debug/vars`, which only the client
//! listener serves (`embed/etcd.go`: the metrics listener has `/metrics`
//! and `/health` alone). On a leader it holds, for every peer, the index
//! raft knows the peer has (`match`), the next it will send (`next`) and
//! the state of that peer's progress (`raft/tracker/progress.go`): probe
//! (one append at a time, resent on every heartbeat answer), replicate
//! (a window of appends in flight) or snapshot (a snapshot on its way).
//! The same in etcd 3.4, 3.5 and 3.6 (`raft/status.go`'s MarshalJSON, in
//! 3.6 `go.etcd.io/raft/v3`).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};

use crate::etcd::EtcdTls;

/// One peer's progress at the leader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    #[serde(rename = "match")]
    pub matched: u64,
    pub next: u64,
    /// `StateProbe`, `StateReplicate` or `StateSnapshot`.
    pub state: String,
}

/// `raft.status` as etcd prints it (member ids in hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaftStatus {
    pub id: String,
    pub term: u64,
    pub commit: u64,
    pub applied: u64,
    pub lead: String,
    #[serde(rename = "raftState")]
    pub raft_state: String,
    /// Empty unless this member leads.
    #[serde(default)]
    pub progress: BTreeMap<String, Progress>,
}

/// `raft.status` out of a `/debug/vars` body.
pub fn parse(vars: &str) -> Result<RaftStatus, String> {
    let v: serde_json::Value =
        serde_json::from_str(vars).map_err(|e| format!("/debug/vars is not JSON: {e}"))?;
    let s = v
        .get("raft.status")
        .filter(|s| !s.is_null())
        .ok_or("/debug/vars has no raft.status (the member has not started raft yet)")?;
    serde_json::from_value(s.clone()).map_err(|e| format!("raft.status: {e}"))
}

/// Reads members' `raft.status` with the lab's client certificate
/// (etcd's client port asks for one); its TLS configuration is made once.
pub struct Client {
    tls: Arc<rustls::ClientConfig>,
}

impl Client {
    pub fn new(tls: &EtcdTls) -> Result<Client, String> {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(tls.ca_pem.as_bytes()) {
            roots
                .add(c.map_err(|e| format!("CA: {e}"))?)
                .map_err(|e| format!("CA: {e}"))?;
        }
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(tls.cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| format!("client certificate: {e}"))?;
        let key = PrivateKeyDer::from_pem_slice(tls.key_pem.as_bytes())
            .map_err(|e| format!("client key: {e}"))?;
        let c = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .map_err(|e| format!("client certificate: {e}"))?;
        Ok(Client { tls: Arc::new(c) })
    }

    /// The `raft.status` of the member `host`, through its seed's gateway
    /// (etcd's client port, by SNI, as every lab client reaches a member).
    pub async fn fetch(
        &self,
        gateway: Ipv4Addr,
        host: &str,
        timeout: Duration,
    ) -> Result<RaftStatus, String> {
        parse(&self.get(gateway, host, "/debug/vars", timeout).await?)
    }

    /// The member's Prometheus metrics from its client port, the same way.
    /// etcd serves `/metrics` on its client listeners whether or not it
    /// has a metrics listener of its own (`--listen-metrics-urls`), which
    /// etcd-druid v0.38.1's configuration does not set: this is how the
    /// lab reads the metrics of druid's members.
    pub async fn metrics(
        &self,
        gateway: Ipv4Addr,
        host: &str,
        timeout: Duration,
    ) -> Result<String, String> {
        self.get(gateway, host, "/metrics", timeout).await
    }

    /// `GET path` on the member's client port, HTTP/1.0, so that Go
    /// answers with the body as it is (no chunks); anything but 200 is an
    /// error naming the member.
    async fn get(
        &self,
        gateway: Ipv4Addr,
        host: &str,
        path: &str,
        timeout: Duration,
    ) -> Result<String, String> {
        let (code, body) = crate::apiserver::client::exchange(
            SocketAddr::from((gateway, 2379)),
            host,
            self.tls.clone(),
            &format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n"),
            timeout,
        )
        .await
        .map_err(|e| format!("{host}: {e:#}"))?;
        if code != 200 {
            return Err(format!("{host}: {path} answered {code}"));
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What etcd 3.5's leader printed (`raft/status.go`), a learner in probe.
    #[test]
    fn a_leaders_status_names_each_peers_progress() {
        let vars = r#"{"cmdline": ["etcd"], "raft.status": {"id":"8e9e05c52164694d","term":2,"vote":"8e9e05c52164694d","commit":1210,"lead":"8e9e05c52164694d","raftState":"StateLeader","applied":1210,"progress":{"8e9e05c52164694d":{"match":1210,"next":1211,"state":"StateReplicate"},"91bc3c398fb3c146":{"match":402,"next":403,"state":"StateProbe"}},"leadtransferee":"0"}}"#;
        let s = parse(vars).unwrap();
        assert_eq!(
            (s.term, s.commit, s.raft_state.as_str()),
            (2, 1210, "StateLeader")
        );
        let p = &s.progress["91bc3c398fb3c146"];
        assert_eq!(
            (p.matched, p.next, p.state.as_str()),
            (402, 403, "StateProbe")
        );
    }

    /// A follower's status has no progress; a member before raft, none.
    #[test]
    fn a_followers_status_has_no_progress_and_none_is_an_error() {
        let f = r#"{"raft.status": {"id":"2","term":2,"vote":"1","commit":9,"lead":"1","raftState":"StateFollower","applied":9,"progress":{},"leadtransferee":"0"}}"#;
        assert!(parse(f).unwrap().progress.is_empty());
        assert!(parse(r#"{"raft.status": null}"#)
            .unwrap_err()
            .contains("not started"));
        assert!(parse("<html>").is_err());
    }
}
