//! The kubelet's HTTPS probe of a replica, as Gardener configures
//! kube-apiserver's readiness probe: `GET /readyz` on the pod's address and
//! port, an `Authorization: Bearer` header, a new connection each time, the
//! server's certificate not verified (the kubelet's HTTPS probes skip
//! verification), success for a status from 200 to 399, all within the
//! probe's timeout.

use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Accepts any server certificate (the kubelet's `InsecureSkipVerify`).
#[derive(Debug)]
struct SkipVerify;

impl ServerCertVerifier for SkipVerify {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The TLS client configuration of the probes.
pub fn tls_config() -> Arc<rustls::ClientConfig> {
    let c = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("ring supports the default TLS versions")
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(SkipVerify))
    .with_no_client_auth();
    Arc::new(c)
}

/// One probe: `Ok(status)` when the replica answered in time, else why not.
pub async fn http_get(
    tls: Arc<rustls::ClientConfig>,
    addr: SocketAddrV4,
    path: &str,
    token: &str,
    timeout: Duration,
) -> Result<u16, String> {
    let work = async {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("dial tcp {addr}: {e}"))?;
        // By address, as the kubelet dials a pod: no SNI.
        let name = ServerName::IpAddress((*addr.ip()).into());
        let mut s = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS with {addr}: {e}"))?;
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: kube-probe/1.36\r\nAccept: */*\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes())
            .await
            .map_err(|e| format!("write to {addr}: {e}"))?;
        // The status line is all a probe needs; the body is bounded.
        let mut buf = Vec::with_capacity(1024);
        let mut chunk = [0u8; 4096];
        loop {
            match s.read(&mut chunk).await {
                Ok(0) => break,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if buf.len() > 10 * 1024 {
                        break;
                    }
                }
                Err(e) if buf.is_empty() => return Err(format!("read from {addr}: {e}")),
                Err(_) => break,
            }
        }
        let text = String::from_utf8_lossy(&buf);
        text.split_whitespace()
            .nth(1)
            .and_then(|c| c.parse::<u16>().ok())
            .ok_or_else(|| format!("no HTTP status from {addr}"))
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "Get \"https://{addr}{path}\": context deadline exceeded (timeout {timeout:?})"
        )),
    }
}

/// The kubelet's rule for an HTTP probe's status.
pub fn success(status: u16) -> bool {
    (200..400).contains(&status)
}
