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
    // here is the comparison's machinery, four labs' worth of it, two at
    // a time (`--jobs 2`: each run still on a lab of its own, their
    // networks apart).
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
            "--jobs",
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
    // Each run had a lab of its own (`<name>-<n>`), named in its result.
    let labs = labs_in(&report);
    assert_eq!(labs.len(), 4, "{labs:?}");
    for lab in labs.iter().chain([&name]) {
        let left = left_after_teardown(lab);
        assert!(
            left.is_empty(),
            "the comparison left objects of {lab} behind: {left:?}"
        );
    }
    assert_eq!(
        exit_past_stale_teardown(o.get_output().status.code(), &report, Exits::Compare),
        Some(0),
        "every run got to its verdict"
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
        // The lab at rest fails no request and loses no write, whichever
        // way the API is exposed. Whether it also meets the latency SLOs
        // is the machine's: a CI run saw etcd apply for 4 s on a starved
        // 2-core machine and the verdict fail its write p99 (1.37 s); the
        // comparison must then count that run as failed, checked below.
        assert_eq!(r["values"]["failed_requests"], 0.0, "{r}");
        assert_eq!(r["values"]["lost_writes"], 0.0, "{r}");
        // A run that failed names the expectation it failed.
        let passed = r["passed"].as_bool().expect("each run is judged");
        let result: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("result.json")).unwrap())
                .unwrap();
        let failed = result["expectations"]
            .as_array()
            .expect("expectations")
            .iter()
            .filter(|e| e["passed"] == false)
            .count();
        assert_eq!(passed, failed == 0, "{r}\n{result:#}");
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
    // Each variant's pass rate is its runs' own verdicts, with Wilson's
    // 95 % interval (2 of 2: [0.342, 1]; 1 of 2: [0.095, 0.905]).
    for v in c["summary"]["variants"].as_array().unwrap() {
        assert_eq!(v["runs"], 2, "{v}");
        let name = v["name"].as_str().expect("named");
        let k = runs
            .iter()
            .filter(|r| r["variant"] == name && r["passed"] == true)
            .count();
        assert_eq!(v["passed"], k, "{v}");
        let (lo, hi) = wilson(k as f64, 2.0);
        let got = (
            v["pass_interval"][0].as_f64().unwrap(),
            v["pass_interval"][1].as_f64().unwrap(),
        );
        assert!(
            (got.0 - lo).abs() < 1e-3 && (got.1 - hi).abs() < 1e-3,
            "{v}: Wilson's interval for {k} of 2 is [{lo:.3}, {hi:.3}]"
        );
    }
    let md = std::fs::read_to_string(report.join("compare.md")).unwrap();
    assert!(
        md.contains("exposure=termination") && md.contains("exposure=passthrough"),
        "{md}"
    );
    let html = std::fs::read_to_string(report.join("compare.html")).unwrap();
    assert!(html.contains("<svg"), "the page draws its plots");
}

/// Wilson's score interval at 95 % for `k` of `n`.
fn wilson(k: f64, n: f64) -> (f64, f64) {
    let z = 1.959_963_984_540_054_f64;
    let p = k / n;
    let d = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / d;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / d;
    ((centre - half).max(0.0), (centre + half).min(1.0))
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

/// etcd-druid beside the lab's etcd is a knob of the kind form: listed
/// there, refused on the docker form before any lab (exit 2, the variant's
/// file, line and field, no comparison directory left).
#[test]
fn etcd_druid_is_a_kind_form_variant() {
    let state = tempfile::tempdir().unwrap();
    let scenario = root().join("fixtures/scenarios/five-member-25ms-drain-gateway-in-place.yaml");
    let variants = [
        "--variants",
        "etcd=3.5",
        "--variants",
        "etcd_operator=lab,etcd-druid",
        "--repeat",
        "1",
        "--seed",
        "7",
    ];
    let o = Command::new(bin())
        .arg("compare")
        .arg(&scenario)
        .args(variants)
        .args(["--provider", "kind", "--list"])
        .env("CPMLAB_STATE_DIR", state.path())
        .assert()
        .success();
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("etcd=3.5,etcd_operator=lab\t1\t"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("etcd=3.5,etcd_operator=etcd-druid\t1\t"),
        "{text}"
    );

    let out = state.path().join("cmp-out");
    let o = Command::new(bin())
        .arg("compare")
        .arg(&scenario)
        .args(variants)
        .arg("--report-dir")
        .arg(&out)
        .env("CPMLAB_STATE_DIR", state.path())
        .assert();
    assert_eq!(o.get_output().status.code(), Some(2), "{o}");
    let err = String::from_utf8_lossy(&o.get_output().stderr).into_owned();
    assert!(
        err.contains("etcd_operator-etcd-druid--r1.yaml:")
            && err.contains(": topology.etcd.operator: etcd-druid runs only on the kind form"),
        "{err}"
    );
    assert!(!out.exists(), "bad input left {}", out.display());
}
