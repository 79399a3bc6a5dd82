//! The seed side of Gardener's apiserver-proxy: how a shoot node's Envoy
//! reaches the shoot API through the seed's ingress gateway
//! (gardener/gardener at b312835).
//!
//! - Every seed's ingress gateway has an HTTP listener on port 8443
//!   (`vpnseedserver.HTTPProxyGatewayPort`; the istio-ingress chart's
//!   `http-proxy-gateway.yaml` opens it with a Gateway for a host that does
//!   not exist, and `http-proxy-envoy-filter.yaml` merges the routes): a
//!   CONNECT request whose `X-Gardener-Destination` header names an allowed
//!   cluster is tunnelled to that cluster (`cluster_header`); everything
//!   else is redirected to https on 443.
//! - Where TLS ends at the gateway (Gardener's default), the shoot's
//!   apiserver-proxy names the cluster `<namespace>--kube-apiserver-socket`
//!   (sni.go's `GetAPIServerProxyTargetClusterName`), which sni.go's
//!   per-shoot EnvoyFilter (`templates/envoyfilter-apiserver-proxy.yaml`)
//!   adds: a static cluster to an internal listener on the abstract socket
//!   `@kube-apiservers/<namespace>`, which terminates TLS with the API's
//!   certificate and routes like the API's own listener (the same Lua
//!   identity filter, the mutual-TLS route keyed by the shoot, the upgrade
//!   route, the rest to kube-apiserver).
//! - Where TLS passes through, the header names kube-apiserver's own
//!   cluster (`outbound|443||kube-apiserver.<namespace>.svc.cluster.local`)
//!   and the node's TLS goes to kube-apiserver untouched
//!   (pkg/component/networking/apiserverproxy/apiserver_proxy.go).
//!
//! Both forms render these values: the docker form's Envoy as dynamic
//! resources, the kind form's as the chart's Gateway and EnvoyFilters.

use serde_json::{json, Value};

use super::{ApiDestination, ApiExposure, ApiRoute, Exposure};

/// The gateway's HTTP CONNECT port (vpnseedserver.HTTPProxyGatewayPort).
pub const HTTP_PROXY_PORT: u16 = 8443;
/// The header that names the cluster a tunnel goes to.
pub const DESTINATION_HEADER: &str = "X-Gardener-Destination";
/// The clusters a tunnel may go to (http-proxy-envoy-filter.yaml's regex:
/// the VPN seed servers, kube-apiservers, the apiserver-proxy sockets).
pub const DESTINATION_REGEX: &str = r"^(outbound\|(1194\|\|vpn-seed-server(-[0-4])?|443\|\|kube-apiserver)\..*\.svc\.cluster\.local|(shoot-[a-z0-9]+(-[a-z0-9]+)*|shoot--[a-z0-9]+(-[a-z0-9]+)*--[a-z0-9]+(-[a-z0-9]+)*)--kube-apiserver-socket)$";
/// The Gateway the chart opens the port with, for a host that does not
/// exist (http-proxy-gateway.yaml).
pub const GATEWAY_NAME: &str = "http-proxy";
pub const BLACKHOLE_HOST: &str = "non-existing-blackhole.garden.svc.cluster.local";
/// The dynamic metadata key the internal listener's Lua filter sets to the
/// shoot's namespace for a request with a client certificate (sni.go's
/// `authenticationDynamicMetadataKeyAPIServerProxy`).
pub const AUTHENTICATED_SHOOT_KEY: &str = "authenticated-shoot";

/// The internal listener's (and its cluster's) name in `namespace`.
pub fn socket_cluster(namespace: &str) -> String {
    format!("{namespace}--kube-apiserver-socket")
}

/// The internal listener's abstract socket.
pub fn socket_pipe(namespace: &str) -> String {
    format!("@kube-apiservers/{namespace}")
}

/// The `X-Gardener-Destination` a shoot node's apiserver-proxy sends for
/// an API exposed in `mode` (apiserver_proxy.go).
pub fn destination_header_value(api: &ApiRoute, namespace: &str) -> String {
    match api.mode {
        ApiExposure::Termination => socket_cluster(namespace),
        ApiExposure::Passthrough => api.destination(namespace, ApiDestination::Plain).cluster(),
    }
}

/// The 8443 connection manager's routes (http-proxy-envoy-filter.yaml):
/// an allowed CONNECT to the cluster its header names, any other request
/// redirected to https on 443.
pub fn route_config() -> Value {
    json!({
        "virtual_hosts": [{
            "name": GATEWAY_NAME,
            "domains": ["*"],
            "routes": [
                {
                    "match": {
                        "connect_matcher": {},
                        "headers": [{
                            "name": DESTINATION_HEADER,
                            "string_match": {"safe_regex": {"regex": DESTINATION_REGEX}},
                        }],
                    },
                    "route": {
                        "cluster_header": DESTINATION_HEADER,
                        "upgrade_configs": [{"upgrade_type": "CONNECT", "connect_config": {}}],
                    },
                },
                {"match": {"connect_matcher": {}}, "redirect": {"https_redirect": true, "port_redirect": 443}},
                {"match": {"prefix": "/"}, "redirect": {"https_redirect": true, "port_redirect": 443}},
            ],
        }],
    })
}

/// What the chart merges into the 8443 connection manager besides the
/// routes: HTTP/1.0 accepted, CONNECT upgrades.
pub fn connection_manager_options() -> Value {
    json!({
        "http_protocol_options": {"accept_http_10": true},
        "upgrade_configs": [{"upgrade_type": "CONNECT"}],
    })
}

/// Where the internal listener's certificates come from.
pub enum TlsSource<'a> {
    /// Files in the gateway (the docker form): certificate, key, client CA.
    Files {
        cert: &'a str,
        key: &'a str,
        client_ca: &'a str,
    },
    /// Istio's SDS by the Gateway's credential (the kind form).
    Sds { credential: &'a str },
}

fn downstream_tls(tls: &TlsSource) -> Value {
    let common = match tls {
        TlsSource::Files {
            cert,
            key,
            client_ca,
        } => json!({
            "alpn_protocols": ["h2", "http/1.1"],
            "tls_certificates": [{
                "certificate_chain": {"filename": cert},
                "private_key": {"filename": key},
            }],
            "validation_context": {"trusted_ca": {"filename": client_ca}},
        }),
        TlsSource::Sds { credential } => json!({
            "alpn_protocols": ["h2", "http/1.1"],
            "tls_certificate_sds_secret_configs": [{
                "name": format!("kubernetes://{credential}"),
                "sds_config": {"ads": {}, "resource_api_version": "V3"},
            }],
            "combined_validation_context": {
                "default_validation_context": {},
                "validation_context_sds_secret_config": {
                    "name": format!("kubernetes://{credential}-cacert"),
                    "sds_config": {"ads": {}, "resource_api_version": "V3"},
                },
            },
        }),
    };
    json!({
        "name": "envoy.transport_sockets.tls",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
            "common_tls_context": common,
            "require_client_certificate": false,
        },
    })
}

/// The internal listener of a shoot whose TLS ends at the gateway
/// (envoyfilter-apiserver-proxy.yaml's LISTENER ADD): on the shoot's
/// abstract socket, TLS with the API's certificate, the routes of the API
/// keyed by the shoot's namespace.
pub fn socket_listener(x: &Exposure, api: &ApiRoute, tls: &TlsSource) -> Value {
    let ns = &x.namespace;
    let name = socket_cluster(ns);
    let cluster = |d| x.api_target(api, d).cluster();
    let mut l = json!({
        "name": name,
        "per_connection_buffer_limit_bytes": super::ingress_limits::PER_CONNECTION_BUFFER_LIMIT_BYTES,
        "address": {"pipe": {"path": socket_pipe(ns)}},
        "filter_chains": [{
            "filters": [{
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "stat_prefix": name,
                    "http2_protocol_options": super::ingress_limits::http2_protocol_options(),
                    "access_log": super::filters::access_log(true),
                    "route_config": {
                        "name": name,
                        "virtual_hosts": [{
                            "name": name,
                            "domains": ["*"],
                            "routes": [
                                {
                                    "match": {
                                        "prefix": "/",
                                        "dynamic_metadata": [{
                                            "filter": "envoy.filters.http.lua",
                                            "path": [{"key": AUTHENTICATED_SHOOT_KEY}],
                                            "value": {"string_match": {"exact": ns}},
                                        }],
                                    },
                                    "route": {"cluster": cluster(ApiDestination::MutualTls)},
                                },
                                {
                                    "match": {
                                        "prefix": "/",
                                        "headers": [
                                            {"name": "Connection", "string_match": {"exact": "Upgrade"}},
                                            {"name": "Upgrade", "present_match": true},
                                        ],
                                    },
                                    "route": {
                                        "cluster": cluster(ApiDestination::ConnectionUpgrade),
                                        "upgrade_configs": [{"upgrade_type": "spdy/3.1"}, {"upgrade_type": "websocket"}],
                                    },
                                },
                                {"match": {"prefix": "/"}, "route": {"cluster": cluster(ApiDestination::Plain)}},
                            ],
                        }],
                    },
                    "http_filters": [
                        {
                            "name": "envoy.filters.http.lua",
                            "typed_config": {
                                "@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua",
                                "default_source_code": {"inline_string": super::lua::lua_source_for(
                                    AUTHENTICATED_SHOOT_KEY,
                                    &format!("{ns:?}"),
                                )},
                            },
                        },
                        super::filters::router(),
                    ],
                },
            }],
            "transport_socket": downstream_tls(tls),
        }],
    });
    x.merge_downstream_connection_options(&mut l["filter_chains"][0]["filters"][0]["typed_config"]);
    l
}

/// The cluster to the internal listener (envoyfilter-apiserver-proxy.yaml's
/// CLUSTER ADD): a day per connection, the downstream's protocol, the
/// gateway's windows, TCP keepalive as the DestinationRules set it.
pub fn socket_cluster_config(x: &Exposure) -> Value {
    let name = socket_cluster(&x.namespace);
    json!({
        "name": name,
        "type": "STATIC",
        "connect_timeout": "10s",
        "typed_extension_protocol_options": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "common_http_protocol_options": {"max_connection_duration": format!("{}s", super::MAX_CONNECTION_DURATION_S)},
            "use_downstream_protocol_config": {
                "http_protocol_options": {},
                "http2_protocol_options": {
                    "initial_stream_window_size": super::ingress_limits::INITIAL_STREAM_WINDOW_SIZE,
                    "initial_connection_window_size": super::ingress_limits::INITIAL_CONNECTION_WINDOW_SIZE,
                },
            },
        }},
        "per_connection_buffer_limit_bytes": super::ingress_limits::PER_CONNECTION_BUFFER_LIMIT_BYTES,
        "upstream_connection_options": {"tcp_keepalive": {
            "keepalive_time": super::TCP_KEEPALIVE_TIME_S,
            "keepalive_interval": super::TCP_KEEPALIVE_INTERVAL_S,
        }},
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"pipe": {"path": socket_pipe(&x.namespace)}}}}]}],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_are_gardeners() {
        assert_eq!(
            socket_cluster("shoot--local--x"),
            "shoot--local--x--kube-apiserver-socket"
        );
        assert_eq!(
            socket_pipe("shoot--local--x"),
            "@kube-apiservers/shoot--local--x"
        );
        let re = |v: &str| regex::Regex::new(DESTINATION_REGEX).unwrap().is_match(v);
        for ok in [
            "shoot--local--x--kube-apiserver-socket",
            "outbound|443||kube-apiserver.shoot--local--x.svc.cluster.local",
        ] {
            assert!(re(ok), "{ok} is an allowed destination");
        }
        for bad in [
            "outbound|2379||etcd-main-client.shoot--local--x.svc.cluster.local",
            "prometheus_stats",
        ] {
            assert!(!re(bad), "{bad} is not");
        }
    }

    #[test]
    fn a_node_names_the_socket_when_tls_ends_at_the_gateway_and_kube_apiserver_otherwise() {
        let mut api = crate::api_route(&crate::topology::Topology::default());
        api.mode = ApiExposure::Termination;
        assert_eq!(
            destination_header_value(&api, "shoot--local--x"),
            "shoot--local--x--kube-apiserver-socket"
        );
        api.mode = ApiExposure::Passthrough;
        assert_eq!(
            destination_header_value(&api, "shoot--local--x"),
            "outbound|443||kube-apiserver.shoot--local--x.svc.cluster.local"
        );
    }
}
