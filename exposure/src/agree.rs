//! The two renderings of one exposure agree: what the Istio objects ask
//! of an ingress gateway (read here the way istiod reads them) is what
//! the docker form's Envoy configuration does. Both are reduced to the
//! same facts — per gateway port and SNI host: passthrough to which
//! cluster, or TLS ended (optional client certificates) and which routes
//! to which clusters; per cluster: discovery, balancing, keepalive,
//! maximum connection duration, outlier detection, upstream TLS — and the
//! facts must be equal.

use std::collections::BTreeMap;

use serde_json::Value;

use super::envoy;
use super::istio;
use super::Exposure;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Chain {
    Passthrough {
        cluster: String,
    },
    Terminate {
        optional_mutual: bool,
        routes: Vec<(String, String)>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct ClusterFacts {
    discovery: String,
    lb: String,
    keepalive: (u64, u64),
    max_connection_s: u64,
    /// Success-rate ejection off and panic threshold 0 (Istio's reading
    /// of `outlierDetection: {minHealthPercent: 0}`).
    outlier_off_panic_zero: bool,
    /// (SNI, presents a client certificate, ALPN)
    upstream_tls: Option<(String, bool, Vec<String>)>,
}

#[derive(Debug, PartialEq, Eq, Default)]
struct Facts {
    chains: BTreeMap<(u16, String), Chain>,
    /// The authorities the HTTP routes of an SNI host answer.
    authorities: BTreeMap<String, Vec<String>>,
    clusters: BTreeMap<String, ClusterFacts>,
    /// The apiserver-proxy's CONNECT port: (port, the header's regex,
    /// the header the cluster comes from).
    connect: Option<(u16, String, String)>,
    /// The internal listener: (its socket, its routes' clusters, the
    /// socket its cluster connects to).
    socket: Option<(String, Vec<String>, String)>,
    /// The bound on a downstream connection's life on the API's connection
    /// manager and on the internal listener's ("" for none).
    connection_age: (String, String),
}

/// A connection manager's `max_connection_duration` ("" for none).
fn connection_age(hcm: &Value) -> String {
    s(&hcm["common_http_protocol_options"]["max_connection_duration"])
}

/// The CONNECT route of a connection manager's route configuration.
fn connect_route(rc: &Value) -> (String, String) {
    let r = &rc["virtual_hosts"][0]["routes"][0];
    (
        s(&r["match"]["headers"][0]["string_match"]["safe_regex"]["regex"]),
        s(&r["route"]["cluster_header"]),
    )
}

/// An internal listener's socket and its routes' clusters.
fn socket_listener(l: &Value) -> (String, Vec<String>) {
    let rc = &l["filter_chains"][0]["filters"][0]["typed_config"]["route_config"];
    let routes = rc["virtual_hosts"][0]["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| s(&r["route"]["cluster"]))
        .collect();
    (s(&l["address"]["pipe"]["path"]), routes)
}

fn pipe_of_cluster(c: &Value) -> String {
    s(
        &c["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["pipe"]
            ["path"],
    )
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn secs(v: &Value) -> u64 {
    match v {
        Value::Number(n) => n.as_u64().unwrap_or(0),
        Value::String(t) => t.trim_end_matches('s').parse().unwrap_or(0),
        _ => 0,
    }
}

fn cluster_name(dest: &Value) -> String {
    format!(
        "outbound|{}||{}",
        dest["port"]["number"].as_u64().unwrap_or(0),
        s(&dest["host"])
    )
}

/// What istiod would make of the objects of `x`, with the API's
/// Kubernetes Services that `x` names (istiod builds a cluster for each,
/// routed or not).
fn from_istio(objects: &[Value], x: &Exposure) -> Facts {
    let mut f = Facts::default();
    let of_kind = |k: &'static str| objects.iter().filter(move |o| o["kind"] == k);
    let mut modes: BTreeMap<(u16, String), String> = BTreeMap::new();
    // Each server where TLS ends, by its port and first host (a filter
    // chain's, as Envoy's first server name): its hosts and the route
    // configuration istiod names after it (`https.<port>.<port
    // name>.<gateway>.<namespace>`, pilot/pkg/model/gateway.go).
    let mut servers: BTreeMap<(u16, String), (Vec<String>, String)> = BTreeMap::new();
    for g in of_kind("Gateway") {
        for srv in g["spec"]["servers"].as_array().unwrap() {
            let port = srv["port"]["number"].as_u64().unwrap() as u16;
            // The mode's zero value, which a proto's JSON leaves out (as
            // Gardener's rendering does), is PASSTHROUGH (istio
            // networking/v1alpha3/gateway.proto, ServerTLSSettings.TLSmode).
            let mode = match s(&srv["tls"]["mode"]) {
                m if m.is_empty() && srv["tls"].is_object() => "PASSTHROUGH".to_string(),
                m => m,
            };
            let hosts: Vec<String> = srv["hosts"].as_array().unwrap().iter().map(s).collect();
            for h in &hosts {
                modes.insert((port, h.clone()), mode.clone());
            }
            if mode != "PASSTHROUGH" && !hosts.is_empty() {
                let rc = format!(
                    "https.{port}.{}.{}.{}",
                    s(&srv["port"]["name"]),
                    s(&g["metadata"]["name"]),
                    s(&g["metadata"]["namespace"])
                );
                servers.insert((port, hosts[0].clone()), (hosts, rc));
            }
        }
    }
    // The EnvoyFilter's inserted routes go first, each into the route
    // configuration it names.
    let mut inserted: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut upgrade_alpn: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let http_proxy_port = of_kind("Gateway")
        .find(|g| g["metadata"]["name"] == crate::http_proxy::GATEWAY_NAME)
        .map(|g| g["spec"]["servers"][0]["port"]["number"].as_u64().unwrap() as u16);
    let mut socket_routes: Option<(String, Vec<String>)> = None;
    let mut socket_cluster_pipe = String::new();
    for ef in of_kind("EnvoyFilter") {
        for p in ef["spec"]["configPatches"].as_array().unwrap() {
            let value = &p["patch"]["value"];
            if p["applyTo"] == "NETWORK_FILTER"
                && p["match"]["listener"]["portNumber"]
                    .as_u64()
                    .map(|n| n as u16)
                    == http_proxy_port
            {
                let (regex, header) = connect_route(&value["typed_config"]["route_config"]);
                f.connect = http_proxy_port.map(|port| (port, regex, header));
            }
            if p["patch"]["operation"] == "ADD" {
                match p["applyTo"].as_str() {
                    Some("LISTENER") => {
                        socket_routes = Some(socket_listener(value));
                        f.connection_age.1 = connection_age(
                            &value["filter_chains"][0]["filters"][0]["typed_config"],
                        );
                    }
                    Some("CLUSTER") => socket_cluster_pipe = pipe_of_cluster(value),
                    _ => {}
                }
                continue;
            }
            if p["applyTo"] == "NETWORK_FILTER"
                && p["patch"]["operation"] == "MERGE"
                && p["match"]["listener"]["portNumber"].is_u64()
                && p["match"]["listener"]["portNumber"]
                    .as_u64()
                    .map(|n| n as u16)
                    != http_proxy_port
            {
                // What it merges into: the API's connection manager, none
                // once the API's Gateway is deleted.
                if of_kind("Gateway").any(|g| g["metadata"]["name"] == istio::API_GATEWAY) {
                    f.connection_age.0 = connection_age(&value["typed_config"]);
                }
            }
            if p["applyTo"] == "HTTP_ROUTE" && p["patch"]["operation"] == "INSERT_BEFORE" {
                inserted
                    .entry(s(&p["match"]["routeConfiguration"]["name"]))
                    .or_default()
                    .push((String::new(), s(&p["patch"]["value"]["route"]["cluster"])));
            }
            if p["applyTo"] == "CLUSTER" {
                let alpn = &p["patch"]["value"]["transportSocket"]["typedConfig"]
                    ["commonTlsContext"]["alpnProtocols"];
                upgrade_alpn.insert(
                    s(&p["match"]["cluster"]["name"]),
                    alpn.as_array().unwrap().iter().map(s).collect(),
                );
            }
        }
    }
    let mut hosts_of_cluster: BTreeMap<String, String> = BTreeMap::new();
    for vs in of_kind("VirtualService") {
        for r in vs["spec"]["tls"].as_array().into_iter().flatten() {
            let m = &r["match"][0];
            let port = m["port"].as_u64().unwrap() as u16;
            let host = s(&m["sniHosts"][0]);
            let c = cluster_name(&r["route"][0]["destination"]);
            hosts_of_cluster.insert(c.clone(), s(&r["route"][0]["destination"]["host"]));
            // A route whose Gateway is deleted makes no chain.
            let Some(mode) = modes.get(&(port, host.clone())) else {
                continue;
            };
            assert_eq!(mode, "PASSTHROUGH", "{host}:{port}");
            f.chains
                .insert((port, host), Chain::Passthrough { cluster: c });
        }
        if let Some(http) = vs["spec"]["http"].as_array() {
            let hosts: Vec<String> = vs["spec"]["hosts"]
                .as_array()
                .unwrap()
                .iter()
                .map(s)
                .collect();
            let mut own = vec![];
            for r in http {
                let c = cluster_name(&r["route"][0]["destination"]);
                hosts_of_cluster.insert(c.clone(), s(&r["route"][0]["destination"]["host"]));
                own.push((s(&r["name"]), c));
            }
            for c in inserted.values().flatten() {
                hosts_of_cluster.insert(c.1.clone(), c.1.rsplit("||").next().unwrap().to_string());
            }
            // Each server that names one of its hosts gets its routes, after
            // the EnvoyFilter's for that server's route configuration, and
            // answers its hosts but those another server names (the lab's
            // extra authorities, in no server, stay with every one); a
            // VirtualService without its Gateway routes nothing.
            for ((port, first), (server_hosts, rc)) in &servers {
                let Some(answer) = hosts.iter().find(|h| server_hosts.contains(h)) else {
                    continue;
                };
                let common: Vec<String> = hosts
                    .iter()
                    .filter(|h| {
                        server_hosts.contains(h)
                            || !servers.values().any(|(other, _)| other.contains(h))
                    })
                    .cloned()
                    .collect();
                let mode = &modes[&(*port, first.clone())];
                f.authorities.insert(answer.clone(), common.clone());
                let mut routes = inserted.get(rc).cloned().unwrap_or_default();
                routes.extend(own.iter().cloned());
                f.chains.insert(
                    (*port, first.clone()),
                    Chain::Terminate {
                        optional_mutual: mode == "OPTIONAL_MUTUAL",
                        routes,
                    },
                );
            }
        }
    }
    for (_, d) in x.api_destinations() {
        hosts_of_cluster.insert(d.cluster(), d.host);
    }
    let dns_hosts: Vec<String> = of_kind("ServiceEntry")
        .filter(|se| se["spec"]["resolution"] == "DNS")
        .flat_map(|se| {
            se["spec"]["hosts"]
                .as_array()
                .unwrap()
                .iter()
                .map(s)
                .collect::<Vec<_>>()
        })
        .collect();
    for (cluster, host) in &hosts_of_cluster {
        let dr = of_kind("DestinationRule")
            .find(|d| s(&d["spec"]["host"]) == *host)
            .unwrap_or_else(|| panic!("no DestinationRule for {host}"));
        let p = &dr["spec"]["trafficPolicy"];
        let tcp = &p["connectionPool"]["tcp"];
        let tls = match s(&p["tls"]["mode"]).as_str() {
            "SIMPLE" | "MUTUAL" => Some((
                s(&p["tls"]["sni"]),
                p["tls"]["mode"] == "MUTUAL",
                upgrade_alpn.get(cluster).cloned().unwrap_or_default(),
            )),
            _ => None,
        };
        f.clusters.insert(
            cluster.clone(),
            ClusterFacts {
                discovery: if dns_hosts.contains(host) {
                    "STRICT_DNS"
                } else {
                    "EDS"
                }
                .into(),
                // Istio's default balancing is LEAST_REQUEST too.
                lb: p["loadBalancer"]["simple"]
                    .as_str()
                    .unwrap_or("LEAST_REQUEST")
                    .into(),
                keepalive: (
                    secs(&tcp["tcpKeepalive"]["time"]),
                    secs(&tcp["tcpKeepalive"]["interval"]),
                ),
                max_connection_s: secs(&tcp["maxConnectionDuration"]),
                // Present, with minHealthPercent 0 (the proto's zero
                // value: Gardener's rendering leaves it out, `{}`).
                outlier_off_panic_zero: p["outlierDetection"].is_object()
                    && p["outlierDetection"]["minHealthPercent"]
                        .as_u64()
                        .unwrap_or(0)
                        == 0,
                upstream_tls: tls,
            },
        );
    }
    f.socket = socket_routes.map(|(pipe, routes)| (pipe, routes, socket_cluster_pipe));
    f
}

/// What the docker form's Envoy configuration does.
fn from_envoy(x: &envoy::Xds) -> Facts {
    let mut f = Facts::default();
    let routes: BTreeMap<String, &Value> = x.routes.iter().map(|r| (s(&r["name"]), r)).collect();
    let mut socket_routes: Option<(String, Vec<String>)> = None;
    let mut socket_cluster_pipe = String::new();
    for l in &x.listeners {
        if l["address"]["pipe"].is_object() {
            socket_routes = Some(socket_listener(l));
            f.connection_age.1 =
                connection_age(&l["filter_chains"][0]["filters"][0]["typed_config"]);
            continue;
        }
        let port = l["address"]["socket_address"]["port_value"]
            .as_u64()
            .unwrap() as u16;
        if port == crate::http_proxy::HTTP_PROXY_PORT {
            let (regex, header) =
                connect_route(&l["filter_chains"][0]["filters"][0]["typed_config"]["route_config"]);
            f.connect = Some((port, regex, header));
            continue;
        }
        for chain in l["filter_chains"].as_array().unwrap() {
            let host = s(&chain["filter_chain_match"]["server_names"][0]);
            let filter = &chain["filters"][0]["typed_config"];
            let c = if filter["cluster"].is_string() {
                assert!(chain.get("transport_socket").is_none());
                Chain::Passthrough {
                    cluster: s(&filter["cluster"]),
                }
            } else {
                let tls = &chain["transport_socket"]["typed_config"];
                f.connection_age.0 = connection_age(filter);
                let rc = routes[&s(&filter["rds"]["route_config_name"])];
                let domains: Vec<String> = rc["virtual_hosts"][0]["domains"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(s)
                    .filter(|d| !d.ends_with(":*"))
                    .collect();
                f.authorities.insert(host.clone(), domains);
                let r = rc["virtual_hosts"][0]["routes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| {
                        let name = s(&r["name"]);
                        // The VirtualService's unnamed default route.
                        let name = if name == "default" {
                            String::new()
                        } else {
                            name
                        };
                        (name, s(&r["route"]["cluster"]))
                    })
                    .collect();
                Chain::Terminate {
                    optional_mutual: tls["require_client_certificate"] == false
                        && tls["common_tls_context"]["validation_context"]["trusted_ca"]
                            .is_object(),
                    routes: r,
                }
            };
            f.chains.insert((port, host), c);
        }
    }
    for c in &x.clusters {
        if c["type"] == "STATIC" {
            socket_cluster_pipe = pipe_of_cluster(c);
            continue;
        }
        let ka = &c["upstream_connection_options"]["tcp_keepalive"];
        let http = &c["typed_extension_protocol_options"]
            ["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
        let max = if http.is_object() {
            secs(&http["common_http_protocol_options"]["max_connection_duration"])
        } else {
            // A TCP cluster's maximum is the tcp_proxy's, checked below.
            crate::MAX_CONNECTION_DURATION_S
        };
        let tls = c["transport_socket"]["typed_config"].as_object().map(|t| {
            let common = &t["common_tls_context"];
            (
                s(&t["sni"]),
                common["tls_certificates"].is_array(),
                common["alpn_protocols"]
                    .as_array()
                    .map(|a| a.iter().map(s).collect())
                    .unwrap_or_default(),
            )
        });
        f.clusters.insert(
            s(&c["name"]),
            ClusterFacts {
                discovery: if c["cluster_type"]["name"] == envoy::DNS_CLUSTER {
                    "STRICT_DNS".into()
                } else {
                    s(&c["type"])
                },
                lb: s(&c["lb_policy"]),
                keepalive: (
                    ka["keepalive_time"].as_u64().unwrap(),
                    ka["keepalive_interval"].as_u64().unwrap(),
                ),
                max_connection_s: max,
                outlier_off_panic_zero: c["outlier_detection"]["enforcing_success_rate"] == 0
                    && c["common_lb_config"]["healthy_panic_threshold"]["value"] == 0,
                upstream_tls: tls,
            },
        );
    }
    f.socket = socket_routes.map(|(pipe, routes)| (pipe, routes, socket_cluster_pipe));
    // Every tcp_proxy caps its connections at the DestinationRule's maximum.
    for l in &x.listeners {
        for chain in l["filter_chains"].as_array().unwrap() {
            let t = &chain["filters"][0]["typed_config"];
            if t["cluster"].is_string() {
                assert_eq!(
                    secs(&t["max_downstream_connection_duration"]),
                    crate::MAX_CONNECTION_DURATION_S
                );
            }
        }
    }
    f
}

/// Both renderings of `x`, reduced to facts, are equal.
pub fn check(x: &Exposure) {
    check_objects(&istio::objects(x, &istio::tests_placement()), x);
}

/// `objects`, Istio objects for `x` from any renderer (Gardener's own, for
/// the parts it renders), and the docker form's Envoy configuration of
/// `x`, reduced to facts, are equal.
pub fn check_objects(objects: &[Value], x: &Exposure) {
    let istio_facts = from_istio(objects, x);
    let envoy_facts = from_envoy(&envoy::render(x));
    assert_eq!(
        istio_facts.chains, envoy_facts.chains,
        "listeners and routes differ for {} ({:?})",
        x.seed, x.api
    );
    assert_eq!(
        istio_facts.authorities, envoy_facts.authorities,
        "authorities differ for {} ({:?})",
        x.seed, x.api
    );
    assert_eq!(
        istio_facts.clusters, envoy_facts.clusters,
        "clusters differ for {} ({:?})",
        x.seed, x.api
    );
    assert_eq!(
        (&istio_facts.connect, &istio_facts.socket),
        (&envoy_facts.connect, &envoy_facts.socket),
        "the apiserver-proxy's port or socket differ for {} ({:?})",
        x.seed,
        x.api
    );
    assert_eq!(
        istio_facts.connection_age, envoy_facts.connection_age,
        "the downstream connections' maximum duration differs for {} ({:?})",
        x.seed, x.api
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ApiExposure;

    #[test]
    fn istio_objects_and_envoy_config_agree_in_both_modes() {
        for mode in [ApiExposure::Termination, ApiExposure::Passthrough] {
            check(&envoy::tests::sample(mode));
            // A docker lab's seeds, as `up` and a migration route them.
            let mut st = crate::plan::sample_state();
            st.topology.api.exposure = mode;
            for seed in ["seed-a", "seed-b"] {
                let x = Exposure::of_docker_seed(&st, seed);
                check(&x);
                assert_eq!(
                    x.api.is_some(),
                    seed == "seed-a",
                    "the API where its servers are"
                );
            }
        }
    }

    #[test]
    fn a_deleted_api_gateway_drops_the_chain_and_socket_and_keeps_the_clusters_in_both_forms() {
        for mode in [ApiExposure::Termination, ApiExposure::Passthrough] {
            let mut x = envoy::tests::sample(mode);
            x.max_connection_duration_ms = Some(60_000);
            let before = from_envoy(&envoy::render(&x));
            x.api_gateway_deleted = true;
            check(&x);
            let after = from_envoy(&envoy::render(&x));
            assert!(
                !after.chains.keys().any(|(port, _)| *port == 443),
                "{mode:?}: {:?}",
                after.chains
            );
            assert!(after.socket.is_none() && after.connect.is_some());
            let api_clusters = |f: &Facts| {
                f.clusters
                    .keys()
                    .filter(|c| c.contains("kube-apiserver"))
                    .cloned()
                    .collect::<Vec<_>>()
            };
            assert!(!api_clusters(&after).is_empty());
            assert_eq!(api_clusters(&after), api_clusters(&before), "{mode:?}");
            // The members' routes stay.
            assert_eq!(
                after.chains.len(),
                before.chains.keys().filter(|(p, _)| *p != 443).count()
            );
        }
    }

    #[test]
    fn a_gateway_draining_in_place_changes_its_chain_and_keeps_its_routes_in_both_forms() {
        for mode in [ApiExposure::Termination, ApiExposure::Passthrough] {
            let mut x = envoy::tests::sample(mode);
            let before_xds = envoy::render(&x);
            x.api_gateway_draining = true;
            check(&x);
            let xds = envoy::render(&x);
            let after = from_envoy(&xds);
            let host = x.api.as_ref().unwrap().host.clone();
            let drain = cpmlab_model::migrate::gateway_handover::drain_host(&host);
            // The API's chain now also names the drain host: a changed
            // chain, which Envoy drains.
            let api_chain = |xds: &envoy::Xds| {
                xds.listeners
                    .iter()
                    .find(|l| l["name"] == "0.0.0.0_443")
                    .map(|l| l["filter_chains"][0]["filter_chain_match"]["server_names"].clone())
                    .unwrap()
            };
            assert_eq!(
                api_chain(&before_xds),
                serde_json::json!([host]),
                "{mode:?}"
            );
            assert_eq!(
                api_chain(&xds),
                serde_json::json!([host, drain]),
                "{mode:?}"
            );
            // Its routes as they were: the drained connections keep them.
            assert_eq!(xds.routes, before_xds.routes, "{mode:?}");
            // The apiserver-proxy's socket is gone, its CONNECT port stays.
            assert!(
                after.socket.is_none() && after.connect.is_some(),
                "{mode:?}"
            );
        }
    }

    #[test]
    fn forwarding_sends_every_api_route_to_the_destinations_gateway_in_both_forms() {
        let to = crate::forward_destination("seed-b", "local.cpmlab.test");
        let forward = to.cluster();
        assert_eq!(forward, "outbound|443||ingress.seed-b.local.cpmlab.test");
        for mode in [ApiExposure::Termination, ApiExposure::Passthrough] {
            let mut x = envoy::tests::sample(mode);
            let before = from_envoy(&envoy::render(&x));
            x.api_forward = Some(to.clone());
            check(&x);
            let after = from_envoy(&envoy::render(&x));
            let host = x.api.as_ref().unwrap().host.clone();
            // The API's chain, every route of it, and the apiserver-proxy's
            // socket go to the destination's gateway.
            match &after.chains[&(443, host.clone())] {
                Chain::Passthrough { cluster } => {
                    assert_eq!(mode, ApiExposure::Passthrough);
                    assert_eq!(cluster, &forward);
                }
                Chain::Terminate { routes, .. } => {
                    assert_eq!(mode, ApiExposure::Termination);
                    assert_eq!(routes.len(), 3);
                    assert!(routes.iter().all(|(_, c)| *c == forward), "{routes:?}");
                    let (_, socket, _) = after.socket.as_ref().unwrap();
                    assert!(socket.iter().all(|c| *c == forward), "{socket:?}");
                }
            }
            // By DNS; TLS originated with the API's name where it ends here.
            let c = &after.clusters[&forward];
            assert_eq!(c.discovery, "STRICT_DNS");
            match mode {
                ApiExposure::Termination => {
                    assert_eq!(c.upstream_tls, Some((host.clone(), false, vec![])))
                }
                ApiExposure::Passthrough => {
                    assert!(c.upstream_tls.is_none() && c.outlier_off_panic_zero)
                }
            }
            // The API's own clusters stay (its Services do), unrouted; the
            // etcd members' chains are untouched.
            for (name, facts) in &before.clusters {
                assert_eq!(after.clusters.get(name), Some(facts), "{mode:?} {name}");
            }
            let others = |f: &Facts| {
                f.chains
                    .iter()
                    .filter(|((p, _), _)| *p != 443)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(others(&before), others(&after), "{mode:?}");
        }
    }

    #[test]
    fn a_difference_is_caught() {
        // The check is not blind: a renderer that sent the API elsewhere, or
        // dropped a member's route, fails it.
        let x = envoy::tests::sample(ApiExposure::Termination);
        let objects = istio::objects(&x, &istio::tests_placement());
        let mut xds = envoy::render(&x);
        xds.routes[0]["virtual_hosts"][0]["routes"][2]["route"]["cluster"] =
            "outbound|443||elsewhere".into();
        assert_ne!(from_istio(&objects, &x).chains, from_envoy(&xds).chains);
        let mut xds = envoy::render(&x);
        xds.listeners.remove(1);
        assert_ne!(from_istio(&objects, &x).chains, from_envoy(&xds).chains);
        let mut xds = envoy::render(&x);
        xds.clusters[0]["upstream_connection_options"]["tcp_keepalive"]["keepalive_time"] =
            30.into();
        assert_ne!(from_istio(&objects, &x).clusters, from_envoy(&xds).clusters);
        // Or routed the apiserver-proxy's socket elsewhere.
        let mut xds = envoy::render(&x);
        let l = xds
            .listeners
            .iter_mut()
            .find(|l| l["address"]["pipe"].is_object())
            .unwrap();
        l["filter_chains"][0]["filters"][0]["typed_config"]["route_config"]["virtual_hosts"][0]
            ["routes"][2]["route"]["cluster"] = "outbound|443||elsewhere".into();
        assert_ne!(from_istio(&objects, &x).socket, from_envoy(&xds).socket);
        assert!(from_envoy(&xds).socket.is_some() && from_envoy(&xds).connect.is_some());
    }

    #[test]
    fn the_connections_maximum_age_agrees_and_a_missing_one_is_caught() {
        let mut x = envoy::tests::sample(ApiExposure::Termination);
        x.max_connection_duration_ms = Some(60_000);
        check(&x);
        let facts = from_envoy(&envoy::render(&x));
        assert_eq!(facts.connection_age, ("60s".into(), "60s".into()));
        // Without the EnvoyFilter's patch the kind form would not age the
        // API's connections.
        let mut objects = istio::objects(&x, &istio::tests_placement());
        for o in objects.iter_mut().filter(|o| o["kind"] == "EnvoyFilter") {
            if let Some(patches) = o["spec"]["configPatches"].as_array_mut() {
                patches.retain(|p| {
                    p["patch"]["value"]["typed_config"]["common_http_protocol_options"].is_null()
                        || p["patch"]["operation"] == "ADD"
                });
            }
        }
        assert_ne!(
            from_istio(&objects, &x).connection_age,
            facts.connection_age
        );
        // Passthrough has no connection manager to age.
        let mut p = envoy::tests::sample(ApiExposure::Passthrough);
        p.max_connection_duration_ms = Some(60_000);
        check(&p);
        assert_eq!(
            from_envoy(&envoy::render(&p)).connection_age,
            (String::new(), String::new())
        );
    }
}
