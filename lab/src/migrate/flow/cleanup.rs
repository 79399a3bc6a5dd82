//! SourceSeedCleanup (source): what is left of the control plane in the source seed goes.

use super::*;

impl Flow<'_> {
    pub(super) async fn cleanup(&mut self, line: &Step) -> Result<(&'static str, String)> {
        let mig = self.mig().clone();
        let grace = self.termination_grace()?;
        let apis: Vec<_> = self.state.apiservers_of(&mig.from).cloned().collect();
        for a in &apis {
            // Drained in MigrateDNSRecords; a resumed run may find one still up.
            self.provider
                .stop(&a.container, grace.max(Duration::from_secs(1)))
                .await?;
            self.provider
                .remove(&self.state, &a.container, None)
                .await?;
            line.detail(&format!("{} removed", a.name));
        }
        self.state.apiservers.retain(|a| a.seed != mig.from);
        self.save()?;
        let mut members = mig.departed_members.clone();
        members.extend(self.state.members_of(&mig.from).cloned());
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
        self.state.members.retain(|m| m.seed != mig.from);
        self.mig_mut().departed_members.clear();
        self.save()?;
        self.provider.sync_gateway(&self.state, &mig.from).await?;
        Ok((
            "Cleaned",
            format!(
                "`{}`: {} API server(s) and {} etcd member(s) with their data removed, gateway routes and DNS records gone",
                mig.from,
                apis.len(),
                members.len()
            ),
        ))
    }
}
