//! The informer rules: what the shoot's controllers would have seen. From
//! an informer lane's records (list, watch from that revision, re-list on
//! 410, re-watch after a break) and the write ledger. Two lanes are judged
//! alike, each by its own rule: `informer` (kube-rs' watcher,
//! [`ProbeKind::Informer`]) and `informer-go` (client-go's shared informer,
//! [`ProbeKind::InformerGo`]). Both record the same events
//! (`record::informer_event`), so a difference between their verdicts is a
//! difference between the two client libraries under the same migration.
//!
//! The counter ConfigMap takes every value once, in order (one writer, each
//! write `value + 1` under optimistic concurrency), so the informer's view
//! of it must only go forward:
//! - Between two (re)lists the watch delivers every value: a value skipped
//!   between two watch events is a *missed* event (acknowledged or not: it
//!   exists in etcd's history), a value delivered twice a *duplicate*, a
//!   value below one seen before *out of order*.
//! - A (re)list may jump ahead: the values it skips are *superseded by a
//!   re-list*, which a level-based controller tolerates; they are counted,
//!   not failed. A (re)list that shows an older value than the informer
//!   already saw went back in time: out of order.
//! - Every acknowledged write after the informer's initial list must be
//!   reflected by the end (the agent lets the informer catch up before it
//!   stops): an acknowledged value above the last value seen is missed.
//! - The notification delay of a write is the time from its
//!   acknowledgement (the write's end) to the watch event that carried it.
//! - Re-lists are not free: a client may list once at its start and once
//!   after each 410 Gone (or `Expired`: too old a resource version) it
//!   met. An `init` while the (re)list before it has not completed
//!   (`synced`) retries that list after it failed: the same (re)list, not
//!   another. client-go's reflector also re-lists after a watch the server
//!   ended less than a second after it began, with no event delivered
//!   (`VeryShortWatchError`, k8s.io/client-go `tools/cache/reflector.go`):
//!   for client-go's informer (`informer-go`) that re-list is the
//!   library's rule, not the client's choice, and is counted apart (one
//!   per migration step: a storm of them is still a storm). Any other
//!   re-list is counted against the criteria's `informer_relists` budget
//!   (none by default), per migration step.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{latency_of, phase_bands, Latency, Rule, RuleStatus, MAX_LISTED_ANOMALIES};
use crate::record::informer_event as event;
use crate::record::{LabEvent, Outcome, ProbeKind, Record};

/// One anomaly of the informer's view of the counter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InformerAnomaly {
    pub at_unix_ms: f64,
    pub value: u64,
    /// The highest value seen before.
    pub previous_value: u64,
    /// `apply` (a watch event) or `init-apply` (a list).
    pub seen_in: String,
}

/// Relists, errors and notification delays within one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InformerPhase {
    pub name: String,
    pub relists: u64,
    /// Of those, re-lists neither after a 410 Gone nor retrying a failed
    /// list: counted against the re-list budget.
    #[serde(default)]
    pub relists_counted: u64,
    /// Failed list/watch requests and broken watches.
    pub errors: u64,
    /// Acknowledgement to watch event, over the writes acknowledged in the phase.
    pub delay: Option<Latency>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InformerCheck {
    /// False when the run had no informer records.
    pub run: bool,
    pub list_requests: u64,
    pub watch_requests: u64,
    /// (Re)lists after the initial one.
    pub relists: u64,
    /// 410 Gone (or `Expired`: too old a resource version) the lane met: in
    /// a watch (`expired`), or answering a list or watch request.
    #[serde(default)]
    pub gone: u64,
    /// Of the re-lists, those that retried a (re)list that had not
    /// completed (its list failed): the same (re)list again.
    #[serde(default)]
    pub list_retries: u64,
    /// Of the re-lists, those after a 410 Gone: allowed, one per 410.
    #[serde(default)]
    pub relists_after_gone: u64,
    /// Re-lists client-go's reflector made because a watch ended within a
    /// second without an event (see the module doc): not counted against
    /// the budget.
    #[serde(default)]
    pub relists_after_short_watch: u64,
    /// The other re-lists, neither after a 410 Gone nor a retry: counted
    /// against the budget (`Criteria::informer_relists`).
    #[serde(default)]
    pub relists_counted: u64,
    /// Failed list/watch requests and broken watches.
    pub errors: u64,
    /// Watch events that carried the counter.
    pub events: u64,
    /// The counter's value in the initial list (what it started from).
    pub initial_value: Option<u64>,
    /// The highest value the informer saw.
    pub last_value: Option<u64>,
    /// Acknowledged writes after the initial list: each must be reflected.
    pub expected: u64,
    /// Of those, delivered as watch events ...
    pub delivered: u64,
    /// ... or superseded by a re-list.
    pub superseded_by_relist: u64,
    pub missed_count: u64,
    /// Missed values (the first [`MAX_LISTED_ANOMALIES`]).
    pub missed: Vec<u64>,
    pub duplicated_count: u64,
    pub duplicated: Vec<InformerAnomaly>,
    pub out_of_order_count: u64,
    pub out_of_order: Vec<InformerAnomaly>,
    /// Acknowledgement to watch event, over all delivered acknowledged writes.
    pub delay: Option<Latency>,
    /// In band order, `outside` last; only phases with informer activity.
    pub phases: Vec<InformerPhase>,
}

/// The rule of the kube-rs informer lane.
/// client-go's reflector re-lists after a watch shorter than this that
/// delivered nothing (`VeryShortWatchError`, `tools/cache/reflector.go`).
pub const SHORT_WATCH_MS: f64 = 1_000.0;

pub const RULE: &str = "informer";
/// The rule of client-go's informer lane.
pub const RULE_GO: &str = "informer-go";

/// The rule that judges an informer lane: [`RULE`] for
/// [`ProbeKind::Informer`], [`RULE_GO`] for [`ProbeKind::InformerGo`] (any
/// other kind: its probe name).
pub fn rule_name(kind: ProbeKind) -> &'static str {
    match kind {
        ProbeKind::Informer => RULE,
        ProbeKind::InformerGo => RULE_GO,
        k => super::probe_name(k),
    }
}

/// How the rule's messages name the lane.
fn lane_label(kind: ProbeKind) -> &'static str {
    match kind {
        ProbeKind::InformerGo => "client-go's informer",
        _ => "the informer",
    }
}

fn capped<T>(v: &mut Vec<T>, count: &mut u64, x: T) {
    *count += 1;
    if v.len() < MAX_LISTED_ANOMALIES {
        v.push(x);
    }
}

/// The phase a time falls in (the first band containing it), or `outside`.
pub(crate) fn phase_of<'a>(bands: &[&'a LabEvent], t: f64) -> &'a str {
    bands
        .iter()
        .find(|b| b.at_unix_ms <= t && t < b.end_unix_ms.unwrap_or(f64::INFINITY))
        .map(|b| b.name.as_str())
        .unwrap_or("outside")
}

/// A 410 Gone (or `Expired`: too old a resource version) the lane met: a
/// watch's ERROR event (`expired`), or a list or watch request answered so.
/// A `request-failed` record is not counted: its request's record is.
pub fn is_gone(r: &Record) -> bool {
    let ev = r.event.as_deref();
    let said = r.error.as_deref().is_some_and(|e| {
        let e = e.to_ascii_lowercase();
        e.contains("too old resource version") || e.contains("is too old")
    });
    ev == Some(event::EXPIRED)
        || (matches!(ev, Some(event::LIST | event::WATCH | event::WATCH_ERROR))
            && (r.http_status == Some(410) || said))
}

/// Judge the records of one informer lane, `kind` ([`ProbeKind::Informer`]
/// or [`ProbeKind::InformerGo`]), against the write ledger in `all`.
pub fn check(all: &[&Record], events: &[LabEvent], kind: ProbeKind) -> InformerCheck {
    let mut recs: Vec<&Record> = all.iter().copied().filter(|r| r.probe == kind).collect();
    recs.sort_by(|a, b| {
        a.start_unix_ms
            .total_cmp(&b.start_unix_ms)
            .then(a.seq.cmp(&b.seq))
    });
    let mut c = InformerCheck {
        run: !recs.is_empty(),
        ..InformerCheck::default()
    };
    if !c.run {
        return c;
    }
    // value -> acknowledgement time (the first ack of a value).
    let mut acked: BTreeMap<u64, f64> = BTreeMap::new();
    for r in all
        .iter()
        .filter(|r| r.probe == ProbeKind::Write && r.outcome == Outcome::Ok && r.value.is_some())
    {
        let at = r.start_unix_ms + r.duration_ms;
        let e = acked.entry(r.value.unwrap()).or_insert(at);
        *e = e.min(at);
    }
    let bands = phase_bands(events);
    // Per phase: re-lists, errors, delays, re-lists counted against the
    // budget.
    let mut per_phase: BTreeMap<&str, (u64, u64, Vec<f64>, u64)> = BTreeMap::new();

    let mut inits = 0u64;
    // A (re)list began (`init`) and has not completed (`synced`): an
    // `init` now retries it.
    let mut listing = false;
    // A (re)list has completed: init-apply records after are re-lists'.
    let mut synced_once = false;
    // A 410 Gone met since the last (re)list began: the next may follow.
    let mut gone = false;
    // client-go: the last watch request's start, whether an event came on
    // it, and whether it ended within a second without one (the
    // reflector's VeryShortWatchError, after which it re-lists).
    let go = kind == ProbeKind::InformerGo;
    let mut watch_began: Option<f64> = None;
    let mut watch_delivered = false;
    let mut short_watch = false;
    let mut short_in_phase: std::collections::BTreeSet<&str> = Default::default();
    let mut last: Option<u64> = None;
    // Values jumped over by a list (superseded) vs. by a watch (missed).
    let mut superseded: Vec<(u64, u64)> = Vec::new();
    let mut delivered: BTreeMap<u64, f64> = BTreeMap::new();
    for r in &recs {
        let ev = r.event.as_deref().unwrap_or("");
        if is_gone(r) {
            c.gone += 1;
            gone = true;
        }
        if event::is_request(Some(ev)) {
            match ev {
                event::LIST => c.list_requests += 1,
                event::WATCH => {
                    c.watch_requests += 1;
                    watch_began = (r.outcome == Outcome::Ok).then_some(r.start_unix_ms);
                    watch_delivered = false;
                }
                _ => {}
            }
            if r.outcome != Outcome::Ok {
                c.errors += 1;
                per_phase
                    .entry(phase_of(&bands, r.start_unix_ms))
                    .or_default()
                    .1 += 1;
            }
            continue;
        }
        match ev {
            event::INIT => {
                inits += 1;
                if inits > 1 {
                    c.relists += 1;
                    let p = per_phase
                        .entry(phase_of(&bands, r.start_unix_ms))
                        .or_default();
                    p.0 += 1;
                    if listing {
                        c.list_retries += 1;
                    } else if gone {
                        c.relists_after_gone += 1;
                    } else if short_watch
                        && short_in_phase.insert(phase_of(&bands, r.start_unix_ms))
                    {
                        // One per step: a storm of them is still a storm.
                        c.relists_after_short_watch += 1;
                    } else {
                        c.relists_counted += 1;
                        p.3 += 1;
                    }
                }
                listing = true;
                gone = false;
                short_watch = false;
            }
            event::WATCH_CLOSED if go => {
                short_watch = !watch_delivered
                    && watch_began.is_some_and(|t| r.start_unix_ms - t < SHORT_WATCH_MS);
                watch_began = None;
            }
            event::SYNCED => {
                listing = false;
                synced_once = true;
            }
            event::INIT_APPLY | event::APPLY => {
                if ev == event::APPLY {
                    watch_delivered = true;
                }
                let Some(v) = r.value else { continue };
                let listed = ev == event::INIT_APPLY;
                if listed && c.initial_value.is_none() && !synced_once {
                    c.initial_value = Some(v);
                }
                if !listed {
                    c.events += 1;
                    delivered.entry(v).or_insert(r.start_unix_ms);
                }
                match last {
                    Some(p) if v < p || (v == p && !listed) => {
                        let a = InformerAnomaly {
                            at_unix_ms: r.start_unix_ms,
                            value: v,
                            previous_value: p,
                            seen_in: ev.to_string(),
                        };
                        if v == p {
                            capped(&mut c.duplicated, &mut c.duplicated_count, a);
                        } else {
                            capped(&mut c.out_of_order, &mut c.out_of_order_count, a);
                        }
                    }
                    Some(p) if v > p.saturating_add(1) || (listed && v > p) => {
                        if listed {
                            // Skipped, and the listed value itself: the list
                            // reflects it, no event will.
                            superseded.push((p + 1, v));
                        } else {
                            // Every value jumped over is missed: counted
                            // at once, the first listed, so a damaged
                            // value (a jump of 2^62) costs no more than
                            // a jump of one (walking it would never end).
                            c.missed_count += v - p - 1;
                            let room = MAX_LISTED_ANOMALIES.saturating_sub(c.missed.len());
                            c.missed.extend((p + 1..v).take(room));
                        }
                    }
                    _ => {}
                }
                last = Some(last.map_or(v, |p| p.max(v)));
            }
            _ => {}
        }
    }
    c.last_value = last;

    // Every acknowledged write after the initial list must be reflected.
    let mut delays = Vec::new();
    // (None after u64::MAX, a damaged initial list's value.)
    if let Some(after) = c.initial_value.and_then(|v| v.checked_add(1)) {
        for (&v, &ack) in acked.range(after..) {
            c.expected += 1;
            if let Some(&seen) = delivered.get(&v) {
                c.delivered += 1;
                let d = (seen - ack).max(0.0);
                delays.push(d);
                per_phase
                    .entry(phase_of(&bands, ack))
                    .or_default()
                    .2
                    .push(d);
            } else if superseded.iter().any(|(a, b)| (*a..=*b).contains(&v)) {
                c.superseded_by_relist += 1;
            } else if last.is_none_or(|l| v > l) && !c.missed.contains(&v) {
                capped(&mut c.missed, &mut c.missed_count, v);
            }
        }
    }
    c.missed.sort_unstable();
    c.delay = latency_of(delays);
    let mut order: Vec<&str> = Vec::new();
    for b in &bands {
        if !order.contains(&b.name.as_str()) {
            order.push(&b.name);
        }
    }
    order.push("outside");
    for name in order {
        if let Some((relists, errors, d, relists_counted)) = per_phase.remove(name) {
            c.phases.push(InformerPhase {
                name: name.to_string(),
                relists,
                relists_counted,
                errors,
                delay: latency_of(d),
            });
        }
    }
    c
}

fn ms(v: f64) -> String {
    super::fmt_ms(v)
}

/// The re-lists counted against the budget, per phase: `3 in
/// MigrateDNSRecords, 1 outside`.
fn counted_by_phase(c: &InformerCheck) -> String {
    let v: Vec<String> = c
        .phases
        .iter()
        .filter(|p| p.relists_counted > 0)
        .map(|p| format!("{} in {}", p.relists_counted, p.name))
        .collect();
    v.join(", ")
}

/// The rule of the informer lane `kind` (see [`rule_name`]), from its
/// check. `ran`: that informer was told to run. `relist_budget`: the
/// re-lists it may make beyond its initial list and one after each 410
/// Gone (`Criteria::informer_relists`).
pub fn rule(c: &InformerCheck, kind: ProbeKind, ran: bool, relist_budget: u64) -> Rule {
    let name = rule_name(kind).to_string();
    let who = lane_label(kind);
    if !c.run {
        return Rule::unchecked(
            name,
            ran,
            &format!("{who} ran but left no record: the controllers' view was not checked"),
            &format!("{who} did not run"),
        );
    }
    if c.initial_value.is_none() {
        return Rule {
            name,
            status: RuleStatus::Failed,
            message: format!(
                "{who} never completed its initial list ({} list request(s), {} error(s))",
                c.list_requests, c.errors
            ),
        };
    }
    let per_phase: Vec<String> = c
        .phases
        .iter()
        .map(|p| {
            format!(
                "{}: {} relist(s), {} error(s){}",
                p.name,
                p.relists,
                p.errors,
                p.delay
                    .map(|d| format!(", worst delay {}", ms(d.max_ms)))
                    .unwrap_or_default()
            )
        })
        .collect();
    let relists = if c.relists + c.gone == 0 {
        String::new()
    } else {
        format!(
            "; re-lists: {} after a 410 Gone ({} met), {} retrying a list that failed, {}{} beyond them (budget {relist_budget})",
            c.relists_after_gone,
            c.gone,
            c.list_retries,
            if c.relists_after_short_watch > 0 {
                format!(
                    "{} after a watch the server ended within a second with no event (client-go's rule), ",
                    c.relists_after_short_watch
                )
            } else {
                String::new()
            },
            c.relists_counted
        )
    };
    let summary = format!(
        "{} acknowledged write(s) after the initial list: {} delivered as events, {} superseded by {} re-list(s){relists}; notification delay {}; {}",
        c.expected,
        c.delivered,
        c.superseded_by_relist,
        c.relists,
        c.delay
            .map(|d| format!("p50 {}, p99 {}, max {}", ms(d.p50_ms), ms(d.p99_ms), ms(d.max_ms)))
            .unwrap_or_else(|| "-".into()),
        if per_phase.is_empty() {
            "no activity by phase".to_string()
        } else {
            format!("by phase: {}", per_phase.join("; "))
        }
    );
    let over_budget = c.relists_counted > relist_budget;
    if c.missed_count + c.duplicated_count + c.out_of_order_count == 0 && !over_budget {
        return Rule {
            name,
            status: RuleStatus::Passed,
            message: summary,
        };
    }
    let mut parts = Vec::new();
    if over_budget {
        parts.push(format!(
            "{} re-list(s) without a 410 Gone ({}), budget {relist_budget}",
            c.relists_counted,
            counted_by_phase(c)
        ));
    }
    if c.missed_count > 0 {
        let v: Vec<String> = c.missed.iter().take(10).map(u64::to_string).collect();
        parts.push(format!(
            "{} counter value(s) never seen by {who}: {}{}",
            c.missed_count,
            v.join(", "),
            if c.missed_count > 10 { ", ..." } else { "" }
        ));
    }
    for (what, n, list) in [
        ("delivered twice", c.duplicated_count, &c.duplicated),
        ("out of order", c.out_of_order_count, &c.out_of_order),
    ] {
        if n > 0 {
            let v: Vec<String> = list
                .iter()
                .take(10)
                .map(|a| format!("{} after {} ({})", a.value, a.previous_value, a.seen_in))
                .collect();
            parts.push(format!("{n} value(s) {what}: {}", v.join(", ")));
        }
    }
    Rule {
        name,
        status: RuleStatus::Failed,
        message: format!("{}; {summary}", parts.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ConnMode;
    use crate::testutil::{phase, rec, write};

    fn inf(t: f64, ev: &str, value: Option<u64>) -> Record {
        let mut r = rec(ProbeKind::Informer, ConnMode::Reused, t, 1.0, Outcome::Ok);
        r.event = Some(ev.into());
        r.value = value;
        r.rv = value.map(|v| 100 + v);
        r
    }

    /// An informer that lists value 0 at t=0, then sees writes 1..=n, each
    /// acknowledged at 100·v + 5 ms and delivered 3 ms later.
    fn clean(n: u64) -> Vec<Record> {
        let mut v = vec![
            inf(0.0, event::LIST, None),
            inf(1.0, event::INIT, None),
            inf(2.0, event::INIT_APPLY, Some(0)),
            inf(3.0, event::SYNCED, None),
            inf(4.0, event::WATCH, None),
        ];
        for i in 1..=n {
            v.push(write(100.0 * i as f64, i, 100 + i));
            v.push(inf(100.0 * i as f64 + 8.0, event::APPLY, Some(i)));
        }
        v
    }

    fn says(r: &Rule, text: &str) {
        assert!(r.message.contains(text), "`{text}` not in: {}", r.message);
    }

    fn run(recs: &[Record], events: &[LabEvent]) -> InformerCheck {
        let all: Vec<&Record> = recs.iter().collect();
        check(&all, events, ProbeKind::Informer)
    }

    #[test]
    fn a_clean_informer_sees_every_write_with_its_delay() {
        let recs = clean(10);
        let c = run(&recs, &[]);
        assert_eq!((c.expected, c.delivered, c.relists), (10, 10, 0));
        assert_eq!(
            (c.missed_count, c.duplicated_count, c.out_of_order_count),
            (0, 0, 0)
        );
        // write() records last 5 ms: acked at 100v + 5, seen at 100v + 8.
        assert!(
            (c.delay.unwrap().max_ms - 3.0).abs() < 1e-6,
            "{:?}",
            c.delay
        );
        let r = rule(&c, ProbeKind::Informer, true, 0);
        assert_eq!(r.status, RuleStatus::Passed, "{}", r.message);
        says(
            &r,
            "by phase: outside: 0 relist(s), 0 error(s), worst delay 3 ms",
        );
    }

    /// A damaged record: a watch event 2^62 values on. The values jumped
    /// over are counted at once and the first of them listed: the work is
    /// the records', not the jump's (walking them would take centuries).
    #[test]
    fn a_jump_of_the_counter_is_counted_not_walked() {
        let mut recs = clean(2);
        recs.push(inf(1_000.0, event::APPLY, Some(1 << 62)));
        let c = run(&recs, &[]);
        assert_eq!(c.missed_count, (1 << 62) - 3);
        assert_eq!(c.missed.len(), MAX_LISTED_ANOMALIES);
        assert_eq!(c.missed[..3], [3, 4, 5]);
        assert_eq!(c.last_value, Some(1 << 62));
        // At the top of the range: listed again at u64::MAX, nothing to
        // expect after it, no overflow.
        let listed_top = |t: f64| {
            let mut r = inf(t, event::INIT_APPLY, None);
            r.value = Some(u64::MAX);
            r
        };
        let top = vec![
            inf(1.0, event::INIT, None),
            listed_top(2.0),
            inf(3.0, event::SYNCED, None),
            inf(4.0, event::INIT, None),
            listed_top(5.0),
        ];
        let c = run(&top, &[]);
        assert_eq!(c.initial_value, Some(u64::MAX));
        assert_eq!((c.expected, c.missed_count, c.relists), (0, 0, 1));
    }

    #[test]
    fn a_value_skipped_between_watch_events_is_missed() {
        let recs: Vec<Record> = clean(10)
            .into_iter()
            .filter(|r| !(r.probe == ProbeKind::Informer && r.value == Some(4)))
            .collect();
        let c = run(&recs, &[]);
        assert_eq!(c.missed, vec![4]);
        let r = rule(&c, ProbeKind::Informer, true, 0);
        assert_eq!(r.status, RuleStatus::Failed);
        says(&r, "1 counter value(s) never seen by the informer: 4");
    }

    #[test]
    fn a_relist_that_jumps_ahead_supersedes_and_is_counted_per_phase() {
        let recs = relisted(vec![inf(660.0, event::EXPIRED, None)]);
        let bands = [phase("MigrateDNSRecords", 400.0, 700.0)];
        let c = run(&recs, &bands);
        assert_eq!(
            (c.relists, c.superseded_by_relist, c.missed_count),
            (1, 3, 0),
            "{c:?}"
        );
        assert_eq!(c.delivered, 7);
        let p = c
            .phases
            .iter()
            .find(|p| p.name == "MigrateDNSRecords")
            .unwrap();
        assert_eq!((p.relists, p.errors), (1, 1));
        let r = rule(&c, ProbeKind::Informer, true, 0);
        assert_eq!(r.status, RuleStatus::Passed, "{}", r.message);
        says(&r, "MigrateDNSRecords: 1 relist(s), 1 error(s)");
    }

    /// clean(10) whose watch broke at 450 (no event 4..=6): the records of
    /// a re-list at 660 that lists value 6, after `before` (a 410, or
    /// nothing).
    fn relisted(before: Vec<Record>) -> Vec<Record> {
        let mut recs: Vec<Record> = clean(10)
            .into_iter()
            .filter(|r| {
                !(r.probe == ProbeKind::Informer && (4..=6).contains(&r.value.unwrap_or(0)))
            })
            .collect();
        let mut broke = inf(450.0, event::WATCH_BROKE, None);
        broke.outcome = Outcome::Reset;
        recs.push(broke);
        recs.extend(before);
        recs.push(inf(661.0, event::INIT, None));
        recs.push(inf(661.5, event::LIST, None));
        recs.push(inf(662.0, event::INIT_APPLY, Some(6)));
        recs.push(inf(663.0, event::SYNCED, None));
        recs
    }

    /// client-go's reflector re-lists after a watch the server ended
    /// within a second with no event (`VeryShortWatchError`): for
    /// client-go's informer that re-list is the library's, not counted; for
    /// kube-rs' it is; and a watch that lasted longer or delivered an event
    /// explains nothing.
    #[test]
    fn a_relist_after_a_very_short_watch_is_client_gos_rule() {
        let go = |recs: Vec<Record>| -> Vec<Record> {
            recs.into_iter()
                .map(|mut r| {
                    if r.probe == ProbeKind::Informer {
                        r.probe = ProbeKind::InformerGo;
                    }
                    r
                })
                .collect()
        };
        let short = |closed_after: f64| {
            vec![
                inf(600.0, event::WATCH, None),
                inf(600.0 + closed_after, event::WATCH_CLOSED, None),
            ]
        };
        let check_go = |recs: &[Record]| {
            let all: Vec<&Record> = recs.iter().collect();
            check(&all, &[], ProbeKind::InformerGo)
        };
        let c = check_go(&go(relisted(short(7.0))));
        assert_eq!(
            (c.relists, c.relists_after_short_watch, c.relists_counted),
            (1, 1, 0)
        );
        let r = rule(&c, ProbeKind::InformerGo, true, 0);
        assert_eq!(r.status, RuleStatus::Passed, "{}", r.message);
        says(
            &r,
            "1 after a watch the server ended within a second with no event",
        );
        // kube-rs' watcher re-watches instead: its re-list is counted.
        let c = run(&relisted(short(7.0)), &[]);
        assert_eq!((c.relists_after_short_watch, c.relists_counted), (0, 1));
        // A watch of 1.5 s is no very short one.
        let c = check_go(&go(relisted(short(1_500.0))));
        assert_eq!((c.relists_after_short_watch, c.relists_counted), (0, 1));
        // A second one in the same step is counted: a storm is a storm.
        let mut recs = go(relisted(short(7.0)));
        for (i, t) in [700.0, 701.0, 702.0, 703.0, 704.0, 705.0]
            .iter()
            .enumerate()
        {
            let ev = [
                event::WATCH,
                event::WATCH_CLOSED,
                event::INIT,
                event::LIST,
                event::INIT_APPLY,
                event::SYNCED,
            ][i];
            let mut r = inf(*t, ev, (ev == event::INIT_APPLY).then_some(7));
            r.probe = ProbeKind::InformerGo;
            recs.push(r);
        }
        let c = check_go(&recs);
        assert_eq!((c.relists_after_short_watch, c.relists_counted), (1, 1));
        // Nor is one that delivered an event.
        let mut recs = short(7.0);
        recs.insert(1, inf(603.0, event::APPLY, Some(7)));
        let c = check_go(&go(relisted(recs)));
        assert_eq!(c.relists_after_short_watch, 0);
    }

    #[test]
    fn a_relist_without_a_410_is_counted_against_the_budget() {
        let bands = [phase("MigrateDNSRecords", 400.0, 700.0)];
        let c = run(&relisted(vec![]), &bands);
        assert_eq!(
            (c.relists, c.gone, c.relists_after_gone, c.relists_counted),
            (1, 0, 0, 1),
            "{c:?}"
        );
        assert_eq!((c.missed_count, c.superseded_by_relist), (0, 3));
        let p = &c.phases[0];
        assert_eq!(
            (p.name.as_str(), p.relists, p.relists_counted),
            ("MigrateDNSRecords", 1, 1)
        );
        let r = rule(&c, ProbeKind::Informer, true, 0);
        assert_eq!(r.status, RuleStatus::Failed, "{}", r.message);
        says(
            &r,
            "1 re-list(s) without a 410 Gone (1 in MigrateDNSRecords), budget 0",
        );
        let r = rule(&c, ProbeKind::Informer, true, 1);
        assert_eq!(r.status, RuleStatus::Passed, "{}", r.message);
        says(
            &r,
            "re-lists: 0 after a 410 Gone (0 met), 0 retrying a list that failed, 1 beyond them (budget 1)",
        );
    }

    #[test]
    fn a_relist_after_a_410_is_allowed_and_its_retries_are_the_same_relist() {
        let bands = [phase("MigrateDNSRecords", 400.0, 700.0)];
        // kube-rs and client-go: the watch's ERROR event, `expired`.
        let c = run(&relisted(vec![inf(660.0, event::EXPIRED, None)]), &bands);
        assert_eq!(
            (c.relists, c.gone, c.relists_after_gone, c.relists_counted),
            (1, 1, 1, 0),
            "{c:?}"
        );
        let r = rule(&c, ProbeKind::Informer, true, 0);
        assert_eq!(r.status, RuleStatus::Passed, "{}", r.message);
        says(&r, "re-lists: 1 after a 410 Gone (1 met)");
        // client-go: a watch request answered 410 (too old a resource
        // version) ends ListAndWatch, which lists again.
        let mut watch = inf(659.0, event::WATCH, None);
        watch.outcome = Outcome::Http;
        watch.http_status = Some(410);
        watch.error = Some("too old resource version: 104 (110)".into());
        let c = run(&relisted(vec![watch]), &bands);
        assert_eq!((c.gone, c.relists_after_gone, c.relists_counted), (1, 1, 0));
        // The re-list's list fails and is retried: the same re-list.
        let mut failed = inf(660.5, event::LIST, None);
        failed.outcome = Outcome::Reset;
        let c = run(
            &relisted(vec![
                inf(659.0, event::EXPIRED, None),
                inf(660.0, event::INIT, None),
                failed,
            ]),
            &bands,
        );
        assert_eq!(
            (
                c.relists,
                c.list_retries,
                c.relists_after_gone,
                c.relists_counted
            ),
            (2, 1, 1, 0),
            "{c:?}"
        );
        assert_eq!(
            rule(&c, ProbeKind::Informer, true, 0).status,
            RuleStatus::Passed
        );
        // A 410 is spent on one re-list: a second without another 410 counts.
        let mut recs = relisted(vec![inf(660.0, event::EXPIRED, None)]);
        recs.push(inf(680.0, event::INIT, None));
        recs.push(inf(681.0, event::INIT_APPLY, Some(10)));
        recs.push(inf(682.0, event::SYNCED, None));
        let c = run(&recs, &bands);
        assert_eq!((c.relists_after_gone, c.relists_counted), (1, 1), "{c:?}");
        assert_eq!(
            rule(&c, ProbeKind::Informer, true, 0).status,
            RuleStatus::Failed
        );
    }

    #[test]
    fn a_retried_initial_list_is_the_initial_list() {
        let mut recs = clean(3);
        let mut failed = inf(0.5, event::LIST, None);
        failed.outcome = Outcome::Refused;
        recs.push(inf(-1.0, event::INIT, None));
        recs.push(failed);
        let c = run(&recs, &[]);
        assert_eq!(c.initial_value, Some(0));
        assert_eq!((c.relists, c.list_retries, c.relists_counted), (1, 1, 0));
        assert_eq!(
            rule(&c, ProbeKind::Informer, true, 0).status,
            RuleStatus::Passed
        );
    }

    #[test]
    fn the_budget_comes_from_the_criteria() {
        use crate::testutil::{clean_run, judged};
        use crate::Criteria;
        // clean_run()'s writes, each delivered; a re-list at 5 s, no 410.
        let mut recs = clean_run();
        for (t, e, v) in [
            (1.0, event::INIT, None),
            (2.0, event::INIT_APPLY, Some(0)),
            (3.0, event::SYNCED, None),
            (5_000.0, event::INIT, None),
            (5_001.0, event::INIT_APPLY, Some(50)),
            (5_002.0, event::SYNCED, None),
        ] {
            recs.push(inf(t, e, v));
        }
        for i in 1..=100u64 {
            recs.push(inf(19.0 + (i - 1) as f64 * 100.0, event::APPLY, Some(i)));
        }
        let rule_of = |c: &Criteria| judged(&recs, &[], c).rule(RULE).unwrap().clone();
        let r = rule_of(&Criteria::default());
        assert_eq!(r.status, RuleStatus::Failed, "{}", r.message);
        says(
            &r,
            "1 re-list(s) without a 410 Gone (1 in outside), budget 0",
        );
        let one = Criteria {
            informer_relists: Some(1),
            ..Criteria::default()
        };
        let r = rule_of(&one);
        assert_eq!(r.status, RuleStatus::Passed, "{}", r.message);
        says(&r, "1 beyond them (budget 1)");
    }

    #[test]
    fn going_back_in_time_and_duplicates_fail() {
        let mut recs = clean(5);
        recs.push(inf(600.0, event::APPLY, Some(5)));
        recs.push(inf(601.0, event::INIT, None));
        recs.push(inf(602.0, event::INIT_APPLY, Some(3)));
        let c = run(&recs, &[]);
        assert_eq!((c.duplicated_count, c.out_of_order_count), (1, 1), "{c:?}");
        let r = rule(&c, ProbeKind::Informer, true, 0);
        assert_eq!(r.status, RuleStatus::Failed);
        says(&r, "1 value(s) delivered twice: 5 after 5 (apply)");
        says(&r, "1 value(s) out of order: 3 after 5 (init-apply)");
    }

    #[test]
    fn an_acknowledged_write_never_reflected_is_missed() {
        let mut recs = clean(3);
        recs.push(write(400.0, 4, 104));
        let c = run(&recs, &[]);
        assert_eq!(c.missed, vec![4]);
        assert_eq!(
            rule(&c, ProbeKind::Informer, true, 0).status,
            RuleStatus::Failed
        );
    }

    #[test]
    fn an_informer_that_never_synced_fails_and_no_records_skip() {
        let mut l = inf(0.0, event::LIST, None);
        l.outcome = Outcome::Refused;
        let c = run(&[l], &[]);
        assert_eq!(c.errors, 1);
        assert_eq!(
            rule(&c, ProbeKind::Informer, true, 0).status,
            RuleStatus::Failed
        );
        assert_eq!(
            rule(&run(&[], &[]), ProbeKind::Informer, false, 0).status,
            RuleStatus::Skipped
        );
    }

    /// The same records, as client-go's informer lane.
    fn as_go(recs: &[Record]) -> Vec<Record> {
        recs.iter()
            .cloned()
            .map(|mut r| {
                if r.probe == ProbeKind::Informer {
                    r.probe = ProbeKind::InformerGo;
                }
                r
            })
            .collect()
    }

    #[test]
    fn informer_go_is_judged_like_the_informer_on_the_same_events() {
        // A relist that supersedes 4..=6, inside a phase, then a missed 9.
        let mut recs: Vec<Record> = clean(10)
            .into_iter()
            .filter(|r| {
                !(r.probe == ProbeKind::Informer && matches!(r.value, Some(4..=6) | Some(9)))
            })
            .collect();
        let mut broke = inf(450.0, event::WATCH_BROKE, None);
        broke.outcome = Outcome::Reset;
        recs.push(broke);
        recs.push(inf(661.0, event::INIT, None));
        recs.push(inf(662.0, event::INIT_APPLY, Some(6)));
        let bands = [phase("MigrateDNSRecords", 400.0, 700.0)];
        let kube = run(&recs, &bands);
        let go_recs = as_go(&recs);
        let all: Vec<&Record> = go_recs.iter().collect();
        let go = check(&all, &bands, ProbeKind::InformerGo);
        assert!(go.run);
        assert_eq!(go, kube, "the same events give the same check");
        assert_eq!(go.missed, vec![9]);
        let (rk, rg) = (
            rule(&kube, ProbeKind::Informer, true, 0),
            rule(&go, ProbeKind::InformerGo, true, 0),
        );
        assert_eq!((rk.name.as_str(), rg.name.as_str()), (RULE, RULE_GO));
        assert_eq!(rk.status, RuleStatus::Failed);
        assert_eq!(rg.status, rk.status);
        says(
            &rg,
            "1 counter value(s) never seen by client-go's informer: 9",
        );
        says(&rg, "MigrateDNSRecords: 1 relist(s), 1 error(s)");
        // Each check reads its own lane only.
        assert!(!check(&all, &bands, ProbeKind::Informer).run);
        let kube_only: Vec<&Record> = recs.iter().collect();
        assert!(!check(&kube_only, &bands, ProbeKind::InformerGo).run);
        // Not run: skipped, or not covered when it was told to run.
        let none = check(&[], &[], ProbeKind::InformerGo);
        let r = rule(&none, ProbeKind::InformerGo, false, 0);
        assert_eq!((r.name.as_str(), r.status), (RULE_GO, RuleStatus::Skipped));
        says(&r, "client-go's informer did not run");
        let r = rule(&none, ProbeKind::InformerGo, true, 0);
        assert_eq!(r.status, RuleStatus::NotCovered);
    }
}
