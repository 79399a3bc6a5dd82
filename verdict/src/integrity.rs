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
//!   is not checked, and the message says so.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{fmt_list, lane_key, push_capped, record_end, Rule, RuleStatus};
use crate::record::{LabEvent, Outcome, Record};

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
}

/// When the lab noted something starting with `prefix`: all of them.
fn noted<'a>(events: &'a [LabEvent], prefix: &'a str) -> impl DoubleEndedIterator<Item = f64> + 'a {
    events
        .iter()
        .filter(move |e| e.kind == "note" && e.name.starts_with(prefix))
        .map(|e| e.at_unix_ms)
}

pub fn check(all: &[&Record], events: &[LabEvent]) -> Integrity {
    let mut out = Integrity {
        records: all.len() as u64,
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
    for r in all.iter().copied() {
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
    out.problems = problems;
    out.count = count;
    out
}

pub fn rule(i: &Integrity) -> Rule {
    let name = RULE.to_string();
    let window = if i.window.is_some() {
        ""
    } else {
        " (the probes' start and stop were not noted in events.ndjson: their times not checked)"
    };
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
        check(&all, events)
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
        recs.push(late);
        let i = run(&recs, &window());
        assert_eq!(i.count, 1, "{:?}", i.problems);
        assert!(i.problems[0].contains("outside the probes' run"));
        // Within the slack is fine.
        let mut near = rec(ProbeKind::Get, ConnMode::New, 12_500.0, 3.0, Outcome::Ok);
        near.seq = 99_999;
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
}
