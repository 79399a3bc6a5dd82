//! What every part of the lab shares: its errors and exit codes, the lab's
//! PKI, progress on a terminal, the wall clock of records and events, the
//! host checks (kernel, CPU, the Go parts built into `~/.cache/cpmlab`),
//! and the lab's own clients of etcd, of the shoot's API servers (with how
//! a replica is launched) and of its DNS server (RFC 2136), and the
//! kubeconfig they write. No provider, no migration, no probe.

// The model's and the exposure's modules under the paths the code names.
use cpmlab_exposure as exposure;
#[cfg(test)]
use cpmlab_model::plan;
use cpmlab_model::{state, topology};

pub mod apiserver;
pub mod clock;
pub mod cpu;
pub mod dns;
pub mod errors;
pub mod etcd;
pub mod gateway_admin;
pub mod go_parts;
pub mod kernel;
pub mod kubeconfig;
pub mod lab_net;
pub mod pki;
pub mod progress;
pub mod raft_progress;
