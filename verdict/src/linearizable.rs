//! The `linearizable` rule: the counter, read and written by every lane,
//! behaves as one register whose operations each took effect at one
//! instant between their start and their end, in the order etcd applied the
//! writes. The check is over the whole history, as etcd's robustness suite
//! checks its own (`tests/robustness/validate`, porcupine), with what this
//! register allows to make it linear in time:
//!
//! - etcd's history of the counter (`final.json`) is the order of the
//!   writes: version `k` was written at some instant `w_k`, `w_0 <= w_1 <=
//!   ...`. Every write is conditional on the version before it
//!   (`base_rv`), so each value is written once; an acknowledged write of
//!   version `k` puts `w_k` inside its own request, a write that failed (an
//!   unknown outcome: it may have applied) only after its start.
//! - A read (a get, the writer's read before an update, the list a watch
//!   starts from) that returned the value of version `k` took effect at an
//!   instant `p` inside its request with `w_k <= p <= w_{k+1}`.
//!
//! Taking every instant as early as it may be (versions in order, each read
//! at the earliest instant its request and its version allow) finds a
//! linearization whenever one exists, in one pass over the sorted
//! operations. Where none exists, the operation whose request ends before
//! its instant could come is named, with the operation that pushed the
//! instant that late: a read of a value overwritten before the read began
//! (stale), of a version older than one an earlier read returned
//! (non-monotonic), of a value before anyone began writing it, or of a
//! value etcd never held (invented); an acknowledged write that etcd
//! ordered before one that had already been acknowledged when it began. And
//! the history itself: the counter's values must rise with its revisions,
//! and a write acknowledged at a version must have replaced the version
//! before it (its base revision).
//!
//! Values are matched, not revisions, for reads: the mirror and classic
//! plans serve the counter from another cluster, with other revisions.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::{fmt_list, lane_key, push_capped, record_end, Rule, RuleStatus};
use crate::record::{FinalRead, Outcome, ProbeKind, Record};

pub const RULE: &str = "linearizable";

/// What the check found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Linearizability {
    /// Whether etcd's history was there to check against.
    pub checked: bool,
    /// Versions of the counter in etcd's history.
    pub versions: u64,
    /// Successful reads of the counter that carried its value.
    pub reads: u64,
    /// Successful reads that carried no value (not checked).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reads_without_value: u64,
    /// Successful reads of a value from before the history's first
    /// version (not checked: nothing says when it was written).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reads_before_history: u64,
    /// Writes (any outcome) matched to a version of the history.
    pub writes: u64,
    /// Writes whose value no version of the history holds (failed writes
    /// that never applied; an acknowledged one is `lost-writes`' to
    /// judge): not placed in the order.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub writes_not_in_history: u64,
    pub count: u64,
    /// The first violations.
    pub violations: Vec<Violation>,
    /// How long the check took, µs (whole: a float would not survive
    /// serde_json's round trip exactly).
    pub elapsed_us: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One operation no linearization can place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    /// `stale-read`, `non-monotonic-read`, `future-read`,
    /// `invented-value`, `write-order`, `history-back`, `base-revision`.
    pub kind: String,
    /// The offending operation's lane (`probe/mode`, ` read` for the
    /// writer's and watches' reads); empty for the history's own.
    pub lane: String,
    pub at_unix_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
    /// Why, in words, with the operation that forced it.
    pub why: String,
}

/// The reads this rule judges (the stale-reads rule's, lists aside: a
/// list carries the collection's revision, not the counter's value), and
/// the lane each is reported under.
fn read_lane(r: &Record) -> Option<String> {
    super::reads::read_lane(r).filter(|_| r.probe != ProbeKind::List)
}

fn is_write(r: &Record) -> bool {
    r.probe == ProbeKind::Write && r.event.is_none() && r.value.is_some()
}

/// Who moved an instant: an operation (lane, seq, when, value) or nothing.
#[derive(Debug, Clone, Copy)]
struct Cause<'a> {
    rec: Option<&'a Record>,
    what: &'static str,
}

fn describe(c: &Cause, t0: f64) -> String {
    match c.rec {
        Some(r) => format!(
            "{} {} (seq {}) {} at +{:.3} s",
            read_lane(r).unwrap_or_else(|| lane_key(r.probe, r.mode)),
            c.what,
            r.seq,
            r.value.map_or("-".into(), |v| v.to_string()),
            (r.start_unix_ms - t0) / 1e3
        ),
        None => "nothing".into(),
    }
}

/// An acknowledged write that etcd ordered after something still current
/// once the write had been acknowledged: a read of an older value that
/// began later (a stale read: the read is the offender), or a write of an
/// earlier version that began later (etcd's order against real time).
fn late_write(h: &Record, end: f64, cause: &Cause, t0: f64) -> Violation {
    match cause.rec {
        Some(r) if !is_write(r) => Violation {
            kind: "stale-read".into(),
            lane: read_lane(r).unwrap_or_else(|| lane_key(r.probe, r.mode)),
            at_unix_ms: r.start_unix_ms,
            seq: Some(r.seq),
            value: r.value,
            why: format!(
                "read {} at +{:.3} s, after the write of {} had been acknowledged at +{:.3} s ({} seq {})",
                r.value.map_or("-".into(), |v| v.to_string()),
                (r.start_unix_ms - t0) / 1e3,
                h.value.map_or("-".into(), |v| v.to_string()),
                (end - t0) / 1e3,
                lane_key(h.probe, h.mode),
                h.seq
            ),
        },
        _ => Violation {
            kind: "write-order".into(),
            lane: lane_key(h.probe, h.mode),
            at_unix_ms: h.start_unix_ms,
            seq: Some(h.seq),
            value: h.value,
            why: format!(
                "the write of {} was acknowledged at +{:.3} s, but etcd ordered it after {}",
                h.value.map_or("-".into(), |v| v.to_string()),
                (end - t0) / 1e3,
                describe(cause, t0)
            ),
        },
    }
}

/// A read that ended before the value it returned can have been current:
/// before anyone began writing it (a future read), or before a read that
/// began after it ended returned an older value (not monotonic: that later
/// read is the offender).
fn early_read(r: &Record, lane: &str, value: u64, cause: &Cause, t0: f64) -> Violation {
    let end = (record_end(r) - t0) / 1e3;
    match cause.rec {
        Some(c) if !is_write(c) && c.outcome == Outcome::Ok && read_lane(c).is_some() => Violation {
            kind: "non-monotonic-read".into(),
            lane: read_lane(c).unwrap_or_default(),
            at_unix_ms: c.start_unix_ms,
            seq: Some(c.seq),
            value: c.value,
            why: format!(
                "read {} at +{:.3} s, older than the {value} that {lane} (seq {}) had read by +{end:.3} s",
                c.value.map_or("-".into(), |v| v.to_string()),
                (c.start_unix_ms - t0) / 1e3,
                r.seq
            ),
        },
        _ => Violation {
            kind: "future-read".into(),
            lane: lane.to_string(),
            at_unix_ms: r.start_unix_ms,
            seq: Some(r.seq),
            value: Some(value),
            why: format!(
                "read {value} and ended at +{end:.3} s, before that value can have been written: {}",
                describe(cause, t0)
            ),
        },
    }
}

pub fn check(all: &[&Record], fin: &FinalRead) -> Linearizability {
    let started = std::time::Instant::now();
    let mut out = Linearizability::default();
    let Some(history) = fin.history.as_ref().filter(|h| !h.is_empty()) else {
        // Nothing to check against: count what went unchecked.
        for r in all.iter().filter(|r| r.outcome == Outcome::Ok) {
            if read_lane(r).is_some() {
                if r.value.is_some() {
                    out.reads += 1;
                } else {
                    out.reads_without_value += 1;
                }
            }
        }
        out.writes = all.iter().filter(|r| is_write(r)).count() as u64;
        return out;
    };
    out.checked = true;
    out.versions = history.len() as u64;
    let t0 = all.first().map_or(0.0, |r| r.start_unix_ms);
    let violate = |out: &mut Linearizability, v: Violation| {
        let mut count = out.count;
        push_capped(&mut out.violations, &mut count, v);
        out.count = count;
    };
    // The history rises.
    for w in history.windows(2) {
        if w[1].value <= w[0].value || w[1].rev <= w[0].rev {
            violate(
                &mut out,
                Violation {
                    kind: "history-back".into(),
                    lane: String::new(),
                    at_unix_ms: 0.0,
                    seq: None,
                    value: Some(w[1].value),
                    why: format!(
                        "etcd's history of the counter goes back: value {} at revision {} follows value {} at revision {}",
                        w[1].value, w[1].rev, w[0].value, w[0].rev
                    ),
                },
            );
        }
    }
    // The version each value is (the first, where the history repeats one).
    let mut version_of: HashMap<u64, usize> = HashMap::new();
    for (k, e) in history.iter().enumerate() {
        version_of.entry(e.value).or_insert(k);
    }
    let n = history.len();
    // Each version's write: [lo, hi] and who bounds it.
    let mut lo: Vec<(f64, Cause)> = vec![
        (
            f64::NEG_INFINITY,
            Cause {
                rec: None,
                what: ""
            }
        );
        n
    ];
    let mut hi: Vec<Option<&Record>> = vec![None; n];
    let mut writers: Vec<Option<&Record>> = vec![None; n];
    for r in all.iter().copied().filter(|r| is_write(r)) {
        let Some(&k) = version_of.get(&r.value.unwrap()) else {
            out.writes_not_in_history += 1;
            continue;
        };
        out.writes += 1;
        let acked = r.outcome == Outcome::Ok;
        if acked {
            // The acknowledged write of this version: its own request.
            if hi[k].is_none_or(|h| record_end(r) < record_end(h)) {
                hi[k] = Some(r);
            }
            let same_cluster = r.rv == Some(history[k].rev);
            if same_cluster && k > 0 {
                if let Some(b) = r.base_rv.filter(|b| *b != history[k - 1].rev) {
                    violate(
                        &mut out,
                        Violation {
                            kind: "base-revision".into(),
                            lane: lane_key(r.probe, r.mode),
                            at_unix_ms: r.start_unix_ms,
                            seq: Some(r.seq),
                            value: r.value,
                            why: format!(
                                "acknowledged as replacing revision {b}, but etcd's version before it is revision {}",
                                history[k - 1].rev
                            ),
                        },
                    );
                }
            }
        }
        if writers[k].is_none_or(|w| r.start_unix_ms < w.start_unix_ms) {
            writers[k] = Some(r);
        }
    }
    for k in 0..n {
        // An acknowledged write bounds its version from below by its own
        // start; otherwise the earliest attempt at that value does.
        let from = hi[k].or(writers[k]);
        if let Some(w) = from {
            lo[k] = (
                w.start_unix_ms,
                Cause {
                    rec: Some(w),
                    what: "began writing",
                },
            );
        }
    }
    // Reads by version.
    let mut reads: BTreeMap<usize, Vec<(&Record, String)>> = BTreeMap::new();
    let first_value = history[0].value;
    for r in all.iter().copied().filter(|r| r.outcome == Outcome::Ok) {
        let Some(lane) = read_lane(r) else { continue };
        let Some(v) = r.value else {
            out.reads_without_value += 1;
            continue;
        };
        out.reads += 1;
        match version_of.get(&v) {
            Some(&k) => reads.entry(k).or_default().push((r, lane)),
            // Below the history's first value: from before it began.
            None if v < first_value => {
                out.reads -= 1;
                out.reads_before_history += 1;
            }
            None => violate(
                &mut out,
                Violation {
                    kind: "invented-value".into(),
                    lane,
                    at_unix_ms: r.start_unix_ms,
                    seq: Some(r.seq),
                    value: Some(v),
                    why: format!(
                        "read value {v}, which etcd's history of the counter never held (its {} versions run from {} to {})",
                        n,
                        first_value,
                        history[n - 1].value
                    ),
                },
            ),
        }
    }
    for rs in reads.values_mut() {
        rs.sort_by(|a, b| a.0.start_unix_ms.total_cmp(&b.0.start_unix_ms));
    }
    // The earliest instants, version by version.
    let mut w = (
        f64::NEG_INFINITY,
        Cause {
            rec: None,
            what: "",
        },
    );
    for k in 0..n {
        if lo[k].0 > w.0 {
            w = lo[k];
        }
        if let Some(h) = hi[k] {
            let end = record_end(h);
            if w.0 > end {
                violate(&mut out, late_write(h, end, &w.1, t0));
                // Go on from the write's own end.
                w = (
                    end,
                    Cause {
                        rec: Some(h),
                        what: "acknowledged",
                    },
                );
            }
        }
        let at_write = w;
        for (r, lane) in reads.get(&k).map(Vec::as_slice).unwrap_or_default() {
            let p = r.start_unix_ms.max(at_write.0);
            if p > record_end(r) {
                violate(
                    &mut out,
                    early_read(r, lane, history[k].value, &at_write.1, t0),
                );
                continue;
            }
            // The next version's write comes after this read.
            if p > w.0 {
                w = (
                    p,
                    Cause {
                        rec: Some(r),
                        what: "read",
                    },
                );
            }
        }
    }
    out.elapsed_us = started.elapsed().as_micros() as u64;
    out
}

/// What went unchecked, in words ("; not checked: ..."), empty when all
/// was.
fn unchecked(l: &Linearizability) -> String {
    let parts = super::counted(&[
        (
            l.reads_without_value,
            "successful read(s) carried no value and were not checked",
        ),
        (
            l.reads_before_history,
            "read(s) of a value from before the history's first version",
        ),
        (
            l.writes_not_in_history,
            "write(s) of a value no version holds (failed, never applied)",
        ),
    ]);
    if parts.is_empty() {
        String::new()
    } else {
        format!("; not checked: {}", parts.join(", "))
    }
}

/// `ran`: the writer ran (reads alone have nothing to be linear with).
pub fn rule(l: &Linearizability, ran: bool, history_error: Option<&str>) -> Rule {
    let name = RULE.to_string();
    if !l.checked {
        // As lost-writes without the history: judged in part only (the
        // stale-reads rule still holds reads to acknowledged writes).
        return Rule {
            name,
            status: if ran {
                RuleStatus::Degraded
            } else {
                RuleStatus::Skipped
            },
            message: if ran {
                format!(
                    "etcd's history of the counter was not read{}: checked nothing; not checked: {} read(s) and {} write(s){}, held to the acknowledged writes only (stale-reads), not to one order of every operation",
                    history_error.map(|e| format!(" ({e})")).unwrap_or_default(),
                    l.reads,
                    l.writes,
                    if l.reads_without_value > 0 {
                        format!(", and {} read(s) without a value", l.reads_without_value)
                    } else {
                        String::new()
                    }
                )
            } else {
                "the write probe did not run".to_string()
            },
        };
    }
    let unvalued = unchecked(l);
    if l.count == 0 {
        return Rule {
            name,
            status: RuleStatus::Passed,
            message: format!(
                "checked {} read(s) and {} write(s) over {} version(s) in etcd's history: one order in time explains them all{unvalued}",
                l.reads, l.writes, l.versions
            ),
        };
    }
    let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
    for v in &l.violations {
        *kinds.entry(v.kind.as_str()).or_default() += 1;
    }
    let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    let examples: Vec<String> = l
        .violations
        .iter()
        .take(3)
        .map(|v| {
            if v.lane.is_empty() {
                v.why.clone()
            } else {
                format!(
                    "{} seq {}: {}",
                    v.lane,
                    v.seq.map_or("-".into(), |s| s.to_string()),
                    v.why
                )
            }
        })
        .collect();
    Rule {
        name,
        status: RuleStatus::Failed,
        message: format!(
            "{} operation(s) no order in time can explain (listed: {}): {}{unvalued}",
            l.count,
            kinds.join(", "),
            fmt_list(&examples, l.count)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ConnMode, HistoryEntry};
    use crate::testutil::*;

    fn history(values: &[(u64, u64)]) -> FinalRead {
        FinalRead {
            history: Some(
                values
                    .iter()
                    .map(|&(value, rev)| HistoryEntry { value, rev })
                    .collect(),
            ),
            ..FinalRead::default()
        }
    }

    fn get(t: f64, dur: f64, value: u64) -> Record {
        let mut r = rec(ProbeKind::Get, ConnMode::New, t, dur, Outcome::Ok);
        r.value = Some(value);
        r
    }

    fn run(recs: &[Record], fin: &FinalRead) -> Linearizability {
        let mut all: Vec<&Record> = recs.iter().collect();
        all.sort_by(|a, b| a.start_unix_ms.total_cmp(&b.start_unix_ms));
        check(&all, fin)
    }

    fn kinds(l: &Linearizability) -> Vec<&str> {
        l.violations.iter().map(|v| v.kind.as_str()).collect()
    }

    /// Writes 1..=5 at 0, 100, ... (5 ms each), rev 100 + value, each
    /// replacing the one before.
    fn writes() -> (Vec<Record>, FinalRead) {
        let mut v = Vec::new();
        let mut h = vec![(0, 100)];
        for i in 1..=5u64 {
            let mut w = write((i - 1) as f64 * 100.0, i, 100 + i);
            w.base_rv = Some(100 + i - 1);
            v.push(w);
            h.push((i, 100 + i));
        }
        (v, history(&h))
    }

    #[test]
    fn a_clean_history_is_linearizable() {
        let (mut recs, fin) = writes();
        // Reads between and across writes, overlapping ones may see either.
        recs.push(get(50.0, 3.0, 1));
        recs.push(get(99.0, 10.0, 1));
        recs.push(get(99.0, 10.0, 2));
        recs.push(get(450.0, 3.0, 5));
        let l = run(&recs, &fin);
        assert!(l.checked);
        assert_eq!(l.count, 0, "{:#?}", l.violations);
        assert_eq!((l.reads, l.writes, l.versions), (4, 5, 6));
        assert_eq!(rule(&l, true, None).status, RuleStatus::Passed);
    }

    #[test]
    fn a_read_of_an_overwritten_value_is_stale() {
        let (mut recs, fin) = writes();
        // Value 3 was acknowledged at 205; a read at 250 returns 2.
        recs.push(get(250.0, 3.0, 2));
        let l = run(&recs, &fin);
        assert_eq!(kinds(&l), ["stale-read"], "{:#?}", l.violations);
        let r = rule(&l, true, None);
        assert_eq!(r.status, RuleStatus::Failed);
        assert!(r.message.contains("get/new seq"), "{}", r.message);
    }

    #[test]
    fn a_read_older_than_an_earlier_completed_read_is_not_monotonic() {
        let (mut recs, fin) = writes();
        // Both overlap write 3 (200–205): each alone is fine, but the
        // second began after the first (which saw 3) ended, and saw 2.
        recs.push(get(199.0, 2.5, 3)); // ends 201.5
        recs.push(get(202.0, 3.5, 2)); // 202–205.5
        let l = run(&recs, &fin);
        assert_eq!(kinds(&l), ["non-monotonic-read"], "{:#?}", l.violations);
        assert!(
            l.violations[0].why.contains("older than the 3"),
            "{}",
            l.violations[0].why
        );
        // Either alone is linearizable.
        let (mut one, _) = writes();
        one.push(get(202.0, 3.5, 2));
        assert_eq!(run(&one, &fin).count, 0);
    }

    #[test]
    fn a_value_read_before_anyone_wrote_it_is_a_future_read() {
        let (mut recs, fin) = writes();
        // Write 4 begins at 300; a read that ended at 250 returned 4.
        recs.push(get(240.0, 10.0, 4));
        let l = run(&recs, &fin);
        assert_eq!(kinds(&l), ["future-read"], "{:#?}", l.violations);
    }

    #[test]
    fn a_value_etcd_never_held_is_invented() {
        let (mut recs, fin) = writes();
        recs.push(get(450.0, 3.0, 42));
        let l = run(&recs, &fin);
        assert_eq!(kinds(&l), ["invented-value"]);
        assert!(l.violations[0].why.contains("never held"));
    }

    #[test]
    fn a_history_that_goes_back_fails() {
        let (recs, _) = writes();
        let fin = history(&[(0, 100), (1, 101), (2, 102), (1, 103), (4, 104), (5, 105)]);
        let l = run(&recs, &fin);
        assert!(kinds(&l).contains(&"history-back"), "{:#?}", l.violations);
    }

    #[test]
    fn a_write_acknowledged_on_a_base_that_is_not_the_version_before_fails() {
        let (mut recs, fin) = writes();
        recs[2].base_rv = Some(101);
        let l = run(&recs, &fin);
        assert_eq!(kinds(&l), ["base-revision"]);
    }

    #[test]
    fn etcd_ordering_an_acknowledged_write_after_a_later_one_fails() {
        // Write 2 acknowledged at 5, write 1 began at 100: etcd says 1 then 2.
        let mut a = write(100.0, 1, 101);
        a.base_rv = Some(100);
        let mut b = write(0.0, 2, 102);
        b.base_rv = Some(101);
        let l = run(&[a, b], &history(&[(0, 100), (1, 101), (2, 102)]));
        assert_eq!(kinds(&l), ["write-order"], "{:#?}", l.violations);
    }

    #[test]
    fn a_failed_write_that_applied_is_an_unknown_outcome_not_a_violation() {
        let (mut recs, _) = writes();
        // Write 6 timed out (no answer) but etcd applied it; a read sees it.
        let mut w = rec(
            ProbeKind::Write,
            ConnMode::New,
            500.0,
            7000.0,
            Outcome::Timeout,
        );
        w.value = Some(6);
        recs.push(w);
        recs.push(get(9000.0, 3.0, 6));
        // And a read during the write may see either.
        recs.push(get(600.0, 3.0, 5));
        let fin = history(&[
            (0, 100),
            (1, 101),
            (2, 102),
            (3, 103),
            (4, 104),
            (5, 105),
            (6, 106),
        ]);
        let l = run(&recs, &fin);
        assert_eq!(l.count, 0, "{:#?}", l.violations);
    }

    #[test]
    fn reads_without_a_value_are_not_counted_as_checked() {
        let (mut recs, fin) = writes();
        recs.push(rec(ProbeKind::Get, ConnMode::New, 50.0, 3.0, Outcome::Ok));
        let l = run(&recs, &fin);
        assert_eq!((l.reads, l.reads_without_value), (0, 1));
        assert!(rule(&l, true, None).message.contains("carried no value"));
    }

    #[test]
    fn what_was_checked_and_what_was_not_are_both_said() {
        let (mut recs, fin) = writes();
        // A read of a value from before the history, and one of none.
        recs.push(get(1.0, 3.0, 0));
        recs.push(rec(ProbeKind::Get, ConnMode::New, 50.0, 3.0, Outcome::Ok));
        let fin = FinalRead {
            history: fin.history.map(|h| h.into_iter().skip(1).collect()),
            ..fin
        };
        let l = run(&recs, &fin);
        let m = rule(&l, true, None).message;
        assert!(
            m.starts_with(&format!("checked {} read(s)", l.reads)),
            "{m}"
        );
        assert!(
            m.contains("not checked: 1 successful read(s) carried no value")
                && m.contains("read(s) of a value from before the history's first version"),
            "{m}"
        );
        // Without a history: what went unchecked, counted.
        let l = run(&recs, &FinalRead::default());
        let m = rule(&l, true, Some("etcd compacted it")).message;
        assert!(
            m.contains("was not read (etcd compacted it): checked nothing; not checked:"),
            "{m}"
        );
    }

    #[test]
    fn without_a_history_nothing_is_checked() {
        let (recs, _) = writes();
        let l = run(&recs, &FinalRead::default());
        assert!(!l.checked);
        assert_eq!(rule(&l, true, None).status, RuleStatus::Degraded);
        assert_eq!(rule(&l, false, None).status, RuleStatus::Skipped);
    }

    /// A 20,000-request history: the check's time, printed (not asserted).
    #[test]
    fn twenty_thousand_operations_take_milliseconds() {
        let mut recs = Vec::new();
        let mut h = vec![(0u64, 1000u64)];
        for i in 1..=5_000u64 {
            let t = i as f64 * 10.0;
            let mut w = write(t, i, 1000 + i);
            w.base_rv = Some(1000 + i - 1);
            recs.push(w);
            h.push((i, 1000 + i));
            for j in 0..3 {
                recs.push(get(t + 6.0 + j as f64, 1.0, i));
            }
        }
        let l = run(&recs, &history(&h));
        assert_eq!(l.count, 0);
        assert_eq!(l.reads + l.writes, 20_000);
        eprintln!(
            "linearizability of 20,000 operations: {:.1} ms",
            l.elapsed_us as f64 / 1e3
        );
    }
}
