//! The crates' layers, as Cargo sees them: each crate depends on the cpmlab
//! crates below it that its job needs and on nothing above it, so the
//! direction is the compiler's to enforce. This test holds the table of
//! what each may use (a change to the layering is a change here, reviewed)
//! and the few rules a crate boundary cannot state: which crates may reach
//! Docker, and which of the runner's files may name a form.
//!
//! ```text
//! cli
//! runner ─────────────── (scenarios, compare, doctor, the provider factory)
//! provider-kind ──────── (stands on the docker form's Docker world)
//! provider-docker
//! lab ────────────────── (link, agents, gateway agent, migration, status)
//! probe
//! provider ───────────── (the interface)
//! core
//! exposure
//! model   verdict   standin   testenv (the tests' host needs)
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// A crate's manifest.
fn manifest(krate: &str) -> toml::Value {
    let p = root().join(krate).join("Cargo.toml");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The names in one of a crate's dependency tables (package names).
fn deps(krate: &str, table: &str) -> BTreeSet<String> {
    let m = manifest(krate);
    let Some(t) = m.get(table).and_then(|t| t.as_table()) else {
        return BTreeSet::new();
    };
    t.iter()
        .map(|(k, v)| {
            v.get("package")
                .and_then(|p| p.as_str())
                .unwrap_or(k)
                .to_string()
        })
        .collect()
}

/// What each crate may depend on among the workspace's crates (the
/// `[dependencies]` table; dev-dependencies may add a lower crate, never a
/// higher one).
const LAYERS: &[(&str, &[&str])] = &[
    // What a test needs from the host: build- and dev-dependency only.
    ("testenv", &[]),
    ("model", &[]),
    ("verdict", &[]),
    ("standin", &[]),
    ("exposure", &["model"]),
    ("core", &["model", "verdict", "standin", "exposure"]),
    // The garden's objects and its API: the operator's trigger, the
    // gardenlets' conditions.
    ("garden", &["model", "core"]),
    ("provider", &["model", "core"]),
    (
        "probe",
        &["model", "verdict", "core", "exposure", "provider"],
    ),
    (
        "lab",
        &[
            "model", "verdict", "core", "garden", "exposure", "provider", "probe",
        ],
    ),
    (
        "provider-docker",
        &[
            "model", "core", "garden", "exposure", "provider", "probe", "lab",
        ],
    ),
    (
        "provider-kind",
        &[
            "model",
            "core",
            "garden",
            "exposure",
            "provider",
            "probe",
            "provider-docker",
        ],
    ),
    (
        "runner",
        &[
            "model",
            "verdict",
            "core",
            "garden",
            "exposure",
            "provider",
            "probe",
            "lab",
            "provider-docker",
            "provider-kind",
        ],
    ),
    (
        "cli",
        &[
            "model",
            "verdict",
            "core",
            "garden",
            "probe",
            "lab",
            "provider-docker",
            "provider-kind",
            "runner",
        ],
    ),
];

/// The package name of the crate in directory `dir`.
fn package(dir: &str) -> String {
    manifest(dir)["package"]["name"]
        .as_str()
        .unwrap()
        .to_string()
}

fn allowed(krate: &str) -> &'static [&'static str] {
    LAYERS
        .iter()
        .find(|(k, _)| *k == krate)
        .map(|(_, a)| *a)
        .unwrap_or_else(|| panic!("{krate} is not in LAYERS"))
}

fn workspace_crates(deps: &BTreeSet<String>) -> BTreeSet<String> {
    let ours: BTreeSet<String> = LAYERS.iter().map(|(k, _)| package(k)).collect();
    deps.intersection(&ours).cloned().collect()
}

#[test]
fn each_crate_depends_only_on_the_layers_below_it() {
    let mut wrong = Vec::new();
    for (krate, _) in LAYERS {
        let may: BTreeSet<String> = allowed(krate).iter().map(|k| package(k)).collect();
        let has = workspace_crates(&deps(krate, "dependencies"));
        for d in has.difference(&may) {
            wrong.push(format!("{krate} depends on {d}"));
        }
        // A test may use a lower crate it does not need for itself, never a
        // crate above it.
        let above: BTreeSet<String> = LAYERS
            .iter()
            .skip_while(|(k, _)| k != krate)
            .map(|(k, _)| package(k))
            .collect();
        for d in workspace_crates(&deps(krate, "dev-dependencies")).intersection(&above) {
            wrong.push(format!("{krate}'s tests depend on {d}, above it"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_layer_table_holds_every_crate_of_the_workspace() {
    let ws: toml::Value =
        toml::from_str(&std::fs::read_to_string(root().join("Cargo.toml")).unwrap()).unwrap();
    for m in ws["workspace"]["members"].as_array().unwrap() {
        let m = m.as_str().unwrap();
        if m != "e2e" {
            allowed(m);
        }
    }
}

/// Only the two forms reach Docker; below them nothing does (the
/// migration, the link, the probes and status reach a lab through the
/// provider interface), and the verdict and the model need no runtime,
/// network or lab at all.
#[test]
fn only_the_forms_reach_docker_and_the_bottom_needs_no_runtime() {
    for (krate, _) in LAYERS {
        let d = deps(krate, "dependencies");
        let docker = d.contains("bollard");
        let form = matches!(*krate, "provider-docker" | "provider-kind");
        assert!(!docker || form, "{krate} depends on bollard: {d:?}");
    }
    for krate in ["verdict", "model", "exposure"] {
        let d = deps(krate, "dependencies");
        for banned in [
            "bollard",
            "tokio",
            "hyper",
            "reqwest",
            "etcd-client",
            "kube",
            "tonic",
        ] {
            assert!(!d.contains(banned), "{krate} depends on {banned}: {d:?}");
        }
    }
    let standin = deps("standin", "dependencies");
    assert!(standin.contains("etcd-client"), "{standin:?}");
    assert!(
        workspace_crates(&standin).is_empty(),
        "the stand-in API server knows nothing of the lab: {standin:?}"
    );
}

fn sources(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            sources(&e.unwrap().path(), out);
        }
    } else if p.extension().is_some_and(|x| x == "rs") {
        out.push(p.to_path_buf());
    }
}

/// The runner depends on both forms for two jobs only: the factory that
/// picks a lab's provider (`provider.rs`) and the doctor (`doctor.rs`);
/// its scenarios, timeline, observer and comparisons use the interface.
#[test]
fn the_runner_names_a_form_only_in_its_factory_and_doctor() {
    let mut files = Vec::new();
    sources(&root().join("runner/src"), &mut files);
    assert!(files.len() >= 15, "{files:?}");
    let mut found = Vec::new();
    for f in &files {
        if ["provider.rs", "doctor.rs"].iter().any(|n| f.ends_with(n)) {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            if ["cpmlab_provider_docker", "cpmlab_provider_kind", "bollard"]
                .iter()
                .any(|p| line.contains(p))
            {
                found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a form named in the runner's logic:\n{}",
        found.join("\n")
    );
}

/// The kind form builds on the docker form's Docker world (its networks,
/// the wan router, DNS and the clients: `DockerProvider`, the `engine`, the
/// lab `images`, `up` and `down`) and on nothing else of it: the labels,
/// secrets and names both forms use come from the model or the shared
/// crates, never from the other form's internals.
#[test]
fn the_kind_form_takes_only_the_docker_world_from_the_docker_form() {
    let mut files = Vec::new();
    sources(&root().join("provider-kind/src"), &mut files);
    assert!(files.len() >= 8, "{files:?}");
    // The garden is part of that world: one garden, on the garden
    // network, for either form (`garden_specs`).
    let allowed = [
        "DockerProvider",
        "engine",
        "images",
        "up as docker_up",
        "down::down",
        "garden_specs",
    ];
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(at) = rest.find("cpmlab_provider_docker::") {
                rest = &rest[at + "cpmlab_provider_docker::".len()..];
                let item = rest.trim_start_matches('{');
                if !allowed.iter().any(|a| item.starts_with(a)) {
                    found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "the kind form reaches into the docker form's internals:\n{}",
        found.join("\n")
    );
}
