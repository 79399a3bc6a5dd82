//! MigrateDNSRecords (source): the shoot API's DNS record moves to the destination; the source API servers' drain (the lab's `early-drain` order) lives here too.

use super::*;

impl Flow<'_> {
    pub(super) async fn switch_dns(&mut self, line: &Step) -> Result<(&'static str, String)> {
        let mig = self.mig().clone();
        let gw = self.state.seed(&mig.to).expect("seed").gateway.ip;
        let name = self.state.dns.api_name.clone();
        self.provider
            .set_dns(&self.state, &[(name.as_str(), &[gw][..])])
            .await?;
        let server = SocketAddr::from((self.state.dns.server.ip, 53));
        let (ips, _) = crate::dns::query_a(server, &name, Duration::from_secs(2)).await?;
        if ips != vec![gw] {
            anyhow::bail!("the DNS server answers {name} with {ips:?} after the update, want {gw}");
        }
        let switched = match mig.dns_switched_unix_ms {
            Some(t) => t,
            None => {
                let t = now_unix_ms();
                self.mig_mut().dns_switched_unix_ms = Some(t);
                self.save()?;
                self.note(line, &format!("{name} -> {gw} ({} gateway)", mig.to));
                t
            }
        };
        let ttl = self.state.dns.ttl;
        if !mig.force_shrink {
            // Until the TTL has passed, resolvers may still hand out the source.
            loop {
                self.cancel.check()?;
                let left = switched + ttl as f64 * 1e3 - now_unix_ms();
                if left <= 0.0 {
                    break;
                }
                line.detail(&format!(
                    "waiting out the TTL: {:.0} s left",
                    (left / 1e3).ceil()
                ));
                tokio::time::sleep(Duration::from_millis(left.min(500.0) as u64 + 1)).await;
            }
        }
        let drained = self.drain_source_api(line, mig.force_shrink).await?;
        Ok((
            "DNSRecordsMigrated",
            if mig.plan.restores() {
                format!(
                    "{name} -> {gw}; waited the {ttl} s TTL; the {drained} source API server(s) had stopped in {PREPARE} ({})",
                    mig.plan.name()
                )
            } else if mig.force_shrink {
                format!(
                    "{name} -> {gw} at once (force-shrink); {drained} source API server(s) stopped"
                )
            } else {
                format!(
                    "{name} -> {gw}; waited the {ttl} s TTL; {drained} source API server(s) drained \
                     (readyz failed, served {} more, then {}GOAWAY so reused connections re-resolve)",
                    self.state.topology.api.shutdown_delay,
                    if self.state.topology.api.shutdown_send_retry_after {
                        "429 Retry-After: 5 until drained, then "
                    } else {
                        ""
                    }
                )
            },
        ))
    }

    /// How long a stopping API replica has before SIGKILL (the topology's
    /// `api.termination_grace`).
    pub(super) fn termination_grace(&self) -> Result<Duration> {
        let (_, _, grace) = self
            .state
            .topology
            .api
            .shutdown_durations()
            .map_err(|(f, m)| anyhow::anyhow!("{f}: {m}"))?;
        Ok(grace)
    }

    /// Clients that keep their connections would stay on the source API
    /// servers, whose etcd members leave next: the servers shut down the way
    /// kube-apiserver does (SIGTERM: /readyz fails, serving goes on for the
    /// shutdown delay, then GOAWAY), and the clients come back through DNS.
    pub(super) async fn drain_source_api(&mut self, line: &Step, at_once: bool) -> Result<usize> {
        let from = self.mig().from.clone();
        let apis: Vec<String> = self
            .state
            .apiservers_of(&from)
            .map(|a| a.container.clone())
            .collect();
        // The pods are deleted: their endpoints leave the gateway at once
        // (terminating), while the kubelet stops them.
        let mut marked = false;
        for a in self.state.apiservers.iter_mut().filter(|a| a.seed == from) {
            marked |= !a.terminating;
            a.terminating = true;
        }
        if marked {
            self.save()?;
        }
        self.provider.sync_gateway(&self.state, &from).await?;
        for c in &apis {
            if self.provider.workload_state(c).await? == WorkloadState::Running {
                self.provider
                    .signal(c, if at_once { Signal::Kill } else { Signal::Term })
                    .await?;
            }
        }
        // As the kubelet does: SIGKILL once the termination grace is over.
        let grace = self.termination_grace()?;
        let t0 = Instant::now();
        for c in &apis {
            while self.provider.workload_state(c).await? == WorkloadState::Running {
                self.cancel.check()?;
                if t0.elapsed() > grace {
                    self.provider.signal(c, Signal::Kill).await?;
                    self.note(
                        line,
                        &format!(
                            "{c} killed: still running after the {} termination grace",
                            self.state.topology.api.termination_grace
                        ),
                    );
                    break;
                }
                line.detail(&format!(
                    "source API servers draining ({:.0} s)",
                    t0.elapsed().as_secs_f64()
                ));
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
        Ok(apis.len())
    }
}
