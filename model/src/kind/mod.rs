//! The kind form's placement of the lab, as data: its own settings beside
//! the topology, the names of its clusters and namespaces, and the lab
//! state of a kind lab (`lab_state`). Pure functions; the kind provider
//! (crate `cpmlab-provider-kind`) re-exports them under its old paths.

pub mod druid_names;
pub mod lab_state;

use serde::Serialize;

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
    /// How each seed's `Etcd` and its members are named (with
    /// `with_etcd_druid`).
    pub druid_naming: DruidNaming,
}

/// How the seeds' `Etcd` resources are named (recorded in the lab state).
pub use crate::state::DruidNaming;

impl Default for KindSettings {
    fn default() -> Self {
        KindSettings {
            nodes: 1,
            exposure: PeerExposure::Port,
            with_etcd_druid: false,
            druid_naming: DruidNaming::Distinct,
        }
    }
}

impl KindSettings {
    /// The settings a kind lab's state records, as far as it records them:
    /// the peer exposure (`lab_state::kind_state` writes it into the
    /// topology) and etcd-druid's naming; not the nodes per seed.
    pub fn of_state(state: &crate::state::LabState) -> KindSettings {
        KindSettings {
            exposure: state
                .topology
                .network
                .peer_exposure
                .unwrap_or(PeerExposure::Port),
            with_etcd_druid: state.etcd_druid.is_some(),
            druid_naming: state.etcd_druid.unwrap_or_default(),
            ..Default::default()
        }
    }

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

/// Where a seed's gardenlet runs, as Gardener's gardenlet chart installs
/// it (`charts/gardener/gardenlet`, released into `garden`): a Deployment
/// `gardenlet` with the ServiceAccount `gardenlet`.
pub const GARDENLET_NAMESPACE: &str = "garden";
pub const GARDENLET_DEPLOYMENT: &str = "gardenlet";

/// Where Istio's ingress gateway runs.
pub const INGRESS_NAMESPACE: &str = "istio-ingress";
/// The label Istio's ingress gateway pods carry.
pub const INGRESS_SELECTOR: (&str, &str) = ("istio", "ingressgateway");
