//! The docker form's gateway: Envoy configured from an [`Exposure`] the
//! way istiod configures an ingress gateway for Gardener's Gateway,
//! VirtualService and DestinationRule objects (istio/istio
//! pilot/pkg/networking/core: gateway.go, listener_builder.go,
//! cluster_builder.go, cluster_traffic_policy.go, route/retry):
//!
//! - a listener per gateway port with the `tls_inspector`, a filter chain
//!   per SNI host (`server_names`);
//! - passthrough: `tcp_proxy` to the destination's cluster, at most 24 h
//!   per connection (the DestinationRule's maxConnectionDuration);
//! - termination (the API): TLS ends here (OPTIONAL_MUTUAL with the lab
//!   CA, ALPN h2 and http/1.1), an HTTP connection manager as istiod
//!   builds it for a gateway (remote address used, client certificate
//!   details sanitised and set, no stream idle timeout, websocket upgrades),
//!   the Lua filter of Gardener's istio-ingress chart (identity from the
//!   client certificate into X-Remote-User/Group), routes: the one for
//!   requests with a client certificate (to the `-mtls` destination, which
//!   presents the gateway's front-proxy certificate), the connection
//!   upgrade route (SPDY and websocket, HTTP/1.1 upstream) and the rest;
//!   Istio's default retry policy and no route timeout on the
//!   VirtualService's routes;
//! - Gardener's limits on every listener and connection manager
//!   (`ingress_limits`: HTTP/2 streams and windows, a 32 KiB buffer per
//!   connection, downstream TCP keepalive);
//! - clusters: the API's by EDS (endpoints pushed by the lab, no active
//!   health checks), LEAST_REQUEST, circuit breakers at Istio's maxima,
//!   TCP keepalive 7200 s / 75 s, connect timeout 10 s (mesh default);
//!   passthrough: outlier detection as Istio leaves it (success rate off,
//!   panic threshold 0); termination: upstream TLS with SNI
//!   `kubernetes.default.svc.cluster.local`, the downstream's protocol;
//!   etcd's by STRICT_DNS on the member's name (as a ServiceEntry with
//!   `resolution: DNS` makes them), DNS refreshed at the record's TTL,
//!   60 s after a failure (mesh default).
//!
//! Everything dynamic comes from files Envoy watches (file-based xDS): a
//! new file is written beside and renamed into place, so Envoy sees an
//! atomic move and applies it without dropping established connections.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;

use serde_json::{json, Value};

use super::http_proxy::{self, socket_cluster_config, socket_listener, TlsSource, HTTP_PROXY_PORT};
use super::{
    ApiDestination, ApiExposure, ApiRoute, Destination, Exposure, Resolution,
    AUTHENTICATED_HOST_KEY, CONNECTION_UPGRADE_ROUTE, MAX_CONNECTION_DURATION_S,
    TCP_KEEPALIVE_INTERVAL_S, TCP_KEEPALIVE_TIME_S, UPSTREAM_SNI,
};

/// Where Envoy reads its dynamic configuration (LDS, CDS, RDS, EDS files).
pub const XDS_DIR: &str = "/etc/envoy/xds";
/// The bootstrap Envoy starts with.
pub const BOOTSTRAP: &str = "/etc/envoy/envoy.json";
/// The gateway's certificates and keys.
pub const TLS_DIR: &str = "/etc/envoy/tls";
/// Envoy's admin interface, on the gateway's loopback (Istio's 15000).
pub const ADMIN_PORT: u16 = 15000;
/// The static listener Istio's bootstrap always has, whatever the gateway
/// exposes: Prometheus' `/stats/prometheus` on 15090, routed to the admin
/// interface (istio/istio tools/packaging/common/envoy_bootstrap.json,
/// `prometheus_stats`). A seed gateway that exposes nothing yet still
/// answers there.
pub const PROMETHEUS_PORT: u16 = 15090;
/// How long Envoy drains listeners (pilot-agent's `--drain-time-s`, from
/// ProxyConfig.drainDuration, 45 s: istio pkg/config/mesh/mesh.go); the
/// model's, which the `drain-gateway` handover waits out.
pub const DRAIN_TIME_S: u32 = cpmlab_model::migrate::gateway_handover::ISTIO_DRAIN.as_secs() as u32;
/// The mesh's connect timeout (pkg/config/mesh/mesh.go: 10 s).
pub const CONNECT_TIMEOUT: &str = "10s";
/// DNS refresh after a failed resolution (mesh dnsRefreshRate: 60 s; a
/// successful one is refreshed at its TTL).
pub const DNS_REFRESH_RATE: &str = "60s";

/// The cluster type of a name the gateway resolves (strict DNS).
pub const DNS_CLUSTER: &str = "envoy.clusters.dns";

pub const LDS_FILE: &str = "lds.json";
pub const CDS_FILE: &str = "cds.json";
pub const RDS_FILE: &str = "rds.json";
/// The `wildcard-tls` server's routes: a file of their own, as Envoy takes
/// exactly one route configuration from a file an RDS subscription reads
/// ("Unexpected RDS resource length" otherwise: envoy rds_impl.cc).
pub const WILDCARD_RDS_FILE: &str = "rds-wildcard.json";

/// The file a route configuration is read from.
fn rds_file(route_config: &str) -> &'static str {
    if route_config.contains(".wildcard-tls.") {
        WILDCARD_RDS_FILE
    } else {
        RDS_FILE
    }
}

/// The files under `TLS_DIR`.
pub mod tls {
    /// The API name's serving certificate and key (Gardener gives the
    /// gateway kube-apiserver's own).
    pub const SERVER_CERT: &str = "server.crt";
    pub const SERVER_KEY: &str = "server.key";
    /// The seed's wildcard certificate and key for its ingress domain
    /// (the `wildcard-tls` server's; Gardener's `<namespace>-kube-apiserver-wildcard-tls`).
    pub const WILDCARD_CERT: &str = "wildcard.crt";
    pub const WILDCARD_KEY: &str = "wildcard.key";
    /// The CA client certificates are checked against (Gardener: ca-client).
    pub const CLIENT_CA: &str = "client-ca.crt";
    /// The CA the replicas' serving certificates are checked against.
    pub const UPSTREAM_CA: &str = "ca.crt";
    /// The gateway's front-proxy client certificate and key.
    pub const PROXY_CERT: &str = "front-proxy-client.crt";
    pub const PROXY_KEY: &str = "front-proxy-client.key";
}

fn tls_file(name: &str) -> String {
    format!("{TLS_DIR}/{name}")
}

const U32_MAX: u64 = u32::MAX as u64;

/// Envoy's type URLs.
mod ty {
    pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
    pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    pub const ROUTE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
    pub const ENDPOINTS: &str =
        "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
}

/// The file of a cluster's endpoints (EDS), under `XDS_DIR`.
pub fn eds_file(d: &Destination) -> String {
    let safe: String = d
        .cluster()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("eds-{safe}.json")
}

/// A config source that reads `file` under `XDS_DIR`, re-read whenever a
/// file is moved into the directory.
fn path_source(file: &str) -> Value {
    json!({
        "resource_api_version": "V3",
        "path_config_source": {
            "path": format!("{XDS_DIR}/{file}"),
            "watched_directory": {"path": XDS_DIR},
        },
    })
}

/// The bootstrap: node, admin on loopback, Istio's static stats listener,
/// LDS and CDS from files.
pub fn bootstrap(node: &str) -> Value {
    json!({
        "node": {"id": node, "cluster": "istio-ingressgateway"},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": ADMIN_PORT}}},
        // The runtime istio-agent's bootstrap gives every proxy
        // (pkg/bootstrap/config.go, extractRuntimeFlags): no connection
        // limit of its own, and RE2 programs up to 32768 (Envoy's own
        // default, 100, rejects the apiserver-proxy's destination regex
        // and with it the whole listener update).
        "layered_runtime": {"layers": [
            {"name": "global config", "static_layer": {
                "overload.global_downstream_max_connections": "2147483647",
                "re2.max_program_size.error_level": "32768",
            }},
            {"name": "admin", "admin_layer": {}},
        ]},
        "static_resources": {
            "clusters": [{
                "name": "prometheus_stats",
                "type": "STATIC",
                "connect_timeout": "0.250s",
                "load_assignment": {
                    "cluster_name": "prometheus_stats",
                    "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {
                        "address": "127.0.0.1", "port_value": ADMIN_PORT}}}}]}],
                },
            }],
            "listeners": [{
                "name": format!("0.0.0.0_{PROMETHEUS_PORT}"),
                "address": {"socket_address": {"address": "0.0.0.0", "port_value": PROMETHEUS_PORT}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                        "stat_prefix": "stats",
                        "route_config": {"virtual_hosts": [{
                            "name": "backend",
                            "domains": ["*"],
                            "routes": [{"match": {"prefix": "/stats/prometheus"},
                                        "route": {"cluster": "prometheus_stats"}}],
                        }]},
                        "http_filters": [super::filters::router()],
                    },
                }]}],
            }],
        },
        "dynamic_resources": {
            "lds_config": path_source(LDS_FILE),
            "cds_config": path_source(CDS_FILE),
        },
    })
}

/// A discovery response as the files hold it. The version is a digest of
/// the resources: the same content, the same version.
pub fn discovery_response(resources: Vec<Value>) -> Value {
    use sha2::{Digest, Sha256};
    let text = serde_json::to_string(&resources).unwrap_or_default();
    let version = hex::encode(&Sha256::digest(text.as_bytes())[..6]);
    json!({"version_info": version, "resources": resources})
}

/// The dynamic configuration of an exposure: listeners, clusters, routes.
#[derive(Debug, Clone, PartialEq)]
pub struct Xds {
    pub listeners: Vec<Value>,
    pub clusters: Vec<Value>,
    pub routes: Vec<Value>,
}

impl Xds {
    /// The files to write under `XDS_DIR` (not the endpoints).
    pub fn files(&self) -> Vec<(String, Value)> {
        let of = |file: &str| -> Vec<Value> {
            self.routes
                .iter()
                .filter(|r| rds_file(r["name"].as_str().unwrap_or_default()) == file)
                .cloned()
                .collect()
        };
        let mut files = vec![(RDS_FILE.into(), discovery_response(of(RDS_FILE)))];
        let wildcard = of(WILDCARD_RDS_FILE);
        if !wildcard.is_empty() {
            files.push((WILDCARD_RDS_FILE.into(), discovery_response(wildcard)));
        }
        files.push((CDS_FILE.into(), discovery_response(self.clusters.clone())));
        files.push((LDS_FILE.into(), discovery_response(self.listeners.clone())));
        files
    }
}

/// Renders the listeners, clusters and routes of `x`.
pub fn render(x: &Exposure) -> Xds {
    let mut listeners = vec![];
    if let Some(api) = x.api.as_ref().filter(|_| !x.api_gateway_deleted) {
        listeners.push(api_listener(x, api));
    }
    for port in x.tls_ports() {
        let chains: Vec<Value> = x
            .tls
            .iter()
            .filter(|r| r.port == port)
            .map(|r| passthrough_chain(&r.host, &r.destination, &format!("{}.{}", r.owner, r.kind)))
            .collect();
        listeners.push(listener(port, chains));
    }
    // The seed's apiserver-proxy port, whatever the shoot's state.
    listeners.push(http_proxy_listener());
    let mut clusters: Vec<Value> = Vec::new();
    if let Some(api) = &x.api {
        for (d, dest) in x.api_destinations() {
            clusters.push(api_cluster(api.mode, d, &dest));
        }
        if let Some(to) = &x.api_forward {
            clusters.push(forward_cluster(api, to));
        }
        if api.mode == ApiExposure::Termination && !x.apiserver_proxy_released() {
            let files = TlsSource::Files {
                cert: &tls_file(tls::SERVER_CERT),
                key: &tls_file(tls::SERVER_KEY),
                client_ca: &tls_file(tls::CLIENT_CA),
            };
            listeners.push(typed(ty::LISTENER, socket_listener(x, api, &files)));
            clusters.push(typed(ty::CLUSTER, socket_cluster_config(x)));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for r in &x.tls {
        if seen.insert(r.destination.cluster()) {
            clusters.push(passthrough_cluster(&r.destination));
        }
    }
    let mut routes = match &x.api {
        Some(api) if api.mode == ApiExposure::Termination && x.api_gateway_deleted => {
            vec![deleted_gateway_routes(route_config_name(x, api))]
        }
        Some(api) if api.mode == ApiExposure::Termination => vec![api_routes(x, api)],
        _ => vec![],
    };
    if let Some(api) = x
        .api
        .as_ref()
        .filter(|a| a.mode == ApiExposure::Termination && !a.wildcard_hosts.is_empty())
    {
        routes.push(if x.api_gateway_deleted {
            deleted_gateway_routes(wildcard_route_config_name(x, api))
        } else {
            wildcard_routes(x, api)
        });
    }
    Xds {
        listeners,
        clusters,
        routes,
    }
}

/// A resource with its type URL, as the files hold it.
fn typed(url: &str, v: Value) -> Value {
    let mut o = serde_json::Map::new();
    o.insert("@type".into(), url.into());
    if let Value::Object(m) = v {
        o.extend(m);
    }
    Value::Object(o)
}

/// The seed's HTTP CONNECT listener for shoot nodes' apiserver-proxies
/// (`http_proxy`): a plain HTTP listener as istiod builds it for the
/// chart's Gateway, with the chart's EnvoyFilter merged in.
fn http_proxy_listener() -> Value {
    let mut hcm = json!({
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": format!("outbound_0.0.0.0_{HTTP_PROXY_PORT}"),
        "codec_type": "AUTO",
        "use_remote_address": true,
        "stream_idle_timeout": "0s",
        "http2_protocol_options": super::ingress_limits::http2_protocol_options(),
        "access_log": super::filters::access_log(true),
        "route_config": http_proxy::route_config(),
        "http_filters": [super::filters::router()],
    });
    if let (Some(o), Value::Object(more)) = (
        hcm.as_object_mut(),
        http_proxy::connection_manager_options(),
    ) {
        o.extend(more);
    }
    let mut l = listener(
        HTTP_PROXY_PORT,
        vec![json!({"filters": [{
            "name": "envoy.filters.network.http_connection_manager",
            "typed_config": hcm,
        }]})],
    );
    // Plain HTTP: no TLS to inspect.
    if let Some(o) = l.as_object_mut() {
        o.remove("listener_filters");
    }
    l
}

fn listener_name(port: u16) -> String {
    format!("0.0.0.0_{port}")
}

fn listener(port: u16, filter_chains: Vec<Value>) -> Value {
    json!({
        "@type": ty::LISTENER,
        "name": listener_name(port),
        "address": {"socket_address": {"address": "0.0.0.0", "port_value": port}},
        "listener_filters": [{
            "name": "envoy.filters.listener.tls_inspector",
            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"},
        }],
        "filter_chains": filter_chains,
        "traffic_direction": "OUTBOUND",
        // Gardener's, on every listener of the ingress service's ports.
        "per_connection_buffer_limit_bytes": super::ingress_limits::PER_CONNECTION_BUFFER_LIMIT_BYTES,
        "socket_options": super::ingress_limits::listener_socket_options(),
    })
}

fn passthrough_chain(host: &str, d: &Destination, stat: &str) -> Value {
    json!({
        "filter_chain_match": {"server_names": [host]},
        "filters": [{
            "name": "envoy.filters.network.tcp_proxy",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                "stat_prefix": stat,
                "cluster": d.cluster(),
                "max_downstream_connection_duration": format!("{MAX_CONNECTION_DURATION_S}s"),
                "access_log": super::filters::access_log(false),
            },
        }],
    })
}

/// The route configuration's name, as istiod names a gateway server's
/// (sni.go: `https.<port>.<port name>.<gateway>.<namespace>`).
pub fn route_config_name(x: &Exposure, api: &ApiRoute) -> String {
    format!("https.{}.tls.kube-apiserver.{}", api.port, x.namespace)
}

/// The `wildcard-tls` server's route configuration name (sni.go's
/// `wildcardRouteConfigurationName`).
pub fn wildcard_route_config_name(x: &Exposure, api: &ApiRoute) -> String {
    format!(
        "https.{}.wildcard-tls.kube-apiserver.{}",
        api.port, x.namespace
    )
}

/// A server of the API's Gateway where TLS ends: its hosts, its
/// certificate, its connection manager's route configuration.
fn termination_chain(
    x: &Exposure,
    hosts: Vec<String>,
    cert: &str,
    key: &str,
    routes: String,
) -> Value {
    json!({
        "filter_chain_match": {"server_names": hosts},
        "transport_socket": {
            "name": "envoy.transport_sockets.tls",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
                // OPTIONAL_MUTUAL: a client certificate is checked
                // when given, not required.
                "require_client_certificate": false,
                "common_tls_context": {
                    "alpn_protocols": ["h2", "http/1.1"],
                    "tls_certificates": [{
                        "certificate_chain": {"filename": tls_file(cert)},
                        "private_key": {"filename": tls_file(key)},
                    }],
                    "validation_context": {"trusted_ca": {"filename": tls_file(tls::CLIENT_CA)}},
                },
            },
        },
        "filters": [http_connection_manager(x, routes)],
    })
}

fn api_listener(x: &Exposure, api: &ApiRoute) -> Value {
    let chains = match api.mode {
        ApiExposure::Passthrough => {
            let mut c = passthrough_chain(
                &api.host,
                &x.api_target(api, ApiDestination::Plain),
                "kube-apiserver",
            );
            c["filter_chain_match"]["server_names"] = json!(x.api_gateway_hosts(api));
            vec![c]
        }
        ApiExposure::Termination => {
            let mut chains = vec![termination_chain(
                x,
                x.api_gateway_hosts(api),
                tls::SERVER_CERT,
                tls::SERVER_KEY,
                route_config_name(x, api),
            )];
            let wildcard = x.api_wildcard_hosts(api);
            if !wildcard.is_empty() {
                chains.push(termination_chain(
                    x,
                    wildcard,
                    tls::WILDCARD_CERT,
                    tls::WILDCARD_KEY,
                    wildcard_route_config_name(x, api),
                ));
            }
            chains
        }
    };
    listener(api.port, chains)
}

fn http_connection_manager(x: &Exposure, route_config: String) -> Value {
    let mut hcm = json!({
        "name": "envoy.filters.network.http_connection_manager",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": "outbound_0.0.0.0_443",
            "codec_type": "AUTO",
            "use_remote_address": true,
            "forward_client_cert_details": "SANITIZE_SET",
            "set_current_client_cert_details": {"subject": true, "cert": true, "dns": true, "uri": true},
            "normalize_path": true,
            "path_with_escaped_slashes_action": "KEEP_UNCHANGED",
            // istiod sets no stream idle timeout: watches stay open.
            "stream_idle_timeout": "0s",
            "upgrade_configs": [{"upgrade_type": "websocket"}],
            // Gardener's, on every connection manager of the gateway.
            "http2_protocol_options": super::ingress_limits::http2_protocol_options(),
            "access_log": super::filters::access_log(true),
            "rds": {
                "config_source": path_source(rds_file(&route_config)),
                "route_config_name": route_config,
            },
            "http_filters": [
                {
                    "name": "envoy.filters.http.lua",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua",
                        "default_source_code": {"inline_string": super::lua::lua_source()},
                    },
                },
                super::filters::router(),
            ],
        },
    });
    x.merge_downstream_connection_options(&mut hcm["typed_config"]);
    hcm
}

/// Istio's default retry policy for a VirtualService route
/// (pilot/pkg/networking/core/route/retry/retry.go): two retries on
/// connect failures, refused streams, `unavailable` and cancelled, on
/// another host.
pub fn default_retry_policy() -> Value {
    json!({
        "retry_on": "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes",
        "num_retries": 2,
        "retry_host_predicate": [{
            "name": "envoy.retry_host_predicates.previous_hosts",
            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"},
        }],
        "host_selection_retry_max_attempts": 5,
    })
}

/// The route Gardener's `<namespace>-istio-tls-termination` EnvoyFilter
/// inserts first (HTTP_ROUTE INSERT_BEFORE): requests the Lua filter
/// authenticated by a client certificate go to the `-mtls` destination.
pub fn mtls_route(x: &Exposure, api: &ApiRoute) -> Value {
    mtls_route_for(x, api, &api.host)
}

/// The mutual-TLS route the EnvoyFilter inserts for one of its hosts.
fn mtls_route_for(x: &Exposure, api: &ApiRoute, host: &str) -> Value {
    json!({
        "match": {
            "prefix": "/",
            "dynamic_metadata": [{
                "filter": "envoy.filters.http.lua",
                "path": [{"key": AUTHENTICATED_HOST_KEY}],
                "value": {"string_match": {"exact": host}},
            }],
        },
        "route": {"cluster": x.api_target(api, ApiDestination::MutualTls).cluster()},
    })
}

/// The API's route configuration once its Gateway is deleted, as istiod
/// serves a route name no Gateway has (pilot/pkg/networking/core/gateway.go,
/// `buildGatewayHTTPRouteConfig`: "Gateway missing for route ... This is
/// normal if gateway was recently deleted", and a route configuration
/// without a virtual host, which EnvoyFilters' HTTP_ROUTE patches have no
/// virtual host to go into): the connections the removed chain still
/// drains get 404 NR for every request they send before they go.
fn deleted_gateway_routes(name: String) -> Value {
    json!({
        "@type": ty::ROUTE,
        "name": name,
        "virtual_hosts": [],
    })
}

/// The API's routes when TLS ends at the gateway, in the order istiod and
/// Gardener's EnvoyFilter leave them: the mutual-TLS route (inserted first
/// by the EnvoyFilter; no retries, no timeout of its own), then the
/// VirtualService's connection upgrade route and its default route.
fn api_routes(x: &Exposure, api: &ApiRoute) -> Value {
    let mut domains = vec![api.host.clone()];
    domains.extend(api.authorities.iter().cloned());
    let mtls = std::slice::from_ref(&api.host);
    route_configuration(x, api, route_config_name(x, api), &domains, mtls, true)
}

/// The `wildcard-tls` server's routes: the same VirtualService routes for
/// the seed-bound names, a mutual-TLS route per name (the EnvoyFilter's
/// `WildcardHosts`), and no SPDY upgrade on the connection upgrade route:
/// Gardener's EnvoyFilter merges that into the `tls` server's route
/// configuration only (envoyfilter-istio-tls-termination.yaml).
fn wildcard_routes(x: &Exposure, api: &ApiRoute) -> Value {
    route_configuration(
        x,
        api,
        wildcard_route_config_name(x, api),
        &api.wildcard_hosts,
        &api.wildcard_hosts,
        false,
    )
}

/// A server's route configuration: the VirtualService's routes for
/// `domains`, after the EnvoyFilter's mutual-TLS route for each of
/// `mtls_hosts` (the server's hosts; the lab's extra authorities are no
/// Gateway's), with the SPDY upgrade where the EnvoyFilter merges it.
fn route_configuration(
    x: &Exposure,
    api: &ApiRoute,
    name: String,
    domains: &[String],
    mtls_hosts: &[String],
    spdy: bool,
) -> Value {
    let cluster = |d| x.api_target(api, d).cluster();
    let mut upgrade = json!({
        "cluster": cluster(ApiDestination::ConnectionUpgrade),
        "timeout": "0s",
        "retry_policy": default_retry_policy(),
    });
    if spdy {
        upgrade["upgrade_configs"] =
            json!([{"upgrade_type": "spdy/3.1"}, {"upgrade_type": "websocket"}]);
    }
    let mut routes: Vec<Value> = mtls_hosts
        .iter()
        .map(|h| mtls_route_for(x, api, h))
        .collect();
    routes.push(json!({
        "name": CONNECTION_UPGRADE_ROUTE,
        "match": {
            "prefix": "/",
            "headers": [
                {"name": "Connection", "string_match": {"exact": "Upgrade"}},
                {"name": "Upgrade", "present_match": true},
            ],
        },
        "route": upgrade,
    }));
    routes.push(json!({
        "name": "default",
        "match": {"prefix": "/"},
        "route": {
            "cluster": cluster(ApiDestination::Plain),
            "timeout": "0s",
            "retry_policy": default_retry_policy(),
        },
    }));
    json!({
        "@type": ty::ROUTE,
        "name": name,
        "virtual_hosts": [{
            "name": format!("{}:{}", domains[0], api.port),
            "domains": domains
                .iter()
                .flat_map(|h| [h.clone(), format!("{h}:*")])
                .collect::<Vec<_>>(),
            "routes": routes,
        }],
    })
}

/// Istio's circuit breaker thresholds: every limit at its maximum
/// (cluster_traffic_policy.go's getDefaultCircuitBreakerThresholds).
fn circuit_breakers() -> Value {
    json!({"thresholds": [{
        "max_connections": U32_MAX,
        "max_pending_requests": U32_MAX,
        "max_requests": U32_MAX,
        "max_retries": U32_MAX,
        "track_remaining": true,
    }]})
}

fn keepalive() -> Value {
    json!({"tcp_keepalive": {
        "keepalive_time": TCP_KEEPALIVE_TIME_S,
        "keepalive_interval": TCP_KEEPALIVE_INTERVAL_S,
    }})
}

/// The fields every cluster shares (name, connect timeout, breakers,
/// keepalive), then its discovery.
fn base_cluster(d: &Destination) -> serde_json::Map<String, Value> {
    let mut c = serde_json::Map::new();
    c.insert("@type".into(), ty::CLUSTER.into());
    c.insert("name".into(), d.cluster().into());
    c.insert("connect_timeout".into(), CONNECT_TIMEOUT.into());
    c.insert("lb_policy".into(), "LEAST_REQUEST".into());
    c.insert("circuit_breakers".into(), circuit_breakers());
    c.insert("upstream_connection_options".into(), keepalive());
    match d.resolution {
        Resolution::Endpoints => {
            c.insert("type".into(), "EDS".into());
            c.insert(
                "eds_cluster_config".into(),
                json!({"service_name": d.cluster(), "eds_config": path_source(&eds_file(d))}),
            );
        }
        Resolution::Dns => {
            // STRICT_DNS, as Envoy now spells it (istiod still sets the
            // cluster's deprecated type and DNS fields, which newer Envoy
            // warns about on every load; the behaviour is the same).
            c.insert(
                "cluster_type".into(),
                json!({
                    "name": DNS_CLUSTER,
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.clusters.dns.v3.DnsCluster",
                        "dns_refresh_rate": DNS_REFRESH_RATE,
                        "respect_dns_ttl": true,
                        "dns_lookup_family": "V4_ONLY",
                        "all_addresses_in_single_endpoint": false,
                    },
                }),
            );
            c.insert(
                "load_assignment".into(),
                json!({
                    "cluster_name": d.cluster(),
                    "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {
                        "address": d.host, "port_value": d.port,
                    }}}}]}],
                }),
            );
        }
    }
    c
}

/// A passthrough destination's cluster: plain TCP, outlier detection as
/// Istio renders Gardener's `outlierDetection: {minHealthPercent: 0}`
/// (success-rate ejection off, Envoy's defaults otherwise, panic threshold 0).
fn passthrough_cluster(d: &Destination) -> Value {
    let mut c = base_cluster(d);
    c.insert(
        "outlier_detection".into(),
        json!({"enforcing_success_rate": 0}),
    );
    c.insert(
        "common_lb_config".into(),
        json!({"healthy_panic_threshold": {"value": 0}}),
    );
    Value::Object(c)
}

/// The API's cluster of destination `d`: in passthrough mode a
/// passthrough cluster; in termination mode upstream TLS with SNI
/// `kubernetes.default.svc.cluster.local` against the lab CA, the
/// downstream's HTTP version (useClientProtocol), at most 24 h per
/// connection, no outlier detection; the `-mtls` one presents the
/// gateway's front-proxy certificate, the upgrade one speaks HTTP/1.1.
fn api_cluster(mode: ApiExposure, d: ApiDestination, dest: &Destination) -> Value {
    if mode == ApiExposure::Passthrough {
        return passthrough_cluster(dest);
    }
    let mut c = base_cluster(dest);
    let mut common = serde_json::Map::new();
    common.insert(
        "validation_context".into(),
        json!({
            "trusted_ca": {"filename": tls_file(tls::UPSTREAM_CA)},
            "match_typed_subject_alt_names": [{"san_type": "DNS", "matcher": {"exact": UPSTREAM_SNI}}],
        }),
    );
    if d == ApiDestination::MutualTls {
        common.insert(
            "tls_certificates".into(),
            json!([{
                "certificate_chain": {"filename": tls_file(tls::PROXY_CERT)},
                "private_key": {"filename": tls_file(tls::PROXY_KEY)},
            }]),
        );
    }
    if d == ApiDestination::ConnectionUpgrade {
        common.insert("alpn_protocols".into(), json!(["http/1.1"]));
    }
    c.insert(
        "transport_socket".into(),
        upstream_tls(UPSTREAM_SNI, Value::Object(common)),
    );
    c.insert(
        "typed_extension_protocol_options".into(),
        upstream_http_options(),
    );
    Value::Object(c)
}

/// The cluster of the `forward` handover: the destination seed's gateway
/// by its ingress name (STRICT_DNS, as a ServiceEntry with `resolution:
/// DNS`). Where TLS ends at this gateway it originates TLS as a
/// DestinationRule's `tls: {mode: SIMPLE, sni: <the API's name>}` does:
/// the destination's gateway routes by that name and presents the API's
/// certificate (checked against the lab CA); no client certificate of the
/// client's can go with it. Where TLS passes through, a passthrough
/// cluster: the client's own TLS reaches the destination's API.
fn forward_cluster(api: &ApiRoute, to: &Destination) -> Value {
    if api.mode == ApiExposure::Passthrough {
        return passthrough_cluster(to);
    }
    let mut c = base_cluster(to);
    c.insert(
        "transport_socket".into(),
        upstream_tls(
            &api.host,
            json!({"validation_context": {
                "trusted_ca": {"filename": tls_file(tls::UPSTREAM_CA)},
                "match_typed_subject_alt_names": [{"san_type": "DNS", "matcher": {"exact": api.host}}],
            }}),
        ),
    );
    c.insert(
        "typed_extension_protocol_options".into(),
        upstream_http_options(),
    );
    Value::Object(c)
}

/// A cluster's TLS to its upstream: `sni`, and the common context.
fn upstream_tls(sni: &str, common: Value) -> Value {
    json!({
        "name": "envoy.transport_sockets.tls",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
            "sni": sni,
            "common_tls_context": common,
        },
    })
}

/// The upstream HTTP options of a cluster to which TLS ends here: at most
/// 24 h per connection, the downstream's protocol (useClientProtocol).
fn upstream_http_options() -> Value {
    json!({"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        "common_http_protocol_options": {"max_connection_duration": format!("{MAX_CONNECTION_DURATION_S}s")},
        "use_downstream_protocol_config": {"http_protocol_options": {}, "http2_protocol_options": {}},
    }})
}

/// A cluster's endpoints (what EDS pushes): the ready replicas.
pub fn endpoints(d: &Destination, ready: &[SocketAddrV4]) -> Value {
    let lb: Vec<Value> = ready
        .iter()
        .map(|a| {
            json!({
                "endpoint": {"address": {"socket_address": {"address": a.ip().to_string(), "port_value": a.port()}}},
                "health_status": "HEALTHY",
            })
        })
        .collect();
    json!({
        "@type": ty::ENDPOINTS,
        "cluster_name": d.cluster(),
        "endpoints": if lb.is_empty() { json!([]) } else { json!([{"lb_endpoints": lb}]) },
    })
}

/// The EDS files of an exposure's endpoint clusters, with `ready` giving
/// each Service's ready endpoints (by cluster name; absent: none).
pub fn eds_files(
    x: &Exposure,
    ready: &BTreeMap<String, Vec<SocketAddrV4>>,
) -> Vec<(String, Value)> {
    x.api_destinations()
        .iter()
        .map(|(_, d)| d.clone())
        .chain(
            x.tls
                .iter()
                .filter(|r| r.destination.resolution == Resolution::Endpoints)
                .map(|r| r.destination.clone()),
        )
        .map(|d| {
            let eps = ready.get(&d.cluster()).cloned().unwrap_or_default();
            (eds_file(&d), discovery_response(vec![endpoints(&d, &eps)]))
        })
        .collect()
}

/// The whole configuration as one static bootstrap (every listener,
/// cluster, route and endpoint inline) for `envoy --mode validate`, which
/// does not read dynamic resources: what the files say is checked here.
pub fn static_bootstrap(
    node: &str,
    xds: &Xds,
    ready: &BTreeMap<String, Vec<SocketAddrV4>>,
) -> Value {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("@type");
        }
        v
    };
    let routes: BTreeMap<String, Value> = xds
        .routes
        .iter()
        .map(|r| (r["name"].as_str().unwrap_or_default().to_string(), strip(r)))
        .collect();
    let listeners: Vec<Value> = xds
        .listeners
        .iter()
        .map(|l| {
            let mut l = strip(l);
            for chain in l["filter_chains"].as_array_mut().into_iter().flatten() {
                for f in chain["filters"].as_array_mut().into_iter().flatten() {
                    let tc = &mut f["typed_config"];
                    if let Some(name) = tc["rds"]["route_config_name"].as_str().map(String::from) {
                        let o = tc.as_object_mut().expect("an object");
                        o.remove("rds");
                        o.insert(
                            "route_config".into(),
                            routes.get(&name).cloned().unwrap_or(json!({"name": name})),
                        );
                    }
                }
            }
            l
        })
        .collect();
    let clusters: Vec<Value> = xds
        .clusters
        .iter()
        .map(|c| {
            let mut c = strip(c);
            if c["type"] == "EDS" {
                let name = c["name"].as_str().unwrap_or_default().to_string();
                let o = c.as_object_mut().expect("an object");
                o.remove("eds_cluster_config");
                o.insert("type".into(), "STATIC".into());
                let d = Destination {
                    host: String::new(),
                    port: 0,
                    resolution: Resolution::Endpoints,
                };
                let mut la = endpoints(&d, ready.get(&name).map(Vec::as_slice).unwrap_or(&[]));
                la.as_object_mut().expect("an object").remove("@type");
                la["cluster_name"] = name.into();
                o.insert("load_assignment".into(), la);
            }
            c
        })
        .collect();
    let mut b = bootstrap(node);
    b.as_object_mut()
        .expect("an object")
        .remove("dynamic_resources");
    // After the bootstrap's own static listener and cluster.
    let statics = &mut b["static_resources"];
    for (key, more) in [("listeners", listeners), ("clusters", clusters)] {
        if let Some(a) = statics[key].as_array_mut() {
            a.extend(more);
        }
    }
    b
}

#[cfg(test)]
pub(crate) mod tests {

    #[test]
    fn every_listener_and_connection_manager_has_gardeners_limits() {
        for mode in [ApiExposure::Termination, ApiExposure::Passthrough] {
            let xds = render(&sample(mode));
            for l in &xds.listeners {
                assert_eq!(l["per_connection_buffer_limit_bytes"], 32768, "{l}");
                // Not the apiserver-proxy's internal listener: no TCP.
                if !l["address"]["pipe"].is_object() {
                    assert_eq!(l["socket_options"][2]["int_value"], 55, "{l}");
                }
            }
            let hcms: Vec<&Value> = xds
                .listeners
                .iter()
                .flat_map(|l| l["filter_chains"].as_array().unwrap())
                .flat_map(|c| c["filters"].as_array().unwrap())
                .filter(|f| f["name"] == "envoy.filters.network.http_connection_manager")
                .collect();
            // The apiserver-proxy's CONNECT port always; with termination
            // the API's listener and the apiserver-proxy's internal one.
            let expected = if mode == ApiExposure::Termination {
                3
            } else {
                1
            };
            assert_eq!(hcms.len(), expected);
            for h in hcms {
                assert_eq!(
                    h["typed_config"]["http2_protocol_options"]["initial_connection_window_size"],
                    1048576
                );
            }
        }
    }
    use super::*;
    use crate::{member_routes, ETCD_PEER_PORT};

    pub(crate) fn sample(mode: ApiExposure) -> Exposure {
        let mut tls = member_routes(
            "seed-a-etcd-0",
            "seed-a-etcd-0.local.cpmlab.test",
            ETCD_PEER_PORT,
            "seed-a-etcd-0.pods.local.cpmlab.test",
            Resolution::Dns,
        );
        tls.extend(member_routes(
            "seed-a-etcd-1",
            "seed-a-etcd-1.local.cpmlab.test",
            crate::member_peer_port(1),
            "seed-a-etcd-1.pods.local.cpmlab.test",
            Resolution::Dns,
        ));
        Exposure {
            seed: "seed-a".into(),
            namespace: "shoot--local--local".into(),
            api: Some(ApiRoute {
                host: "api.local.cpmlab.test".into(),
                port: 443,
                mode,
                service: "kube-apiserver".into(),
                target_port: 443,
                authorities: vec!["10.0.0.3".into()],
                wildcard_hosts: vec![],
            }),
            tls,
            max_connection_duration_ms: None,
            api_gateway_deleted: false,
            api_gateway_draining: false,
            api_forward: None,
        }
    }

    fn listener_of(x: &Xds, port: u16) -> &Value {
        x.listeners
            .iter()
            .find(|l| l["address"]["socket_address"]["port_value"] == port)
            .unwrap_or_else(|| panic!("no listener on {port}"))
    }

    #[test]
    fn members_pass_through_by_sni_to_strict_dns_clusters() {
        let x = render(&sample(ApiExposure::Passthrough));
        let peer = listener_of(&x, 2380);
        assert_eq!(
            peer["listener_filters"][0]["name"],
            "envoy.filters.listener.tls_inspector"
        );
        let chain = &peer["filter_chains"][0];
        assert_eq!(
            chain["filter_chain_match"]["server_names"],
            json!(["seed-a-etcd-0.local.cpmlab.test"])
        );
        let tcp = &chain["filters"][0]["typed_config"];
        assert_eq!(
            tcp["cluster"],
            "outbound|2380||seed-a-etcd-0.pods.local.cpmlab.test"
        );
        assert_eq!(tcp["max_downstream_connection_duration"], "86400s");
        assert!(chain.get("transport_socket").is_none(), "TLS untouched");
        // Its own peer port in `port` exposure.
        assert_eq!(
            listener_of(&x, 9101)["filter_chains"][0]["filter_chain_match"]["server_names"],
            json!(["seed-a-etcd-1.local.cpmlab.test"])
        );
        let c = x
            .clusters
            .iter()
            .find(|c| c["name"] == "outbound|2380||seed-a-etcd-0.pods.local.cpmlab.test")
            .unwrap();
        let dns = &c["cluster_type"]["typed_config"];
        assert_eq!(c["cluster_type"]["name"], DNS_CLUSTER);
        assert_eq!(dns["respect_dns_ttl"], true);
        assert_eq!(dns["dns_refresh_rate"], "60s");
        assert_eq!(dns["all_addresses_in_single_endpoint"], false);
        assert_eq!(
            c["upstream_connection_options"]["tcp_keepalive"],
            json!({"keepalive_time": 7200, "keepalive_interval": 75})
        );
        assert!(c.get("health_checks").is_none());
        assert_eq!(
            c["circuit_breakers"]["thresholds"][0]["max_connections"],
            4294967295u64
        );
    }

    #[test]
    fn passthrough_api_is_an_eds_cluster_with_istios_outlier_detection() {
        let x = render(&sample(ApiExposure::Passthrough));
        let api = listener_of(&x, 443);
        assert_eq!(
            api["filter_chains"][0]["filters"][0]["name"],
            "envoy.filters.network.tcp_proxy"
        );
        let c = &x.clusters[0];
        assert_eq!(c["type"], "EDS");
        assert_eq!(c["lb_policy"], "LEAST_REQUEST");
        assert_eq!(c["outlier_detection"]["enforcing_success_rate"], 0);
        assert_eq!(c["common_lb_config"]["healthy_panic_threshold"]["value"], 0);
        assert!(x.routes.is_empty());
        assert_eq!(
            x.clusters.len(),
            1 + 4,
            "the API and a cluster per member port"
        );
    }

    /// With the seed's wildcard certificate the API's Gateway has a second
    /// server, `wildcard-tls`: its own chain (the seed-bound name, the
    /// wildcard certificate), its own route configuration (sni.go's name),
    /// a mutual-TLS route for the name and no SPDY upgrade (Gardener's
    /// EnvoyFilter merges that into the `tls` server's routes only). The
    /// in-place drain puts a drain host on both servers; the deletion
    /// empties both route configurations.
    #[test]
    fn a_wildcard_certificate_adds_the_seed_bound_server() {
        let bound = "api-local--local.ingress.seed-a.local.cpmlab.test";
        let mut e = sample(ApiExposure::Termination);
        e.api.as_mut().unwrap().wildcard_hosts = vec![bound.into()];
        let x = render(&e);
        let chains = &listener_of(&x, 443)["filter_chains"];
        assert_eq!(chains.as_array().unwrap().len(), 2);
        assert_eq!(
            chains[1]["filter_chain_match"]["server_names"],
            json!([bound])
        );
        let tls = &chains[1]["transport_socket"]["typed_config"]["common_tls_context"];
        assert_eq!(
            tls["tls_certificates"][0]["certificate_chain"]["filename"],
            tls_file(tls::WILDCARD_CERT)
        );
        let hcm = &chains[1]["filters"][0]["typed_config"];
        assert_eq!(
            hcm["rds"]["route_config_name"],
            "https.443.wildcard-tls.kube-apiserver.shoot--local--local"
        );
        let wild = x
            .routes
            .iter()
            .find(|r| r["name"] == hcm["rds"]["route_config_name"])
            .expect("the wildcard server's routes");
        let vh = &wild["virtual_hosts"][0];
        assert_eq!(vh["domains"], json!([bound, format!("{bound}:*")]));
        assert_eq!(
            vh["routes"][0]["match"]["dynamic_metadata"][0]["value"]["string_match"]["exact"],
            bound
        );
        assert_eq!(vh["routes"][1]["name"], "connection-upgrade");
        assert!(vh["routes"][1]["route"].get("upgrade_configs").is_none());
        assert_eq!(vh["routes"][2]["name"], "default");
        // The `tls` server is as without it.
        let main = &x.routes[0]["virtual_hosts"][0]["routes"];
        assert_eq!(
            main[1]["route"]["upgrade_configs"][0]["upgrade_type"],
            "spdy/3.1"
        );
        // Draining in place: a drain host on each server.
        e.api_gateway_draining = true;
        let x = render(&e);
        let chains = &listener_of(&x, 443)["filter_chains"];
        assert_eq!(
            chains[1]["filter_chain_match"]["server_names"],
            json!([bound, format!("cpmlab-drain.{bound}")])
        );
        assert_eq!(
            chains[0]["filter_chain_match"]["server_names"][1],
            "cpmlab-drain.api.local.cpmlab.test"
        );
        // Each route configuration in a file of its own (Envoy takes one
        // from a file).
        let names: Vec<String> = render(&e).files().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, [RDS_FILE, WILDCARD_RDS_FILE, CDS_FILE, LDS_FILE]);
        assert_eq!(
            hcm["rds"]["config_source"]["path_config_source"]["path"],
            format!("{XDS_DIR}/{WILDCARD_RDS_FILE}")
        );
        // Deleted: no chain, both route configurations empty.
        e.api_gateway_draining = false;
        e.api_gateway_deleted = true;
        let x = render(&e);
        assert!(x.listeners.iter().all(|l| l["name"] != "0.0.0.0_443"));
        assert_eq!(x.routes.len(), 2);
        assert!(x
            .routes
            .iter()
            .all(|r| r["virtual_hosts"].as_array().unwrap().is_empty()));
    }

    #[test]
    fn termination_ends_tls_and_routes_per_request() {
        let x = render(&sample(ApiExposure::Termination));
        let chain = &listener_of(&x, 443)["filter_chains"][0];
        let tls = &chain["transport_socket"]["typed_config"];
        assert_eq!(tls["require_client_certificate"], false);
        assert_eq!(
            tls["common_tls_context"]["alpn_protocols"],
            json!(["h2", "http/1.1"])
        );
        let hcm = &chain["filters"][0]["typed_config"];
        assert_eq!(hcm["stream_idle_timeout"], "0s");
        assert_eq!(hcm["http_filters"][0]["name"], "envoy.filters.http.lua");
        let routes = &x.routes[0]["virtual_hosts"][0]["routes"];
        assert_eq!(
            routes[0]["route"]["cluster"],
            "outbound|443||kube-apiserver-mtls.shoot--local--local.svc.cluster.local"
        );
        assert_eq!(routes[1]["name"], "connection-upgrade");
        assert_eq!(
            x.routes[0]["virtual_hosts"][0]["domains"],
            json!([
                "api.local.cpmlab.test",
                "api.local.cpmlab.test:*",
                "10.0.0.3",
                "10.0.0.3:*"
            ])
        );
        assert_eq!(routes[2]["route"]["timeout"], "0s");
        assert_eq!(routes[2]["route"]["retry_policy"]["num_retries"], 2);
        let plain = &x.clusters[0];
        assert_eq!(plain["lb_policy"], "LEAST_REQUEST");
        assert!(plain.get("outlier_detection").is_none());
        let up = &plain["transport_socket"]["typed_config"];
        assert_eq!(up["sni"], "kubernetes.default.svc.cluster.local");
        assert!(up["common_tls_context"].get("tls_certificates").is_none());
        assert!(
            x.clusters[1]["transport_socket"]["typed_config"]["common_tls_context"]
                ["tls_certificates"]
                .is_array()
        );
        assert_eq!(
            x.clusters[2]["transport_socket"]["typed_config"]["common_tls_context"]
                ["alpn_protocols"],
            json!(["http/1.1"])
        );
        let lua = crate::lua::lua_source();
        assert!(lua.contains("headers:remove(\"X-Remote-User\")"));
        assert!(lua.contains("authenticated-kube-apiserver-host"));
    }

    #[test]
    fn endpoints_are_written_per_service_and_empty_when_none_is_ready() {
        let x = sample(ApiExposure::Termination);
        let plain = x
            .api
            .as_ref()
            .unwrap()
            .destination(&x.namespace, ApiDestination::Plain)
            .cluster();
        let ready = BTreeMap::from([(plain.clone(), vec!["10.0.0.20:443".parse().unwrap()])]);
        let files = eds_files(&x, &ready);
        assert_eq!(files.len(), 3);
        let (name, body) = &files[0];
        assert!(
            name.starts_with("eds-outbound_443__kube-apiserver."),
            "{name}"
        );
        let la = &body["resources"][0];
        assert_eq!(la["cluster_name"], plain);
        assert_eq!(
            la["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]
                ["address"],
            "10.0.0.20"
        );
        assert_eq!(files[1].1["resources"][0]["endpoints"], json!([]));
        // The version follows the content.
        let again = eds_files(&x, &ready);
        assert_eq!(files, again);
        assert_ne!(files[0].1["version_info"], files[1].1["version_info"]);
    }
}
