//! `cpmlab run FILE|DIR...`: run scenario files end to end and judge them
//! by their expectations.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::{check_name, interrupted};
use cpmlab_core::errors::{Cancel, EXIT_BAD_INPUT, EXIT_ENV, EXIT_FAILED, EXIT_INTERRUPTED};
use cpmlab_core::progress::{Mode, Progress};

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Scenario files, or directories of them (`*.yaml`, in name order).
    #[arg(required = true)]
    pub scenarios: Vec<PathBuf>,
    /// Where each scenario's directory, junit.xml and index.html go
    /// (default: <state root>/runs/scenarios-<time>).
    #[arg(long, value_name = "DIR")]
    pub report_dir: Option<PathBuf>,
    /// Leave the lab up after each scenario, and reuse a lab that is up
    /// when it is as the next scenario would build it.
    #[arg(long)]
    pub keep: bool,
    /// Scenarios run at once, each on its own lab.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
    pub jobs: u16,
    /// The lab's name (with --jobs N: NAME-1 .. NAME-N).
    #[arg(long, env = "CPMLAB_NAME", default_value = "run")]
    pub name: String,
    /// The form each scenario's lab takes: docker, or kind (two kind
    /// clusters with Istio; `cpmlab doctor --provider kind` says what it
    /// needs).
    #[arg(long, value_enum, default_value = "docker")]
    pub provider: crate::up::ProviderChoice,
    /// kind: each scenario's etcd through etcd-druid (`up --with-etcd-druid`):
    /// druid makes the members, backup-restore joins and promotes them.
    #[arg(long)]
    pub with_etcd_druid: bool,
    /// kind, with --with-etcd-druid: the `Etcd`s' naming (`up --druid-naming`).
    #[arg(long, value_enum, requires = "with_etcd_druid")]
    pub druid_naming: Option<cpmlab_model::kind::DruidNaming>,
    /// Run only shard K of N (e.g. 2/3): the set split so that shards
    /// finish together, by each scenario's expected duration; the same
    /// scenario lands in the same shard for the same set.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<cpmlab_runner::shard::Shard>,
    /// An earlier run's report directory whose wall times balance the
    /// shards (else each file's `expected_duration`, else an estimate).
    #[arg(long, value_name = "DIR", requires = "shard")]
    pub durations: Option<PathBuf>,
    /// Print the scenarios that would run (name, expected duration and
    /// where that figure comes from), and run nothing.
    #[arg(long)]
    pub list: bool,
    #[command(flatten)]
    pub platform: crate::PlatformArg,
    /// The factor on each scenario's limits about time (latency SLOs,
    /// downtime, stall bound, hazard budgets' max_ms) and on the lab's own
    /// waits, from 1 to 100. Default: the platform's (under emulation the
    /// measured slow-down, else 1; CPMLAB_SLOW_FACTOR). Counts of failed
    /// requests, the safety rules and coverage are never stretched.
    #[arg(long, value_name = "F", value_parser = parse_factor)]
    pub slow_factor: Option<f64>,
}

fn parse_factor(s: &str) -> Result<f64, String> {
    cpmlab_model::platform::parse_factor(s)
}

/// `up`'s etcd-druid flags, as `run` was given them.
pub fn kind_up_args(
    with_etcd_druid: bool,
    naming: Option<cpmlab_model::kind::DruidNaming>,
) -> Vec<String> {
    let mut v = vec![];
    if with_etcd_druid {
        v.push("--with-etcd-druid".to_string());
    }
    if let Some(n) = naming {
        use clap::ValueEnum as _;
        v.push("--druid-naming".into());
        v.push(n.to_possible_value().expect("named").get_name().to_string());
    }
    v
}

pub async fn run(state_root: &Path, a: RunArgs) -> Result<u8> {
    check_name(&a.name)?;
    if a.with_etcd_druid && a.provider != crate::up::ProviderChoice::Kind {
        return Err(cpmlab_core::errors::BadInput(
            "--with-etcd-druid belongs to the kind form: add --provider kind".into(),
        )
        .into());
    }
    if a.provider == crate::up::ProviderChoice::Kind {
        crate::up::refuse_platform_for_kind()?;
    }
    // Every file is checked before anything is created.
    let paths = cpmlab_runner::scenario::expand(&a.scenarios)?;
    let mut files = Vec::new();
    let mut bad = 0;
    let kind = a.provider.kind();
    for p in &paths {
        match cpmlab_runner::scenario::load(p)
            .and_then(|f| cpmlab_runner::scenario::check_form(&f, kind).map(|()| f))
        {
            Ok(f) => files.push(f),
            Err(e) => {
                eprintln!("error: {e}");
                bad += 1;
            }
        }
    }
    if bad > 0 {
        eprintln!(
            "{bad} of {} scenario files are not valid; nothing was run",
            paths.len()
        );
        return Ok(EXIT_BAD_INPUT);
    }
    let mut names = std::collections::BTreeMap::new();
    for f in &files {
        if let Some(other) = names.insert(f.name(), f.path.clone()) {
            return Err(cpmlab_core::errors::BadInput(format!(
                "{} and {} share the name `{}`: their directories would collide",
                other.display(),
                f.path.display(),
                f.name()
            ))
            .into());
        }
    }
    if let Some(shard) = a.shard {
        files = select_shard(files, shard, a.durations.as_deref());
        if files.is_empty() {
            eprintln!("shard {shard}: no scenario falls in this shard; nothing to run");
        }
    }
    if a.list {
        let measured = a
            .durations
            .as_deref()
            .map(cpmlab_runner::shard::measured)
            .unwrap_or_default();
        for w in cpmlab_runner::shard::weigh(&files, &measured) {
            println!(
                "{}\t{:.0}\t{}",
                w.name,
                w.expected.as_secs_f64(),
                match w.source {
                    cpmlab_runner::shard::Source::Measured => "measured",
                    cpmlab_runner::shard::Source::Declared => "declared",
                    cpmlab_runner::shard::Source::Estimated => "estimated",
                }
            );
        }
        return Ok(0);
    }
    let provider = cpmlab_runner::provider::connect_for(kind).await?;
    let report_dir = match a.report_dir {
        Some(d) => d,
        None => cpmlab_model::state::runs_dir(state_root).join(format!(
            "scenarios-{}",
            cpmlab_lab::migrate::flow::now_rfc3339().replace(':', "")
        )),
    };
    std::fs::create_dir_all(&report_dir)
        .with_context(|| format!("create {}", report_dir.display()))?;
    let report_dir = report_dir.canonicalize()?;
    let opts = cpmlab_runner::Options {
        exe: std::env::current_exe().context("find the cpmlab binary")?,
        state_root: state_root.to_path_buf(),
        report_dir: report_dir.clone(),
        keep: a.keep,
        lab: a.name.clone(),
        provider: kind,
        kind_up_args: kind_up_args(a.with_etcd_druid, a.druid_naming),
    };
    let progress = Progress::new(Mode::detect(false));
    let cancel = Cancel::default();
    let work = cpmlab_runner::run_all(
        &*provider,
        &files,
        &opts,
        a.jobs as usize,
        &progress,
        &cancel,
    );
    tokio::pin!(work);
    let results = tokio::select! {
        r = &mut work => r,
        _ = interrupted() => {
            progress.note("interrupted: stopping the probes, writing what ran, tearing down");
            cancel.cancel();
            work.await
        }
    };
    let title = match a.shard {
        Some(s) => format!("cpmlab scenarios, shard {s}"),
        None => "cpmlab scenarios".to_string(),
    };
    cpmlab_runner::summary::write_all(&report_dir, &results, &title, |_| String::new())
        .with_context(|| format!("write the summaries into {}", report_dir.display()))?;
    print!("{}", cpmlab_runner::summary::table(&results));
    print!("{}", cpmlab_runner::summary::in_words(&results));
    println!("{}", report_dir.join("index.html").display());
    if cancel.check().is_err() {
        return Ok(EXIT_INTERRUPTED);
    }
    if results.iter().any(|r| r.env_error) {
        return Ok(EXIT_ENV);
    }
    Ok(
        if results.len() == files.len() && results.iter().all(|r| r.passed) {
            0
        } else {
            EXIT_FAILED
        },
    )
}

/// The files of `shard`, saying which they are and the shards' expected
/// totals (so a person sees the balance).
fn select_shard(
    files: Vec<cpmlab_runner::scenario::ScenarioFile>,
    shard: cpmlab_runner::shard::Shard,
    durations: Option<&Path>,
) -> Vec<cpmlab_runner::scenario::ScenarioFile> {
    use cpmlab_runner::shard;
    let measured = durations.map(shard::measured).unwrap_or_default();
    let weighted = shard::weigh(&files, &measured);
    let split = shard::split(&weighted, shard.count);
    let totals = shard::totals(&weighted, &split);
    let mine = &split[shard.index - 1];
    eprintln!(
        "shard {shard}: {} of {} scenarios, expected {:.0} min (shards: {})",
        mine.len(),
        files.len(),
        totals[shard.index - 1].as_secs_f64() / 60.0,
        totals
            .iter()
            .map(|t| format!("{:.0}", t.as_secs_f64() / 60.0))
            .collect::<Vec<_>>()
            .join(", ")
            + " min"
    );
    files
        .into_iter()
        .enumerate()
        .filter(|(i, _)| mine.contains(i))
        .map(|(_, f)| f)
        .collect()
}
