//! The kind form's gateway: an [`Exposure`] as the Istio objects Gardener
//! creates in a seed (pkg/component/kubernetes/apiserverexposure/sni.go
//! with pkg/utils/istio/{gateway,virtualservice,destinationrule}.go), and
//! for etcd's endpoints the passthrough shape of gardener/gardener pull
//! request 15576 (a Gateway server and a VirtualService TLS route per
//! member endpoint; a ServiceEntry with `resolution: DNS` where the
//! destination is a name rather than a Service).
//!
//! In termination mode the EnvoyFilters that Gardener adds are rendered
//! too: the istio-ingress chart's Lua filter (identity into
//! X-Remote-User/Group) and sni.go's per-shoot one (the mutual-TLS route,
//! HTTP/1.1 towards kube-apiserver for upgrades, SPDY and websocket on the
//! upgrade route).

use serde_json::{json, Value};

use super::http_proxy::{self, HTTP_PROXY_PORT};
use super::{
    ApiDestination, ApiExposure, ApiRoute, Destination, Exposure, Resolution,
    CONNECTION_UPGRADE_ROUTE, MAX_CONNECTION_DURATION_S, TCP_KEEPALIVE_INTERVAL_S,
    TCP_KEEPALIVE_TIME_S, UPSTREAM_SNI,
};

/// Where the objects go and what they carry.
#[derive(Debug, Clone)]
pub struct Placement {
    /// Labels every object gets.
    pub labels: Value,
    /// The ingress gateway's namespace (credentials and EnvoyFilters live there).
    pub ingress_namespace: String,
    /// The ingress gateway pods' selector.
    pub selector: (String, String),
    /// The port the gateway's pods listen on for the API: its Service's
    /// target port, which the gateway's listener binds and an EnvoyFilter's
    /// `listener.portNumber` names (Gardener's 9443 for the Service's 443:
    /// the istio-ingress chart's templates/apiserver-tls-termination-envoyfilter.yaml).
    pub api_listener_port: u16,
}

/// The API Gateway's and VirtualService's name (sni.go names them after
/// kube-apiserver).
pub const API_GATEWAY: &str = "kube-apiserver";
/// The Gateway of etcd's endpoints.
pub const ETCD_GATEWAY: &str = "etcd-main";

/// The credential (a Secret in the ingress namespace) of the API's HTTPS
/// server: the serving certificate and the client CA (sni.go's
/// `<namespace>-kube-apiserver-tls`).
pub fn tls_credential(x: &Exposure) -> String {
    format!("{}-kube-apiserver-tls", x.namespace)
}

/// The credential of the gateway towards kube-apiserver: the CA and the
/// gateway's front-proxy client certificate (`<namespace>-kube-apiserver-istio-mtls`).
pub fn mtls_credential(x: &Exposure) -> String {
    format!("{}-kube-apiserver-istio-mtls", x.namespace)
}

fn meta(name: &str, ns: &str, p: &Placement) -> Value {
    json!({"name": name, "namespace": ns, "labels": p.labels})
}

/// Every Istio object of `x`.
pub fn objects(x: &Exposure, p: &Placement) -> Vec<Value> {
    let mut out = vec![];
    if let Some(api) = &x.api {
        if !x.api_gateway_deleted {
            out.push(api_gateway(x, api, p));
        }
        out.push(api_virtual_service(x, api, p));
        for (d, dest) in x.api_destinations() {
            out.push(destination_rule(
                &api.service_of(d),
                &x.namespace,
                p,
                &dest,
                api_policy(api.mode, d, x),
            ));
        }
        if let Some(to) = &x.api_forward {
            out.extend(forward_objects(x, api, to, p));
        }
        if api.mode == ApiExposure::Termination {
            out.push(lua_envoy_filter(p));
            out.push(routes_envoy_filter(x, api, p));
            if !x.apiserver_proxy_released() {
                out.push(apiserver_proxy_envoy_filter(x, api, p));
            }
        }
    }
    if x.api.is_some() || !x.tls.is_empty() {
        out.push(limits_envoy_filter(x, p));
    }
    // The seed's apiserver-proxy port, whatever the shoot's state.
    out.push(http_proxy_gateway(p));
    out.push(http_proxy_envoy_filter(p));
    if !x.tls.is_empty() {
        out.push(etcd_gateway(x, p));
    }
    // A VirtualService per owner (a member's peer and client routes).
    let mut owners: Vec<&str> = x.tls.iter().map(|r| r.owner.as_str()).collect();
    owners.dedup();
    for owner in owners {
        let routes: Vec<Value> = x
            .tls
            .iter()
            .filter(|r| r.owner == owner)
            .map(|r| tls_route(r.port, &r.host, &r.destination))
            .collect();
        let hosts: Vec<&str> = {
            let mut h: Vec<&str> = x
                .tls
                .iter()
                .filter(|r| r.owner == owner)
                .map(|r| r.host.as_str())
                .collect();
            h.dedup();
            h
        };
        out.push(json!({
            "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": meta(owner, &x.namespace, p),
            "spec": {"hosts": hosts, "gateways": [ETCD_GATEWAY], "tls": routes},
        }));
    }
    // A DestinationRule (and, for a name, a ServiceEntry) per destination.
    let mut seen = std::collections::BTreeSet::new();
    for r in &x.tls {
        if !seen.insert(r.destination.cluster()) {
            continue;
        }
        let name = format!("{}-{}", r.owner, r.kind);
        if r.destination.resolution == Resolution::Dns {
            out.push(json!({
                "apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
                "metadata": meta(&name, &x.namespace, p),
                "spec": {
                    "hosts": [r.destination.host],
                    "location": "MESH_INTERNAL",
                    "resolution": "DNS",
                    "ports": [{"number": r.destination.port, "name": format!("tls-{}", r.kind), "protocol": "TLS"}],
                },
            }));
        }
        out.push(destination_rule(
            &name,
            &x.namespace,
            p,
            &r.destination,
            passthrough_policy(),
        ));
    }
    out
}

fn server(name: &str, port: u16, protocol: &str, tls: Value, hosts: &[&str]) -> Value {
    json!({
        "port": {"number": port, "name": name, "protocol": protocol},
        "tls": tls,
        "hosts": hosts,
    })
}

fn api_gateway(x: &Exposure, api: &ApiRoute, p: &Placement) -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1", "kind": "Gateway",
        "metadata": meta(API_GATEWAY, &x.namespace, p),
        "spec": {"selector": {p.selector.0.clone(): p.selector.1}, "servers": api_gateway_servers(x, api)},
    })
}

/// The API's Gateway's servers (one, on the API's port).
fn api_gateway_servers(x: &Exposure, api: &ApiRoute) -> Value {
    let hosts = x.api_gateway_hosts(api);
    let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let s = match api.mode {
        ApiExposure::Passthrough => server(
            "tls",
            api.port,
            "TLS",
            json!({"mode": "PASSTHROUGH"}),
            &hosts,
        ),
        ApiExposure::Termination => server(
            "tls",
            api.port,
            "HTTPS",
            json!({"mode": "OPTIONAL_MUTUAL", "credentialName": tls_credential(x)}),
            &hosts,
        ),
    };
    json!([s])
}

fn etcd_gateway(x: &Exposure, p: &Placement) -> Value {
    let servers: Vec<Value> = x
        .tls
        .iter()
        .map(|r| {
            server(
                &format!("tls-{}-{}", r.owner, r.kind),
                r.port,
                "TLS",
                json!({"mode": "PASSTHROUGH"}),
                &[&r.host],
            )
        })
        .collect();
    json!({
        "apiVersion": "networking.istio.io/v1", "kind": "Gateway",
        "metadata": meta(ETCD_GATEWAY, &x.namespace, p),
        "spec": {"selector": {p.selector.0.clone(): p.selector.1}, "servers": servers},
    })
}

fn destination(d: &Destination) -> Value {
    json!({"host": d.host, "port": {"number": d.port}})
}

fn tls_route(port: u16, host: &str, d: &Destination) -> Value {
    json!({
        "match": [{"port": port, "sniHosts": [host]}],
        "route": [{"destination": destination(d)}],
    })
}

fn api_virtual_service(x: &Exposure, api: &ApiRoute, p: &Placement) -> Value {
    let spec = match api.mode {
        ApiExposure::Passthrough => json!({
            "hosts": [api.host],
            "gateways": [API_GATEWAY],
            "tls": [tls_route(api.port, &api.host, &x.api_target(api, ApiDestination::Plain))],
        }),
        ApiExposure::Termination => json!({
            "hosts": std::iter::once(&api.host).chain(&api.authorities).collect::<Vec<_>>(),
            "gateways": [API_GATEWAY],
            "http": [
                {
                    "name": CONNECTION_UPGRADE_ROUTE,
                    "match": [{"headers": {"Connection": {"exact": "Upgrade"}, "Upgrade": {}}}],
                    "route": [{"destination": destination(&x.api_target(api, ApiDestination::ConnectionUpgrade))}],
                },
                {"route": [{"destination": destination(&x.api_target(api, ApiDestination::Plain))}]},
            ],
        }),
    };
    json!({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": meta(API_GATEWAY, &x.namespace, p),
        "spec": spec,
    })
}

/// destinationrule.go's connection pool: keepalive and maximum duration.
fn tcp_pool() -> Value {
    json!({
        "maxConnectionDuration": format!("{MAX_CONNECTION_DURATION_S}s"),
        "tcpKeepalive": {"time": format!("{TCP_KEEPALIVE_TIME_S}s"), "interval": format!("{TCP_KEEPALIVE_INTERVAL_S}s")},
    })
}

/// Gardener's passthrough policy (DestinationRuleWithLocalityPreference):
/// locality preference, outlier detection with minHealthPercent 0, no TLS.
pub fn passthrough_policy() -> Value {
    json!({
        "connectionPool": {"tcp": tcp_pool()},
        "loadBalancer": {"localityLbSetting": {"enabled": true, "failoverPriority": ["topology.kubernetes.io/zone"]}},
        "outlierDetection": {"minHealthPercent": 0},
        "tls": {"mode": "DISABLE"},
    })
}

/// The API's policy for destination `d` (DestinationRuleWithTLSTermination
/// in termination mode: LEAST_REQUEST, no outlier detection, TLS with
/// SNI, the client's protocol).
fn api_policy(mode: ApiExposure, d: ApiDestination, x: &Exposure) -> Value {
    if mode == ApiExposure::Passthrough {
        return passthrough_policy();
    }
    json!({
        "connectionPool": {"tcp": tcp_pool(), "http": {"useClientProtocol": true}},
        "loadBalancer": {"simple": "LEAST_REQUEST"},
        "tls": {
            "mode": if d == ApiDestination::MutualTls { "MUTUAL" } else { "SIMPLE" },
            "credentialName": mtls_credential(x),
            "sni": UPSTREAM_SNI,
        },
    })
}

/// The name of the `forward` handover's ServiceEntry and DestinationRule.
pub const FORWARD_NAME: &str = "kube-apiserver-forward";

/// The `forward` handover's objects beside the VirtualService that routes
/// to them: a ServiceEntry for the destination seed's gateway by its
/// ingress name (outside the mesh, resolved by DNS) and its
/// DestinationRule. Where TLS ends here the rule originates TLS as Istio's
/// TLS origination does (`tls.mode: SIMPLE`), with the API's name as SNI
/// and the lab CA to check the destination's certificate, the client's
/// protocol kept; where it passes through, Gardener's passthrough policy
/// (no TLS of the gateway's own).
fn forward_objects(x: &Exposure, api: &ApiRoute, to: &Destination, p: &Placement) -> Vec<Value> {
    let (protocol, policy) = match api.mode {
        ApiExposure::Passthrough => ("TLS", passthrough_policy()),
        ApiExposure::Termination => (
            "HTTPS",
            json!({
                "connectionPool": {"tcp": tcp_pool(), "http": {"useClientProtocol": true}},
                "loadBalancer": {"simple": "LEAST_REQUEST"},
                "tls": {"mode": "SIMPLE", "credentialName": mtls_credential(x), "sni": api.host},
            }),
        ),
    };
    vec![
        json!({
            "apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
            "metadata": meta(FORWARD_NAME, &x.namespace, p),
            "spec": {
                "hosts": [to.host],
                "location": "MESH_EXTERNAL",
                "resolution": "DNS",
                "ports": [{"number": to.port, "name": "tls-forward", "protocol": protocol}],
            },
        }),
        destination_rule(FORWARD_NAME, &x.namespace, p, to, policy),
    ]
}

fn destination_rule(name: &str, ns: &str, p: &Placement, d: &Destination, policy: Value) -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
        "metadata": meta(name, ns, p),
        "spec": {"host": d.host, "trafficPolicy": policy},
    })
}

/// The role label of the seed-wide objects the lab adds to the ingress
/// gateway (not removed with the shoot's: `role=gateway`).
pub const INGRESS_ROLE: &str = "ingress";

/// The istio-ingress chart's limits on the gateway (`ingress_limits`):
/// HTTP/2 options merged into every connection manager, the buffer and
/// downstream keepalive into every listener.
fn limits_envoy_filter(x: &Exposure, p: &Placement) -> Value {
    use super::ingress_limits as l;
    // The seed's, not the shoot's: it stays when the shoot's gateway
    // objects go (a change would replace every listener of the gateway).
    let metadata = ingress_meta("gardener-ingress-limits", p);
    // On the listeners of the ingress Service's ports, as the chart
    // matches them (`portNumber` per target port): not the internal
    // listener of the apiserver-proxy, which sets its own buffer and has
    // no TCP socket to keep alive.
    let mut ports: Vec<u16> = x.tls_ports();
    ports.push(p.api_listener_port);
    ports.push(HTTP_PROXY_PORT);
    ports.sort_unstable();
    ports.dedup();
    let listener_patches = ports.iter().map(|port| {
        json!({
            "applyTo": "LISTENER",
            "match": {"context": "GATEWAY", "listener": {"portNumber": port}},
            "patch": {
                "operation": "MERGE",
                "value": {
                    "per_connection_buffer_limit_bytes": l::PER_CONNECTION_BUFFER_LIMIT_BYTES,
                    "socket_options": l::listener_socket_options(),
                },
            },
        })
    });
    let hcm_patch = json!(
    {
        "applyTo": "NETWORK_FILTER",
        "match": {
            "context": "GATEWAY",
            "listener": {"filterChain": {"filter": {"name": "envoy.filters.network.http_connection_manager"}}},
        },
        "patch": {
            "operation": "MERGE",
            "value": {
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "http2_protocol_options": l::http2_protocol_options(),
                },
            },
        },
    });
    // The gateways' bound on a connection's life, on the API's connection
    // manager (the internal listener carries its own).
    let age_patch = x
        .downstream_connection_options()
        .filter(|_| x.api.as_ref().is_some_and(|a| a.mode == ApiExposure::Termination))
        .map(|mut options| {
            options["@type"] = json!("type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager");
            json!({
                "applyTo": "NETWORK_FILTER",
                "match": {
                    "context": "GATEWAY",
                    "listener": {
                        "portNumber": p.api_listener_port,
                        "filterChain": {"filter": {"name": "envoy.filters.network.http_connection_manager"}},
                    },
                },
                "patch": {"operation": "MERGE", "value": {
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": options,
                }},
            })
        });
    let patches: Vec<Value> = std::iter::once(hcm_patch)
        .chain(age_patch)
        .chain(listener_patches)
        .collect();
    envoy_filter(metadata, p, Value::Array(patches))
}

/// An EnvoyFilter on the ingress gateway's pods with these patches.
fn envoy_filter(metadata: Value, p: &Placement, patches: Value) -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1alpha3", "kind": "EnvoyFilter",
        "metadata": metadata,
        "spec": {
            "workloadSelector": {"labels": {p.selector.0.clone(): p.selector.1}},
            "configPatches": patches,
        },
    })
}

/// Metadata of a seed-wide object on the ingress gateway: it stays when
/// the shoot's objects go.
fn ingress_meta(name: &str, p: &Placement) -> Value {
    let mut metadata = meta(name, &p.ingress_namespace, p);
    if let Some(labels) = metadata["labels"].as_object_mut() {
        labels.insert(cpmlab_model::labels::LABEL_ROLE.into(), INGRESS_ROLE.into());
    }
    metadata
}

/// The istio-ingress chart's `http-proxy` Gateway: opens 8443 (for a host
/// that does not exist) so that the EnvoyFilter below has a connection
/// manager to merge into.
fn http_proxy_gateway(p: &Placement) -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1", "kind": "Gateway",
        "metadata": ingress_meta(http_proxy::GATEWAY_NAME, p),
        "spec": {
            "selector": {p.selector.0.clone(): p.selector.1},
            "servers": [{
                "hosts": [http_proxy::BLACKHOLE_HOST],
                "port": {"number": HTTP_PROXY_PORT, "name": http_proxy::GATEWAY_NAME, "protocol": "HTTP"},
            }],
        },
    })
}

/// The chart's `http-proxy` EnvoyFilter: CONNECT by `X-Gardener-Destination`.
fn http_proxy_envoy_filter(p: &Placement) -> Value {
    let mut value = json!({
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "route_config": http_proxy::route_config(),
    });
    if let (Some(o), Value::Object(more)) = (
        value.as_object_mut(),
        http_proxy::connection_manager_options(),
    ) {
        o.extend(more);
    }
    envoy_filter(
        ingress_meta(http_proxy::GATEWAY_NAME, p),
        p,
        json!([{
            "applyTo": "NETWORK_FILTER",
            "match": {
                "context": "GATEWAY",
                "listener": {
                    "portNumber": HTTP_PROXY_PORT,
                    "filterChain": {"filter": {"name": "envoy.filters.network.http_connection_manager"}},
                },
            },
            "patch": {"operation": "MERGE", "value": {
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": value,
            }},
        }]),
    )
}

/// sni.go's per-shoot apiserver-proxy EnvoyFilter (in the ingress
/// namespace, owned by the shoot's namespace in Gardener: it goes with
/// the shoot): the internal listener and its cluster.
fn apiserver_proxy_envoy_filter(x: &Exposure, api: &ApiRoute, p: &Placement) -> Value {
    let credential = tls_credential(x);
    let tls = http_proxy::TlsSource::Sds {
        credential: &credential,
    };
    envoy_filter(
        meta(
            &format!("{}-apiserver-proxy", x.namespace),
            &p.ingress_namespace,
            p,
        ),
        p,
        json!([
            {
                "applyTo": "LISTENER",
                "match": {"context": "GATEWAY"},
                "patch": {"operation": "ADD", "value": http_proxy::socket_listener(x, api, &tls)},
            },
            {
                "applyTo": "CLUSTER",
                "match": {"context": "GATEWAY"},
                "patch": {"operation": "ADD", "value": http_proxy::socket_cluster_config(x)},
            },
        ]),
    )
}

/// The istio-ingress chart's Lua filter, on the API's listener: the same
/// script the docker form's Envoy runs.
fn lua_envoy_filter(p: &Placement) -> Value {
    envoy_filter(
        meta("apiserver-tls-termination", &p.ingress_namespace, p),
        p,
        json!([{
            "applyTo": "HTTP_FILTER",
            "match": {
                "context": "GATEWAY",
                "listener": {
                    "portNumber": p.api_listener_port,
                    "filterChain": {"filter": {
                        "name": "envoy.filters.network.http_connection_manager",
                        "subFilter": {"name": "envoy.filters.http.router"},
                    }},
                },
            },
            "patch": {
                "operation": "INSERT_BEFORE",
                "value": {
                    "name": "envoy.filters.http.lua",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua",
                        "defaultSourceCode": {"inlineString": super::lua::lua_source()},
                    },
                },
            },
        }]),
    )
}

/// sni.go's per-shoot EnvoyFilter: the mutual-TLS route first, HTTP/1.1
/// to kube-apiserver for upgrades, and the upgrade types on that route.
fn routes_envoy_filter(x: &Exposure, api: &ApiRoute, p: &Placement) -> Value {
    let rc = super::envoy::route_config_name(x, api);
    envoy_filter(
        meta(
            &format!("{}-istio-tls-termination", x.namespace),
            &p.ingress_namespace,
            p,
        ),
        p,
        json!([
            {
                "applyTo": "HTTP_ROUTE",
                "match": {"context": "GATEWAY", "routeConfiguration": {"name": rc}},
                "patch": {"operation": "INSERT_BEFORE", "value": super::envoy::mtls_route(x, api)},
            },
            {
                "applyTo": "CLUSTER",
                "match": {"context": "GATEWAY", "cluster": {"name": api.destination(&x.namespace, ApiDestination::ConnectionUpgrade).cluster()}},
                "patch": {"operation": "MERGE", "value": {"transportSocket": {
                    "name": "envoy.transport_sockets.tls",
                    "typedConfig": {
                        "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                        "commonTlsContext": {"alpnProtocols": ["http/1.1"]},
                    },
                }}},
            },
            {
                "applyTo": "HTTP_ROUTE",
                "match": {"context": "GATEWAY", "routeConfiguration": {"name": rc, "vhost": {"route": {"name": CONNECTION_UPGRADE_ROUTE}}}},
                "patch": {"operation": "MERGE", "value": {"route": {"upgrade_configs": [
                    {"upgrade_type": "spdy/3.1"}, {"upgrade_type": "websocket"},
                ]}}},
            },
        ]),
    )
}

/// A placement for checks and tests (`agree`): the kind form's gateway
/// in its own namespace.
pub fn tests_placement() -> Placement {
    Placement {
        labels: json!({"cpmlab.lab": "t"}),
        ingress_namespace: "istio-ingress".into(),
        selector: ("istio".into(), "ingressgateway".into()),
        api_listener_port: 9443,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement() -> Placement {
        tests_placement()
    }

    fn kinds(v: &[Value]) -> Vec<String> {
        v.iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn passthrough_is_gardeners_sni_gateway() {
        let x = crate::envoy::tests::sample(ApiExposure::Passthrough);
        let o = objects(&x, &placement());
        let k = kinds(&o);
        assert_eq!(
            &k[..3],
            [
                "Gateway/kube-apiserver",
                "VirtualService/kube-apiserver",
                "DestinationRule/kube-apiserver"
            ]
        );
        assert_eq!(o[0]["spec"]["servers"][0]["tls"]["mode"], "PASSTHROUGH");
        assert_eq!(
            o[2]["spec"]["trafficPolicy"]["outlierDetection"]["minHealthPercent"],
            0
        );
        assert!(
            k.contains(&"ServiceEntry/seed-a-etcd-0-peer".to_string()),
            "{k:?}"
        );
        // Only the gateway's limits: nothing of TLS termination.
        let filters: Vec<&String> = k.iter().filter(|k| k.starts_with("EnvoyFilter")).collect();
        assert_eq!(
            filters,
            [
                "EnvoyFilter/gardener-ingress-limits",
                "EnvoyFilter/http-proxy"
            ],
            "{k:?}"
        );
        // The apiserver-proxy's socket only where TLS ends at the gateway.
        assert!(!k.iter().any(|k| k.ends_with("-apiserver-proxy")), "{k:?}");
        let limits = o
            .iter()
            .find(|v| v["metadata"]["name"] == "gardener-ingress-limits")
            .unwrap();
        let patches = &limits["spec"]["configPatches"];
        assert_eq!(
            patches[0]["patch"]["value"]["typed_config"]["http2_protocol_options"]
                ["max_concurrent_streams"],
            100
        );
        assert_eq!(
            patches[1]["patch"]["value"]["per_connection_buffer_limit_bytes"],
            32768
        );
        assert_eq!(limits["metadata"]["labels"]["cpmlab.role"], INGRESS_ROLE);
    }

    #[test]
    fn termination_is_gardeners_tls_termination() {
        let x = crate::envoy::tests::sample(ApiExposure::Termination);
        let o = objects(&x, &placement());
        let k = kinds(&o);
        assert!(
            k.contains(&"DestinationRule/kube-apiserver-mtls".to_string()),
            "{k:?}"
        );
        assert!(
            k.contains(&"EnvoyFilter/apiserver-tls-termination".to_string()),
            "{k:?}"
        );
        let s = &o[0]["spec"]["servers"][0];
        assert_eq!(s["port"]["protocol"], "HTTPS");
        assert_eq!(s["tls"]["mode"], "OPTIONAL_MUTUAL");
        let http = &o[1]["spec"]["http"];
        assert_eq!(http[0]["name"], "connection-upgrade");
        let dr = &o[3]["spec"]["trafficPolicy"];
        assert_eq!(dr["tls"]["mode"], "MUTUAL");
        assert_eq!(dr["tls"]["sni"], "kubernetes.default.svc.cluster.local");
        assert_eq!(dr["loadBalancer"]["simple"], "LEAST_REQUEST");
        let proxy = o
            .iter()
            .find(|v| v["metadata"]["name"] == "shoot--local--local-apiserver-proxy")
            .unwrap();
        let listener = &proxy["spec"]["configPatches"][0]["patch"]["value"];
        assert_eq!(
            listener["address"]["pipe"]["path"],
            "@kube-apiservers/shoot--local--local"
        );
        let tls =
            &listener["filter_chains"][0]["transport_socket"]["typed_config"]["common_tls_context"];
        assert_eq!(
            tls["tls_certificate_sds_secret_configs"][0]["name"],
            "kubernetes://shoot--local--local-kube-apiserver-tls"
        );
        // The shoot's object goes with the shoot, the seed's stay.
        assert_eq!(proxy["metadata"]["labels"].get("cpmlab.role"), None);
        let gw = o
            .iter()
            .find(|v| v["kind"] == "Gateway" && v["metadata"]["name"] == "http-proxy")
            .unwrap();
        assert_eq!(gw["metadata"]["labels"]["cpmlab.role"], INGRESS_ROLE);
        assert_eq!(gw["spec"]["servers"][0]["port"]["number"], 8443);
    }
}
