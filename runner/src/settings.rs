//! What a scenario ran with, as `result.json` and the summary name it: the
//! shoot API's exposure, the DNS TTL, and the migration's order, plan,
//! handovers and the cleanup's time before the source API goes.

use serde::{Deserialize, Serialize};

use crate::scenario::Scenario;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// `termination` (Gardener's default) or `passthrough`.
    pub exposure: String,
    pub dns_ttl_s: u32,
    /// The migration's, absent for a run without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<MigrationSettings>,
    /// All of it in one line, as the report's header says it.
    #[serde(default)]
    pub words: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MigrationSettings {
    pub order: String,
    pub plan: String,
    pub leader_handover: String,
    pub gateway_handover: String,
    /// As the scenario gives it (`60s` when absent); the `gep` and
    /// `dns-first` orders wait it.
    pub cleanup_before_api: String,
    pub force_shrink: bool,
}

impl RunSettings {
    pub fn of(s: &Scenario) -> RunSettings {
        use crate::migrate::order::{MigrationRanWith, RanWith};
        let ran_with = RanWith {
            exposure: s.topology.api.exposure,
            dns_ttl_s: s.topology.dns.ttl,
            migration: s.migration.as_ref().map(|m| MigrationRanWith {
                order: m.order.for_plan(m.plan),
                plan: m.plan,
                leader_handover: m.leader_handover,
                gateway_handover: m.gateway_handover,
                // Checked before the run: a value that does not parse
                // never gets here.
                cleanup_before_api_s: crate::link::profile::parse_duration(
                    "cleanup_before_api",
                    m.cleanup_before_api
                        .as_deref()
                        .unwrap_or(crate::migrate::order::DEFAULT_CLEANUP_BEFORE_API),
                )
                .map(|d| d.as_secs_f64())
                .unwrap_or_default(),
                force_shrink: m.force_shrink,
            }),
        };
        RunSettings {
            words: ran_with.words(),
            exposure: s.topology.api.exposure.as_str().into(),
            dns_ttl_s: s.topology.dns.ttl,
            migration: s.migration.as_ref().map(|m| {
                let order = m.order.for_plan(m.plan);
                MigrationSettings {
                    order: order.name().into(),
                    plan: m.plan.name().into(),
                    leader_handover: m.leader_handover.as_str().into(),
                    gateway_handover: m.gateway_handover.as_str().into(),
                    cleanup_before_api: m.cleanup_before_api.clone().unwrap_or_else(|| {
                        crate::migrate::order::DEFAULT_CLEANUP_BEFORE_API.into()
                    }),
                    force_shrink: m.force_shrink,
                }
            }),
        }
    }

    /// One line, the model's (`RanWith::words`), as the report's header
    /// says it.
    pub fn words(&self) -> String {
        self.words.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_migration_is_the_geps_on_gardeners_defaults() {
        let s: Scenario = serde_saphyr::from_str("description: x\nmigration: {}\n").unwrap();
        let r = RunSettings::of(&s);
        assert_eq!(r.exposure, "termination");
        assert_eq!(r.dns_ttl_s, 120);
        let m = r.migration.as_ref().unwrap();
        assert_eq!(
            (
                m.order.as_str(),
                m.plan.as_str(),
                m.leader_handover.as_str()
            ),
            ("gep", "five-member", "remove")
        );
        assert_eq!(m.cleanup_before_api, "60s");
        assert_eq!(
            r.words(),
            "exposure termination · DNS TTL 120 s · order gep (GEP-0039's flow diagram (livecpm-flow.svg)) · plan five-member · leader handover remove · gateway handover none · 60 s of SourceSeedCleanup before the source API servers go"
        );
    }

    #[test]
    fn a_mirror_is_said_to_drain_early_whatever_was_asked() {
        let s: Scenario =
            serde_saphyr::from_str("description: x\nmigration: {plan: mirror, order: gep}\n")
                .unwrap();
        let r = RunSettings::of(&s);
        assert_eq!(r.migration.unwrap().order, "early-drain");
    }

    #[test]
    fn a_run_without_migration_names_the_exposure_only() {
        let s: Scenario = serde_saphyr::from_str("description: x\n").unwrap();
        assert_eq!(
            RunSettings::of(&s).words(),
            "exposure termination · DNS TTL 120 s"
        );
    }
}
