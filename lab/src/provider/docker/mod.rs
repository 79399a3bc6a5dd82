//! The docker provider: networks, the wan router, per-seed gateways, the
//! shoot's etcd, DNS and a toolbox client, all as labelled Docker objects.

pub mod cpu;
pub mod down;
pub mod engine;
pub mod gateway_sync;
pub mod images;
pub mod netns;
pub mod provider;
pub mod routes;
pub mod seed;
pub mod up;

pub use provider::DockerProvider;

/// The labels come from the model: the kind form labels its objects alike.
pub use crate::labels::{LABEL_IMAGE, LABEL_LAB, LABEL_ROLE, LABEL_SEED};
