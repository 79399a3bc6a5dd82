//! Which API server the probes measure and how they reach it: the lab's
//! shoot API (its name through the lab DNS, the lab CA, the lab token), or
//! any API server a kubeconfig names (`cpmlab probe start --kubeconfig`),
//! so that a real Live CPM is measured by the same probes and rules.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use base64::Engine as _;
use serde::Deserialize;

use crate::yaml_file::{FileError, LineIndex};

/// How the server's name becomes addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolve {
    /// Through the lab's DNS server, cached for the record's TTL.
    Lab(std::net::SocketAddr),
    /// The kubeconfig's server is an address (the name is only for TLS).
    Fixed(IpAddr),
    /// The host's resolver, asked for every new connection.
    System,
}

/// How the probes authenticate.
#[derive(Clone, PartialEq, Eq)]
pub enum Auth {
    Token(String),
    ClientCert { cert_pem: String, key_pem: String },
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a credential.
        f.write_str(match self {
            Auth::Token(_) => "Token(..)",
            Auth::ClientCert { .. } => "ClientCert(..)",
        })
    }
}

#[derive(Debug, Clone)]
pub struct Target {
    /// The name TLS checks the certificate against (SNI) and the Host header.
    pub server_name: String,
    pub port: u16,
    pub resolve: Resolve,
    pub ca_pem: String,
    pub auth: Auth,
    /// Where it came from, for messages: the server URL.
    pub server: String,
}

impl Target {
    /// The lab's shoot API, as the probe container reaches it.
    pub fn lab(
        api_name: &str,
        port: u16,
        dns: std::net::SocketAddr,
        ca: &Path,
        token_file: &Path,
    ) -> Result<Target> {
        let token = std::fs::read_to_string(token_file)
            .with_context(|| format!("read {}", token_file.display()))?
            .trim()
            .to_string();
        let ca_pem =
            std::fs::read_to_string(ca).with_context(|| format!("read {}", ca.display()))?;
        Ok(Target {
            server_name: api_name.to_string(),
            port,
            resolve: Resolve::Lab(dns),
            ca_pem,
            auth: Auth::Token(token),
            server: format!("https://{api_name}:{port}"),
        })
    }

    /// The bearer token, when that is how the probes authenticate.
    pub fn token(&self) -> Option<&str> {
        match &self.auth {
            Auth::Token(t) => Some(t),
            Auth::ClientCert { .. } => None,
        }
    }

    /// TLS client settings: the target's CA, and its client certificate
    /// when it authenticates with one.
    pub fn tls(&self) -> Result<Arc<rustls::ClientConfig>> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let Auth::ClientCert { cert_pem, key_pem } = &self.auth else {
            return crate::apiserver::client::tls_client(&self.ca_pem);
        };
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            roots.add(c.context("parse CA")?).context("add CA")?;
        }
        let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .context("parse the client certificate")?;
        let key =
            PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).context("parse the client key")?;
        let c = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .context("the client certificate and key do not go together")?;
        Ok(Arc::new(c))
    }
}

// The parts of a kubeconfig the probes use. Other keys are ignored, as
// kubectl ignores what it does not know; the ones that would change how
// the server is reached or who we are, and that we do not support, are
// refused by name (see `from_kubeconfig`).
#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct Kubeconfig {
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    users: Vec<NamedUser>,
    #[serde(default)]
    contexts: Vec<NamedContext>,
    current_context: Option<String>,
}

#[derive(Deserialize)]
struct NamedCluster {
    name: String,
    cluster: Cluster,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: String,
    tls_server_name: Option<String>,
    certificate_authority_data: Option<String>,
    certificate_authority: Option<PathBuf>,
    insecure_skip_tls_verify: Option<bool>,
    proxy_url: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: User,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct User {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<PathBuf>,
    client_certificate_data: Option<String>,
    client_key_data: Option<String>,
    client_certificate: Option<PathBuf>,
    client_key: Option<PathBuf>,
    exec: Option<serde::de::IgnoredAny>,
    auth_provider: Option<serde::de::IgnoredAny>,
    username: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct NamedContext {
    name: String,
    context: Context_,
}

#[derive(Deserialize)]
struct Context_ {
    cluster: String,
    user: Option<String>,
}

/// Reads a kubeconfig the way kubectl would for `context` (else its
/// current context): the server, its CA and the user's credentials. What
/// cannot be used is an error naming the file, line and field.
pub fn from_kubeconfig(path: &Path, context: Option<&str>) -> Result<Target, FileError> {
    let text = crate::yaml_file::read(path)?;
    let (kc, lines): (Kubeconfig, LineIndex) = crate::yaml_file::parse(&text, path)?;
    let err = |field: &str, message: String| lines.error(path, field, message);
    // Relative file names in a kubeconfig are relative to its directory.
    let base = path.parent().unwrap_or(Path::new("."));
    let file = |field: &str, p: &Path| -> Result<String, FileError> {
        let full = if p.is_absolute() {
            p.to_path_buf()
        } else {
            base.join(p)
        };
        std::fs::read_to_string(&full)
            .map_err(|e| err(field, format!("cannot read {}: {e}", full.display())))
    };
    let data = |field: &str, b64: &str| -> Result<String, FileError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|e| err(field, format!("not base64: {e}")))?;
        String::from_utf8(bytes).map_err(|_| err(field, "not PEM text".into()))
    };

    let (ci, ctx) = match context.or(kc.current_context.as_deref()) {
        None => {
            return Err(err(
                "current-context",
                "no current context: pass --context".into(),
            ))
        }
        Some(name) => kc
            .contexts
            .iter()
            .enumerate()
            .find(|(_, c)| c.name == name)
            .ok_or_else(|| {
                let known: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
                err(
                    if context.is_some() {
                        "contexts"
                    } else {
                        "current-context"
                    },
                    format!("no context `{name}` (contexts: {})", known.join(", ")),
                )
            })?,
    };
    let (ki, cluster) = kc
        .clusters
        .iter()
        .enumerate()
        .find(|(_, c)| c.name == ctx.context.cluster)
        .map(|(i, c)| (i, &c.cluster))
        .ok_or_else(|| {
            err(
                &format!("contexts[{ci}].context.cluster"),
                format!("no cluster `{}`", ctx.context.cluster),
            )
        })?;
    let cf = |k: &str| format!("clusters[{ki}].cluster.{k}");
    if cluster.insecure_skip_tls_verify == Some(true) {
        return Err(err(
            &cf("insecure-skip-tls-verify"),
            "the probes verify the server; give certificate-authority(-data) instead".into(),
        ));
    }
    if cluster.proxy_url.is_some() {
        return Err(err(
            &cf("proxy-url"),
            "a proxy would stand between the probes and the server; not supported".into(),
        ));
    }
    let (host, port) = parse_server(&cluster.server).map_err(|m| err(&cf("server"), m))?;
    let ca_pem = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(d), _) => data(&cf("certificate-authority-data"), d)?,
        (None, Some(p)) => file(&cf("certificate-authority"), p)?,
        (None, None) => {
            return Err(err(
                &cf("server"),
                "no certificate-authority(-data): the probes need the server's CA".into(),
            ))
        }
    };
    let resolve = match host.parse::<IpAddr>() {
        Ok(ip) => Resolve::Fixed(ip),
        Err(_) => Resolve::System,
    };
    let server_name = cluster.tls_server_name.clone().unwrap_or(host);

    let user_name = ctx.context.user.as_deref().unwrap_or_default();
    let (ui, user) = kc
        .users
        .iter()
        .enumerate()
        .find(|(_, u)| u.name == user_name)
        .map(|(i, u)| (i, &u.user))
        .ok_or_else(|| {
            err(
                &format!("contexts[{ci}].context.user"),
                format!("no user `{user_name}`"),
            )
        })?;
    let uf = |k: &str| format!("users[{ui}].user.{k}");
    for (present, key, how) in [
        (user.exec.is_some(), "exec", "an exec plugin"),
        (
            user.auth_provider.is_some(),
            "auth-provider",
            "an auth provider",
        ),
        (user.username.is_some(), "username", "basic auth"),
    ] {
        if present {
            return Err(err(
                &uf(key),
                format!(
                    "{how} is not supported: give the probes a token or a client certificate \
                     (e.g. `kubectl create token SERVICEACCOUNT` into `token:`)"
                ),
            ));
        }
    }
    let auth = if let Some(t) = &user.token {
        Auth::Token(t.trim().to_string())
    } else if let Some(p) = &user.token_file {
        Auth::Token(file(&uf("tokenFile"), p)?.trim().to_string())
    } else {
        let cert = match (&user.client_certificate_data, &user.client_certificate) {
            (Some(d), _) => Some(data(&uf("client-certificate-data"), d)?),
            (None, Some(p)) => Some(file(&uf("client-certificate"), p)?),
            (None, None) => None,
        };
        let key = match (&user.client_key_data, &user.client_key) {
            (Some(d), _) => Some(data(&uf("client-key-data"), d)?),
            (None, Some(p)) => Some(file(&uf("client-key"), p)?),
            (None, None) => None,
        };
        match (cert, key) {
            (Some(cert_pem), Some(key_pem)) => Auth::ClientCert { cert_pem, key_pem },
            (Some(_), None) => {
                return Err(err(
                    &uf("client-certificate-data"),
                    "a client certificate without its client-key(-data)".into(),
                ))
            }
            _ => {
                return Err(err(
                    &format!("users[{ui}].user"),
                    format!("user `{user_name}` has no token, tokenFile or client certificate"),
                ))
            }
        }
    };
    Ok(Target {
        server_name,
        port,
        resolve,
        ca_pem,
        auth,
        server: cluster.server.clone(),
    })
}

/// `https://host[:port][/]` into host and port (443 by default).
fn parse_server(server: &str) -> Result<(String, u16), String> {
    let rest = server
        .strip_prefix("https://")
        .ok_or_else(|| format!("`{server}`: the probes speak https only"))?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains('/') || authority.contains('?') {
        return Err(format!(
            "`{server}`: a server under a path prefix is not supported"
        ));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("`{server}`: unclosed [ in the address"))?;
        (h.to_string(), after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err(format!("`{server}`: no host"));
    }
    let port = match port {
        None => 443,
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| format!("`{server}`: bad port `{p}`"))?,
    };
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn write(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("kubeconfig");
        std::fs::write(&p, text).unwrap();
        p
    }

    fn kubeconfig(server: &str, extra_cluster: &str, user: &str) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(CA);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n{extra_cluster}\
users:\n- name: u\n  user:\n{user}\
contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
        )
    }

    #[test]
    fn a_lab_kubeconfig_reaches_the_address_by_the_api_name() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            &kubeconfig(
                "https://10.213.0.3:443",
                "    tls-server-name: api.local.cpmlab.test\n",
                "    token: tok\n",
            ),
        );
        let t = from_kubeconfig(&p, None).unwrap();
        assert_eq!(t.server_name, "api.local.cpmlab.test");
        assert_eq!(t.port, 443);
        assert_eq!(t.resolve, Resolve::Fixed("10.213.0.3".parse().unwrap()));
        assert_eq!(t.auth, Auth::Token("tok".into()));
        assert_eq!(t.ca_pem, CA);
        assert!(!format!("{t:?}").contains("tok\""), "no token in Debug");
    }

    #[test]
    fn a_name_goes_to_the_system_resolver_and_files_are_relative() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("t"), "from-file\n").unwrap();
        let p = write(
            d.path(),
            &kubeconfig("https://api.example.org:6443/", "", "    tokenFile: t\n"),
        );
        let t = from_kubeconfig(&p, Some("x")).unwrap();
        assert_eq!(
            (t.server_name.as_str(), t.port, &t.resolve),
            ("api.example.org", 6443, &Resolve::System)
        );
        assert_eq!(t.auth, Auth::Token("from-file".into()));
    }

    #[test]
    fn what_cannot_be_used_is_named_with_its_line() {
        let d = tempfile::tempdir().unwrap();
        let cases = [
            (
                kubeconfig("https://a:1", "", "    exec:\n      command: gardenlogin\n"),
                None,
                "users[0].user.exec",
                "exec plugin",
            ),
            (
                kubeconfig(
                    "https://a:1",
                    "    insecure-skip-tls-verify: true\n",
                    "    token: t\n",
                ),
                None,
                "clusters[0].cluster.insecure-skip-tls-verify",
                "verify",
            ),
            (
                kubeconfig("http://a:1", "", "    token: t\n"),
                None,
                "clusters[0].cluster.server",
                "https only",
            ),
            (
                kubeconfig("https://a:1", "", "    client-certificate-data: eA==\n"),
                None,
                "users[0].user.client-certificate-data",
                "without its client-key",
            ),
            (
                kubeconfig("https://a:1", "", "    token: t\n"),
                Some("nope"),
                "contexts",
                "no context `nope`",
            ),
        ];
        for (text, ctx, field, words) in cases {
            let p = write(d.path(), &text);
            let e = from_kubeconfig(&p, ctx).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.message.contains(words), "{e}");
            if field != "contexts" {
                let line = text.lines().position(|l| {
                    l.trim_start()
                        .starts_with(field.rsplit('.').next().unwrap())
                });
                assert_eq!(Some(e.line), line.map(|l| l + 1), "{e}");
            }
        }
    }

    #[test]
    fn servers_parse_like_urls() {
        assert_eq!(parse_server("https://a").unwrap(), ("a".into(), 443));
        assert_eq!(
            parse_server("https://[::1]:8443").unwrap(),
            ("::1".into(), 8443)
        );
        assert!(parse_server("https://a/prefix").is_err());
        assert!(parse_server("https://a:x").is_err());
    }
}
