//! A seed's gardenlet, for Live CPM (`cpmlab agent gardenlet`): it runs in
//! its seed (a container on the seed's network in the docker form), acts on
//! that seed only, and shares nothing with the other seed's gardenlet but
//! the garden. As upstream's draft reconciler
//! (`pkg/gardenlet/controller/shoot/shoot/reconciler_livemigrate.go`):
//!
//! - it reports its Seed's gardener version (what the admission compares)
//!   and, for a shoot scheduled to its seed and running nowhere yet, records
//!   it as running there (`status.seedName`);
//! - when the Shoot carries `migration.gardener.cloud/live-migrate: "true"`
//!   and its `spec.seedName` differs from `status.seedName`, the gardenlet of
//!   `status.seedName` is the source, that of `spec.seedName` the
//!   destination;
//! - each runs the steps it owns (`conditions::owner`), in order: the
//!   step's condition on the Shoot's `status.liveMigration.conditions` goes
//!   Progressing (`StepInProgress`), then True (`StepCompleted`) or, when
//!   the step fails for good or has not succeeded within its budget
//!   (`garden.step_timeout`, 10 min), False (`StepFailed`) with the error;
//!   a failed attempt is tried again every `garden.step_interval` (10 s);
//! - the other's step is waited for by reading the Shoot again every
//!   interval: that is the hand-off a migration pays per step;
//! - a gardenlet that starts again takes up from the garden's conditions: a
//!   step True is never run again, a step Progressing is tried again (every
//!   step is idempotent).
//!
//! The lab's own state (its members, its API servers) is a cache each
//! gardenlet writes its own seed's part of; it never decides what runs.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::errors::{Cancel, Interrupted};
use crate::garden::access::{self, Identity};
use crate::garden::client::{annotations_of, seeds_of, ANNOTATION_LIVE_MIGRATE};
use crate::garden::objects::shoot_ref;
use crate::garden::trigger::{self, Settings};
use crate::migrate::conditions::{
    owner, Conditions, Owner, Status, REASON_COMPLETED, REASON_FAILED, REASON_IN_PROGRESS,
};
use crate::migrate::flow::{Flow, StepFailed};
use crate::probe::run::now_unix_ms;
use crate::progress::{Mode, Progress};
use crate::provider::SeedOps;
use crate::state::{LabDir, LabState};

/// How often a gardenlet reports its Seed's version (gardenlet's heartbeat
/// renews the Seed's lease every 10 s; the version is the part the
/// admission reads).
pub const HEARTBEAT: Duration = Duration::from_secs(30);

/// The GEP's abort annotation (`migration.shoot.gardener.cloud/abort-live-migration`).
pub const ANNOTATION_ABORT: &str = "migration.shoot.gardener.cloud/abort-live-migration";

/// What a gardenlet needs to know of itself.
#[derive(Debug, Clone)]
pub struct Options {
    pub seed: String,
    /// This gardenlet is the external driver's (`cpmlab.lab/driver:
    /// external` on the Shoot is for it; the lab's own stand aside).
    pub external: bool,
    /// The garden's kubeconfig this gardenlet authenticates with (a kind
    /// seed's, from its pod's Secret); without it, its client certificate
    /// in the lab's state directory.
    pub garden_kubeconfig: Option<std::path::PathBuf>,
}

pub use super::garden_peer::{sleep, Peer};

/// A Shoot's migration as one gardenlet sees it.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    /// Nothing for this gardenlet to do.
    Idle,
    /// A migration this gardenlet takes part in.
    Migration {
        role: Owner,
        from: String,
        to: String,
    },
}

/// Which part `seed` plays in the Shoot's migration, if any.
fn role_of(seed: &str, shoot: &serde_json::Value) -> Seen {
    let a = annotations_of(shoot);
    if a.get(ANNOTATION_LIVE_MIGRATE).map(String::as_str) != Some("true") {
        return Seen::Idle;
    }
    let (Some(spec), Some(status)) = seeds_of(shoot) else {
        return Seen::Idle;
    };
    if spec == status {
        return Seen::Idle;
    }
    let role = if status == seed {
        Owner::Source
    } else if spec == seed {
        Owner::Destination
    } else {
        return Seen::Idle;
    };
    Seen::Migration {
        role,
        from: status,
        to: spec,
    }
}

/// RFC 3339 to unix milliseconds.
fn unix_ms(t: &str) -> Option<f64> {
    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp_nanos() as f64 / 1e6)
}

/// Runs the gardenlet of `o.seed` until cancelled.
pub async fn run(provider: &dyn SeedOps, dir: LabDir, o: Options, cancel: Cancel) -> Result<()> {
    let state = dir.load().context("the lab's state")?;
    anyhow::ensure!(
        state.seed(&o.seed).is_some(),
        "lab `{}` has no seed `{}`",
        state.name,
        o.seed
    );
    let garden = match &o.garden_kubeconfig {
        Some(path) => access::client_from_kubeconfig(path)?,
        None => access::client(&dir, &state, &Identity::Gardenlet(o.seed.clone()))?,
    };
    let (namespace, name) = shoot_ref(&state);
    let peer = Peer {
        garden: garden.clone(),
        namespace: namespace.clone(),
        name: name.clone(),
        interval: state.topology.garden.step_interval(),
        budget: state.topology.garden.step_timeout(),
    };
    let version = state
        .topology
        .seeds
        .iter()
        .find(|s| s.name == o.seed)
        .and_then(|s| s.gardenlet_version.clone())
        .or_else(|| state.garden.as_ref().map(|g| g.gardener_version.clone()))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| crate::garden::objects::GARDENER_VERSION.to_string());
    // Its log is the container's: plain lines, one per step and note.
    let progress = Progress::new(Mode::Plain);
    let quiet = Progress::new(Mode::Quiet);
    tracing::info!(
        "gardenlet of seed {} (reports {version}), shoot {namespace}/{name}; steps every {:?}, {:?} each",
        o.seed,
        peer.interval,
        peer.budget
    );
    let mut beat: Option<Instant> = None;
    loop {
        cancel.check()?;
        if beat.is_none_or(|t| t.elapsed() >= HEARTBEAT) {
            match garden.report_seed_version(&o.seed, &version).await {
                Ok(()) => beat = Some(Instant::now()),
                Err(e) => tracing::warn!("heartbeat: {e}"),
            }
        }
        let shoot = match garden.shoot(&namespace, &name).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("the garden: {e}");
                sleep(peer.interval.min(Duration::from_secs(2)), &cancel).await?;
                continue;
            }
        };
        let (spec, status) = seeds_of(&shoot);
        if spec.as_deref() == Some(o.seed.as_str()) && status.is_none() {
            // The shoot's first reconcile in this seed.
            match garden
                .set_shoot_running_in(&namespace, &name, &o.seed)
                .await
            {
                Ok(()) => tracing::info!("shoot {namespace}/{name} runs in seed {}", o.seed),
                Err(e) => tracing::warn!("record the shoot in seed {}: {e}", o.seed),
            }
            continue;
        }
        match role_of(&o.seed, &shoot) {
            Seen::Idle => sleep(Duration::from_secs(1), &cancel).await?,
            Seen::Migration { role, from, to } => {
                let a = annotations_of(&shoot);
                let settings = match Settings::from_annotations(&a) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!("the migration's settings on the Shoot: {e}");
                        sleep(peer.interval, &cancel).await?;
                        continue;
                    }
                };
                if settings.external != o.external {
                    sleep(peer.interval, &cancel).await?;
                    continue;
                }
                let next = reconcile(
                    provider, &dir, &o.seed, role, &from, &to, &settings, &shoot, &peer, &progress,
                    &quiet, &cancel,
                )
                .await;
                match next {
                    Ok(Next::Again) => {}
                    Ok(Next::Wait) => sleep(peer.interval, &cancel).await?,
                    Err(e) if e.is::<Interrupted>() => return Err(e),
                    Err(e) => {
                        tracing::warn!("reconcile: {e:#}");
                        sleep(peer.interval, &cancel).await?;
                    }
                }
            }
        }
    }
}

/// What the loop does after a reconcile.
enum Next {
    /// Look again at once (a step of this gardenlet's finished).
    Again,
    /// Look again after the interval (the other's step, or nothing to do).
    Wait,
}

#[allow(clippy::too_many_arguments)]
async fn reconcile(
    provider: &dyn SeedOps,
    dir: &LabDir,
    seed: &str,
    role: Owner,
    from: &str,
    to: &str,
    settings: &Settings,
    shoot: &serde_json::Value,
    peer: &Peer,
    progress: &Progress,
    quiet: &Progress,
    cancel: &Cancel,
) -> Result<Next> {
    let conditions = crate::garden::client::conditions_of(shoot);
    let state: LabState = dir.load()?;
    let join_timeout = Duration::from_millis(settings.join_timeout_ms);
    let mut flow = Flow::new(
        provider,
        dir.clone(),
        state,
        progress,
        cancel.clone(),
        join_timeout,
    )?
    .for_seed(seed)
    .with_peer(peer.clone());
    flow.adopt(from, to, settings)?;
    flow.set_hold(settings.hold.clone());
    flow.mirror(&conditions)?;
    // As the seed's StatefulSet would: its members that stopped start
    // again (a quiet line: it runs at every look).
    let heal_line = quiet.step(format!("{seed}: its members"));
    if let Err(e) = flow.heal_own(&heal_line).await {
        tracing::warn!("heal: {e:#}");
    }

    if let Some(f) = conditions.failed() {
        let a = annotations_of(shoot);
        if role == Owner::Destination
            && f.kind == crate::migrate::flow::JOIN
            && a.get(ANNOTATION_ABORT).map(String::as_str) == Some("true")
        {
            let line = progress.step("abort");
            let n = flow.abort().await?;
            line.done_with(&format!("{n} destination member(s) removed"));
            peer.garden
                .clear_conditions(&peer.namespace, &peer.name)
                .await?;
            peer.garden
                .annotate_shoot(
                    &peer.namespace,
                    &peer.name,
                    &[(ANNOTATION_LIVE_MIGRATE, None), (ANNOTATION_ABORT, None)],
                )
                .await?;
            return Ok(Next::Again);
        }
        tracing::info!(
            "{} is False ({}); waiting for the operator",
            f.kind,
            f.message
        );
        return Ok(Next::Wait);
    }
    // The source's side of the gateway handover, while the destination's
    // EtcdMigrationComplete waits for it.
    if role == Owner::Source {
        let a = annotations_of(shoot);
        if a.get(trigger::GATEWAY_HANDOVER_STATE).map(String::as_str) == Some("requested") {
            let line = progress.step("the source's gateway handover");
            let said = flow
                .source_gateway_handover(&line)
                .await?
                .unwrap_or_default();
            peer.garden
                .annotate_shoot(
                    &peer.namespace,
                    &peer.name,
                    &[(
                        trigger::GATEWAY_HANDOVER_STATE,
                        Some(format!("held: {said}")),
                    )],
                )
                .await?;
            line.done_with(&said);
            return Ok(Next::Again);
        }
    }
    let Some(next) = conditions.next_step().map(str::to_string) else {
        return done(&flow, role, to, peer, seed).await;
    };
    if let Some(stop) = &settings.stop_after {
        if conditions
            .get(stop)
            .is_some_and(|c| c.status == Status::True)
        {
            tracing::info!("paused after {stop} (cpmlab.lab/stop-after)");
            return Ok(Next::Wait);
        }
    }
    if owner(&next) != Some(role) {
        return Ok(Next::Wait);
    }
    run_owned(&mut flow, &next, &conditions, peer, progress, cancel).await?;
    Ok(Next::Again)
}

/// After MigrationCompleted: the destination's gardenlet records the
/// shoot as running in its seed.
async fn done(flow: &Flow<'_>, role: Owner, to: &str, peer: &Peer, seed: &str) -> Result<Next> {
    let _ = flow;
    if role == Owner::Destination && seed == to {
        peer.garden
            .set_shoot_running_in(&peer.namespace, &peer.name, to)
            .await?;
        // The intent is spent: a next migration is asked for afresh.
        peer.garden
            .annotate_shoot(
                &peer.namespace,
                &peer.name,
                &[(ANNOTATION_LIVE_MIGRATE, None)],
            )
            .await?;
        tracing::info!(
            "the shoot runs in seed {to}; migration.gardener.cloud/live-migrate removed"
        );
        return Ok(Next::Again);
    }
    Ok(Next::Wait)
}

/// Runs a step this gardenlet owns to its end: Progressing, attempts every
/// interval within the budget, then True or False.
async fn run_owned(
    flow: &mut Flow<'_>,
    step: &str,
    conditions: &Conditions,
    peer: &Peer,
    progress: &Progress,
    cancel: &Cancel,
) -> Result<()> {
    let g = &peer.garden;
    let (ns, name) = (&peer.namespace, &peer.name);
    // The budget runs from the step's first Progressing, across restarts.
    let started = match conditions.get(step) {
        Some(c) if c.status == Status::Progressing => {
            unix_ms(&c.last_transition_time).unwrap_or_else(now_unix_ms)
        }
        _ => {
            let c = g
                .set_condition(ns, name, step, Status::Progressing, REASON_IN_PROGRESS, "")
                .await?;
            flow.mirror(&c)?;
            now_unix_ms()
        }
    };
    let line = progress.step(step.to_string());
    let mut attempt = 0u32;
    loop {
        cancel.check()?;
        attempt += 1;
        let r = flow.attempt(step, &line).await;
        match r {
            Ok((_, message)) => {
                let end = now_unix_ms();
                // The step's band: from its first Progressing (across a
                // restart, the garden's transition time) to its end here.
                flow.record_step(step, "", "True", started, end);
                // The step is done here; its condition is written until the
                // garden takes it (a restart would run the step again).
                loop {
                    match g
                        .set_condition(ns, name, step, Status::True, REASON_COMPLETED, &message)
                        .await
                    {
                        Ok(c) => {
                            flow.mirror(&c)?;
                            break;
                        }
                        Err(e) => {
                            line.detail(&format!("the garden: {e}"));
                            sleep(Duration::from_secs(1).min(peer.interval), cancel).await?;
                        }
                    }
                }
                line.done_with(&message);
                return Ok(());
            }
            Err(e) if e.is::<Interrupted>() => return Err(e),
            Err(e) => {
                let msg = match e.downcast_ref::<StepFailed>() {
                    Some(f) => f.message.clone(),
                    None => format!("{e:#}"),
                };
                let out_of_time = now_unix_ms() - started >= peer.budget.as_secs_f64() * 1e3;
                if e.is::<StepFailed>() || out_of_time {
                    let why = if out_of_time && !e.is::<StepFailed>() {
                        format!(
                            "not done within its {:.0} s (attempt {attempt}): {msg}",
                            peer.budget.as_secs_f64()
                        )
                    } else {
                        msg
                    };
                    let c = g
                        .set_condition(ns, name, step, Status::False, REASON_FAILED, &why)
                        .await?;
                    flow.mirror(&c)?;
                    flow.record_step(step, &why, "False", started, now_unix_ms());
                    line.fail(&why);
                    return Ok(());
                }
                let said = format!(
                    "attempt {attempt} failed: {msg}; again in {:.0} s",
                    peer.interval.as_secs_f64()
                );
                line.detail(&said);
                tracing::warn!("{step}: {said}");
                if let Ok(c) = g
                    .set_condition(
                        ns,
                        name,
                        step,
                        Status::Progressing,
                        REASON_IN_PROGRESS,
                        &said,
                    )
                    .await
                {
                    flow.mirror(&c)?;
                }
                sleep(peer.interval, cancel).await?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shoot(annotated: bool, spec: &str, status: Option<&str>) -> serde_json::Value {
        let mut s =
            json!({"metadata": {"annotations": {}}, "spec": {"seedName": spec}, "status": {}});
        if annotated {
            s["metadata"]["annotations"][ANNOTATION_LIVE_MIGRATE] = json!("true");
        }
        if let Some(st) = status {
            s["status"]["seedName"] = json!(st);
        }
        s
    }

    #[test]
    fn each_gardenlet_finds_its_part_from_the_shoot_alone() {
        let migrating = shoot(true, "seed-b", Some("seed-a"));
        assert_eq!(
            role_of("seed-a", &migrating),
            Seen::Migration {
                role: Owner::Source,
                from: "seed-a".into(),
                to: "seed-b".into()
            }
        );
        assert_eq!(
            role_of("seed-b", &migrating),
            Seen::Migration {
                role: Owner::Destination,
                from: "seed-a".into(),
                to: "seed-b".into()
            }
        );
        assert_eq!(role_of("seed-c", &migrating), Seen::Idle);
        // No intent: a classic CPM is no business of the lab's gardenlets.
        assert_eq!(
            role_of("seed-a", &shoot(false, "seed-b", Some("seed-a"))),
            Seen::Idle
        );
        // Done: spec and status agree.
        assert_eq!(
            role_of("seed-b", &shoot(true, "seed-b", Some("seed-b"))),
            Seen::Idle
        );
        assert_eq!(role_of("seed-b", &shoot(true, "seed-b", None)), Seen::Idle);
    }

    #[test]
    fn garden_times_read_as_unix_milliseconds() {
        assert_eq!(unix_ms("1970-01-01T00:00:01Z"), Some(1000.0));
        assert_eq!(unix_ms("nope"), None);
    }
}
