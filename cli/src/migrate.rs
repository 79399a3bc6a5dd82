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
    /// Go on with the migration in the state file (after a kill or a failure).
    #[arg(long, conflicts_with_all = ["abort", "plan", "from", "to", "leader_handover", "gateway_handover", "order"])]
    pub resume: bool,
    /// Abort: allowed only while DestinationEtcdPeersJoined is False.
    #[arg(long, conflicts_with_all = ["force_shrink_etcd", "stop_after"])]
    pub abort: bool,
    /// Remove the source members before the destination API server starts
    /// and switch DNS at once (the GEP's escape hatch; costs downtime).
    #[arg(long)]
    pub force_shrink_etcd: bool,
    /// Migrate even when the seeds' RTT exceeds --max-rtt.
    #[arg(long)]
    pub allow_distant_regions: bool,
    /// The largest RTT between the seeds a migration accepts.
    #[arg(long, default_value = "180ms")]
    pub max_rtt: String,
    /// How long a destination member may take to join and catch up.
    #[arg(long, default_value = "120s")]
    pub join_timeout: String,
    /// Stop once this step is True (go on with --resume).
    #[arg(long, value_name = "CONDITION_TYPE")]
    pub stop_after: Option<String>,
    /// reference: cpmlab's controller; external: --command does the migration.
    #[arg(long, value_enum, default_value = "reference")]
    pub driver: cpmlab_lab::migrate::record::Driver,
    /// The external driver's command (run with `sh -c`).
    #[arg(long, required_if_eq("driver", "external"))]
    pub command: Option<String>,
}

pub async fn run(state_root: &Path, a: MigrateArgs) -> Result<u8> {
    use cpmlab_lab::migrate::flow::{self, Ended, Flow, StartOptions};
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
    if a.driver == Driver::External && (a.resume || a.abort || a.force_shrink_etcd) {
        return Err(BadInput(
            "--driver external runs the given command; --resume, --abort and --force-shrink-etcd belong to the reference driver".into(),
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
    let to = a.to.clone().unwrap_or_else(|| {
        state
            .seeds
            .iter()
            .find(|s| s.name != from)
            .map(|s| s.name.clone())
            .unwrap_or_default()
    });
    let provider = cpmlab_runner::provider::for_lab(&state).await?;
    let progress = Progress::new(Mode::detect(a.lab.output == Output::Json));
    let cancel = Cancel::default();
    // An external driver's run leaves a record, never a migration to resume.
    let in_progress = state
        .migration
        .as_ref()
        .filter(|m| !m.completed() && m.driver == Driver::Reference);

    if a.driver == Driver::External {
        if let Some(m) = in_progress {
            return Err(BadInput(format!(
                "a reference migration {} -> {} is in progress; finish it (--resume) or abort it first",
                m.from, m.to
            ))
            .into());
        }
        flow::check_seeds(&state, &from, &to).or_else(|e| {
            if a.from.is_some() {
                Err(e)
            } else {
                Ok(())
            }
        })?;
        let command = a.command.clone().expect("clap requires --command");
        progress.note(&format!("external driver: `{command}`"));
        let run =
            cpmlab_lab::migrate::external::run(&dir, state_root, &command, &from, &to, &cancel);
        tokio::pin!(run);
        let code = tokio::select! {
            r = &mut run => r?,
            _ = interrupted() => { cancel.cancel(); run.await? }
        };
        if a.lab.output == Output::Json {
            print_json_line(
                &serde_json::json!({"event": "migrate", "driver": "external", "exit": code}),
            );
        }
        if code != 0 {
            anyhow::bail!("the external driver `{command}` exited {code}");
        }
        progress.note("the external driver finished; `cpmlab probe stop` judges the run");
        return Ok(0);
    }

    let mut f = Flow::new(
        provider.as_ref(),
        dir,
        state.clone(),
        &progress,
        cancel.clone(),
        join_timeout,
    )?;
    if a.abort {
        f.abort().await?;
        if a.lab.output == Output::Json {
            print_json_line(&serde_json::json!({"event": "migrate", "result": "aborted"}));
        }
        return Ok(0);
    }
    if a.resume {
        f.resume(a.force_shrink_etcd)?;
    } else {
        if let Some(m) = in_progress {
            return Err(BadInput(format!(
                "a migration {} -> {} is in progress (next: {}); run `cpmlab migrate --resume`{}",
                m.from,
                m.to,
                m.conditions.next_step().unwrap_or("-"),
                if m.conditions.failed().is_some() {
                    " or `cpmlab migrate --abort`"
                } else {
                    ""
                }
            ))
            .into());
        }
        let rtt = f
            .begin(&StartOptions {
                plan: a.plan,
                from: from.clone(),
                to: to.clone(),
                force_shrink: a.force_shrink_etcd,
                max_rtt_ms: max_rtt.as_secs_f64() * 1e3,
                allow_distant_regions: a.allow_distant_regions,
                leader_handover: a.leader_handover,
                gateway_handover: a.gateway_handover,
                order: a.order,
                cleanup_before_api,
            })
            .await?;
        progress.note(&format!(
            "migrating lab `{}` from `{from}` to `{to}` ({}, order {}, leader handover {}, gateway handover {}{}); RTT between the seeds {rtt:.1} ms",
            a.lab.name,
            flow::plan_name(a.plan),
            f.state().migration.as_ref().map(|m| m.order.name()).unwrap_or("-"),
            a.leader_handover.as_str(),
            a.gateway_handover.as_str(),
            if a.force_shrink_etcd {
                ", force-shrink"
            } else {
                ""
            }
        ));
    }
    let started = std::time::Instant::now();
    let result = {
        let run = f.run(a.stop_after.as_deref());
        tokio::pin!(run);
        tokio::select! {
            r = &mut run => r,
            _ = interrupted() => {
                progress.note("interrupted: stopping at the next safe point; `cpmlab migrate --resume` goes on");
                cancel.cancel();
                run.await
            }
        }
    };
    let mig = f.state().migration.clone();
    let conditions = mig
        .as_ref()
        .map(cpmlab_lab::status::MigrationStatus::of)
        .map(|m| serde_json::to_value(m).unwrap_or_default());
    match result {
        Ok(ended) => {
            if a.lab.output == Output::Json {
                print_json_line(&serde_json::json!({
                    "event": "migrate",
                    "result": match &ended { Ended::Completed => "completed".to_string(), Ended::StoppedAfter(s) => format!("stopped-after {s}") },
                    "elapsed_s": started.elapsed().as_secs_f64(),
                    "migration": conditions,
                }));
            } else {
                match ended {
                    Ended::Completed => progress.note(&format!(
                        "migrated: the control plane of lab `{}` runs in `{}` ({:.1} s); conditions in `cpmlab status`",
                        a.lab.name,
                        mig.map(|m| m.to).unwrap_or_default(),
                        started.elapsed().as_secs_f64()
                    )),
                    Ended::StoppedAfter(s) => progress.note(&format!(
                        "stopped after {s} as asked; `cpmlab migrate --resume` goes on"
                    )),
                }
            }
            Ok(0)
        }
        Err(e) => Err(e),
    }
}
