//! The ports the lab's parts listen on, as Gardener and etcd set them:
//! the shoot API's on a seed's gateway, etcd's client and peer ports, and
//! each member's own peer port in `port` exposure. Data the lab state,
//! the gateways and both providers share.

/// The gateway port of the shoot API (pkg/utils/istio/gateway.go's httpsPort).
pub const API_PORT: u16 = 443;
/// etcd's client port, on the gateway and behind it.
pub const ETCD_CLIENT_PORT: u16 = 2379;
/// etcd's peer port behind the gateway, and the shared gateway peer port.
pub const ETCD_PEER_PORT: u16 = 2380;

/// Member `index`'s own peer port on its seed's gateway in `port` exposure
/// (a port of its own per member on the seed's ingress); both forms use it.
pub fn member_peer_port(index: usize) -> u16 {
    9100 + index as u16
}
