//! The shoot API's Istio objects in a kind seed, as Gardener's own code
//! renders them: `cpmlab-gardener-render` (go/gardener/render) runs
//! gardener v1.150.0's `apiserverexposure.NewSNI(...).Deploy`
//! (`pkg/component/kubernetes/apiserverexposure/sni.go`) with the values
//! botanist gives it (`pkg/gardenlet/operation/botanist/kubeapiserverexposure.go`),
//! reads the shoot namespace's UID and kube-apiserver's ClusterIP from the
//! seed, and applies what the component wrote:
//!
//! - into the seed itself, replaced whole (gardenlet's
//!   `GetAndCreateOrMergePatch` sets the whole spec): the Gateway
//!   `kube-apiserver`, its VirtualService, the DestinationRules
//!   `kube-apiserver`, `-mtls` and `-connection-upgrade`;
//! - the ManagedResource `kube-apiserver-sni`'s objects (under TLS
//!   termination: the EnvoyFilters `<namespace>-istio-tls-termination` and
//!   `<namespace>-apiserver-proxy`): the ones its desired state no longer
//!   holds are deleted, as gardener-resource-manager deletes them.
//!
//! The lab keeps its own of what sni.go does not render: the members'
//! routes, the istio-ingress chart's objects (its Lua filter, the
//! apiserver-proxy port, the limits), the credentials, and the `forward`
//! handover's routes (Gardener has no such mode).
//!
//! A handover that changes the API's exposure is a mode of the component
//! ([`Mode`]), applied the same way: the whole desired state, never a patch
//! of one field.

use serde_json::{json, Value};

use super::{namespace, INGRESS_NAMESPACE, INGRESS_SELECTOR};
use crate::exposure::ApiExposure;
use crate::topology::Topology;

/// The renderer's program name (`scripts/build-go --kind` installs it
/// beside kubectl).
pub const RENDERER: &str = "cpmlab-gardener-render";

/// sni.go's ManagedResource of the shoot's EnvoyFilters (its
/// `managedResourceName`).
pub const MANAGED_RESOURCE: &str = "kube-apiserver-sni";

/// The values file `up` renders for a seed (`<seed>/apiserver-exposure.json`).
pub const VALUES_FILE: &str = "apiserver-exposure.json";

/// What the component is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    /// The drain host is on every server of the API's Gateway (the
    /// `drain-gateway-in-place` handover): each server's filter chain
    /// changes, and Envoy drains its connections with the routes intact.
    pub drain_host: bool,
    /// The apiserver-proxy's EnvoyFilter is in the desired state (botanist
    /// always sets `APIServerProxy`; the handovers take it out).
    pub apiserver_proxy: bool,
    /// The API's Gateway is there (the `drain-gateway` handover deletes it:
    /// the lab's own mode, sni.go has none).
    pub gateway: bool,
}

impl Mode {
    /// The exposure as a seed serves the shoot.
    pub const SERVING: Mode = Mode {
        drain_host: false,
        apiserver_proxy: true,
        gateway: true,
    };
    /// The `drain-gateway-in-place` handover's.
    pub const DRAINING: Mode = Mode {
        drain_host: true,
        apiserver_proxy: false,
        gateway: true,
    };
    /// The `drain-gateway` handover's, and the in-place drain's once its
    /// wait is over: no Gateway, no apiserver-proxy.
    pub const RELEASED: Mode = Mode {
        drain_host: false,
        apiserver_proxy: false,
        gateway: false,
    };
}

/// The renderer's values for `seed` of lab `lab` in `mode`: SNIValues as
/// botanist fills them for the lab's shoot (its one API host; the seed's
/// ingress gateway; TLS termination as the topology says; no wildcard
/// certificate), and the lab's labels for every object.
pub fn values(lab: &str, t: &Topology, seed: &str, mode: Mode) -> Value {
    let host = t.shoot.api_name();
    let mut hosts = vec![host.clone()];
    if mode.drain_host {
        hosts.push(cpmlab_model::migrate::gateway_handover::drain_host(&host));
    }
    json!({
        "namespace": namespace(&t.shoot.name),
        "hosts": hosts,
        "apiServerProxy": mode.apiserver_proxy,
        "gateway": {
            "namespace": INGRESS_NAMESPACE,
            "labels": {INGRESS_SELECTOR.0: INGRESS_SELECTOR.1},
        },
        "tlsTermination": t.api.exposure == ApiExposure::Termination,
        "omitGateway": !mode.gateway,
        "labels": super::manifests::labels(lab, seed, "gateway"),
    })
}

/// The renderer's command line that reads the values from `values` (a
/// file, or `-` for standard input) and applies the objects to the seed
/// behind kubeconfig context `context`.
pub fn apply_argv(context: &str, values: &str) -> Vec<String> {
    [
        RENDERER,
        "--values",
        values,
        "--context",
        context,
        "--apply",
        "--delivery",
        "managed-resource",
    ]
    .map(String::from)
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(exposure: &str) -> Topology {
        let mut t = Topology::default();
        t.api.exposure = if exposure == "termination" {
            ApiExposure::Termination
        } else {
            ApiExposure::Passthrough
        };
        t
    }

    #[test]
    fn values_are_botanist_s_for_the_lab_s_shoot() {
        let t = topo("termination");
        let v = values("lab1", &t, "seed-a", Mode::SERVING);
        assert_eq!(v["namespace"], namespace(&t.shoot.name));
        assert_eq!(v["hosts"], json!([t.shoot.api_name()]));
        assert_eq!(v["apiServerProxy"], true);
        assert_eq!(v["tlsTermination"], true);
        assert_eq!(v["gateway"]["namespace"], INGRESS_NAMESPACE);
        assert_eq!(v["labels"]["cpmlab.lab"], "lab1");
        assert_eq!(v["labels"]["cpmlab.seed"], "seed-a");
        let p = values("lab1", &topo("passthrough"), "seed-a", Mode::SERVING);
        assert_eq!(p["tlsTermination"], false);
    }

    #[test]
    fn draining_adds_the_drain_host_and_drops_the_apiserver_proxy() {
        let t = topo("termination");
        let v = values("lab1", &t, "seed-a", Mode::DRAINING);
        let host = t.shoot.api_name();
        assert_eq!(
            v["hosts"],
            json!([
                host.clone(),
                cpmlab_model::migrate::gateway_handover::drain_host(&host)
            ])
        );
        assert_eq!(v["apiServerProxy"], false);
    }

    #[test]
    fn the_lab_s_own_sni_objects_are_left_to_gardener_s_rendering_and_nothing_else() {
        for mode in ["termination", "passthrough"] {
            let t = topo(mode);
            let s = crate::KindSettings::default();
            let x = super::super::manifests::exposure(&t, &s, "seed-a");
            let p = super::super::manifests::placement("lab1", "seed-a");
            let all = crate::exposure::istio::objects(&x, &p);
            let gardener: Vec<String> = all
                .iter()
                .filter(|o| super::super::manifests::rendered_by_gardener(&x, o))
                .map(super::super::manifests::kind_and_name)
                .collect();
            let ns = &x.namespace;
            let mut want = vec![
                "Gateway/kube-apiserver".to_string(),
                "VirtualService/kube-apiserver".into(),
                "DestinationRule/kube-apiserver".into(),
            ];
            if mode == "termination" {
                want.extend([
                    "DestinationRule/kube-apiserver-mtls".to_string(),
                    "DestinationRule/kube-apiserver-connection-upgrade".into(),
                    format!("EnvoyFilter/{ns}-istio-tls-termination"),
                    format!("EnvoyFilter/{ns}-apiserver-proxy"),
                ]);
            }
            let (mut got, mut want) = (gardener, want);
            got.sort();
            want.sort();
            assert_eq!(got, want, "{mode}");
            // The members' routes and the chart's objects stay the lab's.
            assert!(all
                .iter()
                .any(|o| !super::super::manifests::rendered_by_gardener(&x, o)
                    && o["metadata"]["name"] == crate::exposure::istio::ETCD_GATEWAY));
        }
    }
}
