//! `cpmlab down`: remove every object of a lab (or of all labs).

use std::path::Path;

use anyhow::Result;

use crate::{check_name, print_json_line, LabArgs, Output};
use cpmlab_core::progress::{Mode, Progress};
use cpmlab_provider_docker::down;
use cpmlab_provider_docker::engine::Engine;

pub async fn run(state_root: &Path, lab: &LabArgs, all: bool) -> Result<u8> {
    check_name(&lab.name)?;
    let engine = Engine::connect().await?;
    let labs = if all {
        down::all_labs(&engine, state_root).await?
    } else {
        vec![lab.name.clone()]
    };
    let progress = Progress::new(Mode::detect(lab.output == Output::Json));
    let mut reports = Vec::new();
    // Every lab is tried: one that cannot be removed does not keep the
    // others; the first failure decides the exit.
    let mut first_err: Option<anyhow::Error> = None;
    for l in labs {
        let step = progress.step(format!("remove lab {l}"));
        // A kind lab's clusters first (its state directory says which).
        let r = match cpmlab_provider_kind::up::down(state_root, &l).await {
            Ok(()) => down::down(&engine, &l, state_root).await,
            Err(e) => Err(e),
        };
        match r {
            Ok(r) => {
                step.done_with(&format!(
                    "{} containers, {} networks, {} volumes",
                    r.removed.containers.len(),
                    r.removed.networks.len(),
                    r.removed.volumes.len()
                ));
                reports.push(r);
            }
            Err(e) => {
                step.fail("could not be removed (below)");
                if first_err.is_none() {
                    first_err = Some(e);
                }
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    if lab.output == Output::Json {
        print_json_line(&serde_json::json!({"event": "down", "labs": reports}));
    }
    Ok(0)
}
