//! Kubeconfigs for the garden's API: the operator's (the lab's admin,
//! group `system:masters`) and each gardenlet's (user
//! `gardener.cloud:system:seed:<seed>`, group `gardener.cloud:system:seeds`,
//! as Gardener's gardenlets authenticate).

use base64::Engine as _;

/// A kubeconfig for `server` (`https://host:port`) trusting `ca_pem`,
/// authenticating with the client certificate `cert_pem`/`key_pem`.
pub fn render(name: &str, server: &str, ca_pem: &str, cert_pem: &str, key_pem: &str) -> String {
    let b = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "# cpmlab: the garden of lab `{name}` (gardener-apiserver behind the garden's kube-apiserver)\n\
apiVersion: v1\nkind: Config\nclusters:\n- name: {name}-garden\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
users:\n- name: {name}-garden\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n\
contexts:\n- name: {name}-garden\n  context:\n    cluster: {name}-garden\n    user: {name}-garden\n    namespace: garden-local\ncurrent-context: {name}-garden\n",
        ca = b(ca_pem),
        cert = b(cert_pem),
        key = b(key_pem),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_kubeconfig_names_the_garden_and_its_project() {
        let k = super::render("t", "https://10.213.3.11", "CA", "CERT", "KEY");
        assert!(k.contains("server: https://10.213.3.11"));
        assert!(k.contains("current-context: t-garden"));
        assert!(k.contains("namespace: garden-local"));
        assert!(k.contains("client-key-data: S0VZ"));
    }
}
