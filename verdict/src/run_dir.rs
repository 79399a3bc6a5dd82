//! A run directory in, its judgement out: reads `records.ndjson`,
//! `events.ndjson`, `final.json`, `probes.json`, `criteria.json`,
//! `history.ndjson`, the etcd members' logs (`logs/`) and the observer's
//! samples (`cpu.ndjson`, `etcd.ndjson`, `gateways.ndjson`,
//! `endpoints.ndjson`), each by the one rule for input the verdict cannot
//! read (see `load`), and writes `verdict.json`, `junit.xml` and
//! `report.html` beside them. The records are never rewritten. Which
//! files a run must hold is its layout's (see `layout`).
//!
//! Run directories made before the records were kept whole may hold
//! `records.all.ndjson` (every record) beside a `records.ndjson` that lacks
//! the requests a hazard excused: the whole set is judged.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::context::{CpuSample, EtcdSample, CPU_FILE, ETCD_FILE};
use crate::criteria::{Criteria, CRITERIA_FILE};
use crate::error::{Error, Result};
use crate::history::{HistoryLine, HISTORY_FILE};
use crate::layout::{Present, LAYOUT_FILE, LOGS_DIR};
use crate::load::{read_json, read_lines, read_lines_if, Dropped};
use crate::record::{FinalRead, LabEvent, ProbePlan, Record, PROBES_FILE};
use crate::{election, Inputs, Verdict};

// The run directory's files are named by its layout.
pub use crate::layout::{
    ALL_RECORDS_FILE, ENDPOINTS_FILE, EVENTS_FILE, FINAL_FILE, GATEWAYS_FILE, RECORDS_FILE,
};

/// Everything a run directory holds for the verdict.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub records: Vec<Record>,
    pub events: Vec<LabEvent>,
    pub final_read: FinalRead,
    pub elections: Vec<election::Election>,
    pub plan: Option<ProbePlan>,
    pub listeners_closed: Vec<crate::drained_readyz::ListenerClosed>,
    /// What the directory held.
    pub present: Present,
    /// The machine's CPU (`cpu.ndjson`).
    pub cpu: Vec<CpuSample>,
    /// etcd's samples (`etcd.ndjson`).
    pub etcd: Vec<EtcdSample>,
}

impl Loaded {
    pub fn inputs(&self) -> Inputs<'_> {
        Inputs {
            records: &self.records,
            events: &self.events,
            final_read: &self.final_read,
            elections: &self.elections,
            plan: self.plan.as_ref(),
            listeners_closed: &self.listeners_closed,
            present: Some(&self.present),
            cpu: &self.cpu,
        }
    }
}

/// The records file to judge: the whole set.
pub fn records_path(run: &Path) -> PathBuf {
    let all = run.join(ALL_RECORDS_FILE);
    if all.is_file() {
        all
    } else {
        run.join(RECORDS_FILE)
    }
}

/// Refuses a directory that is not a run (exit 2 for the caller).
pub fn check(run: &Path) -> Result<()> {
    for f in [RECORDS_FILE, EVENTS_FILE] {
        let p = run.join(f);
        if !p.is_file() {
            return Err(Error::BadInput(format!(
                "{}: not a run directory: {} is missing",
                run.display(),
                p.display()
            )));
        }
    }
    Ok(())
}

/// A gateway's sample in `gateways.ndjson` (its counters are the
/// report's; a line must be a sample).
#[derive(Deserialize)]
struct GatewaySample {
    #[allow(dead_code)]
    at_unix_ms: f64,
    #[allow(dead_code)]
    seed: String,
}

/// A gateway's endpoint record in `endpoints.ndjson`.
#[derive(Deserialize)]
struct EndpointRecord {
    #[allow(dead_code)]
    at_unix_ms: f64,
    #[allow(dead_code)]
    seed: String,
    #[allow(dead_code)]
    event: String,
}

/// Reads a run directory: every file by the one rule (see `load`); a
/// layout newer than this cpmlab's is refused.
pub fn load(run: &Path) -> Result<Loaded> {
    check(run)?;
    let mut present = Present {
        layout: crate::layout::read(run)?,
        ..Present::default()
    };
    let mut found = |file: &str, dropped: Option<Dropped>| {
        present.files.insert(file.to_string());
        present.dropped.extend(dropped);
    };
    if run.join(LAYOUT_FILE).is_file() {
        found(LAYOUT_FILE, None);
    }
    let records = read_lines::<Record>(&records_path(run))?;
    found(RECORDS_FILE, records.dropped);
    let events = read_lines::<LabEvent>(&run.join(EVENTS_FILE))?;
    found(EVENTS_FILE, events.dropped);
    let final_read: Option<FinalRead> = read_json(&run.join(FINAL_FILE))?;
    if final_read.is_some() {
        found(FINAL_FILE, None);
    }
    let plan: Option<ProbePlan> = read_json(&run.join(PROBES_FILE))?;
    if plan.is_some() {
        found(PROBES_FILE, None);
    }
    if run.join(CRITERIA_FILE).is_file() {
        found(CRITERIA_FILE, None);
    }
    let history = read_lines_if::<HistoryLine>(&run.join(HISTORY_FILE))?;
    let cpu = read_lines_if::<CpuSample>(&run.join(CPU_FILE))?;
    let etcd = read_lines_if::<EtcdSample>(&run.join(ETCD_FILE))?;
    let gateways = read_lines_if::<GatewaySample>(&run.join(GATEWAYS_FILE))?;
    let endpoints = read_lines_if::<EndpointRecord>(&run.join(ENDPOINTS_FILE))?;
    for (file, dropped) in [
        (HISTORY_FILE, history.as_ref().map(|h| h.dropped.clone())),
        (CPU_FILE, cpu.as_ref().map(|h| h.dropped.clone())),
        (ETCD_FILE, etcd.as_ref().map(|h| h.dropped.clone())),
        (GATEWAYS_FILE, gateways.map(|h| h.dropped)),
        (ENDPOINTS_FILE, endpoints.map(|h| h.dropped)),
    ] {
        if let Some(d) = dropped {
            found(file, d);
        }
    }
    let (members, dropped) = crate::etcd_said::check_logs(run)?;
    if members > 0 {
        found(LOGS_DIR, None);
    }
    present.dropped.extend(dropped);
    let mut final_read = final_read.unwrap_or_default();
    // The history the rules read: the one watched during the run, where
    // it was, instead of one read back at the end.
    if let Some(h) = &history {
        let captured = crate::history::read(&h.items);
        match captured.history() {
            Ok(v) => {
                final_read.history = Some(v);
                final_read.history_error = None;
            }
            Err(e) => {
                final_read.history = None;
                final_read.history_error = Some(e);
            }
        }
        present.history = Some(captured);
    }
    Ok(Loaded {
        records: records.items,
        events: events.items,
        final_read,
        elections: election::read(run),
        plan,
        listeners_closed: crate::drained_readyz::read(run),
        present,
        cpu: cpu.map(|c| c.items).unwrap_or_default(),
        etcd: etcd.map(|c| c.items).unwrap_or_default(),
    })
}

/// The criteria the run directory keeps (`criteria.json`), else the
/// defaults: nothing excused, nothing accepted as not covered.
pub fn read_criteria(run: &Path) -> Result<Criteria> {
    let p = run.join(CRITERIA_FILE);
    let c: Criteria = read_json(&p)?.unwrap_or_default();
    c.check()
        .map_err(|(field, msg)| Error::BadInput(format!("{}: {field}: {msg}", p.display())))?;
    Ok(c)
}

/// Keeps the criteria a run is judged by in its directory.
pub fn write_criteria(run: &Path, c: &Criteria) -> Result<()> {
    write(
        &run.join(CRITERIA_FILE),
        serde_json::to_string_pretty(c).expect("criteria are JSON"),
    )
}

/// Keeps what the probes were told to do in the run directory.
pub fn write_plan(run: &Path, p: &ProbePlan) -> Result<()> {
    write(
        &run.join(PROBES_FILE),
        serde_json::to_string_pretty(p).expect("a plan is JSON"),
    )
}

fn write(path: &Path, text: impl AsRef<[u8]>) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

/// A report's title: the run's directory name (`<lab>-<time>`), or for a
/// scenario's run (kept as `<scenario>/run` by `cpmlab run`) the scenario's.
pub fn title(run: &Path) -> String {
    let name = |p: &Path| {
        p.file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    match run.parent() {
        Some(parent) if name(run) == "run" && !name(parent).is_empty() => {
            format!("cpmlab scenario {}", name(parent))
        }
        _ => format!("cpmlab run {}", name(run)),
    }
}

/// Judges a run directory against `criteria`; writes verdict.json,
/// junit.xml and report.html into it.
/// The files a judgement writes into a run directory.
pub const VERDICT_FILES: [&str; 3] = ["verdict.json", "junit.xml", "report.html"];

/// Removes an earlier judgement's files (for a run that cannot be judged
/// now: they must not go on saying what they said); the names removed.
pub fn forget(run: &Path) -> Vec<&'static str> {
    VERDICT_FILES
        .into_iter()
        .filter(|f| std::fs::remove_file(run.join(f)).is_ok())
        .collect()
}

pub fn judge(run: &Path, criteria: &Criteria) -> Result<Verdict> {
    let l = load(run)?;
    let v = crate::judge(&l.inputs(), criteria);
    write(
        &run.join("verdict.json"),
        serde_json::to_string_pretty(&v).expect("a verdict is JSON"),
    )?;
    write(&run.join("junit.xml"), crate::junit::junit(&v, "cpmlab"))?;
    let title = title(run);
    write(
        &run.join("report.html"),
        crate::report::html(
            &v,
            &l.records,
            &l.events,
            &l.etcd,
            &crate::etcd_said::read(run),
            &l.cpu,
            &title,
        ),
    )?;
    Ok(v)
}

/// `cpmlab verdict --explain-layout`: what the run directory holds and
/// lacks, in lines.
pub fn explain(run: &Path, criteria: &Criteria) -> Result<Vec<String>> {
    let l = load(run)?;
    let present = &l.present;
    let inputs = crate::layout::check(present, criteria, l.plan.as_ref(), &l.records, &l.events);
    let mut out = vec![format!(
        "{}: layout {}{} (this cpmlab knows layouts 1 to {})",
        run.display(),
        present.layout,
        if present.has(LAYOUT_FILE) {
            String::new()
        } else {
            format!(" ({LAYOUT_FILE} absent)")
        },
        crate::layout::LAYOUT
    )];
    let count = |what: &str, n: usize| format!("{n} {what}");
    let described: Vec<(&str, String)> = vec![
        (RECORDS_FILE, count("record(s)", l.records.len())),
        (
            EVENTS_FILE,
            format!(
                "{}; {}",
                count("lab event(s)", l.events.len()),
                crate::migration::describe_steps(&l.events)
            ),
        ),
        (
            FINAL_FILE,
            // The history the rules read is the capture's, where there is
            // one (see `history.ndjson` below).
            match (
                &l.final_read.counter,
                l.final_read
                    .history
                    .as_ref()
                    .filter(|_| present.history.is_none()),
            ) {
                (Some(c), Some(h)) => {
                    format!(
                        "the counter read back ({c}) and {} version(s) of its history",
                        h.len()
                    )
                }
                (Some(c), None) => format!("the counter read back ({c})"),
                (None, _) => "no counter read back".into(),
            },
        ),
        (
            PROBES_FILE,
            l.plan.as_ref().map_or(String::new(), |p| {
                format!(
                    "the lanes asked for: {}",
                    crate::coverage::planned_lanes(p)
                        .into_iter()
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }),
        ),
        (
            crate::criteria::CRITERIA_FILE,
            format!(
                "the migration's end: {}{}",
                criteria.migration.as_deref().unwrap_or("none stated"),
                if criteria.migration_steps.is_empty() {
                    String::new()
                } else {
                    format!(", its steps: {}", criteria.migration_steps.join(", "))
                }
            ),
        ),
        (
            HISTORY_FILE,
            present
                .history
                .as_ref()
                .map(|h| {
                    let mut s = h.summary();
                    if !h.gaps.is_empty() {
                        s.push_str(&format!("; lacking: {}", h.gaps.join("; ")));
                    }
                    s
                })
                .unwrap_or_default(),
        ),
        (LOGS_DIR, "the members' logs".into()),
        (crate::context::CPU_FILE, "the machine's CPU".into()),
        (crate::context::ETCD_FILE, "etcd's samples".into()),
        (
            crate::run_dir::GATEWAYS_FILE,
            "the gateways' counters".into(),
        ),
        (
            crate::run_dir::ENDPOINTS_FILE,
            "the gateways' endpoint records".into(),
        ),
    ];
    for (file, what) in described {
        let found = present.has(file);
        out.push(format!(
            "  {} {file}{}",
            if found { "found  " } else { "absent " },
            if found && !what.is_empty() {
                format!(": {what}")
            } else {
                String::new()
            }
        ));
    }
    for d in &inputs.dropped {
        out.push(format!("  dropped {d}"));
    }
    for m in &inputs.missing {
        out.push(format!(
            "  missing {} ({}): not covered: {}",
            m.file,
            m.why,
            m.rules.join(", ")
        ));
    }
    for k in &inputs.lacking {
        out.push(format!(
            "  lacking: {}: degraded: {}",
            k.what,
            k.rules.join(", ")
        ));
    }
    if inputs.missing.is_empty() && inputs.lacking.is_empty() {
        out.push("  nothing the rules need is missing".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgetting_removes_only_a_judgement_s_files() {
        let d = tempfile::tempdir().unwrap();
        for f in ["verdict.json", "report.html", "records.ndjson"] {
            std::fs::write(d.path().join(f), "x").unwrap();
        }
        assert_eq!(forget(d.path()), ["verdict.json", "report.html"]);
        assert!(d.path().join("records.ndjson").is_file());
        assert!(forget(d.path()).is_empty());
    }

    #[test]
    fn a_report_is_titled_by_its_run_or_its_scenario() {
        assert_eq!(
            title(Path::new("/s/runs/lab-20261124-080000")),
            "cpmlab run lab-20261124-080000"
        );
        assert_eq!(
            title(Path::new("/r/six-member-25ms/run")),
            "cpmlab scenario six-member-25ms"
        );
        assert_eq!(title(Path::new("run")), "cpmlab run run");
    }
}
