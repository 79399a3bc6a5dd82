//! The linux/arm64 lab (what Apple silicon's engines run) on this amd64
//! engine, by emulation: `up --platform linux/arm64`, a probe run of 20 s,
//! `status`, `down`. Every container of the lab runs from the arm64 image
//! and runs arm64 code (`uname -m` inside says aarch64, the engine records
//! the image as arm64); the probes' records come back through the state
//! directory and the safety rules hold; `down` leaves nothing. Each
//! command's time lands in the suite's step times (scripts/test prints the
//! slowest), so CI says what the emulated lab costs.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// The containers of `lab` (running or not), by name.
fn containers(lab: &str) -> Vec<String> {
    let out = stdout(
        &docker(&[
            "ps",
            "-a",
            "--filter",
            &format!("label=cpmlab.lab={lab}"),
            "--format",
            "{{.Names}}",
        ])
        .assert()
        .success(),
    );
    let mut v: Vec<String> = out.lines().map(str::to_string).collect();
    v.sort();
    v
}

#[test]
#[cfg_attr(
    not(all(cpmlab_has_docker, cpmlab_has_kube_apiserver, cpmlab_has_arm64)),
    ignore = "needs Docker (scripts/setup starts it); needs kube-apiserver (scripts/build-go); needs a linux/arm64 lab here (scripts/setup --arm64: emulation, the arm64 parts, the arm64 Debian image)"
)]
fn an_arm64_lab_runs_under_emulation_up_probes_status_down() {
    let test = "an_arm64_lab_runs_under_emulation_up_probes_status_down";
    if !needs_docker(test)
        || !needs_kube_apiserver(test)
        || !needs(test, cpmlab_testenv::Need::Arm64)
    {
        return;
    }
    let lab = Lab::new("a64");
    lab.ok(&["up", "--platform", "linux/arm64"]);

    // The lab's state says what runs how.
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(lab.dir().join("state.json")).unwrap())
            .unwrap();
    let emulation = &state["emulation"];
    assert_eq!(emulation["platform"], "linux/arm64", "{state:#}");
    assert_eq!(emulation["engine"], "linux/amd64", "{state:#}");
    assert!(
        emulation["slow_factor"].as_f64().unwrap() > 1.0,
        "{state:#}"
    );
    let image = state["image"].as_str().unwrap().to_string();
    let arch = stdout(
        &docker(&[
            "image",
            "inspect",
            "-f",
            "{{.Architecture}} {{.Os}}",
            &image,
        ])
        .assert()
        .success(),
    );
    assert_eq!(arch.trim(), "arm64 linux", "{image}");
    let netlink = emulation["netlink_image"].as_str().unwrap();
    assert_ne!(netlink, image, "the helpers' image is the engine's own");

    // Every container of the lab: the arm64 image, arm64 code.
    let names = containers(&lab.name);
    let count = |k: &str| state[k].as_array().map_or(0, Vec::len);
    // The router, DNS and toolbox, each seed's gateway, the members, the
    // API servers.
    assert_eq!(
        names.len(),
        3 + count("seeds") + count("members") + count("apiservers"),
        "{names:?}"
    );
    for c in &names {
        let from = stdout(
            &docker(&["inspect", "-f", "{{.Config.Image}}", c])
                .assert()
                .success(),
        );
        assert_eq!(from.trim(), image, "{c} runs the lab image");
        let m = stdout(&docker(&["exec", c, "uname", "-m"]).assert().success());
        assert_eq!(m.trim(), "aarch64", "{c}");
    }
    // What runs inside is the image's arm64 build (etcd, Envoy, the agent).
    let file = stdout(
        &docker(&[
            "exec",
            &lab.container("seed-a-etcd-0"),
            "sh",
            "-c",
            "head -c 20 /usr/bin/etcd | od -An -tx1 | tr -d ' \\n'",
        ])
        .assert()
        .success(),
    );
    assert!(
        file.ends_with("b700"),
        "etcd's ELF header names EM_AARCH64 (0xb7): {file}"
    );

    // A probe run of 20 s: records come back through the state directory.
    let run = PathBuf::from(lab.ok(&["probe", "start"]).trim());
    std::thread::sleep(Duration::from_secs(20));
    let stop = lab.cpmlab(&["probe", "stop"]);
    let records = ndjson(&run.join("records.ndjson"));
    assert!(records.len() > 20, "{} records\n{stop}", records.len());
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("verdict.json")).unwrap()).unwrap();
    for rule in ["lost-writes", "watch-continuity"] {
        let r = v["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == rule)
            .unwrap_or_else(|| panic!("no rule {rule}: {v:#}"));
        assert_ne!(r["status"], "failed", "{rule}: {r:#}");
    }
    let criteria: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("criteria.json")).unwrap()).unwrap();
    let factor = emulation["slow_factor"].as_f64().unwrap();
    assert_eq!(
        criteria["thresholds"]["read_p99_ms"].as_f64().unwrap(),
        1000.0 * factor,
        "the read SLO stretched: {criteria:#}"
    );

    // status says it, and down leaves nothing.
    let text = stdout(&lab.cpmlab(&["status"]).success());
    assert!(
        text.contains("linux/arm64") && text.contains("emulation"),
        "{text}"
    );
    lab.ok(&["down"]);
    let left = left_after_teardown(&lab.name);
    assert!(left.is_empty(), "down left {left:?}");
}
