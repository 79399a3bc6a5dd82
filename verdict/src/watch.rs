//! The `watch-continuity` rule: each watch of the counter (one per
//! connection mode) delivers every acknowledged write once, in order.
//!
//! The watch resumes from the last resourceVersion it saw after every
//! reconnect, so after a reconnect an event at or below that revision is a
//! server fault like any other: a duplicate (a revision seen before) or out
//! of order (below the last one). Only an explicit 410 Gone resets the
//! expectation, and only through a fresh read: after a 410 the watch's lane
//! must show a successful `read` of the counter before its next event; the
//! writes after the last value before the 410, up to and including the
//! value that read returned, are superseded, not missed. An event after a
//! 410 with no fresh read in between resets nothing: the values it skips
//! are missed as any others. Errors and broken streams are requests of the
//! watch (see `is_request`): they count against its availability in
//! `zero-downtime`, but for a stream the peer closed in an EOF client-go
//! ends a watch on (see `watch_end`).
//!
//! A watch delivers what it missed while down when it reconnects (it
//! resumes from its last revision), so a write acknowledged while it was
//! down is expected of it, unless it never had a stream again: a write
//! acknowledged after its lane's last stream ended, with no stream after
//! it, had no stream to arrive on. Such writes are *unobserved*, not
//! missed: the lane's refusals count against its availability and its
//! blind time against `coverage`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::ledger::acked_writes;
use super::{fmt_list, mode_name, push_capped, record_end, Rule, RuleStatus, Thresholds, Window};
use crate::record::{ConnMode, Outcome, ProbeKind, Record};

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
    /// ERROR events (410 aside) and broken streams, all modes.
    #[serde(default)]
    pub errors: u64,
    /// 410 Gone, all modes: each resets the watch only through a fresh read.
    #[serde(default)]
    pub relists: u64,
    /// Of those, 410s no fresh read of their lane followed before its next
    /// event (or its end): the values skipped across them are not superseded.
    #[serde(default)]
    pub gone_unread: u64,
    /// Acknowledged writes not expected because a fresh read after a 410
    /// covered them (superseded), summed over modes.
    #[serde(default)]
    pub superseded: u64,
    /// Acknowledged writes a watch was expected to deliver (per mode: sent
    /// after that watch first connected, acknowledged more than
    /// `watch_grace_ms` before the window end, not superseded by the fresh
    /// read after a 410), summed over modes.
    pub expected: u64,
    /// Acknowledged writes after a lane's last stream ended, the lane
    /// never connected again: no stream could deliver them (summed over
    /// modes). Not judged here; `coverage` names the blind time.
    #[serde(default)]
    pub unobserved: u64,
    pub missed_count: u64,
    pub duplicated_count: u64,
    pub out_of_order_count: u64,
    pub watch_missed: Vec<WatchMiss>,
    pub watch_duplicated: Vec<WatchAnomaly>,
    pub watch_out_of_order: Vec<WatchAnomaly>,
}

/// A watch event that carries the counter: ADDED or MODIFIED.
pub fn is_data_event(r: &Record) -> bool {
    r.probe == ProbeKind::Watch
        && r.outcome == Outcome::Ok
        && matches!(r.event.as_deref(), Some(e) if e.eq_ignore_ascii_case("ADDED") || e.eq_ignore_ascii_case("MODIFIED"))
}

/// A 410 Gone in a watch: the expectation starts afresh from the fresh
/// read that must follow it (see [`is_fresh_read`]).
pub fn is_gone(r: &Record) -> bool {
    r.probe == ProbeKind::Watch && r.event.as_deref() == Some("ERROR") && r.http_status == Some(410)
}

/// A successful read of the counter by a watch's lane (before it first
/// connects, and after each 410 Gone): the value it resumes from.
pub fn is_fresh_read(r: &Record) -> bool {
    r.probe == ProbeKind::Watch && r.event.as_deref() == Some("read") && r.outcome == Outcome::Ok
}

fn is_connect(r: &Record) -> bool {
    r.event
        .as_deref()
        .is_none_or(|e| e.eq_ignore_ascii_case("connect"))
}

pub fn check(all: &[&Record], window: &Window, th: &Thresholds) -> WatchCheck {
    let mut by_mode: BTreeMap<ConnMode, Vec<&Record>> = BTreeMap::new();
    for r in all.iter().filter(|r| r.probe == ProbeKind::Watch) {
        by_mode.entry(r.mode).or_default().push(r);
    }
    let mut w = WatchCheck {
        run: !by_mode.is_empty(),
        modes: by_mode.keys().map(|m| mode_name(*m).to_string()).collect(),
        events: 0,
        connects: 0,
        errors: 0,
        relists: 0,
        gone_unread: 0,
        superseded: 0,
        expected: 0,
        unobserved: 0,
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
        let mut seen_rv: BTreeSet<u64> = BTreeSet::new();
        let mut seen_values: BTreeSet<u64> = BTreeSet::new();
        let mut prev: Option<(u64, Option<u64>)> = None;
        // Values skipped across a 410 and covered by the fresh read after
        // it: (first value after the last one before it, the read's value).
        let mut superseded: Vec<(u64, u64)> = Vec::new();
        // A 410 no fresh read has followed yet: the last value known
        // before it, and how many 410s wait on that read.
        let mut gone_after: Option<Option<u64>> = None;
        let mut unread = 0u64;
        // The value of the lane's last fresh read.
        let mut read_value: Option<u64> = None;
        let mut established: Option<f64> = None;
        // When the lane's stream ended, while no stream has followed.
        let mut ended: Option<f64> = None;
        for r in rs {
            if is_gone(r) {
                ended.get_or_insert(r.start_unix_ms);
                w.relists += 1;
                unread += 1;
                // 410s in a row before a fresh read: the skip starts at
                // the last value known before the first of them. After a
                // read it starts at that read's value (the counter
                // unchanged since, the watch resumed from a revision the
                // server had already compacted away, as the nightly
                // matrix met it).
                if gone_after.is_none() {
                    gone_after = Some(prev.and_then(|p| p.1).or(read_value));
                }
                seen_rv.clear();
                prev = None;
                continue;
            }
            if super::is_request(r) && r.outcome != Outcome::Ok && !is_connect(r) {
                w.errors += 1;
                if r.event.as_deref() != Some("read") {
                    ended.get_or_insert(r.start_unix_ms);
                }
            }
            if is_fresh_read(r) {
                if let Some(before) = gone_after.take() {
                    unread = 0;
                    if let (Some(before), Some(v)) = (before, r.value) {
                        if v > before {
                            superseded.push((before + 1, v));
                        }
                    }
                }
                read_value = r.value.or(read_value);
                continue;
            }
            if is_connect(r) {
                w.connects += 1;
                if r.outcome == Outcome::Ok {
                    ended = None;
                    if established.is_none() {
                        established = Some(record_end(r));
                    }
                }
                continue;
            }
            if !is_data_event(r) {
                continue;
            }
            ended = None;
            w.events += 1;
            if established.is_none() {
                // Events without a connect record: the watch was up by then.
                established = Some(r.start_unix_ms);
            }
            if gone_after.take().is_some() {
                // No fresh read since the 410: nothing is superseded.
                w.gone_unread += unread;
                unread = 0;
            }
            if let Some(v) = r.value {
                seen_values.insert(v);
            }
            let Some(rv) = r.rv else { continue };
            if !seen_rv.insert(rv) {
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
            if let Some((p, _)) = prev.filter(|(p, _)| rv < *p) {
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
            prev = Some(match prev {
                Some((p, pv)) if p > rv => (p, pv),
                _ => (rv, r.value),
            });
        }
        // A 410 at the lane's end, no fresh read after it.
        w.gone_unread += unread;
        // Writes this watch must have delivered: sent after it was
        // established, acknowledged before the grace period at the end.
        let Some(established) = established else {
            continue;
        };
        let mut expected: BTreeMap<u64, f64> = BTreeMap::new();
        let mut excused: BTreeSet<u64> = BTreeSet::new();
        let mut unobserved: BTreeSet<u64> = BTreeSet::new();
        for r in &acked {
            let acked_at = record_end(r);
            let v = r.value.unwrap();
            if r.start_unix_ms < established || acked_at > window.end_unix_ms - th.watch_grace_ms {
                continue;
            }
            if ended.is_some_and(|e| acked_at > e - th.watch_grace_ms) && !seen_values.contains(&v)
            {
                unobserved.insert(v);
                continue;
            }
            if superseded.iter().any(|(a, b)| (*a..=*b).contains(&v)) {
                if !seen_values.contains(&v) {
                    excused.insert(v);
                }
            } else {
                expected.entry(v).or_insert(acked_at);
            }
        }
        w.superseded += excused.len() as u64;
        w.unobserved += unobserved.len() as u64;
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

/// What the 410s met and the fresh reads after them came to, for the
/// rule's message: empty without a 410.
fn gone_note(watch: &WatchCheck) -> String {
    let n = watch.relists;
    if n == 0 {
        return String::new();
    }
    let read = n.saturating_sub(watch.gone_unread);
    let superseded = format!("{} write(s) superseded", watch.superseded);
    match (read, watch.gone_unread) {
        (_, 0) => format!(" ({n} 410 Gone, each followed by a fresh read: {superseded})"),
        (0, _) => format!(" ({n} 410 Gone, none followed by a fresh read: nothing superseded)"),
        (_, unread) => format!(
            " ({n} 410 Gone: {read} followed by a fresh read, {superseded}; {unread} not, their skipped writes not superseded)"
        ),
    }
}

/// `ran`: the watch probe was told to run.
pub fn rule(watch: &WatchCheck, ran: bool) -> Rule {
    let name = "watch-continuity".to_string();
    if !watch.run {
        return Rule::unchecked(
            name,
            ran,
            "the watch probe ran but left no record: watch continuity not checked",
            "the watch probe did not run",
        );
    }
    if watch.missed_count + watch.duplicated_count + watch.out_of_order_count == 0 {
        return Rule {
            name,
            status: RuleStatus::Passed,
            message: format!(
                "{} event(s) over {} connect(s), {} expected write(s) all seen{}{}",
                watch.events,
                watch.connects,
                watch.expected,
                gone_note(watch),
                unobserved_note(watch)
            ),
        };
    }
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
    for (what, n, list) in [
        (
            "duplicated",
            watch.duplicated_count,
            &watch.watch_duplicated,
        ),
        (
            "out-of-order",
            watch.out_of_order_count,
            &watch.watch_out_of_order,
        ),
    ] {
        if n > 0 {
            let v: Vec<String> = list
                .iter()
                .map(|a| match a.previous_rv {
                    p if p == a.rv => format!("rv {} ({})", a.rv, a.mode),
                    p => format!("rv {} after {p} ({})", a.rv, a.mode),
                })
                .collect();
            parts.push(format!("{n} {what} event(s): {}", fmt_list(&v, n)));
        }
    }
    Rule {
        name,
        status: RuleStatus::Failed,
        message: format!(
            "{}{}{}",
            parts.join("; "),
            gone_note(watch),
            unobserved_note(watch)
        ),
    }
}

/// The writes no stream could deliver, for the rule's message: empty
/// without any.
fn unobserved_note(watch: &WatchCheck) -> String {
    match watch.unobserved {
        0 => String::new(),
        n => format!(
            "; {n} write(s) acknowledged after a watch's last stream ended, which never reconnected: not judged (coverage names the time it was blind)"
        ),
    }
}

/// The rule judged through the whole verdict (`compute`), on synthetic
/// runs (`testutil`).
#[cfg(test)]
mod judged {
    use crate::testutil::*;
    use crate::*;

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

    /// A watch whose stream broke at 5 s and never came back: the writes
    /// acknowledged after it had no stream to arrive on (unobserved, not
    /// missed); one acknowledged before it and never seen is missed; and
    /// with a reconnect after the gap, the gap's writes are missed again.
    #[test]
    fn writes_after_a_watch_s_last_stream_are_unobserved_not_missed() {
        let run = |drop_value: Option<u64>, reconnect: bool| {
            let mut recs: Vec<Record> = clean_run()
                .into_iter()
                .filter(|r| {
                    !(r.probe == ProbeKind::Watch
                        && r.event.as_deref() == Some("MODIFIED")
                        && (r.start_unix_ms >= T0 + 5_000.0 || r.value == drop_value))
                })
                .collect();
            let mut b = rec(
                ProbeKind::Watch,
                ConnMode::Reused,
                5_000.0,
                0.0,
                Outcome::Error,
            );
            b.event = Some("broken".into());
            b.error = Some("unexpected EOF during chunk size line".into());
            recs.push(b);
            let mut refused = connect(ConnMode::Reused, 5_001.0);
            refused.outcome = Outcome::Refused;
            recs.push(refused);
            if reconnect {
                recs.push(connect(ConnMode::Reused, 9_900.0));
            }
            recs.sort_by(|a, b| a.start_unix_ms.total_cmp(&b.start_unix_ms));
            for (i, r) in recs.iter_mut().enumerate() {
                r.seq = i as u64;
            }
            compute(&recs, &[], &read_back(&recs, Some(100)), &th())
        };
        let v = run(None, false);
        assert_eq!(v.watch.missed_count, 0, "{:?}", v.watch.watch_missed);
        // Values 51 to 90: the last second before the window's end is grace.
        assert_eq!(v.watch.unobserved, 40);
        let rule = v.rule("watch-continuity").unwrap();
        assert_eq!(rule.status, RuleStatus::Passed);
        assert!(
            rule.message.contains("40 write(s) acknowledged after"),
            "{}",
            rule.message
        );
        let v = run(Some(30), false);
        assert_eq!(v.watch.missed_count, 1);
        assert_eq!(v.watch.watch_missed[0].value, 30);
        let v = run(None, true);
        assert_eq!(v.watch.unobserved, 0);
        assert!(v.watch.missed_count >= 40, "{}", v.watch.missed_count);
        assert_eq!(
            v.rule("watch-continuity").unwrap().status,
            RuleStatus::Failed
        );
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

        // Only a 410 Gone resets the expectation, through the fresh read
        // after it: the writes between the last value before it and the
        // read's are superseded, not missed.
        let mut recs = skipping_21_to_24();
        let without_410 = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(without_410.watch.missed_count, 4);
        recs.push(gone(2_020.0));
        recs.push(fresh_read(2_400.0, 24, 1023));
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(v.watch.relists, 1);
        assert_eq!(v.watch.missed_count, 0, "{:?}", v.watch.watch_missed);
        // 410s in a row, as the nightly matrix met them (the fresh read
        // returned the counter's old revision, already compacted out of
        // the watch cache): each read again, nothing more to supersede.
        for later in [1.0, 3.0] {
            recs.push(gone(2_400.0 + later));
            recs.push(fresh_read(2_401.0 + later, 24, 1023));
        }
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!((v.watch.relists, v.watch.gone_unread), (3, 0));
        assert_eq!(v.watch.superseded, 4);
        assert_eq!(v.watch.missed_count, 0, "{:?}", v.watch.watch_missed);
        assert_eq!(
            v.rule("zero-downtime").unwrap().status,
            RuleStatus::Passed,
            "a 410 is no failure"
        );
    }

    /// clean_run() whose watch never delivered 21..=24.
    fn skipping_21_to_24() -> Vec<Record> {
        clean_run()
            .into_iter()
            .filter(|r| !(r.probe == ProbeKind::Watch && (21..=24).contains(&r.value.unwrap_or(0))))
            .collect()
    }

    /// A 410 Gone in the reused watch at `t`.
    fn gone(t: f64) -> Record {
        let mut r = rec(ProbeKind::Watch, ConnMode::Reused, t, 0.0, Outcome::Http);
        r.event = Some("ERROR".into());
        r.http_status = Some(410);
        r.error = Some("too old resource version: 1019 (1030)".into());
        r
    }

    /// The reused watch's read of the counter at `t`: `value` at `rv`.
    fn fresh_read(t: f64, value: u64, rv: u64) -> Record {
        let mut r = rec(ProbeKind::Watch, ConnMode::Reused, t, 3.0, Outcome::Ok);
        r.event = Some("read".into());
        r.value = Some(value);
        r.rv = Some(rv);
        r
    }

    #[test]
    fn verdict_a_410_with_a_fresh_read_supersedes_what_the_read_covered() {
        // 410 after 20, the fresh read returns 24: 21..=24 superseded.
        let mut recs = skipping_21_to_24();
        recs.push(gone(2_020.0));
        recs.push(fresh_read(2_400.0, 24, 1023));
        recs.push(connect(ConnMode::Reused, 2_405.0));
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!(
            (v.watch.relists, v.watch.gone_unread, v.watch.superseded),
            (1, 0, 4)
        );
        assert_eq!(v.watch.expected, 86, "90 less the 4 superseded");
        let r = v.rule("watch-continuity").unwrap();
        assert_eq!(r.status, RuleStatus::Passed, "{}", r.message);
        assert!(
            r.message
                .contains("(1 410 Gone, each followed by a fresh read: 4 write(s) superseded)"),
            "{}",
            r.message
        );
        assert!(v.passed, "{:?}", v.reasons);

        // A read that covered less: 21 and 22 superseded, 23 and 24 (written
        // after the read, never delivered) missed.
        let mut recs = skipping_21_to_24();
        recs.push(gone(2_020.0));
        recs.push(fresh_read(2_120.0, 22, 1021));
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        let missed: Vec<u64> = v.watch.watch_missed.iter().map(|m| m.value).collect();
        assert_eq!(missed, [23, 24]);
        assert_eq!(v.watch.superseded, 2);
        assert_eq!(
            v.rule("watch-continuity").unwrap().status,
            RuleStatus::Failed
        );
    }

    #[test]
    fn verdict_a_410_without_a_fresh_read_supersedes_nothing() {
        // The watch resumed after the 410 with no read of the counter: the
        // next event skips 21..=24, each missed.
        let mut recs = skipping_21_to_24();
        recs.push(gone(2_020.0));
        recs.push(connect(ConnMode::Reused, 2_025.0));
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!((v.watch.relists, v.watch.gone_unread), (1, 1));
        assert_eq!((v.watch.missed_count, v.watch.superseded), (4, 0));
        let r = v.rule("watch-continuity").unwrap();
        assert_eq!(r.status, RuleStatus::Failed);
        assert!(
            r.message
                .contains("4 acknowledged write(s) never seen by the watch: 21 (reused)"),
            "{}",
            r.message
        );
        assert!(
            r.message
                .contains("(1 410 Gone, none followed by a fresh read: nothing superseded)"),
            "{}",
            r.message
        );
        // A read that failed is no fresh read.
        let mut failed = fresh_read(2_030.0, 24, 1023);
        failed.outcome = Outcome::Timeout;
        recs.push(failed);
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!((v.watch.gone_unread, v.watch.missed_count), (1, 4));
        // One 410 read after, one not: counted apart.
        let mut recs = skipping_21_to_24();
        recs.push(gone(2_020.0));
        recs.push(fresh_read(2_400.0, 24, 1023));
        recs.push(gone(5_000.0));
        let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
        assert_eq!((v.watch.relists, v.watch.gone_unread), (2, 1));
        let r = v.rule("watch-continuity").unwrap();
        assert_eq!(r.status, RuleStatus::Passed, "{}", r.message);
        assert!(
            r.message.contains(
                "(2 410 Gone: 1 followed by a fresh read, 4 write(s) superseded; 1 not, their skipped writes not superseded)"
            ),
            "{}",
            r.message
        );
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
        // A stream the gateway closed at its drain's end (an EOF client-go
        // ends a watch on quietly) is the watch's end: its reconnect is
        // what is judged.
        for reconnect in [Outcome::Ok, Outcome::Refused] {
            let mut recs = clean_run();
            let mut r = rec(
                ProbeKind::Watch,
                ConnMode::Reused,
                5_000.0,
                0.0,
                Outcome::Error,
            );
            r.event = Some("broken".into());
            r.error = Some(
                "error reading a body from connection: unexpected EOF during chunk size line"
                    .into(),
            );
            recs.push(r);
            let mut c = connect(ConnMode::Reused, 5_001.0);
            c.outcome = reconnect;
            recs.push(c);
            recs.push(connect(ConnMode::Reused, 5_300.0));
            // Set aside by seq: the records need their own.
            for (i, r) in recs.iter_mut().enumerate() {
                r.seq = i as u64 + 1;
            }
            let v = compute(&recs, &[], &read_back(&recs, Some(100)), &th());
            let s = &v.probes["watch/reused"];
            assert_eq!(s.watch_ends, 1, "{s:?}");
            let failed = u64::from(reconnect != Outcome::Ok);
            assert_eq!(s.failed(), failed, "{reconnect:?}: {s:?}");
            assert_eq!(v.zero_downtime, failed == 0, "{reconnect:?}");
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
}
