//! Gardener's own rendering of the shoot API's exposure against the docker
//! form's Envoy: the kind form applies the objects gardener's
//! apiserverexposure component renders (`cpmlab-gardener-render`,
//! docs/gardener-components.md), and the docker form's Envoy configuration
//! must do what istiod makes of those, not of the lab's own rendering.

mod common;

use common::*;
use cpmlab_model::topology::{ApiExposure, Topology};
use cpmlab_provider_kind::apiserver_exposure::{self, Mode};
use serde_json::Value;

/// What `cpmlab-gardener-render` prints for `values`.
fn rendered(values: &Value) -> Value {
    use std::io::Write;
    let bin = cpmlab_core::go_parts::install_dir()
        .map(|d| d.join(apiserver_exposure::RENDERER))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| apiserver_exposure::RENDERER.into());
    let mut child = std::process::Command::new(&bin)
        .args(["--values", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(values.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// In both exposure modes, the Istio objects the kind form applies
/// (Gardener's rendering of sni.go's, the lab's own of the rest) and the
/// docker form's Envoy configuration agree (`exposure::agree`): the same
/// chains, routes, clusters, apiserver-proxy socket. The objects
/// gardener-resource-manager would apply are those of the ManagedResource
/// kube-apiserver-sni; istio-tls-secrets (credentials) is the lab's own.
#[test]
#[cfg_attr(
    not(cpmlab_has_kind_tools),
    ignore = "needs the kind form's tools, cpmlab-gardener-render among them (scripts/setup --kind)"
)]
fn the_docker_form_s_envoy_agrees_with_gardener_s_rendered_objects() {
    if !needs(
        "the_docker_form_s_envoy_agrees_with_gardener_s_rendered_objects",
        cpmlab_testenv::Need::KindTools,
    ) {
        return;
    }
    // And with the seed's wildcard certificate (termination): sni.go's
    // `wildcard-tls` server for the seed-bound name, which the docker
    // form serves (topology api.wildcard_certificate).
    for (mode, wildcard) in [
        (ApiExposure::Termination, false),
        (ApiExposure::Passthrough, false),
        (ApiExposure::Termination, true),
    ] {
        let mut t = Topology::default();
        t.api.exposure = mode;
        let s = cpmlab_provider_kind::KindSettings::default();
        let mut x = cpmlab_provider_kind::manifests::exposure(&t, &s, "seed-a");
        let mut values = apiserver_exposure::values("lab", &t, "seed-a", Mode::SERVING);
        if wildcard {
            let bound = t.shoot.seed_bound_name("seed-a");
            x.api.as_mut().unwrap().wildcard_hosts = vec![bound.clone()];
            values["wildcard"] = serde_json::json!({"hosts": [bound]});
        }
        values["namespaceUID"] = "0e0e0e0e-0000-4000-8000-000000000001".into();
        values["apiServerClusterIP"] = "240.96.0.10".into();
        values.as_object_mut().unwrap().remove("labels");
        let out = rendered(&values);
        let mut objects: Vec<Value> = out["seed"].as_array().unwrap().clone();
        for mr in out["managedResources"].as_array().unwrap() {
            if mr["name"] == apiserver_exposure::MANAGED_RESOURCE {
                objects.extend(mr["objects"].as_array().unwrap().iter().cloned());
            }
        }
        let gardener = objects.len();
        objects.extend(
            cpmlab_exposure::istio::objects(&x, &cpmlab_exposure::istio::tests_placement())
                .into_iter()
                .filter(|o| !cpmlab_provider_kind::manifests::rendered_by_gardener(&x, o)),
        );
        eprintln!(
            "{mode:?} (wildcard {wildcard}): {gardener} objects of Gardener's, {} in all",
            objects.len()
        );
        cpmlab_exposure::agree::check_objects(&objects, &x);
    }
}
