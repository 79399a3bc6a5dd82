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

/// Every Docker object of a lab carries `cpmlab.lab=<NAME>`.
pub const LABEL_LAB: &str = "cpmlab.lab";
/// What the object is in the lab (router, gateway, etcd, dns, toolbox).
pub const LABEL_ROLE: &str = "cpmlab.role";
/// The seed a container belongs to, when it belongs to one.
pub const LABEL_SEED: &str = "cpmlab.seed";
/// Images the lab built (shared by all labs, kept by `down`).
pub const LABEL_IMAGE: &str = "cpmlab.image";
