//! scripts/check-host, which scripts/setup runs right after installing:
//! it names the package to install when a needed file is absent, and
//! passes on a host that scripts/setup prepared.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/check-host")
}

#[test]
fn a_missing_file_fails_with_the_fix_line() {
    let dir = tempfile::tempdir().unwrap();
    let needs = dir.path().join("needs");
    std::fs::write(
        &needs,
        "# a well-known type that is not there\n\
         /nonexistent/include/google/protobuf/descriptor.proto libprotobuf-dev\n\
         /bin/sh dash\n",
    )
    .unwrap();
    Command::new(script())
        .arg(&needs)
        .assert()
        .code(3)
        .stderr(predicate::str::contains(
            "fix: apt-get install -y libprotobuf-dev   # /nonexistent/include/google/protobuf/descriptor.proto is missing",
        ))
        .stderr(predicate::str::contains("dash").not());
}

#[test]
fn an_unreadable_needs_list_is_bad_input() {
    Command::new(script())
        .arg("/nonexistent/needs")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read the needs list"));
}

#[test]
fn the_prepared_host_passes() {
    // scripts/test runs scripts/setup first, so the real list must hold.
    Command::new(script())
        .assert()
        .success()
        .stderr(predicate::str::contains("check-host: ok"));
}

/// scripts/setup built the Go parts before the tests: building them again
/// is a cache hit per part (go.mod, go.sum and sources unchanged) that
/// installs the same binaries with their manifests, in seconds, and each
/// binary says the version its manifest names.
#[test]
fn a_second_go_build_is_a_cache_hit() {
    use cpmlab_core::go_parts::{KUBE_APISERVER, PARTS};
    if std::env::var("CI").map(|v| v != "true").unwrap_or(true) && KUBE_APISERVER.find().is_none() {
        eprintln!("SKIPPED a_second_go_build_is_a_cache_hit: not built here (run scripts/setup)");
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let started = std::time::Instant::now();
    // Every part of build-go's that the lab finds: the demo's (group
    // docker) and the tests' (group tests), named.
    let parts: Vec<&str> = PARTS
        .iter()
        .filter(|p| p.installer == "scripts/build-go")
        .map(|p| p.name)
        .collect();
    let out = Command::new(root.join("scripts/build-go"))
        .args(&parts)
        .current_dir(&root)
        .assert()
        .success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    eprintln!("{err}cache hit in {:.1} s", started.elapsed().as_secs_f64());
    for part in PARTS.iter().filter(|p| p.installer == "scripts/build-go") {
        assert!(
            err.contains(&format!("{}: cache hit", part.name)),
            "{} was rebuilt:\n{err}",
            part.name
        );
        let m = part
            .manifest()
            .unwrap_or_else(|| panic!("{}: no manifest", part.name));
        let bin = part.find().expect("installed");
        let version = Command::new(bin.path()).arg("--version").output().unwrap();
        let said = String::from_utf8_lossy(&version.stdout);
        // kube-apiserver: "Kubernetes v1.36.3"; the generic server:
        // "v1.36.3+cpmlab.generic"; etcd: "etcd Version: 3.5.27".
        assert!(
            said.contains(m.version.trim_start_matches('v')),
            "{} says {said:?}, its manifest {}",
            part.name,
            m.version
        );
    }
}

/// The parts scripts/build-go builds by default (group `docker`, what the
/// demo needs: every part the lab requires) and with `--tests` (group
/// `tests`) are the parts the lab looks for (and doctor names); its
/// `--kind` parts (group `kind`) hold every tool the kind form runs on the
/// host; `--druid` (group `druid`) builds etcd-druid's path.
#[test]
fn build_go_builds_every_part_the_lab_finds() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = std::fs::read_to_string(root.join("scripts/build-go")).unwrap();
    // A PARTS line: "part|group|module dir|package|what it is"
    let rows: Vec<Vec<&str>> = script
        .lines()
        .filter_map(|l| l.trim().strip_prefix('"'))
        .filter(|l| l.matches('|').count() == 4)
        .map(|l| l.split('|').collect())
        .collect();
    let group =
        |g: &str| -> Vec<&str> { rows.iter().filter(|r| r[1] == g).map(|r| r[0]).collect() };
    let unknown: Vec<_> = rows
        .iter()
        .filter(|r| !["docker", "tests", "kind", "druid"].contains(&r[1]))
        .map(|r| (r[0], r[1]))
        .collect();
    assert!(unknown.is_empty(), "parts in no known group: {unknown:?}");
    let mut found: Vec<&str> = cpmlab_core::go_parts::PARTS
        .iter()
        .filter(|p| p.installer == "scripts/build-go")
        .map(|p| p.name)
        .collect();
    found.sort();
    let mut built: Vec<&str> = group("docker").into_iter().chain(group("tests")).collect();
    built.sort();
    assert_eq!(built, found);
    // What the lab cannot run without is the demo's.
    for p in cpmlab_core::go_parts::PARTS
        .iter()
        .filter(|p| p.required && p.installer == "scripts/build-go")
    {
        assert!(
            group("docker").contains(&p.name),
            "{} is required but not built by default",
            p.name
        );
    }
    // etcd-druid's path (`--druid`, docs/etcd-druid.md): not yet in an
    // image, so the lab looks for none of them.
    assert_eq!(
        group("druid"),
        ["etcd-druid", "etcdbrctl", "cpmlab-etcd-launcher"]
    );
    let kind = group("kind");
    for (tool, _) in cpmlab_provider_kind::tools::TOOLS {
        assert!(
            kind.contains(tool),
            "the kind form runs {tool}, which scripts/build-go --kind does not build: {kind:?}"
        );
    }
}
