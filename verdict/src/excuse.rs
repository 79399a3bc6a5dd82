//! Known hazards as budgets with evidence. A failed request is *excused*
//! only when the scenario accepts a hazard (`Criteria::excuse`), the
//! hazard's budget covers the request's lane, the request failed as that
//! hazard fails requests (its *class*, from what the record carries:
//! `outcome`, `http_status`, `error`; see `FailureClass` and `classes`),
//! and evidence from outside the probe ties the request to that hazard:
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
//!   `events.ndjson`) and the kill is confirmed: the member's own log shows
//!   its process started again after it with nothing from it in between
//!   (`election::Shows::Start`), or `events.ndjson` notes its container
//!   started again (`kubelet: <container> started again`), within
//!   `KILL_RESTART_MS`; or its peers' logs show their raft streams with it
//!   lost within `KILL_PEER_MS` after it while its own log, if kept, has
//!   nothing from it after the kill. A kill event alone excuses nothing;
//!   its hazard summary says why. The request went to the API servers of the killed
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
use crate::election::{Election, Shows};
use crate::record::{FinalRead, LabEvent, Outcome, ProbeKind, Record};
use crate::{lane_key, outcome_name, record_end, MAX_LISTED_ANOMALIES};

/// A move's window opens this long before its `moving leadership` note
/// (the write may reach the leader as the transfer starts) ...
pub const MOVE_LEAD_MS: f64 = 1_000.0;
/// ... and closes this long after `leadership moved`.
pub const MOVE_TAIL_MS: f64 = 200.0;
/// A request started this long after a kill may still go to the dead
/// member: its seed's API servers' etcd client has not dropped it yet.
pub const KILL_GRACE_MS: f64 = 1_000.0;
/// A kill is confirmed by its member starting again at most this long
/// after it: a kubelet (the lab's own in the docker form, the real one in
/// kind) starts a stopped container again once it has seen it stopped,
/// after its back-off, which grows to at most 5 min (k8s.io/kubernetes
/// `MaxContainerBackOff`; `runner::kubelet::BACKOFF_MAX`), plus its two
/// looks 1 s apart.
pub const KILL_RESTART_MS: f64 = 302_000.0;

/// A kill is confirmed by its peers losing their raft streams with the
/// member at most this long after the kill's stamp: the lab stamps a kill
/// just before it sends the signal, a SIGKILLed process's sockets close
/// with it, and its peers read EOF at once (rafthttp logs the lost stream
/// within milliseconds); the rest is room for a slow signal call.
pub const KILL_PEER_MS: f64 = 2_000.0;

/// The name a kill event carries (`kill member <name>`); the lab's runner
/// writes it, with `seed=<seed>` in its detail.
pub const KILL_EVENT: &str = "kill member";
/// Marks a killed member that led the cluster.
pub const LEADER_MARK: &str = "(leader)";
/// The docker form's kubelet notes a container it started again:
/// `kubelet: <container> started again (restart N, after S s)`.
pub const KUBELET_NOTE: &str = "kubelet: ";
const STARTED_AGAIN: &str = "started again";

/// etcd's errors for a lost or changing leader, as kube-apiserver relays
/// them (HTTP 500, or 504 when its own etcd client gave up: `context
/// deadline exceeded`; the lab's stand-in API server relays them as 503,
/// `etcd: <error>`). `etcdserver: request timed out` covers etcd's `...,
/// possibly due to previous leader failure` and `..., possibly due to
/// connection lost`.
pub const ETCD_TEXTS: [&str; 4] = [
    "etcdserver: leader changed",
    "etcdserver: no leader",
    "etcdserver: request timed out",
    "context deadline exceeded",
];
/// What an API server says when its etcd client lost the member it talked
/// to (gRPC `Unavailable`): kube-apiserver's 500 `rpc error: code =
/// Unavailable desc = error reading from server: EOF` (or `transport is
/// closing`), the stand-in's 503 `etcd: ... status: Unavailable ...`.
pub const ETCD_CLIENT_LOST: [&str; 4] = [
    "code = Unavailable",
    "status: Unavailable",
    "error reading from server",
    "transport is closing",
];
/// What the gateway (Envoy) says when it, not etcd, failed the request: no
/// endpoint in its cluster, no connection to one, no route (404), its own
/// route timeout. A record saying one of these is in no class: no hazard
/// excuses it, whatever it overlaps; nor a 404 or a DNS failure.
pub const GATEWAY_TEXTS: [&str; 4] = [
    "no healthy upstream",
    "upstream connect error",
    "route not found",
    "upstream request timeout",
];

/// How a request failed, as far as the hazards care: read from what the
/// record carries (`outcome`, `http_status`, `error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureClass {
    /// kube-apiserver's HTTP 500 or 504 (the stand-in's 503) with etcd's
    /// error (`ETCD_TEXTS`).
    EtcdError,
    /// readyz's HTTP 500 with only its etcd checks failed (`[-]etcd
    /// failed`, `[-]etcd-readiness failed`).
    EtcdReadiness,
    /// The client gave up (outcome `timeout`); the hazard asks that it was
    /// in flight in its window.
    ClientTimeout,
    /// Answered, but only after the stall bound; in flight in the window.
    Stall,
    /// Failed at a connection: the probe's, without an answer (refused,
    /// reset, closed), or the API server's to its etcd member (HTTP 500 or
    /// 503 with `ETCD_CLIENT_LOST`). Excused only for writes, only as
    /// `killed-member`.
    Connection,
}

/// The classes of failure each hazard may excuse: those its mechanism
/// produces. A MoveLeader drops a proposal (the write waits out etcd's
/// request timeout, or the client's); an election leaves proposals and
/// etcd's health checks without a leader; a killed member breaks its API
/// servers' etcd connections as well (the failures of a write at the
/// connection were excused for it before classes, and are still).
pub fn classes(h: Hazard) -> &'static [FailureClass] {
    use FailureClass::*;
    match h {
        Hazard::MoveLeader => &[EtcdError, ClientTimeout],
        Hazard::KilledMember => &[EtcdError, EtcdReadiness, ClientTimeout, Stall, Connection],
        Hazard::LeaderElection => &[EtcdError, EtcdReadiness, ClientTimeout, Stall],
    }
}

/// The gateway's own failures, a 404 (no route) and DNS failures: no
/// hazard's.
fn not_etcd(r: &Record) -> bool {
    let err = r.error.as_deref().unwrap_or("");
    r.outcome == Outcome::Dns
        || r.http_status == Some(404)
        || GATEWAY_TEXTS.iter().any(|g| err.contains(g))
}

/// A failed request's class; `None`: no hazard's (a gateway's answer, a
/// 404, DNS, TLS, a body that does not parse, an HTTP error without
/// etcd's words).
pub fn class_of(r: &Record) -> Option<FailureClass> {
    if not_etcd(r) {
        return None;
    }
    let err = r.error.as_deref().unwrap_or("");
    match r.outcome {
        // A failed request answered OK: a stall.
        Outcome::Ok => Some(FailureClass::Stall),
        Outcome::Timeout => Some(FailureClass::ClientTimeout),
        Outcome::Http => match r.http_status {
            Some(500 | 503 | 504) if ETCD_TEXTS.iter().any(|t| err.contains(t)) => {
                Some(FailureClass::EtcdError)
            }
            Some(500)
                if r.probe == ProbeKind::Readyz
                    && crate::drained_readyz::only_etcd_checks_failed(err) =>
            {
                Some(FailureClass::EtcdReadiness)
            }
            Some(500 | 503) if ETCD_CLIENT_LOST.iter().any(|t| err.contains(t)) => {
                Some(FailureClass::Connection)
            }
            _ => None,
        },
        Outcome::Refused | Outcome::Reset => Some(FailureClass::Connection),
        Outcome::Error if r.http_status.is_none() => Some(FailureClass::Connection),
        _ => None,
    }
}

/// A record's class if hazard `h` may excuse it.
fn excusable(h: Hazard, r: &Record) -> Option<FailureClass> {
    let c = class_of(r)?;
    if !classes(h).contains(&c) {
        return None;
    }
    if c == FailureClass::Connection && r.probe != ProbeKind::Write {
        return None;
    }
    Some(c)
}

fn short(s: &str) -> String {
    const MAX: usize = 160;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(MAX).collect::<String>())
    }
}

/// The class's evidence in the record, in plain words.
fn class_evidence(c: FailureClass, r: &Record) -> String {
    let err = short(r.error.as_deref().unwrap_or(""));
    let status = r.http_status.map(|s| s.to_string()).unwrap_or_default();
    match c {
        FailureClass::EtcdError => format!("HTTP {status} \"{err}\": etcd's error"),
        FailureClass::EtcdReadiness => {
            format!("readyz HTTP {status} with only etcd's checks failed ({err})")
        }
        FailureClass::ClientTimeout => {
            format!("the client gave up after {:.0} ms", r.duration_ms)
        }
        FailureClass::Stall => format!("answered only after {:.0} ms", r.duration_ms),
        FailureClass::Connection => match r.http_status {
            Some(s) => format!("HTTP {s} \"{err}\": the API server's etcd client lost its member"),
            None => format!(
                "a write failed at the connection ({}: {err})",
                outcome_name(r.outcome)
            ),
        },
    }
}

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
    /// Why nothing confirms it (a kill event without its member's log or
    /// container showing it): such a window excuses nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconfirmed: Option<String>,
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
    /// Its failure class (absent in verdicts made before classes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<FailureClass>,
    pub evidence: String,
}

/// A hazard the scenario accepts: its budget and what it excused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HazardSummary {
    pub hazard: Hazard,
    pub budget: Budget,
    /// Times it happened in the run (confirmed windows).
    pub happened: u64,
    pub excused: u64,
    /// The longest excused request, ms.
    pub longest_ms: f64,
    pub within_budget: bool,
    /// Its windows nothing confirms, each with why: they excuse nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unconfirmed: Vec<String>,
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

/// Whether a container's name is the member's (`<lab>-<member>`).
fn container_of(container: &str, member: &str) -> bool {
    container == member
        || container
            .strip_suffix(member)
            .is_some_and(|p| p.ends_with('-'))
}

/// What confirms a kill of `member` (event `kill`), or why nothing does:
/// its own log shows etcd starting again after it with nothing from the
/// killed process in between; or events.ndjson notes its container
/// started again; or its peers' logs show them losing their raft streams
/// with it at the kill while its own log (if kept) shows nothing from it
/// after the kill.
fn confirm_kill(
    kill: &LabEvent,
    member: &str,
    events: &[LabEvent],
    logs: &[Election],
) -> Result<String, String> {
    let at = kill.at_unix_ms;
    let life: Vec<&Election> = logs
        .iter()
        .filter(|s| s.member == member && matches!(s.shows, Shows::Start | Shows::End))
        .collect();
    let starts = || life.iter().filter(|s| s.shows == Shows::Start);
    if let Some(s) = starts().find(|s| {
        s.start_unix_ms <= at && s.end_unix_ms > at && s.end_unix_ms - at <= KILL_RESTART_MS
    }) {
        return Ok(format!(
            "its process started again {:.1} s later, nothing from it in between ({})",
            (s.end_unix_ms - at) / 1e3,
            s.evidence
        ));
    }
    if let Some(n) = events.iter().find(|e| {
        e.kind == "note"
            && e.at_unix_ms > at
            && e.at_unix_ms - at <= KILL_RESTART_MS
            && e.name.strip_prefix(KUBELET_NOTE).is_some_and(|rest| {
                rest.split_once(' ').is_some_and(|(c, tail)| {
                    container_of(c, member) && tail.starts_with(STARTED_AGAIN)
                })
            })
    }) {
        return Ok(format!(
            "its container started again {:.1} s later (`{}`, events.ndjson)",
            (n.at_unix_ms - at) / 1e3,
            n.name
        ));
    }
    // Its own log: silent from the kill on (until a start, or to its end)?
    let silent = life.iter().any(|s| match s.shows {
        Shows::Start => s.start_unix_ms <= at && s.end_unix_ms > at,
        _ => s.start_unix_ms <= at,
    });
    let lost: Vec<&Election> = logs
        .iter()
        .filter(|s| {
            s.shows == Shows::StreamLost
                && s.member == member
                && s.start_unix_ms >= at
                && s.start_unix_ms - at <= KILL_PEER_MS
        })
        .collect();
    if let Some(first) = lost.first() {
        if silent || life.is_empty() {
            return Ok(format!(
                "its peers lost their raft streams with it {:.1} s later ({} line(s), the first: {}), {}",
                (first.start_unix_ms - at) / 1e3,
                lost.len(),
                first.evidence,
                if life.is_empty() {
                    "its own log not kept"
                } else {
                    "its own log has nothing from it after the kill"
                }
            ));
        }
    }
    let log = if life.is_empty() {
        format!("no log of {member} is kept")
    } else if !silent {
        format!("{member}'s log goes on after it (the process lived)")
    } else {
        format!(
            "{member}'s log shows no start of etcd within {:.0} s after it",
            KILL_RESTART_MS / 1e3
        )
    };
    let peers = if lost.is_empty() {
        format!(
            "no peer's log shows its raft stream with {member} lost within {:.0} s after it",
            KILL_PEER_MS / 1e3
        )
    } else {
        "its peers' lost streams do not count while it logs on".to_string()
    };
    Err(format!(
        "`{}` is not confirmed: {log}; {peers}; events.ndjson notes no start of its container after it. A kill event alone excuses nothing",
        kill.name
    ))
}

/// The hazard windows of a run: its leadership moves and kills (from the
/// lab's events; a kill confirmed by its member's log or its container's
/// restart, else marked unconfirmed) and its elections (from etcd's logs).
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
                    unconfirmed: None,
                });
            }
        }
        if e.kind == "fault" {
            if let Some((member, seed)) = killed(e) {
                let confirmed = confirm_kill(e, &member, events, elections);
                out.push(HazardWindow {
                    hazard: Hazard::KilledMember,
                    start_unix_ms: e.at_unix_ms,
                    end_unix_ms: e.at_unix_ms + KILL_GRACE_MS,
                    what: match &confirmed {
                        Ok(c) => format!("SIGKILL of {member} (events.ndjson), confirmed: {c}"),
                        Err(_) => format!("SIGKILL of {member} (events.ndjson), NOT confirmed"),
                    },
                    seed,
                    unconfirmed: confirmed.err(),
                });
            }
        }
    }
    for el in elections.iter().filter(|e| e.is_election()) {
        out.push(HazardWindow {
            hazard: Hazard::LeaderElection,
            start_unix_ms: el.start_unix_ms,
            end_unix_ms: el.end_unix_ms,
            what: format!(
                "{} of {} at term {}: {} (etcd logs)",
                if el.shows == Shows::Transfer {
                    "leadership transfer"
                } else {
                    "election"
                },
                el.member,
                el.term,
                el.evidence
            ),
            seed: None,
            unconfirmed: None,
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

/// The evidence that `h` explains the failed request `r`, if any: its
/// class, and what ties it to the hazard.
fn evidence(
    h: Hazard,
    r: &Record,
    windows: &[HazardWindow],
    fin: &FinalRead,
    acked: &BTreeMap<u64, Vec<u64>>,
) -> Option<(FailureClass, String)> {
    let class = excusable(h, r)?;
    let t = r.start_unix_ms;
    let end = record_end(r);
    let mut ours = windows
        .iter()
        .filter(|w| w.hazard == h && w.unconfirmed.is_none());
    let why = match h {
        Hazard::MoveLeader => {
            if r.probe != ProbeKind::Write || r.event.is_some() {
                return None;
            }
            let w = ours.find(|w| t >= w.start_unix_ms && t <= w.end_unix_ms)?;
            let why = never_applied(r, fin.history.as_deref(), acked)?;
            format!("started inside the leadership move `{}`; {why}", w.what)
        }
        Hazard::KilledMember => {
            let seed = r.seed.as_deref()?;
            let w = ours.find(|w| {
                w.seed.as_deref() == Some(seed) && t <= w.end_unix_ms && end >= w.start_unix_ms
            })?;
            format!(
                "through {seed}'s API servers, in flight at the {} or started within {KILL_GRACE_MS:.0} ms after it",
                w.what
            )
        }
        Hazard::LeaderElection => {
            let w = ours.find(|w| t <= w.end_unix_ms && end >= w.start_unix_ms)?;
            format!("in flight in the {}", w.what)
        }
    };
    Some((class, format!("{}; {why}", class_evidence(class, r))))
}

/// Which failed requests the accepted hazards excuse. `failed` are the
/// failed requests (in start order); `all` every record (for the acks);
/// `elections` the elections and members' starts from etcd's logs.
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
        let Some((hazard, (class, evidence))) = found else {
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
                outcome: if r.outcome == Outcome::Ok {
                    "stall".into()
                } else {
                    outcome_name(r.outcome).into()
                },
                error: r.error.clone(),
                class: Some(class),
                evidence,
            });
        }
    }
    for (h, b) in &criteria.excuse {
        let (n, longest) = per.get(h).copied().unwrap_or((0, 0.0));
        let ours = || out.windows.iter().filter(|w| w.hazard == *h);
        out.hazards.push(HazardSummary {
            hazard: *h,
            budget: b.clone(),
            happened: ours().filter(|w| w.unconfirmed.is_none()).count() as u64,
            excused: n,
            longest_ms: longest,
            within_budget: n <= b.max && longest <= b.max_ms,
            unconfirmed: ours().filter_map(|w| w.unconfirmed.clone()).collect(),
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
            status: None,
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
        r.http_status = Some(500);
        r.error = Some("etcdserver: request timed out".into());
        r
    }

    /// An election of `member` at term 3, from `from` to `to` ms.
    fn election(from: f64, to: f64) -> Election {
        Election {
            shows: Shows::Election,
            term: 3,
            member: "seed-a-etcd-1".into(),
            start_unix_ms: T0 + from,
            end_unix_ms: T0 + to,
            evidence: "seed-a-etcd-1: became leader at term 3".into(),
        }
    }

    /// `member`'s log: its last line at `last`, etcd started again at
    /// `start` (ms).
    fn started(member: &str, last: f64, start: f64) -> Election {
        Election {
            shows: Shows::Start,
            term: 0,
            member: member.into(),
            start_unix_ms: T0 + last,
            end_unix_ms: T0 + start,
            evidence: format!("{member}'s log: `starting an etcd server` (etcd logs)"),
        }
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
        // Its log shows it started again 2 s later.
        let log = [started("seed-a-etcd-1", 49_000.0, 52_000.0)];
        let x = excuse(&failed, &failed, &events, &log, &FinalRead::default(), &c);
        let values: Vec<u64> = x.excused.iter().map(|e| e.seq).collect();
        assert_eq!(x.excused_count, 2, "{x:#?}");
        assert_eq!(values.len(), 2);
        assert!(x.excused.iter().all(|e| e.lane.starts_with("write")));
        assert!(x.excused[0].evidence.contains("SIGKILL of seed-a-etcd-1"));
        assert!(
            x.excused[0].evidence.contains("started again 2.0 s later"),
            "{}",
            x.excused[0].evidence
        );
        assert_eq!(x.excused[0].class, Some(FailureClass::EtcdError));
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
            &log,
            &FinalRead::default(),
            &c,
        );
        assert_eq!(x.excused_count, 1);
    }

    #[test]
    fn leader_election_only_in_the_logged_election_and_the_named_lanes() {
        let el = election(48_000.0, 50_050.0);
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

    /// A failed request of `probe` with what it carried.
    fn failed(
        probe: ProbeKind,
        outcome: Outcome,
        status: Option<u16>,
        error: &str,
        t: f64,
        d: f64,
    ) -> Record {
        let mut r = rec(probe, ConnMode::Reused, t, d, outcome);
        r.http_status = status;
        r.error = (!error.is_empty()).then(|| error.to_string());
        r.seed = Some("seed-a".into());
        r
    }

    #[test]
    fn a_gateways_503_in_an_election_is_not_excused_etcds_leader_changed_is() {
        let el = election(48_000.0, 50_050.0);
        let c = criteria(&[(
            Hazard::LeaderElection,
            budget(10, 10_000.0, &["write", "readyz", "get"]),
        )]);
        let w = ProbeKind::Write;
        // Envoy's answer when its cluster has no endpoint, at the very
        // moment of the election: the gateway's, not etcd's.
        let no_upstream = failed(
            w,
            Outcome::Http,
            Some(503),
            "no healthy upstream",
            49_000.0,
            3.0,
        );
        let connect = failed(
            w,
            Outcome::Http,
            Some(503),
            "upstream connect error or disconnect/reset before headers. reset reason: connection failure",
            49_000.0,
            3.0,
        );
        let no_route = failed(ProbeKind::Get, Outcome::Http, Some(404), "", 49_000.0, 3.0);
        let dns = failed(
            w,
            Outcome::Dns,
            None,
            "no record for the name",
            49_000.0,
            3.0,
        );
        // A 503 without words: no class either.
        let bare_503 = failed(w, Outcome::Http, Some(503), "", 49_000.0, 3.0);
        // A write at the connection: only a killed member's.
        let reset = failed(w, Outcome::Reset, None, "connection reset", 49_000.0, 3.0);
        let changed = failed(
            w,
            Outcome::Http,
            Some(500),
            "etcdserver: leader changed",
            49_500.0,
            40.0,
        );
        let fs = [
            &no_upstream,
            &connect,
            &no_route,
            &dns,
            &bare_503,
            &reset,
            &changed,
        ];
        let x = excuse(
            &fs,
            &fs,
            &[],
            std::slice::from_ref(&el),
            &FinalRead::default(),
            &c,
        );
        assert_eq!(x.excused_count, 1, "{x:#?}");
        let e = &x.excused[0];
        assert_eq!(e.seq, changed.seq);
        assert_eq!(e.class, Some(FailureClass::EtcdError));
        assert!(
            e.evidence
                .contains("HTTP 500 \"etcdserver: leader changed\": etcd's error")
                && e.evidence.contains("election of seed-a-etcd-1 at term 3"),
            "{}",
            e.evidence
        );
        for r in [&no_upstream, &connect, &no_route, &dns, &bare_503] {
            assert_eq!(class_of(r), None, "{r:?}");
        }
        // The others etcd and the API server say for it, and the client's
        // own timeout or a stall while in flight.
        let fs: Vec<Record> = vec![
            failed(w, Outcome::Http, Some(500), "etcdserver: no leader", 49_000.0, 3.0),
            failed(
                w,
                Outcome::Http,
                Some(500),
                "etcdserver: request timed out, possibly due to previous leader failure",
                43_000.0,
                7_000.0,
            ),
            failed(
                w,
                Outcome::Http,
                Some(504),
                "Timeout: request did not complete within requested timeout - context deadline exceeded",
                45_000.0,
                4_000.0,
            ),
            failed(
                ProbeKind::Readyz,
                Outcome::Http,
                Some(500),
                "[-]etcd failed: reason withheld; [-]etcd-readiness failed: reason withheld",
                49_000.0,
                3.0,
            ),
            failed(w, Outcome::Timeout, None, "timed out", 40_000.0, 10_000.0),
            failed(w, Outcome::Ok, Some(200), "", 47_000.0, 6_000.0),
        ];
        let refs: Vec<&Record> = fs.iter().collect();
        let x = excuse(
            &refs,
            &refs,
            &[],
            std::slice::from_ref(&el),
            &FinalRead::default(),
            &c,
        );
        assert_eq!(x.excused_count, 6, "{x:#?}");
        let classes: Vec<FailureClass> = x.excused.iter().filter_map(|e| e.class).collect();
        assert!(classes.contains(&FailureClass::EtcdReadiness));
        assert!(classes.contains(&FailureClass::ClientTimeout));
        assert!(classes.contains(&FailureClass::Stall));
        // A readyz failing another check besides etcd's is not etcd's; a
        // timeout that ended before the election is not in flight in it.
        let other_check = failed(
            ProbeKind::Readyz,
            Outcome::Http,
            Some(500),
            "[-]etcd failed: reason withheld; [-]poststarthook/x failed: reason withheld",
            49_000.0,
            3.0,
        );
        let before = failed(w, Outcome::Timeout, None, "timed out", 30_000.0, 10_000.0);
        let fs = [&other_check, &before];
        let x = excuse(&fs, &fs, &[], &[el], &FinalRead::default(), &c);
        assert_eq!(x.excused_count, 0, "{x:#?}");
    }

    #[test]
    fn a_kill_without_its_members_log_or_a_state_change_excuses_nothing() {
        let kill = ev(
            "fault",
            "kill member seed-a-etcd-1 (leader)",
            "timeline seed=seed-a",
            50_000.0,
        );
        let c = criteria(&[(Hazard::KilledMember, budget(2, 10_000.0, &[]))]);
        let in_flight = failed_write(49_900.0, 300.0, 5, Some("seed-a"));
        let mut reset = failed_write(50_100.0, 30.0, 6, Some("seed-a"));
        reset.outcome = Outcome::Reset;
        reset.http_status = None;
        reset.error = Some("connection reset by peer".into());
        let fs = [&in_flight, &reset];
        let judge = |events: &[LabEvent], logs: &[Election]| {
            excuse(&fs, &fs, events, logs, &FinalRead::default(), &c)
        };
        // The event alone.
        let x = judge(std::slice::from_ref(&kill), &[]);
        assert_eq!(x.excused_count, 0, "{x:#?}");
        let h = &x.hazards[0];
        assert_eq!(h.happened, 0);
        assert_eq!(h.unconfirmed.len(), 1);
        assert!(
            h.unconfirmed[0].contains("`kill member seed-a-etcd-1 (leader)` is not confirmed")
                && h.unconfirmed[0].contains("no log of seed-a-etcd-1 is kept")
                && h.unconfirmed[0].contains("no peer's log")
                && h.unconfirmed[0].contains("A kill event alone excuses nothing"),
            "{}",
            h.unconfirmed[0]
        );
        assert!(x.windows[0].what.contains("NOT confirmed"));
        // Its log goes on after the kill (the process lived): not
        // confirmed either; nor by another member's start.
        let x = judge(
            std::slice::from_ref(&kill),
            &[
                started("seed-a-etcd-1", 55_000.0, 80_000.0),
                started("seed-a-etcd-2", 49_000.0, 52_000.0),
            ],
        );
        assert_eq!(x.excused_count, 0, "{x:#?}");
        assert!(
            x.hazards[0].unconfirmed[0].contains("log goes on after it"),
            "{}",
            x.hazards[0].unconfirmed[0]
        );
        // A start too long after the kill is no confirmation.
        let x = judge(
            std::slice::from_ref(&kill),
            &[started(
                "seed-a-etcd-1",
                49_000.0,
                50_000.0 + KILL_RESTART_MS + 1.0,
            )],
        );
        assert_eq!(x.excused_count, 0, "{x:#?}");
        // Its log shows it started again, nothing from it in between: both
        // the etcd error and the write reset at the kill are excused.
        let x = judge(
            std::slice::from_ref(&kill),
            &[started("seed-a-etcd-1", 49_990.0, 51_800.0)],
        );
        assert_eq!(x.excused_count, 2, "{x:#?}");
        assert_eq!(x.hazards[0].happened, 1);
        assert!(x.hazards[0].unconfirmed.is_empty());
        assert_eq!(x.excused[1].class, Some(FailureClass::Connection));
        // Or the kubelet's note that its container started again.
        let note = ev(
            "note",
            "kubelet: lab-seed-a-etcd-1 started again (restart 1, after 2.0 s)",
            "kubelet",
            52_100.0,
        );
        let x = judge(&[kill.clone(), note], &[]);
        assert_eq!(x.excused_count, 2, "{x:#?}");
        assert!(
            x.excused[0]
                .evidence
                .contains("its container started again 2.1 s later"),
            "{}",
            x.excused[0].evidence
        );
        // Another member's container is not its.
        let note = ev(
            "note",
            "kubelet: lab-seed-a-etcd-11 started again (restart 1, after 2.0 s)",
            "kubelet",
            52_100.0,
        );
        assert_eq!(judge(&[kill.clone(), note], &[]).excused_count, 0);
        // Not started again (the migration removed it): its peers lost
        // their streams with it at once, and its own log ends before the
        // kill.
        let lost = |at: f64| Election {
            shows: Shows::StreamLost,
            term: 0,
            member: "seed-a-etcd-1".into(),
            start_unix_ms: T0 + at,
            end_unix_ms: T0 + at,
            evidence: "seed-a-etcd-0 lost its raft stream with seed-a-etcd-1 (EOF) (etcd logs)"
                .into(),
        };
        let end = |last: f64| Election {
            shows: Shows::End,
            term: 0,
            member: "seed-a-etcd-1".into(),
            start_unix_ms: T0 + last,
            end_unix_ms: T0 + 60_000.0,
            evidence: "seed-a-etcd-1's log ends (etcd logs)".into(),
        };
        let x = judge(
            std::slice::from_ref(&kill),
            &[lost(50_004.0), end(49_950.0)],
        );
        assert_eq!(x.excused_count, 2, "{x:#?}");
        assert!(
            x.windows[0]
                .what
                .contains("its peers lost their raft streams with it 0.0 s later"),
            "{}",
            x.windows[0].what
        );
        // Its own log goes on after the kill: the process lived.
        let x = judge(
            std::slice::from_ref(&kill),
            &[lost(50_004.0), end(55_000.0)],
        );
        assert_eq!(x.excused_count, 0, "{x:#?}");
        // Streams lost long after the kill are not the kill's.
        let x = judge(
            std::slice::from_ref(&kill),
            &[lost(53_000.0), end(49_950.0)],
        );
        assert_eq!(x.excused_count, 0, "{x:#?}");
    }

    #[test]
    fn the_api_servers_etcd_client_losing_its_member_is_a_kills_not_an_elections() {
        let kill = ev(
            "fault",
            "kill member seed-a-etcd-1",
            "timeline seed=seed-a",
            50_000.0,
        );
        let log = [started("seed-a-etcd-1", 49_990.0, 51_800.0)];
        let w = ProbeKind::Write;
        // kube-apiserver's, and the stand-in's.
        let eof = failed(
            w,
            Outcome::Http,
            Some(500),
            "rpc error: code = Unavailable desc = error reading from server: EOF",
            49_950.0,
            200.0,
        );
        let standin = failed(
            w,
            Outcome::Http,
            Some(503),
            "etcd: grpc request error: status: Unavailable, message: \"transport is closing\"",
            50_100.0,
            200.0,
        );
        let fs = [&eof, &standin];
        let el = election(49_000.0, 51_000.0);
        let c = criteria(&[(Hazard::LeaderElection, budget(5, 10_000.0, &["write"]))]);
        let x = excuse(
            &fs,
            &fs,
            std::slice::from_ref(&kill),
            std::slice::from_ref(&el),
            &FinalRead::default(),
            &c,
        );
        assert_eq!(x.excused_count, 0, "{x:#?}");
        let c = criteria(&[(Hazard::KilledMember, budget(5, 10_000.0, &[]))]);
        let x = excuse(&fs, &fs, &[kill], &log, &FinalRead::default(), &c);
        assert_eq!(x.excused_count, 2, "{x:#?}");
        assert!(
            x.excused[0]
                .evidence
                .contains("the API server's etcd client lost its member"),
            "{}",
            x.excused[0].evidence
        );
        // The stand-in relays etcd's own errors as 503: still etcd's.
        let no_leader = failed(
            w,
            Outcome::Http,
            Some(503),
            "etcd: etcdserver: no leader",
            0.0,
            1.0,
        );
        assert_eq!(class_of(&no_leader), Some(FailureClass::EtcdError));
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
        let mut dropped = dropped_in_the_move(7_020.0);
        recs.push(dropped.clone());
        let c = one_move_leader();
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
