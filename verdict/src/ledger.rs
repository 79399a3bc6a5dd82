//! The write ledger: every value the API acknowledged for the counter. Three
//! rules: `lost-writes` (every acknowledged write is in the counter's
//! history in etcd, at the revision it was acknowledged with, and the
//! counter read back through the API is not behind), `ledger-conflicts`
//! (no value acknowledged with two revisions) and `rv-monotonic` (no
//! acknowledged revision below one acknowledged before the write was sent).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{fmt_list, mode_name, push_capped, record_end, Rule, RuleStatus, MAX_LISTED_ANOMALIES};
use crate::record::{FinalRead, Outcome, ProbeKind, Record};

/// The lost-writes rule's name.
pub const RULE_LOST: &str = "lost-writes";

/// What the write ledger shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// Write records with outcome ok and a value.
    pub acknowledged: u64,
    pub max_acknowledged: Option<u64>,
    /// The counter read back after the run.
    pub final_counter: Option<u64>,
    /// Why it could not be read (after every attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_counter_error: Option<String>,
    /// Versions of the counter in etcd's history (`None`: not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_versions: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_error: Option<String>,
    /// Acknowledged values missing from the history (or, without a history,
    /// above the counter read back): sorted, distinct.
    pub lost_writes: Vec<u64>,
    pub lost_count: u64,
    /// Where the history's revisions went backwards (a value and its rev).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history_regressions: Vec<(u64, u64)>,
    /// Acknowledged values that came back with different resourceVersions.
    pub ledger_conflicts: Vec<LedgerConflict>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerConflict {
    pub value: u64,
    pub rvs: Vec<u64>,
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

/// The acknowledged writes: updates (not the writer's reads) that succeeded.
pub fn acked_writes<'a>(all: &[&'a Record]) -> Vec<&'a Record> {
    all.iter()
        .copied()
        .filter(|r| {
            r.probe == ProbeKind::Write
                && r.event.is_none()
                && r.outcome == Outcome::Ok
                && r.value.is_some()
        })
        .collect()
}

pub fn ledger(all: &[&Record], fin: &FinalRead) -> Ledger {
    let acked = acked_writes(all);
    let mut rvs: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for r in &acked {
        let e = rvs.entry(r.value.unwrap()).or_default();
        if let Some(rv) = r.rv {
            e.insert(rv);
        }
    }
    let mut lost: BTreeSet<u64> = BTreeSet::new();
    let mut history_regressions = Vec::new();
    if let Some(h) = &fin.history {
        let versions: BTreeSet<(u64, u64)> = h.iter().map(|e| (e.value, e.rev)).collect();
        let values: BTreeSet<u64> = h.iter().map(|e| e.value).collect();
        for (v, set) in &rvs {
            let kept = if set.is_empty() {
                values.contains(v)
            } else {
                set.iter().all(|rv| versions.contains(&(*v, *rv)))
            };
            if !kept {
                lost.insert(*v);
            }
        }
        history_regressions = h
            .windows(2)
            .filter(|w| w[1].rev <= w[0].rev)
            .map(|w| (w[1].value, w[1].rev))
            .take(MAX_LISTED_ANOMALIES)
            .collect();
    }
    if let Some(fc) = fin.counter {
        lost.extend(rvs.keys().copied().filter(|v| *v > fc));
    }
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
        final_counter: fin.counter,
        final_counter_error: fin.counter_error.clone(),
        history_versions: fin.history.as_ref().map(|h| h.len() as u64),
        history_error: fin.history_error.clone(),
        lost_writes: lost.into_iter().take(MAX_LISTED_ANOMALIES).collect(),
        lost_count,
        history_regressions,
        ledger_conflicts,
    }
}

/// `lost-writes`: failed when an acknowledged write is not in the history
/// or above the counter read back, and when neither could be read; not
/// covered when the writer ran and no write was acknowledged; *degraded*
/// when it passed on the counter alone (the history could not be read: a
/// write lost below the last one would not show).
pub fn lost_writes_rule(l: &Ledger, writes_ran: bool) -> Rule {
    let name = RULE_LOST.to_string();
    let failed = |message: String| Rule {
        name: name.clone(),
        status: RuleStatus::Failed,
        message,
    };
    if l.acknowledged == 0 {
        return Rule::unchecked(
            name,
            writes_ran,
            "no write was acknowledged: nothing shows writes were kept",
            "the write probe did not run",
        );
    }
    if l.final_counter.is_none() && l.history_versions.is_none() {
        return failed(format!(
            "{} acknowledged write(s), but neither the counter ({}) nor its history ({}) could be read back: nothing shows they were kept",
            l.acknowledged,
            l.final_counter_error.as_deref().unwrap_or("not read"),
            l.history_error.as_deref().unwrap_or("not read"),
        ));
    }
    if l.lost_count > 0 {
        return failed(format!(
            "{} acknowledged write(s) lost: {} {}",
            l.lost_count,
            fmt_list(&l.lost_writes, l.lost_count),
            match (l.history_versions, l.final_counter) {
                (Some(n), Some(fc)) => format!("(not in the counter's history of {n} versions at the acknowledged revision, or above the counter read back, {fc})"),
                (Some(n), None) => format!("(not in the counter's history of {n} versions at the acknowledged revision)"),
                (None, Some(fc)) => format!("(above the counter read back, {fc})"),
                (None, None) => unreachable!("handled above"),
            }
        ));
    }
    if !l.history_regressions.is_empty() {
        let v: Vec<String> = l
            .history_regressions
            .iter()
            .map(|(v, rev)| format!("{v} at rev {rev}"))
            .collect();
        return failed(format!(
            "the counter's history in etcd went backwards in revision: {}",
            fmt_list(&v, v.len() as u64)
        ));
    }
    match (l.history_versions, l.final_counter) {
        (Some(n), fc) => Rule {
            name,
            status: RuleStatus::Passed,
            message: format!(
                "{} acknowledged write(s), each in the counter's history ({n} versions) at its acknowledged revision; {}",
                l.acknowledged,
                match fc {
                    Some(fc) => format!("counter read back {fc}"),
                    None => format!(
                        "the counter itself could not be read back: {}",
                        l.final_counter_error.as_deref().unwrap_or("-")
                    ),
                }
            ),
        },
        (None, Some(fc)) => Rule {
            name,
            status: RuleStatus::Degraded,
            message: format!(
                "degraded: {} acknowledged write(s), none above the counter read back, {fc}; the history could not be read ({}), so only the tail was checked: a write lost below the last would not show",
                l.acknowledged,
                l.history_error.as_deref().unwrap_or("-")
            ),
        },
        (None, None) => unreachable!("handled above"),
    }
}

pub fn ledger_conflicts_rule(l: &Ledger) -> Rule {
    let name = "ledger-conflicts".to_string();
    if l.ledger_conflicts.is_empty() {
        return Rule {
            name,
            status: RuleStatus::Passed,
            message: format!(
                "{} acknowledged write(s), no value acknowledged with two resourceVersions",
                l.acknowledged
            ),
        };
    }
    let c: Vec<String> = l
        .ledger_conflicts
        .iter()
        .take(10)
        .map(|c| format!("{} at rv {:?}", c.value, c.rvs))
        .collect();
    Rule {
        name,
        status: RuleStatus::Failed,
        message: format!(
            "{} value(s) acknowledged twice with different resourceVersions (two writers won the same update): {}",
            l.ledger_conflicts.len(),
            c.join(", ")
        ),
    }
}

/// A write is compared with the writes acknowledged before it was sent (real
/// time order): with one sequential writer that is plain start order, and
/// concurrent writers in the two modes do not raise false alarms.
pub fn rv_regressions(all: &[&Record]) -> (Vec<RvRegression>, u64) {
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

pub fn rv_monotonic_rule(regressions: &[RvRegression], count: u64) -> Rule {
    let name = "rv-monotonic".to_string();
    if count == 0 {
        return Rule {
            name,
            status: RuleStatus::Passed,
            message: "acknowledged resourceVersions never went backwards".into(),
        };
    }
    let v: Vec<String> = regressions
        .iter()
        .map(|r| format!("rv {} after {} ({})", r.rv, r.previous_rv, r.mode))
        .collect();
    Rule {
        name,
        status: RuleStatus::Failed,
        message: format!(
            "{count} acknowledged write(s) with a resourceVersion lower than one acknowledged before: {}",
            fmt_list(&v, count)
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
        // ... unless the scenario accepts it, with why: then amber. The
        // history's absence degrades linearizability too, accepted alike.
        let mut c = Criteria::default();
        for rule in ["lost-writes", "linearizable"] {
            c.uncovered.insert(rule.into(), "etcd out of reach".into());
        }
        let v = judge(
            &Inputs {
                records: &recs,
                events: &[],
                final_read: &fin,
                elections: &[],
                plan: None,
                listeners_closed: &[],
                present: None,
                cpu: &[],
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
}
