//! The scenario file: one situation written down — the lab, the links, the
//! probes, the migration, a timeline of faults, and what must hold at the
//! end — that `cpmlab run` executes and judges. Parsed with unknown keys
//! refused and every error located (`file:line: field: message`); checked
//! as a whole before anything is created.

pub mod check;
pub mod trace;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::link::profile::{Direction, Distribution};
use crate::migrate::membership::Plan;
use crate::migrate::record::Driver;
use crate::topology::Topology;
use crate::yaml_file::FileError;

pub use check::Checked;

/// A scenario as written (defaults filled in).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// One line: what this scenario shows.
    #[serde(default)]
    pub description: String,
    /// Seed of the delay line's loss and jitter draws, so that a run can be
    /// replayed with the same packet fates; chosen and recorded when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The lab (any field of a topology file; defaults as
    /// fixtures/topologies/default.yaml).
    #[serde(default)]
    pub topology: Topology,
    /// A shoot of real size: objects written through the API after `up`,
    /// before the links are shaped and the probes start (`cpmlab fill`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<FillSpec>,
    /// Link profiles put in force before the probes start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkSpec>,
    /// A link trace replayed into a link while the scenario runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceSpec>,
    #[serde(default)]
    pub probes: ProbeSpec,
    /// The migration; absent: the probes run for `duration` with no migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<MigrationSpec>,
    /// How long the probes run at least, from their start (default 20s
    /// without a migration; with one, the migration's end is waited for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// How long the whole scenario takes on this project's machines (up to
    /// down), e.g. 4m: what `cpmlab run --shard K/N` balances shards by
    /// when no earlier run's wall time is given (`--durations`); absent, it
    /// is estimated from the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_duration: Option<String>,
    /// Actions at a time or at a migration step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<TimelineEntry>,
    /// What must hold at the end; every entry is a JUnit testcase.
    #[serde(default)]
    pub expect: Expect,
}

/// What `cpmlab fill` writes before the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FillSpec {
    /// How much, e.g. 500MiB.
    pub size: String,
    /// Each ConfigMap's payload (default 10KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_size: Option<String>,
    /// configmaps (default), leases: taking turns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<crate::fill::FillKind>,
}

impl FillSpec {
    pub fn object_size(&self) -> &str {
        self.object_size.as_deref().unwrap_or("10KiB")
    }
    pub fn kinds(&self) -> Vec<String> {
        if self.kinds.is_empty() {
            return vec!["configmaps".into()];
        }
        self.kinds
            .iter()
            .map(|k| format!("{k:?}").to_lowercase())
            .collect()
    }
}

/// One link profile, as `cpmlab link set` takes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Two networks, `A:B` (seed names or `clients`).
    pub between: String,
    /// `both` (default), `a-to-b` or `b-to-a`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// One-way delay, e.g. 25ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<Distribution>,
    /// Packet loss, e.g. 0.5%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<String>,
    /// Who drops the lost packets: `shaper` (default: the delay line or
    /// netem) or `kernel` (the router's forward path; needs the delay line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_by: Option<crate::link::profile::LossBy>,
    /// Rate limit, e.g. 100mbit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
}

/// A link trace (CSV or NDJSON; see `trace`) replayed into a link.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// The trace file, relative to the scenario file.
    pub file: String,
    /// The link it is replayed into, `A:B` (both directions).
    #[serde(default = "default_trace_pair")]
    pub between: String,
}

fn default_trace_pair() -> String {
    "seed-a:seed-b".into()
}

/// The probe clients, as `cpmlab probe start` takes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// Requests per second per probe and connection mode.
    #[serde(default = "default_rate")]
    pub rate: f64,
    /// Per-request timeout.
    #[serde(default = "default_timeout")]
    pub timeout: String,
    /// readyz, get, list, write, watch, informer (kube-rs), informer-go
    /// (client-go).
    #[serde(default = "default_probes")]
    pub probes: Vec<String>,
    /// new, reused, keepalive, node, late-dns.
    #[serde(default = "default_modes")]
    pub modes: Vec<String>,
    /// How long the late-dns lane's DNS cache keeps an answer past its
    /// TTL (default 60s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_dns: Option<String>,
    /// A write load beside the probes: new ConfigMaps per second (0: none).
    #[serde(default)]
    pub write_rate: f64,
    /// The size of each load object's data, in bytes.
    #[serde(default = "default_write_bytes")]
    pub write_bytes: usize,
    /// How long the probes run before the migration starts.
    #[serde(default = "default_warmup")]
    pub warmup: String,
    /// How long they run after the migration (and the timeline) ended;
    /// with `leader_election`, at least the handover's bound (lease + 2
    /// retry periods, 19 s), so that the destination's takeover is seen.
    #[serde(default = "default_cooldown")]
    pub cooldown: String,
    /// Leader-election candidates (client-go on one Lease), one per seed,
    /// each through its own seed's gateway to its own seed's API replicas,
    /// as the GEP's Lease Management has the seed's components hold their
    /// leases in the shoot. Absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_election: Option<LeaderElectionSpec>,
}

/// When each seed's candidate runs, and client-go's timings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaderElectionSpec {
    /// Seeds with a candidate (default: the source and the destination).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seeds: Vec<String>,
    /// The step at whose start the source's candidate stops (SIGTERM: it
    /// releases the lease), or `never`. Default `SourceSeedCleanup`: the
    /// source's components run until the source seed is cleaned up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_until: Option<String>,
    /// The step whose end (True) starts the destination's candidate, or
    /// `start` (with the probes). Default `DestinationKubeAPIServerReady`:
    /// the destination's components start once its API server serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_from: Option<String>,
    /// client-go's LeaseDuration (default 15s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration: Option<String>,
    /// client-go's RenewDeadline (default 10s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_deadline: Option<String>,
    /// client-go's RetryPeriod (default 2s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_period: Option<String>,
}

/// The default step the source's candidate stops at.
pub const SOURCE_UNTIL: &str = "SourceSeedCleanup";
/// The default step after which the destination's candidate starts.
pub const DESTINATION_FROM: &str = "DestinationKubeAPIServerReady";

impl LeaderElectionSpec {
    /// The seeds with a candidate: as written, else source and destination.
    pub fn seeds(&self, topology: &Topology) -> Vec<String> {
        if self.seeds.is_empty() {
            vec![
                topology.source().name.clone(),
                topology.destination().name.clone(),
            ]
        } else {
            self.seeds.clone()
        }
    }
    pub fn source_until(&self) -> &str {
        self.source_until.as_deref().unwrap_or(SOURCE_UNTIL)
    }
    pub fn destination_from(&self) -> &str {
        self.destination_from.as_deref().unwrap_or(DESTINATION_FROM)
    }
    /// The candidates that start with the probes: those not in the
    /// destination, and the destination's when `destination_from: start`.
    pub fn start_with_probes(&self, topology: &Topology) -> Vec<String> {
        let dest = &topology.destination().name;
        self.seeds(topology)
            .into_iter()
            .filter(|s| s != dest || self.destination_from() == "start")
            .collect()
    }
}

impl Default for ProbeSpec {
    fn default() -> Self {
        ProbeSpec {
            rate: default_rate(),
            timeout: default_timeout(),
            probes: default_probes(),
            modes: default_modes(),
            late_dns: None,
            write_rate: 0.0,
            write_bytes: default_write_bytes(),
            warmup: default_warmup(),
            cooldown: default_cooldown(),
            leader_election: None,
        }
    }
}

fn default_rate() -> f64 {
    20.0
}
fn default_timeout() -> String {
    "2s".into()
}
fn default_probes() -> Vec<String> {
    ["readyz", "get", "list", "write", "watch", "informer"]
        .map(String::from)
        .to_vec()
}
fn default_modes() -> Vec<String> {
    vec!["new".into(), "reused".into()]
}
fn default_write_bytes() -> usize {
    1024
}
fn default_warmup() -> String {
    "3s".into()
}
fn default_cooldown() -> String {
    "3s".into()
}

impl ProbeSpec {
    /// As `cpmlab probe start` flags take them.
    pub fn settings(&self, topology: &Topology) -> crate::probe::run::ProbeSettings {
        let le = self.leader_election.clone();
        let or = |v: Option<String>, d: &str| v.unwrap_or_else(|| d.to_string());
        crate::probe::run::ProbeSettings {
            rate: self.rate,
            timeout: self.timeout.clone(),
            probes: self.probes.join(","),
            modes: self.modes.join(","),
            late_dns: self
                .late_dns
                .clone()
                .unwrap_or_else(|| crate::probe::run::LATE_DNS.into()),
            write_rate: self.write_rate,
            write_bytes: self.write_bytes,
            candidates: le
                .as_ref()
                .map(|l| l.seeds(topology).join(","))
                .unwrap_or_default(),
            start_candidates: le
                .as_ref()
                .map(|l| l.start_with_probes(topology).join(","))
                .unwrap_or_default(),
            lease_duration: or(le.as_ref().and_then(|l| l.lease_duration.clone()), "15s"),
            renew_deadline: or(le.as_ref().and_then(|l| l.renew_deadline.clone()), "10s"),
            retry_period: or(le.as_ref().and_then(|l| l.retry_period.clone()), "2s"),
        }
    }
}

/// The migration, as `cpmlab migrate` takes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MigrationSpec {
    #[serde(default = "default_plan")]
    #[schemars(with = "PlanName")]
    pub plan: Plan,
    #[serde(default = "default_driver")]
    #[schemars(with = "DriverName")]
    pub driver: Driver,
    /// The external driver's command (`sh -c`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default)]
    pub force_shrink: bool,
    /// How the source leader leaves: `remove` (upstream's way, the default)
    /// or `move-leader` (MoveLeader to a destination voter first).
    #[serde(default)]
    pub leader_handover: crate::migrate::membership::LeaderHandover,
    /// The steps' order around the DNS switch: `gep` (GEP-0039's diagram,
    /// the default), `early-drain` (the lab's earlier order) or
    /// `dns-first` (the GEP's undecided alternative).
    #[serde(default)]
    pub order: crate::migrate::order::Order,
    /// What the source gateway does for the connections clients keep, once
    /// the record answers the destination: `none` (Gardener's objects as
    /// they are, the default), `drain-gateway` (its Gateway for the shoot
    /// deleted, Envoy drains 45 s), `drain-gateway-in-place` (the Gateway
    /// first changed so that Envoy drains with the routes intact, then
    /// deleted), `max-connection-age` (the gateways'
    /// `topology.api.gateway_max_connection_duration`) or `forward` (the
    /// source's routes for the API to the destination's gateway across the
    /// WAN until the cleanup). The GEP's orders.
    #[serde(default)]
    pub gateway_handover: crate::migrate::gateway_handover::GatewayHandover,
    /// How long SourceSeedCleanup's steps before the source API servers'
    /// deletion take (`gep`, `dns-first`); 60s when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup_before_api: Option<String>,
    #[serde(default)]
    pub allow_distant_regions: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rtt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join_timeout: Option<String>,
    /// Stop once this step is True (a timeline `migrate: resume` goes on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_after: Option<String>,
    /// Hold steps open this long once they started (step to duration), so
    /// that a fault lands inside a step that is otherwise over in a moment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hold: BTreeMap<String, String>,
}

/// GEP-0039's plan (five members while the API moves).
fn default_plan() -> Plan {
    Plan::FiveMember
}
fn default_driver() -> Driver {
    Driver::Reference
}

/// The plan's names, for the schema.
#[derive(JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)]
enum PlanName {
    SixMember,
    FiveMember,
    Rolling,
    Classic,
    Mirror,
}

#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum DriverName {
    Reference,
    External,
}

/// One timeline entry: a trigger (`at` or `when`) and exactly one action.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimelineEntry {
    /// Time from the start of the probes, e.g. 10s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// A migration step's transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    /// SIGKILL a member, an API replica or a gateway; a member or replica
    /// comes back as its pod would (the kubelet's restart with backoff).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill: Option<Target>,
    /// SIGKILL it and leave it stopped (its pod is gone; `restart` brings
    /// it back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Target>,
    /// Freeze it (docker pause).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<Target>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unpause: Option<Target>,
    /// Start it again (after a kill), or restart it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<Target>,
    /// Delete a member's or an API replica's pod as a rolling update
    /// does: SIGTERM (etcd hands its leadership over and stops, an API
    /// server drains), SIGKILL after `grace`, and the new pod's container
    /// started as soon as the old one is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete: Option<Target>,
    /// Drop everything on a link, `A:B`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heal: Option<String>,
    /// Change a link profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkSpec>,
    /// `resume` or `abort` the migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrate: Option<MigrateAction>,
    /// A branch the run may not take (a `when` entry only): held to
    /// account when it fires, no failed expectation when its transition
    /// never happens (the abort of a join that may complete).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// A step's transition, optionally some time after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// A condition type of `status.liveMigration.conditions`.
    pub step: String,
    /// `entering` (the step starts), `leaving` (it turned True) or
    /// `failed` (it turned False).
    #[serde(default)]
    pub on: StepEvent,
    /// How long after the transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StepEvent {
    #[default]
    Entering,
    Leaving,
    Failed,
}

/// What an action hits: exactly one of `member`, `api`, `gateway`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// `leader`, `follower`, `learner`, or `<seed>/<index>` (0-based, the
    /// seed's members in name order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// `<seed>/<index>`: an API server replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// A seed's gateway, by seed name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// A seed's leader-election candidate (`probes.leader_election`), by
    /// seed name: `kill` SIGKILLs it (no release), `stop` SIGTERMs it (it
    /// releases the lease), `pause`/`unpause` freeze and thaw it, `restart`
    /// starts it (again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<String>,
    /// A seed's gardenlet, by seed name (its container: `kill`, `stop`,
    /// `pause`, `restart` as any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gardenlet: Option<String>,
    /// A part of the garden: `api` (the garden's kube-apiserver, every
    /// gardenlet's and operator's way in), `gardener-apiserver` (behind
    /// it) or `etcd` (the garden's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub garden: Option<GardenPart>,
    /// With a role: only members in this seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// With `delete`: how long SIGTERM has before SIGKILL, e.g. 30s (the
    /// default: Kubernetes' terminationGracePeriodSeconds, which
    /// etcd-druid's StatefulSet leaves unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace: Option<String>,
}

/// A part of the garden a timeline action can hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum GardenPart {
    Api,
    GardenerApiserver,
    Etcd,
}

impl GardenPart {
    pub fn as_str(self) -> &'static str {
        match self {
            GardenPart::Api => "api",
            GardenPart::GardenerApiserver => "gardener-apiserver",
            GardenPart::Etcd => "etcd",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MigrateAction {
    Resume,
    Abort,
}

/// What must hold at the end of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// `pass` or `fail`: the verdict (`pass` holds for PASSED and for
    /// PASSED WITH KNOWN HAZARDS within `excuse`'s budgets); `safe`: only the
    /// safety rules must pass (no lost write, no ledger conflict, no missed
    /// watch event, no stale read, resource versions monotonic), while
    /// availability and latency are measured and reported, not asserted:
    /// for scenarios whose outcome is an etcd behaviour that costs an
    /// outage of varying length, where the lab's diagnosis is the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<VerdictExpect>,
    /// How the migration ends: `completed`, `failed`, `aborted`,
    /// `refused` (never started), `stopped` (after `stop_after`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<MigrationOutcome>,
    /// Longest allowed downtime per probe (`write`, `get/new`, `overall`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub downtime: BTreeMap<String, String>,
    /// Most failed requests allowed per probe (`write`, `get/new`, `overall`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed_requests: BTreeMap<String, u64>,
    /// Largest p99 per migration step (or `outside`) and request kind
    /// (`get`, `list`, `write`, `watch_delay`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub p99: BTreeMap<String, BTreeMap<String, String>>,
    /// The lab at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<EndState>,
    /// Known etcd hazards this run may meet, each with a budget, e.g.
    /// `{move-leader: {max: 1, max_ms: 7500}}`: `max` requests excused at
    /// most, none longer than `max_ms`, on `lanes` (`move-leader` and
    /// `killed-member`: `[write]` unless named; `leader-election` must name
    /// them). A failed request is excused only with evidence from outside
    /// the probes (etcd's history, the lab's events, etcd's logs); over
    /// budget the verdict fails; excused, it passes with known hazards.
    /// `downtime` and `failed_requests` count excused requests too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<BTreeMap<Hazard, crate::verdict::Budget>>")]
    pub excuse: Option<serde_json::Value>,
    /// A successful request slower than this counts as unavailable, not
    /// only as latency (default 5s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<String>,
    /// Checks this scenario accepts as not covered (or degraded), each with
    /// why: a lane in a step (`write/new@MigrateDNSRecords`), a lane's
    /// time without a request (`write/new@silence`),
    /// `writes-after-last-step`, `writes-after-last-hazard`, or a rule
    /// (`lost-writes`, `stale-reads`, `watch-continuity`, `informer`).
    /// Without it, a blind lane fails `verdict: pass`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub uncovered: BTreeMap<String, String>,
    /// The lab's diagnosis, for scenarios whose expected outcome is an etcd
    /// behaviour: warnings the members' logs must show (`peer-buffer-full`
    /// while the peer was connected, `member-add-refused`, `heartbeat-late`,
    /// `stream-lost`, `slow-apply`, `slow-fsync`, `became-leader`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub etcd_said: Vec<crate::verdict::etcd_said::Kind>,
    /// The verdict's latency limits, where the scenario needs others:
    /// `read_p99`, `list_p99`, `mutation_p99`, `watch_delay_p99`,
    /// `watch_grace` (as `cpmlab verdict` takes them).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub slo: BTreeMap<String, String>,
    /// Single rules of the verdict that must pass or fail, whatever the
    /// verdict as a whole (e.g. `{leader-kept: fail, lease-exclusive:
    /// pass}`): a rule passes when it does not fail the verdict (passed,
    /// skipped, or not covered and accepted).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rules: BTreeMap<String, RuleExpect>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RuleExpect {
    Pass,
    Fail,
}

/// The verdict's rules a scenario may name in `expect.rules` (and the
/// per-step `slo-*` rules).
pub const RULES: &[&str] = &[
    "zero-downtime",
    "coverage",
    "lost-writes",
    "ledger-conflicts",
    "watch-continuity",
    "watch-silence",
    "informer",
    "informer-go",
    "rv-monotonic",
    "stale-reads",
    "lease-exclusive",
    "leader-kept",
    "handover",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VerdictExpect {
    Pass,
    Fail,
    Safe,
}

impl VerdictExpect {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictExpect::Pass => "pass",
            VerdictExpect::Fail => "fail",
            VerdictExpect::Safe => "safe",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MigrationOutcome {
    Completed,
    Failed,
    Aborted,
    Refused,
    Stopped,
}

impl MigrationOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            MigrationOutcome::Completed => "completed",
            MigrationOutcome::Failed => "failed",
            MigrationOutcome::Aborted => "aborted",
            MigrationOutcome::Refused => "refused",
            MigrationOutcome::Stopped => "stopped",
        }
    }
}

pub use crate::verdict::Hazard;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndState {
    /// The seed the shoot API's DNS name points at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<String>,
    /// Voting etcd members per seed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub voters: BTreeMap<String, u32>,
    /// Condition status per type (`True`, `False`, `Unknown`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub conditions: BTreeMap<String, String>,
}

/// A scenario read from a file, checked, with where it came from.
#[derive(Debug, Clone)]
pub struct ScenarioFile {
    pub path: PathBuf,
    pub scenario: Scenario,
    pub checked: Checked,
}

impl ScenarioFile {
    /// The scenario's name: its file name without `.yaml`.
    pub fn name(&self) -> String {
        self.path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "scenario".into())
    }
}

/// The distance the garden's region ConfigMap gives the seeds' regions
/// when the topology does not say: the round trip the scenario's first
/// link between the two seeds declares (twice its delay, in ms; 0 without
/// one), as an operator would measure it between the regions.
pub fn seed_link_distance(s: &Scenario) -> u32 {
    let seeds: Vec<&str> = s.topology.seeds.iter().map(|x| x.name.as_str()).collect();
    s.links
        .iter()
        .find(|l| {
            l.between
                .split_once(':')
                .is_some_and(|(a, b)| seeds.contains(&a) && seeds.contains(&b) && a != b)
        })
        .and_then(|l| l.delay.as_deref())
        .and_then(|d| crate::link::profile::parse_duration("delay", d).ok())
        .map(|d| (2.0 * d.as_secs_f64() * 1e3).round() as u32)
        .unwrap_or(0)
}

/// Reads, parses and checks a scenario file.
pub fn load(path: &Path) -> Result<ScenarioFile, FileError> {
    let text = crate::yaml_file::read(path)?;
    parse(&text, path)
}

/// Parses and checks scenario YAML; `path` names it in errors and anchors
/// the trace file.
pub fn parse(text: &str, path: &Path) -> Result<ScenarioFile, FileError> {
    let (mut scenario, lines): (Scenario, _) = crate::yaml_file::parse(text, path)?;
    let checked = check::check(&scenario, path)
        .map_err(|(field, message)| lines.error(path, &field, message))?;
    if scenario.topology.garden.distance.is_none() {
        scenario.topology.garden.distance = Some(seed_link_distance(&scenario));
    }
    Ok(ScenarioFile {
        path: path.to_path_buf(),
        scenario,
        checked,
    })
}

/// Refuses, before any lab exists, a scenario the chosen form cannot run:
/// etcd-druid (`topology.etcd.operator: etcd-druid`) runs only on the kind
/// form. The error names the file, the line and the field.
pub fn check_form(sf: &ScenarioFile, kind: crate::state::ProviderKind) -> Result<(), FileError> {
    use crate::topology::EtcdOperator;
    if kind == crate::state::ProviderKind::Kind && sf.scenario.topology.api.wildcard_certificate {
        return Err(crate::yaml_file::error_at::<Scenario>(
            &sf.path,
            "topology.api.wildcard_certificate",
            "the kind form has no seed-bound server yet: run it on the docker form",
        ));
    }
    if kind == crate::state::ProviderKind::Kind
        || sf.scenario.topology.etcd.operator == EtcdOperator::Lab
    {
        return Ok(());
    }
    Err(crate::yaml_file::error_at::<Scenario>(
        &sf.path,
        "topology.etcd.operator",
        "etcd-druid runs only on the kind form: add --provider kind",
    ))
}

/// Scenario files named on the command line: files as given, directories
/// expanded to their `*.yaml` files in name order.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, FileError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| FileError::whole(p, format!("cannot read directory: {e}")))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file() && f.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            v.sort();
            if v.is_empty() {
                return Err(FileError::whole(p, "no *.yaml scenario files here"));
            }
            out.extend(v);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// The JSON Schema of the scenario format.
pub fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Scenario)).expect("a schema is JSON")
}

#[cfg(test)]
mod tests {
    use super::check::{Action, Role, TargetRef, Trigger};
    use super::*;
    use std::time::Duration;

    fn parse_str(s: &str) -> Result<ScenarioFile, FileError> {
        parse(s, Path::new("s.yaml"))
    }

    #[test]
    fn leader_election_follows_the_geps_schedule_unless_told_otherwise() {
        let f = parse_str(
            "description: candidates on one lease in both seeds\nprobes:\n  probes: [get, informer-go]\n  leader_election: {}\nmigration: {}\ntimeline:\n  - at: 20s\n    pause: {candidate: seed-a}\n",
        )
        .unwrap();
        let s = &f.scenario;
        let p = s.probes.settings(&s.topology);
        assert_eq!(p.candidates, "seed-a,seed-b");
        assert_eq!(p.start_candidates, "seed-a", "the destination's waits");
        assert_eq!(
            (
                p.lease_duration.as_str(),
                p.renew_deadline.as_str(),
                p.retry_period.as_str()
            ),
            ("15s", "10s", "2s")
        );
        assert_eq!(
            f.checked.cooldown,
            Duration::from_secs(19),
            "the handover's bound"
        );
        let t = &f.checked.timeline;
        assert_eq!(t.len(), 3);
        assert_eq!(
            t[0].action,
            Action::Pause(TargetRef::Candidate("seed-a".into()))
        );
        assert!(!t[0].scheduled);
        // The destination's starts when its API server is ready; the
        // source's stops as the source seed is cleaned up.
        assert_eq!(
            (&t[1].trigger, &t[1].action, t[1].scheduled),
            (
                &Trigger::Step {
                    step: "DestinationKubeAPIServerReady".into(),
                    on: StepEvent::Leaving,
                    after: Duration::ZERO
                },
                &Action::Restart(TargetRef::Candidate("seed-b".into())),
                true
            )
        );
        assert_eq!(
            (&t[2].trigger, &t[2].action),
            (
                &Trigger::Step {
                    step: "SourceSeedCleanup".into(),
                    on: StepEvent::Entering,
                    after: Duration::ZERO
                },
                &Action::Stop(TargetRef::Candidate("seed-a".into()))
            )
        );
        let f = parse_str(
            "description: both candidates from the start, the source's to the end\nprobes:\n  leader_election: {destination_from: start, source_until: never, retry_period: 1s}\nmigration: {}\n",
        )
        .unwrap();
        let p = f.scenario.probes.settings(&f.scenario.topology);
        assert_eq!(p.start_candidates, "seed-a,seed-b");
        assert_eq!(p.retry_period, "1s");
        assert!(f.checked.timeline.is_empty());
        // Without a migration nothing is scheduled: the source's runs.
        let f = parse_str("description: one candidate with no migration at all\nprobes:\n  leader_election: {seeds: [seed-a]}\n").unwrap();
        assert!(f.checked.timeline.is_empty());
        assert_eq!(
            f.scenario.probes.settings(&f.scenario.topology).candidates,
            "seed-a"
        );
    }

    #[test]
    fn bad_leader_election_settings_name_their_field() {
        for (yaml, field) in [
            ("probes:\n  leader_election: {seeds: [seed-c]}\n", "probes.leader_election.seeds[0]"),
            ("probes:\n  leader_election: {source_until: Cleanup}\n", "probes.leader_election.source_until"),
            ("probes:\n  leader_election: {retry_period: 9s}\n", "probes.leader_election.renew_deadline"),
            ("probes:\n  leader_election: {lease_duration: soon}\n", "probes.leader_election.lease_duration"),
            ("timeline:\n  - at: 1s\n    kill: {candidate: seed-a}\n", "timeline[0].kill.candidate"),
            ("probes:\n  leader_election: {seeds: [seed-a]}\ntimeline:\n  - at: 1s\n    kill: {candidate: seed-b}\n", "timeline[0].kill.candidate"),
            ("expect:\n  rules: {leader-held: pass}\n", "expect.rules.leader-held"),
        ] {
            let text = format!("description: a bad leader-election setting here\n{yaml}");
            let e = parse_str(&text).unwrap_err();
            assert_eq!(e.field, field, "{yaml}: {e}");
            assert!(e.line >= 2, "{yaml}: {e}");
        }
    }

    /// `expect.uncovered` takes every key the coverage rule gives a gap
    /// (docs/verdict.md), and refuses others at their field.
    #[test]
    fn uncovered_takes_the_coverage_rule_s_keys() {
        for key in [
            "write/new@MigrateDNSRecords",
            "watch/seed-bound@silence",
            "get/late-dns@none",
            "lab-events@end",
            "writes-after-last-step",
            "watch-continuity",
        ] {
            let text = format!(
                "description: an accepted gap\nexpect:\n  uncovered: {{\"{key}\": \"why\"}}\n"
            );
            let f = parse_str(&text).unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(f.scenario.expect.uncovered[key], "why", "{key}");
        }
        for key in ["watch/new@later", "watch@silence", "lab-events@start"] {
            let text = format!(
                "description: an unknown gap\nexpect:\n  uncovered: {{\"{key}\": \"why\"}}\n"
            );
            let e = parse_str(&text).unwrap_err();
            assert_eq!(e.field, format!("expect.uncovered.{key}"), "{e}");
        }
    }

    #[test]
    fn a_full_scenario_is_typed() {
        let f = parse_str(
            "description: leader killed in step 6\nseed: 7\nlinks:\n  - between: seed-a:seed-b\n    delay: 25ms\nmigration:\n  plan: five-member\n  hold: {EtcdMigrationComplete: 4s}\ntimeline:\n  - when: {step: EtcdMigrationComplete, after: 1s}\n    kill: {member: leader, seed: seed-a}\n  - at: 30s\n    heal: seed-a:seed-b\nexpect:\n  downtime: {write: 2s}\n  p99: {MigrateDNSRecords: {write: 1s}}\n  excuse: {leader-election: {max: 2, max_ms: 8000, lanes: [write]}}\n",
        )
        .unwrap();
        assert_eq!(f.name(), "s");
        assert_eq!(f.scenario.seed, Some(7));
        let m = f.scenario.migration.as_ref().unwrap();
        assert_eq!(m.plan, Plan::FiveMember);
        let c = &f.checked;
        assert_eq!(c.warmup, Duration::from_secs(3));
        assert_eq!(c.duration, Duration::ZERO, "with a migration: its end");
        assert_eq!(
            c.timeline[0].trigger,
            Trigger::Step {
                step: "EtcdMigrationComplete".into(),
                on: StepEvent::Entering,
                after: Duration::from_secs(1)
            }
        );
        assert_eq!(
            c.timeline[0].action,
            Action::Kill(TargetRef::MemberRole {
                role: Role::Leader,
                seed: Some("seed-a".into())
            })
        );
        assert_eq!(c.timeline[1].trigger, Trigger::At(Duration::from_secs(30)));
        assert_eq!(c.downtime["write"], Duration::from_secs(2));
        assert_eq!(
            c.p99[&("MigrateDNSRecords".to_string(), "write".to_string())],
            Duration::from_secs(1)
        );
    }

    /// `delete` is a pod's deletion: SIGTERM with Kubernetes' default
    /// grace unless the entry gives one; it hits members and API replicas
    /// only, and a grace on any other action is refused at its field.
    #[test]
    fn delete_is_a_pods_deletion_with_its_grace() {
        let f = parse_str(
            "description: a rolling restart of the source's members\ntimeline:\n  - at: 20s\n    delete: {member: seed-a/2}\n  - at: 45s\n    delete: {api: seed-a/0, grace: 5s}\n",
        )
        .unwrap();
        let t = &f.checked.timeline;
        assert_eq!(
            t[0].action,
            Action::Delete {
                target: TargetRef::Member {
                    seed: "seed-a".into(),
                    index: 2
                },
                grace: Duration::from_secs(30)
            }
        );
        assert_eq!(t[0].action.describe(), "delete member seed-a/2");
        assert_eq!(
            t[1].action,
            Action::Delete {
                target: TargetRef::Api {
                    seed: "seed-a".into(),
                    index: 0
                },
                grace: Duration::from_secs(5)
            }
        );
        for (entry, field) in [
            ("delete: {gateway: seed-a}", "timeline[0].delete"),
            (
                "kill: {member: seed-a/0, grace: 5s}",
                "timeline[0].kill.grace",
            ),
            (
                "delete: {member: seed-a/0, grace: soon}",
                "timeline[0].delete.grace",
            ),
        ] {
            let e = parse_str(&format!(
                "description: a bad delete entry\ntimeline:\n  - at: 5s\n    {entry}\n"
            ))
            .unwrap_err();
            assert_eq!(e.field, field, "{entry}: {e}");
        }
    }

    #[test]
    fn problems_name_their_line_and_field() {
        let e = parse_str("description: x\ntimeline:\n  - at: 5s\n    when: {step: MigrateDNSRecords}\n    heal: seed-a:seed-b\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (3, "timeline[0]"), "{e}");
        let e = parse_str(
            "description: x\nmigration: {}\ntimeline:\n  - at: 5s\n    kill: {member: seed-a/9}\n",
        )
        .unwrap_err();
        assert_eq!(e.field, "timeline[0].kill.member", "{e}");
        assert!(e.message.contains("at most 3"), "{e}");
        let e = parse_str("description: x\nmigration: {driver: external}\n").unwrap_err();
        assert_eq!(e.field, "migration.command", "{e}");
        let e = parse_str("description: x\nexpect:\n  slo: {read_p99: fast}\n").unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (3, "expect.slo.read_p99"),
            "{e}"
        );
        let e = parse_str("description: x\nexpect: {migration: completed}\n").unwrap_err();
        assert_eq!(e.field, "expect.migration", "{e}");
        let e = parse_str(
            "description: x\nmigration: {}\ntimeline:\n  - when: {step: MigrationCompleted, on: failed}\n    heal: seed-a:seed-b\n",
        )
        .unwrap_err();
        assert_eq!(e.field, "timeline[0].when.on", "{e}");
    }

    /// The seed-bound lane needs the seeds' wildcard certificate, which is
    /// built for TLS termination on the docker form: each gap is refused
    /// at its field.
    #[test]
    fn the_seed_bound_lane_needs_a_wildcard_certificate_on_the_docker_form() {
        use crate::state::ProviderKind;
        let e = parse_str("description: x\nprobes:\n  modes: [new, seed-bound]\n").unwrap_err();
        assert_eq!(e.field, "probes.modes", "{e}");
        assert!(e.message.contains("wildcard_certificate"), "{e}");
        let e = parse_str(
            "description: x\ntopology:\n  api: {exposure: passthrough, wildcard_certificate: true}\n",
        )
        .unwrap_err();
        assert_eq!(e.field, "topology.api.wildcard_certificate", "{e}");
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("bound.yaml");
        std::fs::write(
            &path,
            "description: x\ntopology:\n  api: {wildcard_certificate: true}\nprobes:\n  modes: [seed-bound]\n",
        )
        .unwrap();
        let f = load(&path).unwrap();
        check_form(&f, ProviderKind::Docker).unwrap();
        let e = check_form(&f, ProviderKind::Kind).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (3, "topology.api.wildcard_certificate"),
            "{e}"
        );
    }

    #[test]
    fn etcd_druid_is_refused_on_the_docker_form_at_its_line() {
        use crate::state::ProviderKind;
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("druid.yaml");
        std::fs::write(
            &path,
            "description: x\ntopology:\n  etcd:\n    version: \"3.5\"\n    operator: etcd-druid\nmigration: {}\n",
        )
        .unwrap();
        let f = load(&path).unwrap();
        check_form(&f, ProviderKind::Kind).unwrap();
        let e = check_form(&f, ProviderKind::Docker).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (5, "topology.etcd.operator"),
            "{e}"
        );
        assert!(e.message.contains("--provider kind"), "{e}");
        // The lab's own etcd runs on either form.
        std::fs::write(&path, "description: x\nmigration: {}\n").unwrap();
        let f = load(&path).unwrap();
        check_form(&f, ProviderKind::Docker).unwrap();
        // druid's etcd is 3.5: beside 3.4 the file itself is refused.
        let e =
            parse_str("description: x\ntopology:\n  etcd: {operator: etcd-druid}\n").unwrap_err();
        assert_eq!(e.field, "topology.etcd.operator", "{e}");
    }

    #[test]
    fn the_schema_refuses_unknown_keys() {
        let s = schema();
        assert_eq!(s["additionalProperties"], false);
        assert!(s["properties"]["timeline"].is_object());
    }
}
