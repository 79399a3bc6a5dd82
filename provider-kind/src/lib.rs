//! The kind form: each seed a kind cluster on its own Docker network, the
//! wan router joined to both, Istio's ingress gateway exposing every etcd
//! member and the shoot API by SNI with TLS passthrough, etcd as one
//! StatefulSet per member (or etcd-druid's `Etcd`), kube-apiserver as a
//! Deployment per seed.
//!
//! What is here: the rendered configs and manifests (`render`, readable with
//! `cpmlab up --provider kind --render DIR`), the tools and images the form
//! needs (`tools`, `cpmlab doctor --provider kind`), the clusters' creation
//! (`up`) and the workloads behind the provider interface (`provider`).
//! It stands on the docker form's Docker world (`cpmlab-provider-docker`:
//! its engine, images, the wan router, DNS and clients networks, `down`).

// The lower crates' modules under the paths the kind form's code names.
use cpmlab_core::{apiserver, errors, etcd, go_parts, pki, progress};
use cpmlab_exposure as exposure;
use cpmlab_model::{addressing, labels, link, plan, state, topology};

pub mod adapter;
pub mod apiserver_exposure;
pub mod cni;
pub mod config;
pub mod druid;
pub mod druid_operator;
pub mod gardenlet;
pub mod gateway_sync;
pub mod lab_state;
pub mod manifests;
pub mod members;
pub mod provider;
pub mod render;
pub mod resource_manager;
pub mod tools;
pub mod up;

pub use cpmlab_model::kind::*;

/// Pinned versions: each is what a go.mod under `go/` pins (a unit test
/// keeps them one), built by `scripts/build-go --kind` and made into
/// images by `scripts/build-kind-images`, tagged as upstream names them.
pub const KUBERNETES_VERSION: &str = "v1.36.3";
pub const KIND_VERSION: &str = "v0.33.0";
pub const KIND_NODE_IMAGE: &str = "kindest/node:v1.36.3";
/// The only Istio 1.29 patch the Go module proxy serves (Gardener runs
/// 1.29; its go.mod names istio.io/api v1.29.6).
pub const ISTIO_VERSION: &str = "1.29.1";
pub const METALLB_VERSION: &str = "v0.15.2";
pub const KUBE_APISERVER_IMAGE: &str = "registry.k8s.io/kube-apiserver:v1.36.3";
/// The lab's own etcd images: etcd 3.4.34 built from go/etcd34 (the docker
/// form's default, what etcd-wrapper runs behind etcd-druid) and etcd
/// 3.5.27 built from go.etcd.io/etcd/server/v3 (Gardener's image vector's
/// etcd), each with etcdctl 3.6.
pub const ETCD_IMAGE_3_4: &str = "cpmlab/etcd:3.4.34";
pub const ETCD_IMAGE_3_5: &str = "cpmlab/etcd:3.5.27";

/// The images the lab's own rendered objects run (the shoot's API server
/// and etcd, Istio's istiod and gateway): the node image must preload each,
/// since nothing is pulled.
pub fn lab_images() -> Vec<String> {
    vec![
        KUBE_APISERVER_IMAGE.to_string(),
        ETCD_IMAGE_3_4.to_string(),
        ETCD_IMAGE_3_5.to_string(),
        format!("docker.io/istio/pilot:{ISTIO_VERSION}"),
        format!("docker.io/istio/proxyv2:{ISTIO_VERSION}"),
        gardenlet::IMAGE.to_string(),
    ]
}

pub use cpmlab_model::ports::member_peer_port;

/// The ingress port of the shoot API and of etcd's client endpoint.
pub const API_PORT: u16 = 443;
pub const CLIENT_PORT: u16 = 2379;
pub const PEER_PORT: u16 = 2380;

#[cfg(test)]
mod tests {
    use super::*;

    fn go_mod(dir: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../go")
            .join(dir)
            .join("go.mod");
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// The versions the form names are the ones go/ pins and
    /// scripts/build-kind-images builds (it tags images from go.mod).
    #[test]
    fn pinned_versions_are_the_go_modules_ones() {
        assert!(go_mod("").contains(&format!("k8s.io/kubernetes {KUBERNETES_VERSION}\n")));
        assert!(go_mod("kind").contains(&format!("sigs.k8s.io/kind {KIND_VERSION}\n")));
        assert!(go_mod("metallb").contains(&format!("go.universe.tf/metallb {METALLB_VERSION}\n")));
        assert!(go_mod("istio").contains(&format!("// istio release: {ISTIO_VERSION} ")));
        assert!(go_mod("etcd").contains("go.etcd.io/etcd/server/v3 v3.5.27\n"));
        assert_eq!(
            KIND_NODE_IMAGE,
            format!("kindest/node:{KUBERNETES_VERSION}")
        );
        assert_eq!(
            KUBE_APISERVER_IMAGE,
            format!("registry.k8s.io/kube-apiserver:{KUBERNETES_VERSION}")
        );
        assert_eq!(ETCD_IMAGE_3_5, "cpmlab/etcd:3.5.27");
        assert!(go_mod("etcd34").contains("// etcd 3.4.34 (the v3.4.34 tag"));
        assert_eq!(ETCD_IMAGE_3_4, "cpmlab/etcd:3.4.34");
    }
}
