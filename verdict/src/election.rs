//! Leader elections as the etcd members' own logs tell them (`logs/` in the
//! run directory): the evidence the `leader-election` hazard needs, from
//! outside the probes; and the members' (re)starts, which confirm a
//! `killed-member` kill.
//!
//! An *election* ends at the first line, in any member's log, saying
//! `<id> became leader at term N`. It begins at the first line after the
//! previous election's end, and at most `SIGN_BOUND_TIMEOUTS` election
//! timeouts before its own end, that shows the cluster looking for a
//! leader (`is starting a new election`, `became pre-candidate`, `became
//! candidate`, `lost leader`, `starts to transfer leadership`); an older
//! sign is not this election's (a pre-vote that changed nothing, a
//! `lost leader` logged after the previous election) and opens nothing:
//! - when that line is a leadership transfer (`starts to transfer
//!   leadership`), the election begins at it: the leader stops taking
//!   proposals then;
//! - otherwise a follower's election timeout ran out first, and the leader
//!   was last heard at most two election timeouts before it (raft draws
//!   each timeout from [T, 2T)), so the election begins 2T before that
//!   line. T is the `election-timeout` the members logged at their start
//!   (the largest), else etcd's default, 1 s.
//!
//! What confirms a kill comes from the same logs: a member's *starts*
//! (`starting an etcd server`: its process started, and its log holds
//! nothing from it between its last earlier line, the old process's, and
//! the new process's own preamble), its log's *end* (its last line, and
//! when the log was kept), and its peers' *lost streams* with it (`lost
//! TCP streaming connection with remote peer`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::etcd_said::{docker_time, member_names};

/// etcd's default election timeout (`--election-timeout`, 1000 ms).
pub const DEFAULT_ELECTION_TIMEOUT_MS: f64 = 1_000.0;

/// An election's first sign is at most this many election timeouts (T)
/// before its leader change. The follower whose timeout runs out first
/// (within 2T of the leader's last heartbeat) starts the election and wins
/// it within a few round trips unless its pre-vote or vote fails; then it
/// tries again after another timeout, below 2T. A transfer is aborted after
/// T, and when it fails the followers' timeouts start an election within 2T
/// of the leader's last heartbeat: the lab's leader removals (etcd#8975)
/// show 0.9 to 1.6 s from `starts to transfer leadership` to the new
/// leader with T = 1 s. 3T holds an election and one failed try; a sign
/// older than that belongs to an attempt that changed nothing (a lagging
/// or cut-off member's pre-vote while the leader lived: 26.8 s earlier in
/// one run) and opens no window.
pub const SIGN_BOUND_TIMEOUTS: f64 = 3.0;

/// etcd logs its flags and listeners in the moments before `starting an
/// etcd server` (at most 0.6 s in the lab's kept runs): lines this close
/// before a start are the new process's preamble, not the old process's.
pub const START_PREAMBLE_MS: f64 = 2_000.0;

/// What a span of the members' logs shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shows {
    /// A follower's election timeout ran out; `member` became leader.
    #[default]
    Election,
    /// A leadership transfer (MoveLeader, or etcd handing over from a
    /// leader being removed); `member` became leader.
    Transfer,
    /// Not an election: `member`'s process started (`starting an etcd
    /// server`, at the span's end) and its log holds nothing from it since
    /// the span's start (its last earlier line; 0 when it holds none).
    Start,
    /// Not an election: `member`'s log ends; its last line at the span's
    /// start, the log kept at its end (`its log as kept at`; the last
    /// line's time when the log does not say).
    End,
    /// Not an election: another member lost its raft stream with
    /// `member` (`lost TCP streaming connection with remote peer`), at
    /// the span's start (= end).
    StreamLost,
}

/// One election, from the members' logs, or a fact of a member's life the
/// logs show (its starts, its log's end, a peer losing its stream with
/// it): what a kill's confirmation needs travels with the elections, as
/// both are what etcd's logs tell the hazards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Election {
    pub shows: Shows,
    /// The term it elected (0 when not an election).
    pub term: u64,
    /// The member that became leader; or whose life it shows.
    pub member: String,
    pub start_unix_ms: f64,
    pub end_unix_ms: f64,
    /// The log lines it was read from, in plain words.
    pub evidence: String,
}

impl Election {
    /// An election or a transfer (not a fact of a member's life).
    pub fn is_election(&self) -> bool {
        matches!(self.shows, Shows::Election | Shows::Transfer)
    }
}

const SIGNS: [&str; 5] = [
    "is starting a new election",
    "became pre-candidate",
    "became candidate",
    "lost leader",
    "starts to transfer leadership",
];

/// etcd's line at a process's start.
pub const START_LINE: &str = "starting an etcd server";
/// rafthttp's line when a stream with a peer breaks (`remote-peer-id`).
pub const STREAM_LOST: &str = "lost TCP streaming connection with remote peer";
/// The header the lab writes above each kept log section
/// (`=== <container>: its log as kept at <unix ms> (unix ms) ===`),
/// written by the probe crate's `container_logs`, read here.
pub const KEPT_AT: &str = ": its log as kept at ";

/// One member's log as its life shows it.
#[derive(Default)]
struct Life {
    /// Every line's time.
    all: Vec<f64>,
    /// Every start's time.
    starts: Vec<f64>,
    /// When the log was kept (the latest section's header).
    kept_at: Option<f64>,
}

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

/// Every election in the logs (file stem, text), in time order; then the
/// members' starts and ends, and the streams their peers lost with them.
pub fn from_logs(logs: &[(String, String)]) -> Vec<Election> {
    let (names, member_of) = member_names(logs);
    let name_of = |id: &str| names.get(id).cloned().unwrap_or_else(|| id.to_string());
    let mut timeout_ms: Option<f64> = None;
    // (time, member, message)
    let mut lines: Vec<(f64, String, String)> = Vec::new();
    // Per member: its log's life.
    let mut life: BTreeMap<&str, Life> = BTreeMap::new();
    // (time, the member that lost it, the peer, the error)
    let mut lost: Vec<(f64, String, String, String)> = Vec::new();
    for ((_, text), member) in logs.iter().zip(&member_of) {
        let l = life.entry(member.as_str()).or_default();
        for line in text.lines() {
            if let Some(k) = kept_at(line) {
                l.kept_at = Some(l.kept_at.map_or(k, |x: f64| x.max(k)));
                continue;
            }
            let at = line.split_once(' ').and_then(|(t, _)| docker_time(t));
            if let Some(at) = at {
                l.all.push(at);
            }
            let Some(m) = msg(line) else { continue };
            if m == START_LINE {
                l.starts.extend(at);
                if let Some(t) =
                    crate::etcd_said::field(line, "election-timeout").and_then(go_duration_ms)
                {
                    timeout_ms = Some(timeout_ms.map_or(t, |x: f64| x.max(t)));
                }
                continue;
            }
            if m.contains(STREAM_LOST) {
                if let (Some(at), Some(peer)) =
                    (at, crate::etcd_said::field(line, "remote-peer-id"))
                {
                    let error = crate::etcd_said::field(line, "error").unwrap_or("");
                    lost.push((at, member.clone(), name_of(peer), error.to_string()));
                }
                continue;
            }
            if !(m.contains("became leader at term") || SIGNS.iter().any(|s| m.contains(s))) {
                continue;
            }
            let Some(at) = at else { continue };
            lines.push((at, member.clone(), m.to_string()));
        }
    }
    lines.sort_by(|a, b| a.0.total_cmp(&b.0));
    let t = timeout_ms.unwrap_or(DEFAULT_ELECTION_TIMEOUT_MS);
    let mut out = elections(&lines, t, &name_of);
    out.extend(member_lives(&life));
    lost.sort_by(|a, b| a.0.total_cmp(&b.0));
    lost.dedup();
    out.extend(lost.into_iter().map(|(at, by, peer, error)| Election {
        shows: Shows::StreamLost,
        term: 0,
        evidence: format!("{by} lost its raft stream with {peer} ({error}) (etcd logs)"),
        member: peer,
        start_unix_ms: at,
        end_unix_ms: at,
    }));
    out
}

/// The time in the lab's header above a kept log section.
fn kept_at(line: &str) -> Option<f64> {
    let rest = line.strip_prefix("=== ")?;
    let (_, t) = rest.split_once(KEPT_AT)?;
    t.split_whitespace().next()?.parse().ok()
}

/// The elections in `lines` (time order), T = `t`.
fn elections(
    lines: &[(f64, String, String)],
    t: f64,
    name_of: &dyn Fn(&str) -> String,
) -> Vec<Election> {
    let bound = SIGN_BOUND_TIMEOUTS * t;
    let mut out: Vec<Election> = Vec::new();
    let mut seen_terms: BTreeMap<u64, ()> = BTreeMap::new();
    // The signs since the last election ended.
    let mut signs: Vec<&(f64, String, String)> = Vec::new();
    for l in lines {
        let (at, member, m) = l;
        if !m.contains("became leader at term") {
            signs.push(l);
            continue;
        }
        let Some(term) = term_of(m) else { continue };
        if seen_terms.insert(term, ()).is_some() {
            continue;
        }
        let leader = m
            .split_whitespace()
            .next()
            .map(name_of)
            .unwrap_or_else(|| member.clone());
        // This election's signs: none older than the bound.
        let older = signs.iter().filter(|s| s.0 < at - bound).count();
        let first = signs.iter().find(|s| s.0 >= at - bound);
        let (start, shows, sign) = match first {
            Some((ft, fm, fmsg)) if fmsg.contains("starts to transfer leadership") => {
                (*ft, Shows::Transfer, format!("{fm}: {fmsg}"))
            }
            Some((ft, fm, fmsg)) => (ft - 2.0 * t, Shows::Election, format!("{fm}: {fmsg}")),
            None => (
                at - 2.0 * t,
                Shows::Election,
                "none in the logs within the bound".into(),
            ),
        };
        let older = match (older, signs.first()) {
            (0, _) | (_, None) => String::new(),
            (n, Some(o)) => format!(
                " ({n} older sign(s), the first {:.1} s before, are not this election's)",
                (at - o.0) / 1e3
            ),
        };
        out.push(Election {
            shows,
            term,
            member: leader,
            start_unix_ms: start.min(*at),
            end_unix_ms: *at,
            evidence: format!(
                "{member}: {m}; first sign within {:.0} ms before it: {sign}{older}; election timeout {t:.0} ms",
                bound
            ),
        });
        signs.clear();
    }
    out
}

/// Every start of every member (the span from its log's last line before
/// the start's preamble, 0 when none, to the start line), and its log's
/// end.
fn member_lives(life: &BTreeMap<&str, Life>) -> Vec<Election> {
    let mut out = Vec::new();
    for (member, l) in life {
        let mut all = l.all.clone();
        all.sort_by(f64::total_cmp);
        let mut starts = l.starts.clone();
        starts.sort_by(f64::total_cmp);
        // A log kept twice holds the same start twice.
        starts.dedup();
        for s in starts {
            let before = all
                .iter()
                .rev()
                .find(|x| **x < s - START_PREAMBLE_MS)
                .copied();
            out.push(Election {
                shows: Shows::Start,
                term: 0,
                member: member.to_string(),
                start_unix_ms: before.unwrap_or(0.0),
                end_unix_ms: s,
                evidence: match before {
                    Some(b) => format!(
                        "{member}'s log: `{START_LINE}`, its last line before that {:.1} s earlier (etcd logs)",
                        (s - b) / 1e3
                    ),
                    None => format!(
                        "{member}'s log: `{START_LINE}`, nothing of it earlier (etcd logs)"
                    ),
                },
            });
        }
        if let Some(last) = all.last() {
            let kept = l.kept_at.unwrap_or(*last).max(*last);
            out.push(Election {
                shows: Shows::End,
                term: 0,
                member: member.to_string(),
                start_unix_ms: *last,
                end_unix_ms: kept,
                evidence: format!(
                    "{member}'s log ends {:.1} s before it was kept (etcd logs)",
                    (kept - last) / 1e3
                ),
            });
        }
    }
    out
}

/// The elections and members' lives of a run directory (none without
/// kept etcd logs).
pub fn read(run: &std::path::Path) -> Vec<Election> {
    from_logs(&crate::etcd_said::read_logs(run))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(t: &str, json: &str) -> String {
        format!("2026-11-22T16:39:{t}Z {json}\n")
    }

    /// seed-a-etcd-0 (`aa`, a 1 s election timeout) starts and leads
    /// from +1 s.
    fn first_leader_log() -> String {
        [
            line("00.000000000", r#"{"msg":"starting an etcd server","name":"seed-a-etcd-0","election-timeout":"1s"}"#),
            line("00.100000000", r#"{"msg":"x","local-member-id":"aa"}"#),
            line("01.000000000", r#"{"msg":"aa became leader at term 2"}"#),
        ]
        .concat()
    }

    fn only_elections(logs: &[(String, String)]) -> Vec<Election> {
        from_logs(logs)
            .into_iter()
            .filter(Election::is_election)
            .collect()
    }

    #[test]
    fn an_election_after_a_timeout_begins_two_timeouts_before_its_first_sign() {
        let a = first_leader_log();
        let b = [
            line("00.000000000", r#"{"msg":"starting an etcd server","name":"seed-a-etcd-1","election-timeout":"1s"}"#),
            line("00.100000000", r#"{"msg":"x","local-member-id":"bb"}"#),
            line("20.000000000", r#"{"msg":"bb is starting a new election at term 2"}"#),
            line("20.001000000", r#"{"msg":"bb became candidate at term 3"}"#),
            line("20.050000000", r#"{"msg":"bb became leader at term 3"}"#),
        ]
        .concat();
        let e = only_elections(&[("l-seed-a-etcd-0".into(), a), ("l-seed-a-etcd-1".into(), b)]);
        assert_eq!(e.len(), 2, "{e:#?}");
        let last = &e[1];
        assert_eq!(last.term, 3);
        assert_eq!(last.member, "seed-a-etcd-1");
        assert_eq!(last.shows, Shows::Election);
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
        let e = only_elections(&[("seed-a-etcd-0".into(), a), ("seed-b-etcd-0".into(), b)]);
        assert_eq!(e.len(), 2, "{e:#?}");
        assert_eq!(e[1].shows, Shows::Transfer);
        assert!((e[1].end_unix_ms - e[1].start_unix_ms - 20.0).abs() < 0.01);
        assert_eq!(go_duration_ms("1.5s"), Some(1500.0));
    }

    #[test]
    fn a_pre_vote_26_8_s_before_the_election_does_not_open_its_window() {
        let a = first_leader_log();
        // A lagging follower's pre-vote that changed nothing, then, 26.8 s
        // later, the election that did.
        let b = [
            line("00.000000000", r#"{"msg":"starting an etcd server","name":"seed-a-etcd-1","election-timeout":"1s"}"#),
            line("00.100000000", r#"{"msg":"x","local-member-id":"bb"}"#),
            line("10.000000000", r#"{"msg":"bb became pre-candidate at term 2"}"#),
            line("36.800000000", r#"{"msg":"bb became candidate at term 3"}"#),
            line("36.810000000", r#"{"msg":"bb became leader at term 3"}"#),
        ]
        .concat();
        let e = only_elections(&[
            ("seed-a-etcd-0".into(), a.clone()),
            ("seed-a-etcd-1".into(), b),
        ]);
        assert_eq!(e.len(), 2, "{e:#?}");
        let t = |s: &str| docker_time(&format!("2026-11-22T16:39:{s}Z")).unwrap();
        // It begins two timeouts before its own sign, not at the pre-vote.
        assert_eq!(e[1].start_unix_ms, t("36.800000000") - 2_000.0);
        assert!(
            e[1].evidence.contains("became candidate at term 3")
                && e[1]
                    .evidence
                    .contains("1 older sign(s), the first 26.8 s before"),
            "{}",
            e[1].evidence
        );
        // With only the old pre-vote: no sign of this election, the window
        // is the two timeouts before the leader change.
        let b = [
            line("00.000000000", r#"{"msg":"starting an etcd server","name":"seed-a-etcd-1","election-timeout":"1s"}"#),
            line("00.100000000", r#"{"msg":"x","local-member-id":"bb"}"#),
            line("10.000000000", r#"{"msg":"bb became pre-candidate at term 2"}"#),
            line("36.810000000", r#"{"msg":"bb became leader at term 3"}"#),
        ]
        .concat();
        let e = only_elections(&[("seed-a-etcd-0".into(), a), ("seed-a-etcd-1".into(), b)]);
        assert_eq!(e[1].start_unix_ms, t("36.810000000") - 2_000.0);
        assert!(
            e[1].evidence.contains("none in the logs within the bound"),
            "{}",
            e[1].evidence
        );
    }

    #[test]
    fn a_member_s_starts_span_from_its_old_process_s_last_line() {
        let a = [
            line(
                "00.000000000",
                r#"{"msg":"starting an etcd server","name":"seed-a-etcd-1"}"#,
            ),
            line("05.000000000", r#"{"msg":"x","local-member-id":"aa"}"#),
            // Killed at ~10 s; started again: its preamble, then the start.
            line("12.000000000", r#"{"msg":"configuring peer listeners"}"#),
            line(
                "12.010000000",
                r#"{"msg":"starting an etcd server","name":"seed-a-etcd-1"}"#,
            ),
        ]
        .concat();
        let s: Vec<Election> = from_logs(&[("lab-seed-a-etcd-1".into(), a)])
            .into_iter()
            .filter(|e| e.shows == Shows::Start)
            .collect();
        assert_eq!(s.len(), 2, "{s:#?}");
        let t = |x: &str| docker_time(&format!("2026-11-22T16:39:{x}Z")).unwrap();
        assert_eq!(
            (s[0].start_unix_ms, s[0].end_unix_ms),
            (0.0, t("00.000000000"))
        );
        assert_eq!(s[1].member, "seed-a-etcd-1");
        assert_eq!(
            (s[1].start_unix_ms, s[1].end_unix_ms),
            (t("05.000000000"), t("12.010000000"))
        );
        assert!(s[1].evidence.contains("7.0 s earlier"), "{}", s[1].evidence);
    }

    #[test]
    fn a_log_s_end_and_the_streams_peers_lost_with_a_member() {
        let a = [
            "=== lab-seed-a-etcd-0: its log as kept at 1795365600000 (unix ms) ===\n".to_string(),
            line("00.000000000", r#"{"msg":"starting an etcd server","name":"seed-a-etcd-0"}"#),
            line("00.100000000", r#"{"msg":"x","local-member-id":"aa"}"#),
            line("10.000000000", r#"{"msg":"lost TCP streaming connection with remote peer","local-member-id":"aa","remote-peer-id":"bb","error":"EOF"}"#),
        ]
        .concat();
        let b = [
            line(
                "00.000000000",
                r#"{"msg":"starting an etcd server","name":"seed-a-etcd-1"}"#,
            ),
            line("00.100000000", r#"{"msg":"x","local-member-id":"bb"}"#),
        ]
        .concat();
        let e = from_logs(&[
            ("lab-seed-a-etcd-0".into(), a),
            ("lab-seed-a-etcd-1".into(), b),
        ]);
        let t = |x: &str| docker_time(&format!("2026-11-22T16:39:{x}Z")).unwrap();
        let lost: Vec<&Election> = e.iter().filter(|x| x.shows == Shows::StreamLost).collect();
        assert_eq!(lost.len(), 1, "{e:#?}");
        assert_eq!(lost[0].member, "seed-a-etcd-1");
        assert_eq!(lost[0].start_unix_ms, t("10.000000000"));
        assert!(lost[0]
            .evidence
            .contains("seed-a-etcd-0 lost its raft stream with seed-a-etcd-1 (EOF)"));
        let ends: Vec<&Election> = e.iter().filter(|x| x.shows == Shows::End).collect();
        assert_eq!(ends.len(), 2);
        assert_eq!(
            (ends[0].member.as_str(), ends[0].start_unix_ms),
            ("seed-a-etcd-0", t("10.000000000"))
        );
        assert_eq!(ends[0].end_unix_ms, 1_795_365_600_000.0);
        // Without a header: kept at its last line.
        assert_eq!(ends[1].start_unix_ms, ends[1].end_unix_ms);
    }
}
