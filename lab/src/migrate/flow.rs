//! The reference Live CPM flow: the lab's controller in the gardenlet's (and
//! etcd-druid's) role. One function per `status.liveMigration.conditions`
//! step; each is idempotent (it reads the cluster and the provider before
//! it acts) and the conditions are persisted before and after it runs, so
//! `cpmlab migrate --resume` goes on from whatever a killed run left.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::conditions::{Status, STEPS};
use super::etcd_ops;
use super::membership::{self, Action, Plan};
use super::record::{Driver, MigrationState};
use crate::errors::{BadInput, Cancel, EnvNotReady, Interrupted};
use crate::etcd::{self, ClusterView, EtcdTls};
use crate::pki::Ca;
use crate::probe::run::{now_unix_ms, record_lab_event};
use crate::progress::{Progress, Step};
use crate::provider::{Provider, Signal, WorkloadState};
use crate::state::{LabDir, LabState, MemberState};

mod classic;
mod mirror;

pub const PREPARE: &str = "SourceEtcdPreparedForPeerJoin";
pub const JOIN: &str = "DestinationEtcdPeersJoined";
pub const EXTENSIONS: &str = "MigrateExtensionsNeededBeforeKubeAPIServer";
pub const API_READY: &str = "DestinationKubeAPIServerReady";
pub const DNS: &str = "MigrateDNSRecords";
pub const SHRINK: &str = "EtcdMigrationComplete";
pub const CLEANUP: &str = "SourceSeedCleanup";
pub const COMPLETED: &str = "MigrationCompleted";

/// How a new migration is asked for.
#[derive(Debug, Clone)]
pub struct StartOptions {
    pub plan: Plan,
    pub from: String,
    pub to: String,
    pub force_shrink: bool,
    pub max_rtt_ms: f64,
    pub allow_distant_regions: bool,
    pub leader_handover: membership::LeaderHandover,
}

/// A step that failed for good (condition False). Only DestinationEtcdPeersJoined
/// failing permits `--abort` (the GEP's rule).
#[derive(Debug, thiserror::Error)]
#[error("{step} failed: {message}")]
pub struct StepFailed {
    pub step: String,
    pub message: String,
}

/// Where a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    Completed,
    /// `--stop-after` reached; `--resume` goes on.
    StoppedAfter(String),
}

pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The plan of a migration from `from` to `to`, for tests elsewhere.
#[cfg(test)]
pub(crate) fn plan_for_tests(state: &LabState, from: &str, to: &str) -> MigrationState {
    plan_destination(state, from, to).expect("a plan")
}

/// Destination members and API replicas mirror the source's (the model's
/// plan, started now).
fn plan_destination(state: &LabState, from: &str, to: &str) -> Result<MigrationState> {
    crate::plan::migration(state, from, to, &now_rfc3339(), now_unix_ms())
        .with_context(|| format!("no network for seed {to}"))
}

/// Checks that `from` → `to` is a migration this lab can start.
pub fn check_seeds(state: &LabState, from: &str, to: &str) -> Result<(), BadInput> {
    for s in [from, to] {
        if state.seed(s).is_none() {
            let known: Vec<&str> = state.seeds.iter().map(|s| s.name.as_str()).collect();
            return Err(BadInput(format!(
                "no seed `{s}` in lab `{}` (seeds: {})",
                state.name,
                known.join(", ")
            )));
        }
    }
    if from == to {
        return Err(BadInput(format!("--from and --to are both `{from}`")));
    }
    if state.members_of(from).count() == 0 {
        return Err(BadInput(format!(
            "seed `{from}` holds no etcd member of the shoot: nothing to migrate"
        )));
    }
    if let Some(m) = state.members_of(to).next() {
        return Err(BadInput(format!(
            "seed `{to}` already holds etcd member {} (etcd.placement spans the seeds): \
             a migration starts with every member in the source seed",
            m.name
        )));
    }
    Ok(())
}

/// The lab as the flow's etcd calls see it: every member, but for the
/// `mirror` plan, once the destination's new cluster has a member, only
/// the destination's (the source's is another cluster then, reached
/// through [`Flow::members_of_seed`]).
fn etcd_scope(state: &LabState) -> LabState {
    let mut s = state.clone();
    if let Some(m) = state.migration.as_ref().filter(|m| m.plan.mirrors()) {
        if state.members_of(&m.to).next().is_some() {
            s.members.retain(|x| x.seed == m.to);
        }
    }
    s
}

pub struct Flow<'a> {
    provider: &'a dyn Provider,
    dir: LabDir,
    state: LabState,
    tls: EtcdTls,
    ca: Ca,
    sa: (String, String),
    progress: &'a Progress,
    cancel: Cancel,
    join_timeout: Duration,
    /// Members whose barrier this run has released.
    released: std::collections::HashSet<String>,
}

impl<'a> Flow<'a> {
    pub fn new(
        provider: &'a dyn Provider,
        dir: LabDir,
        state: LabState,
        progress: &'a Progress,
        cancel: Cancel,
        join_timeout: Duration,
    ) -> Result<Flow<'a>> {
        let tls = etcd::lab_tls(&dir)?;
        let read = |f: &str| {
            let p = dir.pki().join(f);
            std::fs::read_to_string(&p).with_context(|| format!("read {}", p.display()))
        };
        let ca = Ca::from_pem(&state.name, &read("ca.crt")?, &read("ca.key")?)?;
        let sa = match read("sa.key") {
            Ok(k) => {
                let kp = rcgen::KeyPair::from_pem(&k).context("the lab's sa.key")?;
                (k, kp.public_key_pem())
            }
            // Labs made before the key was kept: only kube-apiserver needs it.
            Err(_) => {
                let kp = rcgen::KeyPair::generate()?;
                (kp.serialize_pem(), kp.public_key_pem())
            }
        };
        Ok(Flow {
            provider,
            dir,
            state,
            tls,
            ca,
            sa,
            progress,
            cancel,
            join_timeout,
            released: Default::default(),
        })
    }

    pub fn state(&self) -> &LabState {
        &self.state
    }

    fn mig(&self) -> &MigrationState {
        self.state
            .migration
            .as_ref()
            .expect("a flow runs with a migration")
    }

    fn mig_mut(&mut self) -> &mut MigrationState {
        self.state
            .migration
            .as_mut()
            .expect("a flow runs with a migration")
    }

    /// Persists what the migration owns (members, API servers, migration)
    /// into the latest state, and takes the rest (probe run, links) from it.
    fn save(&mut self) -> Result<()> {
        let members = self.state.members.clone();
        let apis = self.state.apiservers.clone();
        let mig = self.state.migration.clone();
        self.state = self.dir.update(|s| {
            s.members = members;
            s.apiservers = apis;
            s.migration = mig;
        })?;
        Ok(())
    }

    /// Records a lab event in the probe run, if probes are running.
    fn event(&self, kind: &str, name: &str, detail: &str, at: f64, end: Option<f64>) {
        record_lab_event(&self.dir, kind, name, detail, at, end);
    }

    fn note(&self, step: &Step, msg: &str) {
        step.detail(msg);
        self.progress.note(&format!("    - {msg}"));
        tracing::info!("{msg}");
        self.event("note", msg, "", now_unix_ms(), None);
    }

    /// Measures the RTT between the seeds (from the destination seed, `Provider::vantage`, to
    /// the source gateway's peer port) and plans the migration; nothing is
    /// created. Refuses distant regions unless allowed.
    pub async fn begin(&mut self, o: &StartOptions) -> Result<f64> {
        check_seeds(&self.state, &o.from, &o.to)?;
        if o.plan.separate_cluster() && !self.provider.restores_members() {
            return Err(BadInput(format!(
                "the {} plan {}, which the {} form of the lab cannot do (use the docker form)",
                o.plan.name(),
                if o.plan.restores() {
                    "restores etcd from a snapshot"
                } else {
                    "starts a new etcd cluster beside the shoot's"
                },
                self.provider.name()
            ))
            .into());
        }
        let member = self
            .state
            .members_of(&o.from)
            .next()
            .cloned()
            .expect("checked: the source has members");
        let host = format!("{}:{}", member.host, member.peer_port);
        let vantage = self
            .provider
            .vantage(&self.state, &o.to)
            .expect("checked: the seed exists");
        let report = super::peer::peer_check(
            self.provider,
            &self.state,
            &vantage,
            &member,
            RTT_GATE_CONNECTS,
        )
        .await?;
        let Some(rtt) = report.rtt_ms().filter(|_| report.error.is_none()) else {
            return Err(EnvNotReady::new(
                format!(
                    "seed `{}` cannot reach the `{}` gateway to measure the RTT: {}",
                    o.to,
                    o.from,
                    report.error.unwrap_or_default()
                ),
                format!(
                    "check the link with `cpmlab link show --name {}` (heal a partition)",
                    self.state.name
                ),
            )
            .into());
        };
        // The classic plan is what distant seeds are left with (the GEP's
        // non-goal): no cluster spans them, so their distance is no bar;
        // nor for the mirror, whose replication is a client's, not raft's.
        if rtt > o.max_rtt_ms && !o.allow_distant_regions && !o.plan.separate_cluster() {
            return Err(BadInput(format!(
                "the seeds are too far apart: RTT {rtt:.1} ms between `{}` and `{}` exceeds \
                 {:.0} ms (Live CPM is for seeds in nearby regions); pass \
                 --allow-distant-regions to migrate anyway, or --max-rtt to change the bound",
                o.to, o.from, o.max_rtt_ms
            ))
            .into());
        }
        let mut mig = plan_destination(&self.state, &o.from, &o.to)?;
        mig.plan = o.plan;
        mig.force_shrink = o.force_shrink;
        mig.leader_handover = o.leader_handover;
        mig.rtt_ms = Some(rtt);
        mig.rtt_gate = Some(rtt_gate_words(
            rtt,
            &report.connect_ms,
            &o.to,
            &o.from,
            &host,
            o.max_rtt_ms,
            o.allow_distant_regions,
        ));
        self.state.migration = Some(mig);
        self.save()?;
        self.event(
            "note",
            &format!(
                "migration {} -> {} ({}) started; RTT {rtt:.1} ms",
                o.from,
                o.to,
                plan_name(o.plan)
            ),
            "",
            now_unix_ms(),
            None,
        );
        Ok(rtt)
    }

    /// Takes up a migration that is in the state file.
    pub fn resume(&mut self, force_shrink: bool) -> Result<()> {
        let Some(mig) = self.state.migration.as_mut() else {
            return Err(BadInput(format!(
                "lab `{}` has no migration to resume; start one with `cpmlab migrate`",
                self.state.name
            ))
            .into());
        };
        if mig.driver == Driver::External {
            return Err(BadInput(
                "the last migration ran an external driver; run it again with --driver external"
                    .into(),
            )
            .into());
        }
        if mig.completed() {
            return Err(BadInput(format!(
                "the migration {} -> {} has completed; nothing to resume",
                mig.from, mig.to
            ))
            .into());
        }
        if force_shrink {
            mig.force_shrink = true;
        }
        // A failed step is tried again on resume (e.g. after a link healed).
        if let Some(f) = mig.conditions.failed().map(|c| c.kind.clone()) {
            let now = now_rfc3339();
            mig.conditions
                .set(&f, Status::Unknown, "Retrying", "resumed", &now);
        }
        self.save()
    }

    fn set(&mut self, step: &str, status: Status, reason: &str, message: &str) -> Result<()> {
        let now = now_rfc3339();
        self.mig_mut()
            .conditions
            .set(step, status, reason, message, &now);
        self.save()
    }

    /// Runs the steps not yet True, in order; stops after `stop_after`.
    pub async fn run(&mut self, stop_after: Option<&str>) -> Result<Ended> {
        while let Some(step) = self.mig().conditions.next_step().map(str::to_string) {
            self.cancel.check()?;
            let started = now_unix_ms();
            self.set(&step, Status::Unknown, "Progressing", "")?;
            let line = self.progress.step(step.clone());
            self.test_hold(&step, &line).await?;
            let r = self.run_step(&step, &line).await;
            self.event("phase", &step, "", started, Some(now_unix_ms()));
            match r {
                Ok((reason, message)) => {
                    self.set(&step, Status::True, reason, &message)?;
                    line.done_with(&message);
                }
                Err(e) => {
                    let msg = format!("{e:#}");
                    if let Some(f) = e.downcast_ref::<StepFailed>() {
                        self.set(&step, Status::False, "Failed", &f.message)?;
                    } else if e.is::<Interrupted>() {
                        self.set(
                            &step,
                            Status::Unknown,
                            "Interrupted",
                            "resume with --resume",
                        )?;
                    } else {
                        self.set(&step, Status::Unknown, "Error", &msg)?;
                    }
                    line.fail(&msg);
                    return Err(e);
                }
            }
            if stop_after == Some(step.as_str()) {
                return Ok(Ended::StoppedAfter(step));
            }
        }
        Ok(Ended::Completed)
    }

    /// A test hook: `CPMLAB_TEST_HOLD=EtcdMigrationComplete:4s` holds that
    /// step for a while after it is marked Progressing, so a fault test can
    /// act inside the step deterministically.
    async fn test_hold(&self, step: &str, line: &Step) -> Result<()> {
        let Ok(spec) = std::env::var("CPMLAB_TEST_HOLD") else {
            return Ok(());
        };
        for item in spec.split(',') {
            if let Some((s, d)) = item.split_once(':') {
                if s == step {
                    let d = crate::link::profile::parse_duration("CPMLAB_TEST_HOLD", d)?;
                    line.detail(&format!("held for {d:?} (CPMLAB_TEST_HOLD)"));
                    let t0 = Instant::now();
                    while t0.elapsed() < d {
                        self.cancel.check()?;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }
        Ok(())
    }

    async fn run_step(&mut self, step: &str, line: &Step) -> Result<(&'static str, String)> {
        match step {
            PREPARE if self.mig().plan.restores() => self.backup(line).await,
            PREPARE => self.prepare(line).await,
            JOIN if self.mig().plan.restores() => self.restore(line).await,
            JOIN if self.mig().plan.mirrors() => self.mirror_join(line).await,
            JOIN => self.join(line).await,
            EXTENSIONS => Ok((
                "NoExtensions",
                "the lab's shoot has no extensions to migrate".into(),
            )),
            API_READY => self.destination_api(line).await,
            DNS => self.switch_dns(line).await,
            SHRINK => self.shrink(line, false).await,
            CLEANUP => self.cleanup(line).await,
            COMPLETED => {
                let t = now_unix_ms();
                self.mig_mut().finished_unix_ms = Some(t);
                let m = self.mig();
                Ok((
                    "Completed",
                    format!(
                        "the control plane runs in `{}`; {:.1} s from the start",
                        m.to,
                        (t - m.started_unix_ms) / 1e3
                    ),
                ))
            }
            other => anyhow::bail!("unknown step {other} (known: {})", STEPS.join(", ")),
        }
    }

    // --- SourceEtcdPreparedForPeerJoin ---------------------------------

    /// Every source member's peer URL, as a joining member will use it:
    /// resolved by the lab DNS to the source gateway, routed by SNI to the
    /// member, checked from the destination seed.
    async fn prepare(&mut self, line: &Step) -> Result<(&'static str, String)> {
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
                let r = super::peer::peer_check(self.provider, &self.state, &vantage, m, 2).await?;
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

    // --- DestinationEtcdPeersJoined -------------------------------------

    async fn join(&mut self, line: &Step) -> Result<(&'static str, String)> {
        self.publish_destination_members().await?;
        self.join_members(line).await
    }

    /// Gardener's DNSRecord per destination member, and its pod's name
    /// (which the gateway resolves); then the gateway's address and route
    /// per member, which resolve from the start.
    async fn publish_destination_members(&mut self) -> Result<()> {
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

    async fn join_members(&mut self, line: &Step) -> Result<(&'static str, String)> {
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

    fn etcd_scope(&self) -> LabState {
        etcd_scope(&self.state)
    }

    /// The lab with only `seed`'s members (one cluster of the `mirror` plan's two).
    fn members_of_seed(&self, seed: &str) -> LabState {
        let mut s = self.state.clone();
        s.members.retain(|x| x.seed == seed);
        s
    }

    async fn client(&self) -> Result<etcd_client::Client> {
        etcd::cluster_client(&self.etcd_scope(), &self.tls, Duration::from_secs(3))
            .await
            .context("no etcd member of the lab answers")
    }

    /// A client for the cluster through any member but `name`.
    async fn client_without(&self, name: &str) -> Result<etcd_client::Client> {
        let mut others = self.etcd_scope();
        others.members.retain(|m| m.name != name);
        etcd::cluster_client(&others, &self.tls, Duration::from_secs(3))
            .await
            .with_context(|| format!("no etcd member of the lab but {name} answers"))
    }

    async fn view(&self) -> ClusterView {
        etcd::cluster_view(&self.etcd_scope(), &self.tls, Duration::from_secs(3)).await
    }

    /// Starts members whose containers stopped (as their StatefulSet would).
    async fn heal(&self, line: &Step) -> Result<()> {
        for m in &self.state.members {
            if self.provider.workload_state(&m.container).await? == WorkloadState::Stopped {
                self.provider.start(&self.state, &m.container).await?;
                self.note(
                    line,
                    &format!("etcd member {} had stopped; started it again", m.name),
                );
            }
        }
        Ok(())
    }

    /// `m` is a voting member with a running container: added as a learner
    /// (one at a time), started, promoted once in sync.
    async fn ensure_joined(&mut self, m: &MemberState, line: &Step, step: &str) -> Result<()> {
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
    async fn join_once(&mut self, m: &MemberState, line: &Step) -> Result<Option<String>> {
        self.heal(line).await?;
        let mut c = self.client().await?;
        let list = c.member_list().await.context("member list")?;
        let url = m.peer_url();
        let found = list
            .members()
            .iter()
            .find(|x| x.peer_urls().iter().any(|u| u == &url))
            .cloned();
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
                        .members()
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

    // --- DestinationKubeAPIServerReady ------------------------------------

    async fn destination_api(&mut self, line: &Step) -> Result<(&'static str, String)> {
        if self.mig().force_shrink {
            line.detail("force-shrink: source members leave before the destination API starts");
            self.shrink(line, true).await?;
        }
        let mig = self.mig().clone();
        let etcd_servers: Vec<String> = self
            .state
            .members_of(&mig.to)
            .map(|m| format!("https://{}:2379", m.ip))
            .collect();
        for a in &mig.destination_apiservers {
            let exists = self.state.apiservers.iter().any(|x| x.name == a.name)
                && self.provider.workload_state(&a.container).await? != WorkloadState::Missing;
            if exists {
                if matches!(
                    self.provider.workload_state(&a.container).await?,
                    WorkloadState::Stopped | WorkloadState::Created
                ) {
                    self.provider.start(&self.state, &a.container).await?;
                }
                continue;
            }
            if !self.state.apiservers.iter().any(|x| x.name == a.name) {
                self.state.apiservers.push(a.clone());
                self.save()?;
            }
            self.provider
                .start_apiserver(&self.state, &self.ca, a, &etcd_servers, &self.sa)
                .await?;
            self.note(line, &format!("{} started", a.name));
        }
        // The gateway exposes the API and follows the replicas: each is an
        // endpoint once its readiness probe passed (the kubelet's, with its
        // initial delay), as a Deployment's pods join their Service.
        self.provider.sync_gateway(&self.state, &mig.to).await?;
        for a in &mig.destination_apiservers {
            line.detail(&format!("waiting for {} to be ready", a.name));
            crate::apiserver::ready::wait_replica_ready(
                &self.state,
                a,
                &self.tls.ca_pem,
                &self.cancel,
            )
            .await?;
        }
        let gw = self.state.seed(&mig.to).expect("seed").gateway.ip;
        crate::apiserver::ready::wait_api_at(&self.state, gw, &self.tls.ca_pem, &self.cancel)
            .await?;
        // Ready as a Deployment is: every replica's endpoint served, so
        // the clients the DNS switch sends here are spread over all.
        line.detail("waiting for the gateway to serve every replica");
        self.provider
            .wait_gateway_serves(&self.state, &mig.to, &self.cancel)
            .await?;
        Ok((
            "Ready",
            format!(
                "{} API server replica(s) ready through the `{}` gateway ({gw}), on {} destination member(s)",
                mig.destination_apiservers.len(),
                mig.to,
                etcd_servers.len()
            ),
        ))
    }

    // --- MigrateDNSRecords --------------------------------------------------

    async fn switch_dns(&mut self, line: &Step) -> Result<(&'static str, String)> {
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
    fn termination_grace(&self) -> Result<Duration> {
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
    async fn drain_source_api(&mut self, line: &Step, at_once: bool) -> Result<usize> {
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

    // --- EtcdMigrationComplete ------------------------------------------------

    /// The rest of the destination joins; then the source leaves, one member
    /// at a time behind a quorum gate, the leader last (removed, or after
    /// MoveLeader). `rolling`: the last exchange, one in and one out.
    /// `force`: source readiness is not waited for.
    async fn shrink(&mut self, line: &Step, force: bool) -> Result<(&'static str, String)> {
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
    async fn look(&mut self, line: &Step, last: &mut String) -> Result<Option<ClusterView>> {
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

    fn live(view: &ClusterView) -> Vec<membership::Member> {
        view.members
            .iter()
            .map(|m| membership::Member {
                name: m.name.clone(),
                is_learner: m.is_learner,
                is_leader: m.is_leader,
            })
            .collect()
    }

    fn leaving(&self) -> Vec<String> {
        let from = &self.mig().from;
        self.state
            .members_of(from)
            .map(|m| m.name.clone())
            .collect()
    }

    /// Every source member leaves, one at a time behind the quorum gate
    /// (`force`: the source's members are not waited for), decided afresh
    /// from the live membership each time. The number removed.
    async fn remove_source(&mut self, line: &Step, force: bool) -> Result<usize> {
        let mig = self.mig().clone();
        let dest: Vec<String> = mig
            .destination_members
            .iter()
            .map(|m| m.name.clone())
            .collect();
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

    /// The `rolling` plan's exchanges until `target` destination members
    /// are voters and the cluster is back to its size: a destination member
    /// joins (learner, promoted once in sync), then a source member leaves
    /// behind the quorum gate (followers first, the leader last with the
    /// `leader_handover` setting), decided afresh from the live membership
    /// each time ([`membership::next_exchange`]). A join has the join
    /// timeout (a False condition, as in the other plans); a removal that
    /// makes no progress for the shrink's deadline fails the step. The
    /// number of source members removed.
    async fn exchange(
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
    async fn gated(&self, view: &ClusterView, force: bool, line: &Step, last: &mut String) -> bool {
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
    async fn leave(&mut self, action: &Action, view: &ClusterView, line: &Step) -> Result<bool> {
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
                format!("{member} removed from the cluster")
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

    async fn move_leader(&self, leader: &str, to: u64) -> Result<()> {
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
    async fn depart(&mut self, gone: &[MemberState]) -> Result<()> {
        for m in gone {
            self.state.members.retain(|x| x.name != m.name);
            let mig = self.mig_mut();
            if !mig.departed_members.iter().any(|x| x.name == m.name) {
                mig.departed_members.push(m.clone());
            }
        }
        self.save()?;
        for m in gone {
            self.provider
                .stop(&m.container, Duration::from_secs(5))
                .await?;
        }
        Ok(())
    }

    // --- SourceSeedCleanup ------------------------------------------------------

    async fn cleanup(&mut self, line: &Step) -> Result<(&'static str, String)> {
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

/// TCP connects the RTT gate times; their median is the figure it judges.
pub const RTT_GATE_CONNECTS: u32 = 5;

/// The RTT gate in words: the figure it judged, how it was measured, and
/// the bound. The median, not the mean or the maximum: a lost SYN costs a
/// 1 s retransmission and must not make two nearby seeds look distant.
pub fn rtt_gate_words(
    rtt_ms: f64,
    samples_ms: &[f64],
    to: &str,
    from: &str,
    host: &str,
    max_rtt_ms: f64,
    allowed_distant: bool,
) -> String {
    let mut sorted = samples_ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    let samples: Vec<String> = sorted.iter().map(|s| format!("{s:.1}")).collect();
    format!(
        "RTT {rtt_ms:.1} ms: the median of {} TCP connects from `{to}` (its gateway; a node in the kind form) to {host} through the `{from}` gateway (samples {} ms), measured at the start; {}",
        sorted.len(),
        samples.join(", "),
        if rtt_ms <= max_rtt_ms {
            format!("within the {max_rtt_ms:.0} ms bound")
        } else if allowed_distant {
            format!("above the {max_rtt_ms:.0} ms bound, allowed by --allow-distant-regions")
        } else {
            format!("above the {max_rtt_ms:.0} ms bound")
        }
    )
}

pub fn plan_name(p: Plan) -> &'static str {
    p.name()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rtt_gate_reports_the_median_it_judged_not_a_retransmitted_syn() {
        // 60 ms one-way with loss: one SYN was lost and retried after 1 s.
        let w = rtt_gate_words(
            140.5,
            &[141.0, 1140.3, 139.8, 140.5, 142.2],
            "seed-b",
            "seed-a",
            "seed-a-etcd-0.local.cpmlab.test:2380",
            180.0,
            false,
        );
        assert!(
            w.starts_with("RTT 140.5 ms: the median of 5 TCP connects"),
            "{w}"
        );
        assert!(
            w.contains("samples 139.8, 140.5, 141.0, 142.2, 1140.3 ms"),
            "{w}"
        );
        assert!(w.contains("within the 180 ms bound"), "{w}");
        let far = rtt_gate_words(250.0, &[250.0], "b", "a", "h", 180.0, true);
        assert!(
            far.contains("above the 180 ms bound, allowed by --allow-distant-regions"),
            "{far}"
        );
    }

    #[test]
    fn destination_mirrors_the_source() {
        let s = crate::plan::sample_state();
        let m = plan_destination(&s, "seed-a", "seed-b").unwrap();
        let names: Vec<&str> = m
            .destination_members
            .iter()
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(names, ["seed-b-etcd-0", "seed-b-etcd-1", "seed-b-etcd-2"]);
        assert_eq!(m.destination_members[1].ip.to_string(), "10.213.1.11");
        assert_eq!(
            m.destination_members[0].host,
            "seed-b-etcd-0.local.cpmlab.test"
        );
        assert_eq!(m.destination_apiservers.len(), 2);
        assert_eq!(m.destination_apiservers[0].ip.to_string(), "10.213.1.20");
        assert_eq!(m.conditions.next_step(), Some(PREPARE));
    }

    #[test]
    fn a_mirror_talks_to_the_destinations_own_cluster_once_it_has_a_member() {
        let mut s = crate::plan::sample_state();
        let mut mig = plan_for_tests(&s, "seed-a", "seed-b");
        let all = s.members.len();
        // No migration, or a plan whose cluster spans the seeds: every member.
        assert_eq!(etcd_scope(&s).members.len(), all);
        mig.plan = Plan::Mirror;
        s.migration = Some(mig.clone());
        // Before the destination's first member: the source's cluster.
        assert_eq!(etcd_scope(&s).members.len(), all);
        s.members.push(mig.destination_members[0].clone());
        let scoped = etcd_scope(&s);
        assert_eq!(
            scoped
                .members
                .iter()
                .map(|m| m.name.as_str())
                .collect::<Vec<_>>(),
            ["seed-b-etcd-0"]
        );
        // The six-member plan's destination members join the source's cluster.
        mig.plan = Plan::SixMember;
        s.migration = Some(mig);
        assert_eq!(etcd_scope(&s).members.len(), all + 1);
    }

    #[test]
    fn seeds_are_checked_before_anything() {
        let s = crate::plan::sample_state();
        assert!(check_seeds(&s, "seed-a", "seed-b").is_ok());
        assert!(check_seeds(&s, "seed-a", "seed-a")
            .unwrap_err()
            .0
            .contains("both"));
        assert!(check_seeds(&s, "seed-a", "seed-x")
            .unwrap_err()
            .0
            .contains("no seed `seed-x`"));
        assert!(check_seeds(&s, "seed-b", "seed-a")
            .unwrap_err()
            .0
            .contains("no etcd member"));
        let mut spanning = s.clone();
        spanning.members[2].seed = "seed-b".into();
        assert!(check_seeds(&spanning, "seed-a", "seed-b")
            .unwrap_err()
            .0
            .contains("already holds"));
    }

    #[test]
    fn the_gateway_routes_planned_destination_members() {
        let mut s = crate::plan::sample_state();
        s.migration = Some(plan_destination(&s, "seed-a", "seed-b").unwrap());
        let x = crate::exposure::Exposure::of_docker_seed(&s, "seed-b");
        let peer = x
            .tls
            .iter()
            .find(|r| r.host == "seed-b-etcd-2.local.cpmlab.test" && r.kind == "peer")
            .expect("a route for a planned member");
        assert_eq!(
            peer.destination.host,
            "seed-b-etcd-2.pods.local.cpmlab.test"
        );
        assert!(x.api.is_none(), "no API servers there yet");
        let src = s.gateway_members("seed-a");
        assert!(!src.iter().any(|m| m.name.starts_with("seed-b-etcd")));
    }
}
