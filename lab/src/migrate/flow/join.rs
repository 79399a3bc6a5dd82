//! DestinationEtcdPeersJoined (destination): the destination members published (DNS, gateway routes) and joined as learners one at a time, each promoted once in sync.

use super::*;

impl Flow<'_> {
    pub(super) async fn join(&mut self, line: &Step) -> Result<(&'static str, String)> {
        self.publish_destination_members().await?;
        self.join_members(line).await
    }

    /// Gardener's DNSRecord per destination member, and its pod's name
    /// (which the gateway resolves); then the gateway's address and route
    /// per member, which resolve from the start.
    pub(super) async fn publish_destination_members(&mut self) -> Result<()> {
        let mig = self.mig().clone();
        let addrs: Vec<[[std::net::Ipv4Addr; 1]; 2]> = mig
            .destination_members
            .iter()
            .map(|m| [[m.vip()], [m.ip]])
            .collect();
        let records: Vec<(String, &[std::net::Ipv4Addr])> = mig
            .destination_members
            .iter()
            .zip(&addrs)
            .flat_map(|(m, a)| [(m.host.clone(), &a[0][..]), (m.pod_host(), &a[1][..])])
            .collect();
        let records: Vec<(&str, &[std::net::Ipv4Addr])> =
            records.iter().map(|(n, a)| (n.as_str(), *a)).collect();
        self.provider.set_dns(&self.state, &records).await?;
        self.provider.sync_gateway(&self.state, &mig.to).await
    }

    pub(super) async fn join_members(&mut self, line: &Step) -> Result<(&'static str, String)> {
        let mig = self.mig().clone();
        let k = mig.plan.joining_early().min(mig.destination_members.len());
        if mig.plan.exchanges() {
            let removed = self.exchange(line, JOIN, k, false).await?;
            let view = self.view().await;
            let voters: Vec<&str> = view.voters().map(|m| m.name.as_str()).collect();
            return Ok((
                "PeersJoined",
                format!(
                    "{k} exchange(s): a destination member joined as a learner and was promoted, then a source follower left behind the quorum gate ({removed} left in this run); {} voters ({}) ({})",
                    voters.len(),
                    voters.join(", "),
                    mig.plan.name()
                ),
            ));
        }
        for (i, m) in mig.destination_members.iter().take(k).enumerate() {
            self.ensure_joined(m, line, JOIN).await?;
            line.detail(&format!("{}/{k} destination members joined", i + 1));
        }
        let voters = self.view().await.voters().count();
        Ok((
            "PeersJoined",
            format!(
                "{k} destination member(s) joined as learners and were promoted; {voters} voters ({})",
                plan_name(mig.plan)
            ),
        ))
    }

    /// `m` is a voting member with a running container: added as a learner
    /// (one at a time), started, promoted once in sync.
    pub(super) async fn ensure_joined(
        &mut self,
        m: &MemberState,
        line: &Step,
        step: &str,
    ) -> Result<()> {
        let t0 = Instant::now();
        let mut last = String::from("-");
        loop {
            self.cancel.check()?;
            if t0.elapsed() > self.join_timeout {
                return Err(StepFailed {
                    step: step.into(),
                    message: format!(
                        "{} did not join within {:?} (last: {last}); `cpmlab migrate --abort` \
                         removes the destination members and leaves the source serving, \
                         `cpmlab migrate --resume` tries again",
                        m.name, self.join_timeout
                    ),
                }
                .into());
            }
            match self.join_once(m, line).await {
                Ok(None) => return Ok(()),
                Ok(Some(state)) => last = state,
                Err(e) => last = format!("{e:#}"),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// One look and one action; `None` once `m` is a voter with a running
    /// container, else where its join stands.
    pub(super) async fn join_once(
        &mut self,
        m: &MemberState,
        line: &Step,
    ) -> Result<Option<String>> {
        self.heal(line).await?;
        if self.state.etcd_druid.is_some() {
            return self.join_once_through_druid(m, line).await;
        }
        let mut c = self.client().await?;
        let (list, found) = member_with_peer_url(&mut c, m).await?;
        let url = m.peer_url();
        let in_state = self.state.members.iter().any(|x| x.name == m.name);
        match found {
            None => {
                if in_state {
                    // Started once, but its membership is gone (e.g. aborted):
                    // begin again with fresh data.
                    self.state.members.retain(|x| x.name != m.name);
                    self.save()?;
                }
                let id = etcd_ops::add_learner(&mut c, &url).await?;
                self.note(line, &format!("{} added as a learner ({id:x})", m.name));
                Ok(Some("added as a learner".into()))
            }
            Some(x) => {
                let state = self.provider.workload_state(&m.container).await?;
                if !in_state || matches!(state, WorkloadState::Missing | WorkloadState::Created) {
                    let cluster: Vec<(String, String)> = list
                        .iter()
                        .map(|y| {
                            let name = if y.name().is_empty() && y.id() == x.id() {
                                m.name.clone()
                            } else {
                                y.name().to_string()
                            };
                            (name, y.peer_urls().first().cloned().unwrap_or_default())
                        })
                        .collect();
                    if !in_state {
                        self.state.members.push(m.clone());
                        self.save()?;
                    }
                    self.provider
                        .start_member(&self.state, &self.ca, m, &cluster)
                        .await?;
                    self.released.insert(m.name.clone());
                    self.note(
                        line,
                        &format!("{} started (initial-cluster-state existing)", m.name),
                    );
                    return Ok(Some("a learner, started".into()));
                }
                if x.is_learner() {
                    // A run killed between start and release left it waiting
                    // behind its barrier: release it once per run.
                    if self.released.insert(m.name.clone()) {
                        self.provider.release(&self.state, &m.container).await?;
                    }
                    if etcd_ops::try_promote(&mut c, x.id()).await? {
                        self.note(line, &format!("{} caught up and was promoted", m.name));
                        Ok(Some("promoted".into()))
                    } else {
                        line.detail(&format!("{} catching up", m.name));
                        Ok(Some(format!(
                            "a learner, not yet in sync with the leader (container {state})"
                        )))
                    }
                } else {
                    Ok(None)
                }
            }
        }
    }

    /// One look, with etcd-druid: druid makes the member (the destination's
    /// `Etcd` scaled to include it, `Provider::start_member`) and its
    /// backup-restore sidecar adds it as a learner when it sees a scale-up
    /// and promotes it once in sync (backup-restore v0.44.1
    /// `pkg/initializer/initializer.go`, `AddLearnerWithRetry`; the promote
    /// callback in `pkg/server/backuprestoreserver.go`). The lab's
    /// controller asks, then watches the member list; each note names the
    /// actor. `None` once `m` is a voter.
    async fn join_once_through_druid(
        &mut self,
        m: &MemberState,
        line: &Step,
    ) -> Result<Option<String>> {
        let in_state = self.state.members.iter().any(|x| x.name == m.name);
        if !in_state {
            self.state.members.push(m.clone());
            self.save()?;
            self.provider
                .start_member(&self.state, &self.ca, m, &[])
                .await?;
            self.note(
                line,
                &format!(
                    "{} asked of etcd-druid (the lab's controller scaled the destination's Etcd to include it); \
                     its backup-restore sidecar adds it as a learner",
                    m.name
                ),
            );
            return Ok(Some("asked of etcd-druid".into()));
        }
        let mut c = self.client().await?;
        let (_, found) = member_with_peer_url(&mut c, m).await?;
        match found {
            None => {
                let pod = self.provider.workload_state(&m.container).await?;
                if matches!(pod, WorkloadState::Missing) {
                    // A resumed run, or an update druid has not acted on:
                    // ask again (the same `Etcd`, applied).
                    self.provider
                        .start_member(&self.state, &self.ca, m, &[])
                        .await?;
                }
                line.detail(&format!(
                    "{}: not a member yet (druid's pod {pod}; backup-restore's scale-up check adds it)",
                    m.name
                ));
                Ok(Some(format!("not a member yet (pod {pod})")))
            }
            Some(x) if x.is_learner() => {
                if self.druid_learners.insert(m.name.clone()) {
                    self.note(
                        line,
                        &format!(
                            "{} added as a learner ({:x}) by its backup-restore sidecar",
                            m.name,
                            x.id()
                        ),
                    );
                }
                line.detail(&format!(
                    "{} catching up; backup-restore promotes it once in sync",
                    m.name
                ));
                Ok(Some("a learner, catching up".into()))
            }
            Some(_) => {
                self.note(
                    line,
                    &format!("{} a voter: promoted by its backup-restore sidecar", m.name),
                );
                // druid's scale-up restarts the members that ran before
                // it; no source member may leave while it does.
                line.detail("waiting for etcd-druid's rollout of the destination's members");
                self.provider.settle_members(&self.state, &m.seed).await?;
                self.note(
                    line,
                    &format!(
                        "etcd-druid's rollout after {}'s scale-up finished (the members before it restarted)",
                        m.name
                    ),
                );
                Ok(None)
            }
        }
    }
}

/// The cluster's members, and the one whose peer URLs include `m`'s.
async fn member_with_peer_url(
    c: &mut etcd_client::Client,
    m: &MemberState,
) -> Result<(Vec<etcd_client::Member>, Option<etcd_client::Member>)> {
    let list = c.member_list().await.context("member list")?;
    let url = m.peer_url();
    let found = list
        .members()
        .iter()
        .find(|x| x.peer_urls().iter().any(|u| u == &url))
        .cloned();
    Ok((list.members().to_vec(), found))
}
