//! `cpmlab doctor`: is this host ready for the lab?

use std::path::Path;

use anyhow::Result;

use super::{print_json, Output};

pub async fn run(
    output: Output,
    state_root: Option<&Path>,
    provider: super::up::ProviderChoice,
) -> Result<u8> {
    let mut report = crate::doctor::doctor().await;
    if provider == super::up::ProviderChoice::Kind {
        crate::doctor::kind(&mut report).await;
    }
    if let Some(root) = state_root {
        report.checks.push(crate::doctor::lab_files(root));
    }
    match output {
        Output::Json => print_json(&report),
        Output::Text => print!("{}", report.render()),
    }
    Ok(if report.ready() {
        0
    } else {
        crate::errors::EXIT_ENV
    })
}
