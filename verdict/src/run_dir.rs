//! A run directory in, its judgement out: reads `records.ndjson`,
//! `events.ndjson`, `final.json`, `probes.json`, `criteria.json` and the
//! etcd members' logs (`logs/`), and writes `verdict.json`, `junit.xml`
//! and `report.html` beside them. The records are never rewritten.
//!
//! Run directories made before the records were kept whole may hold
//! `records.all.ndjson` (every record) beside a `records.ndjson` that lacks
//! the requests a hazard excused: the whole set is judged.

use std::path::{Path, PathBuf};

use crate::criteria::{Criteria, CRITERIA_FILE};
use crate::error::{Error, Result};
use crate::record::{FinalRead, LabEvent, ProbePlan, Record, PROBES_FILE};
use crate::{election, Inputs, Verdict};

/// What `probe stop` reads back after the run.
pub const FINAL_FILE: &str = "final.json";
pub const RECORDS_FILE: &str = "records.ndjson";
/// Every record, where an older cpmlab rewrote `records.ndjson`.
pub const ALL_RECORDS_FILE: &str = "records.all.ndjson";
pub const EVENTS_FILE: &str = "events.ndjson";

/// Everything a run directory holds for the verdict.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub records: Vec<Record>,
    pub events: Vec<LabEvent>,
    pub final_read: FinalRead,
    pub elections: Vec<election::Election>,
    pub plan: Option<ProbePlan>,
    pub listeners_closed: Vec<crate::drained_readyz::ListenerClosed>,
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

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| Error::BadInput(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("reading {}", path.display()), e)),
    }
}

/// Reads a run directory.
pub fn load(run: &Path) -> Result<Loaded> {
    check(run)?;
    Ok(Loaded {
        records: crate::load::read_records(&records_path(run))?,
        events: crate::load::read_events(&run.join(EVENTS_FILE))?,
        final_read: crate::load::read_final(&run.join(FINAL_FILE))?,
        elections: election::read(run),
        plan: read_json(&run.join(PROBES_FILE))?,
        listeners_closed: crate::drained_readyz::read(run),
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
            &crate::context::read(run),
            &crate::etcd_said::read(run),
            &crate::context::read_cpu(run),
            &title,
        ),
    )?;
    Ok(v)
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
