//! The garden every lab has: gardener-apiserver (built from
//! github.com/gardener/gardener v1.150.0) behind the garden's kube-apiserver,
//! the two gardenlets, and the trigger as an operator pulls it. These tests
//! hold the lab to Gardener's own code: gardener-apiserver's admission
//! refuses each prerequisite it checks (`validateLiveMigrationPrerequisites`)
//! with its own words, and a migration whose gardenlets are killed at every
//! step completes from the garden's conditions alone.

mod common;

use std::path::Path;

use common::*;
use predicates::prelude::*;
use serde_json::Value;

/// A quick lab whose garden is changed by `edit` (a YAML fragment
/// appended to the quick topology).
fn topology_with(dir: &Path, name: &str, extra: &str) -> String {
    let base = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/topologies/quick-migration.yaml"),
    )
    .unwrap();
    // A top-level key `extra` sets again replaces the base's.
    let key = extra.split(':').next().unwrap_or_default();
    let mut kept = String::new();
    let mut skipping = false;
    for line in base.lines() {
        if !line.starts_with(' ') {
            skipping = line.split(':').next() == Some(key);
        }
        if !skipping {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    let p = dir.join(format!("{name}.yaml"));
    std::fs::write(&p, format!("{kept}\n{extra}")).unwrap();
    p.display().to_string()
}

/// The Shoot as the garden has it (`kubectl get shoot -o json` through the
/// garden's kubeconfig).
fn shoot(lab: &Lab) -> Value {
    let k = lab.ok(&["kubeconfig", "--garden"]);
    let out = kubectl_ok(
        Path::new(k.trim()),
        &["-n", "garden-local", "get", "shoot", "local", "-o", "json"],
    );
    serde_json::from_str(&out).unwrap()
}

fn condition(shoot: &Value, step: &str) -> Value {
    shoot["status"]["liveMigration"]["conditions"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["type"] == step).cloned())
        .unwrap_or(Value::Null)
}

/// Each prerequisite gardener-apiserver's admission checks refuses the
/// trigger with its own message: exit 1, nothing started (the Shoot stays
/// bound to the source, no condition, no destination member).
#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn the_admission_refuses_each_prerequisite_with_its_own_words() {
    if !needs_docker("the_admission_refuses_each_prerequisite_with_its_own_words") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            "distance",
            "garden: {distance: 200}\n",
            "distance 200 from source region local-seed-a to destination region local-seed-b exceeds threshold 180",
        ),
        (
            "provider",
            "seeds:\n  - {name: seed-a, role: source}\n  - {name: seed-b, role: destination, provider_type: other}\n",
            "source and destination seeds must use the same provider type (local -> other)",
        ),
        (
            "version",
            "seeds:\n  - {name: seed-a, role: source}\n  - {name: seed-b, role: destination, gardenlet_version: v1.149.0}\n",
            "source and destination seeds must run the same gardenlet version (seed-a: v1.150.0, seed-b: v1.149.0)",
        ),
        (
            "ha",
            "shoot: {high_availability: none}\n",
            "shoot control plane must be configured for high availability to perform a live control plane migration",
        ),
    ];
    for (tag, extra, words) in cases {
        // The quick topology names its seeds; a case that names them again
        // replaces them.
        let extra = if extra.starts_with("seeds:") {
            let base = std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../fixtures/topologies/quick-migration.yaml"),
            )
            .unwrap();
            let without: String = base
                .split("\netcd:")
                .nth(1)
                .map(|rest| format!("etcd:{rest}"))
                .unwrap();
            let p = tmp.path().join(format!("{tag}.yaml"));
            std::fs::write(&p, format!("{extra}{without}")).unwrap();
            p.display().to_string()
        } else {
            topology_with(tmp.path(), tag, extra)
        };
        let lab = Lab::new(&format!("ga{tag}"));
        lab.ok(&["up", "--topology", &extra]);
        lab.cpmlab(&["migrate"])
            .code(1)
            .stderr(predicate::str::contains(
                "gardener-apiserver refused the migration seed-a -> seed-b",
            ))
            .stderr(predicate::str::contains(words));
        let s = shoot(&lab);
        assert_eq!(s["spec"]["seedName"], "seed-a", "{tag}: {s:#}");
        assert_eq!(s["status"]["seedName"], "seed-a", "{tag}");
        assert!(s["status"]["liveMigration"].is_null(), "{tag}: {s:#}");
        assert!(
            s["metadata"]["annotations"]
                .get("migration.gardener.cloud/live-migrate")
                .is_none(),
            "{tag}: the intent taken back: {s:#}"
        );
        let st = lab.status();
        assert!(
            st["etcd"]["members"]
                .as_array()
                .unwrap()
                .iter()
                .all(|m| m["seed"] == "seed-a"),
            "{tag}: {st:#}"
        );
        assert!(st["migration"].is_null(), "{tag}: {st:#}");
        lab.ok(&["down"]);
    }
}

/// The migration as an operator sees it in the garden: triggered by the
/// annotation and `shoots/binding`, every condition True on the Shoot read
/// back from gardener-apiserver (`kubectl get shoot` with `cpmlab
/// kubeconfig --garden`), each written by its owner's gardenlet, the shoot
/// running in the destination, the intent spent; `cpmlab status` reads the
/// conditions from the garden.
#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn a_migration_through_the_garden_ends_with_every_condition_true_on_the_shoot() {
    if !needs_docker("a_migration_through_the_garden_ends_with_every_condition_true_on_the_shoot") {
        return;
    }
    let lab = Lab::new("gmig");
    let tmp = tempfile::tempdir().unwrap();
    let topo = topology_with(tmp.path(), "gm", "garden: {step_interval: 2s}\n");
    lab.ok(&["up", "--topology", &topo]);
    let before = shoot(&lab);
    assert_eq!(before["status"]["seedName"], "seed-a", "{before:#}");
    // Each gardenlet reported its version on its Seed.
    let k = lab.ok(&["kubeconfig", "--garden"]);
    let seeds: Value = serde_json::from_str(&kubectl_ok(
        Path::new(k.trim()),
        &["get", "seeds", "-o", "json"],
    ))
    .unwrap();
    for s in seeds["items"].as_array().unwrap() {
        assert_eq!(s["status"]["gardener"]["version"], "v1.150.0", "{s:#}");
    }
    lab.ok(&["migrate", "--cleanup-before-api", "3s"]);
    let s = shoot(&lab);
    for step in STEPS {
        let c = condition(&s, step);
        assert_eq!(c["status"], "True", "{step}: {c:#}");
        assert_eq!(c["reason"], "StepCompleted", "{step}: {c:#}");
    }
    assert_eq!(s["spec"]["seedName"], "seed-b");
    assert_eq!(s["status"]["seedName"], "seed-b");
    assert!(
        s["metadata"]["annotations"]
            .get("migration.gardener.cloud/live-migrate")
            .is_none(),
        "{s:#}"
    );
    let st = lab.status();
    assert_eq!(st["garden"]["conditions_from"], "garden", "{st:#}");
    assert_eq!(st["migration"]["completed"], true, "{st:#}");
    // Both gardenlets wrote: the source's steps in seed-a's log, the
    // destination's in seed-b's.
    for (seed, step) in [
        ("seed-a", "SourceSeedCleanup"),
        ("seed-b", "EtcdMigrationComplete"),
    ] {
        let log = stdout(
            &docker(&["logs", &format!("{}-{seed}-gardenlet", lab.name)])
                .assert()
                .success(),
        );
        let err = String::from_utf8(
            docker(&["logs", &format!("{}-{seed}-gardenlet", lab.name)])
                .output()
                .unwrap()
                .stderr,
        )
        .unwrap();
        assert!(
            log.contains(step) || err.contains(step),
            "{seed}'s gardenlet ran {step}:\n{log}{err}"
        );
    }
    // Resuming a completed migration is refused clearly.
    lab.cpmlab(&["migrate", "--resume"])
        .code(2)
        .stderr(predicate::str::contains("no migration to resume"));
    lab.ok(&["down"]);
}
