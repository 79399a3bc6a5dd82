//! The shoot's etcd: how a member is started (flags as etcd-druid renders
//! them for a TLS cluster behind a gateway), and the cluster as seen through
//! the etcd v3 API, member by member, over each seed's gateway by SNI.

use std::net::Ipv4Addr;
use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use serde::Serialize;

use crate::state::{LabState, MemberState};
use crate::topology::{EtcdSpec, EtcdVersion};

/// etcd-druid's `defaultSnapshotCount` (internal/component/configmap/etcdconfig.go).
pub const DRUID_SNAPSHOT_COUNT: u64 = 10_000;

/// Paths inside a member container.
pub const PKI_DIR: &str = "/etc/etcd/pki";
pub const DATA_DIR: &str = "/var/lib/etcd";

/// TLS material for talking to members.
#[derive(Clone)]
pub struct EtcdTls {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// `--initial-cluster-state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterState {
    New,
    Existing,
}

/// Where the lab image holds etcd 3.5 (the one scripts/build-go built);
/// the image's builder places it there.
pub const ETCD_35_IN_IMAGE: &str = "/usr/local/bin/etcd-3.5";

/// The etcd binary of `version` in the lab image: 3.4 is the host's
/// `/usr/bin/etcd` (on the PATH), 3.5 the one scripts/build-go built.
pub fn binary(version: EtcdVersion) -> &'static str {
    match version {
        EtcdVersion::V3_4 => "etcd",
        EtcdVersion::V3_5 => ETCD_35_IN_IMAGE,
    }
}

/// The etcd command line of `member`, joining `cluster` (name and peer URL
/// of every member, itself included: `--initial-cluster`). Every flag means
/// the same to etcd 3.4 and 3.5; pre-vote, which 3.5 turns on by default,
/// is left at each version's default, as etcd-druid leaves it, unless
/// the topology's `etcd.pre_vote` says otherwise; `etcd.snapshot_count` and
/// `etcd.snapshot_catchup_entries` likewise replace druid's and etcd's.
pub fn member_command(
    member: &MemberState,
    cluster: &[(String, String)],
    state: ClusterState,
    token: &str,
    version: EtcdVersion,
    tuning: &EtcdSpec,
) -> Vec<String> {
    let initial: Vec<String> = cluster
        .iter()
        .map(|(name, url)| format!("{name}={url}"))
        .collect();
    let mut args = vec![
        binary(version).to_string(),
        format!("--name={}", member.name),
        format!("--data-dir={DATA_DIR}/data"),
        "--listen-client-urls=https://0.0.0.0:2379".into(),
        format!("--advertise-client-urls={}", member.client_url()),
        "--listen-peer-urls=https://0.0.0.0:2380".into(),
        format!("--initial-advertise-peer-urls={}", member.peer_url()),
        format!("--initial-cluster={}", initial.join(",")),
        format!(
            "--initial-cluster-state={}",
            match state {
                ClusterState::New => "new",
                ClusterState::Existing => "existing",
            }
        ),
        format!("--initial-cluster-token={token}"),
        "--listen-metrics-urls=http://0.0.0.0:2381".into(),
        "--client-cert-auth=true".into(),
        format!("--trusted-ca-file={PKI_DIR}/ca.crt"),
        format!("--cert-file={PKI_DIR}/server.crt"),
        format!("--key-file={PKI_DIR}/server.key"),
        "--peer-client-cert-auth=true".into(),
        format!("--peer-trusted-ca-file={PKI_DIR}/ca.crt"),
        format!("--peer-cert-file={PKI_DIR}/server.crt"),
        format!("--peer-key-file={PKI_DIR}/server.key"),
        // Peers arrive from the gateway's address, not their own (see gateway.rs).
        "--experimental-peer-skip-client-san-verification=true".into(),
        // What etcd-druid renders for a shoot's etcd-main, or leaves at
        // etcd's default (spelled out here so a newer etcd's default cannot
        // change the lab silently). See `DRUID` in the tests for sources.
        "--heartbeat-interval=100".into(),
        "--election-timeout=1000".into(),
        format!(
            "--snapshot-count={}",
            tuning.snapshot_count.unwrap_or(DRUID_SNAPSHOT_COUNT)
        ),
        "--quota-backend-bytes=8589934592".into(),
        "--auto-compaction-mode=periodic".into(),
        "--auto-compaction-retention=30m".into(),
        "--max-request-bytes=1572864".into(),
        "--max-txn-ops=128".into(),
        "--max-snapshots=5".into(),
        "--max-wals=5".into(),
        // Gardener asks for extensive metrics for etcd-main.
        "--metrics=extensive".into(),
        "--enable-grpc-gateway=false".into(),
        "--logger=zap".into(),
        "--log-outputs=stderr".into(),
    ];
    if let Some(on) = tuning.pre_vote {
        args.push(format!("--pre-vote={on}"));
    }
    if let Some(n) = tuning.snapshot_catchup_entries {
        args.push(format!("--experimental-snapshot-catchup-entries={n}"));
    }
    args.shrink_to_fit();
    args
}

/// One member as `cpmlab status` reports it.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct MemberView {
    /// Member ID as etcd prints it (hex).
    pub id: String,
    pub name: String,
    pub seed: String,
    pub is_learner: bool,
    pub is_leader: bool,
    pub healthy: bool,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raft_index: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raft_term: Option<u64>,
    /// The database file's size and the part of it in use (etcd's
    /// `dbSize`, `dbSizeInUse`), in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_size_in_use: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClusterView {
    pub members: Vec<MemberView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ClusterView {
    pub fn voters(&self) -> impl Iterator<Item = &MemberView> {
        self.members.iter().filter(|m| !m.is_learner)
    }
    /// Every member healthy, exactly one leader, and it is a voter.
    pub fn is_settled(&self, expected: usize) -> bool {
        self.error.is_none()
            && self.members.len() == expected
            && self.members.iter().all(|m| m.healthy)
            && self.members.iter().filter(|m| m.is_leader).count() == 1
    }
}

/// A client for one member, reached at `gateway` with SNI = the member's name.
pub async fn member_client(
    gateway: Ipv4Addr,
    host: &str,
    tls: &EtcdTls,
    timeout: Duration,
) -> Result<Client, etcd_client::Error> {
    let opts = ConnectOptions::new()
        .with_connect_timeout(timeout)
        .with_timeout(timeout)
        .with_tls(
            TlsOptions::new()
                .ca_certificate(Certificate::from_pem(&tls.ca_pem))
                .identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem))
                .domain_name(host),
        );
    if !crate::lab_net::relayed() {
        return Client::connect([format!("https://{gateway}:2379")], Some(opts)).await;
    }
    // Through the relay: tonic's channel with the same TLS over a stream
    // the relay opened (`lab_net`).
    let addr = std::net::SocketAddr::from((gateway, 2379));
    let endpoint = tonic::transport::Endpoint::from_shared(format!("https://{addr}"))?
        .tls_config(
            TlsOptions::new()
                .ca_certificate(Certificate::from_pem(&tls.ca_pem))
                .identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem))
                .domain_name(host),
        )?
        .connect_timeout(timeout)
        .timeout(timeout);
    let channel = endpoint
        .connect_with_connector(tower::service_fn(move |_| async move {
            crate::lab_net::connect(addr)
                .await
                .map(hyper_util::rt::TokioIo::new)
        }))
        .await?;
    Client::from_channel(etcd_client::Channel::Tonic(channel), Some(opts)).await
}

/// A client for the whole cluster: the first member of `state` that answers
/// within `timeout` (connecting and answering its status: a SIGKILLed
/// member behind its seed's gateway can hold a TLS handshake open past the
/// connect timeout, and must not hold up the members after it).
pub async fn cluster_client(
    state: &LabState,
    tls: &EtcdTls,
    timeout: Duration,
) -> Result<Client, etcd_client::Error> {
    let mut last = None;
    for m in &state.members {
        let Some(seed) = state.seed(&m.seed) else {
            continue;
        };
        let answered = tokio::time::timeout(timeout, async {
            let mut c = member_client(seed.gateway.ip, &m.host, tls, timeout).await?;
            c.status().await?;
            Ok::<_, etcd_client::Error>(c)
        })
        .await;
        match answered {
            Ok(Ok(c)) => return Ok(c),
            Ok(Err(e)) => last = Some(e),
            Err(_) => {
                last = Some(etcd_client::Error::InvalidArgs(format!(
                    "{} did not answer within {timeout:?}",
                    m.name
                )))
            }
        }
    }
    Err(last.unwrap_or_else(|| etcd_client::Error::InvalidArgs("the lab has no members".into())))
}

fn seed_of(state: &LabState, name: &str) -> String {
    state
        .members
        .iter()
        .find(|m| m.name == name)
        .map(|m| m.seed.clone())
        .or_else(|| {
            state
                .seeds
                .iter()
                .find(|s| name.starts_with(&format!("{}-", s.name)))
                .map(|s| s.name.clone())
        })
        .unwrap_or_default()
}

/// The cluster as etcd reports it: membership from the API, health and
/// leadership by asking each member itself, all in parallel.
pub async fn cluster_view(state: &LabState, tls: &EtcdTls, timeout: Duration) -> ClusterView {
    let probes = state.members.iter().map(|m| {
        let gw = state.seed(&m.seed).map(|s| s.gateway.ip);
        async move {
            let Some(gw) = gw else {
                return (m.name.clone(), Err("unknown seed".to_string()));
            };
            let r = async {
                let mut c = member_client(gw, &m.host, tls, timeout).await?;
                let st = c.status().await?;
                let list = c.member_list().await.ok();
                Ok::<_, etcd_client::Error>((st, list))
            };
            let r = tokio::time::timeout(timeout, r)
                .await
                .map_err(|_| format!("no answer within {timeout:?}"))
                .and_then(|r| r.map_err(|e| e.to_string()));
            (m.name.clone(), r)
        }
    });
    let results = futures_util::future::join_all(probes).await;

    let mut list = None;
    let mut leader = None;
    let mut by_name = std::collections::HashMap::new();
    for (name, r) in results {
        match r {
            Ok((st, l)) => {
                if st.leader() != 0 {
                    leader = Some(st.leader());
                }
                if list.is_none() {
                    list = l;
                }
                by_name.insert(name, Ok(st));
            }
            Err(e) => {
                by_name.insert(name, Err(e));
            }
        }
    }
    let Some(list) = list else {
        return ClusterView {
            members: Vec::new(),
            leader: None,
            error: Some(format!(
                "no member answered: {}",
                by_name
                    .iter()
                    .filter_map(|(n, r)| r.as_ref().err().map(|e| format!("{n}: {e}")))
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
        };
    };
    let mut members: Vec<MemberView> = list
        .members()
        .iter()
        .map(|m| {
            let st = by_name.get(m.name());
            MemberView {
                id: format!("{:x}", m.id()),
                name: m.name().to_string(),
                seed: seed_of(state, m.name()),
                is_learner: m.is_learner(),
                is_leader: leader == Some(m.id()),
                healthy: matches!(st, Some(Ok(s)) if s.errors().is_empty()),
                peer_urls: m.peer_urls().to_vec(),
                client_urls: m.client_urls().to_vec(),
                version: st
                    .and_then(|r| r.as_ref().ok())
                    .map(|s| s.version().to_string()),
                raft_index: st.and_then(|r| r.as_ref().ok()).map(|s| s.raft_index()),
                raft_term: st.and_then(|r| r.as_ref().ok()).map(|s| s.raft_term()),
                db_size: st
                    .and_then(|r| r.as_ref().ok())
                    .map(|s| s.db_size().max(0) as u64),
                db_size_in_use: st
                    .and_then(|r| r.as_ref().ok())
                    .map(|s| s.raft_used_db_size().max(0) as u64),
                error: match st {
                    Some(Err(e)) => Some(e.clone()),
                    Some(Ok(s)) if !s.errors().is_empty() => Some(s.errors().join("; ")),
                    None if m.name().is_empty() => Some("not started yet".into()),
                    None => Some("not a member the lab knows how to reach".into()),
                    _ => None,
                },
            }
        })
        .collect();
    members.sort_by(|a, b| a.name.cmp(&b.name));
    ClusterView {
        members,
        leader: leader.map(|l| format!("{l:x}")),
        error: None,
    }
}

/// The lab's etcd client TLS (CA, client certificate and key) from its
/// directory.
pub fn lab_tls(dir: &crate::state::LabDir) -> anyhow::Result<EtcdTls> {
    let read = |f: &str| {
        let p = dir.pki().join(f);
        anyhow::Context::with_context(std::fs::read_to_string(&p), || {
            format!("read {}", p.display())
        })
    };
    Ok(EtcdTls {
        ca_pem: read("ca.crt")?,
        cert_pem: read("client.crt")?,
        key_pem: read("client.key")?,
    })
}

/// The gate before a member leaves: a leader, and every voter healthy
/// (`skip`: a seed whose members are not waited for, force-shrink).
pub fn quorum_gate(view: &ClusterView, skip: Option<&str>) -> Result<(), String> {
    if view.leader.is_none() {
        return Err("no leader".into());
    }
    let unhealthy: Vec<&str> = view
        .voters()
        .filter(|m| Some(m.seed.as_str()) != skip && !m.healthy)
        .map(|m| m.name.as_str())
        .collect();
    if unhealthy.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "waiting for {} to be healthy",
            unhealthy.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(members: &[(&str, &str, bool, bool, bool)]) -> ClusterView {
        ClusterView {
            members: members
                .iter()
                .map(|(name, seed, learner, leader, healthy)| MemberView {
                    id: "1".into(),
                    name: name.to_string(),
                    seed: seed.to_string(),
                    is_learner: *learner,
                    is_leader: *leader,
                    healthy: *healthy,
                    ..MemberView::default()
                })
                .collect(),
            leader: members.iter().find(|m| m.3).map(|m| m.0.to_string()),
            error: None,
        }
    }

    #[test]
    fn the_quorum_gate_waits_for_a_leader_and_every_healthy_voter() {
        let ok = view(&[
            ("a0", "seed-a", false, true, true),
            ("b0", "seed-b", false, false, true),
            ("b1", "seed-b", true, false, false),
        ]);
        assert_eq!(
            quorum_gate(&ok, None),
            Ok(()),
            "an unhealthy learner does not hold it"
        );
        let no_leader = view(&[("a0", "seed-a", false, false, true)]);
        assert_eq!(quorum_gate(&no_leader, None), Err("no leader".into()));
        let sick = view(&[
            ("a0", "seed-a", false, true, true),
            ("a1", "seed-a", false, false, false),
            ("b0", "seed-b", false, false, false),
        ]);
        assert_eq!(
            quorum_gate(&sick, None),
            Err("waiting for a1, b0 to be healthy".into())
        );
        // Force-shrink does not wait for the source's members.
        assert_eq!(
            quorum_gate(&sick, Some("seed-a")),
            Err("waiting for b0 to be healthy".into())
        );
    }

    #[test]
    fn member_flags_are_tls_with_skip_san_and_named_urls() {
        let s = crate::plan::sample_state();
        let all: Vec<(String, String)> = s
            .members
            .iter()
            .map(|m| (m.name.clone(), m.peer_url()))
            .collect();
        let cmd = member_command(
            &s.members[1],
            &all,
            ClusterState::New,
            "tok",
            EtcdVersion::V3_4,
            &EtcdSpec::default(),
        );
        assert_eq!(cmd[0], "etcd", "3.4 is the host's etcd, on the PATH");
        let has = |f: &str| cmd.iter().any(|a| a == f);
        assert!(has("--name=seed-a-etcd-1"));
        assert!(has("--experimental-peer-skip-client-san-verification=true"));
        assert!(has("--client-cert-auth=true"));
        assert!(has("--peer-client-cert-auth=true"));
        assert!(has("--initial-cluster-state=new"));
        assert!(has(
            "--advertise-client-urls=https://seed-a-etcd-1.local.cpmlab.test:2379"
        ));
        assert!(has("--initial-cluster=seed-a-etcd-0=https://seed-a-etcd-0.local.cpmlab.test:2380,seed-a-etcd-1=https://seed-a-etcd-1.local.cpmlab.test:2380,seed-a-etcd-2=https://seed-a-etcd-2.local.cpmlab.test:2380"));
    }

    /// What etcd-druid renders for a shoot's etcd-main (or, where it renders
    /// nothing, etcd's own default, which etcd-wrapper then uses), with where
    /// it comes from: etcd-druid `internal/component/configmap/etcdconfig.go`
    /// @5b90b4a7, gardener `pkg/component/etcd/etcd/etcd.go` @b312835d (quota
    /// and metrics for etcd-main), etcd `embed/config.go` v3.4.34.
    const DRUID: &[(&str, &str, &str)] = &[
        ("heartbeat-interval", "100", "etcd default, not rendered"),
        ("election-timeout", "1000", "etcd default, not rendered"),
        ("snapshot-count", "10000", "druid defaultSnapshotCount"),
        ("quota-backend-bytes", "8589934592", "gardener Quota 8Gi"),
        ("auto-compaction-mode", "periodic", "druid default"),
        ("auto-compaction-retention", "30m", "druid default"),
        ("max-request-bytes", "1572864", "etcd default, not rendered"),
        ("max-txn-ops", "128", "etcd default, not rendered"),
        ("max-snapshots", "5", "etcd default, not rendered"),
        ("max-wals", "5", "etcd default, not rendered"),
        (
            "metrics",
            "extensive",
            "gardener, etcd-main (ClassImportant)",
        ),
        ("enable-grpc-gateway", "false", "druid renders false"),
        ("client-cert-auth", "true", "druid, clientUrlTls set"),
        (
            "peer-client-cert-auth",
            "true",
            "druid, peerUrlTls set (HA)",
        ),
    ];

    /// Flags druid does not render and etcd 3.4 leaves off: the lab must not
    /// set them either (pre-vote is off on 3.4, on from 3.5 by default).
    const NOT_RENDERED: &[&str] = &[
        "pre-vote",
        "experimental-initial-corrupt-check",
        "enable-v2",
    ];

    /// The command of the sample lab's first member, alone in its cluster.
    fn first_member(
        state: ClusterState,
        version: EtcdVersion,
        pre_vote: Option<bool>,
    ) -> Vec<String> {
        let s = crate::plan::sample_state();
        let all = vec![(s.members[0].name.clone(), s.members[0].peer_url())];
        let tuning = EtcdSpec {
            pre_vote,
            ..EtcdSpec::default()
        };
        member_command(&s.members[0], &all, state, "tok", version, &tuning)
    }

    #[test]
    fn a_3_5_member_runs_the_3_5_binary_with_the_same_flags() {
        let v34 = first_member(ClusterState::Existing, EtcdVersion::V3_4, None);
        let v35 = first_member(ClusterState::Existing, EtcdVersion::V3_5, None);
        assert_eq!(v35[0], "/usr/local/bin/etcd-3.5");
        assert_eq!(v35[0], ETCD_35_IN_IMAGE);
        assert_eq!(v34[1..], v35[1..], "the flags do not depend on the version");
        assert!(!v34.iter().any(|a| a.starts_with("--pre-vote")));
        let on = first_member(ClusterState::Existing, EtcdVersion::V3_4, Some(true));
        assert_eq!(
            on.last().unwrap(),
            "--pre-vote=true",
            "etcd.pre_vote asks for it"
        );
    }

    #[test]
    fn the_topology_s_snapshot_settings_replace_druid_s_and_etcd_s() {
        let s = crate::plan::sample_state();
        let all = vec![(s.members[0].name.clone(), s.members[0].peer_url())];
        let tuning = EtcdSpec {
            version: "3.5".into(),
            snapshot_count: Some(500),
            snapshot_catchup_entries: Some(50),
            ..EtcdSpec::default()
        };
        let cmd = member_command(
            &s.members[0],
            &all,
            ClusterState::New,
            "tok",
            EtcdVersion::V3_5,
            &tuning,
        );
        let with = |p: &str| cmd.iter().filter(|a| a.starts_with(p)).collect::<Vec<_>>();
        assert_eq!(with("--snapshot-count="), ["--snapshot-count=500"]);
        assert_eq!(
            with("--experimental-snapshot-catchup-entries="),
            ["--experimental-snapshot-catchup-entries=50"]
        );
        // Absent, etcd keeps its own catch-up (the flag is not given).
        let plain = first_member(ClusterState::New, EtcdVersion::V3_5, None);
        assert!(!plain.iter().any(|a| a.contains("catchup")), "{plain:?}");
    }

    #[test]
    fn member_flags_match_what_etcd_druid_renders() {
        for version in EtcdVersion::ALL {
            druid_flags(&first_member(ClusterState::New, version, None));
        }
    }

    fn druid_flags(cmd: &[String]) {
        let value = |flag: &str| {
            let prefix = format!("--{flag}=");
            let found: Vec<&str> = cmd
                .iter()
                .filter_map(|a| a.strip_prefix(prefix.as_str()))
                .collect();
            assert!(found.len() <= 1, "--{flag} given twice: {cmd:?}");
            found.first().map(|v| v.to_string())
        };
        for (flag, want, source) in DRUID {
            assert_eq!(
                value(flag).as_deref(),
                Some(*want),
                "--{flag} should be {want} ({source})"
            );
        }
        for flag in NOT_RENDERED {
            assert_eq!(value(flag), None, "--{flag} is not rendered by etcd-druid");
        }
    }

    #[test]
    fn settled_means_all_healthy_one_leader() {
        let m = |name: &str, leader: bool, healthy: bool| MemberView {
            id: "1".into(),
            name: name.into(),
            seed: "seed-a".into(),
            is_learner: false,
            is_leader: leader,
            healthy,
            peer_urls: vec![],
            client_urls: vec![],
            version: None,
            raft_index: None,
            raft_term: None,
            db_size: None,
            db_size_in_use: None,
            error: None,
        };
        let v = ClusterView {
            members: vec![m("a", true, true), m("b", false, true), m("c", false, true)],
            leader: Some("1".into()),
            error: None,
        };
        assert!(v.is_settled(3));
        assert!(!v.is_settled(5));
        let mut w = v.clone();
        w.members[1].healthy = false;
        assert!(!w.is_settled(3));
        let mut w = v.clone();
        w.members[1].is_leader = true;
        assert!(!w.is_settled(3));
    }
}
