//! The verdict: from the probe records and the lab events alone, decide
//! whether the API had zero downtime, lost no acknowledged write and missed
//! no watch event, and say why not. [`compute`] is pure; [`junit`] and
//! [`report`] render a [`Verdict`] for CI and for people.
//!
//! Definitions (the numbers in `verdict.json` mean exactly this):
//! - A *request* is every record except a watch event record; a watch
//!   `connect` record is a request. A request failed unless its outcome is
//!   `ok`. Zero downtime means zero failed requests in the window.
//! - The *window* runs from the first to the last record start.
//! - An *unavailable interval* of one probe and connection mode starts at the
//!   start of a failed request that follows a success (or is the first
//!   request) and ends when the next successful request completes (its end,
//!   not its start: a request that started while the server was frozen and
//!   succeeded once it thawed marks the thaw, within its own latency), or,
//!   when none follows, at the latest end (start + duration) of the failed
//!   requests. Downtime is the sum of these intervals, measured from
//!   timestamps, never inferred from a count of failures.
//! - Overall downtime is the union of all probes' unavailable intervals.
//! - Quantiles are nearest-rank over the durations of successful requests.

pub mod informer;
pub mod junit;
pub mod load;
pub mod report;

pub use junit::junit;
pub use load::{read_events, read_records};
pub use report::html;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::probe::record::{ConnMode, LabEvent, Outcome, ProbeKind, Record};

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
    /// p99 latency bound for single-object reads (get), per phase.
    pub read_p99_ms: f64,
    /// p99 latency bound for mutations (write), per phase.
    pub mutation_p99_ms: f64,
    /// A write acknowledged less than this long before the end of the window
    /// is not expected in the watch stream yet (the agent stopped first).
    pub watch_grace_ms: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            read_p99_ms: 1000.0,
            mutation_p99_ms: 1000.0,
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
    pub ok: u64,
    /// Failed requests by outcome class (`timeout`, `refused`, ...).
    pub failures: BTreeMap<String, u64>,
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

/// What the write ledger shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// Write records with outcome ok and a value.
    pub acknowledged: u64,
    pub max_acknowledged: Option<u64>,
    /// The counter read back after the run, when the caller had it.
    pub final_counter: Option<u64>,
    /// Acknowledged values greater than `final_counter` (sorted, distinct).
    pub lost_writes: Vec<u64>,
    pub lost_count: u64,
    /// Acknowledged values that came back with different resourceVersions.
    pub ledger_conflicts: Vec<LedgerConflict>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerConflict {
    pub value: u64,
    pub rvs: Vec<u64>,
}

/// A watch anomaly: a duplicated or out-of-order event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchAnomaly {
    /// Connection mode of the watch that saw it (`new`, `reused`).
    pub mode: String,
    pub at_unix_ms: f64,
    pub rv: u64,
    /// The rv of the event before (out of order) or the earlier sighting
    /// (duplicate).
    pub previous_rv: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
}

/// An acknowledged write a watch never delivered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchMiss {
    pub mode: String,
    pub value: u64,
    /// When the write was acknowledged (start + duration).
    pub acked_unix_ms: f64,
}

/// Watch continuity. `run` is false when there were no watch records at all:
/// then nothing was checked, which is not the same as passing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchCheck {
    pub run: bool,
    /// Connection modes that had a watch.
    pub modes: Vec<String>,
    /// ADDED/MODIFIED events received, all modes.
    pub events: u64,
    /// `connect` records, all modes (the first connect counts).
    pub connects: u64,
    /// Acknowledged writes a watch was expected to deliver (per mode: sent
    /// after that watch first connected, acknowledged more than
    /// `watch_grace_ms` before the window end), summed over modes.
    pub expected: u64,
    pub missed_count: u64,
    pub duplicated_count: u64,
    pub out_of_order_count: u64,
    pub watch_missed: Vec<WatchMiss>,
    pub watch_duplicated: Vec<WatchAnomaly>,
    pub watch_out_of_order: Vec<WatchAnomaly>,
}

/// An acknowledged write whose rv is lower than that of a write acknowledged
/// before it was sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RvRegression {
    pub at_unix_ms: f64,
    pub mode: String,
    pub rv: u64,
    pub previous_rv: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
}

/// Latency of one phase (a `phase` LabEvent with an end, or `outside`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseLatency {
    pub name: String,
    /// The first band of this name (phases with the same name are merged);
    /// `None` for `outside`.
    pub start_unix_ms: Option<f64>,
    pub end_unix_ms: Option<f64>,
    pub requests: u64,
    pub failed: u64,
    /// Single-object reads.
    pub get: Option<Latency>,
    pub list: Option<Latency>,
    /// Mutations.
    pub write: Option<Latency>,
    /// `None` when there was no successful get in the phase.
    pub read_slo_met: Option<bool>,
    pub mutation_slo_met: Option<bool>,
}

/// What Gardener's zero-downtime validator would have concluded: it curls
/// /healthz every 10 s and fails after 3 consecutive failures. Simulated from
/// the readyz records, informational only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidatorSim {
    pub interval_ms: f64,
    /// Ticks that had a readyz record to look at.
    pub ticks: u64,
    pub failures: u64,
    pub max_consecutive_failures: u64,
    pub would_fail: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleStatus {
    Passed,
    Failed,
    /// Not run: nothing to check (no watch records, no final counter, ...).
    Skipped,
}

/// One verdict rule and its outcome. `message` is the failing reason, or
/// why the rule was skipped, or a one-line summary when it passed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub name: String,
    pub status: RuleStatus,
    pub message: String,
}

/// Everything `verdict.json` says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub window: Window,
    pub passed: bool,
    /// Why it failed: the messages of the failed rules.
    pub reasons: Vec<String>,
    pub zero_downtime: bool,
    pub thresholds: Thresholds,
    /// Every rule, in a fixed order; the JUnit testcases.
    pub rules: Vec<Rule>,
    pub overall: ProbeStats,
    /// Keyed `probe/mode`, e.g. `get/new`.
    pub probes: BTreeMap<String, ProbeStats>,
    pub ledger: Ledger,
    pub watch: WatchCheck,
    /// The informer lane: what a controller's list+watch saw.
    #[serde(default)]
    pub informer: informer::InformerCheck,
    pub rv_regressions: Vec<RvRegression>,
    pub rv_regression_count: u64,
    /// In band order, `outside` last.
    pub phases: Vec<PhaseLatency>,
    pub validator: ValidatorSim,
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
    }
}

pub fn mode_name(m: ConnMode) -> &'static str {
    match m {
        ConnMode::New => "new",
        ConnMode::Reused => "reused",
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
        Outcome::Error => "error",
    }
}

/// `probe/mode`, the key of [`Verdict::probes`].
pub fn lane_key(p: ProbeKind, m: ConnMode) -> String {
    format!("{}/{}", probe_name(p), mode_name(m))
}

/// Whether a record is a request (everything but a received watch event,
/// and of the informer lane its list and watch requests and broken watches).
pub fn is_request(r: &Record) -> bool {
    match r.probe {
        ProbeKind::Watch => r.event.as_deref().is_none_or(is_connect),
        ProbeKind::Informer => crate::probe::informer::event::is_request(r.event.as_deref()),
        _ => true,
    }
}

fn is_connect(e: &str) -> bool {
    e.eq_ignore_ascii_case("connect")
}

/// A watch event that carries the counter: ADDED or MODIFIED.
fn is_data_event(r: &Record) -> bool {
    r.probe == ProbeKind::Watch
        && r.outcome == Outcome::Ok
        && matches!(r.event.as_deref(), Some(e) if e.eq_ignore_ascii_case("ADDED") || e.eq_ignore_ascii_case("MODIFIED"))
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

/// The unavailable intervals of one probe+mode's requests, sorted by start.
pub fn unavailable_intervals(sorted: &[&Record]) -> Vec<Interval> {
    let mut out = Vec::new();
    // (start of the interval, latest end of its failed requests)
    let mut open: Option<(f64, f64)> = None;
    for r in sorted {
        if r.outcome == Outcome::Ok {
            if let Some((start, _)) = open.take() {
                out.push(Interval {
                    start_unix_ms: start,
                    end_unix_ms: record_end(r).max(start),
                });
            }
        } else {
            let end = record_end(r);
            open = Some(match open {
                None => (r.start_unix_ms, end),
                Some((s, e)) => (s, e.max(end)),
            });
        }
    }
    if let Some((start, end)) = open {
        out.push(Interval {
            start_unix_ms: start,
            end_unix_ms: end,
        });
    }
    out
}

/// The union of intervals, sorted, overlapping and touching ones merged.
pub fn merge_intervals(mut v: Vec<Interval>) -> Vec<Interval> {
    v.sort_by(|a, b| a.start_unix_ms.total_cmp(&b.start_unix_ms));
    let mut out: Vec<Interval> = Vec::with_capacity(v.len());
    for i in v {
        match out.last_mut() {
            Some(last) if i.start_unix_ms <= last.end_unix_ms => {
                last.end_unix_ms = last.end_unix_ms.max(i.end_unix_ms);
            }
            _ => out.push(i),
        }
    }
    out
}

fn stats_of(requests: &[&Record], intervals: Vec<Interval>, latency: bool) -> ProbeStats {
    let mut failures = BTreeMap::new();
    let mut ok = 0u64;
    let mut durations = Vec::new();
    for r in requests {
        if r.outcome == Outcome::Ok {
            ok += 1;
            if latency {
                durations.push(r.duration_ms);
            }
        } else {
            *failures
                .entry(outcome_name(r.outcome).to_string())
                .or_insert(0) += 1;
        }
    }
    let n = requests.len() as u64;
    // `+ 0.0` turns the empty sum (-0.0) into 0.
    let downtime_ms = intervals.iter().map(Interval::duration_ms).sum::<f64>() + 0.0;
    let longest_unavailable_ms = intervals
        .iter()
        .map(Interval::duration_ms)
        .fold(0.0, f64::max);
    let unavailable_count = intervals.len() as u64;
    let mut unavailable = intervals;
    unavailable.truncate(MAX_LISTED_INTERVALS);
    ProbeStats {
        requests: n,
        ok,
        failures,
        availability_pct: if n == 0 {
            100.0
        } else {
            ok as f64 / n as f64 * 100.0
        },
        downtime_ms,
        longest_unavailable_ms,
        unavailable_count,
        unavailable,
        latency: if latency { latency_of(durations) } else { None },
    }
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

/// Compute the verdict from the records and lab events of one run.
/// `final_counter` is the counter value read back after the run, if any.
pub fn compute(
    records: &[Record],
    events: &[LabEvent],
    final_counter: Option<u64>,
    thresholds: &Thresholds,
) -> Verdict {
    let mut all: Vec<&Record> = records.iter().collect();
    all.sort_by(by_start);
    let window = Window {
        start_unix_ms: all.first().map_or(0.0, |r| r.start_unix_ms),
        end_unix_ms: all.last().map_or(0.0, |r| r.start_unix_ms),
    };
    let requests: Vec<&Record> = all.iter().copied().filter(|r| is_request(r)).collect();

    // Availability per probe+mode and overall.
    let mut lanes: BTreeMap<(ProbeKind, ConnMode), Vec<&Record>> = BTreeMap::new();
    for r in &requests {
        lanes.entry((r.probe, r.mode)).or_default().push(r);
    }
    let mut probes = BTreeMap::new();
    let mut all_intervals = Vec::new();
    for ((p, m), rs) in &lanes {
        let iv = unavailable_intervals(rs);
        all_intervals.extend(iv.iter().copied());
        probes.insert(lane_key(*p, *m), stats_of(rs, iv, true));
    }
    let overall = stats_of(&requests, merge_intervals(all_intervals), false);
    let zero_downtime = !requests.is_empty() && overall.failed() == 0;

    let ledger = ledger(&all, final_counter);
    let watch = watch_check(&all, &window, thresholds);
    let informer = informer::check(&all, events);
    let (rv_regressions, rv_regression_count) = rv_regressions(&all);
    let phases = phases(&requests, events, thresholds);
    let validator = validator_sim(&requests, &window);

    // Rules, in a fixed order.
    let mut rules = Vec::new();
    rules.push(if requests.is_empty() {
        Rule {
            name: "zero-downtime".into(),
            status: RuleStatus::Failed,
            message: "no requests recorded: nothing shows the API was up".into(),
        }
    } else if zero_downtime {
        Rule {
            name: "zero-downtime".into(),
            status: RuleStatus::Passed,
            message: format!("{} requests, none failed", overall.requests),
        }
    } else {
        let per: Vec<String> = probes
            .iter()
            .filter(|(_, s)| s.failed() > 0)
            .map(|(k, s)| {
                let classes: Vec<String> =
                    s.failures.iter().map(|(c, n)| format!("{n} {c}")).collect();
                format!(
                    "{k}: {} ({}), longest {}",
                    classes.join(", "),
                    format_args!("{:.3}% available", s.availability_pct),
                    fmt_ms(s.longest_unavailable_ms)
                )
            })
            .collect();
        Rule {
            name: "zero-downtime".into(),
            status: RuleStatus::Failed,
            message: format!(
                "{} of {} requests failed; overall downtime {} in {} interval(s), longest {}; {}",
                overall.failed(),
                overall.requests,
                fmt_ms(overall.downtime_ms),
                overall.unavailable_count,
                fmt_ms(overall.longest_unavailable_ms),
                per.join("; ")
            ),
        }
    });
    rules.push(match ledger.final_counter {
        None => Rule {
            name: "lost-writes".into(),
            status: RuleStatus::Skipped,
            message: "no final counter read back after the run".into(),
        },
        Some(fc) if ledger.lost_count > 0 => Rule {
            name: "lost-writes".into(),
            status: RuleStatus::Failed,
            message: format!(
                "{} acknowledged write(s) lost: the counter read back is {fc}, but the API acknowledged {}",
                ledger.lost_count,
                fmt_list(&ledger.lost_writes, ledger.lost_count)
            ),
        },
        Some(fc) => Rule {
            name: "lost-writes".into(),
            status: RuleStatus::Passed,
            message: format!(
                "{} acknowledged write(s), final counter {fc}",
                ledger.acknowledged
            ),
        },
    });
    rules.push(if ledger.ledger_conflicts.is_empty() {
        Rule {
            name: "ledger-conflicts".into(),
            status: RuleStatus::Passed,
            message: format!(
                "{} acknowledged write(s), no value acknowledged with two resourceVersions",
                ledger.acknowledged
            ),
        }
    } else {
        let c: Vec<String> = ledger
            .ledger_conflicts
            .iter()
            .take(10)
            .map(|c| format!("{} at rv {:?}", c.value, c.rvs))
            .collect();
        Rule {
            name: "ledger-conflicts".into(),
            status: RuleStatus::Failed,
            message: format!(
                "{} value(s) acknowledged twice with different resourceVersions (two writers won the same update): {}",
                ledger.ledger_conflicts.len(),
                c.join(", ")
            ),
        }
    });
    rules.push(if !watch.run {
        Rule {
            name: "watch-continuity".into(),
            status: RuleStatus::Skipped,
            message: "no watch records: watch continuity not checked".into(),
        }
    } else if watch.missed_count + watch.duplicated_count + watch.out_of_order_count == 0 {
        Rule {
            name: "watch-continuity".into(),
            status: RuleStatus::Passed,
            message: format!(
                "{} event(s) over {} connect(s), {} expected write(s) all seen",
                watch.events, watch.connects, watch.expected
            ),
        }
    } else {
        let mut parts = Vec::new();
        if watch.missed_count > 0 {
            let vals: Vec<String> = watch
                .watch_missed
                .iter()
                .map(|m| format!("{} ({})", m.value, m.mode))
                .collect();
            parts.push(format!(
                "{} acknowledged write(s) never seen by the watch: {}",
                watch.missed_count,
                fmt_list(&vals, watch.missed_count)
            ));
        }
        if watch.duplicated_count > 0 {
            let v: Vec<String> = watch
                .watch_duplicated
                .iter()
                .map(|a| format!("rv {} ({})", a.rv, a.mode))
                .collect();
            parts.push(format!(
                "{} duplicated event(s): {}",
                watch.duplicated_count,
                fmt_list(&v, watch.duplicated_count)
            ));
        }
        if watch.out_of_order_count > 0 {
            let v: Vec<String> = watch
                .watch_out_of_order
                .iter()
                .map(|a| format!("rv {} after {} ({})", a.rv, a.previous_rv, a.mode))
                .collect();
            parts.push(format!(
                "{} out-of-order event(s): {}",
                watch.out_of_order_count,
                fmt_list(&v, watch.out_of_order_count)
            ));
        }
        Rule {
            name: "watch-continuity".into(),
            status: RuleStatus::Failed,
            message: parts.join("; "),
        }
    });
    rules.push(informer::rule(&informer));
    rules.push(if rv_regression_count == 0 {
        Rule {
            name: "rv-monotonic".into(),
            status: RuleStatus::Passed,
            message: "acknowledged resourceVersions never went backwards".into(),
        }
    } else {
        let v: Vec<String> = rv_regressions
            .iter()
            .map(|r| format!("rv {} after {} ({})", r.rv, r.previous_rv, r.mode))
            .collect();
        Rule {
            name: "rv-monotonic".into(),
            status: RuleStatus::Failed,
            message: format!(
                "{rv_regression_count} acknowledged write(s) with a resourceVersion lower than one acknowledged before: {}",
                fmt_list(&v, rv_regression_count)
            ),
        }
    });
    for ph in &phases {
        for (kind, lat, met, limit, what) in [
            (
                "get",
                &ph.get,
                ph.read_slo_met,
                thresholds.read_p99_ms,
                "read",
            ),
            (
                "write",
                &ph.write,
                ph.mutation_slo_met,
                thresholds.mutation_p99_ms,
                "mutation",
            ),
        ] {
            let name = format!("slo-{}-{kind}", slug(&ph.name));
            rules.push(match (lat, met) {
                (Some(l), Some(true)) => Rule {
                    name,
                    status: RuleStatus::Passed,
                    message: format!(
                        "phase {}: {what} p99 {} ≤ {} over {} request(s)",
                        ph.name,
                        fmt_ms(l.p99_ms),
                        fmt_ms(limit),
                        l.count
                    ),
                },
                (Some(l), _) => Rule {
                    name,
                    status: RuleStatus::Failed,
                    message: format!(
                        "phase {}: {what} ({kind}) p99 {} exceeds the SLO of {} (p50 {}, max {}, {} request(s))",
                        ph.name,
                        fmt_ms(l.p99_ms),
                        fmt_ms(limit),
                        fmt_ms(l.p50_ms),
                        fmt_ms(l.max_ms),
                        l.count
                    ),
                },
                (None, _) => Rule {
                    name,
                    status: RuleStatus::Skipped,
                    message: format!("phase {}: no successful {kind} request", ph.name),
                },
            });
        }
    }

    let reasons: Vec<String> = rules
        .iter()
        .filter(|r| r.status == RuleStatus::Failed)
        .map(|r| format!("{}: {}", r.name, r.message))
        .collect();
    Verdict {
        window,
        passed: reasons.is_empty(),
        reasons,
        zero_downtime,
        thresholds: thresholds.clone(),
        rules,
        overall,
        probes,
        ledger,
        watch,
        informer,
        rv_regressions,
        rv_regression_count,
        phases,
        validator,
    }
}

fn acked_writes<'a>(all: &[&'a Record]) -> Vec<&'a Record> {
    all.iter()
        .copied()
        .filter(|r| r.probe == ProbeKind::Write && r.outcome == Outcome::Ok && r.value.is_some())
        .collect()
}

fn ledger(all: &[&Record], final_counter: Option<u64>) -> Ledger {
    let acked = acked_writes(all);
    let mut rvs: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for r in &acked {
        let e = rvs.entry(r.value.unwrap()).or_default();
        if let Some(rv) = r.rv {
            e.insert(rv);
        }
    }
    let lost: Vec<u64> = match final_counter {
        Some(fc) => rvs.keys().copied().filter(|v| *v > fc).collect(),
        None => Vec::new(),
    };
    let lost_count = lost.len() as u64;
    let ledger_conflicts = rvs
        .iter()
        .filter(|(_, s)| s.len() > 1)
        .take(MAX_LISTED_ANOMALIES)
        .map(|(v, s)| LedgerConflict {
            value: *v,
            rvs: s.iter().copied().collect(),
        })
        .collect();
    Ledger {
        acknowledged: acked.len() as u64,
        max_acknowledged: rvs.keys().next_back().copied(),
        final_counter,
        lost_writes: lost.into_iter().take(MAX_LISTED_ANOMALIES).collect(),
        lost_count,
        ledger_conflicts,
    }
}

fn push_capped<T>(v: &mut Vec<T>, count: &mut u64, x: T) {
    *count += 1;
    if v.len() < MAX_LISTED_ANOMALIES {
        v.push(x);
    }
}

fn watch_check(all: &[&Record], window: &Window, th: &Thresholds) -> WatchCheck {
    let mut by_mode: BTreeMap<ConnMode, Vec<&Record>> = BTreeMap::new();
    for r in all.iter().filter(|r| r.probe == ProbeKind::Watch) {
        by_mode.entry(r.mode).or_default().push(r);
    }
    let mut w = WatchCheck {
        run: !by_mode.is_empty(),
        modes: by_mode.keys().map(|m| mode_name(*m).to_string()).collect(),
        events: 0,
        connects: 0,
        expected: 0,
        missed_count: 0,
        duplicated_count: 0,
        out_of_order_count: 0,
        watch_missed: Vec::new(),
        watch_duplicated: Vec::new(),
        watch_out_of_order: Vec::new(),
    };
    let acked = acked_writes(all);
    for (mode, rs) in &by_mode {
        let mode_s = mode_name(*mode).to_string();
        // rv -> first sighting; the previous event's rv; whether a connect
        // came since that event.
        let mut seen_rv: HashMap<u64, ()> = HashMap::new();
        let mut seen_values: BTreeSet<u64> = BTreeSet::new();
        let mut prev_rv: Option<u64> = None;
        let mut after_connect = false;
        let mut established: Option<f64> = None;
        for r in rs {
            if r.event.as_deref().is_none_or(is_connect) {
                w.connects += 1;
                after_connect = true;
                if r.outcome == Outcome::Ok && established.is_none() {
                    established = Some(record_end(r));
                }
                continue;
            }
            if !is_data_event(r) {
                continue;
            }
            w.events += 1;
            if established.is_none() {
                // Events without a connect record: the watch was up by then.
                established = Some(r.start_unix_ms);
            }
            if let Some(v) = r.value {
                seen_values.insert(v);
            }
            let Some(rv) = r.rv else { continue };
            if seen_rv.insert(rv, ()).is_some() {
                push_capped(
                    &mut w.watch_duplicated,
                    &mut w.duplicated_count,
                    WatchAnomaly {
                        mode: mode_s.clone(),
                        at_unix_ms: r.start_unix_ms,
                        rv,
                        previous_rv: rv,
                        value: r.value,
                    },
                );
            }
            if let Some(p) = prev_rv {
                if rv < p && !after_connect {
                    push_capped(
                        &mut w.watch_out_of_order,
                        &mut w.out_of_order_count,
                        WatchAnomaly {
                            mode: mode_s.clone(),
                            at_unix_ms: r.start_unix_ms,
                            rv,
                            previous_rv: p,
                            value: r.value,
                        },
                    );
                }
            }
            prev_rv = Some(rv);
            after_connect = false;
        }
        // Writes this watch must have delivered: sent after it was
        // established, acknowledged before the grace period at the end.
        let Some(established) = established else {
            continue;
        };
        let mut expected: BTreeMap<u64, f64> = BTreeMap::new();
        for r in &acked {
            let acked_at = record_end(r);
            if r.start_unix_ms >= established && acked_at <= window.end_unix_ms - th.watch_grace_ms
            {
                expected.entry(r.value.unwrap()).or_insert(acked_at);
            }
        }
        w.expected += expected.len() as u64;
        for (v, at) in expected {
            if !seen_values.contains(&v) {
                push_capped(
                    &mut w.watch_missed,
                    &mut w.missed_count,
                    WatchMiss {
                        mode: mode_s.clone(),
                        value: v,
                        acked_unix_ms: at,
                    },
                );
            }
        }
    }
    w
}

/// A write is compared with the writes acknowledged before it was sent (real
/// time order): with one sequential writer that is plain start order, and
/// concurrent writers in the two modes do not raise false alarms.
fn rv_regressions(all: &[&Record]) -> (Vec<RvRegression>, u64) {
    let acked: Vec<&Record> = acked_writes(all)
        .into_iter()
        .filter(|r| r.rv.is_some())
        .collect();
    let mut by_end: Vec<&Record> = acked.clone();
    by_end.sort_by(|a, b| record_end(a).total_cmp(&record_end(b)));
    let mut out = Vec::new();
    let mut count = 0;
    let mut max_before: Option<u64> = None;
    let mut j = 0;
    for r in &acked {
        while j < by_end.len() && record_end(by_end[j]) <= r.start_unix_ms {
            max_before = max_before.max(by_end[j].rv);
            j += 1;
        }
        let rv = r.rv.unwrap();
        if let Some(p) = max_before {
            if rv < p {
                push_capped(
                    &mut out,
                    &mut count,
                    RvRegression {
                        at_unix_ms: r.start_unix_ms,
                        mode: mode_name(r.mode).into(),
                        rv,
                        previous_rv: p,
                        value: r.value,
                    },
                );
            }
        }
    }
    (out, count)
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

fn phases(requests: &[&Record], events: &[LabEvent], th: &Thresholds) -> Vec<PhaseLatency> {
    let bands = phase_bands(events);
    // Phase names in band order; same name = same phase.
    let mut names: Vec<&str> = Vec::new();
    for b in &bands {
        if !names.contains(&b.name.as_str()) {
            names.push(&b.name);
        }
    }
    let outside = names.len();
    let mut buckets: Vec<Vec<&Record>> = vec![Vec::new(); names.len() + 1];
    for r in requests {
        let mut placed = false;
        for b in &bands {
            if r.start_unix_ms >= b.at_unix_ms && r.start_unix_ms < b.end_unix_ms.unwrap() {
                let i = names.iter().position(|n| *n == b.name).unwrap();
                // A record in two bands of the same name counts once.
                if !buckets[i].last().is_some_and(|l| std::ptr::eq(*l, *r)) {
                    buckets[i].push(r);
                }
                placed = true;
            }
        }
        if !placed {
            buckets[outside].push(r);
        }
    }
    let mut out = Vec::new();
    for (i, rs) in buckets.iter().enumerate() {
        if i == outside && rs.is_empty() {
            continue;
        }
        let lat = |p: ProbeKind| {
            latency_of(
                rs.iter()
                    .filter(|r| r.probe == p && r.outcome == Outcome::Ok)
                    .map(|r| r.duration_ms)
                    .collect(),
            )
        };
        let get = lat(ProbeKind::Get);
        let list = lat(ProbeKind::List);
        let write = lat(ProbeKind::Write);
        let (name, start, end) = if i == outside {
            ("outside".to_string(), None, None)
        } else {
            let b = bands.iter().find(|b| b.name == names[i]).unwrap();
            (names[i].to_string(), Some(b.at_unix_ms), b.end_unix_ms)
        };
        out.push(PhaseLatency {
            name,
            start_unix_ms: start,
            end_unix_ms: end,
            requests: rs.len() as u64,
            failed: rs.iter().filter(|r| r.outcome != Outcome::Ok).count() as u64,
            read_slo_met: get.map(|l| l.p99_ms <= th.read_p99_ms),
            mutation_slo_met: write.map(|l| l.p99_ms <= th.mutation_p99_ms),
            get,
            list,
            write,
        });
    }
    out
}

/// Gardener's validator, simulated: at each 10 s tick from the window start,
/// the first readyz record (either mode) that starts at or after the tick and
/// before the next one is the curl; ticks without one are not counted.
fn validator_sim(requests: &[&Record], window: &Window) -> ValidatorSim {
    let readyz: Vec<&Record> = requests
        .iter()
        .copied()
        .filter(|r| r.probe == ProbeKind::Readyz)
        .collect();
    let mut sim = ValidatorSim {
        interval_ms: VALIDATOR_INTERVAL_MS,
        ticks: 0,
        failures: 0,
        max_consecutive_failures: 0,
        would_fail: false,
    };
    if readyz.is_empty() {
        return sim;
    }
    let mut consecutive = 0;
    let mut k = 0u64;
    loop {
        let tick = window.start_unix_ms + k as f64 * VALIDATOR_INTERVAL_MS;
        if tick > window.end_unix_ms {
            break;
        }
        k += 1;
        let i = readyz.partition_point(|r| r.start_unix_ms < tick);
        let Some(r) = readyz.get(i) else { break };
        if r.start_unix_ms >= tick + VALIDATOR_INTERVAL_MS {
            continue;
        }
        sim.ticks += 1;
        if r.outcome == Outcome::Ok {
            consecutive = 0;
        } else {
            sim.failures += 1;
            consecutive += 1;
            sim.max_consecutive_failures = sim.max_consecutive_failures.max(consecutive);
        }
    }
    sim.would_fail = sim.max_consecutive_failures >= VALIDATOR_FAILURES_TO_FAIL;
    sim
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
        Record {
            seq: 0,
            probe,
            mode,
            start_unix_ms: T0 + t,
            start_mono_ms: t,
            duration_ms: dur,
            outcome,
            http_status: (outcome == Outcome::Ok).then_some(200),
            seed: (outcome == Outcome::Ok).then(|| "seed-a".to_string()),
            server: None,
            addr: None,
            error: None,
            value: None,
            rv: None,
            event: None,
        }
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
    fn verdict_clean_run_passes_with_zero_downtime() {
        let recs = clean_run();
        let v = compute(&recs, &[], Some(100), &th());
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
        let v = compute(&[], &[], None, &th());
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
        let v = compute(&recs, &[], None, &th());
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
        let v = compute(&recs, &[], None, &th());
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
        let v = compute(&recs, &[], None, &th());
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
        let v = compute(&recs, &[], Some(97), &th());
        assert!(!v.passed);
        assert_eq!(v.ledger.lost_writes, vec![98, 99, 100]);
        let r = v.rule("lost-writes").unwrap();
        assert_eq!(r.status, RuleStatus::Failed);
        assert!(r.message.contains("98, 99, 100"), "{}", r.message);
        // Without a final counter the check is skipped, not passed.
        let v = compute(&recs, &[], None, &th());
        assert_eq!(v.rule("lost-writes").unwrap().status, RuleStatus::Skipped);
        assert!(v.passed);
    }

    #[test]
    fn verdict_ledger_conflict_detected() {
        let mut recs = clean_run();
        recs.push(write(5_005.0, 50, 7777));
        let v = compute(&recs, &[], Some(100), &th());
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
        let v = compute(&recs, &[], Some(100), &th());
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
        let v = compute(&recs, &[], Some(100), &th());
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
        let v = compute(&recs, &[], Some(100), &th());
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

        // Right after a connect, a lower rv (a re-list) is not out of order.
        let mut recs = clean_run();
        recs.push(connect(ConnMode::Reused, 2_040.0));
        recs.push(watch_event(ConnMode::Reused, 2_045.0, 6, 1005));
        let v = compute(&recs, &[], Some(100), &th());
        assert_eq!(v.watch.out_of_order_count, 0);
        assert_eq!(v.watch.duplicated_count, 1);
    }

    #[test]
    fn verdict_rv_regression_detected() {
        let mut recs = clean_run();
        // value 101 acknowledged with an rv older than the earlier writes'.
        recs.push(write(9_995.0, 101, 900));
        let v = compute(&recs, &[], Some(101), &th());
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
        let v = compute(&[a, b], &[], Some(2), &th());
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
        let v = compute(&recs, &events, Some(100), &th());
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

    fn readyz_outage(fail_from: f64, fail_to: f64) -> ValidatorSim {
        let recs = series(
            ProbeKind::Readyz,
            ConnMode::New,
            0.0,
            60_001.0,
            100.0,
            Some((fail_from, fail_to)),
        );
        compute(&recs, &[], None, &th()).validator
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
        let v = compute(&recs, &[], None, &th());
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
}
