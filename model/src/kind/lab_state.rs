//! The lab state of a kind lab: the docker form's plan (networks, the
//! router, DNS server and toolbox, each seed's ingress address, each
//! member's DNS name and peer port), with the seeds' workloads as the kind
//! provider names them. A pure function: `up` saves it, and `migrate`,
//! `link` and `probe` read it as they read a docker lab's.
//!
//! Addresses: each seed's Docker network hands kind's nodes addresses from
//! its upper half only (`node_range`), so the lab's fixed addresses stay
//! free: the router (.2), the seed's ingress gateway (.3, MetalLB pins
//! the Istio ingress Service there) and, with an address per member, the
//! members' own ingress addresses (.30 + index), as the docker form has
//! them. The DNS records the migration writes are therefore the same.

use std::net::Ipv4Addr;

use super::{cluster_name, namespace, KindSettings, INGRESS_NAMESPACE};
use crate::addressing::{host, Net24};
use crate::state::{LabState, ProviderKind};
use crate::topology::{PeerExposure, Topology};

/// The addresses Docker hands kind's nodes on a seed network (`--ip-range`).
pub fn node_range(net: Net24) -> String {
    format!("{}/26", net.host(128))
}

/// The seed's ingress address (the Istio ingress gateway's Service).
pub fn ingress_ip(net: Net24) -> Ipv4Addr {
    net.host(host::GATEWAY)
}

/// Member `index`'s own ingress address (address exposure).
pub fn member_ingress_ip(net: Net24, index: usize) -> Ipv4Addr {
    net.host(host::MEMBER_VIP + index as u8)
}

/// Every LoadBalancer address MetalLB may hand out on a seed's network:
/// exactly the ones the lab pins.
pub fn lb_addresses(t: &Topology, s: &KindSettings, net: Net24) -> Vec<Ipv4Addr> {
    let mut v = vec![ingress_ip(net)];
    if s.exposure == PeerExposure::Address {
        v.extend((0..t.etcd.members as usize).map(|i| member_ingress_ip(net, i)));
    }
    v
}

/// The kubectl context of a seed's cluster.
pub fn context(lab: &str, seed: &str) -> String {
    format!("kind-{}", cluster_name(lab, seed))
}

/// The lab state of kind lab `lab` on `nets` (topology order), its
/// router, DNS server and toolbox running `image`.
pub fn kind_state(
    lab: &str,
    t: &Topology,
    s: &KindSettings,
    nets: &[Net24],
    image: &str,
    tsig_secret: String,
) -> LabState {
    let mut t = t.clone();
    // The members' peer ports follow the kind form's exposure.
    t.network.peer_exposure = Some(s.exposure);
    let plan = crate::plan::LabPlan::new(lab, &t, nets, image);
    let mut state = plan.initial_state(tsig_secret);
    state.provider = ProviderKind::Kind;
    state.etcd_druid = s.with_etcd_druid.then_some(s.druid_naming);
    for seed in &mut state.seeds {
        seed.gateway.container = format!(
            "{}/{INGRESS_NAMESPACE}/istio-ingressgateway@0",
            context(lab, &seed.name)
        );
        // The seed's gardenlet is a pod of its Deployment in the seed.
        if let Some(g) = seed.gardenlet.as_mut() {
            g.container = gardenlet_workload(lab, &seed.name);
        }
    }
    let mut per_seed: std::collections::HashMap<String, usize> = Default::default();
    let members = std::mem::take(&mut state.members);
    state.members = members
        .into_iter()
        .map(|m| {
            let i = per_seed.entry(m.seed.clone()).or_default();
            *i += 1;
            kind_member(&state, m, *i - 1)
        })
        .collect();
    let apiservers = std::mem::take(&mut state.apiservers);
    per_seed.clear();
    state.apiservers = apiservers
        .into_iter()
        .map(|a| {
            let i = per_seed.entry(a.seed.clone()).or_default();
            *i += 1;
            kind_apiserver(&state, a, *i - 1)
        })
        .collect();
    state
}

/// API replica `index` of a seed as the docker form plans it
/// (`plan::apiserver`), in the kind form: the Deployment's pod, reached
/// from outside at its seed's ingress (a pod has no address of the lab's).
pub fn kind_apiserver(
    state: &LabState,
    mut a: crate::state::ApiServerState,
    index: usize,
) -> crate::state::ApiServerState {
    a.container = replica_workload(
        &context(&state.name, &a.seed),
        &namespace(&state.topology.shoot.name),
        index,
    );
    if let Some(seed) = state.seed(&a.seed) {
        a.ip = seed.gateway.ip;
    }
    a
}

/// Member `index` of a seed as the docker form plans it (`plan::member`),
/// in the kind form: its pod and claim, the lab's own StatefulSet's or,
/// with etcd-druid, druid's (and then druid's member name, which etcd
/// knows it by; its DNS name stays the lab's, which the ingress routes to
/// the member's own Service).
pub fn kind_member(
    state: &LabState,
    mut m: crate::state::MemberState,
    index: usize,
) -> crate::state::MemberState {
    let ns = namespace(&state.topology.shoot.name);
    let context = context(&state.name, &m.seed);
    if state.etcd_druid.is_some() {
        use super::druid_names;
        let s = KindSettings::of_state(state);
        let etcd = druid_names::etcd_name(&state.topology, &s, &m.seed);
        m.container = format!("{context}/{ns}/{}", druid_names::pod_name(&etcd, index));
        m.volume = druid_names::data_claim(&etcd, index);
        m.name = druid_names::member_name(&state.topology, &s, &m.seed, index);
        return m;
    }
    m.container = format!("{context}/{ns}/{}-0", m.name);
    m.volume = format!("data-{}-0", m.name);
    m
}

/// The Deployment an API replica belongs to.
pub const APISERVER_DEPLOYMENT: &str = "kube-apiserver";

/// A kind seed's gardenlet as a workload: the one replica of its
/// Deployment in the seed's `garden` namespace.
pub fn gardenlet_workload(lab: &str, seed: &str) -> String {
    format!(
        "{}/{}/{}@0",
        context(lab, seed),
        super::GARDENLET_NAMESPACE,
        super::GARDENLET_DEPLOYMENT
    )
}

/// An API replica's workload name.
pub fn replica_workload(context: &str, namespace: &str, index: usize) -> String {
    format!("{context}/{namespace}/{APISERVER_DEPLOYMENT}@{index}")
}
