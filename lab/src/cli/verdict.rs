//! `cpmlab verdict RUN_DIR`: judge a kept run again, from its records,
//! events and final read, with this cpmlab's rules and the given limits
//! (an incident's run with a newer cpmlab, or records edited by hand).

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::{print_json_line, Output};
use crate::errors::BadInput;
use crate::link::profile::parse_duration;
use crate::verdict::{Thresholds, Verdict};

#[derive(clap::Args, Debug)]
pub struct VerdictArgs {
    /// A run directory (`records.ndjson`, `events.ndjson`, `final.json`);
    /// `cpmlab probe stop` prints its report's path inside one.
    pub run: PathBuf,
    /// p99 bound for single-object reads per phase (Kubernetes SLO: 1s).
    #[arg(long, default_value = "1s")]
    pub read_p99: String,
    /// p99 bound for namespaced lists per phase (Kubernetes SLO: 5s).
    #[arg(long, default_value = "5s")]
    pub list_p99: String,
    /// p99 bound for mutations per phase (Kubernetes SLO: 1s).
    #[arg(long, default_value = "1s")]
    pub mutation_p99: String,
    /// p99 bound from a write's acknowledgement to its watch event (the
    /// lab's own bound).
    #[arg(long, default_value = "1s")]
    pub watch_delay_p99: String,
    /// Writes acknowledged this close to the end need not be in the watch.
    #[arg(long, default_value = "1s")]
    pub watch_grace: String,
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
}

fn ms(flag: &str, s: &str) -> Result<f64, BadInput> {
    Ok(parse_duration(flag, s)?.as_secs_f64() * 1e3)
}

pub fn run(a: &VerdictArgs) -> Result<u8> {
    let th = Thresholds {
        read_p99_ms: ms("--read-p99", &a.read_p99)?,
        list_p99_ms: ms("--list-p99", &a.list_p99)?,
        mutation_p99_ms: ms("--mutation-p99", &a.mutation_p99)?,
        watch_delay_p99_ms: ms("--watch-delay-p99", &a.watch_delay_p99)?,
        watch_grace_ms: ms("--watch-grace", &a.watch_grace)?,
    };
    for f in ["records.ndjson", "events.ndjson"] {
        let p = a.run.join(f);
        if !p.is_file() {
            return Err(BadInput(format!(
                "{}: not a run directory: {} is missing",
                a.run.display(),
                p.display()
            ))
            .into());
        }
    }
    let v = crate::probe::run::judge(&a.run, &th)?;
    Ok(print(a.output, "verdict", &a.run, &v))
}

/// The verdict as `probe stop` and `verdict` print it; the exit status.
pub fn print(output: Output, event: &str, run: &Path, v: &Verdict) -> u8 {
    match output {
        Output::Json => print_json_line(&serde_json::json!({
            "event": event, "run": run, "passed": v.passed, "reasons": v.reasons,
        })),
        Output::Text => {
            println!(
                "verdict: {}{}",
                if v.passed { "PASSED" } else { "FAILED" },
                if v.reasons.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", v.reasons.join("; "))
                }
            );
            // A failed run explains itself: the first failed requests.
            for f in v.failed_requests.iter().take(5) {
                println!(
                    "  failed: {} {}+{:.0} ms {} {}{}",
                    f.lane,
                    crate::verdict::report::fmt_utc(f.start_unix_ms),
                    f.duration_ms,
                    f.outcome,
                    f.event
                        .as_deref()
                        .map(|e| format!("({e}) "))
                        .unwrap_or_default(),
                    f.error.as_deref().unwrap_or("")
                );
            }
            if v.failed_requests.len() > 5 {
                println!("  ... and more in verdict.json (failed_requests)");
            }
            println!("report: {}", run.join("report.html").display());
        }
    }
    if v.passed {
        0
    } else {
        crate::errors::EXIT_FAILED
    }
}
