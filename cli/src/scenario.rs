//! `cpmlab scenario validate|schema`: check scenario files without a lab,
//! and print the format's JSON Schema.

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;

use crate::{print_json, Output};

#[derive(Subcommand, Debug)]
pub enum ScenarioCommand {
    /// Check scenario files (or directories of them): exit 0 when every
    /// one is valid, 2 naming file, line and field of the first problem in
    /// each that is not.
    Validate {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(short = 'o', long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Print the JSON Schema of the scenario format.
    Schema,
}

pub fn run(command: ScenarioCommand) -> Result<u8> {
    match command {
        ScenarioCommand::Schema => {
            print_json(&cpmlab_runner::scenario::schema());
            Ok(0)
        }
        ScenarioCommand::Validate { files, output } => {
            let files = cpmlab_runner::scenario::expand(&files)?;
            let mut bad = 0;
            let mut out = Vec::new();
            for f in &files {
                match cpmlab_runner::scenario::load(f) {
                    Ok(sf) => {
                        if output == Output::Text {
                            println!("ok  {}: {}", f.display(), sf.scenario.description.trim());
                        }
                        out.push(serde_json::json!({"file": f, "valid": true}));
                    }
                    Err(e) => {
                        bad += 1;
                        if output == Output::Text {
                            eprintln!("error: {e}");
                        }
                        out.push(serde_json::json!({
                            "file": f, "valid": false, "line": e.line,
                            "field": e.field, "message": e.message,
                        }));
                    }
                }
            }
            if output == Output::Json {
                print_json(&out);
            }
            Ok(if bad == 0 {
                0
            } else {
                cpmlab_core::errors::EXIT_BAD_INPUT
            })
        }
    }
}
