//! From a topology and the networks allocated to it, every name and address
//! of the lab: a pure function, so it can be checked without Docker.

use crate::addressing::{host, Net24};
use crate::state::{
    ApiServerState, ContainerRef, DnsState, LabState, MemberState, NetworkState, Phase, SeedState,
    STATE_VERSION,
};
use crate::topology::{PeerExposure, Topology, CLIENTS, GARDEN};

pub struct LabPlan<'a> {
    pub lab: &'a str,
    pub topology: &'a Topology,
    pub nets: &'a [Net24],
    pub image: &'a str,
}

/// Docker object names, all prefixed by the lab name.
pub fn network_name(lab: &str, net: &str) -> String {
    format!("{lab}-{net}")
}
pub fn container_name(lab: &str, what: &str) -> String {
    format!("{lab}-{what}")
}
/// The garden's Project that holds the lab's shoot (its namespace is
/// `garden-<project>`, as Gardener's local setup's `local`).
pub const GARDEN_PROJECT: &str = "local";

/// etcd member names carry the seed's name (upstream `memberNamePrefix`).
pub fn member_name(seed: &str, index: usize) -> String {
    format!("{seed}-etcd-{index}")
}

impl<'a> LabPlan<'a> {
    pub fn new(lab: &'a str, topology: &'a Topology, nets: &'a [Net24], image: &'a str) -> Self {
        assert_eq!(nets.len(), topology.network_names().len());
        LabPlan {
            lab,
            topology,
            nets,
            image,
        }
    }

    fn net(&self, name: &str) -> Net24 {
        let i = self
            .topology
            .network_names()
            .iter()
            .position(|n| n == name)
            .expect("known network");
        self.nets[i]
    }

    pub fn initial_state(&self, tsig_secret: String) -> LabState {
        let t = self.topology;
        let lab = self.lab;
        let networks = t
            .network_names()
            .into_iter()
            .map(|n| {
                let subnet = self.net(&n);
                NetworkState {
                    docker_name: network_name(lab, &n),
                    router_ip: subnet.host(host::ROUTER),
                    subnet,
                    name: n,
                }
            })
            .collect();
        let seeds = t
            .seeds
            .iter()
            .map(|s| SeedState {
                name: s.name.clone(),
                role: s.role,
                network: s.name.clone(),
                gateway: ContainerRef {
                    container: container_name(lab, &format!("{}-gateway", s.name)),
                    ip: self.net(&s.name).host(host::GATEWAY),
                },
                gardenlet: Some(ContainerRef {
                    container: container_name(lab, &format!("{}-gardenlet", s.name)),
                    ip: self.net(&s.name).host(host::GARDENLET),
                }),
            })
            .collect();
        let zone = t.shoot.zone();
        let mut per_seed: std::collections::HashMap<String, usize> = Default::default();
        let members = t
            .member_seeds()
            .into_iter()
            .map(|seed| {
                let i = per_seed.entry(seed.clone()).or_default();
                let m = self.member(&seed, *i, &zone);
                *i += 1;
                m
            })
            .collect();
        let clients = self.net(CLIENTS);
        let garden = self.net(GARDEN);
        let garden_ref = |what: &str, n: u8| ContainerRef {
            container: container_name(lab, &format!("garden-{what}")),
            ip: garden.host(n),
        };
        LabState {
            version: STATE_VERSION,
            name: lab.to_string(),
            phase: Phase::Creating,
            provider: Default::default(),
            created_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            image: self.image.to_string(),
            topology: t.clone(),
            networks,
            seeds,
            router: ContainerRef {
                container: container_name(lab, "router"),
                ip: clients.host(host::ROUTER),
            },
            toolbox: ContainerRef {
                container: container_name(lab, "toolbox"),
                ip: clients.host(host::TOOLBOX),
            },
            dns: DnsState {
                server: ContainerRef {
                    container: container_name(lab, "dns"),
                    ip: clients.host(host::DNS),
                },
                zone,
                api_name: t.shoot.api_name(),
                ttl: t.dns.ttl,
                tsig_key_name: "cpmlab-update".into(),
                tsig_secret,
            },
            apiservers: (0..t.api.replicas as usize)
                .map(|i| self.apiserver(&t.source().name, i))
                .collect(),
            api_token: String::new(),
            front_proxy_ca: String::new(),
            api_kind: Default::default(),
            members,
            links: Default::default(),
            link_backend: None,
            link_seed: None,
            link_replay: None,
            probe_run: None,
            migration: None,
            etcd_druid: None,
            garden: Some(crate::state::GardenState {
                etcd: garden_ref("etcd", host::GARDEN_ETCD),
                kube_apiserver: garden_ref("kube-apiserver", host::GARDEN_KUBE_APISERVER),
                gardener_apiserver: garden_ref("gardener-apiserver", host::GARDENER_APISERVER),
                gardener_version: String::new(),
                namespace: format!("garden-{}", GARDEN_PROJECT),
            }),
            emulation: None,
        }
    }

    pub fn apiserver(&self, seed: &str, index: usize) -> ApiServerState {
        apiserver(self.lab, seed, self.net(seed), index)
    }

    pub fn member(&self, seed: &str, index: usize, zone: &str) -> MemberState {
        member(
            self.lab,
            seed,
            self.net(seed),
            index,
            zone,
            self.topology.network.peer_exposure,
        )
    }
}

/// API server replica `index` of `seed` (on `net`).
pub fn apiserver(lab: &str, seed: &str, net: Net24, index: usize) -> ApiServerState {
    let name = format!("{seed}-apiserver-{index}");
    ApiServerState {
        container: container_name(lab, &name),
        ip: net.host(host::APISERVER + index as u8),
        seed: seed.to_string(),
        name,
        terminating: false,
    }
}

/// Member `index` of `seed` (on `net`): its container, volume, address,
/// DNS name, and the gateway port of its peer URL (`exposure`: the docker
/// form's default is an address per member).
pub fn member(
    lab: &str,
    seed: &str,
    net: Net24,
    index: usize,
    zone: &str,
    exposure: Option<PeerExposure>,
) -> MemberState {
    let name = member_name(seed, index);
    MemberState {
        peer_port: match exposure {
            Some(PeerExposure::Port) => crate::ports::member_peer_port(index),
            Some(PeerExposure::Address) | None => crate::ports::ETCD_PEER_PORT,
        },
        container: container_name(lab, &name),
        volume: container_name(lab, &format!("{name}-data")),
        ip: net.host(host::ETCD + index as u8),
        host: format!("{name}.{zone}"),
        seed: seed.to_string(),
        name,
    }
}

/// A lab state as `up` plans it for the default topology (tests).
#[doc(hidden)]
pub fn sample_state() -> crate::state::LabState {
    let topo = Topology::default();
    let nets: Vec<Net24> = (0..4)
        .map(|i| Net24(std::net::Ipv4Addr::new(10, 213, i, 0)))
        .collect();
    let plan = LabPlan::new("t", &topo, &nets, "img:1");
    plan.initial_state("secret".into())
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    #[test]
    fn names_are_prefixed_and_addresses_fixed() {
        let s = crate::plan::sample_state();
        assert_eq!(s.networks[0].docker_name, "t-seed-a");
        assert_eq!(s.networks[2].docker_name, "t-clients");
        assert_eq!(s.networks[1].router_ip, Ipv4Addr::new(10, 213, 1, 2));
        assert_eq!(s.seeds[0].gateway.ip, Ipv4Addr::new(10, 213, 0, 3));
        assert_eq!(s.seeds[0].gateway.container, "t-seed-a-gateway");
        assert_eq!(s.dns.server.ip, Ipv4Addr::new(10, 213, 2, 3));
        assert_eq!(s.dns.api_name, "api.local.cpmlab.test");
        let names: Vec<&str> = s.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["seed-a-etcd-0", "seed-a-etcd-1", "seed-a-etcd-2"]);
        assert!(s.members.iter().all(|m| m.seed == "seed-a"));
        assert_eq!(s.members[2].ip, Ipv4Addr::new(10, 213, 0, 12));
        assert_eq!(s.members[1].container, "t-seed-a-etcd-1");
        assert_eq!(s.members[1].volume, "t-seed-a-etcd-1-data");
        assert_eq!(s.members[1].host, "seed-a-etcd-1.local.cpmlab.test");
    }
}
