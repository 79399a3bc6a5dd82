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

/// Tells the gateway of `seed` what it exposes now and how its API
/// replicas are (running since when, terminating), in place: the file is
/// uploaded beside and renamed, the gateway's agent picks it up, and the
/// connections Envoy carries go on. Gives the gateway the members' addresses.
pub async fn sync_gateway(engine: &Engine, state: &LabState, seed: &str) -> Result<()> {
    let s = state
        .seed(seed)
        .with_context(|| format!("no seed {seed}"))?;
    let gw = &s.gateway.container;
    let mut runs = std::collections::BTreeMap::new();
    for a in state.apiservers_of(seed) {
        runs.insert(a.name.clone(), engine.run_state(&a.container).await?);
    }
    let input = crate::gateway::GatewayInput::of(state, seed, |a| {
        runs.get(&a.name).copied().unwrap_or((false, None))
    })
    .map_err(anyhow::Error::msg)?;
    let tmp = format!("{}.next", crate::gateway::INPUT);
    engine
        .upload(
            gw,
            &[FileSpec::new(
                tmp.clone(),
                serde_json::to_vec_pretty(&input)?,
                0o644,
            )],
        )
        .await?;
    engine
        .exec_ok(gw, &["mv", &tmp, crate::gateway::INPUT], false)
        .await
        .with_context(|| format!("put the input of {gw} in place"))?;
    let pid = engine.running_container(gw).await?.pid;
    up::set_routes(pid, up::net_plan(state, &[s.network.as_str()], Some(seed)))
        .await
        .context("give the gateway the members' addresses")
}

/// How long a seed's gateway may take to serve every API replica: the
/// readiness probe's initial delay and a period or two (Gardener's: 10 s
/// and 10 s), with room for a loaded machine.
const SERVED_DEADLINE: std::time::Duration = std::time::Duration::from_secs(90);

/// Waits until the gateway of `seed` serves every API replica of the seed
/// that is running and not terminating, as a Deployment's rollout waits
/// for its pods to be Ready (each passed its readiness probe, and istiod
/// pushed its endpoint): read from the gateway's own records.
pub async fn wait_served(
    engine: &Engine,
    state: &LabState,
    seed: &str,
    cancel: &crate::errors::Cancel,
) -> Result<()> {
    let s = state
        .seed(seed)
        .with_context(|| format!("no seed {seed}"))?;
    let want: Vec<(String, String)> = state
        .apiservers_of(seed)
        .filter(|a| !a.terminating)
        .map(|a| {
            (
                a.name.clone(),
                format!("{}:{}", a.ip, crate::gateway::API_PORT),
            )
        })
        .collect();
    let t0 = std::time::Instant::now();
    loop {
        cancel.check()?;
        let text = engine
            .exec_ok(
                &s.gateway.container,
                &["cat", crate::gateway::RECORDS],
                false,
            )
            .await
            .unwrap_or_default();
        let records = crate::gateway::parse_records(&text);
        let served = records
            .iter()
            .rev()
            .find(|r| r.event == "push")
            .and_then(|r| r.endpoints.clone())
            .unwrap_or_default();
        let missing: Vec<&(String, String)> =
            want.iter().filter(|(_, a)| !served.contains(a)).collect();
        if missing.is_empty() {
            return Ok(());
        }
        if t0.elapsed() > SERVED_DEADLINE {
            let last = |name: &str| {
                records
                    .iter()
                    .rev()
                    .find(|r| r.replica.as_deref() == Some(name) && r.event == "probe")
                    .map(|r| format!("{:?} {:?}", r.result, r.detail))
                    .unwrap_or_else(|| "never probed".into())
            };
            anyhow::bail!(
                "the `{seed}` gateway did not serve {} within {SERVED_DEADLINE:?} (last readiness probe: {}); see {} in {}",
                missing.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "),
                missing.iter().map(|(n, _)| format!("{n}: {}", last(n))).collect::<Vec<_>>().join("; "),
                crate::gateway::RECORDS,
                s.gateway.container
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
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
    let api_server = up::resolve_api_server(up::choice_of(state.api_kind))?;
    let spec = up::apiserver_spec(state, ca, a, etcd_servers, &api_server, sa)?;
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
