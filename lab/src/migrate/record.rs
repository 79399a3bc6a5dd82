//! What a migration keeps in the lab's state file: the plan, the conditions,
//! the destination members and API servers it plans and creates, and the
//! source members that have left (their containers go in SourceSeedCleanup).
//! Written before and after every step, so a killed run resumes.

use serde::{Deserialize, Serialize};

use super::conditions::Conditions;
use super::membership::Plan;
use crate::state::{ApiServerState, MemberState};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    /// cpmlab's reference controller (gardenlet's and etcd-druid's roles).
    Reference,
    /// A given command does the migration; the lab probes and records.
    External,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MigrationState {
    pub plan: Plan,
    pub from: String,
    pub to: String,
    pub driver: Driver,
    /// `--force-shrink-etcd`: source members leave before the destination
    /// API server, DNS switches at once (bounded downtime).
    #[serde(default)]
    pub force_shrink: bool,
    /// How the source leader leaves (a state from before the setting read
    /// as `move-leader`, what it did then).
    #[serde(default = "handover_before_the_setting")]
    pub leader_handover: crate::migrate::membership::LeaderHandover,
    pub conditions: Conditions,
    pub started_unix_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_unix_ms: Option<f64>,
    /// RTT between the seeds measured before the start, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    /// How `rtt_ms` was measured and the bound it was held to, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_gate: Option<String>,
    /// The destination's members, in join order (planned at the start).
    pub destination_members: Vec<MemberState>,
    /// The destination's API server replicas (planned at the start).
    pub destination_apiservers: Vec<ApiServerState>,
    /// Source members removed from etcd whose containers still exist.
    #[serde(default)]
    pub departed_members: Vec<MemberState>,
    /// When the shoot API name started answering the destination (for the
    /// TTL wait across a resume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_switched_unix_ms: Option<f64>,
    /// The external driver's command, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

fn handover_before_the_setting() -> crate::migrate::membership::LeaderHandover {
    crate::migrate::membership::LeaderHandover::MoveLeader
}

impl MigrationState {
    pub fn completed(&self) -> bool {
        self.conditions.next_step().is_none()
    }
}
