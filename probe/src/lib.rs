//! Continuous probe clients of the shoot API and what they record: the
//! probe agent's lanes (readyz, get, list, write, watch over new, reused
//! and keep-alive connections), kube-rs's informer, client-go's informer
//! and leader election, the final read, and the run directory they write.

// The lower crates' modules under the paths the probe code names.
#[cfg(test)]
use cpmlab_core::pki;
use cpmlab_core::{apiserver, dns, errors, etcd, go_parts, lab_net};
use cpmlab_exposure as exposure;
use cpmlab_model::{link, state, topology, yaml_file};
use cpmlab_provider as provider;
use cpmlab_verdict as verdict;

pub mod agent;
pub mod clientgo;
pub mod clientgo_config;
pub use cpmlab_core::clock;
pub mod container_logs;
pub mod context;
pub mod final_read;
pub mod history;
pub mod informer;
pub mod node;
pub mod outside;
pub mod record;
pub mod run;
pub mod target;
pub mod transport;
