//! The etcd members of a seed as the kind form names and exposes them:
//! their names, SNI hosts and peer ports on the seed's ingress, and the
//! zone spread their pods (and the API's) get. Shared by the lab's own
//! StatefulSets (`manifests`) and etcd-druid's `Etcd` (`druid`).

use serde_json::{json, Value};

use super::{member_peer_port, KindSettings, PeerExposure, CLIENT_PORT, PEER_PORT};
use crate::topology::Topology;

/// A member as the kind form exposes it.
#[derive(Debug, Clone)]
pub struct KindMember {
    pub name: String,
    pub seed: String,
    pub index: usize,
    /// The DNS name peers and clients use (the SNI host).
    pub host: String,
    /// The port its peer URL names on the seed's ingress.
    pub peer_port: u16,
}

impl KindMember {
    pub fn peer_url(&self) -> String {
        format!("https://{}:{}", self.host, self.peer_port)
    }
    pub fn client_url(&self) -> String {
        format!("https://{}:{CLIENT_PORT}", self.host)
    }
    /// The member's own Service, which the ingress routes its SNI name to.
    pub fn service(&self) -> String {
        self.name.clone()
    }
    /// The pod its StatefulSet runs.
    pub fn pod(&self) -> String {
        format!("{}-0", self.name)
    }
}

/// The members planned for `seed`, in index order.
pub fn members(t: &Topology, s: &KindSettings, seed: &str) -> Vec<KindMember> {
    let zone = t.shoot.zone();
    (0..t.etcd.members as usize)
        .map(|i| {
            let name = crate::plan::member_name(seed, i);
            KindMember {
                host: format!("{name}.{zone}"),
                peer_port: match s.exposure {
                    PeerExposure::Port => member_peer_port(i),
                    PeerExposure::Address => PEER_PORT,
                },
                seed: seed.to_string(),
                index: i,
                name,
            }
        })
        .collect()
}

/// The host name of etcd's client endpoint on a seed's ingress.
pub fn client_host(t: &Topology, seed: &str) -> String {
    format!("etcd-main-client.{seed}.{}", t.shoot.zone())
}

/// Spreads a seed's pods matching `labels` over its zones, as Gardener
/// spreads a multi-zone control plane (`maxSkew: 1` on the zone label,
/// `DoNotSchedule`); a one-node seed has one zone, which every pod fits.
pub fn zone_spread(labels: Value) -> Value {
    json!([{
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": labels},
    }])
}
