//! Known etcd hazards a scenario may excuse, each as narrowly as the records
//! allow. A failed request is excused only when it fits one of the hazards
//! the scenario names; the run without the excused requests is judged again
//! and must pass as a whole.
//!
//! - `move-leader`: raft drops a proposal that reaches a leader while it
//!   hands leadership over; a write forwarded to it in that window waits out
//!   etcd's request timeout (7 s) and the API answers etcd's error. Excused:
//!   a write the *server* failed with `etcdserver: request timed out` that
//!   started inside the MoveLeader band (from a second before the "moving
//!   leadership" note to 200 ms after "leadership moved").
//! - `killed-member`: a member SIGKILLed under load fails the writes in
//!   flight through it. Excused: a write running at the kill (started at
//!   most a probe timeout before it, or within a second after, ended after).
//! - `leader-election`: a SIGKILLed leader leaves the cluster without one
//!   until the followers' election timeout ran out and a vote was won.
//!   Excused: any request overlapping [kill, kill + 3 s].

use crate::probe::record::{LabEvent, Outcome, ProbeKind, Record};
use crate::scenario::Hazard;

/// Two election timeouts (the randomised bound) and a second for the vote.
pub const ELECTION_BOUND_MS: f64 = 3_000.0;

/// The times hazards happened in a run, from its events.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Hazards {
    /// (start, end) of each leadership move.
    pub move_leader: Vec<(f64, f64)>,
    /// Members SIGKILLed (unix ms).
    pub kills: Vec<f64>,
    /// Leaders SIGKILLed (unix ms).
    pub leader_kills: Vec<f64>,
}

/// The name a kill event carries; the runner writes it, this reads it.
pub const KILL_EVENT: &str = "kill member";
/// Marks a killed member that led the cluster.
pub const LEADER_MARK: &str = "(leader)";

impl Hazards {
    pub fn from_events(events: &[LabEvent]) -> Hazards {
        let mut h = Hazards::default();
        let mut start = None;
        for e in events {
            if e.kind == "note" && e.name.starts_with("moving leadership") {
                start = Some(e.at_unix_ms);
            }
            if e.kind == "note" && e.name.starts_with("leadership moved") {
                if let Some(s) = start.take() {
                    h.move_leader.push((s, e.at_unix_ms));
                }
            }
            if e.kind == "fault" && e.name.starts_with(KILL_EVENT) {
                h.kills.push(e.at_unix_ms);
                if e.name.contains(LEADER_MARK) {
                    h.leader_kills.push(e.at_unix_ms);
                }
            }
        }
        h
    }

    /// Which named hazard excuses a failed request, if any.
    pub fn excuse(&self, r: &Record, allowed: &[Hazard], probe_timeout_ms: f64) -> Option<Hazard> {
        if r.outcome == Outcome::Ok {
            return None;
        }
        let t = r.start_unix_ms;
        let end = t + r.duration_ms;
        let write = r.probe == ProbeKind::Write && r.event.is_none();
        let etcd_timeout = r.outcome == Outcome::Http
            && r.error
                .as_deref()
                .is_some_and(|e| e.contains("etcdserver: request timed out"));
        if allowed.contains(&Hazard::MoveLeader)
            && write
            && etcd_timeout
            && self
                .move_leader
                .iter()
                .any(|(a, b)| t >= a - 1_000.0 && t <= b + 200.0)
        {
            return Some(Hazard::MoveLeader);
        }
        if allowed.contains(&Hazard::KilledMember)
            && write
            && self
                .kills
                .iter()
                .any(|k| t >= k - probe_timeout_ms && t <= k + 1_000.0 && end >= *k)
        {
            return Some(Hazard::KilledMember);
        }
        if allowed.contains(&Hazard::LeaderElection)
            && self
                .leader_kills
                .iter()
                .any(|k| t <= k + ELECTION_BOUND_MS && end >= *k)
        {
            return Some(Hazard::LeaderElection);
        }
        None
    }
}

pub fn hazard_name(h: Hazard) -> &'static str {
    match h {
        Hazard::MoveLeader => "move-leader",
        Hazard::KilledMember => "killed-member",
        Hazard::LeaderElection => "leader-election",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::record::ConnMode;

    fn rec(probe: ProbeKind, t: f64, d: f64, outcome: Outcome, error: Option<&str>) -> Record {
        Record {
            seq: 1,
            probe,
            mode: ConnMode::New,
            start_unix_ms: t,
            start_mono_ms: 0.0,
            duration_ms: d,
            outcome,
            http_status: None,
            seed: None,
            server: None,
            addr: None,
            error: error.map(String::from),
            value: None,
            rv: None,
            event: None,
            retry_of: None,
        }
    }

    fn ev(kind: &str, name: &str, at: f64) -> LabEvent {
        LabEvent {
            at_unix_ms: at,
            end_unix_ms: None,
            kind: kind.into(),
            name: name.into(),
            detail: String::new(),
        }
    }

    #[test]
    fn each_hazard_excuses_only_what_it_explains() {
        let h = Hazards::from_events(&[
            ev("note", "moving leadership from a to b", 10_000.0),
            ev("note", "leadership moved from a to b", 10_500.0),
            ev("fault", "kill member seed-a-etcd-1 (leader)", 50_000.0),
        ]);
        assert_eq!(h.move_leader, vec![(10_000.0, 10_500.0)]);
        assert_eq!(h.leader_kills, vec![50_000.0]);
        let all = [
            Hazard::MoveLeader,
            Hazard::KilledMember,
            Hazard::LeaderElection,
        ];
        let timeout = rec(
            ProbeKind::Write,
            10_200.0,
            7_000.0,
            Outcome::Http,
            Some("etcdserver: request timed out"),
        );
        assert_eq!(h.excuse(&timeout, &all, 10_000.0), Some(Hazard::MoveLeader));
        assert_eq!(h.excuse(&timeout, &[Hazard::KilledMember], 10_000.0), None);
        // The client's own timeout is not etcd's.
        let client = rec(ProbeKind::Write, 10_200.0, 2_000.0, Outcome::Timeout, None);
        assert_eq!(h.excuse(&client, &[Hazard::MoveLeader], 10_000.0), None);
        // A read during the election after the leader kill.
        let read = rec(ProbeKind::Get, 51_000.0, 500.0, Outcome::Http, None);
        assert_eq!(h.excuse(&read, &all, 2_000.0), Some(Hazard::LeaderElection));
        let late = rec(ProbeKind::Get, 54_000.0, 500.0, Outcome::Http, None);
        assert_eq!(h.excuse(&late, &all, 2_000.0), None);
        let ok = rec(ProbeKind::Get, 51_000.0, 5.0, Outcome::Ok, None);
        assert_eq!(h.excuse(&ok, &all, 2_000.0), None);
    }
}
