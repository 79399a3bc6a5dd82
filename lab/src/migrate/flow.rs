//! The reference Live CPM flow: the lab's controller in the gardenlet's (and
//! etcd-druid's) role. One function per `status.liveMigration.conditions`
//! step, each in a file of its own under `flow/` (`prepare`, `join`,
//! `api_ready`, `dns`, `shrink`, `cleanup`; `classic` and `mirror` for those
//! plans' own steps; `abort`); this file holds the flow itself (begin,
//! resume, run, the conditions) and what the steps share. Each step is
//! idempotent (it reads the cluster and the provider before it acts) and
//! the conditions are persisted before and after it runs, so
//! `cpmlab migrate --resume` goes on from whatever a killed run left.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::conditions::{Status, STEPS};
use super::etcd_ops;
use super::gateway_handover::GatewayHandover;
use super::membership::{self, Action, Plan};
use super::order::{DnsStep, Order};
use super::record::MigrationState;
use crate::errors::{BadInput, Cancel, EnvNotReady, Interrupted};
use crate::etcd::{self, ClusterView, EtcdTls};
use crate::pki::Ca;
use crate::probe::run::{now_unix_ms, record_lab_event, record_settings, record_step};
use crate::progress::{Progress, Step};
use crate::provider::{SeedOps, Signal, WorkloadState};
use crate::state::{LabDir, LabState, MemberState};

mod abort;
mod api_ready;
mod classic;
mod cleanup;
mod dns;
mod gateway_handover;
mod join;
mod mirror;
mod prepare;
mod shrink;

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
    pub order: Order,
    /// What the source gateway does for kept connections.
    pub gateway_handover: GatewayHandover,
    /// SourceSeedCleanup's steps before the source API servers' deletion
    /// (the `gep` and `dns-first` orders).
    pub cleanup_before_api: Duration,
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
    cpmlab_model::placement::migration(state, from, to, &now_rfc3339(), now_unix_ms())
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
    provider: &'a dyn SeedOps,
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
    /// Members this run has seen as learners added by etcd-druid's
    /// backup-restore (noted once each).
    druid_learners: std::collections::HashSet<String>,
    /// The seed whose gardenlet runs this flow: it writes only that
    /// seed's members and API servers into the lab's state (a cache the
    /// other gardenlet writes its own seed's part of), and heals only that
    /// seed's members. None: one process runs every step (the `classic`
    /// and `mirror` plans' tests, `--abort`).
    role_seed: Option<String>,
    /// The garden, where a gardenlet runs this flow: what the two
    /// gardenlets hand each other besides the conditions (the gateway
    /// handover).
    peer: Option<super::garden_peer::Peer>,
    /// Test holds (`Step:4s,...`): the trigger's, else `CPMLAB_TEST_HOLD`.
    hold: Option<String>,
}

impl<'a> Flow<'a> {
    pub fn new(
        provider: &'a dyn SeedOps,
        dir: LabDir,
        state: LabState,
        progress: &'a Progress,
        cancel: Cancel,
        join_timeout: Duration,
    ) -> Result<Flow<'a>> {
        // One of the lab's own waits: under emulation, stretched by the
        // platform's factor.
        let join_timeout = state.stretch(join_timeout);
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
            druid_learners: Default::default(),
            role_seed: None,
            peer: None,
            hold: std::env::var("CPMLAB_TEST_HOLD").ok(),
        })
    }

    /// The garden this gardenlet's flow reaches the other through.
    pub fn with_peer(mut self, peer: super::garden_peer::Peer) -> Self {
        self.peer = Some(peer);
        self
    }

    /// The flow as `seed`'s gardenlet runs it.
    pub fn for_seed(mut self, seed: &str) -> Self {
        self.role_seed = Some(seed.to_string());
        self
    }

    /// Takes up the migration the garden's Shoot asks for (`from` → `to`
    /// with `settings`): the one the lab's state caches when it is the same
    /// (started at the same time), else planned afresh. Nothing runs.
    pub fn adopt(
        &mut self,
        from: &str,
        to: &str,
        settings: &crate::garden::trigger::Settings,
    ) -> Result<()> {
        let same = self.state.migration.as_ref().is_some_and(|m| {
            m.from == from
                && m.to == to
                && (m.started_unix_ms - settings.started_unix_ms).abs() < 1.0
        });
        if same {
            // The operator's resume can ask for force-shrink mid-way
            // (`cpmlab migrate --resume --force-shrink-etcd`, the GEP's
            // escape hatch for a join that will not complete).
            let m = self.state.migration.as_mut().expect("same");
            if settings.force_shrink && !m.force_shrink {
                m.force_shrink = true;
                return self.save();
            }
            return Ok(());
        }
        let mut mig = plan_destination(&self.state, from, to)?;
        mig.plan = settings.plan;
        mig.force_shrink = settings.force_shrink;
        mig.leader_handover = settings.leader_handover;
        mig.gateway_handover = settings.gateway_handover;
        mig.order = settings.order.for_plan(settings.plan);
        mig.cleanup_before_api_ms = settings.cleanup_before_api_ms;
        mig.started_unix_ms = settings.started_unix_ms;
        mig.rtt_ms = settings.rtt_ms;
        mig.rtt_gate = settings.rtt_gate.clone();
        if settings.external {
            mig.driver = super::record::Driver::External;
        }
        self.join_timeout = self
            .state
            .stretch(Duration::from_millis(settings.join_timeout_ms));
        self.state.migration = Some(mig);
        if settings.hold.is_some() {
            self.hold = settings.hold.clone();
        }
        self.save()
    }

    /// The trigger's test holds.
    pub fn set_hold(&mut self, hold: Option<String>) {
        if hold.is_some() {
            self.hold = hold;
        }
    }

    /// Runs one attempt of `step` (the owner's gardenlet retries it).
    pub async fn attempt(&mut self, step: &str, line: &Step) -> Result<(&'static str, String)> {
        self.test_hold(step, line).await?;
        self.run_step(step, line).await
    }

    /// Keeps the garden's conditions in the lab's state, as a cache for
    /// the lab's own readers (the scenario's step triggers, `status` when
    /// the garden does not answer).
    pub fn mirror(&mut self, conditions: &crate::migrate::conditions::Conditions) -> Result<()> {
        if let Some(m) = self.state.migration.as_mut() {
            m.conditions = conditions.clone();
        }
        self.save()
    }

    /// Records a step's band with its outcome (`True`, `False`) in the
    /// probe run, if probes are running.
    pub fn record_step(&self, step: &str, detail: &str, status: &str, at: f64, end: f64) {
        record_step(&self.dir, step, detail, status, at, end);
    }

    /// The seed's etcd members that stopped, started again as their
    /// StatefulSet would: only those still in the cluster (a member that
    /// left stops for good), only of the gardenlet's own seed.
    pub async fn heal_own(&self, line: &Step) -> Result<()> {
        self.heal(line).await
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
    /// A gardenlet's flow writes its own seed's members and API servers
    /// only, and merges the migration's record with the other's; its own
    /// view of the lab stays its own.
    fn save(&mut self) -> Result<()> {
        let members = self.state.members.clone();
        let apis = self.state.apiservers.clone();
        let mig = self.state.migration.clone();
        let me = self.role_seed.clone();
        let (m2, a2, g2) = (members.clone(), apis.clone(), mig.clone());
        let file = self.dir.update(move |s| match &me {
            None => {
                s.members = m2;
                s.apiservers = a2;
                s.migration = g2;
            }
            Some(me) => {
                s.members.retain(|m| &m.seed != me);
                s.members.extend(m2.into_iter().filter(|m| &m.seed == me));
                s.apiservers.retain(|a| &a.seed != me);
                s.apiservers
                    .extend(a2.into_iter().filter(|a| &a.seed == me));
                s.migration = merge_migration(s.migration.take(), g2, me);
            }
        })?;
        let mut st = file;
        if self.role_seed.is_some() {
            st.members = members;
            st.apiservers = apis;
            st.migration = mig;
        }
        self.state = st;
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
        check_gateway_handover(&self.state, o)?;
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
        mig.gateway_handover = o.gateway_handover;
        mig.order = o.order.for_plan(o.plan);
        if mig.order != o.order {
            self.progress.note(&format!(
                "the {} plan runs in the {} order (its source API stops before its etcd does), not {}",
                o.plan.name(),
                mig.order.name(),
                o.order.name()
            ));
        }
        mig.cleanup_before_api_ms = o.cleanup_before_api.as_millis() as u64;
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
        record_settings(&self.dir, "what ran", &settings_words(&self.state, &mig));
        self.state.migration = Some(mig);
        self.save()?;
        self.event(
            "note",
            &format!(
                "migration {} -> {} ({}, order {}) started; RTT {rtt:.1} ms",
                o.from,
                o.to,
                plan_name(o.plan),
                o.order.name()
            ),
            "",
            now_unix_ms(),
            None,
        );
        Ok(rtt)
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
            // The step's band, with its outcome as its condition ends.
            let status = match &r {
                Ok(_) => "True",
                Err(e) if e.downcast_ref::<StepFailed>().is_some() => "False",
                Err(_) => "Unknown",
            };
            record_step(&self.dir, &step, "", status, started, now_unix_ms());
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
        let Some(spec) = self.hold.clone() else {
            return Ok(());
        };
        for item in spec.split(',') {
            if let Some((s, d)) = item.split_once(':') {
                if s == step {
                    let d = crate::link::profile::parse_duration("CPMLAB_TEST_HOLD", d)?;
                    self.wait_until(line, Instant::now() + d, |_| {
                        format!("held for {d:?} (CPMLAB_TEST_HOLD)")
                    })
                    .await?;
                }
            }
        }
        Ok(())
    }

    /// Waits until `deadline`, saying what for (`say` gets the seconds
    /// left, rounded up) and stopping at Ctrl-C.
    async fn wait_until(
        &self,
        line: &Step,
        deadline: Instant,
        say: impl Fn(f64) -> String,
    ) -> Result<()> {
        loop {
            self.cancel.check()?;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            line.detail(&say(left.as_secs_f64().ceil()));
            tokio::time::sleep(left.min(Duration::from_millis(500))).await;
        }
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
                if self.api_waits_for_etcd_step() {
                    "the lab's shoot has no extensions to migrate (the dns-first order folds this step into MigrateDNSRecords)".into()
                } else {
                    "the lab's shoot has no extensions to migrate".into()
                },
            )),
            API_READY if self.api_waits_for_etcd_step() => Ok((
                "FoldedIntoEtcdMigrationComplete",
                format!("the dns-first order starts the destination API in {SHRINK}, after the DNS record's migration"),
            )),
            API_READY => self.destination_api(line).await,
            DNS => match self.mig().order.dns_step(self.mig().force_shrink) {
                DnsStep::SwitchAndDrain => self.switch_dns(line).await,
                DnsStep::MigrateOnly => self.migrate_dns_record(line).await,
            },
            SHRINK => self.etcd_migration_complete(line).await,
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

    fn etcd_scope(&self) -> LabState {
        etcd_scope(&self.state)
    }

    /// The `dns-first` order: the destination API starts in
    /// EtcdMigrationComplete.
    fn api_waits_for_etcd_step(&self) -> bool {
        let m = self.mig();
        m.order
            .starts_api_in_etcd_migration_complete(m.force_shrink)
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

    /// The lab's member that leads in `view`, if one does.
    fn leader_of(&self, view: &ClusterView) -> Option<MemberState> {
        view.members
            .iter()
            .find(|m| m.is_leader)
            .and_then(|l| self.state.members.iter().find(|m| m.name == l.name))
            .cloned()
    }

    /// Starts members whose containers stopped (as their StatefulSet would).
    async fn heal(&self, line: &Step) -> Result<()> {
        if self.state.etcd_druid.is_some() {
            // etcd-druid's StatefulSets bring their pods back themselves; a
            // pod found stopped is one druid's rolling update is replacing
            // (every scale-up changes the configuration's checksum in the
            // pod template).
            return Ok(());
        }
        let mine: Vec<&MemberState> = self
            .state
            .members
            .iter()
            .filter(|m| self.role_seed.as_ref().is_none_or(|s| &m.seed == s))
            .collect();
        // A look at each container first (the engine's answer, at once),
        // then the removals the lab's state records: etcd's view of the
        // cluster is asked for only when a member that has not left
        // stopped. Asked at every look, it cost the source's gardenlet 3 s
        // a look once its members had left (a member that is gone answers
        // nothing within the view's timeout): a hand-off that much past
        // the step interval.
        let mut stopped = Vec::new();
        for m in mine {
            if self.provider.workload_state(&m.container).await? == WorkloadState::Stopped {
                stopped.push(m);
            }
        }
        if stopped.is_empty() {
            return Ok(());
        }
        // The removals as the file has them now (the destination records
        // each right after etcd applied it).
        let fresh = self.dir.load().ok();
        let departed: Vec<&str> = [fresh.as_ref(), Some(&self.state)]
            .into_iter()
            .flatten()
            .flat_map(LabState::departed_members)
            .collect();
        stopped.retain(|m| !departed.contains(&m.name.as_str()));
        if stopped.is_empty() {
            return Ok(());
        }
        let view = self.view().await;
        for m in stopped {
            if !restart_wanted(&m.name, &view, &departed) {
                continue;
            }
            self.provider.start(&self.state, &m.container).await?;
            self.note(
                line,
                &format!("etcd member {} had stopped; started it again", m.name),
            );
        }
        Ok(())
    }
}

/// Whether a stopped member is started again, as its StatefulSet would:
/// not one that left the cluster, which stops for good. Left is what etcd's
/// member list says, or where it gives none (no member answered within the
/// look: an election after the leader's removal, say) what the destination
/// recorded of its removals. The source's gardenlet keeps its own seed's
/// members in the lab's state until its cleanup, so a departed member is
/// still among them: started again, a removed leader came back with its
/// old term and data, and the source API servers still serving the kept
/// connections waited on it (reads timed out for 20 s).
fn restart_wanted(name: &str, view: &ClusterView, departed: &[&str]) -> bool {
    if departed.contains(&name) {
        return false;
    }
    view.error.is_some() || view.members.iter().any(|v| v.name == name)
}

/// The migration's record as two gardenlets keep it in the lab's state:
/// the plan and the conditions as the last writer saw them, each side's
/// own marks (the destination's departed members and finish, the source's
/// gateway handover and DNS switch) kept whoever wrote last.
fn merge_migration(
    file: Option<MigrationState>,
    mine: Option<MigrationState>,
    me: &str,
) -> Option<MigrationState> {
    let (Some(mut file), Some(mut mine)) = (file.clone(), mine.clone()) else {
        return mine.or(file);
    };
    if file.from != mine.from || file.to != mine.to || file.started_unix_ms != mine.started_unix_ms
    {
        return Some(mine);
    }
    // Each side's marks: this side's where it has one, else the file's.
    let marks: [fn(&mut MigrationState) -> &mut Option<f64>; 7] = [
        |m| &mut m.source_gateway_released_unix_ms,
        |m| &mut m.source_gateway_drained_unix_ms,
        |m| &mut m.source_gateway_drain_acked_unix_ms,
        |m| &mut m.source_gateway_drain_time_ms,
        |m| &mut m.source_gateway_forwarded_unix_ms,
        |m| &mut m.dns_switched_unix_ms,
        |m| &mut m.finished_unix_ms,
    ];
    for mark in marks {
        let theirs = *mark(&mut file);
        let ours = mark(&mut mine);
        *ours = ours.or(theirs);
    }
    if me != mine.to {
        mine.departed_members = file.departed_members;
    }
    Some(mine)
}

/// The round trip between the seeds as the lab measures it (from the
/// destination's vantage to a source member's peer URL through the source
/// gateway), and the words the report gives it. Where Gardener's admission
/// decides by the region ConfigMap's distance, this is the lab's warning.
pub async fn measure_rtt(
    provider: &dyn SeedOps,
    state: &LabState,
    from: &str,
    to: &str,
    max_rtt_ms: f64,
    allow_distant: bool,
) -> Result<(f64, String)> {
    check_seeds(state, from, to)?;
    let member = state
        .members_of(from)
        .next()
        .cloned()
        .expect("checked: the source has members");
    let host = format!("{}:{}", member.host, member.peer_port);
    let vantage = provider
        .vantage(state, to)
        .expect("checked: the seed exists");
    let report =
        super::peer::peer_check(provider, state, &vantage, &member, RTT_GATE_CONNECTS).await?;
    let Some(rtt) = report.rtt_ms().filter(|_| report.error.is_none()) else {
        return Err(EnvNotReady::new(
            format!(
                "seed `{to}` cannot reach the `{from}` gateway to measure the RTT: {}",
                report.error.unwrap_or_default()
            ),
            format!(
                "check the link with `cpmlab link show --name {}` (heal a partition)",
                state.name
            ),
        )
        .into());
    };
    let words = rtt_gate_words(
        rtt,
        &report.connect_ms,
        to,
        from,
        &host,
        max_rtt_ms,
        allow_distant,
    );
    Ok((rtt, words))
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

/// The gateway handover asked for, checked against the order in force,
/// the exposure and the gateways' maximum connection duration.
fn check_gateway_handover(state: &LabState, o: &StartOptions) -> Result<(), BadInput> {
    let age = state
        .topology
        .api
        .gateway_max_connection_duration()
        .map_err(|(f, m)| BadInput(format!("{f}: {m}")))?;
    o.order
        .for_plan(o.plan)
        .check_gateway_handover(
            o.gateway_handover,
            o.force_shrink,
            state.topology.api.exposure,
            age,
        )
        .map_err(|(f, m)| BadInput(format!("{f}: {m}")))
}

/// What ran, in the words of the report's header (the model's one line).
pub fn settings_words(state: &LabState, m: &MigrationState) -> String {
    crate::migrate::order::RanWith {
        exposure: state.topology.api.exposure,
        dns_ttl_s: state.dns.ttl,
        migration: Some(crate::migrate::order::MigrationRanWith {
            order: m.order,
            plan: m.plan,
            leader_handover: m.leader_handover,
            gateway_handover: m.gateway_handover,
            cleanup_before_api_s: m.cleanup_before_api_ms as f64 / 1e3,
            force_shrink: m.force_shrink,
        }),
    }
    .words()
}

/// What runs, from the trigger's settings (the report's header line).
pub fn settings_words_of(state: &LabState, s: &crate::garden::trigger::Settings) -> String {
    crate::migrate::order::RanWith {
        exposure: state.topology.api.exposure,
        dns_ttl_s: state.dns.ttl,
        migration: Some(crate::migrate::order::MigrationRanWith {
            order: s.order,
            plan: s.plan,
            leader_handover: s.leader_handover,
            gateway_handover: s.gateway_handover,
            cleanup_before_api_s: s.cleanup_before_api_ms as f64 / 1e3,
            force_shrink: s.force_shrink,
        }),
    }
    .words()
}

/// A plan the lab's provider cannot run, refused before the garden is asked.
pub fn check_plan(provider: &dyn SeedOps, plan: Plan) -> Result<(), BadInput> {
    if plan.separate_cluster() && !provider.restores_members() {
        return Err(BadInput(format!(
            "the {} plan {}, which the {} form of the lab cannot do (use the docker form)",
            plan.name(),
            if plan.restores() {
                "restores etcd from a snapshot"
            } else {
                "starts a new etcd cluster beside the shoot's"
            },
            provider.name()
        )));
    }
    Ok(())
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
    fn a_departed_member_is_never_started_again_even_when_etcd_does_not_answer() {
        let member = |name: &str| crate::etcd::MemberView {
            name: name.into(),
            ..Default::default()
        };
        let answered = ClusterView {
            members: vec![member("seed-a-etcd-1"), member("seed-b-etcd-0")],
            leader: None,
            error: None,
        };
        let silent = ClusterView {
            members: vec![],
            leader: None,
            error: Some("deadline exceeded".into()),
        };
        // In the member list: started again; out of it: left for good.
        assert!(restart_wanted("seed-a-etcd-1", &answered, &[]));
        assert!(!restart_wanted("seed-a-etcd-0", &answered, &[]));
        // No member list: only what the destination recorded as removed
        // stays stopped.
        assert!(restart_wanted("seed-a-etcd-1", &silent, &["seed-a-etcd-0"]));
        assert!(!restart_wanted(
            "seed-a-etcd-0",
            &silent,
            &["seed-a-etcd-0"]
        ));
        assert!(!restart_wanted(
            "seed-a-etcd-1",
            &answered,
            &["seed-a-etcd-1"]
        ));
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
    fn each_side_keeps_its_marks_and_takes_the_others_from_the_file() {
        let s = crate::plan::sample_state();
        let base = plan_for_tests(&s, "seed-a", "seed-b");
        let mut file = base.clone();
        file.dns_switched_unix_ms = Some(1.0);
        file.source_gateway_drain_acked_unix_ms = Some(2.0);
        file.source_gateway_drain_time_ms = Some(45_000.0);
        file.finished_unix_ms = Some(9.0);
        let mut mine = base.clone();
        mine.source_gateway_drained_unix_ms = Some(3.0);
        mine.finished_unix_ms = Some(8.0);
        let got = merge_migration(Some(file), Some(mine), "seed-a").unwrap();
        assert_eq!(got.dns_switched_unix_ms, Some(1.0));
        assert_eq!(got.source_gateway_drain_acked_unix_ms, Some(2.0));
        assert_eq!(got.source_gateway_drain_time_ms, Some(45_000.0));
        assert_eq!(got.source_gateway_drained_unix_ms, Some(3.0));
        assert_eq!(
            got.finished_unix_ms,
            Some(8.0),
            "this side's own mark stands"
        );
        assert_eq!(got.source_gateway_released_unix_ms, None);
        // Another migration in the file: this side's alone.
        let mut other = base.clone();
        other.started_unix_ms += 1.0;
        other.dns_switched_unix_ms = Some(1.0);
        let got = merge_migration(Some(other), Some(base), "seed-a").unwrap();
        assert_eq!(got.dns_switched_unix_ms, None);
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
