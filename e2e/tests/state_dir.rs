//! A state directory the engine cannot see is refused before anything is
//! created. The shape a new user meets: the lab image's cpmlab in a
//! container with only the engine's socket, its state directory its own
//! (not shared with the engine at the same path, as Docker Desktop shares
//! a Mac user's home). `up` has a helper container look for a marker file
//! in the state directory; where the engine sees no directory there, or
//! another one, `up` exits 3 with the fix and leaves no Docker object, and
//! `doctor` says the same. Shared at the same path, `doctor` finds it.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

/// The lab image as `cpmlab images build` makes it here.
fn lab_image() -> String {
    let o = cpmlab_cmd()
        .args(["images", "build", "-o", "json"])
        .output()
        .expect("cpmlab images build");
    assert!(o.status.success(), "{}", show_output(&o));
    let last = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap_or("")
        .to_string();
    let v: serde_json::Value = serde_json::from_str(&last).unwrap();
    v["image"].as_str().unwrap().to_string()
}

fn cpmlab_cmd() -> Command {
    let mut c = Command::new(bin());
    c.env_remove("RUST_LOG");
    c
}

/// `cpmlab ARGS` from the lab image in a container that has the engine's
/// socket and `mounts` (host path, container path), its state directory
/// `state` (a path inside the container).
fn in_container(
    image: &str,
    state: &Path,
    mounts: &[(&Path, &Path)],
    args: &[&str],
) -> std::process::Output {
    let name = format!("cpmlab-e2e-sd-{}", std::process::id());
    let mut c = Command::new("docker");
    c.args(["run", "--rm", "--name", &name])
        .args(["--label", "cpmlab.e2e=state-dir"])
        .args(["-v", "/var/run/docker.sock:/var/run/docker.sock"]);
    for (host, inside) in mounts {
        c.arg("-v")
            .arg(format!("{}:{}", host.display(), inside.display()));
    }
    c.arg("-e")
        .arg(format!("CPMLAB_STATE_DIR={}", state.display()))
        .arg("-e")
        .arg(format!("CPMLAB_IMAGE={image}"))
        .arg("-e")
        .arg("HOME=/tmp")
        .args([image, "cpmlab"])
        .args(args);
    let o = c.output().expect("docker run");
    let _ = docker(&["rm", "-f", &name]).output();
    o
}

#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn up_refuses_a_state_directory_the_engine_does_not_see() {
    if !needs_docker("up_refuses_a_state_directory_the_engine_does_not_see") {
        return;
    }
    let image = lab_image();
    let lab = format!("e2esd{}", std::process::id() % 10000);

    // 1. The CLI's own directory, which the engine's host does not have.
    let private = Path::new("/var/lib/cpmlab-e2e-private-state");
    assert!(
        !private.exists(),
        "{} exists on the host",
        private.display()
    );
    let o = in_container(&image, private, &[], &["up", "--name", &lab]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{}", show_output(&o));
    assert!(
        err.contains("does not see the state directory /var/lib/cpmlab-e2e-private-state")
            && err.contains("no directory at that path"),
        "{err}"
    );
    assert!(
        err.contains("at the same path") && err.contains("CPMLAB_STATE_DIR"),
        "the fix names both ways: {err}"
    );
    assert!(
        lab_objects(&lab).is_empty(),
        "nothing was created: {:?}",
        lab_objects(&lab)
    );
    assert!(!private.exists(), "the engine made no directory there");
    let o = in_container(&image, private, &[], &["doctor"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{}", show_output(&o));
    assert!(
        out.contains("[FAIL] state directory") && out.contains("at the same path"),
        "{out}"
    );

    // 2. Shared, but at another path: the engine sees another directory
    // where the CLI writes.
    let host_dir = tempfile::tempdir().unwrap();
    let seen = tempfile::tempdir().unwrap();
    std::fs::write(seen.path().join("not-a-marker"), "x").unwrap();
    let o = in_container(
        &image,
        seen.path(),
        &[(host_dir.path(), seen.path())],
        &["up", "--name", &lab],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{}", show_output(&o));
    assert!(
        err.contains("another directory at that path") && err.contains("not-a-marker"),
        "{err}"
    );
    assert!(lab_objects(&lab).is_empty(), "{:?}", lab_objects(&lab));
    assert!(
        std::fs::read_dir(host_dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .all(|e| !e
                .file_name()
                .to_string_lossy()
                .starts_with(".cpmlab-engine-sees-")),
        "the marker is removed"
    );

    // 3. Shared at the same path: doctor finds the marker.
    let same = tempfile::tempdir().unwrap();
    let o = in_container(
        &image,
        same.path(),
        &[(same.path(), same.path())],
        &["doctor"],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("[ok  ] state directory") && out.contains("at the same path"),
        "{}",
        show_output(&o)
    );
}
