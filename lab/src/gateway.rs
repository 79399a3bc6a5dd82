//! A seed's ingress gateway: HAProxy in TCP mode that routes each etcd
//! member's client and peer port by TLS SNI, passing TLS through untouched
//! (what Istio's Gateway + VirtualService per member does in Gardener).
//! etcd therefore sees the gateway's address as the source of every peer
//! connection, which is why members run with peer client-SAN checks off.

use std::fmt::Write;
use std::net::Ipv4Addr;

/// One backend the gateway routes to by SNI.
#[derive(Debug, Clone)]
pub struct Route {
    /// The SNI name (the member's DNS name).
    pub sni: String,
    pub ip: Ipv4Addr,
}

/// Ports the gateway exposes, each routed by SNI to the same port behind it.
pub const ETCD_CLIENT_PORT: u16 = 2379;
pub const ETCD_PEER_PORT: u16 = 2380;

fn backend_name(kind: &str, sni: &str) -> String {
    format!("{kind}_{}", sni.replace('.', "_"))
}

/// The HAProxy configuration for a gateway fronting `routes`.
pub fn haproxy_config(seed: &str, routes: &[Route]) -> String {
    let mut c = String::new();
    let _ = write!(
        c,
        "# cpmlab gateway for seed {seed}: SNI routing, TLS passthrough\n\
         global\n  log stderr format short local0 notice\n\n\
         defaults\n  mode tcp\n  log global\n  option dontlognull\n  timeout connect 5s\n  timeout client 1h\n  timeout server 1h\n"
    );
    for (kind, port) in [("client", ETCD_CLIENT_PORT), ("peer", ETCD_PEER_PORT)] {
        let _ = write!(
            c,
            "\nfrontend etcd_{kind}\n  bind :{port}\n  tcp-request inspect-delay 5s\n  tcp-request content accept if {{ req_ssl_hello_type 1 }}\n"
        );
        for r in routes {
            let _ = writeln!(
                c,
                "  use_backend {} if {{ req_ssl_sni -i {} }}",
                backend_name(kind, &r.sni),
                r.sni
            );
        }
        for r in routes {
            let _ = write!(
                c,
                "\nbackend {}\n  server member {}:{port}\n",
                backend_name(kind, &r.sni),
                r.ip
            );
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_each_member_by_sni_on_both_ports() {
        let cfg = haproxy_config(
            "seed-a",
            &[
                Route {
                    sni: "seed-a-etcd-0.local.cpmlab.test".into(),
                    ip: "10.0.0.10".parse().unwrap(),
                },
                Route {
                    sni: "seed-a-etcd-1.local.cpmlab.test".into(),
                    ip: "10.0.0.11".parse().unwrap(),
                },
            ],
        );
        assert!(cfg.contains("bind :2379"));
        assert!(cfg.contains("bind :2380"));
        assert!(cfg.contains(
            "use_backend peer_seed-a-etcd-1_local_cpmlab_test if { req_ssl_sni -i seed-a-etcd-1.local.cpmlab.test }"
        ));
        assert!(cfg.contains("server member 10.0.0.11:2380"));
        assert!(cfg.contains("server member 10.0.0.10:2379"));
        assert!(
            !cfg.contains("ssl crt"),
            "the gateway must not terminate TLS"
        );
    }

    #[test]
    fn gateway_without_members_is_valid() {
        let cfg = haproxy_config("seed-b", &[]);
        assert!(cfg.contains("frontend etcd_peer"));
        assert!(!cfg.contains("backend "));
    }
}
