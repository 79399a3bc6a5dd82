//! The lab's logic reaches the machinery under it through the `Provider`
//! interface only: the migration, the link, the probes, the scenario
//! runner (timeline, observer, end state) and `status` name no provider's
//! module outside their tests. A change that calls Docker from them fails
//! here, naming file and line. The verdict is a crate of its own
//! (`verdict/`): records in, judgement out, with no dependency that could
//! reach Docker, the lab, the network or an async runtime; so is the model
//! (`model/`: the lab as data), which does not depend on the verdict either.

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

/// The names in a crate's `[dependencies]` table.
fn dependencies(krate: &str) -> Vec<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../{krate}/Cargo.toml"));
    let text = std::fs::read_to_string(&manifest).unwrap();
    let deps = text
        .split("[dependencies]")
        .nth(1)
        .and_then(|d| d.split("\n[").next())
        .expect("a [dependencies] table");
    deps.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split(['=', '.', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// What neither the verdict nor the model may depend on: the lab, Docker,
/// the network, an async runtime.
const BELOW_THE_LAB_BANNED: &[&str] = &[
    "cpmlab",
    "cpmlab-verdict",
    "bollard",
    "tokio",
    "hyper",
    "reqwest",
    "etcd-client",
    "kube",
    "tonic",
];

#[test]
fn the_verdict_crate_needs_no_lab_docker_network_or_runtime() {
    let names = dependencies("verdict");
    assert!(names.iter().any(|n| n == "serde"), "{names:?}");
    for banned in BELOW_THE_LAB_BANNED {
        assert!(
            !names.iter().any(|n| n == banned),
            "the verdict crate depends on {banned}: {names:?}"
        );
    }
}

#[test]
fn the_model_crate_needs_no_lab_verdict_docker_network_or_runtime() {
    let names = dependencies("model");
    assert!(names.iter().any(|n| n == "serde"), "{names:?}");
    for banned in BELOW_THE_LAB_BANNED {
        assert!(
            !names.iter().any(|n| n == banned),
            "the model crate depends on {banned}: {names:?}"
        );
    }
}

/// The layers point one way: the binary (cli/) uses the lab, the lab uses
/// the model and the verdict; nothing below the binary reaches up to it.
#[test]
fn no_crate_below_the_binary_depends_on_it() {
    for krate in ["model", "verdict", "lab"] {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../{krate}/Cargo.toml"));
        let text = std::fs::read_to_string(&manifest).unwrap();
        assert!(
            !text.contains("\"../cli\""),
            "{} depends on the cli crate",
            manifest.display()
        );
    }
    let cli =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/Cargo.toml"))
            .unwrap();
    assert!(
        cli.contains("path = \"../lab\""),
        "the binary is built on the lab: {cli}"
    );
}

/// The kind form builds on the docker form's Docker world (its networks,
/// the wan router, DNS and the clients: `DockerProvider`, the `engine`, the
/// lab `images`, `up` and `down`) and on nothing else of it: the labels,
/// secrets and names both forms use come from the model or the lab's
/// shared modules, never from the other provider's internals.
#[test]
fn the_kind_form_takes_only_the_docker_world_from_the_docker_form() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/provider/kind");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() >= 8, "{files:?}");
    let allowed = [
        "DockerProvider",
        "engine",
        "images",
        "up as docker_up",
        "down::down",
    ];
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (i, line) in code.lines().enumerate() {
            let Some(at) = line.find("provider::docker::") else {
                continue;
            };
            let rest = &line[at + "provider::docker::".len()..];
            let rest = rest.trim_start_matches('{');
            if !allowed.iter().any(|a| rest.starts_with(a)) {
                found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the kind form reaches into the docker form's internals:\n{}",
        found.join("\n")
    );
}

/// The stand-in API server is a server over etcd and nothing of the lab:
/// no cpmlab crate, no Docker.
#[test]
fn the_standin_crate_knows_nothing_of_the_lab() {
    let names = dependencies("standin");
    assert!(names.iter().any(|n| n == "etcd-client"), "{names:?}");
    for banned in [
        "cpmlab",
        "cpmlab-lab",
        "cpmlab-model",
        "cpmlab-verdict",
        "bollard",
    ] {
        assert!(
            !names.iter().any(|n| n == banned),
            "the stand-in depends on {banned}: {names:?}"
        );
    }
}
