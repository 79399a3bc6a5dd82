//! The docker provider: networks, the wan router, per-seed gateways, the
//! shoot's etcd, DNS and a toolbox client, all as labelled Docker objects.

// The lower crates' modules under the paths the provider's code names.
use cpmlab_core::{apiserver, dns, errors, etcd, go_parts, kernel, lab_net, pki, progress};
use cpmlab_exposure as exposure;
use cpmlab_lab::{gateway, link, migrate};
use cpmlab_model::{addressing, labels, plan, state, topology};
use cpmlab_probe as probe;

pub mod container;
pub mod cpu;
pub mod down;
pub mod engine;
pub mod garden_specs;
pub mod gateway_sync;
pub mod images;
pub mod netns;
pub mod provider;
pub mod relay;
pub mod routes;
pub mod seed;
pub mod state_dir;
pub mod up;

pub use provider::DockerProvider;

/// The labels come from the model: the kind form labels its objects alike.
pub use crate::labels::{LABEL_IMAGE, LABEL_LAB, LABEL_ROLE, LABEL_SEED};
