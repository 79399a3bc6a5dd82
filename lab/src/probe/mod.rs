//! Continuous probe clients of the shoot API and what they record.

pub mod agent;
pub mod clientgo;
pub mod clientgo_config;
pub use cpmlab_core::clock;
pub mod container_logs;
pub mod context;
pub mod final_read;
pub mod informer;
pub mod outside;
pub mod record;
pub mod run;
pub mod target;
pub mod transport;
