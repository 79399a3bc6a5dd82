//! Leader elections as the etcd members' own logs tell them (`logs/` in the
//! run directory): the evidence the `leader-election` hazard needs, from
//! outside the probes.
//!
//! An *election* ends at the first line, in any member's log, saying
//! `<id> became leader at term N`. It begins at the first line after the
//! previous election's end that shows the cluster looking for a leader
//! (`is starting a new election`, `became pre-candidate`, `became
//! candidate`, `lost leader`, `starts to transfer leadership`):
//! - when that line is a leadership transfer (`starts to transfer
//!   leadership`), the election begins at it: the leader stops taking
//!   proposals then;
//! - otherwise a follower's election timeout ran out first, and the leader
//!   was last heard at most two election timeouts before it (raft draws
//!   each timeout from [T, 2T)), so the election begins 2T before that
//!   line. T is the `election-timeout` the members logged at their start
//!   (the largest), else etcd's default, 1 s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::etcd_said::{docker_time, member_names};

/// etcd's default election timeout (`--election-timeout`, 1000 ms).
pub const DEFAULT_ELECTION_TIMEOUT_MS: f64 = 1_000.0;

/// One election, from the members' logs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Election {
    pub term: u64,
    /// The member that became leader.
    pub leader: String,
    pub start_unix_ms: f64,
    pub end_unix_ms: f64,
    /// A leadership transfer (MoveLeader), not a timeout.
    pub transfer: bool,
    /// The log lines it was read from, in plain words.
    pub evidence: String,
}

const SIGNS: [&str; 5] = [
    "is starting a new election",
    "became pre-candidate",
    "became candidate",
    "lost leader",
    "starts to transfer leadership",
];

/// The `msg` of a zap JSON line.
fn msg(line: &str) -> Option<&str> {
    crate::etcd_said::field(line, "msg")
}

/// `1s`, `1.5s`, `500ms` as milliseconds.
fn go_duration_ms(s: &str) -> Option<f64> {
    if let Some(v) = s.strip_suffix("ms") {
        return v.parse().ok();
    }
    s.strip_suffix('s')?.parse::<f64>().ok().map(|v| v * 1e3)
}

/// The term in `... at term N`.
fn term_of(m: &str) -> Option<u64> {
    m.rsplit_once("at term ")?.1.trim().parse().ok()
}

/// Every election in the logs (file stem, text), in time order.
pub fn from_logs(logs: &[(String, String)]) -> Vec<Election> {
    let (names, member_of) = member_names(logs);
    let name_of = |id: &str| names.get(id).cloned().unwrap_or_else(|| id.to_string());
    let mut timeout_ms: Option<f64> = None;
    // (time, member, message)
    let mut lines: Vec<(f64, String, String)> = Vec::new();
    for ((_, text), member) in logs.iter().zip(&member_of) {
        for line in text.lines() {
            let Some(m) = msg(line) else { continue };
            if m == "starting an etcd server" {
                if let Some(t) =
                    crate::etcd_said::field(line, "election-timeout").and_then(go_duration_ms)
                {
                    timeout_ms = Some(timeout_ms.map_or(t, |x: f64| x.max(t)));
                }
                continue;
            }
            if !(m.contains("became leader at term") || SIGNS.iter().any(|s| m.contains(s))) {
                continue;
            }
            let Some(at) = line.split_once(' ').and_then(|(t, _)| docker_time(t)) else {
                continue;
            };
            lines.push((at, member.clone(), m.to_string()));
        }
    }
    lines.sort_by(|a, b| a.0.total_cmp(&b.0));
    let t = timeout_ms.unwrap_or(DEFAULT_ELECTION_TIMEOUT_MS);
    let mut out: Vec<Election> = Vec::new();
    let mut seen_terms: BTreeMap<u64, ()> = BTreeMap::new();
    // The first sign since the last election ended.
    let mut first: Option<&(f64, String, String)> = None;
    for l in &lines {
        let (at, member, m) = l;
        if m.contains("became leader at term") {
            let Some(term) = term_of(m) else { continue };
            if seen_terms.insert(term, ()).is_some() {
                continue;
            }
            let leader = m
                .split_whitespace()
                .next()
                .map(name_of)
                .unwrap_or_else(|| member.clone());
            let (start, transfer, sign) = match first.take() {
                Some((ft, fm, fmsg)) if fmsg.contains("starts to transfer leadership") => {
                    (*ft, true, format!("{fm}: {fmsg}"))
                }
                Some((ft, fm, fmsg)) => (ft - 2.0 * t, false, format!("{fm}: {fmsg}")),
                None => (at - 2.0 * t, false, "no earlier sign in the logs".into()),
            };
            out.push(Election {
                term,
                leader: leader.clone(),
                start_unix_ms: start.min(*at),
                end_unix_ms: *at,
                transfer,
                evidence: format!("{member}: {m}; first sign {sign}; election timeout {t:.0} ms"),
            });
        } else if first.is_none() {
            first = Some(l);
        }
    }
    out
}

/// The elections of a run directory (none without kept etcd logs).
pub fn read(run: &std::path::Path) -> Vec<Election> {
    from_logs(&crate::etcd_said::read_logs(run))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(t: &str, json: &str) -> String {
        format!("2026-11-22T16:39:{t}Z {json}\n")
    }

    #[test]
    fn an_election_after_a_timeout_begins_two_timeouts_before_its_first_sign() {
        let a = [
            line("00.000000000", r#"{"msg":"starting an etcd server","name":"seed-a-etcd-0","election-timeout":"1s"}"#),
            line("00.100000000", r#"{"msg":"x","local-member-id":"aa"}"#),
            line("01.000000000", r#"{"msg":"aa became leader at term 2"}"#),
        ]
        .concat();
        let b = [
            line("00.000000000", r#"{"msg":"starting an etcd server","name":"seed-a-etcd-1","election-timeout":"1s"}"#),
            line("00.100000000", r#"{"msg":"x","local-member-id":"bb"}"#),
            line("20.000000000", r#"{"msg":"bb is starting a new election at term 2"}"#),
            line("20.001000000", r#"{"msg":"bb became candidate at term 3"}"#),
            line("20.050000000", r#"{"msg":"bb became leader at term 3"}"#),
        ]
        .concat();
        let e = from_logs(&[("l-seed-a-etcd-0".into(), a), ("l-seed-a-etcd-1".into(), b)]);
        assert_eq!(e.len(), 2, "{e:#?}");
        let last = &e[1];
        assert_eq!(last.term, 3);
        assert_eq!(last.leader, "seed-a-etcd-1");
        assert!(!last.transfer);
        let t0 = docker_time("2026-11-22T16:39:20.000000000Z").unwrap();
        assert_eq!(last.start_unix_ms, t0 - 2_000.0);
        assert!((last.end_unix_ms - (t0 + 50.0)).abs() < 0.01);
        assert!(
            last.evidence.contains("is starting a new election"),
            "{}",
            last.evidence
        );
    }

    #[test]
    fn a_transfer_begins_at_the_transfer() {
        let a = [
            line("00.000000000", r#"{"msg":"starting an etcd server","name":"seed-a-etcd-0","election-timeout":"500ms"}"#),
            line("00.100000000", r#"{"msg":"x","local-member-id":"aa"}"#),
            line("01.000000000", r#"{"msg":"aa became leader at term 2"}"#),
            line("30.000000000", r#"{"msg":"aa [term 2] starts to transfer leadership to bb"}"#),
        ]
        .concat();
        let b = [
            line("00.100000000", r#"{"msg":"x","local-member-id":"bb"}"#),
            line(
                "30.010000000",
                r#"{"msg":"bb is starting a new election at term 2"}"#,
            ),
            line("30.020000000", r#"{"msg":"bb became leader at term 3"}"#),
            // The same line kept twice (a log kept before and after a
            // restart) is one election.
            line("30.020000000", r#"{"msg":"bb became leader at term 3"}"#),
        ]
        .concat();
        let e = from_logs(&[("seed-a-etcd-0".into(), a), ("seed-b-etcd-0".into(), b)]);
        assert_eq!(e.len(), 2, "{e:#?}");
        assert!(e[1].transfer);
        assert!((e[1].end_unix_ms - e[1].start_unix_ms - 20.0).abs() < 0.01);
        assert_eq!(go_duration_ms("1.5s"), Some(1500.0));
    }
}
