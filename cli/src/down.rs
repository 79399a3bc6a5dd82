//! `cpmlab down`: remove every object of a lab (or of all labs).

use std::path::Path;

use anyhow::Result;

use crate::{check_name, print_json_line, LabArgs, Output};
use cpmlab_core::progress::{Mode, Progress};
use cpmlab_model::state::ProviderKind;

pub async fn run(state_root: &Path, lab: &LabArgs, all: bool) -> Result<u8> {
    check_name(&lab.name)?;
    // The kind provider's `down` removes a kind lab's clusters (its state
    // directory says whether it is one; a crashed `up` may have left no
    // state file) and then, as the docker provider's, every labelled
    // object and the lab's files: so it serves every lab, of either form.
    let provider = cpmlab_runner::provider::connect_for(ProviderKind::Kind).await?;
    let labs = if all {
        // Every lab with a labelled Docker object or a state directory.
        let mut labs = cpmlab_runner::provider::connect().await?.labs().await?;
        labs.extend(cpmlab_model::state::lab_names(state_root));
        labs.sort();
        labs.dedup();
        labs
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
        match provider.down(state_root, &l).await {
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
