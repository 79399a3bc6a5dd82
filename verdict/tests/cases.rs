//! The corpus's cases (`corpus/cases/<case>/`): each a real run directory
//! of `corpus/` (its `base`) as recorded or as edited by the script kept
//! beside the case (`edit.sh`, run with `sh` in a copy of the base), with
//! what the verdict must say of it (`case.json`):
//!
//! - `refused`: the words of the bad input error it must be refused with
//!   (`cpmlab verdict` exits 2), naming the file and the line;
//! - or `verdict` (`PASSED`, `PASSED WITH KNOWN HAZARDS`, `FAILED`), and
//!   for each rule named in `rules` its status and the words its message
//!   must hold; `mechanism`: words a mechanism line must hold.
//!
//! Every kept run directory is a case as recorded (no `edit.sh`): judging
//! them again must give what their case says. No Docker, seconds.

mod common;

use std::path::{Path, PathBuf};

use common::copy_tree;
use cpmlab_verdict::run_dir;
use serde::Deserialize;

fn corpus() -> PathBuf {
    common::corpus("")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// What the case is, in words.
    about: String,
    /// The run directory of `corpus/` it edits.
    base: String,
    #[serde(default)]
    refused: Option<String>,
    #[serde(default)]
    verdict: Option<String>,
    #[serde(default)]
    rules: Vec<RuleCase>,
    #[serde(default)]
    mechanism: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleCase {
    rule: String,
    status: String,
    words: String,
}

/// The case's run directory: its base, copied, then edited.
fn prepare(dir: &Path, c: &Case) -> tempfile::TempDir {
    let run = tempfile::tempdir().unwrap();
    copy_tree(&corpus().join(&c.base), run.path());
    let edit = dir.join("edit.sh");
    if edit.is_file() {
        let out = std::process::Command::new("sh")
            .arg(&edit)
            .current_dir(run.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            edit.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    run
}

/// What went wrong with one case, or nothing.
fn check(dir: &Path) -> Result<(), String> {
    let c: Case = serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).unwrap())
        .map_err(|e| format!("case.json: {e}"))?;
    let run = prepare(dir, &c);
    let judged = run_dir::read_criteria(run.path()).and_then(|k| run_dir::judge(run.path(), &k));
    if let Some(words) = &c.refused {
        return match judged {
            Err(e) if e.is_bad_input() && e.to_string().contains(words.as_str()) => Ok(()),
            Err(e) => Err(format!(
                "{}: must be refused saying {words:?}; refused: {e}",
                c.about
            )),
            Ok(v) => Err(format!(
                "{}: must be refused saying {words:?}; judged {}",
                c.about,
                v.status.headline()
            )),
        };
    }
    let v = judged.map_err(|e| format!("{}: refused: {e}", c.about))?;
    let mut wrong = Vec::new();
    if let Some(want) = &c.verdict {
        if v.status.headline() != want {
            wrong.push(format!(
                "verdict {} (not {want}): {:?}",
                v.status.headline(),
                v.reasons
            ));
        }
    }
    for r in &c.rules {
        match v.rule(&r.rule) {
            None => wrong.push(format!("no rule {}", r.rule)),
            Some(got) => {
                if got.status.as_str() != r.status || !got.message.contains(&r.words) {
                    wrong.push(format!(
                        "{} must be {} saying {:?}; it is {}: {}",
                        r.rule,
                        r.status,
                        r.words,
                        got.status.as_str(),
                        got.message
                    ));
                }
            }
        }
    }
    if let Some(words) = &c.mechanism {
        if !v.mechanisms.iter().any(|m| m.line.contains(words.as_str())) {
            wrong.push(format!(
                "no mechanism line says {words:?}: {:#?}",
                v.mechanisms.iter().map(|m| &m.line).collect::<Vec<_>>()
            ));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("{}: {}", c.about, wrong.join("; ")))
    }
}

#[test]
fn every_case_says_what_it_must() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(corpus().join("cases"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").is_file())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 36, "{} cases: one went missing", dirs.len());
    let failed: Vec<String> = dirs
        .iter()
        .filter_map(|d| {
            check(d)
                .err()
                .map(|e| format!("{}: {e}", d.file_name().unwrap().to_string_lossy()))
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn every_kept_run_directory_is_a_case_as_recorded() {
    for base in std::fs::read_dir(corpus()).unwrap() {
        let base = base.unwrap().file_name().to_string_lossy().into_owned();
        if base == "cases" {
            continue;
        }
        let case = corpus().join("cases").join(format!("{base}-as-recorded"));
        assert!(
            case.join("case.json").is_file() && !case.join("edit.sh").exists(),
            "{base}: no case judges it as recorded ({})",
            case.display()
        );
    }
}
