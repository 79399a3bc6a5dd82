//! `cpmlab doctor`: is this host ready for the lab?

use anyhow::Result;

use super::{print_json, Output};

pub async fn run(output: Output) -> Result<u8> {
    let report = crate::doctor::doctor().await;
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
