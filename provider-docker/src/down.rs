//! `cpmlab down`: removes every Docker object labelled for the lab, whatever
//! state it is in (half-created, crashed, running), then the lab's files.
//! Idempotent: a lab that is already gone is fine.

use std::path::Path;

use anyhow::Result;
use std::time::Duration;

use futures_util::future::join_all;

use super::engine::Engine;
use crate::state::LabDir;
pub use cpmlab_provider::DownReport;

/// Removes the lab's objects. A sweep can race a creation that was still in
/// flight when `up` was interrupted (a container appears after the listing,
/// so its volume or network is "in use"): such errors are retried in a new
/// sweep, and only objects that survive every sweep are an error.
pub async fn down(engine: &Engine, lab: &str, state_root: &Path) -> Result<DownReport> {
    let mut report = DownReport {
        lab: lab.to_string(),
        ..Default::default()
    };
    let mut errors: Vec<String> = Vec::new();
    // An environment problem among them (a stale endpoint) decides the exit.
    let mut env_problem: Option<anyhow::Error> = None;
    for sweep in 0..6u64 {
        let objs = engine.lab_objects(Some(lab)).await?;
        if objs.is_empty() {
            break;
        }
        errors.clear();
        let mut record = |results: Vec<Result<()>>| {
            for e in results.into_iter().filter_map(|r| r.err()) {
                errors.push(format!("{e:#}"));
                if e.is::<crate::errors::EnvNotReady>() {
                    env_problem = Some(e);
                }
            }
        };
        // Stopped first, then removed, as `docker compose down` does: dockerd
        // 20.10 can leave a stale endpoint (a network that cannot be removed
        // until it restarts) when a running container's network teardown
        // races its removal. A stop that fails (a paused container) is left
        // to the forced removal.
        join_all(objs.containers.iter().map(|c| engine.stop(c, 0))).await;
        record(join_all(objs.containers.iter().map(|c| engine.remove_container(c))).await);
        let gone: Vec<String> = report
            .removed
            .containers
            .iter()
            .chain(&objs.containers)
            .cloned()
            .collect();
        record(
            join_all(
                objs.networks
                    .iter()
                    .map(|n| engine.remove_network_after(n, &gone)),
            )
            .await,
        );
        record(join_all(objs.volumes.iter().map(|v| engine.remove_volume(v))).await);
        report.removed.containers.extend(objs.containers);
        report.removed.networks.extend(objs.networks);
        report.removed.volumes.extend(objs.volumes);
        if !errors.is_empty() {
            tokio::time::sleep(Duration::from_millis(200 * (sweep + 1))).await;
        }
    }
    let left = engine.lab_objects(Some(lab)).await?;
    if !left.is_empty() {
        if let Some(e) = env_problem {
            return Err(e.context(format!(
                "lab `{lab}`: {} objects could not be removed",
                left.count()
            )));
        }
        anyhow::bail!(
            "lab `{lab}`: {} objects could not be removed ({}): {}",
            left.count(),
            [left.containers, left.networks, left.volumes]
                .concat()
                .join(", "),
            errors.join("; ")
        );
    }
    for list in [
        &mut report.removed.containers,
        &mut report.removed.networks,
        &mut report.removed.volumes,
    ] {
        list.sort();
        list.dedup();
    }
    LabDir::new(state_root, lab).remove()?;
    Ok(report)
}
