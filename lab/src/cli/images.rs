//! `cpmlab images build`: the lab image from host binaries.

use anyhow::Result;
use clap::Subcommand;

use super::{print_json_line, Output};
use crate::progress::{Mode, Progress};
use crate::provider::docker::engine::Engine;
use crate::provider::docker::images;

#[derive(Subcommand, Debug)]
pub enum ImagesCommand {
    /// Build the lab image from host binaries (cached by content).
    Build {
        #[arg(short = 'o', long, value_enum, default_value = "text")]
        output: Output,
    },
}

pub async fn run(command: ImagesCommand) -> Result<u8> {
    let ImagesCommand::Build { output } = command;
    let engine = Engine::connect().await?;
    let progress = Progress::new(Mode::detect(output == Output::Json));
    let step = progress.step("lab image");
    let (tag, built) = images::ensure(&engine).await?;
    step.done_with(if built { "built" } else { "cached" });
    match output {
        Output::Json => print_json_line(&serde_json::json!({"image": tag, "built": built})),
        Output::Text => println!("{tag}"),
    }
    Ok(0)
}
