//! Timeline actions against a running lab: faults on containers (resolved
//! from roles at the moment they fire), links and the migration. Each
//! fault is recorded as a lab event in the probe run, so the report and the
//! hazard rules see it.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use super::child::{args, Cpmlab};
use crate::errors::Cancel;
use crate::probe::run::{now_unix_ms, record_lab_event};
use crate::provider::{Provider, Signal, WorkloadState};
use crate::scenario::check::{Action, Role, TargetRef};
use crate::scenario::{LinkSpec, MigrateAction};
use crate::state::LabDir;
use crate::verdict::excuse::{KILL_EVENT, LEADER_MARK};

/// An action on a seed's leader-election candidate: a command to the probe
/// agent through the run's control file (the agent records it as a lease
/// event), and a lab event for the report.
fn candidate(dir: &LabDir, action: &Action, seed: &str) -> Result<String> {
    use crate::probe::clientgo::{control, CandidateAction as A};
    let act = match action {
        Action::Kill(_) => A::Kill,
        Action::Stop(_) => A::Stop,
        Action::Pause(_) => A::Pause,
        Action::Unpause(_) => A::Resume,
        _ => A::Start,
    };
    let run = dir
        .load()?
        .probe_run
        .context("no probe run: candidates run with the probes")?;
    control(&run, seed, act)?;
    let name = format!("{} candidate {seed}", act.as_str());
    let kind = if matches!(act, A::Start | A::Stop) {
        "note"
    } else {
        "fault"
    };
    record_lab_event(dir, kind, &name, "timeline", now_unix_ms(), None);
    Ok(name)
}

/// A container an action hits, with what it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub container: String,
    /// e.g. `seed-a-etcd-1 (leader)`.
    pub what: String,
    pub member: bool,
    pub leader: bool,
    /// A member's seed: whose API servers talk to it (the verdict's
    /// `killed-member` evidence).
    pub seed: Option<String>,
}

/// Finds the container a target means now.
pub async fn resolve(state_root: &Path, lab: &str, t: &TargetRef) -> Result<Hit> {
    let (_, state) = crate::status::load_lab(state_root, lab)?;
    match t {
        TargetRef::Candidate(seed) => {
            anyhow::bail!("candidate {seed} is a process of the probe agent, not a container")
        }
        TargetRef::Gardenlet(seed) => {
            let s = state
                .seed(seed)
                .with_context(|| format!("no seed `{seed}`"))?;
            let g = s.gardenlet.as_ref().with_context(|| {
                format!("seed `{seed}` has no gardenlet (a lab made before the garden)")
            })?;
            Ok(Hit {
                container: g.container.clone(),
                what: format!("gardenlet of {seed}"),
                member: false,
                leader: false,
                seed: None,
            })
        }
        TargetRef::Garden(part) => {
            let g = state
                .garden
                .as_ref()
                .context("the lab has no garden (made before the garden)")?;
            let c = match part {
                crate::scenario::GardenPart::Api => &g.kube_apiserver,
                crate::scenario::GardenPart::GardenerApiserver => &g.gardener_apiserver,
                crate::scenario::GardenPart::Etcd => &g.etcd,
            };
            Ok(Hit {
                container: c.container.clone(),
                what: format!("garden {}", part.as_str()),
                member: false,
                leader: false,
                seed: None,
            })
        }
        TargetRef::Gateway(seed) => {
            let s = state
                .seed(seed)
                .with_context(|| format!("no seed `{seed}`"))?;
            Ok(Hit {
                container: s.gateway.container.clone(),
                what: format!("gateway of {seed}"),
                member: false,
                leader: false,
                seed: None,
            })
        }
        TargetRef::Api { seed, index } => {
            let mut reps: Vec<_> = state.apiservers_of(seed).collect();
            reps.sort_by(|a, b| a.name.cmp(&b.name));
            let r = reps.get(*index).with_context(|| {
                format!(
                    "`{seed}` runs {} API replicas now, no index {index}",
                    reps.len()
                )
            })?;
            Ok(Hit {
                container: r.container.clone(),
                what: format!("API replica {}", r.name),
                member: false,
                leader: false,
                seed: None,
            })
        }
        TargetRef::Member { seed, index } => {
            let mut ms: Vec<_> = state.members_of(seed).collect();
            ms.sort_by(|a, b| a.name.cmp(&b.name));
            let m = ms.get(*index).with_context(|| {
                format!("`{seed}` holds {} members now, no index {index}", ms.len())
            })?;
            let leader = leader_name(state_root, lab).await.as_deref() == Some(&m.name);
            Ok(Hit {
                container: m.container.clone(),
                what: format!(
                    "{}{}",
                    m.name,
                    if leader {
                        format!(" {LEADER_MARK}")
                    } else {
                        String::new()
                    }
                ),
                member: true,
                leader,
                seed: Some(m.seed.clone()),
            })
        }
        TargetRef::MemberRole { role, seed } => {
            let view = crate::status::etcd_view(state_root, lab, ROLE_TIMEOUT).await?;
            let pick = view.members.iter().filter(|m| {
                seed.as_ref().is_none_or(|s| &m.seed == s)
                    && match role {
                        Role::Leader => m.is_leader,
                        Role::Follower => !m.is_leader && !m.is_learner && m.healthy,
                        Role::Learner => m.is_learner,
                    }
            });
            let m = pick.min_by(|a, b| a.name.cmp(&b.name)).with_context(|| {
                format!(
                    "no {t} now (members: {})",
                    view.members
                        .iter()
                        .map(|m| format!(
                            "{}{}{}",
                            m.name,
                            if m.is_leader { " leader" } else { "" },
                            if m.is_learner { " learner" } else { "" }
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            let member = state
                .members
                .iter()
                .find(|s| s.name == m.name)
                .with_context(|| format!("member {} is not in the lab's state", m.name))?;
            Ok(Hit {
                container: member.container.clone(),
                what: format!(
                    "{}{}",
                    m.name,
                    if m.is_leader {
                        format!(" {LEADER_MARK}")
                    } else {
                        String::new()
                    }
                ),
                member: true,
                leader: m.is_leader,
                seed: Some(member.seed.clone()),
            })
        }
    }
}

/// How long a member may take to say whom it follows when a fault is aimed
/// by role: the migration goes on meanwhile, so a slow answer lands the
/// fault later than the timeline says (the whole `status`, which also waits
/// on draining API servers, once made it 4 s late).
const ROLE_TIMEOUT: Duration = Duration::from_secs(1);

async fn leader_name(state_root: &Path, lab: &str) -> Option<String> {
    crate::status::etcd_view(state_root, lab, ROLE_TIMEOUT)
        .await
        .ok()?
        .leader
}

/// `link set` arguments for a link spec.
pub fn link_set_args(l: &LinkSpec, seed: Option<u64>) -> Vec<String> {
    let mut a = args(&["link", "set", &l.between]);
    let mut opt = |flag: &str, v: &Option<String>| {
        if let Some(v) = v {
            a.push(flag.into());
            a.push(v.clone());
        }
    };
    opt("--delay", &l.delay);
    opt("--jitter", &l.jitter);
    opt("--loss", &l.loss);
    opt("--rate", &l.rate);
    if let Some(d) = l.distribution {
        a.push("--distribution".into());
        a.push(d.as_str().into());
    }
    if let Some(d) = l.direction {
        a.push("--direction".into());
        a.push(d.flag().into());
    }
    if let Some(b) = l.loss_by {
        a.push("--loss-by".into());
        a.push(b.flag().into());
    }
    if let Some(s) = seed {
        a.push("--seed".into());
        a.push(s.to_string());
    }
    a
}

/// Runs one action other than `migrate` (the runner owns the migration
/// process); returns what it hit.
pub async fn perform(
    provider: &dyn Provider,
    cpm: &Cpmlab,
    dir: &LabDir,
    action: &Action,
    cancel: &Cancel,
) -> Result<String> {
    // Stamped when the action is done, not when it fired: finding a role's
    // member asks every member, which takes seconds on a loaded machine,
    // and the hazards' windows are measured from this time.
    let fault = |verb: &str, hit: &Hit, at: f64| {
        let name = if verb == "kill" && hit.member {
            format!("{KILL_EVENT} {}", hit.what)
        } else {
            format!("{verb} {}", hit.what)
        };
        let detail = match &hit.seed {
            Some(seed) => format!("timeline seed={seed}"),
            None => "timeline".to_string(),
        };
        record_lab_event(dir, "fault", &name, &detail, at, None);
        format!("{verb} {} ({})", hit.what, hit.container)
    };
    match action {
        Action::Kill(t)
        | Action::Stop(t)
        | Action::Pause(t)
        | Action::Unpause(t)
        | Action::Restart(t) => {
            if let TargetRef::Candidate(seed) = t {
                return candidate(dir, action, seed);
            }
            let hit = resolve(&cpm.state_root, &cpm.lab, t).await?;
            let c = &hit.container;
            let at = now_unix_ms();
            let verb = match action {
                Action::Kill(_) => {
                    provider.signal(c, Signal::Kill).await?;
                    "kill"
                }
                Action::Stop(_) => {
                    // Held first: the kubelet must not start it again.
                    super::kubelet::hold(dir, c)?;
                    provider.signal(c, Signal::Kill).await?;
                    "stop"
                }
                Action::Pause(_) => {
                    provider.freeze(c, true).await?;
                    "pause"
                }
                Action::Unpause(_) => {
                    provider.freeze(c, false).await?;
                    "unpause"
                }
                _ => {
                    // Started again as a pod comes back: with its routes.
                    super::kubelet::release(dir, c)?;
                    let state = dir.load()?;
                    match provider.workload_state(c).await? {
                        WorkloadState::Running => {
                            provider.stop(c, Duration::ZERO).await?;
                            provider.start(&state, c).await?
                        }
                        WorkloadState::Paused => provider.freeze(c, false).await?,
                        // A Deployment's replica scaled away by `kill`
                        // (the kind form's gardenlet) has no pod: starting
                        // it scales it back. A removed container stays gone.
                        WorkloadState::Missing => provider
                            .start(&state, c)
                            .await
                            .with_context(|| format!("{c} is gone"))?,
                        WorkloadState::Stopped | WorkloadState::Created => {
                            provider.start(&state, c).await?
                        }
                    }
                    "restart"
                }
            };
            Ok(fault(verb, &hit, at))
        }
        Action::Delete { target, grace } => {
            let hit = resolve(&cpm.state_root, &cpm.lab, target).await?;
            let c = &hit.container;
            let at = now_unix_ms();
            // Held while it stops: the new pod's container is started here,
            // once the old one is gone, not by the kubelet's restart.
            super::kubelet::hold(dir, c)?;
            let stopped = provider.stop(c, *grace).await;
            super::kubelet::release(dir, c)?;
            stopped.with_context(|| format!("stopping {c} (SIGTERM, SIGKILL after {grace:?})"))?;
            let state = dir.load()?;
            provider.start(&state, c).await?;
            Ok(fault("delete", &hit, at))
        }
        Action::Partition(pair) | Action::Heal(pair) => {
            let verb = if matches!(action, Action::Partition(_)) {
                "partition"
            } else {
                "heal"
            };
            let d = cpm.run(&args(&["link", verb, pair]), cancel).await?;
            anyhow::ensure!(d.ok(), "cpmlab link {verb} {pair}: {}", d.error_line());
            Ok(format!("{verb} {pair}"))
        }
        Action::Link(l) => {
            let d = cpm.run(&link_set_args(l, None), cancel).await?;
            anyhow::ensure!(d.ok(), "cpmlab link set {}: {}", l.between, d.error_line());
            Ok(format!("link {} set", l.between))
        }
        Action::Migrate(m) => anyhow::bail!(
            "migrate {} is run by the runner",
            match m {
                MigrateAction::Resume => "--resume",
                MigrateAction::Abort => "--abort",
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::LinkSpec;

    /// Every field of a scenario's link reaches `link set` as its flag:
    /// `loss_by` once did not, and a grid of the kernel's loss ran the
    /// delay line's instead. Fields are enumerated through serde, so a
    /// field added later is checked too.
    #[test]
    fn every_link_field_reaches_link_set() {
        let l = LinkSpec {
            between: "seed-a:seed-b".into(),
            direction: Some(crate::link::profile::Direction::AToB),
            delay: Some("30ms".into()),
            jitter: Some("2ms".into()),
            distribution: Some(crate::link::profile::Distribution::Pareto),
            loss: Some("0.5%".into()),
            loss_by: Some(crate::link::profile::LossBy::Kernel),
            rate: Some("100mbit".into()),
        };
        let a = link_set_args(&l, Some(7));
        let fields = serde_json::to_value(&l).unwrap();
        for (k, v) in fields.as_object().unwrap() {
            if k == "between" {
                assert_eq!(a[2], "seed-a:seed-b");
                continue;
            }
            let flag = format!("--{}", k.replace('_', "-"));
            let at = a
                .iter()
                .position(|x| *x == flag)
                .unwrap_or_else(|| panic!("{k} is not passed: {a:?}"));
            assert_eq!(Some(a[at + 1].as_str()), v.as_str(), "{k}: {a:?}");
        }
        assert!(a.ends_with(&["--seed".into(), "7".into()]), "{a:?}");
    }
}
