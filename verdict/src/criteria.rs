//! What a run is judged against: the latency limits, the stall bound, the
//! coverage minimums, the known hazards a scenario accepts (each with a
//! budget) and the checks it accepts as not covered, with why. A scenario
//! declares them under `expect:`; `cpmlab run` writes them into the run
//! directory as `criteria.json`, where `cpmlab verdict RUN_DIR` finds them
//! again. Without that file a run is judged by the defaults: nothing
//! excused, nothing accepted as not covered.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Thresholds;

/// The file in a run directory that holds the criteria it is judged by.
pub const CRITERIA_FILE: &str = "criteria.json";

/// A known etcd hazard a scenario may accept.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Hazard {
    /// Raft drops a proposal that reaches the leader while it hands
    /// leadership over (etcd's MoveLeader): the write waits out etcd's
    /// request timeout and fails. Only in runs whose handover is MoveLeader.
    MoveLeader,
    /// A member SIGKILLed under load fails the requests in flight through it.
    KilledMember,
    /// While the cluster elects a leader, requests wait or fail.
    LeaderElection,
}

impl Hazard {
    pub const ALL: [Hazard; 3] = [
        Hazard::MoveLeader,
        Hazard::KilledMember,
        Hazard::LeaderElection,
    ];

    /// The name scenario files use.
    pub fn name(self) -> &'static str {
        match self {
            Hazard::MoveLeader => "move-leader",
            Hazard::KilledMember => "killed-member",
            Hazard::LeaderElection => "leader-election",
        }
    }
}

impl std::fmt::Display for Hazard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How much of a hazard a scenario accepts. Over budget, the verdict fails.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// The most requests this hazard may excuse in the run.
    pub max: u64,
    /// The longest any one excused request may have taken, milliseconds
    /// (from its start to its end, as the client saw it).
    pub max_ms: f64,
    /// The lanes it may excuse: `write`, `get`, ... (every mode of the
    /// probe) or one lane, `get/new`. `move-leader` and `killed-member`
    /// default to `[write]`; `leader-election` must name its lanes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<String>,
}

/// The lanes a hazard excuses when its budget names none.
pub fn default_lanes(h: Hazard) -> &'static [&'static str] {
    match h {
        Hazard::MoveLeader | Hazard::KilledMember => &["write"],
        Hazard::LeaderElection => &[],
    }
}

impl Budget {
    /// The lanes this budget covers, defaults filled in.
    pub fn lanes_for(&self, h: Hazard) -> Vec<String> {
        if self.lanes.is_empty() {
            default_lanes(h).iter().map(|s| s.to_string()).collect()
        } else {
            self.lanes.clone()
        }
    }

    /// Whether the budget covers the lane `probe/mode`.
    pub fn covers(&self, h: Hazard, lane: &str) -> bool {
        let probe = lane.split('/').next().unwrap_or(lane);
        self.lanes_for(h).iter().any(|l| l == lane || l == probe)
    }
}

/// The coverage minimums (see `coverage`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Coverage {
    /// Phases at least this long must hold `min_samples` per lane, ms.
    pub min_phase_ms: f64,
    /// Requests each lane must have started in such a phase.
    pub min_samples: u64,
}

/// Phases of 3 s or more are judged for coverage ...
pub const COVERAGE_MIN_PHASE_MS: f64 = 3_000.0;
/// ... and must hold at least 3 requests per lane (the probes' default
/// rate puts 60 there).
pub const COVERAGE_MIN_SAMPLES: u64 = 3;
/// A successful request slower than this counts as unavailable.
pub const STALL_MS: f64 = 5_000.0;

impl Default for Coverage {
    fn default() -> Self {
        Coverage {
            min_phase_ms: COVERAGE_MIN_PHASE_MS,
            min_samples: COVERAGE_MIN_SAMPLES,
        }
    }
}

/// Everything the verdict judges a run against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Criteria {
    pub thresholds: Thresholds,
    /// A successful request slower than this counts as unavailable, ms.
    pub stall_ms: f64,
    pub coverage: Coverage,
    /// The known hazards accepted, each with its budget.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub excuse: BTreeMap<Hazard, Budget>,
    /// Checks accepted as not covered (or degraded), each with why: a
    /// coverage key (`write/new@MigrateDNSRecords`, `writes-after-last-step`,
    /// `writes-after-last-hazard`) or a rule name (`lost-writes`,
    /// `stale-reads`, `watch-continuity`, `informer`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub uncovered: BTreeMap<String, String>,
}

impl Default for Criteria {
    fn default() -> Self {
        Criteria {
            thresholds: Thresholds::default(),
            stall_ms: STALL_MS,
            coverage: Coverage::default(),
            excuse: BTreeMap::new(),
            uncovered: BTreeMap::new(),
        }
    }
}

/// The probe kinds a lane pattern may name.
const PROBES: [&str; 7] = [
    "readyz", "get", "list", "write", "watch", "informer", "load",
];

/// Whether `s` names a lane: a probe kind, or `probe/mode`.
pub fn is_lane_pattern(s: &str) -> bool {
    match s.split_once('/') {
        None => PROBES.contains(&s),
        Some((p, m)) => PROBES.contains(&p) && (m == "new" || m == "reused"),
    }
}

impl Criteria {
    /// Checks the criteria; an error names the field (`excuse.move-leader.max_ms`).
    pub fn check(&self) -> Result<(), (String, String)> {
        if !(self.stall_ms.is_finite() && self.stall_ms > 0.0) {
            return Err(("stall".into(), "a duration above zero".into()));
        }
        for (h, b) in &self.excuse {
            let f = |k: &str| format!("excuse.{h}.{k}");
            if !(b.max_ms.is_finite() && b.max_ms >= 0.0) {
                return Err((f("max_ms"), "milliseconds, zero or more".into()));
            }
            if b.max_ms > 600_000.0 {
                return Err((
                    f("max_ms"),
                    format!("{} ms: at most 600000 (10 minutes)", b.max_ms),
                ));
            }
            if *h == Hazard::LeaderElection && b.lanes.is_empty() {
                return Err((
                    f("lanes"),
                    "leader-election excuses only the lanes it names, e.g. `lanes: [write]`".into(),
                ));
            }
            for (i, l) in b.lanes.iter().enumerate() {
                if !is_lane_pattern(l) {
                    return Err((
                        format!("excuse.{h}.lanes[{i}]"),
                        format!(
                            "`{l}`: a probe ({}) or a lane such as `get/new`",
                            PROBES.join(", ")
                        ),
                    ));
                }
                if matches!(h, Hazard::MoveLeader) && !l.starts_with("write") {
                    return Err((
                        format!("excuse.{h}.lanes[{i}]"),
                        format!("`{l}`: move-leader drops proposals, so it excuses only writes"),
                    ));
                }
            }
        }
        for (k, why) in &self.uncovered {
            if why.trim().is_empty() {
                return Err((format!("uncovered.{k}"), "say why it is not covered".into()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_name_their_lanes_and_fields() {
        let b = Budget {
            max: 1,
            max_ms: 7500.0,
            lanes: vec![],
        };
        assert!(b.covers(Hazard::MoveLeader, "write/new"));
        assert!(!b.covers(Hazard::MoveLeader, "get/new"));
        assert!(!b.covers(Hazard::LeaderElection, "write/new"));
        let mut c = Criteria::default();
        c.excuse.insert(Hazard::LeaderElection, b.clone());
        assert_eq!(c.check().unwrap_err().0, "excuse.leader-election.lanes");
        c.excuse.insert(
            Hazard::LeaderElection,
            Budget {
                lanes: vec!["get/old".into()],
                ..b.clone()
            },
        );
        assert_eq!(c.check().unwrap_err().0, "excuse.leader-election.lanes[0]");
        c.excuse.insert(
            Hazard::LeaderElection,
            Budget {
                lanes: vec!["get/new".into(), "write".into()],
                ..b.clone()
            },
        );
        assert!(c.check().is_ok());
        c.excuse.insert(
            Hazard::MoveLeader,
            Budget {
                lanes: vec!["get".into()],
                ..b
            },
        );
        assert_eq!(c.check().unwrap_err().0, "excuse.move-leader.lanes[0]");
    }

    #[test]
    fn criteria_round_trip_as_json() {
        let mut c = Criteria::default();
        c.excuse.insert(
            Hazard::MoveLeader,
            Budget {
                max: 1,
                max_ms: 7500.0,
                lanes: vec![],
            },
        );
        c.uncovered
            .insert("informer".into(), "the informer is not run".into());
        let text = serde_json::to_string(&c).unwrap();
        assert!(
            text.contains("\"move-leader\":{\"max\":1,\"max_ms\":7500.0}"),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Criteria>(&text).unwrap(), c);
        // An old run directory has none: the defaults.
        assert_eq!(
            serde_json::from_str::<Criteria>("{}").unwrap(),
            Criteria::default()
        );
    }
}
