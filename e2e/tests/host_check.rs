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

/// scripts/setup built the generic API server before the tests: building
/// it again is a cache hit (package versions and sources unchanged) that
/// installs the same binary, in seconds.
#[test]
fn a_second_apiserver_build_is_a_cache_hit() {
    if std::env::var("CI").map(|v| v != "true").unwrap_or(true)
        && cpmlab::apiserver::launch::find_generic_apiserver().is_none()
    {
        eprintln!(
            "SKIPPED a_second_apiserver_build_is_a_cache_hit: not built here (run scripts/setup)"
        );
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let started = std::time::Instant::now();
    Command::new(root.join("scripts/build-apiserver"))
        .current_dir(&root)
        .assert()
        .success()
        .stderr(predicate::str::contains("cache hit"))
        .stderr(predicate::str::contains("installed"));
    eprintln!("cache hit in {:.1} s", started.elapsed().as_secs_f64());
    let bin = cpmlab::apiserver::launch::find_generic_apiserver().expect("installed");
    Command::new(bin)
        .arg("--version")
        .assert()
        .success()
        .stdout(predicate::str::contains("+cpmlab.generic"));
}
