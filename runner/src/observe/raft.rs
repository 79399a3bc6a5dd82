//! `raft.ndjson`: every second, the leader's replication progress per
//! peer (`cpmlab_core::raft_progress`), by member name, with whether the
//! peer is a learner and how far behind the leader's commit it is. It
//! says which state a lagging member's progress is in (probe, replicate,
//! snapshot) and whether its `match` moves: what a stalled join is.

use serde_json::{json, Value};

use crate::etcd::ClusterView;
use crate::state::LabState;

pub const RAFT_FILE: &str = "raft.ndjson";

/// One line: the leader's status with its peers named, or why there is
/// none (no leader in the view, or its /debug/vars did not answer).
pub async fn sample(
    state: &LabState,
    view: &ClusterView,
    client: &cpmlab_core::raft_progress::Client,
    at: f64,
) -> Option<Value> {
    let leader = view.members.iter().find(|m| m.is_leader)?;
    let m = state.members.iter().find(|m| m.name == leader.name)?;
    let gw = state.seed(&m.seed)?.gateway.ip;
    let r = client
        .fetch(gw, &m.host, std::time::Duration::from_millis(800))
        .await;
    Some(line(state, view, &leader.name, at, r))
}

/// A peer's name: etcd's, or for a member added but not started yet
/// (etcd knows no name for it), the lab's member with its peer URL.
fn peer_name(state: &LabState, m: &crate::etcd::MemberView) -> String {
    if !m.name.is_empty() {
        return m.name.clone();
    }
    let planned = state
        .members
        .iter()
        .chain(state.migration.iter().flat_map(|g| &g.destination_members));
    planned
        .filter(|p| m.peer_urls.contains(&p.peer_url()))
        .map(|p| p.name.clone())
        .next()
        .unwrap_or_else(|| m.id.clone())
}

fn line(
    state: &LabState,
    view: &ClusterView,
    leader: &str,
    at: f64,
    r: Result<cpmlab_core::raft_progress::RaftStatus, String>,
) -> Value {
    let s = match r {
        Ok(s) => s,
        Err(e) => return json!({"at_unix_ms": at, "leader": leader, "error": e}),
    };
    let peers: serde_json::Map<String, Value> = s
        .progress
        .iter()
        .filter(|(id, _)| **id != s.id)
        .map(|(id, p)| {
            let m = view.members.iter().find(|m| m.id == *id);
            let name = m.map_or_else(|| id.clone(), |m| peer_name(state, m));
            (
                name,
                json!({
                    "match": p.matched,
                    "next": p.next,
                    "state": p.state.trim_start_matches("State").to_lowercase(),
                    "behind": s.commit.saturating_sub(p.matched),
                    "learner": m.is_some_and(|m| m.is_learner),
                }),
            )
        })
        .collect();
    json!({
        "at_unix_ms": at,
        "leader": leader,
        "term": s.term,
        "commit": s.commit,
        "applied": s.applied,
        "peers": peers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etcd::MemberView;

    fn member(id: &str, name: &str, learner: bool, leader: bool) -> MemberView {
        MemberView {
            id: id.into(),
            name: name.into(),
            seed: "seed-a".into(),
            is_learner: learner,
            is_leader: leader,
            healthy: true,
            ..MemberView::default()
        }
    }

    /// Peers by name, the leader itself left out, a learner marked, its
    /// lag against the leader's commit; an unanswered fetch is a line too.
    #[test]
    fn the_leaders_progress_is_named_per_peer() {
        let view = ClusterView {
            members: vec![
                member("a1", "seed-a-etcd-0", false, true),
                member("b1", "seed-b-etcd-0", true, false),
            ],
            leader: Some("a1".into()),
            error: None,
        };
        let vars = r#"{"raft.status": {"id":"a1","term":3,"vote":"a1","commit":500,"lead":"a1","raftState":"StateLeader","applied":500,"progress":{"a1":{"match":500,"next":501,"state":"StateReplicate"},"b1":{"match":120,"next":121,"state":"StateProbe"}},"leadtransferee":"0"}}"#;
        let s = cpmlab_core::raft_progress::parse(vars);
        let state = cpmlab_model::plan::sample_state();
        let l = line(&state, &view, "seed-a-etcd-0", 1.0, s);
        assert_eq!(l["peers"].as_object().unwrap().len(), 1, "{l}");
        let p = &l["peers"]["seed-b-etcd-0"];
        assert_eq!(p["state"], "probe");
        assert_eq!(p["behind"], 380);
        assert_eq!(p["learner"], true);
        let e = line(&state, &view, "seed-a-etcd-0", 2.0, Err("no answer".into()));
        assert_eq!(e["error"], "no answer");
    }

    /// A learner added but not started has no name in etcd: it is named
    /// by the lab's member with its peer URL (two such learners once
    /// shared the key "").
    #[test]
    fn a_learner_etcd_has_no_name_for_is_named_by_its_peer_url() {
        let mut state = cpmlab_model::plan::sample_state();
        let mut joining = state.members[0].clone();
        joining.name = "seed-b-etcd-1".into();
        joining.host = "seed-b-etcd-1.example".into();
        state.members.push(joining.clone());
        let mut unstarted = member("b2", "", true, false);
        unstarted.peer_urls = vec![joining.peer_url()];
        let unknown = member("b3", "", true, false);
        let view = ClusterView {
            members: vec![
                member("a1", "seed-a-etcd-0", false, true),
                unstarted,
                unknown,
            ],
            leader: Some("a1".into()),
            error: None,
        };
        let vars = r#"{"raft.status": {"id":"a1","term":3,"vote":"a1","commit":500,"lead":"a1","raftState":"StateLeader","applied":500,"progress":{"a1":{"match":500,"next":501,"state":"StateReplicate"},"b2":{"match":0,"next":1,"state":"StateProbe"},"b3":{"match":0,"next":1,"state":"StateProbe"}},"leadtransferee":"0"}}"#;
        let l = line(
            &state,
            &view,
            "seed-a-etcd-0",
            1.0,
            cpmlab_core::raft_progress::parse(vars),
        );
        let peers = l["peers"].as_object().unwrap();
        assert!(peers.contains_key("seed-b-etcd-1"), "{l}");
        assert!(peers.contains_key("b3"), "no lab member: its ID: {l}");
        assert!(!peers.contains_key(""), "{l}");
    }
}
