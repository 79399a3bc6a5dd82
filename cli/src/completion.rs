//! `cpmlab completion SHELL`: a completion script on stdout, as kind and
//! kubectl offer (`source <(cpmlab completion bash)`).

use std::io::Write;

use anyhow::{Context, Result};
use clap::CommandFactory;

pub fn run(shell: clap_complete::Shell) -> Result<u8> {
    let mut cmd = crate::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "cpmlab", &mut script);
    let mut out = std::io::stdout().lock();
    match out.write_all(&script).and_then(|_| out.flush()) {
        // `cpmlab completion bash | head` is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        r => r.context("write the completion script").map(|_| 0),
    }
}
