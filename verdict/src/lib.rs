//! cpmlab-verdict: the verdict of a Live CPM run. Probe records, lab
//! events, what was read back from etcd after the run and the etcd
//! members' logs in; a judgement, `verdict.json`, `junit.xml` and
//! `report.html` out. No Docker, no lab state, no network: anyone with
//! records from a real landscape can judge them. [`judge`] is pure; one
//! module per rule ([`availability`], [`ledger`], [`watch`], [`watch_silence`], [`informer`],
//! [`lease`], [`reads`], [`slo`], [`coverage`]), the known hazards in
//! [`excuse`];
//! [`junit`] and [`report`] render a [`Verdict`] for CI and for people;
//! [`run_dir`] reads and writes a run directory, every file by one rule
//! for input it cannot read ([`load`]), by the directory's [`layout`]
//! (what a missing file or an older layout leaves not covered or
//! degraded); [`history`] reads the counter's history watched while the
//! run went; [`saturation`] finds where the lab's machine was saturated.
//!
//! Definitions (the numbers in `verdict.json` mean exactly this):
//! - A *request* is every record [`is_request`] names: all records of
//!   readyz, get, list and write (a write's `read` too); of a watch its
//!   `connect` and `read` records, its broken streams and the ERROR events
//!   it received (but a 410 Gone, which is how a watch is told to start
//!   afresh); of each informer (kube-rs' and client-go's) its list and
//!   watch requests and its broken or failed watches. The leader-election
//!   candidates' lock requests are no requests of the shoot's API: they go
//!   to their own seed's API servers, and the [`lease`] rules judge them.
//!   Attempts refused unprocessed and retried, and
//!   superseded writes, are judged otherwise: see [`availability`]. A
//!   request failed when its outcome is not `ok` or it was a stall (slower
//!   than the stall bound). Zero downtime means zero failed requests.
//! - The *window* runs from the probes' start to their stop as the lab
//!   noted them in `events.ndjson` (`probes started`, `probes stopped`);
//!   for a run without those notes, from the first to the last record
//!   start.
//! - Unavailable intervals and downtime: see [`availability`].
//! - Quantiles are nearest-rank over the durations of successful requests.
//! - Every figure is raw: the records are never rewritten. A failed request
//!   a known hazard explains is *excused* (see [`excuse`]) and listed, with
//!   its hazard and evidence, beside the raw figures.
//!
//! Each rule ends in one status ([`RuleStatus`]): `passed`; `excused` (it
//! holds only because failed requests were excused within their budgets);
//! `failed`; `not-covered` (it had too little to judge: see [`coverage`]);
//! `degraded` (it could judge only part: the lost-writes check with the
//! counter but not its history, `lease-exclusive` without the Lease's
//! history); `skipped` (it does not apply: the probe it
//! reads did not run, or a phase too short to hold a sample). The scenario
//! may accept a not-covered or degraded rule by naming it with why
//! (`Criteria::uncovered`); the rule then carries that reason.
//!
//! The verdict has three outcomes ([`Status`]):
//! - **FAILED** when a rule failed, or is not covered or degraded without
//!   the scenario accepting it;
//! - **PASSED WITH KNOWN HAZARDS** when no rule failed but one holds only
//!   by what the scenario declared: failed requests excused within the
//!   hazards' budgets, or a check accepted as not covered or degraded;
//! - **PASSED** otherwise: every rule passed or does not apply.
//!
//! Both passes exit 0; FAILED exits 1.

pub mod availability;
pub mod context;
pub mod coverage;
pub mod criteria;
pub mod drained_readyz;
pub mod election;
pub mod error;
pub mod etcd_said;
pub mod excuse;
pub mod handoff;
pub mod history;
pub mod informer;
pub mod integrity;
pub mod junit;
pub mod layout;
pub mod lease;
pub mod ledger;
pub mod linearizable;
pub mod load;
pub mod mechanisms;
pub mod migration;
pub mod reads;
pub mod record;
pub mod report;
pub mod run_dir;
pub mod saturation;
pub mod size;
pub mod slo;
pub mod validator;
pub mod watch;
pub mod watch_end;
pub mod watch_silence;

pub use criteria::{Budget, Criteria, Hazard};
pub use error::{Error, Result};
pub use excuse::{Excused, Excuses, HazardSummary, HazardWindow};
pub use junit::junit;
pub use ledger::{Ledger, LedgerConflict, RvRegression};
pub use load::{read_events, read_final, read_records};
pub use reads::{StaleRead, StaleReads};
pub use report::html;
pub use slo::PhaseLatency;
pub use validator::ValidatorSim;
pub use watch::{WatchAnomaly, WatchCheck, WatchMiss};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use record::{ConnMode, FinalRead, LabEvent, Outcome, ProbeKind, ProbePlan, Record};

/// Gardener's zero-downtime validator curls /healthz at this interval ...
pub const VALIDATOR_INTERVAL_MS: f64 = 10_000.0;
/// ... and fails after this many consecutive failures.
pub const VALIDATOR_FAILURES_TO_FAIL: u64 = 3;
/// Most unavailable intervals listed per probe in `verdict.json` (all are
/// counted and summed; only the list is capped).
pub const MAX_LISTED_INTERVALS: usize = 200;
/// Most entries listed per anomaly kind (lost writes, missed events, ...);
/// the counts are always complete.
pub const MAX_LISTED_ANOMALIES: usize = 1000;

/// The limits the verdict checks against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Thresholds {
    /// p99 latency bound for single-object reads (get), per phase
    /// (Kubernetes' API latency SLO: 1 s).
    pub read_p99_ms: f64,
    /// p99 latency bound for namespaced lists, per phase (SLO: 5 s).
    pub list_p99_ms: f64,
    /// p99 latency bound for mutations (write), per phase (SLO: 1 s).
    pub mutation_p99_ms: f64,
    /// p99 bound from a write's acknowledgement to the watch event that
    /// carried it, per phase: the lab's own bound (Kubernetes sets none).
    pub watch_delay_p99_ms: f64,
    /// A write acknowledged less than this long before the end of the window
    /// is not expected in the watch stream yet (the agent stopped first).
    pub watch_grace_ms: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            read_p99_ms: 1000.0,
            list_p99_ms: 5000.0,
            mutation_p99_ms: 1000.0,
            watch_delay_p99_ms: 1000.0,
            watch_grace_ms: 1000.0,
        }
    }
}

/// The probes' window, unix milliseconds (see the crate doc).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start_unix_ms: f64,
    pub end_unix_ms: f64,
}

impl Window {
    pub fn duration_ms(&self) -> f64 {
        self.end_unix_ms - self.start_unix_ms
    }
}

/// A half-open time interval, unix milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub start_unix_ms: f64,
    pub end_unix_ms: f64,
}

impl Interval {
    pub fn duration_ms(&self) -> f64 {
        (self.end_unix_ms - self.start_unix_ms).max(0.0)
    }
}

/// Nearest-rank quantiles over the durations of successful requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// How many successful requests the quantiles are over.
    pub count: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Availability of one probe and connection mode, or of all of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeStats {
    pub requests: u64,
    /// Requests that did not fail (neither a failed outcome nor a stall).
    pub ok: u64,
    /// Failed requests by class (`timeout`, `refused`, `stall`, ...).
    pub failures: BTreeMap<String, u64>,
    /// Attempts the server refused unprocessed that the client retried
    /// (judged by the retry, not counted in `requests`).
    #[serde(default)]
    pub retried: u64,
    /// Of `retried`: after the Retry-After wait the server asked for.
    #[serde(default)]
    pub retried_after_wait: u64,
    /// Writes another of the writer's writes superseded (409 Conflict; not
    /// counted in `requests`).
    #[serde(default)]
    pub superseded: u64,
    /// Readyz a draining API server answered with its etcd checks stopped
    /// (see [`drained_readyz`]; not counted in `requests`).
    #[serde(default)]
    pub drained_readyz: u64,
    /// Watch streams the peer closed that ended as client-go ends a watch
    /// (see [`watch_end`]; not counted in `requests`).
    #[serde(default)]
    pub watch_ends: u64,
    /// Of the failed: successful requests slower than the stall bound.
    #[serde(default)]
    pub stalled: u64,
    /// Of the failed: excused by a known hazard (still counted as failed).
    #[serde(default)]
    pub excused: u64,
    /// ok / requests × 100 (100 when there were no requests).
    pub availability_pct: f64,
    /// Sum of unavailable intervals (overall: of their union).
    pub downtime_ms: f64,
    pub longest_unavailable_ms: f64,
    /// How many unavailable intervals there were.
    pub unavailable_count: u64,
    /// The first [`MAX_LISTED_INTERVALS`] of them, in time order.
    pub unavailable: Vec<Interval>,
    /// Over successful requests; `None` overall (mixing probes means nothing)
    /// and when nothing succeeded.
    pub latency: Option<Latency>,
}

impl ProbeStats {
    pub fn failed(&self) -> u64 {
        self.requests - self.ok
    }
}

/// How a rule ended (see the crate's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleStatus {
    Passed,
    /// Holds only because failed requests were excused within budget.
    Excused,
    Failed,
    /// Too little to judge (a blind lane, nothing acknowledged, ...).
    NotCovered,
    /// Judged in part only (lost writes: the counter, not its history;
    /// lease-exclusive: the candidates, not etcd's Lease history).
    Degraded,
    /// Does not apply: the probe it reads did not run, or the phase is too
    /// short to hold a sample.
    Skipped,
}

impl RuleStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleStatus::Passed => "passed",
            RuleStatus::Excused => "excused",
            RuleStatus::Failed => "failed",
            RuleStatus::NotCovered => "not covered",
            RuleStatus::Degraded => "degraded",
            RuleStatus::Skipped => "skipped",
        }
    }
}

/// One verdict rule and its outcome. `message` is the failing reason, or
/// why the rule was skipped or not covered, or a one-line summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub name: String,
    pub status: RuleStatus,
    pub message: String,
}

impl Rule {
    /// A rule with nothing to check: not covered when its probe was told
    /// to run (`blind` says what went unchecked), skipped when it was not
    /// (`not_run`).
    pub fn unchecked(name: String, ran: bool, blind: &str, not_run: &str) -> Rule {
        Rule {
            name,
            status: if ran {
                RuleStatus::NotCovered
            } else {
                RuleStatus::Skipped
            },
            message: if ran { blind } else { not_run }.to_string(),
        }
    }

    /// Whether this rule makes the verdict fail, given the not-covered or
    /// degraded rules the scenario accepts (rule name to why).
    pub fn fails(&self, accepted: &BTreeMap<String, String>) -> bool {
        match self.status {
            RuleStatus::Failed => true,
            RuleStatus::NotCovered | RuleStatus::Degraded => !accepted.contains_key(&self.name),
            _ => false,
        }
    }

    /// Whether it holds only by what the scenario declared.
    pub fn by_declaration(&self, accepted: &BTreeMap<String, String>) -> bool {
        match self.status {
            RuleStatus::Excused => true,
            RuleStatus::NotCovered | RuleStatus::Degraded => accepted.contains_key(&self.name),
            _ => false,
        }
    }
}

/// The verdict's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Passed,
    PassedWithKnownHazards,
    Failed,
}

impl Status {
    /// As the report and the CLI say it.
    pub fn headline(self) -> &'static str {
        match self {
            Status::Passed => "PASSED",
            Status::PassedWithKnownHazards => "PASSED WITH KNOWN HAZARDS",
            Status::Failed => "FAILED",
        }
    }

    pub fn passed(self) -> bool {
        self != Status::Failed
    }

    /// Green, amber, red.
    pub fn colour(self) -> &'static str {
        match self {
            Status::Passed => "#2a7",
            Status::PassedWithKnownHazards => "#d89000",
            Status::Failed => "#c33",
        }
    }

    /// The outcome of rules.
    pub fn of(rules: &[Rule], accepted: &BTreeMap<String, String>) -> Status {
        if rules.iter().any(|r| r.fails(accepted)) {
            Status::Failed
        } else if rules.iter().any(|r| r.by_declaration(accepted)) {
            Status::PassedWithKnownHazards
        } else {
            Status::Passed
        }
    }
}

/// Everything `verdict.json` says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// PASSED, PASSED WITH KNOWN HAZARDS or FAILED.
    pub status: Status,
    pub window: Window,
    /// `status` is not FAILED.
    pub passed: bool,
    /// Why it failed: the rules that fail it, with their messages.
    pub reasons: Vec<String>,
    /// Raw: no request failed at all.
    pub zero_downtime: bool,
    pub thresholds: Thresholds,
    /// What it was judged against.
    pub criteria: Criteria,
    /// Every rule, in a fixed order; the JUnit testcases.
    pub rules: Vec<Rule>,
    /// Rules not covered or degraded that the scenario accepts, with why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub accepted: BTreeMap<String, String>,
    pub overall: ProbeStats,
    /// Keyed `probe/mode`, e.g. `get/new`.
    pub probes: BTreeMap<String, ProbeStats>,
    /// The first failed requests (at most 100), in start order, excused or
    /// not.
    #[serde(default)]
    pub failed_requests: Vec<availability::FailedRequest>,
    /// Why requests failed, one line per mechanism (the clients, the seed
    /// that answered and what, the window and the steps it lies in).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mechanisms: Vec<mechanisms::Mechanism>,
    /// Watch and informer lanes that went without an event while writes
    /// were acknowledged (the stream open, nothing failed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub silent_watches: Vec<mechanisms::Silence>,
    /// What the accepted hazards excused, with evidence; their budgets;
    /// every hazard window of the run.
    pub excuses: Excuses,
    /// Readyz a draining API server answered, set aside with the evidence
    /// that matched each (see [`drained_readyz`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drained_readyz: Vec<drained_readyz::DrainedReadyz>,
    pub coverage: coverage::CoverageCheck,
    pub ledger: Ledger,
    pub watch: WatchCheck,
    /// The informer lane: what a controller's list+watch saw.
    #[serde(default)]
    pub informer: informer::InformerCheck,
    /// The same, through client-go's shared informer.
    #[serde(default)]
    pub informer_go: informer::InformerCheck,
    /// The leader-election candidates: who led when, and what etcd says.
    #[serde(default)]
    pub lease: lease::LeaseCheck,
    #[serde(default)]
    pub stale_reads: StaleReads,
    /// The counter's reads and writes against etcd's history, as one
    /// register (see [`linearizable`]).
    #[serde(default)]
    pub linearizable: linearizable::Linearizability,
    /// Whether the records are what the probes could have written.
    #[serde(default)]
    pub integrity: integrity::Integrity,
    /// What the run directory held: its layout, what was dropped, what
    /// the rules needed and did not find (see [`layout`]).
    #[serde(default)]
    pub inputs: layout::InputsCheck,
    /// The windows in which the lab's machine was saturated (see
    /// [`saturation`]), and how many failed requests lie in them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub saturated: Vec<saturation::Saturated>,
    #[serde(default)]
    pub saturated_failures: u64,
    pub rv_regressions: Vec<RvRegression>,
    pub rv_regression_count: u64,
    /// In band order, `outside` last.
    pub phases: Vec<PhaseLatency>,
    pub validator: ValidatorSim,
}

/// Whether a rule is about availability, liveness or latency
/// (`zero-downtime`, `watch-silence`, `leader-kept`, `handover`, the per-step `slo-*`
/// limits) rather than safety (lost writes, watch continuity, stale reads,
/// `lease-exclusive`, ...): `verdict: safe` asserts only the latter.
pub fn is_availability_rule(name: &str) -> bool {
    name == availability::RULE
        || name == watch_silence::RULE
        || name == lease::RULE_KEPT
        || name == lease::RULE_HANDOVER
        || name.starts_with(slo::RULE_PREFIX)
}

impl Verdict {
    pub fn rule(&self, name: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.name == name)
    }
}

/// The lowercase name serde gives a probe kind.
pub fn probe_name(p: ProbeKind) -> &'static str {
    match p {
        ProbeKind::Readyz => "readyz",
        ProbeKind::Get => "get",
        ProbeKind::List => "list",
        ProbeKind::Write => "write",
        ProbeKind::Watch => "watch",
        ProbeKind::Informer => "informer",
        ProbeKind::Load => "load",
        ProbeKind::InformerGo => "informer-go",
        ProbeKind::Lease => "lease",
    }
}

pub fn mode_name(m: ConnMode) -> &'static str {
    match m {
        ConnMode::New => "new",
        ConnMode::Reused => "reused",
        ConnMode::Keepalive => "keepalive",
        ConnMode::Node => "node",
        ConnMode::LateDns => "late-dns",
        ConnMode::SeedBound => "seed-bound",
    }
}

pub fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Ok => "ok",
        Outcome::Http => "http",
        Outcome::Timeout => "timeout",
        Outcome::Refused => "refused",
        Outcome::Reset => "reset",
        Outcome::Dns => "dns",
        Outcome::Tls => "tls",
        Outcome::Decode => "decode",
        Outcome::Error => "error",
    }
}

/// `probe/mode`, the key of [`Verdict::probes`].
pub fn lane_key(p: ProbeKind, m: ConnMode) -> String {
    format!("{}/{}", probe_name(p), mode_name(m))
}

/// Whether a record is a request (see the module's definitions).
pub fn is_request(r: &Record) -> bool {
    match r.probe {
        ProbeKind::Watch => match r.event.as_deref() {
            None => true,
            Some(e) if e.eq_ignore_ascii_case("connect") => true,
            Some("read" | "broken") => true,
            Some("ERROR") => r.http_status != Some(410),
            Some(_) => false,
        },
        ProbeKind::Informer | ProbeKind::InformerGo => {
            crate::record::informer_event::is_request(r.event.as_deref())
        }
        // The candidates' lock requests go their own seed's way, not the
        // public name's: the lease rules judge them.
        ProbeKind::Lease => false,
        _ => true,
    }
}

fn record_end(r: &Record) -> f64 {
    r.start_unix_ms + r.duration_ms.max(0.0)
}

/// Time order: start, then seq.
fn by_start(a: &&Record, b: &&Record) -> std::cmp::Ordering {
    a.start_unix_ms
        .total_cmp(&b.start_unix_ms)
        .then(a.seq.cmp(&b.seq))
}

/// Nearest-rank quantile of sorted values: the value at rank ⌈p/100 · n⌉.
pub fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// Quantiles of the durations, `None` when empty.
pub fn latency_of(mut durations: Vec<f64>) -> Option<Latency> {
    if durations.is_empty() {
        return None;
    }
    durations.sort_by(f64::total_cmp);
    Some(Latency {
        count: durations.len() as u64,
        p50_ms: nearest_rank(&durations, 50.0),
        p99_ms: nearest_rank(&durations, 99.0),
        max_ms: *durations.last().unwrap(),
    })
}

fn fmt_ms(ms: f64) -> String {
    if ms.fract() == 0.0 || ms >= 100.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

fn fmt_list<T: std::fmt::Display>(v: &[T], total: u64) -> String {
    let shown: Vec<String> = v.iter().take(10).map(|x| x.to_string()).collect();
    let more = total.saturating_sub(shown.len() as u64);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Each count that is not zero, as "<n> <what>".
pub(crate) fn counted(items: &[(u64, &str)]) -> Vec<String> {
    items
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect()
}

/// A phase name as a rule-name fragment: lowercase, `-` for anything odd.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let t = out.trim_matches('-');
    if t.is_empty() {
        "phase".into()
    } else {
        t.into()
    }
}

fn push_capped<T>(v: &mut Vec<T>, count: &mut u64, x: T) {
    *count += 1;
    if v.len() < MAX_LISTED_ANOMALIES {
        v.push(x);
    }
}

/// The phase bands: `phase` events with an end.
pub fn phase_bands(events: &[LabEvent]) -> Vec<&LabEvent> {
    let mut v: Vec<&LabEvent> = events
        .iter()
        .filter(|e| e.kind == "phase" && e.end_unix_ms.is_some())
        .collect();
    v.sort_by(|a, b| a.at_unix_ms.total_cmp(&b.at_unix_ms));
    v
}

/// What a run left, as the verdict reads it.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub records: &'a [Record],
    pub events: &'a [LabEvent],
    pub final_read: &'a FinalRead,
    /// Elections from the etcd members' logs.
    pub elections: &'a [election::Election],
    /// What the probes were told to do (`probes.json`), when kept.
    pub plan: Option<&'a ProbePlan>,
    /// The API servers' listeners closing, from their logs.
    pub listeners_closed: &'a [drained_readyz::ListenerClosed],
    /// What the run directory held (none: records judged without one).
    pub present: Option<&'a layout::Present>,
    /// The machine's CPU over the run (`cpu.ndjson`).
    pub cpu: &'a [context::CpuSample],
}

/// Compute the verdict from the records and lab events of one run and what
/// was read back after it, with the default criteria (nothing excused, no
/// etcd logs): as `cpmlab verdict` judges a bare directory of records.
pub fn compute(
    records: &[Record],
    events: &[LabEvent],
    final_read: &FinalRead,
    thresholds: &Thresholds,
) -> Verdict {
    judge(
        &Inputs::bare(records, events, final_read),
        &Criteria {
            thresholds: thresholds.clone(),
            ..Criteria::default()
        },
    )
}

impl<'a> Inputs<'a> {
    /// Records, lab events and what was read back alone: no etcd logs, no
    /// plan, no run directory, no CPU samples.
    pub fn bare(
        records: &'a [Record],
        events: &'a [LabEvent],
        final_read: &'a FinalRead,
    ) -> Inputs<'a> {
        Inputs {
            records,
            events,
            final_read,
            elections: &[],
            plan: None,
            listeners_closed: &[],
            present: None,
            cpu: &[],
        }
    }
}

/// Whether the probes ran `kind`: the plan says so, or a record shows it.
fn ran(inputs: &Inputs, all: &[&Record], kind: ProbeKind) -> bool {
    inputs.plan.is_some_and(|p| p.probes.contains(&kind)) || all.iter().any(|r| r.probe == kind)
}

/// The not-covered or degraded rules the scenario accepts, with why: by
/// the rule's name in `uncovered`, or (coverage) every gap's key there.
fn accepted(
    rules: &[Rule],
    cov: &coverage::CoverageCheck,
    criteria: &Criteria,
    inputs: &layout::InputsCheck,
) -> BTreeMap<String, String> {
    // Rules the run directory's inputs left not covered or degraded: only
    // the scenario's naming them accepts that.
    let by_inputs = |name: &str| {
        inputs
            .missing
            .iter()
            .any(|m| m.rules.iter().any(|r| r == name))
            || inputs
                .lacking
                .iter()
                .any(|l| l.rules.iter().any(|r| r == name))
    };
    let mut out = BTreeMap::new();
    for r in rules {
        if !matches!(r.status, RuleStatus::NotCovered | RuleStatus::Degraded) {
            continue;
        }
        if let Some(why) = criteria.uncovered.get(&r.name) {
            out.insert(r.name.clone(), why.clone());
        } else if r.name == coverage::RULE
            && r.status == RuleStatus::NotCovered
            && !by_inputs(&r.name)
            && !cov.gaps.is_empty()
            && cov.gaps.iter().all(|g| g.accepted.is_some())
        {
            let why: Vec<String> = cov
                .gaps
                .iter()
                .map(|g| format!("{}: {}", g.key, g.accepted.as_deref().unwrap_or("")))
                .collect();
            out.insert(r.name.clone(), why.join("; "));
        }
    }
    out
}

/// Judge one run against its criteria.
pub fn judge(inputs: &Inputs, criteria: &Criteria) -> Verdict {
    let thresholds = &criteria.thresholds;
    let mut all: Vec<&Record> = inputs.records.iter().collect();
    all.sort_by(by_start);
    // The probes' window: the leader-election candidates' records do not
    // stretch it (they run on while the informers catch up, and are judged
    // by the lease rules alone).
    let probes = || all.iter().filter(|r| r.probe != ProbeKind::Lease);
    // The probes' start and stop as the lab noted them, else the first and
    // last record start (a run written elsewhere).
    // While the probes were sending: the first to the last record start.
    // A watch is shut down with its agent, so the watch rule's grace for the
    // last writes runs to the last start, not to the stop note.
    let sending = Window {
        start_unix_ms: probes().next().map_or(0.0, |r| r.start_unix_ms),
        end_unix_ms: probes().next_back().map_or(0.0, |r| r.start_unix_ms),
    };
    let dropped = inputs.present.map_or(&[][..], |p| &p.dropped[..]);
    let integrity = integrity::check(&all, inputs.events, inputs.plan, dropped);
    let window = match integrity.window {
        Some((start_unix_ms, end_unix_ms)) => Window {
            start_unix_ms,
            end_unix_ms,
        },
        None => sending,
    };
    let drained = drained_readyz::find(&all, inputs.listeners_closed);
    let classify = availability::Classify::new(&all, criteria.stall_ms)
        .with_drained_readyz(drained.iter().map(|d| d.seq));
    let silent_watches = mechanisms::silent_watches(&all, inputs.events, window.start_unix_ms);
    let silent: Vec<(String, Interval)> = silent_watches
        .iter()
        .map(|s| (s.lane.clone(), s.interval()))
        .collect();
    let mut avail = availability::availability(&all, &classify, &silent);
    // Failures where the lab's machine was saturated: no hazard excuses
    // them (see `saturation`).
    let saturated = saturation::windows(inputs.cpu, criteria.saturation_pct);
    let excusable: Vec<&Record> = avail
        .failed
        .iter()
        .copied()
        .filter(|r| saturation::of(&saturated, r).next().is_none())
        .collect();
    let saturated_failures = (avail.failed.len() - excusable.len()) as u64;
    let excuses = excuse::excuse(
        &excusable,
        &all,
        inputs.events,
        inputs.elections,
        inputs.final_read,
        criteria,
    );
    let excused = excuse::excused_seqs(&excuses);
    for r in &avail.failed {
        if excused.contains_key(&r.seq) {
            avail.overall.excused += 1;
            if let Some(s) = avail.probes.get_mut(&lane_key(r.probe, r.mode)) {
                s.excused += 1;
            }
        }
    }
    let zero_downtime = !avail.requests.is_empty() && avail.overall.failed() == 0;
    let ledger = ledger::ledger(&all, inputs.final_read);
    let watch = watch::check(&all, &sending, thresholds);
    let informer = informer::check(&all, inputs.events, ProbeKind::Informer);
    let informer_go = informer::check(&all, inputs.events, ProbeKind::InformerGo);
    // The candidates are judged over their own records too: they run on
    // while the informers catch up, and what they believe then counts.
    let lease_window = Window {
        start_unix_ms: all.first().map_or(0.0, |r| r.start_unix_ms),
        end_unix_ms: all.last().map_or(0.0, |r| r.start_unix_ms),
    };
    let lease = lease::check(
        &all,
        inputs.events,
        inputs.final_read,
        &lease_window,
        criteria,
    );
    let stale_reads = reads::check(&all);
    let linearizable = linearizable::check(&all, inputs.final_read);
    let (rv_regressions, rv_regression_count) = ledger::rv_regressions(&all);
    let phases = slo::phases(&avail.requests, &all, inputs.events, thresholds);
    let validator = validator::validator_sim(&avail.requests, &sending);
    // Coverage runs from the probes' start to the end of their sending: a
    // lane's tail is judged to the last request start of any lane.
    let coverage_window = Window {
        start_unix_ms: window.start_unix_ms,
        end_unix_ms: sending
            .end_unix_ms
            .max(window.start_unix_ms)
            .min(window.end_unix_ms),
    };
    let coverage = coverage::check(
        &all,
        inputs.events,
        inputs.plan,
        &excuses.windows,
        &coverage_window,
        criteria,
    );
    let writes = ran(inputs, &all, ProbeKind::Write);
    let reads = ran(inputs, &all, ProbeKind::Get) || ran(inputs, &all, ProbeKind::List);
    let candidates = ran(inputs, &all, ProbeKind::Lease);

    // Rules, in a fixed order.
    let mut rules = vec![
        integrity::rule(&integrity),
        availability::rule(&avail, &excuses),
        coverage::rule(&coverage),
        ledger::lost_writes_rule(&ledger, writes),
        ledger::ledger_conflicts_rule(&ledger),
        watch::rule(&watch, ran(inputs, &all, ProbeKind::Watch)),
        watch_silence::rule(
            &silent_watches,
            [ProbeKind::Watch, ProbeKind::Informer, ProbeKind::InformerGo]
                .into_iter()
                .any(|p| ran(inputs, &all, p)),
        ),
        informer::rule(
            &informer,
            ProbeKind::Informer,
            ran(inputs, &all, ProbeKind::Informer),
            criteria.informer_relists.unwrap_or(0),
        ),
        informer::rule(
            &informer_go,
            ProbeKind::InformerGo,
            ran(inputs, &all, ProbeKind::InformerGo),
            criteria.informer_relists.unwrap_or(0),
        ),
        lease::exclusive_rule(&lease, candidates),
        lease::kept_rule(&lease, candidates),
        lease::handover_rule(&lease, candidates),
        ledger::rv_monotonic_rule(&rv_regressions, rv_regression_count),
        reads::rule(&stale_reads, writes && reads),
        linearizable::rule(
            &linearizable,
            writes,
            inputs.final_read.history_error.as_deref(),
        ),
        migration::rule(
            inputs.events,
            criteria,
            inputs.present.is_some_and(|p| p.layout >= 2),
        ),
    ];
    for ph in &phases {
        rules.extend(slo::rules(ph, thresholds));
    }
    // What the run directory lacks: its rules not covered or degraded.
    let inputs_check = match inputs.present {
        Some(p) => {
            let c = layout::check(p, criteria, inputs.plan, inputs.records, inputs.events);
            layout::apply(&mut rules, &c);
            c
        }
        None => layout::InputsCheck::default(),
    };
    let mut mechanisms = mechanisms::explain(
        &avail.failed,
        inputs.events,
        &classify,
        window.start_unix_ms,
    );
    mechanisms::mark_saturated(
        &mut mechanisms,
        &saturated,
        criteria.saturation_pct,
        window.start_unix_ms,
    );
    let accepted = accepted(&rules, &coverage, criteria, &inputs_check);
    let status = Status::of(&rules, &accepted);
    let reasons: Vec<String> = rules
        .iter()
        .filter(|r| r.fails(&accepted))
        .map(|r| {
            if r.status == RuleStatus::Failed {
                format!("{}: {}", r.name, r.message)
            } else {
                format!("{} ({}): {}", r.name, r.status.as_str(), r.message)
            }
        })
        .collect();
    Verdict {
        status,
        window,
        passed: status.passed(),
        reasons,
        zero_downtime,
        thresholds: thresholds.clone(),
        criteria: criteria.clone(),
        rules,
        accepted,
        failed_requests: availability::first_failures(&avail.requests, &classify),
        mechanisms,
        silent_watches,
        overall: avail.overall,
        probes: avail.probes,
        excuses,
        drained_readyz: drained,
        coverage,
        ledger,
        watch,
        informer,
        informer_go,
        lease,
        stale_reads,
        linearizable,
        integrity,
        inputs: inputs_check,
        saturated,
        saturated_failures,
        rv_regressions,
        rv_regression_count,
        phases,
        validator,
    }
}

/// Escape text for XML and HTML (text and attribute values). Characters XML
/// 1.0 cannot carry become U+FFFD.
pub fn escape_xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Synthetic records for the verdict tests.
    use super::*;

    pub const T0: f64 = 1_700_000_000_000.0;

    thread_local! {
        /// Each synthetic record's seq, unique as an agent's (far above
        /// the small seqs tests set by hand).
        static SEQ: std::cell::Cell<u64> = const { std::cell::Cell::new(1_000_000) };
    }

    pub fn rec(probe: ProbeKind, mode: ConnMode, t: f64, dur: f64, outcome: Outcome) -> Record {
        let seq = SEQ.with(|s| {
            s.set(s.get() + 1);
            s.get()
        });
        let mut r = Record::new(seq, probe, mode, (T0 + t, t), dur, outcome);
        r.http_status = (outcome == Outcome::Ok).then_some(200);
        r.seed = (outcome == Outcome::Ok).then(|| "seed-a".to_string());
        r
    }

    /// Requests every `step` ms in [from, to), failing in [fail_from, fail_to).
    pub fn series(
        probe: ProbeKind,
        mode: ConnMode,
        from: f64,
        to: f64,
        step: f64,
        fail: Option<(f64, f64)>,
    ) -> Vec<Record> {
        let mut v = Vec::new();
        let mut t = from;
        while t < to {
            let failed = fail.is_some_and(|(a, b)| t >= a && t < b);
            v.push(if failed {
                rec(probe, mode, t, 20.0, Outcome::Timeout)
            } else {
                rec(probe, mode, t, 5.0, Outcome::Ok)
            });
            t += step;
        }
        v
    }

    pub fn write(t: f64, value: u64, rv: u64) -> Record {
        let mut r = rec(ProbeKind::Write, ConnMode::Reused, t, 5.0, Outcome::Ok);
        r.value = Some(value);
        r.rv = Some(rv);
        r
    }

    pub fn watch_event(mode: ConnMode, t: f64, value: u64, rv: u64) -> Record {
        let mut r = rec(ProbeKind::Watch, mode, t, 0.0, Outcome::Ok);
        r.event = Some("MODIFIED".into());
        r.value = Some(value);
        r.rv = Some(rv);
        r
    }

    pub fn connect(mode: ConnMode, t: f64) -> Record {
        let mut r = rec(ProbeKind::Watch, mode, t, 2.0, Outcome::Ok);
        r.event = Some("connect".into());
        r
    }

    /// A clean run: writes every 100 ms for 10 s, each seen by a reused watch
    /// 3 ms later, plus readyz and get.
    pub fn clean_run() -> Vec<Record> {
        let mut v = vec![connect(ConnMode::Reused, 0.0)];
        for i in 0..100u64 {
            let t = 10.0 + i as f64 * 100.0;
            v.push(write(t, i + 1, 1000 + i));
            v.push(watch_event(ConnMode::Reused, t + 8.0, i + 1, 1000 + i));
        }
        v.extend(series(
            ProbeKind::Readyz,
            ConnMode::New,
            0.0,
            10_000.0,
            50.0,
            None,
        ));
        // Each get reads what the writes acknowledged before it began (0,
        // at the counter's first revision, before any).
        let mut gets = series(ProbeKind::Get, ConnMode::Reused, 0.0, 10_000.0, 50.0, None);
        for g in &mut gets {
            let t = g.start_unix_ms - T0;
            let acked = (0..100u64)
                .filter(|i| 10.0 + *i as f64 * 100.0 + 5.0 <= t)
                .count() as u64;
            g.value = Some(acked);
            g.rv = Some(if acked == 0 { 999 } else { 999 + acked });
        }
        v.extend(gets);
        for (i, r) in v.iter_mut().enumerate() {
            r.seq = i as u64;
        }
        v
    }

    /// A clean read-back after `recs`: the counter at `counter` (when
    /// given), its history every acknowledged write.
    pub fn read_back(recs: &[Record], counter: Option<u64>) -> FinalRead {
        let mut history: Vec<crate::record::HistoryEntry> = recs
            .iter()
            .filter(|r| {
                r.probe == ProbeKind::Write && r.outcome == Outcome::Ok && r.event.is_none()
            })
            .filter_map(|r| {
                Some(crate::record::HistoryEntry {
                    value: r.value?,
                    rev: r.rv?,
                })
            })
            .collect();
        history.sort_by_key(|e| e.rev);
        history.dedup();
        FinalRead {
            counter,
            history: Some(history),
            ..FinalRead::default()
        }
    }

    /// Nothing read back.
    /// A run judged with nothing but its records, what was read back and
    /// its plan: no lab events, no etcd logs, the default criteria.
    pub fn judge_plain(
        records: &[Record],
        final_read: &FinalRead,
        plan: Option<&ProbePlan>,
    ) -> crate::Verdict {
        crate::judge(
            &crate::Inputs {
                records,
                events: &[],
                final_read,
                elections: &[],
                plan,
                listeners_closed: &[],
                present: None,
                cpu: &[],
            },
            &Criteria::default(),
        )
    }

    pub fn nothing() -> FinalRead {
        FinalRead::default()
    }

    pub fn phase(name: &str, from: f64, to: f64) -> LabEvent {
        LabEvent {
            at_unix_ms: T0 + from,
            end_unix_ms: Some(T0 + to),
            kind: "phase".into(),
            name: name.into(),
            detail: String::new(),
            status: None,
        }
    }

    // Shared by the rules' tests through the whole verdict.
    /// The lab's notes of a leadership move from a to b, 5.0 to 5.3 s in.
    pub fn leadership_move_events() -> Vec<LabEvent> {
        let note = |t: f64, name: &str| LabEvent {
            at_unix_ms: T0 + t,
            end_unix_ms: None,
            kind: "note".into(),
            name: name.into(),
            detail: String::new(),
            status: None,
        };
        vec![
            note(5_000.0, "moving leadership from a to b"),
            note(5_300.0, "leadership moved from a to b"),
        ]
    }

    /// A write MoveLeader dropped in `leadership_move_events`' move: value
    /// 52 (the next acknowledged write's), failed with etcd's timeout
    /// after `dur` ms.
    pub fn dropped_in_the_move(dur: f64) -> Record {
        let mut r = rec(ProbeKind::Write, ConnMode::New, 5_050.0, dur, Outcome::Http);
        r.seq = 90_000;
        r.value = Some(52);
        r.http_status = Some(500);
        r.error = Some("etcdserver: request timed out".into());
        r
    }

    /// Criteria that accept one write MoveLeader dropped, of at most 7.5 s.
    pub fn one_move_leader() -> Criteria {
        let mut c = Criteria::default();
        c.excuse.insert(
            Hazard::MoveLeader,
            Budget {
                max: 1,
                max_ms: 7_500.0,
                lanes: vec![],
            },
        );
        c
    }

    pub fn th() -> Thresholds {
        Thresholds::default()
    }

    /// A get and a list at `t` that return `value` at `rv`.
    pub fn reads_at(t: f64, value: u64, rv: u64) -> Vec<Record> {
        let mut get = rec(ProbeKind::Get, ConnMode::New, t, 3.0, Outcome::Ok);
        get.value = Some(value);
        get.rv = Some(rv);
        let mut list = rec(ProbeKind::List, ConnMode::Reused, t, 3.0, Outcome::Ok);
        list.rv = Some(rv);
        vec![get, list]
    }

    pub fn readyz_outage(fail_from: f64, fail_to: f64) -> ValidatorSim {
        let recs = series(
            ProbeKind::Readyz,
            ConnMode::New,
            0.0,
            60_001.0,
            100.0,
            Some((fail_from, fail_to)),
        );
        compute(&recs, &[], &nothing(), &th()).validator
    }

    pub fn judged(recs: &[Record], events: &[LabEvent], c: &Criteria) -> Verdict {
        judge(
            &Inputs {
                records: recs,
                events,
                final_read: &read_back(recs, Some(100)),
                elections: &[],
                plan: None,
                listeners_closed: &[],
                present: None,
                cpu: &[],
            },
            c,
        )
    }

    /// A run judged with what was read back after it and the machine's
    /// CPU, no etcd logs and no plan.
    pub fn judged_with_cpu(
        recs: &[Record],
        events: &[LabEvent],
        final_read: &FinalRead,
        cpu: &[context::CpuSample],
        c: &Criteria,
    ) -> Verdict {
        judge(
            &Inputs {
                cpu,
                ..Inputs::bare(recs, events, final_read)
            },
            c,
        )
    }

    /// clean_run() with client-go's informer (a list, a watch, a broken
    /// watch at 5 s) and two candidates handing over cleanly, one of whose
    /// lock requests timed out.
    pub fn with_informer_go_and_candidates() -> (Vec<Record>, FinalRead) {
        use crate::lease::tests::{clean_handover, history, lock, A, B};
        use crate::record::informer_event as ie;
        let mut recs = clean_run();
        for (t, e, o) in [
            (1.0, ie::LIST, Outcome::Ok),
            (3.0, ie::WATCH, Outcome::Ok),
            (5_000.0, ie::WATCH_BROKE, Outcome::Reset),
            (5_001.0, ie::SYNCED, Outcome::Ok),
        ] {
            let mut r = rec(ProbeKind::InformerGo, ConnMode::Reused, t, 2.0, o);
            r.event = Some(e.into());
            recs.push(r);
        }
        recs.extend(clean_handover());
        recs.push(lock(A, 5_000.0, "update", Outcome::Timeout, None));
        for (i, r) in recs.iter_mut().enumerate() {
            r.seq = i as u64;
        }
        let fin = FinalRead {
            lease_history: history(&[A, A, "", B]).lease_history,
            ..read_back(&recs, Some(100))
        };
        (recs, fin)
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    #[test]
    fn the_candidates_records_do_not_stretch_the_probes_window() {
        use crate::testutil::{clean_run, nothing, rec};
        let mut recs = clean_run();
        let end = recs.iter().map(|r| r.start_unix_ms).fold(0.0, f64::max);
        let mut late = rec(
            ProbeKind::Lease,
            ConnMode::Reused,
            end + 30_000.0,
            5.0,
            Outcome::Ok,
        );
        late.event = Some("update".into());
        late.candidate = Some("cpmlab-seed-a".into());
        recs.push(late);
        let v = compute(&recs, &[], &nothing(), &Thresholds::default());
        assert_eq!(v.window.end_unix_ms, end);
    }

    #[test]
    fn verdict_clean_run_passes_with_zero_downtime() {
        let recs = clean_run();
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert!(v.passed, "{:#?}", v.reasons);
        assert!(v.zero_downtime);
        assert!(v.reasons.is_empty());
        assert_eq!(v.overall.downtime_ms, 0.0);
        assert_eq!(v.overall.availability_pct, 100.0);
        assert_eq!(v.window.start_unix_ms, T0);
        let get = &v.probes["get/reused"];
        assert_eq!(get.requests, 200);
        assert_eq!(get.latency.unwrap().p99_ms, 5.0);
        assert_eq!(v.watch.expected, 90, "the last second is grace");
        assert_eq!(
            v.rule("watch-continuity").unwrap().status,
            RuleStatus::Passed
        );
        assert_eq!(v.rule("lost-writes").unwrap().status, RuleStatus::Passed);
        // verdict.json round-trips.
        let j = serde_json::to_string(&v).unwrap();
        assert_eq!(serde_json::from_str::<Verdict>(&j).unwrap(), v);
    }

    #[test]
    fn verdict_no_records_does_not_pass() {
        let v = compute(&[], &[], &nothing(), &th());
        assert!(!v.passed);
        assert!(!v.zero_downtime);
        assert!(!v.watch.run);
    }

    #[test]
    fn verdict_escape_xml() {
        assert_eq!(
            escape_xml("a<b>&\"c'\u{1}"),
            "a&lt;b&gt;&amp;&quot;c&#39;\u{FFFD}"
        );
    }
}
