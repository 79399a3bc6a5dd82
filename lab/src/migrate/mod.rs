//! The Live Control Plane Migration (issue 5, in progress): the condition
//! model upstream uses and the etcd membership plans, as pure, tested parts.
//! The flow that drives them (`cpmlab migrate`) is not wired yet.

pub mod conditions;
pub mod etcd_ops;
pub mod membership;
