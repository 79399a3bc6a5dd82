//! One definition of what a seed's ingress gateway exposes: the shoot API
//! (by its SNI name, in either of Gardener's modes) and every etcd member's
//! client and peer endpoint (TLS passthrough by SNI, a gateway port per
//! member or a shared one), each with its destination. Both forms render
//! from it: the kind form's Istio objects (`istio`) and the docker form's
//! Envoy configuration, as istiod would generate it (`envoy`); a test
//! (`agree`) holds the two against each other.
//!
//! Gardener's values come from gardener/gardener:
//! pkg/component/kubernetes/apiserverexposure/sni.go (the SNI host sent to
//! kube-apiserver, the `-mtls` and `-connection-upgrade` destinations, the
//! route names), pkg/utils/istio/{gateway,virtualservice,destinationrule}.go
//! (servers, routes, traffic policies: TCP keepalive 7200 s / 75 s, a
//! maximum connection duration of 24 h, LEAST_REQUEST and no outlier
//! detection when TLS terminates, locality preference with outlier
//! detection's minHealthPercent 0 when it passes through).

// The model's modules under the paths the rendering code names.
#[cfg(test)]
use cpmlab_model::plan;
use cpmlab_model::{ports, state, topology};

pub mod apiserver_proxy;
pub mod envoy;
pub mod filters;
pub mod http_proxy;
pub mod ingress_limits;
pub mod istio;
pub mod lua;

pub mod agree;

pub use crate::topology::ApiExposure;

pub use crate::ports::{member_peer_port, API_PORT, ETCD_CLIENT_PORT, ETCD_PEER_PORT};

/// The SNI the gateway sends to kube-apiserver when it terminates TLS: a
/// name every kube-apiserver certificate holds (sni.go's `sniHost`).
pub const UPSTREAM_SNI: &str = "kubernetes.default.svc.cluster.local";
/// DestinationRule `maxConnectionDuration` (destinationrule.go: 24 h).
pub const MAX_CONNECTION_DURATION_S: u64 = 86_400;
/// DestinationRule TCP keepalive time and interval (destinationrule.go).
pub const TCP_KEEPALIVE_TIME_S: u32 = 7200;
pub const TCP_KEEPALIVE_INTERVAL_S: u32 = 75;
/// The headers kube-apiserver's request-header authentication reads
/// (pkg/component/kubernetes/apiserver/constants and deployment.go).
pub const REQUEST_HEADER_USER: &str = "X-Remote-User";
pub const REQUEST_HEADER_GROUP: &str = "X-Remote-Group";
pub const REQUEST_HEADER_EXTRA_PREFIX: &str = "X-Remote-Extra-";
/// The dynamic metadata key the gateway's Lua filter sets for a request
/// that came with a client certificate (sni.go's AuthenticationDynamicMetadataKey).
pub const AUTHENTICATED_HOST_KEY: &str = "authenticated-kube-apiserver-host";
/// The route for requests with `Connection: Upgrade` (sni.go).
pub const CONNECTION_UPGRADE_ROUTE: &str = "connection-upgrade";
/// The client certificate's name the gateway presents to kube-apiserver
/// on the mutual-TLS route (sni.go: `system:istio-gateway`, signed by the
/// front-proxy CA).
pub const GATEWAY_CLIENT_CN: &str = "system:istio-gateway";

/// How the gateway finds a destination's addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Resolution {
    /// A Service's ready endpoints, pushed by the control plane (EDS).
    Endpoints,
    /// A name the gateway resolves itself (a ServiceEntry with
    /// `resolution: DNS`: Envoy's STRICT_DNS).
    Dns,
}

/// Where a route sends its traffic.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Destination {
    /// A Service's cluster-local name, or a name to resolve.
    pub host: String,
    pub port: u16,
    pub resolution: Resolution,
}

impl Destination {
    /// Istio's name for the Envoy cluster of this destination.
    pub fn cluster(&self) -> String {
        format!("outbound|{}||{}", self.port, self.host)
    }
}

/// A TLS passthrough route: connections on `port` whose SNI is `host` go
/// to `destination`, their TLS untouched.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TlsRoute {
    /// The object it belongs to (a member's name, or a Service's).
    pub owner: String,
    /// `peer` or `client`.
    pub kind: String,
    pub host: String,
    pub port: u16,
    pub destination: Destination,
}

/// The shoot API on the gateway.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApiRoute {
    /// The API's DNS name, matched by SNI (and as `:authority` when TLS ends).
    pub host: String,
    pub port: u16,
    pub mode: ApiExposure,
    /// kube-apiserver's Service and port behind the gateway.
    pub service: String,
    pub target_port: u16,
    /// Other authorities the HTTP routes answer when TLS ends here: the
    /// gateway's own address, which `cpmlab kubeconfig` names as the server
    /// (the host cannot resolve the lab's DNS; the TLS server name stays
    /// the API's). A lab addition; Gardener's VirtualService names the
    /// API's DNS names only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authorities: Vec<String>,
    /// The seed-bound names the Gateway's `wildcard-tls` server serves
    /// with the seed's wildcard certificate, where the seed has one
    /// (sni.go's `WildcardConfiguration.Hosts`; TLS termination only here).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wildcard_hosts: Vec<String>,
}

/// The destinations of the API in termination mode, as sni.go names them:
/// the plain one, the one that presents the gateway's client certificate
/// (requests that came with a client certificate), and the one for
/// connection upgrades (HTTP/1.1 to the replica).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiDestination {
    Plain,
    MutualTls,
    ConnectionUpgrade,
}

impl ApiDestination {
    pub const ALL: [ApiDestination; 3] = [
        ApiDestination::Plain,
        ApiDestination::MutualTls,
        ApiDestination::ConnectionUpgrade,
    ];

    fn suffix(self) -> &'static str {
        match self {
            ApiDestination::Plain => "",
            ApiDestination::MutualTls => "-mtls",
            ApiDestination::ConnectionUpgrade => "-connection-upgrade",
        }
    }
}

/// What a seed's gateway exposes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Exposure {
    pub seed: String,
    /// The shoot's control-plane namespace: Services are named in it.
    pub namespace: String,
    /// The shoot API, where the seed hosts the control plane (none in a
    /// destination before its API servers start, nor in a source after its
    /// cleanup: Gardener's Gateway and VirtualService are not there).
    pub api: Option<ApiRoute>,
    /// etcd's endpoints, each by SNI, TLS passed through.
    pub tls: Vec<TlsRoute>,
    /// The gateway's bound on a downstream HTTP connection's life, on the
    /// API's connection manager and the apiserver-proxy's internal
    /// listener (`topology.api.gateway_max_connection_duration`),
    /// milliseconds; none by default, as Gardener's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connection_duration_ms: Option<u64>,
    /// The shoot API's Gateway and its apiserver-proxy EnvoyFilter are
    /// deleted (the `drain-gateway` handover in the source seed): no
    /// listener or filter chain serves the API, the internal listener and
    /// its cluster are gone, while the API's Services, and so their
    /// clusters and endpoints, stay.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub api_gateway_deleted: bool,
    /// The shoot API's Gateway is changed to drain its connections in place
    /// (`drain-gateway-in-place` in the source seed, before the deletion):
    /// its server also names the drain host (`model::migrate::
    /// gateway_handover::drain_host`), so the API's filter chain changes
    /// and Envoy drains it, with its route configuration as it was; the
    /// apiserver-proxy EnvoyFilter, its internal listener and cluster, are
    /// gone as when deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub api_gateway_draining: bool,
    /// Where the shoot API's routes go instead of this seed's API servers
    /// (the `forward` handover in the source seed, from the DNS-cache wait
    /// to the cleanup): the destination seed's gateway by its ingress name
    /// (`model::migrate::gateway_handover::forward_host`), a ServiceEntry
    /// resolved by DNS. Where TLS ends here the gateway originates TLS to
    /// it with the API's name as SNI; where it passes through, the
    /// client's TLS goes on untouched. The API's Services, and so their
    /// clusters, stay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_forward: Option<Destination>,
}

/// `<service>.<namespace>.svc.cluster.local`.
pub fn service_host(service: &str, namespace: &str) -> String {
    format!("{service}.{namespace}.svc.cluster.local")
}

impl ApiRoute {
    /// The Service name of an API destination (`kube-apiserver`,
    /// `kube-apiserver-mtls`, `kube-apiserver-connection-upgrade`).
    pub fn service_of(&self, d: ApiDestination) -> String {
        format!("{}{}", self.service, d.suffix())
    }

    /// An API destination in `namespace`; passthrough uses only `Plain`.
    pub fn destination(&self, namespace: &str, d: ApiDestination) -> Destination {
        Destination {
            host: service_host(&self.service_of(d), namespace),
            port: self.target_port,
            resolution: Resolution::Endpoints,
        }
    }
}

impl Exposure {
    /// The API destinations the mode uses (none without the API).
    pub fn api_destinations(&self) -> Vec<(ApiDestination, Destination)> {
        let Some(api) = &self.api else {
            return vec![];
        };
        let used: &[ApiDestination] = match api.mode {
            ApiExposure::Termination => &ApiDestination::ALL,
            ApiExposure::Passthrough => &[ApiDestination::Plain],
        };
        used.iter()
            .map(|d| (*d, api.destination(&self.namespace, *d)))
            .collect()
    }

    /// Where the API's route `d` sends its traffic: the API's own Service,
    /// or while the source forwards, the destination seed's gateway.
    pub fn api_target(&self, api: &ApiRoute, d: ApiDestination) -> Destination {
        self.api_forward
            .clone()
            .unwrap_or_else(|| api.destination(&self.namespace, d))
    }

    /// The connection manager options that bound a downstream connection's
    /// life (`common_http_protocol_options`), when the exposure has a
    /// maximum: merged into the API's and the internal listener's.
    pub fn downstream_connection_options(&self) -> Option<serde_json::Value> {
        self.max_connection_duration_ms.map(|ms| {
            serde_json::json!({"common_http_protocol_options": {
                "max_connection_duration": envoy_duration(ms),
            }})
        })
    }

    /// `downstream_connection_options`, merged into a connection manager's
    /// typed config.
    pub fn merge_downstream_connection_options(&self, typed_config: &mut serde_json::Value) {
        if let (Some(serde_json::Value::Object(more)), Some(o)) = (
            self.downstream_connection_options(),
            typed_config.as_object_mut(),
        ) {
            o.extend(more);
        }
    }

    /// Whether the apiserver-proxy's EnvoyFilter (the internal listener and
    /// its cluster) is gone: the API's Gateway deleted or draining.
    pub fn apiserver_proxy_released(&self) -> bool {
        self.api_gateway_deleted || self.api_gateway_draining
    }

    /// The hosts the API's Gateway server names: the API's, and while it
    /// drains in place the drain host.
    pub fn api_gateway_hosts(&self, api: &ApiRoute) -> Vec<String> {
        let mut hosts = vec![api.host.clone()];
        if self.api_gateway_draining {
            hosts.push(cpmlab_model::migrate::gateway_handover::drain_host(
                &api.host,
            ));
        }
        hosts
    }

    /// The hosts the Gateway's `wildcard-tls` server names: the seed-bound
    /// names, and while it drains in place a drain host for each (none
    /// without a wildcard certificate).
    pub fn api_wildcard_hosts(&self, api: &ApiRoute) -> Vec<String> {
        let mut hosts = api.wildcard_hosts.clone();
        if self.api_gateway_draining {
            hosts.extend(
                api.wildcard_hosts
                    .iter()
                    .map(|h| cpmlab_model::migrate::gateway_handover::drain_host(h)),
            );
        }
        hosts
    }

    /// The gateway ports with passthrough routes, sorted, each once.
    pub fn tls_ports(&self) -> Vec<u16> {
        let mut p: Vec<u16> = self.tls.iter().map(|r| r.port).collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    /// The docker form's exposure of `seed` for the lab as `state` has it:
    /// the API, and each member the seed's gateway fronts (the seed's and
    /// a migration's planned destination members), its peer and client
    /// endpoints resolved by the member's pod name (`MemberState::pod_host`).
    /// The API is exposed where the state has API servers in the seed.
    pub fn of_docker_seed(state: &crate::state::LabState, seed: &str) -> Exposure {
        let members = state.gateway_members(seed);
        Exposure {
            seed: seed.to_string(),
            namespace: control_plane_namespace(&state.topology.shoot.name),
            max_connection_duration_ms: max_connection_duration_ms(&state.topology),
            // The `drain-gateway` handover deleted the source's Gateway for
            // the shoot: its API servers still serve, its gateway no longer
            // routes to them.
            api_gateway_deleted: state
                .migration
                .as_ref()
                .is_some_and(|m| m.from == seed && m.source_gateway_released_unix_ms.is_some()),
            api_gateway_draining: state.migration.as_ref().is_some_and(|m| {
                m.from == seed
                    && m.source_gateway_drained_unix_ms.is_some()
                    && m.source_gateway_released_unix_ms.is_none()
            }),
            api_forward: forward_of(state, seed),
            api: (state.apiservers_of(seed).count() > 0).then(|| {
                let mut api = api_route(&state.topology);
                if let Some(s) = state.seed(seed) {
                    api.authorities.push(s.gateway.ip.to_string());
                }
                if state.topology.api.wildcard_certificate {
                    api.wildcard_hosts = vec![state.topology.shoot.seed_bound_name(seed)];
                }
                api
            }),
            tls: members
                .iter()
                .flat_map(|m| {
                    member_routes(
                        &m.name,
                        &m.host,
                        m.peer_port,
                        &m.pod_host(),
                        Resolution::Dns,
                    )
                })
                .collect(),
        }
    }
}

/// Where `seed`'s routes for the API go while it forwards (the `forward`
/// handover has turned the migration's source): the destination's gateway.
/// Both forms' exposures read it here.
pub fn forward_of(state: &crate::state::LabState, seed: &str) -> Option<Destination> {
    state
        .migration
        .as_ref()
        .filter(|m| m.from == seed && m.source_gateway_forwarded_unix_ms.is_some())
        .map(|m| forward_destination(&m.to, &state.dns.zone))
}

/// The destination seed `to`'s gateway as the `forward` handover reaches
/// it: its ingress name under the lab's zone, the API's port, resolved by
/// DNS (a ServiceEntry with `resolution: DNS`).
pub fn forward_destination(to: &str, zone: &str) -> Destination {
    Destination {
        host: cpmlab_model::migrate::gateway_handover::forward_host(to, zone),
        port: API_PORT,
        resolution: Resolution::Dns,
    }
}

/// The topology's `api.gateway_max_connection_duration` in milliseconds
/// (checked when the topology was read; a bad value reads as none).
pub fn max_connection_duration_ms(t: &crate::topology::Topology) -> Option<u64> {
    t.api
        .gateway_max_connection_duration()
        .ok()
        .flatten()
        .map(|d| d.as_millis() as u64)
}

/// A duration as Envoy's JSON takes it (`60s`, `0.250s`).
pub fn envoy_duration(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{}.{:03}s", ms / 1000, ms % 1000)
    }
}

/// The shoot's control-plane namespace in a seed, as Gardener names it.
pub fn control_plane_namespace(shoot: &str) -> String {
    format!("shoot--local--{shoot}")
}

/// The API route the topology asks for.
pub fn api_route(t: &crate::topology::Topology) -> ApiRoute {
    ApiRoute {
        host: t.shoot.api_name(),
        port: API_PORT,
        mode: t.api.exposure,
        service: "kube-apiserver".into(),
        target_port: API_PORT,
        authorities: vec![],
        wildcard_hosts: vec![],
    }
}

/// A member's two passthrough routes: its peer port (`peer_port` on the
/// gateway, 2380 behind it) and the client port, both by its SNI name
/// `host`, to `destination_host`.
pub fn member_routes(
    owner: &str,
    host: &str,
    peer_port: u16,
    destination_host: &str,
    resolution: Resolution,
) -> Vec<TlsRoute> {
    [
        ("peer", peer_port, ETCD_PEER_PORT),
        ("client", ETCD_CLIENT_PORT, ETCD_CLIENT_PORT),
    ]
    .into_iter()
    .map(|(kind, port, target)| TlsRoute {
        owner: owner.to_string(),
        kind: kind.to_string(),
        host: host.to_string(),
        port,
        destination: Destination {
            host: destination_host.to_string(),
            port: target,
            resolution,
        },
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_docker_seed_exposes_the_api_and_each_member_by_its_name() {
        let s = crate::plan::sample_state();
        let x = Exposure::of_docker_seed(&s, "seed-a");
        let api = x.api.as_ref().unwrap();
        assert_eq!(api.host, "api.local.cpmlab.test");
        assert_eq!(api.mode, ApiExposure::Termination);
        assert_eq!(x.tls.len(), 2 * s.members_of("seed-a").count());
        let peer = x
            .tls
            .iter()
            .find(|r| r.owner == "seed-a-etcd-1" && r.kind == "peer")
            .unwrap();
        assert_eq!(peer.host, "seed-a-etcd-1.local.cpmlab.test");
        assert_eq!(peer.port, ETCD_PEER_PORT);
        assert_eq!(peer.destination.resolution, Resolution::Dns);
        assert_eq!(
            peer.destination.cluster(),
            "outbound|2380||seed-a-etcd-1.pods.local.cpmlab.test"
        );
        assert_eq!(x.tls_ports(), vec![ETCD_CLIENT_PORT, ETCD_PEER_PORT]);
        let names: Vec<String> = x
            .api_destinations()
            .iter()
            .map(|(_, d)| d.cluster())
            .collect();
        assert_eq!(
            names,
            [
                "outbound|443||kube-apiserver.shoot--local--local.svc.cluster.local",
                "outbound|443||kube-apiserver-mtls.shoot--local--local.svc.cluster.local",
                "outbound|443||kube-apiserver-connection-upgrade.shoot--local--local.svc.cluster.local",
            ]
        );
        // The other seed has no members and no API servers yet.
        let b = Exposure::of_docker_seed(&s, "seed-b");
        assert!(b.tls.is_empty() && b.api.is_none());
        assert!(b.api_destinations().is_empty());
    }
}
