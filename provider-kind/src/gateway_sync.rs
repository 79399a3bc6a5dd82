//! What the kind form does to a seed's Istio objects when the lab's state
//! changes (`Provider::sync_gateway`): the handovers and the source's
//! cleanup, as commands, so that a test can hold them to Gardener's rule
//! that an object a ManagedResource holds is changed in the ManagedResource
//! only (gardener-resource-manager puts back what is edited past it).

use serde_json::Value;

use super::provider::{
    api_forward_managed, api_forward_objects, api_gateway_drain_in_place, api_gateway_removal,
    draining, gateway_objects_removal, left_behind, released, sni_managed_resource_removal,
};
use crate::state::LabState;

/// One command: kubectl, or Gardener's renderer, with what it reads on its
/// standard input.
#[derive(Debug, Clone)]
pub struct Action {
    /// What it does, for its error.
    pub what: String,
    pub argv: Vec<String>,
    pub input: Option<Value>,
}

/// The commands that bring `seed`'s Istio objects to what the lab's state
/// asks, in order.
pub fn actions(state: &LabState, seed: &str) -> Vec<Action> {
    let mut out = vec![];
    // Once the control plane has left a seed, its Istio objects go, as
    // Gardener's source cleanup deletes the shoot's namespace (and with it
    // the ManagedResource, whose objects gardener-resource-manager
    // deletes): the gateway drops those filter chains and drains their
    // connections, so clients that kept one to this seed's ingress
    // reconnect (through DNS, to the other seed) instead of getting 503.
    if left_behind(state, seed) {
        out.push(Action {
            what: "delete the shoot API's ManagedResource kube-apiserver-sni".into(),
            argv: sni_managed_resource_removal(state, seed),
            input: None,
        });
        out.push(Action {
            what: "delete the shoot's Istio objects".into(),
            argv: gateway_objects_removal(&state.name, seed),
            input: None,
        });
        return out;
    }
    // The `drain-gateway` handover (and the in-place drain once its wait is
    // over): the Gateway and the apiserver-proxy listener go while the
    // source's API still serves.
    if released(state, seed) {
        let (argv, values) = api_gateway_removal(state, seed);
        out.push(Action {
            what: "release the shoot API's Gateway (gardener's apiserverexposure, released)".into(),
            argv,
            input: Some(values),
        });
    }
    // The `drain-gateway-in-place` handover: the Gateway changed so that
    // Envoy drains with the routes intact, before its deletion.
    if draining(state, seed) {
        let (argv, values) = api_gateway_drain_in_place(state, seed);
        out.push(Action {
            what: "drain the shoot API's Gateway in place (gardener's apiserverexposure, draining)"
                .into(),
            argv,
            input: Some(values),
        });
    }
    // The `forward` handover: the API's routes to the destination's gateway
    // (applied again on a resume: the same objects). Its EnvoyFilters are
    // the ManagedResource's: changed there, through the renderer.
    if let Some(objects) = api_forward_objects(state, seed) {
        let (filters, objects): (Vec<_>, Vec<_>) = objects
            .into_iter()
            .partition(|o| o["kind"] == "EnvoyFilter");
        if !filters.is_empty() {
            let (argv, values) = api_forward_managed(state, seed, filters);
            out.push(Action {
                what: "route the shoot API's EnvoyFilters to the destination's gateway \
                       (ManagedResource kube-apiserver-sni)"
                    .into(),
                argv,
                input: Some(values),
            });
        }
        out.push(Action {
            what: "route the shoot API to the destination's gateway".into(),
            argv: [
                "kubectl",
                "--context",
                &super::lab_state::context(&state.name, seed),
                "apply",
                "-f",
                "-",
            ]
            .map(String::from)
            .to_vec(),
            input: Some(serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects})),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::ApiExposure;

    fn migrating(mode: ApiExposure) -> LabState {
        let mut s = super::super::provider::tests_support::migrating("t");
        s.topology.api.exposure = mode;
        s
    }

    /// The objects sni.go hands to gardener-resource-manager in the
    /// ManagedResource kube-apiserver-sni (under TLS termination): its
    /// EnvoyFilters.
    fn managed(s: &LabState) -> Vec<String> {
        let ns = super::super::namespace(&s.topology.shoot.name);
        vec![
            format!("{ns}-istio-tls-termination"),
            format!("{ns}-apiserver-proxy"),
        ]
    }

    /// Fails when any handover, or the source's cleanup, edits or deletes
    /// an object gardener-resource-manager would put back: every change to
    /// one goes through the renderer, into the ManagedResource.
    #[test]
    fn no_handover_edits_an_object_gardener_resource_manager_would_revert() {
        for mode in [ApiExposure::Termination, ApiExposure::Passthrough] {
            for step in ["drained", "released", "forwarded", "left"] {
                let mut s = migrating(mode);
                let m = s.migration.as_mut().unwrap();
                match step {
                    "drained" => m.source_gateway_drained_unix_ms = Some(1.0),
                    "released" => m.source_gateway_released_unix_ms = Some(1.0),
                    "forwarded" => m.source_gateway_forwarded_unix_ms = Some(1.0),
                    _ => {
                        s.apiservers.retain(|a| a.seed != "seed-a");
                        s.members.retain(|x| x.seed != "seed-a");
                    }
                }
                let actions = actions(&s, "seed-a");
                assert!(!actions.is_empty(), "{mode:?} {step}: nothing done");
                for a in &actions {
                    let renderer = a.argv[0] == super::super::apiserver_exposure::RENDERER;
                    if renderer {
                        continue;
                    }
                    let line = a.argv.join(" ");
                    let body = a.input.as_ref().map(|v| v.to_string()).unwrap_or_default();
                    for name in managed(&s) {
                        assert!(
                            !line.contains(&name) && !body.contains(&name),
                            "{mode:?} {step}: `{line}` edits {name}, which kube-apiserver-sni holds"
                        );
                    }
                    assert!(
                        !line.contains(" patch ") && !line.contains(" edit "),
                        "{mode:?} {step}: `{line}` patches past the component's desired state"
                    );
                }
            }
        }
    }

    /// The forward handover's EnvoyFilters reach the ManagedResource
    /// through the renderer, its other objects the seed.
    #[test]
    fn forward_puts_its_envoy_filters_into_the_managed_resource() {
        let mut s = migrating(ApiExposure::Termination);
        s.migration
            .as_mut()
            .unwrap()
            .source_gateway_forwarded_unix_ms = Some(1.0);
        let a = actions(&s, "seed-a");
        assert_eq!(a.len(), 2, "{a:?}");
        assert_eq!(a[0].argv[0], super::super::apiserver_exposure::RENDERER);
        let replaced = a[0].input.as_ref().unwrap()["replaceInManagedResource"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>();
        assert_eq!(replaced, managed(&s));
        assert_eq!(
            a[1].argv[..2],
            ["kubectl".to_string(), "--context".to_string()]
        );
    }
}
