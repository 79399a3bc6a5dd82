//! The kind form: each seed a kind cluster on its own Docker network, the
//! wan router joined to both, Istio's ingress gateway exposing every etcd
//! member and the shoot API by SNI with TLS passthrough, etcd as one
//! StatefulSet per member (or etcd-druid's `Etcd`), kube-apiserver as a
//! Deployment per seed.
//!
//! What is here: the rendered configs and manifests (`render`, readable with
//! `cpmlab up --provider kind --render DIR`), the tools and images the form
//! needs (`tools`, `cpmlab doctor --provider kind`), the clusters' creation
//! (`up`) and the workloads behind the provider interface (`provider`).

pub mod config;
pub mod lab_state;
pub mod manifests;
pub mod provider;
pub mod render;
pub mod tools;
pub mod up;

use serde::Serialize;

/// Pinned versions: what the form was written against.
pub const KIND_NODE_IMAGE: &str = "kindest/node:v1.33.4";
pub const ISTIO_VERSION: &str = "1.27.1";
pub const METALLB_VERSION: &str = "v0.15.2";
pub const KUBE_APISERVER_IMAGE: &str = "registry.k8s.io/kube-apiserver:v1.33.4";
/// Gardener's default etcd (3.4.34) and the one behind its UpgradeEtcdVersion
/// gate.
pub const ETCD_IMAGE_3_4: &str = "quay.io/coreos/etcd:v3.4.34";
pub const ETCD_IMAGE_3_5: &str = "quay.io/coreos/etcd:v3.5.21";

pub use crate::topology::PeerExposure;

/// The kind form's own settings, beside the topology.
#[derive(Debug, Clone, Serialize)]
pub struct KindSettings {
    /// Nodes per seed: 1 (a laptop) or 3 (a control plane and two workers,
    /// the members spread over zones).
    pub nodes: u8,
    pub exposure: PeerExposure,
    /// etcd through etcd-druid's `Etcd` resources instead of the lab's own
    /// StatefulSets.
    pub with_etcd_druid: bool,
}

impl Default for KindSettings {
    fn default() -> Self {
        KindSettings {
            nodes: 1,
            exposure: PeerExposure::Port,
            with_etcd_druid: false,
        }
    }
}

impl KindSettings {
    pub fn check(&self) -> Result<(), crate::errors::BadInput> {
        if ![1, 3].contains(&self.nodes) {
            return Err(crate::errors::BadInput(format!(
                "--nodes {}: 1 (a laptop) or 3 (HA: a control plane and two workers)",
                self.nodes
            )));
        }
        Ok(())
    }
}

/// The kind cluster of `seed` in lab `lab` (its kubectl context is
/// `kind-<cluster>`).
pub fn cluster_name(lab: &str, seed: &str) -> String {
    format!("{lab}-{seed}")
}

/// The shoot's control-plane namespace in each seed, as Gardener names it.
pub fn namespace(shoot: &str) -> String {
    format!("shoot--local--{shoot}")
}

/// Where Istio's ingress gateway runs.
pub const INGRESS_NAMESPACE: &str = "istio-ingress";
/// The label Istio's ingress gateway pods carry.
pub const INGRESS_SELECTOR: (&str, &str) = ("istio", "ingressgateway");

pub use crate::gateway::member_peer_port;

/// The ingress port of the shoot API and of etcd's client endpoint.
pub const API_PORT: u16 = 443;
pub const CLIENT_PORT: u16 = 2379;
pub const PEER_PORT: u16 = 2380;
