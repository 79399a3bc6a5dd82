//! The command line without a lab: completion scripts as kind and kubectl
//! offer them, where labs are kept, and `cpmlab verdict` judging a run
//! directory written here (records as the probe agent writes them).

mod common;

use assert_cmd::Command;
use common::bin;
use predicates::prelude::*;

#[test]
fn completion_scripts_for_bash_zsh_and_fish() {
    for (shell, marker) in [
        ("bash", "complete -F _cpmlab"),
        ("zsh", "#compdef cpmlab"),
        ("fish", "complete -c cpmlab"),
    ] {
        Command::new(bin())
            .args(["completion", shell])
            .assert()
            .success()
            .stdout(predicate::str::contains(marker))
            .stdout(predicate::str::contains("migrate"));
    }
    Command::new(bin())
        .args(["completion", "tcsh"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("invalid value 'tcsh'"));
}

#[test]
fn without_a_state_directory_the_fix_is_named() {
    Command::new(bin())
        .env_remove("CPMLAB_STATE_DIR")
        .env_remove("XDG_STATE_HOME")
        .env_remove("HOME")
        .args(["status"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("fix: set CPMLAB_STATE_DIR"));
}

/// A small run: readyz every 100 ms for 2 s, a write every 100 ms
/// (acknowledged, each in the history read back), a watch seeing each,
/// and the plan that asked for them.
fn write_run(dir: &std::path::Path, slow_get_ms: f64) {
    let t0 = 1_800_000_000_000.0_f64;
    let mut lines = Vec::new();
    let mut seq = 0;
    let mut rec = |v: serde_json::Value| {
        let mut v = v;
        v["seq"] = seq.into();
        v["mode"] = "reused".into();
        v["start_mono_ms"] = 0.0.into();
        seq += 1;
        lines.push(v.to_string());
    };
    rec(
        serde_json::json!({"probe": "watch", "start_unix_ms": t0, "duration_ms": 2.0, "outcome": "ok", "event": "connect"}),
    );
    let mut history = Vec::new();
    for i in 0..20u64 {
        let t = t0 + 10.0 + 100.0 * i as f64;
        rec(
            serde_json::json!({"probe": "readyz", "start_unix_ms": t, "duration_ms": 3.0, "outcome": "ok"}),
        );
        rec(
            serde_json::json!({"probe": "get", "start_unix_ms": t + 1.0, "duration_ms": slow_get_ms, "outcome": "ok", "value": i, "rv": 100 + i}),
        );
        rec(
            serde_json::json!({"probe": "write", "start_unix_ms": t + 2.0, "duration_ms": 4.0, "outcome": "ok", "value": i + 1, "rv": 101 + i}),
        );
        rec(
            serde_json::json!({"probe": "watch", "start_unix_ms": t + 8.0, "duration_ms": 0.0, "outcome": "ok", "event": "MODIFIED", "value": i + 1, "rv": 101 + i}),
        );
        history.push(serde_json::json!({"value": i + 1, "rev": 101 + i}));
    }
    std::fs::write(dir.join("records.ndjson"), lines.join("\n") + "\n").unwrap();
    std::fs::write(dir.join("events.ndjson"), "").unwrap();
    // The lanes the probes were asked for: a run without them is of an
    // older layout, and its coverage degraded.
    std::fs::write(
        dir.join("probes.json"),
        r#"{"probes": ["readyz", "get", "write", "watch"], "modes": ["reused"], "rate": 10.0, "timeout_ms": 2000.0}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("final.json"),
        serde_json::json!({"counter": 20, "counter_rv": 120, "counter_attempts": 1, "history": history}).to_string(),
    )
    .unwrap();
}

#[test]
fn verdict_judges_a_kept_run_again_with_other_limits() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path(), 300.0);
    let run = dir.path().to_str().unwrap();
    Command::new(bin())
        .args(["verdict", run])
        .assert()
        .success()
        .stdout(predicate::str::contains("verdict: PASSED"));
    for f in ["verdict.json", "junit.xml", "report.html"] {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
    // Stricter than the gets were: exit 1, and the rule says why.
    Command::new(bin())
        .args(["verdict", run, "--read-p99", "100ms"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "slo-outside-get: phase outside: read (get) p99 300 ms exceeds the limit of 100 ms",
        ));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("verdict.json")).unwrap())
            .unwrap();
    assert_eq!(v["thresholds"]["read_p99_ms"], 100.0);
}

#[test]
fn verdict_refuses_bad_input_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    // Not a run directory.
    Command::new(bin())
        .args(["verdict", dir.path().to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not a run directory"))
        .stderr(predicate::str::contains("records.ndjson is missing"));
    // A malformed record names its file and line, and an earlier
    // judgement of the run does not stay to say what it said.
    write_run(dir.path(), 3.0);
    Command::new(bin())
        .args(["verdict", dir.path().to_str().unwrap()])
        .assert()
        .code(0);
    assert!(dir.path().join("verdict.json").is_file());
    let p = dir.path().join("records.ndjson");
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.insert_str(0, "{\"probe\": \"get\", oops}\n");
    std::fs::write(&p, text).unwrap();
    Command::new(bin())
        .args(["verdict", dir.path().to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "records.ndjson:1: a line that does not parse",
        ))
        .stderr(predicate::str::contains(
            "the earlier judgement's verdict.json, junit.xml, report.html removed",
        ));
    for f in ["verdict.json", "junit.xml", "report.html"] {
        assert!(!dir.path().join(f).exists(), "{f} stayed");
    }
    // A limit that is not a duration.
    write_run(dir.path(), 3.0);
    Command::new(bin())
        .args([
            "verdict",
            dir.path().to_str().unwrap(),
            "--list-p99",
            "soon",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--list-p99"));
}

#[test]
fn host_side_probes_refuse_a_kubeconfig_they_cannot_use_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("gardenlogin.yaml");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: shoot\n  cluster:\n    server: https://api.shoot.example:443\n    certificate-authority-data: eA==\n\
users:\n- name: u\n  user:\n    exec:\n      command: kubectl-gardenlogin\n\
contexts:\n- name: shoot\n  context:\n    cluster: shoot\n    user: u\ncurrent-context: shoot\n",
    )
    .unwrap();
    Command::new(bin())
        .env("CPMLAB_STATE_DIR", dir.path())
        .args(["probe", "start", "--name", "outside", "--kubeconfig"])
        .arg(&kc)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!(
            "{}:11: users[0].user.exec: an exec plugin is not supported",
            kc.display()
        )));
    // Nothing was started or recorded.
    assert!(!dir.path().join("outside/outside.json").exists());
    assert!(!dir.path().join("runs").exists());
}
