//! The nightly matrix in shards, without a lab: `cpmlab run --shard K/N
//! --list` covers every fixture exactly once and balances the shards, and
//! `cpmlab report merge` of the shards' report directories lists the same
//! scenarios, results and reasons as one unsharded report.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use common::{bin, stdout};
use predicates::prelude::*;
use serde_json::{json, Value};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/scenarios")
}

/// `run --list` of one shard: (name, expected seconds).
fn listed(shard: &str) -> Vec<(String, f64)> {
    let out = stdout(
        &Command::new(bin())
            .args([
                "run",
                fixtures().to_str().unwrap(),
                "--list",
                "--shard",
                shard,
            ])
            .assert()
            .success(),
    );
    out.lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[0].to_string(), f[1].parse().unwrap())
        })
        .collect()
}

fn every_fixture() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "yaml")
                .then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    v.sort();
    v
}

/// Shards 1/3, 2/3 and 3/3 hold every fixture exactly once, the same
/// each time they are asked, and no shard's expected total exceeds an equal
/// share by more than the longest fixture (longest-first placement's bound).
#[test]
fn three_shards_cover_every_fixture_once_and_finish_together() {
    let shards: Vec<Vec<(String, f64)>> = ["1/3", "2/3", "3/3"].iter().map(|s| listed(s)).collect();
    let mut seen: Vec<String> = shards.iter().flatten().map(|(n, _)| n.clone()).collect();
    seen.sort();
    assert_eq!(seen, every_fixture(), "each fixture exactly once");
    assert_eq!(listed("2/3"), shards[1], "the same split when asked again");
    let totals: Vec<f64> = shards
        .iter()
        .map(|s| s.iter().map(|(_, t)| t).sum())
        .collect();
    let all: f64 = totals.iter().sum();
    let longest = shards.iter().flatten().map(|(_, t)| *t).fold(0.0, f64::max);
    for t in &totals {
        assert!(
            *t <= all / 3.0 + longest,
            "shard totals {totals:?} s: one exceeds {:.0} s + the longest {longest:.0} s",
            all / 3.0
        );
    }
    eprintln!(
        "shard totals: {totals:?} s (equal share {:.0} s)",
        all / 3.0
    );
    // Neither a shard that does not exist nor a malformed one is taken.
    Command::new(bin())
        .args([
            "run",
            fixtures().to_str().unwrap(),
            "--list",
            "--shard",
            "4/3",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("shard 4 of 3 does not exist"));
}

/// A scenario's result.json as `cpmlab run` writes it.
fn result(name: &str, passed: bool, why: &str, wall: f64) -> Value {
    json!({
        "name": name,
        "file": format!("fixtures/scenarios/{name}.yaml"),
        "description": format!("{name}, made up"),
        "seed": 42,
        "lab": "nightly",
        "passed": passed,
        "incomplete": false,
        "error": null,
        "env_error": false,
        "wall_s": wall,
        "migration": "completed",
        "excused": 0,
        "expectations": [{"name": "verdict", "passed": passed, "message": why}],
        "timeline": [],
        "dir": format!("/elsewhere/{name}"),
        "report": format!("{name}/run/report.html"),
    })
}

fn write_result(report_dir: &Path, r: &Value) {
    let d = report_dir.join(r["name"].as_str().unwrap());
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("result.json"), r.to_string()).unwrap();
}

fn merge(dirs: &[&Path], out: &Path) -> (Option<i32>, Value, String) {
    let mut args = vec!["report".to_string(), "merge".into()];
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    args.extend(["--out".into(), out.display().to_string()]);
    let o = Command::new(bin()).args(&args).output().unwrap();
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    (o.status.code(), summary, index)
}

/// The index's rows with the links taken out: what the index says.
fn rows_without_links(index: &str) -> Vec<String> {
    index
        .lines()
        .filter(|l| l.starts_with("<tr><td>"))
        .map(|l| {
            let mut s = l.to_string();
            while let Some(a) = s.find("href=\"") {
                let end = s[a + 6..].find('"').unwrap() + a + 6;
                s.replace_range(a..=end, "");
            }
            s
        })
        .collect()
}

/// Every fixture's result, split into the three shards' report
/// directories as `--shard K/3` splits them (one in two failing), merged:
/// the same rows, in the same order (failures first), as the unsharded
/// report of the same results, and links that reach each shard's files.
#[test]
fn report_merge_of_three_shards_equals_the_unsharded_index() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    let mut by_shard: BTreeMap<String, PathBuf> = BTreeMap::new();
    for (k, shard) in ["1/3", "2/3", "3/3"].iter().enumerate() {
        let d = tmp.path().join(format!("artifacts/shard-{}", k + 1));
        for (name, _) in listed(shard) {
            by_shard.insert(name, d.clone());
        }
    }
    for (i, name) in every_fixture().iter().enumerate() {
        let passed = i % 2 == 0;
        let r = result(
            name,
            passed,
            if passed {
                "held"
            } else {
                "want pass, the verdict failed"
            },
            60.0 + i as f64,
        );
        write_result(&whole, &r);
        write_result(&by_shard[name], &r);
    }
    let (code_whole, sum_whole, idx_whole) = merge(&[&whole], &tmp.path().join("merged-whole"));
    // The artifacts directory holds the shards' directories: found below it.
    let (code, sum, idx) = merge(&[&tmp.path().join("artifacts")], &tmp.path().join("merged"));
    assert_eq!(code, Some(1), "a failed scenario fails the merge");
    assert_eq!(code_whole, code);
    assert_eq!(sum, sum_whole, "summary.json");
    assert_eq!(
        rows_without_links(&idx),
        rows_without_links(&idx_whole),
        "index rows"
    );
    assert_eq!(sum[0]["result"], "FAILED", "failures first: {sum:#}");
    // Each link resolves from the merged index to its shard's file.
    let merged = tmp.path().join("merged");
    for href in idx
        .split("href=\"")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
    {
        if href.ends_with("result.json") {
            assert!(merged.join(href).is_file(), "{href} does not resolve");
        }
    }
    let junit = std::fs::read_to_string(merged.join("junit.xml")).unwrap();
    assert_eq!(junit.matches("<testsuite ").count(), every_fixture().len());
    // A directory with no results is bad input.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    Command::new(bin())
        .args([
            "report",
            "merge",
            empty.to_str().unwrap(),
            "--out",
            tmp.path().join("x").to_str().unwrap(),
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no scenario results here"));
}
