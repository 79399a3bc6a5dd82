//! `cpmlab compare SCENARIO --variants KNOB=V1,V2 [--repeat N]`: one scenario
//! under several variants, repeated, and the differences with their
//! uncertainty (compare.json, compare.html, compare.md).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::{check_name, interrupted};
use cpmlab_core::errors::{Cancel, EXIT_ENV, EXIT_FAILED, EXIT_INTERRUPTED};
use cpmlab_core::progress::{Mode, Progress};
use cpmlab_runner::compare::{self, Plan};

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// The scenario file every variant starts from.
    pub scenario: PathBuf,
    /// KNOB=V1,V2,...: a knob (plan, handover, order, gateway, max_age, cc,
    /// pre_vote, etcd, etcd_operator, dns_ttl, shutdown_delay, exposure,
    /// delay, loss, jitter, rate; docs/cli.md says what each sets) or a scenario
    /// field's dotted path, and the values to try; the first value is the
    /// reference. Several flags: their cross product.
    #[arg(long, required = true, value_name = "KNOB=V1,V2")]
    pub variants: Vec<String>,
    /// Runs per variant.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=compare::MAX_REPEAT as i64))]
    pub repeat: u32,
    /// Runs at once, each on its own lab (2 cores hold one well).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
    pub jobs: u16,
    /// The seed every repetition's seed derives from (chosen and recorded
    /// when absent).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where the comparison goes (default: <state root>/runs/compare-<time>).
    #[arg(long, value_name = "DIR")]
    pub report_dir: Option<PathBuf>,
    /// The labs' name (with --jobs N: NAME-1 .. NAME-N).
    #[arg(long, env = "CPMLAB_NAME", default_value = "compare")]
    pub name: String,
    /// The form every run's lab takes: docker, or kind (two kind clusters
    /// with Istio; `cpmlab doctor --provider kind` says what it needs).
    #[arg(long, value_enum, default_value = "docker")]
    pub provider: crate::up::ProviderChoice,
    /// Print the variants that would run (variant, repetition, seed, and
    /// with --report-dir the scenario file written there), and run nothing.
    #[arg(long)]
    pub list: bool,
}

pub async fn run(state_root: &Path, a: CompareArgs) -> Result<u8> {
    check_name(&a.name)?;
    let axes = a
        .variants
        .iter()
        .map(|v| compare::variants::parse_axis(v))
        .collect::<Result<Vec<_>, _>>()?;
    let seed = a.seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        compare::seed_of(t, 0)
    });
    // `--list` without a report directory writes its files where nothing
    // is left behind.
    let scratch = match (a.list, &a.report_dir) {
        (true, None) => Some(tempfile::tempdir().context("create a temporary directory")?),
        _ => None,
    };
    let out = match (&scratch, &a.report_dir) {
        (Some(t), _) => t.path().to_path_buf(),
        (None, Some(d)) => d.clone(),
        (None, None) => cpmlab_model::state::runs_dir(state_root).join(format!(
            "compare-{}",
            cpmlab_lab::migrate::flow::now_rfc3339().replace(':', "")
        )),
    };
    let created = !out.exists();
    std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    let out = out.canonicalize()?;
    let command = std::iter::once("cpmlab".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    let plan = Plan {
        scenario: a.scenario.clone(),
        axes,
        repeat: a.repeat,
        seed,
        out: out.clone(),
        command,
    };
    // Every variant's file is written and checked before a lab exists; bad
    // input leaves no comparison directory behind.
    let prepared = match compare::prepare(&plan) {
        Ok(p) => p,
        Err(e) => {
            if created {
                let _ = std::fs::remove_dir_all(&out);
            }
            return Err(e);
        }
    };
    let kind = a.provider.kind();
    if let Some(e) = prepared
        .files
        .iter()
        .find_map(|(_, _, sf)| cpmlab_runner::scenario::check_form(sf, kind).err())
    {
        if created {
            let _ = std::fs::remove_dir_all(&out);
        }
        return Err(e.into());
    }
    if a.list {
        for (vi, rep, sf) in &prepared.files {
            let file = match scratch {
                Some(_) => String::new(),
                None => format!("\t{}", sf.path.display()),
            };
            println!(
                "{}\t{}\t{}{file}",
                prepared.variants[*vi].name,
                rep,
                sf.scenario.seed.unwrap_or_default(),
            );
        }
        return Ok(0);
    }
    eprintln!(
        "comparing {} variant(s) x {} repetition(s) of {} (seed {seed}) into {}",
        prepared.variants.len(),
        a.repeat,
        a.scenario.display(),
        out.display()
    );
    let provider = cpmlab_runner::provider::connect_for(kind).await?;
    let opts = cpmlab_runner::Options {
        exe: std::env::current_exe().context("find the cpmlab binary")?,
        state_root: state_root.to_path_buf(),
        report_dir: out.join("runs"),
        keep: false,
        lab: a.name.clone(),
        provider: kind,
        kind_up_args: vec![],
    };
    std::fs::create_dir_all(&opts.report_dir)?;
    let progress = Progress::new(Mode::detect(false));
    let cancel = Cancel::default();
    let work = compare::run(
        &*provider,
        &plan,
        &prepared,
        &opts,
        a.jobs as usize,
        &progress,
        &cancel,
    );
    tokio::pin!(work);
    let ran = tokio::select! {
        r = &mut work => r?,
        _ = interrupted() => {
            progress.note("interrupted: stopping the run, writing what ran, tearing down");
            cancel.cancel();
            work.await?
        }
    };
    print!(
        "{}",
        std::fs::read_to_string(out.join("compare.md")).unwrap_or_default()
    );
    println!("{}", out.join("compare.html").display());
    if cancel.check().is_err() {
        return Ok(EXIT_INTERRUPTED);
    }
    if !ran.env_problems.is_empty() {
        for p in &ran.env_problems {
            eprintln!("error: {p}");
        }
        return Ok(EXIT_ENV);
    }
    Ok(if ran.complete { 0 } else { EXIT_FAILED })
}
