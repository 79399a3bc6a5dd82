//! The garden's objects for one lab, rendered from its topology: what an
//! operator and the seeds' gardenlets would have put into a garden before
//! a shoot is migrated. Pure: JSON in the shapes gardener-apiserver v1.150.0
//! serves (`github.com/gardener/gardener/pkg/apis` v1.150.0), applied by
//! [`crate::client`].
//!
//! What each object is modelled on (paths in gardener v1.150.0):
//! - the project `local` in `garden-local`: `dev-setup/gardenconfig/components/projects/local`;
//! - the CloudProfile `local`: `dev-setup/gardenconfig/components/cloudprofile`, with both seeds' regions;
//! - the ControllerRegistration: the extension kinds gardener-apiserver's
//!   `ExtensionValidator` wants registered for a Seed's provider, backup
//!   and DNS types (`plugin/pkg/global/extensionvalidation/admission.go`);
//! - the Seeds: `dev-setup/gardenlet/base/gardenlet.yaml`'s `seedConfig`
//!   (the local setup's second seed, `local2`, differs only in name and
//!   ingress domain), each with its own region;
//! - the region ConfigMap: `example/31-scheduler-region-configmap.yaml`,
//!   read by the admission's `validateInterRegionDistance`;
//! - the Shoot: `example/provider-local/shoot-workerless.yaml`, with an HA
//!   control plane (`spec.controlPlane.highAvailability.failureTolerance`);
//! - the gardenlets' RBAC: the ClusterRole `gardener.cloud:system:seeds`
//!   bound to the seeds' group (gardener-apiserver's seed authorizer lives
//!   in gardener-admission-controller, which the lab does not run).

use serde_json::{json, Value};

use cpmlab_model::state::LabState;
use cpmlab_model::topology::FailureTolerance;

/// The API groups gardener-apiserver serves (`pkg/apiserver/apis.go`,
/// `AllGardenerAPIGroupVersions`), each registered as an APIService.
pub const API_GROUP_VERSIONS: &[(&str, &str)] = &[
    ("core.gardener.cloud", "v1"),
    ("core.gardener.cloud", "v1beta1"),
    ("seedmanagement.gardener.cloud", "v1alpha1"),
    ("operations.gardener.cloud", "v1alpha1"),
    ("security.gardener.cloud", "v1alpha1"),
];

/// The CloudProfile's and the seeds' name for the lab's cloud.
pub const CLOUD_PROFILE: &str = "local";
/// The group a gardenlet's client certificate names (Gardener's
/// `v1beta1constants.SeedsGroup`).
pub const SEEDS_GROUP: &str = "gardener.cloud:system:seeds";
/// A gardenlet's user name prefix (`v1beta1constants.SeedUserNamePrefix`).
pub const SEED_USER_PREFIX: &str = "gardener.cloud:system:seed:";
/// The namespace of the region ConfigMap and the seeds' secrets.
pub const GARDEN_NAMESPACE: &str = "garden";
/// The region ConfigMap's name.
pub const REGION_CONFIGMAP: &str = "local-scheduling-regions";
/// The Gardener release the lab's garden runs (`go/gardener/go.mod`).
pub const GARDENER_VERSION: &str = "v1.150.0";
/// gardener-apiserver's port on its container.
pub const GARDENER_APISERVER_PORT: u16 = 8443;

/// What the objects need beyond the lab's state.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The lab CA's certificate (PEM): gardener-apiserver's serving
    /// certificate is signed by it (the APIServices' `caBundle`).
    pub ca_pem: String,
    /// The shoot's Kubernetes version (the CloudProfile offers it).
    pub kubernetes_version: String,
    /// The distance between the seeds' regions for the region ConfigMap.
    pub distance: u32,
}

/// The shoot's namespace and name in the garden.
pub fn shoot_ref(state: &LabState) -> (String, String) {
    let ns = state
        .garden
        .as_ref()
        .map(|g| g.namespace.clone())
        .unwrap_or_else(|| format!("garden-{}", cpmlab_model::plan::GARDEN_PROJECT));
    (ns, state.topology.shoot.name.clone())
}

/// The user name a seed's gardenlet authenticates as.
pub fn gardenlet_user(seed: &str) -> String {
    format!("{SEED_USER_PREFIX}{seed}")
}

/// A seed's ingress domain (`spec.ingress.domain`): each seed its own,
/// under the shoot's domain.
pub fn ingress_domain(state: &LabState, seed: &str) -> String {
    format!("ingress.{seed}.{}", state.topology.shoot.domain)
}

/// The internal domain every seed shares (`spec.dns.internal.domain`).
pub fn internal_domain(state: &LabState) -> String {
    format!("internal.{}", state.topology.shoot.domain)
}

/// The objects of the kube-apiserver side that make gardener-apiserver
/// reachable: its namespace, the Service the APIServices name, and one
/// APIService per group version (as gardener's envtest registers them,
/// `test/envtest/apiserver.go`: an ExternalName Service).
pub fn aggregation(state: &LabState, inputs: &Inputs) -> Vec<Value> {
    let g = state.garden.as_ref().expect("a lab with a garden");
    let ca = base64(inputs.ca_pem.as_bytes());
    let mut v = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": GARDEN_NAMESPACE}}),
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "gardener-apiserver", "namespace": GARDEN_NAMESPACE},
            "spec": {"type": "ExternalName", "externalName": g.gardener_apiserver.ip.to_string(),
                      "ports": [{"name": "https", "port": GARDENER_APISERVER_PORT, "protocol": "TCP"}]},
        }),
    ];
    for (group, version) in API_GROUP_VERSIONS {
        v.push(json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": format!("{version}.{group}")},
            "spec": {
                "group": group, "version": version,
                "service": {"name": "gardener-apiserver", "namespace": GARDEN_NAMESPACE, "port": GARDENER_APISERVER_PORT},
                "caBundle": ca,
                "groupPriorityMinimum": 100, "versionPriority": 100,
            },
        }));
    }
    v
}

/// The gardenlets' RBAC: what a gardenlet needs of the Shoot and its Seed
/// for Live CPM (read the Shoot, write its status, report its own Seed's
/// status), and nothing else.
pub fn gardenlet_rbac() -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": SEEDS_GROUP},
            "rules": [
                {"apiGroups": ["core.gardener.cloud"], "resources": ["shoots", "seeds"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["core.gardener.cloud"], "resources": ["shoots/status", "seeds/status"], "verbs": ["get", "update", "patch"]},
                {"apiGroups": ["core.gardener.cloud"], "resources": ["shoots"], "verbs": ["patch"]},
            ],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": SEEDS_GROUP},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SEEDS_GROUP},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": SEEDS_GROUP}],
        }),
    ]
}

/// Every provider type the seeds use (sorted, once each).
fn provider_types(state: &LabState) -> Vec<String> {
    let mut v: Vec<String> = state
        .topology
        .seeds
        .iter()
        .map(|s| s.provider_type().to_string())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// What gardener-apiserver holds before the shoot: the project, the
/// CloudProfile, the extension registration, the seeds' secrets, the
/// Seeds and the region ConfigMap. The Shoot comes after the Seeds
/// ([`shoot`]).
pub fn world(state: &LabState, inputs: &Inputs) -> Vec<Value> {
    let (ns, _) = shoot_ref(state);
    let project = ns.trim_start_matches("garden-").to_string();
    let types = provider_types(state);
    let mut v = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": ns,
            "labels": {"gardener.cloud/role": "project", "project.gardener.cloud/name": project},
        }}),
        json!({"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Project",
               "metadata": {"name": project}, "spec": {"namespace": ns}}),
    ];
    let regions: Vec<Value> = state
        .topology
        .seeds
        .iter()
        .map(|s| json!({"name": s.region()}))
        .collect();
    v.push(json!({
        "apiVersion": "core.gardener.cloud/v1beta1", "kind": "CloudProfile",
        "metadata": {"name": CLOUD_PROFILE},
        "spec": {
            "type": types.first().cloned().unwrap_or_default(),
            "regions": regions,
            "kubernetes": {"versions": [{"version": inputs.kubernetes_version}]},
            "machineTypes": [{"name": "local", "cpu": "1", "gpu": "0", "memory": "8Gi"}],
            "machineImages": [{"name": "local", "versions": [{"version": "1.0.0", "cri": [{"name": "containerd"}]}]}],
        },
    }));
    let kinds = [
        "ControlPlane",
        "Infrastructure",
        "Worker",
        "BackupBucket",
        "BackupEntry",
        "DNSRecord",
    ];
    for t in &types {
        let resources: Vec<Value> = kinds
            .iter()
            .map(|k| json!({"kind": k, "type": t, "primary": true}))
            .collect();
        v.push(json!({
            "apiVersion": "core.gardener.cloud/v1beta1", "kind": "ControllerRegistration",
            "metadata": {"name": format!("provider-{t}")},
            "spec": {"resources": resources},
        }));
    }
    for name in ["backup-local", "internal-domain"] {
        v.push(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": GARDEN_NAMESPACE},
            "type": "Opaque", "data": {}}));
    }
    for s in &state.topology.seeds {
        v.push(seed(state, &s.name));
    }
    v.push(region_configmap(state, inputs));
    v
}

/// One Seed, as the local setup's gardenlet registers it.
pub fn seed(state: &LabState, name: &str) -> Value {
    let s = state
        .topology
        .seeds
        .iter()
        .find(|s| s.name == name)
        .expect("a seed of the topology");
    let secret = |n: &str| json!({"apiVersion": "v1", "kind": "Secret", "name": n, "namespace": GARDEN_NAMESPACE});
    let t = s.provider_type();
    json!({
        "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Seed",
        "metadata": {"name": name, "labels": {"cpmlab.lab": state.name}},
        "spec": {
            "provider": {"type": t, "region": s.region(), "zones": ["0"]},
            "backup": {"provider": t, "region": s.region(), "credentialsRef": secret("backup-local")},
            "dns": {
                "provider": {"type": t, "credentialsRef": secret("internal-domain")},
                "internal": {"type": t, "domain": internal_domain(state), "credentialsRef": secret("internal-domain")},
            },
            "ingress": {"domain": ingress_domain(state, name), "controller": {"kind": "nginx"}},
            "networks": {"nodes": "172.18.0.0/24", "pods": "10.1.0.0/16", "services": "10.2.0.0/16",
                          "shootDefaults": {"pods": "10.3.0.0/16", "services": "10.4.0.0/16"}},
            "settings": {"excessCapacityReservation": {"enabled": false}, "scheduling": {"visible": true},
                          "verticalPodAutoscaler": {"enabled": false}},
        },
    })
}

/// The scheduler's region ConfigMap: from each seed's region, the
/// distance to the other's (the lab declares one distance, both ways).
pub fn region_configmap(state: &LabState, inputs: &Inputs) -> Value {
    let regions: Vec<String> = state.topology.seeds.iter().map(|s| s.region()).collect();
    let mut data = serde_json::Map::new();
    for (i, r) in regions.iter().enumerate() {
        let lines: Vec<String> = regions
            .iter()
            .enumerate()
            .filter(|(j, o)| *j != i && *o != r)
            .map(|(_, o)| format!("{o}: {}", inputs.distance))
            .collect();
        data.insert(r.clone(), Value::String(lines.join("\n") + "\n"));
    }
    let mut annotations = serde_json::Map::new();
    annotations.insert(
        "scheduling.gardener.cloud/cloudprofiles".into(),
        Value::String(CLOUD_PROFILE.into()),
    );
    if let Some(t) = state.topology.garden.distance_threshold {
        annotations.insert(
            "migration.gardener.cloud/inter-region-distance-threshold".into(),
            Value::String(t.to_string()),
        );
    }
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": REGION_CONFIGMAP, "namespace": GARDEN_NAMESPACE,
                      "labels": {"scheduling.gardener.cloud/purpose": "region-config"},
                      "annotations": annotations},
        "data": data,
    })
}

/// The shoot: workerless, bound to the source seed, its control plane
/// highly available (unless the topology says `none`).
pub fn shoot(state: &LabState, inputs: &Inputs) -> Value {
    let (ns, name) = shoot_ref(state);
    let source = state.topology.source();
    let mut spec = json!({
        "cloudProfile": {"kind": "CloudProfile", "name": CLOUD_PROFILE},
        "region": source.region(),
        "provider": {"type": source.provider_type()},
        "kubernetes": {"version": inputs.kubernetes_version},
        "networking": {"services": "10.0.0.0/24"},
        "seedName": source.name,
    });
    match state.topology.shoot.high_availability {
        FailureTolerance::None => {}
        t => {
            spec["controlPlane"] =
                json!({"highAvailability": {"failureTolerance": {"type": t.as_str()}}});
        }
    }
    json!({
        "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
        "metadata": {"name": name, "namespace": ns, "labels": {"cpmlab.lab": state.name}},
        "spec": spec,
    })
}

pub(crate) fn base64(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> Inputs {
        Inputs {
            ca_pem: "PEM".into(),
            kubernetes_version: "1.36.3".into(),
            distance: 50,
        }
    }

    #[test]
    fn the_region_configmap_maps_each_region_to_the_other() {
        let s = cpmlab_model::plan::sample_state();
        let cm = region_configmap(&s, &inputs());
        assert_eq!(
            cm["metadata"]["labels"]["scheduling.gardener.cloud/purpose"],
            "region-config"
        );
        assert_eq!(
            cm["metadata"]["annotations"]["scheduling.gardener.cloud/cloudprofiles"],
            "local"
        );
        assert_eq!(cm["data"]["local-seed-a"], "local-seed-b: 50\n");
        assert_eq!(cm["data"]["local-seed-b"], "local-seed-a: 50\n");
        assert!(cm["metadata"]["annotations"]
            .get("migration.gardener.cloud/inter-region-distance-threshold")
            .is_none());
        let mut t = s.clone();
        t.topology.garden.distance_threshold = Some(90);
        let cm = region_configmap(&t, &inputs());
        assert_eq!(
            cm["metadata"]["annotations"]
                ["migration.gardener.cloud/inter-region-distance-threshold"],
            "90"
        );
    }

    #[test]
    fn the_shoot_is_ha_workerless_and_bound_to_the_source() {
        let s = cpmlab_model::plan::sample_state();
        let sh = shoot(&s, &inputs());
        assert_eq!(sh["metadata"]["namespace"], "garden-local");
        assert_eq!(sh["spec"]["seedName"], "seed-a");
        assert_eq!(sh["spec"]["region"], "local-seed-a");
        assert_eq!(
            sh["spec"]["controlPlane"]["highAvailability"]["failureTolerance"]["type"],
            "node"
        );
        assert!(sh["spec"].get("provider").unwrap().get("workers").is_none());
        let mut t = s.clone();
        t.topology.shoot.high_availability = FailureTolerance::None;
        assert!(shoot(&t, &inputs())["spec"].get("controlPlane").is_none());
    }

    #[test]
    fn every_seed_type_is_registered_and_every_api_group_aggregated() {
        let mut s = cpmlab_model::plan::sample_state();
        s.topology.seeds[1].provider_type = Some("other".into());
        let w = world(&s, &inputs());
        let regs: Vec<&str> = w
            .iter()
            .filter(|o| o["kind"] == "ControllerRegistration")
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(regs, ["provider-local", "provider-other"]);
        let seeds: Vec<&Value> = w.iter().filter(|o| o["kind"] == "Seed").collect();
        assert_eq!(seeds.len(), 2);
        assert_eq!(seeds[1]["spec"]["provider"]["type"], "other");
        assert_ne!(
            seeds[0]["spec"]["ingress"]["domain"],
            seeds[1]["spec"]["ingress"]["domain"]
        );
        let a = aggregation(&s, &inputs());
        let names: Vec<&str> = a
            .iter()
            .filter(|o| o["kind"] == "APIService")
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), 5);
        assert!(names.contains(&"v1beta1.core.gardener.cloud"));
        assert_eq!(base64(b"PEM"), "UEVN");
        assert_eq!(base64(b"ab"), "YWI=");
    }
}
