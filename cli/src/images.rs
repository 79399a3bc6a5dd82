//! `cpmlab images build`: the lab image from host binaries.

use anyhow::Result;
use clap::Subcommand;

use crate::{print_json_line, Output};
use cpmlab_core::progress::{Mode, Progress};
use cpmlab_provider_docker::engine::Engine;
use cpmlab_provider_docker::images;

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
    let image = images::ensure(&engine).await?;
    step.done_with(&format!(
        "{}, etcd {}",
        if image.built { "built" } else { "cached" },
        image.etcd_versions_label()
    ));
    let versions: Vec<&str> = image.etcd_versions.iter().map(|v| v.as_str()).collect();
    match output {
        Output::Json => print_json_line(&serde_json::json!({
            "image": image.tag,
            "built": image.built,
            "etcd_versions": versions,
        })),
        Output::Text => println!("{}", image.tag),
    }
    Ok(0)
}
