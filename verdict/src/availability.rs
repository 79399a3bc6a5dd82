//! The `zero-downtime` rule: availability per probe and connection mode and
//! overall, from timestamps.
//!
//! A *request* is every record [`super::is_request`] says is one, but for
//! two kinds of attempt that are judged otherwise:
//! - an attempt the server refused unprocessed (a GOAWAY'd stream, retried
//!   at once; or a 429/5xx with Retry-After, retried after the wait it asked
//!   for) that the client retried: a record another record's `retry_of`
//!   names. It is judged as the client saw it: by its retry, whose duration
//!   runs from the first attempt's start, the wait included.
//! - a write the API answered 409 Conflict because another of the writer's
//!   writes moved the counter past its base revision first (an
//!   acknowledged write with the same `base_rv`, or one whose revision is
//!   above it and that ended before this one did): *superseded*. The API
//!   served it correctly; it is counted apart, neither a success nor a
//!   failure.
//! - a readyz a draining API server answered with its etcd checks stopped
//!   (see [`crate::drained_readyz`]): the server's going-away answer,
//!   counted apart like a refused attempt.
//! - a watch stream the peer closed under it in one of the EOFs client-go
//!   ends a watch on quietly (see [`crate::watch_end`]): the watch's end,
//!   counted apart; its reconnect is judged as a request.
//!
//! A request *failed* when its outcome is not `ok`, or when it succeeded
//! but took longer than the stall bound (`Criteria::stall_ms`, default
//! 5 s): a *stall*, class `stall`, which is unavailability, not only
//! latency. An *unavailable interval* of one lane starts at the start of a
//! failed request that follows a success (or is the first request) and
//! ends when the next successful request completes, but not before the
//! latest end of the failed requests in it (a lane's requests overlap: a
//! stall or a timeout is unavailable for its whole length); when no
//! success follows, at the latest end of the failed requests. Downtime is the sum of these
//! intervals; overall downtime is the union of all lanes' intervals. A
//! watch or informer lane's silences (no event for longer than
//! [`crate::mechanisms::SILENT_MS`] while writes were acknowledged: see
//! [`crate::watch_silence`]) are unavailable intervals of that lane too,
//! from its last event before the silence to its first after: its client
//! could not see the API's state change, though no request failed. These
//! figures are raw: requests a known hazard excused are in them (see
//! `excuse`), and listed beside them.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    fmt_ms, lane_key, latency_of, outcome_name, record_end, Interval, ProbeStats, Rule, RuleStatus,
    MAX_LISTED_INTERVALS,
};
use crate::excuse::Excuses;
use crate::record::{ConnMode, Outcome, ProbeKind, Record};

/// How each request is classed: the stall bound and the superseded writes.
#[derive(Debug, Clone, Default)]
pub struct Classify {
    pub stall_ms: f64,
    /// Seqs of superseded writes (see the module doc).
    pub superseded: BTreeSet<u64>,
    /// Seqs of readyz a draining server answered (see the module doc).
    pub drained_readyz: BTreeSet<u64>,
    /// Seqs of watch streams that ended as client-go ends a watch (see the
    /// module doc).
    pub watch_ends: BTreeSet<u64>,
}

impl Classify {
    pub fn new(all: &[&Record], stall_ms: f64) -> Classify {
        Classify {
            stall_ms,
            superseded: superseded_writes(all),
            drained_readyz: BTreeSet::new(),
            watch_ends: crate::watch_end::find(all),
        }
    }

    /// With the readyz [`crate::drained_readyz::find`] matched to a
    /// draining server.
    pub fn with_drained_readyz(mut self, seqs: impl IntoIterator<Item = u64>) -> Classify {
        self.drained_readyz.extend(seqs);
        self
    }

    /// Whether a record is set aside (a superseded write, a drained
    /// server's readyz), neither a success nor a failure.
    pub fn set_aside(&self, r: &Record) -> bool {
        self.superseded.contains(&r.seq)
            || self.drained_readyz.contains(&r.seq)
            || self.watch_ends.contains(&r.seq)
    }

    /// A stall: it succeeded, slower than the bound.
    pub fn stalled(&self, r: &Record) -> bool {
        r.outcome == Outcome::Ok && r.duration_ms > self.stall_ms
    }

    /// Whether a request failed (not `ok`, or a stall).
    pub fn failed(&self, r: &Record) -> bool {
        r.outcome != Outcome::Ok || self.stalled(r)
    }

    /// The failure class: the outcome's name, or `stall`.
    pub fn class(&self, r: &Record) -> &'static str {
        if self.stalled(r) {
            "stall"
        } else {
            outcome_name(r.outcome)
        }
    }
}

/// The writes answered 409 Conflict that another of the writer's writes
/// superseded (see the module doc).
pub fn superseded_writes(all: &[&Record]) -> BTreeSet<u64> {
    let updates: Vec<&Record> = all
        .iter()
        .copied()
        .filter(|r| r.probe == ProbeKind::Write && r.event.is_none())
        .collect();
    let acked: Vec<&Record> = updates
        .iter()
        .copied()
        .filter(|r| r.outcome == Outcome::Ok && r.rv.is_some())
        .collect();
    updates
        .iter()
        .filter(|r| r.outcome == Outcome::Http && r.http_status == Some(409))
        .filter(|r| {
            let Some(base) = r.base_rv else { return false };
            acked.iter().any(|w| {
                w.seq != r.seq
                    && (w.base_rv == Some(base)
                        || (w.rv.unwrap() > base && record_end(w) <= record_end(r)))
            })
        })
        .map(|r| r.seq)
        .collect()
}

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
pub fn first_failures(requests: &[&Record], c: &Classify) -> Vec<FailedRequest> {
    requests
        .iter()
        .filter(|r| c.failed(r))
        .take(MAX_LISTED_FAILURES)
        .map(|r| FailedRequest {
            seq: r.seq,
            lane: lane_key(r.probe, r.mode),
            start_unix_ms: r.start_unix_ms,
            duration_ms: r.duration_ms,
            outcome: c.class(r).into(),
            event: r.event.clone(),
            server: r.server.clone(),
            error: r.error.clone(),
        })
        .collect()
}

/// Availability of every lane and overall.
pub struct Availability<'a> {
    /// The requests judged (retried attempts and superseded writes left
    /// out), in start order.
    pub requests: Vec<&'a Record>,
    /// The failed ones, in start order.
    pub failed: Vec<&'a Record>,
    pub overall: ProbeStats,
    pub probes: BTreeMap<String, ProbeStats>,
}

/// The seqs of attempts that were retried as clients retry: named by a
/// `retry_of` of a record of the same lane (probe and connection mode)
/// that began with it or after it and ended after it, and failed in a
/// class clients send again ([`retryable`]). Any other `retry_of` is not
/// taken on trust: the attempt it names stays a request.
pub fn retried(all: &[&Record]) -> BTreeSet<u64> {
    let by_seq: std::collections::HashMap<u64, &Record> = all.iter().map(|r| (r.seq, *r)).collect();
    all.iter()
        .filter_map(|r| {
            let a = by_seq.get(&r.retry_of?)?;
            let same_lane = a.probe == r.probe && a.mode == r.mode;
            // The retry's record runs from the first attempt's start (the
            // wait included): it starts with the attempt, never before.
            let after = r.start_unix_ms >= a.start_unix_ms - RETRY_SLACK_MS
                && record_end(r) >= record_end(a) - RETRY_SLACK_MS;
            (same_lane && after && retryable(a)).then_some(a.seq)
        })
        .collect()
}

/// Clock slack between an attempt and its retry's record (ms).
const RETRY_SLACK_MS: f64 = 1.0;

/// Whether an attempt failed in a way clients send again without counting
/// it: refused unprocessed (a GOAWAY'd or refused stream, a connection
/// that closed before the request was written: the probes' `error` and
/// `reset`), a connection refused or reset before any answer (what Go's
/// `net/http` and urllib3 retry on a pooled connection), or a 429/5xx with
/// Retry-After (client-go's `checkWait`). Never a timeout, a body that did
/// not parse, a DNS or TLS failure, or an HTTP failure without Retry-After:
/// the server may have processed those, or the client would not resend.
pub fn retryable(a: &Record) -> bool {
    match a.outcome {
        Outcome::Error | Outcome::Reset | Outcome::Refused => true,
        Outcome::Http => {
            a.http_status
                .is_none_or(|s| s == 429 || (500..=504).contains(&s))
                && a.error
                    .as_deref()
                    .is_some_and(|e| e.contains("Retry-After"))
        }
        Outcome::Ok | Outcome::Timeout | Outcome::Decode | Outcome::Dns | Outcome::Tls => false,
    }
}

/// The unavailable intervals of one lane's requests, sorted by start.
pub fn unavailable_intervals(sorted: &[&Record], c: &Classify) -> Vec<Interval> {
    let mut out = Vec::new();
    // (start of the interval, latest end of its failed requests)
    let mut open: Option<(f64, f64)> = None;
    for r in sorted {
        if !c.failed(r) {
            // A success closes the interval when it completes, but never
            // before the failed requests in it have ended: a lane's requests
            // overlap (one connection, a schedule), and a stall or a timeout
            // is unavailable for its whole length.
            if let Some((start, failed_end)) = open.take() {
                out.push(Interval {
                    start_unix_ms: start,
                    end_unix_ms: record_end(r).max(failed_end).max(start),
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

/// Attempts that were retried, and superseded writes, of one lane or all.
#[derive(Debug, Clone, Copy, Default)]
struct SetAside {
    retried: u64,
    retried_after_wait: u64,
    superseded: u64,
    drained_readyz: u64,
    watch_ends: u64,
}

fn stats_of(
    requests: &[&Record],
    intervals: Vec<Interval>,
    latency: bool,
    aside: SetAside,
    c: &Classify,
) -> ProbeStats {
    let mut failures = BTreeMap::new();
    let mut ok = 0u64;
    let mut stalled = 0u64;
    let mut durations = Vec::new();
    for r in requests {
        if r.outcome == Outcome::Ok && latency {
            durations.push(r.duration_ms);
        }
        if !c.failed(r) {
            ok += 1;
        } else {
            if c.stalled(r) {
                stalled += 1;
            }
            *failures.entry(c.class(r).to_string()).or_insert(0) += 1;
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
        retried: aside.retried,
        retried_after_wait: aside.retried_after_wait,
        superseded: aside.superseded,
        drained_readyz: aside.drained_readyz,
        watch_ends: aside.watch_ends,
        stalled,
        excused: 0,
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

/// Availability from records sorted by start; `silences` are the watch and
/// informer lanes' silences (`probe/mode`, from the last event before to
/// the first after), unavailable intervals of their lanes.
pub fn availability<'a>(
    all: &[&'a Record],
    c: &Classify,
    silences: &[(String, Interval)],
) -> Availability<'a> {
    let retried = retried(all);
    let requests: Vec<&Record> = all
        .iter()
        .copied()
        .filter(|r| super::is_request(r) && !retried.contains(&r.seq) && !c.set_aside(r))
        .collect();
    let mut lanes: BTreeMap<(ProbeKind, ConnMode), Vec<&Record>> = BTreeMap::new();
    for r in &requests {
        lanes.entry((r.probe, r.mode)).or_default().push(r);
    }
    let mut aside: BTreeMap<(ProbeKind, ConnMode), SetAside> = BTreeMap::new();
    let mut total = SetAside::default();
    for r in all.iter().filter(|r| retried.contains(&r.seq)) {
        let a = aside.entry((r.probe, r.mode)).or_default();
        a.retried += 1;
        total.retried += 1;
        // A refused attempt with a status was a 429/5xx with Retry-After:
        // its retry waited; a GOAWAY'd stream has none and went at once.
        if r.http_status.is_some() {
            a.retried_after_wait += 1;
            total.retried_after_wait += 1;
        }
    }
    for r in all.iter().filter(|r| c.superseded.contains(&r.seq)) {
        aside.entry((r.probe, r.mode)).or_default().superseded += 1;
        total.superseded += 1;
    }
    for r in all.iter().filter(|r| c.drained_readyz.contains(&r.seq)) {
        aside.entry((r.probe, r.mode)).or_default().drained_readyz += 1;
        total.drained_readyz += 1;
    }
    for r in all.iter().filter(|r| c.watch_ends.contains(&r.seq)) {
        aside.entry((r.probe, r.mode)).or_default().watch_ends += 1;
        total.watch_ends += 1;
    }
    let mut probes = BTreeMap::new();
    let mut all_intervals = Vec::new();
    for ((p, m), rs) in &lanes {
        let key = lane_key(*p, *m);
        let mut iv = unavailable_intervals(rs, c);
        let silent: Vec<Interval> = silences
            .iter()
            .filter(|(lane, _)| *lane == key)
            .map(|(_, i)| *i)
            .collect();
        if !silent.is_empty() {
            iv.extend(silent);
            iv = merge_intervals(iv);
        }
        all_intervals.extend(iv.iter().copied());
        let a = aside.get(&(*p, *m)).copied().unwrap_or_default();
        probes.insert(key, stats_of(rs, iv, true, a, c));
    }
    let overall = stats_of(&requests, merge_intervals(all_intervals), false, total, c);
    let failed = requests.iter().copied().filter(|r| c.failed(r)).collect();
    Availability {
        requests,
        failed,
        overall,
        probes,
    }
}

/// The availability rule's name.
pub const RULE: &str = "zero-downtime";

/// How the set-aside attempts are said, for the rule's message.
fn set_aside_text(o: &ProbeStats) -> String {
    let mut v = Vec::new();
    if o.retried > 0 {
        let at_once = o.retried - o.retried_after_wait;
        let mut how = Vec::new();
        if at_once > 0 {
            how.push(format!("{at_once} at once after a GOAWAY"));
        }
        if o.retried_after_wait > 0 {
            how.push(format!(
                "{} after the Retry-After wait the server asked for",
                o.retried_after_wait
            ));
        }
        v.push(format!(
            "{} attempt(s) refused unprocessed and retried as clients do ({}), each judged by its retry",
            o.retried,
            how.join(", ")
        ));
    }
    v.extend(super::counted(&[
        (
            o.superseded,
            "write(s) superseded by another of the writer's writes (409 Conflict)",
        ),
        (
            o.drained_readyz,
            "readyz answered by a draining API server whose etcd checks had stopped, as kube-apiserver's do once its requests drained",
        ),
        (
            o.watch_ends,
            "watch stream(s) the peer closed, ended as client-go ends a watch and judged by the reconnect",
        ),
    ]));
    if v.is_empty() {
        String::new()
    } else {
        format!(" ({})", v.join("; "))
    }
}

/// The `zero-downtime` rule: zero failed requests in the window, but for
/// those the accepted hazards excuse within their budgets.
pub fn rule(a: &Availability, x: &Excuses) -> Rule {
    let name = RULE.to_string();
    let overall = &a.overall;
    let rule = |status, message| Rule {
        name: name.clone(),
        status,
        message,
    };
    if a.requests.is_empty() {
        return rule(
            RuleStatus::Failed,
            "no requests recorded: nothing shows the API was up".into(),
        );
    }
    if overall.failed() == 0 {
        return rule(
            RuleStatus::Passed,
            format!(
                "{} requests, none failed{}",
                overall.requests,
                set_aside_text(overall)
            ),
        );
    }
    let per: Vec<String> = a
        .probes
        .iter()
        .filter(|(_, s)| s.failed() > 0)
        .map(|(k, s)| {
            let classes: Vec<String> = s.failures.iter().map(|(c, n)| format!("{n} {c}")).collect();
            format!(
                "{k}: {} ({:.3}% available), longest {}{}",
                classes.join(", "),
                s.availability_pct,
                fmt_ms(s.longest_unavailable_ms),
                if s.excused > 0 {
                    format!(", {} excused", s.excused)
                } else {
                    String::new()
                }
            )
        })
        .collect();
    let observed = format!(
        "{} of {} requests failed; overall downtime {} in {} interval(s), longest {}{}; {}",
        overall.failed(),
        overall.requests,
        fmt_ms(overall.downtime_ms),
        overall.unavailable_count,
        fmt_ms(overall.longest_unavailable_ms),
        set_aside_text(overall),
        per.join("; ")
    );
    let budgets: Vec<String> = x
        .hazards
        .iter()
        .filter(|h| h.excused > 0 || !h.within_budget)
        .map(|h| {
            format!(
                "{} excused {} (longest {}), {}{}",
                h.hazard,
                h.excused,
                fmt_ms(h.longest_ms),
                h.budget_text(),
                if h.within_budget { "" } else { ": OVER BUDGET" }
            )
        })
        .collect();
    let unexcused = overall.failed().saturating_sub(x.excused_count);
    let over = !x.over_budget().is_empty();
    let excused = if x.excused_count > 0 {
        format!(
            "; excused {} as known hazards: {}",
            x.excused_count,
            budgets.join("; ")
        )
    } else {
        String::new()
    };
    if unexcused == 0 && !over {
        return rule(
            RuleStatus::Excused,
            format!(
                "every failed request excused by a known hazard within its budget: {observed}{excused}"
            ),
        );
    }
    let why = if unexcused > 0 {
        format!("{unexcused} failed request(s) no known hazard explains")
    } else {
        "known hazards over their budget".to_string()
    };
    rule(RuleStatus::Failed, format!("{why}: {observed}{excused}"))
}

/// The rule judged through the whole verdict (`compute`), on synthetic
/// runs (`testutil`).
#[cfg(test)]
mod judged {
    use crate::testutil::*;
    use crate::*;

    #[test]
    fn verdict_500ms_gap_is_one_interval_from_timestamps() {
        // Requests every 50 ms; those starting at 1000..=1450 fail; the next
        // success starts at 1500 and completes at 1505.
        let mut recs = series(
            ProbeKind::Get,
            ConnMode::New,
            0.0,
            3000.0,
            50.0,
            Some((1000.0, 1500.0)),
        );
        // What each successful get read: the counter, never written.
        for r in recs.iter_mut().filter(|r| r.outcome == Outcome::Ok) {
            (r.value, r.rv) = (Some(0), Some(1));
        }
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
        // It read the 50 writes acknowledged by then.
        (retry.value, retry.rv) = (Some(50), Some(1049));
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

    #[test]
    fn verdict_a_retry_is_taken_only_in_its_lane_after_its_attempt_for_a_retryable_failure() {
        // A 9.5 s timeout "retried" by a 20 ms get of another lane stays a
        // failed request; so does one whose retry came before it, and a
        // timeout retried in its own lane.
        let attempt = |outcome| {
            let mut a = rec(ProbeKind::Get, ConnMode::Reused, 5_001.0, 9_500.0, outcome);
            a.seq = 90_000;
            a
        };
        let retry = |mode, t: f64, dur| {
            let mut r = rec(ProbeKind::Get, mode, t, dur, Outcome::Ok);
            r.seq = 90_001;
            r.retry_of = Some(90_000);
            r
        };
        for (what, a, r) in [
            (
                "another lane",
                attempt(Outcome::Timeout),
                retry(ConnMode::New, 14_600.0, 20.0),
            ),
            (
                "before its attempt",
                attempt(Outcome::Reset),
                retry(ConnMode::Reused, 4_000.0, 20.0),
            ),
            (
                "a timeout",
                attempt(Outcome::Timeout),
                retry(ConnMode::Reused, 5_001.0, 9_600.0),
            ),
        ] {
            let mut recs = clean_run();
            recs.extend([a, r]);
            let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
            assert_eq!(v.probes["get/reused"].retried, 0, "{what}");
            assert!(!v.passed, "{what}: {:?}", v.reasons);
        }
        // An HTTP 500 is resent only with Retry-After.
        let mut a = attempt(Outcome::Http);
        a.duration_ms = 5.0;
        a.http_status = Some(500);
        assert!(!availability::retryable(&a));
        a.error = Some("HTTP 500 with Retry-After: 1 s; sent again after it".into());
        assert!(availability::retryable(&a));
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
        (slow.value, slow.rv) = (Some(50), Some(1049));
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
}
