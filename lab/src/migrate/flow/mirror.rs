//! The `mirror` plan's two steps of its own (the GEP's rejected "etcd
//! Mirror Maker" alternative): DestinationEtcdPeersJoined starts a new,
//! empty cluster in the destination and `etcdctl make-mirror` from the
//! source's into it, and waits for its first sync; EtcdMigrationComplete,
//! once the source API servers have drained (MigrateDNSRecords), waits for
//! the mirror to catch up, stops it and stops the source's etcd. The other
//! steps are the flow's own: the destination API starts on the
//! destination's cluster while the source's still takes writes, and DNS
//! moves the clients, with nothing atomic between the two clusters.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use etcd_client::GetOptions;

use super::{Flow, StepFailed, JOIN};
use crate::etcd;
use crate::migrate::mirror;
use crate::probe::run::now_unix_ms;
use crate::progress::Step;
use crate::provider::WorkloadState;
use crate::state::MemberState;

/// Where the two clusters stood once the mirror had caught up.
struct Synced {
    /// From the sync key's write in the source to its value in the destination.
    lag: Duration,
    source_revision: i64,
    source_keys: i64,
    destination_revision: i64,
    destination_keys: i64,
}

impl Synced {
    fn words(&self) -> String {
        format!(
            "make-mirror caught up in {} ms: source revision {} ({} keys), destination revision {} ({} keys)",
            self.lag.as_millis(),
            self.source_revision,
            self.source_keys,
            self.destination_revision,
            self.destination_keys
        )
    }
}

impl Flow<'_> {
    /// `mirror`, DestinationEtcdPeersJoined: a new cluster in the
    /// destination, no member shared with the source's. The first
    /// destination member starts alone and empty (`initial-cluster-state
    /// new`), the others join it as learners and are promoted; then
    /// `etcdctl make-mirror` starts in the first one's workload, from the
    /// source's members into it, and the step ends once it has synced what
    /// the source held (its sync key arrived).
    pub(super) async fn mirror_join(&mut self, line: &Step) -> Result<(&'static str, String)> {
        let mig = self.mig().clone();
        self.publish_destination_members().await?;
        let first = mig
            .destination_members
            .first()
            .cloned()
            .context("no destination member planned")?;
        let in_state = self.state.members.iter().any(|x| x.name == first.name);
        let running = in_state
            && self.provider.workload_state(&first.container).await? == WorkloadState::Running;
        if !running {
            if !in_state {
                self.state.members.push(first.clone());
                self.save()?;
            }
            self.provider
                .start_empty_member(&self.state, &self.ca, &first)
                .await?;
            self.released.insert(first.name.clone());
            self.note(
                line,
                &format!(
                    "{} started: a new, empty cluster beside the source's (initial-cluster-state new)",
                    first.name
                ),
            );
        }
        let t0 = Instant::now();
        loop {
            self.cancel.check()?;
            let view = self.view().await;
            if view.error.is_none() && view.leader.is_some() {
                break;
            }
            if t0.elapsed() > self.join_timeout {
                return Err(StepFailed {
                    step: JOIN.into(),
                    message: format!(
                        "the new member {} has no leader within {:?}: {}",
                        first.name,
                        self.join_timeout,
                        view.error.unwrap_or_default()
                    ),
                }
                .into());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        for m in mig.destination_members.iter().skip(1) {
            self.ensure_joined(m, line, JOIN).await?;
        }
        self.ensure_mirror(line, &first).await?;
        let synced = self.mirror_sync(line, &first, JOIN).await?;
        self.note(line, &synced.words());
        let view = self.view().await;
        let voters: Vec<&str> = view.voters().map(|m| m.name.as_str()).collect();
        Ok((
            "MirrorSynced",
            format!(
                "a new, empty cluster in `{}` ({} started it, {} joined as learners and were promoted; {} voters: {}), fed by etcdctl make-mirror from the source's; {} ({})",
                mig.to,
                first.name,
                mig.destination_members.len().saturating_sub(1),
                voters.len(),
                voters.join(", "),
                synced.words(),
                mig.plan.name()
            ),
        ))
    }

    /// `mirror`, EtcdMigrationComplete: the source API servers drained in
    /// MigrateDNSRecords, so the source takes no more writes; the mirror
    /// catches up (its sync key arrives), stops (its output kept in the run
    /// directory as `mirror.log`), and the source's etcd stops (its members'
    /// containers and data stay until SourceSeedCleanup). A resumed run
    /// whose source etcd has stopped has nothing left to do here.
    pub(super) async fn mirror_finish(&mut self, line: &Step) -> Result<String> {
        let mig = self.mig().clone();
        let source: Vec<MemberState> = self.state.members_of(&mig.from).cloned().collect();
        let Some(first) = mig.destination_members.first().cloned() else {
            anyhow::bail!("no destination member planned");
        };
        if source.is_empty() {
            return Ok("the source's etcd had stopped (an earlier run)".into());
        }
        self.ensure_mirror(line, &first).await?;
        let synced = self.mirror_sync(line, &first, super::SHRINK).await?;
        self.note(
            line,
            &format!("{} after the source API stopped", synced.words()),
        );
        self.provider
            .exec_ok(&first.container, &argv(&mirror::stop_command()))
            .await?;
        let log = self
            .provider
            .exec_ok(&first.container, &argv(&mirror::log_command()))
            .await
            .unwrap_or_default();
        let kept = self.keep_mirror_log(&log);
        let total = mirror::totals(&log).last().copied();
        self.note(
            line,
            &format!(
                "make-mirror stopped ({} keys put or deleted by its last report; its output in {kept})",
                total.map_or_else(|| "no".into(), |t| t.to_string())
            ),
        );
        self.depart(&source).await?;
        self.note(
            line,
            &format!("the source's etcd ({} members) stopped", source.len()),
        );
        Ok(format!(
            "{} after the source API stopped; make-mirror stopped; the source's etcd ({} members) stopped (removed in {})",
            synced.words(),
            source.len(),
            super::CLEANUP
        ))
    }

    /// make-mirror runs in `host`'s workload: started when it is not
    /// (again after a resumed run or a crash: it syncs everything anew).
    async fn ensure_mirror(&mut self, line: &Step, host: &MemberState) -> Result<()> {
        let running = self
            .provider
            .exec(&host.container, &argv(&mirror::running_command()))
            .await?
            .ok();
        if running {
            return Ok(());
        }
        let source: Vec<MemberState> = self.state.members_of(&self.mig().from).cloned().collect();
        let pid = self
            .provider
            .exec_ok(
                &host.container,
                &argv(&mirror::start_command(&source, host)),
            )
            .await
            .context("start etcdctl make-mirror")?;
        self.note(
            line,
            &format!(
                "etcdctl make-mirror started in {} (pid {}): from the {} source members' client URLs into https://{}:2379",
                host.container,
                pid.trim(),
                source.len(),
                host.ip
            ),
        );
        Ok(())
    }

    /// Writes the sync key into the source and waits until the destination
    /// holds its value (within the join timeout, else `step` fails), then
    /// reads where both clusters stand.
    async fn mirror_sync(&mut self, line: &Step, host: &MemberState, step: &str) -> Result<Synced> {
        let (from, to) = (self.mig().from.clone(), self.mig().to.clone());
        let timeout = Duration::from_secs(5);
        let mut src = etcd::cluster_client(&self.members_of_seed(&from), &self.tls, timeout)
            .await
            .context("no member of the source's etcd answers")?;
        let mut dst = etcd::cluster_client(&self.members_of_seed(&to), &self.tls, timeout)
            .await
            .context("no member of the destination's etcd answers")?;
        // The lag is the last round's (see `SYNC_ROUNDS`).
        let mut lag = Duration::ZERO;
        for round in 0..mirror::SYNC_ROUNDS {
            let value = format!("{}-{round}", now_unix_ms() as u64);
            src.put(mirror::SYNC_KEY, value.clone(), None)
                .await
                .context("write the mirror's sync key into the source")?;
            let t0 = Instant::now();
            let mut looks = 0u32;
            loop {
                self.cancel.check()?;
                let got = dst.get(mirror::SYNC_KEY, None).await.ok();
                let at = got
                    .as_ref()
                    .and_then(|r| r.kvs().first())
                    .map(|kv| kv.value());
                if mirror::caught_up(&value, at) {
                    break;
                }
                looks += 1;
                if looks.is_multiple_of(20) {
                    line.detail(&format!(
                        "waiting for make-mirror to catch up ({:.0} s)",
                        t0.elapsed().as_secs_f64()
                    ));
                    let alive = self
                        .provider
                        .exec(&host.container, &argv(&mirror::running_command()))
                        .await?
                        .ok();
                    if !alive {
                        let log = self
                            .provider
                            .exec_ok(&host.container, &argv(&mirror::log_command()))
                            .await
                            .unwrap_or_default();
                        self.keep_mirror_log(&log);
                        return Err(StepFailed {
                            step: step.into(),
                            message: format!(
                                "etcdctl make-mirror stopped on its own: {}",
                                mirror::complaints(&log, 3).join("; ")
                            ),
                        }
                        .into());
                    }
                }
                if t0.elapsed() > self.join_timeout {
                    return Err(StepFailed {
                        step: step.into(),
                        message: format!(
                            "make-mirror did not catch up within {:?} (the destination lacks the source's {} = {value})",
                            self.join_timeout,
                            mirror::SYNC_KEY
                        ),
                    }
                    .into());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            lag = t0.elapsed();
        }
        let all = || GetOptions::new().with_all_keys().with_count_only();
        let s = src
            .get("", Some(all()))
            .await
            .context("count the source's keys")?;
        let d = dst
            .get("", Some(all()))
            .await
            .context("count the destination's keys")?;
        let rev = |h: Option<&etcd_client::ResponseHeader>| h.map_or(0, |h| h.revision());
        Ok(Synced {
            lag,
            source_revision: rev(s.header()),
            source_keys: s.count(),
            destination_revision: rev(d.header()),
            destination_keys: d.count(),
        })
    }

    /// Keeps make-mirror's output in the run directory (the lab directory
    /// when no probes run); where it went.
    fn keep_mirror_log(&self, log: &str) -> String {
        let dir = self
            .state
            .probe_run
            .clone()
            .unwrap_or_else(|| self.dir.root.clone());
        let file = dir.join("mirror.log");
        match std::fs::write(&file, log) {
            Ok(()) => file.display().to_string(),
            Err(e) => {
                tracing::warn!("keep {}: {e}", file.display());
                format!("{} (not kept: {e})", mirror::LOG_FILE)
            }
        }
    }
}

fn argv(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}
