//! What etcd, the gateways and the link did during a run, sampled beside
//! the probes so that a failure comes with its surroundings. Into the run
//! directory:
//! - `etcd.ndjson`, every second per member: leader, raft term and index
//!   (maintenance status), has-leader, leader changes, proposals pending,
//!   failed, committed and applied, WAL fsync and backend commit time
//!   (sum/count), peer round trips per peer, database size (/metrics);
//! - `gateways.ndjson`, every two seconds per seed: Envoy's counters that
//!   explain a failure (per cluster: healthy members, connections, requests,
//!   5xx, retries, connect failures, no healthy upstream; per listener:
//!   connections, drains; the xDS updates accepted and rejected);
//! - `endpoints.ndjson`, the gateways' endpoint lifecycle records (every
//!   readiness probe, readiness change, termination and push), merged;
//! - `delayline.ndjson`, every two seconds: the delay line's counters
//!   (passed, dropped per link, queued, max queued, the replay's change),
//!   and where a link's loss is the kernel's, the router's random drops
//!   per rule (`kernel_dropped`, `<source>><destination>`: packets);
//! - `tcp.ndjson`, every two seconds while a link drops packets: TCP's
//!   view of etcd's peer connections inside each member and each gateway
//!   (`ss -ti`: send queue, congestion window, RTT, retransmits, delivery
//!   rate; see `tcp`);
//! - `raft.ndjson`, every second: the leader's replication progress per
//!   peer (raft's match, next and state: probe, replicate or snapshot;
//!   see `raft`);
//! - `history.ndjson`, as it happens: every version of the counter, from
//!   a watch of its key resumed from the last revision seen whenever it
//!   breaks (`probe::history`), so that a compacting etcd leaves the
//!   lost-writes and linearizable rules their history.

pub mod raft;
pub mod tcp;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::errors::Cancel;
use crate::probe::clock::now_unix_ms;
use crate::provider::Provider;
use crate::state::LabDir;

pub use crate::verdict::context::{EtcdSample, ETCD_FILE};
pub const GATEWAYS_FILE: &str = "gateways.ndjson";
pub const ENDPOINTS_FILE: &str = "endpoints.ndjson";
pub const DELAYLINE_FILE: &str = "delayline.ndjson";
pub use crate::verdict::context::CPU_FILE;

/// The metrics kept, by their Prometheus names (histograms as _sum and
/// _count; the peer round trip summed over peers and also per peer).
const KEPT: &[&str] = &[
    "etcd_server_is_leader",
    "etcd_server_has_leader",
    "etcd_server_leader_changes_seen_total",
    "etcd_server_proposals_pending",
    "etcd_server_proposals_failed_total",
    "etcd_server_proposals_committed_total",
    "etcd_server_proposals_applied_total",
    "etcd_server_slow_apply_total",
    "etcd_server_heartbeat_send_failures_total",
    "etcd_server_slow_read_indexes_total",
    "etcd_disk_wal_fsync_duration_seconds_sum",
    "etcd_disk_wal_fsync_duration_seconds_count",
    "etcd_disk_backend_commit_duration_seconds_sum",
    "etcd_disk_backend_commit_duration_seconds_count",
    "etcd_mvcc_db_total_size_in_bytes",
    "etcd_mvcc_db_total_size_in_use_in_bytes",
    "etcd_network_peer_sent_failures_total",
    // A joining member's snapshot: received (the joiner's counters) and
    // sent (the leader's), and how long each took.
    "etcd_network_snapshot_receive_success",
    "etcd_network_snapshot_receive_failures",
    "etcd_network_snapshot_receive_total_duration_seconds_sum",
    "etcd_network_snapshot_send_success",
    "etcd_network_snapshot_send_failures",
    "etcd_network_snapshot_send_total_duration_seconds_sum",
];

/// Counters kept summed and per peer: (Prometheus name, short name, label
/// prefix naming the peer). What a peer stream carried tells a slow link
/// from a sender that never sent.
const PER_PEER: &[(&str, &str, &str)] = &[
    (
        "etcd_network_peer_sent_bytes_total",
        "peer_sent_bytes",
        "To=\"",
    ),
    (
        "etcd_network_peer_received_bytes_total",
        "peer_received_bytes",
        "From=\"",
    ),
];

/// Picks the kept metrics out of Prometheus text.
pub fn parse_metrics(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some((key, val)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(v) = val.parse::<f64>() else {
            continue;
        };
        let (name, labels) = match key.split_once('{') {
            Some((n, l)) => (n, Some(l.trim_end_matches('}'))),
            None => (key, None),
        };
        if let Some(rest) = name.strip_prefix("etcd_network_peer_round_trip_time_seconds_") {
            if rest == "sum" || rest == "count" {
                *out.entry(format!("peer_rtt_{rest}")).or_insert(0.0) += v;
                if let Some(to) = labels.and_then(|l| l.strip_prefix("To=\"")) {
                    out.insert(
                        format!("peer_rtt_{rest}{{{}}}", to.trim_end_matches('"')),
                        v,
                    );
                }
            }
            continue;
        }
        if let Some((short, label)) = PER_PEER
            .iter()
            .find_map(|(n, short, label)| (*n == name).then_some((*short, *label)))
        {
            *out.entry(short.to_string()).or_insert(0.0) += v;
            if let Some(peer) = labels.and_then(|l| l.strip_prefix(label)) {
                out.insert(format!("{short}{{{}}}", peer.trim_end_matches('"')), v);
            }
            continue;
        }
        if KEPT.contains(&name) {
            *out.entry(name.to_string()).or_insert(0.0) += v;
        }
    }
    out
}

fn append(path: &Path, lines: &[serde_json::Value]) {
    if lines.is_empty() {
        return;
    }
    let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    else {
        return;
    };
    for l in lines {
        let _ = writeln!(f, "{l}");
    }
}

/// The Envoy counters and gauges kept (by the end of their names).
const ENVOY_KEPT: &[&str] = &[
    ".membership_healthy",
    ".membership_total",
    ".upstream_cx_active",
    ".upstream_cx_total",
    ".upstream_cx_connect_fail",
    ".upstream_cx_none_healthy",
    ".upstream_cx_destroy_remote_with_active_rq",
    ".upstream_cx_max_duration_reached",
    ".upstream_rq_total",
    ".upstream_rq_5xx",
    ".upstream_rq_503",
    ".upstream_rq_retry",
    ".upstream_rq_retry_success",
    ".upstream_rq_rx_reset",
    ".upstream_rq_pending_total",
    ".downstream_cx_active",
    ".downstream_cx_total",
    ".downstream_cx_drain_close",
    ".downstream_rq_5xx",
    ".no_route",
    ".update_success",
    ".update_rejected",
    ".update_failure",
    "total_listeners_draining",
    "total_filter_chains_draining",
    "listener_in_place_updated",
    "listener_modified",
];

/// The report's header line for the gateways: the Envoy each seed's
/// gateway runs, as its admin's `server_info` says (`1.37.0`, from
/// `<commit>/1.37.0/Clean/RELEASE/BoringSSL`), or why it could not be read.
pub async fn gateway_versions(provider: &dyn Provider, state: &crate::state::LabState) -> String {
    each_gateway_admin(provider, state, "server_info", Duration::from_secs(6))
        .await
        .into_iter()
        .map(|(seed, r)| {
            let v = match r {
                Ok(text) => cpmlab_core::gateway_admin::envoy_version(&text)
                    .unwrap_or_else(|| "unread (server_info has no version)".into()),
                Err(e) => format!("unread ({})", first_line(&format!("{e:#}"))),
            };
            format!("{seed} Envoy {v}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Envoy's admin `path` in every seed's gateway at once, each read bounded
/// by `limit` (the kind form's `kubectl exec` takes a while, so one after
/// the other would stretch the observer's one-second tick): each seed's
/// name with what its gateway answered.
async fn each_gateway_admin<'s>(
    provider: &dyn Provider,
    state: &'s crate::state::LabState,
    path: &str,
    limit: Duration,
) -> Vec<(&'s str, anyhow::Result<String>)> {
    futures_util::future::join_all(state.seeds.iter().map(|seed| async move {
        let r = tokio::time::timeout(
            limit,
            crate::provider::gateway_admin(provider, state, &seed.gateway.container, path),
        )
        .await
        .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer in {} s", limit.as_secs())));
        (seed.name.as_str(), r)
    }))
    .await
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// Envoy's `/stats` text (`name: value` per line), the values that explain
/// a failure, as one JSON object.
pub fn parse_envoy_stats(text: &str) -> serde_json::Map<String, serde_json::Value> {
    text.lines()
        .filter_map(|l| l.split_once(": "))
        .filter(|(name, _)| ENVOY_KEPT.iter().any(|k| name.ends_with(k)))
        .filter_map(|(name, v)| {
            v.trim()
                .parse::<f64>()
                .ok()
                .map(|n| (name.to_string(), serde_json::Value::from(n)))
        })
        .collect()
}

/// Samples until `stop`; writes into `run`.
pub async fn observe(
    provider: &dyn Provider,
    state_root: &Path,
    lab: &str,
    run: PathBuf,
    stop: Cancel,
) {
    let dir = LabDir::new(state_root, lab);
    // The counter's history, watched beside the samples.
    let history =
        crate::probe::history::follow(|| crate::probe::history::connect_now(&dir), &run, &stop);
    tokio::join!(history, sample(provider, &dir, lab, &run, &stop));
}

/// The samples, every second until `stop`.
async fn sample(provider: &dyn Provider, dir: &LabDir, lab: &str, run: &Path, stop: &Cancel) {
    let tls = crate::etcd::lab_tls(dir).ok();
    let raft_client = tls
        .as_ref()
        .and_then(|t| cpmlab_core::raft_progress::Client::new(t).ok());
    let mut tick = 0u64;
    let mut cpu = CpuSampler::default();
    while stop.check().is_ok() {
        let started = std::time::Instant::now();
        let Ok(state) = dir.load() else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let at = now_unix_ms();
        let view = match &tls {
            Some(t) => Some(crate::etcd::cluster_view(&state, t, Duration::from_millis(800)).await),
            None => None,
        };
        // The kind form's members (etcd-druid's among them, which have no
        // metrics listener: druid sets no `--listen-metrics-urls`) are read
        // from their client port through the seed's gateway, as raft.ndjson's
        // status is, not by a `kubectl get --raw .../proxy` per member per
        // second; the docker form's members from their metrics port.
        let through_gateway = !state.provider.is_docker();
        let (raft_client, st) = (&raft_client, &state);
        let scrapes = futures_util::future::join_all(state.members.iter().map(|m| async move {
            let timeout = Duration::from_millis(800);
            match (through_gateway, raft_client, st.seed(&m.seed)) {
                (true, Some(c), Some(seed)) => c.metrics(seed.gateway.ip, &m.host, timeout).await,
                _ => provider
                    .member_metrics(m, timeout)
                    .await
                    .map_err(|e| format!("{e:#}")),
            }
        }))
        .await;
        let mut lines = Vec::new();
        for (m, r) in state.members.iter().zip(scrapes) {
            let mv = view
                .as_ref()
                .and_then(|v| v.members.iter().find(|x| x.name == m.name));
            let mut s = EtcdSample {
                at_unix_ms: at,
                member: m.name.clone(),
                seed: m.seed.clone(),
                raft_term: mv.and_then(|x| x.raft_term),
                raft_index: mv.and_then(|x| x.raft_index),
                is_learner: mv.is_some_and(|x| x.is_learner),
                ..Default::default()
            };
            match r {
                Ok(text) => {
                    s.up = true;
                    s.metrics = parse_metrics(&text);
                    s.is_leader = s.metrics.get("etcd_server_is_leader") == Some(&1.0);
                    s.has_leader = s.metrics.get("etcd_server_has_leader") == Some(&1.0);
                }
                Err(e) => s.error = Some(e),
            }
            lines.push(serde_json::to_value(&s).unwrap_or_default());
        }
        append(&run.join(ETCD_FILE), &lines);
        if let (Some(v), Some(c)) = (&view, &raft_client) {
            if let Some(line) = raft::sample(&state, v, c, at).await {
                append(&run.join(raft::RAFT_FILE), &[line]);
            }
        }
        // The gateways' Envoy stats: every other second from the docker
        // form's gateways, every fourth from the kind form's Istio ingress
        // pods (each a `kubectl exec`, which costs the 2-core machine more).
        // Then, every other second for both forms, the machine's and the
        // lab containers' CPU and the delay line's counters (both forms
        // route the seeds through the lab's router).
        let docker = state.provider.is_docker();
        if tick.is_multiple_of(if docker { 2 } else { 4 }) {
            let gw: Vec<serde_json::Value> =
                each_gateway_admin(provider, &state, GATEWAY_STATS, Duration::from_secs(4))
                    .await
                    .into_iter()
                    .map(|(seed, r)| match r {
                        Ok(text) => serde_json::json!({"at_unix_ms": at, "seed": seed, "stats": parse_envoy_stats(&text)}),
                        Err(e) => serde_json::json!({"at_unix_ms": at, "seed": seed, "error": format!("{e:#}")}),
                    })
                    .collect();
            // The endpoint lifecycle records are the docker form's gateway
            // agent's (Istio's pods have none).
            let mut records = Vec::new();
            for seed in state.seeds.iter().filter(|_| docker) {
                if let Ok(text) = provider
                    .exec_ok(&seed.gateway.container, &["cat", crate::gateway::RECORDS])
                    .await
                {
                    records.extend(crate::gateway::parse_records(&text));
                }
            }
            append(&run.join(GATEWAYS_FILE), &gw);
            if !records.is_empty() {
                records.sort_by(|a, b| a.at_unix_ms.total_cmp(&b.at_unix_ms));
                let text: String = records
                    .iter()
                    .filter_map(|r| serde_json::to_string(r).ok())
                    .map(|l| l + "\n")
                    .collect();
                let _ = std::fs::write(run.join(ENDPOINTS_FILE), text);
            }
        }
        if tick.is_multiple_of(2) {
            if let Some(line) = cpu.sample(provider, lab, at, docker).await {
                append(&run.join(CPU_FILE), &[line]);
            }
            let r = provider
                .exec_ok(
                    &state.router.container,
                    &["cat", crate::link::DELAYLINE_STATS],
                )
                .await;
            if let Ok(text) = r {
                if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&text) {
                    v["sampled_unix_ms"] = at.into();
                    // The kernel's drops, where a link's loss is the
                    // kernel's: its rules' packet counters.
                    if state.links.values().any(|p| p.kernel_loss_pct() > 0.0) {
                        let chain = crate::link::router::CHAIN;
                        if let Ok(out) = provider
                            .exec_netlink_ok(
                                &state,
                                &state.router.container,
                                &["iptables", "-L", chain, "-v", "-x", "-n"],
                            )
                            .await
                        {
                            v["kernel_dropped"] = kernel_drops(&out).into();
                        }
                    }
                    append(&run.join(DELAYLINE_FILE), &[v]);
                }
            }
        }
        if tick.is_multiple_of(2) && state.links.values().any(|p| p.loss_pct > 0.0) {
            let lines = sample_tcp(provider, &state, at).await;
            append(&run.join(tcp::TCP_FILE), &lines);
        }
        tick += 1;
        let rest = Duration::from_secs(1).saturating_sub(started.elapsed());
        let t = std::time::Instant::now();
        while t.elapsed() < rest && stop.check().is_ok() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// `ss -ti` inside every member and every seed's gateway at once, each
/// bounded: one line per container, its peer connections or its error.
async fn sample_tcp(
    provider: &dyn Provider,
    state: &crate::state::LabState,
    at: f64,
) -> Vec<serde_json::Value> {
    let names = tcp::names(state);
    let ports = tcp::peer_ports(state);
    let targets: Vec<(&str, &str)> = state
        .members
        .iter()
        .map(|m| (m.container.as_str(), "member"))
        .chain(
            state
                .seeds
                .iter()
                .map(|s| (s.gateway.container.as_str(), "gateway")),
        )
        .collect();
    let (names, ports) = (&names, &ports);
    futures_util::future::join_all(targets.into_iter().map(|(container, role)| async move {
        let r = tokio::time::timeout(
            Duration::from_secs(2),
            provider.exec_netlink_ok(state, container, tcp::SS_ARGV),
        )
        .await
        .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer in 2 s")));
        match r {
            Ok(text) => serde_json::json!({
                "at_unix_ms": at, "container": container, "role": role,
                "conns": tcp::peer_conns(&text, ports, names),
            }),
            Err(e) => serde_json::json!({
                "at_unix_ms": at, "container": container, "role": role, "error": format!("{e:#}"),
            }),
        }
    }))
    .await
}

/// The gateway's Envoy stats the observer samples: those in use (the
/// same stat names on both forms: the docker form's clusters are named as
/// istiod names them).
const GATEWAY_STATS: &str = "stats?usedonly";

#[cfg(test)]
fn gateway_stats_argv(docker: bool) -> Vec<String> {
    cpmlab_core::gateway_admin::argv(docker, GATEWAY_STATS)
}

/// CPU use between two samples: the machine's (percent of all cores) and,
/// where the provider counts them (the docker form's containers; not the
/// kind form's pods), each lab container's (percent of one core).
#[derive(Default)]
struct CpuSampler {
    machine: Option<(u64, u64)>,
    containers: BTreeMap<String, (u64, std::time::Instant)>,
}

impl CpuSampler {
    async fn sample(
        &mut self,
        provider: &dyn Provider,
        lab: &str,
        at: f64,
        per_container: bool,
    ) -> Option<serde_json::Value> {
        let now = std::time::Instant::now();
        let machine = crate::cpu::machine_ticks();
        let busy = match (self.machine, machine) {
            (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
                Some(100.0 * (b1 - b0) as f64 / (t1 - t0) as f64)
            }
            _ => None,
        };
        self.machine = machine;
        let mut per = BTreeMap::new();
        let workloads = if per_container {
            provider.workloads(Some(lab)).await.unwrap_or_default()
        } else {
            Vec::new()
        };
        for w in workloads {
            let (name, Some(ns)) = (w.name, w.cpu_ns) else {
                continue;
            };
            if let Some((ns0, t0)) = self.containers.get(&name) {
                let dt = now.duration_since(*t0).as_secs_f64();
                if dt > 0.0 && ns >= *ns0 {
                    let pct = 100.0 * (ns - ns0) as f64 / 1e9 / dt;
                    per.insert(name.clone(), (pct * 10.0).round() / 10.0);
                }
            }
            self.containers.insert(name, (ns, now));
        }
        let busy = busy?;
        Some(serde_json::json!({
            "at_unix_ms": at,
            "machine_busy_pct": (busy * 10.0).round() / 10.0,
            "cores": crate::cpu::cores(),
            "containers": per,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_stats_are_read_with_each_forms_own_client_and_bounded() {
        let docker = gateway_stats_argv(true);
        assert_eq!(&docker[..3], ["timeout", "2", "wget"]);
        assert!(docker.last().unwrap().ends_with(":15000/stats?usedonly"));
        // Istio's pilot-agent talks to the proxy's admin port (15000) itself.
        let kind = gateway_stats_argv(false);
        assert_eq!(
            kind,
            [
                "timeout",
                "2",
                "pilot-agent",
                "request",
                "GET",
                "stats?usedonly"
            ]
        );
    }

    #[test]
    fn metrics_are_picked_and_peers_summed() {
        let m = parse_metrics(
            "# HELP x\netcd_server_is_leader 1\netcd_server_has_leader 1\netcd_server_leader_changes_seen_total 2\n\
             etcd_network_peer_round_trip_time_seconds_sum{To=\"a1\"} 0.25\n\
             etcd_network_peer_round_trip_time_seconds_sum{To=\"b2\"} 0.5\n\
             etcd_network_peer_round_trip_time_seconds_count{To=\"a1\"} 5\n\
             etcd_network_peer_round_trip_time_seconds_bucket{To=\"a1\",le=\"0.1\"} 5\n\
             etcd_network_peer_sent_bytes_total{To=\"a1\"} 1000\n\
             etcd_network_peer_sent_bytes_total{To=\"b2\"} 24\n\
             etcd_network_peer_received_bytes_total{From=\"b2\"} 7\n\
             go_goroutines 50\n",
        );
        assert_eq!(m["etcd_server_is_leader"], 1.0);
        assert_eq!(m["etcd_server_leader_changes_seen_total"], 2.0);
        assert_eq!(m["peer_rtt_sum"], 0.75);
        assert_eq!(m["peer_rtt_sum{a1}"], 0.25);
        assert_eq!(m["peer_rtt_count"], 5.0);
        assert_eq!(m["peer_sent_bytes"], 1024.0);
        assert_eq!(m["peer_sent_bytes{b2}"], 24.0);
        assert_eq!(m["peer_received_bytes{b2}"], 7.0);
        assert!(!m.contains_key("go_goroutines"));
    }

    #[test]
    fn envoy_stats_keep_what_explains_a_failure() {
        let m = parse_envoy_stats(
            "cluster.outbound|443||kube-apiserver.x.svc.cluster.local.membership_healthy: 2\n\
             cluster.outbound|443||kube-apiserver.x.svc.cluster.local.upstream_cx_none_healthy: 7\n\
             cluster.outbound|443||kube-apiserver.x.svc.cluster.local.lb_healthy_panic: 0\n\
             listener_manager.lds.update_rejected: 0\n\
             server.uptime: 12\n",
        );
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!(
            m["cluster.outbound|443||kube-apiserver.x.svc.cluster.local.upstream_cx_none_healthy"],
            7.0
        );
        assert_eq!(m["listener_manager.lds.update_rejected"], 0.0);
    }
}

/// The kernel's random drops from `iptables -L <chain> -v -x -n`: per rule
/// with a `statistic` match, `<source>><destination>` and its packet count.
fn kernel_drops(listing: &str) -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    for line in listing.lines().filter(|l| l.contains("statistic")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        // pkts bytes target prot opt in out source destination ...
        if let (Some(pkts), Some(src), Some(dst)) = (
            f.first().and_then(|n| n.parse::<u64>().ok()),
            f.get(7),
            f.get(8),
        ) {
            out.insert(format!("{src}>{dst}"), pkts.into());
        }
    }
    out
}

#[cfg(test)]
mod kernel_drop_tests {
    #[test]
    fn the_kernels_drops_are_read_per_rule() {
        let listing = "Chain CPMLAB-LINK (1 references)\n    pkts      bytes target     prot opt in     out     source               destination\n      12     1640 DROP       all  --  dl0    *       10.213.0.0/24        10.213.1.0/24        statistic mode random probability 0.01000000009\n       0        0 DROP       all  --  *      *       10.213.2.0/24        10.213.1.0/24\n";
        let d = super::kernel_drops(listing);
        assert_eq!(d.len(), 1);
        assert_eq!(d["10.213.0.0/24>10.213.1.0/24"], 12);
    }
}
