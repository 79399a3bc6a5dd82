//! SourceSeedCleanup (source): what is left of the control plane in the source seed goes. In the GEP's orders as the diagram draws it: the Etcd CR (the departed members and their data), then the steps before "Delete KAPI & remaining components" (`cleanup_before_api`), then the source API servers (deleted as pods are: drained), then the shoot namespace with the seed's Istio objects. In `early-drain` the API servers had drained in MigrateDNSRecords.

use super::*;

impl Flow<'_> {
    pub(super) async fn cleanup(&mut self, line: &Step) -> Result<(&'static str, String)> {
        let mig = self.mig().clone();
        let (apis, members) = if mig.order.source_api_serves_until_cleanup(mig.force_shrink) {
            let members = self.remove_source_members(line).await?;
            let wait = Duration::from_millis(mig.cleanup_before_api_ms);
            self.wait_cleanup_before_api(line, wait).await?;
            line.detail("Delete KAPI: the source API servers' pods deleted (drained)");
            self.drain_source_api(line, false).await?;
            (self.remove_source_apis(line).await?, members)
        } else {
            let apis = self.remove_source_apis(line).await?;
            (apis, self.remove_source_members(line).await?)
        };
        // The shoot namespace: the seed's Gateway, VirtualService and
        // DestinationRules for the shoot go with it.
        self.provider.sync_gateway(&self.state, &mig.from).await?;
        Ok((
            "Cleaned",
            if mig.order.source_api_serves_until_cleanup(mig.force_shrink) {
                format!(
                    "`{}`: {members} etcd member(s) with their data removed (the Etcd CR), {:.0} s of the cleanup's other steps, then {apis} API server(s) drained and removed (Delete KAPI), then the gateway's routes and the DNS records (the shoot namespace)",
                    mig.from,
                    mig.cleanup_before_api_ms as f64 / 1e3,
                )
            } else {
                format!(
                    "`{}`: {apis} API server(s) and {members} etcd member(s) with their data removed, gateway routes and DNS records gone",
                    mig.from,
                )
            },
        ))
    }

    /// The cleanup's steps the lab does not run (the Etcd CR's deletion,
    /// the BackupEntry, the VPN, the ManagedResources, MCM, the extensions'
    /// migration), as the time they take; a resumed run waits it again.
    async fn wait_cleanup_before_api(&mut self, line: &Step, wait: Duration) -> Result<()> {
        self.wait_until(line, Instant::now() + wait, |left| {
            format!(
                "the cleanup's steps before Delete KAPI (BackupEntry, VPN, ManagedResources, MCM, extensions): {left:.0} s left"
            )
        })
        .await
    }

    /// The source API servers' containers removed (drained before, or
    /// stopped within their termination grace here on a resumed run).
    async fn remove_source_apis(&mut self, line: &Step) -> Result<usize> {
        let from = self.mig().from.clone();
        let grace = self.termination_grace()?;
        let apis: Vec<_> = self.state.apiservers_of(&from).cloned().collect();
        for a in &apis {
            self.provider
                .stop(&a.container, grace.max(Duration::from_secs(1)))
                .await?;
            self.provider
                .remove(&self.state, &a.container, None)
                .await?;
            line.detail(&format!("{} removed", a.name));
        }
        self.state.apiservers.retain(|a| a.seed != from);
        self.save()?;
        Ok(apis.len())
    }

    /// The source's etcd members (departed, or left on a forced run) and
    /// their data removed, with their DNS records.
    async fn remove_source_members(&mut self, line: &Step) -> Result<usize> {
        let from = self.mig().from.clone();
        let mut members = self.mig().departed_members.clone();
        members.extend(self.state.members_of(&from).cloned());
        // The departed are the source's own members too (a gardenlet's view
        // keeps them): each once.
        let mut seen = std::collections::HashSet::new();
        members.retain(|m| m.seed == from && seen.insert(m.name.clone()));
        for m in &members {
            self.provider
                .remove(&self.state, &m.container, Some(&m.volume))
                .await?;
            line.detail(&format!("{} and its data removed", m.name));
        }
        let names: Vec<String> = members
            .iter()
            .flat_map(|m| [m.host.clone(), m.pod_host()])
            .collect();
        let gone: Vec<(&str, &[std::net::Ipv4Addr])> =
            names.iter().map(|n| (n.as_str(), &[][..])).collect();
        self.provider.set_dns(&self.state, &gone).await?;
        self.state.members.retain(|m| m.seed != from);
        self.mig_mut().departed_members.clear();
        self.save()?;
        Ok(members.len())
    }
}
