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
    let mut per_phase: BTreeMap<&str, (u64, u64, Vec<f64>)> = BTreeMap::new();

    let mut inits = 0u64;
    let mut last: Option<u64> = None;
    // Values jumped over by a list (superseded) vs. by a watch (missed).
    let mut superseded: Vec<(u64, u64)> = Vec::new();
    let mut delivered: BTreeMap<u64, f64> = BTreeMap::new();
    for r in &recs {
        let ev = r.event.as_deref().unwrap_or("");
        if event::is_request(Some(ev)) {
            match ev {
                event::LIST => c.list_requests += 1,
                event::WATCH => c.watch_requests += 1,
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
                    per_phase
                        .entry(phase_of(&bands, r.start_unix_ms))
                        .or_default()
                        .0 += 1;
                }
            }
            event::INIT_APPLY | event::APPLY => {
                let Some(v) = r.value else { continue };
                let listed = ev == event::INIT_APPLY;
                if listed && c.initial_value.is_none() && inits <= 1 {
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
                    Some(p) if v > p + 1 || (listed && v > p) => {
                        if listed {
                            // Skipped, and the listed value itself: the list
                            // reflects it, no event will.
                            superseded.push((p + 1, v));
                        } else {
                            for m in p + 1..v {
                                capped(&mut c.missed, &mut c.missed_count, m);
                            }
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
    if let Some(first) = c.initial_value {
        for (&v, &ack) in acked.range(first + 1..) {
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
        if let Some((relists, errors, d)) = per_phase.remove(name) {
            c.phases.push(InformerPhase {
                name: name.to_string(),
                relists,
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

/// The rule of the informer lane `kind` (see [`rule_name`]), from its
/// check. `ran`: that informer was told to run.
pub fn rule(c: &InformerCheck, kind: ProbeKind, ran: bool) -> Rule {
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
    let summary = format!(
        "{} acknowledged write(s) after the initial list: {} delivered as events, {} superseded by {} re-list(s); notification delay {}; {}",
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
    if c.missed_count + c.duplicated_count + c.out_of_order_count == 0 {
        return Rule {
            name,
            status: RuleStatus::Passed,
            message: summary,
        };
    }
    let mut parts = Vec::new();
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
        let r = rule(&c, ProbeKind::Informer, true);
        assert_eq!(r.status, RuleStatus::Passed, "{}", r.message);
        says(
            &r,
            "by phase: outside: 0 relist(s), 0 error(s), worst delay 3 ms",
        );
    }

    #[test]
    fn a_value_skipped_between_watch_events_is_missed() {
        let recs: Vec<Record> = clean(10)
            .into_iter()
            .filter(|r| !(r.probe == ProbeKind::Informer && r.value == Some(4)))
            .collect();
        let c = run(&recs, &[]);
        assert_eq!(c.missed, vec![4]);
        let r = rule(&c, ProbeKind::Informer, true);
        assert_eq!(r.status, RuleStatus::Failed);
        says(&r, "1 counter value(s) never seen by the informer: 4");
    }

    #[test]
    fn a_relist_that_jumps_ahead_supersedes_and_is_counted_per_phase() {
        let mut recs: Vec<Record> = clean(10)
            .into_iter()
            .filter(|r| {
                !(r.probe == ProbeKind::Informer && (4..=6).contains(&r.value.unwrap_or(0)))
            })
            .collect();
        let mut broke = inf(450.0, event::WATCH_BROKE, None);
        broke.outcome = Outcome::Reset;
        recs.push(broke);
        recs.push(inf(660.0, event::EXPIRED, None));
        recs.push(inf(661.0, event::INIT, None));
        recs.push(inf(662.0, event::INIT_APPLY, Some(6)));
        recs.push(inf(663.0, event::SYNCED, None));
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
        let r = rule(&c, ProbeKind::Informer, true);
        assert_eq!(r.status, RuleStatus::Passed, "{}", r.message);
        says(&r, "MigrateDNSRecords: 1 relist(s), 1 error(s)");
    }

    #[test]
    fn going_back_in_time_and_duplicates_fail() {
        let mut recs = clean(5);
        recs.push(inf(600.0, event::APPLY, Some(5)));
        recs.push(inf(601.0, event::INIT, None));
        recs.push(inf(602.0, event::INIT_APPLY, Some(3)));
        let c = run(&recs, &[]);
        assert_eq!((c.duplicated_count, c.out_of_order_count), (1, 1), "{c:?}");
        let r = rule(&c, ProbeKind::Informer, true);
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
            rule(&c, ProbeKind::Informer, true).status,
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
            rule(&c, ProbeKind::Informer, true).status,
            RuleStatus::Failed
        );
        assert_eq!(
            rule(&run(&[], &[]), ProbeKind::Informer, false).status,
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
            rule(&kube, ProbeKind::Informer, true),
            rule(&go, ProbeKind::InformerGo, true),
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
        let r = rule(&none, ProbeKind::InformerGo, false);
        assert_eq!((r.name.as_str(), r.status), (RULE_GO, RuleStatus::Skipped));
        says(&r, "client-go's informer did not run");
        let r = rule(&none, ProbeKind::InformerGo, true);
        assert_eq!(r.status, RuleStatus::NotCovered);
    }
}
