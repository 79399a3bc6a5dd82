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
    /// The gateway port its peer URL names: `ETCD_PEER_PORT`, shared and
    /// told apart by SNI and address, or a port of its own
    /// (`member_peer_port`); either way the member listens on
    /// `ETCD_PEER_PORT` behind the gateway.
    pub peer_port: u16,
}

/// Ports the gateway exposes, each routed by SNI to the same port behind it.
pub const ETCD_CLIENT_PORT: u16 = 2379;
pub const ETCD_PEER_PORT: u16 = 2380;

/// Member `index`'s own peer port on its seed's gateway in `port`
/// exposure (as gardener/gardener#15576 gives each member a port of its
/// own on the seed's ingress); the kind form uses the same.
pub fn member_peer_port(index: usize) -> u16 {
    9100 + index as u16
}

fn backend_name(kind: &str, sni: &str) -> String {
    format!("{kind}_{}", sni.replace('.', "_"))
}

/// The shoot API behind a gateway: the API name (SNI) and the seed's replicas.
#[derive(Debug, Clone)]
pub struct ApiRoute {
    pub sni: String,
    pub servers: Vec<(String, Ipv4Addr)>,
    /// The bearer token the readiness check sends: kube-apiserver runs with
    /// `--anonymous-auth=false` as Gardener runs it, and Gardener's probes
    /// carry a token (`pkg/component/kubernetes/apiserver/deployment.go`).
    pub health_token: String,
}

pub const API_PORT: u16 = 443;
/// HAProxy's statistics (CSV at `/stats;csv`), on the gateway's loopback.
pub const STATS_PORT: u16 = 8404;
/// How long the gateway waits for a replica's /readyz: more than the 2 s
/// the replica's own etcd check may take.
pub const READYZ_CHECK_TIMEOUT_MS: u32 = 2500;

/// The HAProxy configuration for a gateway fronting `routes` and the API.
/// API replicas are health-checked on /readyz (over TLS, as a load balancer
/// in front of kube-apiserver does), so a replica that starts shutting down
/// gets no new connections while its open ones are served to the end. A
/// check waits for the answer as long as kube-apiserver's readyz may take
/// for its etcd check (2 s, which waits out an etcd election): a replica
/// leaves the pool when /readyz fails, not when etcd is slow to answer.
pub fn haproxy_config(seed: &str, routes: &[Route], api: &ApiRoute) -> String {
    let mut c = String::new();
    let _ = write!(
        c,
        "# cpmlab gateway for seed {seed}: SNI routing, TLS passthrough\n\
         global\n  log stderr format short local0 notice\n\n\
         defaults\n  mode tcp\n  log global\n  option dontlognull\n  timeout connect 5s\n  timeout client 1h\n  timeout server 1h\n\n\
         # Counters for the run directory (`cpmlab run` reads them), on loopback only.\n\
         frontend stats\n  mode http\n  bind 127.0.0.1:{STATS_PORT}\n  stats enable\n  stats uri /stats\n"
    );
    // The client port is shared, routed by SNI; peers arrive on the shared
    // peer port or, in `port` exposure, each on a port of its own (still
    // checked by SNI, as upstream's ingress does).
    let mut peer_ports: Vec<u16> = routes.iter().map(|r| r.peer_port).collect();
    peer_ports.push(ETCD_PEER_PORT);
    peer_ports.sort_unstable();
    peer_ports.dedup();
    let mut frontends: Vec<(&str, String, u16, Vec<&Route>)> = vec![(
        "client",
        "etcd_client".into(),
        ETCD_CLIENT_PORT,
        routes.iter().collect(),
    )];
    for port in peer_ports {
        frontends.push((
            "peer",
            if port == ETCD_PEER_PORT {
                "etcd_peer".into()
            } else {
                format!("etcd_peer_{port}")
            },
            port,
            routes.iter().filter(|r| r.peer_port == port).collect(),
        ));
    }
    for (kind, name, port, routed) in &frontends {
        let _ = write!(
            c,
            "\nfrontend {name}\n  bind :{port}\n  tcp-request inspect-delay 5s\n  tcp-request content accept if {{ req_ssl_hello_type 1 }}\n"
        );
        for r in routed {
            let _ = writeln!(
                c,
                "  use_backend {} if {{ req_ssl_sni -i {} }}",
                backend_name(kind, &r.sni),
                r.sni
            );
        }
    }
    for (kind, port) in [("client", ETCD_CLIENT_PORT), ("peer", ETCD_PEER_PORT)] {
        for r in routes {
            let _ = write!(
                c,
                "\nbackend {}\n  server member {}:{port}\n",
                backend_name(kind, &r.sni),
                r.ip
            );
        }
    }
    let _ = write!(
        c,
        "\nfrontend shoot_api\n  bind :{API_PORT}\n  tcp-request inspect-delay 5s\n  tcp-request content accept if {{ req_ssl_hello_type 1 }}\n"
    );
    if !api.servers.is_empty() {
        let _ = write!(
            c,
            "  use_backend shoot_api if {{ req_ssl_sni -i {} }}\n\n\
             backend shoot_api\n  balance roundrobin\n  option httpchk\n  http-check send meth GET uri /readyz hdr Authorization \"Bearer {}\"\n  http-check expect status 200\n  timeout check {READYZ_CHECK_TIMEOUT_MS}ms\n",
            api.sni, api.health_token
        );
        for (name, ip) in &api.servers {
            let _ = writeln!(
                c,
                "  server {name} {ip}:{API_PORT} check check-ssl verify none inter 500ms fall 2 rise 2"
            );
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_api() -> ApiRoute {
        ApiRoute {
            sni: "api.local.cpmlab.test".into(),
            servers: vec![],
            health_token: "t".into(),
        }
    }

    #[test]
    fn api_replicas_are_balanced_and_health_checked() {
        let api = ApiRoute {
            sni: "api.local.cpmlab.test".into(),
            servers: vec![
                ("seed-a-apiserver-0".into(), "10.0.0.20".parse().unwrap()),
                ("seed-a-apiserver-1".into(), "10.0.0.21".parse().unwrap()),
            ],
            health_token: "t0k".into(),
        };
        let cfg = haproxy_config("seed-a", &[], &api);
        assert!(cfg.contains("bind :443"));
        assert!(cfg.contains("use_backend shoot_api if { req_ssl_sni -i api.local.cpmlab.test }"));
        assert!(
            cfg.contains("http-check send meth GET uri /readyz hdr Authorization \"Bearer t0k\"")
        );
        assert!(cfg.contains("timeout check 2500ms"), "{cfg}");
        assert!(cfg.contains("server seed-a-apiserver-1 10.0.0.21:443 check check-ssl verify none"));
        let none = haproxy_config("seed-b", &[], &no_api());
        assert!(none.contains("bind :443") && !none.contains("backend shoot_api"));
    }

    #[test]
    fn routes_each_member_by_sni_on_both_ports() {
        let cfg = haproxy_config(
            "seed-a",
            &[
                Route {
                    sni: "seed-a-etcd-0.local.cpmlab.test".into(),
                    ip: "10.0.0.10".parse().unwrap(),
                    peer_port: ETCD_PEER_PORT,
                },
                Route {
                    sni: "seed-a-etcd-1.local.cpmlab.test".into(),
                    ip: "10.0.0.11".parse().unwrap(),
                    peer_port: ETCD_PEER_PORT,
                },
            ],
            &no_api(),
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
    fn port_exposure_gives_each_member_a_peer_port_of_its_own() {
        let route = |i: usize| Route {
            sni: format!("seed-b-etcd-{i}.local.cpmlab.test"),
            ip: format!("10.0.1.1{i}").parse().unwrap(),
            peer_port: member_peer_port(i),
        };
        let cfg = haproxy_config("seed-b", &[route(0), route(1)], &no_api());
        let peer_1 = cfg
            .split("\nfrontend ")
            .find(|f| f.starts_with("etcd_peer_9101"))
            .and_then(|f| f.split("\nbackend ").next())
            .unwrap_or_else(|| panic!("{cfg}"));
        assert!(peer_1.contains("bind :9101"));
        // Only its own member, by SNI; behind the gateway, the peer port.
        assert!(peer_1.contains("req_ssl_sni -i seed-b-etcd-1.local.cpmlab.test"));
        assert!(!peer_1.contains("seed-b-etcd-0"), "{peer_1}");
        assert!(cfg.contains("server member 10.0.1.11:2380"));
        // The shared peer port stays (with no member behind it).
        assert!(cfg.contains("bind :2380") && cfg.contains("bind :9100"));
    }

    #[test]
    fn gateway_without_members_is_valid() {
        let cfg = haproxy_config("seed-b", &[], &no_api());
        assert!(cfg.contains("frontend etcd_peer"));
        assert!(!cfg.contains("backend "));
    }
}
