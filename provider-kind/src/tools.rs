//! What the kind form needs on the host, and how to get what is missing:
//! `cpmlab doctor --provider kind` lists it, `cpmlab up --provider kind`
//! refuses (exit 3) while something is missing, and the kind e2e test says
//! `not run: ...` with the same list.
//!
//! Everything is built here (no registry is reachable from this project's
//! machines): kind, kubectl and istioctl by `scripts/build-go --kind`
//! (installed in `go_parts::install_dir()`, which `up` puts first on the
//! steps' PATH), the node image with every image the form runs preloaded
//! by `scripts/build-kind-images`, which also puts MetalLB's manifest
//! beside the binaries.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::{KIND_NODE_IMAGE, METALLB_VERSION};
use cpmlab_provider_docker::engine::Engine;

/// One thing the kind form needs.
#[derive(Debug, Clone, Serialize)]
pub struct Requirement {
    pub name: String,
    /// What was found (a version, "present"), or why it is missing.
    pub detail: String,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// The one command that builds the kind form: its host packages, its Go
/// parts (`scripts/build-go --kind`) and images (`scripts/build-kind-images`).
const BUILD_GO: &str =
    "run scripts/setup --kind (host packages, scripts/build-go --kind, scripts/build-kind-images)";

/// The command-line tools, with the arguments that print their version.
pub const TOOLS: &[(&str, &[&str])] = &[
    ("kind", &["version"]),
    ("kubectl", &["version", "--client"]),
    ("istioctl", &["version", "--remote=false"]),
    // The shoot API's Istio objects as Gardener renders them
    // (`apiserver_exposure`).
    (super::apiserver_exposure::RENDERER, &["--version"]),
];

/// A tool: the one `scripts/build-go --kind` installed, else on PATH (the
/// order `up` runs them in).
pub fn find_tool(bin: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = crate::go_parts::install_dir().into_iter().collect();
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter().map(|d| d.join(bin)).find(|p| p.is_file())
}

/// Where `scripts/build-kind-images` puts the upstream manifests `up`
/// applies as they are (`${XDG_CACHE_HOME:-~/.cache}/cpmlab/kind`).
pub fn files_dir() -> PathBuf {
    crate::go_parts::install_dir()
        .and_then(|d| d.parent().map(|p| p.join("kind")))
        .unwrap_or_else(|| PathBuf::from(".cache/cpmlab/kind"))
}

/// MetalLB's `config/manifests/metallb-native.yaml` of the pinned release,
/// copied out of its Go module by `scripts/build-kind-images`.
pub fn metallb_manifest() -> PathBuf {
    files_dir().join(format!("metallb-native-{METALLB_VERSION}.yaml"))
}

/// The label on the node image listing the images preloaded into it.
pub const LABEL_PRELOADED: &str = "cpmlab.preloaded";

async fn version_of(bin: &Path, args: &[&str]) -> String {
    let run = tokio::process::Command::new(bin)
        .args(args)
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(5), run).await {
        Ok(Ok(o)) => String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string(),
        _ => "present (its version did not answer)".into(),
    }
}

/// Whether `host:443` answers within 3 s (name resolved, TCP connected).
pub async fn reachable(host: &str) -> bool {
    let connect = tokio::net::TcpStream::connect((host, 443));
    matches!(
        tokio::time::timeout(Duration::from_secs(3), connect).await,
        Ok(Ok(_))
    )
}

/// The node image's requirement: present (with what it preloads), or how
/// to build it.
async fn node_image(engine: Option<&Engine>) -> Requirement {
    let labels = match engine {
        Some(e) => e.image_labels(KIND_NODE_IMAGE).await.ok().flatten(),
        None => None,
    };
    match labels {
        Some(labels) => match labels.get(LABEL_PRELOADED) {
            Some(list) => preloads(list),
            None => Requirement {
                name: KIND_NODE_IMAGE.into(),
                detail: "present; preloads nothing known (not built by scripts/build-kind-images)"
                    .into(),
                ok: false,
                fix: Some(format!(
                    "{BUILD_GO}: it replaces this image with one that holds every image the form runs"
                )),
            },
        },
        None => Requirement {
            name: KIND_NODE_IMAGE.into(),
            detail: "not present (no registry is pulled from: every image is built here)".into(),
            ok: false,
            fix: Some(BUILD_GO.into()),
        },
    }
}

/// The node image's preloaded images (its label's list) against those the
/// lab's objects run: one missing would be pulled, and nothing can be.
pub fn preloads(list: &str) -> Requirement {
    let have: Vec<&str> = list.split(',').map(str::trim).collect();
    let missing: Vec<String> = super::lab_images()
        .into_iter()
        .filter(|i| !have.contains(&i.as_str()))
        .collect();
    Requirement {
        name: KIND_NODE_IMAGE.into(),
        detail: if missing.is_empty() {
            format!("present; preloads {}", have.join(", "))
        } else {
            format!(
                "present, but does not preload {} (the lab's objects run it; nothing is pulled)",
                missing.join(", ")
            )
        },
        ok: missing.is_empty(),
        fix: (!missing.is_empty()).then(|| {
            format!("{BUILD_GO}: it rebuilds what changed and the node image with every image the form runs")
        }),
    }
}

/// Whether this engine runs `--privileged` containers, and so whether
/// kind's nodes need the privileged adapter (informational: both work).
async fn privileged(engine: Option<&Engine>) -> Requirement {
    let name = "docker run --privileged".to_string();
    let have_node = match engine {
        Some(e) => e.image_exists(KIND_NODE_IMAGE).await.unwrap_or(false),
        None => false,
    };
    if !have_node {
        return Requirement {
            name,
            detail: "not probed yet (it is probed with the node image)".into(),
            ok: true,
            fix: None,
        };
    }
    match super::adapter::privileged_refused(KIND_NODE_IMAGE).await {
        Ok(None) => Requirement {
            name,
            detail: "allowed: kind runs its nodes privileged".into(),
            ok: true,
            fix: None,
        },
        Ok(Some(why)) => Requirement {
            name,
            detail: format!(
                "refused here ({why}); kind's nodes run through cpmlab's privileged adapter \
                 (every capability the host grants, no seccomp/AppArmor, system paths and \
                 cgroups writable, all devices allowed)"
            ),
            ok: true,
            fix: None,
        },
        Err(e) => Requirement {
            name,
            detail: format!("the probe failed: {e:#}"),
            ok: false,
            fix: Some("check that the Docker daemon runs containers".into()),
        },
    }
}

/// Everything the kind form needs, each found or not.
pub async fn check(engine: Option<&Engine>) -> Vec<Requirement> {
    let mut out = Vec::new();
    for (bin, args) in TOOLS {
        out.push(match find_tool(bin) {
            Some(p) => Requirement {
                name: bin.to_string(),
                detail: format!("{} ({})", version_of(&p, args).await, p.display()),
                ok: true,
                fix: None,
            },
            None => Requirement {
                name: bin.to_string(),
                detail: "not built".into(),
                ok: false,
                fix: Some(BUILD_GO.into()),
            },
        });
    }
    out.push(node_image(engine).await);
    let manifest = metallb_manifest();
    out.push(Requirement {
        name: format!("MetalLB {METALLB_VERSION} manifest"),
        detail: if manifest.is_file() {
            format!("present ({})", manifest.display())
        } else {
            format!("not present ({})", manifest.display())
        },
        ok: manifest.is_file(),
        fix: (!manifest.is_file()).then(|| BUILD_GO.to_string()),
    });
    out.push(privileged(engine).await);
    out
}

/// What is missing, in one line (`kind, istioctl, kindest/node:... `).
pub fn missing_line(reqs: &[Requirement]) -> Option<String> {
    let missing: Vec<&str> = reqs
        .iter()
        .filter(|r| !r.ok)
        .map(|r| r.name.as_str())
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}

#[cfg(test)]
mod tests {
    /// A node image built before the lab's etcd image changed lacks it:
    /// doctor fails it, naming the image, rather than a pod waiting on a
    /// pull that cannot happen.
    #[test]
    fn a_node_image_must_preload_every_image_the_lab_runs() {
        let all = super::super::lab_images().join(",");
        let r = super::preloads(&format!("registry.k8s.io/pause:3.10.2,{all}"));
        assert!(r.ok, "{}", r.detail);
        let old = all.replace(super::super::ETCD_IMAGE_3_4, "cpmlab/etcd:3.4.23");
        let r = super::preloads(&old);
        assert!(!r.ok);
        assert!(
            r.detail.contains(super::super::ETCD_IMAGE_3_4),
            "{}",
            r.detail
        );
        assert!(r
            .fix
            .is_some_and(|f| f.contains("scripts/build-kind-images")));
    }

    use super::*;

    #[test]
    fn the_missing_are_named_in_one_line() {
        let r = |name: &str, ok: bool| Requirement {
            name: name.into(),
            detail: String::new(),
            ok,
            fix: None,
        };
        assert_eq!(missing_line(&[r("kind", true)]), None);
        assert_eq!(
            missing_line(&[r("kind", false), r("kubectl", true), r("istioctl", false)]).unwrap(),
            "kind, istioctl"
        );
    }

    #[test]
    fn metallb_s_manifest_sits_beside_the_built_binaries() {
        let m = metallb_manifest();
        assert!(
            m.ends_with(format!("cpmlab/kind/metallb-native-{METALLB_VERSION}.yaml")),
            "{}",
            m.display()
        );
    }
}
