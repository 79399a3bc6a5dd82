//! `cpmlab migrate --driver external --command '...'`: another controller (a
//! real gardenlet and etcd-druid setup, or a script) performs the migration
//! while the lab keeps shaping links, probing and recording. The command runs
//! under `sh -c` with the lab's coordinates in its environment; its run is a
//! phase band in the probe run, so the verdict applies unchanged.

use std::path::Path;
use std::process::Stdio;

use anyhow::{Context, Result};

use super::conditions::Conditions;
use super::record::{Driver, MigrationState};
use crate::errors::{Cancel, Interrupted};
use crate::probe::run::{now_unix_ms, record_lab_event as event};
use crate::state::{LabDir, LabState};

/// The one step an external driver's migration records.
pub const EXTERNAL_STEP: &str = "ExternalDriver";

/// The environment the command gets.
pub fn environment(
    state: &LabState,
    state_root: &Path,
    kubeconfig: &Path,
    from: &str,
    to: &str,
) -> Vec<(String, String)> {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "cpmlab".into());
    let gw = |s: &str| {
        state
            .seed(s)
            .map(|s| s.gateway.ip.to_string())
            .unwrap_or_default()
    };
    vec![
        ("CPMLAB_NAME".into(), state.name.clone()),
        ("CPMLAB_STATE_DIR".into(), state_root.display().to_string()),
        ("CPMLAB_BIN".into(), exe),
        ("KUBECONFIG".into(), kubeconfig.display().to_string()),
        ("CPMLAB_API_NAME".into(), state.dns.api_name.clone()),
        ("CPMLAB_DNS_SERVER".into(), state.dns.server.ip.to_string()),
        ("CPMLAB_SOURCE_SEED".into(), from.to_string()),
        ("CPMLAB_DESTINATION_SEED".into(), to.to_string()),
        ("CPMLAB_SOURCE_GATEWAY".into(), gw(from)),
        ("CPMLAB_DESTINATION_GATEWAY".into(), gw(to)),
    ]
}

/// Runs `command` as the migration; Ok(exit status of the command).
pub async fn run(
    dir: &LabDir,
    state_root: &Path,
    command: &str,
    from: &str,
    to: &str,
    cancel: &Cancel,
) -> Result<i32> {
    let state = dir.load()?;
    let kubeconfig = crate::kubeconfig::write(dir, &state).await?;
    let started = now_unix_ms();
    let mut conditions = Conditions::new(&super::flow::now_rfc3339());
    for c in conditions.0.iter_mut() {
        c.reason = "ExternalDriver".into();
        c.message = "set by the external driver, not by cpmlab".into();
    }
    let mig = MigrationState {
        plan: super::membership::Plan::SixMember,
        from: from.into(),
        to: to.into(),
        driver: Driver::External,
        force_shrink: false,
        leader_handover: Default::default(),
        order: Default::default(),
        gateway_handover: Default::default(),
        source_gateway_released_unix_ms: None,
        source_gateway_drained_unix_ms: None,
        source_gateway_forwarded_unix_ms: None,
        cleanup_before_api_ms: 0,
        conditions,
        started_unix_ms: started,
        finished_unix_ms: None,
        rtt_ms: None,
        rtt_gate: None,
        destination_members: vec![],
        destination_apiservers: vec![],
        departed_members: vec![],
        dns_switched_unix_ms: None,
        command: Some(command.into()),
    };
    dir.update(|s| s.migration = Some(mig))?;
    event(
        dir,
        "note",
        "external driver started",
        command,
        started,
        None,
    );
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .envs(environment(&state, state_root, &kubeconfig, from, to))
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("start the external driver `{command}`"))?;
    let status = loop {
        tokio::select! {
            s = child.wait() => break s.context("wait for the external driver")?,
            _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {
                if cancel.check().is_err() {
                    let _ = child.kill().await;
                    return Err(Interrupted.into());
                }
            }
        }
    };
    let end = now_unix_ms();
    let code = status.code().unwrap_or(-1);
    // Its one step, True when it exited 0.
    crate::probe::run::record_step(
        dir,
        EXTERNAL_STEP,
        &format!("`{command}` exited {code}"),
        if code == 0 { "True" } else { "False" },
        started,
        end,
    );
    dir.update(|s| {
        if let Some(m) = s.migration.as_mut() {
            m.finished_unix_ms = Some(end);
        }
    })?;
    Ok(code)
}
