//! `cpmlab down`: remove every object of a lab (or of all labs).

use std::path::Path;

use anyhow::Result;

use super::{check_name, print_json_line, LabArgs, Output};
use crate::progress::{Mode, Progress};
use crate::provider::docker::down;
use crate::provider::docker::engine::Engine;

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
    for l in labs {
        let step = progress.step(format!("remove lab {l}"));
        // A kind lab's clusters first (its state directory says which).
        crate::provider::kind::up::down(&engine, state_root, &l).await?;
        let r = down::down(&engine, &l, state_root).await?;
        step.done_with(&format!(
            "{} containers, {} networks, {} volumes",
            r.removed.containers.len(),
            r.removed.networks.len(),
            r.removed.volumes.len()
        ));
        reports.push(r);
    }
    if lab.output == Output::Json {
        print_json_line(&serde_json::json!({"event": "down", "labs": reports}));
    }
    Ok(0)
}
