//! Decides whether the kind form's live e2e test is compiled in: it needs
//! kind, kubectl and istioctl, on PATH or where `scripts/build-go --kind`
//! installs them (`${XDG_CACHE_HOME:-~/.cache}/cpmlab/bin`), and the images
//! (which the test checks through `cpmlab up`). Where they are missing the
//! test is compiled as ignored with the reason, so nextest lists it as
//! skipped (never as passed), and the build says why. With CI=true it is
//! always compiled in: CI builds the kind form first (scripts/test), and a
//! kind form that cannot run there fails the test instead of skipping it.

use std::path::PathBuf;

fn install_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|c| c.join("cpmlab").join("bin"))
}

fn found(bin: &str) -> bool {
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()));
    on_path || install_dir().is_some_and(|d| d.join(bin).is_file())
}

fn main() {
    for var in ["PATH", "CI", "XDG_CACHE_HOME", "HOME"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    // The install dir, or its nearest existing ancestor, so that a
    // `scripts/build-go --kind` after this build is seen (a path that does
    // not exist would rerun this script, and rebuild the suite, every time).
    if let Some(d) =
        install_dir().and_then(|d| d.ancestors().find(|a| a.is_dir()).map(PathBuf::from))
    {
        println!("cargo:rerun-if-changed={}", d.display());
    }
    println!("cargo::rustc-check-cfg=cfg(cpmlab_kind_tools)");
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let missing: Vec<&str> = ["kind", "kubectl", "istioctl"]
        .into_iter()
        .filter(|b| !found(b))
        .collect();
    if missing.is_empty() || ci {
        println!("cargo:rustc-cfg=cpmlab_kind_tools");
    }
    if !missing.is_empty() {
        println!(
            "cargo:warning=kind e2e {}: {} not found (`scripts/build-go --kind`; `cpmlab doctor --provider kind` says what else)",
            if ci { "compiled in (CI=true) and will fail" } else { "not run" },
            missing.join(", ")
        );
    }
}
