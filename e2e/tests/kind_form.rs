//! The kind form: what can be checked on any machine (the render through
//! the CLI, the refusal naming what is missing), and the live form where
//! kind, kubectl, istioctl and the images are present.

mod common;

use common::*;
use predicates::prelude::*;

/// `up --provider kind --render DIR` writes every file and creates nothing;
/// bad kind settings are exit 2, also without `--provider kind`.
#[test]
fn kind_form_renders_without_creating_anything() {
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut c = assert_cmd::Command::new(bin());
        c.env("CPMLAB_STATE_DIR", state.path())
            .env("CPMLAB_NAME", "kindrender")
            .env_remove("RUST_LOG")
            .args(args);
        c.assert()
    };
    let dir = out.path().join("r");
    run(&[
        "up",
        "--provider",
        "kind",
        "--render",
        dir.to_str().unwrap(),
    ])
    .success()
    .stdout(predicate::str::contains("nothing created"));
    for f in [
        "README.md",
        "steps.txt",
        "kind/seed-a.yaml",
        "kind/seed-b.yaml",
        "seed-b/istio-operator.yaml",
        "seed-b/manifests/30-gateway-kube-apiserver.yaml",
        "seed-b/manifests/30-gateway-etcd-main.yaml",
        "seed-b/manifests/33-envoyfilter-apiserver-tls-termination.yaml",
        "seed-a/secrets/seed-a-etcd-0-tls.yaml",
        "seed-a/metallb/00-ipaddresspool.yaml",
    ] {
        assert!(dir.join(f).is_file(), "{f} not rendered");
    }
    let steps = std::fs::read_to_string(dir.join("steps.txt")).unwrap();
    assert!(
        steps.contains("KIND_EXPERIMENTAL_DOCKER_NETWORK=kindrender-seed-b kind create cluster"),
        "{steps}"
    );
    // Nothing was created: no lab state, no Docker object.
    assert!(!state.path().join("labs/kindrender").exists());
    run(&["up", "--provider", "kind", "--nodes", "2", "--render", "x"])
        .code(2)
        .stderr(predicate::str::contains("--nodes 2"));
    run(&["up", "--render", "x"])
        .code(2)
        .stderr(predicate::str::contains("--provider kind"));
}

/// Without kind's tools, `up --provider kind` exits 3 naming each missing
/// one, and `doctor --provider kind` lists them with how to get each.
#[test]
fn kind_form_names_what_is_missing() {
    if !docker_or_skip("kind_form_names_what_is_missing") {
        return;
    }
    let doctor = assert_cmd::Command::new(bin())
        .args(["doctor", "--provider", "kind", "-o", "json"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    assert_eq!(report["provider"], "kind");
    let failing: Vec<String> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["level"] == "fail")
        .map(|c| c["detail"].as_str().unwrap().to_string())
        .collect();
    if failing.is_empty() {
        eprintln!("this host has everything the kind form needs: kind_live_form runs");
        return;
    }
    assert_eq!(doctor.status.code(), Some(3));
    assert!(report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["level"] == "fail")
        .all(|c| c["fix"].as_str().is_some_and(|f| !f.is_empty())));
    eprintln!("not run here (kind_live_form): {}", failing.join("; "));
    let state = tempfile::tempdir().unwrap();
    assert_cmd::Command::new(bin())
        .env("CPMLAB_STATE_DIR", state.path())
        .env("CPMLAB_NAME", "kindmissing")
        .env_remove("RUST_LOG")
        .args(["up", "--provider", "kind"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains(
            "the kind form needs what this host lacks",
        ));
    assert!(lab_objects("kindmissing").is_empty());
    // A scenario run on the kind form: the same refusal, exit 3, per
    // scenario in its report.
    let report = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/scenarios/six-member-25ms.yaml");
    assert_cmd::Command::new(bin())
        .env("CPMLAB_STATE_DIR", state.path())
        .env("CPMLAB_NAME", "kindmissing")
        .env_remove("RUST_LOG")
        .args(["run", "--provider", "kind", "--report-dir"])
        .arg(report.path())
        .arg(&fixture)
        .assert()
        .code(3)
        .stdout(predicate::str::contains(
            "the kind form needs what this host lacks",
        ));
    assert!(lab_objects("kindmissing").is_empty());
}

/// The live kind form: two clusters, Istio, etcd and kube-apiserver; the
/// source's etcd healthy through the ingress; a six-member migration under
/// the probes with a passing verdict; a clean `down` (no kind cluster, no
/// lab object left). Compiled as ignored where kind, kubectl or istioctl is
/// missing (the build says so); where they exist, missing images fail it
/// in CI.
#[test]
#[cfg_attr(
    not(cpmlab_kind_tools),
    ignore = "not run: kind, kubectl or istioctl missing (cpmlab doctor --provider kind)"
)]
fn kind_live_form() {
    let lab = Lab::new("kind");
    // TLS passthrough: with Gardener's default (TLS ends at the ingress)
    // clients kept on the source gateway get 503 once the source replicas
    // are gone (issue 28's finding), and a passing verdict is not expected.
    let up = lab
        .cmd()
        .args(["up", "--provider", "kind", "--api-exposure", "passthrough"])
        .assert();
    let out = up.get_output().clone();
    if out.status.code() == Some(3) {
        let why = String::from_utf8_lossy(&out.stderr);
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("kind_live_form: CI=true and the kind form cannot run: {why}");
        }
        eprintln!("not run: {why}");
        return;
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ctx = format!("kind-{}-seed-a", lab.name);
    let health = std::process::Command::new("kubectl")
        .args([
            "--context",
            &ctx,
            "-n",
            "shoot--local--local",
            "exec",
            "seed-a-etcd-0-0",
            "--",
            "etcdctl",
            "--cacert=/etc/etcd/pki/ca.crt",
            "--cert=/etc/etcd/pki/server.crt",
            "--key=/etc/etcd/pki/server.key",
            "--endpoints=https://seed-a-etcd-1.local.cpmlab.test:2379",
            "endpoint",
            "health",
        ])
        .output()
        .unwrap();
    assert!(
        health.status.success(),
        "{}",
        String::from_utf8_lossy(&health.stderr)
    );
    // The lab's state says kind, and the lab's commands take it from there.
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(lab.dir().join("state.json")).unwrap())
            .unwrap();
    assert_eq!(state["provider"], "kind", "{state}");
    lab.ok(&["link", "set", "seed-a:seed-b", "--delay", "10ms"]);
    let run = std::path::PathBuf::from(lab.ok(&["probe", "start"]).trim());
    std::thread::sleep(std::time::Duration::from_secs(10));
    lab.ok(&["migrate", "--plan", "six-member"]);
    std::thread::sleep(std::time::Duration::from_secs(10));
    let stop = lab.cpmlab(&["probe", "stop"]);
    let verdict = std::fs::read_to_string(run.join("verdict.json"))
        .unwrap_or_else(|e| panic!("verdict.json: {e}\n{stop}"));
    assert_eq!(
        stop.get_output().status.code(),
        Some(0),
        "the kind form's migration did not pass: {verdict}"
    );
    lab.ok(&["down"]);
    assert!(lab_objects(&lab.name).is_empty());
    let clusters = std::process::Command::new("kind")
        .args(["get", "clusters"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&clusters.stdout).contains(&lab.name),
        "kind clusters left: {}",
        String::from_utf8_lossy(&clusters.stdout)
    );
}
