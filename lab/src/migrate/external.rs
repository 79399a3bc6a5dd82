//! `cpmlab migrate --driver external --command '...'`: another controller
//! takes the lab's gardenlets' place (a real gardenlet build once upstream's
//! flow exists, or a script) while the lab keeps shaping links, probing and
//! recording. The lab triggers the migration in the garden as an operator
//! does, with `cpmlab.lab/driver: external` on the Shoot so that its own
//! gardenlets stand aside; the command runs under `sh -c` with what a
//! gardenlet of each seed is given in its environment: the garden's
//! kubeconfig for each seed's gardenlet (Gardener's seed identity), the
//! Shoot's namespace and name, and on the kind form each seed's cluster
//! kubeconfig. Its run is a phase band in the probe run, beside the steps'
//! bands it writes, so the verdict applies unchanged.

use std::path::Path;
use std::process::Stdio;

use anyhow::{Context, Result};

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

/// The garden's side of the environment: the Shoot, and a garden
/// kubeconfig per gardenlet (written into the lab's directory), and on
/// the kind form each seed's cluster kubeconfig.
fn garden_environment(
    dir: &LabDir,
    state: &LabState,
    from: &str,
    to: &str,
) -> Result<Vec<(String, String)>> {
    use crate::garden::access::{kubeconfig, Identity};
    let (ns, name) = crate::garden::objects::shoot_ref(state);
    let root = std::fs::canonicalize(&dir.root).unwrap_or_else(|_| dir.root.clone());
    let mut env = vec![
        ("CPMLAB_SHOOT_NAMESPACE".to_string(), ns),
        ("CPMLAB_SHOOT_NAME".to_string(), name),
    ];
    let operator = root.join("garden.kubeconfig");
    crate::state::write_private(&operator, kubeconfig(dir, state, &Identity::Operator)?)?;
    env.push((
        "CPMLAB_GARDEN_KUBECONFIG".into(),
        operator.display().to_string(),
    ));
    for (role, seed) in [("SOURCE", from), ("DESTINATION", to)] {
        let p = root.join(format!("gardenlet-{seed}.garden.kubeconfig"));
        crate::state::write_private(
            &p,
            kubeconfig(dir, state, &Identity::Gardenlet(seed.to_string()))?,
        )?;
        env.push((
            format!("CPMLAB_{role}_GARDEN_KUBECONFIG"),
            p.display().to_string(),
        ));
        let seed_kubeconfig = root.join(format!("gardenlet-{seed}.kubeconfig"));
        if seed_kubeconfig.is_file() {
            env.push((
                format!("CPMLAB_{role}_SEED_KUBECONFIG"),
                seed_kubeconfig.display().to_string(),
            ));
        }
    }
    Ok(env)
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
        .envs(garden_environment(dir, &state, from, to)?)
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
    Ok(code)
}
