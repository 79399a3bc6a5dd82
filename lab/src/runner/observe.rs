//! What etcd, the gateways and the link did during a run, sampled beside
//! the probes so that a failure comes with its surroundings. Into the run
//! directory:
//! - `etcd.ndjson`, every second per member: leader, raft term and index
//!   (maintenance status), has-leader, leader changes, proposals pending,
//!   failed, committed and applied, WAL fsync and backend commit time
//!   (sum/count), peer round trips per peer, database size (/metrics);
//! - `gateways.ndjson`, every two seconds per seed: HAProxy's counters per
//!   frontend and server (sessions, errors, check status);
//! - `delayline.ndjson`, every two seconds: the delay line's counters
//!   (passed, dropped per link, queued, max queued, the replay's change).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::errors::Cancel;
use crate::probe::run::now_unix_ms;
use crate::provider::Provider;
use crate::state::LabDir;

pub use crate::verdict::context::{EtcdSample, ETCD_FILE};
pub const GATEWAYS_FILE: &str = "gateways.ndjson";
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

/// HAProxy's CSV, the columns that explain a failure.
pub fn parse_haproxy_csv(csv: &str) -> Vec<serde_json::Value> {
    let mut lines = csv.lines();
    let Some(head) = lines.next() else {
        return vec![];
    };
    let cols: Vec<&str> = head.trim_start_matches("# ").split(',').collect();
    let keep = [
        "pxname",
        "svname",
        "status",
        "scur",
        "smax",
        "stot",
        "ereq",
        "econ",
        "eresp",
        "wretr",
        "wredis",
        "chkfail",
        "downtime",
        "check_status",
        "lastchg",
    ];
    lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            let mut m = serde_json::Map::new();
            for (c, v) in cols.iter().zip(&cells) {
                if keep.contains(c) && !v.is_empty() {
                    m.insert(
                        c.to_string(),
                        v.parse::<f64>()
                            .map(serde_json::Value::from)
                            .unwrap_or_else(|_| serde_json::Value::from(*v)),
                    );
                }
            }
            serde_json::Value::Object(m)
        })
        .filter(|m| m.get("pxname").and_then(|p| p.as_str()) != Some("stats"))
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
    let tls = crate::etcd::lab_tls(&dir).ok();
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
        let scrapes = futures_util::future::join_all(state.members.iter().map(|m| async move {
            provider
                .member_metrics(m, Duration::from_millis(800))
                .await
                .map_err(|e| format!("{e:#}"))
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
        if tick.is_multiple_of(2) {
            let mut gw = Vec::new();
            for seed in &state.seeds {
                let url = format!("http://127.0.0.1:{}/stats;csv", crate::gateway::STATS_PORT);
                let r = provider
                    .exec_ok(
                        &seed.gateway.container,
                        &["wget", "-q", "-T", "1", "-O", "-", &url],
                    )
                    .await;
                gw.push(match r {
                    Ok(csv) => serde_json::json!({"at_unix_ms": at, "seed": seed.name, "rows": parse_haproxy_csv(&csv)}),
                    Err(e) => serde_json::json!({"at_unix_ms": at, "seed": seed.name, "error": format!("{e:#}")}),
                });
            }
            append(&run.join(GATEWAYS_FILE), &gw);
            if let Some(line) = cpu.sample(provider, lab, at).await {
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
                    append(&run.join(DELAYLINE_FILE), &[v]);
                }
            }
        }
        tick += 1;
        let rest = Duration::from_secs(1).saturating_sub(started.elapsed());
        let t = std::time::Instant::now();
        while t.elapsed() < rest && stop.check().is_ok() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// CPU use between two samples: the machine's (percent of all cores) and
/// each lab container's (percent of one core).
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
        for w in provider.workloads(Some(lab)).await.ok()? {
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
    fn haproxy_rows_keep_what_explains_a_failure() {
        let rows = parse_haproxy_csv(
            "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status\n\
             api,seed-a-api-0,0,0,3,5,,40,1,1,,,,0,1,0,0,UP\n\
             stats,FRONTEND,,,1,1,,3,1,1,,,,,,,,OPEN\n",
        );
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["svname"], "seed-a-api-0");
        assert_eq!(rows[0]["status"], "UP");
        assert_eq!(rows[0]["eresp"], 1.0);
    }
}
