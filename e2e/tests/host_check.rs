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
