//! The lab's logic reaches the machinery under it through the `Provider`
//! interface only: the migration, the link, the probes, the scenario
//! runner (timeline, observer, end state) and `status` name no provider's
//! module outside their tests. A change that calls Docker from them fails
//! here, naming file and line. The verdict is a crate of its own
//! (`verdict/`): records in, judgement out, with no dependency that could
//! reach Docker, the lab, the network or an async runtime.

use std::path::{Path, PathBuf};

fn sources(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            sources(&e.unwrap().path(), out);
        }
    } else if p.extension().is_some_and(|x| x == "rs") {
        out.push(p.to_path_buf());
    }
}

#[test]
fn everything_above_the_provider_uses_its_interface_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for part in ["migrate", "link", "probe", "runner", "status.rs"] {
        sources(&src.join(part), &mut files);
    }
    assert!(files.len() >= 30, "{files:?}");
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        // Unit tests may look at what a provider renders.
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (i, line) in code.lines().enumerate() {
            if ["provider::docker", "provider::kind", "bollard"]
                .iter()
                .any(|p| line.contains(p))
            {
                found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a provider's machinery named outside the provider:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_verdict_crate_needs_no_lab_docker_network_or_runtime() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../verdict/Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let deps = text
        .split("[dependencies]")
        .nth(1)
        .and_then(|d| d.split("\n[").next())
        .expect("a [dependencies] table");
    let names: Vec<&str> = deps
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split(['=', '.', ' ']).next())
        .collect();
    assert!(names.contains(&"serde"), "{names:?}");
    for banned in [
        "cpmlab",
        "bollard",
        "tokio",
        "hyper",
        "reqwest",
        "etcd-client",
        "kube",
        "tonic",
    ] {
        assert!(
            !names.contains(&banned),
            "the verdict crate depends on {banned}: {names:?}"
        );
    }
}
