//! The probes' client-go lanes: `cpmlab-clientgo` (go/clientgo, Kubernetes'
//! own client library) run by the probe agent as child processes, their
//! NDJSON turned into the agent's records.
//!
//! - **informer-go**: a shared informer through the public name, as the
//!   shoot's controllers list and watch (probe kind `informer-go`).
//! - **candidates**: one leader-election candidate per seed on one Lease
//!   (`cpmlab-probes/cpmlab-leader`), each reaching the shoot API through
//!   its own seed's gateway to its own seed's replicas (probe kind `lease`).
//!   The lab starts, stops, pauses, resumes and kills them through the run
//!   directory's `control.ndjson` (`cpmlab probe candidate`, the runner's
//!   leader-election schedule and timeline actions); the agent records each
//!   as a lease event.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

pub use super::clientgo_config::{ClientGo, LeaseTimings};
use super::context::Ctx;
use super::record::{lease_event, ConnMode, Outcome, ProbeKind, Record};

/// Where `cpmlab-clientgo` is in the lab image (the probe container's).
pub const CONTAINER_BIN: &str = "/usr/local/bin/cpmlab-clientgo";
/// The candidates' Lease, in the probes' namespace.
pub const LEASE: &str = "cpmlab-leader";
/// The run directory's file the lab appends candidate commands to.
pub const CONTROL_FILE: &str = "control.ndjson";
/// How often the agent reads the control file.
const CONTROL_POLL: Duration = Duration::from_millis(200);
/// How long a stopped candidate may take to release its lease and exit.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A candidate's identity in the Lease.
pub fn identity(seed: &str) -> String {
    format!("cpmlab-{seed}")
}

/// What the lab can tell a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum CandidateAction {
    /// Start it (again, after a stop or kill).
    Start,
    /// SIGTERM: client-go gives the lease up (ReleaseOnCancel) and exits.
    Stop,
    /// SIGSTOP: frozen, it still believes what it believed.
    Pause,
    /// SIGCONT.
    Resume,
    /// SIGKILL: no release.
    Kill,
}

impl CandidateAction {
    pub fn as_str(self) -> &'static str {
        match self {
            CandidateAction::Start => "start",
            CandidateAction::Stop => "stop",
            CandidateAction::Pause => "pause",
            CandidateAction::Resume => "resume",
            CandidateAction::Kill => "kill",
        }
    }
}

/// One line of the control file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Command_ {
    pub candidate: String,
    pub action: CandidateAction,
}

/// Tells the agent of a run to act on a candidate (appends to the run's
/// control file; the agent acts within [`CONTROL_POLL`]).
pub fn control(run: &Path, seed: &str, action: CandidateAction) -> Result<()> {
    use std::io::Write;
    let p = run.join(CONTROL_FILE);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .with_context(|| format!("open {}", p.display()))?;
    let line = serde_json::to_string(&Command_ {
        candidate: seed.into(),
        action,
    })?;
    writeln!(f, "{line}").with_context(|| format!("write {}", p.display()))?;
    Ok(())
}

/// A kubeconfig for `server`, optionally with the TLS server name the
/// certificate carries (an address in `server`).
pub fn kubeconfig(server: &str, tls_server_name: Option<&str>, ca: &Path, token: &Path) -> String {
    let sni = tls_server_name
        .map(|n| format!("    tls-server-name: {n}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: shoot\n  cluster:\n    server: {server}\n    certificate-authority: {}\n{sni}contexts:\n- name: shoot\n  context:\n    cluster: shoot\n    user: probe\ncurrent-context: shoot\nusers:\n- name: probe\n  user:\n    tokenFile: {}\n",
        ca.display(),
        token.display()
    )
}

/// The outcome class of a client-go error, from its status and text.
pub fn classify(http_status: Option<u16>, error: &str) -> Outcome {
    let e = error.to_ascii_lowercase();
    if http_status.is_some() {
        Outcome::Http
    } else if e.contains("connection refused") {
        Outcome::Refused
    } else if e.contains("timeout") || e.contains("deadline exceeded") {
        Outcome::Timeout
    } else if e.contains("reset") || e.contains("broken pipe") || e.contains("eof") {
        Outcome::Reset
    } else if e.contains("no such host") || e.contains("server misbehaving") {
        Outcome::Dns
    } else if e.contains("x509") || e.contains("tls") {
        Outcome::Tls
    } else {
        Outcome::Error
    }
}

/// One `cpmlab-clientgo` line as a record of `probe` on `mode`, or none when the line
/// is not one the verdict reads (the process's own start and stop of a
/// candidate: the agent records those itself).
pub fn to_record(
    base: Record,
    probe: ProbeKind,
    mode: ConnMode,
    line: &Value,
    wall0_ms: f64,
) -> Option<Record> {
    let kind = line["kind"].as_str()?;
    let event = match (probe, kind) {
        (ProbeKind::Lease, "op") => line["op"].as_str()?.to_string(),
        (ProbeKind::Lease, "start" | "stop") => return None,
        _ => kind.to_string(),
    };
    let mut r = base;
    r.probe = probe;
    r.mode = mode;
    if let Some(t) = line["t_unix_ms"].as_f64() {
        r.start_unix_ms = t;
        r.start_mono_ms = t - wall0_ms;
    }
    r.duration_ms = line["duration_ms"].as_f64().unwrap_or(0.0);
    r.http_status = line["http_status"]
        .as_u64()
        .filter(|s| *s > 0)
        .and_then(|s| u16::try_from(s).ok());
    r.error = line["error"].as_str().map(str::to_string);
    r.outcome = match line.get("ok").and_then(Value::as_bool) {
        Some(false) => classify(r.http_status, r.error.as_deref().unwrap_or("")),
        _ if kind == "setup-failed" => Outcome::Error,
        _ if matches!(kind, "watch-error" | "expired") => Outcome::Http,
        _ => Outcome::Ok,
    };
    r.value = line["value"].as_u64();
    r.rv = match &line["rv"] {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    };
    r.addr = line["addr"]
        .as_str()
        .filter(|a| !a.is_empty())
        .map(str::to_string);
    r.holder = line["holder"].as_str().map(str::to_string);
    r.renew_unix_ms = line["renew_time_unix_ms"].as_f64().filter(|t| *t > 0.0);
    r.event = Some(event);
    Some(r)
}

/// Reads a child's NDJSON stdout into records until it closes; returns the
/// highest counter value an informer line carried.
async fn pump(
    ctx: Arc<Ctx>,
    probe: ProbeKind,
    mode: ConnMode,
    who: Option<(String, String)>,
    stdout: tokio::process::ChildStdout,
    seen: Arc<AtomicU64>,
) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let base = ctx.record(probe, mode, Instant::now());
        let Some(mut r) = to_record(base, probe, mode, &v, ctx.wall0_ms()) else {
            continue;
        };
        if let Some((seed, id)) = &who {
            r.seed = Some(seed.clone());
            r.candidate = Some(id.clone());
        }
        if probe == ProbeKind::InformerGo
            && matches!(r.event.as_deref(), Some("apply" | "init-apply"))
        {
            if let Some(v) = r.value {
                seen.fetch_max(v, Ordering::SeqCst);
            }
        }
        ctx.emit(r);
    }
}

/// The last lines a child wrote on stderr.
async fn stderr_tail(mut e: tokio::process::ChildStderr) -> String {
    let mut buf = Vec::new();
    let _ = e.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().rev().take(3).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    if let Some(pid) = child.id() {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig);
    }
}

/// The running lanes: the informer, and each candidate's process.
pub struct Lanes {
    ctx: Arc<Ctx>,
    cfg: ClientGo,
    dir: PathBuf,
    public: PathBuf,
    informer: Option<(Child, tokio::task::JoinHandle<()>)>,
    /// The highest counter value informer-go saw.
    pub informer_seen: Arc<AtomicU64>,
    candidates: BTreeMap<String, Candidate>,
}

struct Candidate {
    child: Child,
    pump: tokio::task::JoinHandle<()>,
    stderr: tokio::task::JoinHandle<String>,
    /// The lab ended it (stop or kill): its exit is not news.
    ended_by_lab: bool,
}

impl Lanes {
    /// Writes the kubeconfigs and starts the informer and the candidates
    /// that start with the probes.
    pub(super) async fn start(
        ctx: Arc<Ctx>,
        cfg: ClientGo,
        ca_pem: &str,
        token: &str,
    ) -> Result<Lanes> {
        let dir = std::env::temp_dir().join(format!("cpmlab-clientgo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let ca = dir.join("ca.crt");
        let tok = dir.join("token");
        std::fs::write(&ca, ca_pem)?;
        std::fs::write(&tok, token)?;
        let target = &ctx.cfg.target;
        let public = match (&cfg.kubeconfig, cfg.node) {
            (Some(k), _) => k.clone(),
            (None, Some(node)) => {
                let p = dir.join("node.kubeconfig");
                let server = format!("https://{node}");
                std::fs::write(
                    &p,
                    kubeconfig(&server, Some(&target.server_name), &ca, &tok),
                )?;
                p
            }
            (None, None) => {
                let p = dir.join("public.kubeconfig");
                let server = format!("https://{}:{}", target.server_name, target.port);
                std::fs::write(&p, kubeconfig(&server, None, &ca, &tok))?;
                p
            }
        };
        for (seed, ip) in &cfg.candidates {
            let server = format!("https://{ip}:{}", target.port);
            std::fs::write(
                dir.join(format!("{seed}.kubeconfig")),
                kubeconfig(&server, Some(&target.server_name), &ca, &tok),
            )?;
        }
        let mut lanes = Lanes {
            ctx,
            cfg,
            dir,
            public,
            informer: None,
            informer_seen: Arc::new(AtomicU64::new(0)),
            candidates: BTreeMap::new(),
        };
        if lanes.cfg.informer {
            lanes.start_informer()?;
        }
        for seed in lanes.cfg.start.clone() {
            lanes.act(&seed, CandidateAction::Start).await;
        }
        Ok(lanes)
    }

    fn start_informer(&mut self) -> Result<()> {
        let mut child = Command::new(&self.cfg.bin)
            .arg("informer")
            .arg(format!("--kubeconfig={}", self.public.display()))
            .arg(format!("--namespace={}", self.ctx.cfg.namespace))
            .arg(format!("--counter={}", super::context::COUNTER))
            .arg("--out=-")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("start {} informer", self.cfg.bin.display()))?;
        let stdout = child.stdout.take().context("informer stdout")?;
        let mode = if self.cfg.node.is_some() {
            ConnMode::Node
        } else {
            ConnMode::Reused
        };
        let pump = tokio::spawn(pump(
            self.ctx.clone(),
            ProbeKind::InformerGo,
            mode,
            None,
            stdout,
            self.informer_seen.clone(),
        ));
        self.informer = Some((child, pump));
        Ok(())
    }

    /// Stops the informer (SIGTERM) and waits for its last lines.
    pub async fn stop_informer(&mut self) {
        if let Some((mut child, pump)) = self.informer.take() {
            signal(&child, nix::sys::signal::Signal::SIGTERM);
            let _ = tokio::time::timeout(STOP_GRACE, child.wait()).await;
            let _ = child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(2), pump).await;
        }
    }

    fn moment(&self, seed: &str, event: &str, error: Option<String>) {
        let mut r = self
            .ctx
            .record(ProbeKind::Lease, ConnMode::Reused, Instant::now());
        r.event = Some(event.into());
        r.seed = Some(seed.into());
        r.candidate = Some(identity(seed));
        r.error = error;
        self.ctx.emit(r);
    }

    /// Carries out one action on a seed's candidate, recording it.
    pub async fn act(&mut self, seed: &str, action: CandidateAction) {
        let Some((_, ip)) = self.cfg.candidates.iter().find(|(s, _)| s == seed) else {
            tracing::warn!("no candidate in `{seed}`: {action:?} ignored");
            return;
        };
        let _ = ip;
        use nix::sys::signal::Signal;
        match action {
            CandidateAction::Start => {
                if self.candidates.contains_key(seed) {
                    return;
                }
                let t = self.cfg.timings;
                let spawned = Command::new(&self.cfg.bin)
                    .arg("elect")
                    .arg(format!(
                        "--kubeconfig={}",
                        self.dir.join(format!("{seed}.kubeconfig")).display()
                    ))
                    .arg(format!("--namespace={}", self.ctx.cfg.namespace))
                    .arg(format!("--lease={LEASE}"))
                    .arg(format!("--identity={}", identity(seed)))
                    .arg(format!("--seed={seed}"))
                    .arg(format!(
                        "--lease-duration={}ms",
                        t.lease_duration.as_millis()
                    ))
                    .arg(format!(
                        "--renew-deadline={}ms",
                        t.renew_deadline.as_millis()
                    ))
                    .arg(format!("--retry-period={}ms", t.retry_period.as_millis()))
                    .arg("--out=-")
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true)
                    .spawn();
                let mut child = match spawned {
                    Ok(c) => c,
                    Err(e) => {
                        self.moment(seed, lease_event::EXITED, Some(format!("not started: {e}")));
                        return;
                    }
                };
                self.moment(seed, lease_event::START, None);
                let stdout = child.stdout.take().expect("piped stdout");
                let stderr = child.stderr.take().expect("piped stderr");
                let pump = tokio::spawn(pump(
                    self.ctx.clone(),
                    ProbeKind::Lease,
                    ConnMode::Reused,
                    Some((seed.to_string(), identity(seed))),
                    stdout,
                    Arc::new(AtomicU64::new(0)),
                ));
                self.candidates.insert(
                    seed.to_string(),
                    Candidate {
                        child,
                        pump,
                        stderr: tokio::spawn(stderr_tail(stderr)),
                        ended_by_lab: false,
                    },
                );
            }
            CandidateAction::Pause | CandidateAction::Resume => {
                let Some(c) = self.candidates.get(seed) else {
                    return;
                };
                let (sig, ev) = if action == CandidateAction::Pause {
                    (Signal::SIGSTOP, lease_event::PAUSED)
                } else {
                    (Signal::SIGCONT, lease_event::RESUMED)
                };
                signal(&c.child, sig);
                self.moment(seed, ev, None);
            }
            CandidateAction::Stop | CandidateAction::Kill => {
                let Some(mut c) = self.candidates.remove(seed) else {
                    return;
                };
                c.ended_by_lab = true;
                if action == CandidateAction::Kill {
                    self.moment(seed, lease_event::KILLED, None);
                    let _ = c.child.start_kill();
                } else {
                    self.moment(seed, lease_event::STOP, None);
                    // A paused candidate must run to hear the SIGTERM.
                    signal(&c.child, Signal::SIGCONT);
                    signal(&c.child, Signal::SIGTERM);
                    if tokio::time::timeout(STOP_GRACE, c.child.wait())
                        .await
                        .is_err()
                    {
                        let _ = c.child.start_kill();
                    }
                }
                let _ = c.child.wait().await;
                let _ = tokio::time::timeout(Duration::from_secs(2), c.pump).await;
                c.stderr.abort();
            }
        }
    }

    /// Records candidates that ended by themselves (not by the lab).
    pub async fn reap(&mut self) {
        let mut gone = Vec::new();
        for (seed, c) in self.candidates.iter_mut() {
            if let Ok(Some(status)) = c.child.try_wait() {
                if !c.ended_by_lab {
                    gone.push((seed.clone(), status));
                }
            }
        }
        for (seed, status) in gone {
            if let Some(c) = self.candidates.remove(&seed) {
                let _ = tokio::time::timeout(Duration::from_secs(2), c.pump).await;
                let tail = tokio::time::timeout(Duration::from_secs(2), c.stderr)
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .unwrap_or_default();
                self.moment(
                    &seed,
                    lease_event::EXITED,
                    Some(format!("{status}: {tail}")),
                );
            }
        }
    }

    /// Ends every candidate still running as the run ends: their records
    /// stop first, then the processes are killed, so the end of the run is
    /// neither a loss nor a handover (their belief ends with the records).
    pub async fn end_candidates(&mut self) {
        for (_, c) in std::mem::take(&mut self.candidates) {
            c.pump.abort();
            c.stderr.abort();
            let mut child = c.child;
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// Follows the control file until `stop` turns true, acting on each
    /// command and noticing candidates that exit by themselves.
    pub async fn follow(&mut self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut offset = 0u64;
        let mut partial = String::new();
        loop {
            if *stop.borrow() {
                return;
            }
            for cmd in read_new(&self.cfg.control, &mut offset, &mut partial) {
                self.act(&cmd.candidate, cmd.action).await;
            }
            self.reap().await;
            tokio::select! {
                _ = tokio::time::sleep(CONTROL_POLL) => {}
                _ = stop.changed() => {}
            }
        }
    }
}

impl Drop for Lanes {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The commands appended to the control file since `offset` (a line still
/// being written waits in `partial`; a line that does not parse is logged
/// and skipped).
pub fn read_new(path: &Path, offset: &mut u64, partial: &mut String) -> Vec<Command_> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    if f.seek(SeekFrom::Start(*offset)).is_err() {
        return Vec::new();
    }
    let mut buf = String::new();
    let Ok(n) = f.read_to_string(&mut buf) else {
        return Vec::new();
    };
    *offset += n as u64;
    partial.push_str(&buf);
    let mut out = Vec::new();
    while let Some(i) = partial.find('\n') {
        let line: String = partial.drain(..=i).collect();
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match serde_json::from_str::<Command_>(line) {
            Ok(c) => out.push(c),
            Err(e) => tracing::warn!("{}: `{line}`: {e}", path.display()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A record as the agent stamps it before a line fills it in.
    fn base() -> Record {
        serde_json::from_value(json!({"seq": 7, "probe": "get", "mode": "new",
            "start_unix_ms": 0.0, "start_mono_ms": 0.0, "duration_ms": 0.0, "outcome": "ok"}))
        .unwrap()
    }

    #[test]
    fn clientgo_lines_become_records() {
        let op = json!({"kind":"op","op":"update","ok":false,"addr":"10.0.0.1:443","error":"Put \"https://10.0.0.1/\": dial tcp: connect: connection refused","http_status":0,"holder":"cpmlab-seed-a","renew_time_unix_ms":1000.5,"t_unix_ms":2000.0,"duration_ms":3.5});
        let r = to_record(base(), ProbeKind::Lease, ConnMode::Reused, &op, 1500.0).unwrap();
        assert_eq!(r.event.as_deref(), Some("update"));
        assert_eq!(r.outcome, Outcome::Refused);
        assert_eq!(r.http_status, None);
        assert_eq!(r.holder.as_deref(), Some("cpmlab-seed-a"));
        assert_eq!(r.renew_unix_ms, Some(1000.5));
        assert_eq!(r.addr.as_deref(), Some("10.0.0.1:443"));
        assert_eq!(
            (r.start_unix_ms, r.start_mono_ms, r.duration_ms),
            (2000.0, 500.0, 3.5)
        );
        assert_eq!(r.seq, 7);
        let conflict = json!({"kind":"op","op":"update","ok":false,"error":"Operation cannot be fulfilled","http_status":409,"t_unix_ms":1.0});
        let r = to_record(base(), ProbeKind::Lease, ConnMode::Reused, &conflict, 0.0).unwrap();
        assert_eq!((r.outcome, r.http_status), (Outcome::Http, Some(409)));
        // The process's own start/stop of a candidate: the agent records those.
        assert!(to_record(
            base(),
            ProbeKind::Lease,
            ConnMode::Reused,
            &json!({"kind":"start"}),
            0.0
        )
        .is_none());
        let list =
            json!({"kind":"list","ok":true,"rv":"123","items":2,"t_unix_ms":5.0,"duration_ms":1.0});
        let r = to_record(base(), ProbeKind::InformerGo, ConnMode::Reused, &list, 0.0).unwrap();
        assert_eq!(
            (r.event.as_deref(), r.rv, r.outcome),
            (Some("list"), Some(123), Outcome::Ok)
        );
        let apply = json!({"kind":"apply","rv":124,"value":9,"t_unix_ms":6.0});
        let r = to_record(base(), ProbeKind::InformerGo, ConnMode::Reused, &apply, 0.0).unwrap();
        assert_eq!(
            (r.value, r.rv, r.mode),
            (Some(9), Some(124), ConnMode::Reused)
        );
        let expired = json!({"kind":"expired","http_status":410,"error":"too old","t_unix_ms":7.0});
        let r = to_record(
            base(),
            ProbeKind::InformerGo,
            ConnMode::Reused,
            &expired,
            0.0,
        )
        .unwrap();
        assert_eq!((r.outcome, r.http_status), (Outcome::Http, Some(410)));
        assert!(to_record(
            base(),
            ProbeKind::InformerGo,
            ConnMode::Reused,
            &json!({"no":"kind"}),
            0.0
        )
        .is_none());
    }

    #[test]
    fn client_go_refuses_what_the_settings_refuse() {
        assert!(LeaseTimings::default().check().is_ok());
        let s = Duration::from_secs;
        for (l, d, r) in [(10, 10, 2), (15, 2, 2), (15, 10, 0)] {
            let t = LeaseTimings {
                lease_duration: s(l),
                renew_deadline: s(d),
                retry_period: s(r),
            };
            assert!(t.check().is_err(), "{t:?}");
        }
    }

    #[test]
    fn the_control_file_is_read_line_by_line_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(CONTROL_FILE);
        let (mut off, mut partial) = (0, String::new());
        assert!(read_new(&p, &mut off, &mut partial).is_empty());
        control(dir.path(), "seed-a", CandidateAction::Start).unwrap();
        control(dir.path(), "seed-b", CandidateAction::Pause).unwrap();
        let got = read_new(&p, &mut off, &mut partial);
        assert_eq!(
            got,
            [
                Command_ {
                    candidate: "seed-a".into(),
                    action: CandidateAction::Start
                },
                Command_ {
                    candidate: "seed-b".into(),
                    action: CandidateAction::Pause
                },
            ]
        );
        // Half a line waits for its end; garbage is skipped.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .and_then(|mut f| {
                use std::io::Write;
                write!(f, "not json\n{{\"candidate\":\"seed-a\",\"act")
            })
            .unwrap();
        assert!(read_new(&p, &mut off, &mut partial).is_empty());
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .and_then(|mut f| {
                use std::io::Write;
                writeln!(f, "ion\":\"kill\"}}")
            })
            .unwrap();
        assert_eq!(
            read_new(&p, &mut off, &mut partial),
            [Command_ {
                candidate: "seed-a".into(),
                action: CandidateAction::Kill
            }]
        );
    }

    #[test]
    fn a_candidates_kubeconfig_names_its_gateway_and_the_api_name() {
        let k = kubeconfig(
            "https://10.1.2.3:443",
            Some("api.shoot.local"),
            Path::new("/t/ca.crt"),
            Path::new("/t/token"),
        );
        let v: serde_json::Value = serde_saphyr::from_str(&k).unwrap();
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "https://10.1.2.3:443"
        );
        assert_eq!(
            v["clusters"][0]["cluster"]["tls-server-name"],
            "api.shoot.local"
        );
        assert_eq!(v["users"][0]["user"]["tokenFile"], "/t/token");
        assert_eq!(v["current-context"], "shoot");
    }
}
