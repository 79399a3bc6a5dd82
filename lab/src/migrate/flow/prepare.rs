//! SourceEtcdPreparedForPeerJoin (source): every source member's peer URL checked from the destination seed, as a joining member will use it.

use super::*;

impl Flow<'_> {
    /// Every source member's peer URL, as a joining member will use it:
    /// resolved by the lab DNS to the source gateway, routed by SNI to the
    /// member, checked from the destination seed.
    pub(super) async fn prepare(&mut self, line: &Step) -> Result<(&'static str, String)> {
        let (from, to) = (self.mig().from.clone(), self.mig().to.clone());
        // The source's gardenlet acts in its own seed: it checks its
        // exposure from there (DNS, the gateway's SNI routes, TLS); the
        // destination's join reaches them from its side.
        let at = if self.role_seed.is_some() {
            from.clone()
        } else {
            to.clone()
        };
        let vantage = self
            .provider
            .vantage(&self.state, &at)
            .expect("the seed exists");
        let members: Vec<MemberState> = self.state.members_of(&from).cloned().collect();
        let t0 = Instant::now();
        for m in &members {
            loop {
                self.cancel.check()?;
                let r =
                    crate::migrate::peer::peer_check(self.provider, &self.state, &vantage, m, 2)
                        .await?;
                if r.ok() {
                    line.detail(&format!("{} reachable", m.peer_url()));
                    break;
                }
                if t0.elapsed() > self.join_timeout {
                    anyhow::bail!(
                        "{} is not reachable from `{at}` through the `{from}` gateway within {:?}: {} \
                         (fix the link, then `cpmlab migrate --resume`)",
                        m.peer_url(),
                        self.join_timeout,
                        r.error.unwrap_or_default()
                    );
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        let snapshot = self.full_snapshot(line).await?;
        Ok((
            "PeerURLsReachable",
            format!(
                "{} source peer URLs reachable from `{at}` through the `{from}` gateway (DNS, SNI, TLS); {}; peer client-SAN verification skipped{snapshot}",
                members.len(),
                self.mig()
                    .rtt_gate
                    .clone()
                    .unwrap_or_else(|| "RTT not measured (an external driver started this migration)".into())
            ),
        ))
    }

    /// The full snapshot GEP-0039's flow takes in the source before the
    /// peers join, where a backup sidecar runs beside the members (the
    /// kind form with etcd-druid: etcd-backup-restore's, into the source's
    /// bucket), asked of the leader's; "" where none does.
    async fn full_snapshot(&mut self, line: &Step) -> Result<String> {
        if self.state.etcd_druid.is_none() {
            return Ok(String::new());
        }
        let t0 = Instant::now();
        loop {
            self.cancel.check()?;
            let view = self.view().await;
            let leader = self.leader_of(&view);
            let error = match leader {
                Some(leader) => match self.provider.full_snapshot(&self.state, &leader).await {
                    Ok(None) => return Ok(String::new()),
                    Ok(Some(done)) => {
                        self.note(line, &done);
                        return Ok(format!("; {done}"));
                    }
                    Err(e) => format!("{e:#}"),
                },
                None => format!(
                    "no leader among the lab's members: {}",
                    view.error.unwrap_or_default()
                ),
            };
            if t0.elapsed() > self.join_timeout {
                anyhow::bail!(
                    "no full snapshot of the source's etcd within {:?}: {error} \
                     (fix the sidecar, then `cpmlab migrate --resume`)",
                    self.join_timeout
                );
            }
            line.detail(&error);
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
}
