//! The shoot node the `node` lane goes through: Gardener's apiserver-proxy
//! (`exposure::apiserver_proxy`, the template's Envoy) behind the node's
//! caching resolver (`dns::caching_forwarder_conf`), in one workload on
//! the clients network. The probe agent reaches the API at the node's
//! port 443, as in-cluster clients reach the `kubernetes` Service.

use std::net::SocketAddr;

use anyhow::{Context, Result};

use crate::exposure::apiserver_proxy::{self, NodeProxy};
use crate::exposure::http_proxy::destination_header_value;
use crate::provider::{FileSpec, NodeSpec};
use crate::state::LabState;

/// Where the node's files go.
const ENVOY_CONFIG: &str = "/etc/cpmlab/node/envoy.yaml";
const RESOLVER_CONFIG: &str = "/etc/cpmlab/node/named.conf";
/// Envoy in the lab image.
pub const ENVOY_BIN: &str = "/usr/local/bin/envoy";

/// The node of `state`'s shoot: its apiserver-proxy sends the destination
/// the shoot's exposure mode names.
pub fn spec(state: &LabState) -> NodeSpec {
    let api = crate::exposure::api_route(&state.topology);
    let namespace = crate::exposure::control_plane_namespace(&state.topology.shoot.name);
    let proxy = NodeProxy {
        advertise_address: "0.0.0.0".into(),
        api_host: state.dns.api_name.clone(),
        destination: destination_header_value(&api, &namespace),
    };
    let envoy = serde_json::to_string_pretty(&apiserver_proxy::config(&proxy))
        .expect("the configuration is JSON");
    let resolver = crate::dns::caching_forwarder_conf(&state.dns.zone, state.dns.server.ip);
    // The resolver first (it daemonises once it listens), the node's
    // resolv.conf on it, then Envoy in the foreground: its access log is
    // the workload's log.
    let script = format!(
        "set -e; mkdir -p {admin_dir}; /usr/sbin/named -c {RESOLVER_CONFIG}; \
         printf 'nameserver 127.0.0.1\\noptions timeout:1 attempts:2\\n' > /etc/resolv.conf; \
         exec {ENVOY_BIN} \"$@\"",
        admin_dir = std::path::Path::new(apiserver_proxy::ADMIN_SOCKET)
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "/tmp".into()),
    );
    let mut cmd = vec!["/bin/sh".to_string(), "-c".into(), script, "node".into()];
    cmd.extend(apiserver_proxy::args(ENVOY_CONFIG));
    NodeSpec {
        cmd,
        files: vec![
            FileSpec::new(ENVOY_CONFIG, envoy, 0o644),
            FileSpec::new(RESOLVER_CONFIG, resolver, 0o644),
        ],
        ready: (apiserver_proxy::ADMIN_PORT, "/ready".into()),
    }
}

/// The node's apiserver-proxy, as the probe agent reaches it.
pub fn address(state: &LabState) -> Result<SocketAddr> {
    let ip = crate::provider::node_address(state).context("the lab has no clients network")?;
    Ok(SocketAddr::from((ip, apiserver_proxy::LISTEN_PORT)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_node_runs_the_resolver_then_gardeners_envoy() {
        let s = cpmlab_model::plan::sample_state();
        let n = super::spec(&s);
        assert_eq!(n.cmd[0], "/bin/sh");
        assert!(n.cmd[2].contains("named -c /etc/cpmlab/node/named.conf"));
        assert!(n.cmd[2].contains("exec /usr/local/bin/envoy"));
        assert_eq!(
            n.cmd[4..],
            [
                "--concurrency",
                "2",
                "--use-dynamic-base-id",
                "-c",
                "/etc/cpmlab/node/envoy.yaml"
            ]
        );
        let envoy = String::from_utf8(n.files[0].contents.clone()).unwrap();
        // Gardener's default: TLS ends at the gateway, the node names the
        // shoot's socket.
        assert!(
            envoy.contains("shoot--local--local--kube-apiserver-socket"),
            "{envoy}"
        );
        assert_eq!(n.ready.0, 16910);
        assert!(super::address(&s).unwrap().to_string().ends_with(".6:443"));
    }
}
