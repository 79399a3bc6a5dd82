//! EtcdMigrationComplete (destination): in the GEP's orders the DNS record restored and the caches waited out first (`dns-first`: the destination API started before that), then the gateway handover (`gateway_handover`); then the membership plan's next actions (the sixth member, the source members' removal, one at a time, the leader last), each gated on the cluster's health.

use super::*;

impl Flow<'_> {
    /// The step as the migration's order has it.
    pub(super) async fn etcd_migration_complete(
        &mut self,
        line: &Step,
    ) -> Result<(&'static str, String)> {
        let mig = self.mig().clone();
        let mut said = Vec::new();
        if mig
            .order
            .starts_api_in_etcd_migration_complete(mig.force_shrink)
        {
            let (_, m) = self.destination_api(line).await?;
            said.push(m);
        }
        if mig
            .order
            .restores_dns_in_etcd_migration_complete(mig.force_shrink)
        {
            said.push(self.restore_dns(line).await?);
            if let Some(m) = self.gateway_handover(line).await? {
                said.push(m);
            }
        }
        let (reason, m) = self.shrink(line, false).await?;
        said.push(m);
        Ok((reason, said.join("; then ")))
    }

    /// The rest of the destination joins; then the source leaves, one member
    /// at a time behind a quorum gate, the leader last (removed, or after
    /// MoveLeader). `rolling`: the last exchange, one in and one out.
    /// `force`: source readiness is not waited for.
    pub(super) async fn shrink(
        &mut self,
        line: &Step,
        force: bool,
    ) -> Result<(&'static str, String)> {
        let mig = self.mig().clone();
        let dest: Vec<String> = mig
            .destination_members
            .iter()
            .map(|m| m.name.clone())
            .collect();
        let mut mirrored = String::new();
        let removed = if mig.plan.restores() {
            // No cluster spans the seeds: the source's stopped after its
            // snapshot, and its members go in SourceSeedCleanup.
            0
        } else if mig.plan.mirrors() {
            // No cluster spans the seeds: the mirror stops once caught up,
            // then the source's etcd stops (its members go in
            // SourceSeedCleanup).
            mirrored = self.mirror_finish(line).await?;
            0
        } else if mig.plan.exchanges() {
            self.exchange(line, SHRINK, dest.len(), force).await?
        } else {
            for m in &mig.destination_members {
                self.ensure_joined(m, line, SHRINK).await?;
            }
            self.remove_source(line, force).await?
        };
        // A removed leader (the `remove` handover) leaves the rest to elect
        // one: the step ends once etcd has a leader again, not while the
        // election runs (etcd's election timeout is 1 s; 30 s is far past
        // any election that ends).
        let t1 = Instant::now();
        let view = loop {
            let view = self.view().await;
            if view.error.is_none() && view.members.iter().any(|m| m.is_leader) {
                break view;
            }
            if t1.elapsed() > Duration::from_secs(30) {
                anyhow::bail!(
                    "etcd has no leader 30 s after the shrink: {:?} {}",
                    view.members,
                    view.error.unwrap_or_default()
                );
            }
            self.cancel.check()?;
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let voters: Vec<&str> = view.voters().map(|m| m.name.as_str()).collect();
        if view.members.iter().any(|m| m.is_learner) || voters.len() != dest.len() {
            anyhow::bail!("after the shrink etcd has members {:?}", view.members);
        }
        Ok((
            "MembersRemoved",
            if mig.plan.mirrors() {
                format!(
                    "{mirrored}; voters of the destination's cluster: {}",
                    voters.join(", ")
                )
            } else if mig.plan.restores() {
                format!(
                    "the destination's new cluster holds the shoot's data; the source's cluster stopped after its snapshot ({} member(s) removed in {CLEANUP}); voters: {}",
                    mig.departed_members.len(),
                    voters.join(", ")
                )
            } else if mig.plan.exchanges() {
                format!(
                    "the last exchange ({}): the last destination member joined, then {removed} source member(s) left (the leader last); voters: {}",
                    mig.plan.name(),
                    voters.join(", ")
                )
            } else {
                format!(
                    "{removed} source member(s) left one at a time (learners, followers, the leader last); voters: {}",
                    voters.join(", ")
                )
            },
        ))
    }

    /// The live membership as the plans see it, after recording the source
    /// members etcd no longer has as departed (a run killed right after a
    /// removal, or a removal whose member exited before it was recorded)
    /// and starting members that stopped; None while no member answers.
    pub(super) async fn look(
        &mut self,
        line: &Step,
        last: &mut String,
    ) -> Result<Option<ClusterView>> {
        let from = self.mig().from.clone();
        let view = self.view().await;
        if let Some(e) = &view.error {
            *last = e.clone();
            self.heal(line).await?;
            tokio::time::sleep(Duration::from_millis(500)).await;
            return Ok(None);
        }
        let gone: Vec<MemberState> = self
            .state
            .members_of(&from)
            .filter(|m| !view.members.iter().any(|v| v.name == m.name))
            .cloned()
            .collect();
        if !gone.is_empty() {
            for m in &gone {
                self.note(
                    line,
                    &format!(
                        "{} left the cluster (its removal applied, the answer lost)",
                        m.name
                    ),
                );
            }
            self.depart(&gone).await?;
        }
        // Only now: a removed member exits on its own, and is not
        // started again as if it had crashed.
        self.heal(line).await?;
        Ok(Some(view))
    }

    pub(super) fn live(view: &ClusterView) -> Vec<membership::Member> {
        view.members
            .iter()
            .map(|m| membership::Member {
                name: m.name.clone(),
                is_learner: m.is_learner,
                is_leader: m.is_leader,
            })
            .collect()
    }

    pub(super) fn leaving(&self) -> Vec<String> {
        let from = &self.mig().from;
        self.state
            .members_of(from)
            .map(|m| m.name.clone())
            .collect()
    }

    /// Every source member leaves, one at a time behind the quorum gate
    /// (`force`: the source's members are not waited for), decided afresh
    /// from the live membership each time. The number removed.
    pub(super) async fn remove_source(&mut self, line: &Step, force: bool) -> Result<usize> {
        let mig = self.mig().clone();
        let dest: Vec<String> = mig
            .destination_members
            .iter()
            .map(|m| m.name.clone())
            .collect();
        self.clear_bootstrap(line).await?;
        let t0 = Instant::now();
        let deadline = self.join_timeout.max(Duration::from_secs(120));
        let mut removed = 0;
        let mut last = String::new();
        loop {
            self.cancel.check()?;
            if t0.elapsed() > deadline {
                anyhow::bail!("the source members did not leave within {deadline:?}: {last}");
            }
            let Some(view) = self.look(line, &mut last).await? else {
                continue;
            };
            let Some(action) = membership::next_removal(
                &Self::live(&view),
                &self.leaving(),
                &dest,
                mig.leader_handover,
            ) else {
                break;
            };
            if self.gated(&view, force, line, &mut last).await {
                continue;
            }
            match self.leave(&action, &view, line).await {
                Ok(true) => removed += 1,
                Ok(false) => {}
                Err(e) => {
                    last = format!("{e:#}");
                    line.detail(&last);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
        Ok(removed)
    }

    /// Where etcd-druid runs the destination's etcd, GEP-0039's way to let
    /// the source's members go: the lab's controller (gardenlet's part)
    /// clears `bootstrapWithExistingCluster` on the destination's `Etcd`,
    /// and druid is given its reconcile; then the members druid removed
    /// are told apart from those left for the lab's MemberRemove.
    async fn clear_bootstrap(&mut self, line: &Step) -> Result<()> {
        let to = self.mig().to.clone();
        let Some(done) = self.provider.clear_bootstrap(&self.state, &to).await? else {
            return Ok(());
        };
        self.note(line, &format!("the lab's controller: {done}"));
        let view = self.view().await;
        if view.error.is_some() {
            // The removals' own loop reads the membership again.
            return Ok(());
        }
        let leaving = self.leaving();
        let still: Vec<&str> = leaving
            .iter()
            .filter(|n| view.members.iter().any(|m| &m.name == *n))
            .map(String::as_str)
            .collect();
        self.note(
            line,
            &if still.is_empty() {
                "etcd-druid removed every source member after the clear".to_string()
            } else {
                format!(
                    "after the clear etcd-druid removed {} of {} source members ({} still in the cluster): \
                     the lab's controller removes them (druid v0.38.1 reads the field only for its \
                     ConfigMap, the sidecars' --service-endpoints and a status condition)",
                    leaving.len() - still.len(),
                    leaving.len(),
                    still.join(", ")
                )
            },
        );
        Ok(())
    }

    /// The `rolling` plan's exchanges until `target` destination members
    /// are voters and the cluster is back to its size: a destination member
    /// joins (learner, promoted once in sync), then a source member leaves
    /// behind the quorum gate (followers first, the leader last with the
    /// `leader_handover` setting), decided afresh from the live membership
    /// each time ([`membership::next_exchange`]). A join has the join
    /// timeout (a False condition, as in the other plans); a removal that
    /// makes no progress for the shrink's deadline fails the step. The
    /// number of source members removed.
    pub(super) async fn exchange(
        &mut self,
        line: &Step,
        step: &str,
        target: usize,
        force: bool,
    ) -> Result<usize> {
        let mig = self.mig().clone();
        let dest: Vec<String> = mig
            .destination_members
            .iter()
            .map(|m| m.name.clone())
            .collect();
        let deadline = self.join_timeout.max(Duration::from_secs(120));
        let mut since = Instant::now();
        let mut removed = 0;
        let mut last = String::new();
        loop {
            self.cancel.check()?;
            if since.elapsed() > deadline {
                anyhow::bail!("no source member left within {deadline:?}: {last}");
            }
            let Some(view) = self.look(line, &mut last).await? else {
                continue;
            };
            let next = membership::next_exchange(
                &Self::live(&view),
                &self.leaving(),
                &dest,
                target,
                mig.leader_handover,
            );
            match next {
                None => break,
                Some(membership::Exchange::Join(name)) => {
                    let m = mig
                        .destination_members
                        .iter()
                        .find(|m| m.name == name)
                        .cloned()
                        .expect("a planned destination member");
                    self.ensure_joined(&m, line, step).await?;
                    since = Instant::now();
                }
                Some(membership::Exchange::Leave(action)) => {
                    if self.gated(&view, force, line, &mut last).await {
                        continue;
                    }
                    match self.leave(&action, &view, line).await {
                        Ok(r) => {
                            removed += usize::from(r);
                            since = Instant::now();
                        }
                        Err(e) => {
                            last = format!("{e:#}");
                            line.detail(&last);
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                    }
                }
            }
        }
        Ok(removed)
    }

    /// The quorum gate before a member leaves: true (after a short wait)
    /// while it holds the removal back.
    pub(super) async fn gated(
        &self,
        view: &ClusterView,
        force: bool,
        line: &Step,
        last: &mut String,
    ) -> bool {
        let skip = force.then_some(self.mig().from.as_str());
        match crate::etcd::quorum_gate(view, skip) {
            Ok(()) => false,
            Err(e) => {
                *last = e;
                line.detail(&format!("quorum gate: {last}"));
                tokio::time::sleep(Duration::from_millis(250)).await;
                true
            }
        }
    }

    /// One membership action on the way out: a MoveLeader, or a member's
    /// removal (its container stopped, recorded as departed). Ok(true) once
    /// a member was removed.
    pub(super) async fn leave(
        &mut self,
        action: &Action,
        view: &ClusterView,
        line: &Step,
    ) -> Result<bool> {
        let id_of = |name: &str| {
            view.members
                .iter()
                .find(|m| m.name == name)
                .and_then(|m| u64::from_str_radix(&m.id, 16).ok())
        };
        let msg = match action {
            Action::MoveLeader { to } => {
                let leader = view.members.iter().find(|m| m.is_leader).expect("gated");
                let to_id = id_of(to).expect("a live member");
                // etcd drops proposals that reach the old leader while the
                // transfer runs; a write forwarded then fails after etcd's
                // request timeout. The band lets the verdict's reader see it.
                self.note(
                    line,
                    &format!("moving leadership from {} to {to}", leader.name),
                );
                self.move_leader(&leader.name, to_id).await?;
                format!("leadership moved from {} to {to}", leader.name)
            }
            Action::Remove { member } => {
                let id = id_of(member).expect("a live member");
                if view
                    .members
                    .iter()
                    .any(|m| &m.name == member && m.is_leader)
                {
                    // Upstream's way: no MoveLeader; the removed leader
                    // stops once its removal is applied and the rest
                    // elect. The note is the band the verdict's reader
                    // sees the election in.
                    self.note(
                        line,
                        &format!("removing the leader {member} (no MoveLeader: the rest elect)"),
                    );
                }
                // Asked through a member that stays: a member asked to
                // remove itself stops before its answer is out.
                let mut c = self.client_without(member).await?;
                etcd_ops::remove_when_healthy(&mut c, id, Duration::from_secs(30)).await?;
                if self.state.etcd_druid.is_some() {
                    // GEP-0039 gives this to etcd-druid (the source members
                    // removed through backup-restore once
                    // `bootstrapWithExistingCluster` is unset); in druid
                    // v0.38.1 only the ConfigMap, the sidecar's
                    // `--service-endpoints` and a status condition read that
                    // field: nothing removes a member of another `Etcd`.
                    format!(
                        "{member} removed from the cluster by the lab's controller (MemberRemove; \
                         etcd-druid v0.38.1 has no step for it)"
                    )
                } else {
                    format!("{member} removed from the cluster")
                }
            }
        };
        self.note(line, &msg);
        let Action::Remove { member } = action else {
            return Ok(false);
        };
        let m: Vec<MemberState> = self
            .state
            .members
            .iter()
            .filter(|m| &m.name == member)
            .cloned()
            .collect();
        self.depart(&m).await?;
        Ok(true)
    }

    pub(super) async fn move_leader(&self, leader: &str, to: u64) -> Result<()> {
        let m = self
            .state
            .members
            .iter()
            .find(|m| m.name == leader)
            .with_context(|| format!("leader {leader} is not a lab member"))?;
        let gw = self.state.seed(&m.seed).expect("seed").gateway.ip;
        let mut c = etcd::member_client(gw, &m.host, &self.tls, Duration::from_secs(5)).await?;
        etcd_ops::move_leader(&mut c, to).await
    }

    /// Members that left etcd: out of the state's members, their containers
    /// stopped (removed with their data in SourceSeedCleanup).
    pub(super) async fn depart(&mut self, gone: &[MemberState]) -> Result<()> {
        for m in gone {
            self.state.members.retain(|x| x.name != m.name);
            let mig = self.mig_mut();
            if !mig.departed_members.iter().any(|x| x.name == m.name) {
                mig.departed_members.push(m.clone());
            }
        }
        self.save()?;
        if self.state.etcd_druid.is_some() {
            // etcd-druid v0.38.1 cannot take one member of an `Etcd` away
            // (its StatefulSet's replicas are the `Etcd`'s); a removed
            // member's etcd stops serving by itself, and its pod goes with
            // the source's `Etcd` in SourceSeedCleanup.
            if !gone.is_empty() {
                let names: Vec<&str> = gone.iter().map(|m| m.name.as_str()).collect();
                tracing::info!(
                    "{}: left to etcd-druid's StatefulSet until the source's Etcd goes",
                    names.join(", ")
                );
            }
            return Ok(());
        }
        for m in gone {
            // A gardenlet acts on its own seed only: a source member that
            // left stops by itself (etcd ends a removed member) and goes
            // with the source's cleanup.
            if self.role_seed.as_ref().is_some_and(|s| &m.seed != s) {
                continue;
            }
            self.provider
                .stop(&m.container, Duration::from_secs(5))
                .await?;
        }
        Ok(())
    }
}
