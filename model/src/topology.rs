//! The declared lab: which seeds exist, how many etcd members the shoot has,
//! what the shoot API is called. Parsed from YAML with unknown fields refused,
//! and validated with errors that name the file, the line and the field.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// A topology as declared (defaults filled in).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    #[serde(default = "default_seeds")]
    pub seeds: Vec<Seed>,
    #[serde(default)]
    pub etcd: EtcdSpec,
    #[serde(default)]
    pub shoot: ShootSpec,
    #[serde(default)]
    pub dns: DnsSpec,
    #[serde(default)]
    pub network: NetworkSpec,
    #[serde(default)]
    pub api: ApiSpec,
    /// The garden: what its gardener-apiserver holds about the seeds and
    /// the shoot, and how the seeds' gardenlets pace their steps.
    #[serde(default)]
    pub garden: GardenSpec,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiSpec {
    /// API server replicas per seed, behind the seed's gateway.
    #[serde(default = "default_api_replicas")]
    pub replicas: u32,
    /// How long a stopping API server keeps serving after /readyz fails
    /// (kube-apiserver's --shutdown-delay-duration; Gardener sets 15s).
    #[serde(default = "default_shutdown_delay")]
    pub shutdown_delay: String,
    /// How long a stopping kube-apiserver (or generic server) spends ending
    /// its open watches cleanly once the delay is over
    /// (--shutdown-watch-termination-grace-period). Kubernetes' default, 0s,
    /// leaves them open until the process ends: clients see their watch
    /// streams break. Delay and grace must end before `termination_grace`.
    #[serde(default = "default_watch_termination_grace")]
    pub watch_termination_grace: String,
    /// kube-apiserver's --shutdown-send-retry-after: once the delay is over,
    /// answer new requests `429 Retry-After: 5` with `Connection: close`
    /// until in-flight requests drained, and only then GOAWAY. Kubernetes'
    /// default and Gardener's (which set it for 1.24 only) is false: GOAWAY
    /// at once, so clients move without a 5 s wait.
    #[serde(default)]
    pub shutdown_send_retry_after: bool,
    /// How long a stopping replica has from SIGTERM until it is killed (the
    /// pod's terminationGracePeriodSeconds; Gardener's kube-apiserver: 30s).
    #[serde(default = "default_termination_grace")]
    pub termination_grace: String,
    /// `auto` (kube-apiserver if a binary is found, else the generic
    /// server, else the stand-in), `generic`, `standin` or `kube-apiserver`.
    #[serde(default)]
    pub server: ApiServerChoice,
    /// How the seed's ingress gateway exposes the shoot API: `termination`
    /// (Gardener's default since v1.144, its `IstioTLSTermination` gate:
    /// HTTPS at the gateway, requests balanced one by one to the replicas
    /// over TLS, the client's identity forwarded in request headers) or
    /// `passthrough` (TLS passed through by SNI to one replica per
    /// connection; a shoot's opt-out,
    /// `shoot.gardener.cloud/disable-istio-tls-termination=true`).
    #[serde(default)]
    pub exposure: ApiExposure,
    /// The kubelet's readiness probe of each replica, which decides when a
    /// replica is an endpoint of the gateway (Gardener's kube-apiserver:
    /// `/readyz` with a bearer token, period 10 s, timeout 15 s, failure
    /// threshold 3, initial delay 10 s; pkg/component/kubernetes/apiserver/deployment.go).
    #[serde(default)]
    pub readiness_probe: ProbeSpec,
    /// The seed gateways' bound on each downstream HTTP connection's life
    /// (the connection manager's
    /// `common_http_protocol_options.max_connection_duration`: GOAWAY, then
    /// Envoy's 5 s `drain_timeout`). Absent: none, Gardener's default (it
    /// sets a 24 h duration only towards kube-apiserver,
    /// pkg/utils/istio/destinationrule.go); on Istio 1.29 an EnvoyFilter
    /// sets it. The `max-connection-age` gateway handover needs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_max_connection_duration: Option<String>,
    /// Whether each seed has a wildcard certificate for its ingress domain
    /// (a Secret with `gardener.cloud/role: controlplane-cert`): Gardener
    /// then adds the server `wildcard-tls` for the shoot API's seed-bound
    /// name (`ShootSpec::seed_bound_name`) to the shoot's Gateway (sni.go's
    /// `WildcardConfiguration`) and advertises that name. The docker form
    /// with TLS termination only; the `seed-bound` probe lane needs it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wildcard_certificate: bool,
    /// The control plane's push debounce for the seed gateways: a change
    /// (an endpoint, the Gateway) is pushed once this long passed without
    /// another (istiod's `PILOT_DEBOUNCE_AFTER`, 100ms: istio
    /// pilot/pkg/features/tuning.go). The docker form's gateway agent
    /// debounces so; the kind form sets istiod's variable.
    #[serde(default = "default_gateway_debounce_after")]
    pub gateway_debounce_after: String,
    /// The longest a push waits while changes keep coming
    /// (`PILOT_DEBOUNCE_MAX`, 10s). A large seed's istiod, busy with
    /// every shoot's changes, pushes up to this late.
    #[serde(default = "default_gateway_debounce_max")]
    pub gateway_debounce_max: String,
}

/// How the shoot API is exposed on a seed's ingress gateway (Gardener's
/// pkg/component/kubernetes/apiserverexposure/sni.go).
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
#[serde(rename_all = "lowercase")]
pub enum ApiExposure {
    /// TLS ends at the gateway (OPTIONAL_MUTUAL with the lab CA), HTTP
    /// routes, LEAST_REQUEST per request to the replicas over TLS with SNI
    /// `kubernetes.default.svc.cluster.local`, identity in X-Remote-* headers.
    #[default]
    Termination,
    /// TLS passthrough by SNI; a connection stays on the replica it reached.
    Passthrough,
}

impl ApiExposure {
    pub fn as_str(self) -> &'static str {
        match self {
            ApiExposure::Termination => "termination",
            ApiExposure::Passthrough => "passthrough",
        }
    }
}

/// A kubelet probe's timing (a `corev1.Probe` without its handler).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// `periodSeconds`: how often the probe runs.
    #[serde(default = "default_probe_period")]
    pub period: String,
    /// `timeoutSeconds`: a probe without an answer by then failed.
    #[serde(default = "default_probe_timeout")]
    pub timeout: String,
    /// `failureThreshold`: consecutive failures before the replica is unready.
    #[serde(default = "default_probe_failure_threshold")]
    pub failure_threshold: u32,
    /// `successThreshold`: consecutive successes before it is ready again.
    #[serde(default = "default_probe_success_threshold")]
    pub success_threshold: u32,
    /// `initialDelaySeconds`: no probe before the container ran this long.
    #[serde(default = "default_probe_initial_delay")]
    pub initial_delay: String,
}

impl Default for ProbeSpec {
    fn default() -> Self {
        ProbeSpec {
            period: default_probe_period(),
            timeout: default_probe_timeout(),
            failure_threshold: default_probe_failure_threshold(),
            success_threshold: default_probe_success_threshold(),
            initial_delay: default_probe_initial_delay(),
        }
    }
}

fn default_probe_period() -> String {
    "10s".into()
}
fn default_probe_timeout() -> String {
    "15s".into()
}
fn default_probe_failure_threshold() -> u32 {
    3
}
fn default_probe_success_threshold() -> u32 {
    1
}
fn default_probe_initial_delay() -> String {
    "10s".into()
}

/// A probe's durations, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeTiming {
    pub period_ms: u64,
    pub timeout_ms: u64,
    pub failure_threshold: u32,
    pub success_threshold: u32,
    pub initial_delay_ms: u64,
}

impl ProbeSpec {
    /// The timing, or the field (under `at`) and why not.
    pub fn timing(&self, at: &str) -> Result<ProbeTiming, (String, String)> {
        let parse = |f: &str, v: &str| {
            let field = format!("{at}.{f}");
            crate::link::profile::parse_duration(&field, v)
                .map(|d| d.as_millis() as u64)
                .map_err(|b| (field, b.0))
        };
        let t = ProbeTiming {
            period_ms: parse("period", &self.period)?,
            timeout_ms: parse("timeout", &self.timeout)?,
            failure_threshold: self.failure_threshold,
            success_threshold: self.success_threshold,
            initial_delay_ms: parse("initial_delay", &self.initial_delay)?,
        };
        // The kubelet's own validation (k8s.io/kubernetes pkg/apis/core/validation):
        // period and timeout at least 1 s, thresholds at least 1.
        for (f, ms) in [("period", t.period_ms), ("timeout", t.timeout_ms)] {
            if ms < 1000 {
                return Err((
                    format!("{at}.{f}"),
                    format!("must be at least 1s, as a kubelet probe's, got {ms} ms"),
                ));
            }
        }
        for (f, n) in [
            ("failure_threshold", t.failure_threshold),
            ("success_threshold", t.success_threshold),
        ] {
            if n == 0 {
                return Err((format!("{at}.{f}"), "must be at least 1".into()));
            }
        }
        Ok(t)
    }
}

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
pub enum ApiServerChoice {
    /// kube-apiserver where its binary is found, else the generic server
    /// where it was built, else the stand-in.
    #[default]
    Auto,
    Standin,
    KubeApiserver,
    Generic,
}

impl ApiSpec {
    /// The shutdown delay, the watch termination grace and the termination
    /// grace, parsed; on error the field and why.
    pub fn shutdown_durations(
        &self,
    ) -> Result<
        (
            std::time::Duration,
            std::time::Duration,
            std::time::Duration,
        ),
        (&'static str, String),
    > {
        let parse = |field: &'static str, v: &str| {
            crate::link::profile::parse_duration(field, v).map_err(|b| (field, b.0))
        };
        Ok((
            parse("api.shutdown_delay", &self.shutdown_delay)?,
            parse("api.watch_termination_grace", &self.watch_termination_grace)?,
            parse("api.termination_grace", &self.termination_grace)?,
        ))
    }

    /// `gateway_max_connection_duration`, parsed (up to a day).
    pub fn gateway_max_connection_duration(
        &self,
    ) -> Result<Option<std::time::Duration>, (&'static str, String)> {
        const FIELD: &str = "api.gateway_max_connection_duration";
        self.gateway_max_connection_duration
            .as_deref()
            .map(|v| {
                crate::link::profile::parse_duration_max(
                    FIELD,
                    v,
                    std::time::Duration::from_secs(86_400),
                )
                .map_err(|b| (FIELD, b.0))
            })
            .transpose()
    }

    /// `gateway_debounce_after` and `gateway_debounce_max`, parsed (up to
    /// a minute each, the first no longer than the second).
    pub fn gateway_debounce(
        &self,
    ) -> Result<(std::time::Duration, std::time::Duration), (&'static str, String)> {
        let parse = |field: &'static str, v: &str| {
            crate::link::profile::parse_duration_max(field, v, std::time::Duration::from_secs(60))
                .map_err(|b| (field, b.0))
        };
        let after = parse("api.gateway_debounce_after", &self.gateway_debounce_after)?;
        let max = parse("api.gateway_debounce_max", &self.gateway_debounce_max)?;
        if after > max {
            return Err((
                "api.gateway_debounce_after",
                format!(
                    "at most api.gateway_debounce_max ({}), got {}",
                    self.gateway_debounce_max, self.gateway_debounce_after
                ),
            ));
        }
        Ok((after, max))
    }
}

impl Default for ApiSpec {
    fn default() -> Self {
        ApiSpec {
            replicas: default_api_replicas(),
            shutdown_delay: default_shutdown_delay(),
            watch_termination_grace: default_watch_termination_grace(),
            shutdown_send_retry_after: false,
            termination_grace: default_termination_grace(),
            server: ApiServerChoice::default(),
            exposure: ApiExposure::default(),
            readiness_probe: ProbeSpec::default(),
            gateway_max_connection_duration: None,
            wildcard_certificate: false,
            gateway_debounce_after: default_gateway_debounce_after(),
            gateway_debounce_max: default_gateway_debounce_max(),
        }
    }
}

fn default_api_replicas() -> u32 {
    2
}
fn default_watch_termination_grace() -> String {
    "3s".into()
}
fn default_gateway_debounce_after() -> String {
    "100ms".into()
}
fn default_gateway_debounce_max() -> String {
    "10s".into()
}
fn default_termination_grace() -> String {
    "30s".into()
}
fn default_shutdown_delay() -> String {
    "15s".into()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Seed {
    pub name: String,
    pub role: SeedRole,
    /// The Seed's `spec.provider.region` in the garden (absent:
    /// `local-<name>`, so that the two seeds are in different regions and
    /// the admission weighs their distance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The Seed's `spec.provider.type` (absent: `local`, as Gardener's
    /// local setup; the admission refuses two seeds of different types).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_type: Option<String>,
    /// The version the seed's gardenlet reports in the Seed's
    /// `status.gardener.version` (absent: the garden's gardener-apiserver
    /// version; the admission refuses two seeds whose versions differ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gardenlet_version: Option<String>,
}

impl Seed {
    pub fn region(&self) -> String {
        self.region
            .clone()
            .unwrap_or_else(|| format!("local-{}", self.name))
    }
    pub fn provider_type(&self) -> &str {
        self.provider_type
            .as_deref()
            .unwrap_or(DEFAULT_PROVIDER_TYPE)
    }
}

/// The provider type of Gardener's local setup (`dev-setup/gardenconfig`,
/// `example/provider-local`).
pub const DEFAULT_PROVIDER_TYPE: &str = "local";

/// The garden's side of the lab: what gardener-apiserver is told about
/// the seeds' regions, and how the gardenlets pace their steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GardenSpec {
    /// The distance between the two seeds' regions in the scheduler's
    /// region ConfigMap (label `scheduling.gardener.cloud/purpose:
    /// region-config`), which gardener-apiserver's admission holds against
    /// its threshold. Absent: `cpmlab run` takes the round trip the
    /// scenario's seed link declares (twice its delay, in ms); `up` alone 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distance: Option<u32>,
    /// The ConfigMap's `migration.gardener.cloud/inter-region-distance-threshold`;
    /// absent: no annotation, and the admission's default, 180 (gardener
    /// `plugin/pkg/shoot/validator/admission.go`, defaultInterRegionDistanceThreshold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distance_threshold: Option<u32>,
    /// How often a gardenlet retries a step it owns, and looks again for
    /// the other gardenlet's condition (upstream's draft reconciler:
    /// `liveMigrationStepInterval`, 10 s).
    #[serde(default = "default_step_interval")]
    pub step_interval: String,
    /// How long a gardenlet tries a step before it marks it False
    /// (`liveMigrationStepTimeout`, 10 min).
    #[serde(default = "default_step_timeout")]
    pub step_timeout: String,
}

impl Default for GardenSpec {
    fn default() -> Self {
        GardenSpec {
            distance: None,
            distance_threshold: None,
            step_interval: default_step_interval(),
            step_timeout: default_step_timeout(),
        }
    }
}

impl GardenSpec {
    /// The step interval (validated).
    pub fn step_interval(&self) -> std::time::Duration {
        crate::link::profile::parse_duration_max(
            "garden.step_interval",
            &self.step_interval,
            std::time::Duration::from_secs(24 * 3600),
        )
        .unwrap_or(std::time::Duration::from_secs(10))
    }
    /// The step budget (validated).
    pub fn step_timeout(&self) -> std::time::Duration {
        crate::link::profile::parse_duration_max(
            "garden.step_timeout",
            &self.step_timeout,
            std::time::Duration::from_secs(24 * 3600),
        )
        .unwrap_or(std::time::Duration::from_secs(600))
    }
}

/// Gardener's step interval: upstream's draft reconciler retries a step
/// and looks for the other gardenlet's condition every 10 s
/// (`pkg/gardenlet/controller/shoot/shoot/reconciler_livemigrate.go`,
/// `liveMigrationStepInterval`).
pub const GARDENER_STEP_INTERVAL: &str = "10s";

/// An environment variable that gives `garden.step_interval`'s default
/// where a topology does not set it (the test suite sets 2 s: its many
/// migrations then spend less of CI's budget in hand-offs; the kind run,
/// the nightly and every user keep Gardener's).
pub const STEP_INTERVAL_ENV: &str = "CPMLAB_GARDEN_STEP_INTERVAL";

fn default_step_interval() -> String {
    std::env::var(STEP_INTERVAL_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| GARDENER_STEP_INTERVAL.into())
}
fn default_step_timeout() -> String {
    "10m".into()
}

/// The Shoot's `spec.controlPlane.highAvailability.failureTolerance.type`
/// (`none`: no highAvailability, which Live CPM's admission refuses).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum FailureTolerance {
    #[default]
    Node,
    Zone,
    None,
}

impl FailureTolerance {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureTolerance::Node => "node",
            FailureTolerance::Zone => "zone",
            FailureTolerance::None => "none",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SeedRole {
    Source,
    Destination,
}

impl SeedRole {
    pub fn as_str(self) -> &'static str {
        match self {
            SeedRole::Source => "source",
            SeedRole::Destination => "destination",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EtcdSpec {
    /// Voting members of the shoot's etcd in the source seed.
    #[serde(default = "default_members")]
    pub members: u32,
    /// The seed of each member, in order; all in the source seed when absent.
    /// Placing a member in the destination puts it across the wan link (as
    /// mid-migration), for tests of a cluster spanning the seeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Vec<String>>,
    /// The etcd every member runs, `"3.4"` or `"3.5"`: what etcd-wrapper
    /// runs by default (3.4, the host's etcd) or behind etcd-druid's
    /// `UpgradeEtcdVersion` feature gate (3.5, built by scripts/build-go).
    /// Members a migration starts run the same.
    #[serde(default = "default_etcd_version")]
    pub version: String,
    /// `--pre-vote` on every member; absent: the version's default (off on
    /// 3.4, on from 3.5), as etcd-druid leaves it. With pre-vote a member
    /// cut off from the leader (its heartbeats dropped) asks before it
    /// campaigns, and cannot depose a leader the others still follow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_vote: Option<bool>,
    /// Who runs the members: the lab (`lab`, the default: the members as
    /// etcd-wrapper would start them) or etcd-druid (`etcd-druid`, the
    /// kind form only: druid's `Etcd`s, backup-restore beside each member,
    /// as `up --with-etcd-druid`). druid runs etcd 3.5 (its
    /// `UpgradeEtcdVersion` images), so `version` must say "3.5".
    #[serde(default, skip_serializing_if = "EtcdOperator::is_lab")]
    pub operator: EtcdOperator,
    /// `--snapshot-count`: applied entries between etcd's snapshots, after
    /// which it compacts its in-memory raft log. Absent: etcd-druid's
    /// 10000 (`defaultSnapshotCount`, internal/component/configmap/etcdconfig.go).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_count: Option<u64>,
    /// etcd 3.5's `--experimental-snapshot-catchup-entries`: entries kept
    /// behind a snapshot for a slow follower; one further behind gets a
    /// snapshot instead of appends. Absent: etcd's 5000
    /// (`DefaultSnapshotCatchUpEntries`, server/etcdserver/server.go), which
    /// etcd 3.4 fixes (no flag there, so 3.4 refuses the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_catchup_entries: Option<u64>,
}

impl Default for EtcdSpec {
    fn default() -> Self {
        EtcdSpec {
            members: default_members(),
            placement: None,
            version: default_etcd_version(),
            pre_vote: None,
            operator: EtcdOperator::Lab,
            snapshot_count: None,
            snapshot_catchup_entries: None,
        }
    }
}

/// Who makes and runs the shoot's etcd members.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum EtcdOperator {
    /// The lab's own members (the docker form's containers, the kind
    /// form's pods).
    #[default]
    Lab,
    /// etcd-druid v0.38.1 from `Etcd` resources, etcd-backup-restore
    /// beside each member (kind form only; docs/etcd-druid.md).
    EtcdDruid,
}

impl EtcdOperator {
    pub fn is_lab(&self) -> bool {
        *self == EtcdOperator::Lab
    }
}

/// The etcd minor versions a lab can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EtcdVersion {
    /// 3.4.34 as scripts/build-go builds it (else Debian 12's etcd-server,
    /// the host's `/usr/bin/etcd`).
    #[default]
    V3_4,
    /// Debian unstable's etcd-server, `/usr/local/bin/etcd-3.5` in the image.
    V3_5,
}

impl EtcdVersion {
    pub const ALL: [EtcdVersion; 2] = [EtcdVersion::V3_4, EtcdVersion::V3_5];

    pub fn as_str(self) -> &'static str {
        match self {
            EtcdVersion::V3_4 => "3.4",
            EtcdVersion::V3_5 => "3.5",
        }
    }

    pub fn parse(s: &str) -> Option<EtcdVersion> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

impl std::fmt::Display for EtcdVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl EtcdSpec {
    /// The version asked for; a topology that passed `validate` always has
    /// one of [`EtcdVersion::ALL`].
    pub fn etcd_version(&self) -> Result<EtcdVersion, String> {
        EtcdVersion::parse(&self.version).ok_or_else(|| {
            let known: Vec<String> = EtcdVersion::ALL
                .iter()
                .map(|v| format!("\"{v}\""))
                .collect();
            format!(
                "`{}` is not an etcd version the lab runs; use {}",
                self.version,
                known.join(" or ")
            )
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShootSpec {
    #[serde(default = "default_shoot_name")]
    pub name: String,
    #[serde(default = "default_domain")]
    pub domain: String,
    /// The Shoot's control plane failure tolerance in the garden (`node`:
    /// its etcd and API servers spread over nodes, Live CPM's prerequisite).
    #[serde(default)]
    pub high_availability: FailureTolerance,
}

impl Default for ShootSpec {
    fn default() -> Self {
        ShootSpec {
            name: default_shoot_name(),
            domain: default_domain(),
            high_availability: FailureTolerance::default(),
        }
    }
}

impl ShootSpec {
    /// The DNS zone the lab's DNS server is authoritative for.
    pub fn zone(&self) -> String {
        format!("{}.{}", self.name, self.domain)
    }
    /// The shoot API name, `api.<shoot>.<domain>` as in Gardener.
    pub fn api_name(&self) -> String {
        format!("api.{}", self.zone())
    }
    /// The shoot API's seed-bound name in `seed`: `api-<technical ID
    /// without "shoot--">.<the seed's ingress domain>` (gardenlet's
    /// `ComputeKubeAPIServerHost`, pkg/gardenlet/operation/operation.go),
    /// the seed's ingress domain being `ingress.<seed>.<zone>` here.
    /// Gardener advertises it as `wildcard-tls-seed-bound` where the seed
    /// has a wildcard certificate; it resolves to that seed's ingress
    /// gateway whatever seed serves the shoot.
    pub fn seed_bound_name(&self, seed: &str) -> String {
        format!("api-local--{}.{}", self.name, self.ingress_domain(seed))
    }
    /// `seed`'s ingress domain under the lab's zone (Gardener's
    /// `*.ingress.<seed domain>`).
    pub fn ingress_domain(&self, seed: &str) -> String {
        ingress_domain(seed, &self.zone())
    }
}

/// `seed`'s ingress domain under the lab's zone `zone`, as Gardener names
/// a seed's ingress domain (`*.ingress.<seed domain>`).
pub fn ingress_domain(seed: &str, zone: &str) -> String {
    format!("ingress.{seed}.{zone}")
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DnsSpec {
    /// TTL in seconds of the records the lab serves.
    #[serde(default = "default_ttl")]
    pub ttl: u32,
}

impl Default for DnsSpec {
    fn default() -> Self {
        DnsSpec { ttl: default_ttl() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// IPv4 pool the lab's /24 networks are carved from.
    #[serde(default = "default_pool")]
    pub pool: String,
    /// TCP congestion control of every lab container (a per-namespace
    /// sysctl): `cubic`, Linux's default and what seed nodes run, unless the
    /// topology says otherwise; `host` inherits the host's. Over a lossy long
    /// link it decides how fast etcd's peer streams drain: at 60 ms and 1 %
    /// loss BBR carried 92 Mbit/s where CUBIC carried 1.3.
    #[serde(default = "default_congestion_control")]
    pub tcp_congestion_control: String,
    /// How each etcd member's peer endpoint is exposed on its seed's
    /// gateway: `address` (an address of its own on the shared peer port,
    /// told apart by SNI) or `port` (the gateway's one address, a port of
    /// its own per member, as gardener/gardener#15576 exposes peers).
    /// Absent: the provider's way (docker: `address`, kind: `port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_exposure: Option<PeerExposure>,
}

/// How each etcd member's peer endpoint is exposed on its seed's ingress.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum PeerExposure {
    /// One ingress port per member, routed by SNI with TLS passthrough:
    /// etcd never sees two members behind one address and port.
    Port,
    /// One shared peer port, each member on an address of its own (a
    /// gateway address in the docker form, a LoadBalancer in kind).
    Address,
}

impl Default for NetworkSpec {
    fn default() -> Self {
        NetworkSpec {
            pool: default_pool(),
            tcp_congestion_control: default_congestion_control(),
            peer_exposure: None,
        }
    }
}

impl NetworkSpec {
    /// The algorithm the containers are set to, `None` for the host's.
    pub fn congestion_control(&self) -> Option<&str> {
        (self.tcp_congestion_control != INHERIT_CONGESTION_CONTROL)
            .then_some(self.tcp_congestion_control.as_str())
    }
}

/// `network.tcp_congestion_control` value that keeps the host's algorithm.
pub const INHERIT_CONGESTION_CONTROL: &str = "host";

fn default_seeds() -> Vec<Seed> {
    vec![
        Seed {
            name: "seed-a".into(),
            role: SeedRole::Source,
            region: None,
            provider_type: None,
            gardenlet_version: None,
        },
        Seed {
            name: "seed-b".into(),
            role: SeedRole::Destination,
            region: None,
            provider_type: None,
            gardenlet_version: None,
        },
    ]
}
fn default_members() -> u32 {
    3
}
fn default_etcd_version() -> String {
    EtcdVersion::default().as_str().into()
}
fn default_shoot_name() -> String {
    "local".into()
}
fn default_domain() -> String {
    "cpmlab.test".into()
}
/// Gardener's: gardenlet's `controllers.shoot.dnsEntryTTLSeconds`
/// defaults to 120 (gardener `pkg/apis/config/gardenlet/v1alpha1/defaults.go`),
/// the TTL of the shoot API's DNSRecord.
fn default_ttl() -> u32 {
    120
}
fn default_pool() -> String {
    "10.213.0.0/16".into()
}
fn default_congestion_control() -> String {
    "cubic".into()
}

impl Default for Topology {
    fn default() -> Self {
        Topology {
            seeds: default_seeds(),
            etcd: EtcdSpec::default(),
            shoot: ShootSpec::default(),
            dns: DnsSpec::default(),
            network: NetworkSpec::default(),
            api: ApiSpec::default(),
            garden: GardenSpec::default(),
        }
    }
}

/// The name reserved for the clients network.
pub const CLIENTS: &str = "clients";
/// The name reserved for the garden's network.
pub const GARDEN: &str = "garden";

/// A topology file that cannot be used, located as precisely as we can.
pub type TopologyError = crate::yaml_file::FileError;

impl Topology {
    pub fn source(&self) -> &Seed {
        self.seeds
            .iter()
            .find(|s| s.role == SeedRole::Source)
            .expect("validated topology has a source seed")
    }
    pub fn destination(&self) -> &Seed {
        self.seeds
            .iter()
            .find(|s| s.role == SeedRole::Destination)
            .expect("validated topology has a destination seed")
    }

    /// The seed of each etcd member, in member order.
    pub fn member_seeds(&self) -> Vec<String> {
        match &self.etcd.placement {
            Some(p) => p.clone(),
            None => vec![self.source().name.clone(); self.etcd.members as usize],
        }
    }

    /// Every network of the lab, seeds first, then clients.
    pub fn network_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.seeds.iter().map(|s| s.name.clone()).collect();
        v.push(CLIENTS.to_string());
        v.push(GARDEN.to_string());
        v
    }

    /// Reads and validates a topology file.
    pub fn load(path: &Path) -> Result<Topology, TopologyError> {
        let text = crate::yaml_file::read(path)?;
        Self::parse(&text, path)
    }

    /// Parses and validates topology YAML; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Topology, TopologyError> {
        let (topo, lines) = crate::yaml_file::parse::<Topology>(text, path)?;
        topo.validate()
            .map_err(|(field, message)| lines.error(path, &field, message))?;
        Ok(topo)
    }

    /// An error at `field` of the topology file `path`, at its line
    /// ([`crate::yaml_file::error_at`]).
    pub fn error_at(path: &Path, field: &str, message: impl Into<String>) -> TopologyError {
        crate::yaml_file::error_at::<Topology>(path, field, message)
    }

    /// Semantic checks; the error is `(field path, message)`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let e = |f: String, m: String| Err((f, m));
        if self.seeds.len() != 2 {
            return e(
                "seeds".into(),
                format!(
                    "a lab has exactly two seeds (one source, one destination), found {}",
                    self.seeds.len()
                ),
            );
        }
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, s) in self.seeds.iter().enumerate() {
            let f = format!("seeds[{i}].name");
            if let Err(m) = check_label(&s.name, 20) {
                return e(f, m);
            }
            if s.name == CLIENTS || s.name == GARDEN {
                return e(
                    f,
                    format!("`{}` is reserved for the lab's own networks", s.name),
                );
            }
            if let Some(r) = &s.region {
                if let Err(m) = check_label(r, 63) {
                    return e(format!("seeds[{i}].region"), m);
                }
            }
            if let Some(t) = &s.provider_type {
                if let Err(m) = check_label(t, 63) {
                    return e(format!("seeds[{i}].provider_type"), m);
                }
            }
            if let Some(v) = &s.gardenlet_version {
                if v.is_empty() || v.len() > 63 || v.contains(char::is_whitespace) {
                    return e(
                        format!("seeds[{i}].gardenlet_version"),
                        format!("`{v}` is not a version (1 to 63 characters, no spaces)"),
                    );
                }
            }
            if let Some(first) = seen.insert(&s.name, i) {
                return e(
                    f,
                    format!(
                        "duplicate seed name `{}` (also seeds[{first}].name)",
                        s.name
                    ),
                );
            }
        }
        for role in [SeedRole::Source, SeedRole::Destination] {
            let with: Vec<usize> = (0..self.seeds.len())
                .filter(|&i| self.seeds[i].role == role)
                .collect();
            if with.len() != 1 {
                // Point at the second seed claiming the role, or at the list.
                let field = match with.get(1) {
                    Some(i) => format!("seeds[{i}].role"),
                    None => "seeds".to_string(),
                };
                return e(
                    field,
                    format!(
                        "exactly one seed must have role `{}`, found {}",
                        role.as_str(),
                        with.len()
                    ),
                );
            }
        }
        let m = self.etcd.members;
        if m == 0 || m.is_multiple_of(2) || m > 7 {
            return e(
                "etcd.members".into(),
                format!("member count must be odd and between 1 and 7 (quorum needs an odd count), got {m}"),
            );
        }
        if let Some(pl) = &self.etcd.placement {
            if pl.len() != m as usize {
                return e(
                    "etcd.placement".into(),
                    format!(
                        "lists {} seeds for {m} members; give one seed per member",
                        pl.len()
                    ),
                );
            }
            for (i, seed) in pl.iter().enumerate() {
                if !self.seeds.iter().any(|s| &s.name == seed) {
                    return e(
                        format!("etcd.placement[{i}]"),
                        format!("`{seed}` is not a seed of this topology"),
                    );
                }
            }
        }
        if let Err(msg) = self.etcd.etcd_version() {
            return e("etcd.version".into(), msg);
        }
        for (field, value) in [
            ("garden.step_interval", &self.garden.step_interval),
            ("garden.step_timeout", &self.garden.step_timeout),
        ] {
            // A bad default from the environment is named as such.
            let from_env = if field == "garden.step_interval"
                && std::env::var(STEP_INTERVAL_ENV).is_ok_and(|v| v == *value)
            {
                format!(" (the default {STEP_INTERVAL_ENV} gives)")
            } else {
                String::new()
            };
            match crate::link::profile::parse_duration_max(
                field,
                value,
                std::time::Duration::from_secs(24 * 3600),
            ) {
                Err(err) => return e(field.into(), format!("{}{from_env}", err.0)),
                Ok(d) if d.is_zero() => {
                    return e(field.into(), format!("must be more than 0 s{from_env}"))
                }
                Ok(_) => {}
            }
        }
        if self.garden.step_interval() > self.garden.step_timeout() {
            return e(
                "garden.step_interval".into(),
                format!(
                    "{} is longer than garden.step_timeout ({}): a step would never be retried",
                    self.garden.step_interval, self.garden.step_timeout
                ),
            );
        }
        if self.etcd.snapshot_count == Some(0) {
            return e(
                "etcd.snapshot_count".into(),
                "at least 1 (etcd takes 0 as its own default)".into(),
            );
        }
        match self.etcd.snapshot_catchup_entries {
            Some(0) => {
                return e(
                    "etcd.snapshot_catchup_entries".into(),
                    "at least 1 (etcd 3.5 takes 0 as its own default, 5000)".into(),
                )
            }
            Some(_) if self.etcd.etcd_version() != Ok(EtcdVersion::V3_5) => {
                return e(
                    "etcd.snapshot_catchup_entries".into(),
                    "etcd 3.4 keeps 5000 entries and has no flag for it; set etcd.version: \"3.5\""
                        .into(),
                )
            }
            _ => {}
        }
        if self.etcd.operator == EtcdOperator::EtcdDruid
            && self.etcd.etcd_version() != Ok(EtcdVersion::V3_5)
        {
            return e(
                "etcd.operator".into(),
                "etcd-druid runs etcd 3.5 (its UpgradeEtcdVersion images, which the lab builds); \
                 set etcd.version: \"3.5\" beside it"
                    .into(),
            );
        }
        if self.etcd.operator == EtcdOperator::EtcdDruid {
            // druid writes its members' configuration itself (its ConfigMap);
            // a lab setting it would not pass on must not pass silently.
            for (set, field) in [
                (self.etcd.snapshot_count.is_some(), "etcd.snapshot_count"),
                (
                    self.etcd.snapshot_catchup_entries.is_some(),
                    "etcd.snapshot_catchup_entries",
                ),
            ] {
                if set {
                    return e(
                        field.into(),
                        "the lab's own members only: etcd-druid writes its members' \
                         configuration (its snapshot count is 10000); leave it out beside \
                         etcd.operator: etcd-druid"
                            .into(),
                    );
                }
            }
        }
        if let Err(msg) = check_label(&self.shoot.name, 30) {
            return e("shoot.name".into(), msg);
        }
        for (i, label) in self.shoot.domain.split('.').enumerate() {
            if let Err(msg) = check_label(label, 63) {
                return e(
                    "shoot.domain".into(),
                    format!("label {} of `{}`: {msg}", i + 1, self.shoot.domain),
                );
            }
        }
        if self.dns.ttl == 0 || self.dns.ttl > 86_400 {
            return e(
                "dns.ttl".into(),
                format!(
                    "TTL must be between 1 and 86400 seconds, got {}",
                    self.dns.ttl
                ),
            );
        }
        if self.api.replicas == 0 || self.api.replicas > 5 {
            return e(
                "api.replicas".into(),
                format!(
                    "between 1 and 5 API server replicas per seed, got {}",
                    self.api.replicas
                ),
            );
        }
        let (delay, grace, kill) = match self.api.shutdown_durations() {
            Ok(d) => d,
            Err((field, msg)) => return e(field.into(), msg),
        };
        if delay + grace >= kill {
            return e(
                "api.termination_grace".into(),
                format!(
                    "must be longer than api.shutdown_delay + api.watch_termination_grace ({} + {}): a replica killed earlier breaks its clients' requests, got {}",
                    self.api.shutdown_delay, self.api.watch_termination_grace, self.api.termination_grace
                ),
            );
        }
        match self.api.gateway_max_connection_duration() {
            Err((field, msg)) => return e(field.into(), msg),
            Ok(Some(d)) if d < std::time::Duration::from_secs(1) => {
                return e(
                    "api.gateway_max_connection_duration".into(),
                    format!("at least 1s, got {d:?}"),
                )
            }
            Ok(_) => {}
        }
        if self.api.wildcard_certificate && self.api.exposure == ApiExposure::Passthrough {
            return e(
                "api.wildcard_certificate".into(),
                "the seed-bound server is built for TLS termination (api.exposure: termination): under passthrough kube-apiserver itself would serve the wildcard certificate by SNI, which the lab's API servers do not".into(),
            );
        }
        if let Err((field, msg)) = self.api.gateway_debounce() {
            return e(field.into(), msg);
        }
        if let Err((field, msg)) = self.api.readiness_probe.timing("api.readiness_probe") {
            return e(field, msg);
        }
        if let Err(msg) = crate::addressing::Pool::parse(&self.network.pool) {
            return e("network.pool".into(), msg);
        }
        let cc = &self.network.tcp_congestion_control;
        if cc.is_empty()
            || cc.len() > 15
            || !cc
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return e(
                "network.tcp_congestion_control".into(),
                format!("`{cc}` is not a congestion control name (e.g. cubic, bbr, reno, or `{INHERIT_CONGESTION_CONTROL}` for the host's)"),
            );
        }
        Ok(())
    }
}

/// A DNS label usable as a Docker name part: lowercase letters, digits, `-`.
pub fn check_label(s: &str, max: usize) -> Result<(), String> {
    if s.is_empty() || s.len() > max {
        return Err(format!("`{s}` must be 1 to {max} characters"));
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        || s.starts_with('-')
        || s.ends_with('-')
    {
        return Err(format!(
            "`{s}` may hold only lowercase letters, digits and inner `-`"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Topology, TopologyError> {
        Topology::parse(s, Path::new("t.yaml"))
    }

    #[test]
    fn empty_file_is_the_default_topology() {
        let t = parse("").unwrap();
        assert_eq!(t, Topology::default());
        assert_eq!(t.source().name, "seed-a");
        assert_eq!(t.destination().name, "seed-b");
        assert_eq!(t.shoot.api_name(), "api.local.cpmlab.test");
        assert_eq!(
            t.shoot.seed_bound_name("seed-a"),
            "api-local--local.ingress.seed-a.local.cpmlab.test"
        );
        assert_eq!(
            t.network_names(),
            vec!["seed-a", "seed-b", "clients", "garden"]
        );
    }

    #[test]
    fn congestion_control_defaults_to_cubic_and_host_inherits() {
        let t = parse("").unwrap();
        assert_eq!(t.network.congestion_control(), Some("cubic"));
        let t = parse("network:\n  tcp_congestion_control: host\n").unwrap();
        assert_eq!(t.network.congestion_control(), None);
        let err = parse("network:\n  tcp_congestion_control: \"BBR; rm\"\n").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("t.yaml:2"), "{msg}");
        assert!(msg.contains("network.tcp_congestion_control"), "{msg}");
    }

    #[test]
    fn full_file_parses() {
        let t = parse(
            "seeds:\n  - name: east\n    role: destination\n  - name: west\n    role: source\netcd:\n  members: 5\nshoot:\n  name: prod\n  domain: example.test\ndns:\n  ttl: 120\n",
        )
        .unwrap();
        assert_eq!(t.source().name, "west");
        assert_eq!(t.etcd.members, 5);
        assert_eq!(t.dns.ttl, 120);
        assert_eq!(t.shoot.api_name(), "api.prod.example.test");
    }

    #[test]
    fn unknown_field_names_line_and_field() {
        let e = parse("seeds:\n  - name: a\n    role: source\n    colour: red\n").unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert_eq!(e.field, "seeds[0].colour", "{e}");
        assert!(
            !e.message.contains(" at line "),
            "the line is said once: {e}"
        );
        assert!(
            e.to_string().starts_with("t.yaml:4: seeds[0].colour:"),
            "{e}"
        );
    }

    #[test]
    fn unknown_top_level_field() {
        let e = parse("etcd:\n  members: 3\nwan: fast\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert_eq!(e.field, "wan", "{e}");
    }

    #[test]
    fn a_replica_killed_before_its_shutdown_ends_is_refused() {
        let e = parse("api:\n  shutdown_delay: 15s\n  watch_termination_grace: 3s\n  termination_grace: 18s\n")
            .unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (4, "api.termination_grace"),
            "{e}"
        );
        assert!(e.message.contains("15s + 3s"), "{e}");
        let t =
            parse("api:\n  shutdown_send_retry_after: true\n  termination_grace: 19s\n").unwrap();
        assert!(t.api.shutdown_send_retry_after);
        let e = parse("api:\n  termination_grace: soon\n").unwrap_err();
        assert_eq!(e.field, "api.termination_grace", "{e}");
    }

    /// istiod's debounce by default; a bad or inverted one is refused at
    /// its field's line.
    #[test]
    fn the_gateway_debounce_is_istiods_unless_told() {
        let t = parse("").unwrap();
        assert_eq!(
            t.api.gateway_debounce().unwrap(),
            (
                std::time::Duration::from_millis(100),
                std::time::Duration::from_secs(10)
            )
        );
        let t = parse("api:\n  gateway_debounce_after: 2s\n").unwrap();
        assert_eq!(t.api.gateway_debounce().unwrap().0.as_millis(), 2000);
        for (yaml, line, field) in [
            (
                "api:\n  gateway_debounce_after: soon\n",
                2,
                "api.gateway_debounce_after",
            ),
            (
                "api:\n  replicas: 2\n  gateway_debounce_after: 11s\n",
                3,
                "api.gateway_debounce_after",
            ),
            (
                "api:\n  gateway_debounce_max: 2m\n",
                2,
                "api.gateway_debounce_max",
            ),
        ] {
            let e = parse(yaml).unwrap_err();
            assert_eq!((e.line, e.field.as_str()), (line, field), "{yaml}: {e}");
        }
    }

    #[test]
    fn even_member_count_is_refused_at_its_line() {
        let e = parse("dns:\n  ttl: 5\netcd:\n  members: 4\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (4, "etcd.members"), "{e}");
        assert!(e.message.contains("odd"), "{e}");
        let e = parse("etcd:\n  members: 0\n").unwrap_err();
        assert_eq!(e.field, "etcd.members");
    }

    #[test]
    fn etcd_druid_is_asked_for_with_etcd_3_5_and_refused_beside_3_4() {
        assert_eq!(parse("").unwrap().etcd.operator, EtcdOperator::Lab);
        let t = parse("etcd:\n  version: \"3.5\"\n  operator: etcd-druid\n").unwrap();
        assert_eq!(t.etcd.operator, EtcdOperator::EtcdDruid);
        // The default is not written back, so a lab topology reads as before.
        let lab = parse("etcd:\n  operator: lab\n").unwrap();
        assert!(!serde_json::to_string(&lab).unwrap().contains("operator"));
        for text in [
            "etcd:\n  operator: etcd-druid\n",
            "etcd:\n  version: \"3.4\"\n  operator: etcd-druid\n",
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.field, "etcd.operator", "{text}: {e}");
            assert!(e.message.contains("3.5"), "{text}: {e}");
        }
        let e = parse("etcd:\n  operator: druid\n").unwrap_err();
        assert!(e.message.contains("etcd-druid"), "{e}");
    }

    #[test]
    fn snapshot_settings_are_positive_and_the_catch_up_is_3_5_s() {
        let t = parse(
            "etcd:\n  version: \"3.5\"\n  snapshot_count: 500\n  snapshot_catchup_entries: 50\n",
        )
        .unwrap();
        assert_eq!(
            (t.etcd.snapshot_count, t.etcd.snapshot_catchup_entries),
            (Some(500), Some(50))
        );
        for (text, line, field) in [
            ("etcd:\n  snapshot_count: 0\n", 2, "etcd.snapshot_count"),
            (
                "etcd:\n  version: \"3.5\"\n  snapshot_catchup_entries: 0\n",
                3,
                "etcd.snapshot_catchup_entries",
            ),
            (
                "etcd:\n  snapshot_catchup_entries: 50\n",
                2,
                "etcd.snapshot_catchup_entries",
            ),
            // druid's members take druid's configuration, not the lab's.
            (
                "etcd:\n  version: \"3.5\"\n  operator: etcd-druid\n  snapshot_count: 1000\n",
                4,
                "etcd.snapshot_count",
            ),
            (
                "etcd:\n  version: \"3.5\"\n  operator: etcd-druid\n  snapshot_catchup_entries: 100\n",
                4,
                "etcd.snapshot_catchup_entries",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!((e.line, e.field.as_str()), (line, field), "{text}: {e}");
        }
    }

    #[test]
    fn etcd_version_is_3_4_or_3_5_and_else_refused_at_its_line() {
        assert_eq!(
            parse("").unwrap().etcd.etcd_version(),
            Ok(EtcdVersion::V3_4)
        );
        let t = parse("etcd:\n  version: \"3.5\"\n").unwrap();
        assert_eq!(t.etcd.etcd_version(), Ok(EtcdVersion::V3_5));
        // Unquoted, YAML would call it a number; it is taken as written.
        let t = parse("etcd:\n  members: 5\n  version: 3.5\n").unwrap();
        assert_eq!(t.etcd.etcd_version(), Ok(EtcdVersion::V3_5));
        assert_eq!(
            parse("etcd:\n  version: \"3.4\"\n").unwrap(),
            Topology::default()
        );
        for bad in ["\"3.6\"", "\"3.5.30\"", "v3.5", "\"\"", "3.50"] {
            let e = parse(&format!("dns:\n  ttl: 5\netcd:\n  version: {bad}\n")).unwrap_err();
            assert_eq!(
                (e.line, e.field.as_str()),
                (4, "etcd.version"),
                "{bad}: {e}"
            );
            assert!(e.message.contains("\"3.4\" or \"3.5\""), "{bad}: {e}");
        }
    }

    #[test]
    fn an_error_after_loading_names_the_field_s_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.yaml");
        std::fs::write(
            &p,
            "# a comment\netcd:\n  version: \"3.5\"\n  snapshot_count: 1000\n",
        )
        .unwrap();
        let e = Topology::error_at(&p, "etcd.snapshot_count", "not here");
        assert_eq!(
            (e.line, e.field.as_str()),
            (4, "etcd.snapshot_count"),
            "{e}"
        );
        // A file gone since: the file and the field all the same.
        let e = Topology::error_at(&d.path().join("gone.yaml"), "etcd.operator", "x");
        assert_eq!((e.line, e.field.as_str()), (0, "etcd.operator"), "{e}");
    }

    #[test]
    fn the_default_fixture_spells_out_the_defaults_and_3_5_is_a_fixture() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/topologies");
        let t = Topology::load(&fixtures.join("default.yaml")).unwrap();
        assert_eq!(t, Topology::default());
        let t = Topology::load(&fixtures.join("etcd-3.5.yaml")).unwrap();
        assert_eq!(t.etcd.etcd_version(), Ok(EtcdVersion::V3_5));
        let e = Topology::load(&fixtures.join("bad/etcd-version.yaml")).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (4, "etcd.version"), "{e}");
    }

    #[test]
    fn duplicate_seed_name_points_at_the_second() {
        let e = parse(
            "seeds:\n  - name: seed-a\n    role: source\n  - name: seed-a\n    role: destination\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (4, "seeds[1].name"), "{e}");
        assert!(e.message.contains("duplicate"), "{e}");
    }

    #[test]
    fn unparseable_yaml_names_the_line() {
        let e = parse("seeds:\n  - name: a\n  role: [x\n").unwrap_err();
        assert!(e.line >= 3, "{e}");
        assert!(e.message.contains("YAML"), "{e}");
    }

    #[test]
    fn wrong_type_names_field() {
        let e = parse("etcd:\n  members: three\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert_eq!(e.field, "etcd.members", "{e}");
    }

    #[test]
    fn roles_and_names_are_checked() {
        let e = parse("seeds:\n  - name: a\n    role: source\n  - name: b\n    role: source\n")
            .unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (5, "seeds[1].role"), "{e}");
        assert!(e.message.contains("`source`, found 2"), "{e}");
        let e = parse(
            "seeds:\n  - name: Big_Seed\n    role: source\n  - name: b\n    role: destination\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "seeds[0].name"), "{e}");
        let e = parse(
            "seeds:\n  - name: clients\n    role: source\n  - name: b\n    role: destination\n",
        )
        .unwrap_err();
        assert!(e.message.contains("reserved"), "{e}");
        let e = parse("dns:\n  ttl: 0\n").unwrap_err();
        assert_eq!(e.field, "dns.ttl");
        let e = parse("network:\n  pool: 10.0.0.0/30\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "network.pool"), "{e}");
    }

    #[test]
    fn placement_puts_members_in_seeds() {
        let t = parse("etcd:\n  members: 3\n  placement: [seed-a, seed-a, seed-b]\n").unwrap();
        assert_eq!(t.member_seeds(), ["seed-a", "seed-a", "seed-b"]);
        assert_eq!(
            Topology::default().member_seeds(),
            ["seed-a", "seed-a", "seed-a"]
        );
        let e =
            parse("etcd:\n  members: 3\n  placement:\n    - seed-a\n    - seed-q\n    - seed-a\n")
                .unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (5, "etcd.placement[1]"), "{e}");
        let e = parse("etcd:\n  members: 3\n  placement: [seed-a]\n").unwrap_err();
        assert_eq!(e.field, "etcd.placement", "{e}");
    }

    #[test]
    fn api_exposure_and_readiness_probe_default_to_gardeners_and_are_checked() {
        let t = parse("").unwrap();
        assert_eq!(t.api.exposure, ApiExposure::Termination);
        let p = t.api.readiness_probe.timing("api.readiness_probe").unwrap();
        assert_eq!(
            (
                p.period_ms,
                p.timeout_ms,
                p.failure_threshold,
                p.initial_delay_ms
            ),
            (10_000, 15_000, 3, 10_000)
        );
        let t = parse("api:\n  exposure: passthrough\n").unwrap();
        assert_eq!(t.api.exposure, ApiExposure::Passthrough);
        let e = parse("dns:\n  ttl: 5\napi:\n  exposure: sni\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (4, "api.exposure"), "{e}");
        let e = parse("api:\n  replicas: 2\n  readiness_probe:\n    period: 0s\n").unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (4, "api.readiness_probe.period"),
            "{e}"
        );
        let e = parse("api:\n  readiness_probe:\n    failure_threshold: 0\n").unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (3, "api.readiness_probe.failure_threshold"),
            "{e}"
        );
        let e = parse("api:\n  readiness_probe:\n    timeout: soon\n").unwrap_err();
        assert_eq!(e.field, "api.readiness_probe.timeout", "{e}");
    }

    #[test]
    fn unreadable_file_is_an_error() {
        let e = Topology::load(Path::new("/nonexistent/t.yaml")).unwrap_err();
        assert!(e.message.contains("cannot read"));
    }
}
