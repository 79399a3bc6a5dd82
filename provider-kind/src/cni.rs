//! Pod networking of a kind seed without kindnetd (kind's own CNI, whose
//! module the Go module proxy does not serve): each node gets the CNI
//! configuration kindnetd would write for it — the ptp plugin with
//! host-local addresses from the node's `spec.podCIDR`, and portmap —,
//! and, with more than one node, a route to every other node's pod range
//! via that node. Pods' traffic to anything outside their node's range
//! is masqueraded to the node's address (ptp's `ipMasq`), so the router
//! and the other seed see seed addresses, as with kindnetd.
//!
//! What kindnetd does that this does not: NetworkPolicy (the lab's
//! `allow-ingressgateway-to-etcd` is applied and not enforced here).

use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{json, Value};

/// Where the configuration is written on each node.
pub const CONF_PATH: &str = "/etc/cni/net.d/10-cpmlab.conflist";

/// The CNI configuration of a node whose pods take addresses from
/// `pod_cidr`.
pub fn conflist(pod_cidr: &str) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": "cpmlab",
        "plugins": [
            {
                "type": "ptp",
                "ipMasq": true,
                "ipam": {
                    "type": "host-local",
                    "dataDir": "/run/cni-ipam-state",
                    "ranges": [[{"subnet": pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
                "mtu": 1500,
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    })
}

/// A node as the configuration needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub pod_cidr: String,
    pub ip: String,
}

/// The routes node `me` needs: every other node's pod range via it.
pub fn routes(me: &Node, all: &[Node]) -> Vec<(String, String)> {
    all.iter()
        .filter(|n| n.name != me.name)
        .map(|n| (n.pod_cidr.clone(), n.ip.clone()))
        .collect()
}

async fn run(argv: &[&str], input: Option<&[u8]>) -> Result<String> {
    use tokio::io::AsyncWriteExt;
    let mut cmd = tokio::process::Command::new(argv[0]);
    cmd.args(&argv[1..])
        .kill_on_drop(true)
        .stdin(if input.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("run `{}`", argv.join(" ")))?;
    if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(data).await?;
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .with_context(|| format!("`{}` took over 60 s", argv.join(" ")))??;
    anyhow::ensure!(
        out.status.success(),
        "`{}` exited {}: {}",
        argv.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Configures the pod network of the cluster of kubectl context `context`,
/// whose nodes are the containers `nodes` (kind names each node as its
/// container): waits for each node's pod range, writes its configuration,
/// adds the routes between nodes.
pub async fn configure(context: &str, nodes: &[String]) -> Result<()> {
    let mut all = Vec::new();
    for name in nodes {
        let t0 = std::time::Instant::now();
        let pod_cidr = loop {
            let c = run(
                &[
                    "kubectl",
                    "--context",
                    context,
                    "get",
                    "node",
                    name,
                    "-o",
                    "jsonpath={.spec.podCIDR}",
                ],
                None,
            )
            .await
            .unwrap_or_default();
            if !c.is_empty() {
                break c;
            }
            anyhow::ensure!(
                t0.elapsed() < Duration::from_secs(120),
                "node {name} has no pod range after 120 s (kube-controller-manager allocates it)"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        let ip = run(
            &[
                "kubectl",
                "--context",
                context,
                "get",
                "node",
                name,
                "-o",
                "jsonpath={.status.addresses[?(@.type==\"InternalIP\")].address}",
            ],
            None,
        )
        .await?;
        all.push(Node {
            name: name.clone(),
            pod_cidr,
            ip,
        });
    }
    for n in &all {
        let conf = serde_json::to_vec_pretty(&conflist(&n.pod_cidr))?;
        run(
            &[
                "docker",
                "exec",
                "-i",
                &n.name,
                "cp",
                "/dev/stdin",
                CONF_PATH,
            ],
            Some(&conf),
        )
        .await
        .with_context(|| format!("write {CONF_PATH} on {}", n.name))?;
        for (dst, via) in routes(n, &all) {
            run(
                &[
                    "docker", "exec", &n.name, "ip", "route", "replace", &dst, "via", &via,
                ],
                None,
            )
            .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_s_pods_take_addresses_from_its_range_and_are_masqueraded() {
        let c = conflist("10.100.0.0/24");
        assert_eq!(c["plugins"][0]["type"], "ptp");
        assert_eq!(c["plugins"][0]["ipMasq"], true);
        assert_eq!(
            c["plugins"][0]["ipam"]["ranges"][0][0]["subnet"],
            "10.100.0.0/24"
        );
        assert_eq!(c["plugins"][1]["type"], "portmap");
    }

    #[test]
    fn each_node_routes_the_others_pod_ranges_via_them() {
        let n = |name: &str, cidr: &str, ip: &str| Node {
            name: name.into(),
            pod_cidr: cidr.into(),
            ip: ip.into(),
        };
        let all = [
            n("cp", "10.100.0.0/24", "10.213.0.130"),
            n("w1", "10.100.1.0/24", "10.213.0.131"),
            n("w2", "10.100.2.0/24", "10.213.0.132"),
        ];
        assert_eq!(
            routes(&all[1], &all),
            [
                ("10.100.0.0/24".to_string(), "10.213.0.130".to_string()),
                ("10.100.2.0/24".to_string(), "10.213.0.132".to_string())
            ]
        );
        assert!(routes(&all[0], &all[..1]).is_empty());
    }
}
