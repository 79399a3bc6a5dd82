//! What the kind form needs on the host, and how to get what is missing:
//! `cpmlab doctor --provider kind` lists it, `cpmlab up --provider kind`
//! refuses (exit 3) while something is missing, and the kind e2e test says
//! `not run: ...` with the same list.

use std::time::Duration;

use serde::Serialize;

use super::{
    ETCD_IMAGE_3_4, ETCD_IMAGE_3_5, ISTIO_VERSION, KIND_NODE_IMAGE, KUBE_APISERVER_IMAGE,
    METALLB_VERSION,
};
use crate::provider::docker::engine::Engine;

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

/// The command-line tools, with where to get each.
pub const TOOLS: &[(&str, &[&str], &str)] = &[
    (
        "kind",
        &["version"],
        "install kind 0.33 (`go install sigs.k8s.io/kind@v0.33.0`, or Debian unstable's `kind` package)",
    ),
    (
        "kubectl",
        &["version", "--client"],
        "install kubectl (https://kubernetes.io/docs/tasks/tools/, or Debian's `kubernetes-client`)",
    ),
    (
        "istioctl",
        &["version", "--remote=false"],
        "install istioctl 1.27.1 (https://istio.io/latest/docs/setup/getting-started/#download)",
    ),
];

/// The images the form runs, and the registry each comes from.
pub fn images() -> Vec<String> {
    vec![
        KIND_NODE_IMAGE.to_string(),
        ETCD_IMAGE_3_4.to_string(),
        ETCD_IMAGE_3_5.to_string(),
        KUBE_APISERVER_IMAGE.to_string(),
        format!("docker.io/istio/pilot:{ISTIO_VERSION}"),
        format!("docker.io/istio/proxyv2:{ISTIO_VERSION}"),
        format!("quay.io/metallb/controller:{METALLB_VERSION}"),
        format!("quay.io/metallb/speaker:{METALLB_VERSION}"),
    ]
}

/// The registry host an image reference pulls from.
pub fn registry_of(image: &str) -> String {
    let first = image.split('/').next().unwrap_or(image);
    if image.contains('/') && (first.contains('.') || first.contains(':')) {
        first.to_string()
    } else {
        "registry-1.docker.io".to_string()
    }
}

fn which(bin: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
}

async fn version_of(bin: &std::path::Path, args: &[&str]) -> String {
    let run = tokio::process::Command::new(bin).args(args).output();
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

/// Everything the kind form needs, each found or not.
pub async fn check(engine: Option<&Engine>) -> Vec<Requirement> {
    let mut out = Vec::new();
    for (bin, args, fix) in TOOLS {
        out.push(match which(bin) {
            Some(p) => Requirement {
                name: bin.to_string(),
                detail: format!("{} ({})", version_of(&p, args).await, p.display()),
                ok: true,
                fix: None,
            },
            None => Requirement {
                name: bin.to_string(),
                detail: "not on PATH".into(),
                ok: false,
                fix: Some(fix.to_string()),
            },
        });
    }
    let mut registries: std::collections::BTreeMap<String, bool> = Default::default();
    for image in images() {
        let local = match engine {
            Some(e) => e.image_exists(&image).await.unwrap_or(false),
            None => false,
        };
        let registry = registry_of(&image);
        let pullable = if local {
            true
        } else if let Some(r) = registries.get(&registry) {
            *r
        } else {
            let r = reachable(&registry).await;
            registries.insert(registry.clone(), r);
            r
        };
        out.push(Requirement {
            name: image.clone(),
            detail: if local {
                "present in the Docker engine".into()
            } else if pullable {
                format!("not present; {registry} answers, it will be pulled")
            } else {
                format!("not present, and {registry} cannot be reached to pull it")
            },
            ok: local || pullable,
            fix: (!local && !pullable).then(|| {
                format!(
                    "on a machine that reaches {registry}: `docker pull {image}` and \
                     `docker save` it here (`docker load`), or run where it is reachable"
                )
            }),
        });
    }
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
    use super::*;

    #[test]
    fn registries_are_read_from_image_references() {
        assert_eq!(registry_of(KIND_NODE_IMAGE), "registry-1.docker.io");
        assert_eq!(registry_of(KUBE_APISERVER_IMAGE), "registry.k8s.io");
        assert_eq!(registry_of(ETCD_IMAGE_3_4), "quay.io");
        assert_eq!(registry_of("docker.io/istio/pilot:1"), "docker.io");
        assert_eq!(registry_of("localhost:5000/x:1"), "localhost:5000");
    }

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
}
