//! `cpmlab probe start|stop|status`: the probe agent and its verdict.

use std::path::Path;

use anyhow::Result;
use clap::Subcommand;

use super::{check_name, print_json, print_json_line, LabArgs, Output};
use crate::provider::docker::engine::Engine;

#[derive(Subcommand, Debug)]
pub enum ProbeCommand {
    /// Start the probe agent on the clients network.
    Start {
        #[command(flatten)]
        lab: LabArgs,
        #[command(flatten)]
        settings: crate::probe::run::ProbeSettings,
    },
    /// Stop the probes and write verdict.json, junit.xml and report.html.
    /// Exits 1 when the verdict failed.
    Stop {
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Whether probes run, and how the run looks so far.
    Status {
        #[command(flatten)]
        lab: LabArgs,
    },
}

pub async fn run(state_root: &Path, command: ProbeCommand) -> Result<u8> {
    use crate::probe::run;
    let lab = match &command {
        ProbeCommand::Start { lab, .. }
        | ProbeCommand::Stop { lab }
        | ProbeCommand::Status { lab } => lab.clone(),
    };
    check_name(&lab.name)?;
    // Bad flags fail with exit 2 before anything is looked at or started.
    if let ProbeCommand::Start { settings, .. } = &command {
        settings.parse()?;
    }
    let (dir, mut state) = crate::status::load_lab(state_root, &lab.name)?;
    let engine = Engine::connect().await?;
    match command {
        ProbeCommand::Start { settings, .. } => {
            let dir_run = run::start(&engine, &dir, &mut state, &settings).await?;
            match lab.output {
                Output::Json => {
                    print_json_line(&serde_json::json!({"event": "probe-start", "run": dir_run}))
                }
                Output::Text => println!("{}", dir_run.display()),
            }
            Ok(0)
        }
        ProbeCommand::Stop { .. } => {
            let out = run::stop(&engine, &dir, &mut state).await?;
            Ok(super::verdict::print(
                lab.output,
                "probe-stop",
                &out.run,
                &out.verdict,
            ))
        }
        ProbeCommand::Status { .. } => {
            let running = engine.container_state(&run::container(&state)).await?;
            let records = state
                .probe_run
                .as_ref()
                .map(|r| {
                    crate::verdict::read_records(&r.join("records.ndjson")).unwrap_or_default()
                })
                .unwrap_or_default();
            let failed = records
                .iter()
                .filter(|r| r.outcome != crate::probe::record::Outcome::Ok)
                .count();
            let v = serde_json::json!({
                "container": running, "run": state.probe_run, "records": records.len(), "failed": failed,
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
                    records.len()
                ),
            }
            Ok(0)
        }
    }
}
