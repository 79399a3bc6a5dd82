//! `cpmlab compare` end to end against real Docker, CI's short comparison:
//! two variants, two repetitions each. It runs the baseline scenario (the
//! lab at rest, its probing cut to 5 s) under `exposure=termination,passthrough`: four
//! real labs, what the machinery must get right (every run kept and
//! judged, repetition `i` of each variant on the same seed, compare.json,
//! compare.html and compare.md, pass rates with Wilson's interval), in
//! about 2 minutes. The comparison of the plans on the default scenario
//! is nightly (`scripts/nightly`): 15 runs of three minutes are not CI's.
//! Needs Docker; fails when CI=true and Docker cannot be reached.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use common::*;
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn a_short_comparison_keeps_every_run_and_states_each_pass_rate() {
    if !needs_docker("a_short_comparison_keeps_every_run_and_states_each_pass_rate") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let name = format!("cmp{}", std::process::id() % 10000);
    // The baseline with 5 s of probing instead of 20 s: what is checked
    // here is the comparison's machinery, four labs' worth of it.
    let fixture = out.path().join("baseline.yaml");
    let text = std::fs::read_to_string(root().join("fixtures/scenarios/baseline.yaml")).unwrap();
    assert!(
        text.contains("\nduration: 20s\n"),
        "baseline.yaml changed:\n{text}"
    );
    std::fs::write(
        &fixture,
        text.replace("\nduration: 20s\n", "\nduration: 5s\n"),
    )
    .unwrap();
    let report = out.path().join("report");
    let o = Command::new(bin())
        .args(["compare"])
        .arg(&fixture)
        .args([
            "--variants",
            "exposure=termination,passthrough",
            "--repeat",
            "2",
            "--seed",
            "4242",
            "--name",
            &name,
            "--report-dir",
        ])
        .arg(&report)
        .env("CPMLAB_STATE_DIR", state.path())
        .timeout(Duration::from_secs(900))
        .assert();
    let text = stdout(&o);
    eprintln!(
        "{}\n{text}",
        String::from_utf8_lossy(&o.get_output().stderr)
    );
    assert_eq!(
        o.get_output().status.code(),
        Some(0),
        "every run got to its verdict"
    );
    let left = left_after_teardown(&name);
    assert!(
        left.is_empty(),
        "the comparison left objects behind: {left:?}"
    );

    let c: Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("compare.json")).unwrap())
            .unwrap();
    assert_eq!(c["repeat"], 2);
    assert_eq!(c["base_seed"], 4242);
    assert_eq!(
        c["variants"],
        serde_json::json!(["exposure=termination", "exposure=passthrough"])
    );
    let runs = c["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "{runs:#?}");
    for r in runs {
        // Each run is kept, judged and replayable from its scenario file.
        let dir = report.join(r["dir"].as_str().unwrap());
        assert!(dir.join("result.json").is_file(), "{}", dir.display());
        assert!(
            dir.join("scenario.yaml").is_file(),
            "{}: the scenario as run",
            dir.display()
        );
        assert!(r["status"].as_str().is_some_and(|s| !s.is_empty()), "{r}");
        assert!(r["wall_s"].as_f64().unwrap() > 5.0, "{r}");
        // The lab's own up and down are measured apart from the scenario.
        let lab = r["values"]["lab_s"].as_f64().expect("lab_s measured");
        assert!(lab > 1.0 && lab < r["wall_s"].as_f64().unwrap(), "{r}");
        // The lab at rest passes, whichever way the API is exposed.
        assert_eq!(r["passed"], true, "{r}");
    }
    // Repetition i meets the same seed under every variant.
    for rep in [1, 2] {
        let seeds: Vec<&Value> = runs
            .iter()
            .filter(|r| r["repetition"] == rep)
            .map(|r| &r["seed"])
            .collect();
        assert_eq!(seeds.len(), 2);
        assert_eq!(seeds[0], seeds[1], "repetition {rep}");
    }
    for v in c["summary"]["variants"].as_array().unwrap() {
        assert_eq!(v["runs"], 2, "{v}");
        assert_eq!(v["passed"], 2, "{v}");
        // Wilson's 95 % interval for 2 of 2: [0.342, 1].
        let lo = v["pass_interval"][0].as_f64().unwrap();
        let hi = v["pass_interval"][1].as_f64().unwrap();
        assert!((lo - 0.342).abs() < 0.01 && (hi - 1.0).abs() < 1e-9, "{v}");
    }
    let md = std::fs::read_to_string(report.join("compare.md")).unwrap();
    assert!(
        md.contains("exposure=termination") && md.contains("exposure=passthrough"),
        "{md}"
    );
    let html = std::fs::read_to_string(report.join("compare.html")).unwrap();
    assert!(html.contains("<svg"), "the page draws its plots");
}

/// Before any lab: `--list` without `--report-dir` prints the variants and
/// writes nothing; bad input exits 2 and leaves no comparison directory.
#[test]
fn listing_and_bad_input_leave_nothing_behind() {
    let state = tempfile::tempdir().unwrap();
    let scenario = root().join("fixtures/scenarios/six-member-25ms.yaml");
    let o = Command::new(bin())
        .arg("compare")
        .arg(&scenario)
        .args([
            "--variants",
            "cc=cubic,bbr",
            "--repeat",
            "2",
            "--seed",
            "7",
            "--list",
        ])
        .env("CPMLAB_STATE_DIR", state.path())
        .assert()
        .success();
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[0].starts_with("cc=cubic\t1\t"), "{text}");
    assert!(
        !state.path().join("runs").exists()
            || std::fs::read_dir(state.path().join("runs"))
                .unwrap()
                .next()
                .is_none(),
        "--list wrote a comparison directory"
    );

    let out = state.path().join("cmp-out");
    let o = Command::new(bin())
        .arg("compare")
        .arg(&scenario)
        .args(["--variants", "plan=sideways", "--report-dir"])
        .arg(&out)
        .env("CPMLAB_STATE_DIR", state.path())
        .assert();
    assert_eq!(o.get_output().status.code(), Some(2), "{o}");
    assert!(!out.exists(), "bad input left {}", out.display());
}
