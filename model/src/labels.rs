//! The labels every Docker object (and, in the kind form, every Kubernetes
//! object) of a lab carries: how `down`, `status` and the leak checks find
//! a lab's objects whichever provider made them.

/// Every object of a lab carries `cpmlab.lab=<NAME>`.
pub const LABEL_LAB: &str = "cpmlab.lab";
/// What the object is in the lab (router, gateway, etcd, dns, toolbox).
pub const LABEL_ROLE: &str = "cpmlab.role";
/// The seed an object belongs to, when it belongs to one.
pub const LABEL_SEED: &str = "cpmlab.seed";
/// Images the lab built (shared by all labs, kept by `down`).
pub const LABEL_IMAGE: &str = "cpmlab.image";
