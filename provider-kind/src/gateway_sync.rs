//! What the kind form does to a seed's Istio objects when the lab's state
//! changes (`Provider::sync_gateway`): the handovers and the source's
//! cleanup, as commands, so that a test can hold them to Gardener's rule
//! that an object a ManagedResource holds is changed in the ManagedResource
//! only (gardener-resource-manager puts back what is edited past it).

use serde_json::Value;

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

/// Whether the control plane has left `seed`: it is the migration's
/// source and holds no API server and no member any more. A destination
/// holds nothing either before its members join, and keeps its objects.
pub fn left_behind(state: &LabState, seed: &str) -> bool {
    state.migration.as_ref().is_some_and(|m| m.from == seed)
        && state.apiservers_of(seed).next().is_none()
        && state.members_of(seed).next().is_none()
}

/// Whether the `drain-gateway` handover released `seed`'s gateway: the
/// migration's source, its Gateway for the shoot deleted.
pub fn released(state: &LabState, seed: &str) -> bool {
    state
        .migration
        .as_ref()
        .is_some_and(|m| m.from == seed && m.source_gateway_released_unix_ms.is_some())
}

/// Whether the `drain-gateway-in-place` handover drains `seed`'s Gateway
/// for the shoot in place: the migration's source, changed and not yet
/// deleted.
pub fn draining(state: &LabState, seed: &str) -> bool {
    state.migration.as_ref().is_some_and(|m| {
        m.from == seed
            && m.source_gateway_drained_unix_ms.is_some()
            && m.source_gateway_released_unix_ms.is_none()
    })
}

/// The shoot API's exposure in `seed` as the kind form rendered it at
/// `up`, without the members' routes: what the handovers change.
fn api_exposure(state: &LabState, seed: &str) -> crate::exposure::Exposure {
    crate::exposure::Exposure {
        seed: seed.to_string(),
        namespace: super::namespace(&state.topology.shoot.name),
        api: Some(crate::exposure::api_route(&state.topology)),
        tls: vec![],
        max_connection_duration_ms: crate::exposure::max_connection_duration_ms(&state.topology),
        api_gateway_deleted: false,
        api_gateway_draining: false,
        api_forward: None,
    }
}

/// The `drain-gateway-in-place` handover in `seed` as the component's
/// desired state (`apiserver_exposure::Mode::DRAINING`): Gardener's
/// rendering with the drain host on every server of the API's Gateway
/// (each server's filter chain changes, and Envoy drains its connections
/// with the routes intact) and without the apiserver-proxy's EnvoyFilter
/// (deleted as gardener-resource-manager deletes what a ManagedResource no
/// longer holds). The renderer's command line and its values (its
/// standard input); applying it again changes nothing.
pub fn api_gateway_drain_in_place(
    state: &LabState,
    seed: &str,
) -> (Vec<String>, serde_json::Value) {
    api_exposure_in(state, seed, super::apiserver_exposure::Mode::DRAINING)
}

/// The `forward` handover's objects in `seed`, while it is the source and
/// forwards (none otherwise): the API's VirtualService routed to the
/// destination's gateway, the ServiceEntry and DestinationRule for that
/// gateway, and where TLS ends at the gateway sni.go's EnvoyFilters whose
/// routes name a cluster (the mutual-TLS route, the apiserver-proxy's
/// internal listener), all rendered from the one exposure definition.
pub fn api_forward_objects(state: &LabState, seed: &str) -> Option<Vec<serde_json::Value>> {
    let x = crate::exposure::Exposure {
        api_forward: Some(crate::exposure::forward_of(state, seed)?),
        ..api_exposure(state, seed)
    };
    let ns = &x.namespace;
    let keep = [
        (
            "VirtualService",
            crate::exposure::istio::API_GATEWAY.to_string(),
        ),
        (
            "ServiceEntry",
            crate::exposure::istio::FORWARD_NAME.to_string(),
        ),
        (
            "DestinationRule",
            crate::exposure::istio::FORWARD_NAME.to_string(),
        ),
        ("EnvoyFilter", format!("{ns}-istio-tls-termination")),
        ("EnvoyFilter", format!("{ns}-apiserver-proxy")),
    ];
    Some(
        crate::exposure::istio::objects(&x, &super::manifests::placement(&state.name, seed))
            .into_iter()
            .filter(|o| {
                keep.iter()
                    .any(|(k, n)| o["kind"] == *k && o["metadata"]["name"] == n.as_str())
            })
            .collect(),
    )
}

/// The renderer's command line and values that put the `forward`
/// handover's EnvoyFilters (`filters`) into the ManagedResource
/// `kube-apiserver-sni` in the place of sni.go's of the same names: the
/// mode Gardener's component has not, as its desired state.
pub fn api_forward_managed(
    state: &LabState,
    seed: &str,
    filters: Vec<serde_json::Value>,
) -> (Vec<String>, serde_json::Value) {
    let (argv, mut values) = api_exposure_in(state, seed, super::apiserver_exposure::Mode::SERVING);
    values["replaceInManagedResource"] = serde_json::Value::Array(filters);
    (argv, values)
}

/// The `drain-gateway` handover in `seed` as the component's desired state
/// without the API's Gateway (`apiserver_exposure::Mode::RELEASED`): the
/// Gateway deleted (Envoy drops its filter chain and drains its
/// connections), the apiserver-proxy's EnvoyFilter gone from the
/// ManagedResource (gardener-resource-manager deletes it, and Envoy drains
/// the internal listener likewise); the VirtualService, the
/// DestinationRules and the members' objects stay. The renderer's command
/// line and its values (its standard input).
pub fn api_gateway_removal(state: &LabState, seed: &str) -> (Vec<String>, serde_json::Value) {
    api_exposure_in(state, seed, super::apiserver_exposure::Mode::RELEASED)
}

/// The renderer's command line and values that apply the shoot API's
/// exposure in `seed` in `mode`.
fn api_exposure_in(
    state: &LabState,
    seed: &str,
    mode: super::apiserver_exposure::Mode,
) -> (Vec<String>, serde_json::Value) {
    use super::apiserver_exposure as exposure;
    let context = super::lab_state::context(&state.name, seed);
    (
        exposure::apply_argv(&context, "-"),
        exposure::values(&state.name, &state.topology, seed, mode),
    )
}

/// Deletes the shoot API's ManagedResource `kube-apiserver-sni` in a seed:
/// gardener-resource-manager deletes its objects (it is not kept:
/// `keepObjects: false`), as when Gardener deletes the shoot's namespace.
pub fn sni_managed_resource_removal(state: &LabState, seed: &str) -> Vec<String> {
    [
        "kubectl",
        "--context",
        &super::lab_state::context(&state.name, seed),
        "delete",
        "managedresources.resources.gardener.cloud",
        super::apiserver_exposure::MANAGED_RESOURCE,
        "-n",
        &super::namespace(&state.topology.shoot.name),
        "--ignore-not-found",
        "--wait=false",
    ]
    .map(String::from)
    .to_vec()
}

/// Deletes a seed's Istio objects for the shoot (every namespace: the
/// EnvoyFilters live in the ingress namespace).
pub fn gateway_objects_removal(lab: &str, seed: &str) -> Vec<String> {
    [
        "kubectl",
        "--context",
        &super::lab_state::context(lab, seed),
        "delete",
        "gateways.networking.istio.io,virtualservices.networking.istio.io,\
         destinationrules.networking.istio.io,envoyfilters.networking.istio.io,\
         serviceentries.networking.istio.io",
        "--all-namespaces",
        "-l",
        &format!(
            "{}={lab},{}={seed},{}=gateway",
            crate::labels::LABEL_LAB,
            crate::labels::LABEL_SEED,
            crate::labels::LABEL_ROLE
        ),
        "--ignore-not-found",
        "--wait=false",
    ]
    .map(String::from)
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::ApiExposure;

    use super::super::provider::tests_support::migrating;

    fn migrating_in(mode: ApiExposure) -> LabState {
        let mut s = migrating("t");
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
                let mut s = migrating_in(mode);
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
        let mut s = migrating_in(ApiExposure::Termination);
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

    /// Only the source a migration has emptied loses its Istio objects:
    /// never a destination before its members join (the first run that
    /// removed them there cut the joining members' peer routes), never a
    /// seed that still serves.
    #[test]
    fn only_a_source_left_behind_loses_its_istio_objects() {
        let topo = crate::topology::Topology::default();
        let nets: Vec<crate::addressing::Net24> = (0..4)
            .map(|i| crate::addressing::Net24([10, 213, i, 0].into()))
            .collect();
        let mut s = crate::plan::LabPlan::new("t", &topo, &nets, "img:1").initial_state("x".into());
        // No migration: a seed with nothing in it is not left behind.
        assert!(!left_behind(&s, "seed-b"));
        s.migration =
            Some(cpmlab_model::placement::migration(&s, "seed-a", "seed-b", "", 0.0).unwrap());
        // The destination before its members join, the source serving.
        assert!(!left_behind(&s, "seed-b"));
        assert!(!left_behind(&s, "seed-a"));
        // The source once its API servers and members are gone.
        s.apiservers.retain(|a| a.seed != "seed-a");
        assert!(!left_behind(&s, "seed-a"), "members still there");
        s.members.retain(|m| m.seed != "seed-a");
        assert!(left_behind(&s, "seed-a"));
    }

    /// The `drain-gateway-in-place` handover applies, in the source only,
    /// the component's draining desired state (the drain host beside the
    /// API's, no apiserver-proxy) through Gardener's renderer, never a
    /// patch of one field, until the deletion takes over.
    #[test]
    fn drain_gateway_in_place_renders_the_sources_draining_state_then_yields_to_the_deletion() {
        let mut s = migrating("t");
        assert!(!draining(&s, "seed-a"));
        s.migration.as_mut().unwrap().source_gateway_drained_unix_ms = Some(1.0);
        assert!(draining(&s, "seed-a") && !draining(&s, "seed-b") && !released(&s, "seed-a"));
        let (argv, values) = api_gateway_drain_in_place(&s, "seed-a");
        assert_eq!(
            argv.join(" "),
            format!(
                "cpmlab-gardener-render --values - --context {} --apply --delivery managed-resource",
                super::super::lab_state::context("t", "seed-a")
            )
        );
        let host = crate::exposure::api_route(&s.topology).host;
        assert_eq!(
            values["hosts"],
            serde_json::json!([
                host.clone(),
                cpmlab_model::migrate::gateway_handover::drain_host(&host)
            ])
        );
        assert_eq!(values["apiServerProxy"], false);
        assert_eq!(values["labels"]["cpmlab.seed"], "seed-a");
        s.migration
            .as_mut()
            .unwrap()
            .source_gateway_released_unix_ms = Some(2.0);
        assert!(!draining(&s, "seed-a") && released(&s, "seed-a"));
    }

    /// The `forward` handover applies, in the source only, the API's
    /// VirtualService to the destination's gateway, its ServiceEntry and
    /// DestinationRule, and with TLS ended at the gateway the EnvoyFilters
    /// whose routes name clusters, every route to the forward.
    #[test]
    fn forward_routes_the_sources_api_to_the_destinations_gateway() {
        for mode in [
            crate::topology::ApiExposure::Termination,
            crate::topology::ApiExposure::Passthrough,
        ] {
            let mut s = migrating("t");
            s.topology.api.exposure = mode;
            assert!(api_forward_objects(&s, "seed-a").is_none());
            s.migration
                .as_mut()
                .unwrap()
                .source_gateway_forwarded_unix_ms = Some(1.0);
            assert!(api_forward_objects(&s, "seed-b").is_none());
            let objects = api_forward_objects(&s, "seed-a").unwrap();
            let kinds: Vec<String> = objects
                .iter()
                .map(super::super::manifests::kind_and_name)
                .collect();
            let ns = super::super::namespace(&s.topology.shoot.name);
            let mut want = vec![
                "VirtualService/kube-apiserver".to_string(),
                "ServiceEntry/kube-apiserver-forward".into(),
                "DestinationRule/kube-apiserver-forward".into(),
            ];
            if mode == crate::topology::ApiExposure::Termination {
                want.push(format!("EnvoyFilter/{ns}-istio-tls-termination"));
                want.push(format!("EnvoyFilter/{ns}-apiserver-proxy"));
            }
            let mut got = kinds.clone();
            got.sort();
            want.sort();
            assert_eq!(got, want, "{mode:?}");
            let forward = format!("ingress.seed-b.{}", s.dns.zone);
            let vs = objects
                .iter()
                .find(|o| o["kind"] == "VirtualService")
                .unwrap();
            assert!(
                vs.to_string().contains(&forward) && !vs.to_string().contains("svc.cluster.local"),
                "{mode:?}: {vs}"
            );
            // Each carries the lab's labels, so `down` finds it.
            for o in &objects {
                assert_eq!(
                    o["metadata"]["labels"][crate::labels::LABEL_LAB],
                    "t",
                    "{o}"
                );
            }
        }
    }

    /// The `drain-gateway` handover releases only the source it marked: the
    /// component's desired state without the API's Gateway and without the
    /// apiserver-proxy, through Gardener's renderer, nothing else.
    #[test]
    fn drain_gateway_renders_the_sources_state_without_its_api_gateway_and_internal_listener() {
        let mut s = migrating("t");
        assert!(!released(&s, "seed-a"));
        s.migration
            .as_mut()
            .unwrap()
            .source_gateway_released_unix_ms = Some(1.0);
        assert!(released(&s, "seed-a") && !released(&s, "seed-b"));
        let (argv, values) = api_gateway_removal(&s, "seed-a");
        assert_eq!(
            argv.join(" "),
            format!(
                "cpmlab-gardener-render --values - --context {} --apply --delivery managed-resource",
                super::super::lab_state::context("t", "seed-a")
            )
        );
        assert_eq!(values["omitGateway"], true);
        assert_eq!(values["apiServerProxy"], false);
        assert_eq!(
            values["hosts"],
            serde_json::json!([crate::exposure::api_route(&s.topology).host])
        );
    }
}
