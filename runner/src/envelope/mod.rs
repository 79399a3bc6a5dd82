//! `cpmlab envelope`: the operating envelope and the learner grid, built on
//! `cpmlab compare`'s parts. A grid is a list of cells; each cell is a
//! compare [`Variant`] of a generated base scenario (the knobs `plan`,
//! `delay`, `jitter`, `loss`, `etcd` and `links.0.loss_by`), rendered and
//! checked by [`variants::render`] and [`variants::write`] like any
//! comparison's variant, run by [`crate::run_one`] and measured from its
//! run directory by compare's [`measures::of_run`] and the envelope's own
//! [`cell`] measures. The tables ([`table`]) are rendered from what the
//! runs recorded, so an interrupted or sharded grid renders what it holds.
//!
//! The grids:
//! - `full`, `coarse`, `quick`: each plan across one-way delay × jitter ×
//!   loss between the seeds, under a fixed write load, expecting the
//!   migration to complete (`envelope.md`, `envelope.html`,
//!   `envelope.json`);
//! - `sizes`: the same at a few shoot database sizes, filled before the run;
//! - `learner`: does the five-member plan's join complete before its
//!   timeout? Loss × one-way delay × etcd version × who drops the packets
//!   (the delay line, `shaper`, or the router's kernel, `kernel`; one
//!   column at 0 % where they cannot differ), three runs a cell, each with
//!   its own delay-line seed. A run ends with the join step: a joined run's
//!   migration stops there (`stop_after`), one that did not join aborts
//!   (`learner.md`, `learner.json`).
//!
//! Repetition `r` of every cell runs with seed `S + r - 1` (`--seed S`):
//! every cell of a repetition meets the same packet fates, as in compare.
//! A run whose `result.json` holds a verdict is not run again, so a grid
//! resumes where it stopped (the same `--out`).

pub mod cell;
pub mod table;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::compare::variants::{self, Axis, Variant};
use crate::errors::{BadInput, Cancel};
use crate::link::profile::LossBy;
use crate::migrate::membership::Plan;
use crate::progress::Progress;
use crate::provider::Provider;
use crate::scenario::{Scenario, ScenarioFile};
use crate::shard::Shard;

/// The grids `--grid` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Grid {
    Full,
    Coarse,
    Quick,
    Sizes,
    Learner,
}

/// A grid's own axes: one-way delays (ms), jitters (ms), losses (% each
/// way) and shoot database sizes (`0`: no fill).
#[derive(Debug, Clone, PartialEq)]
pub struct Axes {
    pub delays_ms: Vec<f64>,
    pub jitters_ms: Vec<f64>,
    pub losses_pct: Vec<f64>,
    pub sizes: Vec<String>,
}

impl Grid {
    pub const ALL: [Grid; 5] = [
        Grid::Full,
        Grid::Coarse,
        Grid::Quick,
        Grid::Sizes,
        Grid::Learner,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Grid::Full => "full",
            Grid::Coarse => "coarse",
            Grid::Quick => "quick",
            Grid::Sizes => "sizes",
            Grid::Learner => "learner",
        }
    }

    pub fn axes(self) -> Axes {
        let (d, j, l, s): (&[f64], &[f64], &[f64], &[&str]) = match self {
            Grid::Full => (
                &[10., 25., 50., 75., 90.],
                &[0., 5., 10.],
                &[0., 0.5, 1., 2.],
                &["0"],
            ),
            Grid::Coarse => (&[25., 50., 90.], &[0., 10.], &[0., 1., 2.], &["0"]),
            Grid::Quick => (&[25., 50., 90.], &[0.], &[0., 1.], &["0"]),
            Grid::Sizes => (&[25., 50.], &[0.], &[0.], &["10MiB", "500MiB", "2GiB"]),
            Grid::Learner => (
                &[10., 30., 60., 89.],
                &[0.],
                &[0., 0.05, 0.1, 0.2, 0.5],
                &["0"],
            ),
        };
        Axes {
            delays_ms: d.to_vec(),
            jitters_ms: j.to_vec(),
            losses_pct: l.to_vec(),
            sizes: s.iter().map(|x| x.to_string()).collect(),
        }
    }
}

/// The plans the envelope grids run by default.
pub const PLANS: [Plan; 2] = [Plan::SixMember, Plan::FiveMember];
/// The learner grid's etcd versions, by default.
pub const LEARNER_VERSIONS: [&str; 2] = ["3.4", "3.5"];
/// Runs a learner cell, by default.
pub const LEARNER_REPEAT: u32 = 3;
/// The join timeout of the envelope grids and of the learner grid.
pub const JOIN_TIMEOUT: &str = "90s";
pub const LEARNER_JOIN_TIMEOUT: &str = "120s";

/// What was asked on the command line; `None`: the grid's own.
#[derive(Debug, Clone)]
pub struct Asked {
    pub grid: Grid,
    pub plans: Option<Vec<Plan>>,
    pub delays: Option<String>,
    pub jitters: Option<String>,
    pub losses: Option<String>,
    pub sizes: Option<String>,
    pub versions: Option<String>,
    pub loss_by: Option<Vec<LossBy>>,
    pub repeat: Option<u32>,
    pub write_rate: u32,
    pub timeout: String,
    pub slow_s: f64,
    pub ttl: Option<u32>,
    pub shutdown_delay: Option<String>,
    pub join_timeout: Option<String>,
    pub seed: u64,
}

/// A grid with every setting decided: `grid.json` in the output
/// directory, which the tables are rendered from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    pub grid: Grid,
    #[serde(default)]
    pub plans: Vec<Plan>,
    pub delays_ms: Vec<f64>,
    #[serde(default = "no_jitter")]
    pub jitters_ms: Vec<f64>,
    pub losses_pct: Vec<f64>,
    #[serde(default = "no_fill")]
    pub sizes: Vec<String>,
    #[serde(default)]
    pub versions: Vec<String>,
    #[serde(default)]
    pub loss_by: Vec<LossBy>,
    #[serde(default = "one")]
    pub repeat: u32,
    pub write_rate: u32,
    pub timeout: String,
    #[serde(default = "two_s")]
    pub slow_s: f64,
    #[serde(default)]
    pub ttl: Option<u32>,
    #[serde(default)]
    pub shutdown_delay: Option<String>,
    pub join_timeout: String,
    pub seed: u64,
}

fn no_jitter() -> Vec<f64> {
    vec![0.0]
}
fn no_fill() -> Vec<String> {
    vec!["0".into()]
}
fn one() -> u32 {
    1
}
fn two_s() -> f64 {
    2.0
}

/// `25,60` as numbers (ms or %), each non-negative.
fn numbers(flag: &str, text: &str) -> Result<Vec<f64>, BadInput> {
    let v: Result<Vec<f64>, _> = text
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::parse::<f64>)
        .collect();
    match v {
        Ok(v) if !v.is_empty() && v.iter().all(|x| x.is_finite() && *x >= 0.0) => Ok(v),
        Ok(_) => Err(BadInput(format!(
            "{flag}: want one or more non-negative numbers: `{text}`"
        ))),
        Err(_) => Err(BadInput(format!(
            "{flag}: not a comma-separated list of numbers: `{text}`"
        ))),
    }
}

/// A database size as `fill.size` takes it (`0`: none).
fn is_size(s: &str) -> bool {
    if s == "0" {
        return true;
    }
    let Some(num) = ["KiB", "MiB", "GiB", "B"]
        .iter()
        .find_map(|u| s.strip_suffix(u))
    else {
        return false;
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, "0"));
    !int.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && !frac.is_empty()
        && frac.bytes().all(|b| b.is_ascii_digit())
}

impl Spec {
    /// The grid as asked, or bad input naming the flag.
    pub fn new(a: &Asked) -> Result<Spec, BadInput> {
        let own = a.grid.axes();
        let learner = a.grid == Grid::Learner;
        if !learner {
            for (flag, given) in [
                ("--etcd-versions", a.versions.is_some()),
                ("--loss-by", a.loss_by.is_some()),
                ("--repeat", a.repeat.is_some()),
            ] {
                if given {
                    return Err(BadInput(format!(
                        "{flag} belongs to --grid learner (an envelope cell is one run; `cpmlab compare` repeats a scenario)"
                    )));
                }
            }
        }
        let plans = match (&a.plans, learner) {
            (Some(_), true) => {
                return Err(BadInput(
                    "--plans belongs to the envelope grids (the learner grid runs the five-member plan)"
                        .into(),
                ))
            }
            (None, true) => vec![Plan::FiveMember],
            (Some(p), false) if p.is_empty() => {
                return Err(BadInput("--plans: want one or more plans".into()))
            }
            (Some(p), false) => p.clone(),
            (None, false) => PLANS.to_vec(),
        };
        let pick = |flag: &str, text: &Option<String>, own: &[f64]| match text {
            Some(t) => numbers(flag, t),
            None => Ok(own.to_vec()),
        };
        let delays_ms = pick("--delays", &a.delays, &own.delays_ms)?;
        let jitters_ms = pick("--jitters", &a.jitters, &own.jitters_ms)?;
        let losses_pct = pick("--losses", &a.losses, &own.losses_pct)?;
        let sizes = match &a.sizes {
            Some(t) => {
                let v: Vec<String> = t
                    .split(',')
                    .map(|x| x.trim().to_string())
                    .filter(|x| !x.is_empty())
                    .collect();
                if v.is_empty() || !v.iter().all(|x| is_size(x)) {
                    return Err(BadInput(format!(
                        "--sizes: want sizes like 0, 10MiB, 500MiB, 2GiB: `{t}`"
                    )));
                }
                v
            }
            None => own.sizes.clone(),
        };
        if learner && (jitters_ms != [0.0] || sizes != ["0"]) {
            return Err(BadInput(
                "--jitters and --sizes belong to the envelope grids (the learner grid has no jitter and an empty shoot)".into(),
            ));
        }
        let versions: Vec<String> = match (&a.versions, learner) {
            (Some(v), _) => v
                .split(',')
                .map(|x| x.trim().to_string())
                .filter(|x| !x.is_empty())
                .collect(),
            (None, true) => LEARNER_VERSIONS.iter().map(|v| v.to_string()).collect(),
            (None, false) => vec![],
        };
        if learner && (versions.is_empty() || !versions.iter().all(|v| v == "3.4" || v == "3.5")) {
            return Err(BadInput(format!(
                "--etcd-versions: want 3.4 and/or 3.5: `{}`",
                a.versions.as_deref().unwrap_or("")
            )));
        }
        let loss_by = match (&a.loss_by, learner) {
            (Some(v), _) if v.is_empty() => {
                return Err(BadInput("--loss-by: want shaper and/or kernel".into()))
            }
            (Some(v), _) => v.clone(),
            (None, true) => vec![LossBy::Shaper, LossBy::Kernel],
            (None, false) => vec![],
        };
        let repeat = match (a.repeat, learner) {
            (Some(0), _) => return Err(BadInput("--repeat: want 1 or more".into())),
            (Some(n), _) => n,
            (None, true) => LEARNER_REPEAT,
            (None, false) => 1,
        };
        if repeat > crate::compare::MAX_REPEAT {
            return Err(BadInput(format!(
                "--repeat: at most {}",
                crate::compare::MAX_REPEAT
            )));
        }
        for (name, list) in [
            ("--delays", &delays_ms),
            ("--jitters", &jitters_ms),
            ("--losses", &losses_pct),
        ] {
            let mut seen = list.clone();
            seen.sort_by(f64::total_cmp);
            seen.dedup();
            if seen.len() != list.len() {
                return Err(BadInput(format!("{name}: a value twice")));
            }
        }
        Ok(Spec {
            grid: a.grid,
            plans,
            delays_ms,
            jitters_ms,
            losses_pct,
            sizes,
            versions,
            loss_by,
            repeat,
            write_rate: a.write_rate,
            timeout: a.timeout.clone(),
            slow_s: a.slow_s,
            ttl: a.ttl,
            shutdown_delay: a.shutdown_delay.clone(),
            join_timeout: a.join_timeout.clone().unwrap_or_else(|| {
                if learner {
                    LEARNER_JOIN_TIMEOUT
                } else {
                    JOIN_TIMEOUT
                }
                .to_string()
            }),
            seed: a.seed,
        })
    }

    /// Reads `grid.json` back.
    pub fn read(out: &Path) -> Result<Spec> {
        let path = out.join("grid.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("read {} (is it a grid's directory?)", path.display()))?;
        serde_json::from_str(&text).map_err(|e| BadInput(format!("{}: {e}", path.display())).into())
    }

    pub fn write(&self, out: &Path) -> Result<()> {
        std::fs::write(
            out.join("grid.json"),
            serde_json::to_string_pretty(self)? + "\n",
        )?;
        Ok(())
    }
}

/// A number as the names and tables show it: `25`, `0.5`, `0.05`.
pub fn num(v: f64) -> String {
    format!("{v}")
}

fn plan_name(p: Plan) -> String {
    serde_json::to_value(p)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// One cell of a grid.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// An envelope point: a plan across one link profile, at a database size.
    Point {
        plan: Plan,
        delay_ms: f64,
        jitter_ms: f64,
        loss_pct: f64,
        size: String,
    },
    /// A learner cell: a join across one delay and loss, on an etcd
    /// version, with the packets dropped by the delay line or the kernel.
    Learner {
        version: String,
        delay_ms: f64,
        loss_pct: f64,
        loss_by: LossBy,
    },
}

/// One run: a cell's repetition.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub cell: Cell,
    pub rep: u32,
    pub seed: u64,
}

impl Cell {
    /// The point's name (`six-member-d25-j0-l0p5`, `...-s500mib` with a
    /// database size).
    pub fn point_name(&self) -> String {
        match self {
            Cell::Point {
                plan,
                delay_ms,
                jitter_ms,
                loss_pct,
                size,
            } => {
                let name = format!(
                    "{}-d{}-j{}-l{}",
                    plan_name(*plan),
                    num(*delay_ms),
                    num(*jitter_ms),
                    num(*loss_pct).replace('.', "p")
                );
                if size == "0" {
                    name
                } else {
                    format!("{name}-s{}", size.to_lowercase().replace('.', "p"))
                }
            }
            Cell::Learner {
                version,
                delay_ms,
                loss_pct,
                loss_by,
            } => format!(
                "learner-e{version}-d{}-l{}-{}",
                num(*delay_ms),
                num(*loss_pct),
                loss_by.flag()
            )
            .replace('.', "p"),
        }
    }

    /// The compare variant this cell is of the grid's base scenario.
    pub fn variant(&self) -> Variant {
        let settings: Vec<(String, String)> = match self {
            Cell::Point {
                plan,
                delay_ms,
                jitter_ms,
                loss_pct,
                ..
            } => vec![
                ("plan".into(), plan_name(*plan)),
                ("delay".into(), format!("{}ms", num(*delay_ms))),
                ("jitter".into(), format!("{}ms", num(*jitter_ms))),
                ("loss".into(), format!("{}%", num(*loss_pct))),
            ],
            Cell::Learner {
                version,
                delay_ms,
                loss_pct,
                loss_by,
            } => vec![
                ("etcd".into(), version.clone()),
                ("delay".into(), format!("{}ms", num(*delay_ms))),
                ("loss".into(), format!("{}%", num(*loss_pct))),
                ("links.0.loss_by".into(), loss_by.flag().into()),
            ],
        };
        Variant {
            name: settings
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(","),
            settings,
        }
    }
}

impl Run {
    /// The run's scenario name (its file's stem and its run directory): the
    /// point's name, and for the learner grid its repetition (`-r2`).
    pub fn name(&self) -> String {
        match self.cell {
            Cell::Point { .. } => self.cell.point_name(),
            Cell::Learner { .. } => format!("{}-r{}", self.cell.point_name(), self.rep),
        }
    }
}

/// Every run of the grid, in a fixed order: the envelope by plan, size,
/// delay, jitter and loss; the learner grid by version, delay, loss, who
/// drops (at 0 % nobody does: one column, the delay line's) and
/// repetition.
pub fn runs(spec: &Spec) -> Vec<Run> {
    let mut out = Vec::new();
    let seed = |rep: u32| spec.seed.wrapping_add(rep as u64 - 1);
    match spec.grid {
        Grid::Learner => {
            for v in &spec.versions {
                for &d in &spec.delays_ms {
                    for &l in &spec.losses_pct {
                        let bys = if l > 0.0 {
                            spec.loss_by.clone()
                        } else {
                            vec![LossBy::Shaper]
                        };
                        for by in bys {
                            for rep in 1..=spec.repeat {
                                out.push(Run {
                                    cell: Cell::Learner {
                                        version: v.clone(),
                                        delay_ms: d,
                                        loss_pct: l,
                                        loss_by: by,
                                    },
                                    rep,
                                    seed: seed(rep),
                                });
                            }
                        }
                    }
                }
            }
        }
        _ => {
            for &plan in &spec.plans {
                for size in &spec.sizes {
                    for &d in &spec.delays_ms {
                        for &j in &spec.jitters_ms {
                            for &l in &spec.losses_pct {
                                out.push(Run {
                                    cell: Cell::Point {
                                        plan,
                                        delay_ms: d,
                                        jitter_ms: j,
                                        loss_pct: l,
                                        size: size.clone(),
                                    },
                                    rep: 1,
                                    seed: seed(1),
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// Shard K of N: every N-th run, starting at the K-th (the runs of a cell
/// spread over the shards, so each shard's share of slow cells is alike).
pub fn shard(runs: Vec<Run>, shard: Option<Shard>) -> Vec<Run> {
    let Some(s) = shard else { return runs };
    runs.into_iter()
        .enumerate()
        .filter(|(i, _)| i % s.count == s.index - 1)
        .map(|(_, r)| r)
        .collect()
}

/// The compare axes the grid's variants set (their knobs and values).
fn axes(spec: &Spec) -> Vec<Axis> {
    let list = |unit: &str, v: &[f64]| {
        v.iter()
            .map(|x| format!("{}{unit}", num(*x)))
            .collect::<Vec<_>>()
            .join(",")
    };
    let specs = match spec.grid {
        Grid::Learner => vec![
            format!("etcd={}", spec.versions.join(",")),
            format!("delay={}", list("ms", &spec.delays_ms)),
            format!("loss={}", list("%", &spec.losses_pct)),
            "links.0.loss_by=shaper,kernel".to_string(),
        ],
        _ => vec![
            format!(
                "plan={}",
                spec.plans
                    .iter()
                    .map(|p| plan_name(*p))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            format!("delay={}", list("ms", &spec.delays_ms)),
            format!("jitter={}", list("ms", &spec.jitters_ms)),
            format!("loss={}", list("%", &spec.losses_pct)),
        ],
    };
    specs
        .iter()
        .map(|s| variants::parse_axis(s).expect("the grid's own axes parse"))
        .collect()
}

/// The topology lines the grid sets (the rest is the topology's
/// defaults, which are Gardener's).
fn topology(spec: &Spec) -> String {
    let mut t = Vec::new();
    if let Some(ttl) = spec.ttl {
        t.push(format!("  dns: {{ttl: {ttl}}}\n"));
    }
    if let Some(d) = &spec.shutdown_delay {
        t.push(format!("  api: {{shutdown_delay: \"{d}\"}}\n"));
    }
    if t.is_empty() {
        "  {}\n".into()
    } else {
        t.concat()
    }
}

/// The base scenario a run's variant is of: the grid's probes, migration
/// and expectations, and for a point at a database size its fill (a shoot
/// of real size: 10 KiB ConfigMaps and Leases, so that a joiner of a large
/// database receives it as a snapshot, as in production).
fn base(spec: &Spec, run: &Run) -> Result<Scenario, BadInput> {
    let yaml = match &run.cell {
        Cell::Point {
            plan,
            delay_ms,
            jitter_ms,
            loss_pct,
            size,
        } => {
            let fill = if size == "0" {
                String::new()
            } else {
                format!("fill:\n  size: {size}\n  object_size: 10KiB\n  kinds: [configmaps, leases]\n")
            };
            format!(
                "description: \"{} plan, {} ms one-way, {} ms jitter, {} % loss, {} writes/s{}.\"\n\
                 topology:\n{}\
                 links:\n  - between: seed-a:seed-b\n\
                 probes:\n  timeout: \"{}\"\n  write_rate: {}\n\
                 migration:\n  plan: {}\n  join_timeout: \"{}\"\n\
                 expect:\n  migration: completed\n{fill}",
                plan_name(*plan),
                num(*delay_ms),
                num(*jitter_ms),
                num(*loss_pct),
                spec.write_rate,
                if size == "0" {
                    String::new()
                } else {
                    format!(", a shoot of {size}")
                },
                topology(spec),
                spec.timeout,
                spec.write_rate,
                plan_name(*plan),
                spec.join_timeout,
            )
        }
        Cell::Learner {
            version,
            delay_ms,
            loss_pct,
            loss_by,
        } => format!(
            "description: \"five-member join at {} ms one-way, {} % loss by the {}, etcd {version}, run {}.\"\n\
             topology:\n{}\
             links:\n  - between: seed-a:seed-b\n\
             probes:\n  timeout: \"{}\"\n  write_rate: {}\n\
             migration:\n  plan: five-member\n  join_timeout: \"{}\"\n\
             \x20 # Joined: the migration stops there (what follows the join is not\n\
             \x20 # this grid's question, and an abort is refused once the join is True).\n\
             \x20 stop_after: DestinationEtcdPeersJoined\n\
             timeline:\n\
             \x20 # Not joined in time: the destination members leave, the source\n\
             \x20 # serves (optional: a run that joined does not take this branch).\n\
             \x20 - when: {{step: DestinationEtcdPeersJoined, on: failed}}\n\
             \x20   migrate: abort\n\
             \x20   optional: true\n",
            num(*delay_ms),
            num(*loss_pct),
            loss_by.flag(),
            run.rep,
            topology(spec),
            spec.timeout,
            spec.write_rate,
            spec.join_timeout,
        ),
    };
    serde_saphyr::from_str(&yaml).map_err(|e| {
        BadInput(format!(
            "{}: the generated scenario does not parse (check --timeout, --join-timeout, --shutdown-delay): {e}",
            run.name()
        ))
    })
}

/// The run's scenario file's text: its header, then the base scenario
/// with the cell's variant set and the run's seed, as compare writes it.
pub fn scenario_yaml(spec: &Spec, run: &Run) -> Result<String, BadInput> {
    let b = base(spec, run)?;
    let yaml = variants::render(&b, &run.cell.variant(), &axes(spec), run.seed)?;
    Ok(format!(
        "# Generated by cpmlab envelope --grid {}: {}, repetition {} of {}.\n{yaml}",
        spec.grid.name(),
        run.cell.variant().name,
        run.rep,
        spec.repeat
    ))
}

/// Writes and checks every run's scenario file into `dir` before anything
/// runs: a setting the scenario format refuses is bad input, naming the
/// file, its line and field, and no lab is made.
pub fn prepare(spec: &Spec, runs: &[Run], dir: &Path) -> Result<Vec<(Run, ScenarioFile)>> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    runs.iter()
        .map(|r| {
            let yaml = scenario_yaml(spec, r)?;
            let sf = variants::write(dir, &format!("{}.yaml", r.name()), &yaml)?;
            Ok((r.clone(), sf))
        })
        .collect()
}

/// Where a grid's runs go: `<out>/runs/<name>/`.
pub fn run_dir(out: &Path, name: &str) -> PathBuf {
    out.join("runs").join(name)
}

/// Whether a run is done: its result.json says it got to an outcome (not
/// interrupted, and not stopped by the environment before its verdict).
/// A done run is not run again.
pub fn done(out: &Path, name: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(run_dir(out, name).join("result.json")) else {
        return false;
    };
    let Ok(r) = serde_json::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    r["incomplete"] != true && !(r["env_error"] == true && r["error"].is_string())
}

/// What the grid does after a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Go,
    /// The environment stopped the grid (exit 3; re-run to resume).
    /// `counted`: the run got to its verdict and its cell is rendered.
    Stop {
        counted: bool,
        why: String,
    },
}

/// Every run takes the same lab name, so a run whose `down` failed leaves
/// what the next `up` would meet: its cell counts (it got to its verdict),
/// and the grid stops. A run the environment kept from its verdict (an
/// `up` the host could not do) stops the grid uncounted, with the fix it
/// named.
pub fn next_after(r: &crate::ScenarioResult) -> Next {
    if !r.env_error {
        return Next::Go;
    }
    match (&r.error, &r.teardown_error) {
        (Some(e), _) => Next::Stop {
            counted: false,
            why: format!("{}: the run could not get to its verdict: {e}", r.name),
        },
        (None, Some(down)) => Next::Stop {
            counted: true,
            why: format!(
                "{}: the run got to its verdict (its cell is counted) but its lab's down failed: {down}",
                r.name
            ),
        },
        (None, None) => Next::Go,
    }
}

/// How a grid's invocation ended.
#[derive(Debug, Default)]
pub struct Ran {
    /// Runs this invocation ran.
    pub ran: usize,
    /// Why the environment stopped it (exit 3; re-run to resume).
    pub stopped: Option<String>,
    pub interrupted: bool,
}

/// Runs the prepared runs one lab at a time (skipping those done), writes
/// `grid.json` and the grid's time, and renders the tables.
pub async fn run(
    provider: &dyn Provider,
    spec: &Spec,
    files: &[(Run, ScenarioFile)],
    out: &Path,
    opts: &crate::Options,
    progress: &Progress,
    cancel: &Cancel,
) -> Result<Ran> {
    spec.write(out)?;
    let started = std::time::Instant::now();
    let mut ran = Ran::default();
    let total = files.len();
    for (i, (r, sf)) in files.iter().enumerate() {
        let name = r.name();
        if done(out, &name) {
            continue;
        }
        if cancel.check().is_err() {
            ran.interrupted = true;
            break;
        }
        let t0 = std::time::Instant::now();
        let label = format!("[{}/{total}]", i + 1);
        let result = crate::run_one(provider, sf, opts, progress, &label, cancel).await?;
        ran.ran += 1;
        let dir = run_dir(out, &name);
        let text = match &r.cell {
            Cell::Point { .. } => cell::point_text(cell::point(&dir, &name, spec.slow_s).as_ref()),
            Cell::Learner { .. } => cell::learner_text(cell::learner(&dir, &name).as_ref()),
        };
        progress.note(&format!(
            "{label} {name}: {text} ({:.0} s; {:.0} min so far)",
            t0.elapsed().as_secs_f64(),
            started.elapsed().as_secs_f64() / 60.0
        ));
        if result.incomplete {
            ran.interrupted = true;
            break;
        }
        if let Next::Stop { why, .. } = next_after(&result) {
            ran.stopped = Some(why);
            break;
        }
    }
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out.join("grid-time.txt"))?;
    writeln!(
        f,
        "{} points, {:.1} min this invocation",
        ran.ran,
        started.elapsed().as_secs_f64() / 60.0
    )?;
    table::render(out)?;
    Ok(ran)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn asked(grid: Grid) -> Asked {
        Asked {
            grid,
            plans: None,
            delays: None,
            jitters: None,
            losses: None,
            sizes: None,
            versions: None,
            loss_by: None,
            repeat: None,
            write_rate: 25,
            timeout: "10s".into(),
            slow_s: 2.0,
            ttl: None,
            shutdown_delay: None,
            join_timeout: None,
            seed: 2024,
        }
    }

    fn names(spec: &Spec) -> Vec<String> {
        runs(spec).iter().map(Run::name).collect()
    }

    #[test]
    fn the_full_grid_is_every_plan_across_delay_jitter_and_loss() {
        let s = Spec::new(&asked(Grid::Full)).unwrap();
        let n = names(&s);
        assert_eq!(n.len(), 2 * 5 * 3 * 4, "120 runs");
        assert_eq!(n[0], "six-member-d10-j0-l0");
        assert_eq!(n[1], "six-member-d10-j0-l0p5");
        assert_eq!(n[4], "six-member-d10-j5-l0");
        assert_eq!(n[60], "five-member-d10-j0-l0");
        assert_eq!(n.last().unwrap(), "five-member-d90-j10-l2");
        assert_eq!(s.join_timeout, "90s");
        // Every point of a repetition has the same seed.
        assert!(runs(&s).iter().all(|r| r.seed == 2024 && r.rep == 1));
        let c = Spec::new(&asked(Grid::Coarse)).unwrap();
        assert_eq!(runs(&c).len(), 36);
        let q = Spec::new(&asked(Grid::Quick)).unwrap();
        assert_eq!(
            names(&q)[..6],
            [
                "six-member-d25-j0-l0",
                "six-member-d25-j0-l1",
                "six-member-d50-j0-l0",
                "six-member-d50-j0-l1",
                "six-member-d90-j0-l0",
                "six-member-d90-j0-l1"
            ]
        );
    }

    #[test]
    fn the_sizes_grid_fills_each_point_s_shoot() {
        let s = Spec::new(&asked(Grid::Sizes)).unwrap();
        let n = names(&s);
        assert_eq!(
            n[..6],
            [
                "six-member-d25-j0-l0-s10mib",
                "six-member-d50-j0-l0-s10mib",
                "six-member-d25-j0-l0-s500mib",
                "six-member-d50-j0-l0-s500mib",
                "six-member-d25-j0-l0-s2gib",
                "six-member-d50-j0-l0-s2gib"
            ]
        );
        assert_eq!(n.len(), 12);
        let d = tempfile::tempdir().unwrap();
        let files = prepare(&s, &runs(&s)[2..3], d.path()).unwrap();
        let sf = &files[0].1;
        let fill = sf.scenario.fill.as_ref().expect("a shoot of 500 MiB");
        assert_eq!(fill.size, "500MiB");
        assert_eq!(fill.object_size.as_deref(), Some("10KiB"));
        assert_eq!(sf.scenario.links[0].delay.as_deref(), Some("25ms"));
        // Any grid at sizes; a size is checked.
        let mut a = asked(Grid::Quick);
        a.sizes = Some("0,500MiB".into());
        let q = Spec::new(&a).unwrap();
        assert_eq!(runs(&q).len(), 2 * 2 * 3 * 2);
        assert!(runs(&q)
            .iter()
            .any(|r| r.name() == "five-member-d90-j0-l1-s500mib"));
        a.sizes = Some("500MB".into());
        assert!(Spec::new(&a).unwrap_err().0.contains("--sizes"));
    }

    #[test]
    fn the_learner_grid_has_one_column_at_zero_loss_and_three_runs_a_cell() {
        let s = Spec::new(&asked(Grid::Learner)).unwrap();
        let all = runs(&s);
        // 2 versions × 4 delays × (1 + 4 × 2 columns) × 3 runs.
        assert_eq!(all.len(), 216);
        assert_eq!(all[0].name(), "learner-e3p4-d10-l0-shaper-r1");
        assert_eq!(all[2].name(), "learner-e3p4-d10-l0-shaper-r3");
        assert_eq!(all[3].name(), "learner-e3p4-d10-l0p05-shaper-r1");
        assert_eq!(all[6].name(), "learner-e3p4-d10-l0p05-kernel-r1");
        assert_eq!(
            all.last().unwrap().name(),
            "learner-e3p5-d89-l0p5-kernel-r3"
        );
        // Each repetition its own delay-line seed: 2024 and up.
        assert_eq!(
            all[..3].iter().map(|r| r.seed).collect::<Vec<_>>(),
            [2024, 2025, 2026]
        );
        assert_eq!(s.join_timeout, "120s");
        assert_eq!(s.plans, [Plan::FiveMember]);
        // The scenario: the cell's variant of the grid's base.
        let d = tempfile::tempdir().unwrap();
        let one = &all[7..8];
        let files = prepare(&s, one, d.path()).unwrap();
        let sc = &files[0].1.scenario;
        assert_eq!(sc.topology.etcd.version, "3.4");
        assert_eq!(sc.links[0].delay.as_deref(), Some("10ms"));
        assert_eq!(sc.links[0].loss.as_deref(), Some("0.05%"));
        assert_eq!(sc.links[0].loss_by, Some(LossBy::Kernel));
        assert_eq!(sc.seed, Some(2025));
        let m = sc.migration.as_ref().unwrap();
        assert_eq!(m.plan, Plan::FiveMember);
        assert_eq!(m.stop_after.as_deref(), Some("DestinationEtcdPeersJoined"));
        assert_eq!(m.join_timeout.as_deref(), Some("120s"));
        assert_eq!(sc.timeline.len(), 1);
        assert!(sc.timeline[0].optional);
        // One cell, as CI runs it.
        let mut a = asked(Grid::Learner);
        a.delays = Some("10".into());
        a.losses = Some("0.05".into());
        a.loss_by = Some(vec![LossBy::Kernel]);
        a.versions = Some("3.4".into());
        a.repeat = Some(1);
        let one = Spec::new(&a).unwrap();
        assert_eq!(names(&one), ["learner-e3p4-d10-l0p05-kernel-r1"]);
    }

    #[test]
    fn shards_split_the_runs_round_robin_and_cover_them_once() {
        let s = Spec::new(&asked(Grid::Learner)).unwrap();
        let all = names(&s);
        let mut seen = Vec::new();
        for k in 1..=8 {
            let mine: Vec<String> = shard(runs(&s), Some(format!("{k}/8").parse().unwrap()))
                .iter()
                .map(Run::name)
                .collect();
            assert_eq!(mine.len(), 27, "216 runs in eight shards");
            assert_eq!(mine[0], all[k - 1]);
            assert_eq!(mine[1], all[k - 1 + 8]);
            seen.extend(mine);
        }
        seen.sort();
        let mut want = all.clone();
        want.sort();
        assert_eq!(seen, want, "every run in exactly one shard");
        assert_eq!(shard(runs(&s), None).len(), 216);
    }

    #[test]
    fn flags_of_another_grid_and_bad_lists_are_bad_input() {
        let mut a = asked(Grid::Coarse);
        a.repeat = Some(3);
        assert!(Spec::new(&a).unwrap_err().0.contains("--repeat belongs"));
        let mut a = asked(Grid::Learner);
        a.plans = Some(vec![Plan::SixMember]);
        assert!(Spec::new(&a).unwrap_err().0.contains("--plans"));
        let mut a = asked(Grid::Learner);
        a.versions = Some("3.6".into());
        assert!(Spec::new(&a).unwrap_err().0.contains("--etcd-versions"));
        let mut a = asked(Grid::Quick);
        a.delays = Some("25,x".into());
        assert!(Spec::new(&a).unwrap_err().0.contains("--delays"));
        a.delays = Some("-1".into());
        assert!(Spec::new(&a).unwrap_err().0.contains("non-negative"));
        a.delays = Some("25,25".into());
        assert!(Spec::new(&a).unwrap_err().0.contains("twice"));
        // A value the scenario refuses is named with the file, before any lab.
        let mut a = asked(Grid::Quick);
        a.timeout = "ten seconds".into();
        let s = Spec::new(&a).unwrap();
        let d = tempfile::tempdir().unwrap();
        let e = prepare(&s, &runs(&s)[..1], d.path()).unwrap_err();
        assert!(format!("{e:#}").contains("six-member-d25-j0-l0"), "{e:#}");
    }

    #[test]
    fn the_grid_s_settings_reach_every_scenario() {
        let mut a = asked(Grid::Coarse);
        a.ttl = Some(10);
        a.shutdown_delay = Some("5s".into());
        a.write_rate = 40;
        let s = Spec::new(&a).unwrap();
        let d = tempfile::tempdir().unwrap();
        let all = runs(&s);
        let r = all
            .iter()
            .find(|r| r.name() == "five-member-d50-j10-l1")
            .unwrap();
        let files = prepare(&s, std::slice::from_ref(r), d.path()).unwrap();
        let sc = &files[0].1.scenario;
        assert_eq!(sc.topology.dns.ttl, 10);
        assert_eq!(sc.probes.write_rate, 40.0);
        assert_eq!(sc.links[0].jitter.as_deref(), Some("10ms"));
        assert_eq!(sc.links[0].loss.as_deref(), Some("1%"));
        assert_eq!(sc.migration.as_ref().unwrap().plan, Plan::FiveMember);
        assert_eq!(
            sc.expect.migration,
            Some(crate::scenario::MigrationOutcome::Completed)
        );
        let text = std::fs::read_to_string(&files[0].1.path).unwrap();
        assert!(text.starts_with("# Generated by cpmlab envelope --grid coarse: plan=five-member,delay=50ms,jitter=10ms,loss=1%"), "{text}");
        // grid.json round-trips.
        s.write(d.path()).unwrap();
        assert_eq!(Spec::read(d.path()).unwrap(), s);
    }

    fn result(json: serde_json::Value) -> crate::ScenarioResult {
        let mut base = serde_json::json!({"name": "c", "file": "c.yaml", "description": "", "seed": 1,
            "lab": "envelope", "passed": false, "incomplete": false, "error": null, "env_error": false,
            "wall_s": 1.0, "migration": null, "expectations": [], "timeline": [], "dir": "/tmp/c", "report": null});
        for (k, v) in json.as_object().unwrap() {
            base[k] = v.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn a_failed_down_counts_its_cell_and_stops_the_grid_and_an_up_the_host_refused_stops_it_uncounted(
    ) {
        assert_eq!(next_after(&result(serde_json::json!({}))), Next::Go);
        // A failed run that got to its verdict is a cell like any other.
        assert_eq!(
            next_after(&result(
                serde_json::json!({"error": "cpmlab migrate exited 1: boom"})
            )),
            Next::Go
        );
        let Next::Stop { counted, why } = next_after(&result(serde_json::json!({
            "env_error": true, "teardown_error": "lab left: restart dockerd"})))
        else {
            panic!("a failed down stops the grid")
        };
        assert!(counted);
        assert!(
            why.contains("its lab's down failed: lab left: restart dockerd"),
            "{why}"
        );
        let Next::Stop { counted, why } = next_after(&result(serde_json::json!({
            "env_error": true, "error": "cpmlab up: error: no etcd 3.5\n  fix: scripts/build-go etcd-3.5"})))
        else {
            panic!("an environment error stops the grid")
        };
        assert!(!counted);
        assert!(why.contains("fix: scripts/build-go etcd-3.5"), "{why}");
        // On a resume, a run the environment stopped runs again; the others not.
        let d = tempfile::tempdir().unwrap();
        for (name, r) in [
            (
                "counted",
                serde_json::json!({"env_error": true, "error": null, "teardown_error": "x"}),
            ),
            (
                "refused",
                serde_json::json!({"env_error": true, "error": "up failed"}),
            ),
            ("cut", serde_json::json!({"incomplete": true})),
        ] {
            std::fs::create_dir_all(run_dir(d.path(), name)).unwrap();
            std::fs::write(run_dir(d.path(), name).join("result.json"), r.to_string()).unwrap();
        }
        assert!(done(d.path(), "counted"));
        assert!(!done(d.path(), "refused"));
        assert!(!done(d.path(), "cut"));
        assert!(!done(d.path(), "never"));
    }
}
