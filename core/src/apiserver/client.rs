//! A minimal HTTPS/1.1 client for the lab's own checks of the API tier
//! (readiness through a gateway by SNI, version, per-replica health). The
//! probes are real Kubernetes clients; this is only for `up` and `status`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub fn tls_client(ca_pem: &str) -> Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.context("parse CA")?).context("add CA")?;
    }
    let c = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(c))
}

/// `GET path` at `addr`, TLS with SNI `sni` verified against the lab CA;
/// returns the status code and body.
pub async fn get(
    addr: SocketAddr,
    sni: &str,
    tls: Arc<rustls::ClientConfig>,
    path: &str,
    token: Option<&str>,
    timeout: Duration,
) -> Result<(u16, String)> {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {sni}\r\n{auth}Connection: close\r\n\r\n");
    exchange(addr, sni, tls, &req, timeout).await
}

/// Sends `request` (a whole HTTP/1.x request that asks the server to close
/// the connection after answering) over TLS with SNI `sni`, reads to the
/// end; the status code and the body as sent (not de-chunked: an HTTP/1.0
/// request gets the body as it is, as etcd's `/debug/vars` is read).
pub async fn exchange(
    addr: SocketAddr,
    sni: &str,
    tls: Arc<rustls::ClientConfig>,
    request: &str,
    timeout: Duration,
) -> Result<(u16, String)> {
    let work = async {
        let tcp = crate::lab_net::connect(addr)
            .await
            .with_context(|| format!("connect {addr}"))?;
        let name = ServerName::try_from(sni.to_string()).context("server name")?;
        let mut s = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .with_context(|| format!("TLS to {addr} as {sni}"))?;
        s.write_all(request.as_bytes()).await?;
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf).await;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let code: u16 = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .with_context(|| format!("no HTTP status from {addr}"))?;
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Ok((code, body))
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| anyhow::anyhow!("no answer from {addr} within {timeout:?}"))?
}
