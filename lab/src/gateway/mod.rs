//! The docker form's seed gateway: Envoy, configured as istiod configures
//! Istio's ingress gateway (`exposure::envoy`), and beside it in the
//! gateway's container `cpmlab agent gateway` (`agent`), which plays what
//! Kubernetes and Istio do around Envoy in a seed: the kubelet's readiness
//! probes of the API replicas, the EndpointSlice controller and istiod's
//! debounced pushes (`lifecycle`), and pilot-agent's graceful drain when
//! the gateway stops. No active health checks: an endpoint follows its
//! pod's lifecycle.
//!
//! The lab tells the agent what the seed exposes and which replicas exist
//! in one file (`GatewayInput`, written by `Provider::sync_gateway` and
//! renamed into place); the agent writes what happened, one JSON line per
//! probe, readiness change, termination and push (`Record`), to
//! `RECORDS`, which the run keeps.

pub mod agent;
pub mod lifecycle;
pub mod probe;

use serde::{Deserialize, Serialize};

use crate::exposure::Exposure;
pub use crate::exposure::{member_peer_port, API_PORT, ETCD_CLIENT_PORT, ETCD_PEER_PORT};
use crate::topology::ProbeTiming;
use lifecycle::{DebounceSettings, ProbeResult, Replica};

/// Where the lab writes the gateway's input.
pub const INPUT: &str = "/etc/cpmlab/gateway/input.json";
/// The bearer token of the readiness probes (Gardener's health-check token).
pub const TOKEN_FILE: &str = "/etc/cpmlab/gateway/token";
/// The agent's records (kept across restarts of the container).
pub const RECORDS: &str = "/var/log/cpmlab/endpoints.ndjson";
/// Envoy in the lab image.
pub const ENVOY_IN_IMAGE: &str = cpmlab_probe::node::ENVOY_BIN;
/// How long pilot-agent lets Envoy drain its listeners before it ends it
/// (ProxyConfig.terminationDrainDuration, 5 s: istio pkg/config/mesh/mesh.go;
/// pkg/envoy/agent.go waits it out after POST /drain_listeners?graceful).
pub const TERMINATION_DRAIN_MS: u64 = 5_000;

/// What the lab tells a seed's gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GatewayInput {
    pub seed: String,
    pub exposure: Exposure,
    /// The seed's API replicas.
    pub replicas: Vec<Replica>,
    /// Their readiness probe.
    pub readiness: ProbeTiming,
    #[serde(default)]
    pub debounce: DebounceSettings,
    #[serde(default = "default_termination_drain")]
    pub termination_drain_ms: u64,
}

fn default_termination_drain() -> u64 {
    TERMINATION_DRAIN_MS
}

impl GatewayInput {
    /// The input of `seed` for the lab as `state` has it; `container` says
    /// of each replica's container whether it runs and since when.
    pub fn of(
        state: &crate::state::LabState,
        seed: &str,
        container: impl Fn(&crate::state::ApiServerState) -> (bool, Option<f64>),
    ) -> Result<GatewayInput, String> {
        let readiness = state
            .topology
            .api
            .readiness_probe
            .timing("api.readiness_probe")
            .map_err(|(f, m)| format!("{f}: {m}"))?;
        let (after, max) = state
            .topology
            .api
            .gateway_debounce()
            .map_err(|(f, m)| format!("{f}: {m}"))?;
        Ok(GatewayInput {
            seed: seed.to_string(),
            exposure: Exposure::of_docker_seed(state, seed),
            replicas: state
                .apiservers_of(seed)
                .map(|a| {
                    let (running, started) = container(a);
                    Replica {
                        name: a.name.clone(),
                        address: std::net::SocketAddrV4::new(a.ip, API_PORT),
                        running,
                        started_unix_ms: started,
                        terminating: a.terminating,
                        established: false,
                    }
                })
                .collect(),
            readiness,
            debounce: DebounceSettings {
                after_ms: after.as_millis() as u64,
                max_ms: max.as_millis() as u64,
            },
            termination_drain_ms: TERMINATION_DRAIN_MS,
        })
    }
}

/// One thing the gateway's agent did or saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub at_unix_ms: f64,
    pub seed: String,
    /// `probe`, `ready`, `unready`, `terminating`, `stopped`, `started`,
    /// `push`, `config`, `drain`, `envoy-exited`.
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ProbeResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// The endpoints a push serves (`ip:port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Record {
    pub fn new(seed: &str, event: &str) -> Record {
        Record {
            at_unix_ms: crate::probe::clock::now_unix_ms(),
            seed: seed.to_string(),
            event: event.to_string(),
            replica: None,
            result: None,
            status: None,
            duration_ms: None,
            endpoints: None,
            detail: None,
        }
    }
}

/// Reads the records of a gateway (NDJSON); lines that do not parse are skipped.
pub fn parse_records(text: &str) -> Vec<Record> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
