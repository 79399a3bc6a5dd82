//! The `stale-reads` rule: reads are linearizable. A read of the counter
//! (get, and the reads the writer and the watches start from) that starts
//! after a write was acknowledged must return that write's value or a later
//! one, at its resourceVersion or a later one; a list that starts after a
//! write was acknowledged must return a list resourceVersion at least that
//! write's. Violations are counted per probe and mode.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ledger::acked_writes;
use super::{fmt_list, lane_key, push_capped, record_end, Rule, RuleStatus};
use crate::record::{Outcome, ProbeKind, Record};

/// A read that returned less than a write acknowledged before it started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StaleRead {
    /// `probe/mode`, with ` read` for the reads of the writer and watches.
    pub lane: String,
    pub at_unix_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub got_value: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub got_rv: Option<u64>,
    /// The newest write acknowledged before the read started.
    pub acked_value: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_rv: Option<u64>,
    pub acked_unix_ms: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StaleReads {
    /// Successful reads that had an acknowledged write before them.
    pub checked: u64,
    pub count: u64,
    /// Stale reads per lane.
    pub by_lane: BTreeMap<String, u64>,
    /// The first of them.
    pub reads: Vec<StaleRead>,
}

/// The reads this rule judges, and the lane each is reported under.
pub(crate) fn read_lane(r: &Record) -> Option<String> {
    let lane = lane_key(r.probe, r.mode);
    match (r.probe, r.event.as_deref()) {
        (ProbeKind::Get | ProbeKind::List, None) => Some(lane),
        (ProbeKind::Write | ProbeKind::Watch, Some("read")) => Some(format!("{lane} read")),
        _ => None,
    }
}

pub fn check(all: &[&Record]) -> StaleReads {
    let mut acked = acked_writes(all);
    acked.sort_by(|a, b| record_end(a).total_cmp(&record_end(b)));
    let mut reads: Vec<(&Record, String)> = all
        .iter()
        .copied()
        .filter(|r| r.outcome == Outcome::Ok)
        .filter_map(|r| read_lane(r).map(|l| (r, l)))
        .collect();
    reads.sort_by(|a, b| a.0.start_unix_ms.total_cmp(&b.0.start_unix_ms));
    let mut out = StaleReads::default();
    // The newest acknowledged write so far: (value, rv, acked at).
    let mut bar: Option<(u64, Option<u64>, f64)> = None;
    let mut j = 0;
    for (r, lane) in reads {
        while j < acked.len() && record_end(acked[j]) < r.start_unix_ms {
            let w = acked[j];
            let v = w.value.unwrap();
            if bar.is_none_or(|(bv, _, _)| v > bv) {
                bar = Some((v, w.rv, record_end(w)));
            }
            j += 1;
        }
        let Some((value, rv, at)) = bar else { continue };
        out.checked += 1;
        let value_behind = r.probe != ProbeKind::List && r.value.is_some_and(|v| v < value);
        let rv_behind = matches!((r.rv, rv), (Some(got), Some(want)) if got < want);
        if value_behind || rv_behind {
            *out.by_lane.entry(lane.clone()).or_default() += 1;
            push_capped(
                &mut out.reads,
                &mut out.count,
                StaleRead {
                    lane,
                    at_unix_ms: r.start_unix_ms,
                    got_value: r.value,
                    got_rv: r.rv,
                    acked_value: value,
                    acked_rv: rv,
                    acked_unix_ms: at,
                },
            );
        }
    }
    out
}

/// `ran`: the writer and a read probe were told to run.
pub fn rule(s: &StaleReads, ran: bool) -> Rule {
    let name = "stale-reads".to_string();
    if s.checked == 0 {
        return Rule::unchecked(
            name,
            ran,
            "no read followed an acknowledged write: linearizability not checked",
            "the write probe or the read probes (get, list) did not run",
        );
    }
    if s.count == 0 {
        return Rule {
            name,
            status: RuleStatus::Passed,
            message: format!(
                "{} read(s) after acknowledged writes, none behind them",
                s.checked
            ),
        };
    }
    let lanes: Vec<String> = s.by_lane.iter().map(|(l, n)| format!("{l}: {n}")).collect();
    let examples: Vec<String> = s
        .reads
        .iter()
        .take(5)
        .map(|r| {
            format!(
                "{} read {} (rv {}) after {} (rv {}) was acknowledged",
                r.lane,
                r.got_value.map_or("-".into(), |v| v.to_string()),
                r.got_rv.map_or("-".into(), |v| v.to_string()),
                r.acked_value,
                r.acked_rv.map_or("-".into(), |v| v.to_string()),
            )
        })
        .collect();
    Rule {
        name,
        status: RuleStatus::Failed,
        message: format!(
            "{} of {} read(s) returned less than a write acknowledged before they started ({}); e.g. {}",
            s.count,
            s.checked,
            lanes.join(", "),
            fmt_list(&examples, examples.len() as u64)
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
}
