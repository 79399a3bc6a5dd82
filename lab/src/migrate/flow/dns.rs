//! MigrateDNSRecords (source): the shoot API's DNS record, migrated (the `gep` and `dns-first` orders) or switched with the source API servers drained (`early-drain`); the record's restore and the DNS-cache wait EtcdMigrationComplete runs in the GEP's orders live here too.

use super::*;

impl Flow<'_> {
    /// Points the shoot API's record at the destination's gateway (once: a
    /// resumed run keeps the first switch's time) and checks the DNS
    /// server answers it; the record's name and the gateway.
    async fn point_dns_at_destination(
        &mut self,
        line: &Step,
    ) -> Result<(String, std::net::Ipv4Addr)> {
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
        if mig.dns_switched_unix_ms.is_none() {
            self.mig_mut().dns_switched_unix_ms = Some(now_unix_ms());
            self.save()?;
            self.note(line, &format!("{name} -> {gw} ({} gateway)", mig.to));
        }
        Ok((name, gw))
    }

    /// Until the record's TTL has passed since the switch, resolvers may
    /// still hand out the source: the GEP's "wait for DNS caches to be
    /// updated/invalidated".
    async fn wait_dns_caches(&mut self, line: &Step) -> Result<()> {
        let switched = self
            .mig()
            .dns_switched_unix_ms
            .expect("the record was switched first");
        let ttl = self.state.dns.ttl;
        let left_ms = (switched + ttl as f64 * 1e3 - now_unix_ms()).max(0.0);
        let deadline = Instant::now() + Duration::from_millis(left_ms.ceil() as u64);
        self.wait_until(line, deadline, |left| {
            format!("waiting for DNS caches (the record's {ttl} s TTL): {left:.0} s left")
        })
        .await
    }

    /// MigrateDNSRecords in the `gep` and `dns-first` orders: the source
    /// migrates its DNSRecord (the extension's Migrate operation keeps the
    /// provider's record, which goes on answering the source gateway); the
    /// destination restores it in EtcdMigrationComplete. Nothing else.
    pub(super) async fn migrate_dns_record(
        &mut self,
        line: &Step,
    ) -> Result<(&'static str, String)> {
        let name = self.state.dns.api_name.clone();
        let mig = self.mig().clone();
        let gw = self.state.seed(&mig.from).expect("seed").gateway.ip;
        line.detail("the source's DNSRecord migrated; the record itself is kept");
        Ok((
            "DNSRecordsMigrated",
            format!(
                "the source's DNSRecord for {name} migrated (the record kept: it still answers the `{}` gateway, {gw}); the destination restores it in {SHRINK} ({} order)",
                mig.from,
                mig.order.name()
            ),
        ))
    }

    /// EtcdMigrationComplete's first part in the `gep` and `dns-first`
    /// orders: the destination restores the record (it now answers the
    /// destination's gateway) and waits for DNS caches. The source API
    /// servers keep serving the connections clients keep.
    pub(super) async fn restore_dns(&mut self, line: &Step) -> Result<String> {
        let (name, gw) = self.point_dns_at_destination(line).await?;
        self.wait_dns_caches(line).await?;
        Ok(format!(
            "{name} restored in the destination -> {gw}; waited the record's {} s TTL for DNS caches",
            self.state.dns.ttl
        ))
    }

    /// MigrateDNSRecords in the `early-drain` order (and with
    /// force-shrink): the record switched, its TTL waited out (not with
    /// force-shrink), the source API servers drained.
    pub(super) async fn switch_dns(&mut self, line: &Step) -> Result<(&'static str, String)> {
        let (name, gw) = self.point_dns_at_destination(line).await?;
        let mig = self.mig().clone();
        let ttl = self.state.dns.ttl;
        if !mig.force_shrink {
            self.wait_dns_caches(line).await?;
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
