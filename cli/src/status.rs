//! `cpmlab status`: one lab in detail, or every lab in a table.

use std::path::Path;

use anyhow::Result;

use crate::{check_name, print_json, Output};

#[derive(clap::Args, Debug, Clone)]
pub struct StatusArgs {
    /// The lab to show; without it (and without CPMLAB_NAME), every lab.
    #[arg(long, env = "CPMLAB_NAME")]
    pub name: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
}

pub async fn run(state_root: &Path, args: &StatusArgs) -> Result<u8> {
    if let Some(name) = &args.name {
        check_name(name)?;
    }
    match &args.name {
        Some(name) => {
            let (_, state) = cpmlab_lab::status::load_lab(state_root, name)?;
            let provider = cpmlab_runner::provider::for_lab(&state).await?;
            let report = cpmlab_lab::status::status(&*provider, state_root, name).await?;
            match args.output {
                Output::Json => print_json(&report),
                Output::Text => print!("{}", report.render()),
            }
        }
        None => {
            let provider = cpmlab_runner::provider::connect().await?;
            let labs = cpmlab_lab::status::list(&*provider, state_root).await?;
            match args.output {
                Output::Json => print_json(&serde_json::json!({
                    "state_dir": state_root, "labs": labs,
                })),
                Output::Text => print!("{}", cpmlab_lab::status::render_list(&labs, state_root)),
            }
        }
    }
    Ok(0)
}
