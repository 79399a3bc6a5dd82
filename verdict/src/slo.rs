//! Latency per phase (a migration step, or `outside`) against limits: the
//! Kubernetes API latency SLOs for single-object reads (get, 1 s) and
//! mutations (write, 1 s) and for namespaced lists (5 s), and the lab's own
//! bound on watch delivery (from a write's acknowledgement to the watch
//! event that carried it). One rule per phase and kind: failed when the
//! p99 is over its limit, and when the phase had requests of the kind but
//! none succeeded; skipped only when the phase had none.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ledger::acked_writes;
use super::watch::is_data_event;
use super::{
    fmt_ms, latency_of, phase_bands, record_end, slug, Latency, Rule, RuleStatus, Thresholds,
};
use crate::record::{LabEvent, Outcome, ProbeKind, Record};

/// The latency rules' names: `slo-<step>-<kind>`.
pub const RULE_PREFIX: &str = "slo-";

/// Latency of one phase (a `phase` LabEvent with an end, or `outside`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseLatency {
    pub name: String,
    /// The first band of this name (phases with the same name are merged);
    /// `None` for `outside`.
    pub start_unix_ms: Option<f64>,
    pub end_unix_ms: Option<f64>,
    pub requests: u64,
    pub failed: u64,
    /// Single-object reads.
    pub get: Option<Latency>,
    pub list: Option<Latency>,
    /// Mutations.
    pub write: Option<Latency>,
    /// Acknowledgement to watch event, writes acknowledged in the phase.
    #[serde(default)]
    pub watch_delay: Option<Latency>,
    /// Requests of each kind in the phase (successful or not).
    #[serde(default)]
    pub attempted: BTreeMap<String, u64>,
    /// `None` when there was no successful get in the phase.
    pub read_slo_met: Option<bool>,
    #[serde(default)]
    pub list_slo_met: Option<bool>,
    pub mutation_slo_met: Option<bool>,
    #[serde(default)]
    pub watch_delay_met: Option<bool>,
}

/// The bands' names in order, `outside` last, and the phase of a time.
struct Phases<'a> {
    bands: Vec<&'a LabEvent>,
    names: Vec<&'a str>,
}

impl<'a> Phases<'a> {
    fn new(events: &'a [LabEvent]) -> Self {
        let bands = phase_bands(events);
        let mut names: Vec<&str> = Vec::new();
        for b in &bands {
            if !names.contains(&b.name.as_str()) {
                names.push(&b.name);
            }
        }
        Phases { bands, names }
    }
    /// Indices of the phases `t` falls in (several bands may overlap), or
    /// `outside` (index `names.len()`).
    fn of(&self, t: f64) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .bands
            .iter()
            .filter(|b| t >= b.at_unix_ms && t < b.end_unix_ms.unwrap())
            .map(|b| self.names.iter().position(|n| *n == b.name).unwrap())
            .collect();
        v.dedup();
        if v.is_empty() {
            v.push(self.names.len());
        }
        v
    }
}

pub fn phases(
    requests: &[&Record],
    all: &[&Record],
    events: &[LabEvent],
    th: &Thresholds,
) -> Vec<PhaseLatency> {
    let ph = Phases::new(events);
    let outside = ph.names.len();
    let mut buckets: Vec<Vec<&Record>> = vec![Vec::new(); outside + 1];
    for r in requests {
        for i in ph.of(r.start_unix_ms) {
            buckets[i].push(r);
        }
    }
    // Watch delivery delay, by the phase of the acknowledgement.
    let mut acked_at: BTreeMap<u64, f64> = BTreeMap::new();
    for w in acked_writes(all) {
        let e = acked_at.entry(w.value.unwrap()).or_insert(record_end(w));
        *e = e.min(record_end(w));
    }
    let mut delays: Vec<Vec<f64>> = vec![Vec::new(); outside + 1];
    for r in all.iter().filter(|r| is_data_event(r)) {
        if let Some(at) = r.value.and_then(|v| acked_at.get(&v)) {
            for i in ph.of(*at) {
                delays[i].push((r.start_unix_ms - at).max(0.0));
            }
        }
    }
    let mut out = Vec::new();
    for (i, rs) in buckets.iter().enumerate() {
        if i == outside && rs.is_empty() && delays[i].is_empty() {
            continue;
        }
        let of_kind = |p: ProbeKind| rs.iter().filter(move |r| r.probe == p && r.event.is_none());
        let lat = |p: ProbeKind| {
            latency_of(
                of_kind(p)
                    .filter(|r| r.outcome == Outcome::Ok)
                    .map(|r| r.duration_ms)
                    .collect(),
            )
        };
        let get = lat(ProbeKind::Get);
        let list = lat(ProbeKind::List);
        // Mutations: the ledger's updates and the load's creates.
        let write = latency_of(
            rs.iter()
                .filter(|r| is_mutation(r.probe) && r.event.is_none())
                .filter(|r| r.outcome == Outcome::Ok)
                .map(|r| r.duration_ms)
                .collect(),
        );
        let watch_delay = latency_of(delays[i].clone());
        let mut attempted = BTreeMap::new();
        for (k, p) in [
            ("get", ProbeKind::Get),
            ("list", ProbeKind::List),
            ("write", ProbeKind::Write),
            ("write", ProbeKind::Load),
        ] {
            let n = of_kind(p).count() as u64;
            if n > 0 {
                *attempted.entry(k.to_string()).or_insert(0) += n;
            }
        }
        let (name, start, end) = if i == outside {
            ("outside".to_string(), None, None)
        } else {
            let b = ph.bands.iter().find(|b| b.name == ph.names[i]).unwrap();
            (ph.names[i].to_string(), Some(b.at_unix_ms), b.end_unix_ms)
        };
        out.push(PhaseLatency {
            name,
            start_unix_ms: start,
            end_unix_ms: end,
            requests: rs.len() as u64,
            failed: rs.iter().filter(|r| r.outcome != Outcome::Ok).count() as u64,
            read_slo_met: get.map(|l| l.p99_ms <= th.read_p99_ms),
            list_slo_met: list.map(|l| l.p99_ms <= th.list_p99_ms),
            mutation_slo_met: write.map(|l| l.p99_ms <= th.mutation_p99_ms),
            watch_delay_met: watch_delay.map(|l| l.p99_ms <= th.watch_delay_p99_ms),
            get,
            list,
            write,
            watch_delay,
            attempted,
        });
    }
    out
}

/// The rules of one phase: get, list, write, watch-delay.
pub fn rules(ph: &PhaseLatency, th: &Thresholds) -> Vec<Rule> {
    let mut out = Vec::new();
    for (kind, lat, met, limit, what) in [
        ("get", &ph.get, ph.read_slo_met, th.read_p99_ms, "read"),
        ("list", &ph.list, ph.list_slo_met, th.list_p99_ms, "list"),
        (
            "write",
            &ph.write,
            ph.mutation_slo_met,
            th.mutation_p99_ms,
            "mutation",
        ),
        (
            "watch-delay",
            &ph.watch_delay,
            ph.watch_delay_met,
            th.watch_delay_p99_ms,
            "watch delivery",
        ),
    ] {
        let name = format!("{RULE_PREFIX}{}-{kind}", slug(&ph.name));
        let attempted = ph.attempted.get(kind).copied().unwrap_or(0);
        out.push(match (lat, met) {
            (Some(l), Some(true)) => Rule {
                name,
                status: RuleStatus::Passed,
                message: format!(
                    "phase {}: {what} p99 {} ≤ {} over {} sample(s)",
                    ph.name,
                    fmt_ms(l.p99_ms),
                    fmt_ms(limit),
                    l.count
                ),
            },
            (Some(l), _) => Rule {
                name,
                status: RuleStatus::Failed,
                message: format!(
                    "phase {}: {what} ({kind}) p99 {} exceeds the limit of {} (p50 {}, max {}, {} sample(s))",
                    ph.name,
                    fmt_ms(l.p99_ms),
                    fmt_ms(limit),
                    fmt_ms(l.p50_ms),
                    fmt_ms(l.max_ms),
                    l.count
                ),
            },
            (None, _) if attempted > 0 => Rule {
                name,
                status: RuleStatus::Failed,
                message: format!(
                    "phase {}: {attempted} {kind} request(s), none succeeded",
                    ph.name
                ),
            },
            (None, _) => Rule {
                name,
                status: RuleStatus::Skipped,
                message: format!("phase {}: no {kind} sample", ph.name),
            },
        });
    }
    out
}

/// Requests the mutation SLO covers: the ledger's updates and the load's
/// creates.
pub fn is_mutation(p: ProbeKind) -> bool {
    matches!(p, ProbeKind::Write | ProbeKind::Load)
}

/// The rule judged through the whole verdict (`compute`), on synthetic
/// runs (`testutil`).
#[cfg(test)]
mod judged {
    use crate::testutil::*;
    use crate::*;

    #[test]
    fn verdict_slo_miss_attributed_to_its_phase() {
        let mut recs = clean_run();
        // Slow gets during 4000..6000 only.
        for r in recs.iter_mut() {
            if r.probe == ProbeKind::Get && (4000.0..6000.0).contains(&(r.start_unix_ms - T0)) {
                r.duration_ms = 1500.0;
            }
        }
        let events = vec![
            phase("prepare", 0.0, 4000.0),
            phase("switch over", 4000.0, 6000.0),
            LabEvent {
                at_unix_ms: T0 + 5000.0,
                end_unix_ms: None,
                kind: "phase".into(),
                name: "instant".into(),
                detail: String::new(),
                status: None,
            },
        ];
        let v = compute(&recs, &events, &read_back(&recs, Some(100)), &th());
        let names: Vec<&str> = v.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["prepare", "switch over", "outside"]);
        assert_eq!(v.phases[1].read_slo_met, Some(false));
        assert_eq!(v.phases[1].get.unwrap().p99_ms, 1500.0);
        assert_eq!(v.phases[0].read_slo_met, Some(true));
        assert_eq!(v.phases[2].read_slo_met, Some(true));
        assert_eq!(
            v.rule("slo-switch-over-get").unwrap().status,
            RuleStatus::Failed
        );
        assert_eq!(
            v.rule("slo-prepare-get").unwrap().status,
            RuleStatus::Passed
        );
        assert_eq!(
            v.rule("slo-switch-over-write").unwrap().status,
            RuleStatus::Passed
        );
        assert_eq!(v.reasons.len(), 1, "{:?}", v.reasons);
        assert!(v.reasons[0].starts_with("slo-switch-over-get"));
        assert!(!v.passed);
    }

    #[test]
    fn verdict_list_latency_watch_delay_and_phases_without_success() {
        let events = vec![phase("step", 0.0, 10_000.0)];
        // A slow list (6 s > 5 s) fails its phase's list rule.
        let mut recs = clean_run();
        let mut list = rec(
            ProbeKind::List,
            ConnMode::Reused,
            100.0,
            6_000.0,
            Outcome::Ok,
        );
        list.rv = Some(1001);
        recs.push(list);
        let v = compute(&recs, &events, &read_back(&recs, Some(100)), &th());
        assert_eq!(v.rule("slo-step-list").unwrap().status, RuleStatus::Failed);
        assert_eq!(v.phases[0].list_slo_met, Some(false));
        // Watch events 1.5 s after the acknowledgement fail the delay bound.
        let mut recs = clean_run();
        for r in recs
            .iter_mut()
            .filter(|r| r.probe == ProbeKind::Watch && r.value.is_some())
        {
            r.start_unix_ms += 1_500.0;
        }
        let v = compute(&recs, &events, &read_back(&recs, Some(100)), &th());
        let r = v.rule("slo-step-watch-delay").unwrap();
        assert_eq!(r.status, RuleStatus::Failed, "{}", r.message);
        // A phase where every get failed: failed, not skipped.
        let recs: Vec<Record> = clean_run()
            .into_iter()
            .map(|mut r| {
                if r.probe == ProbeKind::Get {
                    r.outcome = Outcome::Timeout;
                }
                r
            })
            .collect();
        let v = compute(&recs, &events, &read_back(&recs, Some(100)), &th());
        let r = v.rule("slo-step-get").unwrap();
        assert_eq!(r.status, RuleStatus::Failed);
        assert!(
            r.message.contains("200 get request(s), none succeeded"),
            "{}",
            r.message
        );
    }

    #[test]
    fn verdict_nearest_rank_quantiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 50.0), 50.0);
        assert_eq!(nearest_rank(&v, 99.0), 99.0);
        assert_eq!(nearest_rank(&[3.0], 99.0), 3.0);
        assert_eq!(nearest_rank(&[1.0, 2.0], 50.0), 1.0);
    }
}
