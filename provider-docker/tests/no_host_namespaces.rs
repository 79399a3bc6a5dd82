//! No code path of the lab enters a lab container's namespaces from the
//! host or reads a lab container's processes through the host's /proc:
//! both need root on the machine that runs dockerd, and neither exists
//! where the engine runs in a VM (Docker Desktop, Colima, Rancher Desktop,
//! WSL2). Namespace work goes through the Docker API (`netns`: a helper
//! container in the target's network namespace).
//!
//! This scans every crate's sources for the ways in; a use that comes back
//! fails here with its file and line.

use std::path::{Path, PathBuf};

/// The ways into another process's namespaces or /proc entry. Spelled in
/// pieces so that this file does not match itself.
fn forbidden() -> Vec<(String, &'static str)> {
    vec![
        (
            ["set", "ns("].concat(),
            "setns(2) enters a namespace from the host",
        ),
        (
            ["ns", "enter"].concat(),
            "nsenter enters a namespace from the host",
        ),
        (
            ["/ns/", "net"].concat(),
            "a network namespace opened by path",
        ),
        (["/proc/", "{"].concat(), "a process's /proc entry by pid"),
        (
            ["/proc/\"", " +"].concat(),
            "a process's /proc entry by pid",
        ),
    ]
}

/// Files allowed a match, and why.
const ALLOWED: &[(&str, &str)] = &[(
    "probe/src/outside.rs",
    "the host-side probe agent (`probe start --kubeconfig`) is a host process cpmlab itself started, not a lab container",
)];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs" || x == "go") {
            out.push(p);
        }
    }
}

#[test]
fn nothing_enters_a_lab_container_s_namespace_from_the_host() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for e in std::fs::read_dir(root).unwrap().flatten() {
        let src = e.path().join("src");
        if src.is_dir() {
            sources(&src, &mut files);
        }
    }
    sources(&root.join("go"), &mut files);
    assert!(
        files.len() > 50,
        "the scan found only {} source files under {}: it is not looking where the code is",
        files.len(),
        root.display()
    );
    let mut found = Vec::new();
    let mut allowed_hits = 0;
    for f in &files {
        let rel = f.strip_prefix(root).unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            for (pat, why) in forbidden() {
                if line.contains(&pat) {
                    if ALLOWED.iter().any(|(a, _)| *a == rel) {
                        allowed_hits += 1;
                    } else {
                        found.push(format!(
                            "{rel}:{}: `{pat}`: {why}\n    {}",
                            n + 1,
                            line.trim()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "host namespace access is back:\n{}",
        found.join("\n")
    );
    // The allowed file still has its match: the patterns still find what
    // they look for.
    assert!(
        allowed_hits > 0,
        "the patterns no longer match the allowed use in {}",
        ALLOWED[0].0
    );
}
