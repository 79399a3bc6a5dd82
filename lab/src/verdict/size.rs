//! How big the shoot's etcd was at each migration step, and what each
//! joining member's snapshot cost: from the etcd samples a run keeps
//! (`etcd.ndjson`: dbSize and dbSizeInUse, the snapshot counters) and the
//! migration's phases. A learner joining across the WAN first receives the
//! whole database; this is where that shows.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::context::EtcdSample;
use crate::probe::record::LabEvent;

const DB: &str = "etcd_mvcc_db_total_size_in_bytes";
const DB_IN_USE: &str = "etcd_mvcc_db_total_size_in_use_in_bytes";
const RECEIVED: &str = "etcd_network_snapshot_receive_success";
const RECEIVE_S: &str = "etcd_network_snapshot_receive_total_duration_seconds_sum";
const SENT: &str = "etcd_network_snapshot_send_success";
const SEND_S: &str = "etcd_network_snapshot_send_total_duration_seconds_sum";

/// The database at the end of one step (the largest member's).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSize {
    pub step: String,
    pub db_bytes: u64,
    pub in_use_bytes: u64,
}

/// One member's snapshots over the run: received (a joiner) and sent (a
/// leader), with the time etcd spent on them and, for a joiner, the bytes
/// its peer streams carried in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshots {
    pub member: String,
    pub received: u64,
    pub receive_s: f64,
    pub sent: u64,
    pub send_s: f64,
    pub peer_received_bytes: u64,
}

/// The database at the end of each migration phase.
pub fn by_step(events: &[LabEvent], samples: &[EtcdSample]) -> Vec<StepSize> {
    events
        .iter()
        .filter(|e| e.kind == "phase")
        .filter_map(|e| {
            let end = e.end_unix_ms?;
            // The latest sample of each member up to the phase's end.
            let mut last: BTreeMap<&str, &EtcdSample> = BTreeMap::new();
            for s in samples
                .iter()
                .filter(|s| s.up && s.at_unix_ms <= end + 1_000.0)
            {
                last.insert(&s.member, s);
            }
            let get = |k: &str| {
                last.values()
                    .filter_map(|s| s.metrics.get(k))
                    .fold(0.0f64, |a, b| a.max(*b)) as u64
            };
            let db_bytes = get(DB);
            (db_bytes > 0).then(|| StepSize {
                step: e.name.clone(),
                db_bytes,
                in_use_bytes: get(DB_IN_USE),
            })
        })
        .collect()
}

/// Every member, from its last sample: the snapshots it received or sent,
/// and what its peer streams carried in (a joiner takes the database in as
/// a snapshot, or as the log while the leader still holds it).
pub fn snapshots(samples: &[EtcdSample]) -> Vec<Snapshots> {
    let mut last: BTreeMap<&str, &EtcdSample> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.up) {
        last.insert(&s.member, s);
    }
    last.into_iter()
        .map(|(member, s)| {
            let m = |k: &str| s.metrics.get(k).copied().unwrap_or(0.0);
            let (received, sent) = (m(RECEIVED) as u64, m(SENT) as u64);
            Snapshots {
                member: member.to_string(),
                received,
                receive_s: m(RECEIVE_S),
                sent,
                send_s: m(SEND_S),
                peer_received_bytes: m("peer_received_bytes") as u64,
            }
        })
        .collect()
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}

/// The report's section (empty when the run sampled no database size).
pub fn section(events: &[LabEvent], samples: &[EtcdSample]) -> String {
    let steps = by_step(events, samples);
    let snaps = snapshots(samples);
    if steps.is_empty() && snaps.is_empty() {
        return String::new();
    }
    let mut h = String::from("<h2>etcd's database and snapshots</h2>\n");
    if !steps.is_empty() {
        h.push_str("<table><tr><th class=\"l\">at the end of</th><th>dbSize</th><th>dbSizeInUse</th></tr>\n");
        for s in &steps {
            let _ = writeln!(
                h,
                "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td></tr>",
                super::escape_xml(&s.step),
                mib(s.db_bytes),
                mib(s.in_use_bytes)
            );
        }
        h.push_str("</table>\n");
    }
    if !snaps.is_empty() {
        h.push_str("<p>What each member took in: a member joining far behind the leader receives the whole database first, as a snapshot, or as the raft log while the leader still holds it (fewer entries than etcd's snapshot count):</p>\n<table><tr><th class=\"l\">member</th><th>received</th><th>receiving took</th><th>sent</th><th>sending took</th><th>peer bytes in</th></tr>\n");
        for s in &snaps {
            let _ = writeln!(
                h,
                "<tr><td class=\"l\">{}</td><td>{}</td><td>{:.1} s</td><td>{}</td><td>{:.1} s</td><td>{}</td></tr>",
                super::escape_xml(&s.member),
                s.received,
                s.receive_s,
                s.sent,
                s.send_s,
                mib(s.peer_received_bytes)
            );
        }
        h.push_str("</table>\n");
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: f64, member: &str, m: &[(&str, f64)]) -> EtcdSample {
        EtcdSample {
            at_unix_ms: at,
            member: member.into(),
            up: true,
            metrics: m.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..Default::default()
        }
    }

    fn phase(name: &str, a: f64, b: f64) -> LabEvent {
        LabEvent {
            at_unix_ms: a,
            end_unix_ms: Some(b),
            kind: "phase".into(),
            name: name.into(),
            detail: String::new(),
        }
    }

    #[test]
    fn each_step_gets_the_largest_member_s_database_at_its_end() {
        let samples = vec![
            sample(1_000.0, "a", &[(DB, 100.0), (DB_IN_USE, 90.0)]),
            sample(1_000.0, "b", &[(DB, 120.0), (DB_IN_USE, 80.0)]),
            sample(9_000.0, "a", &[(DB, 500.0), (DB_IN_USE, 450.0)]),
        ];
        let s = by_step(
            &[
                phase("Prepare", 0.0, 2_000.0),
                phase("Join", 2_000.0, 10_000.0),
            ],
            &samples,
        );
        assert_eq!(
            s,
            [
                StepSize {
                    step: "Prepare".into(),
                    db_bytes: 120,
                    in_use_bytes: 90
                },
                StepSize {
                    step: "Join".into(),
                    db_bytes: 500,
                    in_use_bytes: 450
                },
            ]
        );
    }

    #[test]
    fn joiners_and_leaders_snapshots_are_listed() {
        let samples = vec![
            sample(1.0, "seed-a-etcd-0", &[(SENT, 1.0), (SEND_S, 12.5)]),
            sample(
                1.0,
                "seed-b-etcd-0",
                &[
                    (RECEIVED, 1.0),
                    (RECEIVE_S, 12.0),
                    ("peer_received_bytes", 3e8),
                ],
            ),
            sample(1.0, "seed-a-etcd-1", &[]),
        ];
        let s = snapshots(&samples);
        assert_eq!(s.len(), 3);
        assert_eq!(s[2].member, "seed-b-etcd-0");
        assert_eq!((s[2].received, s[2].peer_received_bytes), (1, 300_000_000));
        let html = section(&[], &samples);
        assert!(
            html.contains("seed-b-etcd-0") && html.contains("12.0 s"),
            "{html}"
        );
        assert_eq!(section(&[], &[]), "");
    }
}
