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

/// A quick lab changed by `extra` (a YAML fragment appended to the quick
/// topology): each top-level key it sets replaces the base's.
fn topology_with(dir: &Path, name: &str, extra: &str) -> String {
    let base = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/topologies/quick-migration.yaml"),
    )
    .unwrap();
    let top = |line: &str| -> Option<String> {
        (!line.starts_with(' ') && !line.starts_with('#') && line.contains(':'))
            .then(|| line.split(':').next().unwrap_or_default().to_string())
    };
    let replaced: Vec<String> = extra.lines().filter_map(top).collect();
    let mut kept = String::new();
    let mut skipping = false;
    for line in base.lines() {
        if let Some(key) = top(line) {
            skipping = replaced.contains(&key);
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
    // gardener-apiserver checks every prerequisite and refuses with all
    // that fail (`validateLiveMigrationPrerequisites` appends each to one
    // field.ErrorList): one lab that breaks all four shows each check's
    // own words, where a lab per prerequisite cost CI four labs.
    let topology = topology_with(
        tmp.path(),
        "refused",
        "seeds:\n  - {name: seed-a, role: source}\n  - {name: seed-b, role: destination, provider_type: other, gardenlet_version: v1.149.0}\n\
         garden: {step_interval: 2s, distance: 200}\n\
         shoot: {high_availability: none}\n",
    );
    let words = [
        ("distance", "distance 200 from source region local-seed-a to destination region local-seed-b exceeds threshold 180"),
        ("provider", "source and destination seeds must use the same provider type (local -> other)"),
        ("version", "source and destination seeds must run the same gardenlet version (seed-a: v1.150.0, seed-b: v1.149.0)"),
        ("ha", "shoot control plane must be configured for high availability to perform a live control plane migration"),
    ];
    let lab = Lab::new("garef");
    lab.ok(&["up", "--topology", &topology]);
    let out = lab.cpmlab(&["migrate"]).code(1).get_output().clone();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("gardener-apiserver refused the migration seed-a -> seed-b"),
        "{err}"
    );
    for (tag, w) in words {
        assert!(
            err.contains(w),
            "{tag}: gardener-apiserver's words `{w}` missing: {err}"
        );
    }
    let s = garden_shoot(&lab);
    assert_eq!(s["spec"]["seedName"], "seed-a", "{s:#}");
    assert_eq!(s["status"]["seedName"], "seed-a");
    assert!(s["status"]["liveMigration"].is_null(), "{s:#}");
    assert!(
        live_migrate_intent(&s).is_none(),
        "the intent taken back: {s:#}"
    );
    let st = lab.status();
    assert!(
        st["etcd"]["members"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["seed"] == "seed-a"),
        "{st:#}"
    );
    assert!(st["migration"].is_null(), "{st:#}");
    lab.ok(&["down"]);
}
