//! The shoot API tier in the lab: replicas of the real kube-apiserver, of
//! the generic server (k8s.io/apiserver) or of the stand-in behind the
//! source gateway, reachable by the API name; kubectl through `cpmlab
//! kubeconfig`; a graceful shutdown of one replica costs no request.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use common::*;
use predicates::prelude::*;

fn kubectl(kubeconfig: &str, args: &[&str]) -> Command {
    let mut c = Command::new("kubectl");
    c.arg("--kubeconfig").arg(kubeconfig).args(args);
    c
}

/// Runs kubectl, asserts exit 0, and returns stdout.
fn kok(kubeconfig: &str, args: &[&str]) -> String {
    stdout(&kubectl(kubeconfig, args).assert().success())
}

#[test]
#[ignore = "nightly: scripts/nightly runs it; CI keeps within 35 minutes: it runs a replica's graceful shutdown on k8s.io/apiserver's code (probes.rs, the generic server), kubectl through `cpmlab kubeconfig` (lab_foundation.rs, api_servers.rs), and kube-apiserver's shutdown in every scenario's cleanup"]
fn kubectl_through_the_lab_and_graceful_replica_shutdown_kube_apiserver() {
    let test = "kubectl_through_the_lab_and_graceful_replica_shutdown_kube_apiserver";
    if needs_docker(test) && needs_kube_apiserver(test) {
        let version = cpmlab_core::go_parts::KUBE_APISERVER
            .manifest()
            .map(|m| m.version)
            .unwrap_or_else(|| "v1.".into());
        kubectl_through_the_lab("kube-apiserver", &version, "apik");
    }
}

#[test]
#[ignore = "nightly: scripts/nightly runs it; CI runs the generic server's graceful shutdown (probes.rs), through the gateway (gateway.rs) and kubectl (api_servers.rs)"]
fn kubectl_through_the_lab_and_graceful_replica_shutdown_generic() {
    if needs_docker("kubectl_through_the_lab_and_graceful_replica_shutdown_generic")
        && needs_generic("kubectl_through_the_lab_and_graceful_replica_shutdown_generic")
    {
        kubectl_through_the_lab("generic", "cpmlab.generic", "apig");
    }
}

#[test]
#[ignore = "nightly: scripts/nightly runs it; CI runs the generic server (probes.rs, api_servers.rs) and kube-apiserver in every scenario"]
fn kubectl_through_the_lab_and_graceful_replica_shutdown_standin() {
    if needs_docker("kubectl_through_the_lab_and_graceful_replica_shutdown_standin") {
        kubectl_through_the_lab("standin", "cpmlab-standin", "apis");
    }
}

/// The API tier of a lab running `server`, whose /version contains `marker`.
fn kubectl_through_the_lab(server: &str, marker: &str, tag: &str) {
    let lab = Lab::new(tag);
    let topo =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/topologies/fast-shutdown.yaml");
    lab.ok(&[
        "up",
        "--topology",
        topo.to_str().unwrap(),
        "--api-server",
        server,
    ]);

    let s = lab.status();
    let reps = s["api"]["replicas"].as_array().unwrap();
    assert_eq!(reps.len(), 2, "{s:#}");
    assert!(
        reps.iter()
            .all(|r| r["ready"] == true && r["seed"] == "seed-a"),
        "{s:#}"
    );
    assert_eq!(s["api"]["server"], server, "{s:#}");
    assert!(
        s["api"]["version"].as_str().unwrap().contains(marker),
        "{s:#}"
    );

    // Each replica talks only to its own seed's etcd members (3, in seed-a).
    let seed_a = s["seeds"][0]["subnet"]
        .as_str()
        .unwrap()
        .trim_end_matches("0/24")
        .to_string();
    let o = docker(&[
        "inspect",
        "-f",
        "{{json .Config.Cmd}}",
        &lab.container("seed-a-apiserver-0"),
    ])
    .assert();
    let cmd: Vec<String> = serde_json::from_slice(&o.get_output().stdout).unwrap();
    let servers = cmd
        .iter()
        .find_map(|a| a.strip_prefix("--etcd-servers="))
        .expect("--etcd-servers");
    let urls: Vec<&str> = servers.split(',').collect();
    assert_eq!(urls.len(), 3, "{servers}");
    assert!(
        urls.iter()
            .all(|u| u.starts_with(&format!("https://{seed_a}"))),
        "{servers} not all in {seed_a}0/24"
    );

    // kubectl through the lab's kubeconfig: get, create, apply, watch.
    let kc = lab.ok(&["kubeconfig"]).trim().to_string();
    assert!(kok(&kc, &["version"]).contains(marker));
    kok(
        &kc,
        &["create", "configmap", "e2e-one", "--from-literal=a=1"],
    );
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("cm.yaml");
    for v in ["1", "2"] {
        std::fs::write(
            &f,
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: e2e-two\ndata:\n  v: \"{v}\"\n"),
        )
        .unwrap();
        kok(&kc, &["apply", "-f", f.to_str().unwrap()]);
    }
    let got = kok(&kc, &["get", "cm", "e2e-two", "-o", "jsonpath={.data.v}"]);
    assert_eq!(got, "2");
    // In the background while a configmap is created: a std Command, as
    // assert_cmd cannot spawn.
    let mut watch = std::process::Command::new("kubectl")
        .args([
            "--kubeconfig",
            &kc,
            "get",
            "cm",
            "-w",
            "--output-watch-events",
            "-o",
            "name",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    kok(
        &kc,
        &["create", "configmap", "e2e-three", "--from-literal=a=3"],
    );
    std::thread::sleep(Duration::from_millis(1500));
    let _ = watch.kill();
    let seen = String::from_utf8_lossy(&watch.wait_with_output().unwrap().stdout).to_string();
    assert!(seen.contains("configmap/e2e-three"), "watch saw: {seen}");

    // One of two replicas' pods deleted (a graceful shutdown): requests
    // keep succeeding. Its endpoint leaves the gateway at once
    // (terminating), so new requests go to the other replica; those on
    // the way are served to the end while it shuts down.
    let (ok, failed) = std::thread::scope(|scope| {
        let stopper = scope.spawn(|| lab.delete_replica("seed-a-apiserver-0"));
        let t0 = Instant::now();
        let (mut ok, mut failed) = (0, Vec::new());
        while t0.elapsed() < Duration::from_secs(6) {
            let o = kubectl(
                &kc,
                &["get", "cm", "e2e-one", "-o", "name", "--request-timeout=2s"],
            )
            .output()
            .expect("run kubectl");
            if o.status.success() {
                ok += 1;
            } else {
                failed.push(String::from_utf8_lossy(&o.stderr).to_string());
            }
        }
        stopper.join().unwrap().success();
        (ok, failed)
    });
    assert!(
        failed.is_empty(),
        "{} of {} requests failed during a graceful shutdown: {failed:?}",
        failed.len(),
        ok + failed.len()
    );
    assert!(ok > 10, "only {ok} requests ran");
    let s = lab.status();
    let ready: Vec<bool> = s["api"]["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ready"] == true)
        .collect();
    assert_eq!(ready, [false, true], "{s:#}");
    lab.ok(&["down"]);
}

/// A topology that asks for kube-apiserver where none can be found (here:
/// `CPMLAB_KUBE_APISERVER` names no file) is refused with exit 3 and the
/// fix, before anything of the lab exists.
#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn kube_apiserver_asked_for_and_missing_is_refused_creating_nothing() {
    if !needs_docker("kube_apiserver_asked_for_and_missing_is_refused_creating_nothing") {
        return;
    }
    let lab = Lab::new("kapi");
    let dir = tempfile::tempdir().unwrap();
    let topo = dir.path().join("kapi.yaml");
    std::fs::write(&topo, "api:\n  server: kube-apiserver\n").unwrap();
    lab.cmd()
        .env("CPMLAB_KUBE_APISERVER", dir.path().join("no-such-binary"))
        .args(["up", "--topology", topo.to_str().unwrap()])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("no binary was found"))
        .stderr(predicate::str::contains(
            "fix: run scripts/build-go kube-apiserver",
        ));
    assert_eq!(
        lab_objects(&lab.name),
        Vec::<String>::new(),
        "nothing may be created"
    );
}
