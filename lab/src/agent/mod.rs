//! Roles that run inside the lab's containers, as hidden `cpmlab agent`
//! subcommands (the host's binary is mounted into every container).

pub mod echo;
pub mod peer_check;
pub mod router;
pub mod rtt;
pub mod tun;
pub mod vnet_hdr;
