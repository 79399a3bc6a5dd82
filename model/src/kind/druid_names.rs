//! The names etcd-druid gives what it makes from a seed's `Etcd`, as the
//! kind form's `--with-etcd-druid` names each seed's `Etcd`
//! ([`DruidNaming`]): the `Etcd`, its pods, its client Service and its
//! members. Pure functions, shared by the rendering (`cpmlab-provider-kind`'s
//! `druid`) and the lab state (`lab_state`), which must call each member by
//! the name etcd knows it by.
//!
//! druid's own rules, v0.38.1 (`api/core/v1alpha1/helper.go`): pods
//! `<Etcd>-<ordinal>` (`GetOrdinalPodName`), the client Service
//! `<Etcd>-client` (`GetClientServiceName`), members
//! `<memberNamePrefix>-<pod>` or the pod's name (`GetMemberName`).

use super::{DruidNaming, KindSettings};
use crate::topology::Topology;

/// Gardener's name for a shoot's main etcd.
pub const ETCD_NAME: &str = "etcd-main";

/// The name of `seed`'s `Etcd` (and, without druid, of the lab's own etcd
/// StatefulSets' `app.kubernetes.io/part-of` and client Service):
/// Gardener's `etcd-main`, but for the destination's under
/// [`DruidNaming::Distinct`], `etcd-main-<seed>` (druid's documented way,
/// two `Etcd` resources of different names).
pub fn etcd_name(t: &Topology, s: &KindSettings, seed: &str) -> String {
    if s.with_etcd_druid && s.druid_naming == DruidNaming::Distinct && t.source().name != seed {
        format!("{ETCD_NAME}-{seed}")
    } else {
        ETCD_NAME.to_string()
    }
}

/// The `memberNamePrefix` of `seed`'s `Etcd`: the seed's name under
/// Gardener's naming (gardenlet sets it, `pkg/gardenlet/operation/botanist/etcd.go`),
/// none under druid's documented one.
pub fn member_name_prefix(s: &KindSettings, seed: &str) -> Option<String> {
    match s.druid_naming {
        DruidNaming::Gardener => Some(seed.to_string()),
        DruidNaming::Distinct => None,
    }
}

/// druid's client Service of the `Etcd` named `etcd`.
pub fn client_service(etcd: &str) -> String {
    format!("{etcd}-client")
}

/// The pod druid runs for member `index` of the `Etcd` named `etcd`.
pub fn pod_name(etcd: &str, index: usize) -> String {
    format!("{etcd}-{index}")
}

/// The etcd member name of pod `index` of `seed`'s `Etcd`.
pub fn member_name(t: &Topology, s: &KindSettings, seed: &str, index: usize) -> String {
    let pod = pod_name(&etcd_name(t, s, seed), index);
    match member_name_prefix(s, seed) {
        Some(prefix) => format!("{prefix}-{pod}"),
        None => pod,
    }
}

/// The claim of pod `index`'s data: the StatefulSet's volume claim
/// template is named after the `Etcd` unless `spec.volumeClaimTemplate`
/// says otherwise (druid's `internal/component/statefulset/builder.go`,
/// `getVolumeClaimTemplates`), the claim `<template>-<pod>`.
pub fn data_claim(etcd: &str, index: usize) -> String {
    format!("{etcd}-{}", pod_name(etcd, index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_naming_names_the_seeds_etcds_and_members() {
        let t = Topology::default();
        let distinct = KindSettings {
            with_etcd_druid: true,
            ..Default::default()
        };
        let gardener = KindSettings {
            druid_naming: DruidNaming::Gardener,
            ..distinct.clone()
        };
        assert_eq!(etcd_name(&t, &distinct, "seed-a"), "etcd-main");
        assert_eq!(etcd_name(&t, &distinct, "seed-b"), "etcd-main-seed-b");
        assert_eq!(
            member_name(&t, &distinct, "seed-b", 1),
            "etcd-main-seed-b-1"
        );
        assert_eq!(etcd_name(&t, &gardener, "seed-b"), "etcd-main");
        assert_eq!(
            member_name(&t, &gardener, "seed-b", 1),
            "seed-b-etcd-main-1"
        );
        // Without druid the lab's own StatefulSets are `etcd-main`'s.
        assert_eq!(
            etcd_name(&t, &KindSettings::default(), "seed-b"),
            "etcd-main"
        );
        assert_eq!(
            data_claim("etcd-main-seed-b", 0),
            "etcd-main-seed-b-etcd-main-seed-b-0"
        );
    }
}
