//! The lab state of a kind lab: the model's pure placement
//! (`cpmlab_model::kind::lab_state`), under its old path; its tests here,
//! where the kind provider's workload names can be parsed.

pub use cpmlab_model::kind::lab_state::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addressing::Net24;
    use crate::provider::Target;
    use crate::state::{LabState, ProviderKind};
    use crate::topology::{PeerExposure, Topology};
    use crate::KindSettings;
    use std::net::Ipv4Addr;

    fn nets() -> Vec<Net24> {
        (0..4)
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
        assert_eq!(m.peer_port, crate::member_peer_port(0));
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
        // Each seed's gardenlet is the one replica of its Deployment in
        // the seed's `garden` namespace.
        let g = st.seeds[1].gardenlet.as_ref().unwrap();
        assert_eq!(g.container, "kind-lab-seed-b/garden/gardenlet@0");
        assert!(matches!(
            Target::parse(&g.container).unwrap(),
            Target::Replica(r) if r.index == 0 && r.deployment == "gardenlet"
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
        let m = kind_member(&st, m, 2);
        assert_eq!(
            (m.container.as_str(), m.volume.as_str()),
            (
                "kind-lab-seed-b/shoot--local--local/seed-b-etcd-2-0",
                "data-seed-b-etcd-2-0"
            )
        );
    }

    /// With etcd-druid the members are druid's: its pods, claims and
    /// member names (etcd knows them by these), the DNS names the lab's.
    #[test]
    fn druid_s_members_carry_druid_s_names() {
        let t = Topology::default();
        let s = KindSettings {
            with_etcd_druid: true,
            ..Default::default()
        };
        let st = kind_state("lab", &t, &s, &nets(), "img", "k".into());
        assert_eq!(st.etcd_druid, Some(crate::DruidNaming::Distinct));
        let m = &st.members[1];
        assert_eq!(m.name, "etcd-main-1");
        assert_eq!(
            m.container,
            "kind-lab-seed-a/shoot--local--local/etcd-main-1"
        );
        assert_eq!(m.volume, "etcd-main-etcd-main-1");
        assert_eq!(m.host, "seed-a-etcd-1.local.cpmlab.test");
        let plan = cpmlab_model::placement::migration(&st, "seed-a", "seed-b", "t", 0.0).unwrap();
        let d = &plan.destination_members[2];
        assert_eq!(
            (d.name.as_str(), d.container.as_str()),
            (
                "etcd-main-seed-b-2",
                "kind-lab-seed-b/shoot--local--local/etcd-main-seed-b-2"
            )
        );
    }
}
