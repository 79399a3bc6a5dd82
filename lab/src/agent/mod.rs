//! Roles that run inside the lab's containers, as hidden `cpmlab agent`
//! subcommands (the lab image carries the binary).

pub mod echo;
pub mod peer_check;
pub mod relay;
pub mod router;
pub mod rtt;
pub mod tun;
pub mod vnet_hdr;
