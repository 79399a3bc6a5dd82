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
    for seed in &mut state.seeds {
        seed.gateway.container = format!(
            "{}/{INGRESS_NAMESPACE}/istio-ingressgateway@0",
            context(lab, &seed.name)
        );
    }
    let members = std::mem::take(&mut state.members);
    state.members = members
        .into_iter()
        .map(|m| kind_member(&state, m))
        .collect();
    let apiservers = std::mem::take(&mut state.apiservers);
    let mut per_seed: std::collections::HashMap<String, usize> = Default::default();
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

/// A member as the docker form plans it (`plan::member`), in the kind
/// form: its pod and claim.
pub fn kind_member(
    state: &LabState,
    mut m: crate::state::MemberState,
) -> crate::state::MemberState {
    m.container = format!(
        "{}/{}/{}-0",
        context(&state.name, &m.seed),
        namespace(&state.topology.shoot.name),
        m.name
    );
    m.volume = format!("data-{}-0", m.name);
    m
}

/// The Deployment an API replica belongs to.
pub const APISERVER_DEPLOYMENT: &str = "kube-apiserver";

/// An API replica's workload name.
pub fn replica_workload(context: &str, namespace: &str, index: usize) -> String {
    format!("{context}/{namespace}/{APISERVER_DEPLOYMENT}@{index}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::kind::provider::Target;

    fn nets() -> Vec<Net24> {
        (0..3)
            .map(|i| Net24(Ipv4Addr::new(10, 213, i, 0)))
            .collect()
    }

    #[test]
    fn a_kind_lab_s_workloads_are_pods_and_its_infrastructure_containers() {
        let t = Topology::default();
        let s = KindSettings::default();
        let st = kind_state("lab", &t, &s, &nets(), "img", "k".into());
        assert_eq!(st.provider, ProviderKind::Kind);
        let m = &st.members[0];
        assert_eq!(
            m.container,
            "kind-lab-seed-a/shoot--local--local/seed-a-etcd-0-0"
        );
        assert!(matches!(
            Target::parse(&m.container).unwrap(),
            Target::Pod(_)
        ));
        // Port exposure (the kind form's default): one ingress address,
        // a port per member.
        assert_eq!(m.vip(), Ipv4Addr::new(10, 213, 0, 3));
        assert_eq!(m.peer_port, crate::gateway::member_peer_port(0));
        assert_eq!(st.seeds[0].gateway.ip, ingress_ip(nets()[0]));
        let a = &st.apiservers[1];
        assert_eq!(
            a.container,
            "kind-lab-seed-a/shoot--local--local/kube-apiserver@1"
        );
        assert!(matches!(
            Target::parse(&a.container).unwrap(),
            Target::Replica(r) if r.index == 1 && r.deployment == "kube-apiserver"
        ));
        // The router, DNS server and toolbox are the docker form's.
        for c in [&st.router.container, &st.dns.server.container] {
            assert!(matches!(Target::parse(c).unwrap(), Target::Container(_)));
        }
        // It survives the state file.
        let back: LabState = serde_json::from_str(&serde_json::to_string(&st).unwrap()).unwrap();
        assert_eq!(back, st);
    }

    #[test]
    fn fixed_addresses_stay_out_of_the_nodes_range() {
        let t = Topology::default();
        let net = nets()[1];
        let s = KindSettings {
            exposure: PeerExposure::Address,
            ..Default::default()
        };
        assert_eq!(node_range(net), "10.213.1.128/26");
        let lb = lb_addresses(&t, &s, net);
        assert_eq!(lb.len(), 1 + t.etcd.members as usize);
        let st = kind_state("lab", &t, &s, &nets(), "img", "k".into());
        // Each member's DNS name answers its own LoadBalancer address.
        for m in st.members_of("seed-b") {
            assert!(lb.contains(&m.vip()), "{} at {}", m.name, m.vip());
        }
        for ip in lb.iter().chain([&st.networks[1].router_ip]) {
            assert!(ip.octets()[3] < 128, "{ip} in the nodes' range");
        }
    }

    #[test]
    fn planned_destination_workloads_are_renamed_for_kind() {
        let t = Topology::default();
        let st = kind_state(
            "lab",
            &t,
            &KindSettings::default(),
            &nets(),
            "img",
            "k".into(),
        );
        let a = crate::plan::apiserver("lab", "seed-b", nets()[1], 0);
        assert_eq!(
            kind_apiserver(&st, a, 0).container,
            "kind-lab-seed-b/shoot--local--local/kube-apiserver@0"
        );
        let m = crate::plan::member("lab", "seed-b", nets()[1], 2, "z", None);
        let m = kind_member(&st, m);
        assert_eq!(
            (m.container.as_str(), m.volume.as_str()),
            (
                "kind-lab-seed-b/shoot--local--local/seed-b-etcd-2-0",
                "data-seed-b-etcd-2-0"
            )
        );
    }
}
