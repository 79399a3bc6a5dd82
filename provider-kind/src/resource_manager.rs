//! A kind seed's gardener-resource-manager, as gardenlet deploys it in a
//! seed: `cpmlab-gardener-render --component resource-manager` runs gardener
//! v1.150.0's `sharedcomponent.NewRuntimeGardenerResourceManager(...).Deploy`
//! with gardenlet's values for the seed's (`pkg/gardenlet/controller/seed/
//! seed/components.go`) and applies what it wrote in namespace `garden`:
//! the ManagedResource CRD, its ServiceAccount and RBAC, its configuration
//! (class `seed`), its server certificate, Service, Deployment (the lab's
//! image, `cpmlab/gardener-resource-manager:v1.150.0`, built by
//! `scripts/build-kind-images`) and PodDisruptionBudget, and the chart's
//! PriorityClass `gardener-system-critical` it runs under.
//!
//! Left out: its webhook configurations (their CA is the fake secrets
//! manager's; kube-apiserver could not call them), the VerticalPodAutoscaler
//! and the ServiceMonitor (a kind seed has not their CRDs).
//!
//! It delivers the shoot API's ManagedResource `kube-apiserver-sni`
//! (`apiserver_exposure`): what a handover changes there, it changes in the
//! ManagedResource, and an object of it deleted by hand comes back.

use serde_json::{json, Value};

/// The lab's image of gardener-resource-manager.
pub const IMAGE: &str = "cpmlab/gardener-resource-manager:v1.150.0";
/// Its namespace in a seed (`v1beta1constants.GardenNamespace`).
pub const NAMESPACE: &str = "garden";
/// Its Deployment's name.
pub const DEPLOYMENT: &str = "gardener-resource-manager";
/// The CRD it reconciles.
pub const CRD: &str = "managedresources.resources.gardener.cloud";
/// The values file `up` renders for a seed (`<seed>/resource-manager.json`).
pub const VALUES_FILE: &str = "resource-manager.json";

/// The renderer's values for `seed`'s gardener-resource-manager: the lab's
/// image and labels (gardenlet's values for the rest, its 2 replicas
/// included).
pub fn values(lab: &str, seed: &str) -> Value {
    json!({
        "image": IMAGE,
        "labels": super::manifests::labels(lab, seed, "gardener-resource-manager"),
    })
}

/// The renderer's command line that applies the seed's
/// gardener-resource-manager from `values` to the seed behind `context`.
pub fn apply_argv(context: &str, values: &str) -> Vec<String> {
    [
        super::apiserver_exposure::RENDERER,
        "--component",
        "resource-manager",
        "--values",
        values,
        "--context",
        context,
        "--apply",
    ]
    .map(String::from)
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_name_the_lab_s_image_and_labels() {
        let v = values("lab1", "seed-b");
        assert_eq!(v["image"], IMAGE);
        assert_eq!(v["labels"]["cpmlab.lab"], "lab1");
        assert_eq!(v["labels"]["cpmlab.seed"], "seed-b");
        assert!(v.get("replicas").is_none(), "gardenlet's replicas");
        let argv = apply_argv("kind-x", "f.json").join(" ");
        assert_eq!(
            argv,
            "cpmlab-gardener-render --component resource-manager --values f.json --context kind-x --apply"
        );
    }
}
