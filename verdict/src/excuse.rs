//! Known hazards as budgets with evidence. A failed request is *excused*
//! only when the scenario accepts a hazard (`Criteria::excuse`), the
//! hazard's budget covers the request's lane, and evidence from outside
//! the probe's own error text ties the request to that hazard:
//!
//! - `move-leader`: the lab moved leadership (etcd MoveLeader; the
//!   migration's `moving leadership` and `leadership moved` notes in
//!   `events.ndjson` bound the move), the request is an update of the
//!   counter that started from one second before the move to 200 ms after
//!   it, and etcd's history of the counter (`final.json`, read from etcd
//!   after the run) shows its value never applied: every version of the
//!   counter in etcd that carries the value is the acknowledged revision
//!   of another write. Without a history there is no evidence.
//! - `killed-member`: the lab SIGKILLed an etcd member (`kill member` in
//!   `events.ndjson`), the request went to the API servers of the killed
//!   member's seed (which talk to their own seed's members: the killed
//!   member's API path), and it was in flight at the kill or started at
//!   most `KILL_GRACE_MS` after it.
//! - `leader-election`: the request overlaps an election the members' own
//!   logs show (see `election`).
//!
//! Hazards are tried in that order; the first with evidence and a budget
//! covering the lane excuses the request. A hazard is *over budget* when it
//! excused more requests than its `max`, or one that took longer than its
//! `max_ms`; then the verdict fails. Excused requests stay in every figure
//! (records are never rewritten); the verdict lists them beside the raw
//! figures.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::criteria::{Budget, Criteria, Hazard};
use crate::election::Election;
use crate::record::{FinalRead, LabEvent, ProbeKind, Record};
use crate::{lane_key, outcome_name, record_end, MAX_LISTED_ANOMALIES};

/// A move's window opens this long before its `moving leadership` note
/// (the write may reach the leader as the transfer starts) ...
pub const MOVE_LEAD_MS: f64 = 1_000.0;
/// ... and closes this long after `leadership moved`.
pub const MOVE_TAIL_MS: f64 = 200.0;
/// A request started this long after a kill may still go to the dead
/// member: its seed's API servers' etcd client has not dropped it yet.
pub const KILL_GRACE_MS: f64 = 1_000.0;

/// The name a kill event carries (`kill member <name>`); the lab's runner
/// writes it, with `seed=<seed>` in its detail.
pub const KILL_EVENT: &str = "kill member";
/// Marks a killed member that led the cluster.
pub const LEADER_MARK: &str = "(leader)";

/// When a hazard happened, and what shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HazardWindow {
    pub hazard: Hazard,
    pub start_unix_ms: f64,
    pub end_unix_ms: f64,
    /// What it was, and where that is written.
    pub what: String,
    /// killed-member: the killed member's seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
}

/// One excused request, with the evidence that matched it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Excused {
    pub seq: u64,
    pub lane: String,
    pub hazard: Hazard,
    pub start_unix_ms: f64,
    pub duration_ms: f64,
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub evidence: String,
}

/// A hazard the scenario accepts: its budget and what it excused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HazardSummary {
    pub hazard: Hazard,
    pub budget: Budget,
    /// Times it happened in the run (windows).
    pub happened: u64,
    pub excused: u64,
    /// The longest excused request, ms.
    pub longest_ms: f64,
    pub within_budget: bool,
}

impl HazardSummary {
    /// "excused 1, budget 1 request(s) of at most 7500 ms"
    pub fn budget_text(&self) -> String {
        format!(
            "budget {} request(s) of at most {:.0} ms on {}",
            self.budget.max,
            self.budget.max_ms,
            self.budget.lanes_for(self.hazard).join(", ")
        )
    }
}

/// Everything the excuses found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Excuses {
    /// Every excused request (the first `MAX_LISTED_ANOMALIES`), in start
    /// order.
    pub excused: Vec<Excused>,
    pub excused_count: u64,
    /// One per accepted hazard, in hazard order.
    pub hazards: Vec<HazardSummary>,
    /// Every hazard window of the run, accepted or not.
    pub windows: Vec<HazardWindow>,
}

impl Excuses {
    pub fn over_budget(&self) -> Vec<&HazardSummary> {
        self.hazards.iter().filter(|h| !h.within_budget).collect()
    }
}

/// The member a kill event names, and its seed (`seed=` in the detail;
/// else the member's name up to `-etcd-`, the lab's naming).
fn killed(e: &LabEvent) -> Option<(String, Option<String>)> {
    let rest = e.name.strip_prefix(KILL_EVENT)?.trim();
    let member = rest.split_whitespace().next()?.to_string();
    let seed = e
        .detail
        .split_whitespace()
        .find_map(|w| w.strip_prefix("seed="))
        .map(str::to_string)
        .or_else(|| member.split_once("-etcd-").map(|(s, _)| s.to_string()));
    Some((member, seed))
}

/// The hazard windows of a run: its leadership moves and kills (from the
/// lab's events) and its elections (from etcd's logs).
pub fn windows(events: &[LabEvent], elections: &[Election]) -> Vec<HazardWindow> {
    let mut out = Vec::new();
    let mut moving: Option<&LabEvent> = None;
    for e in events {
        if e.kind == "note" && e.name.starts_with("moving leadership") {
            moving = Some(e);
        }
        if e.kind == "note" && e.name.starts_with("leadership moved") {
            if let Some(s) = moving.take() {
                out.push(HazardWindow {
                    hazard: Hazard::MoveLeader,
                    start_unix_ms: s.at_unix_ms - MOVE_LEAD_MS,
                    end_unix_ms: e.at_unix_ms + MOVE_TAIL_MS,
                    what: format!("{} (events.ndjson)", s.name),
                    seed: None,
                });
            }
        }
        if e.kind == "fault" {
            if let Some((member, seed)) = killed(e) {
                out.push(HazardWindow {
                    hazard: Hazard::KilledMember,
                    start_unix_ms: e.at_unix_ms,
                    end_unix_ms: e.at_unix_ms + KILL_GRACE_MS,
                    what: format!("SIGKILL of {member} (events.ndjson)"),
                    seed,
                });
            }
        }
    }
    for el in elections {
        out.push(HazardWindow {
            hazard: Hazard::LeaderElection,
            start_unix_ms: el.start_unix_ms,
            end_unix_ms: el.end_unix_ms,
            what: format!(
                "{} of {} at term {}: {} (etcd logs)",
                if el.transfer {
                    "leadership transfer"
                } else {
                    "election"
                },
                el.leader,
                el.term,
                el.evidence
            ),
            seed: None,
        });
    }
    out.sort_by(|a, b| a.start_unix_ms.total_cmp(&b.start_unix_ms));
    out
}

/// Why a write's value never applied, from etcd's history: `None` when the
/// history is missing or holds a version of the value that no
/// acknowledged write accounts for.
fn never_applied(
    r: &Record,
    history: Option<&[crate::record::HistoryEntry]>,
    acked: &BTreeMap<u64, Vec<u64>>,
) -> Option<String> {
    let v = r.value?;
    let h = history?;
    let versions: Vec<u64> = h.iter().filter(|e| e.value == v).map(|e| e.rev).collect();
    let acked_revs = acked.get(&v).cloned().unwrap_or_default();
    if versions.iter().all(|rev| acked_revs.contains(rev)) {
        Some(if versions.is_empty() {
            format!(
                "value {v} is in none of the counter's {} versions in etcd (final.json)",
                h.len()
            )
        } else {
            format!(
                "value {v}'s only version(s) in etcd (rev {}) are another write's acknowledged revision (final.json)",
                versions
                    .iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    } else {
        None
    }
}

/// The evidence that `h` explains the failed request `r`, if any.
fn evidence(
    h: Hazard,
    r: &Record,
    windows: &[HazardWindow],
    fin: &FinalRead,
    acked: &BTreeMap<u64, Vec<u64>>,
) -> Option<String> {
    let t = r.start_unix_ms;
    let end = record_end(r);
    match h {
        Hazard::MoveLeader => {
            if r.probe != ProbeKind::Write || r.event.is_some() {
                return None;
            }
            let w = windows
                .iter()
                .find(|w| w.hazard == h && t >= w.start_unix_ms && t <= w.end_unix_ms)?;
            let why = never_applied(r, fin.history.as_deref(), acked)?;
            Some(format!(
                "started inside the leadership move `{}`; {why}",
                w.what
            ))
        }
        Hazard::KilledMember => {
            let seed = r.seed.as_deref()?;
            let w = windows.iter().find(|w| {
                w.hazard == h
                    && w.seed.as_deref() == Some(seed)
                    && t <= w.end_unix_ms
                    && end >= w.start_unix_ms
            })?;
            Some(format!(
                "through {seed}'s API servers, in flight at the {} or started within {KILL_GRACE_MS:.0} ms after it",
                w.what
            ))
        }
        Hazard::LeaderElection => {
            let w = windows
                .iter()
                .find(|w| w.hazard == h && t <= w.end_unix_ms && end >= w.start_unix_ms)?;
            Some(format!("overlaps the {}", w.what))
        }
    }
}

/// Which failed requests the accepted hazards excuse. `failed` are the
/// failed requests (in start order); `all` every record (for the acks).
pub fn excuse(
    failed: &[&Record],
    all: &[&Record],
    events: &[LabEvent],
    elections: &[Election],
    fin: &FinalRead,
    criteria: &Criteria,
) -> Excuses {
    let windows = windows(events, elections);
    let mut acked: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for w in crate::ledger::acked_writes(all) {
        if let (Some(v), Some(rv)) = (w.value, w.rv) {
            acked.entry(v).or_default().push(rv);
        }
    }
    let mut out = Excuses {
        windows,
        ..Excuses::default()
    };
    let mut per: BTreeMap<Hazard, (u64, f64)> = BTreeMap::new();
    for r in failed {
        let lane = lane_key(r.probe, r.mode);
        let found = criteria.excuse.iter().find_map(|(h, b)| {
            if !b.covers(*h, &lane) {
                return None;
            }
            evidence(*h, r, &out.windows, fin, &acked).map(|e| (*h, e))
        });
        let Some((hazard, evidence)) = found else {
            continue;
        };
        let e = per.entry(hazard).or_default();
        e.0 += 1;
        e.1 = e.1.max(r.duration_ms);
        out.excused_count += 1;
        if out.excused.len() < MAX_LISTED_ANOMALIES {
            out.excused.push(Excused {
                seq: r.seq,
                lane,
                hazard,
                start_unix_ms: r.start_unix_ms,
                duration_ms: r.duration_ms,
                outcome: if r.outcome == crate::record::Outcome::Ok {
                    "stall".into()
                } else {
                    outcome_name(r.outcome).into()
                },
                error: r.error.clone(),
                evidence,
            });
        }
    }
    for (h, b) in &criteria.excuse {
        let (n, longest) = per.get(h).copied().unwrap_or((0, 0.0));
        out.hazards.push(HazardSummary {
            hazard: *h,
            budget: b.clone(),
            happened: out.windows.iter().filter(|w| w.hazard == *h).count() as u64,
            excused: n,
            longest_ms: longest,
            within_budget: n <= b.max && longest <= b.max_ms,
        });
    }
    out
}

/// A record's seq and the hazard that excused it, for lookups.
pub fn excused_seqs(e: &Excuses) -> BTreeMap<u64, Hazard> {
    e.excused.iter().map(|x| (x.seq, x.hazard)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ConnMode, HistoryEntry, Outcome};
    use crate::testutil::{rec, T0};

    fn ev(kind: &str, name: &str, detail: &str, at: f64) -> LabEvent {
        LabEvent {
            at_unix_ms: T0 + at,
            end_unix_ms: None,
            kind: kind.into(),
            name: name.into(),
            detail: detail.into(),
        }
    }

    fn budget(max: u64, max_ms: f64, lanes: &[&str]) -> Budget {
        Budget {
            max,
            max_ms,
            lanes: lanes.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn criteria(h: &[(Hazard, Budget)]) -> Criteria {
        Criteria {
            excuse: h.iter().cloned().collect(),
            ..Criteria::default()
        }
    }

    fn failed_write(t: f64, d: f64, value: u64, seed: Option<&str>) -> Record {
        let mut r = rec(ProbeKind::Write, ConnMode::New, t, d, Outcome::Http);
        r.value = Some(value);
        r.seed = seed.map(str::to_string);
        r.error = Some("etcdserver: request timed out".into());
        r
    }

    fn acked(t: f64, value: u64, rv: u64) -> Record {
        let mut r = rec(ProbeKind::Write, ConnMode::Reused, t, 5.0, Outcome::Ok);
        r.value = Some(value);
        r.rv = Some(rv);
        r
    }

    fn history(v: &[(u64, u64)]) -> FinalRead {
        FinalRead {
            history: Some(
                v.iter()
                    .map(|(value, rev)| HistoryEntry {
                        value: *value,
                        rev: *rev,
                    })
                    .collect(),
            ),
            ..FinalRead::default()
        }
    }

    #[test]
    fn move_leader_needs_the_move_and_etcd_history_showing_the_value_never_applied() {
        let events = [
            ev("note", "moving leadership from a to b", "", 10_000.0),
            ev("note", "leadership moved from a to b", "", 10_500.0),
        ];
        let dropped = failed_write(10_200.0, 7_000.0, 11, Some("seed-a"));
        // The writer's retry applied 11 at rev 20 and was acknowledged.
        let retry = acked(17_300.0, 11, 20);
        let all = [&dropped, &retry];
        let c = criteria(&[(Hazard::MoveLeader, budget(1, 7_500.0, &[]))]);
        let x = excuse(
            &[&dropped],
            &all,
            &events,
            &[],
            &history(&[(10, 19), (11, 20)]),
            &c,
        );
        assert_eq!(x.excused_count, 1, "{x:#?}");
        assert!(x.excused[0]
            .evidence
            .contains("another write's acknowledged revision"));
        assert!(x.hazards[0].within_budget);
        // A version of 11 nobody acknowledged: it may be this write's.
        let x = excuse(
            &[&dropped],
            &all,
            &events,
            &[],
            &history(&[(10, 19), (11, 20), (11, 21)]),
            &c,
        );
        assert_eq!(x.excused_count, 0);
        // No history: no evidence.
        let x = excuse(&[&dropped], &all, &events, &[], &FinalRead::default(), &c);
        assert_eq!(x.excused_count, 0);
        // Outside the move, or not a write: not this hazard.
        let late = failed_write(11_000.0, 7_000.0, 12, Some("seed-a"));
        let mut read = rec(
            ProbeKind::Get,
            ConnMode::New,
            10_200.0,
            7_000.0,
            Outcome::Http,
        );
        read.value = Some(12);
        let x = excuse(
            &[&late, &read],
            &all,
            &events,
            &[],
            &history(&[(10, 19)]),
            &c,
        );
        assert_eq!(x.excused_count, 0);
        // Over budget: two excused, a budget of one.
        let second = failed_write(10_300.0, 7_000.0, 12, Some("seed-a"));
        let x = excuse(
            &[&dropped, &second],
            &all,
            &events,
            &[],
            &history(&[(10, 19), (11, 20)]),
            &c,
        );
        assert_eq!(x.excused_count, 2);
        assert!(!x.hazards[0].within_budget);
        // Or one that took longer than max_ms.
        let c = criteria(&[(Hazard::MoveLeader, budget(1, 5_000.0, &[]))]);
        let x = excuse(
            &[&dropped],
            &all,
            &events,
            &[],
            &history(&[(10, 19), (11, 20)]),
            &c,
        );
        assert!(!x.hazards[0].within_budget);
    }

    #[test]
    fn killed_member_only_through_its_seed_in_a_window_tied_to_the_kill() {
        let events = [ev(
            "fault",
            "kill member seed-a-etcd-1",
            "timeline seed=seed-a",
            50_000.0,
        )];
        let c = criteria(&[(Hazard::KilledMember, budget(2, 10_000.0, &[]))]);
        let in_flight = failed_write(49_900.0, 300.0, 5, Some("seed-a"));
        let other_seed = failed_write(49_900.0, 300.0, 6, Some("seed-b"));
        let no_seed = failed_write(49_900.0, 300.0, 7, None);
        let late = failed_write(51_100.0, 300.0, 8, Some("seed-a"));
        let just_after = failed_write(50_900.0, 300.0, 9, Some("seed-a"));
        let mut read = rec(
            ProbeKind::Get,
            ConnMode::New,
            49_900.0,
            300.0,
            Outcome::Reset,
        );
        read.seed = Some("seed-a".into());
        let failed = [&in_flight, &other_seed, &no_seed, &late, &just_after, &read];
        let x = excuse(&failed, &failed, &events, &[], &FinalRead::default(), &c);
        let values: Vec<u64> = x.excused.iter().map(|e| e.seq).collect();
        assert_eq!(x.excused_count, 2, "{x:#?}");
        assert_eq!(values.len(), 2);
        assert!(x.excused.iter().all(|e| e.lane.starts_with("write")));
        assert!(x.excused[0].evidence.contains("SIGKILL of seed-a-etcd-1"));
        // The seed from the member's name when the event does not say.
        let events = [ev(
            "fault",
            "kill member seed-a-etcd-1 (leader)",
            "timeline",
            50_000.0,
        )];
        let x = excuse(
            &[&in_flight],
            &[&in_flight],
            &events,
            &[],
            &FinalRead::default(),
            &c,
        );
        assert_eq!(x.excused_count, 1);
    }

    #[test]
    fn leader_election_only_in_the_logged_election_and_the_named_lanes() {
        let el = Election {
            term: 3,
            leader: "seed-a-etcd-1".into(),
            start_unix_ms: T0 + 48_000.0,
            end_unix_ms: T0 + 50_050.0,
            transfer: false,
            evidence: "seed-a-etcd-1: became leader at term 3".into(),
        };
        let c = criteria(&[(Hazard::LeaderElection, budget(5, 10_000.0, &["write"]))]);
        let during = failed_write(49_000.0, 1_500.0, 4, None);
        let after = failed_write(50_100.0, 100.0, 5, None);
        let read = rec(
            ProbeKind::Get,
            ConnMode::New,
            49_000.0,
            1_500.0,
            Outcome::Timeout,
        );
        let failed = [&during, &after, &read];
        let x = excuse(&failed, &failed, &[], &[el], &FinalRead::default(), &c);
        assert_eq!(x.excused_count, 1, "{x:#?}");
        assert_eq!(x.excused[0].lane, "write/new");
        assert!(x.excused[0].evidence.contains("etcd logs"));
        assert_eq!(x.hazards[0].happened, 1);
    }
}

/// The rule judged through the whole verdict (`compute`), on synthetic
/// runs (`testutil`).
#[cfg(test)]
mod judged {
    use crate::testutil::*;
    use crate::*;

    #[test]
    fn verdict_excused_within_budget_is_amber_over_budget_fails() {
        let events = leadership_move_events();
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
}
