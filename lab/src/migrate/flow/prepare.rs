//! SourceEtcdPreparedForPeerJoin (source): every source member's peer URL checked from the destination seed, as a joining member will use it.

use super::*;

impl Flow<'_> {
    /// Every source member's peer URL, as a joining member will use it:
    /// resolved by the lab DNS to the source gateway, routed by SNI to the
    /// member, checked from the destination seed.
    pub(super) async fn prepare(&mut self, line: &Step) -> Result<(&'static str, String)> {
        let (from, to) = (self.mig().from.clone(), self.mig().to.clone());
        let vantage = self
            .provider
            .vantage(&self.state, &to)
            .expect("the destination seed exists");
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
                        "{} is not reachable from `{to}` through the `{from}` gateway within {:?}: {} \
                         (fix the link, then `cpmlab migrate --resume`)",
                        m.peer_url(),
                        self.join_timeout,
                        r.error.unwrap_or_default()
                    );
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        Ok((
            "PeerURLsReachable",
            format!(
                "{} source peer URLs reachable from `{to}` through the `{from}` gateway (DNS, SNI, TLS); {}; peer client-SAN verification skipped",
                members.len(),
                self.mig()
                    .rtt_gate
                    .clone()
                    .unwrap_or_else(|| "RTT not measured (an external driver started this migration)".into())
            ),
        ))
    }
}
