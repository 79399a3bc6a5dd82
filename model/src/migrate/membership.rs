//! The etcd membership decisions of a Live CPM, pure functions the flow
//! calls: how many members join before the API moves (the plan), which
//! member leaves next, and the quorum gate before each leaves. Two plans
//! (DESIGN.md): `six-member` (3 join, 6 voters, as the seed GEP text) and
//! `five-member` (2 join, 5 voters, so the source seed keeps quorum if the
//! seeds lose each other; the third joins once the API has moved). New
//! members join as learners, one at a time (etcd allows one learner), and
//! are promoted once caught up; members leave one at a time, learners
//! first, the leader last, each behind the gate. How the leader goes is
//! [`LeaderHandover`]: removed as any member (upstream's way) or after a
//! MoveLeader to a destination voter (the lab's earlier flow, kept to
//! compare).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Plan {
    SixMember,
    FiveMember,
    /// The GEP's "3-Member etcd Cluster" alternative: the cluster moves
    /// member by member, never above one member more than its size.
    Rolling,
    /// GEP-7's control plane migration, what Live CPM replaces: no cluster
    /// spans the seeds. The source API servers stop, the source's etcd is
    /// saved (`etcdctl snapshot save`) and stops, a new cluster is restored
    /// from the snapshot in the destination (`etcdctl snapshot restore`,
    /// `initial-cluster-state new`) — downtime by design.
    Classic,
    /// The GEP's "etcd Mirror Maker" alternative: no cluster spans the
    /// seeds. A new, empty cluster in the destination (`initial-cluster-state
    /// new`) is fed by `etcdctl make-mirror` from the source's (a full sync,
    /// then the source's watch, re-written key by key: the destination's
    /// revisions are its own); the destination API starts on it, DNS
    /// switches, the source API drains, the mirror stops once caught up,
    /// then the source's etcd stops.
    Mirror,
}

impl Plan {
    /// Destination members joined in DestinationEtcdPeersJoined (for
    /// `rolling`: exchanges made there, each one in and one out).
    ///
    /// `rolling` makes two of its three exchanges before the destination
    /// API starts, so that it starts on 1 source + 2 destination members:
    /// not three, because the source API servers talk only to their own
    /// seed's members (Gardener's etcd-main-client Service) and serve until
    /// the DNS switch has drained them, so one source member must stay until
    /// then; not one, because then the destination API would start on a
    /// single member of its own, the source would keep the majority while
    /// the clients move over, and two exchanges (the source leader's among
    /// them) would remain for after the switch. With two, the destination
    /// holds the majority when its API starts, the source API keeps a
    /// member, and the last exchange — the source leader's removal, the
    /// riskiest one — comes after the source API servers have drained, as
    /// in the other plans.
    pub fn joining_early(self) -> usize {
        match self {
            Plan::SixMember => 3,
            Plan::FiveMember => 2,
            Plan::Rolling => 2,
            // The new cluster: all of them, before the API starts.
            Plan::Classic | Plan::Mirror => 3,
        }
    }

    /// Whether the destination is a cluster of its own, sharing no member
    /// with the source's (`classic`, `mirror`): nothing spans the seeds, so
    /// their distance is no bar to it, and it needs the docker form.
    pub fn separate_cluster(self) -> bool {
        matches!(self, Plan::Classic | Plan::Mirror)
    }

    /// Whether the destination's new, empty cluster is fed by `etcdctl
    /// make-mirror` from the source's while both serve (`mirror`).
    pub fn mirrors(self) -> bool {
        matches!(self, Plan::Mirror)
    }

    /// Whether the destination is a new cluster restored from the source's
    /// snapshot (`classic`), rather than members joining the source's.
    pub fn restores(self) -> bool {
        matches!(self, Plan::Classic)
    }

    /// Whether a source member leaves for each destination member that
    /// joins (`rolling`), rather than all joining before any leaves.
    pub fn exchanges(self) -> bool {
        matches!(self, Plan::Rolling)
    }

    /// The plan's name as the CLI and scenario files spell it.
    pub fn name(self) -> &'static str {
        match self {
            Plan::SixMember => "six-member",
            Plan::FiveMember => "five-member",
            Plan::Rolling => "rolling",
            Plan::Classic => "classic",
            Plan::Mirror => "mirror",
        }
    }
}

/// How the source leader leaves the cluster.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum LeaderHandover {
    /// A plain MemberRemove of the leader, as etcd-druid's scale-down
    /// proposal does ("No explicit `MoveLeader` RPC is issued before
    /// removing the leader", gardener/etcd-druid pull request 1355,
    /// docs/proposals/07-scale-down.md) and etcd-backup-restore's
    /// RemoveMember (a plain `MemberRemove`): the removed leader stops
    /// about a second later (etcd's stop after its removal is applied)
    /// and the rest elect a leader.
    #[default]
    Remove,
    /// MoveLeader to a destination voter first, then remove the old leader
    /// as a follower (the lab's flow before; a write forwarded to the old
    /// leader during the transfer is dropped and fails after etcd's 7 s
    /// request timeout).
    MoveLeader,
}

impl LeaderHandover {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaderHandover::Remove => "remove",
            LeaderHandover::MoveLeader => "move-leader",
        }
    }
}

/// What the flow does next to shrink the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    MoveLeader { to: String },
    Remove { member: String },
}

/// A member as the plan sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub is_learner: bool,
    pub is_leader: bool,
}

/// EtcdMigrationComplete, one decision at a time from the live membership
/// (so a resumed or disturbed run picks up where the cluster is): the next
/// member of `leaving` to remove — learners first, then followers — and,
/// when only the leader is left to go, its removal (`Remove`) or first a
/// MoveLeader to the first destination voter (`MoveLeader`). None once no
/// member of `leaving` is in the cluster.
pub fn next_removal(
    live: &[Member],
    leaving: &[String],
    destination: &[String],
    handover: LeaderHandover,
) -> Option<Action> {
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
    if handover == LeaderHandover::Remove {
        return Some(Action::Remove {
            member: leader.name.clone(),
        });
    }
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

/// One move of the `rolling` plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exchange {
    /// This destination member joins next (as a learner, promoted once in
    /// sync), or finishes joining.
    Join(String),
    /// A source member leaves (or leadership moves first), as in
    /// [`next_removal`].
    Leave(Action),
}

/// The `rolling` plan's next move towards `target` destination voters, one
/// decision at a time from the live membership (so a resumed or disturbed
/// run picks up where the cluster is). One in, then one out: a destination
/// learner finishes its join first; while the cluster has more voters than
/// its size (`destination.len()`, the source's size), a source member
/// leaves (learners, then followers, the leader last with `handover`, as in
/// [`next_removal`]); else, below `target` destination voters, the next
/// destination member joins. None once `target` destination voters and no
/// surplus remain. The cluster never has more than its size plus one
/// voters, and never fewer than its size once an exchange has finished.
pub fn next_exchange(
    live: &[Member],
    leaving: &[String],
    destination: &[String],
    target: usize,
    handover: LeaderHandover,
) -> Option<Exchange> {
    let find = |name: &String| live.iter().find(|m| &m.name == name);
    if let Some(d) = destination
        .iter()
        .find(|d| find(d).is_some_and(|m| m.is_learner))
    {
        return Some(Exchange::Join(d.clone()));
    }
    let dest_voters = destination.iter().filter(|d| find(d).is_some()).count();
    let source = live.iter().filter(|m| leaving.contains(&m.name)).count();
    if source > 0 && source + dest_voters > destination.len() {
        return next_removal(live, leaving, destination, handover).map(Exchange::Leave);
    }
    if dest_voters < target.min(destination.len()) {
        return destination
            .iter()
            .find(|d| find(d).is_none())
            .map(|d| Exchange::Join(d.clone()));
    }
    None
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

    /// A whole migration as the flow makes it: `joining_early` members
    /// join (the voters after each promotion), the rest join
    /// in EtcdMigrationComplete, then `next_removal` until nothing is left
    /// to remove. The voters after every step.
    fn simulate(plan: Plan, leader: usize) -> Vec<Vec<String>> {
        simulate_with(plan, leader, LeaderHandover::MoveLeader)
    }

    fn simulate_with(plan: Plan, leader: usize, handover: LeaderHandover) -> Vec<Vec<String>> {
        let dst = names("seed-b", 3);
        let leaving = names("seed-a", 3);
        let mut live = source(leader);
        let mut voters_seen = vec![];
        let voters = |live: &[Member]| -> Vec<String> {
            live.iter()
                .filter(|m| !m.is_learner)
                .map(|m| m.name.clone())
                .collect()
        };
        // Added as a learner, promoted before the next one is added.
        let join = |live: &mut Vec<Member>, name: &String| {
            live.push(Member {
                name: name.clone(),
                is_learner: false,
                is_leader: false,
            });
        };
        for d in dst.iter().take(plan.joining_early()) {
            join(&mut live, d);
            voters_seen.push(voters(&live));
        }
        for d in dst.iter().skip(plan.joining_early()) {
            join(&mut live, d);
            voters_seen.push(voters(&live));
        }
        while let Some(a) = next_removal(&live, &leaving, &dst, handover) {
            match a {
                Action::Remove { member } => {
                    let was_leader = live.iter().any(|m| m.name == member && m.is_leader);
                    live.retain(|m| m.name != member);
                    // The rest elect one (here: the first voter).
                    if was_leader {
                        if let Some(m) = live.iter_mut().find(|m| !m.is_learner) {
                            m.is_leader = true;
                        }
                    }
                }
                Action::MoveLeader { to } => {
                    for m in live.iter_mut() {
                        m.is_leader = m.name == to;
                    }
                }
            }
            voters_seen.push(voters(&live));
            assert!(voters_seen.len() < 20);
        }
        voters_seen
    }

    /// The rolling plan as the flow runs it: exchanges up to
    /// `joining_early` destination voters in DestinationEtcdPeersJoined,
    /// then up to all in EtcdMigrationComplete. Each join is a learner added
    /// (one step) and promoted (the next). The voters and learners after
    /// every move, and the moves, per step.
    fn simulate_rolling(
        leader: usize,
        handover: LeaderHandover,
    ) -> (Vec<Vec<Member>>, Vec<Vec<Exchange>>) {
        let dst = names("seed-b", 3);
        let mut live = source(leader);
        let mut seen = vec![];
        let mut moves = vec![];
        for target in [Plan::Rolling.joining_early(), dst.len()] {
            let mut step = vec![];
            loop {
                let leaving: Vec<String> = live
                    .iter()
                    .filter(|m| m.name.starts_with("seed-a"))
                    .map(|m| m.name.clone())
                    .collect();
                let Some(x) = next_exchange(&live, &leaving, &dst, target, handover) else {
                    break;
                };
                match &x {
                    Exchange::Join(d) => match live.iter_mut().find(|m| &m.name == d) {
                        Some(m) => {
                            assert!(m.is_learner, "a voter is not joined again: {d}");
                            m.is_learner = false;
                        }
                        None => {
                            assert!(
                                !live.iter().any(|m| m.is_learner),
                                "etcd allows one learner"
                            );
                            live.push(Member {
                                name: d.clone(),
                                is_learner: true,
                                is_leader: false,
                            });
                        }
                    },
                    Exchange::Leave(Action::Remove { member }) => {
                        let was_leader = live.iter().any(|m| &m.name == member && m.is_leader);
                        live.retain(|m| &m.name != member);
                        if was_leader {
                            // The rest elect one (here: the first voter).
                            if let Some(m) = live.iter_mut().find(|m| !m.is_learner) {
                                m.is_leader = true;
                            }
                        }
                    }
                    Exchange::Leave(Action::MoveLeader { to }) => {
                        for m in live.iter_mut() {
                            m.is_leader = &m.name == to;
                        }
                    }
                }
                step.push(x);
                seen.push(live.clone());
                assert!(seen.len() < 30, "{seen:?}");
            }
            moves.push(step);
        }
        (seen, moves)
    }

    fn voters_in(live: &[Member], seed: &str) -> usize {
        live.iter()
            .filter(|m| !m.is_learner && m.name.starts_with(seed))
            .count()
    }

    #[test]
    fn rolling_exchanges_one_member_at_a_time_and_never_grows_past_four() {
        for handover in [LeaderHandover::Remove, LeaderHandover::MoveLeader] {
            for leader in 0..3 {
                let (seen, moves) = simulate_rolling(leader, handover);
                let voters = |l: &Vec<Member>| l.iter().filter(|m| !m.is_learner).count();
                assert!(seen.iter().all(|l| voters(l) <= 4), "{seen:?}");
                assert!(seen.iter().all(|l| voters(l) >= 3), "{seen:?}");
                assert!(seen
                    .iter()
                    .all(|l| l.iter().filter(|m| m.is_learner).count() <= 1));
                // DestinationEtcdPeersJoined: two exchanges (add, promote,
                // remove a follower), the source leader stays.
                let joined = &seen[moves[0].len() - 1];
                assert_eq!(voters_in(joined, "seed-a"), 1, "{joined:?}");
                assert_eq!(voters_in(joined, "seed-b"), 2, "{joined:?}");
                let kept = joined
                    .iter()
                    .find(|m| m.name.starts_with("seed-a"))
                    .unwrap();
                assert_eq!(
                    kept.name,
                    format!("seed-a-etcd-{leader}"),
                    "followers first"
                );
                assert!(kept.is_leader);
                let left: Vec<&Exchange> = moves[0]
                    .iter()
                    .filter(|x| matches!(x, Exchange::Leave(_)))
                    .collect();
                assert_eq!(left.len(), 2, "{:?}", moves[0]);
                // In before out: each removal follows a promotion.
                for (i, x) in moves[0].iter().enumerate() {
                    if matches!(x, Exchange::Leave(_)) {
                        assert!(
                            matches!(moves[0][i - 1], Exchange::Join(_)),
                            "{:?}",
                            moves[0]
                        );
                    }
                }
                // EtcdMigrationComplete: the third joins, then the leader goes.
                let end = seen.last().unwrap();
                let mut names_end: Vec<String> = end.iter().map(|m| m.name.clone()).collect();
                names_end.sort();
                assert_eq!(names_end, names("seed-b", 3), "{handover:?}");
                let last_out = moves[1]
                    .iter()
                    .rev()
                    .find_map(|x| match x {
                        Exchange::Leave(Action::Remove { member }) => Some(member.clone()),
                        _ => None,
                    })
                    .unwrap();
                assert_eq!(last_out, format!("seed-a-etcd-{leader}"));
                let moved = moves[1]
                    .iter()
                    .any(|x| matches!(x, Exchange::Leave(Action::MoveLeader { .. })));
                assert_eq!(moved, handover == LeaderHandover::MoveLeader);
            }
        }
    }

    #[test]
    fn rolling_picks_up_from_the_live_cluster() {
        let dst = names("seed-b", 3);
        let leaving = names("seed-a", 3);
        let mut live = source(0);
        // A learner half-way (a run killed before its promotion): finished first.
        live.push(Member {
            name: "seed-b-etcd-0".into(),
            is_learner: true,
            is_leader: false,
        });
        assert_eq!(
            next_exchange(&live, &leaving, &dst, 2, LeaderHandover::Remove),
            Some(Exchange::Join("seed-b-etcd-0".into()))
        );
        // Promoted: four voters, one out before the next comes in.
        live[3].is_learner = false;
        assert_eq!(
            next_exchange(&live, &leaving, &dst, 2, LeaderHandover::Remove),
            Some(Exchange::Leave(Action::Remove {
                member: "seed-a-etcd-1".into()
            }))
        );
        // The target reached: nothing more in this step.
        let live2: Vec<Member> = live
            .iter()
            .filter(|m| m.name != "seed-a-etcd-1" && m.name != "seed-a-etcd-2")
            .cloned()
            .chain([Member {
                name: "seed-b-etcd-1".into(),
                is_learner: false,
                is_leader: false,
            }])
            .collect();
        let leaving2 = vec!["seed-a-etcd-0".to_string()];
        assert_eq!(
            next_exchange(&live2, &leaving2, &dst, 2, LeaderHandover::Remove),
            None
        );
        assert_eq!(
            next_exchange(&live2, &leaving2, &dst, 3, LeaderHandover::Remove),
            Some(Exchange::Join("seed-b-etcd-2".into()))
        );
        // Leadership elected in the destination: every source member is a
        // follower, and the last one goes as any follower.
        let mut live3 = live2.clone();
        for m in live3.iter_mut() {
            m.is_leader = m.name == "seed-b-etcd-0";
        }
        live3.push(Member {
            name: "seed-b-etcd-2".into(),
            is_learner: false,
            is_leader: false,
        });
        assert_eq!(
            next_exchange(&live3, &leaving2, &dst, 3, LeaderHandover::MoveLeader),
            Some(Exchange::Leave(Action::Remove {
                member: "seed-a-etcd-0".into()
            }))
        );
        // All moved: done.
        live3.retain(|m| m.name != "seed-a-etcd-0");
        assert_eq!(
            next_exchange(&live3, &[], &dst, 3, LeaderHandover::Remove),
            None
        );
    }

    #[test]
    fn only_rolling_exchanges_and_every_plan_has_its_name() {
        assert!(Plan::Rolling.exchanges());
        assert!(!Plan::SixMember.exchanges() && !Plan::FiveMember.exchanges());
        assert!(Plan::Classic.restores() && !Plan::Classic.exchanges());
        for p in [
            Plan::SixMember,
            Plan::FiveMember,
            Plan::Rolling,
            Plan::Classic,
            Plan::Mirror,
        ] {
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
            assert_eq!(
                <Plan as clap::ValueEnum>::from_str(p.name(), false).unwrap(),
                p
            );
        }
    }

    #[test]
    fn mirror_is_a_separate_cluster_fed_by_the_mirror_not_a_restore() {
        assert!(Plan::Mirror.mirrors() && Plan::Mirror.separate_cluster());
        assert!(!Plan::Mirror.restores() && !Plan::Mirror.exchanges());
        assert!(Plan::Classic.separate_cluster() && !Plan::Classic.mirrors());
        for p in [Plan::SixMember, Plan::FiveMember, Plan::Rolling] {
            assert!(!p.separate_cluster() && !p.mirrors(), "{p:?}");
        }
        // The whole new cluster is up before the destination API starts.
        assert_eq!(Plan::Mirror.joining_early(), 3);
    }

    #[test]
    fn six_member_peaks_at_six_and_ends_with_three_destination_voters() {
        let v = simulate(Plan::SixMember, 1);
        assert_eq!(v[Plan::SixMember.joining_early() - 1].len(), 6);
        assert_eq!(v.last().unwrap(), &names("seed-b", 3));
        assert!(v.iter().all(|x| x.len() >= 3), "never below 3 voters");
    }

    #[test]
    fn remove_takes_the_leader_out_without_moving_leadership_first() {
        for plan in [Plan::SixMember, Plan::FiveMember] {
            let v = simulate_with(plan, 1, LeaderHandover::Remove);
            assert_eq!(v.last().unwrap(), &names("seed-b", 3), "{plan:?}");
            assert!(v.iter().all(|x| x.len() >= 3), "never below 3 voters");
        }
        // Only the leader is left to go: it is removed as it is.
        let mut live = source(0);
        live.retain(|m| m.is_leader);
        live.extend(names("seed-b", 3).into_iter().map(|name| Member {
            name,
            is_learner: false,
            is_leader: false,
        }));
        let leaving = names("seed-a", 3);
        let dst = names("seed-b", 3);
        assert_eq!(
            next_removal(&live, &leaving, &dst, LeaderHandover::Remove),
            Some(Action::Remove {
                member: "seed-a-etcd-0".into()
            })
        );
        assert_eq!(
            next_removal(&live, &leaving, &dst, LeaderHandover::MoveLeader),
            Some(Action::MoveLeader {
                to: "seed-b-etcd-0".into()
            })
        );
        assert_eq!(LeaderHandover::default(), LeaderHandover::Remove);
    }

    #[test]
    fn five_member_keeps_a_source_majority_until_the_api_moves() {
        let v = simulate(Plan::FiveMember, 0);
        let before_api = &v[Plan::FiveMember.joining_early() - 1];
        assert_eq!(before_api.len(), 5);
        let in_source = before_api
            .iter()
            .filter(|m| m.starts_with("seed-a"))
            .count();
        assert!(
            in_source * 2 > before_api.len(),
            "source keeps quorum if the seeds part"
        );
        assert_eq!(v.iter().map(Vec::len).max(), Some(6), "briefly six");
        assert_eq!(v.last().unwrap(), &names("seed-b", 3));
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
        while let Some(a) = next_removal(&live, &leaving, &dst, LeaderHandover::MoveLeader) {
            match &a {
                Action::Remove { member } => live.retain(|m| &m.name != member),
                Action::MoveLeader { to } => {
                    for m in live.iter_mut() {
                        m.is_leader = &m.name == to;
                    }
                }
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
            next_removal(&live, &leaving, &dst, LeaderHandover::MoveLeader),
            Some(Action::Remove {
                member: "seed-a-etcd-0".into()
            })
        );
    }

    #[test]
    fn learners_leave_before_voters() {
        let mut live = source(2);
        live[1].is_learner = true;
        assert_eq!(
            next_removal(
                &live,
                &names("seed-a", 3),
                &names("seed-b", 3),
                LeaderHandover::Remove
            ),
            Some(Action::Remove {
                member: "seed-a-etcd-1".into()
            })
        );
    }
}
