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
        RunSettings {
            exposure: s.topology.api.exposure.as_str().into(),
            dns_ttl_s: s.topology.dns.ttl,
            migration: s.migration.as_ref().map(|m| {
                let order = m.order.for_plan(m.plan);
                MigrationSettings {
                    order: order.name().into(),
                    plan: m.plan.name().into(),
                    leader_handover: m.leader_handover.as_str().into(),
                    gateway_handover: crate::migrate::order::GATEWAY_HANDOVER_NONE.into(),
                    cleanup_before_api: m.cleanup_before_api.clone().unwrap_or_else(|| {
                        crate::migrate::order::DEFAULT_CLEANUP_BEFORE_API.into()
                    }),
                    force_shrink: m.force_shrink,
                }
            }),
        }
    }

    /// One line: `exposure termination · order gep · plan five-member · …`.
    pub fn words(&self) -> String {
        let mut w = format!("exposure {} · DNS TTL {} s", self.exposure, self.dns_ttl_s);
        if let Some(m) = &self.migration {
            w.push_str(&format!(
                " · order {} · plan {} · leader handover {} · gateway handover {}",
                m.order, m.plan, m.leader_handover, m.gateway_handover
            ));
            if m.order != "early-drain" && !m.force_shrink {
                w.push_str(&format!(" · cleanup before API {}", m.cleanup_before_api));
            }
            if m.force_shrink {
                w.push_str(" · force-shrink");
            }
        }
        w
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
            "exposure termination · DNS TTL 120 s · order gep · plan five-member · leader handover remove · gateway handover none · cleanup before API 60s"
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
