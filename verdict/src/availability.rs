//! The `zero-downtime` rule: availability per probe and connection mode and
//! overall, from timestamps.
//!
//! A *request* is every record [`super::is_request`] says is one; an attempt
//! the server refused unprocessed and the client retried at once (a record
//! another record's `retry_of` names) is judged as the client saw it: by
//! its retry. An *unavailable interval* of one lane starts at the start of
//! a failed request that follows a success (or is the first request) and
//! ends when the next successful request completes, or, when none follows,
//! at the latest end of the failed requests. Downtime is the sum of these
//! intervals; overall downtime is the union of all lanes' intervals.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    fmt_ms, lane_key, latency_of, outcome_name, record_end, Interval, ProbeStats, Rule, RuleStatus,
    MAX_LISTED_INTERVALS,
};
use crate::record::{ConnMode, Outcome, ProbeKind, Record};

/// A failed request, as `verdict.json` lists the first of them: enough to
/// find it in the records and see what the client got.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FailedRequest {
    pub seq: u64,
    /// `probe/mode`.
    pub lane: String,
    pub start_unix_ms: f64,
    pub duration_ms: f64,
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Most failed requests listed in `verdict.json`.
pub const MAX_LISTED_FAILURES: usize = 100;

/// The first failed requests, in start order.
pub fn first_failures(requests: &[&Record]) -> Vec<FailedRequest> {
    requests
        .iter()
        .filter(|r| r.outcome != Outcome::Ok)
        .take(MAX_LISTED_FAILURES)
        .map(|r| FailedRequest {
            seq: r.seq,
            lane: lane_key(r.probe, r.mode),
            start_unix_ms: r.start_unix_ms,
            duration_ms: r.duration_ms,
            outcome: outcome_name(r.outcome).into(),
            event: r.event.clone(),
            server: r.server.clone(),
            error: r.error.clone(),
        })
        .collect()
}

/// Availability of every lane and overall.
pub struct Availability<'a> {
    /// The requests judged (retried attempts left out), in start order.
    pub requests: Vec<&'a Record>,
    pub overall: ProbeStats,
    pub probes: BTreeMap<String, ProbeStats>,
}

/// The seqs of attempts that were retried (named by a `retry_of`).
pub fn retried(all: &[&Record]) -> BTreeSet<u64> {
    all.iter().filter_map(|r| r.retry_of).collect()
}

/// The unavailable intervals of one lane's requests, sorted by start.
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

fn stats_of(
    requests: &[&Record],
    intervals: Vec<Interval>,
    latency: bool,
    retried: u64,
) -> ProbeStats {
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
        retried,
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

/// Availability from records sorted by start.
pub fn availability<'a>(all: &[&'a Record]) -> Availability<'a> {
    let retried = retried(all);
    let requests: Vec<&Record> = all
        .iter()
        .copied()
        .filter(|r| super::is_request(r) && !retried.contains(&r.seq))
        .collect();
    let mut lanes: BTreeMap<(ProbeKind, ConnMode), Vec<&Record>> = BTreeMap::new();
    for r in &requests {
        lanes.entry((r.probe, r.mode)).or_default().push(r);
    }
    let mut retried_per_lane: BTreeMap<(ProbeKind, ConnMode), u64> = BTreeMap::new();
    for r in all.iter().filter(|r| retried.contains(&r.seq)) {
        *retried_per_lane.entry((r.probe, r.mode)).or_default() += 1;
    }
    let mut probes = BTreeMap::new();
    let mut all_intervals = Vec::new();
    for ((p, m), rs) in &lanes {
        let iv = unavailable_intervals(rs);
        all_intervals.extend(iv.iter().copied());
        let n = retried_per_lane.get(&(*p, *m)).copied().unwrap_or(0);
        probes.insert(lane_key(*p, *m), stats_of(rs, iv, true, n));
    }
    let overall = stats_of(
        &requests,
        merge_intervals(all_intervals),
        false,
        retried.len() as u64,
    );
    Availability {
        requests,
        overall,
        probes,
    }
}

/// The availability rule's name.
pub const RULE: &str = "zero-downtime";

/// The `zero-downtime` rule: zero failed requests in the window.
pub fn rule(a: &Availability) -> Rule {
    let name = RULE.to_string();
    let overall = &a.overall;
    if a.requests.is_empty() {
        return Rule {
            name,
            status: RuleStatus::Failed,
            message: "no requests recorded: nothing shows the API was up".into(),
        };
    }
    if overall.failed() == 0 {
        return Rule {
            name,
            status: RuleStatus::Passed,
            message: format!(
                "{} requests, none failed{}",
                overall.requests,
                if overall.retried > 0 {
                    format!(
                        " ({} refused unprocessed and retried at once, as clients do)",
                        overall.retried
                    )
                } else {
                    String::new()
                }
            ),
        };
    }
    let per: Vec<String> = a
        .probes
        .iter()
        .filter(|(_, s)| s.failed() > 0)
        .map(|(k, s)| {
            let classes: Vec<String> = s.failures.iter().map(|(c, n)| format!("{n} {c}")).collect();
            format!(
                "{k}: {} ({:.3}% available), longest {}",
                classes.join(", "),
                s.availability_pct,
                fmt_ms(s.longest_unavailable_ms)
            )
        })
        .collect();
    Rule {
        name,
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
}
