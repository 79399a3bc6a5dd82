//! The stand-in API server (`cpmlab agent apiserver`): a Kubernetes-compatible
//! API server over etcd for the resources the probes use (Namespaces,
//! ConfigMaps, Leases), used where the real kube-apiserver cannot be had. It
//! names itself a stand-in in /version.

pub mod errors;
pub mod failpoint;
pub mod protobuf;
pub mod resources;
pub mod server;
pub mod store;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// How the stand-in is started.
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    pub listen: SocketAddr,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub token_file: PathBuf,
    /// Its own seed's etcd members only, e.g. `https://10.213.0.10:2379`.
    pub etcd_servers: Vec<String>,
    pub etcd_ca: Option<PathBuf>,
    pub etcd_cert: Option<PathBuf>,
    pub etcd_key: Option<PathBuf>,
    pub shutdown_delay: Duration,
    pub seed: String,
    pub name: String,
    /// The address clients are told to use (`/api` serverAddressByClientCIDRs).
    pub advertise: String,
}

fn read(p: &PathBuf) -> Result<String> {
    std::fs::read_to_string(p).with_context(|| format!("read {}", p.display()))
}

pub async fn connect_etcd(cfg: &ApiServerConfig) -> Result<Client> {
    let mut opts = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(3))
        .with_timeout(Duration::from_secs(10))
        .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5));
    if let Some(ca) = &cfg.etcd_ca {
        let mut tls = TlsOptions::new().ca_certificate(Certificate::from_pem(read(ca)?));
        if let (Some(c), Some(k)) = (&cfg.etcd_cert, &cfg.etcd_key) {
            tls = tls.identity(Identity::from_pem(read(c)?, read(k)?));
        }
        opts = opts.with_tls(tls);
    }
    Client::connect(&cfg.etcd_servers, Some(opts))
        .await
        .with_context(|| format!("connect to etcd {}", cfg.etcd_servers.join(",")))
}

pub fn tls_config(cert: &PathBuf, key: &PathBuf) -> Result<Arc<rustls::ServerConfig>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("read {}", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("parse {}", cert.display()))?;
    let key =
        PrivateKeyDer::from_pem_file(key).with_context(|| format!("read {}", key.display()))?;
    let mut c = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .context("server certificate")?;
    c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(c))
}

pub async fn run(cfg: ApiServerConfig) -> Result<()> {
    let token = read(&cfg.token_file)?.trim().to_string();
    anyhow::ensure!(!token.is_empty(), "{} is empty", cfg.token_file.display());
    let tls = tls_config(&cfg.cert, &cfg.key)?;
    let client = connect_etcd(&cfg).await?;
    let store = store::Store::new(client);
    // etcd may still be electing: retry the bootstrap for a while.
    let mut tries = 0;
    loop {
        match store.bootstrap().await {
            Ok(()) => break,
            Err(e) if tries < 60 => {
                tries += 1;
                tracing::warn!("bootstrap namespaces: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => anyhow::bail!("bootstrap namespaces: {e}"),
        }
    }
    let (stop_watches, _) = tokio::sync::watch::channel(false);
    let s = Arc::new(server::ApiServer {
        store,
        token,
        seed: cfg.seed.clone(),
        name: cfg.name.clone(),
        ready: AtomicBool::new(true),
        stop_watches,
        advertise: cfg.advertise.clone(),
    });
    server::serve(s, cfg.listen, tls, cfg.shutdown_delay).await
}
