//! The shoot's API servers as the lab runs them: which binary a replica
//! runs and its command line (`launch`), when a replica is ready (`ready`),
//! and the small TLS client the lab's own checks use (`client`). The
//! stand-in API server is its own crate (`standin/`, cpmlab-standin),
//! re-exported here under its old paths.

pub mod client;
pub mod launch;
pub mod ready;

pub use cpmlab_standin::{
    connect_etcd, errors, failpoint, protobuf, resources, run, server, store, tls_config,
    ApiServerConfig,
};
