//! `cpmlab compare`: one scenario under several variants (a plan or a knob),
//! each repeated, every run kept, and the differences stated with their
//! uncertainty. Repetition `i` of every variant runs with the same seed
//! (the delay line's loss and jitter draws), so variants meet the same
//! packet fates and any run replays from its scenario file.

pub mod measures;
pub mod page;
pub mod stats;
pub mod summary;
pub mod variants;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::errors::{BadInput, Cancel};
use crate::progress::Progress;
use crate::provider::Provider;
use measures::RunMeasures;
use variants::{Axis, Variant};

/// The most repetitions a comparison takes.
pub const MAX_REPEAT: u32 = 100;

/// What to compare.
#[derive(Debug, Clone)]
pub struct Plan {
    pub scenario: PathBuf,
    pub axes: Vec<Axis>,
    pub repeat: u32,
    /// Seeds derive from it; chosen and recorded when not given.
    pub seed: u64,
    pub out: PathBuf,
    /// The command as given, for the page.
    pub command: String,
}

/// A comparison's files: the scenarios it ran, and then the runs.
pub struct Prepared {
    pub variants: Vec<Variant>,
    /// (variant index, repetition, file), in run order: repetition by
    /// repetition, so that a stopped comparison has every variant alike.
    pub files: Vec<(usize, u32, crate::scenario::ScenarioFile)>,
}

/// Repetition `rep`'s seed (splitmix64 of the base and the repetition).
pub fn seed_of(base: u64, rep: u32) -> u64 {
    let mut z = base.wrapping_add(0x9E37_79B9_7F4A_7C15u64.wrapping_mul(rep as u64 + 1));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % 1_000_000_000
}

/// Writes and checks every variant's scenario files before anything runs.
pub fn prepare(plan: &Plan) -> Result<Prepared> {
    let base = crate::scenario::load(&plan.scenario)?;
    let stem = base.name();
    let variants = variants::cross(&plan.axes);
    let dir = plan.out.join("scenarios");
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let mut files = Vec::new();
    for rep in 1..=plan.repeat {
        for (vi, v) in variants.iter().enumerate() {
            let yaml = variants::render(&base.scenario, v, &plan.axes, seed_of(plan.seed, rep))?;
            let name = format!("{stem}--{}--r{rep}.yaml", v.slug());
            let header = format!(
                "# {stem}, variant {} (repetition {rep} of {}), written by cpmlab compare\n",
                v.name, plan.repeat
            );
            let sf = variants::write(&dir, &name, &(header + &yaml)).map_err(|e| {
                BadInput(format!("variant {} is not a valid scenario: {e:#}", v.name))
            })?;
            files.push((vi, rep, sf));
        }
    }
    Ok(Prepared { variants, files })
}

/// `compare.json`.
#[derive(Debug, Serialize)]
pub struct CompareFile<'a> {
    pub scenario: String,
    pub command: &'a str,
    pub base_seed: u64,
    pub repeat: u32,
    pub variants: Vec<String>,
    pub summary: &'a summary::Summary,
    pub runs: &'a [RunMeasures],
}

/// What a comparison ran.
pub struct Ran {
    /// Every run got to its verdict and its lab was removed.
    pub complete: bool,
    /// The environment's problems, a line each with the lab and its fix
    /// (a `down` that left objects, an `up` the host could not do): the
    /// command exits 3 with them.
    pub env_problems: Vec<String>,
}

/// Runs a prepared comparison and writes its results.
pub async fn run(
    provider: &dyn Provider,
    plan: &Plan,
    prepared: &Prepared,
    opts: &crate::Options,
    jobs: usize,
    progress: &Progress,
    cancel: &Cancel,
) -> Result<Ran> {
    let files: Vec<crate::scenario::ScenarioFile> =
        prepared.files.iter().map(|(_, _, f)| f.clone()).collect();
    let results = crate::run_all(provider, &files, opts, jobs, progress, cancel).await;
    let mut runs = Vec::new();
    let mut complete = results.len() == files.len();
    let mut env_problems = Vec::new();
    for (vi, rep, sf) in &prepared.files {
        let name = sf.name();
        let Some(r) = results.iter().find(|r| r.name == name) else {
            continue;
        };
        complete &= r.error.is_none() && !r.incomplete && r.teardown_error.is_none();
        if r.env_error {
            let what = match (&r.error, &r.teardown_error) {
                (Some(e), _) => e.clone(),
                (None, Some(e)) => format!("down failed: {e}"),
                (None, None) => "the environment failed".into(),
            };
            env_problems.push(format!("{} (lab {}): {what}", r.name, r.lab));
        }
        let mut m = measures::of_run(&opts.report_dir.join(&name));
        m.variant = prepared.variants[*vi].name.clone();
        m.repetition = *rep;
        m.dir = format!("runs/{name}");
        runs.push(m);
    }
    write(plan, prepared, &runs)?;
    Ok(Ran {
        complete,
        env_problems,
    })
}

/// Writes compare.json, compare.html and compare.md from the runs.
pub fn write(plan: &Plan, prepared: &Prepared, runs: &[RunMeasures]) -> Result<()> {
    let order: Vec<String> = prepared.variants.iter().map(|v| v.name.clone()).collect();
    let s = summary::summarise(&order, runs);
    let title = format!(
        "cpmlab compare: {}",
        plan.scenario
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let file = CompareFile {
        scenario: plan.scenario.display().to_string(),
        command: &plan.command,
        base_seed: plan.seed,
        repeat: plan.repeat,
        variants: order,
        summary: &s,
        runs,
    };
    let out = &plan.out;
    std::fs::write(
        out.join("compare.json"),
        serde_json::to_string_pretty(&file)? + "\n",
    )?;
    std::fs::write(
        out.join("compare.html"),
        page::html(&title, &s, runs, &plan.command),
    )?;
    std::fs::write(
        out.join("compare.md"),
        page::markdown(&title, &s, &plan.command),
    )?;
    Ok(())
}

/// Reads a comparison directory's runs back (to render it again).
pub fn read_runs(dir: &Path) -> Result<Vec<RunMeasures>> {
    #[derive(serde::Deserialize)]
    struct File {
        runs: Vec<RunMeasures>,
    }
    let f: File = serde_json::from_slice(&std::fs::read(dir.join("compare.json"))?)?;
    Ok(f.runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_of_a_repetition_gets_the_same_seed_and_repetitions_differ() {
        let s: Vec<u64> = (1..=5).map(|r| seed_of(42, r)).collect();
        let mut uniq = s.clone();
        uniq.dedup();
        assert_eq!(uniq.len(), 5);
        assert_eq!(seed_of(42, 3), s[2]);
    }

    #[test]
    fn prepare_writes_a_checked_file_per_variant_and_repetition() {
        let d = tempfile::tempdir().unwrap();
        let scenario = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/scenarios/six-member-25ms.yaml");
        let plan = Plan {
            scenario,
            axes: vec![variants::parse_axis("plan=six-member,five-member").unwrap()],
            repeat: 2,
            seed: 7,
            out: d.path().to_path_buf(),
            command: "cpmlab compare ...".into(),
        };
        let p = prepare(&plan).unwrap();
        assert_eq!(p.files.len(), 4);
        let (vi, rep, sf) = &p.files[1];
        assert_eq!((*vi, *rep), (1, 1));
        assert_eq!(sf.name(), "six-member-25ms--plan-five-member--r1");
        assert_eq!(sf.scenario.seed, Some(seed_of(7, 1)));
        assert_eq!(
            sf.scenario.migration.as_ref().unwrap().plan,
            crate::migrate::membership::Plan::FiveMember
        );
        // The GEP's 3-member alternative is a plan like the others.
        let rolling = Plan {
            axes: vec![variants::parse_axis("plan=six-member,rolling").unwrap()],
            repeat: 1,
            out: d.path().join("rolling"),
            ..plan.clone()
        };
        let p = prepare(&rolling).unwrap();
        assert_eq!(
            p.files[1].2.scenario.migration.as_ref().unwrap().plan,
            crate::migrate::membership::Plan::Rolling
        );
        // So are the GEP's etcd Mirror Maker alternative and GEP-7's classic.
        let others = Plan {
            axes: vec![variants::parse_axis("plan=mirror,classic").unwrap()],
            repeat: 1,
            out: d.path().join("others"),
            ..plan.clone()
        };
        let p = prepare(&others).unwrap();
        assert_eq!(
            p.files[0].2.scenario.migration.as_ref().unwrap().plan,
            crate::migrate::membership::Plan::Mirror
        );
        // A value the scenario does not take is bad input, before any run.
        let bad = Plan {
            axes: vec![variants::parse_axis("plan=seven-member").unwrap()],
            ..plan
        };
        let e = prepare(&bad).err().unwrap();
        assert!(format!("{e:#}").contains("plan=seven-member"), "{e:#}");
    }
}
