//! The `classic` plan's two steps of its own (GEP-7's control plane
//! migration): SourceEtcdPreparedForPeerJoin stops the source API servers,
//! saves the source's etcd with `etcdctl snapshot save` and stops it;
//! DestinationEtcdPeersJoined restores a new cluster from the snapshot in
//! the destination. The other steps are the flow's own.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::{Flow, StepFailed, JOIN};
use crate::migrate::snapshot;
use crate::progress::Step;
use crate::provider::WorkloadState;
use crate::state::MemberState;

impl Flow<'_> {
    /// `classic`, SourceEtcdPreparedForPeerJoin: the source is prepared as
    /// GEP-7's migration prepares it. Its API servers stop first, as a
    /// Deployment scaled to zero (so that no write lands after the
    /// snapshot: the shoot's API is down from here until the destination
    /// serves, by design); then the final full snapshot is taken from the
    /// leader with `etcdctl snapshot save` and kept in the lab's backup
    /// bucket; then the source's etcd stops (its members' containers and
    /// data stay until SourceSeedCleanup). A resumed run whose source etcd
    /// has stopped goes on with the snapshot in the bucket.
    pub(super) async fn backup(&mut self, line: &Step) -> Result<(&'static str, String)> {
        let from = self.mig().from.clone();
        self.note(
            line,
            "classic: the source API servers stop; the shoot's API is down until the destination serves",
        );
        let stopped = self.drain_source_api(line, false).await?;
        let bucket = self.dir.backups();
        let file = bucket.join(snapshot::BACKUP_NAME);
        let status_file = bucket.join(format!("{}.status.json", snapshot::BACKUP_NAME));
        let (st, leader) = if self.state.members_of(&from).next().is_some() {
            let t0 = Instant::now();
            let leader = loop {
                self.cancel.check()?;
                let view = self.view().await;
                let found = self.leader_of(&view);
                if let Some(m) = found {
                    break m;
                }
                if t0.elapsed() > self.join_timeout {
                    anyhow::bail!(
                        "the source's etcd has no leader to take the snapshot from: {}",
                        view.error.unwrap_or_default()
                    );
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            };
            let save = snapshot::save_command(&leader);
            let argv: Vec<&str> = save.iter().map(String::as_str).collect();
            self.provider.exec_ok(&leader.container, &argv).await?;
            let status = snapshot::status_command();
            let argv: Vec<&str> = status.iter().map(String::as_str).collect();
            let out = self.provider.exec_ok(&leader.container, &argv).await?;
            let st = snapshot::parse_status(&out).map_err(anyhow::Error::msg)?;
            let bytes = self
                .provider
                .download(&leader.container, snapshot::SNAPSHOT_FILE)
                .await?;
            std::fs::create_dir_all(&bucket)
                .with_context(|| format!("create {}", bucket.display()))?;
            let tmp = file.with_extension("db.part");
            std::fs::write(&tmp, &bytes).with_context(|| format!("write {}", tmp.display()))?;
            std::fs::rename(&tmp, &file).with_context(|| format!("write {}", file.display()))?;
            std::fs::write(&status_file, serde_json::to_vec_pretty(&st)?)
                .with_context(|| format!("write {}", status_file.display()))?;
            self.note(
                line,
                &format!(
                    "full snapshot saved from the leader {} (etcdctl snapshot save): revision {}, {} keys, {} bytes",
                    leader.name,
                    st.revision,
                    st.total_key,
                    bytes.len()
                ),
            );
            // GEP-7: the source's etcd goes once its final snapshot is kept.
            let members: Vec<MemberState> = self.state.members_of(&from).cloned().collect();
            self.depart(&members).await?;
            self.note(
                line,
                &format!("the source's etcd ({} members) stopped", members.len()),
            );
            (st, leader.name)
        } else {
            let text = std::fs::read(&status_file).with_context(|| {
                format!(
                    "the source's etcd has stopped and {} holds no snapshot",
                    bucket.display()
                )
            })?;
            (
                serde_json::from_slice(&text)
                    .with_context(|| format!("read {}", status_file.display()))?,
                "(an earlier run)".into(),
            )
        };
        Ok((
            "SnapshotTaken",
            format!(
                "{stopped} source API server(s) stopped (downtime by design); full snapshot from {leader} at revision {} ({} keys) in {}; the source's etcd stopped",
                st.revision,
                st.total_key,
                file.display()
            ),
        ))
    }

    /// `classic`, DestinationEtcdPeersJoined: a new cluster in the
    /// destination, no member shared with the source's. The first
    /// destination member is restored from the snapshot (`etcdctl snapshot
    /// restore`, a cluster of its own, `initial-cluster-state new`), the
    /// others join it as learners and are promoted (etcd-druid scales a
    /// restored cluster up the same way).
    pub(super) async fn restore(&mut self, line: &Step) -> Result<(&'static str, String)> {
        let mig = self.mig().clone();
        self.publish_destination_members().await?;
        let bucket = self.dir.backups();
        let status_file = bucket.join(format!("{}.status.json", snapshot::BACKUP_NAME));
        let st: snapshot::Status = serde_json::from_slice(
            &std::fs::read(&status_file)
                .with_context(|| format!("read {}", status_file.display()))?,
        )
        .with_context(|| format!("read {}", status_file.display()))?;
        let first = mig
            .destination_members
            .first()
            .cloned()
            .context("no destination member planned")?;
        let in_state = self.state.members.iter().any(|x| x.name == first.name);
        let running = in_state
            && self.provider.workload_state(&first.container).await? == WorkloadState::Running;
        if !running {
            let file = bucket.join(snapshot::BACKUP_NAME);
            let snap = std::fs::read(&file).with_context(|| format!("read {}", file.display()))?;
            if !in_state {
                self.state.members.push(first.clone());
                self.save()?;
            }
            let restore = snapshot::restore_command(&first, &format!("cpmlab-{}", self.state.name));
            self.provider
                .start_restored_member(&self.state, &self.ca, &first, &snap, &restore)
                .await?;
            self.released.insert(first.name.clone());
            self.note(
                line,
                &format!(
                    "{} restored from the snapshot (etcdctl snapshot restore, revision {}) and started: a new cluster (initial-cluster-state new)",
                    first.name, st.revision
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
                        "the restored member {} has no leader within {:?}: {}",
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
        let view = self.view().await;
        let voters: Vec<&str> = view.voters().map(|m| m.name.as_str()).collect();
        Ok((
            "PeersJoined",
            format!(
                "a new cluster in `{}` restored from the source's full snapshot (revision {}, {} keys): {} restored (initial-cluster-state new), {} joined it as learners and were promoted; {} voters ({}) ({})",
                mig.to,
                st.revision,
                st.total_key,
                first.name,
                mig.destination_members.len().saturating_sub(1),
                voters.len(),
                voters.join(", "),
                mig.plan.name()
            ),
        ))
    }
}
