//! The Live Control Plane Migration: upstream's condition model, the etcd
//! membership plans, the reference flow (`cpmlab migrate`) that drives them
//! against the lab, the `classic` plan's snapshot and restore, the `mirror` plan's
//! etcd Mirror Maker, and the
//! external driver that lets another controller take its place.

pub use cpmlab_model::migrate::conditions;
pub mod etcd_ops;
pub mod external;
pub mod flow;
pub mod garden_peer;
pub mod gardenlet;
pub mod operator;
pub use cpmlab_model::migrate::gateway_handover;
pub use cpmlab_model::migrate::membership;
pub use cpmlab_model::migrate::order;
pub mod mirror;
pub mod peer;
pub mod record;
pub mod snapshot;
