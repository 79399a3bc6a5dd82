//! `cpmlab probe start|stop|status`: the probe agent and its verdict.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Subcommand;

use crate::{check_name, print_json, print_json_line, LabArgs, Output};

#[derive(Subcommand, Debug)]
pub enum ProbeCommand {
    /// Start the probe agent on the clients network; or, with
    /// --kubeconfig, on this host against the API server it names (no lab
    /// needed: a real Live CPM is measured by the same probes and rules).
    Start {
        #[command(flatten)]
        lab: LabArgs,
        #[command(flatten)]
        settings: Box<cpmlab_probe::run::ProbeSettings>,
        /// Probe the API server this kubeconfig names, from this host
        /// (token or client certificate; exec plugins are not supported).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// The kubeconfig's context (default: its current context).
        #[arg(long, requires = "kubeconfig")]
        context: Option<String>,
        /// Where the host-side probes keep their objects (they create it):
        /// default cpmlab-probes-<NAME>.
        #[arg(long, requires = "kubeconfig")]
        namespace: Option<String>,
    },
    /// Stop the probes (the lab's, or those started with --kubeconfig) and
    /// write verdict.json, junit.xml and report.html. Exits 1 when the
    /// verdict failed.
    Stop {
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Whether probes run, and how the run looks so far.
    Status {
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Act on a seed's leader-election candidate (started with
    /// --candidates): start, stop (SIGTERM: it releases the lease), pause,
    /// resume, kill (SIGKILL: no release). The agent records it.
    Candidate {
        #[command(flatten)]
        lab: LabArgs,
        #[arg(value_enum)]
        action: cpmlab_probe::clientgo::CandidateAction,
        /// The seed whose candidate.
        seed: String,
    },
}

pub async fn run(state_root: &Path, command: ProbeCommand) -> Result<u8> {
    use cpmlab_probe::run;
    let lab = match &command {
        ProbeCommand::Start { lab, .. }
        | ProbeCommand::Stop { lab }
        | ProbeCommand::Status { lab }
        | ProbeCommand::Candidate { lab, .. } => lab.clone(),
    };
    check_name(&lab.name)?;
    // Bad flags fail with exit 2 before anything is looked at or started.
    if let ProbeCommand::Start { settings, .. } = &command {
        settings.parse()?;
    }
    if let ProbeCommand::Candidate { action, seed, .. } = &command {
        return candidate(state_root, &lab, *action, seed);
    }
    if let Some(code) = outside(state_root, &lab, &command).await? {
        return Ok(code);
    }
    let (dir, mut state) = cpmlab_lab::status::load_lab(state_root, &lab.name)?;
    let provider = cpmlab_runner::provider::for_lab(&state).await?;
    match command {
        ProbeCommand::Start { settings, .. } => {
            let dir_run = run::start(&*provider, &dir, &mut state, &settings).await?;
            match lab.output {
                Output::Json => {
                    print_json_line(&serde_json::json!({"event": "probe-start", "run": dir_run}))
                }
                Output::Text => println!("{}", dir_run.display()),
            }
            Ok(0)
        }
        ProbeCommand::Stop { .. } => {
            let out = run::stop(&*provider, &dir, &mut state).await?;
            Ok(crate::verdict::print(
                lab.output,
                "probe-stop",
                &out.run,
                &out.verdict,
            ))
        }
        ProbeCommand::Status { .. } => {
            let running = provider
                .workload_state(&run::container(&state))
                .await?
                .to_string();
            let (records, failed) = counts(state.probe_run.as_ref());
            let v = serde_json::json!({
                "container": running, "run": state.probe_run, "records": records, "failed": failed,
            });
            match lab.output {
                Output::Json => print_json(&v),
                Output::Text => println!(
                    "probes: {running}; run {}; {} records, {failed} failed",
                    state
                        .probe_run
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or("-".into()),
                    records
                ),
            }
            Ok(0)
        }
        ProbeCommand::Candidate { .. } => unreachable!("handled above"),
    }
}

/// `cpmlab probe candidate ACTION SEED`: a command to the running agent.
fn candidate(
    state_root: &Path,
    lab: &LabArgs,
    action: cpmlab_probe::clientgo::CandidateAction,
    seed: &str,
) -> Result<u8> {
    let (dir, state) = cpmlab_lab::status::load_lab(state_root, &lab.name)?;
    let run = state.probe_run.clone().ok_or_else(|| {
        cpmlab_core::errors::EnvNotReady::new(
            format!("no probe run in lab `{}`", state.name),
            format!(
                "run `cpmlab probe start --name {} --candidates ...` first",
                state.name
            ),
        )
    })?;
    let plan: Option<cpmlab_verdict::record::ProbePlan> =
        std::fs::read(run.join(cpmlab_verdict::record::PROBES_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
    if !plan.is_some_and(|p| p.probes.contains(&cpmlab_probe::record::ProbeKind::Lease)) {
        return Err(cpmlab_core::errors::BadInput(format!(
            "the probes of lab `{}` run no candidates (start them with --candidates)",
            state.name
        ))
        .into());
    }
    if state.seed(seed).is_none() {
        return Err(cpmlab_core::errors::BadInput(format!(
            "lab `{}` has no seed `{seed}`",
            state.name
        ))
        .into());
    }
    cpmlab_probe::clientgo::control(&run, seed, action)?;
    cpmlab_probe::run::record_lab_event(
        &dir,
        "note",
        &format!("{} candidate {seed}", action.as_str()),
        "cpmlab probe candidate",
        cpmlab_probe::clock::now_unix_ms(),
        None,
    );
    match lab.output {
        Output::Json => print_json_line(&serde_json::json!({
            "event": "candidate", "action": action.as_str(), "seed": seed, "run": run,
        })),
        Output::Text => println!("{} candidate {seed}", action.as_str()),
    }
    Ok(0)
}

/// The host-side probes (`probe start --kubeconfig`), when the command is
/// about them: started with a kubeconfig, or stopped or asked about while
/// they run under that name. `None`: the lab's probes.
async fn outside(state_root: &Path, lab: &LabArgs, command: &ProbeCommand) -> Result<Option<u8>> {
    use cpmlab_probe::outside;
    let running = outside::load(state_root, &lab.name);
    match (command, running) {
        (
            ProbeCommand::Start {
                settings,
                kubeconfig: Some(k),
                context,
                namespace,
                ..
            },
            _,
        ) => {
            let run = outside::start(
                state_root,
                &lab.name,
                k,
                context.as_deref(),
                namespace.as_deref(),
                settings,
            )
            .await?;
            match lab.output {
                Output::Json => print_json_line(
                    &serde_json::json!({"event": "probe-start", "run": run, "outside": true}),
                ),
                Output::Text => println!("{}", run.display()),
            }
            Ok(Some(0))
        }
        (ProbeCommand::Stop { .. }, Some(r)) => {
            let out = outside::stop(state_root, &r).await?;
            Ok(Some(crate::verdict::print(
                lab.output,
                "probe-stop",
                &out.run,
                &out.verdict,
            )))
        }
        (ProbeCommand::Status { .. }, Some(r)) => {
            let state = if outside::running(&r) {
                "running"
            } else {
                "exited"
            };
            let (records, failed) = counts(Some(&r.run));
            let v = serde_json::json!({
                "agent": state, "pid": r.pid, "server": r.server, "run": r.run,
                "records": records, "failed": failed,
            });
            match lab.output {
                Output::Json => print_json(&v),
                Output::Text => println!(
                    "probes from the host (pid {}, {state}) against {}; run {}; {records} records, {failed} failed",
                    r.pid,
                    r.server,
                    r.run.display()
                ),
            }
            Ok(Some(0))
        }
        _ => Ok(None),
    }
}

/// Records so far in a run, and how many failed.
fn counts(run: Option<&PathBuf>) -> (usize, usize) {
    let records = run
        .map(|r| cpmlab_verdict::read_records(&r.join("records.ndjson")).unwrap_or_default())
        .unwrap_or_default();
    let failed = records
        .iter()
        .filter(|r| r.outcome != cpmlab_probe::record::Outcome::Ok)
        .count();
    (records.len(), failed)
}
