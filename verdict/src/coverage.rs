//! The `coverage` rule: no blind lanes. A verdict about a phase means
//! nothing when a lane sent nothing in it, and a verdict about writes after
//! a hazard means nothing when no write was acknowledged after it.
//!
//! - The *lanes judged* are the request lanes (`probe/mode`) of readyz,
//!   get, list, write (the counter's updates, not the writer's reads) and
//!   the write load: those the run's `probes.json` names, and any other a
//!   record shows.
//! - Every phase (a migration step's band) at least
//!   `Coverage::min_phase_ms` long must hold, per lane judged, at least
//!   `Coverage::min_samples` requests that *started* inside it (whatever
//!   their outcome: a failure is a sample, which the availability rule
//!   judges). A lane short of that is not covered there: key
//!   `<lane>@<phase>`.
//! - When the write probe ran: at least one write acknowledged that started
//!   after the last phase ended (`writes-after-last-step`), and after the
//!   last hazard window that ended inside the records' window
//!   (`writes-after-last-hazard`, see `excuse`).
//!
//! - Per lane judged, when the run keeps its probes' plan: no time without
//!   a started request longer than the probes' timeout and two of the
//!   lane's intervals ([`silence_bound`]), from the probes' start to the
//!   lane's first request, between its requests, and from its last to the
//!   latest request start of any lane (the probes' stop is noted after the
//!   agents have shut down, seconds later) (key
//!   `<lane>@silence`): three samples in a step do not cover a lane that
//!   then went quiet for 40 s, and steps under `min_phase_ms` are judged
//!   this way too.
//!
//! - Per watch lane (the watch probe's and the informer's, `probe/mode`),
//!   when the run keeps its probes' plan: no time without an open stream
//!   longer than the same bound, from the probes' start to the lane's
//!   first stream, between one stream's end and the next's opening, and
//!   from a last stream's end to the end of the probes' sending
//!   (key `<lane>@silence`). A stream opens with a successful `connect`
//!   (watch) or `watch` request (informer) and ends with anything that
//!   ends one: a broken or closed stream, an ERROR event, the informer's
//!   `watch-broke`, `watch-error` or `expired`. Records are taken in the
//!   order they ended. A stream that stays open but delivers nothing is the
//!   watch rules' and the report's silent watch, not a gap here.
//!
//! - Lanes asked for are lanes judged: every lane the plan names
//!   ([`planned_lanes`]) that has no record at all is blind for the whole
//!   run (key `<lane>@none`), and every watch lane of the plan that never
//!   had an open stream is blind too (key `<lane>@silence`). A lane with
//!   records that the plan does not name is the records' integrity's
//!   failure (`record-integrity`), not a gap.
//!
//! - The run's end is evidence: when the lab's events stop without the
//!   `probes stopped` note (the lab killed, its events cut short), the
//!   time from their last event to the end of the probes' sending is
//!   judged without the lab's account of it (key `lab-events@end`), and
//!   the migration's rule fails on the steps it lacks.
//!
//! Each gap is *not covered*; the rule fails unless every gap's key is in
//! the scenario's `uncovered` (with why), and then it shows as accepted.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::criteria::Criteria;
use crate::excuse::HazardWindow;
use crate::record::{LabEvent, ProbeKind, ProbePlan, Record};
use crate::{lane_key, phase_bands, Rule, RuleStatus, Window};

/// The rule's name.
pub const RULE: &str = "coverage";

/// A check that had nothing to judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    /// `<lane>@<phase>`, `writes-after-last-step`, `writes-after-last-hazard`.
    pub key: String,
    pub what: String,
    /// The scenario's reason, when it accepts the gap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<String>,
}

/// One phase's samples per lane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseCoverage {
    pub name: String,
    pub start_unix_ms: f64,
    pub end_unix_ms: f64,
    /// Requests started in the phase, per lane judged.
    pub samples: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CoverageCheck {
    /// The minimums it was judged by.
    pub min_phase_ms: f64,
    pub min_samples: u64,
    pub lanes: Vec<String>,
    /// The phases long enough to be judged.
    pub phases: Vec<PhaseCoverage>,
    /// Acknowledged writes that started after the last phase ended (`None`:
    /// no phase, or no write probe).
    pub writes_after_last_step: Option<u64>,
    /// ... after the last hazard window (`None`: no hazard, or no writes).
    pub writes_after_last_hazard: Option<u64>,
    pub gaps: Vec<Gap>,
    /// Per lane judged, the longest time without a started request (from
    /// the probes' start to its first request, and between its requests),
    /// ms; judged when the run keeps its probes' plan.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub longest_silence_ms: BTreeMap<String, f64>,
    /// Every lane the probes' plan asks for (`planned_lanes`); empty when
    /// the run keeps no plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub planned: Vec<String>,
}

/// The lanes a plan asks for: `probe/mode` of each probe it names in each
/// of its modes; the informers' on their one kept connection, client-go's
/// through the shoot node's apiserver-proxy when the plan runs the node
/// lane (as the agent starts it, `probe/src/clientgo.rs`); the write load's
/// when it runs. The leader-election candidates are no lane: the lease
/// rules judge them.
pub fn planned_lanes(p: &ProbePlan) -> BTreeSet<String> {
    use crate::record::ConnMode;
    let mut out = BTreeSet::new();
    for k in &p.probes {
        match k {
            ProbeKind::Informer => {
                out.insert(lane_key(*k, ConnMode::Reused));
            }
            ProbeKind::InformerGo => {
                let mode = if p.modes.contains(&ConnMode::Node) {
                    ConnMode::Node
                } else {
                    ConnMode::Reused
                };
                out.insert(lane_key(*k, mode));
            }
            ProbeKind::Lease => {}
            _ => {
                for m in &p.modes {
                    out.insert(lane_key(*k, *m));
                }
            }
        }
    }
    if p.write_rate > 0.0 {
        for m in &p.modes {
            out.insert(lane_key(ProbeKind::Load, *m));
        }
    }
    out
}

/// Whether the plan asks for the lane of `r` (a candidate's record: for
/// candidates).
pub fn in_plan(p: &ProbePlan, planned: &BTreeSet<String>, r: &Record) -> bool {
    match r.probe {
        ProbeKind::Lease => p.probes.contains(&ProbeKind::Lease),
        _ => planned.contains(&lane_key(r.probe, r.mode)),
    }
}

/// The lanes whose streams are judged: the watch probe's and the
/// informers'.
fn is_stream_lane(lane: &str) -> bool {
    ["watch/", "informer/", "informer-go/"]
        .iter()
        .any(|p| lane.starts_with(p))
}

/// The note the lab writes when the probes have stopped.
pub const PROBES_STOPPED: &str = "probes stopped";

/// The longest a lane may go without starting a request: a request may
/// take up to the probes' timeout, and the lane starts one every
/// `1/rate` s; more than the timeout and two intervals, and the lane was
/// not sending (a stuck or starved agent): blind, whatever the phases'
/// sample counts say.
pub fn silence_bound(timeout_ms: f64, rate: f64) -> f64 {
    let interval = if rate > 0.0 { 1e3 / rate } else { 0.0 };
    timeout_ms + 2.0 * interval
}

/// The gap (`<lane>@silence`) of a lane whose longest time `without`
/// something (`worst` ms from `at`) exceeds `bound` (`limit` says what the
/// bound is), or none.
fn silence_gap(
    lane: &str,
    (worst, at, bound): (f64, f64, f64),
    window: &Window,
    without: &str,
    limit: &str,
    what: &str,
) -> Option<(String, String)> {
    (worst > bound).then(|| {
        (
            format!("{lane}@silence"),
            format!(
                "{lane} {without} for {:.1} s (+{:.1} s to +{:.1} s), longer than {limit} ({:.1} s): the {what} was blind",
                worst / 1e3,
                (at - window.start_unix_ms) / 1e3,
                (at + worst - window.start_unix_ms) / 1e3,
                bound / 1e3
            ),
        )
    })
}

/// Whether `r` opens a watch lane's stream (`Some(true)`), ends it or
/// fails to open one (`Some(false)`), or neither (see the module doc).
fn stream_change(r: &Record) -> Option<bool> {
    use crate::record::informer_event as inf;
    let ev = r.event.as_deref()?;
    match (r.probe, ev) {
        (ProbeKind::Watch, "connect")
        | (ProbeKind::Informer | ProbeKind::InformerGo, inf::WATCH) => {
            Some(r.outcome == crate::record::Outcome::Ok)
        }
        (ProbeKind::Watch, "broken" | "closed" | "ERROR")
        | (
            ProbeKind::Informer | ProbeKind::InformerGo,
            inf::WATCH_BROKE | inf::WATCH_ERROR | inf::EXPIRED | inf::WATCH_CLOSED,
        ) => Some(false),
        _ => None,
    }
}

/// Per watch lane, the longest time inside `window` without an open
/// stream, and when it began.
fn closed_streams(all: &[&Record], window: &Window) -> BTreeMap<String, (f64, f64)> {
    let mut by_lane: BTreeMap<String, Vec<(f64, bool)>> = BTreeMap::new();
    for r in all {
        if let Some(open) = stream_change(r) {
            by_lane
                .entry(lane_key(r.probe, r.mode))
                .or_default()
                .push((crate::record_end(r), open));
        }
    }
    by_lane
        .into_iter()
        .map(|(lane, mut changes)| {
            changes.sort_by(|a, b| a.0.total_cmp(&b.0));
            // Closed since `since` (None: open).
            let mut since = Some(window.start_unix_ms);
            let (mut worst, mut at) = (0.0f64, window.start_unix_ms);
            let mut close = |from: f64, to: f64| {
                if to - from > worst {
                    (worst, at) = (to - from, from);
                }
            };
            for (t, open) in changes {
                match (since, open) {
                    (Some(from), true) => {
                        close(from, t);
                        since = None;
                    }
                    (None, false) => since = Some(t),
                    _ => {}
                }
            }
            if let Some(from) = since {
                close(from, window.end_unix_ms);
            }
            (lane, (worst, at))
        })
        .collect()
}

/// The request lanes a sample of which counts (see the module doc).
fn sample_lane(r: &Record) -> Option<String> {
    match (r.probe, r.event.as_deref()) {
        (ProbeKind::Readyz | ProbeKind::Get | ProbeKind::List | ProbeKind::Load, None)
        | (ProbeKind::Write, None) => Some(lane_key(r.probe, r.mode)),
        _ => None,
    }
}

const JUDGED: [ProbeKind; 5] = [
    ProbeKind::Readyz,
    ProbeKind::Get,
    ProbeKind::List,
    ProbeKind::Write,
    ProbeKind::Load,
];

/// `window`: from the probes' start to the end of their sending (the last
/// request start of any lane), to which each lane's tail is judged.
pub fn check(
    all: &[&Record],
    events: &[LabEvent],
    plan: Option<&ProbePlan>,
    windows: &[HazardWindow],
    window: &Window,
    criteria: &Criteria,
) -> CoverageCheck {
    let mut lanes: BTreeSet<String> = all.iter().filter_map(|r| sample_lane(r)).collect();
    if let Some(p) = plan {
        for k in p.probes.iter().filter(|k| JUDGED.contains(k)) {
            for m in &p.modes {
                lanes.insert(lane_key(*k, *m));
            }
        }
        if p.write_rate > 0.0 {
            for m in &p.modes {
                lanes.insert(lane_key(ProbeKind::Load, *m));
            }
        }
    }
    let planned = plan.map(planned_lanes).unwrap_or_default();
    let mut c = CoverageCheck {
        min_phase_ms: criteria.coverage.min_phase_ms,
        min_samples: criteria.coverage.min_samples,
        lanes: lanes.iter().cloned().collect(),
        planned: planned.iter().cloned().collect(),
        ..CoverageCheck::default()
    };
    let mut gap = |key: String, what: String| {
        let accepted = criteria.uncovered.get(&key).cloned();
        c.gaps.push(Gap {
            key,
            what,
            accepted,
        });
    };
    // Lanes asked for and never heard of.
    let recorded: BTreeSet<String> = all.iter().map(|r| lane_key(r.probe, r.mode)).collect();
    for l in planned.iter().filter(|l| !recorded.contains(*l)) {
        gap(
            format!("{l}@none"),
            format!(
                "{l} was asked for (probes.json) and recorded nothing: blind for the whole run"
            ),
        );
    }
    // The run's end, as the lab recorded it.
    if plan.is_some()
        && !events.is_empty()
        && !events
            .iter()
            .any(|e| e.kind == "note" && e.name.starts_with(PROBES_STOPPED))
    {
        let end = |e: &LabEvent| e.end_unix_ms.unwrap_or(e.at_unix_ms).max(e.at_unix_ms);
        let last = events
            .iter()
            .max_by(|a, b| end(a).total_cmp(&end(b)))
            .expect("events are not empty");
        let t = end(last);
        gap(
            "lab-events@end".into(),
            format!(
                "the lab's events stop at +{:.1} s ({} {}) without `{PROBES_STOPPED}`: from there to the probes' last request at +{:.1} s the run is judged without the lab's account of it",
                (t - window.start_unix_ms) / 1e3,
                last.kind,
                last.name,
                (window.end_unix_ms - window.start_unix_ms) / 1e3
            ),
        );
    }
    let bands = phase_bands(events);
    for b in &bands {
        let (a, z) = (b.at_unix_ms, b.end_unix_ms.unwrap_or(b.at_unix_ms));
        if z - a < criteria.coverage.min_phase_ms {
            continue;
        }
        let mut samples: BTreeMap<String, u64> = lanes.iter().map(|l| (l.clone(), 0)).collect();
        for r in all
            .iter()
            .filter(|r| r.start_unix_ms >= a && r.start_unix_ms < z)
        {
            if let Some(l) = sample_lane(r) {
                *samples.entry(l).or_default() += 1;
            }
        }
        for (l, n) in &samples {
            if *n < criteria.coverage.min_samples {
                gap(
                    format!("{l}@{}", b.name),
                    format!(
                        "{l} started {n} request(s) in {} ({:.1} s), fewer than {}",
                        b.name,
                        (z - a) / 1e3,
                        criteria.coverage.min_samples
                    ),
                );
            }
        }
        c.phases.push(PhaseCoverage {
            name: b.name.clone(),
            start_unix_ms: a,
            end_unix_ms: z,
            samples,
        });
    }
    // Time without a started request, per lane: from the probes' start to
    // the lane's first request, between its requests, and from its last to
    // the end of the probes' sending.
    if let Some(p) = plan {
        let mut starts: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for r in all.iter() {
            if let Some(l) = sample_lane(r) {
                starts.entry(l).or_default().push(r.start_unix_ms);
            }
        }
        for (l, v) in &mut starts {
            v.sort_by(f64::total_cmp);
            let rate = if l.starts_with("load/") {
                p.write_rate
            } else {
                p.rate
            };
            let bound = silence_bound(p.timeout_ms, rate);
            let mut from = window.start_unix_ms;
            let (mut worst, mut at) = (0.0f64, from);
            // Its requests' starts, then the end of the probes' sending: a
            // lane that stopped before the others is silent from its last
            // request on.
            for t in v.iter().copied().chain([window.end_unix_ms]) {
                if t - from > worst {
                    (worst, at) = (t - from, from);
                }
                from = from.max(t);
            }
            c.longest_silence_ms.insert(l.clone(), worst);
            if let Some((key, why)) = silence_gap(
                l,
                (worst, at, bound),
                window,
                "started no request",
                "its timeout and two of its intervals",
                "lane",
            ) {
                gap(key, why);
            }
        }
    }
    // Time without an open stream, per watch lane.
    if let Some(p) = plan {
        let bound = silence_bound(p.timeout_ms, p.rate);
        let streams = closed_streams(all, window);
        for l in planned
            .iter()
            .filter(|l| is_stream_lane(l) && recorded.contains(*l) && !streams.contains_key(*l))
        {
            gap(
                format!("{l}@silence"),
                format!("{l} recorded, but never had an open stream: the watch was blind for the whole run"),
            );
        }
        for (l, (worst, at)) in streams {
            c.longest_silence_ms.insert(l.clone(), worst);
            if let Some((key, why)) = silence_gap(
                &l,
                (worst, at, bound),
                window,
                "had no open stream",
                "the probes' timeout and two of their intervals",
                "watch",
            ) {
                gap(key, why);
            }
        }
    }
    let writes = lanes.iter().any(|l| l.starts_with("write/"));
    if writes {
        let acked = crate::ledger::acked_writes(all);
        let after = |t: f64| acked.iter().filter(|w| w.start_unix_ms >= t).count() as u64;
        if let Some(last) = bands
            .iter()
            .filter_map(|b| b.end_unix_ms)
            .max_by(f64::total_cmp)
        {
            let n = after(last);
            c.writes_after_last_step = Some(n);
            if n == 0 {
                gap(
                    "writes-after-last-step".into(),
                    "no write was acknowledged after the last step ended: nothing shows the API took writes at the end".into(),
                );
            }
        }
        if let Some(last) = windows
            .iter()
            .filter(|w| {
                w.end_unix_ms >= window.start_unix_ms && w.end_unix_ms <= window.end_unix_ms
            })
            .map(|w| w.end_unix_ms)
            .max_by(f64::total_cmp)
        {
            let n = after(last);
            c.writes_after_last_hazard = Some(n);
            if n == 0 {
                gap(
                    "writes-after-last-hazard".into(),
                    "no write was acknowledged after the last hazard: nothing shows the API took writes again".into(),
                );
            }
        }
    }
    c
}

pub fn rule(c: &CoverageCheck) -> Rule {
    let name = RULE.to_string();
    let shown: Vec<String> = c.gaps.iter().take(10).map(|g| g.what.clone()).collect();
    if !c.gaps.is_empty() {
        let more = c.gaps.len() - shown.len();
        return Rule {
            name,
            status: RuleStatus::NotCovered,
            message: format!(
                "not covered: {}{}",
                shown.join("; "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ),
        };
    }
    Rule {
        name,
        status: RuleStatus::Passed,
        message: format!(
            "{} lane(s), each with at least {} request(s) in each of the {} phase(s) of {:.0} s or more{}{}",
            c.lanes.len(),
            c.min_samples,
            c.phases.len(),
            c.min_phase_ms / 1e3,
            c.writes_after_last_step
                .map(|n| format!("; {n} write(s) acknowledged after the last step"))
                .unwrap_or_default(),
            c.writes_after_last_hazard
                .map(|n| format!(", {n} after the last hazard"))
                .unwrap_or_default(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::tests::{clean_handover, lock, A};
    use crate::record::{ConnMode, Outcome};
    use crate::testutil::{phase, rec, series};

    /// The probes' plan: `probes` on new connections, 10/s, 10 s timeout.
    fn plan_of(probes: Vec<ProbeKind>) -> ProbePlan {
        ProbePlan {
            probes,
            modes: vec![ConnMode::New],
            rate: 10.0,
            timeout_ms: 10_000.0,
            write_rate: 0.0,
        }
    }

    /// The lab's note that the probes stopped, at `t`.
    fn stopped(t: f64) -> LabEvent {
        LabEvent {
            kind: "note".into(),
            name: PROBES_STOPPED.into(),
            end_unix_ms: None,
            ..phase("", t, t)
        }
    }

    /// The check with the default criteria and no hazard.
    fn checked(
        all: &[&Record],
        events: &[LabEvent],
        plan: &ProbePlan,
        w: &Window,
    ) -> CoverageCheck {
        check(all, events, Some(plan), &[], w, &Criteria::default())
    }

    /// The probes' window: `secs` from T0.
    fn window_of(secs: f64) -> Window {
        Window {
            start_unix_ms: crate::testutil::T0,
            end_unix_ms: crate::testutil::T0 + secs * 1e3,
        }
    }

    #[test]
    fn client_go_s_informer_is_planned_on_the_node_lane_when_the_plan_runs_it() {
        let mut plan = plan_of(vec![
            ProbeKind::Get,
            ProbeKind::Informer,
            ProbeKind::InformerGo,
        ]);
        plan.modes = vec![ConnMode::New, ConnMode::Reused];
        let lanes = |p: &ProbePlan| planned_lanes(p).into_iter().collect::<Vec<_>>();
        assert_eq!(
            lanes(&plan),
            [
                "get/new",
                "get/reused",
                "informer-go/reused",
                "informer/reused"
            ]
        );
        // With the node lane the agent runs client-go's informer through
        // the shoot node's apiserver-proxy; kube-rs's stays on its kept
        // connection.
        plan.modes.push(ConnMode::Node);
        assert_eq!(
            lanes(&plan),
            [
                "get/new",
                "get/node",
                "get/reused",
                "informer-go/node",
                "informer/reused"
            ]
        );
    }

    #[test]
    fn lease_records_and_informer_lanes_make_no_coverage_gap() {
        // get/new every 100 ms through a 10 s step; the informers and the
        // candidates send far fewer requests there, and none in the second.
        let mut recs = series(ProbeKind::Get, ConnMode::New, 0.0, 20_000.0, 100.0, None);
        for (p, t) in [(ProbeKind::Informer, 10.0), (ProbeKind::InformerGo, 20.0)] {
            for ev in [
                crate::record::informer_event::LIST,
                crate::record::informer_event::WATCH,
            ] {
                let mut r = rec(p, ConnMode::Reused, t, 5.0, Outcome::Ok);
                r.event = Some(ev.into());
                recs.push(r);
            }
        }
        recs.extend(clean_handover());
        recs.push(lock(A, 15_000.0, "get", Outcome::Timeout, None));
        let all: Vec<&Record> = recs.iter().collect();
        let events = [
            phase("step", 0.0, 10_000.0),
            phase("quiet", 10_000.0, 20_000.0),
            stopped(30_000.0),
        ];
        let plan = plan_of(vec![
            ProbeKind::Get,
            ProbeKind::Informer,
            ProbeKind::InformerGo,
            ProbeKind::Lease,
        ]);
        let window = window_of(30.0);
        let c = checked(&all, &events, &plan, &window);
        assert_eq!(c.lanes, vec!["get/new"], "only request lanes are judged");
        assert!(c.gaps.is_empty(), "{:?}", c.gaps);
        assert_eq!(rule(&c).status, RuleStatus::Passed);
        // The same lanes as samples: a plan with only the candidates and
        // the informers judges nothing.
        let plan = ProbePlan {
            probes: vec![ProbeKind::InformerGo, ProbeKind::Lease],
            ..plan
        };
        let only: Vec<&Record> = recs.iter().filter(|r| r.probe != ProbeKind::Get).collect();
        let c = check(
            &only,
            &events,
            Some(&plan),
            &[],
            &window,
            &Criteria::default(),
        );
        assert!(c.lanes.is_empty() && c.gaps.is_empty(), "{c:?}");
    }

    #[test]
    fn a_watch_lane_is_judged_by_its_open_streams_in_the_order_they_ended() {
        let w = window_of(30.0);
        let at = |t: f64, d: f64, ev: &str, o: Outcome| {
            let mut r = rec(ProbeKind::Watch, ConnMode::Reused, t, d, o);
            r.event = Some(ev.into());
            r
        };
        // Open at 0.1 s; closed at 5 s; a reconnect that fails (GOAWAY)
        // started after the one that succeeds but ended first; closed
        // again at 9 s and not opened until 21 s.
        let recs = [
            at(100.0, 5.0, "connect", Outcome::Ok),
            at(5_000.0, 0.0, "closed", Outcome::Ok),
            at(5_000.0, 11.0, "connect", Outcome::Ok),
            at(5_001.0, 4.0, "connect", Outcome::Reset),
            at(9_000.0, 0.0, "broken", Outcome::Reset),
            at(21_000.0, 5.0, "connect", Outcome::Ok),
        ];
        let all: Vec<&Record> = recs.iter().collect();
        let closed = closed_streams(&all, &w);
        let (worst, from) = closed["watch/reused"];
        assert!((worst - 12_005.0).abs() < 1.0, "{worst}");
        assert!((from - (crate::testutil::T0 + 9_000.0)).abs() < 1.0);
        let reused = ProbePlan {
            modes: vec![ConnMode::Reused],
            ..plan_of(vec![ProbeKind::Watch])
        };
        let c = checked(&all, &[], &reused, &w);
        assert_eq!(c.gaps.len(), 1, "{:?}", c.gaps);
        assert_eq!(c.gaps[0].key, "watch/reused@silence");
        // Reopened within the bound: covered.
        let mut quick = recs.to_vec();
        quick[5] = at(15_000.0, 5.0, "connect", Outcome::Ok);
        let all: Vec<&Record> = quick.iter().collect();
        assert!(checked(&all, &[], &reused, &w).gaps.is_empty());
        // Asked for on new connections too, where nothing recorded: blind.
        let both = ProbePlan {
            modes: vec![ConnMode::New, ConnMode::Reused],
            ..reused
        };
        let c = checked(&all, &[], &both, &w);
        assert_eq!(c.gaps.len(), 1, "{:?}", c.gaps);
        assert_eq!(c.gaps[0].key, "watch/new@none");
        assert!(c.gaps[0].what.contains("recorded nothing"));
    }

    #[test]
    fn a_lane_silent_longer_than_its_timeout_is_blind_whatever_its_samples() {
        // get/new every 100 ms, silent from 4 s to 47 s; each 3 s step
        // before and after has its samples.
        let mut recs = series(ProbeKind::Get, ConnMode::New, 0.0, 4_000.0, 100.0, None);
        recs.extend(series(
            ProbeKind::Get,
            ConnMode::New,
            47_000.0,
            60_000.0,
            100.0,
            None,
        ));
        let all: Vec<&Record> = recs.iter().collect();
        let events = [
            phase("a", 0.0, 3_500.0),
            phase("b", 47_000.0, 55_000.0),
            stopped(60_000.0),
        ];
        let plan = plan_of(vec![ProbeKind::Get]);
        let window = window_of(60.0);
        let c = checked(&all, &events, &plan, &window);
        assert_eq!(c.gaps.len(), 1, "{:?}", c.gaps);
        assert_eq!(c.gaps[0].key, "get/new@silence");
        assert!(
            c.gaps[0]
                .what
                .contains("started no request for 43.1 s (+3.9 s to +47.0 s)"),
            "{}",
            c.gaps[0].what
        );
        assert_eq!(rule(&c).status, RuleStatus::NotCovered);
        // Within the timeout and two intervals (10.2 s here) it is covered.
        let mut recs = series(ProbeKind::Get, ConnMode::New, 0.0, 4_000.0, 100.0, None);
        recs.extend(series(
            ProbeKind::Get,
            ConnMode::New,
            14_000.0,
            60_000.0,
            100.0,
            None,
        ));
        let all: Vec<&Record> = recs.iter().collect();
        let c = checked(&all, &events, &plan, &window);
        assert!(c.gaps.is_empty(), "{:?}", c.gaps);
        assert!((c.longest_silence_ms["get/new"] - 10_100.0).abs() < 1.0);
    }
}

/// The rule judged through the whole verdict (`compute`), on synthetic
/// runs (`testutil`).
#[cfg(test)]
mod judged {
    use crate::testutil::*;
    use crate::*;

    #[test]
    fn verdict_a_lane_silent_for_a_phase_is_not_covered() {
        let events = vec![phase("DestinationEtcdPeersJoined", 2_000.0, 8_000.0)];
        let c = Criteria::default();
        let v = judged(&clean_run(), &events, &c);
        assert_eq!(v.status, Status::Passed, "{:?}", v.reasons);
        assert_eq!(v.coverage.writes_after_last_step, Some(20));
        // get/reused sends nothing in the phase: nothing failed, yet FAILED.
        let recs: Vec<Record> = clean_run()
            .into_iter()
            .filter(|r| {
                !(r.probe == ProbeKind::Get && (2_000.0..8_000.0).contains(&(r.start_unix_ms - T0)))
            })
            .collect();
        let v = judged(&recs, &events, &c);
        assert_eq!(v.overall.failed(), 0);
        assert_eq!(v.status, Status::Failed);
        let r = v.rule("coverage").unwrap();
        assert_eq!(r.status, RuleStatus::NotCovered);
        assert!(
            r.message
                .contains("get/reused started 0 request(s) in DestinationEtcdPeersJoined"),
            "{}",
            r.message
        );
        assert_eq!(
            v.coverage.gaps[0].key,
            "get/reused@DestinationEtcdPeersJoined"
        );
        // A lane the plan names but no record shows is as blind.
        let plan = ProbePlan {
            probes: vec![
                ProbeKind::Readyz,
                ProbeKind::Get,
                ProbeKind::List,
                ProbeKind::Write,
            ],
            modes: vec![ConnMode::New, ConnMode::Reused],
            rate: 20.0,
            timeout_ms: 2_000.0,
            write_rate: 0.0,
        };
        let recs = clean_run();
        let v = judge(
            &Inputs {
                records: &recs,
                events: &events,
                final_read: &read_back(&recs, Some(100)),
                elections: &[],
                plan: Some(&plan),
                listeners_closed: &[],
                present: None,
                cpu: &[],
            },
            &c,
        );
        assert!(v
            .coverage
            .gaps
            .iter()
            .any(|g| g.key == "list/new@DestinationEtcdPeersJoined"));
        // No write acknowledged after the last step.
        let recs: Vec<Record> = clean_run()
            .into_iter()
            .filter(|r| !(r.probe == ProbeKind::Write && r.start_unix_ms >= T0 + 8_000.0))
            .collect();
        let v = judged(&recs, &events, &c);
        assert!(v
            .coverage
            .gaps
            .iter()
            .any(|g| g.key == "writes-after-last-step"));
        assert_eq!(v.status, Status::Failed);
    }
}
