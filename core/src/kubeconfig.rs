//! `cpmlab kubeconfig`: a kubeconfig for the shoot API. The host cannot
//! resolve the lab's DNS, so the server is the address the lab DNS gives
//! for the API name now, with the API name as TLS server name (SNI and
//! certificate check); rerun after the DNS record moves (migration).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use base64::Engine as _;

use crate::dns;
use crate::state::{LabDir, LabState};

pub fn render(state: &LabState, server_ip: std::net::Ipv4Addr, ca_pem: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let name = &state.name;
    format!(
        "# cpmlab lab `{name}`: the shoot API {api} (currently answered by {server_ip})\n\
apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: https://{server_ip}:443\n    tls-server-name: {api}\n    certificate-authority-data: {ca}\n\
users:\n- name: {name}-probe\n  user:\n    token: {token}\n\
contexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}-probe\n    namespace: default\ncurrent-context: {name}\n",
        api = state.dns.api_name,
        token = state.api_token,
    )
}

/// Writes `<state root>/labs/<NAME>/kubeconfig` and returns its path.
pub async fn write(dir: &LabDir, state: &LabState) -> Result<PathBuf> {
    let (ips, _) = dns::query_a(
        SocketAddr::from((state.dns.server.ip, 53)),
        &state.dns.api_name,
        Duration::from_secs(2),
    )
    .await
    .context("ask the lab DNS for the shoot API name")?;
    let ip = *ips
        .first()
        .with_context(|| format!("the lab DNS has no address for {}", state.dns.api_name))?;
    let ca = std::fs::read_to_string(dir.pki().join("ca.crt")).context("read the lab CA")?;
    let root = std::fs::canonicalize(&dir.root).unwrap_or_else(|_| dir.root.clone());
    let path = root.join("kubeconfig");
    // It holds the API token: owner-only, as kind and kubectl write theirs.
    crate::state::write_private(&path, render(state, ip, &ca))
        .with_context(|| format!("write {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    #[test]
    fn kubeconfig_names_the_api_as_tls_server_name() {
        let mut s = crate::plan::sample_state();
        s.api_token = "tok".into();
        let k = super::render(&s, "10.213.0.3".parse().unwrap(), "CA");
        assert!(k.contains("server: https://10.213.0.3:443"));
        assert!(k.contains("tls-server-name: api.local.cpmlab.test"));
        assert!(k.contains("token: tok"));
        assert!(k.contains("current-context: t"));
    }
}
