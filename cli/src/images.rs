//! `cpmlab images build`: the lab image, its base built in a container
//! from a Debian image (or from the host's binaries), cached by content.

use anyhow::Result;
use clap::{Subcommand, ValueEnum};

use crate::{print_json_line, Output};
use cpmlab_core::progress::{Mode, Progress};
use cpmlab_provider_docker::engine::Engine;
use cpmlab_provider_docker::images::{self, BaseSource};

#[derive(Subcommand, Debug)]
pub enum ImagesCommand {
    /// Build the lab image (cached by content): its base in a container
    /// from a Debian image, then the Go parts and the cpmlab binary.
    Build {
        /// Where the base comes from: the registry's debian:bookworm-slim
        /// (or CPMLAB_DEBIAN_IMAGE), the local cpmlab/debian:bookworm
        /// (scripts/debian-base), either (auto: the registry's where the
        /// engine has it or can pull it), or the host's own binaries.
        /// Default: CPMLAB_IMAGE_BASE, else auto.
        #[arg(long, value_enum)]
        base: Option<Base>,
        #[arg(short = 'o', long, value_enum, default_value = "text")]
        output: Output,
        #[command(flatten)]
        platform: crate::PlatformArg,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Base {
    Auto,
    Registry,
    Local,
    Host,
}

impl From<Base> for BaseSource {
    fn from(b: Base) -> Self {
        match b {
            Base::Auto => BaseSource::Auto,
            Base::Registry => BaseSource::Registry,
            Base::Local => BaseSource::Local,
            Base::Host => BaseSource::Host,
        }
    }
}

pub async fn run(command: ImagesCommand) -> Result<u8> {
    let ImagesCommand::Build { base, output, .. } = command;
    let source = match base {
        Some(b) => b.into(),
        None => BaseSource::from_env()?,
    };
    let engine = Engine::connect().await?;
    let progress = Progress::new(Mode::detect(output == Output::Json));
    let step = progress.step("lab image");
    let image = images::ensure_from(&engine, source).await?;
    let from = engine
        .image_labels(&image.tag)
        .await?
        .and_then(|l| l.get(images::LABEL_BASE).cloned())
        .unwrap_or_else(|| "unknown".into());
    step.done_with(&format!(
        "{}, etcd {}, linux/{}, base: {from}",
        if image.built { "built" } else { "cached" },
        image.etcd_versions_label(),
        image.arch
    ));
    let versions: Vec<&str> = image.etcd_versions.iter().map(|v| v.as_str()).collect();
    match output {
        Output::Json => print_json_line(&serde_json::json!({
            "image": image.tag,
            "built": image.built,
            "etcd_versions": versions,
            "base": from,
            "platform": format!("linux/{}", image.arch),
        })),
        Output::Text => println!("{}", image.tag),
    }
    Ok(0)
}
