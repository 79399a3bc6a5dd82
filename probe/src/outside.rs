//! `cpmlab probe start --kubeconfig FILE`: the same probe agent, run on the
//! host against any API server a kubeconfig names (a real Live CPM in a
//! Gardener landscape, a kind setup of Gardener's own, or the lab's shoot
//! API seen from outside), and `probe stop`, which judges it by the same
//! rules. No lab is needed: the agent runs as a detached host process,
//! remembered in `<state root>/outside/<name>.json` until it is stopped.
//!
//! Outside the lab, etcd is out of reach: lost writes are checked against
//! the counter read back through the API only (the tail of the ledger).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::final_read;
use super::record::FinalRead;
use super::run::{judge, note, now_unix_ms, ProbeSettings, StopOutcome, FINAL_FILE};
use super::target::{from_kubeconfig, Target};
use super::transport::{Resolver, Transport};
use crate::errors::{BadInput, EnvNotReady};

/// The host's `cpmlab-clientgo`, when the probes run one of its lanes
/// (exit 3 with the fix when it is not built): the agent runs here, not in
/// a lab image.
fn clientgo_on_host(p: &super::run::Parsed) -> Result<Option<PathBuf>> {
    if !super::run::needs_clientgo(p) {
        return Ok(None);
    }
    let part = crate::go_parts::CLIENTGO;
    match part.find() {
        Some(f) => Ok(Some(f.path().clone())),
        None => Err(EnvNotReady::new(
            "the informer-go lane needs cpmlab-clientgo, which is not built",
            format!(
                "run `{} {}` (scripts/setup does), or set {}",
                part.installer, part.name, part.env
            ),
        )
        .into()),
    }
}

/// A probe agent running on the host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OutsideRun {
    pub name: String,
    pub pid: i32,
    pub run: PathBuf,
    pub kubeconfig: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    pub namespace: String,
    pub server: String,
    pub started_unix_ms: f64,
}

/// How long the agent may take to write its first record.
const FIRST_RECORD: Duration = Duration::from_secs(60);
/// How long a stopping agent may take (its last write, the informer's
/// catch-up), before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(60);

fn state_file(state_root: &Path, name: &str) -> PathBuf {
    state_root.join("outside").join(format!("{name}.json"))
}

/// The host-side probes named `name`, if any were started and not stopped.
pub fn load(state_root: &Path, name: &str) -> Option<OutsideRun> {
    let text = std::fs::read_to_string(state_file(state_root, name)).ok()?;
    serde_json::from_str(&text).ok()
}

/// The namespace the host-side probes use unless told: their own, so that
/// they never share a counter with the lab's probes or another run.
pub fn default_namespace(name: &str) -> String {
    format!("{}-{name}", super::agent::NAMESPACE)
}

/// Whether `pid` is still this run's agent (not gone, not a zombie, not a
/// reused pid).
fn alive(r: &OutsideRun) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", r.pid)) else {
        return false;
    };
    // The state follows the parenthesised command name.
    let zombie = stat
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", r.pid)).unwrap_or_default();
    let ours = String::from_utf8_lossy(&cmdline).contains(&*r.run.to_string_lossy());
    !zombie && ours
}

pub async fn start(
    state_root: &Path,
    name: &str,
    kubeconfig: &Path,
    context: Option<&str>,
    namespace: Option<&str>,
    s: &ProbeSettings,
) -> Result<PathBuf> {
    let parsed = s.parse()?;
    if !parsed.candidates.is_empty() {
        return Err(BadInput(
            "--candidates: leader-election candidates run in a lab's seeds; from outside, use --probes informer-go".into(),
        )
        .into());
    }
    let clientgo = clientgo_on_host(&parsed)?;
    let target = from_kubeconfig(kubeconfig, context)?;
    let namespace = namespace
        .map(str::to_string)
        .unwrap_or_else(|| default_namespace(name));
    crate::topology::check_label(&namespace, 63)
        .map_err(|m| BadInput(format!("--namespace: {m}")))?;
    if let Some(r) = load(state_root, name) {
        if alive(&r) {
            return Err(EnvNotReady::new(
                format!(
                    "probes `{name}` already run against {} (pid {})",
                    r.server, r.pid
                ),
                format!("run `cpmlab probe stop --name {name}` first, or choose another --name"),
            )
            .into());
        }
    }
    if crate::state::LabDir::new(state_root, name)
        .load()
        .is_ok_and(|s| s.probe_run.is_some())
    {
        return Err(EnvNotReady::new(
            format!("lab `{name}` runs probes of its own under that name"),
            "give the host-side probes another --name".to_string(),
        )
        .into());
    }
    let kubeconfig = std::fs::canonicalize(kubeconfig)
        .with_context(|| format!("resolve {}", kubeconfig.display()))?;
    if s.parse()?
        .modes
        .contains(&super::record::ConnMode::SeedBound)
    {
        return Err(crate::errors::BadInput(
            "--modes seed-bound: the seed-bound name is the lab's (its DNS, its gateways); outside a lab, give that name as the kubeconfig's server instead"
                .into(),
        )
        .into());
    }
    if s.parse()?.modes.contains(&super::record::ConnMode::Node) {
        return Err(crate::errors::BadInput(
            "--modes node: the node lane goes through the lab's shoot node (its apiserver-proxy); \
             outside a lab, probe from a shoot node's pod instead"
                .into(),
        )
        .into());
    }
    let run = super::run::new_run_dir(&crate::state::runs_dir(state_root), name)?;
    crate::verdict::layout::write(&run)?;
    crate::verdict::run_dir::write_plan(&run, &super::run::plan(&s.parse()?))?;
    // No watch of the counter from here: the capture says why.
    super::history::Capture::of(&run).push(&crate::verdict::history::HistoryLine::Broken {
        at_unix_ms: now_unix_ms(),
        error: "etcd is out of reach from outside the lab: the counter's history cannot be watched"
            .into(),
    });
    // etcd is out of reach from here: the lost-writes check reads back the
    // counter only, and the reads are held to the acknowledged writes only
    // (stale-reads), not to etcd's order (linearizable): both degraded,
    // and said so; the run is judged by that.
    let mut criteria = crate::verdict::Criteria::default();
    criteria.uncovered.insert(
        "lost-writes".into(),
        "probes from outside the lab cannot read etcd's history of the counter; only the counter read back is checked".into(),
    );
    criteria.uncovered.insert(
        "linearizable".into(),
        "probes from outside the lab cannot read etcd's history of the counter; the reads are held to the acknowledged writes (stale-reads) only".into(),
    );
    crate::verdict::run_dir::write_criteria(&run, &criteria)?;
    let log = std::fs::File::create(run.join("agent.log"))?;
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    cmd.args(["agent", "probe", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(context.map(|c| format!("--context={c}")))
        .arg(format!("--namespace={namespace}"))
        .arg(format!("--out={}", run.join("records.ndjson").display()))
        .arg(format!("--rate={}", s.rate))
        .arg(format!("--timeout={}", s.timeout))
        .arg(format!("--probes={}", s.probes))
        .arg(format!("--modes={}", s.modes))
        .arg(format!("--write-rate={}", s.write_rate))
        .arg(format!("--write-bytes={}", s.write_bytes))
        .args(clientgo.map(|b| format!("--clientgo={}", b.display())))
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // Its own process group: a Ctrl-C meant for the shell that started it
    // does not stop it; `probe stop` does.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().context("start the probe agent")?;
    let rec = OutsideRun {
        name: name.to_string(),
        pid: child.id() as i32,
        run: run.clone(),
        kubeconfig,
        context: context.map(str::to_string),
        namespace: namespace.clone(),
        server: target.server.clone(),
        started_unix_ms: now_unix_ms(),
    };
    let file = state_file(state_root, name);
    crate::state::create_private_dir(file.parent().expect("outside/"))?;
    std::fs::write(&file, serde_json::to_string_pretty(&rec)?)
        .with_context(|| format!("write {}", file.display()))?;
    note(
        &run,
        &format!(
            "probes started from the host against {} (namespace {namespace})",
            target.server
        ),
    )?;
    // The first record: the agent has set up its objects and is probing.
    let records = run.join("records.ndjson");
    let t0 = std::time::Instant::now();
    let failure = loop {
        if std::fs::metadata(&records).map(|m| m.len()).unwrap_or(0) > 0 {
            break None;
        }
        if let Some(status) = child.try_wait()? {
            break Some(format!("the probe agent exited ({status})"));
        }
        if t0.elapsed() > FIRST_RECORD {
            let _ = child.kill();
            let _ = child.wait();
            break Some(format!(
                "the probe agent wrote no record within {FIRST_RECORD:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    if let Some(why) = failure {
        let _ = std::fs::remove_file(&file);
        let log = std::fs::read_to_string(run.join("agent.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(EnvNotReady::new(
            format!("{why} against {}:\n  {}", target.server, tail.join("\n  ")),
            format!(
                "check that the server is reachable and the kubeconfig's user may create \
                 namespace {namespace} and ConfigMaps in it (log: {})",
                run.join("agent.log").display()
            ),
        )
        .into());
    }
    Ok(run)
}

/// Stops the agent (SIGTERM: it lets its last requests end), reads the
/// counter back through the API and judges the run.
pub async fn stop(state_root: &Path, r: &OutsideRun) -> Result<StopOutcome> {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    if alive(r) {
        kill(Pid::from_raw(r.pid), Signal::SIGTERM).context("signal the probe agent")?;
        let t0 = std::time::Instant::now();
        while alive(r) {
            if t0.elapsed() > STOP_GRACE {
                tracing::warn!("the probe agent did not stop within {STOP_GRACE:?}: killing it");
                let _ = kill(Pid::from_raw(r.pid), Signal::SIGKILL);
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    } else {
        tracing::warn!(
            "the probe agent (pid {}) had already stopped; judging what it recorded",
            r.pid
        );
    }
    note(&r.run, "probes stopped")?;
    let mut fin = FinalRead::default();
    match from_kubeconfig(&r.kubeconfig, r.context.as_deref()) {
        Ok(target) => {
            final_read::read_counter(&mut fin, || counter(&target, &r.namespace)).await;
        }
        Err(e) => fin.counter_error = Some(format!("the kubeconfig: {e}")),
    }
    fin.history_error = Some(
        "etcd is out of reach from outside the lab: lost writes are checked against the counter read back only"
            .into(),
    );
    std::fs::write(r.run.join(FINAL_FILE), serde_json::to_string_pretty(&fin)?)?;
    let verdict = judge(&r.run)?;
    let _ = std::fs::remove_file(state_file(state_root, &r.name));
    Ok(StopOutcome {
        run: r.run.clone(),
        verdict,
    })
}

/// Whether the agent still runs.
pub fn running(r: &OutsideRun) -> bool {
    alive(r)
}

/// The counter through the API, as the probes reach it.
async fn counter(target: &Target, namespace: &str) -> Result<(u64, u64), String> {
    let tls = target.tls().map_err(|e| format!("{e:#}"))?;
    let t = Transport::new(
        Resolver::new(target.resolve.clone(), &target.server_name),
        &target.server_name,
        target.port,
        target.token().map(str::to_string),
        tls,
        vec![],
    );
    let path = final_read::counter_path(namespace);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let reply = t
        .send_new("GET", &path, None, deadline)
        .await
        .map_err(|f| format!("GET {path}: {}", f.error))?;
    let (code, body) = reply
        .bytes(deadline)
        .await
        .map_err(|f| format!("GET {path}: {}", f.error))?;
    final_read::parse_counter(&path, code, &String::from_utf8_lossy(&body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_that_is_not_this_runs_agent_is_not_alive() {
        let me = OutsideRun {
            name: "x".into(),
            pid: std::process::id() as i32,
            run: "/nonexistent/run-dir".into(),
            kubeconfig: "/k".into(),
            context: None,
            namespace: "n".into(),
            server: "https://a".into(),
            started_unix_ms: 0.0,
        };
        // This test process lives, but its command line names no such run.
        assert!(!alive(&me));
        assert!(!alive(&OutsideRun {
            pid: i32::MAX,
            ..me
        }));
    }

    #[test]
    fn host_side_probes_have_a_namespace_of_their_own() {
        assert_eq!(default_namespace("prod-eu"), "cpmlab-probes-prod-eu");
    }
}
