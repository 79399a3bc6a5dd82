//! The docker provider's seed operations: DNS records (RFC 2136 through the
//! lab's bind9), gateway routes (HAProxy reloaded in place), member and API
//! server containers. Each operation is idempotent: it looks before it acts.

use std::net::Ipv4Addr;

use anyhow::{Context, Result};

use super::engine::{Engine, FileSpec};
use super::up::{self, GATEWAY_CONFIG};
use crate::dns;
use crate::etcd::ClusterState;
use crate::pki::Ca;
use crate::state::{ApiServerState, LabState, MemberState};

/// Makes each name answer exactly its addresses (none: the record goes),
/// in one RFC 2136 update.
pub async fn dns_set(
    engine: &Engine,
    state: &LabState,
    records: &[(&str, &[Ipv4Addr])],
) -> Result<()> {
    let Some((first, _)) = records.first() else {
        return Ok(());
    };
    let script = dns::nsupdate_script(
        state.dns.server.ip,
        &state.dns.zone,
        &state.dns.tsig_key_name,
        &state.dns.tsig_secret,
        state.dns.ttl,
        records,
    );
    let path = format!("/tmp/cpmlab-nsupdate-{}.txt", first.replace('.', "_"));
    let c = &state.dns.server.container;
    engine
        .upload(c, &[FileSpec::new(path.clone(), script, 0o600)])
        .await?;
    let names: Vec<&str> = records.iter().map(|r| r.0).collect();
    engine
        .exec_ok(c, &["nsupdate", &path], false)
        .await
        .with_context(|| format!("update the DNS records {}", names.join(", ")))?;
    Ok(())
}

/// Writes the gateway configuration of `seed` for the lab as it is now and
/// reloads HAProxy (master-worker: SIGUSR2 starts new workers on the new
/// configuration; the old ones finish the connections they carry).
pub async fn sync_gateway(engine: &Engine, state: &LabState, seed: &str) -> Result<()> {
    let s = state
        .seed(seed)
        .with_context(|| format!("no seed {seed}"))?;
    let gw = &s.gateway.container;
    engine
        .upload(
            gw,
            &[FileSpec::new(
                GATEWAY_CONFIG,
                up::gateway_config(state, seed),
                0o644,
            )],
        )
        .await?;
    let pid = engine.running_container(gw).await?.pid;
    up::set_routes(pid, up::net_plan(state, &[s.network.as_str()], Some(seed)))
        .await
        .context("give the gateway the members' addresses")?;
    engine.signal(gw, "SIGUSR2").await
}

/// Creates and starts the container of a member joining the cluster whose
/// members are `cluster` (name, peer URL, itself included), on a new
/// volume (the caller removed an earlier attempt's container and data).
pub async fn start_joining_member(
    engine: &Engine,
    state: &LabState,
    ca: &Ca,
    m: &MemberState,
    cluster: &[(String, String)],
) -> Result<()> {
    engine
        .create_volume(&state.name, &m.volume, &m.seed)
        .await?;
    let spec = up::member_spec(state, ca, m, cluster, ClusterState::Existing)?;
    engine.create_container(&spec).await?;
    up::start_released(engine, state, &m.container).await
}

/// Creates and starts an API server replica talking to `etcd_servers` (the
/// caller removed an earlier one of that name).
pub async fn start_apiserver(
    engine: &Engine,
    state: &LabState,
    ca: &Ca,
    a: &ApiServerState,
    etcd_servers: &[String],
    sa: &(String, String),
) -> Result<()> {
    let api_server = up::resolve_api_server(up::choice_of(state.api_kind))?;
    let spec = up::apiserver_spec(state, ca, a, etcd_servers, &api_server, sa)?;
    engine.create_container(&spec).await?;
    up::start_released(engine, state, &a.container).await
}
