//! `cpmlab doctor`: is this host ready for the lab?

use std::path::Path;

use anyhow::Result;

use crate::{print_json, Output};

pub async fn run(
    output: Output,
    state_root: Option<&Path>,
    provider: crate::up::ProviderChoice,
) -> Result<u8> {
    let mut report = cpmlab_runner::doctor::doctor().await;
    if provider == crate::up::ProviderChoice::Kind {
        cpmlab_runner::doctor::kind(&mut report).await;
    }
    if let Some(root) = state_root {
        report.checks.push(cpmlab_runner::doctor::lab_files(root));
        report
            .checks
            .push(cpmlab_runner::doctor::state_dir(root).await);
    }
    match output {
        Output::Json => print_json(&report),
        Output::Text => print!("{}", report.render()),
    }
    Ok(if report.ready() {
        0
    } else {
        cpmlab_core::errors::EXIT_ENV
    })
}
