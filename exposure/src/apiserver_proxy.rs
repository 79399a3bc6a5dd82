//! The node side of Gardener's apiserver-proxy: the Envoy every shoot node
//! runs (a host-network DaemonSet in kube-system) on the `kubernetes`
//! Service's address, rendered from gardener/gardener at b312835,
//! `pkg/component/networking/apiserverproxy/templates/envoy.yaml.tpl` with
//! the values `apiserver_proxy.go` and the botanist
//! (`pkg/gardenlet/operation/botanist/apiserverproxy.go`) give it:
//!
//! - a `tcp_proxy` listener on port 443 (32 KiB per connection): every
//!   downstream connection becomes one HTTP CONNECT tunnel, whose header
//!   `X-Gardener-Destination` names the seed gateway's cluster
//!   ([`super::http_proxy::destination_header_value`]);
//! - the upstream cluster: LOGICAL_DNS on the shoot API's name at the
//!   gateway's port 8443 (`V4_ONLY`), so that a new tunnel follows the DNS
//!   record while a tunnel that exists stays where it is; TCP keepalive
//!   7200 s / 55 s; connect timeout 5 s; Envoy's DNS refresh (5 s) through
//!   the node's resolver, which caches for the record's TTL;
//! - admin on a Unix socket, and the metrics listener (port 16910) with
//!   `/ready`, as the DaemonSet probes it;
//! - started as `envoy --concurrency 2 --use-dynamic-base-id -c …`.

use serde_json::{json, Value};

use super::http_proxy::HTTP_PROXY_PORT;

/// The port the node's Envoy listens on (the `kubernetes` Service's).
pub const LISTEN_PORT: u16 = 443;
/// The metrics and readiness listener (apiserver_proxy.go's `adminPort`).
pub const ADMIN_PORT: u16 = 16910;
/// Envoy's admin socket (the template's).
pub const ADMIN_SOCKET: &str = "/etc/admin-uds/admin.socket";
/// Envoy's worker threads (the DaemonSet's `--concurrency`).
pub const CONCURRENCY: u32 = 2;
/// The connections the listener and Envoy take at most (the template's
/// runtime layer).
pub const CONNECTION_LIMIT: u32 = 10_000;

/// What the template is filled with.
#[derive(Debug, Clone)]
pub struct NodeProxy {
    /// The address the listener binds (Gardener: the `kubernetes`
    /// Service's cluster IP on the node's dummy interface).
    pub advertise_address: String,
    /// The API's name the tunnels go to (`outOfClusterAPIServerFQDN`).
    pub api_host: String,
    /// `X-Gardener-Destination`.
    pub destination: String,
}

/// Envoy's configuration for `p`, as JSON (Envoy reads it as YAML).
pub fn config(p: &NodeProxy) -> Value {
    let buffer = super::ingress_limits::PER_CONNECTION_BUFFER_LIMIT_BYTES;
    json!({
        "layered_runtime": {"layers": [{
            "name": "static_layer_0",
            "static_layer": {
                "envoy": {"resource_limits": {"listener": {"kube_apiserver": {"connection_limit": CONNECTION_LIMIT}}}},
                "overload": {"global_downstream_max_connections": CONNECTION_LIMIT},
            },
        }]},
        "admin": {"address": {"pipe": {"path": ADMIN_SOCKET}}},
        "static_resources": {
            "listeners": [
                {
                    "name": "kube_apiserver",
                    "address": {"socket_address": {"address": p.advertise_address, "port_value": LISTEN_PORT}},
                    "per_connection_buffer_limit_bytes": buffer,
                    "filter_chains": [{"filters": [{
                        "name": "envoy.filters.network.tcp_proxy",
                        "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                            "stat_prefix": "kube_apiserver",
                            "cluster": "kube_apiserver",
                            "tunneling_config": {
                                // Envoy drops it; the configuration needs one.
                                "hostname": format!("{}:443", p.api_host),
                                "headers_to_add": [{"header": {
                                    "key": super::http_proxy::DESTINATION_HEADER,
                                    "value": p.destination,
                                }}],
                            },
                            "access_log": [{
                                "name": "envoy.access_loggers.stdout",
                                "typed_config": {
                                    "@type": "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog",
                                    "log_format": {"text_format_source": {"inline_string":
                                        "[%START_TIME%] %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% rx %BYTES_SENT% tx %DURATION%ms \"%DOWNSTREAM_REMOTE_ADDRESS%\" \"%UPSTREAM_HOST%\"\n"}},
                                },
                            }],
                        },
                    }]}],
                },
                {
                    "name": "metrics",
                    "address": {"socket_address": {"address": "0.0.0.0", "port_value": ADMIN_PORT}},
                    "filter_chains": [{"filters": [{
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                            "stat_prefix": "ingress_http",
                            "use_remote_address": true,
                            "common_http_protocol_options": {
                                "idle_timeout": "8s",
                                "max_connection_duration": "10s",
                                "max_headers_count": 20,
                                "max_stream_duration": "8s",
                                "headers_with_underscores_action": "REJECT_REQUEST",
                            },
                            "http2_protocol_options": {
                                "max_concurrent_streams": 5,
                                "initial_stream_window_size": 65536,
                                "initial_connection_window_size": 1048576,
                            },
                            "stream_idle_timeout": "8s",
                            "request_timeout": "9s",
                            "codec_type": "AUTO",
                            "route_config": {
                                "name": "local_route",
                                "virtual_hosts": [{
                                    "name": "local_service",
                                    "domains": ["*"],
                                    "routes": [
                                        {"match": {"path": "/metrics"}, "route": {"cluster": "uds_admin", "prefix_rewrite": "/stats/prometheus"}},
                                        {"match": {"path": "/ready"}, "route": {"cluster": "uds_admin"}},
                                    ],
                                }],
                            },
                            "http_filters": [super::filters::router()],
                        },
                    }]}],
                },
            ],
            "clusters": [
                {
                    "name": "kube_apiserver",
                    "connect_timeout": "5s",
                    "per_connection_buffer_limit_bytes": buffer,
                    "type": "LOGICAL_DNS",
                    "dns_lookup_family": "V4_ONLY",
                    "lb_policy": "ROUND_ROBIN",
                    "load_assignment": {
                        "cluster_name": "kube_apiserver",
                        "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {
                            "address": p.api_host, "port_value": HTTP_PROXY_PORT,
                        }}}}]}],
                    },
                    "upstream_connection_options": {"tcp_keepalive": {"keepalive_time": 7200, "keepalive_interval": 55}},
                },
                {
                    "name": "uds_admin",
                    "connect_timeout": "0.25s",
                    "type": "STATIC",
                    "lb_policy": "ROUND_ROBIN",
                    "load_assignment": {
                        "cluster_name": "uds_admin",
                        "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"pipe": {"path": ADMIN_SOCKET}}}}]}],
                    },
                    "transport_socket": {
                        "name": "envoy.transport_sockets.raw_buffer",
                        "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer"},
                    },
                },
            ],
        },
    })
}

/// Envoy's arguments after the binary, for a configuration at `path`.
pub fn args(path: &str) -> Vec<String> {
    vec![
        "--concurrency".into(),
        CONCURRENCY.to_string(),
        "--use-dynamic-base-id".into(),
        "-c".into(),
        path.into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_connection_is_a_connect_tunnel_to_the_gateway_by_the_api_name() {
        let c = config(&NodeProxy {
            advertise_address: "0.0.0.0".into(),
            api_host: "api.local.cpmlab.test".into(),
            destination: "shoot--local--local--kube-apiserver-socket".into(),
        });
        let l = &c["static_resources"]["listeners"][0];
        assert_eq!(l["address"]["socket_address"]["port_value"], 443);
        let tunnel = &l["filter_chains"][0]["filters"][0]["typed_config"]["tunneling_config"];
        assert_eq!(
            tunnel["headers_to_add"][0]["header"]["key"],
            "X-Gardener-Destination"
        );
        assert_eq!(
            tunnel["headers_to_add"][0]["header"]["value"],
            "shoot--local--local--kube-apiserver-socket"
        );
        let cl = &c["static_resources"]["clusters"][0];
        assert_eq!(cl["type"], "LOGICAL_DNS");
        let addr = &cl["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
            ["socket_address"];
        assert_eq!(addr["address"], "api.local.cpmlab.test");
        assert_eq!(addr["port_value"], 8443);
        assert_eq!(
            cl["upstream_connection_options"]["tcp_keepalive"]["keepalive_interval"],
            55
        );
        assert_eq!(args("/x")[..2], ["--concurrency", "2"]);
    }
}
