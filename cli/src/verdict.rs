//! `cpmlab verdict RUN_DIR`: judge a kept run again, from its records,
//! events, final read and etcd logs, with this cpmlab's rules and the
//! criteria the run keeps (`criteria.json`: the scenario's limits, stall
//! bound, hazard budgets and accepted gaps), or others given here (an
//! incident's run with a newer cpmlab, or records edited by hand).
//! `--explain-layout` says what the run directory holds and lacks, by its
//! layout, without judging it.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::{print_json_line, Output};
use cpmlab_core::errors::BadInput;
use cpmlab_lab::link::profile::parse_duration;
use cpmlab_verdict::{Criteria, Status, Verdict};

#[derive(clap::Args, Debug)]
pub struct VerdictArgs {
    /// A run directory (`records.ndjson`, `events.ndjson`, `final.json`);
    /// `cpmlab probe stop` prints its report's path inside one.
    pub run: PathBuf,
    /// Judge by these criteria (JSON, as `criteria.json` in a run
    /// directory) instead of the run's own.
    #[arg(long)]
    pub criteria: Option<PathBuf>,
    /// p99 bound for single-object reads per phase (default: the run's,
    /// else Kubernetes' SLO, 1s).
    #[arg(long)]
    pub read_p99: Option<String>,
    /// p99 bound for namespaced lists per phase (Kubernetes SLO: 5s).
    #[arg(long)]
    pub list_p99: Option<String>,
    /// p99 bound for mutations per phase (Kubernetes SLO: 1s).
    #[arg(long)]
    pub mutation_p99: Option<String>,
    /// p99 bound from a write's acknowledgement to its watch event (the
    /// lab's own bound, 1s).
    #[arg(long)]
    pub watch_delay_p99: Option<String>,
    /// Writes acknowledged this close to the end need not be in the watch
    /// (1s).
    #[arg(long)]
    pub watch_grace: Option<String>,
    /// A successful request slower than this counts as unavailable (5s).
    #[arg(long)]
    pub stall: Option<String>,
    /// List what the run directory holds and lacks, by its layout (and
    /// which rules what it lacks leaves not covered or degraded), instead
    /// of judging it.
    #[arg(long)]
    pub explain_layout: bool,
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
}

fn ms(flag: &str, s: &str) -> Result<f64, BadInput> {
    Ok(parse_duration(flag, s)?.as_secs_f64() * 1e3)
}

/// The criteria: the file given, else the run's; the flags over them.
fn criteria(a: &VerdictArgs) -> Result<Criteria> {
    let mut c = match &a.criteria {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| BadInput(format!("{}: {e}", p.display())))?;
            let c: Criteria = serde_json::from_str(&text)
                .map_err(|e| BadInput(format!("{}: not criteria: {e}", p.display())))?;
            c.check()
                .map_err(|(f, m)| BadInput(format!("{}: {f}: {m}", p.display())))?;
            c
        }
        None => cpmlab_verdict::run_dir::read_criteria(&a.run)?,
    };
    let th = &mut c.thresholds;
    for (flag, v, slot) in [
        ("--read-p99", &a.read_p99, &mut th.read_p99_ms),
        ("--list-p99", &a.list_p99, &mut th.list_p99_ms),
        ("--mutation-p99", &a.mutation_p99, &mut th.mutation_p99_ms),
        (
            "--watch-delay-p99",
            &a.watch_delay_p99,
            &mut th.watch_delay_p99_ms,
        ),
        ("--watch-grace", &a.watch_grace, &mut th.watch_grace_ms),
    ] {
        if let Some(v) = v {
            *slot = ms(flag, v)?;
        }
    }
    if let Some(v) = &a.stall {
        c.stall_ms = ms("--stall", v)?;
    }
    c.check().map_err(|(f, m)| BadInput(format!("{f}: {m}")))?;
    Ok(c)
}

pub fn run(a: &VerdictArgs) -> Result<u8> {
    cpmlab_verdict::run_dir::check(&a.run)?;
    if a.explain_layout {
        let lines = cpmlab_verdict::run_dir::explain(&a.run, &criteria(a)?)?;
        match a.output {
            Output::Json => print_json_line(&serde_json::json!({
                "event": "layout", "run": a.run, "lines": lines,
            })),
            Output::Text => {
                for l in lines {
                    println!("{l}");
                }
            }
        }
        return Ok(0);
    }
    // A run directory this cannot judge keeps no earlier judgement: its
    // verdict.json and report would go on saying what they said.
    let judged = criteria(a).and_then(|c| Ok(cpmlab_verdict::run_dir::judge(&a.run, &c)?));
    let v = match judged {
        Ok(v) => v,
        Err(e) => {
            let gone = cpmlab_verdict::run_dir::forget(&a.run);
            if gone.is_empty() {
                return Err(e);
            }
            return Err(e.context(format!(
                "not judged; the earlier judgement's {} removed from {}",
                gone.join(", "),
                a.run.display()
            )));
        }
    };
    Ok(print(a.output, "verdict", &a.run, &v))
}

/// The verdict as `probe stop` and `verdict` print it; the exit status.
pub fn print(output: Output, event: &str, run: &Path, v: &Verdict) -> u8 {
    match output {
        Output::Json => print_json_line(&serde_json::json!({
            "event": event, "run": run, "status": v.status, "passed": v.passed,
            "reasons": v.reasons,
            "requests": v.overall.requests, "failed": v.overall.failed(),
            "excused": v.excuses.excused_count,
        })),
        Output::Text => {
            println!(
                "verdict: {}{}",
                v.status.headline(),
                if v.reasons.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", v.reasons.join("; "))
                }
            );
            println!(
                "  {} requests, {} failed ({} excused), downtime {:.0} ms raw (longest {:.0} ms)",
                v.overall.requests,
                v.overall.failed(),
                v.excuses.excused_count,
                v.overall.downtime_ms,
                v.overall.longest_unavailable_ms
            );
            for h in &v.excuses.hazards {
                println!(
                    "  hazard {}: happened {}, excused {} (longest {:.0} ms), {}{}",
                    h.hazard,
                    h.happened,
                    h.excused,
                    h.longest_ms,
                    h.budget_text(),
                    if h.within_budget { "" } else { ": OVER BUDGET" }
                );
            }
            for e in v.excuses.excused.iter().take(5) {
                println!(
                    "  excused: {} {}+{:.0} ms {} ({}): {}",
                    e.lane,
                    cpmlab_verdict::report::fmt_utc(e.start_unix_ms),
                    e.duration_ms,
                    e.outcome,
                    e.hazard,
                    e.evidence
                );
            }
            for d in &v.inputs.dropped {
                println!("  dropped: {d}");
            }
            for m in &v.inputs.missing {
                println!(
                    "  missing: {} ({}): not covered: {}",
                    m.file,
                    m.why,
                    m.rules.join(", ")
                );
            }
            for l in &v.inputs.lacking {
                println!("  lacking: {}: degraded: {}", l.what, l.rules.join(", "));
            }
            // Why, one line per mechanism, and the watches that went silent.
            for m in &v.mechanisms {
                println!("  why: {}", m.line);
            }
            for w in &v.silent_watches {
                println!("  silent: {}", w.line);
            }
            // A failed run explains itself: the first failed requests no
            // hazard excused.
            let excused = cpmlab_verdict::excuse::excused_seqs(&v.excuses);
            let unexcused: Vec<_> = v
                .failed_requests
                .iter()
                .filter(|f| !excused.contains_key(&f.seq))
                .collect();
            for f in unexcused.iter().take(5) {
                println!(
                    "  failed: {} {}+{:.0} ms {} {}{}",
                    f.lane,
                    cpmlab_verdict::report::fmt_utc(f.start_unix_ms),
                    f.duration_ms,
                    f.outcome,
                    f.event
                        .as_deref()
                        .map(|e| format!("({e}) "))
                        .unwrap_or_default(),
                    f.error.as_deref().unwrap_or("")
                );
            }
            if unexcused.len() > 5 {
                println!("  ... and more in verdict.json (failed_requests)");
            }
            for r in v.rules.iter().filter(|r| v.accepted.contains_key(&r.name)) {
                println!(
                    "  {} {}, accepted: {}",
                    r.name,
                    r.status.as_str(),
                    v.accepted[&r.name]
                );
            }
            println!("report: {}", run.join("report.html").display());
        }
    }
    match v.status {
        Status::Passed | Status::PassedWithKnownHazards => 0,
        Status::Failed => cpmlab_core::errors::EXIT_FAILED,
    }
}
