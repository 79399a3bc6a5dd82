//! `cpmlab migrate`: the reference Live CPM flow, resume, abort, or an
//! external driver.

use std::time::Duration;

use anyhow::Result;

use crate::{check_name, interrupted, print_json_line, LabArgs, Output};
use cpmlab_core::errors::{BadInput, Cancel};
use cpmlab_core::progress::{Mode, Progress};
use std::path::Path;

#[derive(clap::Args, Debug)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub lab: LabArgs,
    /// etcd membership plan: five-member (GEP-0039's: 2 join, 5 voters, so
    /// the source keeps quorum if the seeds lose each other; the third
    /// joins in EtcdMigrationComplete), six-member (3 join, 6 voters: the
    /// GEP's February text) or
    /// rolling (the GEP's 3-member alternative: one in, one out, three
    /// times; two exchanges before the API moves, the last after) or
    /// classic (GEP-7's: the source API stops, etcdctl snapshot save,
    /// a new cluster restored in the destination; downtime by design) or
    /// mirror (the GEP's etcd Mirror Maker alternative: etcdctl make-mirror
    /// into a new, empty destination cluster, then DNS switches).
    #[arg(long, value_enum, default_value = "five-member")]
    pub plan: cpmlab_lab::migrate::membership::Plan,
    /// The steps' order around the DNS switch: gep (GEP-0039's diagram: the
    /// record restored and DNS caches waited out in EtcdMigrationComplete,
    /// the source API servers deleted in SourceSeedCleanup), early-drain
    /// (the lab's earlier order: switched, waited and drained in
    /// MigrateDNSRecords) or dns-first (the GEP's undecided alternative:
    /// the record migrated before the destination API starts).
    #[arg(long, value_enum, default_value = "gep")]
    pub order: cpmlab_lab::migrate::order::Order,
    /// How long SourceSeedCleanup's steps before the source API servers'
    /// deletion take (the Etcd CR, BackupEntry, VPN, ManagedResources, MCM,
    /// extensions; the gep and dns-first orders). docs/migration.md says
    /// why 60 s.
    #[arg(long, default_value = cpmlab_lab::migrate::order::DEFAULT_CLEANUP_BEFORE_API)]
    pub cleanup_before_api: String,
    /// How the source leader leaves: remove (a plain MemberRemove, the rest
    /// elect; etcd-druid's way) or move-leader (MoveLeader to a destination
    /// voter first).
    #[arg(long, value_enum, default_value = "remove")]
    pub leader_handover: cpmlab_lab::migrate::membership::LeaderHandover,
    /// What the source gateway does for the connections clients keep once
    /// the record answers the destination (the gep and dns-first orders):
    /// none (Gardener's objects as they are), drain-gateway (the source's
    /// Gateway for the shoot deleted after the DNS-cache wait: Envoy
    /// drains 45 s while the source serves), drain-gateway-in-place (the
    /// Gateway first changed so that Envoy drains 45 s with the routes
    /// intact, then deleted), max-connection-age (the
    /// gateways' api.gateway_max_connection_duration, set at `up`; the
    /// source serves that long after the wait) or forward (the source's
    /// routes for the API go across the WAN to the destination's gateway
    /// from the wait until the cleanup).
    #[arg(long, value_enum, default_value = "none")]
    pub gateway_handover: cpmlab_lab::migrate::gateway_handover::GatewayHandover,
    /// Source seed (default: the seed holding the shoot's etcd).
    #[arg(long)]
    pub from: Option<String>,
    /// Destination seed (default: the other seed).
    #[arg(long)]
    pub to: Option<String>,
    /// Follow the migration the garden has in progress (after the operator's
    /// command was killed, or a failure).
    #[arg(long, conflicts_with_all = ["abort", "plan", "from", "to", "leader_handover", "gateway_handover", "order"])]
    pub resume: bool,
    /// Abort: allowed only while DestinationEtcdPeersJoined is False.
    #[arg(long, conflicts_with_all = ["force_shrink_etcd", "stop_after"])]
    pub abort: bool,
    /// Remove the source members before the destination API server starts
    /// and switch DNS at once (the GEP's escape hatch; costs downtime).
    /// With --resume: asked for mid-migration, for the steps not yet True.
    #[arg(long)]
    pub force_shrink_etcd: bool,
    /// Set `migration.gardener.cloud/allow-distant-regions`: the garden's
    /// admission then admits regions further apart than its threshold.
    #[arg(long)]
    pub allow_distant_regions: bool,
    /// The RTT between the seeds above which the lab warns (the garden's
    /// admission decides on the regions' distance).
    #[arg(long, default_value = "180ms")]
    pub max_rtt: String,
    /// How long a destination member may take to join and catch up.
    #[arg(long, default_value = "120s")]
    pub join_timeout: String,
    /// Stop once this step is True (go on with --resume).
    #[arg(long, value_name = "CONDITION_TYPE")]
    pub stop_after: Option<String>,
    /// reference: the lab's gardenlets; external: --command in their place.
    #[arg(long, value_enum, default_value = "reference")]
    pub driver: cpmlab_lab::migrate::record::Driver,
    /// The external driver's command (run with `sh -c`).
    #[arg(long, required_if_eq("driver", "external"))]
    pub command: Option<String>,
}

pub async fn run(state_root: &Path, a: MigrateArgs) -> Result<u8> {
    use cpmlab_lab::migrate::flow;
    use cpmlab_lab::migrate::record::Driver;
    // Every flag is checked before anything is looked at or changed.
    check_name(&a.lab.name)?;
    let max_rtt = cpmlab_lab::link::profile::parse_duration("--max-rtt", &a.max_rtt)?;
    let cleanup_before_api = cpmlab_lab::link::profile::parse_duration_max(
        "--cleanup-before-api",
        &a.cleanup_before_api,
        Duration::from_secs(3600),
    )?;
    let join_timeout = cpmlab_lab::link::profile::parse_duration_max(
        "--join-timeout",
        &a.join_timeout,
        Duration::from_secs(3600),
    )?;
    if let Some(s) = &a.stop_after {
        if !cpmlab_lab::migrate::conditions::STEPS.contains(&s.as_str()) {
            return Err(BadInput(format!(
                "--stop-after: unknown condition type `{s}` (one of {})",
                cpmlab_lab::migrate::conditions::STEPS.join(", ")
            ))
            .into());
        }
    }
    if a.driver == Driver::External && a.abort {
        return Err(BadInput(
            "--driver external --abort: an external driver aborts its own migration; --abort belongs to the lab's gardenlets".into(),
        )
        .into());
    }
    let (dir, state) = cpmlab_lab::status::load_lab(state_root, &a.lab.name)?;
    let holding = state
        .seeds
        .iter()
        .find(|s| state.members_of(&s.name).next().is_some())
        .map(|s| s.name.clone());
    let from = a
        .from
        .clone()
        .or(holding)
        .unwrap_or_else(|| state.seeds[0].name.clone());
    let to = a.to.clone().unwrap_or_else(|| other_seed(&state, &from));
    let provider = cpmlab_runner::provider::for_lab(&state).await?;
    let progress = Progress::new(Mode::detect(a.lab.output == Output::Json));
    let cancel = Cancel::default();
    let Some(_) = state.garden.as_ref() else {
        return Err(BadInput(format!(
            "lab `{}` was made before every lab had a garden: `cpmlab down --name {}` and `cpmlab up` again",
            a.lab.name, a.lab.name
        ))
        .into());
    };
    let garden =
        cpmlab_garden::access::client(&dir, &state, &cpmlab_garden::access::Identity::Operator)?;
    let (namespace, name) = cpmlab_garden::objects::shoot_ref(&state);
    let shoot = cpmlab_lab::migrate::operator::Shoot {
        garden,
        namespace,
        name,
    };
    let budget = state.topology.garden.step_timeout();
    let interval = state.topology.garden.step_interval();
    // No condition moves for longer than a step's budget and two looks:
    // the gardenlet that owns the step is gone.
    let stall = budget + 2 * interval + Duration::from_secs(30);
    let under_way = shoot.migration().await?;
    if a.driver != Driver::External && (a.resume || a.abort) {
        if let Some(why) = under_way
            .as_ref()
            .and_then(|m| m.refuse_for_lab_gardenlets(a.abort))
        {
            return Err(BadInput(why).into());
        }
    }
    if a.driver == Driver::External && a.resume {
        let command = a.command.clone().expect("clap requires --command");
        let Some(m) = under_way.clone() else {
            return Err(BadInput(format!(
                "lab `{}` has no migration to resume (the Shoot's spec.seedName is where it runs); start one with `cpmlab migrate --driver external --command '...'`",
                a.lab.name
            ))
            .into());
        };
        if !m.external {
            return Err(BadInput(format!(
                "the migration {} -> {} in progress is the lab's gardenlets' (no `{}: external` on the Shoot); `cpmlab migrate --resume` follows it",
                m.from,
                m.to,
                cpmlab_garden::trigger::DRIVER
            ))
            .into());
        }
        progress.note(&format!(
            "resuming the migration {} -> {} with the external driver: `{command}`",
            m.from, m.to
        ));
        return run_external(
            &dir,
            state_root,
            &command,
            &m.from,
            &m.to,
            &progress,
            &cancel,
            a.lab.output,
        )
        .await;
    }
    if a.abort {
        let from = shoot.running_in().await?.unwrap_or_else(|| from.clone());
        shoot.abort(&from, budget, &cancel).await?;
        progress.note(&format!(
            "aborted: the destination's members removed by its gardenlet, the shoot bound to `{from}` again"
        ));
        if a.lab.output == Output::Json {
            print_json_line(&serde_json::json!({"event": "migrate", "result": "aborted"}));
        }
        return Ok(0);
    }
    let stop_after = if a.resume {
        if under_way.is_none() {
            return Err(BadInput(format!(
                "lab `{}` has no migration to resume (the Shoot's spec.seedName is where it runs); start one with `cpmlab migrate`",
                a.lab.name
            ))
            .into());
        }
        let said = shoot.resume(a.force_shrink_etcd).await?;
        progress.note(&format!("resumed: {said}"));
        None
    } else {
        if let Some(cpmlab_lab::migrate::operator::InProgress { from: f, to: t, .. }) = &under_way {
            let c = shoot
                .garden
                .conditions(&shoot.namespace, &shoot.name)
                .await?;
            return Err(BadInput(format!(
                "a migration {f} -> {t} is in progress (next: {}); run `cpmlab migrate --resume`{}",
                c.next_step().unwrap_or("-"),
                if c.failed().is_some() {
                    " or `cpmlab migrate --abort`"
                } else {
                    ""
                }
            ))
            .into());
        }
        let from = match &a.from {
            Some(f) => f.clone(),
            None => shoot.running_in().await?.unwrap_or(from.clone()),
        };
        let to = if a.to.is_some() || to != from {
            to.clone()
        } else {
            other_seed(&state, &from)
        };
        cpmlab_lab::migrate::flow::check_seeds(&state, &from, &to)?;
        cpmlab_lab::migrate::flow::check_plan(provider.as_ref(), a.plan)?;
        let max_rtt_ms = max_rtt.as_secs_f64() * 1e3;
        // The lab's own measure, beside the admission's: a warning.
        let (rtt, words) = cpmlab_lab::migrate::flow::measure_rtt(
            provider.as_ref(),
            &state,
            &from,
            &to,
            max_rtt_ms,
            a.allow_distant_regions,
        )
        .await?;
        if rtt > max_rtt_ms && !a.allow_distant_regions {
            progress.note(&format!(
                "warning: the lab measured {rtt:.1} ms between the seeds, above {max_rtt_ms:.0} ms; gardener-apiserver's admission decides by the region ConfigMap's distance"
            ));
        }
        let settings = cpmlab_garden::trigger::Settings {
            plan: a.plan,
            order: a.order.for_plan(a.plan),
            leader_handover: a.leader_handover,
            gateway_handover: a.gateway_handover,
            cleanup_before_api_ms: cleanup_before_api.as_millis() as u64,
            join_timeout_ms: join_timeout.as_millis() as u64,
            force_shrink: a.force_shrink_etcd,
            allow_distant_regions: a.allow_distant_regions,
            started_unix_ms: cpmlab_probe::run::now_unix_ms(),
            rtt_ms: Some(rtt),
            rtt_gate: Some(words),
            stop_after: a.stop_after.clone(),
            // A test's holds reach the gardenlets through the Shoot.
            hold: std::env::var("CPMLAB_TEST_HOLD")
                .ok()
                .filter(|h| !h.is_empty()),
            external: a.driver == Driver::External,
        };
        check_handover(&state, &settings)?;
        match shoot.trigger(&from, &to, &settings).await {
            Ok(()) => {}
            Err(e) => {
                if let Some(r) = e.downcast_ref::<cpmlab_lab::migrate::operator::Refused>() {
                    if a.lab.output == Output::Json {
                        print_json_line(
                            &serde_json::json!({"event": "migrate", "result": "refused", "message": r.message}),
                        );
                    }
                    progress.note(&format!("{r}"));
                    return Ok(1);
                }
                return Err(e);
            }
        }
        // The report's header names the garden beside what else ran.
        if let Some(g) = &state.garden {
            cpmlab_probe::run::record_settings(
                &dir,
                "garden",
                &garden_words(
                    &g.gardener_version,
                    a.command
                        .as_deref()
                        .filter(|_| a.driver == Driver::External),
                    &state.topology.garden.step_interval,
                ),
            );
        }
        if a.driver == Driver::External {
            let command = a.command.clone().expect("clap requires --command");
            progress.note(&format!(
                "triggered in the garden for an external driver (`cpmlab.lab/driver: external`: the lab's gardenlets stand aside): `{command}`"
            ));
            return run_external(
                &dir,
                state_root,
                &command,
                &from,
                &to,
                &progress,
                &cancel,
                a.lab.output,
            )
            .await;
        }
        cpmlab_probe::run::record_settings(
            &dir,
            "what ran",
            &cpmlab_lab::migrate::flow::settings_words_of(&state, &settings),
        );
        cpmlab_probe::run::record_lab_event(
            &dir,
            "note",
            &format!(
                "migration {from} -> {to} ({}, order {}) triggered in the garden; RTT {rtt:.1} ms",
                flow::plan_name(a.plan),
                settings.order.name()
            ),
            "",
            cpmlab_probe::run::now_unix_ms(),
            None,
        );
        progress.note(&format!(
            "migrating lab `{}` from `{from}` to `{to}` ({}, order {}, leader handover {}, gateway handover {}{}); RTT between the seeds {rtt:.1} ms; the seeds' gardenlets run it (`kubectl get shoot -o yaml` with `cpmlab kubeconfig --garden`)",
            a.lab.name,
            flow::plan_name(a.plan),
            settings.order.name(),
            a.leader_handover.as_str(),
            a.gateway_handover.as_str(),
            if a.force_shrink_etcd {
                ", force-shrink"
            } else {
                ""
            }
        ));
        a.stop_after.clone()
    };
    let started = std::time::Instant::now();
    let result = {
        let run = shoot.follow(&progress, stop_after.as_deref(), stall, &cancel);
        tokio::pin!(run);
        tokio::select! {
            r = &mut run => r,
            _ = interrupted() => {
                progress.note("interrupted: no longer following; the seeds' gardenlets go on (`cpmlab status`, `cpmlab migrate --resume` follows again)");
                cancel.cancel();
                run.await
            }
        }
    };
    let mig = cpmlab_lab::status::load_lab(state_root, &a.lab.name)
        .ok()
        .and_then(|(_, s)| s.migration);
    let conditions = mig
        .as_ref()
        .map(cpmlab_lab::status::MigrationStatus::of)
        .map(|m| serde_json::to_value(m).unwrap_or_default());
    use cpmlab_lab::migrate::operator::Followed;
    match result {
        Ok(Followed::Failed { step, message }) => {
            if a.lab.output == Output::Json {
                print_json_line(&serde_json::json!({
                    "event": "migrate", "result": "failed", "step": step, "message": message,
                    "elapsed_s": started.elapsed().as_secs_f64(), "migration": conditions,
                }));
            }
            Err(cpmlab_lab::migrate::flow::StepFailed { step, message }.into())
        }
        Ok(ended) => {
            if a.lab.output == Output::Json {
                print_json_line(&serde_json::json!({
                    "event": "migrate",
                    "result": match &ended { Followed::Completed => "completed".to_string(), Followed::StoppedAfter(s) => format!("stopped-after {s}"), Followed::Failed { .. } => "failed".into() },
                    "elapsed_s": started.elapsed().as_secs_f64(),
                    "migration": conditions,
                }));
            } else {
                match ended {
                    Followed::Completed => progress.note(&format!(
                        "migrated: the control plane of lab `{}` runs in `{}` ({:.1} s); conditions in `cpmlab status`",
                        a.lab.name,
                        mig.map(|m| m.to).unwrap_or_default(),
                        started.elapsed().as_secs_f64()
                    )),
                    Followed::StoppedAfter(s) => progress.note(&format!(
                        "stopped after {s} as asked (the gardenlets pause); `cpmlab migrate --resume` goes on"
                    )),
                    Followed::Failed { .. } => {}
                }
            }
            Ok(0)
        }
        Err(e) => Err(e),
    }
}

/// The seed of the lab that is not `from` (empty when there is none).
fn other_seed(state: &cpmlab_model::state::LabState, from: &str) -> String {
    state
        .seeds
        .iter()
        .find(|s| s.name != from)
        .map(|s| s.name.clone())
        .unwrap_or_default()
}

/// Runs the external driver's command for the migration `from` -> `to`
/// (triggered, or resumed after the driver stopped short): its exit is
/// the command's.
#[allow(clippy::too_many_arguments)]
async fn run_external(
    dir: &cpmlab_model::state::LabDir,
    state_root: &Path,
    command: &str,
    from: &str,
    to: &str,
    progress: &Progress,
    cancel: &Cancel,
    output: Output,
) -> Result<u8> {
    let run = cpmlab_lab::migrate::external::run(dir, state_root, command, from, to, cancel);
    tokio::pin!(run);
    let code = tokio::select! {
        r = &mut run => r?,
        _ = interrupted() => { cancel.cancel(); run.await? }
    };
    if output == Output::Json {
        print_json_line(
            &serde_json::json!({"event": "migrate", "driver": "external", "exit": code}),
        );
    }
    if code != 0 {
        anyhow::bail!(
            "the external driver `{command}` exited {code}; the migration {from} -> {to} stays in progress (`cpmlab migrate --driver external --resume --command '...'` runs a driver for it again)"
        );
    }
    progress.note("the external driver finished; `cpmlab status` shows the Shoot's conditions, `cpmlab probe stop` judges the run");
    Ok(0)
}

/// The gateway handover asked for, checked against the order, the
/// exposure and the gateways' maximum connection duration (before the
/// garden is asked anything).
fn check_handover(
    state: &cpmlab_model::state::LabState,
    s: &cpmlab_garden::trigger::Settings,
) -> Result<()> {
    let age = state
        .topology
        .api
        .gateway_max_connection_duration()
        .map_err(|(f, m)| BadInput(format!("{f}: {m}")))?;
    s.order
        .check_gateway_handover(
            s.gateway_handover,
            s.force_shrink,
            state.topology.api.exposure,
            age,
        )
        .map_err(|(f, m)| BadInput(format!("{f}: {m}")).into())
}

/// The report's header line for the garden: gardener-apiserver's version,
/// who ran the steps and, for the lab's gardenlets, how often they look
/// (a hand-off waits up to that long).
fn garden_words(gardener_version: &str, external: Option<&str>, interval: &str) -> String {
    use cpmlab_model::topology::GARDENER_STEP_INTERVAL;
    let steps = match external {
        Some(c) => format!("the steps run by an external driver (`{c}`)"),
        None if interval == GARDENER_STEP_INTERVAL => {
            format!("the steps run by the lab's gardenlets, one per seed, looking every {interval} (Gardener's)")
        }
        None => format!(
            "the steps run by the lab's gardenlets, one per seed, looking every {interval} (Gardener's is {GARDENER_STEP_INTERVAL}: hand-offs here are quicker)"
        ),
    };
    format!("gardener-apiserver {gardener_version} (LiveControlPlaneMigration on) · {steps}")
}

#[cfg(test)]
mod garden_words_tests {
    #[test]
    fn the_header_names_gardener_apiserver_who_ran_the_steps_and_how_often_they_look() {
        assert_eq!(
            super::garden_words("v1.150.0", None, "10s"),
            "gardener-apiserver v1.150.0 (LiveControlPlaneMigration on) · the steps run by the lab's gardenlets, one per seed, looking every 10s (Gardener's)"
        );
        assert!(super::garden_words("v1.150.0", None, "2s")
            .ends_with("looking every 2s (Gardener's is 10s: hand-offs here are quicker)"));
        assert!(super::garden_words("v1.150.0", Some("./drive.sh"), "2s")
            .ends_with("an external driver (`./drive.sh`)"));
    }
}
