//! The `record-integrity` rule: the records are what the probes could have
//! written. Every other rule trusts them; a run directory whose records
//! contradict themselves (edited by hand, merged from two runs, or written
//! by a broken agent) must not pass on their word:
//!
//! - each record's `seq` is unique (every agent of a run numbers from one
//!   counter: the lanes, client-go's and the node's share it);
//! - a success is a success: outcome `ok` with an HTTP status carries a
//!   2xx;
//! - durations are finite and not negative, timestamps finite;
//! - every record lies between the probes' start and stop as the lab noted
//!   them (`probes started`, `probes stopped` in `events.ndjson`), within
//!   [`SLACK_MS`]; without those notes (a run written elsewhere) this part
//!   is not checked, and the message says so;
//! - every record belongs to a lane the probes were asked to run, when the
//!   run keeps its plan (`probes.json`): records of another lane are not
//!   this run's probes' (see `coverage::planned_lanes`);
//! - a successful read carries what it read: a get (and the writer's or a
//!   watch's read before it starts) its value and resourceVersion, a list
//!   its resourceVersion, a watch event (ADDED, MODIFIED) its value and
//!   resourceVersion, a DELETED or BOOKMARK its resourceVersion. A read
//!   that answered without the object proves nothing, and the rules that
//!   hold reads to writes would skip it.
//!
//! Lines of the run directory's files that could not be read are not
//! judged here: they are bad input, refused before any rule (see `load`),
//! but for an unterminated last line, a killed writer's tail, which is
//! dropped and named in this rule's message.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::{fmt_list, lane_key, push_capped, record_end, Rule, RuleStatus};
use crate::load::Dropped;
use crate::record::{LabEvent, Outcome, ProbeKind, ProbePlan, Record};

pub const RULE: &str = "record-integrity";

/// How far a record may lie outside the noted start and stop: the notes
/// are written by `cpmlab` around the agent's start and stop, on the same
/// clock (in every run kept so far, the first record began 22–81 ms after
/// the start note and the last ended 2–5 s before the stop note).
pub const SLACK_MS: f64 = 1_000.0;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Integrity {
    pub records: u64,
    /// The probes' start and stop as noted, when both were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<(f64, f64)>,
    pub count: u64,
    /// The first problems, each naming its record.
    pub problems: Vec<String>,
    /// Successful reads that carried no value or resourceVersion.
    #[serde(default)]
    pub reads_without_value: u64,
    /// Records of lanes the plan does not ask for.
    #[serde(default)]
    pub unplanned: u64,
    /// Unterminated last lines dropped from the run directory's files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<Dropped>,
}

/// What a successful read must carry: (value, resourceVersion); `None`:
/// the record is no read.
pub fn read_carries(r: &Record) -> Option<(bool, bool)> {
    match (r.probe, r.event.as_deref()) {
        (ProbeKind::Get, None) => Some((true, true)),
        (ProbeKind::List, None) => Some((false, true)),
        (ProbeKind::Write | ProbeKind::Watch, Some("read")) => Some((true, true)),
        (ProbeKind::Watch, Some("ADDED" | "MODIFIED")) => Some((true, true)),
        (ProbeKind::Watch, Some("DELETED" | "BOOKMARK")) => Some((false, true)),
        _ => None,
    }
}

/// When the lab noted something starting with `prefix`: all of them.
fn noted<'a>(events: &'a [LabEvent], prefix: &'a str) -> impl DoubleEndedIterator<Item = f64> + 'a {
    events
        .iter()
        .filter(move |e| e.kind == "note" && e.name.starts_with(prefix))
        .map(|e| e.at_unix_ms)
}

pub fn check(
    all: &[&Record],
    events: &[LabEvent],
    plan: Option<&ProbePlan>,
    dropped: &[Dropped],
) -> Integrity {
    let mut out = Integrity {
        records: all.len() as u64,
        dropped: dropped.to_vec(),
        ..Integrity::default()
    };
    let started = noted(events, "probes started").next();
    let stopped = noted(events, "probes stopped").next_back();
    if let (Some(a), Some(b)) = (started, stopped) {
        out.window = Some((a, b));
    }
    let t0 = started.unwrap_or_else(|| all.first().map_or(0.0, |r| r.start_unix_ms));
    let name = |r: &Record| {
        format!(
            "{} seq {} at +{:.3} s",
            lane_key(r.probe, r.mode),
            r.seq,
            (r.start_unix_ms - t0) / 1e3
        )
    };
    let mut seen: HashMap<u64, &Record> = HashMap::new();
    let (mut problems, mut count) = (Vec::new(), 0u64);
    let planned = plan.map(crate::coverage::planned_lanes);
    // Per lane: (records, the first) outside the plan; reads without what
    // they read.
    let mut unplanned: BTreeMap<String, (u64, &Record)> = BTreeMap::new();
    let mut unread: BTreeMap<String, (u64, &Record)> = BTreeMap::new();
    for r in all.iter().copied() {
        if let (Some(p), Some(l)) = (plan, &planned) {
            if !crate::coverage::in_plan(p, l, r) {
                unplanned
                    .entry(lane_key(r.probe, r.mode))
                    .or_insert((0, r))
                    .0 += 1;
            }
        }
        if let Some((value, rv)) = read_carries(r).filter(|_| r.outcome == Outcome::Ok) {
            if (value && r.value.is_none()) || (rv && r.rv.is_none()) {
                let what = match r.event.as_deref() {
                    None => lane_key(r.probe, r.mode),
                    Some(e) => format!("{} {e}", lane_key(r.probe, r.mode)),
                };
                unread.entry(what).or_insert((0, r)).0 += 1;
            }
        }
        if let Some(first) = seen.insert(r.seq, r) {
            push_capped(
                &mut problems,
                &mut count,
                format!("{}: seq taken already by {}", name(r), name(first)),
            );
        }
        if r.outcome == Outcome::Ok {
            if let Some(s) = r.http_status.filter(|s| !(200..300).contains(s)) {
                push_capped(
                    &mut problems,
                    &mut count,
                    format!("{}: outcome ok with HTTP {s}", name(r)),
                );
            }
        }
        if !r.start_unix_ms.is_finite() || !r.duration_ms.is_finite() || r.duration_ms < 0.0 {
            push_capped(
                &mut problems,
                &mut count,
                format!(
                    "{}: start {} and duration {} ms are not a request's",
                    name(r),
                    r.start_unix_ms,
                    r.duration_ms
                ),
            );
            continue;
        }
        if let Some((a, b)) = out.window {
            if r.start_unix_ms < a - SLACK_MS || record_end(r) > b + SLACK_MS {
                push_capped(
                    &mut problems,
                    &mut count,
                    format!(
                        "{}: outside the probes' run (started +0 s, stopped +{:.3} s), ending +{:.3} s",
                        name(r),
                        (b - a) / 1e3,
                        (record_end(r) - t0) / 1e3
                    ),
                );
            }
        }
    }
    for (lane, (n, first)) in &unplanned {
        out.unplanned += n;
        push_capped(
            &mut problems,
            &mut count,
            format!(
                "{n} record(s) of {lane}, a lane the probes' plan (probes.json) does not ask for (the first: {})",
                name(first)
            ),
        );
    }
    for (what, (n, first)) in &unread {
        out.reads_without_value += n;
        push_capped(
            &mut problems,
            &mut count,
            format!(
                "{n} successful {what} read(s) carry no value or resourceVersion: a read that answered without what it read proves nothing (the first: {})",
                name(first)
            ),
        );
    }
    out.problems = problems;
    out.count = count;
    out
}

pub fn rule(i: &Integrity) -> Rule {
    let name = RULE.to_string();
    let mut window = if i.window.is_some() {
        String::new()
    } else {
        " (the probes' start and stop were not noted in events.ndjson: their times not checked)"
            .to_string()
    };
    if !i.dropped.is_empty() {
        window.push_str(&format!(
            "; dropped: {}",
            i.dropped
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if i.count == 0 {
        return Rule {
            name,
            status: RuleStatus::Passed,
            message: format!(
                "{} record(s): unique seqs, successes with 2xx, each inside the probes' run{window}",
                i.records
            ),
        };
    }
    Rule {
        name,
        status: RuleStatus::Failed,
        message: format!(
            "{} record(s) the probes cannot have written: {}{window}",
            i.count,
            fmt_list(&i.problems, i.count)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ConnMode, ProbeKind};
    use crate::testutil::*;

    fn note(at: f64, name: &str) -> LabEvent {
        LabEvent {
            at_unix_ms: T0 + at,
            end_unix_ms: None,
            kind: "note".into(),
            name: name.into(),
            detail: String::new(),
            status: None,
        }
    }

    fn numbered(mut recs: Vec<Record>) -> Vec<Record> {
        for (i, r) in recs.iter_mut().enumerate() {
            r.seq = i as u64;
        }
        recs
    }

    fn run(recs: &[Record], events: &[LabEvent]) -> Integrity {
        let all: Vec<&Record> = recs.iter().collect();
        check(&all, events, None, &[])
    }

    fn window() -> Vec<LabEvent> {
        vec![
            note(
                -50.0,
                "probes started; the kube-apiserver API server serves",
            ),
            note(12_000.0, "probes stopped"),
        ]
    }

    #[test]
    fn a_clean_run_passes() {
        let recs = numbered(clean_run());
        let i = run(&recs, &window());
        assert_eq!(i.count, 0, "{:?}", i.problems);
        assert_eq!(rule(&i).status, RuleStatus::Passed);
        // Without the notes the times are not checked, and it says so.
        let i = run(&recs, &[]);
        assert!(rule(&i).message.contains("not checked"));
    }

    #[test]
    fn a_seq_twice_fails() {
        let mut recs = numbered(clean_run());
        recs[7].seq = 3;
        let i = run(&recs, &window());
        assert_eq!(i.count, 1);
        assert!(
            i.problems[0].contains("seq taken already"),
            "{:?}",
            i.problems
        );
        assert_eq!(rule(&i).status, RuleStatus::Failed);
    }

    #[test]
    fn a_success_with_a_500_fails() {
        let mut recs = numbered(clean_run());
        let r = recs.iter_mut().find(|r| r.probe == ProbeKind::Get).unwrap();
        r.http_status = Some(500);
        let i = run(&recs, &window());
        assert!(
            i.problems[0].contains("outcome ok with HTTP 500"),
            "{:?}",
            i.problems
        );
    }

    #[test]
    fn a_record_an_hour_outside_the_run_fails() {
        let mut recs = numbered(clean_run());
        let mut late = rec(ProbeKind::Get, ConnMode::New, 3_600_000.0, 3.0, Outcome::Ok);
        late.seq = 99_999;
        (late.value, late.rv) = (Some(100), Some(1099));
        recs.push(late);
        let i = run(&recs, &window());
        assert_eq!(i.count, 1, "{:?}", i.problems);
        assert!(i.problems[0].contains("outside the probes' run"));
        // Within the slack is fine.
        let mut near = rec(ProbeKind::Get, ConnMode::New, 12_500.0, 3.0, Outcome::Ok);
        near.seq = 99_999;
        (near.value, near.rv) = (Some(100), Some(1099));
        let mut recs = numbered(clean_run());
        recs.push(near);
        assert_eq!(run(&recs, &window()).count, 0);
    }

    #[test]
    fn a_negative_duration_fails() {
        let mut recs = numbered(clean_run());
        recs[4].duration_ms = -5.0;
        let i = run(&recs, &window());
        assert!(
            i.problems[0].contains("not a request's"),
            "{:?}",
            i.problems
        );
    }

    #[test]
    fn records_of_a_lane_not_asked_for_and_reads_without_value_fail() {
        let recs = numbered(clean_run());
        let all: Vec<&Record> = recs.iter().collect();
        let plan = ProbePlan {
            probes: vec![ProbeKind::Readyz, ProbeKind::Get, ProbeKind::Write],
            modes: vec![ConnMode::New],
            rate: 20.0,
            timeout_ms: 2_000.0,
            write_rate: 0.0,
        };
        let i = check(&all, &window(), Some(&plan), &[]);
        // clean_run's reused lanes: get (200), write (100), watch (its
        // connect and 100 events).
        assert_eq!(i.unplanned, 401, "{:?}", i.problems);
        assert!(
            i.problems
                .iter()
                .any(|p| p.starts_with("200 record(s) of get/reused, a lane")),
            "{:?}",
            i.problems
        );
        let mut recs = numbered(clean_run());
        for r in recs
            .iter_mut()
            .filter(|r| r.probe == ProbeKind::Get)
            .take(50)
        {
            r.value = None;
            r.rv = None;
        }
        let i = run(&recs, &window());
        assert_eq!(i.reads_without_value, 50);
        let r = rule(&i);
        assert_eq!(r.status, RuleStatus::Failed);
        assert!(
            r.message
                .contains("50 successful get/reused read(s) carry no value or resourceVersion"),
            "{}",
            r.message
        );
    }

    #[test]
    fn a_dropped_tail_is_named_and_passes() {
        let recs = numbered(clean_run());
        let all: Vec<&Record> = recs.iter().collect();
        let d = Dropped {
            file: "records.ndjson".into(),
            line: 401,
            bytes: 57,
        };
        let r = rule(&check(&all, &window(), None, &[d]));
        assert_eq!(r.status, RuleStatus::Passed);
        assert!(
            r.message.contains(
                "dropped: records.ndjson line 401 (57 bytes, no newline: a killed writer's tail)"
            ),
            "{}",
            r.message
        );
    }
}
