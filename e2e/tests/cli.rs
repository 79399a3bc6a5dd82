//! The command line's own habits, without a lab: completion scripts as kind
//! and kubectl offer them, and where labs are kept.

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
