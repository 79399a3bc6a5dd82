//! The garden every lab has: gardener-apiserver (built from
//! github.com/gardener/gardener v1.150.0) behind the garden's kube-apiserver,
//! the two gardenlets, and the trigger as an operator pulls it. These tests
//! hold the lab to Gardener's own code: gardener-apiserver's admission
//! refuses each prerequisite it checks (`validateLiveMigrationPrerequisites`)
//! with its own words. (A migration as the garden records it, every
//! condition True on the Shoot: migrate.rs, the gardenlets going on without
//! the operator's command.)

mod common;

use std::path::Path;

use common::*;
use predicates::prelude::*;

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
        let s = garden_shoot(&lab);
        assert_eq!(s["spec"]["seedName"], "seed-a", "{tag}: {s:#}");
        assert_eq!(s["status"]["seedName"], "seed-a", "{tag}");
        assert!(s["status"]["liveMigration"].is_null(), "{tag}: {s:#}");
        assert!(
            live_migrate_intent(&s).is_none(),
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
