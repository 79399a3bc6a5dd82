//! The `migration-completed` rule: a run whose criteria expect the
//! migration to complete passes only if its events show it did (the
//! `MigrationCompleted` step the flow records as its last). Without it a
//! migration that stopped half-way, with the API still served from the
//! source, would pass on its probes alone.

use super::{Rule, RuleStatus};
use crate::record::LabEvent;

pub const RULE: &str = "migration-completed";

/// The step the flow records when the migration has completed.
const COMPLETED: &str = "MigrationCompleted";

pub fn rule(events: &[LabEvent], expected: Option<&str>) -> Rule {
    let name = RULE.to_string();
    match expected {
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
    let phases: Vec<&LabEvent> = events.iter().filter(|e| e.kind == "phase").collect();
    if phases.iter().any(|e| e.name == COMPLETED) {
        return Rule {
            name,
            status: RuleStatus::Passed,
            message: format!("the migration completed ({COMPLETED} recorded)"),
        };
    }
    let last = phases
        .iter()
        .max_by(|a, b| a.at_unix_ms.total_cmp(&b.at_unix_ms))
        .map_or("none".to_string(), |e| e.name.clone());
    Rule {
        name,
        status: RuleStatus::Failed,
        message: format!(
            "the criteria expect the migration to complete, and the run's events show no {COMPLETED} step (the last step recorded: {last})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(name: &str, at: f64) -> LabEvent {
        LabEvent {
            at_unix_ms: at,
            end_unix_ms: Some(at + 1.0),
            kind: "phase".into(),
            name: name.into(),
            detail: String::new(),
        }
    }

    #[test]
    fn a_migration_expected_to_complete_must_have_completed() {
        let half = [
            phase("SourceEtcdPreparedForPeerJoin", 1.0),
            phase("DestinationEtcdPeersJoined", 2.0),
        ];
        let r = rule(&half, Some("completed"));
        assert_eq!(r.status, RuleStatus::Failed);
        assert!(
            r.message
                .contains("the last step recorded: DestinationEtcdPeersJoined"),
            "{}",
            r.message
        );
        let mut done = half.to_vec();
        done.push(phase("MigrationCompleted", 3.0));
        assert_eq!(rule(&done, Some("completed")).status, RuleStatus::Passed);
        // Other outcomes, or none, are not this rule's.
        assert_eq!(rule(&half, Some("aborted")).status, RuleStatus::Skipped);
        assert_eq!(rule(&half, None).status, RuleStatus::Skipped);
    }
}
