//! The docker provider's seed operations: DNS records (RFC 2136 through the
//! lab's bind9), the gateway's input (what the seed exposes and the state of
//! its API replicas, for its Envoy and endpoint lifecycle), member and API
//! server containers. Each operation is idempotent: it looks before it acts.

use std::net::Ipv4Addr;

use anyhow::{Context, Result};

use super::engine::{Engine, FileSpec};
use super::up;
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

pub use super::gateway_sync::{sync_gateway, wait_served};

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

/// Creates and starts member `m` as the one member of a new, empty cluster
/// (`initial-cluster-state new`, `m` alone), on a new volume (the caller
/// removed an earlier attempt's container and data).
pub async fn start_empty_member(
    engine: &Engine,
    state: &LabState,
    ca: &Ca,
    m: &MemberState,
) -> Result<()> {
    engine
        .create_volume(&state.name, &m.volume, &m.seed)
        .await?;
    let alone = [(m.name.clone(), m.peer_url())];
    let spec = up::member_spec(state, ca, m, &alone, ClusterState::New)?;
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
    let spec = up::apiserver_spec(state, ca, a, etcd_servers, sa)?;
    engine.create_container(&spec).await?;
    up::start_released(engine, state, &a.container).await
}

/// Creates and starts member `m` as the one member of a new cluster, its
/// data restored from `snapshot` by `restore` (etcdctl's argv) while the
/// container waits behind its barrier, before its etcd starts; then
/// releases it (routes, etcd starts). On a new volume (the caller removed
/// an earlier attempt's container and data).
pub async fn start_restored_member(
    engine: &Engine,
    state: &LabState,
    ca: &Ca,
    m: &MemberState,
    snapshot: &[u8],
    restore: &[String],
) -> Result<()> {
    engine
        .create_volume(&state.name, &m.volume, &m.seed)
        .await?;
    let alone = [(m.name.clone(), m.peer_url())];
    let spec = up::member_spec(state, ca, m, &alone, ClusterState::New)?;
    engine.create_container(&spec).await?;
    engine.start(&m.container).await?;
    engine
        .upload(
            &m.container,
            &[FileSpec::new(
                crate::migrate::snapshot::SNAPSHOT_FILE,
                snapshot.to_vec(),
                0o600,
            )],
        )
        .await?;
    let argv: Vec<&str> = restore.iter().map(String::as_str).collect();
    engine
        .exec_ok(&m.container, &argv, false)
        .await
        .with_context(|| format!("restore {} from the snapshot", m.name))?;
    up::release_one(engine, state, &m.container).await
}
