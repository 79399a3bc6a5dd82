//! Waiting for the shoot API to be ready: through a seed's gateway, or a
//! replica on its own before a gateway sends it anything. Plain HTTPS to
//! /readyz, whatever runs the lab.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::errors::Cancel;
use crate::state::LabState;

const API_DEADLINE: Duration = Duration::from_secs(60);

/// Waits until the shoot API answers /readyz through the gateway at `gw`.
pub async fn wait_api_at(
    state: &LabState,
    gw: Ipv4Addr,
    ca_pem: &str,
    cancel: &Cancel,
) -> Result<()> {
    let hint = state
        .apiservers
        .iter()
        .rfind(|a| state.seed(&a.seed).map(|s| s.gateway.ip) == Some(gw))
        .map(|a| a.container.as_str())
        .unwrap_or("-");
    if let Some(last) = wait_ready(state, gw, ca_pem, cancel).await? {
        anyhow::bail!(
            "the shoot API was not ready through {gw} within {:?}: {last} (see the logs of {hint})",
            state.stretch(API_DEADLINE)
        );
    }
    Ok(())
}

/// Waits until the replica at `ip` answers /readyz itself, before a gateway
/// sends it anything: a load balancer counts a new server healthy until its
/// checks fail, and a replica still connecting to etcd fails requests.
pub async fn wait_replica_ready(
    state: &LabState,
    replica: &crate::state::ApiServerState,
    ca_pem: &str,
    cancel: &Cancel,
) -> Result<()> {
    if let Some(last) = wait_ready(state, replica.ip, ca_pem, cancel).await? {
        anyhow::bail!(
            "API server {} was not ready within {:?}: {last} (see the logs of {})",
            replica.name,
            state.stretch(API_DEADLINE),
            replica.container
        );
    }
    Ok(())
}

/// /readyz at `ip`:443 until 200: `None` once ready, else the last answer
/// when the deadline passed (a cancel is an error, as everywhere).
async fn wait_ready(
    state: &LabState,
    ip: Ipv4Addr,
    ca_pem: &str,
    cancel: &Cancel,
) -> Result<Option<String>> {
    let tls = crate::apiserver::client::tls_client(ca_pem)?;
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < state.stretch(API_DEADLINE) {
        cancel.check()?;
        match crate::apiserver::client::get(
            SocketAddr::from((ip, crate::exposure::API_PORT)),
            &state.dns.api_name,
            tls.clone(),
            "/readyz",
            // As Gardener's probes: kube-apiserver refuses anonymous requests.
            Some(&state.api_token),
            Duration::from_secs(2),
        )
        .await
        {
            Ok((200, _)) => return Ok(None),
            Ok((code, body)) => last = format!("/readyz {code}: {}", body.trim()),
            Err(e) => last = format!("{e:#}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(Some(last))
}
