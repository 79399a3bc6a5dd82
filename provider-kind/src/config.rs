//! kind's cluster configuration for each seed (`kind.x-k8s.io/v1alpha4`).
//!
//! Each seed's cluster has pod and service ranges of its own, so that a
//! packet's addresses say which seed it belongs to when it crosses the
//! router; with three nodes the members spread over three zones, as a
//! seed's etcd does.

use serde_json::{json, Value};

use super::{cluster_name, KindSettings, KIND_NODE_IMAGE};

/// Pod and service ranges of the seed at `index` in the topology.
pub fn seed_ranges(index: usize) -> (String, String) {
    let base = 100 + 2 * index;
    (
        format!("10.{base}.0.0/16"),
        format!("10.{}.0.0/16", base + 1),
    )
}

/// The zone of node `index` of a seed.
pub fn zone(seed: &str, index: usize) -> String {
    format!("{seed}-zone-{index}")
}

/// The kubelet's configuration as kind's kubeadm config has it, with what
/// this project's machines need: `failCgroupV1: false`, since Kubernetes
/// 1.35 the kubelet refuses cgroup v1 hosts by default
/// (`pkg/kubelet/apis/config/v1beta1/defaults.go`) and these hosts are
/// cgroup v1 (hybrid). On a cgroup v2 host the setting has no effect.
pub const KUBELET_PATCH: &str = "kind: KubeletConfiguration\nfailCgroupV1: false\n";

/// The kind config of `seed` (at `index` in the topology). kind's own CNI
/// (kindnetd) is off: its module is not on the Go module proxy, so `up`
/// writes each node's CNI configuration itself (`cni.rs`: the ptp and
/// host-local plugins kind's base image ships, one /24 per node).
pub fn cluster_config(lab: &str, seed: &str, index: usize, s: &KindSettings) -> Value {
    let (pods, services) = seed_ranges(index);
    let nodes: Vec<Value> = (0..s.nodes as usize)
        .map(|i| {
            json!({
                "role": if i == 0 { "control-plane" } else { "worker" },
                "image": KIND_NODE_IMAGE,
                "labels": {
                    "topology.kubernetes.io/zone": zone(seed, i),
                    "cpmlab.seed": seed,
                },
            })
        })
        .collect();
    json!({
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "name": cluster_name(lab, seed),
        "networking": {
            "podSubnet": pods,
            "serviceSubnet": services,
            // The router reaches the nodes; nothing is published on the host.
            "apiServerAddress": "127.0.0.1",
            "disableDefaultCNI": true,
        },
        "kubeadmConfigPatches": [KUBELET_PATCH],
        "nodes": nodes,
    })
}

/// `config` with the host's lab state root and engine socket mounted into
/// its first node (the control plane, where the seed's gardenlet runs:
/// `gardenlet.rs`).
pub fn with_host_mounts(mut config: Value, h: &super::gardenlet::HostMounts) -> Value {
    if let Some(first) = config["nodes"].get_mut(0) {
        first["extraMounts"] = super::gardenlet::extra_mounts(h);
    }
    config
}

/// The node containers kind makes for `seed`'s cluster (kind names them
/// `<cluster>-control-plane`, `<cluster>-worker`, `<cluster>-worker2`).
pub fn node_names(lab: &str, seed: &str, s: &KindSettings) -> Vec<String> {
    let c = cluster_name(lab, seed);
    (0..s.nodes as usize)
        .map(|i| match i {
            0 => format!("{c}-control-plane"),
            1 => format!("{c}-worker"),
            n => format!("{c}-worker{n}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_get_ranges_of_their_own() {
        assert_ne!(seed_ranges(0), seed_ranges(1));
        let (p, s) = seed_ranges(1);
        assert_eq!((p.as_str(), s.as_str()), ("10.102.0.0/16", "10.103.0.0/16"));
    }

    #[test]
    fn ha_has_a_control_plane_and_two_workers_in_three_zones() {
        let s = KindSettings {
            nodes: 3,
            ..Default::default()
        };
        let c = cluster_config("lab", "seed-b", 1, &s);
        let roles: Vec<&str> = c["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["control-plane", "worker", "worker"]);
        assert_eq!(
            c["nodes"][2]["labels"]["topology.kubernetes.io/zone"],
            "seed-b-zone-2"
        );
        assert_eq!(c["name"], "lab-seed-b");
        assert_eq!(c["networking"]["disableDefaultCNI"], true);
        assert_eq!(c["kubeadmConfigPatches"][0], KUBELET_PATCH);
        // The host's lab state and engine socket go to the control plane
        // only, where the gardenlet runs.
        let h = crate::gardenlet::HostMounts {
            state_root: "/var/lib/cpmlab".into(),
            engine_socket: "/var/run/docker.sock".into(),
        };
        let m = with_host_mounts(c.clone(), &h);
        assert_eq!(
            m["nodes"][0]["extraMounts"][0]["hostPath"],
            "/var/lib/cpmlab"
        );
        assert_eq!(
            m["nodes"][0]["extraMounts"][1]["containerPath"],
            "/cpmlab/engine.sock"
        );
        assert!(m["nodes"][1]["extraMounts"].is_null());
        assert_eq!(
            node_names("lab", "seed-b", &s),
            [
                "lab-seed-b-control-plane",
                "lab-seed-b-worker",
                "lab-seed-b-worker2"
            ]
        );
    }
}
