//! The running lab's operations, above the provider interface and below
//! both forms: shaping the link between the seeds (`link`), the roles that
//! run inside the lab's containers (`agent`: the wan router's delay line,
//! the peer and RTT checks), the docker form's gateway agent (`gateway`,
//! Envoy as istiod would configure it), the reference Live CPM flow
//! (`migrate`), a lab's status (`status`) and filling the shoot
//! (`fill`). docs/architecture.md places every crate.

// The lower crates' modules under the paths the code names.
use cpmlab_core::{apiserver, dns, errors, etcd, kernel, kubeconfig, pki, progress};
use cpmlab_exposure as exposure;
use cpmlab_garden as garden;
#[cfg(test)]
use cpmlab_model::plan;
use cpmlab_model::{addressing, state, topology};
use cpmlab_probe as probe;
use cpmlab_provider as provider;

pub mod agent;
pub mod fill;
pub mod gateway;
pub mod link;
pub mod migrate;
pub mod status;
