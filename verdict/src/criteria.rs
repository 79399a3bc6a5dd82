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
    /// `stale-reads`, `watch-continuity`, `informer`, `informer-go`,
    /// `lease-exclusive`, `leader-kept`, `handover`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub uncovered: BTreeMap<String, String>,
    /// `lease-exclusive`: two candidates may both believe they lead for at
    /// most this long before it counts, ms. Only the stamping of their
    /// records (one clock: the candidates share a container) is tolerated.
    pub lease_tolerance_ms: f64,
    /// `leader-kept`: client-go's renew deadline the candidates run with,
    /// ms: a loss is explained by the lock requests and lab events of this
    /// long before it.
    pub renew_deadline_ms: f64,
    /// `handover`: after a leader is stopped or killed, another candidate
    /// must believe it leads within this long, ms.
    pub handover_ms: f64,
    /// `informer`, `informer-go`: the re-lists an informer may make in the
    /// run beyond its initial list and one after each 410 Gone (or
    /// `Expired`) it met; a retry of a list that failed is the same list.
    /// None: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub informer_relists: Option<u64>,
    /// How the migration must end for the run to pass (`completed`): the
    /// `migration-completed` rule asks the run's events. Other outcomes
    /// (`failed`, `aborted`, ...) are the scenario's expectations to judge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migration: Option<String>,
    /// The steps a completed migration records, in order (the flow's
    /// conditions): the `migration-completed` rule requires each, True.
    /// Empty: `MigrationCompleted` alone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub migration_steps: Vec<String>,
    /// The machine's CPU (percent of all its cores) at or above which the
    /// lab's machine counts as saturated: a failure inside such a window
    /// says so, and no hazard excuses it.
    pub saturation_pct: f64,
}

/// The lab's machine is saturated at 95 % of all its cores or more: a
/// member or an API server that waits for a core then is the lab's
/// failure as much as the migration's.
pub const SATURATION_PCT: f64 = 95.0;

/// Two candidates both believing they lead for up to 50 ms is record
/// stamping, not split brain.
pub const LEASE_TOLERANCE_MS: f64 = 50.0;
/// client-go's renew deadline as the candidates run it (10 s).
pub const RENEW_DEADLINE_MS: f64 = 10_000.0;
/// The lease duration (15 s) plus two retry periods (2 × 2 s): the longest
/// a leader that dies without releasing the lease keeps the others out.
pub const HANDOVER_MS: f64 = 19_000.0;

impl Default for Criteria {
    fn default() -> Self {
        Criteria {
            thresholds: Thresholds::default(),
            stall_ms: STALL_MS,
            coverage: Coverage::default(),
            excuse: BTreeMap::new(),
            uncovered: BTreeMap::new(),
            lease_tolerance_ms: LEASE_TOLERANCE_MS,
            renew_deadline_ms: RENEW_DEADLINE_MS,
            handover_ms: HANDOVER_MS,
            informer_relists: None,
            migration: None,
            migration_steps: Vec::new(),
            saturation_pct: SATURATION_PCT,
        }
    }
}

impl Criteria {
    /// The limits about time stretched by `factor` (a lab its engine runs
    /// by emulation, or a slow machine): the latency limits and the watch
    /// grace, the stall bound, each hazard budget's `max_ms`. The rest is
    /// not about time and stays: coverage, budgets' `max`, the lease rules'
    /// bounds (the candidates' own timings, client-go's clock), the accepted
    /// gaps.
    pub fn stretched(mut self, factor: f64) -> Criteria {
        let f = factor.max(1.0);
        let t = &mut self.thresholds;
        for ms in [
            &mut t.read_p99_ms,
            &mut t.list_p99_ms,
            &mut t.mutation_p99_ms,
            &mut t.watch_delay_p99_ms,
            &mut t.watch_grace_ms,
        ] {
            *ms *= f;
        }
        self.stall_ms *= f;
        for b in self.excuse.values_mut() {
            b.max_ms *= f;
        }
        self
    }
}

/// The probe kinds a lane pattern may name (the lease candidates are no
/// lane: their requests are judged by the lease rules).
const PROBES: [&str; 8] = [
    "readyz",
    "get",
    "list",
    "write",
    "watch",
    "informer",
    "load",
    "informer-go",
];

/// Whether `s` names a lane: a probe kind, or `probe/mode`.
pub fn is_lane_pattern(s: &str) -> bool {
    match s.split_once('/') {
        None => PROBES.contains(&s),
        Some((p, m)) => {
            PROBES.contains(&p)
                && serde_json::from_value::<crate::record::ConnMode>(m.into()).is_ok()
        }
    }
}

impl Criteria {
    /// Checks the criteria; an error names the field (`excuse.move-leader.max_ms`).
    pub fn check(&self) -> Result<(), (String, String)> {
        if !(self.stall_ms.is_finite() && self.stall_ms > 0.0) {
            return Err(("stall".into(), "a duration above zero".into()));
        }
        if !(self.lease_tolerance_ms.is_finite() && self.lease_tolerance_ms >= 0.0) {
            return Err((
                "lease_tolerance_ms".into(),
                "milliseconds, zero or more".into(),
            ));
        }
        for (f, v) in [
            ("renew_deadline_ms", self.renew_deadline_ms),
            ("handover_ms", self.handover_ms),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err((f.into(), "milliseconds, above zero".into()));
            }
        }
        if !(self.saturation_pct.is_finite()
            && self.saturation_pct > 0.0
            && self.saturation_pct <= 100.0)
        {
            return Err((
                "saturation_pct".into(),
                "percent of all cores, above 0 and at most 100".into(),
            ));
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
    fn stretched_criteria_stretch_time_and_nothing_else() {
        let mut c = Criteria::default();
        c.excuse.insert(
            Hazard::LeaderElection,
            Budget {
                max: 64,
                max_ms: 10_000.0,
                lanes: vec!["write".into()],
            },
        );
        c.uncovered.insert("lost-writes".into(), "why".into());
        let s = c.clone().stretched(4.0);
        assert_eq!(s.thresholds.read_p99_ms, 4_000.0);
        assert_eq!(s.thresholds.list_p99_ms, 20_000.0);
        assert_eq!(s.thresholds.mutation_p99_ms, 4_000.0);
        assert_eq!(s.thresholds.watch_delay_p99_ms, 4_000.0);
        assert_eq!(s.thresholds.watch_grace_ms, 4_000.0);
        assert_eq!(s.stall_ms, 20_000.0);
        let b = &s.excuse[&Hazard::LeaderElection];
        assert_eq!((b.max, b.max_ms), (64, 40_000.0), "the count stays");
        assert_eq!(s.coverage, c.coverage);
        assert_eq!(s.uncovered, c.uncovered);
        assert_eq!(
            (s.lease_tolerance_ms, s.renew_deadline_ms, s.handover_ms),
            (c.lease_tolerance_ms, c.renew_deadline_ms, c.handover_ms),
            "the lease rules are the candidates' own timings"
        );
        assert_eq!(c.clone().stretched(0.5), c, "never tighter");
    }

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

    #[test]
    fn criteria_without_the_lease_fields_parse_with_their_defaults() {
        // As a cpmlab before the lease rules wrote it.
        let old = r#"{"thresholds":{"read_p99_ms":1000.0,"list_p99_ms":5000.0,"mutation_p99_ms":1000.0,"watch_delay_p99_ms":1000.0,"watch_grace_ms":1000.0},"stall_ms":7000.0,"coverage":{"min_phase_ms":3000.0,"min_samples":3},"uncovered":{"informer":"not run"}}"#;
        let c: Criteria = serde_json::from_str(old).unwrap();
        assert_eq!(c.stall_ms, 7000.0, "what it says is kept");
        assert_eq!(
            (c.lease_tolerance_ms, c.renew_deadline_ms, c.handover_ms),
            (50.0, 10_000.0, 19_000.0)
        );
        // And they round-trip when set.
        let set = Criteria {
            lease_tolerance_ms: 5.0,
            renew_deadline_ms: 4_000.0,
            handover_ms: 9_000.0,
            ..Criteria::default()
        };
        let text = serde_json::to_string(&set).unwrap();
        assert!(text.contains("\"handover_ms\":9000.0"), "{text}");
        assert_eq!(serde_json::from_str::<Criteria>(&text).unwrap(), set);
        assert_eq!(
            Criteria {
                handover_ms: 0.0,
                ..Criteria::default()
            }
            .check()
            .unwrap_err()
            .0,
            "handover_ms"
        );
        assert_eq!(
            Criteria {
                lease_tolerance_ms: f64::NAN,
                ..Criteria::default()
            }
            .check()
            .unwrap_err()
            .0,
            "lease_tolerance_ms"
        );
    }

    #[test]
    fn the_informer_relist_budget_is_none_unless_given() {
        assert_eq!(Criteria::default().informer_relists, None);
        let text = serde_json::to_string(&Criteria::default()).unwrap();
        assert!(!text.contains("informer_relists"), "{text}");
        let c: Criteria = serde_json::from_str(r#"{"informer_relists":2}"#).unwrap();
        assert_eq!(c.informer_relists, Some(2));
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Criteria>(&text).unwrap(), c);
    }

    #[test]
    fn informer_go_is_a_lane_and_the_lease_is_not() {
        assert!(is_lane_pattern("informer-go"));
        assert!(is_lane_pattern("informer-go/reused"));
        assert!(!is_lane_pattern("lease"));
        assert!(!is_lane_pattern("lease/reused"));
    }

    /// Every connection mode names a lane, by its name in the records.
    #[test]
    fn every_mode_names_a_lane() {
        for m in [
            "new",
            "reused",
            "keepalive",
            "node",
            "late-dns",
            "seed-bound",
        ] {
            assert!(is_lane_pattern(&format!("write/{m}")), "{m}");
        }
        assert!(!is_lane_pattern("write/later"));
        assert!(!is_lane_pattern("write/late_dns"));
    }
}
