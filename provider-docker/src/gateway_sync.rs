//! A seed's gateway kept in step with the lab: what it exposes and how its
//! API replicas are (`sync_gateway`), and the wait until it serves every
//! running replica (`wait_served`, read from the gateway's own records).

use anyhow::{Context, Result};

use super::engine::{Engine, FileSpec};
use crate::state::LabState;

/// Tells the gateway of `seed` what it exposes now and how its API
/// replicas are (running since when, terminating), in place: the file is
/// uploaded beside and renamed, the gateway's agent picks it up, and the
/// connections Envoy carries go on. Gives the gateway the members' addresses.
pub async fn sync_gateway(engine: &Engine, state: &LabState, seed: &str) -> Result<()> {
    sync(engine, state, seed, false).await
}

/// `sync_gateway` at `up`, once the lab has seen every replica of `seed`
/// answer /readyz itself: the replicas the lab starts from are
/// `established` (the gateway takes them as Ready at once; `Replica`).
pub async fn sync_gateway_established(engine: &Engine, state: &LabState, seed: &str) -> Result<()> {
    sync(engine, state, seed, true).await
}

async fn sync(engine: &Engine, state: &LabState, seed: &str, established: bool) -> Result<()> {
    let s = state
        .seed(seed)
        .with_context(|| format!("no seed {seed}"))?;
    let gw = &s.gateway.container;
    let mut runs = std::collections::BTreeMap::new();
    for a in state.apiservers_of(seed) {
        runs.insert(a.name.clone(), engine.run_state(&a.container).await?);
    }
    let mut input = crate::gateway::GatewayInput::of(state, seed, |a| {
        runs.get(&a.name).copied().unwrap_or((false, None))
    })
    .map_err(anyhow::Error::msg)?;
    for r in &mut input.replicas {
        r.established = established && r.running;
    }
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
    super::routes::set_routes(
        engine,
        state,
        gw,
        super::routes::net_plan(state, &[s.network.as_str()], Some(seed)),
    )
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
                format!("{}:{}", a.ip, crate::exposure::API_PORT),
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
        if t0.elapsed() > state.stretch(SERVED_DEADLINE) {
            let last = |name: &str| {
                records
                    .iter()
                    .rev()
                    .find(|r| r.replica.as_deref() == Some(name) && r.event == "probe")
                    .map(|r| format!("{:?} {:?}", r.result, r.detail))
                    .unwrap_or_else(|| "never probed".into())
            };
            anyhow::bail!(
                "the `{seed}` gateway did not serve {} within {:?} (last readiness probe: {}); see {} in {}",
                missing.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "),
                state.stretch(SERVED_DEADLINE),
                missing.iter().map(|(n, _)| format!("{n}: {}", last(n))).collect::<Vec<_>>().join("; "),
                crate::gateway::RECORDS,
                s.gateway.container
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}
