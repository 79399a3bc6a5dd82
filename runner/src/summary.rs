//! What a run of many scenarios leaves: one table on the terminal, an
//! aggregate `junit.xml` (a testsuite per scenario, a testcase per
//! expectation) and an `index.html` linking each scenario's report, failures
//! first. `cpmlab report merge` builds the same three from many run
//! directories (shards, or nights) by reading their `result.json` files back.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use cpmlab_verdict::escape_xml;

use super::ScenarioResult;

/// Every scenario result under `dir`: `dir/*/result.json` (a run's report
/// directory), in name order. Files that do not parse are skipped with a
/// warning: a merge reports what it can read.
pub fn load_results(dir: &Path) -> Vec<ScenarioResult> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path().join("result.json")))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| {
            let parsed = std::fs::read(&p)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<ScenarioResult>(&b).map_err(|e| e.to_string()));
            match parsed {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!(file = %p.display(), error = %e, "not a scenario result; left out");
                    None
                }
            }
        })
        .collect()
}

/// The order every summary lists scenarios in: failures first (errors and
/// incomplete runs, then failed verdicts), then passes, each by name.
pub fn ordered(results: &[ScenarioResult]) -> Vec<&ScenarioResult> {
    let rank = |r: &ScenarioResult| match status(r) {
        "ERROR" | "INCOMPLETE" => 0,
        "FAILED" => 1,
        _ => 2,
    };
    let mut v: Vec<&ScenarioResult> = results.iter().collect();
    v.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.name.cmp(&b.name)));
    v
}

/// A scenario's result: every expectation held (PASSED, or PASSED WITH
/// KNOWN HAZARDS when its verdict passed only by what it declared), or
/// not (FAILED), or it could not get there.
fn status(r: &ScenarioResult) -> &'static str {
    use crate::verdict::Status;
    if r.incomplete {
        "INCOMPLETE"
    } else if r.error.is_some() {
        "ERROR"
    } else if r.passed && r.verdict == Some(Status::PassedWithKnownHazards) {
        Status::PassedWithKnownHazards.headline()
    } else if r.passed {
        "PASSED"
    } else {
        "FAILED"
    }
}

/// The run's verdict, beside the result: a scenario whose expectation is a
/// failing (or only a safe) verdict passes with a verdict that failed, and
/// the table must not let PASSED read as zero downtime.
fn verdict(r: &ScenarioResult) -> &'static str {
    r.verdict.map_or("-", |v| v.headline())
}

/// Raw figures and what was excused, in a few words.
fn figures(r: &ScenarioResult) -> String {
    if r.verdict.is_none() {
        return String::new();
    }
    let mut s = format!("{} requests, {} failed", r.requests, r.failed_requests);
    if r.excused > 0 {
        let per: Vec<String> = r
            .excused_by_hazard
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(h, n)| format!("{h} {n}"))
            .collect();
        s.push_str(&format!(" ({} excused: {})", r.excused, per.join(", ")));
    }
    if let Some(n) = r.writes_after_last_step {
        s.push_str(&format!("; {n} writes acked after the last step"));
    }
    s
}

fn why(r: &ScenarioResult) -> String {
    let why = why_run(r);
    match &r.teardown_error {
        Some(_) => format!("down failed (below); {why}"),
        None => why,
    }
}

fn why_run(r: &ScenarioResult) -> String {
    if let Some(e) = &r.error {
        return crate::errors::said(e);
    }
    let failed: Vec<String> = r
        .failed_expectations()
        .iter()
        .map(|e| format!("{}: {}", e.name, e.message))
        .collect();
    let fig = figures(r);
    match (failed.is_empty(), fig.is_empty()) {
        (true, _) => fig,
        (false, true) => failed.join("; "),
        (false, false) => format!("{}; {fig}", failed.join("; ")),
    }
}

/// The terminal table.
pub fn table(results: &[ScenarioResult]) -> String {
    let w = results
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(8)
        .max(8);
    let rw = results
        .iter()
        .map(|r| status(r).len())
        .max()
        .unwrap_or(10)
        .max(10);
    let vw = results
        .iter()
        .map(|r| verdict(r).len())
        .max()
        .unwrap_or(7)
        .max(7);
    let mut out = format!(
        "{:<w$}  {:<rw$}  {:<vw$}  {:>7}  {:<10}  {:>10}  WHY\n",
        "SCENARIO", "RESULT", "VERDICT", "WALL", "MIGRATION", "SEED"
    );
    for r in ordered(results) {
        let _ = writeln!(
            out,
            "{:<w$}  {:<rw$}  {:<vw$}  {:>6.0}s  {:<10}  {:>10}  {}",
            r.name,
            status(r),
            verdict(r),
            r.wall_s,
            r.migration.as_deref().unwrap_or("-"),
            r.seed,
            why(r)
        );
    }
    let passed = results.iter().filter(|r| r.passed).count();
    let _ = writeln!(
        out,
        "{passed} of {} scenarios passed in {:.0} s",
        results.len(),
        results.iter().map(|r| r.wall_s).sum::<f64>()
    );
    out
}

/// What each scenario showed, in words a newcomer reads without knowing
/// the verdict's rules: whether its expectations held, what the verdict
/// said and how that fits them, why requests failed (one line per
/// mechanism) and what ran.
pub fn in_words(results: &[ScenarioResult]) -> String {
    use crate::verdict::Status;
    let mut out = String::new();
    for r in ordered(results) {
        let _ = writeln!(out, "\n{}:", r.name);
        if let Some(e) = &r.teardown_error {
            let _ = writeln!(
                out,
                "  down failed after the run, its lab's objects are left: {e}"
            );
        }
        let failed = r.failed_expectations();
        match (status(r), &r.error) {
            (_, Some(e)) => {
                let _ = writeln!(
                    out,
                    "  it could not run to its end: {}",
                    e.lines().next().unwrap_or("")
                );
                if let Some(fix) = crate::errors::fix_of(e) {
                    let _ = writeln!(out, "  fix: {fix}");
                }
            }
            ("INCOMPLETE", _) => {
                let _ = writeln!(out, "  interrupted: the report covers what ran.");
            }
            _ if failed.is_empty() => {
                let _ = writeln!(
                    out,
                    "  {}: all {} of the scenario's expectations held.",
                    status(r),
                    r.expectations.len()
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    "  FAILED: {} of the scenario's {} expectations did not hold:",
                    failed.len(),
                    r.expectations.len()
                );
                for e in &failed {
                    let _ = writeln!(out, "    - {}: {}", e.name, e.message);
                }
            }
        }
        match r.verdict {
            Some(Status::Passed) => {
                let _ = writeln!(
                    out,
                    "  The verdict PASSED: no request failed, no write was lost, no watch event was missed."
                );
            }
            Some(v) => {
                let _ = writeln!(
                    out,
                    "  The verdict {}: {} of {} requests failed{}.",
                    v.headline(),
                    r.failed_requests,
                    r.requests,
                    if r.passed {
                        " (the scenario expects that, so it still passes)"
                    } else {
                        ""
                    }
                );
                for why in &r.verdict_reasons {
                    let _ = writeln!(out, "    rule {why}");
                }
            }
            None => {}
        }
        if !r.why_failed.is_empty() {
            let _ = writeln!(
                out,
                "  Why requests failed (one line per mechanism), and watches that went silent:"
            );
            for w in &r.why_failed {
                let _ = writeln!(out, "    - {w}");
            }
        }
        if let Some(s) = &r.settings {
            let _ = writeln!(out, "  What ran: {}", s.words());
        }
    }
    out
}

/// The name of the flake a scenario with excused disruption reports.
pub const EXCUSED_CASE: &str = "disruption excused as known hazards";

/// Whether a scenario reports excused disruption as a flake: a failing
/// and a passing case of [`EXCUSED_CASE`], as OpenShift's disruption tests
/// report disruption within its allowance.
fn flakes(r: &ScenarioResult) -> usize {
    usize::from(r.excused_summary.is_some())
}

/// One `<testsuites>`: a suite per scenario, a case per expectation (a
/// scenario that did not get to its expectations is one failed case), and
/// a flake for disruption excused as known hazards.
pub fn junit(results: &[ScenarioResult]) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let tests: usize = results
        .iter()
        .map(|r| r.expectations.len().max(1) + 2 * flakes(r))
        .sum();
    let failures: usize = results
        .iter()
        .map(|r| {
            flakes(r)
                + if r.error.is_some() || r.incomplete {
                    r.failed_expectations().len().max(1)
                } else {
                    r.failed_expectations().len()
                }
        })
        .sum();
    let _ = writeln!(
        out,
        "<testsuites name=\"cpmlab scenarios\" tests=\"{tests}\" failures=\"{failures}\">"
    );
    for r in ordered(results) {
        let f = r.failed_expectations().len();
        let extra = usize::from(r.error.is_some() || r.incomplete);
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" time=\"{:.1}\">",
            escape_xml(&r.name),
            r.expectations.len() + extra + 2 * flakes(r),
            f + extra + flakes(r),
            r.wall_s
        );
        let _ = writeln!(
            out,
            "    <properties><property name=\"seed\" value=\"{}\"/><property name=\"description\" value=\"{}\"/></properties>",
            r.seed,
            escape_xml(&r.description)
        );
        if extra == 1 {
            let msg = r
                .error
                .clone()
                .unwrap_or_else(|| "interrupted: the run is incomplete".into());
            let _ = writeln!(
                out,
                "    <testcase classname=\"cpmlab.scenario.{n}\" name=\"run\"><failure message=\"{m}\">{m}</failure></testcase>",
                n = escape_xml(&r.name),
                m = escape_xml(&msg)
            );
        }
        if let Some(m) = &r.excused_summary {
            let n = escape_xml(&r.name);
            let m = escape_xml(m);
            let _ = writeln!(
                out,
                "    <testcase classname=\"cpmlab.scenario.{n}\" name=\"{EXCUSED_CASE}\"><failure message=\"{m}\">{m}</failure></testcase>\n    <testcase classname=\"cpmlab.scenario.{n}\" name=\"{EXCUSED_CASE}\"><system-out>{m}: within budget</system-out></testcase>"
            );
        }
        for e in &r.expectations {
            let _ = write!(
                out,
                "    <testcase classname=\"cpmlab.scenario.{}\" name=\"{}\">",
                escape_xml(&r.name),
                escape_xml(&e.name)
            );
            if e.passed {
                let _ = write!(out, "<system-out>{}</system-out>", escape_xml(&e.message));
            } else {
                let _ = write!(
                    out,
                    "<failure message=\"{m}\">{m}</failure>",
                    m = escape_xml(&e.message)
                );
            }
            out.push_str("</testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// `index.html`: every scenario, its result, and a link to its report.
pub fn index(results: &[ScenarioResult], title: &str) -> String {
    index_linked(results, title, |_| String::new())
}

/// `index.html` whose links to each scenario's files start with
/// `base(result)` (a merged index links into each run directory).
pub fn index_linked(
    results: &[ScenarioResult],
    title: &str,
    base: impl Fn(&ScenarioResult) -> String,
) -> String {
    let mut rows = String::new();
    for r in ordered(results) {
        let colour = match status(r) {
            "PASSED" => crate::verdict::Status::Passed.colour(),
            "FAILED" => crate::verdict::Status::Failed.colour(),
            s if s == crate::verdict::Status::PassedWithKnownHazards.headline() => {
                crate::verdict::Status::PassedWithKnownHazards.colour()
            }
            _ => "#c80",
        };
        let b = base(r);
        let link = match &r.report {
            Some(p) => format!("<a href=\"{}{}\">report</a>", escape_xml(&b), escape_xml(p)),
            None => "-".into(),
        };
        let _ = writeln!(
            rows,
            "<tr><td><b>{}</b><br><small>{}</small></td><td style=\"color:{colour};font-weight:bold\">{}</td><td>{:.0} s</td><td>{}</td><td>{}</td><td>{link} · <a href=\"{b}{n}/run.log\">run.log</a> · <a href=\"{b}{n}/result.json\">result.json</a></td><td><small>{}</small></td></tr>",
            escape_xml(&r.name),
            escape_xml(&r.description),
            status(r),
            r.wall_s,
            escape_xml(r.migration.as_deref().unwrap_or("-")),
            r.seed,
            escape_xml(&why(r)),
            b = escape_xml(&b),
            n = escape_xml(&r.name),
        );
    }
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title>\
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}}</style>\
</head><body><h1>{t}</h1><p>{} of {} scenarios passed ({} of them with known hazards).</p>\
<table><tr><th>scenario</th><th>result</th><th>wall</th><th>migration</th><th>seed</th><th>files</th><th>why</th></tr>\n{rows}</table></body></html>\n",
        results.iter().filter(|r| r.passed).count(),
        results.len(),
        results
            .iter()
            .filter(|r| r.passed && r.verdict == Some(crate::verdict::Status::PassedWithKnownHazards))
            .count(),
        t = escape_xml(title)
    )
}

/// One scenario as the machine-readable summary lists it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SummaryRow {
    pub name: String,
    pub result: String,
    pub wall_s: f64,
    pub migration: Option<String>,
    pub seed: u64,
    pub why: String,
}

/// `summary.json`: every scenario in the summaries' order, what it gave
/// and why; the same for one run and for a merge of many.
pub fn summary_rows(results: &[ScenarioResult]) -> Vec<SummaryRow> {
    ordered(results)
        .into_iter()
        .map(|r| SummaryRow {
            name: r.name.clone(),
            result: status(r).to_string(),
            wall_s: r.wall_s,
            migration: r.migration.clone(),
            seed: r.seed,
            why: why(r),
        })
        .collect()
}

/// A markdown summary (for a pull request or a job summary): the counts,
/// then one line per scenario that did not pass.
pub fn markdown(results: &[ScenarioResult], title: &str) -> String {
    let passed = results.iter().filter(|r| r.passed).count();
    let hazards = results
        .iter()
        .filter(|r| r.passed && r.verdict == Some(crate::verdict::Status::PassedWithKnownHazards))
        .count();
    let mut out = format!(
        "### {title}\n\n{passed} of {} scenarios passed ({hazards} of them with known hazards).\n",
        results.len()
    );
    let failed: Vec<&ScenarioResult> = ordered(results).into_iter().filter(|r| !r.passed).collect();
    if !failed.is_empty() {
        out.push_str("\n| scenario | result | why |\n| --- | --- | --- |\n");
        for r in failed {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                r.name,
                status(r),
                why(r).replace('|', "\\|")
            );
        }
    }
    out
}

/// Writes what a run of many scenarios leaves in `dir`: junit.xml,
/// index.html, summary.json and summary.md.
pub fn write_all(
    dir: &Path,
    results: &[ScenarioResult],
    title: &str,
    base: impl Fn(&ScenarioResult) -> String,
) -> std::io::Result<()> {
    std::fs::write(dir.join("junit.xml"), junit(results))?;
    std::fs::write(dir.join("index.html"), index_linked(results, title, base))?;
    let rows =
        serde_json::to_string_pretty(&summary_rows(results)).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("summary.json"), rows + "\n")?;
    std::fs::write(dir.join("summary.md"), markdown(results, title))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Status;

    fn result(name: &str, passed: bool, verdict: Option<Status>) -> ScenarioResult {
        let mut r: ScenarioResult =
            serde_json::from_value(serde_json::json!({"name": name, "file": "f.yaml", "description": "", "seed": 1, "lab": "l", "passed": passed, "incomplete": false, "env_error": false, "wall_s": 60.0, "requests": 100, "failed_requests": 7, "excused": 0, "excused_by_hazard": {}, "expectations": [], "timeline": [], "etcd_said": [], "dir": "/tmp/x"}))
                .unwrap();
        r.verdict = verdict;
        r
    }

    #[test]
    fn the_table_names_the_verdict_beside_the_expectations() {
        let t = table(&[
            result("safe-but-down", true, Some(Status::Failed)),
            result("clean", true, Some(Status::Passed)),
            result("broken", false, Some(Status::Failed)),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].contains("RESULT") && lines[0].contains("VERDICT"),
            "{t}"
        );
        // Failures first; a passed scenario whose verdict failed says both.
        let row = |name: &str| {
            lines
                .iter()
                .find(|l| l.starts_with(name))
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .unwrap()
        };
        assert!(lines[1].starts_with("broken"), "{t}");
        assert_eq!(row("safe-but-down")[1..3], ["PASSED", "FAILED"], "{t}");
        assert_eq!(row("clean")[1..3], ["PASSED", "PASSED"], "{t}");
        assert!(t.contains("100 requests, 7 failed"), "{t}");
    }

    #[test]
    fn the_words_say_a_passed_scenario_with_a_failed_verdict_is_expected() {
        let mut r = result("gep", true, Some(Status::Failed));
        r.expectations = serde_json::from_value(serde_json::json!([
            {"name": "verdict", "passed": true, "message": "safe"}
        ]))
        .unwrap();
        r.why_failed =
            vec!["7 request(s) on kept connections (HTTP/2) to seed-a got HTTP 503".into()];
        r.verdict_reasons = vec!["zero-downtime: 7 requests failed".into()];
        let w = in_words(&[r]);
        assert!(
            w.contains("PASSED: all 1 of the scenario's expectations held."),
            "{w}"
        );
        assert!(
            w.contains("The verdict FAILED: 7 of 100 requests failed (the scenario expects that, so it still passes)."),
            "{w}"
        );
        assert!(w.contains("rule zero-downtime: 7 requests failed"), "{w}");
        assert!(w.contains("    - 7 request(s) on kept connections"), "{w}");
        let clean = in_words(&[result("clean", false, Some(Status::Passed))]);
        assert!(
            clean.contains("The verdict PASSED: no request failed"),
            "{clean}"
        );
    }

    #[test]
    fn a_refusal_of_the_environment_is_said_with_its_fix() {
        let mut r = result("needs-3-5", false, None);
        r.env_error = true;
        r.error = Some(
            "cpmlab up: error: the topology asks for etcd 3.5 (etcd.version), and the lab image cpmlab/lab:x holds etcd 3.4 only\n  fix: run `scripts/build-go etcd-3.5`".into(),
        );
        let t = table(std::slice::from_ref(&r));
        assert!(
            t.contains("holds etcd 3.4 only; fix: run `scripts/build-go etcd-3.5`"),
            "{t}"
        );
        let w = in_words(&[r]);
        assert!(
            w.contains(
                "it could not run to its end: cpmlab up: error: the topology asks for etcd 3.5"
            ),
            "{w}"
        );
        assert!(
            w.contains("\n  fix: run `scripts/build-go etcd-3.5`\n"),
            "{w}"
        );
    }

    #[test]
    fn a_failed_down_is_said_beside_a_passed_run() {
        let mut r = result("leaky", true, Some(Status::Passed));
        r.teardown_error =
            Some("error: lab `l`: 1 objects could not be removed fix: restart dockerd".into());
        let t = table(std::slice::from_ref(&r));
        assert!(t.contains("down failed (below)"), "{t}");
        let w = in_words(&[r]);
        assert!(
            w.contains("down failed after the run, its lab's objects are left: error: lab `l`: 1 objects could not be removed fix: restart dockerd"),
            "{w}"
        );
    }
}
