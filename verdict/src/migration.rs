//! The `migration-completed` rule: a run whose criteria expect the
//! migration to complete passes only if its events show it did, to the
//! end. The end of a run is evidence, not an assumption: a run directory
//! whose events stop half-way (the lab killed, its events cut short) must
//! not pass on its probes alone.
//!
//! The criteria name the steps they expect (`migration_steps`, in order;
//! without them, `MigrationCompleted` alone). Each step is a `phase`
//! event of its name; its outcome is the `status` of the one that ended
//! last of those that carry one (`True`, `False`, `Unknown`: the step's
//! condition as the flow set it when the step ended). The rule requires
//! - every expected step, its outcome `True`;
//! - in the order expected (each step's event at or after the one before);
//! - and `probes stopped` noted after the last step ended: the run's end
//!   was recorded.
//!
//! Events of other kinds, other steps and extra fields are not this
//! rule's (a step's progress, a hand-off's timings). An older layout's step
//! events carry no outcome: they are judged by name and order, and the
//! rule is degraded for it (see `layout`).

use super::{Rule, RuleStatus};
use crate::criteria::Criteria;
use crate::record::LabEvent;

pub const RULE: &str = "migration-completed";

/// The step the flow records when the migration has completed.
pub const COMPLETED: &str = "MigrationCompleted";

/// The outcomes a step event's `status` may carry.
pub const STATUSES: [&str; 3] = ["True", "False", "Unknown"];

/// The note that the probes stopped.
const PROBES_STOPPED: &str = "probes stopped";

/// A step's outcome event: of the `phase` events of its name with an
/// outcome, the one that ended last (a step's progress, recorded as it
/// began, ends before the step does), else the last of its name.
fn outcome_of<'a>(events: &'a [LabEvent], step: &str) -> Option<&'a LabEvent> {
    let mut of_step = events
        .iter()
        .filter(|e| e.kind == "phase" && e.name == step);
    let with: Option<&LabEvent> = of_step
        .clone()
        .filter(|e| e.status.as_deref().is_some_and(|s| STATUSES.contains(&s)))
        .max_by(|a, b| end_of(a).total_cmp(&end_of(b)));
    with.or_else(|| of_step.next_back())
}

fn end_of(e: &LabEvent) -> f64 {
    e.end_unix_ms.unwrap_or(e.at_unix_ms).max(e.at_unix_ms)
}

/// Whether some step event carries no outcome (an older layout's).
pub fn steps_without_status(events: &[LabEvent]) -> bool {
    events
        .iter()
        .any(|e| e.kind == "phase" && e.status.is_none())
}

/// A step event in words: its name and outcome.
fn said(e: &LabEvent) -> String {
    match e.status.as_deref() {
        Some(s) => format!("{} ({s})", e.name),
        None => format!("{} (no outcome recorded)", e.name),
    }
}

/// The steps the events hold, in words (`--explain-layout`).
pub fn describe_steps(events: &[LabEvent]) -> String {
    let steps: Vec<&LabEvent> = events.iter().filter(|e| e.kind == "phase").collect();
    match steps.iter().max_by(|a, b| end_of(a).total_cmp(&end_of(b))) {
        None => "no migration step".into(),
        Some(last) => format!(
            "{} step event(s){}, the last {}",
            steps.len(),
            if steps_without_status(events) {
                ", not all with their outcome"
            } else {
                ", each with its outcome"
            },
            said(last)
        ),
    }
}

/// `strict`: the layout records each step's outcome, so a step event
/// without one is no True step.
pub fn rule(events: &[LabEvent], criteria: &Criteria, strict: bool) -> Rule {
    let name = RULE.to_string();
    match criteria.migration.as_deref() {
        Some("completed") => {}
        Some(other) => {
            return Rule {
                name,
                status: RuleStatus::Skipped,
                message: format!(
                    "the criteria expect the migration to end {other}: the scenario's expectations judge that"
                ),
            }
        }
        None => {
            return Rule {
                name,
                status: RuleStatus::Skipped,
                message: "the criteria expect no migration outcome".into(),
            }
        }
    }
    let failed = |message: String| Rule {
        name: RULE.to_string(),
        status: RuleStatus::Failed,
        message,
    };
    let expected: Vec<&str> = if criteria.migration_steps.is_empty() {
        vec![COMPLETED]
    } else {
        criteria
            .migration_steps
            .iter()
            .map(String::as_str)
            .collect()
    };
    // The last step seen: the latest of the expected steps' events.
    let last_seen = expected
        .iter()
        .filter_map(|s| outcome_of(events, s))
        .max_by(|a, b| end_of(a).total_cmp(&end_of(b)))
        .map_or("none".to_string(), said);
    let mut before: Option<&LabEvent> = None;
    for step in &expected {
        let Some(e) = outcome_of(events, step) else {
            return failed(format!(
                "the criteria expect the migration to complete, and the run's events stop early: no {step} step (the last step recorded: {last_seen})"
            ));
        };
        match e.status.as_deref() {
            Some("True") => {}
            None if !strict => {}
            None => {
                return failed(format!(
                    "the criteria expect the migration to complete, and the {step} step's event carries no outcome: nothing says it held (the last step recorded: {last_seen})"
                ))
            }
            Some(s) => {
                return failed(format!(
                    "the criteria expect the migration to complete, and the {step} step ended {s} (the last step recorded: {last_seen})"
                ))
            }
        }
        if let Some(b) = before.filter(|b| e.at_unix_ms < b.at_unix_ms) {
            return failed(format!(
                "the criteria expect the steps {}, in this order, and {step} was recorded before {}",
                expected.join(", "),
                b.name
            ));
        }
        before = Some(e);
    }
    let last = before.expect("at least one step is expected");
    let end = end_of(last);
    let Some(stopped) = events
        .iter()
        .filter(|e| e.kind == "note" && e.name.starts_with(PROBES_STOPPED))
        .map(|e| e.at_unix_ms)
        .filter(|t| *t >= end)
        .reduce(f64::max)
    else {
        return failed(format!(
            "the run's events end without `{PROBES_STOPPED}` after its last step, {}: the run's end was not recorded",
            said(last)
        ));
    };
    Rule {
        name,
        status: RuleStatus::Passed,
        message: format!(
            "the migration completed: {} step(s) in order, {}, and the probes stopped {:.1} s after {}",
            expected.len(),
            if strict {
                "each True"
            } else {
                "each recorded"
            },
            (stopped - end) / 1e3,
            last.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(name: &str, at: f64, status: Option<&str>) -> LabEvent {
        LabEvent {
            at_unix_ms: at,
            end_unix_ms: Some(at + 1.0),
            kind: "phase".into(),
            name: name.into(),
            detail: String::new(),
            status: status.map(str::to_string),
        }
    }

    fn stopped(at: f64) -> LabEvent {
        LabEvent {
            at_unix_ms: at,
            end_unix_ms: None,
            kind: "note".into(),
            name: "probes stopped".into(),
            detail: String::new(),
            status: None,
        }
    }

    fn completed(steps: &[&str]) -> Criteria {
        Criteria {
            migration: Some("completed".into()),
            migration_steps: steps.iter().map(|s| s.to_string()).collect(),
            ..Criteria::default()
        }
    }

    const STEPS: [&str; 3] = [
        "SourceEtcdPreparedForPeerJoin",
        "DestinationEtcdPeersJoined",
        "MigrationCompleted",
    ];

    fn whole() -> Vec<LabEvent> {
        vec![
            phase(STEPS[0], 1.0, Some("True")),
            phase(STEPS[1], 2.0, Some("True")),
            phase(STEPS[2], 3.0, Some("True")),
            stopped(10.0),
        ]
    }

    #[test]
    fn a_completed_migration_has_every_step_true_in_order_and_its_end() {
        let r = rule(&whole(), &completed(&STEPS), true);
        assert_eq!(r.status, RuleStatus::Passed, "{}", r.message);
        // Extra events and fields are not the rule's: a step's progress,
        // recorded as it began, with or without an outcome of its own.
        let mut more = whole();
        more.insert(0, phase(STEPS[1], 1.5, Some("Progressing")));
        more.insert(
            0,
            LabEvent {
                end_unix_ms: None,
                ..phase(STEPS[1], 2.1, Some("Unknown"))
            },
        );
        more.push(LabEvent {
            kind: "handoff".into(),
            ..phase("gardenlet", 2.5, None)
        });
        assert_eq!(
            rule(&more, &completed(&STEPS), true).status,
            RuleStatus::Passed
        );
    }

    #[test]
    fn events_that_stop_early_fail_with_the_last_step_seen() {
        let half = &whole()[..2];
        let r = rule(half, &completed(&STEPS), true);
        assert_eq!(r.status, RuleStatus::Failed);
        assert!(
            r.message.contains("stop early: no MigrationCompleted step")
                && r.message
                    .contains("the last step recorded: DestinationEtcdPeersJoined (True)"),
            "{}",
            r.message
        );
        // Every step, but the end not recorded.
        let r = rule(&whole()[..3], &completed(&STEPS), true);
        assert!(
            r.message
                .contains("without `probes stopped` after its last step"),
            "{}",
            r.message
        );
    }

    #[test]
    fn a_step_not_true_or_out_of_order_fails() {
        let mut ev = whole();
        ev[1].status = Some("False".into());
        let r = rule(&ev, &completed(&STEPS), true);
        assert!(
            r.message
                .contains("the DestinationEtcdPeersJoined step ended False"),
            "{}",
            r.message
        );
        let mut ev = whole();
        ev[0].at_unix_ms = 2.5;
        let r = rule(&ev, &completed(&STEPS), true);
        assert!(
            r.message.contains(
                "DestinationEtcdPeersJoined was recorded before SourceEtcdPreparedForPeerJoin"
            ),
            "{}",
            r.message
        );
        // Without an outcome: no True step where the layout records it.
        let mut ev = whole();
        ev[2].status = None;
        assert_eq!(
            rule(&ev, &completed(&STEPS), true).status,
            RuleStatus::Failed
        );
        assert_eq!(
            rule(&ev, &completed(&STEPS), false).status,
            RuleStatus::Passed
        );
    }

    #[test]
    fn other_outcomes_or_none_are_not_this_rules() {
        let c = Criteria {
            migration: Some("aborted".into()),
            ..Criteria::default()
        };
        assert_eq!(rule(&[], &c, true).status, RuleStatus::Skipped);
        assert_eq!(
            rule(&[], &Criteria::default(), true).status,
            RuleStatus::Skipped
        );
        // Without named steps: MigrationCompleted alone.
        let r = rule(&whole(), &completed(&[]), true);
        assert_eq!(r.status, RuleStatus::Passed, "{}", r.message);
    }
}
