//! `cpmlab down`: removes every Docker object labelled for the lab, whatever
//! state it is in (half-created, crashed, running), then the lab's files.
//! Idempotent: a lab that is already gone is fine.

use std::path::Path;

use anyhow::Result;
use futures_util::future::try_join_all;
use serde::Serialize;

use super::engine::{Engine, LabObjects};
use crate::state::LabDir;

#[derive(Debug, Default, Clone, Serialize)]
pub struct DownReport {
    pub lab: String,
    pub removed: LabObjects,
}

/// Removes the lab's objects; repeats the sweep while objects remain, which
/// catches a creation that was still in flight when `up` was interrupted.
pub async fn down(engine: &Engine, lab: &str, state_root: &Path) -> Result<DownReport> {
    let mut report = DownReport {
        lab: lab.to_string(),
        ..Default::default()
    };
    for _sweep in 0..3 {
        let objs = engine.lab_objects(Some(lab)).await?;
        if objs.is_empty() {
            break;
        }
        try_join_all(objs.containers.iter().map(|c| engine.remove_container(c))).await?;
        try_join_all(objs.networks.iter().map(|n| engine.remove_network(n))).await?;
        try_join_all(objs.volumes.iter().map(|v| engine.remove_volume(v))).await?;
        report.removed.containers.extend(objs.containers);
        report.removed.networks.extend(objs.networks);
        report.removed.volumes.extend(objs.volumes);
    }
    let left = engine.lab_objects(Some(lab)).await?;
    if !left.is_empty() {
        anyhow::bail!(
            "lab `{lab}`: {} objects could not be removed: {:?}",
            left.count(),
            left
        );
    }
    LabDir::new(state_root, lab).remove()?;
    Ok(report)
}

/// Every lab Docker knows of, plus state directories without objects.
pub async fn all_labs(engine: &Engine, state_root: &Path) -> Result<Vec<String>> {
    let mut labs = engine.lab_names().await?;
    if let Ok(rd) = std::fs::read_dir(state_root) {
        for e in rd.flatten() {
            if e.path().join("state.json").exists() {
                labs.push(e.file_name().to_string_lossy().into_owned());
            }
        }
    }
    labs.sort();
    labs.dedup();
    Ok(labs)
}
