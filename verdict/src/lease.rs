//! The lease rules: what the shoot's leader-elected controllers would have
//! lived through. One leader-election candidate runs per seed (client-go's
//! `leaderelection` on a Lease, through its own seed's API servers); their
//! records ([`ProbeKind::Lease`], events in `record::lease_event`) and the
//! Lease's versions in etcd (`FinalRead::lease_history`) are judged by three
//! rules: [`RULE_EXCLUSIVE`] (safety), [`RULE_KEPT`] (availability) and
//! [`RULE_HANDOVER`] (liveness).
//!
//! Definitions (the figures in `verdict.json`'s `lease` mean exactly this):
//! - A candidate is named by its record's `candidate` (its identity; its
//!   seed's name when a record lacks it) and lives on its seed (`seed`).
//!   Its records are taken in start order (then `seq`). All candidates run
//!   in one container: their times are read off one clock.
//! - A candidate *believes it leads* from its `started-leading` record
//!   until the first `stopped-leading`, `killed` or `exited` record after
//!   it; when there is none, until the window's end (the last record start
//!   of the run). That span is a *leading interval*. A `started-leading`
//!   while it already believes it leads, and a `stopped-leading` while it
//!   does not (client-go calls OnStoppedLeading whenever its loop returns,
//!   led or not), change nothing. A `paused` candidate (SIGSTOP) keeps
//!   believing what it believed until a record after its `resumed` says
//!   otherwise.
//! - A *loss* is the end of a leading interval by a record:
//!   `stopped-leading`, or `killed` or `exited` while it believes it leads.
//!   The loss is *caused by the lab* when the lab acted on that candidate
//!   since the interval began: a `stop`, `killed` or `paused` record of it
//!   at or after its `started-leading` and at or before the loss.
//! - A *lock request* is a `get`, `create` or `update` record. It *failed*
//!   when its outcome is not `ok`; it was *slow* when it succeeded slower
//!   than the mutation latency limit (`thresholds.mutation_p99_ms`, 1 s).
//!   A *renewal* is a successful `update` that wrote the candidate itself
//!   as holder and started while it believed it led; the *renew latency*
//!   is the renewals' durations (nearest-rank quantiles, per phase: the
//!   first phase band its start falls in, or `outside`).
//! - An *acquisition* is a successful `create` or `update` whose `holder`
//!   is the candidate itself while the holder it last observed differed:
//!   the `holder` of its previous successful lock request that carried one
//!   (none before its first). The *recorded sequence* is every
//!   candidate's acquisitions in the order they completed (start plus
//!   duration), consecutive repeats collapsed. The *etcd sequence* is the
//!   holders of `lease_history`, oldest first, without empty ones,
//!   consecutive repeats collapsed.
//! - The *leaderless* time is the gaps in the union of all leading
//!   intervals, from the first `started-leading` of the run to the window's
//!   end.
//! - A candidate is *running* from its first record, and again from each
//!   `start`, until its next `stop`, `killed` or `exited` record, except
//!   from each `paused` to the next `resumed`.
//!
//! The rules:
//! - `lease-exclusive`: two different candidates' leading intervals must
//!   not share more than `Criteria::lease_tolerance_ms` (default 50 ms:
//!   the stamping of records on one clock); each longer overlap fails it,
//!   named with who, from, to and how long. The recorded and etcd
//!   sequences must be equal, else it fails naming both. Without the
//!   Lease's history it is degraded (not cross-checked against etcd),
//!   unless overlaps fail it already.
//! - `leader-kept`: every loss not caused by the lab fails it, explained by
//!   that candidate's failed or slow lock requests that overlap the renew
//!   deadline before the loss (`Criteria::renew_deadline_ms`, default
//!   10 s) and the lab events overlapping that span. It fails as well when
//!   candidates ran and none ever believed it led.
//! - `handover`: after the first `stop` or `killed` record of a leading
//!   interval, at `t`, another candidate must believe it leads at
//!   some instant in [t, t + `Criteria::handover_ms`] (default 19 s: the
//!   lease's 15 s plus two 2 s retry periods, the bound for a leader gone
//!   without releasing the lease; a released lease is taken within about
//!   one retry period). The handover time is from `t` to the first instant
//!   at or after it at which another candidate believes it leads (0 when
//!   one already does). When no other candidate does within the bound, the
//!   handover fails if the bound ended within the window and some other
//!   candidate was running throughout [t, t + bound]; otherwise the run
//!   (or the lab) cut it short and it is not judged.
//!
//! All three are skipped when no candidate ran, not covered when the plan
//! lists the lease probe and it left no record.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    fmt_ms, latency_of, outcome_name, phase_bands, Interval, Latency, Rule, RuleStatus, Window,
    MAX_LISTED_ANOMALIES, MAX_LISTED_INTERVALS,
};
use crate::criteria::Criteria;
use crate::informer::phase_of;
use crate::record::lease_event as ev;
use crate::record::{FinalRead, LabEvent, Outcome, ProbeKind, Record};

/// Safety: no two candidates believe they lead at once.
pub const RULE_EXCLUSIVE: &str = "lease-exclusive";
/// Availability: a leader loses leadership only when the lab makes it.
pub const RULE_KEPT: &str = "leader-kept";
/// Liveness: a stopped or killed leader is replaced within the bound.
pub const RULE_HANDOVER: &str = "handover";
/// Most lock requests and lab events listed in one loss's explanation.
pub const MAX_EXPLAINED: usize = 20;

/// One candidate's lock requests and renew latency within one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeasePhase {
    /// The phase band's name, or `outside`.
    pub name: String,
    /// Lock requests that started in the phase.
    pub lock_requests: u64,
    /// Of those, failed (outcome not `ok`).
    pub failed_lock_requests: u64,
    /// Renewals that started in the phase.
    pub renew: Option<Latency>,
}

/// What one candidate did and believed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Its identity (`candidate`), e.g. `cpmlab-seed-a`.
    pub identity: String,
    /// The seed it ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// Its leading intervals, in time order.
    pub leading: Vec<Interval>,
    /// `started-leading` records that began a leading interval.
    pub acquisitions: u64,
    /// Leading intervals a record ended (see the module doc) ...
    pub losses: u64,
    /// ... of which the lab did not cause.
    pub unplanned_losses: u64,
    pub lock_requests: u64,
    pub failed_lock_requests: u64,
    /// Renew latency over the whole run.
    pub renew: Option<Latency>,
    /// In band order, `outside` last; only phases with a lock request.
    pub phases: Vec<LeasePhase>,
    /// From each `paused` to the next `resumed` (or its `killed`/`exited`,
    /// or the window's end).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paused: Vec<Interval>,
}

/// Two candidates that both believed they led, longer than the tolerance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseOverlap {
    /// The two, the one that began to lead first first.
    pub candidates: Vec<String>,
    pub from_unix_ms: f64,
    pub to_unix_ms: f64,
    pub duration_ms: f64,
}

/// A failed or slow lock request, as a loss's explanation lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockRequest {
    /// `get`, `create` or `update`.
    pub event: String,
    pub start_unix_ms: f64,
    pub duration_ms: f64,
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Failed (true) or succeeded slowly (false).
    pub failed: bool,
}

/// The end of a leading interval by a record, and what explains it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseLoss {
    pub candidate: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// When the interval began (`started-leading`).
    pub led_from_unix_ms: f64,
    pub at_unix_ms: f64,
    /// The record that ended it: `stopped-leading`, `killed` or `exited`.
    pub how: String,
    /// The lab's first action on the candidate since the interval began
    /// (`stop`, `killed` or `paused`); `None`: the lab did not cause it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab_action: Option<String>,
    /// The `exited` record's error, when it ended so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Failed or slow lock requests of the candidate overlapping the renew
    /// deadline before the loss (the first [`MAX_EXPLAINED`]).
    pub requests: Vec<LockRequest>,
    pub request_count: u64,
    /// Lab events overlapping that span (the first [`MAX_EXPLAINED`]).
    pub lab_events: Vec<LabEvent>,
}

impl LeaseLoss {
    /// The lab caused it (see the module doc).
    pub fn planned(&self) -> bool {
        self.lab_action.is_some()
    }
}

/// How a handover ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HandoverOutcome {
    /// Another candidate led within the bound.
    Within,
    /// Another candidate led, after the bound.
    Late,
    /// No other candidate led, and the bound ended within the window.
    Missing,
    /// No other candidate led within the bound and none was running
    /// throughout it, or the window ended first: not judged.
    NotJudged,
}

/// A leader stopped or killed, and who took over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Handover {
    /// The leader the lab stopped or killed.
    pub from: String,
    /// `stop` or `killed`.
    pub how: String,
    pub at_unix_ms: f64,
    /// The first other candidate that believed it led at or after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The first instant at or after `at_unix_ms` at which `to` believed
    /// it led.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub led_unix_ms: Option<f64>,
    /// `led_unix_ms - at_unix_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handover_ms: Option<f64>,
    pub outcome: HandoverOutcome,
}

/// How the candidates' acquisitions compare with etcd's history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrossCheckOutcome {
    /// No candidate ran.
    #[default]
    NotRun,
    /// The recorded and etcd sequences are equal.
    Matched,
    /// They differ.
    Mismatched,
    /// The Lease's history was not read back.
    NoHistory,
    /// Reading it failed (`error`).
    HistoryError,
}

/// The etcd cross-check (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LeaseCrossCheck {
    pub outcome: CrossCheckOutcome,
    /// The recorded sequence: who acquired the Lease, in order.
    pub recorded: Vec<String>,
    /// The etcd sequence; `None` without a history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<Vec<String>>,
    /// Why the history could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Everything the lease rules found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LeaseCheck {
    /// False when the run had no lease records.
    pub run: bool,
    /// The window start the rules' messages count times from.
    pub window_start_unix_ms: f64,
    /// What it was judged by (from the criteria).
    pub tolerance_ms: f64,
    pub renew_deadline_ms: f64,
    pub handover_bound_ms: f64,
    /// In identity order.
    pub candidates: Vec<Candidate>,
    /// Overlaps longer than the tolerance (the first
    /// [`MAX_LISTED_ANOMALIES`], in time order).
    pub overlaps: Vec<LeaseOverlap>,
    pub overlap_count: u64,
    /// Overlaps within the tolerance (not failures).
    pub tolerated_overlaps: u64,
    /// Every loss, in time order (the first [`MAX_LISTED_ANOMALIES`]).
    pub losses: Vec<LeaseLoss>,
    pub loss_count: u64,
    /// Every stop or kill of a leader, in time order.
    pub handovers: Vec<Handover>,
    /// The first `started-leading` of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_leader_unix_ms: Option<f64>,
    /// Leaderless gaps (the first [`MAX_LISTED_INTERVALS`]).
    pub leaderless: Vec<Interval>,
    /// The longest of them (0 when there was none); `None` when nobody led.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_leaderless_ms: Option<f64>,
    pub etcd_cross_check: LeaseCrossCheck,
}

/// What one candidate's records say, before the candidates are compared.
struct Walk {
    cand: Candidate,
    /// When each of its acquisitions completed.
    acquired: Vec<f64>,
    /// (at, `stop`/`killed`): the first of either in each leading interval.
    handed: Vec<(f64, &'static str)>,
    /// Running spans (see the module doc).
    running: Vec<Interval>,
}

/// The candidate a lease record is of: its `candidate`, else its seed.
pub fn candidate_of(r: &Record) -> &str {
    r.candidate
        .as_deref()
        .or(r.seed.as_deref())
        .unwrap_or_default()
}

fn is_ok(r: &Record) -> bool {
    r.outcome == Outcome::Ok
}

fn end_of(r: &Record) -> f64 {
    r.start_unix_ms + r.duration_ms.max(0.0)
}

/// Subtract the paused spans from the alive spans.
fn minus(alive: &[Interval], paused: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    for a in alive {
        let mut pieces = vec![*a];
        for p in paused {
            let mut next = Vec::new();
            for x in pieces {
                if p.end_unix_ms <= x.start_unix_ms || p.start_unix_ms >= x.end_unix_ms {
                    next.push(x);
                    continue;
                }
                if p.start_unix_ms > x.start_unix_ms {
                    next.push(Interval {
                        start_unix_ms: x.start_unix_ms,
                        end_unix_ms: p.start_unix_ms,
                    });
                }
                if p.end_unix_ms < x.end_unix_ms {
                    next.push(Interval {
                        start_unix_ms: p.end_unix_ms,
                        end_unix_ms: x.end_unix_ms,
                    });
                }
            }
            pieces = next;
        }
        out.extend(pieces);
    }
    out
}

fn walk(
    identity: &str,
    recs: &[&Record],
    bands: &[&LabEvent],
    window_end: f64,
    criteria: &Criteria,
) -> (Walk, Vec<LeaseLoss>) {
    let seed = recs.iter().find_map(|r| r.seed.clone());
    let mut c = Candidate {
        identity: identity.to_string(),
        seed: seed.clone(),
        leading: Vec::new(),
        acquisitions: 0,
        losses: 0,
        unplanned_losses: 0,
        lock_requests: 0,
        failed_lock_requests: 0,
        renew: None,
        phases: Vec::new(),
        paused: Vec::new(),
    };
    let mut losses = Vec::new();
    let mut acquired = Vec::new();
    let mut handed = Vec::new();
    let mut alive: Vec<Interval> = Vec::new();
    let mut alive_from: Option<f64> = recs.first().map(|r| r.start_unix_ms);
    let mut lead_from: Option<f64> = None;
    // The lab's first action since the interval began.
    let mut action: Option<&'static str> = None;
    // A handover is due already for this interval (its first stop or kill).
    let mut handed_over = false;
    let mut paused_from: Option<f64> = None;
    let mut observed: Option<&str> = None;
    let mut renewals = Vec::new();
    let mut per_phase: BTreeMap<&str, (u64, u64, Vec<f64>)> = BTreeMap::new();
    let end_alive = |alive: &mut Vec<Interval>, from: &mut Option<f64>, t: f64| {
        if let Some(a) = from.take() {
            alive.push(Interval {
                start_unix_ms: a,
                end_unix_ms: t.max(a),
            });
        }
    };
    let end_paused = |paused: &mut Vec<Interval>, from: &mut Option<f64>, t: f64| {
        if let Some(a) = from.take() {
            paused.push(Interval {
                start_unix_ms: a,
                end_unix_ms: t.max(a),
            });
        }
    };
    for r in recs {
        let t = r.start_unix_ms;
        let e = r.event.as_deref().unwrap_or("");
        if ev::is_request(Some(e)) {
            c.lock_requests += 1;
            let p = per_phase.entry(phase_of(bands, t)).or_default();
            p.0 += 1;
            if !is_ok(r) {
                c.failed_lock_requests += 1;
                p.1 += 1;
                continue;
            }
            let mine = r.holder.as_deref() == Some(identity);
            if mine && e != ev::GET && observed != Some(identity) {
                acquired.push(end_of(r));
            }
            if e == ev::UPDATE && mine && lead_from.is_some() {
                renewals.push(r.duration_ms);
                p.2.push(r.duration_ms);
            }
            if let Some(h) = r.holder.as_deref() {
                observed = Some(h);
            }
            continue;
        }
        match e {
            ev::START if alive_from.is_none() => alive_from = Some(t),
            ev::STARTED_LEADING if lead_from.is_none() => {
                lead_from = Some(t);
                action = None;
                handed_over = false;
                c.acquisitions += 1;
            }
            ev::STOP | ev::PAUSED => {
                if lead_from.is_some() {
                    if e == ev::STOP && !handed_over {
                        handed.push((t, ev::STOP));
                        handed_over = true;
                    }
                    let a = if e == ev::STOP { ev::STOP } else { ev::PAUSED };
                    action = action.or(Some(a));
                }
                if e == ev::STOP {
                    end_alive(&mut alive, &mut alive_from, t);
                } else if paused_from.is_none() {
                    paused_from = Some(t);
                }
            }
            ev::RESUMED => end_paused(&mut c.paused, &mut paused_from, t),
            ev::STOPPED_LEADING | ev::KILLED | ev::EXITED => {
                if e == ev::KILLED && lead_from.is_some() {
                    action = action.or(Some(ev::KILLED));
                    if !handed_over {
                        handed.push((t, ev::KILLED));
                    }
                }
                if let Some(from) = lead_from.take() {
                    c.leading.push(Interval {
                        start_unix_ms: from,
                        end_unix_ms: t.max(from),
                    });
                    c.losses += 1;
                    if action.is_none() {
                        c.unplanned_losses += 1;
                    }
                    losses.push(LeaseLoss {
                        candidate: identity.to_string(),
                        seed: seed.clone(),
                        led_from_unix_ms: from,
                        at_unix_ms: t,
                        how: e.to_string(),
                        lab_action: action.map(str::to_string),
                        error: (e == ev::EXITED).then(|| r.error.clone()).flatten(),
                        requests: Vec::new(),
                        request_count: 0,
                        lab_events: Vec::new(),
                    });
                }
                if e != ev::STOPPED_LEADING {
                    end_alive(&mut alive, &mut alive_from, t);
                    end_paused(&mut c.paused, &mut paused_from, t);
                }
            }
            _ => {}
        }
    }
    if let Some(from) = lead_from {
        c.leading.push(Interval {
            start_unix_ms: from,
            end_unix_ms: window_end.max(from),
        });
    }
    end_alive(&mut alive, &mut alive_from, window_end);
    end_paused(&mut c.paused, &mut paused_from, window_end);
    // Explain each loss: the lock requests and lab events of the renew
    // deadline before it.
    let slow_ms = criteria.thresholds.mutation_p99_ms;
    for l in &mut losses {
        let from = l.at_unix_ms - criteria.renew_deadline_ms;
        for r in recs.iter().filter(|r| {
            ev::is_request(r.event.as_deref())
                && r.start_unix_ms <= l.at_unix_ms
                && end_of(r) >= from
                && (!is_ok(r) || r.duration_ms > slow_ms)
        }) {
            l.request_count += 1;
            if l.requests.len() < MAX_EXPLAINED {
                l.requests.push(LockRequest {
                    event: r.event.clone().unwrap_or_default(),
                    start_unix_ms: r.start_unix_ms,
                    duration_ms: r.duration_ms,
                    outcome: outcome_name(r.outcome).to_string(),
                    http_status: r.http_status,
                    error: r.error.clone(),
                    failed: !is_ok(r),
                });
            }
        }
    }
    c.renew = latency_of(renewals);
    let mut order: Vec<&str> = Vec::new();
    for b in bands {
        if !order.contains(&b.name.as_str()) {
            order.push(&b.name);
        }
    }
    order.push("outside");
    for name in order {
        if let Some((n, failed, d)) = per_phase.remove(name) {
            c.phases.push(LeasePhase {
                name: name.to_string(),
                lock_requests: n,
                failed_lock_requests: failed,
                renew: latency_of(d),
            });
        }
    }
    let running = minus(&alive, &c.paused);
    (
        Walk {
            cand: c,
            acquired,
            handed,
            running,
        },
        losses,
    )
}

/// Consecutive repeats collapsed.
fn collapse<I: IntoIterator<Item = String>>(it: I) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in it {
        if out.last() != Some(&s) {
            out.push(s);
        }
    }
    out
}

/// Judge the candidates' records (`all` sorted by start) and the Lease's
/// history in `final_read`.
pub fn check(
    all: &[&Record],
    events: &[LabEvent],
    final_read: &FinalRead,
    window: &Window,
    criteria: &Criteria,
) -> LeaseCheck {
    let mut by_candidate: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for r in all.iter().copied().filter(|r| r.probe == ProbeKind::Lease) {
        by_candidate
            .entry(candidate_of(r).to_string())
            .or_default()
            .push(r);
    }
    let mut c = LeaseCheck {
        run: !by_candidate.is_empty(),
        window_start_unix_ms: window.start_unix_ms,
        tolerance_ms: criteria.lease_tolerance_ms,
        renew_deadline_ms: criteria.renew_deadline_ms,
        handover_bound_ms: criteria.handover_ms,
        ..LeaseCheck::default()
    };
    if !c.run {
        return c;
    }
    let bands = phase_bands(events);
    let end = window.end_unix_ms;
    let mut walks = Vec::new();
    let mut losses = Vec::new();
    for (id, mut recs) in by_candidate {
        recs.sort_by(|a, b| {
            a.start_unix_ms
                .total_cmp(&b.start_unix_ms)
                .then(a.seq.cmp(&b.seq))
        });
        let (w, l) = walk(&id, &recs, &bands, end, criteria);
        walks.push(w);
        losses.extend(l);
    }
    // Lab events overlapping each loss's renew deadline.
    for l in &mut losses {
        let from = l.at_unix_ms - criteria.renew_deadline_ms;
        let mut shown: Vec<&LabEvent> = events
            .iter()
            .filter(|e| {
                e.at_unix_ms <= l.at_unix_ms && e.end_unix_ms.unwrap_or(e.at_unix_ms) >= from
            })
            .collect();
        shown.sort_by(|a, b| a.at_unix_ms.total_cmp(&b.at_unix_ms));
        l.lab_events = shown.into_iter().take(MAX_EXPLAINED).cloned().collect();
    }
    losses.sort_by(|a, b| a.at_unix_ms.total_cmp(&b.at_unix_ms));
    c.loss_count = losses.len() as u64;
    losses.truncate(MAX_LISTED_ANOMALIES);
    c.losses = losses;

    // Overlaps between any two candidates.
    let mut overlaps = Vec::new();
    for (i, a) in walks.iter().enumerate() {
        for b in &walks[i + 1..] {
            for x in &a.cand.leading {
                for y in &b.cand.leading {
                    let from = x.start_unix_ms.max(y.start_unix_ms);
                    let to = x.end_unix_ms.min(y.end_unix_ms);
                    if to <= from {
                        continue;
                    }
                    if to - from <= criteria.lease_tolerance_ms {
                        c.tolerated_overlaps += 1;
                        continue;
                    }
                    let first_a =
                        (x.start_unix_ms, &a.cand.identity) <= (y.start_unix_ms, &b.cand.identity);
                    let (p, q) = if first_a {
                        (&a.cand.identity, &b.cand.identity)
                    } else {
                        (&b.cand.identity, &a.cand.identity)
                    };
                    overlaps.push(LeaseOverlap {
                        candidates: vec![p.clone(), q.clone()],
                        from_unix_ms: from,
                        to_unix_ms: to,
                        duration_ms: to - from,
                    });
                }
            }
        }
    }
    overlaps.sort_by(|a, b| a.from_unix_ms.total_cmp(&b.from_unix_ms));
    c.overlap_count = overlaps.len() as u64;
    overlaps.truncate(MAX_LISTED_ANOMALIES);
    c.overlaps = overlaps;

    // Leaderless gaps from the first acquisition to the window's end.
    let mut leading: Vec<Interval> = walks
        .iter()
        .flat_map(|w| w.cand.leading.iter().copied())
        .collect();
    leading.sort_by(|a, b| a.start_unix_ms.total_cmp(&b.start_unix_ms));
    if let Some(first) = leading.first() {
        c.first_leader_unix_ms = Some(first.start_unix_ms);
        let mut covered_to = first.start_unix_ms;
        let mut longest: f64 = 0.0;
        let mut gaps = Vec::new();
        for iv in &leading {
            if iv.start_unix_ms > covered_to {
                gaps.push(Interval {
                    start_unix_ms: covered_to,
                    end_unix_ms: iv.start_unix_ms,
                });
            }
            covered_to = covered_to.max(iv.end_unix_ms);
        }
        if end > covered_to {
            gaps.push(Interval {
                start_unix_ms: covered_to,
                end_unix_ms: end,
            });
        }
        for g in &gaps {
            longest = longest.max(g.duration_ms());
        }
        c.longest_leaderless_ms = Some(longest);
        gaps.truncate(MAX_LISTED_INTERVALS);
        c.leaderless = gaps;
    }

    // Handovers.
    let bound = criteria.handover_ms;
    let mut handovers = Vec::new();
    for w in &walks {
        for &(t, how) in &w.handed {
            let others: Vec<&Walk> = walks
                .iter()
                .filter(|o| o.cand.identity != w.cand.identity)
                .collect();
            let next = others
                .iter()
                .flat_map(|o| {
                    o.cand
                        .leading
                        .iter()
                        .filter(move |iv| iv.end_unix_ms > t)
                        .map(move |iv| (iv.start_unix_ms.max(t), &o.cand.identity))
                })
                .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(b.1)));
            let deadline = t + bound;
            let judged = deadline <= end
                && others.iter().any(|o| {
                    o.running
                        .iter()
                        .any(|s| s.start_unix_ms <= t && s.end_unix_ms >= deadline)
                });
            let outcome = match next {
                Some((u, _)) if u - t <= bound => HandoverOutcome::Within,
                Some(_) if judged => HandoverOutcome::Late,
                None if judged => HandoverOutcome::Missing,
                _ => HandoverOutcome::NotJudged,
            };
            handovers.push(Handover {
                from: w.cand.identity.clone(),
                how: how.to_string(),
                at_unix_ms: t,
                to: next.map(|n| n.1.clone()),
                led_unix_ms: next.map(|n| n.0),
                handover_ms: next.map(|n| n.0 - t),
                outcome,
            });
        }
    }
    handovers.sort_by(|a, b| a.at_unix_ms.total_cmp(&b.at_unix_ms));
    c.handovers = handovers;

    // The etcd cross-check.
    let mut acquired: Vec<(f64, &str)> = walks
        .iter()
        .flat_map(|w| w.acquired.iter().map(|t| (*t, w.cand.identity.as_str())))
        .collect();
    acquired.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(b.1)));
    let recorded = collapse(acquired.into_iter().map(|(_, id)| id.to_string()));
    let etcd = final_read.lease_history.as_ref().map(|h| {
        collapse(
            h.iter()
                .filter(|v| !v.holder.is_empty())
                .map(|v| v.holder.clone()),
        )
    });
    let outcome = match (&etcd, &final_read.lease_history_error) {
        (Some(e), _) if *e == recorded => CrossCheckOutcome::Matched,
        (Some(_), _) => CrossCheckOutcome::Mismatched,
        (None, Some(_)) => CrossCheckOutcome::HistoryError,
        (None, None) => CrossCheckOutcome::NoHistory,
    };
    c.etcd_cross_check = LeaseCrossCheck {
        outcome,
        recorded,
        etcd,
        error: final_read.lease_history_error.clone(),
    };
    c.candidates = walks.into_iter().map(|w| w.cand).collect();
    c
}

/// A time as the messages give it: seconds since the window start.
fn at(c: &LeaseCheck, t: f64) -> String {
    format!("+{:.3} s", (t - c.window_start_unix_ms) / 1e3)
}

fn sequence(v: &[String]) -> String {
    if v.is_empty() {
        "nobody".into()
    } else {
        v.join(" → ")
    }
}

fn unchecked(name: &str, ran: bool) -> Rule {
    Rule::unchecked(
        name.to_string(),
        ran,
        "the leader-election candidates were told to run but left no record: who led was not checked",
        "no leader-election candidate ran",
    )
}

/// The `lease-exclusive` rule. `ran`: the candidates were told to run.
pub fn exclusive_rule(c: &LeaseCheck, ran: bool) -> Rule {
    let name = RULE_EXCLUSIVE.to_string();
    if !c.run {
        return unchecked(RULE_EXCLUSIVE, ran);
    }
    let x = &c.etcd_cross_check;
    let intervals: usize = c.candidates.iter().map(|k| k.leading.len()).sum();
    let mut fails = Vec::new();
    if c.overlap_count > 0 {
        let shown: Vec<String> = c
            .overlaps
            .iter()
            .take(10)
            .map(|o| {
                format!(
                    "{} from {} to {} ({})",
                    o.candidates.join(" and "),
                    at(c, o.from_unix_ms),
                    at(c, o.to_unix_ms),
                    fmt_ms(o.duration_ms)
                )
            })
            .collect();
        fails.push(format!(
            "{} time(s) two candidates both believed they led, beyond the {} tolerance: {}{}",
            c.overlap_count,
            fmt_ms(c.tolerance_ms),
            shown.join("; "),
            if c.overlap_count > 10 { "; ..." } else { "" }
        ));
    }
    if x.outcome == CrossCheckOutcome::Mismatched {
        fails.push(format!(
            "etcd's history of the Lease disagrees with the candidates' records: etcd's holders {}, the candidates recorded acquisitions {}",
            sequence(x.etcd.as_deref().unwrap_or(&[])),
            sequence(&x.recorded)
        ));
    }
    if !fails.is_empty() {
        return Rule {
            name,
            status: RuleStatus::Failed,
            message: fails.join("; "),
        };
    }
    let held = format!(
        "no two candidates believed they led at once beyond {} ({} leading interval(s){})",
        fmt_ms(c.tolerance_ms),
        intervals,
        if c.tolerated_overlaps > 0 {
            format!(", {} overlap(s) within the tolerance", c.tolerated_overlaps)
        } else {
            String::new()
        }
    );
    match x.outcome {
        CrossCheckOutcome::Matched => Rule {
            name,
            status: RuleStatus::Passed,
            message: format!(
                "{held}; etcd's history agrees: {}",
                sequence(&x.recorded)
            ),
        },
        CrossCheckOutcome::HistoryError => Rule {
            name,
            status: RuleStatus::Degraded,
            message: format!(
                "{held}; not cross-checked against etcd: the Lease's history could not be read ({})",
                x.error.as_deref().unwrap_or("")
            ),
        },
        _ => Rule {
            name,
            status: RuleStatus::Degraded,
            message: format!(
                "{held}; not cross-checked against etcd: the Lease's history was not read back"
            ),
        },
    }
}

/// One loss as the `leader-kept` rule explains it.
fn explain(c: &LeaseCheck, l: &LeaseLoss) -> String {
    let mut s = format!(
        "{} lost leadership at {} ({}{}; led since {})",
        l.candidate,
        at(c, l.at_unix_ms),
        l.how,
        l.error
            .as_deref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default(),
        at(c, l.led_from_unix_ms)
    );
    if l.request_count == 0 {
        let _ = std::fmt::Write::write_fmt(
            &mut s,
            format_args!(
                "; no failed or slow lock request in the {} before it",
                fmt_ms(c.renew_deadline_ms)
            ),
        );
    } else {
        let shown: Vec<String> = l
            .requests
            .iter()
            .take(5)
            .map(|r| {
                format!(
                    "{} at {} {}{}{} after {}",
                    r.event,
                    at(c, r.start_unix_ms),
                    if r.failed { r.outcome.as_str() } else { "slow" },
                    r.http_status.map(|h| format!(" {h}")).unwrap_or_default(),
                    r.error
                        .as_deref()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default(),
                    fmt_ms(r.duration_ms)
                )
            })
            .collect();
        s.push_str(&format!(
            "; in the {} before it, {} failed or slow lock request(s): {}{}",
            fmt_ms(c.renew_deadline_ms),
            l.request_count,
            shown.join(", "),
            if l.request_count > 5 { ", ..." } else { "" }
        ));
    }
    if l.lab_events.is_empty() {
        s.push_str("; no lab event overlaps that span");
    } else {
        let shown: Vec<String> = l
            .lab_events
            .iter()
            .take(5)
            .map(|e| {
                format!(
                    "{} {} ({}{})",
                    e.kind,
                    e.name,
                    at(c, e.at_unix_ms),
                    e.end_unix_ms
                        .map(|z| format!(" – {}", at(c, z)))
                        .unwrap_or_default()
                )
            })
            .collect();
        s.push_str(&format!(
            "; lab events then: {}{}",
            shown.join(", "),
            if l.lab_events.len() > 5 { ", ..." } else { "" }
        ));
    }
    s
}

/// The `leader-kept` rule. `ran`: the candidates were told to run.
pub fn kept_rule(c: &LeaseCheck, ran: bool) -> Rule {
    let name = RULE_KEPT.to_string();
    if !c.run {
        return unchecked(RULE_KEPT, ran);
    }
    if c.first_leader_unix_ms.is_none() {
        let (n, f) = c.candidates.iter().fold((0, 0), |(n, f), k| {
            (n + k.lock_requests, f + k.failed_lock_requests)
        });
        return Rule {
            name,
            status: RuleStatus::Failed,
            message: format!(
                "no candidate ever believed it led ({} candidate(s), {n} lock request(s), {f} failed)",
                c.candidates.len()
            ),
        };
    }
    let longest = format!(
        "longest without a leader {}",
        fmt_ms(c.longest_leaderless_ms.unwrap_or(0.0))
    );
    let unplanned: Vec<&LeaseLoss> = c.losses.iter().filter(|l| !l.planned()).collect();
    let unplanned_count: u64 = c.candidates.iter().map(|k| k.unplanned_losses).sum();
    if unplanned_count > 0 {
        let shown: Vec<String> = unplanned.iter().take(5).map(|l| explain(c, l)).collect();
        return Rule {
            name,
            status: RuleStatus::Failed,
            message: format!(
                "{unplanned_count} loss(es) of leadership the lab did not cause: {}{}; {longest}",
                shown.join(" | "),
                if unplanned_count > 5 { " | ..." } else { "" }
            ),
        };
    }
    let mut by_action: BTreeMap<&str, u64> = BTreeMap::new();
    for l in &c.losses {
        *by_action
            .entry(l.lab_action.as_deref().unwrap_or(""))
            .or_default() += 1;
    }
    let actions: Vec<String> = by_action.iter().map(|(a, n)| format!("{a} {n}")).collect();
    Rule {
        name,
        status: RuleStatus::Passed,
        message: if c.loss_count == 0 {
            format!("no leader lost leadership; {longest}")
        } else {
            format!(
                "{} loss(es) of leadership, each after the lab acted on that candidate ({}); {longest}",
                c.loss_count,
                actions.join(", ")
            )
        },
    }
}

/// The `handover` rule. `ran`: the candidates were told to run.
pub fn handover_rule(c: &LeaseCheck, ran: bool) -> Rule {
    let name = RULE_HANDOVER.to_string();
    if !c.run {
        return unchecked(RULE_HANDOVER, ran);
    }
    let describe = |h: &Handover| {
        let what = format!("{} {} at {}", h.from, h.how, at(c, h.at_unix_ms));
        match (h.outcome, &h.to, h.handover_ms) {
            (HandoverOutcome::Within | HandoverOutcome::Late, Some(to), Some(ms)) => {
                format!("{what} → {to} led after {}", fmt_ms(ms))
            }
            (HandoverOutcome::NotJudged, Some(to), Some(ms)) => format!(
                "{what} → {to} led after {} (not judged: no other candidate ran throughout the bound)",
                fmt_ms(ms)
            ),
            (HandoverOutcome::NotJudged, _, _) => format!(
                "{what}: nobody led after it, and the run or the lab cut the bound short (not judged)"
            ),
            _ => format!("{what}: no other candidate led by the window's end"),
        }
    };
    let bad: Vec<&Handover> = c
        .handovers
        .iter()
        .filter(|h| matches!(h.outcome, HandoverOutcome::Late | HandoverOutcome::Missing))
        .collect();
    if !bad.is_empty() {
        let shown: Vec<String> = bad.iter().take(10).map(|h| describe(h)).collect();
        return Rule {
            name,
            status: RuleStatus::Failed,
            message: format!(
                "{} handover(s) over the {} bound: {}",
                bad.len(),
                fmt_ms(c.handover_bound_ms),
                shown.join("; ")
            ),
        };
    }
    if c.handovers.is_empty() {
        return Rule {
            name,
            status: RuleStatus::Passed,
            message: "no leader was stopped or killed: there was no handover to judge".into(),
        };
    }
    let judged = c
        .handovers
        .iter()
        .filter(|h| h.outcome == HandoverOutcome::Within)
        .count();
    let shown: Vec<String> = c.handovers.iter().take(10).map(describe).collect();
    Rule {
        name,
        status: RuleStatus::Passed,
        message: if judged == 0 {
            format!("no handover to judge: {}", shown.join("; "))
        } else {
            format!(
                "{judged} handover(s) within the {} bound: {}",
                fmt_ms(c.handover_bound_ms),
                shown.join("; ")
            )
        },
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::{ConnMode, LeaseVersion};
    use crate::testutil::{phase, rec, T0};

    pub(crate) const A: &str = "cpmlab-seed-a";
    pub(crate) const B: &str = "cpmlab-seed-b";

    fn seed_of(cand: &str) -> String {
        cand.trim_start_matches("cpmlab-").to_string()
    }

    /// A moment of a candidate at `t` ms.
    pub(crate) fn moment(cand: &str, t: f64, event: &str) -> Record {
        let mut r = rec(ProbeKind::Lease, ConnMode::Reused, t, 0.0, Outcome::Ok);
        r.event = Some(event.into());
        r.candidate = Some(cand.into());
        r.seed = Some(seed_of(cand));
        r.http_status = None;
        r
    }

    /// A lock request; `holder` as read or written.
    pub(crate) fn lock(
        cand: &str,
        t: f64,
        event: &str,
        outcome: Outcome,
        holder: Option<&str>,
    ) -> Record {
        let mut r = moment(cand, t, event);
        r.duration_ms = 10.0;
        r.outcome = outcome;
        r.http_status = Some(if outcome == Outcome::Ok { 200 } else { 503 });
        if outcome != Outcome::Ok {
            r.error = Some("etcdserver: request timed out".into());
        }
        r.holder = holder.map(str::to_string);
        r
    }

    /// `cand` renews every 2 s in [from, to).
    fn renewals(cand: &str, from: f64, to: f64) -> Vec<Record> {
        let mut v = Vec::new();
        let mut t = from;
        while t < to {
            v.push(lock(cand, t, ev::UPDATE, Outcome::Ok, Some(cand)));
            t += 2_000.0;
        }
        v
    }

    /// `cand` reads the lease every 2 s in [from, to), held by `holder`.
    fn polls(cand: &str, from: f64, to: f64, holder: &str) -> Vec<Record> {
        let mut v = Vec::new();
        let mut t = from;
        while t < to {
            v.push(lock(cand, t, ev::GET, Outcome::Ok, Some(holder)));
            t += 2_000.0;
        }
        v
    }

    /// A starts at 0, creates the lease and leads from 130 ms; B starts
    /// and finds it held.
    fn a_leads() -> Vec<Record> {
        let mut v = vec![
            moment(A, 0.0, ev::START),
            moment(B, 0.0, ev::START),
            lock(A, 100.0, ev::GET, Outcome::Http, None),
            lock(A, 110.0, ev::CREATE, Outcome::Ok, Some(A)),
            moment(A, 130.0, ev::STARTED_LEADING),
            moment(A, 131.0, ev::NEW_LEADER),
        ];
        v[2].http_status = Some(404);
        v
    }

    pub(crate) fn history(holders: &[&str]) -> FinalRead {
        FinalRead {
            lease_history: Some(
                holders
                    .iter()
                    .enumerate()
                    .map(|(i, h)| LeaseVersion {
                        rev: 100 + i as u64,
                        holder: h.to_string(),
                    })
                    .collect(),
            ),
            ..FinalRead::default()
        }
    }

    fn window(recs: &[Record]) -> Window {
        Window {
            start_unix_ms: recs
                .iter()
                .map(|r| r.start_unix_ms)
                .fold(f64::INFINITY, f64::min),
            end_unix_ms: recs
                .iter()
                .map(|r| r.start_unix_ms)
                .fold(f64::NEG_INFINITY, f64::max),
        }
    }

    fn run(recs: &[Record], events: &[LabEvent], fin: &FinalRead) -> LeaseCheck {
        let mut all: Vec<&Record> = recs.iter().collect();
        all.sort_by(|a, b| a.start_unix_ms.total_cmp(&b.start_unix_ms));
        check(&all, events, fin, &window(recs), &Criteria::default())
    }

    fn rules(c: &LeaseCheck) -> [Rule; 3] {
        [
            exclusive_rule(c, true),
            kept_rule(c, true),
            handover_rule(c, true),
        ]
    }

    fn says(r: &Rule, text: &str) {
        assert!(r.message.contains(text), "`{text}` not in: {}", r.message);
    }

    /// A leads, the lab stops it at 10 s: it releases the lease and B,
    /// polling every 2 s, takes it at 12 s.
    pub(crate) fn clean_handover() -> Vec<Record> {
        let mut v = a_leads();
        v.extend(renewals(A, 2_000.0, 10_000.0));
        v.extend(polls(B, 1_000.0, 12_000.0, A));
        v.extend([
            moment(A, 10_000.0, ev::STOP),
            lock(A, 10_005.0, ev::UPDATE, Outcome::Ok, Some("")),
            moment(A, 10_020.0, ev::STOPPED_LEADING),
            moment(A, 10_030.0, ev::EXITED),
            lock(B, 12_000.0, ev::GET, Outcome::Ok, Some("")),
            lock(B, 12_010.0, ev::UPDATE, Outcome::Ok, Some(B)),
            moment(B, 12_030.0, ev::STARTED_LEADING),
        ]);
        v.extend(renewals(B, 14_000.0, 30_000.0));
        v
    }

    #[test]
    fn a_clean_handover_passes_all_three() {
        let recs = clean_handover();
        let fin = history(&[A, A, A, A, A, "", B, B, B]);
        let c = run(&recs, &[], &fin);
        assert_eq!(c.candidates.len(), 2);
        let a = &c.candidates[0];
        assert_eq!(a.identity, A);
        assert_eq!(a.seed.as_deref(), Some("seed-a"));
        assert_eq!(
            a.leading,
            vec![Interval {
                start_unix_ms: T0 + 130.0,
                end_unix_ms: T0 + 10_020.0
            }]
        );
        assert_eq!((a.acquisitions, a.losses, a.unplanned_losses), (1, 1, 0));
        assert_eq!(a.renew.unwrap().count, 4, "the release is no renewal");
        assert_eq!(c.etcd_cross_check.recorded, vec![A, B]);
        assert_eq!(c.etcd_cross_check.outcome, CrossCheckOutcome::Matched);
        assert_eq!(c.handovers.len(), 1);
        let h = &c.handovers[0];
        assert_eq!(h.outcome, HandoverOutcome::Within);
        assert_eq!(h.to.as_deref(), Some(B));
        assert!(h.handover_ms.unwrap() < 3_000.0, "{h:?}");
        assert_eq!(c.longest_leaderless_ms, Some(2_010.0));
        for r in rules(&c) {
            assert_eq!(r.status, RuleStatus::Passed, "{}: {}", r.name, r.message);
        }
        let [x, k, h] = rules(&c);
        says(&x, "etcd's history agrees: cpmlab-seed-a → cpmlab-seed-b");
        says(&k, "each after the lab acted on that candidate (stop 1)");
        says(
            &h,
            "cpmlab-seed-a stop at +10.000 s → cpmlab-seed-b led after 2030 ms",
        );
    }

    /// A leads; the lab pauses it at 10.5 s for 29.5 s; B takes the expired
    /// lease at 26 s; A, resumed at 40 s, believes it leads until 50 s.
    pub(crate) fn split_brain() -> Vec<Record> {
        let mut v = a_leads();
        v.extend(renewals(A, 2_000.0, 10_001.0));
        v.push(moment(A, 10_500.0, ev::PAUSED));
        v.extend(polls(B, 1_000.0, 26_000.0, A));
        v.extend([
            lock(B, 26_000.0, ev::GET, Outcome::Ok, Some(A)),
            lock(B, 26_010.0, ev::UPDATE, Outcome::Ok, Some(B)),
            moment(B, 26_030.0, ev::STARTED_LEADING),
            moment(A, 40_000.0, ev::RESUMED),
        ]);
        let mut conflict = lock(A, 40_010.0, ev::UPDATE, Outcome::Http, Some(A));
        conflict.http_status = Some(409);
        v.push(conflict);
        v.extend(polls(A, 40_100.0, 50_000.0, B));
        v.push(moment(A, 50_000.0, ev::STOPPED_LEADING));
        v.extend(renewals(B, 28_000.0, 60_000.0));
        v
    }

    #[test]
    fn split_brain_fails_lease_exclusive_naming_the_overlap() {
        let recs = split_brain();
        let c = run(&recs, &[], &history(&[A, A, A, A, A, A, B, B]));
        assert_eq!(c.overlap_count, 1);
        let o = &c.overlaps[0];
        assert_eq!(o.candidates, vec![A, B]);
        assert_eq!(
            (o.from_unix_ms - T0, o.to_unix_ms - T0, o.duration_ms),
            (26_030.0, 50_000.0, 23_970.0)
        );
        assert_eq!(c.candidates[0].paused.len(), 1);
        let [x, k, h] = rules(&c);
        assert_eq!(x.status, RuleStatus::Failed);
        says(
            &x,
            "1 time(s) two candidates both believed they led, beyond the 50 ms tolerance: cpmlab-seed-a and cpmlab-seed-b from +26.030 s to +50.000 s (23970 ms)",
        );
        // The records agree with etcd: only the overlap fails it.
        assert_eq!(c.etcd_cross_check.outcome, CrossCheckOutcome::Matched);
        assert!(!x.message.contains("disagrees"), "{}", x.message);
        // The lab paused the leader: its loss is planned; nobody was
        // stopped or killed.
        assert_eq!(k.status, RuleStatus::Passed, "{}", k.message);
        says(&k, "paused 1");
        assert_eq!(h.status, RuleStatus::Passed);
        says(&h, "there was no handover to judge");
        // Within the tolerance it holds: B starts leading 40 ms before A
        // stops.
        let recs: Vec<Record> = split_brain()
            .into_iter()
            .map(|mut r| {
                if r.candidate.as_deref() == Some(A)
                    && r.event.as_deref() == Some(ev::STOPPED_LEADING)
                {
                    r.start_unix_ms = T0 + 26_070.0;
                }
                r
            })
            .collect();
        let c = run(&recs, &[], &history(&[A, B]));
        assert_eq!((c.overlap_count, c.tolerated_overlaps), (0, 1));
        assert_eq!(exclusive_rule(&c, true).status, RuleStatus::Passed);
    }

    #[test]
    fn a_lease_lost_to_failed_renews_fails_leader_kept_with_its_explanation() {
        let mut v = a_leads();
        v.extend(renewals(A, 2_000.0, 20_001.0));
        // Seed a's API servers lose etcd from 21 s: every renewal fails
        // until client-go gives up at the renew deadline.
        let mut t = 22_000.0;
        while t <= 30_000.0 {
            v.push(lock(A, t, ev::UPDATE, Outcome::Http, None));
            t += 2_000.0;
        }
        v.push(moment(A, 31_000.0, ev::STOPPED_LEADING));
        v.extend(polls(B, 1_000.0, 36_000.0, A));
        v.extend([
            lock(B, 36_000.0, ev::GET, Outcome::Ok, Some(A)),
            lock(B, 36_010.0, ev::UPDATE, Outcome::Ok, Some(B)),
            moment(B, 36_030.0, ev::STARTED_LEADING),
        ]);
        v.extend(renewals(B, 38_000.0, 50_000.0));
        let events = vec![
            LabEvent {
                at_unix_ms: T0 + 21_000.0,
                end_unix_ms: Some(T0 + 45_000.0),
                kind: "fault".into(),
                name: "cut seed-a from etcd".into(),
                detail: String::new(),
                status: None,
            },
            phase("MigrateDNSRecords", 15_000.0, 35_000.0),
        ];
        let c = run(&v, &events, &history(&[A, A, B]));
        assert_eq!(c.loss_count, 1);
        let l = &c.losses[0];
        assert!(!l.planned());
        assert_eq!(l.request_count, 5);
        assert_eq!(l.requests[0].http_status, Some(503));
        assert_eq!(l.lab_events.len(), 2);
        assert_eq!(c.longest_leaderless_ms, Some(5_030.0));
        let a = &c.candidates[0];
        let p = a
            .phases
            .iter()
            .find(|p| p.name == "MigrateDNSRecords")
            .unwrap();
        assert_eq!((p.lock_requests, p.failed_lock_requests), (8, 5));
        assert_eq!(p.renew.unwrap().count, 3);
        assert!(a.phases.iter().any(|p| p.name == "outside"));
        let [x, k, h] = rules(&c);
        assert_eq!(x.status, RuleStatus::Passed, "{}", x.message);
        assert_eq!(h.status, RuleStatus::Passed, "{}", h.message);
        assert_eq!(k.status, RuleStatus::Failed);
        says(&k, "1 loss(es) of leadership the lab did not cause");
        says(
            &k,
            "cpmlab-seed-a lost leadership at +31.000 s (stopped-leading; led since +0.130 s)",
        );
        says(
            &k,
            "5 failed or slow lock request(s): update at +22.000 s http 503 (etcdserver: request timed out) after 10 ms",
        );
        says(&k, "fault cut seed-a from etcd (+21.000 s – +45.000 s)");
        says(&k, "longest without a leader 5030 ms");
        // The same loss after the lab stopped A is planned.
        v.push(moment(A, 25_000.0, ev::STOP));
        let c = run(&v, &events, &history(&[A, A, B]));
        assert_eq!(kept_rule(&c, true).status, RuleStatus::Passed);
    }

    /// A leads and is killed at 10 s; B takes over at `taken` ms.
    fn killed_then(taken: f64) -> Vec<Record> {
        let mut v = a_leads();
        v.extend(renewals(A, 2_000.0, 10_000.0));
        v.push(moment(A, 10_000.0, ev::KILLED));
        v.extend(polls(B, 1_000.0, taken, A));
        v.extend([
            lock(B, taken, ev::UPDATE, Outcome::Ok, Some(B)),
            moment(B, taken + 20.0, ev::STARTED_LEADING),
        ]);
        v.extend(renewals(B, taken + 2_000.0, taken + 12_000.0));
        v
    }

    #[test]
    fn a_handover_of_30_s_fails() {
        let c = run(&killed_then(40_000.0), &[], &history(&[A, B]));
        let h = &c.handovers[0];
        assert_eq!(
            (h.how.as_str(), h.outcome),
            ("killed", HandoverOutcome::Late)
        );
        assert_eq!(h.handover_ms, Some(30_020.0));
        let [x, k, r] = rules(&c);
        assert_eq!(r.status, RuleStatus::Failed);
        says(
            &r,
            "1 handover(s) over the 19000 ms bound: cpmlab-seed-a killed at +10.000 s → cpmlab-seed-b led after 30020 ms",
        );
        assert_eq!(x.status, RuleStatus::Passed, "{}", x.message);
        assert_eq!(k.status, RuleStatus::Passed, "killed: {}", k.message);
        assert_eq!(c.longest_leaderless_ms, Some(30_020.0));
        // Within 19 s it passes.
        let c = run(&killed_then(25_000.0), &[], &history(&[A, B]));
        assert_eq!(c.handovers[0].outcome, HandoverOutcome::Within);
        assert_eq!(handover_rule(&c, true).status, RuleStatus::Passed);
        // Nobody took over, and B ran on past the bound: missing.
        let mut v = killed_then(40_000.0);
        v.retain(|r| !(r.candidate.as_deref() == Some(B) && r.start_unix_ms >= T0 + 40_000.0));
        v.extend(polls(B, 40_000.0, 45_000.0, A));
        let c = run(&v, &[], &history(&[A]));
        assert_eq!(c.handovers[0].outcome, HandoverOutcome::Missing);
        assert_eq!(handover_rule(&c, true).status, RuleStatus::Failed);
        // The lab stopped B 5 s after killing A: cut short, not judged.
        let mut v = killed_then(40_000.0);
        v.retain(|r| !(r.candidate.as_deref() == Some(B) && r.start_unix_ms >= T0 + 15_000.0));
        v.push(moment(B, 15_000.0, ev::STOP));
        v.push(moment(B, 45_000.0, ev::EXITED));
        let c = run(&v, &[], &history(&[A]));
        assert_eq!(c.handovers[0].outcome, HandoverOutcome::NotJudged);
        let r = handover_rule(&c, true);
        assert_eq!(r.status, RuleStatus::Passed, "{}", r.message);
        says(&r, "no handover to judge");
    }

    #[test]
    fn a_stop_then_a_kill_of_the_same_leader_is_one_handover() {
        // SIGTERM at 9 s, release hangs, SIGKILL at 10 s.
        let mut v = killed_then(25_000.0);
        v.push(moment(A, 9_000.0, ev::STOP));
        let c = run(&v, &[], &history(&[A, B]));
        assert_eq!(c.handovers.len(), 1, "{:?}", c.handovers);
        let h = &c.handovers[0];
        assert_eq!((h.how.as_str(), h.handover_ms), ("stop", Some(16_020.0)));
        assert_eq!(c.losses[0].lab_action.as_deref(), Some("stop"));
    }

    #[test]
    fn etcd_history_disagreeing_with_the_records_fails_lease_exclusive() {
        let recs = clean_handover();
        // etcd says A held the lease again after B.
        let c = run(&recs, &[], &history(&[A, "", B, A, B]));
        assert_eq!(c.etcd_cross_check.outcome, CrossCheckOutcome::Mismatched);
        let r = exclusive_rule(&c, true);
        assert_eq!(r.status, RuleStatus::Failed);
        says(
            &r,
            "etcd's holders cpmlab-seed-a → cpmlab-seed-b → cpmlab-seed-a → cpmlab-seed-b, the candidates recorded acquisitions cpmlab-seed-a → cpmlab-seed-b",
        );
        // No history: degraded, not cross-checked ...
        let c = run(&recs, &[], &FinalRead::default());
        let r = exclusive_rule(&c, true);
        assert_eq!(r.status, RuleStatus::Degraded);
        says(&r, "the Lease's history was not read back");
        // ... or it could not be read, with why.
        let fin = FinalRead {
            lease_history_error: Some("etcd: context deadline exceeded".into()),
            ..FinalRead::default()
        };
        let c = run(&recs, &[], &fin);
        assert_eq!(c.etcd_cross_check.outcome, CrossCheckOutcome::HistoryError);
        let r = exclusive_rule(&c, true);
        assert_eq!(r.status, RuleStatus::Degraded);
        says(&r, "could not be read (etcd: context deadline exceeded)");
        // An overlap fails it whatever the history.
        let c = run(&split_brain(), &[], &FinalRead::default());
        assert_eq!(exclusive_rule(&c, true).status, RuleStatus::Failed);
    }

    #[test]
    fn no_candidate_skips_and_a_blind_candidate_lane_is_not_covered() {
        let c = run(&[], &[], &FinalRead::default());
        assert!(!c.run);
        for ran in [false, true] {
            for r in [
                exclusive_rule(&c, ran),
                kept_rule(&c, ran),
                handover_rule(&c, ran),
            ] {
                let want = if ran {
                    RuleStatus::NotCovered
                } else {
                    RuleStatus::Skipped
                };
                assert_eq!(r.status, want, "{}: {}", r.name, r.message);
            }
        }
        // Candidates that never led fail leader-kept.
        let mut v = vec![moment(A, 0.0, ev::START)];
        v.extend((0..5).map(|i| {
            lock(
                A,
                100.0 + 2_000.0 * i as f64,
                ev::GET,
                Outcome::Timeout,
                None,
            )
        }));
        let c = run(&v, &[], &history(&[]));
        let r = kept_rule(&c, true);
        assert_eq!(r.status, RuleStatus::Failed);
        says(
            &r,
            "no candidate ever believed it led (1 candidate(s), 5 lock request(s), 5 failed)",
        );
        assert_eq!(c.candidates[0].failed_lock_requests, 5);
        assert_eq!(c.longest_leaderless_ms, None);
    }

    #[test]
    fn a_stopped_leading_without_leading_changes_nothing() {
        // client-go calls OnStoppedLeading when its loop returns, led or
        // not: B's stop while A leads is no loss.
        let mut v = clean_handover();
        v.retain(|r| !(r.candidate.as_deref() == Some(B) && r.start_unix_ms >= T0 + 5_000.0));
        v.extend([
            moment(B, 5_000.0, ev::STOP),
            moment(B, 5_001.0, ev::STOPPED_LEADING),
        ]);
        let c = run(&v, &[], &history(&[A]));
        assert_eq!(c.loss_count, 1, "{:?}", c.losses);
        assert_eq!(c.losses[0].candidate, A);
        assert!(c.candidates[1].leading.is_empty());
        // A, stopped at 10 s with B gone: nobody could take over.
        assert_eq!(c.handovers[0].outcome, HandoverOutcome::NotJudged);
    }

    #[test]
    fn lease_check_round_trips_and_old_verdicts_have_none() {
        let c = run(&clean_handover(), &[], &history(&[A, B]));
        let j = serde_json::to_string(&c).unwrap();
        assert!(
            j.contains("\"etcd_cross_check\":{\"outcome\":\"matched\""),
            "{j}"
        );
        assert!(j.contains("\"outcome\":\"within\""), "{j}");
        assert_eq!(serde_json::from_str::<LeaseCheck>(&j).unwrap(), c);
        assert_eq!(
            LeaseCheck::default().etcd_cross_check.outcome,
            CrossCheckOutcome::NotRun
        );
    }
}

/// The rule judged through the whole verdict (`compute`), on synthetic
/// runs (`testutil`).
#[cfg(test)]
mod judged {
    use crate::testutil::*;
    use crate::*;

    #[test]
    fn verdict_lease_records_are_no_lane_and_informer_go_is_one() {
        let (recs, fin) = with_informer_go_and_candidates();
        let base = clean_run();
        let v0 = judge_plain(&base, &read_back(&base, Some(100)), None);
        let v = judge_plain(&recs, &fin, None);
        let go = &v.probes["informer-go/reused"];
        assert_eq!((go.requests, go.failed()), (3, 1), "{go:?}");
        assert!(
            !v.probes.keys().any(|k| k.starts_with("lease")),
            "{:?}",
            v.probes.keys()
        );
        assert_eq!(v.overall.requests, v0.overall.requests + 3);
        assert_eq!(
            v.overall.failed(),
            1,
            "the lock request's timeout is no API failure"
        );
        assert!(v
            .failed_requests
            .iter()
            .all(|f| !f.lane.starts_with("lease")));
        let in_phases: u64 = v.phases.iter().map(|p| p.requests).sum();
        assert_eq!(in_phases, v.overall.requests);
        assert_eq!(
            v.overall.unavailable_count, 1,
            "the broken watch only: {:?}",
            v.overall.unavailable
        );
        assert!(v
            .coverage
            .lanes
            .iter()
            .all(|l| !l.starts_with("lease") && !l.starts_with("informer")));
        // The informer-go rule judges its lane, after the informer rule;
        // the lease rules follow.
        assert!(v.informer_go.run && !v.informer.run);
        let names: Vec<&str> = v.rules.iter().map(|r| r.name.as_str()).collect();
        let at = |n: &str| names.iter().position(|x| *x == n).unwrap();
        assert!(at("informer") < at("informer-go"));
        assert!(at("informer-go") < at("lease-exclusive"));
        assert!(at("lease-exclusive") < at("leader-kept") && at("leader-kept") < at("handover"));
        assert_eq!(v.rule("informer").unwrap().status, RuleStatus::Skipped);
        assert_eq!(v.rule("informer-go").unwrap().status, RuleStatus::Failed);
        for r in ["lease-exclusive", "leader-kept", "handover"] {
            let r = v.rule(r).unwrap();
            assert_eq!(r.status, RuleStatus::Passed, "{}: {}", r.name, r.message);
        }
        assert_eq!(v.lease.candidates[0].failed_lock_requests, 2);
    }

    #[test]
    fn verdict_split_brain_fails_the_verdict_as_a_safety_rule() {
        use crate::lease::tests::{history, split_brain, A, B};
        let mut recs = clean_run();
        recs.extend(split_brain());
        let fin = FinalRead {
            lease_history: history(&[A, B]).lease_history,
            ..read_back(&recs, Some(100))
        };
        let v = judge_plain(&recs, &fin, None);
        assert_eq!(v.status, Status::Failed);
        assert!(
            v.reasons
                .iter()
                .any(|r| r.starts_with("lease-exclusive: 1 time(s) two candidates")),
            "{:?}",
            v.reasons
        );
        assert!(!is_availability_rule("lease-exclusive"));
        assert!(is_availability_rule("leader-kept") && is_availability_rule("handover"));
        // The plan lists the candidates but none left a record: not
        // covered, which fails the verdict unless the scenario accepts it.
        let base = clean_run();
        let plan = ProbePlan {
            probes: vec![ProbeKind::Lease, ProbeKind::InformerGo],
            modes: vec![ConnMode::Reused],
            rate: 10.0,
            timeout_ms: 10_000.0,
            write_rate: 0.0,
        };
        let v = judge_plain(&base, &read_back(&base, Some(100)), Some(&plan));
        for r in ["informer-go", "lease-exclusive", "leader-kept", "handover"] {
            assert_eq!(v.rule(r).unwrap().status, RuleStatus::NotCovered, "{r}");
        }
        assert_eq!(v.status, Status::Failed);
    }

    #[test]
    fn verdict_json_without_informer_go_and_lease_still_parses() {
        let (recs, fin) = with_informer_go_and_candidates();
        let v = judge_plain(&recs, &fin, None);
        assert!(v.lease.run && v.informer_go.run);
        let j = serde_json::to_string(&v).unwrap();
        assert_eq!(serde_json::from_str::<Verdict>(&j).unwrap(), v);
        // As a cpmlab before them wrote it: no informer_go, no lease, and
        // criteria without the lease fields.
        let mut old: serde_json::Value = serde_json::from_str(&j).unwrap();
        let o = old.as_object_mut().unwrap();
        assert!(o.remove("informer_go").is_some() && o.remove("lease").is_some());
        let c = o["criteria"].as_object_mut().unwrap();
        for f in ["lease_tolerance_ms", "renew_deadline_ms", "handover_ms"] {
            assert!(c.remove(f).is_some(), "{f}");
        }
        let back: Verdict = serde_json::from_value(old).unwrap();
        assert!(!back.lease.run && !back.informer_go.run);
        assert_eq!(back.criteria, Criteria::default());
        assert_eq!(back.informer, v.informer);
    }
}
