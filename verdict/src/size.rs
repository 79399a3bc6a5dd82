//! How big the shoot's etcd was at each migration step, and what each
//! joining member's snapshot cost: from the etcd samples a run keeps
//! (`etcd.ndjson`: dbSize and dbSizeInUse, the snapshot counters) and the
//! migration's phases. A learner joining across the WAN first receives the
//! whole database; this is where that shows, with lanes on the report's
//! time axis: when each joiner received its snapshot, and meanwhile the
//! leader's round trip to its slowest peer (etcd's prober over the peer
//! connections: what its heartbeats met) and its proposals pending.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::context::EtcdSample;
use crate::record::LabEvent;

const DB: &str = "etcd_mvcc_db_total_size_in_bytes";
const DB_IN_USE: &str = "etcd_mvcc_db_total_size_in_use_in_bytes";
const RECEIVED: &str = "etcd_network_snapshot_receive_success";
const RECEIVE_S: &str = "etcd_network_snapshot_receive_total_duration_seconds_sum";
const SENT: &str = "etcd_network_snapshot_send_success";
const SEND_S: &str = "etcd_network_snapshot_send_total_duration_seconds_sum";
const RTT_SUM: &str = "peer_rtt_sum";
const RTT_COUNT: &str = "peer_rtt_count";
const PENDING: &str = "etcd_server_proposals_pending";

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

/// When one joiner received one snapshot: it ended by the sample where the
/// joiner's success counter rose, and began the time etcd spent on it
/// before that.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SnapshotWindow {
    pub member: String,
    pub start_unix_ms: f64,
    pub end_unix_ms: f64,
}

/// Every snapshot a member received during the run, in time order.
pub fn windows(samples: &[EtcdSample]) -> Vec<SnapshotWindow> {
    let mut prev: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    let mut out = Vec::new();
    for s in samples.iter().filter(|s| s.up) {
        let m = |k: &str| s.metrics.get(k).copied().unwrap_or(0.0);
        let now = (m(RECEIVED), m(RECEIVE_S));
        if let Some((n, secs)) = prev.insert(&s.member, now) {
            if now.0 > n {
                let took = (now.1 - secs).max(0.0);
                out.push(SnapshotWindow {
                    member: s.member.clone(),
                    start_unix_ms: s.at_unix_ms - took * 1e3,
                    end_unix_ms: s.at_unix_ms,
                });
            }
        }
    }
    out.sort_by(|a, b| a.start_unix_ms.total_cmp(&b.start_unix_ms));
    out
}

/// The leader's side, sample by sample: (time, its slowest peer's mean
/// round trip over the last interval in ms, proposals pending). A round
/// trip is only given between two samples of the same leader in which etcd
/// recorded a peer's smoothed round trip (every 30 s per peer). The slowest
/// peer, not the mean over all: the near peers' few milliseconds would hide
/// the far ones'.
pub fn leader_series(samples: &[EtcdSample]) -> Vec<(f64, Option<f64>, f64)> {
    let mut prev: BTreeMap<&str, &EtcdSample> = BTreeMap::new();
    let mut out = Vec::new();
    for s in samples.iter().filter(|s| s.up) {
        let before = prev.insert(&s.member, s);
        if !s.is_leader {
            continue;
        }
        let m = |x: &EtcdSample, k: &str| x.metrics.get(k).copied().unwrap_or(0.0);
        let rtt = before.filter(|b| b.is_leader).and_then(|b| {
            s.metrics
                .keys()
                .filter_map(|k| k.strip_prefix(RTT_COUNT).filter(|p| p.starts_with('{')))
                .filter_map(|peer| {
                    let (sum, count) = (format!("{RTT_SUM}{peer}"), format!("{RTT_COUNT}{peer}"));
                    let n = m(s, &count) - m(b, &count);
                    (n > 0.0).then(|| (m(s, &sum) - m(b, &sum)) / n * 1e3)
                })
                .reduce(f64::max)
        });
        out.push((s.at_unix_ms, rtt, m(s, PENDING)));
    }
    out
}

/// The lanes: snapshots received per joiner, then the leader's round trip
/// and proposals pending as lines, on the report's time axis.
fn lanes(
    wins: &[SnapshotWindow],
    series: &[(f64, Option<f64>, f64)],
    t0: f64,
    x: &dyn Fn(f64) -> f64,
    svg_w: usize,
) -> String {
    if wins.is_empty() {
        return String::new();
    }
    let mut joiners: Vec<&str> = wins.iter().map(|w| w.member.as_str()).collect();
    joiners.dedup();
    let lane_h = 22.0;
    let line_h = 40.0;
    let height = lane_h * joiners.len() as f64 + 2.0 * (line_h + 8.0) + 4.0;
    let mut h = format!(
        "<svg width=\"{svg_w}\" height=\"{height:.0}\" xmlns=\"http://www.w3.org/2000/svg\">"
    );
    let rel = |t: f64| format!("{:+.1} s", (t - t0) / 1e3);
    for (i, j) in joiners.iter().enumerate() {
        let y = 4.0 + lane_h * i as f64;
        let _ = write!(
            h,
            "<text x=\"4\" y=\"{:.0}\" font-size=\"11\">{} snapshot</text>",
            y + 12.0,
            super::escape_xml(j)
        );
        for w in wins.iter().filter(|w| w.member == *j) {
            let (a, b) = (x(w.start_unix_ms), x(w.end_unix_ms));
            let _ = write!(
                h,
                "<rect x=\"{a:.1}\" y=\"{y:.0}\" width=\"{:.1}\" height=\"16\" fill=\"#69c\"><title>{} received a snapshot {} … {} ({:.1} s)</title></rect>",
                (b - a).max(1.0),
                super::escape_xml(j),
                rel(w.start_unix_ms),
                rel(w.end_unix_ms),
                (w.end_unix_ms - w.start_unix_ms) / 1e3
            );
        }
    }
    let mut y0 = 4.0 + lane_h * joiners.len() as f64 + 4.0;
    let rtts: Vec<(f64, f64)> = series
        .iter()
        .filter_map(|(t, r, _)| r.map(|r| (*t, r)))
        .collect();
    let pending: Vec<(f64, f64)> = series.iter().map(|(t, _, p)| (*t, *p)).collect();
    for (label, unit, pts) in [
        ("leader→slowest peer round trip", "ms", &rtts),
        ("leader's proposals pending", "", &pending),
    ] {
        let max = pts.iter().map(|p| p.1).fold(0.0f64, f64::max);
        let _ = write!(
            h,
            "<text x=\"4\" y=\"{:.0}\" font-size=\"11\">{label} (max {max:.1}{}{unit})</text>",
            y0 + 11.0,
            if unit.is_empty() { "" } else { " " }
        );
        if max > 0.0 {
            let pts: Vec<String> = pts
                .iter()
                .map(|(t, v)| {
                    format!(
                        "{:.1},{:.1}",
                        x(*t),
                        y0 + line_h - v / max * (line_h - 14.0)
                    )
                })
                .collect();
            let _ = write!(
                h,
                "<polyline fill=\"none\" stroke=\"#c60\" stroke-width=\"1.5\" points=\"{}\"/>",
                pts.join(" ")
            );
        }
        y0 += line_h + 8.0;
    }
    h.push_str("</svg>\n");
    h
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}

/// The report's section (empty when the run sampled no database size), its
/// lanes on the report's time axis (`x(t)`, `t0` the axis' zero).
pub fn section(
    events: &[LabEvent],
    samples: &[EtcdSample],
    t0: f64,
    x: &dyn Fn(f64) -> f64,
    svg_w: usize,
) -> String {
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
    let wins = windows(samples);
    if !wins.is_empty() {
        h.push_str("<p>When each joiner received its snapshot (its end is the sample where etcd counted it, its start the time etcd spent on it before), and meanwhile the leader's round trip to its slowest peer (etcd probes each peer every few seconds over the peer connections and records the smoothed round trip every 30 s: what its heartbeats met) and its proposals pending, sampled every second:</p>\n");
        let series = leader_series(samples);
        h.push_str(&lanes(&wins, &series, t0, x, svg_w));
        h.push_str("<table><tr><th class=\"l\">snapshot to</th><th>from</th><th>to</th><th>took</th><th>leader's slowest peer round trip, highest recorded</th><th>leader's proposals pending, highest</th></tr>\n");
        for w in &wins {
            let within: Vec<&(f64, Option<f64>, f64)> = series
                .iter()
                .filter(|(t, _, _)| *t >= w.start_unix_ms && *t <= w.end_unix_ms + 1e3)
                .collect();
            let rtt = within.iter().filter_map(|x| x.1).reduce(f64::max);
            let pending = within.iter().map(|x| x.2).reduce(f64::max);
            let _ = writeln!(
                h,
                "<tr><td class=\"l\">{}</td><td>{:+.1} s</td><td>{:+.1} s</td><td>{:.1} s</td><td>{}</td><td>{}</td></tr>",
                super::escape_xml(&w.member),
                (w.start_unix_ms - t0) / 1e3,
                (w.end_unix_ms - t0) / 1e3,
                (w.end_unix_ms - w.start_unix_ms) / 1e3,
                rtt.map_or("none recorded".into(), |r| format!("{r:.0} ms")),
                pending.map_or("-".into(), |p| format!("{p:.0}"))
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
            status: None,
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

    /// A leader's sample: round trips (sum, count) to a near peer `a1` and
    /// a far one `b1`, and proposals pending.
    fn leader_sample(at: f64, near: (f64, f64), far: (f64, f64), pending: f64) -> EtcdSample {
        EtcdSample {
            is_leader: true,
            ..sample(
                at,
                "seed-a-etcd-0",
                &[
                    (RTT_SUM, near.0 + far.0),
                    (RTT_COUNT, near.1 + far.1),
                    ("peer_rtt_sum{a1}", near.0),
                    ("peer_rtt_count{a1}", near.1),
                    ("peer_rtt_sum{b1}", far.0),
                    ("peer_rtt_count{b1}", far.1),
                    (PENDING, pending),
                ],
            )
        }
    }

    #[test]
    fn a_snapshot_window_ends_where_the_counter_rose_and_spans_etcd_s_time() {
        let samples = vec![
            sample(1_000.0, "seed-b-etcd-0", &[]),
            sample(2_000.0, "seed-b-etcd-0", &[]),
            sample(
                12_000.0,
                "seed-b-etcd-0",
                &[(RECEIVED, 1.0), (RECEIVE_S, 8.5)],
            ),
            sample(
                13_000.0,
                "seed-b-etcd-0",
                &[(RECEIVED, 1.0), (RECEIVE_S, 8.5)],
            ),
            // A member first seen with the counter up has no window: its
            // snapshot came before the run looked.
            sample(
                13_000.0,
                "seed-b-etcd-1",
                &[(RECEIVED, 1.0), (RECEIVE_S, 3.0)],
            ),
        ];
        assert_eq!(
            windows(&samples),
            [SnapshotWindow {
                member: "seed-b-etcd-0".into(),
                start_unix_ms: 3_500.0,
                end_unix_ms: 12_000.0,
            }]
        );
    }

    #[test]
    fn the_leader_s_round_trip_is_the_mean_over_each_interval() {
        let samples = vec![
            leader_sample(1_000.0, (0.01, 2.0), (0.1, 2.0), 0.0),
            // The near peer 5 ms, the far one 300 ms: the far one shows.
            leader_sample(2_000.0, (0.02, 4.0), (0.4, 3.0), 3.0),
            // No new round trip in this interval.
            leader_sample(3_000.0, (0.02, 4.0), (0.4, 3.0), 1.0),
        ];
        let s = leader_series(&samples);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].1, None);
        assert!((s[1].1.unwrap() - 300.0).abs() < 1e-9, "{s:?}");
        assert_eq!((s[1].2, s[2].1, s[2].2), (3.0, None, 1.0));
    }

    #[test]
    fn the_section_draws_a_lane_per_joiner_and_the_leader_s_lines() {
        let mut samples = vec![
            leader_sample(1_000.0, (0.0, 0.0), (0.0, 0.0), 0.0),
            sample(1_000.0, "seed-b-etcd-0", &[(DB, 1e8)]),
        ];
        samples.push(leader_sample(5_000.0, (0.0, 0.0), (0.2, 4.0), 2.0));
        samples.push(sample(
            5_000.0,
            "seed-b-etcd-0",
            &[(DB, 1e8), (RECEIVED, 1.0), (RECEIVE_S, 3.0)],
        ));
        let h = section(&[], &samples, 0.0, &|t| t / 100.0, 600);
        assert!(h.contains("seed-b-etcd-0 snapshot</text>"), "{h}");
        assert!(h.contains("(3.0 s)</title>"), "{h}");
        assert!(
            h.contains("leader→slowest peer round trip (max 50.0 ms)"),
            "{h}"
        );
        assert!(h.contains("<polyline"), "{h}");
        assert!(
            h.contains("<td>+2.0 s</td><td>+5.0 s</td><td>3.0 s</td><td>50 ms</td><td>2</td>"),
            "{h}"
        );
        // No snapshot, no lanes.
        let h = section(&[], &samples[..2], 0.0, &|t| t, 600);
        assert!(!h.contains("<svg"), "{h}");
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
        let html = section(&[], &samples, 0.0, &|t| t, 600);
        assert!(
            html.contains("seed-b-etcd-0") && html.contains("12.0 s"),
            "{html}"
        );
        assert_eq!(section(&[], &[], 0.0, &|t| t, 600), "");
    }
}
