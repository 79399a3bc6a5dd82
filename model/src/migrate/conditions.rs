//! Upstream's `status.liveMigration.conditions`: the steps of a Live Control
//! Plane Migration, in order, each a Kubernetes-style condition, and which
//! seed's gardenlet owns each (upstream's draft reconciler,
//! `pkg/gardenlet/controller/shoot/shoot/reconciler_livemigrate.go`).

use serde::{Deserialize, Serialize};

/// The condition types, in the order the flow sets them.
pub const STEPS: &[&str] = &[
    "SourceEtcdPreparedForPeerJoin",
    "DestinationEtcdPeersJoined",
    "MigrateExtensionsNeededBeforeKubeAPIServer",
    "DestinationKubeAPIServerReady",
    "MigrateDNSRecords",
    "EtcdMigrationComplete",
    "SourceSeedCleanup",
    "MigrationCompleted",
];

/// A condition's status, as Gardener's `ConditionStatus` spells it
/// (`pkg/apis/core/v1beta1/types_common.go`: True, False, Unknown,
/// Progressing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    True,
    False,
    Unknown,
    Progressing,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
            Status::Progressing => "Progressing",
        }
    }
    /// Gardener's spelling; anything else is Unknown.
    pub fn parse(s: &str) -> Status {
        match s {
            "True" => Status::True,
            "False" => Status::False,
            "Progressing" => Status::Progressing,
            _ => Status::Unknown,
        }
    }
}

/// The gardenlet that owns a step: the source seed's or the destination's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Owner {
    Source,
    Destination,
}

impl Owner {
    pub fn as_str(self) -> &'static str {
        match self {
            Owner::Source => "source",
            Owner::Destination => "destination",
        }
    }
    pub fn other(self) -> Owner {
        match self {
            Owner::Source => Owner::Destination,
            Owner::Destination => Owner::Source,
        }
    }
}

/// Who owns `step` (the draft's split: the source prepares its etcd,
/// migrates the extensions the API needs and the DNS records, and cleans
/// up; the destination joins, starts its API, completes etcd's migration
/// and the migration).
pub fn owner(step: &str) -> Option<Owner> {
    match step {
        "SourceEtcdPreparedForPeerJoin"
        | "MigrateExtensionsNeededBeforeKubeAPIServer"
        | "MigrateDNSRecords"
        | "SourceSeedCleanup" => Some(Owner::Source),
        "DestinationEtcdPeersJoined"
        | "DestinationKubeAPIServerReady"
        | "EtcdMigrationComplete"
        | "MigrationCompleted" => Some(Owner::Destination),
        _ => None,
    }
}

/// The reasons the draft gives a step's condition as it goes.
pub const REASON_IN_PROGRESS: &str = "StepInProgress";
pub const REASON_COMPLETED: &str = "StepCompleted";
pub const REASON_FAILED: &str = "StepFailed";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: String,
    pub status: Status,
    pub reason: String,
    pub message: String,
    /// RFC 3339.
    pub last_transition_time: String,
}

/// All conditions of one migration, Unknown until their step runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conditions(pub Vec<Condition>);

impl Conditions {
    pub fn new(now: &str) -> Conditions {
        Conditions(
            STEPS
                .iter()
                .map(|k| Condition {
                    kind: k.to_string(),
                    status: Status::Unknown,
                    reason: "Pending".into(),
                    message: String::new(),
                    last_transition_time: now.to_string(),
                })
                .collect(),
        )
    }

    pub fn get(&self, kind: &str) -> Option<&Condition> {
        self.0.iter().find(|c| c.kind == kind)
    }

    /// Sets a condition; the transition time moves only when the status does.
    pub fn set(&mut self, kind: &str, status: Status, reason: &str, message: &str, now: &str) {
        let c = self
            .0
            .iter_mut()
            .find(|c| c.kind == kind)
            .unwrap_or_else(|| panic!("unknown condition type {kind}"));
        if c.status != status {
            c.last_transition_time = now.to_string();
        }
        c.status = status;
        c.reason = reason.to_string();
        c.message = message.to_string();
    }

    /// The first step that is not True yet: where a (resumed) run goes on.
    pub fn next_step(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|c| c.status != Status::True)
            .map(|c| c.kind.as_str())
    }

    /// A step that failed (False), which only an abort may follow.
    pub fn failed(&self) -> Option<&Condition> {
        self.0.iter().find(|c| c.status == Status::False)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_run_in_order_and_resume_where_they_stopped() {
        let mut c = Conditions::new("t0");
        assert_eq!(c.0.len(), 8);
        assert_eq!(c.next_step(), Some("SourceEtcdPreparedForPeerJoin"));
        c.set(
            "SourceEtcdPreparedForPeerJoin",
            Status::True,
            "Prepared",
            "",
            "t1",
        );
        c.set(
            "DestinationEtcdPeersJoined",
            Status::Unknown,
            "Joining",
            "1/3",
            "t2",
        );
        assert_eq!(c.next_step(), Some("DestinationEtcdPeersJoined"));
        let first = c.get("SourceEtcdPreparedForPeerJoin").unwrap();
        assert_eq!(first.last_transition_time, "t1");
        // Same status again: the transition time stays.
        c.set(
            "SourceEtcdPreparedForPeerJoin",
            Status::True,
            "Prepared",
            "again",
            "t9",
        );
        assert_eq!(
            c.get("SourceEtcdPreparedForPeerJoin")
                .unwrap()
                .last_transition_time,
            "t1"
        );
        c.set(
            "DestinationEtcdPeersJoined",
            Status::False,
            "Failed",
            "peer unreachable",
            "t3",
        );
        assert_eq!(c.failed().unwrap().reason, "Failed");
    }

    #[test]
    fn every_step_has_an_owner_and_they_alternate() {
        let owners: Vec<Owner> = STEPS.iter().map(|s| owner(s).unwrap()).collect();
        for w in owners.windows(2) {
            assert_ne!(w[0], w[1], "{owners:?}");
        }
        assert_eq!(owners[0], Owner::Source);
        assert_eq!(owner("Nope"), None);
        assert_eq!(Status::parse("Progressing"), Status::Progressing);
        assert_eq!(Status::parse("weird"), Status::Unknown);
        assert_eq!(Status::Progressing.as_str(), "Progressing");
    }

    #[test]
    fn conditions_serialise_as_upstream_spells_them() {
        let c = Conditions::new("2026-11-21T00:00:00Z");
        let j = serde_json::to_value(&c).unwrap();
        assert_eq!(j[0]["type"], "SourceEtcdPreparedForPeerJoin");
        assert_eq!(j[0]["status"], "Unknown");
        assert!(j[0]["lastTransitionTime"].is_string());
    }
}
