//! The Kubernetes objects of one seed in the kind form.
//!
//! Per etcd member: a Service of its own (the ingress routes to it, not to
//! etcd-druid's Services) and a StatefulSet of one replica (the source
//! seed's run at `up`, the destination's are made with zero replicas and
//! scaled up by the migration); with etcd-druid instead the seed's `Etcd`
//! (`druid`), each member's Service selecting druid's pod. The Istio
//! objects of the seed's ingress gateway — the shoot API in the topology's
//! exposure mode, each member's peer and client endpoint and etcd's client
//! endpoint by SNI with TLS passthrough — are rendered from the one
//! definition the docker form's Envoy is rendered from
//! (`crate::exposure`). A NetworkPolicy admits the ingress gateway to etcd.
//! kube-apiserver runs as a Deployment with the docker form's command line
//! (the flags Gardener sets), talking to its own seed's etcd only, behind
//! Gardener's three Services (plain, `-mtls`, `-connection-upgrade`); the
//! Deployment is rendered with the Secrets (its probes carry the
//! health-check token).

use serde_json::{json, Value};

pub use super::members::{client_host, members, zone_spread, KindMember};
use super::{
    namespace, KindSettings, PeerExposure, API_PORT, CLIENT_PORT, ETCD_IMAGE_3_4, ETCD_IMAGE_3_5,
    INGRESS_NAMESPACE, INGRESS_SELECTOR, KUBE_APISERVER_IMAGE, PEER_PORT,
};
use crate::etcd::{ClusterState, DATA_DIR, PKI_DIR};
use crate::state::MemberState;
use crate::topology::{EtcdVersion, Topology};

/// One object, and the file it is rendered to.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub file: String,
    pub object: Value,
    /// Where it goes in the apply order (its file's prefix).
    pub order: u8,
}

/// The order below which a seed's objects need nothing the ingress brings
/// (Istio's CRDs, MetalLB's addresses): the namespace and etcd's own
/// objects.
const BEFORE_INGRESS: u8 = 20;

impl Manifest {
    fn new(order: u8, object: Value) -> Manifest {
        let kind = object["kind"].as_str().unwrap_or("object").to_lowercase();
        let name = object["metadata"]["name"].as_str().unwrap_or("unnamed");
        Manifest {
            file: format!("{order:02}-{kind}-{name}.yaml"),
            object,
            order,
        }
    }
}

/// The files of `seed`'s etcd objects and its namespace (etcd's Services,
/// its StatefulSets or `Etcd`, its NetworkPolicy): `up` applies them
/// before MetalLB and Istio, so that etcd bootstraps while those install.
pub fn etcd_files(lab: &str, t: &Topology, s: &KindSettings, seed: &str) -> Vec<String> {
    seed_manifests(lab, t, s, seed)
        .into_iter()
        .filter(|m| m.order < BEFORE_INGRESS)
        .map(|m| m.file)
        .collect()
}

/// An object's `Kind/name`, as tests list them.
#[cfg(test)]
pub(crate) fn kind_and_name(o: &Value) -> String {
    format!(
        "{}/{}",
        o["kind"].as_str().unwrap_or_default(),
        o["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Labels every object of the lab carries.
pub(crate) fn labels(lab: &str, seed: &str, role: &str) -> Value {
    json!({
        crate::labels::LABEL_LAB: lab,
        crate::labels::LABEL_SEED: seed,
        crate::labels::LABEL_ROLE: role,
    })
}

fn meta(name: &str, ns: &str, labels: Value) -> Value {
    json!({"name": name, "namespace": ns, "labels": labels})
}

/// Every object of `seed` (at `index` in the topology) in lab `lab`.
pub fn seed_manifests(lab: &str, t: &Topology, s: &KindSettings, seed: &str) -> Vec<Manifest> {
    let ns = namespace(&t.shoot.name);
    let source = t.source().name == seed;
    let mine = members(t, s, seed);
    let mut out = vec![Manifest::new(
        0,
        json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": labels(lab, seed, "namespace")},
        }),
    )];
    // The source's members form the cluster at `up`; the destination's are
    // made with zero replicas, their initial cluster written by the
    // migration when each joins.
    let cluster: Vec<(String, String)> = members(t, s, &t.source().name)
        .iter()
        .map(|m| (m.name.clone(), m.peer_url()))
        .collect();
    for m in &mine {
        out.push(Manifest::new(10, member_service(lab, &ns, t, s, m)));
        if !s.with_etcd_druid {
            out.push(Manifest::new(
                11,
                member_statefulset(lab, &ns, t, m, &cluster, source),
            ));
        }
    }
    out.push(Manifest::new(12, network_policy(lab, &ns, t, s, seed)));
    if s.with_etcd_druid {
        // druid makes the `Etcd`'s client Service (and its peer Service)
        // itself.
        out.push(Manifest::new(11, super::druid::etcd_at_up(lab, t, s, seed)));
    } else {
        out.push(Manifest::new(10, client_service(lab, &ns, seed)));
    }
    for svc in [
        "kube-apiserver",
        "kube-apiserver-mtls",
        "kube-apiserver-connection-upgrade",
    ] {
        out.push(Manifest::new(20, apiserver_service(lab, &ns, seed, svc)));
    }
    // sni.go's objects are Gardener's own rendering, applied by `up`'s
    // step "the shoot API's exposure" (`apiserver_exposure`).
    let x = exposure(t, s, seed);
    for o in crate::exposure::istio::objects(&x, &placement(lab, seed))
        .into_iter()
        .filter(|o| !rendered_by_gardener(&x, o))
    {
        let order = match o["kind"].as_str() {
            Some("Gateway") => 30,
            Some("VirtualService") => 31,
            Some("DestinationRule") | Some("ServiceEntry") => 32,
            _ => 33,
        };
        out.push(Manifest::new(order, o));
    }
    out.sort_by(|a, b| a.file.cmp(&b.file));
    out
}

/// Whether `o`, one of the lab's own Istio objects for `x`, is one sni.go
/// renders (and `cpmlab-gardener-render` applies in its stead:
/// `apiserver_exposure`).
pub fn rendered_by_gardener(x: &crate::exposure::Exposure, o: &Value) -> bool {
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    match o["kind"].as_str() {
        Some("Gateway") | Some("VirtualService") => name == crate::exposure::istio::API_GATEWAY,
        Some("DestinationRule") => x.api.as_ref().is_some_and(|api| {
            x.api_destinations()
                .into_iter()
                .any(|(d, _)| api.service_of(d) == name)
        }),
        Some("EnvoyFilter") => {
            name == format!("{}-istio-tls-termination", x.namespace)
                || name == format!("{}-apiserver-proxy", x.namespace)
        }
        _ => false,
    }
}

/// Where the kind form's Istio objects of `seed` go: its ingress gateway's
/// namespace and selector, the lab's labels.
pub fn placement(lab: &str, seed: &str) -> crate::exposure::istio::Placement {
    crate::exposure::istio::Placement {
        labels: labels(lab, seed, "gateway"),
        ingress_namespace: INGRESS_NAMESPACE.into(),
        selector: (INGRESS_SELECTOR.0.into(), INGRESS_SELECTOR.1.into()),
        api_listener_port: ingress_target_port(API_PORT),
    }
}

/// What the seed's ingress gateway exposes in the kind form: the shoot API
/// in the topology's mode, each member's peer and client endpoint by its
/// SNI name to the member's own Service, and etcd's client Service by its
/// own name (the same definition the docker form's Envoy is rendered from).
pub fn exposure(t: &Topology, s: &KindSettings, seed: &str) -> crate::exposure::Exposure {
    use crate::exposure::{member_routes, service_host, Destination, Resolution, TlsRoute};
    let ns = namespace(&t.shoot.name);
    let mut tls: Vec<TlsRoute> = members(t, s, seed)
        .iter()
        .flat_map(|m| {
            member_routes(
                &m.name,
                &m.host,
                m.peer_port,
                &service_host(&m.service(), &ns),
                Resolution::Endpoints,
            )
        })
        .collect();
    tls.push(TlsRoute {
        owner: "etcd-main-client".into(),
        kind: "client".into(),
        host: client_host(t, seed),
        port: CLIENT_PORT,
        destination: Destination {
            host: service_host(
                &super::druid::client_service(&super::druid::etcd_name(t, s, seed)),
                &ns,
            ),
            port: CLIENT_PORT,
            resolution: Resolution::Endpoints,
        },
    });
    crate::exposure::Exposure {
        seed: seed.to_string(),
        namespace: ns,
        api: Some(crate::exposure::api_route(t)),
        tls,
        max_connection_duration_ms: crate::exposure::max_connection_duration_ms(t),
        api_gateway_deleted: false,
        api_gateway_draining: false,
        api_forward: None,
    }
}

/// A member's own Service: its StatefulSet's pod, or with etcd-druid
/// druid's pod of that ordinal.
fn member_service(lab: &str, ns: &str, t: &Topology, s: &KindSettings, m: &KindMember) -> Value {
    let selector = if s.with_etcd_druid {
        super::druid::member_selector(&super::druid::etcd_name(t, s, &m.seed), m.index)
    } else {
        json!({"statefulset.kubernetes.io/pod-name": m.pod()})
    };
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": meta(&m.service(), ns, labels(lab, &m.seed, "etcd")),
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            // Peers connect before the member is ready (it is not, until it
            // has joined): the Service must route to it anyway.
            "publishNotReadyAddresses": true,
            "ports": [
                {"name": "client", "port": CLIENT_PORT, "targetPort": CLIENT_PORT, "protocol": "TCP"},
                {"name": "peer", "port": PEER_PORT, "targetPort": PEER_PORT, "protocol": "TCP"},
            ],
        },
    })
}

fn client_service(lab: &str, ns: &str, seed: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": meta("etcd-main-client", ns, labels(lab, seed, "etcd")),
        "spec": {
            "type": "ClusterIP",
            "selector": {"app.kubernetes.io/part-of": "etcd-main", "cpmlab.seed": seed},
            "ports": [{"name": "client", "port": CLIENT_PORT, "targetPort": CLIENT_PORT, "protocol": "TCP"}],
        },
    })
}

/// The etcd image of the topology's version.
pub fn etcd_image(t: &Topology) -> &'static str {
    match t.etcd.etcd_version() {
        Ok(EtcdVersion::V3_5) => ETCD_IMAGE_3_5,
        _ => ETCD_IMAGE_3_4,
    }
}

/// The member's etcd command line: the docker form's flags exactly.
pub fn member_command(
    t: &Topology,
    m: &KindMember,
    cluster: &[(String, String)],
    state: ClusterState,
) -> Vec<String> {
    let as_state = MemberState {
        name: m.name.clone(),
        seed: m.seed.clone(),
        container: m.pod(),
        volume: String::new(),
        ip: std::net::Ipv4Addr::UNSPECIFIED,
        host: m.host.clone(),
        peer_port: m.peer_port,
    };
    let version = t.etcd.etcd_version().unwrap_or_default();
    let argv = crate::etcd::member_command(
        &as_state,
        cluster,
        state,
        &format!("{}-etcd", t.shoot.name),
        version,
        &t.etcd,
    );
    // The image's etcd, on its PATH.
    std::iter::once("etcd".to_string())
        .chain(argv.into_iter().skip(1))
        .collect()
}

fn member_statefulset(
    lab: &str,
    ns: &str,
    t: &Topology,
    m: &KindMember,
    cluster: &[(String, String)],
    source: bool,
) -> Value {
    let pod_labels = json!({
        "app.kubernetes.io/part-of": "etcd-main",
        "app.kubernetes.io/name": m.name,
        "cpmlab.seed": m.seed,
        crate::labels::LABEL_LAB: lab,
        crate::labels::LABEL_ROLE: "etcd",
    });
    let state = if source {
        ClusterState::New
    } else {
        ClusterState::Existing
    };
    // A joiner's initial cluster is only known when it joins (whoever is in
    // the cluster then): etcd reads it from the environment, out of the
    // ConfigMap the migration writes before it scales the StatefulSet up.
    let command: Vec<String> = member_command(t, m, cluster, state)
        .into_iter()
        .filter(|a| {
            source
                || !(a.starts_with("--initial-cluster=")
                    || a.starts_with("--initial-cluster-state="))
        })
        .collect();
    let mut sts = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": meta(&m.name, ns, labels(lab, &m.seed, "etcd")),
        "spec": {
            "replicas": if source { 1 } else { 0 },
            "serviceName": m.service(),
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app.kubernetes.io/name": m.name}},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "terminationGracePeriodSeconds": 30,
                    // A seed's members over its zones (HA: three nodes,
                    // three zones, one member each).
                    "topologySpreadConstraints": zone_spread(json!({
                        "app.kubernetes.io/part-of": "etcd-main", "cpmlab.seed": m.seed,
                    })),
                    "containers": [{
                        "name": "etcd",
                        "image": etcd_image(t),
                        "command": command,
                        "ports": [
                            {"name": "client", "containerPort": CLIENT_PORT},
                            {"name": "peer", "containerPort": PEER_PORT},
                            {"name": "metrics", "containerPort": 2381},
                        ],
                        "readinessProbe": {
                            "httpGet": {"path": "/health", "port": 2381},
                            "periodSeconds": 5,
                        },
                        "volumeMounts": [
                            {"name": "data", "mountPath": DATA_DIR},
                            {"name": "tls", "mountPath": PKI_DIR, "readOnly": true},
                        ],
                    }],
                    "volumes": [{
                        "name": "tls",
                        "secret": {"secretName": format!("{}-tls", m.name), "defaultMode": 0o400},
                    }],
                },
            },
            "volumeClaimTemplates": [{
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "10Gi"}},
                },
            }],
        },
    });
    if !source {
        sts["spec"]["template"]["spec"]["containers"][0]["envFrom"] =
            json!([{"configMapRef": {"name": join_config_map_name(&m.name)}}]);
    }
    sts
}

/// The ConfigMap a joining member's StatefulSet reads its initial cluster from.
pub fn join_config_map_name(member: &str) -> String {
    format!("{member}-join")
}

/// What a joiner needs to know when it joins: the cluster as it is then
/// (every member's name and peer URL, the joiner's own included), in
/// etcd's environment variables.
pub fn join_config_map(
    lab: &str,
    ns: &str,
    seed: &str,
    member: &str,
    cluster: &[(String, String)],
) -> Value {
    let initial: Vec<String> = cluster.iter().map(|(n, u)| format!("{n}={u}")).collect();
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": meta(&join_config_map_name(member), ns, labels(lab, seed, "etcd")),
        "data": {
            "ETCD_INITIAL_CLUSTER": initial.join(","),
            "ETCD_INITIAL_CLUSTER_STATE": "existing",
        },
    })
}

fn network_policy(lab: &str, ns: &str, t: &Topology, s: &KindSettings, seed: &str) -> Value {
    // The seed's etcd pods, the lab's or druid's (druid labels them with
    // the `Etcd`'s name, as the lab labels its own `etcd-main`).
    let etcd = super::druid::etcd_name(t, s, seed);
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": meta("allow-ingressgateway-to-etcd", ns, labels(lab, seed, "etcd")),
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/part-of": etcd}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    // Peers and clients of other seeds arrive through the
                    // ingress gateway (from its address: SNAT).
                    "from": [{
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": INGRESS_NAMESPACE}},
                        "podSelector": {"matchLabels": {INGRESS_SELECTOR.0: INGRESS_SELECTOR.1}},
                    }],
                    "ports": [
                        {"protocol": "TCP", "port": CLIENT_PORT},
                        {"protocol": "TCP", "port": PEER_PORT},
                    ],
                },
                {
                    "from": [
                        {"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": etcd}}},
                        {"podSelector": {"matchLabels": {"app": "kubernetes", "role": "apiserver"}}},
                    ],
                    "ports": [
                        {"protocol": "TCP", "port": CLIENT_PORT},
                        {"protocol": "TCP", "port": PEER_PORT},
                    ],
                },
                {
                    // The lab's observer scrapes /metrics.
                    "ports": [{"protocol": "TCP", "port": 2381}],
                },
            ],
        },
    })
}

/// kube-apiserver's command line in the kind form: the docker form's
/// exactly (`apiserver::launch::kube_apiserver_command`: Gardener's flags,
/// the topology's shutdown settings, one `--service-cluster-ip-range` for
/// the shoot in every seed), its files from the Secret `kube-apiserver`
/// mounted where the docker form puts them, its address the pod's, and
/// its own seed's etcd through the seed's client Service (`etcd-main-client`,
/// or druid's of the seed's `Etcd`).
pub fn apiserver_command(t: &Topology, s: &KindSettings, seed: &str) -> Vec<String> {
    let etcd = super::druid::client_service(&super::druid::etcd_name(t, s, seed));
    let servers = [format!("https://{etcd}:{CLIENT_PORT}")];
    let api_name = t.shoot.api_name();
    let r = crate::apiserver::launch::Replica {
        name: "kube-apiserver",
        seed,
        ip: std::net::Ipv4Addr::UNSPECIFIED,
        api_name: &api_name,
        etcd_servers: &servers,
        shutdown_delay: &t.api.shutdown_delay,
        watch_termination_grace: &t.api.watch_termination_grace,
        send_retry_after: t.api.shutdown_send_retry_after,
    };
    crate::apiserver::launch::kube_apiserver_command(&r)
        .into_iter()
        .map(|a| {
            if a.starts_with("--advertise-address=") {
                // Kubernetes expands $(POD_IP) from the container's env.
                "--advertise-address=$(POD_IP)".to_string()
            } else {
                a
            }
        })
        .collect()
}

/// The name of the Secret holding kube-apiserver's files.
pub const APISERVER_SECRET: &str = "kube-apiserver";

/// kube-apiserver's liveness probe as Gardener sets it
/// (`pkg/component/kubernetes/apiserver/deployment.go`): every 10 s, 15 s
/// timeout, 3 failures, after 15 s. Its readiness probe has the same
/// timings after 10 s, and is the topology's `api.readiness_probe`.
pub const LIVENESS: crate::topology::ProbeTiming = crate::topology::ProbeTiming {
    period_ms: 10_000,
    timeout_ms: 15_000,
    failure_threshold: 3,
    success_threshold: 1,
    initial_delay_ms: 15_000,
};

/// One of kube-apiserver's probes as Gardener sets them
/// (`pkg/component/kubernetes/apiserver/deployment.go`): HTTPS on its
/// port with a bearer token (anonymous requests are refused:
/// `--anonymous-auth=false`), with `timing`.
pub fn apiserver_probe(
    path: &str,
    health_token: &str,
    timing: &crate::topology::ProbeTiming,
) -> Value {
    json!({
        "httpGet": {
            "path": path, "port": API_PORT, "scheme": "HTTPS",
            "httpHeaders": [{"name": "Authorization", "value": format!("Bearer {health_token}")}],
        },
        "initialDelaySeconds": timing.initial_delay_ms / 1000,
        "periodSeconds": timing.period_ms / 1000,
        "timeoutSeconds": timing.timeout_ms / 1000,
        "successThreshold": timing.success_threshold,
        "failureThreshold": timing.failure_threshold,
    })
}

/// The seed's kube-apiserver Deployment. It carries the health-check
/// token in its probes (as Gardener's does), so it is rendered with the
/// Secrets, owner-only.
pub fn apiserver_deployment(
    lab: &str,
    ns: &str,
    t: &Topology,
    s: &KindSettings,
    seed: &str,
    health_token: &str,
) -> Value {
    let grace =
        crate::link::profile::parse_duration("api.termination_grace", &t.api.termination_grace)
            .map(|d| d.as_secs())
            .unwrap_or(30);
    let source = t.source().name == seed;
    let command = apiserver_command(t, s, seed);
    // Readiness: the topology's timings (Gardener's by default);
    // liveness: Gardener's.
    let readiness = t
        .api
        .readiness_probe
        .timing("api.readiness_probe")
        .unwrap_or_else(|_| {
            crate::topology::ProbeSpec::default()
                .timing("api.readiness_probe")
                .expect("the defaults are valid")
        });
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": meta("kube-apiserver", ns, labels(lab, seed, "apiserver")),
        "spec": {
            // The destination's replicas start at the migration's
            // StartDestinationAPIServer step.
            "replicas": if source { t.api.replicas } else { 0 },
            "selector": {"matchLabels": {"app": "kubernetes", "role": "apiserver"}},
            "template": {
                "metadata": {"labels": {
                    "app": "kubernetes", "role": "apiserver", "cpmlab.seed": seed,
                    crate::labels::LABEL_LAB: lab,
                    crate::labels::LABEL_ROLE: "apiserver",
                }},
                "spec": {
                    "terminationGracePeriodSeconds": grace,
                    "topologySpreadConstraints": zone_spread(json!({"app": "kubernetes", "role": "apiserver"})),
                    "containers": [{
                        "name": "kube-apiserver",
                        "image": KUBE_APISERVER_IMAGE,
                        "command": [command[0].clone()],
                        "args": command[1..].to_vec(),
                        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                        "ports": [{"name": "https", "containerPort": API_PORT}],
                        "livenessProbe": apiserver_probe("/livez", health_token, &LIVENESS),
                        "readinessProbe": apiserver_probe("/readyz", health_token, &readiness),
                        "volumeMounts": [{"name": "kube-apiserver", "mountPath": crate::apiserver::launch::DIR, "readOnly": true}],
                    }],
                    "volumes": [{"name": "kube-apiserver", "secret": {"secretName": APISERVER_SECRET, "defaultMode": 0o400}}],
                },
            },
        },
    })
}

/// One of Gardener's kube-apiserver Services (the same pods behind each:
/// the gateway's destinations when TLS ends there, sni.go).
fn apiserver_service(lab: &str, ns: &str, seed: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": meta(name, ns, labels(lab, seed, "apiserver")),
        "spec": {
            "type": "ClusterIP",
            "selector": {"app": "kubernetes", "role": "apiserver"},
            "ports": [{"name": "https", "port": API_PORT, "targetPort": API_PORT, "protocol": "TCP"}],
        },
    })
}

/// The ingress gateway's Service ports: the API, etcd's client port, and
/// each member's peer port (one shared port in `address` exposure).
pub fn ingress_ports(t: &Topology, s: &KindSettings, seed: &str) -> Vec<(String, u16)> {
    let mine = members(t, s, seed);
    let mut v = vec![
        ("tls-api".to_string(), API_PORT),
        ("tls-etcd-client".to_string(), CLIENT_PORT),
        // Shoot nodes' apiserver-proxies tunnel here (the istio-ingress
        // chart's service.yaml).
        (
            "http-proxy".to_string(),
            cpmlab_exposure::http_proxy::HTTP_PROXY_PORT,
        ),
    ];
    match s.exposure {
        PeerExposure::Port => {
            for m in &mine {
                v.push((format!("tls-{}-peer", m.name), m.peer_port));
            }
        }
        PeerExposure::Address => v.push(("tls-etcd-peer".into(), PEER_PORT)),
    }
    v
}

/// Where the ingress gateway's pod listens for a Service port: Istio's
/// gateway runs unprivileged, and istiod skips a Gateway server whose
/// Service port targets a port below 1024 on such a pod
/// (`pilot/pkg/networking/core/gateway.go`), so the API's 443 targets 9443,
/// the port Gardener's istio-ingressgateway listens on for it.
pub fn ingress_target_port(port: u16) -> u16 {
    if port < 1024 {
        GATEWAY_UNPRIVILEGED_API_PORT
    } else {
        port
    }
}

/// Gardener's ingress gateway's port for the shoot API (its Service maps
/// 443 to it).
pub const GATEWAY_UNPRIVILEGED_API_PORT: u16 = 9443;
