//! The run directory's layout: which files it holds and what they say, by
//! version, so that the verdict never fills what a run directory lacks
//! with "nothing to check".
//!
//! Whoever makes a run directory (`cpmlab probe start`, and for a probe
//! outside the lab `cpmlab probe start --kubeconfig`) writes `layout.json`
//! first: `{"layout": N}`. A directory without it is of layout 1.
//!
//! - **Layout 1**: `records.ndjson` and `events.ndjson`; `final.json` (the
//!   counter and its history, read back at the end); `probes.json` and
//!   `criteria.json` when the cpmlab that wrote it kept them; the members'
//!   logs and the observer's samples when `cpmlab run` ran it. Its
//!   criteria may not say how the migration had to end, nor name its
//!   steps, and its step events carry no outcome.
//! - **Layout 2** ([`LAYOUT`]) adds `layout.json` and `history.ndjson` (the
//!   counter's history, watched while the run went: see [`history`]), and
//!   always keeps `probes.json` and `criteria.json` (the migration's
//!   expected end and its steps, when one is expected). Each step event
//!   carries its outcome (`status`: `True`, `False` or `Unknown`).
//!   `final.json` holds the counter read back and a copy of what the
//!   capture holds; the rules read the capture.
//!
//! The verdict refuses a layout newer than it knows (bad input, exit 2,
//! naming the layouts it reads). Of the files a run needs, a missing one
//! leaves every rule that reads it *not covered*, with the file named
//! ([`Missing`]); what an older layout does not keep leaves the rules
//! that need it *degraded*, with what is missing ([`Lacking`]). Either
//! fails the verdict unless the scenario accepts the rule by name.
//! `cpmlab verdict --explain-layout RUN` lists what was found and what was
//! lacking.
//!
//! [`history`]: crate::history

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// What `probe stop` reads back after the run.
pub const FINAL_FILE: &str = "final.json";
pub const RECORDS_FILE: &str = "records.ndjson";
/// Every record, where an older cpmlab rewrote `records.ndjson`.
pub const ALL_RECORDS_FILE: &str = "records.all.ndjson";
pub const EVENTS_FILE: &str = "events.ndjson";
/// The gateways' counters, sampled by `cpmlab run`'s observer.
pub const GATEWAYS_FILE: &str = "gateways.ndjson";
/// The gateways' endpoint lifecycle records, kept by the observer.
pub const ENDPOINTS_FILE: &str = "endpoints.ndjson";

use crate::criteria::{Criteria, Hazard};
use crate::error::{Error, Result};
use crate::history::{Captured, HISTORY_FILE};
use crate::load::Dropped;
use crate::record::{LabEvent, ProbeKind, ProbePlan, Record, PROBES_FILE};
use crate::{Rule, RuleStatus};

/// The file that names the layout.
pub const LAYOUT_FILE: &str = "layout.json";
/// The newest layout this cpmlab reads, and the one it writes.
pub const LAYOUT: u32 = 2;
/// Where the members' logs are kept.
pub const LOGS_DIR: &str = "logs/";

/// `layout.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayoutFile {
    pub layout: u32,
    /// The cpmlab that wrote it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub written_by: String,
}

/// Writes `layout.json` into a new run directory.
pub fn write(run: &Path) -> Result<()> {
    let f = LayoutFile {
        layout: LAYOUT,
        written_by: format!("cpmlab {}", env!("CARGO_PKG_VERSION")),
    };
    let p = run.join(LAYOUT_FILE);
    std::fs::write(
        &p,
        serde_json::to_string_pretty(&f).expect("a layout is JSON") + "\n",
    )
    .map_err(|e| Error::io(format!("writing {}", p.display()), e))
}

/// The run directory's layout: 1 without `layout.json`; a newer one than
/// [`LAYOUT`] is refused.
pub fn read(run: &Path) -> Result<u32> {
    let p = run.join(LAYOUT_FILE);
    let Some(f) = crate::load::read_json::<LayoutFile>(&p)? else {
        return Ok(1);
    };
    if f.layout == 0 {
        return Err(Error::BadInput(format!(
            "{}: layout: 0 is no layout (they count from 1)",
            p.display()
        )));
    }
    if f.layout > LAYOUT {
        return Err(Error::BadInput(format!(
            "{}: layout {}{}: this cpmlab knows layouts 1 to {LAYOUT}; judge the run with a cpmlab that knows layout {}",
            p.display(),
            f.layout,
            if f.written_by.is_empty() {
                String::new()
            } else {
                format!(" (written by {})", f.written_by)
            },
            f.layout
        )));
    }
    Ok(f.layout)
}

/// What a run directory held, as it was read: the facts the rules' inputs
/// are judged by.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Present {
    pub layout: u32,
    /// The files found (`logs/` when it holds a member's log).
    pub files: BTreeSet<String>,
    /// Unterminated last lines dropped (a killed writer's tail).
    pub dropped: Vec<Dropped>,
    /// The counter's history as `history.ndjson` captured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Captured>,
}

impl Present {
    pub fn has(&self, file: &str) -> bool {
        self.files.contains(file)
    }
}

/// A file the run needs that it does not hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Missing {
    pub file: String,
    /// What it holds that the rules need.
    pub why: String,
    /// The rules it leaves not covered.
    pub rules: Vec<String>,
}

/// What an older layout does not keep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lacking {
    pub what: String,
    /// The rules it leaves degraded.
    pub rules: Vec<String>,
}

/// The run directory's inputs, judged: `verdict.json`'s `inputs`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InputsCheck {
    /// The layout (0: the records were judged without a run directory).
    pub layout: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<Dropped>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<Missing>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lacking: Vec<Lacking>,
    /// Where the counter's history came from, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<String>,
}

/// The hazards whose excuses the members' logs confirm.
fn needs_logs(h: Hazard) -> bool {
    matches!(h, Hazard::KilledMember | Hazard::LeaderElection)
}

/// What ran, by the plan or the records.
fn ran(plan: Option<&ProbePlan>, records: &[Record], kind: ProbeKind) -> bool {
    plan.is_some_and(|p| p.probes.contains(&kind)) || records.iter().any(|r| r.probe == kind)
}

/// Whether the events show a migration (its steps are `phase` events).
pub fn migration_ran(events: &[LabEvent]) -> bool {
    events.iter().any(|e| e.kind == "phase")
}

/// The inputs `present` lacks, against what the criteria and the run need.
pub fn check(
    present: &Present,
    criteria: &Criteria,
    plan: Option<&ProbePlan>,
    records: &[Record],
    events: &[LabEvent],
) -> InputsCheck {
    let mut out = InputsCheck {
        layout: present.layout,
        dropped: present.dropped.clone(),
        history: present.history.as_ref().map(Captured::summary),
        ..InputsCheck::default()
    };
    let l1 = present.layout < 2;
    let writes = ran(plan, records, ProbeKind::Write);
    let candidates = ran(plan, records, ProbeKind::Lease);
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut missing = |file: &str, why: &str, rules: Vec<String>| {
        if !rules.is_empty() {
            out.missing.push(Missing {
                file: file.into(),
                why: why.into(),
                rules,
            });
        }
    };
    if !present.has(PROBES_FILE) && !l1 {
        missing(
            PROBES_FILE,
            "the lanes the probes were asked to run",
            names(&[crate::coverage::RULE]),
        );
    }
    if !present.has(crate::criteria::CRITERIA_FILE) && !l1 && migration_ran(events) {
        missing(
            crate::criteria::CRITERIA_FILE,
            "how the migration had to end",
            names(&[crate::migration::RULE]),
        );
    }
    if !present.has(FINAL_FILE) {
        let mut rules = Vec::new();
        if writes {
            rules.push(crate::ledger::RULE_LOST.to_string());
            if l1 {
                rules.push(crate::linearizable::RULE.to_string());
            }
        }
        if candidates {
            rules.push(crate::lease::RULE_EXCLUSIVE.to_string());
        }
        missing(
            FINAL_FILE,
            if l1 {
                "the counter and its history read back after the run"
            } else {
                "the counter read back after the run"
            },
            rules,
        );
    }
    if !l1 && writes && present.history.is_none() {
        missing(
            HISTORY_FILE,
            "the counter's history, watched while the run went",
            names(&[crate::ledger::RULE_LOST, crate::linearizable::RULE]),
        );
    }
    if !present.has(LOGS_DIR) {
        let hazards: Vec<&str> = criteria
            .excuse
            .keys()
            .filter(|h| needs_logs(**h))
            .map(|h| h.name())
            .collect();
        if !hazards.is_empty() {
            missing(
                LOGS_DIR,
                &format!(
                    "the etcd members' logs, which confirm the {} the criteria excuse",
                    hazards.join(" and ")
                ),
                names(&[crate::availability::RULE]),
            );
        }
    }
    if l1 {
        if !present.has(PROBES_FILE) {
            out.lacking.push(Lacking {
                what: "layout 1 without probes.json: the lanes asked for are unknown, and only the lanes that recorded were judged".into(),
                rules: names(&[crate::coverage::RULE]),
            });
        }
        if migration_ran(events) {
            let what = match criteria.migration.as_deref() {
                None => Some(
                    "layout 1: the run's criteria do not say how its migration had to end"
                        .to_string(),
                ),
                Some(_) if crate::migration::steps_without_status(events) => Some(
                    "layout 1: the step events carry no outcome (True, False), so a step recorded may have failed".to_string(),
                ),
                Some(_) => None,
            };
            if let Some(what) = what {
                out.lacking.push(Lacking {
                    what,
                    rules: names(&[crate::migration::RULE]),
                });
            }
        }
    }
    out
}

/// Applies `inputs` to the rules: a missing file leaves its rules not
/// covered, an older layout's lack leaves its rules degraded; a rule that
/// does not apply (skipped) stays so, but the migration's, which criteria
/// missing or of an older layout skip for want of an expectation.
pub fn apply(rules: &mut [Rule], inputs: &InputsCheck) {
    for m in &inputs.missing {
        for r in rules.iter_mut().filter(|r| m.rules.contains(&r.name)) {
            if r.status == RuleStatus::Skipped && r.name != crate::migration::RULE {
                continue;
            }
            r.message = format!(
                "{} is missing ({}): not covered; judged without it, the rule said: {}",
                m.file, m.why, r.message
            );
            r.status = RuleStatus::NotCovered;
        }
    }
    for l in &inputs.lacking {
        for r in rules.iter_mut().filter(|r| l.rules.contains(&r.name)) {
            let overridden = match r.status {
                RuleStatus::Passed | RuleStatus::Excused | RuleStatus::Degraded => true,
                RuleStatus::Skipped => r.name == crate::migration::RULE,
                RuleStatus::Failed | RuleStatus::NotCovered => false,
            };
            if overridden {
                r.message = format!("degraded: {}; {}", l.what, r.message);
                r.status = RuleStatus::Degraded;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_layout_is_refused_with_the_version_known() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read(d.path()).unwrap(), 1, "no layout.json: layout 1");
        write(d.path()).unwrap();
        assert_eq!(read(d.path()).unwrap(), LAYOUT);
        std::fs::write(d.path().join(LAYOUT_FILE), r#"{"layout": 9}"#).unwrap();
        let e = read(d.path()).unwrap_err();
        assert!(e.is_bad_input());
        assert!(
            e.to_string().contains(&format!(
                "layout 9: this cpmlab knows layouts 1 to {LAYOUT}"
            )),
            "{e}"
        );
        std::fs::write(d.path().join(LAYOUT_FILE), "{\"layout\": ").unwrap();
        assert!(read(d.path())
            .unwrap_err()
            .to_string()
            .contains("layout.json:1:"));
    }

    fn rule(name: &str, status: RuleStatus) -> Rule {
        Rule {
            name: name.into(),
            status,
            message: "as judged".into(),
        }
    }

    #[test]
    fn a_missing_file_leaves_its_rules_not_covered_and_an_old_layout_degrades() {
        let present = Present {
            layout: 2,
            files: [RECORDS_FILE, EVENTS_FILE].map(String::from).into(),
            ..Present::default()
        };
        let rec = crate::testutil::write(0.0, 1, 1);
        let inputs = check(&present, &Criteria::default(), None, &[rec], &[]);
        let files: Vec<&str> = inputs.missing.iter().map(|m| m.file.as_str()).collect();
        assert_eq!(files, [PROBES_FILE, "final.json", HISTORY_FILE]);
        let mut rules = vec![
            rule("coverage", RuleStatus::Passed),
            rule("lost-writes", RuleStatus::Failed),
            rule("migration-completed", RuleStatus::Skipped),
        ];
        apply(&mut rules, &inputs);
        assert_eq!(rules[0].status, RuleStatus::NotCovered);
        assert!(rules[0].message.starts_with("probes.json is missing"));
        assert_eq!(rules[1].status, RuleStatus::NotCovered);
        assert!(rules[1].message.contains("final.json is missing"));
        assert_eq!(rules[2].status, RuleStatus::Skipped);
        // Criteria missing where the events show a migration: how it had
        // to end is unknown.
        let step = LabEvent {
            at_unix_ms: 0.0,
            end_unix_ms: Some(1.0),
            kind: "phase".into(),
            name: "MigrationCompleted".into(),
            detail: String::new(),
            status: Some("True".into()),
        };
        let inputs = check(&present, &Criteria::default(), None, &[], &[step]);
        let mut rules = vec![rule("migration-completed", RuleStatus::Skipped)];
        apply(&mut rules, &inputs);
        assert_eq!(rules[0].status, RuleStatus::NotCovered);
        assert!(rules[0].message.starts_with("criteria.json is missing"));

        // Layout 1: no probes.json is a lack, not a missing file.
        let old = Present {
            layout: 1,
            ..present
        };
        let inputs = check(&old, &Criteria::default(), None, &[], &[]);
        assert!(inputs.missing.is_empty(), "{:?}", inputs.missing);
        let mut rules = vec![rule("coverage", RuleStatus::Passed)];
        apply(&mut rules, &inputs);
        assert_eq!(rules[0].status, RuleStatus::Degraded);
        assert!(rules[0].message.contains("layout 1 without probes.json"));
    }
}
