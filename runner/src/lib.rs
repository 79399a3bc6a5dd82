//! `cpmlab run`: executes scenario files. For each one: up (or reuse a kept
//! lab), links, probes, the timeline and the migration, the probes' stop,
//! the verdict (judged once, from the records as they were written, by the
//! criteria the scenario declares: its limits, stall bound, hazard budgets
//! and accepted gaps), the expectations, and down. Everything the run produced lands in the scenario's directory
//! under the report directory: the scenario as run (with its seed), the
//! commands' output (`run.log`), the probe run (`run/`: records, events,
//! container logs, verdict, report), the lab's state and `result.json`.

// The lower crates' modules under the paths the runner's code names.
use cpmlab_core::{cpu, errors, etcd, go_parts, kernel, progress};
use cpmlab_lab::{fill, gateway, link, migrate, status};
use cpmlab_model::{state, topology, yaml_file};
use cpmlab_probe as probe;
use cpmlab_verdict as verdict;

pub mod actions;
pub mod child;
pub mod expect;
pub mod handoff;
pub mod kubelet;
pub mod observe;
pub mod settings;
pub mod shard;
pub mod summary;
pub mod watch;

pub mod compare;
pub mod doctor;
pub mod envelope;
pub mod provider;
pub mod scenario;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::errors::Cancel;
use crate::migrate::record::Driver;
use crate::progress::Progress;
use crate::provider::Provider;
use crate::scenario::check::{Action, Trigger};
use crate::scenario::{MigrateAction, MigrationOutcome, ScenarioFile};
use crate::state::LabDir;
use child::{args, Cpmlab};
use expect::{EndObserved, EntryResult, ExpectResult};

/// How scenarios are run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The cpmlab binary the commands run (this one).
    pub exe: PathBuf,
    pub state_root: PathBuf,
    pub report_dir: PathBuf,
    /// Leave the lab up after each scenario (and reuse a lab that is up).
    pub keep: bool,
    /// The lab's name (with --jobs > 1, `<name>-<job>`).
    pub lab: String,
    /// The form of each scenario's lab (`up --provider`).
    pub provider: crate::state::ProviderKind,
    /// More of `up`'s flags for the kind form (`--with-etcd-druid`, ...).
    pub kind_up_args: Vec<String>,
}

/// One scenario's outcome: `result.json` in its directory (read back by
/// `cpmlab report merge`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioResult {
    pub name: String,
    pub file: PathBuf,
    pub description: String,
    pub seed: u64,
    pub lab: String,
    pub passed: bool,
    /// Interrupted: the report covers what ran.
    pub incomplete: bool,
    /// The run could not get to its expectations (e.g. `up` failed).
    pub error: Option<String>,
    /// The error was the environment's (exit 3); also set when `down`
    /// failed (`teardown_error`).
    pub env_error: bool,
    /// `down` failed after the run: the lab's objects it names are left
    /// (what `down` said, with its fix). The run's verdict and
    /// expectations stand; the command exits 3 all the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teardown_error: Option<String>,
    pub wall_s: f64,
    /// Of `wall_s`, the time spent bringing the lab up and down: what
    /// reusing a lab between runs would save at most.
    #[serde(default)]
    pub lab_s: f64,
    /// What ran: the exposure, the TTL, the migration's order, plan and
    /// handovers (`None`: a result.json from before).
    #[serde(default)]
    pub settings: Option<settings::RunSettings>,
    /// The factor the scenario's limits about time were stretched by
    /// (`None`: 1, as declared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_factor: Option<f64>,
    pub migration: Option<String>,
    /// The verdict: `passed`, `passed-with-known-hazards` or `failed`
    /// (`None`: the run got no verdict, or a result.json from before).
    #[serde(default)]
    pub verdict: Option<crate::verdict::Status>,
    /// Requests, and failed requests, as recorded (excused ones included).
    #[serde(default)]
    pub requests: u64,
    #[serde(default)]
    pub failed_requests: u64,
    /// Of the failed: excused by the known hazards the scenario accepts.
    #[serde(default)]
    pub excused: u64,
    /// Excused per hazard.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub excused_by_hazard: std::collections::BTreeMap<String, u64>,
    /// "observed X, excused Y, budget Z" when anything was excused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excused_summary: Option<String>,
    /// Writes acknowledged after the last step ended (`None`: no step).
    #[serde(default)]
    pub writes_after_last_step: Option<u64>,
    pub expectations: Vec<ExpectResult>,
    /// Why requests failed, one line per mechanism, and the watches that
    /// went silent (the verdict's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub why_failed: Vec<String>,
    /// The verdict's failing rules with their messages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdict_reasons: Vec<String>,
    pub timeline: Vec<EntryResult>,
    /// The scenario's directory.
    pub dir: PathBuf,
    /// Its report, relative to the report directory.
    pub report: Option<String>,
    /// When it failed: the worst warnings in the etcd members' logs, in
    /// plain words (see `verdict::etcd_said`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub etcd_said: Vec<String>,
    /// The gardenlets' hand-offs between consecutive steps (from one
    /// step's end to the next one's start), and their sum.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handoffs: Vec<handoff::Handoff>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_s: Option<f64>,
}

impl ScenarioResult {
    pub fn failed_expectations(&self) -> Vec<&ExpectResult> {
        self.expectations.iter().filter(|e| !e.passed).collect()
    }
}

fn seed_of(sf: &ScenarioFile) -> u64 {
    sf.scenario.seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        // splitmix64 of the clock: any seed will do, it is recorded.
        let mut z = t.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % 1_000_000_000
    })
}

/// Runs one scenario to its result; never leaves its lab up unless asked.
pub async fn run_one(
    provider: &dyn Provider,
    sf: &ScenarioFile,
    opts: &Options,
    progress: &Progress,
    label: &str,
    cancel: &Cancel,
) -> Result<ScenarioResult> {
    let t0 = Instant::now();
    let name = sf.name();
    let sdir = opts.report_dir.join(&name);
    if sdir.exists() {
        std::fs::remove_dir_all(&sdir).with_context(|| format!("clear {}", sdir.display()))?;
    }
    std::fs::create_dir_all(&sdir).with_context(|| format!("create {}", sdir.display()))?;
    let seed = seed_of(sf);
    let mut as_run = sf.scenario.clone();
    as_run.seed = Some(seed);
    std::fs::copy(&sf.path, sdir.join("scenario.yaml"))?;
    std::fs::write(
        sdir.join("scenario-as-run.json"),
        serde_json::to_string_pretty(&as_run)?,
    )?;
    let cpm = Cpmlab::new(
        &opts.exe,
        &opts.state_root,
        &opts.lab,
        &sdir.join("run.log"),
    )?;
    cpm.log(&format!(
        "the lab's addresses: {}",
        cpmlab_core::lab_net::describe()
    ));
    let mut r = ScenarioResult {
        name: name.clone(),
        file: sf.path.clone(),
        description: sf.scenario.description.clone(),
        seed,
        lab: opts.lab.clone(),
        passed: false,
        incomplete: false,
        error: None,
        env_error: false,
        teardown_error: None,
        wall_s: 0.0,
        lab_s: 0.0,
        settings: Some(settings::RunSettings::of(&sf.scenario)),
        slow_factor: None,
        migration: None,
        verdict: None,
        requests: 0,
        failed_requests: 0,
        excused: 0,
        excused_by_hazard: Default::default(),
        excused_summary: None,
        writes_after_last_step: None,
        expectations: Vec::new(),
        why_failed: Vec::new(),
        verdict_reasons: Vec::new(),
        timeline: Vec::new(),
        dir: sdir.clone(),
        report: None,
        etcd_said: Vec::new(),
        handoffs: Vec::new(),
        handoff_s: None,
    };
    let step = progress.step(format!("{label} {name}"));
    let outcome = drive(provider, sf, opts, &cpm, &sdir, seed, &step, cancel, &mut r).await;
    if let Err(e) = outcome {
        r.env_error = crate::errors::exit_code(&e) == crate::errors::EXIT_ENV;
        r.error = Some(format!("{e:#}"));
    }
    r.incomplete = cancel.check().is_err();
    if !opts.keep || r.incomplete {
        step.detail("down");
        let t = Instant::now();
        let d = cpm.run(&args(&["down"]), &Cancel::default()).await;
        r.lab_s += t.elapsed().as_secs_f64();
        r.teardown_error = match d {
            Err(e) => Some(format!("{e:#}")),
            Ok(done) if !done.ok() => Some(done.said()),
            Ok(_) => None,
        };
        r.env_error |= r.teardown_error.is_some();
    }
    r.wall_s = t0.elapsed().as_secs_f64();
    r.passed = r.error.is_none()
        && !r.incomplete
        && !r.expectations.is_empty()
        && r.expectations.iter().all(|e| e.passed);
    if !r.passed {
        r.etcd_said = crate::verdict::etcd_said::read(&sdir.join("run"))
            .iter()
            .filter(|f| f.kind != crate::verdict::etcd_said::Kind::BecameLeader)
            .take(3)
            .map(|f| f.plain())
            .collect();
    }
    std::fs::write(sdir.join("result.json"), serde_json::to_string_pretty(&r)?)?;
    let failed = r.failed_expectations();
    let summary = match (&r.error, r.incomplete) {
        (_, true) => "incomplete (interrupted)".to_string(),
        (Some(e), _) => crate::errors::said(e),
        (None, _) if failed.is_empty() => format!("{} expectations held", r.expectations.len()),
        (None, _) => format!(
            "{} of {} expectations failed: {}",
            failed.len(),
            r.expectations.len(),
            failed
                .iter()
                .map(|e| e.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let summary = match &r.teardown_error {
        Some(e) => format!("{summary}; down failed: {e}"),
        None => summary,
    };
    if r.passed && r.teardown_error.is_none() {
        step.done_with(&summary);
    } else {
        for said in &r.etcd_said {
            progress.note(&format!("    etcd said: {said}"));
        }
        step.fail(&summary);
    }
    Ok(r)
}

/// Reuses a kept lab only when it is as the scenario would build it.
fn reusable(opts: &Options, sf: &ScenarioFile) -> bool {
    let dir = LabDir::new(&opts.state_root, &opts.lab);
    match dir.load() {
        Ok(s) => {
            opts.keep
                && s.provider == opts.provider
                && s.topology == sf.scenario.topology
                && s.migration.is_none()
                && s.probe_run.is_none()
                && s.members.iter().all(|m| m.seed == s.topology.source().name)
        }
        Err(_) => false,
    }
}

#[allow(clippy::too_many_arguments)]
async fn drive(
    provider: &dyn Provider,
    sf: &ScenarioFile,
    opts: &Options,
    cpm: &Cpmlab,
    sdir: &Path,
    seed: u64,
    step: &crate::progress::Step,
    cancel: &Cancel,
    r: &mut ScenarioResult,
) -> Result<()> {
    let s = &sf.scenario;
    let c = &sf.checked;
    let dir = LabDir::new(&opts.state_root, &opts.lab);
    let t = Instant::now();
    if dir.exists() && !reusable(opts, sf) {
        step.detail("down (a lab of that name is up)");
        // A `down` that fails leaves the lab half there: the run stops with
        // its error (and its fix), never goes on as if the lab were reused.
        let d = cpm.run(&args(&["down"]), cancel).await?;
        ensure_ok(&d, "down (a lab of that name was up)")?;
    }
    if !dir.exists() {
        step.detail("up");
        let topo = sdir.join("topology.json");
        std::fs::write(&topo, serde_json::to_string_pretty(&s.topology)?)?;
        let provider = match opts.provider {
            crate::state::ProviderKind::Docker => "docker",
            crate::state::ProviderKind::Kind => "kind",
        };
        let mut up = vec![
            "up",
            "--topology",
            &*topo.to_string_lossy(),
            "--provider",
            provider,
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
        if opts.provider == crate::state::ProviderKind::Kind {
            up.extend(opts.kind_up_args.iter().cloned());
        }
        let up: Vec<&str> = up.iter().map(String::as_str).collect();
        let d = cpm.run(&args(&up), cancel).await?;
        if d.code != 0 {
            // The kind form's steps' whole output (with the cluster's pods
            // and events where a wait failed) stays with the scenario.
            let failed = opts
                .state_root
                .join(format!("{}-kind-up-failed.log", opts.lab));
            if failed.is_file() {
                let _ = std::fs::copy(&failed, sdir.join("kind-up-failed.log"));
            }
        }
        ensure_ok(&d, "up")?;
    } else {
        cpm.run(&args(&["link", "clear"]), cancel).await?;
    }
    r.lab_s += t.elapsed().as_secs_f64();
    // Under emulation (or `--slow-factor`) the limits about time stretch;
    // the report's header says by how much and why.
    let (factor, platform) = slow_factor(&dir);
    let slowed = c.slowed(factor);
    let c = &slowed;
    r.slow_factor = (factor != 1.0).then_some(factor);
    if let Some(f) = &s.fill {
        step.detail(&format!("fill {}", f.size));
        let kinds = f.kinds().join(",");
        let d = cpm
            .run(
                &args(&[
                    "fill",
                    "--size",
                    &f.size,
                    "--object-size",
                    f.object_size(),
                    "--kinds",
                    &kinds,
                ]),
                cancel,
            )
            .await?;
        ensure_ok(&d, "fill")?;
    }
    step.detail("links");
    for (i, l) in s.links.iter().enumerate() {
        let a = actions::link_set_args(l, (i == 0).then_some(seed));
        let d = cpm.run(&a, cancel).await?;
        ensure_ok(&d, &format!("link set {}", l.between))?;
    }
    cancel.check()?;
    step.detail("probes");
    let mut p = s.probes.settings(&s.topology);
    let platform = match (lighter_load(&mut p, factor), platform) {
        (Some(load), Some(line)) => Some(format!("{line}; {load}")),
        (load, line) => line.or(load),
    };
    let d = cpm
        .run(
            &args(&[
                "probe",
                "start",
                "--rate",
                &p.rate.to_string(),
                "--timeout",
                &p.timeout,
                "--probes",
                &p.probes,
                "--modes",
                &p.modes,
                "--late-dns",
                &p.late_dns,
                "--write-rate",
                &p.write_rate.to_string(),
                "--write-bytes",
                &p.write_bytes.to_string(),
                "--candidates",
                &p.candidates,
                "--start-candidates",
                &p.start_candidates,
                "--lease-duration",
                &p.lease_duration,
                "--renew-deadline",
                &p.renew_deadline,
                "--retry-period",
                &p.retry_period,
            ]),
            cancel,
        )
        .await?;
    ensure_ok(&d, "probe start")?;
    let run_dir = PathBuf::from(d.stdout.trim());
    let started = Instant::now();
    if let Some(line) = &platform {
        crate::probe::run::record_settings(&dir, "platform", line);
    }
    // The header names the Envoy each gateway runs, as its admin says.
    if let Ok(st) = dir.load() {
        let line = observe::gateway_versions(provider, &st).await;
        crate::probe::run::record_settings(&dir, "gateways", &line);
    }
    crate::probe::run::note(
        &run_dir,
        &format!("scenario {} started (seed {seed})", sf.name()),
    )?;
    if let (Some(t), Some((file, _))) = (&s.trace, &c.trace) {
        let d = cpm
            .run(
                &args(&[
                    "link",
                    "replay",
                    &file.to_string_lossy(),
                    "--between",
                    &t.between,
                    "--seed",
                    &seed.to_string(),
                ]),
                cancel,
            )
            .await?;
        ensure_ok(&d, "link replay")?;
    }
    // etcd, the gateways and the link, sampled beside the probes.
    let observing = Cancel::default();
    let observer = observe::observe(
        provider,
        &opts.state_root,
        &opts.lab,
        run_dir.clone(),
        observing.clone(),
    );
    // The kubelet: killed members and replicas come back, with its backoff.
    let kubelet = kubelet::run(
        provider,
        LabDir::new(&opts.state_root, &opts.lab),
        observing.clone(),
    );
    let work = async {
        let r = timeline_and_migration(provider, sf, cpm, &dir, started, step, cancel).await;
        if cancel.check().is_ok() {
            step.detail("cooldown");
            sleep_unless(c.cooldown, cancel).await;
        }
        observing.cancel();
        r
    };
    let ((), (), (timeline, migration)) = tokio::join!(observer, kubelet, work);
    r.timeline = timeline;
    r.migration = match migration {
        // Stopped at its safe point by Ctrl-C: neither done nor failed.
        Some(m) if cancel.check().is_err() && m != MigrationOutcome::Completed => {
            Some("interrupted".to_string())
        }
        m => m.map(|m| m.as_str().to_string()),
    };
    if cancel.check().is_err() {
        let _ = crate::probe::run::note(&run_dir, "interrupted: the run is incomplete");
    }
    step.detail("probe stop");
    let d = cpm
        .run(&args(&["probe", "stop", "-o", "json"]), &Cancel::default())
        .await?;
    if d.code != 0 && d.code != 1 {
        ensure_ok(&d, "probe stop")?;
    }
    let kept = sdir.join("run");
    move_dir(&run_dir, &kept)?;
    r.report = Some(format!("{}/run/report.html", sf.name()));
    let verdict = judge::judge(&kept, s, c)?;
    r.verdict = Some(verdict.status);
    r.requests = verdict.overall.requests;
    r.failed_requests = verdict.overall.failed();
    r.excused = verdict.excuses.excused_count;
    r.excused_by_hazard = verdict
        .excuses
        .hazards
        .iter()
        .map(|h| (h.hazard.name().to_string(), h.excused))
        .collect();
    r.writes_after_last_step = verdict.coverage.writes_after_last_step;
    r.why_failed = verdict
        .mechanisms
        .iter()
        .map(|m| m.line.clone())
        .chain(verdict.silent_watches.iter().map(|s| s.line.clone()))
        .collect();
    r.verdict_reasons = verdict.reasons.clone();
    let events: Vec<verdict::record::LabEvent> =
        std::fs::read_to_string(kept.join("events.ndjson"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
    r.handoffs = handoff::of_events(&events);
    r.handoff_s = (!r.handoffs.is_empty()).then(|| handoff::total_s(&r.handoffs));
    r.excused_summary = (verdict.excuses.excused_count > 0)
        .then(|| crate::verdict::junit::observed_excused_budget(&verdict));
    if r.incomplete || cancel.check().is_err() {
        judge::mark_incomplete(&kept.join("report.html"));
    }
    let end = end_state(provider, opts).await;
    if let Ok(st) = dir.load() {
        let mut v = serde_json::to_value(&st)?;
        v["api_token"] = "(redacted)".into();
        v["dns"]["tsig_secret"] = "(redacted)".into();
        std::fs::write(
            sdir.join("lab-state.json"),
            serde_json::to_string_pretty(&v)?,
        )?;
    }
    r.expectations = expect::check(
        s,
        c,
        &expect::Observed {
            verdict: Some(&verdict),
            migration,
            end: end.as_ref(),
            timeline: &r.timeline,
            etcd_said: &crate::verdict::etcd_said::read(&kept),
        },
    );
    Ok(())
}

mod judge {
    //! The verdict a scenario is held to: judged once, from the records as
    //! they were written, by the criteria the scenario declares, which are
    //! kept in the run directory (`criteria.json`) so that `cpmlab verdict`
    //! judges the run the same way later.

    use std::path::Path;

    use anyhow::Result;

    use crate::scenario::{Checked, Scenario};
    use crate::verdict::{Criteria, Thresholds, Verdict};

    pub fn thresholds(s: &Scenario) -> Result<Thresholds> {
        let mut t = Thresholds::default();
        for (k, v) in &s.expect.slo {
            let ms = crate::link::profile::parse_duration_max(
                &format!("expect.slo.{k}"),
                v,
                std::time::Duration::from_secs(600),
            )?
            .as_secs_f64()
                * 1e3;
            match k.as_str() {
                "read_p99" => t.read_p99_ms = ms,
                "list_p99" => t.list_p99_ms = ms,
                "mutation_p99" => t.mutation_p99_ms = ms,
                "watch_delay_p99" => t.watch_delay_p99_ms = ms,
                _ => t.watch_grace_ms = ms,
            }
        }
        Ok(t)
    }

    /// What the scenario's `expect:` declares the run is judged by, its
    /// limits about time stretched by `c.slow_factor`.
    pub fn criteria(s: &Scenario, c: &Checked) -> Result<Criteria> {
        let mut k = Criteria {
            thresholds: thresholds(s)?,
            excuse: c.excuse.clone(),
            uncovered: s.expect.uncovered.clone(),
            migration: s.expect.migration.map(|m| m.as_str().to_string()),
            migration_steps: steps(s),
            ..Criteria::default()
        };
        if let Some(d) = c.stall {
            k.stall_ms = d.as_secs_f64() * 1e3;
        }
        if s.probes.leader_election.is_some() {
            let p = s.probes.settings(&s.topology).parse()?;
            crate::probe::run::lease_criteria(&mut k, &p.lease);
        }
        Ok(k.stretched(c.slow_factor))
    }

    /// The steps a completed migration of the scenario records, in order:
    /// the flow's conditions, or an external driver's one step; none when
    /// no completed migration is expected.
    pub fn steps(s: &Scenario) -> Vec<String> {
        let completed = s.expect.migration == Some(crate::scenario::MigrationOutcome::Completed);
        match &s.migration {
            Some(m) if completed && m.driver == crate::migrate::record::Driver::External => {
                vec![crate::migrate::external::EXTERNAL_STEP.to_string()]
            }
            Some(_) if completed => crate::migrate::conditions::STEPS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Keeps the scenario's criteria in the run and judges it by them.
    pub fn judge(run: &Path, s: &Scenario, c: &Checked) -> Result<Verdict> {
        crate::verdict::run_dir::write_criteria(run, &criteria(s, c)?)?;
        crate::probe::run::judge(run)
    }

    /// A banner at the top of a report whose run was interrupted.
    pub fn mark_incomplete(report: &Path) {
        if let Ok(html) = std::fs::read_to_string(report) {
            let banner = "<div style=\"background:#b00;color:#fff;padding:8px;font-weight:bold\">INCOMPLETE: the run was interrupted; this report covers what ran.</div>";
            let out = match html.find("<body>") {
                Some(i) => format!("{}{banner}{}", &html[..i + 6], &html[i + 6..]),
                None => format!("{banner}{html}"),
            };
            let _ = std::fs::write(report, out);
        }
    }
}

/// The factor on a scenario's limits about time for the lab in `dir`: its
/// emulation's (`CPMLAB_SLOW_FACTOR`, else the platform's default), else
/// `CPMLAB_SLOW_FACTOR`'s, else 1; and, where it is not 1 or the lab is
/// emulated, the report's header line saying so.
fn slow_factor(dir: &LabDir) -> (f64, Option<String>) {
    use cpmlab_model::platform::{fmt_factor, wait_factor, SLOW_FACTOR_ENV};
    let emulation = dir.load().ok().and_then(|st| st.emulation);
    let factor = wait_factor(emulation.as_ref());
    let line = match &emulation {
        Some(e) => Some(format!(
            "{}; the safety rules, coverage and failed-request counts as declared",
            e.summary()
        )),
        None if factor != 1.0 => Some(format!(
            "time limits x{} ({SLOW_FACTOR_ENV}); the safety rules, coverage and failed-request counts as declared",
            fmt_factor(factor)
        )),
        None => None,
    };
    (factor, line)
}

/// A lab `factor` times slower than this machine (emulation, or
/// `--slow-factor`) carries a load that much lighter: the probes' rate and
/// the write load divided by it, as the limits about time are multiplied.
/// Two cores emulating both seeds cannot carry the scenario's own load
/// (docs/arm64.md). Returns the header's words for it, if it changed.
fn lighter_load(p: &mut crate::probe::run::ProbeSettings, factor: f64) -> Option<String> {
    if factor <= 1.0 {
        return None;
    }
    let rate = p.rate;
    p.rate = rate / factor;
    p.write_rate /= factor;
    Some(format!(
        "the probes' rate {}/s a lane (the scenario's {}/s divided by the factor)",
        cpmlab_model::platform::fmt_factor(p.rate),
        cpmlab_model::platform::fmt_factor(rate)
    ))
}

/// A lab command's exit as the runner takes it: 3 (the environment) stays
/// a refusal with the fix the command named, 130 an interruption, any
/// other failure an error with the command's last word.
pub fn ensure_ok(d: &child::Done, what: &str) -> Result<()> {
    match d.code {
        0 => Ok(()),
        3 => Err(crate::errors::EnvNotReady::new(
            format!("cpmlab {what}: {}", d.error_line()),
            d.fix().unwrap_or_else(|| {
                "read run.log in the scenario's directory for what it said, and `cpmlab doctor` for what this host lacks".into()
            }),
        )
        .into()),
        130 => Err(crate::errors::Interrupted.into()),
        c => anyhow::bail!("cpmlab {what} exited {c}: {}", d.error_line()),
    }
}

async fn sleep_unless(d: Duration, cancel: &Cancel) {
    let t = Instant::now();
    while t.elapsed() < d && cancel.check().is_ok() {
        tokio::time::sleep(Duration::from_millis(100).min(d.saturating_sub(t.elapsed()))).await;
    }
}

/// Moves a directory (rename, else copy and remove).
fn move_dir(from: &Path, to: &Path) -> Result<()> {
    if std::fs::rename(from, to).is_ok() {
        return Ok(());
    }
    copy_dir(from, to)?;
    std::fs::remove_dir_all(from).with_context(|| format!("remove {}", from.display()))
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from).with_context(|| format!("read {}", from.display()))? {
        let e = e?;
        let dst = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &dst)?;
        } else {
            std::fs::copy(e.path(), &dst)?;
        }
    }
    Ok(())
}

/// The lab now: which seed serves, voters per seed, conditions.
async fn end_state(provider: &dyn Provider, opts: &Options) -> Option<EndObserved> {
    let st = crate::status::status(provider, &opts.state_root, &opts.lab)
        .await
        .ok()?;
    let mut e = EndObserved {
        serving: st
            .seeds
            .iter()
            .find(|s| st.dns.answer.contains(&s.gateway_ip))
            .map(|s| s.name.clone()),
        from_garden: st.garden.as_ref().map(|g| match g.conditions_from {
            "garden" => Ok(()),
            _ => Err(g
                .error
                .clone()
                .unwrap_or_else(|| "no migration recorded".into())),
        }),
        ..Default::default()
    };
    for s in &st.seeds {
        e.voters.insert(s.name.clone(), 0);
    }
    for m in st.etcd.voters() {
        *e.voters.entry(m.seed.clone()).or_default() += 1;
    }
    if let Some(m) = &st.migration {
        for c in &m.conditions {
            e.conditions
                .insert(c.kind.clone(), c.status.as_str().into());
        }
    }
    Some(e)
}

/// `cpmlab migrate` arguments for the scenario's migration.
fn migrate_args(m: &crate::scenario::MigrationSpec, resume: bool) -> Vec<String> {
    let mut a = args(&["migrate"]);
    if resume {
        a.push("--resume".into());
    } else {
        a.push("--plan".into());
        a.push(
            serde_json::to_value(m.plan)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
        );
        if m.driver == Driver::External {
            a.extend(args(&["--driver", "external", "--command"]));
            a.push(m.command.clone().unwrap_or_default());
            return a;
        }
        if m.allow_distant_regions {
            a.push("--allow-distant-regions".into());
        }
        a.extend(args(&["--leader-handover", m.leader_handover.as_str()]));
        a.extend(args(&["--order", m.order.name()]));
        a.extend(args(&["--gateway-handover", m.gateway_handover.as_str()]));
        if let Some(v) = &m.cleanup_before_api {
            a.extend(args(&["--cleanup-before-api", v]));
        }
        if let Some(v) = &m.max_rtt {
            a.extend(args(&["--max-rtt", v]));
        }
    }
    if m.force_shrink {
        a.push("--force-shrink-etcd".into());
    }
    if let Some(v) = &m.join_timeout {
        a.extend(args(&["--join-timeout", v]));
    }
    if let (Some(v), false) = (&m.stop_after, resume) {
        a.extend(args(&["--stop-after", v]));
    }
    a
}

type MigrateTask = tokio::task::JoinHandle<Result<child::Done>>;

/// Runs the timeline beside the migration until both are done (and the
/// scenario's duration is over); returns what each entry did and how the
/// migration ended.
async fn timeline_and_migration(
    provider: &dyn crate::provider::Provider,
    sf: &ScenarioFile,
    cpm: &Cpmlab,
    dir: &LabDir,
    started: Instant,
    step: &crate::progress::Step,
    cancel: &Cancel,
) -> (Vec<EntryResult>, Option<MigrationOutcome>) {
    let s = &sf.scenario;
    let c = &sf.checked;
    let hold: Vec<(String, String)> = s
        .migration
        .as_ref()
        .map(|m| m.hold.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let hold_env = hold
        .iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect::<Vec<_>>()
        .join(",");
    let spawn = |a: Vec<String>| -> MigrateTask {
        let cpm = cpm.clone();
        let cancel = cancel.clone();
        let env = hold_env.clone();
        tokio::spawn(async move {
            let e: Vec<(&str, &str)> = if env.is_empty() {
                vec![]
            } else {
                vec![("CPMLAB_TEST_HOLD", env.as_str())]
            };
            cpm.run_env(&a, &e, &cancel).await
        })
    };
    let mut results: Vec<EntryResult> = c
        .timeline
        .iter()
        .map(|p| EntryResult {
            index: p.index,
            action: p.action.describe(),
            at_s: None,
            detail: match &p.trigger {
                Trigger::At(t) => format!("at {:.1} s", t.as_secs_f64()),
                Trigger::Step { step, on, after } => {
                    format!("{step} {on:?} + {:.1} s", after.as_secs_f64())
                }
            },
            ok: false,
            scheduled: p.scheduled,
            optional: p.optional,
        })
        .collect();
    let mut pending: Vec<usize> = (0..c.timeline.len()).collect();
    let mut watch = watch::StepWatch::default();
    let mut task: Option<MigrateTask> = None;
    let mut started_mig = s.migration.is_none();
    let mut last_exit: Option<i32> = None;
    let mut ended_at: Option<Instant> = None;
    let mut aborted = false;
    let mut refused = false;
    // An abort runs beside the timeline (it waits for the destination's
    // gardenlet), so that what is due meanwhile (a heal) still fires.
    let mut abort: Option<(usize, MigrateTask)> = None;
    loop {
        if cancel.check().is_err() {
            break;
        }
        let now = Instant::now();
        let elapsed = now - started;
        if let Ok(st) = dir.load() {
            if let Some(m) = &st.migration {
                watch.observe(&m.conditions, now);
            }
        }
        if !started_mig && elapsed >= c.warmup {
            started_mig = true;
            step.detail("migrating");
            task = Some(spawn(migrate_args(
                s.migration.as_ref().expect("checked"),
                false,
            )));
        }
        if task.as_ref().is_some_and(|t| t.is_finished()) {
            let done = task.take().expect("some").await;
            let code = match done {
                Ok(Ok(d)) => {
                    // Refused: by gardener-apiserver's admission (exit 1)
                    // or by the lab's own checks (exit 2), nothing started.
                    if matches!(d.code, 1 | 2)
                        && last_exit.is_none()
                        && dir.load().is_ok_and(|s| s.migration.is_none())
                    {
                        refused = true;
                    }
                    d.code
                }
                _ => 1,
            };
            last_exit = Some(code);
            ended_at = Some(Instant::now());
            if let Ok(st) = dir.load() {
                if let Some(m) = &st.migration {
                    watch.observe(&m.conditions, Instant::now());
                }
            }
        }
        if abort.as_ref().is_some_and(|(_, t)| t.is_finished()) {
            let (i, t) = abort.take().expect("some");
            match t.await {
                Ok(Ok(d)) if d.ok() => {
                    aborted = true;
                    results[i].detail = "aborted".into();
                    results[i].ok = true;
                }
                Ok(Ok(d)) => results[i].detail = d.error_line(),
                Ok(Err(e)) => results[i].detail = format!("{e:#}"),
                Err(e) => results[i].detail = format!("{e}"),
            }
            cpm.log(&format!(
                "timeline[{}] {} ended: {}",
                c.timeline[i].index, results[i].action, results[i].detail
            ));
        }
        let mut fired = Vec::new();
        for &i in &pending {
            let p = &c.timeline[i];
            let due = match &p.trigger {
                Trigger::At(t) => elapsed >= *t,
                Trigger::Step { step, on, after } => watch
                    .fired_at(step, *on)
                    .is_some_and(|at| now >= at + *after),
            };
            if !due {
                continue;
            }
            let at_s = started.elapsed().as_secs_f64();
            match &p.action {
                Action::Migrate(m) => {
                    if task.is_some() {
                        continue; // wait for the running migration to end
                    }
                    let mig = s.migration.as_ref().expect("checked");
                    match m {
                        MigrateAction::Resume => {
                            task = Some(spawn(migrate_args(mig, true)));
                            ended_at = None;
                            results[i].detail = "migrate --resume started".into();
                            results[i].ok = true;
                        }
                        MigrateAction::Abort => {
                            if abort.is_some() {
                                continue; // one abort at a time
                            }
                            abort = Some((i, spawn(args(&["migrate", "--abort"]))));
                            results[i].detail = "migrate --abort started".into();
                        }
                    }
                }
                a => match actions::perform(provider, cpm, dir, a, cancel).await {
                    Ok(what) => {
                        results[i].detail = what;
                        results[i].ok = true;
                    }
                    Err(e) => results[i].detail = format!("{e:#}"),
                },
            }
            cpm.log(&format!(
                "timeline[{}] {} at {at_s:.1} s: {}",
                p.index, results[i].action, results[i].detail
            ));
            results[i].at_s = Some(at_s);
            fired.push(i);
        }
        pending.retain(|i| !fired.contains(i));
        // A step trigger whose event has not happened can fire only while a
        // migration runs (or just ended and its last conditions are being
        // read); one whose event happened is waited for until it is due (a
        // heal 1 s after a failure, behind an abort that took longer than
        // that, was left unfired).
        let settled = task.is_none()
            && abort.is_none()
            && started_mig
            && ended_at.is_none_or(|t| t.elapsed() > Duration::from_secs(1));
        let waiting = pending.iter().any(|&i| match &c.timeline[i].trigger {
            Trigger::At(_) => true,
            Trigger::Step { step, on, .. } => !settled || watch.fired_at(step, *on).is_some(),
        });
        if settled && !waiting && elapsed >= c.duration {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if let Some((i, t)) = abort.take() {
        if let Ok(Ok(d)) = t.await {
            aborted = d.ok();
            results[i].ok = d.ok();
            results[i].detail = if d.ok() {
                "aborted".into()
            } else {
                d.error_line()
            };
        }
    }
    if let Some(t) = task.take() {
        // Interrupted: the migration stops at its safe point.
        if let Ok(Ok(d)) = t.await {
            last_exit = Some(d.code);
        }
    }
    let outcome = s.migration.as_ref().map(|_| {
        let st = dir.load().ok();
        match st.as_ref().and_then(|s| s.migration.as_ref()) {
            Some(m) if m.completed() => MigrationOutcome::Completed,
            // The garden's abort went through (the lab's cached conditions
            // may still hold the failed join a gardenlet mirrored).
            _ if aborted => MigrationOutcome::Aborted,
            Some(m) if m.conditions.failed().is_some() => MigrationOutcome::Failed,
            Some(_) if last_exit == Some(0) => MigrationOutcome::Stopped,
            Some(_) => MigrationOutcome::Failed,
            None if refused => MigrationOutcome::Refused,
            None if last_exit == Some(0) => MigrationOutcome::Completed,
            None => MigrationOutcome::Failed,
        }
    });
    (results, outcome)
}

/// The lab scenario `i` of `n` runs in. Labs that are not kept get a
/// name of their own per scenario: dockerd 20.10 can leave a removed lab's
/// network half there, and the next `up` of the same name would meet it.
/// Kept labs are reused, one per job. Within the 20 characters a lab name
/// may have.
fn lab_for(base: &str, i: usize, n: usize, jobs: usize, keep: bool) -> String {
    let suffix = if !keep && n > 1 {
        format!("-{}", i + 1)
    } else if jobs > 1 {
        format!("-{}", i % jobs + 1)
    } else {
        return base.to_string();
    };
    let room = 20usize.saturating_sub(suffix.len());
    let stem = base[..base.len().min(room)].trim_end_matches('-');
    format!("{stem}{suffix}")
}

/// Runs every scenario, `jobs` at a time, each on its own lab.
pub async fn run_all(
    provider: &dyn Provider,
    files: &[ScenarioFile],
    opts: &Options,
    jobs: usize,
    progress: &Progress,
    cancel: &Cancel,
) -> Vec<ScenarioResult> {
    use futures_util::stream::{self, StreamExt};
    let n = files.len();
    let jobs = jobs.max(1);
    let results = stream::iter(files.iter().enumerate())
        .map(|(i, sf)| {
            let mut o = opts.clone();
            o.lab = lab_for(&opts.lab, i, n, jobs, opts.keep);
            async move {
                if cancel.check().is_err() {
                    return None;
                }
                let label = format!("[{}/{n}]", i + 1);
                match run_one(provider, sf, &o, progress, &label, cancel).await {
                    Ok(r) => Some(r),
                    Err(e) => {
                        progress.note(&format!("{label} {}: {e:#}", sf.name()));
                        None
                    }
                }
            }
        })
        .buffered(jobs)
        .collect::<Vec<_>>()
        .await;
    results.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::lab_for;

    /// A slowed lab's probes carry the scenario's load divided by the
    /// factor, and the header says so; at 1 nothing changes.
    #[test]
    fn a_slowed_lab_carries_a_lighter_load() {
        let spec: crate::scenario::ProbeSpec =
            serde_json::from_str(r#"{"rate": 20, "write_rate": 8}"#).unwrap();
        let topo = cpmlab_model::topology::Topology::default();
        let mut p = spec.settings(&topo);
        assert_eq!(super::lighter_load(&mut p, 1.0), None);
        assert_eq!((p.rate, p.write_rate), (20.0, 8.0));
        let line = super::lighter_load(&mut p, 4.0).unwrap();
        assert_eq!((p.rate, p.write_rate), (5.0, 2.0));
        assert!(line.contains("5/s") && line.contains("20/s"), "{line}");
    }

    #[test]
    fn a_slowed_scenario_is_judged_by_stretched_limits_about_time_only() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/scenarios/five-member-25ms-drain-gateway-in-place.yaml");
        let sf = crate::scenario::load(&path).unwrap();
        let c = sf.checked.slowed(4.0);
        assert_eq!(c.slow_factor, 4.0);
        assert_eq!(
            c.excuse, sf.checked.excuse,
            "the budgets stretch in the criteria"
        );
        let plain = super::judge::criteria(&sf.scenario, &sf.checked).unwrap();
        let k = super::judge::criteria(&sf.scenario, &c).unwrap();
        // The fixture's read SLO (3 s), the default list SLO, the stall.
        assert_eq!(plain.thresholds.read_p99_ms, 3_000.0);
        assert_eq!(k.thresholds.read_p99_ms, 12_000.0);
        assert_eq!(k.thresholds.list_p99_ms, 20_000.0);
        assert_eq!(k.stall_ms, 4.0 * plain.stall_ms);
        let ml = crate::verdict::Hazard::MoveLeader;
        assert_eq!(k.excuse[&ml].max_ms, 40_000.0);
        assert_eq!(k.excuse[&ml].max, plain.excuse[&ml].max);
        assert_eq!(k.coverage, plain.coverage);
        assert_eq!(sf.checked.slowed(1.0).slow_factor, 1.0, "1 changes nothing");
        // A fixture's downtime limits stretch; its failed-request counts
        // are the scenario's, not the checked limits'.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/scenarios/force-shrink.yaml");
        let sf = crate::scenario::load(&path).unwrap();
        assert!(!sf.checked.downtime.is_empty());
        let c = sf.checked.slowed(2.5);
        for (k, d) in &sf.checked.downtime {
            assert_eq!(c.downtime[k], d.mul_f64(2.5), "{k}");
        }
    }

    #[test]
    fn each_scenario_of_a_run_gets_its_own_lab_unless_labs_are_kept() {
        assert_eq!(lab_for("cmp", 0, 1, 1, false), "cmp");
        assert_eq!(lab_for("cmp", 0, 4, 1, false), "cmp-1");
        assert_eq!(lab_for("cmp", 3, 4, 1, false), "cmp-4");
        // Kept labs are reused per job.
        assert_eq!(lab_for("cmp", 3, 4, 1, true), "cmp");
        assert_eq!(lab_for("cmp", 3, 4, 2, true), "cmp-2");
        // Within 20 characters, no trailing `-` before the suffix.
        let long = lab_for("abcdefghijklmnopq-st", 11, 12, 1, false);
        assert_eq!(long, "abcdefghijklmnopq-12");
        assert!(long.len() <= 20);
        assert_eq!(
            lab_for("abcdefghijklmnop-rst", 11, 12, 1, false),
            "abcdefghijklmnop-12"
        );
    }
}
