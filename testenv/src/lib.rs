//! What a test needs from the host, in one place, and the one rule for a
//! need that is missing: **off CI the test does not run and says so; with
//! `CI=true` it runs and fails.**
//!
//! A test crate's build script calls [`build_script`] with the needs of its
//! tests; for each need found (every need where `CI=true`) it sets the cfg
//! `cpmlab_has_<need>`, and it warns naming what is missing and how to get
//! it. A test then carries
//!
//! ```text
//! #[cfg_attr(not(cpmlab_has_docker), ignore = "needs Docker (scripts/setup starts it)")]
//! ```
//!
//! so that where Docker was not found it is compiled as ignored: nextest
//! and `cargo test` report it skipped, with that reason, never passed. A
//! test compiled in calls [`require`] first, which panics with the fix when
//! the need has gone since the build (or was never there, with `CI=true`).
//!
//! One need no script can meet, a kernel with `sch_netem`
//! ([`Need::forced_in_ci`]), is skipped where it is missing with `CI=true`
//! too: CI's machines have none.
//!
//! No dependencies: the verdict, at the bottom of the workspace, uses it.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Something a test needs from the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A Docker engine that answers (`docker info`).
    Docker,
    /// kube-apiserver, built by `scripts/build-go`.
    KubeApiserver,
    /// The generic API server (`cpmlab-apiserver`), built by `scripts/build-go`.
    GenericApiserver,
    /// client-go's probe (`cpmlab-clientgo`), built by `scripts/build-go`.
    Clientgo,
    /// Envoy, fetched by `scripts/fetch-envoy`.
    Envoy,
    /// Debian's Chromium (`/usr/bin/chromium`), installed by `scripts/setup`.
    Chromium,
    /// kind, kubectl and istioctl, built by `scripts/build-go --kind`.
    KindTools,
    /// etcd and etcdctl (Debian's, `scripts/setup`) and kubectl
    /// (`scripts/build-go --kind`), for an API server run by hand.
    EtcdKubectl,
    /// etcd-druid v0.38.1, built by `scripts/build-go --druid`.
    Druid,
    /// A kernel with `sch_netem` (built in or as a module). Not something
    /// a script can install: where it is missing a test that needs it is
    /// skipped, with `CI=true` too (this project's machines have none).
    Netem,
    /// Root with `useradd` and `runuser`: a test that runs cpmlab as a user
    /// who is not root, in the `docker` group, makes that user.
    Root,
    /// A linux/arm64 lab on this amd64 host: qemu-aarch64 registered with
    /// binfmt_misc (flags P and F), the arm64 parts (`scripts/build-arch arm64`)
    /// and the arm64 Debian image (`scripts/debian-base --arch arm64`):
    /// `scripts/setup --arm64` makes all three.
    Arm64,
}

impl Need {
    /// Every need there is.
    pub const ALL: [Need; 12] = [
        Need::Docker,
        Need::KubeApiserver,
        Need::GenericApiserver,
        Need::Clientgo,
        Need::Envoy,
        Need::Chromium,
        Need::KindTools,
        Need::EtcdKubectl,
        Need::Druid,
        Need::Netem,
        Need::Root,
        Need::Arm64,
    ];

    /// The cfg a build script sets when the need is met.
    pub fn cfg(self) -> &'static str {
        match self {
            Need::Docker => "cpmlab_has_docker",
            Need::KubeApiserver => "cpmlab_has_kube_apiserver",
            Need::GenericApiserver => "cpmlab_has_generic_apiserver",
            Need::Clientgo => "cpmlab_has_clientgo",
            Need::Envoy => "cpmlab_has_envoy",
            Need::Chromium => "cpmlab_has_chromium",
            Need::KindTools => "cpmlab_has_kind_tools",
            Need::EtcdKubectl => "cpmlab_has_etcd_kubectl",
            Need::Druid => "cpmlab_has_druid",
            Need::Netem => "cpmlab_has_netem",
            Need::Root => "cpmlab_has_root",
            Need::Arm64 => "cpmlab_has_arm64",
        }
    }

    /// What it is, and how to get it.
    pub fn fix(self) -> &'static str {
        match self {
            Need::Docker => "Docker is not reachable (scripts/setup starts dockerd)",
            Need::KubeApiserver => "kube-apiserver is not built (scripts/build-go)",
            Need::GenericApiserver => "cpmlab-apiserver is not built (scripts/build-go --tests)",
            Need::Clientgo => "cpmlab-clientgo is not built (scripts/build-go)",
            Need::Envoy => "Envoy is not there (scripts/fetch-envoy)",
            Need::Chromium => "/usr/bin/chromium is missing (scripts/setup installs chromium)",
            Need::KindTools => {
                "kind, kubectl, istioctl or cpmlab-gardener-render is not built (scripts/build-go --kind; \
                 `cpmlab doctor --provider kind` says what else)"
            }
            Need::EtcdKubectl => {
                "etcd, etcdctl or kubectl is missing (scripts/setup installs etcd; \
                 scripts/build-go --kind builds kubectl)"
            }
            Need::Druid => "etcd-druid is not built (scripts/build-go --druid)",
            Need::Netem => {
                "the kernel has no sch_netem (no script can add it: run on a kernel \
                 with CONFIG_NET_SCH_NETEM; `cpmlab doctor` says `link backend: netem` there)"
            }
            Need::Root => {
                "not root, or no useradd/runuser: the test makes a user in the docker group \
                 (run scripts/test as root, as CI does)"
            }
            Need::Arm64 => {
                "no linux/arm64 lab here: qemu-aarch64 is not registered with binfmt_misc, \
                 or the arm64 parts or Debian image are not built (scripts/setup --arm64)"
            }
        }
    }

    /// Whether the host has it now.
    pub fn found(self) -> bool {
        match self {
            Need::Docker => Command::new("docker")
                .args(["info", "--format", "{{.ServerVersion}}"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
            Need::KubeApiserver => part("kube-apiserver", "CPMLAB_KUBE_APISERVER"),
            Need::GenericApiserver => part("cpmlab-apiserver", "CPMLAB_APISERVER"),
            Need::Clientgo => part("cpmlab-clientgo", "CPMLAB_CLIENTGO"),
            Need::Envoy => part("envoy", "CPMLAB_ENVOY"),
            Need::Chromium => std::path::Path::new("/usr/bin/chromium").is_file(),
            Need::KindTools => ["kind", "kubectl", "istioctl", "cpmlab-gardener-render"]
                .iter()
                .all(|b| tool(b)),
            Need::EtcdKubectl => ["etcd", "etcdctl", "kubectl"].iter().all(|b| tool(b)),
            Need::Druid => part("etcd-druid", "CPMLAB_ETCD_DRUID"),
            Need::Netem => kernel_has("sch_netem"),
            Need::Root => {
                Command::new("id")
                    .arg("-u")
                    .output()
                    .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
                    && ["useradd", "runuser"].iter().all(|b| tool(b))
            }
            Need::Arm64 => {
                let handler = std::fs::read_to_string("/proc/sys/fs/binfmt_misc/qemu-aarch64")
                    .is_ok_and(|t| {
                        t.starts_with("enabled")
                            && t.lines().any(|l| {
                                l.starts_with("flags:") && l.contains('F') && l.contains('P')
                            })
                    });
                let parts = install_dir().is_some_and(|d| d.join("linux-arm64/cpmlab").is_file());
                let image = Command::new("docker")
                    .args(["image", "inspect", "cpmlab/debian:bookworm-arm64"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                handler && parts && image
            }
        }
    }

    /// Whether `CI=true` compiles the tests that need it in, to fail where
    /// it is missing: every need a script can meet. A kernel's qdisc is
    /// none: its tests are skipped where it is missing, in CI too.
    pub fn forced_in_ci(self) -> bool {
        self != Need::Netem
    }
}

/// Whether the running kernel has `module`, loaded, built in, or as a
/// module it can load (the lab's router asks for the qdisc, and the kernel
/// loads it). Where the kernel's module list cannot be read (a Docker
/// engine in a VM), no.
fn kernel_has(module: &str) -> bool {
    if std::path::Path::new("/sys/module").join(module).exists() {
        return true;
    }
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let dir = std::path::Path::new("/lib/modules").join(release.trim());
    ["modules.builtin", "modules.dep"].iter().any(|f| {
        std::fs::read_to_string(dir.join(f)).is_ok_and(|t| {
            t.lines().any(|l| {
                l.split(':')
                    .next()
                    .and_then(|p| p.rsplit('/').next())
                    .is_some_and(|name| name.starts_with(&format!("{module}.ko")))
            })
        })
    })
}

/// `${XDG_CACHE_HOME:-~/.cache}/cpmlab/bin`, where `scripts/build-go` and
/// `scripts/fetch-envoy` install the lab's parts (as `cpmlab_core::go_parts`
/// finds them; a test there holds the two to the same place).
pub fn install_dir() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("cpmlab").join("bin"))
}

fn on_path(bin: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
}

/// A tool on PATH or where the lab's scripts install it.
fn tool(bin: &str) -> bool {
    on_path(bin) || install_dir().is_some_and(|d| d.join(bin).is_file())
}

/// A built part: its environment variable's file, on PATH, or installed.
fn part(name: &str, env: &str) -> bool {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p).is_file();
    }
    on_path(name) || install_dir().is_some_and(|d| d.join(name).is_file())
}

/// Whether this is CI (`CI=true`), where a missing need fails.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// In a test crate's build script: a `cpmlab_has_<need>` cfg for each need
/// found, each need's where `CI=true`, and a warning naming the missing
/// ones. The script is rerun when CI, PATH or the install directory change,
/// and when Docker's socket comes or goes.
pub fn build_script(needs: &[Need]) {
    // Rerun only on what the needs depend on: a library's build script (the
    // verdict's) must not rebuild it whenever PATH differs.
    println!("cargo:rerun-if-env-changed=CI");
    let mut vars: Vec<&str> = vec![];
    let mut parts = false;
    for n in needs {
        match n {
            Need::Docker => vars.extend(["DOCKER_HOST", "PATH"]),
            Need::Chromium => println!("cargo:rerun-if-changed=/usr/bin/chromium"),
            Need::KubeApiserver => vars.push("CPMLAB_KUBE_APISERVER"),
            Need::GenericApiserver => vars.push("CPMLAB_APISERVER"),
            Need::Clientgo => vars.push("CPMLAB_CLIENTGO"),
            Need::Envoy => vars.push("CPMLAB_ENVOY"),
            Need::Druid => vars.push("CPMLAB_ETCD_DRUID"),
            Need::KindTools | Need::EtcdKubectl => {}
            // binfmt_misc's handler and the engine's image cannot be
            // watched; the arm64 parts are in the install dir, below.
            Need::Netem | Need::Root | Need::Arm64 => {}
        }
        if !matches!(n, Need::Docker | Need::Chromium | Need::Netem | Need::Root) {
            parts = true;
        }
    }
    if parts {
        vars.extend(["PATH", "XDG_CACHE_HOME", "HOME"]);
        // The install dir (or its nearest existing ancestor: a path that
        // does not exist would rerun the script every build).
        if let Some(d) =
            install_dir().and_then(|d| d.ancestors().find(|a| a.is_dir()).map(PathBuf::from))
        {
            println!("cargo:rerun-if-changed={}", d.display());
        }
    }
    if needs.contains(&Need::Docker) {
        // A new dockerd makes its socket anew.
        println!("cargo:rerun-if-changed=/var/run/docker.sock");
    }
    vars.sort();
    vars.dedup();
    for v in vars {
        println!("cargo:rerun-if-env-changed={v}");
    }
    for n in Need::ALL {
        println!("cargo::rustc-check-cfg=cfg({})", n.cfg());
    }
    let ci = ci();
    for &n in needs {
        let found = n.found();
        let forced = ci && n.forced_in_ci();
        if found || forced {
            println!("cargo:rustc-cfg={}", n.cfg());
        }
        if !found {
            println!(
                "cargo:warning={}: {}; the tests that need it {}",
                std::env::var("CARGO_PKG_NAME").unwrap_or_default(),
                n.fix(),
                if forced {
                    "are compiled in (CI=true) and will fail"
                } else {
                    "are skipped"
                }
            );
        }
    }
}

/// In a test: panics with the fix when `need` is missing. A test compiled
/// in runs where its needs were found at build time, or with `CI=true`;
/// this says which need failed it.
pub fn require(test: &str, need: Need) {
    if !need.found() {
        panic!(
            "{test}: {}{}",
            need.fix(),
            if ci() {
                " — CI=true, so this fails"
            } else {
                " (it was there when the test was built; rebuild to skip it)"
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_need_has_its_own_cfg_and_a_fix() {
        let all = Need::ALL;
        let cfgs: std::collections::BTreeSet<&str> = all.iter().map(|n| n.cfg()).collect();
        assert_eq!(cfgs.len(), all.len());
        for n in all {
            assert!(n.cfg().starts_with("cpmlab_has_"));
            assert!(
                n.fix().contains("scripts/") || !n.forced_in_ci(),
                "{n:?}: {}",
                n.fix()
            );
        }
    }
}
