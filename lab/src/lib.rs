//! cpmlab: a local dual-seed lab and end-to-end test suite for Gardener's
//! Live Control Plane Migration. See DESIGN.md in the shared folder and the
//! docs/architecture.md for the architecture.

pub use cpmlab_core::{
    apiserver, clock, cpu, dns, errors, etcd, go_parts, kernel, kubeconfig, pki, progress,
};
pub use cpmlab_model::{addressing, labels, plan, ports, state, topology, yaml_file};
pub mod agent;
pub mod compare;
pub mod doctor;
pub use cpmlab_exposure as exposure;
pub mod fill;
pub mod gateway;
pub mod link;
pub mod migrate;
pub use cpmlab_probe as probe;
pub mod provider;
pub mod runner;
pub mod scenario;
pub mod status;
/// The verdict is its own crate (records in, judgement out); re-exported
/// under its old path.
pub use cpmlab_verdict as verdict;
