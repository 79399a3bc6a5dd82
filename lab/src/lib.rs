//! cpmlab: a local dual-seed lab and end-to-end test suite for Gardener's
//! Live Control Plane Migration. See DESIGN.md in the shared folder and the
//! docs/architecture.md for the architecture.

pub use cpmlab_model::{addressing, labels, plan, ports, state, topology, yaml_file};
pub mod agent;
pub mod apiserver;
pub mod compare;
pub mod cpu;
pub mod dns;
pub mod doctor;
pub mod errors;
pub mod etcd;
pub use cpmlab_exposure as exposure;
pub mod fill;
pub mod gateway;
pub mod go_parts;
pub mod kernel;
pub mod kubeconfig;
pub mod link;
pub mod migrate;
pub mod pki;
pub mod probe;
pub mod progress;
pub mod provider;
pub mod runner;
pub mod scenario;
pub mod status;
/// The verdict is its own crate (records in, judgement out); re-exported
/// under its old path.
pub use cpmlab_verdict as verdict;
