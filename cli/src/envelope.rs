//! `cpmlab envelope [--grid full|coarse|quick|sizes|learner]`: the operating
//! envelope (which WAN conditions and shoot sizes each plan migrates across
//! without downtime) and the learner grid (does a join complete over a
//! lossy WAN), each cell a compare variant of a generated scenario, run one
//! lab at a time, resumable, in shards, with its tables rendered from the
//! recorded runs (cpmlab_runner::envelope).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::ValueEnum;

use crate::interrupted;
use cpmlab_core::errors::{BadInput, Cancel, EXIT_ENV, EXIT_INTERRUPTED};
use cpmlab_core::progress::{Mode, Progress};
use cpmlab_model::link::profile::LossBy;
use cpmlab_model::migrate::membership::Plan;
use cpmlab_runner::envelope::{self, Asked, Grid, Spec};

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum GridChoice {
    /// 5 one-way delays × 3 jitters × 4 losses, each plan (120 runs).
    Full,
    /// 3 delays × 2 jitters × 3 losses, each plan (36 runs).
    Coarse,
    /// 3 delays × 2 losses, no jitter, each plan (12 runs).
    Quick,
    /// 2 delays at 10 MiB, 500 MiB and 2 GiB shoots, each plan (12 runs).
    Sizes,
    /// Loss × delay × etcd version × who drops, 3 runs a cell (216 runs):
    /// does the five-member plan's join complete before its timeout?
    Learner,
}

impl GridChoice {
    fn grid(self) -> Grid {
        match self {
            GridChoice::Full => Grid::Full,
            GridChoice::Coarse => Grid::Coarse,
            GridChoice::Quick => Grid::Quick,
            GridChoice::Sizes => Grid::Sizes,
            GridChoice::Learner => Grid::Learner,
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct EnvelopeArgs {
    /// The grid.
    #[arg(long, value_enum, default_value = "full")]
    pub grid: GridChoice,
    /// Envelope grids: the plans, comma-separated (default six-member,five-member).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub plans: Option<Vec<Plan>>,
    /// One-way delays in ms, comma-separated (over the grid's).
    #[arg(long, value_name = "MS,...")]
    pub delays: Option<String>,
    /// Envelope grids: jitters in ms, comma-separated (over the grid's).
    #[arg(long, value_name = "MS,...")]
    pub jitters: Option<String>,
    /// Losses in % each way, comma-separated (over the grid's).
    #[arg(long, value_name = "PCT,...")]
    pub losses: Option<String>,
    /// Envelope grids: shoot database sizes filled before the run,
    /// comma-separated (0 for none, else e.g. 10MiB, 500MiB, 2GiB; over the
    /// grid's).
    #[arg(long, value_name = "SIZE,...")]
    pub sizes: Option<String>,
    /// Learner grid: etcd versions, comma-separated (default 3.4,3.5).
    #[arg(long, value_name = "V,...")]
    pub etcd_versions: Option<String>,
    /// Learner grid: who drops the packets, the delay line (shaper) and/or
    /// the router's kernel (kernel); default both.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub loss_by: Option<Vec<LossBy>>,
    /// Learner grid: runs a cell (default 3), each with its own delay-line
    /// seed.
    #[arg(long)]
    pub repeat: Option<u32>,
    /// Run only shard K of N: every N-th run, starting at the K-th (what
    /// one nightly job runs).
    #[arg(long, value_name = "K/N")]
    pub shard: Option<cpmlab_runner::shard::Shard>,
    /// New objects per second, beside the probes.
    #[arg(long, default_value_t = 25)]
    pub write_rate: u32,
    /// The probes' client timeout (beyond etcd's 7 s request timeout, so
    /// that etcd's own error is what a client sees).
    #[arg(long, default_value = "10s")]
    pub timeout: String,
    /// Seconds after which a success counts as slow.
    #[arg(long, default_value_t = 2.0)]
    pub slow: f64,
    /// The DNS TTL of the shoot API record (default: the topology's).
    #[arg(long)]
    pub ttl: Option<u32>,
    /// The API servers' shutdown delay (default: the topology's, Gardener's 15s).
    #[arg(long)]
    pub shutdown_delay: Option<String>,
    /// The migration's join timeout per member (default 90s; learner 120s).
    #[arg(long)]
    pub join_timeout: Option<String>,
    /// The delay line's seed: repetition r runs with SEED + r - 1.
    #[arg(long, default_value_t = 2024)]
    pub seed: u64,
    /// Where the grid goes (default: <state root>/runs/envelope-<time>).
    /// A run done there is not run again: the same --out resumes.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Only render the tables of what --out holds.
    #[arg(long, requires = "out")]
    pub render_only: bool,
    /// Print the runs that would run (name, variant, repetition, seed, and
    /// `done` for those --out holds), and run nothing.
    #[arg(long)]
    pub list: bool,
    /// The lab's name (default: envelope, or learner for the learner grid).
    #[arg(long, env = "CPMLAB_NAME")]
    pub name: Option<String>,
}

fn asked(a: &EnvelopeArgs) -> Asked {
    Asked {
        grid: a.grid.grid(),
        plans: a.plans.clone(),
        delays: a.delays.clone(),
        jitters: a.jitters.clone(),
        losses: a.losses.clone(),
        sizes: a.sizes.clone(),
        versions: a.etcd_versions.clone(),
        loss_by: a.loss_by.clone(),
        repeat: a.repeat,
        write_rate: a.write_rate,
        timeout: a.timeout.clone(),
        slow_s: a.slow,
        ttl: a.ttl,
        shutdown_delay: a.shutdown_delay.clone(),
        join_timeout: a.join_timeout.clone(),
        seed: a.seed,
    }
}

pub async fn run(state_root: &Path, a: EnvelopeArgs) -> Result<u8> {
    if a.render_only {
        let out = a.out.as_deref().expect("clap requires --out");
        let table = envelope::table::render(out)?;
        println!("{}", table.display());
        return Ok(0);
    }
    let spec = Spec::new(&asked(&a))?;
    let name = a.name.clone().unwrap_or_else(|| {
        if spec.grid == Grid::Learner {
            "learner"
        } else {
            "envelope"
        }
        .to_string()
    });
    crate::check_name(&name)?;
    if !(0.0..=3600.0).contains(&a.slow) {
        return Err(BadInput(format!("--slow: want 0 to 3600 seconds, not {}", a.slow)).into());
    }
    let runs = envelope::shard(envelope::runs(&spec), a.shard);
    if a.list {
        // Every file is written and checked where nothing is left behind.
        let scratch = tempfile::tempdir().context("create a temporary directory")?;
        let files = envelope::prepare(&spec, &runs, scratch.path())?;
        for (r, _) in &files {
            let done = a
                .out
                .as_deref()
                .is_some_and(|o| envelope::done(o, &r.name()));
            println!(
                "{}\t{}\t{}\t{}{}",
                r.name(),
                r.cell.variant().name,
                r.rep,
                r.seed,
                if done { "\tdone" } else { "" }
            );
        }
        return Ok(0);
    }
    let out = match &a.out {
        Some(d) => d.clone(),
        None => cpmlab_model::state::runs_dir(state_root).join(format!(
            "envelope-{}",
            cpmlab_lab::migrate::flow::now_rfc3339().replace(':', "")
        )),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    let out = out.canonicalize()?;
    // Every run's file is written and checked before a lab exists.
    let files = envelope::prepare(&spec, &runs, &out.join("scenarios"))?;
    let todo = files
        .iter()
        .filter(|(r, _)| !envelope::done(&out, &r.name()))
        .count();
    eprintln!(
        "envelope --grid {}: {} run(s){}, {todo} to do, into {}",
        spec.grid.name(),
        files.len(),
        a.shard.map(|s| format!(" (shard {s})")).unwrap_or_default(),
        out.display()
    );
    let provider =
        cpmlab_runner::provider::connect_for(cpmlab_model::state::ProviderKind::Docker).await?;
    let opts = cpmlab_runner::Options {
        exe: std::env::current_exe().context("find the cpmlab binary")?,
        state_root: state_root.to_path_buf(),
        report_dir: out.join("runs"),
        keep: false,
        lab: name,
        provider: cpmlab_model::state::ProviderKind::Docker,
        kind_up_args: vec![],
    };
    std::fs::create_dir_all(&opts.report_dir)?;
    let progress = Progress::new(Mode::detect(false));
    let cancel = Cancel::default();
    let work = envelope::run(&*provider, &spec, &files, &out, &opts, &progress, &cancel);
    tokio::pin!(work);
    let ran = tokio::select! {
        r = &mut work => r?,
        _ = interrupted() => {
            progress.note("interrupted: stopping the run, tearing down, rendering what ran");
            cancel.cancel();
            work.await?
        }
    };
    let table = if spec.grid == Grid::Learner {
        out.join("learner.md")
    } else {
        out.join("envelope.md")
    };
    print!("{}", std::fs::read_to_string(&table).unwrap_or_default());
    println!("{}", table.display());
    if ran.interrupted || cancel.check().is_err() {
        return Ok(EXIT_INTERRUPTED);
    }
    if let Some(why) = ran.stopped {
        eprintln!("error: {why}\nenvelope: stopped; re-run with the same --out to resume");
        return Ok(EXIT_ENV);
    }
    Ok(0)
}
