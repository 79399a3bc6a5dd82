//! `--abort`: the destination members leave and the source serves as before (allowed while DestinationEtcdPeersJoined is False).

use super::*;

impl Flow<'_> {
    /// `--abort`, allowed only while DestinationEtcdPeersJoined is False:
    /// the destination members leave etcd, the destination's containers,
    /// data, routes and DNS records go, the source serves as before.
    pub async fn abort(&mut self) -> Result<usize> {
        let Some(mig) = self.state.migration.clone() else {
            return Err(BadInput(format!(
                "lab `{}` has no migration to abort",
                self.state.name
            ))
            .into());
        };
        let join = mig.conditions.get(JOIN).expect("known step");
        if join.status != Status::False {
            return Err(BadInput(format!(
                "--abort is allowed only while {JOIN} is False (the GEP's rule); it is {:?} ({})",
                join.status, join.reason
            ))
            .into());
        }
        if !mig.departed_members.is_empty() {
            // The rolling plan exchanges members as it joins: the source
            // members that left cannot come back, and removing the
            // destination's would shrink the shoot's etcd below its size.
            let gone: Vec<&str> = mig
                .departed_members
                .iter()
                .map(|m| m.name.as_str())
                .collect();
            return Err(BadInput(format!(
                "--abort would remove the destination members, but source member(s) {} have left etcd already ({} plan): the shoot's etcd would keep {} member(s); fix what failed and go on with `cpmlab migrate --resume`",
                gone.join(", "),
                mig.plan.name(),
                self.state.members_of(&mig.from).count()
            ))
            .into());
        }
        let line = self.progress.step("abort: destination members leave etcd");
        let urls: Vec<String> = mig
            .destination_members
            .iter()
            .map(|m| m.peer_url())
            .collect();
        let mut removed = 0;
        // The mirror's destination is a cluster of its own: its members
        // go with their containers (and the mirror, which runs in the first).
        if !mig.plan.mirrors() {
            let mut c = self.client().await?;
            let list = c.member_list().await.context("member list")?;
            for x in list.members() {
                if x.peer_urls().iter().any(|u| urls.contains(u)) {
                    etcd_ops::remove_when_healthy(&mut c, x.id(), Duration::from_secs(60)).await?;
                    removed += 1;
                    // A learner that never started has no name in etcd yet.
                    let name = mig
                        .destination_members
                        .iter()
                        .find(|m| x.peer_urls().contains(&m.peer_url()))
                        .map(|m| m.name.as_str())
                        .unwrap_or(x.name());
                    self.note(&line, &format!("{name} removed from etcd"));
                }
            }
        }
        for a in &mig.destination_apiservers {
            self.provider
                .remove(&self.state, &a.container, None)
                .await?;
        }
        for m in &mig.destination_members {
            self.provider
                .remove(&self.state, &m.container, Some(&m.volume))
                .await?;
        }
        let names: Vec<String> = mig
            .destination_members
            .iter()
            .flat_map(|m| [m.host.clone(), m.pod_host()])
            .collect();
        let gone: Vec<(&str, &[std::net::Ipv4Addr])> =
            names.iter().map(|n| (n.as_str(), &[][..])).collect();
        self.provider.set_dns(&self.state, &gone).await?;
        self.state.members.retain(|m| m.seed != mig.to);
        self.state.apiservers.retain(|a| a.seed != mig.to);
        self.state.migration = None;
        self.save()?;
        self.provider.sync_gateway(&self.state, &mig.to).await?;
        self.event(
            "note",
            &format!("migration {} -> {} aborted", mig.from, mig.to),
            "",
            now_unix_ms(),
            None,
        );
        line.done_with(&format!(
            "{removed} destination member(s) removed; `{}` serves as before",
            mig.from
        ));
        Ok(removed)
    }
}
