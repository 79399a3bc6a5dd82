//! `cpmlab envelope --grid learner`, CI's one cell with the kernel's loss:
//! five-member plan, 10 ms one-way, 0.05 % of the packets each way dropped
//! by the router's kernel (iptables' statistic match), etcd 3.4, one run.
//! What is checked is the grid's machinery, not the cell's answer (a join
//! that completes or not is the grid's figure): the loss was the kernel's
//! and not the delay line's, the run ended with the join step (stopped
//! there, or aborted), the raft progress names the learners, the tables
//! hold the cell, and nothing is left behind. The whole grid (216 runs) is
//! nightly (`scripts/nightly`, eight shards). The grid's cells, shards,
//! stop rule and tables are unit-tested without a lab
//! (`cpmlab_runner::envelope`).
//! Needs Docker; fails when CI=true and Docker cannot be reached.

mod common;

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use common::*;
use serde_json::Value;

/// `cpmlab envelope --grid learner` over `delays` and `losses` (etcd 3.4,
/// one run a cell) into `out`, as lab `name`.
fn learner_grid(delays: &str, losses: &str, out: &Path, name: &str) -> Command {
    let mut c = Command::new(bin());
    c.args([
        "envelope", "--grid", "learner", "--delays", delays, "--losses", losses,
    ])
    .args([
        "--etcd-versions",
        "3.4",
        "--repeat",
        "1",
        "--name",
        name,
        "--out",
    ])
    .arg(out);
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
    // A join that completes here takes 10 to 33 s (etcd 3.4, 10 ms); one
    // that stalls never does: 45 s, not the grid's 120 s, bounds what a
    // stall costs CI (the cell's answer is not what this checks).
    let o = learner_grid("10", "0.05", out.path(), &name)
        .args(["--loss-by", "kernel", "--join-timeout", "45s"])
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
