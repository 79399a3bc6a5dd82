//! The garden brought to where a Live CPM starts from: gardener-apiserver
//! aggregated behind the garden's kube-apiserver, then the project, the
//! CloudProfile, the extensions' registration, the Seeds, the region
//! ConfigMap and the Shoot bound to the source seed. Then the gardenlets
//! take over: each reports its Seed's version, the source's records the
//! shoot as running there ([`wait_gardenlets`]).

use std::time::{Duration, Instant};

use serde_json::Value;

use cpmlab_model::state::LabState;

use crate::client::{seeds_of, Garden};
use crate::objects::{self, Inputs};
use crate::GardenError;

/// How long the garden's API gets to come up, and its objects to be taken.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// Tries `f` until it succeeds or `deadline` passes; the last error then.
async fn until<T, F, Fut>(deadline: Instant, what: &str, mut f: F) -> Result<T, GardenError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, GardenError>>,
{
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() < deadline => {
                tracing::debug!("{what}: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(GardenError::Other(format!("{what}: {e}"))),
        }
    }
}

/// Waits until the garden's kube-apiserver answers `/readyz` (before
/// gardener-apiserver starts: it reads its authentication configuration
/// from there at start).
pub async fn garden_api_ready(
    garden: &Garden,
    say: &(dyn Fn(&str) + Sync),
) -> Result<(), GardenError> {
    say("the garden's kube-apiserver answers /readyz");
    until(
        Instant::now() + DEADLINE,
        "the garden's kube-apiserver /readyz",
        || garden.ready(),
    )
    .await
}

/// Brings the garden up to the shoot bound to the source seed; `say`
/// hears what is being waited for.
pub async fn bootstrap(
    garden: &Garden,
    state: &LabState,
    inputs: &Inputs,
    say: &(dyn Fn(&str) + Sync),
) -> Result<(), GardenError> {
    let deadline = Instant::now() + DEADLINE;
    say("gardener-apiserver registered (APIServices)");
    let agg = objects::aggregation(state, inputs);
    until(deadline, "apply the APIServices", || garden.apply(&agg)).await?;
    let (ns, _) = objects::shoot_ref(state);
    say("gardener-apiserver serves through the garden's kube-apiserver");
    until(
        deadline,
        "gardener-apiserver's API through the garden",
        || garden.serves_gardener_api("default"),
    )
    .await?;
    say("the project, CloudProfile, Seeds and region ConfigMap");
    let mut world = objects::gardenlet_rbac();
    world.extend(objects::world(state, inputs));
    // gardener-apiserver's admission reads the ControllerRegistration
    // through its informer: a Seed applied just after it can be refused
    // for a moment, so the whole list is applied again until it takes.
    until(deadline, "apply the garden's objects", || {
        garden.apply(&world)
    })
    .await?;
    say("the shoot, bound to the source seed");
    let shoot: Vec<Value> = vec![objects::shoot(state, inputs)];
    until(deadline, "apply the shoot", || garden.apply(&shoot)).await?;
    let _ = ns;
    Ok(())
}

/// Waits until each seed's gardenlet has reported its version on its
/// Seed and the source's has recorded the shoot as running there.
pub async fn wait_gardenlets(
    garden: &Garden,
    state: &LabState,
    deadline: Duration,
    say: &(dyn Fn(&str) + Sync),
) -> Result<(), GardenError> {
    let until_t = Instant::now() + deadline;
    for s in &state.seeds {
        say(&format!("{}'s gardenlet reports its Seed", s.name));
        until(
            until_t,
            &format!("seed {}'s gardenlet reporting its version", s.name),
            || async {
                let seed = garden.seed(&s.name).await?;
                match seed["status"]["gardener"]["version"].as_str() {
                    Some(v) if !v.is_empty() => Ok(()),
                    _ => Err(GardenError::Other(format!(
                        "seed {} reports no gardener version yet",
                        s.name
                    ))),
                }
            },
        )
        .await?;
    }
    let (ns, name) = objects::shoot_ref(state);
    let source = state.topology.source().name.clone();
    say("the source's gardenlet records the shoot as running there");
    until(until_t, "the shoot's status.seedName", || async {
        let shoot = garden.shoot(&ns, &name).await?;
        match seeds_of(&shoot).1 {
            Some(s) if s == source => Ok(()),
            other => Err(GardenError::Other(format!(
                "status.seedName is {other:?}, not {source}"
            ))),
        }
    })
    .await
}
