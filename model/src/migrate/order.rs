//! The order of a Live CPM's steps around the DNS switch and the source
//! API servers: where the shoot API's record moves, where the caches are
//! waited out, and when the source API servers go. Pure decisions the flow
//! asks for per step.
//!
//! - `gep` (the default): GEP-0039 as its flow diagram draws it
//!   (gardener/enhancements `geps/0039-live-control-plane-migration/`,
//!   `livecpm-flow.svg`, commit 3aa48c1). MigrateDNSRecords only migrates
//!   the source's DNSRecord (the provider's record is kept, still
//!   answering the source gateway); EtcdMigrationComplete restores it in
//!   the destination, waits for DNS caches, adds the last member and
//!   removes the source members; the source API servers keep serving until
//!   SourceSeedCleanup deletes them, after the cleanup steps the diagram
//!   puts first (the Etcd CR, BackupEntry, VPN, ManagedResources, MCM,
//!   extensions: `cleanup_before_api`), and the shoot namespace with the
//!   seed's Istio objects goes last.
//! - `early-drain`: the lab's order before the GEP's: MigrateDNSRecords
//!   switches the record, waits the TTL and drains the source API servers
//!   before any source member leaves.
//! - `dns-first`: the GEP's undecided alternative ("combining the
//!   `MigrateExtensionsBeforeKAPI` and `MigrateDNSRecords` steps, and the
//!   `DestinationKAPIReady` and `EtcdMigrationComplete` steps ... migrating
//!   the DNS record (shallow-delete) before the kube-apiserver starts on
//!   the destination"): the record is migrated before the destination API
//!   starts; EtcdMigrationComplete starts it, then goes on as `gep`.

use serde::{Deserialize, Serialize};

use crate::migrate::gateway_handover::GatewayHandover;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// GEP-0039's flow diagram: the record restored and the caches waited
    /// out in EtcdMigrationComplete; the source API servers deleted in
    /// SourceSeedCleanup.
    #[default]
    Gep,
    /// The lab's earlier order: the record switched, the TTL waited out and
    /// the source API servers drained in MigrateDNSRecords.
    EarlyDrain,
    /// The GEP's undecided alternative: the record migrated before the
    /// destination API starts (in EtcdMigrationComplete).
    DnsFirst,
}

/// What MigrateDNSRecords does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DnsStep {
    /// Switch the record, wait the TTL, drain the source API servers.
    SwitchAndDrain,
    /// Hand the source's DNSRecord over (Gardener's migrate operation: the
    /// provider's record stays as it is).
    MigrateOnly,
}

impl Order {
    pub fn name(self) -> &'static str {
        match self {
            Order::Gep => "gep",
            Order::EarlyDrain => "early-drain",
            Order::DnsFirst => "dns-first",
        }
    }

    /// The text each order follows, for reports.
    pub fn source(self) -> &'static str {
        match self {
            Order::Gep => "GEP-0039's flow diagram (livecpm-flow.svg)",
            Order::EarlyDrain => "the lab's earlier order (no GEP text)",
            Order::DnsFirst => "the GEP's undecided alternative (DNS migrated first)",
        }
    }

    /// The order a plan runs in: the plans whose destination is a cluster
    /// of its own (`classic`, `mirror`) stop the source API before its etcd
    /// stops feeding the destination (a write the source took after the
    /// mirror stopped would be lost), so they run `early-drain` whatever
    /// was asked.
    pub fn for_plan(self, plan: crate::migrate::membership::Plan) -> Order {
        if plan.separate_cluster() {
            Order::EarlyDrain
        } else {
            self
        }
    }

    /// What MigrateDNSRecords does; `force_shrink` (the GEP's escape hatch,
    /// downtime accepted) switches at once whatever the order.
    pub fn dns_step(self, force_shrink: bool) -> DnsStep {
        if force_shrink || self == Order::EarlyDrain {
            DnsStep::SwitchAndDrain
        } else {
            DnsStep::MigrateOnly
        }
    }

    /// Whether EtcdMigrationComplete restores the record in the destination
    /// and waits for DNS caches before the last member joins.
    pub fn restores_dns_in_etcd_migration_complete(self, force_shrink: bool) -> bool {
        self.dns_step(force_shrink) == DnsStep::MigrateOnly
    }

    /// Whether the destination API starts in EtcdMigrationComplete rather
    /// than in DestinationKubeAPIServerReady (`dns-first`).
    pub fn starts_api_in_etcd_migration_complete(self, force_shrink: bool) -> bool {
        self == Order::DnsFirst && !force_shrink
    }

    /// Whether the source API servers still serve when SourceSeedCleanup
    /// starts (and are deleted there, after `cleanup_before_api`).
    pub fn source_api_serves_until_cleanup(self, force_shrink: bool) -> bool {
        self.dns_step(force_shrink) == DnsStep::MigrateOnly
    }
}

impl Order {
    /// What is wrong with gateway handover `h` for a migration in this
    /// order (the one in force for its plan) on a lab whose gateways have
    /// `max_connection_duration` and expose the API `exposure`: the field
    /// and why. A handover acts between the DNS-cache wait and the source
    /// members' removal, which only the GEP's orders separate.
    pub fn check_gateway_handover(
        self,
        h: GatewayHandover,
        force_shrink: bool,
        exposure: crate::topology::ApiExposure,
        max_connection_duration: Option<std::time::Duration>,
    ) -> Result<(), (&'static str, String)> {
        if h != GatewayHandover::None && !self.restores_dns_in_etcd_migration_complete(force_shrink)
        {
            return Err((
                "migration.gateway_handover",
                format!(
                    "{}: the source gateway hands over between the DNS-cache wait and the source members' removal, which the {} order{} does not separate (use order gep or dns-first, without force-shrink)",
                    h.as_str(),
                    self.name(),
                    if force_shrink { " with force-shrink" } else { "" }
                ),
            ));
        }
        h.check(exposure, max_connection_duration)
    }
}

/// How long the source cleanup's steps before "Delete KAPI & remaining
/// components" take by default (the Etcd CR's deletion, the BackupEntry's
/// migration, the VPN's temporary DNS record and seed server, the
/// ManagedResources with keepObjects, machine-controller-manager, the
/// extensions' migration): 60 s. See docs/migration.md for why.
pub const DEFAULT_CLEANUP_BEFORE_API: &str = "60s";

/// What a run ran with, in the one line the report's header (the flow's
/// `settings` event), `cpmlab run`'s summary and result.json's readers see.
#[derive(Debug, Clone, PartialEq)]
pub struct RanWith {
    pub exposure: crate::topology::ApiExposure,
    pub dns_ttl_s: u32,
    pub migration: Option<MigrationRanWith>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MigrationRanWith {
    /// The order in force (a plan may override the one asked for).
    pub order: Order,
    pub plan: crate::migrate::membership::Plan,
    pub leader_handover: crate::migrate::membership::LeaderHandover,
    pub gateway_handover: GatewayHandover,
    pub cleanup_before_api_s: f64,
    pub force_shrink: bool,
}

impl RanWith {
    /// `exposure termination · DNS TTL 120 s · order gep (…) · plan …`.
    pub fn words(&self) -> String {
        let mut w = format!(
            "exposure {} · DNS TTL {} s",
            self.exposure.as_str(),
            self.dns_ttl_s
        );
        if let Some(m) = &self.migration {
            w.push_str(&format!(
                " · order {} ({}) · plan {} · leader handover {} · gateway handover {}",
                m.order.name(),
                m.order.source(),
                m.plan.name(),
                m.leader_handover.as_str(),
                m.gateway_handover.as_str(),
            ));
            if m.order.source_api_serves_until_cleanup(m.force_shrink) {
                w.push_str(&format!(
                    " · {:.0} s of SourceSeedCleanup before the source API servers go",
                    m.cleanup_before_api_s
                ));
            }
            if m.force_shrink {
                w.push_str(" · force-shrink");
            }
        }
        w
    }
}

/// A state written before the order was recorded ran the early drain.
pub fn order_before_the_setting() -> Order {
    Order::EarlyDrain
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gep_order_keeps_the_source_api_until_cleanup_and_moves_dns_with_etcd() {
        let o = Order::default();
        assert_eq!(o, Order::Gep);
        assert_eq!(o.dns_step(false), DnsStep::MigrateOnly);
        assert!(o.restores_dns_in_etcd_migration_complete(false));
        assert!(!o.starts_api_in_etcd_migration_complete(false));
        assert!(o.source_api_serves_until_cleanup(false));
    }

    #[test]
    fn the_early_drain_switches_and_drains_in_migrate_dns_records() {
        let o = Order::EarlyDrain;
        assert_eq!(o.dns_step(false), DnsStep::SwitchAndDrain);
        assert!(!o.restores_dns_in_etcd_migration_complete(false));
        assert!(!o.source_api_serves_until_cleanup(false));
    }

    #[test]
    fn dns_first_starts_the_destination_api_with_the_etcd_step() {
        let o = Order::DnsFirst;
        assert_eq!(o.dns_step(false), DnsStep::MigrateOnly);
        assert!(o.starts_api_in_etcd_migration_complete(false));
        assert!(o.restores_dns_in_etcd_migration_complete(false));
    }

    #[test]
    fn force_shrink_switches_at_once_in_every_order() {
        for o in [Order::Gep, Order::EarlyDrain, Order::DnsFirst] {
            assert_eq!(o.dns_step(true), DnsStep::SwitchAndDrain, "{o:?}");
            assert!(!o.starts_api_in_etcd_migration_complete(true));
            assert!(!o.source_api_serves_until_cleanup(true));
        }
    }

    #[test]
    fn plans_with_a_cluster_of_their_own_drain_early() {
        use crate::migrate::membership::Plan;
        for p in [Plan::Classic, Plan::Mirror] {
            assert_eq!(Order::Gep.for_plan(p), Order::EarlyDrain, "{p:?}");
        }
        for p in [Plan::FiveMember, Plan::SixMember, Plan::Rolling] {
            assert_eq!(Order::DnsFirst.for_plan(p), Order::DnsFirst, "{p:?}");
        }
    }

    #[test]
    fn a_gateway_handover_needs_an_order_that_waits_for_dns_before_the_source_leaves() {
        use crate::topology::ApiExposure;
        let d = GatewayHandover::DrainGateway;
        for (order, force) in [(Order::EarlyDrain, false), (Order::Gep, true)] {
            let (field, why) = order
                .check_gateway_handover(d, force, ApiExposure::Termination, None)
                .unwrap_err();
            assert_eq!(field, "migration.gateway_handover");
            assert!(why.contains(order.name()), "{why}");
        }
        assert!(Order::DnsFirst
            .check_gateway_handover(d, false, ApiExposure::Termination, None)
            .is_ok());
        assert!(Order::EarlyDrain
            .check_gateway_handover(GatewayHandover::None, true, ApiExposure::Passthrough, None)
            .is_ok());
        // The handover's own check comes after the order's.
        assert!(Order::Gep
            .check_gateway_handover(
                GatewayHandover::MaxConnectionAge,
                false,
                ApiExposure::Termination,
                None
            )
            .is_err());
    }

    #[test]
    fn orders_are_spelled_as_the_cli_and_scenarios_take_them() {
        for o in [Order::Gep, Order::EarlyDrain, Order::DnsFirst] {
            let v = serde_json::to_value(o).unwrap();
            assert_eq!(v.as_str(), Some(o.name()));
        }
        assert!(serde_json::from_str::<Order>("\"early\"").is_err());
    }
}
