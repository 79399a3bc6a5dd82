//! etcd-druid itself, deployed as gardenlet deploys it into a seed
//! (gardener `pkg/component/etcd/etcd/bootstrap.go`, at b312835): its
//! CustomResourceDefinitions, its ServiceAccount and ClusterRole, its
//! operator configuration, the image vector overwrite that points druid at
//! the lab's images, and its Deployment. Which objects druid makes from an
//! `Etcd` is in [`super::druid`].
//!
//! The CRDs and the ClusterRole are druid v0.38.1's own files, vendored in
//! `fixtures/upstream/etcd-druid/` (README there); the rest is rendered
//! here, each value from gardenlet's bootstrapper unless a comment says
//! why the lab departs from it.

use serde_json::{json, Value};

/// The namespace druid runs in: the seed's `garden` namespace, where
/// gardenlet deploys it (`v1beta1constants.GardenNamespace`).
pub const NAMESPACE: &str = "garden";
/// gardenlet's names for druid's objects (`bootstrap.go`: `Druid`,
/// `druidRBACName`).
pub const NAME: &str = "etcd-druid";
pub const RBAC_NAME: &str = "gardener.cloud:system:etcd-druid";
/// The lab's druid image: druid v0.38.1's `cmd` built from the Go module
/// proxy (`go/druid`), by `scripts/build-kind-images`.
pub const IMAGE: &str = "cpmlab/etcd-druid:v0.38.1";
/// The images druid puts in an etcd pod, through the image vector
/// overwrite: the lab's launcher to etcd-wrapper's contract
/// (`go/etcd/launcher`) and etcd-backup-restore v0.44.1 (`go/backuprestore`).
pub const WRAPPER_IMAGE: &str = "cpmlab/etcd-wrapper:cpmlab";
pub const BACKUP_RESTORE_IMAGE: &str = "cpmlab/etcdbrctl:v0.44.1";
/// The names in druid's image vector the overwrite replaces
/// (`internal/images/images.yaml`): with `UpgradeEtcdVersion` on, druid
/// takes the `-next` entries (`internal/utils/image.go`).
const WRAPPER_NEXT: &str = "etcd-wrapper-next";
const BACKUP_RESTORE_NEXT: &str = "etcd-backup-restore-next";

/// druid's own CRDs, v0.38.1 (fixtures/upstream/etcd-druid/README.md).
pub const CRDS: [&str; 3] = [
    include_str!("../../fixtures/upstream/etcd-druid/druid.gardener.cloud_etcds.yaml"),
    include_str!(
        "../../fixtures/upstream/etcd-druid/druid.gardener.cloud_etcdcopybackupstasks.yaml"
    ),
    include_str!("../../fixtures/upstream/etcd-druid/druid.gardener.cloud_etcdopstasks.yaml"),
];
/// druid's chart's ClusterRole, v0.38.1 (its one template expression, the
/// release namespace in `metadata`, is replaced).
const CLUSTER_ROLE: &str = include_str!("../../fixtures/upstream/etcd-druid/clusterrole.yaml");

/// How druid is configured. [`OperatorSettings::gardener`] is gardenlet's
/// configuration; the lab changes it only where a field says so.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorSettings {
    /// gardenlet: on (`LeaderElection.Enabled: true`). Off only where druid
    /// runs outside a cluster (a test against a bare API server), since
    /// controller-runtime cannot find a lease namespace there.
    pub leader_election: bool,
    /// gardenlet: 10250 (`webhookServerPort`).
    pub webhook_port: u16,
    /// gardenlet: 8080 (`metricsPort`).
    pub metrics_port: u16,
    /// gardenlet: on, with a ValidatingWebhookConfiguration and a serving
    /// certificate from its secrets manager. The lab does not deploy the
    /// webhook yet, so it is off by default here (docs/etcd-druid.md).
    pub protection_webhook: bool,
    /// gardenlet: the `ETCDController.Workers` default, 50
    /// (`pkg/apis/config/gardenlet/v1alpha1/defaults.go`).
    pub etcd_workers: u32,
    /// gardenlet passes its `etcdConfig.featureGates`; Gardener's own
    /// development setup turns `UpgradeEtcdVersion` on
    /// (`dev-setup/gardenlet/base/gardenlet.yaml`), and gardenlet sets
    /// `memberNamePrefix` only with it (`pkg/gardenlet/operation/botanist/etcd.go`).
    /// The lab needs it: its backup-restore is the `-next` one.
    pub upgrade_etcd_version: bool,
    /// gardenlet: true (`DisableEtcdServiceAccountAutomount`), because
    /// gardener-resource-manager's webhook mounts the token as a projected
    /// volume instead. The lab runs no resource manager, and
    /// backup-restore needs the token (it talks to the API server for its
    /// member leases), so druid's own automount stands in for it: false.
    pub disable_etcd_service_account_automount: bool,
}

impl OperatorSettings {
    pub fn gardener() -> OperatorSettings {
        OperatorSettings {
            leader_election: true,
            webhook_port: 10250,
            metrics_port: 8080,
            protection_webhook: false,
            etcd_workers: 50,
            upgrade_etcd_version: true,
            disable_etcd_service_account_automount: false,
        }
    }
}

/// druid's `OperatorConfiguration` (`api/config/v1alpha1/types.go`), as
/// gardenlet's `getEtcdOperatorConfig` fills it; druid defaults the rest.
pub fn operator_config(s: &OperatorSettings, webhook_cert_dir: &str) -> Value {
    json!({
        "apiVersion": "config.druid.gardener.cloud/v1alpha1",
        "kind": "OperatorConfiguration",
        "leaderElection": {"enabled": s.leader_election},
        "server": {
            "webhooks": {"port": s.webhook_port, "serverCertDir": webhook_cert_dir},
            "metrics": {"port": s.metrics_port},
        },
        "controllers": {
            "etcd": {
                "concurrentSyncs": s.etcd_workers,
                "disableEtcdServiceAccountAutomount": s.disable_etcd_service_account_automount,
                "enableEtcdSpecAutoReconcile": false,
            },
            // gardenlet's default: backup compaction off.
            "compaction": {"enabled": false, "concurrentSyncs": 3, "eventsThreshold": 1_000_000},
            "etcdCopyBackupsTask": {"enabled": true},
            "etcdOpsTask": {"concurrentSyncs": 3, "requeueInterval": "15s"},
        },
        "webhooks": {"etcdComponentProtection": {
            "enabled": s.protection_webhook,
            "exemptServiceAccounts": ["system:serviceaccount:kube-system:generic-garbage-collector"],
            "serviceAccountInfo": {"name": NAME, "namespace": NAMESPACE},
        }},
        "featureGates": {"UpgradeEtcdVersion": s.upgrade_etcd_version},
    })
}

/// The image vector overwrite (gardener's `imagevector` format, which
/// druid reads from `$IMAGEVECTOR_OVERWRITE`,
/// `internal/utils/imagevector/util.go`): druid's etcd and sidecar images
/// replaced by the lab's.
pub fn image_vector_overwrite(wrapper: &str, backup_restore: &str) -> Value {
    let entry = |name: &str, image: &str| {
        let (repository, tag) = image.rsplit_once(':').expect("image with a tag");
        json!({"name": name, "repository": repository, "tag": tag})
    };
    json!({"images": [entry(WRAPPER_NEXT, wrapper), entry(BACKUP_RESTORE_NEXT, backup_restore)]})
}

/// druid's CRDs, parsed.
pub fn crds() -> Vec<Value> {
    CRDS.iter()
        .map(|y| serde_saphyr::from_str(y).expect("druid's vendored CRD parses"))
        .collect()
}

fn labels(lab: &str, seed: &str) -> Value {
    json!({
        crate::labels::LABEL_LAB: lab,
        crate::labels::LABEL_SEED: seed,
        crate::labels::LABEL_ROLE: "etcd-druid",
        "app.kubernetes.io/name": NAME,
    })
}

/// Where the Deployment mounts its two ConfigMaps (gardenlet's
/// `druidDeploymentVolumeMountPath*`, and the data keys).
const CONFIG_DIR: &str = "/operator_config";
const CONFIG_KEY: &str = "config.yaml";
const OVERWRITE_DIR: &str = "/imagevector_overwrite";
const OVERWRITE_KEY: &str = "images_overwrite.yaml";
const WEBHOOK_CERT_DIR: &str = "/etc/webhook-server-tls";

/// Every object of druid in `seed`, each with the lab's labels: CRDs
/// first (a CRD carries them too, so `down` removes it with the cluster).
pub fn objects(lab: &str, seed: &str, s: &OperatorSettings) -> Vec<Value> {
    let l = labels(lab, seed);
    let meta = |name: &str| json!({"name": name, "namespace": NAMESPACE, "labels": l});
    let mut out: Vec<Value> = crds()
        .into_iter()
        .map(|mut c| {
            c["metadata"]["labels"] = l.clone();
            c
        })
        .collect();
    out.push(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": l}}));
    out.push(
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(NAME),
        "automountServiceAccountToken": true}),
    );
    let mut role: Value =
        serde_saphyr::from_str(&CLUSTER_ROLE.replace("{{ .Release.Namespace }}", NAMESPACE))
            .expect("druid's vendored ClusterRole parses");
    role["metadata"] = json!({"name": RBAC_NAME, "labels": l});
    out.push(role);
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": RBAC_NAME, "labels": l},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": RBAC_NAME},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
    }));
    let config = operator_config(s, WEBHOOK_CERT_DIR);
    let overwrite = image_vector_overwrite(WRAPPER_IMAGE, BACKUP_RESTORE_IMAGE);
    out.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": meta("etcd-druid-operator-config"),
        "data": {CONFIG_KEY: config.to_string()}}));
    out.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": meta("etcd-druid-imagevector-overwrite"),
        "data": {OVERWRITE_KEY: overwrite.to_string()}}));
    let mut pod_labels = l.clone();
    pod_labels["gardener.cloud/role"] = json!("etcd-druid");
    out.push(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(NAME),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME, crate::labels::LABEL_LAB: lab}},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "serviceAccountName": NAME,
                    "containers": [{
                        "name": NAME,
                        "image": IMAGE,
                        "imagePullPolicy": "Never",
                        "args": [format!("--config={CONFIG_DIR}/{CONFIG_KEY}")],
                        "env": [{"name": "IMAGEVECTOR_OVERWRITE",
                                 "value": format!("{OVERWRITE_DIR}/{OVERWRITE_KEY}")}],
                        "ports": [{"name": "metrics", "containerPort": s.metrics_port},
                                  {"name": "webhooks", "containerPort": s.webhook_port}],
                        "volumeMounts": [
                            {"name": "operator-config", "mountPath": CONFIG_DIR},
                            {"name": "imagevector-overwrite", "mountPath": OVERWRITE_DIR},
                        ],
                    }],
                    "volumes": [
                        {"name": "operator-config", "configMap": {"name": "etcd-druid-operator-config"}},
                        {"name": "imagevector-overwrite", "configMap": {"name": "etcd-druid-imagevector-overwrite"}},
                    ],
                },
            },
        },
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vendored files are the ones the note names.
    #[test]
    fn the_vendored_files_are_druid_s() {
        use sha2::Digest as _;
        let note = include_str!("../../fixtures/upstream/etcd-druid/README.md");
        for (name, text) in [
            ("druid.gardener.cloud_etcdcopybackupstasks.yaml", CRDS[1]),
            ("druid.gardener.cloud_etcdopstasks.yaml", CRDS[2]),
            ("clusterrole.yaml", CLUSTER_ROLE),
        ] {
            let sum = hex::encode(sha2::Sha256::digest(text.as_bytes()));
            assert!(
                note.contains(&format!("`{name}`: sha256 `{sum}`")),
                "{name} {sum} not in the note"
            );
        }
    }

    #[test]
    fn every_object_carries_the_lab_s_labels_and_the_crds_come_first() {
        let o = objects("l1", "seed-a", &OperatorSettings::gardener());
        for x in &o {
            assert_eq!(
                x["metadata"]["labels"][crate::labels::LABEL_LAB],
                "l1",
                "{x}"
            );
        }
        let kinds: Vec<&str> = o.iter().map(|x| x["kind"].as_str().unwrap()).collect();
        assert_eq!(&kinds[..3], ["CustomResourceDefinition"; 3]);
        let names: Vec<&str> = o[..3]
            .iter()
            .map(|c| c["spec"]["names"]["kind"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Etcd", "EtcdCopyBackupsTask", "EtcdOpsTask"]);
        let role = o.iter().find(|x| x["kind"] == "ClusterRole").unwrap();
        assert!(role["rules"].as_array().unwrap().len() > 10, "{role}");
        assert!(!role.to_string().contains("{{"), "{role}");
    }

    /// druid is configured as gardenlet configures it, the gate on, and
    /// points at the lab's images by the names druid looks up.
    #[test]
    fn druid_runs_with_gardenlet_s_configuration_and_the_lab_s_images() {
        let o = objects("l1", "seed-a", &OperatorSettings::gardener());
        let cm = |name: &str, key: &str| -> Value {
            let c = o.iter().find(|x| x["metadata"]["name"] == name).unwrap();
            serde_json::from_str(c["data"][key].as_str().unwrap()).unwrap()
        };
        let config = cm("etcd-druid-operator-config", CONFIG_KEY);
        assert_eq!(config["featureGates"]["UpgradeEtcdVersion"], true);
        assert_eq!(config["leaderElection"]["enabled"], true);
        assert_eq!(config["server"]["webhooks"]["port"], 10250);
        assert_eq!(config["controllers"]["etcd"]["concurrentSyncs"], 50);
        let images = cm("etcd-druid-imagevector-overwrite", OVERWRITE_KEY);
        assert_eq!(
            images["images"],
            json!([
                {"name": "etcd-wrapper-next", "repository": "cpmlab/etcd-wrapper", "tag": "cpmlab"},
                {"name": "etcd-backup-restore-next", "repository": "cpmlab/etcdbrctl", "tag": "v0.44.1"},
            ])
        );
        let d = o.iter().find(|x| x["kind"] == "Deployment").unwrap();
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["args"][0], "--config=/operator_config/config.yaml");
        assert_eq!(
            c["env"][0]["value"],
            "/imagevector_overwrite/images_overwrite.yaml"
        );
    }
}
