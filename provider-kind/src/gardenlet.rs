//! A kind seed's gardenlet as Gardener's gardenlet chart installs one
//! (`charts/gardener/gardenlet/templates/` of gardener v1.150.0): a
//! Deployment `gardenlet` in the seed's namespace `garden`, with the
//! ServiceAccount `gardenlet` bound to the ClusterRole
//! `gardener.cloud:system:gardenlet`, and the garden's kubeconfig in a
//! Secret mounted at `/etc/gardenlet/kubeconfig-garden`. It acts on its
//! seed through the seed's API with its ServiceAccount's token (the
//! chart's default, no seed kubeconfig) and reaches the garden through the
//! wan router, as a pod: masqueraded to its node, which routes the
//! garden's network through the router.
//!
//! Where it differs from the chart, and why:
//! - one replica, replaced by `Recreate`, where the chart runs two with
//!   leader election (`replicaCount: 2`): the lab's gardenlet elects no
//!   leader, and two would run every step twice;
//! - the ClusterRole's rules are the chart's verbs on what the lab's steps
//!   touch, with the chart's verbs on the seed's Istio objects, which
//!   Gardener's gardenlet writes itself (the Gateway, VirtualService and
//!   DestinationRules) or hands to gardener-resource-manager in the
//!   ManagedResource `kube-apiserver-sni` (its EnvoyFilters; the lab keeps
//!   the verbs for the `forward` handover's own objects);
//! - it runs as root, not as the chart's 65532, and mounts from its node:
//!   the lab's cpmlab binary (the image is only Debian's userland, so a
//!   new build needs no new node image), kubectl, Gardener's renderer
//!   (`apiserver_exposure`: the handovers apply its output), the lab's state
//!   directory (the lab's cache of its members and API servers, which each
//!   gardenlet writes its seed's part of) and the engine's socket (the
//!   lab's DNS server, the stand-in for a cloud's DNS API, is a container).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{GARDENLET_DEPLOYMENT, GARDENLET_NAMESPACE};

/// The image the gardenlet's pod runs: Debian's userland of the kind
/// nodes (`scripts/build-kind-images` preloads it), the binary mounted.
pub const IMAGE: &str = "cpmlab/gardenlet:cpmlab";
/// The chart's ServiceAccount (`serviceAccountName: gardenlet`).
pub const SERVICE_ACCOUNT: &str = "gardenlet";
/// The chart's ClusterRole and ClusterRoleBinding.
pub const CLUSTER_ROLE: &str = "gardener.cloud:system:gardenlet";
/// The chart's garden kubeconfig Secret and where its pod mounts it.
pub const GARDEN_KUBECONFIG_SECRET: &str = "gardenlet-kubeconfig-garden";
pub const GARDEN_KUBECONFIG_DIR: &str = "/etc/gardenlet/kubeconfig-garden";
/// The kubeconfig naming the seed's context (`kind-<cluster>`, as the
/// lab's steps address it) with the pod's own ServiceAccount token.
pub const SEED_KUBECONFIG_MAP: &str = "gardenlet-kubeconfig-seed";
pub const SEED_KUBECONFIG_DIR: &str = "/etc/gardenlet/kubeconfig-seed";
/// Where the seed's agent node holds the host's lab state root and the
/// engine's socket (the kind config's `extraMounts`).
pub const NODE_STATE: &str = "/cpmlab/state";
pub const NODE_ENGINE_SOCKET: &str = "/cpmlab/engine.sock";
/// Where kind's node image has kubectl.
pub const NODE_KUBECTL: &str = "/usr/bin/kubectl";
/// Where `up` puts Gardener's renderer (`apiserver_exposure`) in the node,
/// beside the agent: the handovers run it in the gardenlet's pod.
pub const NODE_RENDERER: &str = "/usr/local/bin/cpmlab-gardener-render";

/// What of the host the gardenlet's node mounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostMounts {
    /// The lab's state root on the host (canonical).
    pub state_root: PathBuf,
    /// The engine's socket on the host.
    pub engine_socket: String,
}

/// The agent node's `extraMounts` in kind's cluster config.
pub fn extra_mounts(h: &HostMounts) -> Value {
    json!([
        {"hostPath": h.state_root.display().to_string(), "containerPath": NODE_STATE},
        {"hostPath": h.engine_socket, "containerPath": NODE_ENGINE_SOCKET},
    ])
}

/// The verbs the chart's ClusterRole grants on what it manages.
const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "watch",
    "patch",
    "update",
];

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
}

/// The ClusterRole's rules: the chart's verbs on what the lab's gardenlet
/// steps read and change in their seed.
pub fn rules() -> Vec<Value> {
    vec![
        rule(
            "",
            &[
                "pods",
                "configmaps",
                "namespaces",
                "secrets",
                "serviceaccounts",
                "services",
                "endpoints",
                "persistentvolumeclaims",
                "events",
            ],
            &VERBS,
        ),
        rule("", &["pods/log", "pods/proxy", "services/proxy"], &["get"]),
        rule("", &["pods/exec"], &["create"]),
        rule("", &["nodes"], &["get", "list", "watch"]),
        rule(
            "apps",
            &[
                "deployments",
                "deployments/scale",
                "statefulsets",
                "statefulsets/scale",
                "replicasets",
            ],
            &VERBS,
        ),
        rule(
            "druid.gardener.cloud",
            &[
                "etcds",
                "etcds/status",
                "etcdcopybackupstasks",
                "etcdopstasks",
            ],
            &VERBS,
        ),
        rule(
            "networking.istio.io",
            &[
                "gateways",
                "virtualservices",
                "destinationrules",
                "envoyfilters",
                "serviceentries",
            ],
            &VERBS,
        ),
        // The chart's: gardenlet hands objects to gardener-resource-manager
        // as ManagedResources (the shoot API's EnvoyFilters).
        rule("resources.gardener.cloud", &["managedresources"], &VERBS),
        rule("coordination.k8s.io", &["leases"], &VERBS),
        rule("policy", &["poddisruptionbudgets"], &VERBS),
        rule(
            "discovery.k8s.io",
            &["endpointslices"],
            &["get", "list", "watch"],
        ),
    ]
}

/// The kubeconfig of the seed's context for a pod: the API's in-cluster
/// address, the ServiceAccount's CA and token as kubelet mounts them.
pub fn seed_kubeconfig(context: &str) -> String {
    let sa = "/var/run/secrets/kubernetes.io/serviceaccount";
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {context}\n  cluster:\n    server: https://kubernetes.default.svc\n    certificate-authority: {sa}/ca.crt\n\
users:\n- name: gardenlet\n  user:\n    tokenFile: {sa}/token\n\
contexts:\n- name: {context}\n  context:\n    cluster: {context}\n    user: gardenlet\ncurrent-context: {context}\n"
    )
}

/// What the gardenlet of one kind seed is made of.
pub struct Inputs<'a> {
    pub lab: &'a str,
    pub seed: &'a str,
    /// The seed's kubectl context (`kind-<cluster>`).
    pub context: &'a str,
    /// The node it runs on (the one the kind config mounts the host into).
    pub node: &'a str,
    /// The lab's state root as the host knows it: the pod mounts it at the
    /// same path, as every path in the lab's state is under it.
    pub state_root: &'a Path,
    /// The garden's kubeconfig of this seed's gardenlet.
    pub garden_kubeconfig: &'a str,
    /// `RUST_LOG` for it.
    pub log: &'a str,
}

/// Every object of one seed's gardenlet, in the order they are applied.
pub fn objects(i: &Inputs) -> Vec<Value> {
    let labels = json!({
        crate::labels::LABEL_LAB: i.lab,
        crate::labels::LABEL_SEED: i.seed,
        crate::labels::LABEL_ROLE: "gardenlet",
        "app": "gardener",
        "role": "gardenlet",
    });
    let ns = GARDENLET_NAMESPACE;
    let meta = |name: &str| json!({"name": name, "namespace": ns, "labels": labels});
    let root = i.state_root.display().to_string();
    let b64 = |s: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    let host = |name: &str, path: &str, kind: &str| json!({"name": name, "hostPath": {"path": path, "type": kind}});
    let mount =
        |name: &str, at: &str, ro: bool| json!({"name": name, "mountPath": at, "readOnly": ro});
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": ns, "labels": labels}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(SERVICE_ACCOUNT)}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": CLUSTER_ROLE, "labels": labels},
               "rules": rules()}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": CLUSTER_ROLE, "labels": labels},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
               "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": ns}]}),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": meta(GARDEN_KUBECONFIG_SECRET),
               "data": {"kubeconfig": b64(i.garden_kubeconfig)}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": meta(SEED_KUBECONFIG_MAP),
               "data": {"kubeconfig": seed_kubeconfig(i.context)}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": meta(GARDENLET_DEPLOYMENT),
            "spec": {
                "replicas": 1,
                "revisionHistoryLimit": 2,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": {"app": "gardener", "role": "gardenlet"}},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": SERVICE_ACCOUNT,
                        "nodeSelector": {"kubernetes.io/hostname": i.node},
                        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}],
                        "terminationGracePeriodSeconds": 10,
                        "containers": [{
                            "name": "gardenlet",
                            "image": IMAGE,
                            "imagePullPolicy": "Never",
                            "command": [
                                cpmlab_provider::AGENT_BIN, "agent", "gardenlet",
                                "--name", i.lab, "--seed", i.seed, "--state-dir", root,
                            ],
                            "env": [
                                {"name": "RUST_LOG", "value": i.log},
                                {"name": "PATH", "value": "/usr/local/bin:/usr/bin:/bin"},
                                {"name": "HOME", "value": "/root"},
                                {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                                {"name": "KUBECONFIG", "value": format!("{SEED_KUBECONFIG_DIR}/kubeconfig")},
                                {"name": "CPMLAB_GARDEN_KUBECONFIG", "value": format!("{GARDEN_KUBECONFIG_DIR}/kubeconfig")},
                            ],
                            "volumeMounts": [
                                mount("cpmlab", cpmlab_provider::AGENT_BIN, true),
                                mount("kubectl", "/usr/local/bin/kubectl", true),
                                mount("renderer", NODE_RENDERER, true),
                                mount("lab-state", &root, false),
                                mount("engine", "/var/run/docker.sock", false),
                                mount("kubeconfig-garden", GARDEN_KUBECONFIG_DIR, true),
                                mount("kubeconfig-seed", SEED_KUBECONFIG_DIR, true),
                            ],
                        }],
                        "volumes": [
                            host("cpmlab", cpmlab_provider::AGENT_BIN, "File"),
                            host("kubectl", NODE_KUBECTL, "File"),
                            host("renderer", NODE_RENDERER, "File"),
                            host("lab-state", NODE_STATE, "Directory"),
                            host("engine", NODE_ENGINE_SOCKET, "Socket"),
                            {"name": "kubeconfig-garden", "secret": {"secretName": GARDEN_KUBECONFIG_SECRET}},
                            {"name": "kubeconfig-seed", "configMap": {"name": SEED_KUBECONFIG_MAP}},
                        ],
                    },
                },
            },
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made() -> Vec<Value> {
        objects(&Inputs {
            lab: "lab",
            seed: "seed-b",
            context: "kind-lab-seed-b",
            node: "lab-seed-b-control-plane",
            state_root: Path::new("/var/lib/cpmlab"),
            garden_kubeconfig: "KUBECONFIG",
            log: "info",
        })
    }

    /// As the chart installs it: in `garden`, the ServiceAccount bound to
    /// the ClusterRole, the garden's kubeconfig from the Secret; one
    /// replica on the node that mounts the host, from the preloaded image.
    #[test]
    fn the_gardenlet_is_a_deployment_with_its_service_account_in_its_seed() {
        let o = made();
        let kinds: Vec<&str> = o.iter().map(|v| v["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Secret",
                "ConfigMap",
                "Deployment"
            ]
        );
        assert_eq!(o[3]["subjects"][0]["name"], SERVICE_ACCOUNT);
        assert_eq!(o[3]["subjects"][0]["namespace"], "garden");
        let d = &o[6];
        assert_eq!(d["metadata"]["namespace"], "garden");
        assert_eq!(d["spec"]["replicas"], 1);
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], "gardenlet");
        assert_eq!(
            pod["nodeSelector"]["kubernetes.io/hostname"],
            "lab-seed-b-control-plane"
        );
        let c = &pod["containers"][0];
        assert_eq!(c["image"], IMAGE);
        assert_eq!(c["imagePullPolicy"], "Never");
        let cmd: Vec<&str> = c["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(&cmd[1..3], ["agent", "gardenlet"]);
        assert!(cmd.windows(2).any(|w| w == ["--seed", "seed-b"]));
        assert!(cmd
            .windows(2)
            .any(|w| w == ["--state-dir", "/var/lib/cpmlab"]));
        // The pod's labels are the lab's: `down` and the run's logs find it.
        assert_eq!(
            d["spec"]["template"]["metadata"]["labels"]["cpmlab.lab"],
            "lab"
        );
        let env = c["env"].to_string();
        assert!(
            env.contains("/etc/gardenlet/kubeconfig-garden/kubeconfig"),
            "{env}"
        );
        use base64::Engine as _;
        assert_eq!(
            o[4]["data"]["kubeconfig"],
            base64::engine::general_purpose::STANDARD.encode("KUBECONFIG")
        );
    }

    /// Its seed context is the pod's own ServiceAccount: no credentials of
    /// the host's.
    #[test]
    fn the_seed_is_reached_with_the_pods_own_token() {
        let k = seed_kubeconfig("kind-lab-seed-b");
        assert!(k.contains("current-context: kind-lab-seed-b"));
        assert!(k.contains("tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"));
        assert!(k.contains("server: https://kubernetes.default.svc"));
        assert!(!k.contains("client-key"));
    }

    /// What the lab's steps do in a seed is granted; nothing cluster-wide
    /// beyond reading nodes.
    #[test]
    fn the_role_grants_what_the_steps_touch() {
        let r = serde_json::to_string(&rules()).unwrap();
        for what in [
            "statefulsets/scale",
            "deployments/scale",
            "pods/exec",
            "pods/log",
            "etcds",
            "gateways",
            "envoyfilters",
            "persistentvolumeclaims",
        ] {
            assert!(r.contains(&format!("\"{what}\"")), "{what}: {r}");
        }
        assert!(!r.contains("\"*\""), "no wildcard: {r}");
    }
}
