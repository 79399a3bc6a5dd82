//! `scripts/envelope --grid learner`, CI's one cell with the kernel's loss
//! (issue 45): five-member plan, 10 ms one-way, 0.05 % of the packets each
//! way dropped by the router's kernel (iptables' statistic match), etcd
//! 3.4, one run. What is checked is the grid's machinery, not the cell's
//! answer (a join that completes or not is the grid's figure): the loss
//! was the kernel's and not the delay line's, the run ended with the join
//! step (stopped there, or aborted), the raft progress names the learners,
//! the tables hold the cell, and nothing is left behind. The whole grid
//! (216 runs) is nightly (`scripts/nightly`, eight shards).
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

/// `scripts/envelope --grid learner` over `delays` and `losses` (etcd 3.4,
/// one run a cell) into `out`, running `cpmlab` as lab `name`, without
/// scripts/setup.
fn learner_grid(delays: &str, losses: &str, out: &Path, cpmlab: &Path, name: &str) -> Command {
    let mut c = Command::new(root().join("scripts/envelope"));
    c.args(["--grid", "learner", "--delays", delays, "--losses", losses])
        .args(["--etcd-versions", "3.4", "--repeat", "1", "--out"])
        .arg(out)
        .env("ENVELOPE_NO_SETUP", "1")
        .env("CPMLAB_BIN", cpmlab)
        .env("CPMLAB_NAME", name);
    c
}

#[test]
#[cfg_attr(
    not(all(cpmlab_has_docker, cpmlab_has_kube_apiserver)),
    ignore = "needs Docker (scripts/setup starts it); needs kube-apiserver (scripts/build-go)"
)]
fn one_learner_cell_with_the_kernel_s_loss() {
    let test = "one_learner_cell_with_the_kernel_s_loss";
    if !needs_docker(test) || !needs_kube_apiserver(test) {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let name = format!("env{}", std::process::id() % 10000);
    let o = learner_grid("10", "0.05", out.path(), &bin(), &name)
        .args(["--loss-by", "kernel"])
        .env("CPMLAB_STATE_DIR", state.path())
        .timeout(Duration::from_secs(600))
        .assert();
    let text = stdout(&o);
    eprintln!(
        "{text}\n{}",
        String::from_utf8_lossy(&o.get_output().stderr)
    );
    let left = left_after_teardown(&name);
    assert!(left.is_empty(), "the cell left objects behind: {left:?}");
    assert_eq!(
        exit_past_stale_teardown(
            o.get_output().status.code(),
            &out.path().join("runs"),
            Exits::Envelope
        ),
        Some(0),
        "the cell ran"
    );

    let rows: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("learner.json")).unwrap())
            .unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    let c = &rows[0];
    assert_eq!(c["loss_by"], "kernel", "{c}");
    assert_eq!(c["version"], "3.4", "{c}");
    assert!(c.get("not_run").is_none(), "{c}");
    let joined = c["joined"].as_bool().expect("joined or not");
    let migration = c["migration"].as_str().unwrap_or("");
    // Joined: the migration stopped after the join; not: it was aborted.
    assert_eq!(migration, if joined { "stopped" } else { "aborted" }, "{c}");
    if joined {
        assert!(c["join_s"].as_f64().is_some_and(|s| s > 0.0), "{c}");
    }
    let md = std::fs::read_to_string(out.path().join("learner.md")).unwrap();
    assert!(
        md.contains("loss dropped by the kernel") && md.contains("| 10 ms | "),
        "{md}"
    );

    let run = out
        .path()
        .join("runs")
        .join(c["name"].as_str().unwrap())
        .join("run");
    // The scenario's link reached `link set` with the kernel as the one
    // who drops (it once arrived as the delay line's loss).
    let log = std::fs::read_to_string(run.join("../run.log")).unwrap();
    assert!(
        log.contains("--loss 0.05% --loss-by kernel"),
        "the link was set with the kernel's loss:\n{log}"
    );
    // The kernel dropped packets on the inter-seed link, the delay line
    // none (its own loss is 0 when the kernel's is set).
    let dl = ndjson(&run.join("delayline.ndjson"));
    let last = dl.last().expect("the delay line was sampled");
    let kernel: u64 = last["kernel_dropped"]
        .as_object()
        .unwrap_or_else(|| panic!("the kernel's drops are sampled: {last}"))
        .values()
        .filter_map(Value::as_u64)
        .sum();
    assert!(kernel > 0, "the kernel dropped packets: {last}");
    for dir in ["seed-a>seed-b", "seed-b>seed-a"] {
        let l = &last["links"][dir];
        assert!(l["passed"].as_u64().unwrap_or(0) > 1000, "{dir}: {last}");
        assert_eq!(l["dropped"], 0, "{dir}: the delay line dropped: {last}");
    }
    // The leader's raft progress of each learner, named (a learner etcd
    // knows no name for yet once shared the key "").
    let raft = ndjson(&run.join("raft.ndjson"));
    let learners: Vec<String> = raft
        .iter()
        .filter_map(|v| v["peers"].as_object())
        .flat_map(|m| {
            m.iter()
                .filter(|(_, p)| p["learner"] == true)
                .map(|(k, _)| k.clone())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(!learners.is_empty(), "the learners were sampled");
    assert!(
        learners.iter().all(|n| n.starts_with("seed-b-etcd-")),
        "{learners:?}"
    );
    // TCP's view of the peer connections beside it.
    assert!(!ndjson(&run.join("tcp.ndjson")).is_empty());
}

/// A stand-in for `cpmlab run` (the boundary faked; the script is real):
/// writes the scenario's result.json as a run that got to its verdict, and
/// exits 3 with `teardown_error` set on its first call (`down` failed), or
/// with `error` set when `FAKE_ERROR` is set, and 0 after that.
const FAKE_CPMLAB: &str = r#"#!/bin/sh
# cpmlab run <file> --name <lab> --report-dir <dir>
file=$2; dir=$6; name=$(basename "$file" .yaml)
mkdir -p "$dir/$name"
calls=$(cat "$dir/calls" 2>/dev/null || echo 0); echo $((calls + 1)) > "$dir/calls"
if [ -n "$FAKE_ERROR" ]; then
  echo '{"lab": "'$4'", "error": "up failed", "env_error": true, "migration": null, "timeline": []}' > "$dir/$name/result.json"
  exit 3
fi
if [ "$calls" = 0 ]; then
  echo '{"lab": "'$4'", "error": null, "env_error": true, "teardown_error": "lab left: restart dockerd", "migration": "stopped", "timeline": [{"at_s": 12.0}], "failed_requests": 0}' > "$dir/$name/result.json"
  exit 3
fi
echo '{"lab": "'$4'", "error": null, "env_error": false, "migration": "stopped", "timeline": [{"at_s": 12.0}], "failed_requests": 0}' > "$dir/$name/result.json"
"#;

/// The learner grid over two cells with a fake `cpmlab run` (see
/// [`FAKE_CPMLAB`]), exit code, stderr and the output directory.
fn fake_grid(error: bool) -> (Option<i32>, String, tempfile::TempDir) {
    let out = tempfile::tempdir().unwrap();
    let bin = out.path().join("fake-cpmlab");
    std::fs::write(&bin, FAKE_CPMLAB).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = learner_grid("10,60", "0", out.path(), &bin, "fakegrid");
    c.timeout(Duration::from_secs(60));
    if error {
        c.env("FAKE_ERROR", "1");
    }
    let o = c.output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        out,
    )
}

#[test]
fn a_run_whose_down_failed_counts_then_stops_the_grid_with_exit_3() {
    let (code, err, out) = fake_grid(false);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("its lab's down failed: lab left: restart dockerd"),
        "{err}"
    );
    assert!(err.contains("re-run to resume"), "{err}");
    let calls = std::fs::read_to_string(out.path().join("runs/calls")).unwrap();
    assert_eq!(calls.trim(), "1", "stopped after the first run");
    // The run's cell is counted and rendered; the other one was not run.
    let rows: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("learner.json")).unwrap())
            .unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert_eq!(rows[0]["joined"], true, "{rows:#?}");
    assert_eq!(rows[1]["not_run"], true, "{rows:#?}");
}

#[test]
fn a_run_that_failed_before_its_verdict_stops_the_grid_at_once() {
    let (code, err, out) = fake_grid(true);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("cpmlab run exited 3; stopped (re-run to resume)"),
        "{err}"
    );
    assert!(
        !out.path().join("learner.json").exists(),
        "nothing rendered"
    );
}
