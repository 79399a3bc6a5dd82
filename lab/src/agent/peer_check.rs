//! `cpmlab agent peer-check`: can this container reach an etcd peer URL the
//! way a joining member will? Resolves the URL's host through the lab DNS,
//! measures TCP connect round trips to the address it got (the RTT between
//! the seeds, when run in the other seed), and completes a TLS handshake
//! with the host as SNI, checking that the certificate that comes back
//! names that host (so the gateway routed to the right member).

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone)]
pub struct PeerCheckConfig {
    pub host: String,
    pub port: u16,
    pub dns: IpAddr,
    pub count: u32,
    pub timeout: Duration,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PeerCheckReport {
    pub host: String,
    /// The address the lab DNS gave for the host.
    pub address: Option<String>,
    /// TCP connect times (one round trip each), milliseconds.
    pub connect_ms: Vec<f64>,
    /// The TLS handshake with SNI = host completed far enough to see the
    /// server's certificate, and it names the host.
    pub tls_names_host: bool,
    pub error: Option<String>,
}

impl PeerCheckReport {
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.tls_names_host && !self.connect_ms.is_empty()
    }
    /// Median connect time (the lower middle of an even count, so that one
    /// retransmitted SYN of two does not count): the round trip to the
    /// peer's gateway.
    pub fn rtt_ms(&self) -> Option<f64> {
        let mut v = self.connect_ms.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len().saturating_sub(1) / 2).copied()
    }
}

/// Accepts any certificate, remembering the end-entity one: the check wants
/// to see what the gateway routed to, not to trust it.
#[derive(Debug, Default)]
struct Capture(Mutex<Option<Vec<u8>>>);

impl ServerCertVerifier for Capture {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.0.lock().expect("capture lock") = Some(end_entity.to_vec());
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

/// Does the DER certificate carry `host` as a DNS subject alternative name?
pub fn cert_names_host(der: &[u8], host: &str) -> bool {
    use x509_parser::prelude::*;
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return false;
    };
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return false;
    };
    san.value
        .general_names
        .iter()
        .any(|n| matches!(n, GeneralName::DNSName(d) if d.eq_ignore_ascii_case(host)))
}

fn handshake(addr: SocketAddr, host: &str, timeout: Duration) -> Result<Vec<u8>> {
    let capture = Arc::new(Capture::default());
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .context("TLS versions")?
    .dangerous()
    .with_custom_certificate_verifier(capture.clone())
    .with_no_client_auth();
    let name = ServerName::try_from(host.to_string()).context("host as SNI")?;
    let mut conn = rustls::ClientConnection::new(Arc::new(cfg), name).context("TLS client")?;
    let mut sock =
        TcpStream::connect_timeout(&addr, timeout).with_context(|| format!("connect {addr}"))?;
    sock.set_read_timeout(Some(timeout))?;
    sock.set_write_timeout(Some(timeout))?;
    let t0 = Instant::now();
    // The peer port wants a client certificate and will refuse us after its
    // certificate went out; seeing that certificate is all the check needs.
    while capture.0.lock().expect("capture lock").is_none() {
        if t0.elapsed() > timeout {
            anyhow::bail!("no certificate from {addr} (SNI {host}) within {timeout:?}");
        }
        match conn.complete_io(&mut sock) {
            Ok((0, 0)) if !conn.is_handshaking() => break,
            Ok(_) => {}
            Err(e) => {
                if capture.0.lock().expect("capture lock").is_some() {
                    break;
                }
                return Err(e).with_context(|| format!("TLS handshake with {addr} (SNI {host})"));
            }
        }
    }
    let der = capture.0.lock().expect("capture lock").take();
    der.with_context(|| format!("{addr} (SNI {host}) sent no certificate"))
}

pub async fn run(cfg: &PeerCheckConfig) -> PeerCheckReport {
    let mut report = PeerCheckReport {
        host: cfg.host.clone(),
        address: None,
        connect_ms: vec![],
        tls_names_host: false,
        error: None,
    };
    let server = SocketAddr::new(cfg.dns, 53);
    let ip = match crate::dns::query_a(server, &cfg.host, cfg.timeout).await {
        Ok((ips, _)) if !ips.is_empty() => ips[0],
        Ok(_) => {
            report.error = Some(format!("{} has no A record at {server}", cfg.host));
            return report;
        }
        Err(e) => {
            report.error = Some(e.to_string());
            return report;
        }
    };
    report.address = Some(ip.to_string());
    let addr = SocketAddr::new(IpAddr::V4(ip), cfg.port);
    let (host, count, timeout) = (cfg.host.clone(), cfg.count, cfg.timeout);
    let r = tokio::task::spawn_blocking(move || {
        let mut times = Vec::new();
        for _ in 0..count {
            let t0 = Instant::now();
            let s = TcpStream::connect_timeout(&addr, timeout)
                .with_context(|| format!("connect {addr}"))?;
            times.push(t0.elapsed().as_secs_f64() * 1e3);
            drop(s);
            std::thread::sleep(Duration::from_millis(20));
        }
        let der = handshake(addr, &host, timeout)?;
        Ok::<_, anyhow::Error>((times, cert_names_host(&der, &host)))
    })
    .await;
    match r {
        Ok(Ok((times, named))) => {
            report.connect_ms = times;
            report.tls_names_host = named;
            if !named {
                report.error = Some(format!(
                    "{addr} answered SNI {} with a certificate for another name",
                    cfg.host
                ));
            }
        }
        Ok(Err(e)) => report.error = Some(format!("{e:#}")),
        Err(e) => report.error = Some(e.to_string()),
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn san_check_reads_dns_names() {
        let ca = crate::pki::Ca::generate("t").unwrap();
        let m = ca
            .issue_member(
                "seed-a-etcd-0",
                &["seed-a-etcd-0.z.test".into()],
                &["10.0.0.10".parse().unwrap()],
            )
            .unwrap();
        let der = rustls_pemfile_der(&m.cert_pem);
        assert!(cert_names_host(&der, "seed-a-etcd-0.z.test"));
        assert!(!cert_names_host(&der, "seed-a-etcd-1.z.test"));
        assert!(!cert_names_host(b"junk", "x"));
    }

    fn rustls_pemfile_der(pem: &str) -> Vec<u8> {
        use base64::Engine as _;
        let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap()
    }

    #[test]
    fn rtt_is_the_median_connect_time() {
        let r = PeerCheckReport {
            host: "h".into(),
            address: None,
            connect_ms: vec![50.0, 52.0, 200.0],
            tls_names_host: true,
            error: None,
        };
        assert_eq!(r.rtt_ms(), Some(52.0));
        assert!(r.ok());
        let two = PeerCheckReport {
            connect_ms: vec![1140.3, 140.5],
            ..r
        };
        assert_eq!(two.rtt_ms(), Some(140.5));
    }
}
