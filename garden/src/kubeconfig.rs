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

/// What a garden kubeconfig of `render`'s shape holds: the server, the CA
/// and the client's certificate and key (PEM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub server: String,
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Reads back a kubeconfig `render` wrote (one cluster, one user with a
/// client certificate): the gardenlet of a kind seed gets its garden
/// credentials this way, from the Secret mounted in its pod. Not a
/// general kubeconfig reader: a field it does not find is named.
pub fn parse(text: &str) -> Result<Credentials, String> {
    let field = |key: &str| -> Result<String, String> {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix(':'))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                format!(
                    "no `{key}` (a kubeconfig as `cpmlab kubeconfig --garden` writes it has one)"
                )
            })
    };
    let decoded = |key: &str| -> Result<String, String> {
        let b = base64::engine::general_purpose::STANDARD
            .decode(field(key)?)
            .map_err(|e| format!("`{key}`: {e}"))?;
        String::from_utf8(b).map_err(|e| format!("`{key}`: {e}"))
    };
    Ok(Credentials {
        server: field("server")?,
        ca_pem: decoded("certificate-authority-data")?,
        cert_pem: decoded("client-certificate-data")?,
        key_pem: decoded("client-key-data")?,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn what_render_writes_parse_reads_back() {
        let k = super::render("t", "https://10.213.3.11:443", "CA\n", "CERT\n", "KEY\n");
        let c = super::parse(&k).unwrap();
        assert_eq!(c.server, "https://10.213.3.11:443");
        assert_eq!(
            (c.ca_pem.as_str(), c.cert_pem.as_str(), c.key_pem.as_str()),
            ("CA\n", "CERT\n", "KEY\n")
        );
        let e = super::parse(&k.replace("client-key-data", "token")).unwrap_err();
        assert!(e.contains("client-key-data"), "{e}");
    }

    #[test]
    fn the_kubeconfig_names_the_garden_and_its_project() {
        let k = super::render("t", "https://10.213.3.11", "CA", "CERT", "KEY");
        assert!(k.contains("server: https://10.213.3.11"));
        assert!(k.contains("current-context: t-garden"));
        assert!(k.contains("namespace: garden-local"));
        assert!(k.contains("client-key-data: S0VZ"));
    }
}
