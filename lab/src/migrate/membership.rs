//! The etcd membership changes of a Live CPM, as a pure plan: which member
//! joins, is promoted, moves leadership or leaves, in which order. Two plans
//! (DESIGN.md): `six-member` (3 join, 6 voters, as the seed GEP text) and
//! `five-member` (2 join, 5 voters, so the source seed keeps quorum if the
//! seeds lose each other; the third joins once the API has moved). New
//! members join as learners, one at a time (etcd allows one learner), and
//! are promoted once caught up; members leave one at a time, learners
//! first, the leader last after leadership moved, each behind a quorum gate.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Plan {
    SixMember,
    FiveMember,
}

impl Plan {
    /// Destination members joined in DestinationEtcdPeersJoined.
    pub fn joining_early(self) -> usize {
        match self {
            Plan::SixMember => 3,
            Plan::FiveMember => 2,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    /// `member add --learner` through the existing cluster.
    AddLearner {
        member: String,
    },
    /// Start the member with `--initial-cluster-state=existing`.
    Start {
        member: String,
    },
    /// Wait until the learner's applied index is close to the leader's.
    AwaitCaughtUp {
        member: String,
    },
    Promote {
        member: String,
    },
    /// Every voter healthy and a leader elected, before a member leaves.
    QuorumGate,
    MoveLeader {
        to: String,
    },
    Remove {
        member: String,
    },
}

/// A member as the plan sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub is_learner: bool,
    pub is_leader: bool,
}

fn join(member: &str) -> Vec<Action> {
    vec![
        Action::AddLearner {
            member: member.into(),
        },
        Action::Start {
            member: member.into(),
        },
        Action::AwaitCaughtUp {
            member: member.into(),
        },
        Action::Promote {
            member: member.into(),
        },
    ]
}

/// DestinationEtcdPeersJoined: the destination members that join now.
pub fn join_actions(plan: Plan, destination: &[String]) -> Vec<Action> {
    destination
        .iter()
        .take(plan.joining_early())
        .flat_map(|d| join(d))
        .collect()
}

/// EtcdMigrationComplete: the rest of the destination joins (five-member),
/// then the source leaves: learners first, then followers, the leader last
/// once leadership moved to the first destination member.
pub fn shrink_actions(plan: Plan, source: &[Member], destination: &[String]) -> Vec<Action> {
    let mut a: Vec<Action> = destination
        .iter()
        .skip(plan.joining_early())
        .flat_map(|d| join(d))
        .collect();
    let mut leaving: Vec<&Member> = source.iter().collect();
    // learners (0), followers (1), the leader (2); stable by name within.
    leaving.sort_by_key(|m| {
        (
            if m.is_learner {
                0
            } else if m.is_leader {
                2
            } else {
                1
            },
            m.name.clone(),
        )
    });
    for m in leaving {
        a.push(Action::QuorumGate);
        if m.is_leader {
            a.push(Action::MoveLeader {
                to: destination.first().cloned().unwrap_or_default(),
            });
            a.push(Action::QuorumGate);
        }
        a.push(Action::Remove {
            member: m.name.clone(),
        });
    }
    a
}

/// EtcdMigrationComplete, one decision at a time from the live membership
/// (so a resumed or disturbed run picks up where the cluster is): the next
/// member of `leaving` to remove — learners first, then followers — or, when
/// only the leader is left to go, a MoveLeader to the first destination
/// voter. None once no member of `leaving` is in the cluster.
pub fn next_removal(live: &[Member], leaving: &[String], destination: &[String]) -> Option<Action> {
    let going: Vec<&Member> = live.iter().filter(|m| leaving.contains(&m.name)).collect();
    let pick = going
        .iter()
        .filter(|m| m.is_learner)
        .chain(going.iter().filter(|m| !m.is_learner && !m.is_leader))
        .min_by_key(|m| (!m.is_learner, m.name.clone()));
    if let Some(m) = pick {
        return Some(Action::Remove {
            member: m.name.clone(),
        });
    }
    let leader = going.iter().find(|m| m.is_leader)?;
    let to = destination
        .iter()
        .find(|d| live.iter().any(|m| &m.name == *d && !m.is_learner));
    Some(match to {
        Some(to) => Action::MoveLeader { to: to.clone() },
        // No destination voter to lead: removing the leader is all that is left.
        None => Action::Remove {
            member: leader.name.clone(),
        },
    })
}

/// Voting members after each action, given the voters before (for checks
/// and for the progress display).
pub fn voters_after(start: &[String], actions: &[Action]) -> Vec<Vec<String>> {
    let mut voters: Vec<String> = start.to_vec();
    actions
        .iter()
        .map(|a| {
            match a {
                Action::Promote { member } => voters.push(member.clone()),
                Action::Remove { member } => voters.retain(|v| v != member),
                _ => {}
            }
            voters.clone()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{p}-etcd-{i}")).collect()
    }

    fn source(leader: usize) -> Vec<Member> {
        names("seed-a", 3)
            .into_iter()
            .enumerate()
            .map(|(i, name)| Member {
                name,
                is_learner: false,
                is_leader: i == leader,
            })
            .collect()
    }

    fn full(plan: Plan, leader: usize) -> (Vec<Action>, Vec<Vec<String>>) {
        let dst = names("seed-b", 3);
        let mut all = join_actions(plan, &dst);
        all.extend(shrink_actions(plan, &source(leader), &dst));
        let v = voters_after(&names("seed-a", 3), &all);
        (all, v)
    }

    #[test]
    fn one_learner_at_a_time() {
        for plan in [Plan::SixMember, Plan::FiveMember] {
            let (all, _) = full(plan, 1);
            let mut learners = 0;
            for a in &all {
                match a {
                    Action::AddLearner { .. } => {
                        learners += 1;
                        assert_eq!(learners, 1, "{plan:?}: a second learner before promotion");
                    }
                    Action::Promote { .. } => learners -= 1,
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn six_member_peaks_at_six_and_ends_with_three_destination_voters() {
        let (all, v) = full(Plan::SixMember, 1);
        let after_join = &v[join_actions(Plan::SixMember, &names("seed-b", 3)).len() - 1];
        assert_eq!(after_join.len(), 6);
        let end = v.last().unwrap();
        assert_eq!(end, &names("seed-b", 3));
        assert!(v.iter().all(|x| x.len() >= 3), "never below 3 voters");
        assert_eq!(
            all.iter()
                .filter(|a| matches!(a, Action::Remove { .. }))
                .count(),
            3
        );
    }

    #[test]
    fn five_member_keeps_a_source_majority_until_the_api_moves() {
        let dst = names("seed-b", 3);
        let join = join_actions(Plan::FiveMember, &dst);
        let v = voters_after(&names("seed-a", 3), &join);
        let voters = v.last().unwrap();
        assert_eq!(voters.len(), 5);
        let in_source = voters.iter().filter(|m| m.starts_with("seed-a")).count();
        assert!(
            in_source * 2 > voters.len(),
            "source keeps quorum if the seeds part"
        );
        let (_, v) = full(Plan::FiveMember, 0);
        assert_eq!(v.iter().map(Vec::len).max(), Some(6), "briefly six");
        assert_eq!(v.last().unwrap(), &dst);
    }

    #[test]
    fn leader_leaves_last_after_leadership_moved_and_each_removal_is_gated() {
        let (all, _) = full(Plan::SixMember, 0);
        let removes: Vec<&str> = all
            .iter()
            .filter_map(|a| match a {
                Action::Remove { member } => Some(member.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(removes, ["seed-a-etcd-1", "seed-a-etcd-2", "seed-a-etcd-0"]);
        let mv = all
            .iter()
            .position(|a| matches!(a, Action::MoveLeader { .. }))
            .unwrap();
        let last_remove = all
            .iter()
            .rposition(|a| matches!(a, Action::Remove { .. }))
            .unwrap();
        assert!(mv < last_remove);
        assert_eq!(
            all[mv],
            Action::MoveLeader {
                to: "seed-b-etcd-0".into()
            }
        );
        for (i, a) in all.iter().enumerate() {
            if matches!(a, Action::Remove { .. }) {
                assert_eq!(all[i - 1], Action::QuorumGate, "removal {i} without a gate");
            }
        }
    }

    #[test]
    fn next_removal_follows_the_live_cluster() {
        let leaving = names("seed-a", 3);
        let dst = names("seed-b", 3);
        let mut live: Vec<Member> = source(0);
        live.extend(dst.iter().map(|n| Member {
            name: n.clone(),
            is_learner: false,
            is_leader: false,
        }));
        live[2].is_learner = true;
        let mut order = Vec::new();
        while let Some(a) = next_removal(&live, &leaving, &dst) {
            match &a {
                Action::Remove { member } => live.retain(|m| &m.name != member),
                Action::MoveLeader { to } => {
                    for m in live.iter_mut() {
                        m.is_leader = &m.name == to;
                    }
                }
                _ => unreachable!(),
            }
            order.push(a);
            assert!(order.len() < 10);
        }
        assert_eq!(
            order,
            vec![
                Action::Remove {
                    member: "seed-a-etcd-2".into()
                },
                Action::Remove {
                    member: "seed-a-etcd-1".into()
                },
                Action::MoveLeader {
                    to: "seed-b-etcd-0".into()
                },
                Action::Remove {
                    member: "seed-a-etcd-0".into()
                },
            ]
        );
        assert_eq!(live.len(), 3);
        // A leader that changed under us (killed, re-elected): decided afresh.
        let mut live = source(1);
        live.push(Member {
            name: "seed-b-etcd-0".into(),
            is_learner: false,
            is_leader: false,
        });
        assert_eq!(
            next_removal(&live, &leaving, &dst),
            Some(Action::Remove {
                member: "seed-a-etcd-0".into()
            })
        );
    }

    #[test]
    fn learners_leave_before_voters() {
        let mut src = source(2);
        src[1].is_learner = true;
        let acts = shrink_actions(Plan::SixMember, &src, &names("seed-b", 3));
        let first_remove = acts
            .iter()
            .find_map(|a| match a {
                Action::Remove { member } => Some(member.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(first_remove, "seed-a-etcd-1");
    }
}
