//! cpmlab-verdict: the verdict of a Live CPM run. Probe records, lab
//! events, what was read back from etcd after the run and the etcd
//! members' logs in; a judgement, `verdict.json`, `junit.xml` and
//! `report.html` out. No Docker, no lab state, no network: anyone with
//! records from a real landscape can judge them. [`judge`] is pure; one
//! module per rule ([`availability`], [`ledger`], [`watch`], [`informer`],
//! [`lease`], [`reads`], [`slo`], [`coverage`]), the known hazards in
//! [`excuse`];
//! [`junit`] and [`report`] render a [`Verdict`] for CI and for people;
//! [`run_dir`] reads and writes a run directory.
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
//! - The *window* runs from the first to the last record start.
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
pub mod election;
pub mod error;
pub mod etcd_said;
pub mod excuse;
pub mod informer;
pub mod junit;
pub mod lease;
pub mod ledger;
pub mod load;
pub mod reads;
pub mod record;
pub mod report;
pub mod run_dir;
pub mod size;
pub mod slo;
pub mod validator;
pub mod watch;

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

/// First and last record start, unix milliseconds.
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
    /// What the accepted hazards excused, with evidence; their budgets;
    /// every hazard window of the run.
    pub excuses: Excuses,
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
    pub rv_regressions: Vec<RvRegression>,
    pub rv_regression_count: u64,
    /// In band order, `outside` last.
    pub phases: Vec<PhaseLatency>,
    pub validator: ValidatorSim,
}

/// Whether a rule is about availability, liveness or latency
/// (`zero-downtime`, `leader-kept`, `handover`, the per-step `slo-*`
/// limits) rather than safety (lost writes, watch continuity, stale reads,
/// `lease-exclusive`, ...): `verdict: safe` asserts only the latter.
pub fn is_availability_rule(name: &str) -> bool {
    name == availability::RULE
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
        &Inputs {
            records,
            events,
            final_read,
            elections: &[],
            plan: None,
        },
        &Criteria {
            thresholds: thresholds.clone(),
            ..Criteria::default()
        },
    )
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
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for r in rules {
        if !matches!(r.status, RuleStatus::NotCovered | RuleStatus::Degraded) {
            continue;
        }
        if let Some(why) = criteria.uncovered.get(&r.name) {
            out.insert(r.name.clone(), why.clone());
        } else if r.name == coverage::RULE && cov.gaps.iter().all(|g| g.accepted.is_some()) {
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
    let window = Window {
        start_unix_ms: probes().next().map_or(0.0, |r| r.start_unix_ms),
        end_unix_ms: probes().next_back().map_or(0.0, |r| r.start_unix_ms),
    };
    let classify = availability::Classify::new(&all, criteria.stall_ms);
    let mut avail = availability::availability(&all, &classify);
    let excuses = excuse::excuse(
        &avail.failed,
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
    let watch = watch::check(&all, &window, thresholds);
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
    let (rv_regressions, rv_regression_count) = ledger::rv_regressions(&all);
    let phases = slo::phases(&avail.requests, &all, inputs.events, thresholds);
    let validator = validator::validator_sim(&avail.requests, &window);
    let coverage = coverage::check(
        &all,
        inputs.events,
        inputs.plan,
        &excuses.windows,
        &window,
        criteria,
    );
    let writes = ran(inputs, &all, ProbeKind::Write);
    let reads = ran(inputs, &all, ProbeKind::Get) || ran(inputs, &all, ProbeKind::List);
    let candidates = ran(inputs, &all, ProbeKind::Lease);

    // Rules, in a fixed order.
    let mut rules = vec![
        availability::rule(&avail, &excuses),
        coverage::rule(&coverage),
        ledger::lost_writes_rule(&ledger, writes),
        ledger::ledger_conflicts_rule(&ledger),
        watch::rule(&watch, ran(inputs, &all, ProbeKind::Watch)),
        informer::rule(
            &informer,
            ProbeKind::Informer,
            ran(inputs, &all, ProbeKind::Informer),
        ),
        informer::rule(
            &informer_go,
            ProbeKind::InformerGo,
            ran(inputs, &all, ProbeKind::InformerGo),
        ),
        lease::exclusive_rule(&lease, candidates),
        lease::kept_rule(&lease, candidates),
        lease::handover_rule(&lease, candidates),
        ledger::rv_monotonic_rule(&rv_regressions, rv_regression_count),
        reads::rule(&stale_reads, writes && reads),
    ];
    for ph in &phases {
        rules.extend(slo::rules(ph, thresholds));
    }
    let accepted = accepted(&rules, &coverage, criteria);
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
        overall: avail.overall,
        probes: avail.probes,
        excuses,
        coverage,
        ledger,
        watch,
        informer,
        informer_go,
        lease,
        stale_reads,
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

    pub fn rec(probe: ProbeKind, mode: ConnMode, t: f64, dur: f64, outcome: Outcome) -> Record {
        let mut r = Record::new(0, probe, mode, (T0 + t, t), dur, outcome);
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
        v.extend(series(
            ProbeKind::Get,
            ConnMode::Reused,
            0.0,
            10_000.0,
            50.0,
            None,
        ));
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    fn th() -> Thresholds {
        Thresholds::default()
    }

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
    fn verdict_500ms_gap_is_one_interval_from_timestamps() {
        // Requests every 50 ms; those starting at 1000..=1450 fail; the next
        // success starts at 1500 and completes at 1505.
        let recs = series(
            ProbeKind::Get,
            ConnMode::New,
            0.0,
            3000.0,
            50.0,
            Some((1000.0, 1500.0)),
        );
        let v = compute(&recs, &[], &nothing(), &th());
        let s = &v.probes["get/new"];
        assert_eq!(s.failed(), 10);
        assert_eq!(s.failures["timeout"], 10);
        assert_eq!(s.unavailable_count, 1);
        assert_eq!(
            s.unavailable[0],
            Interval {
                start_unix_ms: T0 + 1000.0,
                end_unix_ms: T0 + 1505.0
            }
        );
        assert_eq!(s.downtime_ms, 505.0);
        assert_eq!(s.longest_unavailable_ms, 505.0);
        assert!((s.availability_pct - 50.0 / 60.0 * 100.0).abs() < 1e-9);
        assert!(!v.passed && !v.zero_downtime);
        assert_eq!(v.rule("zero-downtime").unwrap().status, RuleStatus::Failed);
        assert!(
            v.reasons[0].contains("10 of 60 requests failed"),
            "{}",
            v.reasons[0]
        );
        assert_eq!(v.overall.downtime_ms, 505.0);
    }

    #[test]
    fn verdict_trailing_failures_end_at_last_failure_end() {
        let recs = series(
            ProbeKind::Get,
            ConnMode::New,
            0.0,
            1000.0,
            100.0,
            Some((800.0, 2000.0)),
        );
        let v = compute(&recs, &[], &nothing(), &th());
        // Failures at 800 and 900 (20 ms each): 800..920.
        assert_eq!(v.probes["get/new"].downtime_ms, 120.0);
    }

    #[test]
    fn verdict_overlapping_outages_merge_overall() {
        let mut recs = series(
            ProbeKind::Get,
            ConnMode::New,
            0.0,
            5000.0,
            50.0,
            Some((1000.0, 2000.0)),
        );
        recs.extend(series(
            ProbeKind::List,
            ConnMode::Reused,
            0.0,
            5000.0,
            50.0,
            Some((1500.0, 2500.0)),
        ));
        recs.extend(series(
            ProbeKind::Readyz,
            ConnMode::New,
            0.0,
            5000.0,
            50.0,
            Some((4000.0, 4200.0)),
        ));
        let v = compute(&recs, &[], &nothing(), &th());
        assert_eq!(v.probes["get/new"].downtime_ms, 1005.0);
        assert_eq!(v.probes["list/reused"].downtime_ms, 1005.0);
        assert_eq!(v.overall.unavailable_count, 2);
        assert_eq!(v.overall.unavailable[0].start_unix_ms, T0 + 1000.0);
        assert_eq!(v.overall.unavailable[0].end_unix_ms, T0 + 2505.0);
        assert_eq!(v.overall.downtime_ms, 1505.0 + 205.0);
        assert_eq!(v.overall.longest_unavailable_ms, 1505.0);
    }

    #[test]
    fn verdict_lost_write_detected() {
        let recs = clean_run();
        // The last three writes are not in the history, and the counter
        // read back is behind them.
        let mut fin = read_back(&recs, Some(97));
        fin.history.as_mut().unwrap().retain(|e| e.value <= 97);
        let v = compute(&recs, &[], &fin, &th());
        assert!(!v.passed);
        assert_eq!(v.ledger.lost_writes, vec![98, 99, 100]);
        let r = v.rule("lost-writes").unwrap();
        assert_eq!(r.status, RuleStatus::Failed);
        assert!(r.message.contains("98, 99, 100"), "{}", r.message);
    }

    #[test]
    fn verdict_a_write_lost_in_the_middle_is_caught_by_the_history() {
        // The counter read back is at the top (a tail check would pass),
        // but value 42 is not in etcd's history at its revision.
        let recs = clean_run();
        let mut fin = read_back(&recs, Some(100));
        fin.history.as_mut().unwrap().retain(|e| e.value != 42);
        let v = compute(&recs, &[], &fin, &th());
        assert_eq!(v.ledger.lost_writes, vec![42]);
        let r = v.rule("lost-writes").unwrap();
        assert_eq!(r.status, RuleStatus::Failed);
        assert!(
            r.message.contains("not in the counter's history"),
            "{}",
            r.message
        );
        // Acknowledged at another revision than the history has: lost too.
        let mut fin = read_back(&recs, Some(100));
        fin.history.as_mut().unwrap()[41].rev += 10_000;
        assert_eq!(
            compute(&recs, &[], &fin, &th()).ledger.lost_writes,
            vec![42]
        );
    }

    #[test]
    fn verdict_nothing_read_back_fails_lost_writes_with_the_reason() {
        let recs = clean_run();
        let fin = FinalRead {
            counter_error: Some("GET ...: 503".into()),
            counter_attempts: 5,
            history_error: Some("etcd: unreachable".into()),
            ..FinalRead::default()
        };
        let v = compute(&recs, &[], &fin, &th());
        let r = v.rule("lost-writes").unwrap();
        assert_eq!(r.status, RuleStatus::Failed, "{}", r.message);
        assert!(
            r.message.contains("GET ...: 503") && r.message.contains("etcd: unreachable"),
            "{}",
            r.message
        );
        assert!(!v.passed);
        // Only the history missing: the tail check runs, and says so.
        let mut fin = read_back(&recs, Some(100));
        fin.history = None;
        fin.history_error = Some("compacted".into());
        let v = compute(&recs, &[], &fin, &th());
        let r = v.rule("lost-writes").unwrap().clone();
        assert_eq!(r.status, RuleStatus::Degraded);
        assert!(
            r.message.contains("only the tail was checked"),
            "{}",
            r.message
        );
        // Degraded fails the verdict ...
        assert_eq!(v.status, Status::Failed, "{:?}", v.reasons);
        assert!(
            v.reasons[0].starts_with("lost-writes (degraded)"),
            "{:?}",
            v.reasons
        );
        // ... unless the scenario accepts it, with why: then amber.
        let mut c = Criteria::default();
        c.uncovered
            .insert("lost-writes".into(), "etcd out of reach".into());
        let v = judge(
            &Inputs {
                records: &recs,
                events: &[],
                final_read: &fin,
                elections: &[],
                plan: None,
            },
            &c,
        );
        assert_eq!(v.status, Status::PassedWithKnownHazards, "{:?}", v.reasons);
        assert_eq!(v.accepted["lost-writes"], "etcd out of reach");
    }

    #[test]
    fn verdict_ledger_conflict_detected() {
        let mut recs = clean_run();
        recs.push(write(5_005.0, 50, 7777));
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(
            v.ledger.ledger_conflicts,
            vec![LedgerConflict {
                value: 50,
                rvs: vec![1049, 7777]
            }]
        );
        assert_eq!(
            v.rule("ledger-conflicts").unwrap().status,
            RuleStatus::Failed
        );
        assert!(!v.passed);
    }

    #[test]
    fn verdict_missed_watch_event_detected() {
        let recs: Vec<Record> = clean_run()
            .into_iter()
            .filter(|r| !(r.probe == ProbeKind::Watch && r.value == Some(42)))
            .collect();
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(v.watch.missed_count, 1);
        assert_eq!(v.watch.watch_missed[0].value, 42);
        assert_eq!(v.watch.watch_missed[0].mode, "reused");
        assert_eq!(
            v.rule("watch-continuity").unwrap().status,
            RuleStatus::Failed
        );
        assert!(!v.passed);
    }

    #[test]
    fn verdict_watch_not_run_without_watch_records() {
        let recs: Vec<Record> = clean_run()
            .into_iter()
            .filter(|r| r.probe != ProbeKind::Watch)
            .collect();
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert!(!v.watch.run);
        assert_eq!(
            v.rule("watch-continuity").unwrap().status,
            RuleStatus::Skipped
        );
        assert!(v.passed);
    }

    #[test]
    fn verdict_duplicate_and_out_of_order_watch_events_detected() {
        let mut recs = clean_run();
        // A duplicate of rv 1010 and a late rv 1005 after 1020, both without
        // a reconnect in between.
        recs.push(watch_event(ConnMode::Reused, 1_050.0, 11, 1010));
        recs.push(watch_event(ConnMode::Reused, 2_050.0, 6, 1005));
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(
            v.watch.duplicated_count, 2,
            "{:?}",
            v.watch.watch_duplicated
        );
        let dup_rvs: Vec<u64> = v.watch.watch_duplicated.iter().map(|a| a.rv).collect();
        assert_eq!(dup_rvs, [1010, 1005]);
        assert_eq!(
            v.watch.out_of_order_count, 1,
            "{:?}",
            v.watch.watch_out_of_order
        );
        assert_eq!(v.watch.watch_out_of_order[0].rv, 1005);
        assert_eq!(v.watch.watch_out_of_order[0].previous_rv, 1020);
        assert_eq!(v.watch.watch_out_of_order[0].mode, "reused");
        let r = v.rule("watch-continuity").unwrap();
        assert!(r.message.contains("duplicated") && r.message.contains("out-of-order"));

        // A reconnect resumes from the last revision: a lower rv right
        // after it is out of order all the same (the old check excused it).
        let mut recs = clean_run();
        recs.push(connect(ConnMode::Reused, 2_040.0));
        recs.push(watch_event(ConnMode::Reused, 2_045.0, 6, 1005));
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(v.watch.out_of_order_count, 1);
        assert_eq!(v.watch.duplicated_count, 1);
        assert!(!v.passed);

        // Only a 410 Gone resets the expectation: the watch reads afresh,
        // and the writes it skipped are superseded, not missed.
        let mut recs: Vec<Record> = clean_run()
            .into_iter()
            .filter(|r| !(r.probe == ProbeKind::Watch && (21..=24).contains(&r.value.unwrap_or(0))))
            .collect();
        let mut gone = rec(
            ProbeKind::Watch,
            ConnMode::Reused,
            2_020.0,
            0.0,
            Outcome::Http,
        );
        gone.event = Some("ERROR".into());
        gone.http_status = Some(410);
        let without_410 = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(without_410.watch.missed_count, 4);
        recs.push(gone.clone());
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(v.watch.relists, 1);
        assert_eq!(v.watch.missed_count, 0, "{:?}", v.watch.watch_missed);
        // 410s in a row, as the nightly matrix met them (the fresh read
        // returned the counter's old revision, already compacted out of
        // the watch cache): the skip still starts before the first.
        for later in [1.0, 2.0, 3.0] {
            let mut again = gone.clone();
            again.start_unix_ms += later;
            recs.push(again);
        }
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(v.watch.relists, 4);
        assert_eq!(v.watch.missed_count, 0, "{:?}", v.watch.watch_missed);
        assert_eq!(
            v.rule("zero-downtime").unwrap().status,
            RuleStatus::Passed,
            "a 410 is no failure"
        );
    }

    #[test]
    fn verdict_rv_regression_detected() {
        let mut recs = clean_run();
        // value 101 acknowledged with an rv older than the earlier writes'.
        recs.push(write(9_995.0, 101, 900));
        let v = compute(&recs, &[], &read_back(&recs, Some(101)), &th());
        assert_eq!(v.rv_regression_count, 1);
        assert_eq!(v.rv_regressions[0].rv, 900);
        assert_eq!(v.rv_regressions[0].previous_rv, 1099);
        assert_eq!(v.rule("rv-monotonic").unwrap().status, RuleStatus::Failed);
        assert!(!v.passed);
    }

    #[test]
    fn verdict_concurrent_writes_are_not_a_regression() {
        // Write A starts first but is acknowledged after B, with the higher
        // rv: real-time order is respected.
        let mut a = write(0.0, 1, 11);
        a.duration_ms = 50.0;
        let b = write(10.0, 2, 10);
        let recs = [a, b];
        let v = compute(&recs, &[], &read_back(&recs, Some(2)), &th());
        assert_eq!(v.rv_regression_count, 0);
    }

    #[test]
    fn verdict_slo_miss_attributed_to_its_phase() {
        let mut recs = clean_run();
        // Slow gets during 4000..6000 only.
        for r in recs.iter_mut() {
            if r.probe == ProbeKind::Get && (4000.0..6000.0).contains(&(r.start_unix_ms - T0)) {
                r.duration_ms = 1500.0;
            }
        }
        let events = vec![
            phase("prepare", 0.0, 4000.0),
            phase("switch over", 4000.0, 6000.0),
            LabEvent {
                at_unix_ms: T0 + 5000.0,
                end_unix_ms: None,
                kind: "phase".into(),
                name: "instant".into(),
                detail: String::new(),
            },
        ];
        let v = compute(&recs, &events, &read_back(&recs, Some(100)), &th());
        let names: Vec<&str> = v.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["prepare", "switch over", "outside"]);
        assert_eq!(v.phases[1].read_slo_met, Some(false));
        assert_eq!(v.phases[1].get.unwrap().p99_ms, 1500.0);
        assert_eq!(v.phases[0].read_slo_met, Some(true));
        assert_eq!(v.phases[2].read_slo_met, Some(true));
        assert_eq!(
            v.rule("slo-switch-over-get").unwrap().status,
            RuleStatus::Failed
        );
        assert_eq!(
            v.rule("slo-prepare-get").unwrap().status,
            RuleStatus::Passed
        );
        assert_eq!(
            v.rule("slo-switch-over-write").unwrap().status,
            RuleStatus::Passed
        );
        assert_eq!(v.reasons.len(), 1, "{:?}", v.reasons);
        assert!(v.reasons[0].starts_with("slo-switch-over-get"));
        assert!(!v.passed);
    }

    #[test]
    fn verdict_watch_errors_and_broken_streams_are_failures() {
        for (event, outcome, status) in [
            ("ERROR", Outcome::Http, Some(503)),
            ("broken", Outcome::Reset, None),
            ("ERROR", Outcome::Decode, None),
        ] {
            let mut recs = clean_run();
            let mut r = rec(ProbeKind::Watch, ConnMode::Reused, 5_000.0, 0.0, outcome);
            r.event = Some(event.into());
            r.http_status = status;
            recs.push(r);
            // The watch reconnects 200 ms later.
            recs.push(connect(ConnMode::Reused, 5_200.0));
            let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
            let s = &v.probes["watch/reused"];
            assert_eq!(s.failed(), 1, "{event}: {s:?}");
            assert_eq!(s.unavailable[0].end_unix_ms, T0 + 5_202.0, "{event}");
            assert_eq!(v.watch.errors, 1, "{event}");
            assert!(!v.zero_downtime && !v.passed, "{event}");
        }
        // A server-closed stream (timeoutSeconds) is not a failure.
        let mut recs = clean_run();
        let mut r = rec(
            ProbeKind::Watch,
            ConnMode::Reused,
            5_000.0,
            0.0,
            Outcome::Ok,
        );
        r.event = Some("closed".into());
        recs.push(r);
        assert!(compute(&recs, &[], &read_back(&recs, Some(100)), &th()).passed);
    }

    #[test]
    fn verdict_unrecorded_requests_count_now() {
        // The writer's read before an update failed: a failed request.
        let mut recs = clean_run();
        let mut r = rec(
            ProbeKind::Write,
            ConnMode::New,
            5_050.0,
            2_000.0,
            Outcome::Timeout,
        );
        r.event = Some("read".into());
        recs.push(r);
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(v.probes["write/new"].failed(), 1);
        assert_eq!(v.ledger.acknowledged, 100, "a read is no write");
        assert!(!v.passed);

        // A 200 whose body does not parse: the client got nothing.
        let mut recs = clean_run();
        recs.push(rec(
            ProbeKind::Get,
            ConnMode::Reused,
            5_001.0,
            3.0,
            Outcome::Decode,
        ));
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(v.probes["get/reused"].failures["decode"], 1);
        assert!(!v.passed);
    }

    #[test]
    fn verdict_a_refused_attempt_retried_at_once_is_judged_by_its_retry() {
        let mut recs = clean_run();
        let mut refused = rec(
            ProbeKind::Get,
            ConnMode::Reused,
            5_001.0,
            1.0,
            Outcome::Reset,
        );
        refused.seq = 90_000;
        refused.error = Some("GOAWAY".into());
        let mut retry = rec(ProbeKind::Get, ConnMode::Reused, 5_001.0, 4.0, Outcome::Ok);
        retry.seq = 90_001;
        retry.retry_of = Some(90_000);
        recs.extend([refused.clone(), retry.clone()]);
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert!(v.passed, "{:?}", v.reasons);
        assert_eq!(v.probes["get/reused"].retried, 1);
        assert!(v
            .rule("zero-downtime")
            .unwrap()
            .message
            .contains("1 at once after a GOAWAY"));
        // A retry that failed too is one failed request, not two.
        let mut recs = clean_run();
        retry.outcome = Outcome::Timeout;
        recs.extend([refused, retry]);
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(v.probes["get/reused"].failed(), 1);
    }

    /// A get and a list at `t` that return `value` at `rv`.
    fn reads_at(t: f64, value: u64, rv: u64) -> Vec<Record> {
        let mut get = rec(ProbeKind::Get, ConnMode::New, t, 3.0, Outcome::Ok);
        get.value = Some(value);
        get.rv = Some(rv);
        let mut list = rec(ProbeKind::List, ConnMode::Reused, t, 3.0, Outcome::Ok);
        list.rv = Some(rv);
        vec![get, list]
    }

    #[test]
    fn verdict_stale_reads_are_caught_per_lane() {
        // Write i+1 (rv 1000+i) is acknowledged at 15 + 100 i.
        let mut recs = clean_run();
        recs.extend(reads_at(5_020.0, 51, 1050));
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(v.stale_reads.count, 0, "{:?}", v.stale_reads);
        assert_eq!(v.rule("stale-reads").unwrap().status, RuleStatus::Passed);
        // Value 51 was acknowledged at 5015: a read at 5020 returning 45.
        let mut recs = clean_run();
        recs.extend(reads_at(5_020.0, 45, 1044));
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(v.stale_reads.count, 2);
        assert_eq!(v.stale_reads.by_lane["get/new"], 1);
        assert_eq!(v.stale_reads.by_lane["list/reused"], 1);
        let r = v.rule("stale-reads").unwrap();
        assert_eq!(r.status, RuleStatus::Failed);
        assert!(
            r.message
                .contains("get/new read 45 (rv 1044) after 51 (rv 1050)"),
            "{}",
            r.message
        );
        // A read that started before the acknowledgement may return the old value.
        let mut recs = clean_run();
        recs.extend(reads_at(4_912.0, 49, 1048));
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(v.stale_reads.count, 0, "{:?}", v.stale_reads.reads);
    }

    #[test]
    fn verdict_list_latency_watch_delay_and_phases_without_success() {
        let events = vec![phase("step", 0.0, 10_000.0)];
        // A slow list (6 s > 5 s) fails its phase's list rule.
        let mut recs = clean_run();
        let mut list = rec(
            ProbeKind::List,
            ConnMode::Reused,
            100.0,
            6_000.0,
            Outcome::Ok,
        );
        list.rv = Some(1001);
        recs.push(list);
        let v = compute(&recs, &events, &read_back(&recs, Some(100)), &th());
        assert_eq!(v.rule("slo-step-list").unwrap().status, RuleStatus::Failed);
        assert_eq!(v.phases[0].list_slo_met, Some(false));
        // Watch events 1.5 s after the acknowledgement fail the delay bound.
        let mut recs = clean_run();
        for r in recs
            .iter_mut()
            .filter(|r| r.probe == ProbeKind::Watch && r.value.is_some())
        {
            r.start_unix_ms += 1_500.0;
        }
        let v = compute(&recs, &events, &read_back(&recs, Some(100)), &th());
        let r = v.rule("slo-step-watch-delay").unwrap();
        assert_eq!(r.status, RuleStatus::Failed, "{}", r.message);
        // A phase where every get failed: failed, not skipped.
        let recs: Vec<Record> = clean_run()
            .into_iter()
            .map(|mut r| {
                if r.probe == ProbeKind::Get {
                    r.outcome = Outcome::Timeout;
                }
                r
            })
            .collect();
        let v = compute(&recs, &events, &read_back(&recs, Some(100)), &th());
        let r = v.rule("slo-step-get").unwrap();
        assert_eq!(r.status, RuleStatus::Failed);
        assert!(
            r.message.contains("200 get request(s), none succeeded"),
            "{}",
            r.message
        );
    }

    fn readyz_outage(fail_from: f64, fail_to: f64) -> ValidatorSim {
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

    #[test]
    fn verdict_validator_sim_25s_outage_would_fail() {
        // Ticks at 0, 10, ..., 60 s; the outage covers the ticks at 20, 30, 40.
        let sim = readyz_outage(20_000.0, 45_000.0);
        assert_eq!(sim.ticks, 7);
        assert_eq!(sim.failures, 3);
        assert_eq!(sim.max_consecutive_failures, 3);
        assert!(sim.would_fail);
    }

    #[test]
    fn verdict_validator_sim_15s_outage_goes_unnoticed() {
        // The ticks at 20 and 30 s fail, 40 s is fine again: 2 in a row.
        let sim = readyz_outage(20_000.0, 35_000.0);
        assert_eq!(sim.ticks, 7);
        assert_eq!(sim.failures, 2);
        assert_eq!(sim.max_consecutive_failures, 2);
        assert!(!sim.would_fail);
        // The verdict itself fails all the same.
        let recs = series(
            ProbeKind::Readyz,
            ConnMode::New,
            0.0,
            60_001.0,
            100.0,
            Some((20_000.0, 35_000.0)),
        );
        let v = compute(&recs, &[], &nothing(), &th());
        assert!(!v.passed);
        assert_eq!(v.overall.downtime_ms, 15_005.0);
    }

    #[test]
    fn verdict_nearest_rank_quantiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 50.0), 50.0);
        assert_eq!(nearest_rank(&v, 99.0), 99.0);
        assert_eq!(nearest_rank(&[3.0], 99.0), 3.0);
        assert_eq!(nearest_rank(&[1.0, 2.0], 50.0), 1.0);
    }

    #[test]
    fn verdict_escape_xml() {
        assert_eq!(
            escape_xml("a<b>&\"c'\u{1}"),
            "a&lt;b&gt;&amp;&quot;c&#39;\u{FFFD}"
        );
    }

    fn judged(recs: &[Record], events: &[LabEvent], c: &Criteria) -> Verdict {
        judge(
            &Inputs {
                records: recs,
                events,
                final_read: &read_back(recs, Some(100)),
                elections: &[],
                plan: None,
            },
            c,
        )
    }

    #[test]
    fn verdict_a_stall_is_unavailability_not_only_latency() {
        // A get that succeeded after 9.9 s: within the probe timeout, a
        // stall past the 5 s bound.
        let mut recs = clean_run();
        let mut slow = rec(
            ProbeKind::Get,
            ConnMode::Reused,
            5_010.0,
            9_900.0,
            Outcome::Ok,
        );
        slow.seq = 90_000;
        recs.push(slow);
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        let s = &v.probes["get/reused"];
        assert_eq!(s.failures["stall"], 1, "{s:?}");
        assert_eq!(s.stalled, 1);
        assert!(s.downtime_ms > 0.0, "{s:?}");
        assert!(!v.zero_downtime);
        assert_eq!(v.status, Status::Failed);
        assert_eq!(v.failed_requests[0].outcome, "stall");
        // A scenario that allows slower answers.
        let c = Criteria {
            stall_ms: 10_000.0,
            ..Criteria::default()
        };
        assert_eq!(judged(&recs, &[], &c).status, Status::Passed);
    }

    #[test]
    fn verdict_a_write_another_write_superseded_is_no_failure() {
        // Write 51 (rv 1050, on base 1049) won; another write on the same
        // base was answered 409 Conflict.
        let mut recs = clean_run();
        for r in recs.iter_mut().filter(|r| r.probe == ProbeKind::Write) {
            r.base_rv = r.rv.map(|rv| rv - 1);
        }
        let mut lost_race = rec(
            ProbeKind::Write,
            ConnMode::New,
            5_005.0,
            30.0,
            Outcome::Http,
        );
        lost_race.seq = 90_000;
        lost_race.http_status = Some(409);
        lost_race.value = Some(51);
        lost_race.base_rv = Some(1049);
        recs.push(lost_race.clone());
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(v.overall.superseded, 1, "{:?}", v.overall);
        assert_eq!(v.overall.failed(), 0);
        assert!(v.passed, "{:?}", v.reasons);
        assert!(v
            .rule("zero-downtime")
            .unwrap()
            .message
            .contains("superseded"));
        // A 409 on the counter's last version: nothing superseded it.
        let mut recs = clean_run();
        lost_race.base_rv = Some(1099);
        lost_race.start_unix_ms = T0 + 9_999.0;
        recs.push(lost_race);
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(v.overall.superseded, 0);
        assert_eq!(v.overall.failed(), 1);
    }

    #[test]
    fn verdict_a_lane_silent_for_a_phase_is_not_covered() {
        let events = vec![phase("DestinationEtcdPeersJoined", 2_000.0, 8_000.0)];
        let c = Criteria::default();
        let v = judged(&clean_run(), &events, &c);
        assert_eq!(v.status, Status::Passed, "{:?}", v.reasons);
        assert_eq!(v.coverage.writes_after_last_step, Some(20));
        // get/reused sends nothing in the phase: nothing failed, yet FAILED.
        let recs: Vec<Record> = clean_run()
            .into_iter()
            .filter(|r| {
                !(r.probe == ProbeKind::Get && (2_000.0..8_000.0).contains(&(r.start_unix_ms - T0)))
            })
            .collect();
        let v = judged(&recs, &events, &c);
        assert_eq!(v.overall.failed(), 0);
        assert_eq!(v.status, Status::Failed);
        let r = v.rule("coverage").unwrap();
        assert_eq!(r.status, RuleStatus::NotCovered);
        assert!(
            r.message
                .contains("get/reused started 0 request(s) in DestinationEtcdPeersJoined"),
            "{}",
            r.message
        );
        assert_eq!(
            v.coverage.gaps[0].key,
            "get/reused@DestinationEtcdPeersJoined"
        );
        // A lane the plan names but no record shows is as blind.
        let plan = ProbePlan {
            probes: vec![
                ProbeKind::Readyz,
                ProbeKind::Get,
                ProbeKind::List,
                ProbeKind::Write,
            ],
            modes: vec![ConnMode::New, ConnMode::Reused],
            rate: 20.0,
            timeout_ms: 2_000.0,
            write_rate: 0.0,
        };
        let recs = clean_run();
        let v = judge(
            &Inputs {
                records: &recs,
                events: &events,
                final_read: &read_back(&recs, Some(100)),
                elections: &[],
                plan: Some(&plan),
            },
            &c,
        );
        assert!(v
            .coverage
            .gaps
            .iter()
            .any(|g| g.key == "list/new@DestinationEtcdPeersJoined"));
        // No write acknowledged after the last step.
        let recs: Vec<Record> = clean_run()
            .into_iter()
            .filter(|r| !(r.probe == ProbeKind::Write && r.start_unix_ms >= T0 + 8_000.0))
            .collect();
        let v = judged(&recs, &events, &c);
        assert!(v
            .coverage
            .gaps
            .iter()
            .any(|g| g.key == "writes-after-last-step"));
        assert_eq!(v.status, Status::Failed);
    }

    #[test]
    fn verdict_excused_within_budget_is_amber_over_budget_fails() {
        let events = vec![
            LabEvent {
                at_unix_ms: T0 + 5_000.0,
                end_unix_ms: None,
                kind: "note".into(),
                name: "moving leadership from a to b".into(),
                detail: String::new(),
            },
            LabEvent {
                at_unix_ms: T0 + 5_300.0,
                end_unix_ms: None,
                kind: "note".into(),
                name: "leadership moved from a to b".into(),
                detail: String::new(),
            },
        ];
        let mut recs = clean_run();
        // Dropped: value 52, the next acknowledged write's value.
        let mut dropped = rec(
            ProbeKind::Write,
            ConnMode::New,
            5_050.0,
            7_020.0,
            Outcome::Http,
        );
        dropped.seq = 90_000;
        dropped.value = Some(52);
        dropped.error = Some("etcdserver: request timed out".into());
        recs.push(dropped.clone());
        let mut c = Criteria::default();
        c.excuse.insert(
            Hazard::MoveLeader,
            Budget {
                max: 1,
                max_ms: 7_500.0,
                lanes: vec![],
            },
        );
        let v = judged(&recs, &events, &c);
        assert_eq!(v.status, Status::PassedWithKnownHazards, "{:?}", v.reasons);
        assert!(v.passed);
        assert!(!v.zero_downtime, "raw: a request failed");
        assert_eq!(v.overall.failed(), 1);
        assert_eq!(v.overall.excused, 1);
        assert_eq!(v.probes["write/new"].excused, 1);
        assert_eq!(v.rule("zero-downtime").unwrap().status, RuleStatus::Excused);
        let x = junit::junit(&v, "cpmlab");
        assert_eq!(x.matches("name=\"zero-downtime\"").count(), 2, "{x}");
        assert!(x.contains("observed 1 failed request(s), excused 1"), "{x}");
        // Over budget: a second one.
        dropped.seq = 90_001;
        dropped.start_unix_ms += 100.0;
        recs.push(dropped);
        let v = judged(&recs, &events, &c);
        assert_eq!(v.status, Status::Failed);
        assert!(v.reasons[0].contains("OVER BUDGET"), "{:?}", v.reasons);
        // Not accepted at all: failed, nothing excused.
        let v = judged(&recs, &events, &Criteria::default());
        assert_eq!(v.status, Status::Failed);
        assert_eq!(v.excuses.excused_count, 0);
    }

    #[test]
    fn verdict_report_shows_the_outcome_and_the_excused() {
        let events = vec![
            LabEvent {
                at_unix_ms: T0 + 5_000.0,
                end_unix_ms: None,
                kind: "note".into(),
                name: "moving leadership from a to b".into(),
                detail: String::new(),
            },
            LabEvent {
                at_unix_ms: T0 + 5_300.0,
                end_unix_ms: None,
                kind: "note".into(),
                name: "leadership moved from a to b".into(),
                detail: String::new(),
            },
        ];
        let mut recs = clean_run();
        let mut dropped = rec(
            ProbeKind::Write,
            ConnMode::New,
            5_050.0,
            4_000.0,
            Outcome::Http,
        );
        dropped.seq = 90_000;
        dropped.value = Some(52);
        recs.push(dropped);
        let mut c = Criteria::default();
        c.excuse.insert(
            Hazard::MoveLeader,
            Budget {
                max: 1,
                max_ms: 7_500.0,
                lanes: vec![],
            },
        );
        let v = judged(&recs, &events, &c);
        let html = report::html(&v, &recs, &events, &[], &[], &[], "t");
        assert!(html.contains("PASSED WITH KNOWN HAZARDS"));
        assert!(html.contains("Excused requests (1)"));
        assert!(html.contains("acknowledged revision (final.json)"));
        assert!(
            html.contains(report::EXCUSED_COLOR),
            "drawn in its own colour"
        );
        assert!(
            html.contains(">move-leader</text>"),
            "the hazard's window is a band"
        );
    }

    /// clean_run() with client-go's informer (a list, a watch, a broken
    /// watch at 5 s) and two candidates handing over cleanly, one of whose
    /// lock requests timed out.
    fn with_informer_go_and_candidates() -> (Vec<Record>, FinalRead) {
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

    #[test]
    fn verdict_lease_records_are_no_lane_and_informer_go_is_one() {
        let (recs, fin) = with_informer_go_and_candidates();
        let base = clean_run();
        let v0 = judge_plain(&base, &read_back(&base, Some(100)), None);
        let v = judge_plain(&recs, &fin, None);
        let go = &v.probes["informer-go/reused"];
        assert_eq!((go.requests, go.failed()), (3, 1), "{go:?}");
        assert!(
            !v.probes.keys().any(|k| k.starts_with("lease")),
            "{:?}",
            v.probes.keys()
        );
        assert_eq!(v.overall.requests, v0.overall.requests + 3);
        assert_eq!(
            v.overall.failed(),
            1,
            "the lock request's timeout is no API failure"
        );
        assert!(v
            .failed_requests
            .iter()
            .all(|f| !f.lane.starts_with("lease")));
        let in_phases: u64 = v.phases.iter().map(|p| p.requests).sum();
        assert_eq!(in_phases, v.overall.requests);
        assert_eq!(
            v.overall.unavailable_count, 1,
            "the broken watch only: {:?}",
            v.overall.unavailable
        );
        assert!(v
            .coverage
            .lanes
            .iter()
            .all(|l| !l.starts_with("lease") && !l.starts_with("informer")));
        // The informer-go rule judges its lane, after the informer rule;
        // the lease rules follow.
        assert!(v.informer_go.run && !v.informer.run);
        let names: Vec<&str> = v.rules.iter().map(|r| r.name.as_str()).collect();
        let at = |n: &str| names.iter().position(|x| *x == n).unwrap();
        assert!(at("informer") < at("informer-go"));
        assert!(at("informer-go") < at("lease-exclusive"));
        assert!(at("lease-exclusive") < at("leader-kept") && at("leader-kept") < at("handover"));
        assert_eq!(v.rule("informer").unwrap().status, RuleStatus::Skipped);
        assert_eq!(v.rule("informer-go").unwrap().status, RuleStatus::Failed);
        for r in ["lease-exclusive", "leader-kept", "handover"] {
            let r = v.rule(r).unwrap();
            assert_eq!(r.status, RuleStatus::Passed, "{}: {}", r.name, r.message);
        }
        assert_eq!(v.lease.candidates[0].failed_lock_requests, 2);
    }

    #[test]
    fn verdict_split_brain_fails_the_verdict_as_a_safety_rule() {
        use crate::lease::tests::{history, split_brain, A, B};
        let mut recs = clean_run();
        recs.extend(split_brain());
        let fin = FinalRead {
            lease_history: history(&[A, B]).lease_history,
            ..read_back(&recs, Some(100))
        };
        let v = judge_plain(&recs, &fin, None);
        assert_eq!(v.status, Status::Failed);
        assert!(
            v.reasons
                .iter()
                .any(|r| r.starts_with("lease-exclusive: 1 time(s) two candidates")),
            "{:?}",
            v.reasons
        );
        assert!(!is_availability_rule("lease-exclusive"));
        assert!(is_availability_rule("leader-kept") && is_availability_rule("handover"));
        // The plan lists the candidates but none left a record: not
        // covered, which fails the verdict unless the scenario accepts it.
        let base = clean_run();
        let plan = ProbePlan {
            probes: vec![ProbeKind::Lease, ProbeKind::InformerGo],
            modes: vec![ConnMode::Reused],
            rate: 10.0,
            timeout_ms: 10_000.0,
            write_rate: 0.0,
        };
        let v = judge_plain(&base, &read_back(&base, Some(100)), Some(&plan));
        for r in ["informer-go", "lease-exclusive", "leader-kept", "handover"] {
            assert_eq!(v.rule(r).unwrap().status, RuleStatus::NotCovered, "{r}");
        }
        assert_eq!(v.status, Status::Failed);
    }

    #[test]
    fn verdict_json_without_informer_go_and_lease_still_parses() {
        let (recs, fin) = with_informer_go_and_candidates();
        let v = judge_plain(&recs, &fin, None);
        assert!(v.lease.run && v.informer_go.run);
        let j = serde_json::to_string(&v).unwrap();
        assert_eq!(serde_json::from_str::<Verdict>(&j).unwrap(), v);
        // As a cpmlab before them wrote it: no informer_go, no lease, and
        // criteria without the lease fields.
        let mut old: serde_json::Value = serde_json::from_str(&j).unwrap();
        let o = old.as_object_mut().unwrap();
        assert!(o.remove("informer_go").is_some() && o.remove("lease").is_some());
        let c = o["criteria"].as_object_mut().unwrap();
        for f in ["lease_tolerance_ms", "renew_deadline_ms", "handover_ms"] {
            assert!(c.remove(f).is_some(), "{f}");
        }
        let back: Verdict = serde_json::from_value(old).unwrap();
        assert!(!back.lease.run && !back.informer_go.run);
        assert_eq!(back.criteria, Criteria::default());
        assert_eq!(back.informer, v.informer);
    }
}
