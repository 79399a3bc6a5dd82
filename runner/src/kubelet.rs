//! The kubelet's part in a docker-form run: a member or API replica whose
//! container stopped (killed, crashed) comes back as its pod's container
//! would, with the kubelet's restart backoff — at once the first time, then
//! after 10 s, doubling up to 5 min (k8s.io/kubernetes pkg/kubelet:
//! backOffPeriod 10 s, MaxContainerBackOff 300 s) — and the seed's gateway
//! is told of the stop and of the start (its endpoint leaves at once: a pod
//! whose container is not running is not ready; it comes back after its
//! readiness probe passed). A container the scenario `stop`ped is left
//! alone, as a pod whose node is gone; so are members that left etcd and
//! replicas being drained (their pods are deleted).
//!
//! The kind form has the real kubelet.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::errors::Cancel;
use crate::probe::run::{now_unix_ms, record_lab_event};
use crate::provider::{Provider, WorkloadState};
use crate::state::LabDir;

/// The kubelet's first restart delay and its cap.
pub const BACKOFF_INITIAL: Duration = Duration::from_secs(10);
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// How long the kubelet waits before the `n`th restart (0-based): none for
/// the first, then 10 s doubling to 5 min.
pub fn backoff(n: u32) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    BACKOFF_INITIAL
        .saturating_mul(1u32 << (n - 1).min(16))
        .min(BACKOFF_MAX)
}

/// The file of containers the kubelet leaves stopped (one per line).
fn held_file(dir: &LabDir) -> std::path::PathBuf {
    dir.root.join("kubelet-held")
}

/// Marks `container` as stopped for good (the scenario's `stop`).
pub fn hold(dir: &LabDir, container: &str) -> std::io::Result<()> {
    let mut all = held(dir);
    all.insert(container.to_string());
    let text: String = all.iter().map(|c| format!("{c}\n")).collect();
    std::fs::write(held_file(dir), text)
}

/// Lets the kubelet restart `container` again (the scenario's `restart`).
pub fn release(dir: &LabDir, container: &str) -> std::io::Result<()> {
    let mut all = held(dir);
    if all.remove(container) {
        let text: String = all.iter().map(|c| format!("{c}\n")).collect();
        std::fs::write(held_file(dir), text)?;
    }
    Ok(())
}

pub fn held(dir: &LabDir) -> BTreeSet<String> {
    std::fs::read_to_string(held_file(dir))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// One container the kubelet follows.
#[derive(Default)]
struct Followed {
    restarts: u32,
    /// Seen stopped since (a stop is believed on the second look, as the
    /// kubelet's relist does, so that a member the migration removes from
    /// the state just before stopping it is not started again).
    stopped_since: Option<Instant>,
    looks: u32,
}

/// The containers the kubelet follows, each with the seed whose gateway
/// it stands behind where it is an API replica: the members in etcd and
/// the replicas whose pods are not being deleted. A member the migration
/// removed from etcd stays in the state until its seed's cleanup; its etcd
/// ended at its removal and is left stopped (the gardenlet's heal leaves
/// it alone too).
fn followed_pods(state: &crate::state::LabState) -> Vec<(String, Option<String>)> {
    let departed: BTreeSet<&str> = state.departed_members().collect();
    let members = state
        .members
        .iter()
        .filter(|m| !departed.contains(m.name.as_str()))
        .map(|m| (m.container.clone(), None));
    let replicas = state
        .apiservers
        .iter()
        .filter(|a| !a.terminating)
        .map(|a| (a.container.clone(), Some(a.seed.clone())));
    members.chain(replicas).collect()
}

/// Restarts stopped members and replicas until `stop`.
pub async fn run(provider: &dyn Provider, dir: LabDir, stop: Cancel) {
    let mut followed: BTreeMap<String, Followed> = BTreeMap::new();
    while stop.check().is_ok() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Ok(state) = dir.load() else { continue };
        if !state.provider.is_docker() {
            return;
        }
        let held = held(&dir);
        for (c, replica_of) in followed_pods(&state) {
            if held.contains(&c) {
                continue;
            }
            let Ok(ws) = provider.workload_state(&c).await else {
                continue;
            };
            let f = followed.entry(c.clone()).or_default();
            if ws != WorkloadState::Stopped {
                f.stopped_since = None;
                f.looks = 0;
                continue;
            }
            let since = *f.stopped_since.get_or_insert_with(Instant::now);
            f.looks += 1;
            if f.looks == 2 {
                if let Some(seed) = &replica_of {
                    // Not running: not ready, out of the gateway at once.
                    let _ = provider.sync_gateway(&state, seed).await;
                }
            }
            if f.looks < 2 || since.elapsed() < backoff(f.restarts) {
                continue;
            }
            let waited = since.elapsed();
            match provider.start(&state, &c).await {
                Ok(()) => {
                    record_lab_event(
                        &dir,
                        "note",
                        &format!(
                            "kubelet: {c} started again (restart {}, after {:.1} s)",
                            f.restarts + 1,
                            waited.as_secs_f64()
                        ),
                        "kubelet",
                        now_unix_ms(),
                        None,
                    );
                    f.restarts += 1;
                    f.stopped_since = None;
                    f.looks = 0;
                    if let Some(seed) = &replica_of {
                        let _ = provider.sync_gateway(&state, seed).await;
                    }
                }
                Err(e) => tracing::warn!(container = c, "kubelet: start failed: {e:#}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelets_backoff() {
        let s = |n| backoff(n).as_secs();
        assert_eq!(
            [s(0), s(1), s(2), s(3), s(5), s(6), s(30)],
            [0, 10, 20, 40, 160, 300, 300]
        );
    }

    #[test]
    fn members_that_left_etcd_and_draining_replicas_are_not_followed() {
        let mut s = cpmlab_model::plan::sample_state();
        let all = followed_pods(&s);
        assert_eq!(all.len(), s.members.len() + s.apiservers.len());
        let mut m = cpmlab_model::placement::migration(&s, "seed-a", "seed-b", "", 0.0).unwrap();
        m.departed_members.push(s.members[0].clone());
        s.migration = Some(m);
        s.apiservers[0].terminating = true;
        let left = followed_pods(&s);
        assert_eq!(left.len(), all.len() - 2, "{left:?}");
        assert!(!left.iter().any(|(c, _)| *c == s.members[0].container));
        assert!(!left.iter().any(|(c, _)| *c == s.apiservers[0].container));
        let replica = &s.apiservers[1];
        assert!(left.contains(&(replica.container.clone(), Some(replica.seed.clone()))));
    }

    #[test]
    fn held_containers_are_left_alone_until_released() {
        let d = tempfile::tempdir().unwrap();
        let dir = LabDir::new(d.path(), "t");
        dir.create().unwrap();
        hold(&dir, "t-seed-a-apiserver-0").unwrap();
        hold(&dir, "t-seed-a-etcd-1").unwrap();
        assert_eq!(held(&dir).len(), 2);
        release(&dir, "t-seed-a-apiserver-0").unwrap();
        assert_eq!(held(&dir), BTreeSet::from(["t-seed-a-etcd-1".to_string()]));
    }
}
