//! Decides whether the kind form's live e2e test can run here: it needs
//! kind, kubectl and istioctl on the PATH (and the images, which the test
//! checks with `cpmlab doctor --provider kind`). Where they are missing the
//! test is compiled as ignored with the reason, so nextest lists it as
//! skipped (never as passed), and the build says why.

fn which(bin: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
}

fn main() {
    println!("cargo:rerun-if-env-changed=PATH");
    println!("cargo::rustc-check-cfg=cfg(cpmlab_kind_tools)");
    let missing: Vec<&str> = ["kind", "kubectl", "istioctl"]
        .into_iter()
        .filter(|b| !which(b))
        .collect();
    if missing.is_empty() {
        println!("cargo:rustc-cfg=cpmlab_kind_tools");
    } else {
        println!(
            "cargo:warning=kind e2e not run: {} not on PATH (`cpmlab doctor --provider kind` says how to get them)",
            missing.join(", ")
        );
    }
}
