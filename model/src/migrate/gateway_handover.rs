//! What the source seed's ingress gateway does for the clients that keep
//! their connections to it once the shoot API's record answers the
//! destination (GEP-0039 says nothing; Gardener's objects as they are keep
//! those clients on the source until its API servers go, and then answer
//! them 503 until the shoot namespace is deleted). Each variant is named
//! after the upstream object or flag it stands for:
//!
//! - `none`: Gardener's objects as they are (the GEP as drawn).
//! - `drain-gateway`: right after the DNS-cache wait, while the source API
//!   still serves, the source seed's Gateway for the shoot is deleted (its
//!   filter chain on the API port, and the apiserver-proxy's internal
//!   listener, sni.go's `<namespace>-apiserver-proxy` EnvoyFilter). Envoy
//!   drains the connections of a removed chain or listener for
//!   pilot-agent's `--drain-time-s` (45 s, istio `pkg/envoy/proxy.go`,
//!   `--drain-strategy immediate`): the next response carries a GOAWAY
//!   (HTTP/2) or `Connection: close` (HTTP/1.1), and what is still open
//!   when the drain ends is closed. The source API keeps serving for the
//!   drain and 5 s more before any source member leaves.
//! - `drain-gateway-in-place`: `drain-gateway` without the 404s it gives
//!   requests that race its GOAWAY. Deleting the Gateway also empties the
//!   route configuration the drained connections still use: istiod answers
//!   a route name no Gateway has with no virtual host ("Gateway missing for
//!   route ... This is normal if gateway was recently deleted",
//!   pilot/pkg/networking/core/gateway.go), so a request sent on a drained
//!   connection before its client took the GOAWAY gets Envoy's 404 NR (a
//!   NotFound to client-go). Here the Gateway is first changed, not
//!   deleted: a host no client asks for ([`DRAIN_HOST_PREFIX`]) joins its
//!   server, so its filter chain's `server_names` change and Envoy drains
//!   the chain's connections for the same 45 s, while the route, named
//!   after the Gateway's server (`https.<port>.<port name>.<gateway>.<ns>`,
//!   pilot/pkg/model/gateway.go `gatewayRDSRouteName`), keeps its virtual
//!   hosts; the apiserver-proxy's EnvoyFilter is deleted then, as in
//!   `drain-gateway` (its listener's routes are inline, so nothing
//!   empties). After the drain and the drain timeout the Gateway is
//!   deleted; only connections opened to the source since (from DNS caches
//!   older than the wait, none by then) could race that deletion.
//! - `max-connection-age`: the gateway's HTTP connection managers bound
//!   every downstream connection's life
//!   (`common_http_protocol_options.max_connection_duration`, the
//!   topology's `api.gateway_max_connection_duration`; Istio 1.29 needs an
//!   EnvoyFilter), and the source API keeps serving that long, and the
//!   connection manager's `drain_timeout` (5 s) more, after the DNS-cache
//!   wait: a connection a client opened from a cache that still named the
//!   source has been told to go by then.
//! - `forward`: right after the DNS-cache wait, and until the cleanup
//!   deletes the source's objects, the source VirtualService (and, where TLS
//!   ends at the gateway, sni.go's mutual-TLS route and the
//!   apiserver-proxy's internal listener) sends the shoot API's traffic
//!   across the WAN to the destination seed's gateway, a ServiceEntry for
//!   the destination's ingress name ([`forward_host`]) with a
//!   DestinationRule: TLS originated with the API's own name as SNI where
//!   TLS ends at the source, TCP where it passes through. Kept connections
//!   stay where they are and their requests reach the destination's API;
//!   what it costs is the WAN on every such request, and the identity of
//!   client-certificate clients where TLS ends at the source (the
//!   destination's Lua filter drops the `X-Remote-*` headers the source
//!   set, and the source has no client certificate of theirs to present).
//!   Where TLS passes through, the route is in the API's filter chain
//!   (`tcp_proxy`), so changing it drains the chain's connections as
//!   `drain-gateway-in-place` does; the source API serves Istio's drain
//!   more before any source member leaves. Where TLS ends, the change is a
//!   route configuration's only (no drain): the source serves the
//!   connection manager's drain timeout more, for the gateway to take it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum GatewayHandover {
    /// Gardener's objects as they are: the source gateway keeps the
    /// clients it has until its API servers and objects go.
    #[default]
    None,
    /// The source seed's Gateway for the shoot deleted after the DNS-cache
    /// wait: Envoy drains its connections (45 s) while the source serves.
    DrainGateway,
    /// The source seed's Gateway for the shoot changed after the DNS-cache
    /// wait so that Envoy drains its connections with their routes intact
    /// (45 s), then deleted.
    DrainGatewayInPlace,
    /// Every downstream connection of the gateway ends after the
    /// topology's `api.gateway_max_connection_duration`; the source serves
    /// that long after the DNS-cache wait.
    MaxConnectionAge,
    /// The source VirtualService routes the shoot API across the WAN to
    /// the destination seed's gateway from the DNS-cache wait until the
    /// cleanup.
    Forward,
}

/// The gateways' maximum connection duration a comparison's
/// `max-connection-age` variant is brought up with when nothing names one
/// (the shortest the design review asked about).
pub const DEFAULT_MAX_CONNECTION_AGE: &str = "60s";

/// pilot-agent's `--drain-time-s` (ProxyConfig.drainDuration, 45 s:
/// istio pkg/config/mesh/mesh.go; `pkg/envoy/proxy.go` passes it).
pub const ISTIO_DRAIN: Duration = Duration::from_secs(45);
/// The HTTP connection manager's `drain_timeout` (Envoy's default, 5 s):
/// how long a connection told to go (GOAWAY) has before it is closed.
pub const HCM_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// What `drain-gateway-in-place` puts before the API's host to make the
/// host it adds to the source's Gateway: a name under the API's own, which
/// no client asks for and no VirtualService routes.
pub const DRAIN_HOST_PREFIX: &str = "cpmlab-drain.";

/// The host `drain-gateway-in-place` adds to the source's Gateway for the
/// API at `api_host`.
pub fn drain_host(api_host: &str) -> String {
    format!("{DRAIN_HOST_PREFIX}{api_host}")
}

/// The name of `seed`'s ingress gateway under the lab's zone `zone`, as
/// Gardener names a seed's ingress domain (`*.ingress.<seed domain>`):
/// the host of the ServiceEntry `forward` routes the shoot API to.
pub fn forward_host(seed: &str, zone: &str) -> String {
    crate::topology::ingress_domain(seed, zone)
}

impl GatewayHandover {
    pub fn as_str(self) -> &'static str {
        match self {
            GatewayHandover::None => "none",
            GatewayHandover::DrainGateway => "drain-gateway",
            GatewayHandover::DrainGatewayInPlace => "drain-gateway-in-place",
            GatewayHandover::MaxConnectionAge => "max-connection-age",
            GatewayHandover::Forward => "forward",
        }
    }

    /// How long the source API must keep serving after the DNS-cache wait
    /// (and, for `drain-gateway`, after the source's Gateway went) before
    /// any source member leaves; `max_connection_duration` is the
    /// gateway's, `exposure` how the API is exposed. None: the variant
    /// holds nothing.
    pub fn source_hold(
        self,
        exposure: crate::topology::ApiExposure,
        max_connection_duration: Option<Duration>,
    ) -> Option<Duration> {
        self.source_hold_draining(exposure, max_connection_duration, ISTIO_DRAIN)
    }

    /// [`Self::source_hold`] with the gateway's drain time as its Envoy
    /// gives it (`drain`) in place of Istio's default.
    pub fn source_hold_draining(
        self,
        exposure: crate::topology::ApiExposure,
        max_connection_duration: Option<Duration>,
        drain: Duration,
    ) -> Option<Duration> {
        match self {
            GatewayHandover::None => None,
            GatewayHandover::DrainGateway | GatewayHandover::DrainGatewayInPlace => {
                Some(drain + HCM_DRAIN_TIMEOUT)
            }
            GatewayHandover::Forward => Some(match exposure {
                crate::topology::ApiExposure::Passthrough => drain + HCM_DRAIN_TIMEOUT,
                crate::topology::ApiExposure::Termination => HCM_DRAIN_TIMEOUT,
            }),
            GatewayHandover::MaxConnectionAge => {
                max_connection_duration.map(|d| d + HCM_DRAIN_TIMEOUT)
            }
        }
    }

    /// Whether the source seed's Gateway for the shoot is deleted after the
    /// DNS-cache wait.
    pub fn deletes_source_gateway(self) -> bool {
        matches!(
            self,
            GatewayHandover::DrainGateway | GatewayHandover::DrainGatewayInPlace
        )
    }

    /// Whether the source seed's Gateway for the shoot is changed to drain
    /// its connections in place before it is deleted (the hold runs
    /// between the two).
    pub fn drains_in_place(self) -> bool {
        self == GatewayHandover::DrainGatewayInPlace
    }

    /// Whether the source's routes for the shoot API go to the
    /// destination's gateway after the DNS-cache wait.
    pub fn forwards(self) -> bool {
        self == GatewayHandover::Forward
    }

    /// What is wrong with this handover on a lab whose gateways have
    /// `max_connection_duration` and expose the API `exposure`: the field
    /// and why (the order's part: `Order::check_gateway_handover`).
    pub fn check(
        self,
        exposure: crate::topology::ApiExposure,
        max_connection_duration: Option<Duration>,
    ) -> Result<(), (&'static str, String)> {
        if self != GatewayHandover::MaxConnectionAge {
            return Ok(());
        }
        if exposure == crate::topology::ApiExposure::Passthrough {
            return Err((
                "migration.gateway_handover",
                "max-connection-age needs the API's TLS to end at the gateway (exposure termination): with passthrough the gateway has no HTTP connection manager whose connections it could age".into(),
            ));
        }
        if max_connection_duration.is_none_or(|d| d.is_zero()) {
            return Err((
                "migration.gateway_handover",
                "max-connection-age needs the gateways' maximum connection duration, set when the lab comes up (topology.api.gateway_max_connection_duration, e.g. 60s)".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::ApiExposure;

    #[test]
    fn the_default_is_gardeners_objects_as_they_are() {
        let h = GatewayHandover::default();
        assert_eq!(h, GatewayHandover::None);
        assert_eq!(
            h.source_hold(ApiExposure::Termination, Some(Duration::from_secs(60))),
            None
        );
        assert!(!h.deletes_source_gateway() && !h.forwards());
    }

    #[test]
    fn drain_gateway_holds_istios_drain_and_the_drain_timeout() {
        let h = GatewayHandover::DrainGateway;
        assert!(h.deletes_source_gateway() && !h.drains_in_place());
        assert_eq!(
            h.source_hold(ApiExposure::Termination, None),
            Some(Duration::from_secs(50))
        );
        let p = GatewayHandover::DrainGatewayInPlace;
        assert!(p.deletes_source_gateway() && p.drains_in_place());
        assert_eq!(
            p.source_hold(ApiExposure::Passthrough, None),
            Some(Duration::from_secs(50))
        );
        assert_eq!(drain_host("api.x.test"), "cpmlab-drain.api.x.test");
    }

    #[test]
    fn max_connection_age_holds_the_age_and_needs_it_and_termination() {
        let h = GatewayHandover::MaxConnectionAge;
        assert!(!h.deletes_source_gateway());
        assert_eq!(
            h.source_hold(ApiExposure::Termination, Some(Duration::from_secs(60))),
            Some(Duration::from_secs(65))
        );
        assert!(h
            .check(ApiExposure::Termination, Some(Duration::from_secs(60)))
            .is_ok());
        let (field, why) = h.check(ApiExposure::Termination, None).unwrap_err();
        assert_eq!(field, "migration.gateway_handover");
        assert!(
            why.contains("topology.api.gateway_max_connection_duration"),
            "{why}"
        );
        assert_eq!(
            h.check(ApiExposure::Passthrough, Some(Duration::from_secs(60)))
                .unwrap_err()
                .0,
            "migration.gateway_handover"
        );
        assert!(GatewayHandover::DrainGateway
            .check(ApiExposure::Passthrough, None)
            .is_ok());
    }

    #[test]
    fn forward_holds_the_drain_only_where_its_route_is_in_the_filter_chain() {
        let h = GatewayHandover::Forward;
        assert!(h.forwards() && !h.deletes_source_gateway() && !h.drains_in_place());
        // Passthrough: the tcp_proxy's cluster is the chain's, so the
        // change drains it.
        assert_eq!(
            h.source_hold(ApiExposure::Passthrough, None),
            Some(Duration::from_secs(50))
        );
        // Termination: a route configuration's change only.
        assert_eq!(
            h.source_hold(ApiExposure::Termination, None),
            Some(Duration::from_secs(5))
        );
        assert!(h.check(ApiExposure::Passthrough, None).is_ok());
        assert!(h.check(ApiExposure::Termination, None).is_ok());
        assert_eq!(
            forward_host("seed-b", "local.cpmlab.test"),
            "ingress.seed-b.local.cpmlab.test"
        );
    }

    #[test]
    fn handovers_are_spelled_as_the_cli_and_scenarios_take_them() {
        for h in [
            GatewayHandover::None,
            GatewayHandover::DrainGateway,
            GatewayHandover::DrainGatewayInPlace,
            GatewayHandover::MaxConnectionAge,
            GatewayHandover::Forward,
        ] {
            assert_eq!(serde_json::to_value(h).unwrap().as_str(), Some(h.as_str()));
        }
    }
}
