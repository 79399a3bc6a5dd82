//! Why requests failed, one line per mechanism: the failed requests
//! grouped by the clients they came from (a new connection per request, or
//! one the client keeps), the seed that answered and what it answered
//! (`503 no healthy upstream`, `HTTP 500`, a timeout, ...); each group with
//! its count, the lanes that saw it, its window from the first failure to
//! the end of the last, and the migration steps that window lies in. Not a
//! rule: the explanation the reader of a failed (or expected-to-fail)
//! availability rule needs first.
//!
//! A watch can fail a client without a failed request: its stream stays
//! open and no event comes while writes are acknowledged elsewhere (a
//! watch kept on an API server that lost its etcd). Each such silence on a
//! watch or informer lane, longer than [`SILENT_MS`] and with writes
//! acknowledged inside it, is a mechanism of its own ([`silent_watches`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::availability::Classify;
use crate::record::{ConnMode, LabEvent, Record};
use crate::{lane_key, record_end};

/// One mechanism's failures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mechanism {
    /// `new connections`, `kept connections (HTTP/2)` or `kept connections
    /// (HTTP/1.1 keep-alive)`.
    pub clients: String,
    /// The seed that answered, when the answer said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// What the clients got.
    pub cause: String,
    /// The most frequent error text, as an example.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
    pub failed: u64,
    /// `probe/mode` of each lane that saw it.
    pub lanes: Vec<String>,
    pub first_unix_ms: f64,
    pub last_end_unix_ms: f64,
    /// The step the first failure started in, and the one the last ended in
    /// (`before the migration`, `after the migration` outside the steps).
    pub from_step: String,
    pub to_step: String,
    /// The sentence the report and `cpmlab run` print.
    pub line: String,
    /// The windows in which the lab's machine was saturated meanwhile, in
    /// words (see `saturation`); none: it was not, or not sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated: Option<String>,
}

/// The words a mechanism line gets when the lab's machine was saturated
/// in its window.
pub const SATURATED: &str = "the lab's machine was saturated";

/// Marks each mechanism whose window overlaps one in which the lab's
/// machine was saturated: its line says so, with the window and the
/// figure.
pub fn mark_saturated(
    ms: &mut [Mechanism],
    sat: &[crate::saturation::Saturated],
    bound: f64,
    t0: f64,
) {
    for m in ms {
        let during: Vec<String> = sat
            .iter()
            .filter(|s| s.overlaps(m.first_unix_ms, m.last_end_unix_ms))
            .map(|s| s.words(t0, bound))
            .collect();
        if during.is_empty() {
            continue;
        }
        let words = format!("{SATURATED} {}", during.join(" and "));
        m.line = format!(
            "{}; {words}: these failures say as much about the lab's machine as about the migration",
            m.line
        );
        m.saturated = Some(words);
    }
}

/// The mechanisms of `failed`, the largest first; times in `line` relative
/// to `t0`.
pub fn explain(
    failed: &[&Record],
    events: &[LabEvent],
    classify: &Classify,
    t0: f64,
) -> Vec<Mechanism> {
    type Key = (&'static str, Option<String>, String);
    let mut groups: BTreeMap<Key, Vec<&Record>> = BTreeMap::new();
    for r in failed {
        let key = (clients(r.mode), r.seed.clone(), cause(r, classify));
        groups.entry(key).or_default().push(r);
    }
    let phases = phases_of(events);
    let mut out: Vec<Mechanism> = groups
        .into_iter()
        .map(|((clients, seed, cause), rs)| {
            let first = rs
                .iter()
                .map(|r| r.start_unix_ms)
                .fold(f64::INFINITY, f64::min);
            let last = rs.iter().map(|r| record_end(r)).fold(first, f64::max);
            let mut lanes: Vec<String> = rs.iter().map(|r| lane_key(r.probe, r.mode)).collect();
            lanes.sort();
            lanes.dedup();
            let mut texts: BTreeMap<&str, usize> = BTreeMap::new();
            for r in &rs {
                if let Some(e) = r.error.as_deref().filter(|e| !e.is_empty()) {
                    *texts.entry(e).or_default() += 1;
                }
            }
            let example = texts
                .into_iter()
                .max_by_key(|(_, n)| *n)
                .map(|(e, _)| short(e, 120));
            let from_step = step_at(&phases, first);
            let to_step = step_at(&phases, last);
            let mut m = Mechanism {
                clients: clients.to_string(),
                seed,
                cause,
                example,
                failed: rs.len() as u64,
                lanes,
                first_unix_ms: first,
                last_end_unix_ms: last,
                from_step,
                to_step,
                line: String::new(),
                saturated: None,
            };
            m.line = sentence(&m, t0);
            m
        })
        .collect();
    out.sort_by(|a, b| {
        b.failed
            .cmp(&a.failed)
            .then(a.first_unix_ms.total_cmp(&b.first_unix_ms))
    });
    out
}

/// A watch lane without an event for longer than this while writes were
/// acknowledged is reported as silent (the writer's rate is 10/s: a
/// healthy watch's events are under a second apart).
pub const SILENT_MS: f64 = 5_000.0;

/// A watch or informer lane's silence: no event delivered from `from` to
/// `to` while `writes` writes were acknowledged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Silence {
    /// `probe/mode`.
    pub lane: String,
    /// The seed that sent the last event before the silence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    pub from_unix_ms: f64,
    pub to_unix_ms: f64,
    pub writes: u64,
    pub from_step: String,
    pub to_step: String,
    pub line: String,
}

impl Silence {
    /// From the last event before the silence to the first after.
    pub fn interval(&self) -> crate::Interval {
        crate::Interval {
            start_unix_ms: self.from_unix_ms,
            end_unix_ms: self.to_unix_ms,
        }
    }
}

/// The silences of every watch and informer lane, longest first.
pub fn silent_watches(all: &[&Record], events: &[LabEvent], t0: f64) -> Vec<Silence> {
    use crate::record::{informer_event, ProbeKind};
    let phases = phases_of(events);
    let mut acked: Vec<f64> = all
        .iter()
        .filter(|r| {
            r.probe == ProbeKind::Write
                && r.event.is_none()
                && r.outcome == crate::record::Outcome::Ok
        })
        .map(|r| record_end(r))
        .collect();
    acked.sort_by(f64::total_cmp);
    let mut lanes: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for r in all {
        let delivered = match r.probe {
            ProbeKind::Watch => matches!(
                r.event.as_deref(),
                Some("ADDED") | Some("MODIFIED") | Some("DELETED")
            ),
            ProbeKind::Informer | ProbeKind::InformerGo => matches!(
                r.event.as_deref(),
                Some(informer_event::APPLY) | Some(informer_event::INIT_APPLY)
            ),
            _ => false,
        };
        if delivered {
            lanes.entry(lane_key(r.probe, r.mode)).or_default().push(r);
        }
    }
    let mut out = Vec::new();
    for (lane, mut rs) in lanes {
        rs.sort_by(|a, b| a.start_unix_ms.total_cmp(&b.start_unix_ms));
        for w in rs.windows(2) {
            let (a, b) = (w[0].start_unix_ms, w[1].start_unix_ms);
            if b - a <= SILENT_MS {
                continue;
            }
            let writes = acked.iter().filter(|t| **t > a && **t < b).count() as u64;
            if writes == 0 {
                continue;
            }
            let mut s = Silence {
                lane: lane.clone(),
                seed: w[0].seed.clone(),
                from_unix_ms: a,
                to_unix_ms: b,
                writes,
                from_step: step_at(&phases, a),
                to_step: step_at(&phases, b),
                line: String::new(),
            };
            s.line = format!(
                "{}: no event for {:.1} s ({} to {}{}) while {} write(s) were acknowledged, {}; the stream stayed open{}",
                s.lane,
                (b - a) / 1e3,
                rel(a, t0),
                rel(b, t0),
                if s.from_step == s.to_step {
                    format!(", in {}", s.from_step)
                } else {
                    format!(", from {} to {}", s.from_step, s.to_step)
                },
                writes,
                "the watch went silent",
                s.seed
                    .as_deref()
                    .map(|x| format!(" (its last event came from {x})"))
                    .unwrap_or_default()
            );
            out.push(s);
        }
    }
    out.sort_by(|x, y| (y.to_unix_ms - y.from_unix_ms).total_cmp(&(x.to_unix_ms - x.from_unix_ms)));
    out
}

fn phases_of(events: &[LabEvent]) -> Vec<(f64, f64, &str)> {
    crate::phase_bands(events)
        .into_iter()
        .filter_map(|e| Some((e.at_unix_ms, e.end_unix_ms?, e.name.as_str())))
        .collect()
}

/// The clients of the `node` lane, as the mechanisms name them.
pub const NODE_CLIENTS: &str = "shoot nodes' kept connections (through the apiserver-proxy)";

fn clients(m: ConnMode) -> &'static str {
    match m {
        ConnMode::New => "new connections",
        ConnMode::Reused => "kept connections (HTTP/2)",
        ConnMode::Keepalive => "kept connections (HTTP/1.1 keep-alive)",
        ConnMode::Node => NODE_CLIENTS,
        ConnMode::LateDns => "new connections through a DNS cache that outlives the TTL",
        ConnMode::SeedBound => "new connections by the source seed's seed-bound name",
    }
}

/// What a failed request got, coarse enough that one mechanism is one
/// group: the status and Envoy's own words when it said them, or the
/// failure's class.
fn cause(r: &Record, c: &Classify) -> String {
    let err = r.error.as_deref().unwrap_or("");
    match r.http_status {
        Some(503) if err.contains("no healthy upstream") => {
            "HTTP 503 \"no healthy upstream\" (the gateway had no ready endpoint)".into()
        }
        Some(s) => format!("HTTP {s}"),
        None => c.class(r).to_string(),
    }
}

fn step_at(phases: &[(f64, f64, &str)], t: f64) -> String {
    if let Some((_, _, name)) = phases.iter().find(|(a, b, _)| *a <= t && t <= *b) {
        return (*name).to_string();
    }
    match (phases.first(), phases.last()) {
        (Some((a, _, _)), _) if t < *a => "before the migration".into(),
        (_, Some((_, b, _))) if t > *b => "after the migration".into(),
        (None, None) => "no migration".into(),
        _ => {
            // Between two steps: name the one that had ended.
            phases
                .iter()
                .rev()
                .find(|(_, b, _)| *b < t)
                .map(|(_, _, n)| format!("after {n}"))
                .unwrap_or_default()
        }
    }
}

fn short(s: &str, n: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

fn rel(t: f64, t0: f64) -> String {
    format!("+{:.1} s", (t - t0) / 1e3)
}

fn sentence(m: &Mechanism, t0: f64) -> String {
    let steps = if m.from_step == m.to_step {
        format!("in {}", m.from_step)
    } else {
        format!("from {} to {}", m.from_step, m.to_step)
    };
    format!(
        "{} request(s) on {}{} got {}: {} to {} ({:.1} s), {steps}; lanes {}",
        m.failed,
        m.clients,
        m.seed
            .as_deref()
            .map(|s| format!(" to {s}"))
            .unwrap_or_default(),
        m.cause,
        rel(m.first_unix_ms, t0),
        rel(m.last_end_unix_ms, t0),
        (m.last_end_unix_ms - m.first_unix_ms) / 1e3,
        m.lanes.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Outcome, ProbeKind};
    use crate::testutil::{phase, rec, T0};

    fn failed(seq: u64, mode: ConnMode, at: f64, status: Option<u16>, err: &str) -> Record {
        let outcome = if status.is_some() {
            Outcome::Http
        } else {
            Outcome::Timeout
        };
        let mut r = rec(ProbeKind::Get, mode, at, 100.0, outcome);
        r.seq = seq;
        r.http_status = status;
        r.seed = Some("seed-a".into());
        r.error = Some(err.into());
        r
    }

    #[test]
    fn the_gateways_503s_on_kept_connections_are_one_mechanism_across_steps() {
        let rs = [
            failed(
                1,
                ConnMode::Reused,
                10_000.0,
                Some(503),
                "no healthy upstream",
            ),
            failed(
                2,
                ConnMode::Reused,
                30_000.0,
                Some(503),
                "no healthy upstream",
            ),
            failed(3, ConnMode::New, 12_000.0, None, "timed out"),
        ];
        let refs: Vec<&Record> = rs.iter().collect();
        let events = [
            phase("EtcdMigrationComplete", 5_000.0, 20_000.0),
            phase("SourceSeedCleanup", 20_000.0, 40_000.0),
        ];
        let m = explain(&refs, &events, &Classify::default(), T0);
        assert_eq!(m.len(), 2, "{m:#?}");
        assert_eq!(m[0].failed, 2);
        assert_eq!(m[0].clients, "kept connections (HTTP/2)");
        assert!(m[0].cause.contains("no healthy upstream"));
        assert_eq!(
            (m[0].from_step.as_str(), m[0].to_step.as_str()),
            ("EtcdMigrationComplete", "SourceSeedCleanup")
        );
        assert_eq!(
            m[0].line,
            "2 request(s) on kept connections (HTTP/2) to seed-a got HTTP 503 \"no healthy upstream\" (the gateway had no ready endpoint): +10.0 s to +30.1 s (20.1 s), from EtcdMigrationComplete to SourceSeedCleanup; lanes get/reused"
        );
        assert_eq!(m[1].clients, "new connections");
        assert_eq!(m[1].cause, "timeout");
        assert_eq!(m[1].from_step, "EtcdMigrationComplete");
    }

    #[test]
    fn a_shoot_nodes_failures_are_their_own_clients_and_name_no_seed_they_do_not_know() {
        let mut node = failed(1, ConnMode::Node, 10_000.0, Some(500), "etcd gone");
        node.seed = None;
        let kept = failed(2, ConnMode::Reused, 11_000.0, Some(500), "etcd gone");
        let rs = [node, kept];
        let refs: Vec<&Record> = rs.iter().collect();
        let events = [phase("EtcdMigrationComplete", 5_000.0, 20_000.0)];
        let m = explain(&refs, &events, &Classify::default(), T0);
        assert_eq!(m.len(), 2, "{m:#?}");
        let n = m.iter().find(|m| m.clients == NODE_CLIENTS).unwrap();
        assert!(n.line.contains("lanes get/node"), "{}", n.line);
        assert!(!n.line.contains(" to seed-"), "{}", n.line);
        assert!(m.iter().any(|m| m.clients == "kept connections (HTTP/2)"));
    }

    #[test]
    fn a_watch_without_events_while_writes_are_acknowledged_is_silent() {
        let mut rs = Vec::new();
        let ev = |seq: u64, at: f64, seed: &str| {
            let mut r = rec(ProbeKind::Watch, ConnMode::New, at, 0.0, Outcome::Ok);
            r.seq = seq;
            r.event = Some("MODIFIED".into());
            r.seed = Some(seed.into());
            r
        };
        let write = |seq: u64, at: f64| {
            let mut r = rec(ProbeKind::Write, ConnMode::New, at, 10.0, Outcome::Ok);
            r.seq = seq;
            r
        };
        rs.push(ev(1, 1_000.0, "seed-a"));
        rs.push(ev(2, 2_000.0, "seed-a"));
        for (i, t) in [3_000.0, 20_000.0, 40_000.0].into_iter().enumerate() {
            rs.push(write(10 + i as u64, t));
        }
        rs.push(ev(3, 50_000.0, "seed-b"));
        // A quiet stretch with no write in it is no silence.
        rs.push(ev(4, 70_000.0, "seed-b"));
        let refs: Vec<&Record> = rs.iter().collect();
        let events = [
            phase("EtcdMigrationComplete", 0.0, 30_000.0),
            phase("SourceSeedCleanup", 30_000.0, 60_000.0),
        ];
        let s = silent_watches(&refs, &events, T0);
        assert_eq!(s.len(), 1, "{s:#?}");
        assert_eq!(s[0].writes, 3);
        assert_eq!(s[0].lane, "watch/new");
        assert_eq!(
            s[0].line,
            "watch/new: no event for 48.0 s (+2.0 s to +50.0 s, from EtcdMigrationComplete to SourceSeedCleanup) while 3 write(s) were acknowledged, the watch went silent; the stream stayed open (its last event came from seed-a)"
        );
    }

    #[test]
    fn failures_outside_the_steps_say_where_they_are() {
        let rs = [
            failed(1, ConnMode::New, 1_000.0, Some(500), "etcd"),
            failed(2, ConnMode::New, 50_000.0, Some(500), "etcd"),
        ];
        let refs: Vec<&Record> = rs.iter().collect();
        let events = [
            phase("A", 5_000.0, 10_000.0),
            phase("B", 20_000.0, 30_000.0),
        ];
        let m = explain(&refs, &events, &Classify::default(), T0);
        assert_eq!(m[0].from_step, "before the migration");
        assert_eq!(m[0].to_step, "after the migration");
        assert_eq!(
            step_at(&[("A", 5.0, 10.0)].map(|(n, a, b)| (a, b, n)), 7.0),
            "A"
        );
        let between = [(0.0, 10.0, "A"), (20.0, 30.0, "B")];
        assert_eq!(step_at(&between, 15.0), "after A");
        assert!(explain(&[], &events, &Classify::default(), T0).is_empty());
    }
}
