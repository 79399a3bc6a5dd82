//! What the garden's Shoot carries for a Live CPM: Gardener's own
//! annotations (the intent, distant regions allowed, force-shrink) and the
//! lab's settings for the migration, which a gardenlet of the lab reads
//! as a gardenlet reads its configuration: the membership plan, the order
//! around the DNS switch, the handovers, and when the operator started it.
//! The lab's keys live under its own prefix, `cpmlab.lab/`, so that a
//! reader of the Shoot sees at once which are Gardener's.

use std::collections::BTreeMap;

use cpmlab_model::migrate::gateway_handover::GatewayHandover;
use cpmlab_model::migrate::membership::{LeaderHandover, Plan};
use cpmlab_model::migrate::order::Order;

use crate::client::{
    ANNOTATION_ALLOW_DISTANT_REGIONS, ANNOTATION_FORCE_SHRINK, ANNOTATION_LIVE_MIGRATE,
};

/// The lab's annotation prefix on the Shoot.
pub const PREFIX: &str = "cpmlab.lab/";
pub const PLAN: &str = "cpmlab.lab/plan";
pub const ORDER: &str = "cpmlab.lab/order";
pub const LEADER_HANDOVER: &str = "cpmlab.lab/leader-handover";
pub const GATEWAY_HANDOVER: &str = "cpmlab.lab/gateway-handover";
pub const CLEANUP_BEFORE_API_MS: &str = "cpmlab.lab/cleanup-before-api-ms";
pub const JOIN_TIMEOUT_MS: &str = "cpmlab.lab/join-timeout-ms";
pub const STARTED_UNIX_MS: &str = "cpmlab.lab/started-unix-ms";
pub const RTT_MS: &str = "cpmlab.lab/rtt-ms";
pub const RTT_GATE: &str = "cpmlab.lab/rtt-gate";
/// The gardenlets pause once this step is True, until it goes.
pub const STOP_AFTER: &str = "cpmlab.lab/stop-after";
/// Test holds: `Step:4s,...`, each step held that long once Progressing
/// (`CPMLAB_TEST_HOLD` of `cpmlab migrate`), so that a fault lands inside it.
pub const HOLD: &str = "cpmlab.lab/hold";
/// `external`: the lab's gardenlets leave the migration to another driver.
pub const DRIVER: &str = "cpmlab.lab/driver";
/// The source's gateway handover, in EtcdMigrationComplete: `requested`
/// by the destination once DNS caches were waited out, `held` by the
/// source once its gateway's connections had their time (each gardenlet
/// acts on its own seed only, so the handover is a hand-off too).
pub const GATEWAY_HANDOVER_STATE: &str = "cpmlab.lab/gateway-handover-state";

/// The migration as an operator asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub plan: Plan,
    pub order: Order,
    pub leader_handover: LeaderHandover,
    pub gateway_handover: GatewayHandover,
    pub cleanup_before_api_ms: u64,
    pub join_timeout_ms: u64,
    pub force_shrink: bool,
    pub allow_distant_regions: bool,
    pub started_unix_ms: f64,
    pub rtt_ms: Option<f64>,
    pub rtt_gate: Option<String>,
    pub stop_after: Option<String>,
    pub hold: Option<String>,
    pub external: bool,
}

impl Settings {
    /// The annotations that carry them, the intent's among them. A value
    /// of `None` removes a key a former migration left.
    pub fn annotations(&self) -> Vec<(&'static str, Option<String>)> {
        let flag = |b: bool| b.then(|| "true".to_string());
        vec![
            (ANNOTATION_LIVE_MIGRATE, Some("true".into())),
            (
                ANNOTATION_ALLOW_DISTANT_REGIONS,
                flag(self.allow_distant_regions),
            ),
            (ANNOTATION_FORCE_SHRINK, flag(self.force_shrink)),
            (PLAN, Some(self.plan.name().into())),
            (ORDER, Some(self.order.name().into())),
            (LEADER_HANDOVER, Some(self.leader_handover.as_str().into())),
            (
                GATEWAY_HANDOVER,
                Some(self.gateway_handover.as_str().into()),
            ),
            (
                CLEANUP_BEFORE_API_MS,
                Some(self.cleanup_before_api_ms.to_string()),
            ),
            (JOIN_TIMEOUT_MS, Some(self.join_timeout_ms.to_string())),
            (
                STARTED_UNIX_MS,
                Some(format!("{:.0}", self.started_unix_ms)),
            ),
            (RTT_MS, self.rtt_ms.map(|r| format!("{r:.3}"))),
            (RTT_GATE, self.rtt_gate.clone()),
            (STOP_AFTER, self.stop_after.clone()),
            (HOLD, self.hold.clone()),
            (DRIVER, self.external.then(|| "external".to_string())),
            (GATEWAY_HANDOVER_STATE, None),
        ]
    }

    /// Reads them back off the Shoot's annotations; `Err` names the key
    /// whose value is not one the lab knows.
    pub fn from_annotations(a: &BTreeMap<String, String>) -> Result<Settings, String> {
        fn parse<T: clap::ValueEnum>(a: &BTreeMap<String, String>, key: &str) -> Result<T, String> {
            let v = a
                .get(key)
                .ok_or_else(|| format!("the Shoot has no `{key}`"))?;
            T::from_str(v, false).map_err(|_| format!("`{key}: {v}` is not a value the lab knows"))
        }
        let num = |key: &str| -> Result<f64, String> {
            a.get(key)
                .ok_or_else(|| format!("the Shoot has no `{key}`"))?
                .parse::<f64>()
                .map_err(|_| format!("`{key}` is not a number"))
        };
        let flag = |key: &str| a.get(key).map(|v| v == "true").unwrap_or(false);
        Ok(Settings {
            plan: parse(a, PLAN)?,
            order: parse(a, ORDER)?,
            leader_handover: parse(a, LEADER_HANDOVER)?,
            gateway_handover: parse(a, GATEWAY_HANDOVER)?,
            cleanup_before_api_ms: num(CLEANUP_BEFORE_API_MS)? as u64,
            join_timeout_ms: num(JOIN_TIMEOUT_MS)? as u64,
            force_shrink: flag(ANNOTATION_FORCE_SHRINK),
            allow_distant_regions: flag(ANNOTATION_ALLOW_DISTANT_REGIONS),
            started_unix_ms: num(STARTED_UNIX_MS)?,
            rtt_ms: a.get(RTT_MS).and_then(|v| v.parse().ok()),
            rtt_gate: a.get(RTT_GATE).cloned(),
            stop_after: a.get(STOP_AFTER).cloned(),
            hold: a.get(HOLD).cloned(),
            external: a.get(DRIVER).map(|v| v == "external").unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_through_annotations() {
        let s = Settings {
            plan: Plan::FiveMember,
            order: Order::Gep,
            leader_handover: LeaderHandover::Remove,
            gateway_handover: GatewayHandover::DrainGatewayInPlace,
            cleanup_before_api_ms: 60_000,
            join_timeout_ms: 120_000,
            force_shrink: false,
            allow_distant_regions: true,
            started_unix_ms: 1_764_000_000_123.0,
            rtt_ms: Some(50.25),
            rtt_gate: Some("RTT 50.2 ms".into()),
            stop_after: Some("MigrateDNSRecords".into()),
            hold: None,
            external: false,
        };
        let a: BTreeMap<String, String> = s
            .annotations()
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
            .collect();
        assert_eq!(a[ANNOTATION_LIVE_MIGRATE], "true");
        assert!(!a.contains_key(ANNOTATION_FORCE_SHRINK));
        let back = Settings::from_annotations(&a).unwrap();
        assert_eq!(back.rtt_ms, Some(50.25));
        assert_eq!(back.plan, s.plan);
        assert_eq!(back.gateway_handover, s.gateway_handover);
        assert_eq!(back.stop_after, s.stop_after);
        assert!(back.allow_distant_regions && !back.force_shrink);
        let mut bad = a.clone();
        bad.insert(PLAN.into(), "seven-member".into());
        assert!(Settings::from_annotations(&bad)
            .unwrap_err()
            .contains("cpmlab.lab/plan: seven-member"));
    }
}
