//! `cpmlab agent gateway`: the process a seed's gateway container runs,
//! Envoy its child. Like pilot-agent it starts Envoy on a bootstrap and
//! drains it on SIGTERM (POST /drain_listeners?graceful, then
//! `termination_drain_ms`, then Envoy is killed); like istiod it renders
//! the configuration of what the lab says the seed exposes and pushes it
//! through Envoy's watched files, debounced; like the kubelet it probes
//! each API replica's readiness, and like the EndpointSlice controller it
//! serves the ready ones that are not terminating.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::Value;
use tokio::sync::mpsc;

use super::lifecycle::{self, Debouncer, ProbeClock, ProbeResult, Readiness, Replica};
use super::{probe, GatewayInput, Record, ENVOY_IN_IMAGE, RECORDS, TOKEN_FILE};
use crate::exposure::envoy as render;
use crate::probe::clock::now_unix_ms;

/// Where the agent finds its parts (the image's, unless a test says otherwise).
#[derive(Debug, Clone)]
pub struct Paths {
    pub input: PathBuf,
    pub token: PathBuf,
    pub records: PathBuf,
    pub xds_dir: PathBuf,
    pub bootstrap: PathBuf,
    pub envoy: PathBuf,
}

impl Default for Paths {
    fn default() -> Self {
        Paths {
            input: super::INPUT.into(),
            token: TOKEN_FILE.into(),
            records: RECORDS.into(),
            xds_dir: render::XDS_DIR.into(),
            bootstrap: render::BOOTSTRAP.into(),
            envoy: ENVOY_IN_IMAGE.into(),
        }
    }
}

enum Event {
    Input(Box<GatewayInput>),
    Probe {
        replica: String,
        generation: u64,
        result: ProbeResult,
        status: Option<u16>,
        detail: Option<String>,
        duration_ms: f64,
    },
}

/// Writes records to the file and to stdout (the container's log).
struct Recorder {
    file: Option<std::fs::File>,
}

impl Recorder {
    fn open(path: &Path) -> Recorder {
        if let Some(d) = path.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        Recorder {
            file: std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .ok(),
        }
    }

    fn write(&mut self, r: &Record) {
        let line = serde_json::to_string(r).unwrap_or_default();
        if let Some(f) = &mut self.file {
            let _ = writeln!(f, "{line}");
        }
        println!("cpmlab-gateway {line}");
    }
}

/// Writes `value` as `dir/name` by renaming a file written beside it, so
/// that Envoy, which watches the directory, sees one atomic move.
pub fn write_atomically(dir: &Path, name: &str, value: &Value) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec_pretty(value)?)?;
    std::fs::rename(&tmp, dir.join(name))
}

/// What the agent last wrote, file by file: only changes are written.
#[derive(Default)]
struct Written(BTreeMap<String, Value>);

impl Written {
    /// Whether writing `files` would change any of them.
    fn changes(&self, files: &[(String, Value)]) -> bool {
        files.iter().any(|(name, v)| self.0.get(name) != Some(v))
    }

    fn write(&mut self, dir: &Path, files: &[(String, Value)]) -> Result<usize> {
        let mut n = 0;
        for (name, v) in files {
            if self.0.get(name) == Some(v) {
                continue;
            }
            write_atomically(dir, name, v).with_context(|| format!("write {name}"))?;
            self.0.insert(name.clone(), v.clone());
            n += 1;
        }
        Ok(n)
    }
}

/// The endpoints of the exposure's API clusters: every API destination
/// (plain, mutual TLS, upgrade) selects the same pods.
fn ready_map(input: &GatewayInput, served: &[SocketAddrV4]) -> BTreeMap<String, Vec<SocketAddrV4>> {
    input
        .exposure
        .api_destinations()
        .into_iter()
        .map(|(_, d)| (d.cluster(), served.to_vec()))
        .collect()
}

/// Writes the whole configuration for `served` in the order istiod pushes
/// it over ADS: endpoints and clusters, then listeners, then routes (a new
/// listener warms until its routes come; a removed one starts draining
/// before its route name is served empty, as istiod serves a deleted
/// Gateway's). With Envoy running (`envoy_up`), new clusters are waited
/// for until Envoy has taken them before the listeners are written:
/// Envoy re-reads every file of a watched directory on each move, in no
/// set order, and a listener whose inline routes name a cluster it does
/// not know yet is rejected (the apiserver-proxy's internal listener).
async fn push(
    paths: &Paths,
    written: &mut Written,
    input: &GatewayInput,
    served: &[SocketAddrV4],
    envoy_up: bool,
) -> Result<usize> {
    let xds = render::render(&input.exposure);
    let files = xds.files();
    let of = |name: &str| -> Vec<(String, serde_json::Value)> {
        files.iter().filter(|(n, _)| n == name).cloned().collect()
    };
    let (lds, cds) = (of(render::LDS_FILE), of(render::CDS_FILE));
    // Every route configuration's file (the `wildcard-tls` server's has
    // its own).
    let rds: Vec<_> = files
        .iter()
        .filter(|(n, _)| n != render::LDS_FILE && n != render::CDS_FILE)
        .cloned()
        .collect();
    let eds = render::eds_files(&input.exposure, &ready_map(input, served));
    let mut n = written.write(&paths.xds_dir, &eds)?;
    let clusters = written.write(&paths.xds_dir, &cds)?;
    n += clusters;
    if clusters > 0 && envoy_up && written.changes(&lds) {
        let version = cds[0].1["version_info"].as_str().unwrap_or_default();
        if let Err(e) = wait_cds_version(version, CDS_TAKEN_DEADLINE).await {
            eprintln!("cpmlab-gateway: writing the listeners anyway: {e:#}");
        }
    }
    n += written.write(&paths.xds_dir, &lds)?;
    n += written.write(&paths.xds_dir, &rds)?;
    Ok(n)
}

/// How long the agent waits for Envoy to take a new CDS file before it
/// writes the listeners anyway (Envoy reads a moved file within
/// milliseconds; a loaded machine, a second or two).
const CDS_TAKEN_DEADLINE: Duration = Duration::from_secs(10);

/// Waits until Envoy's `cluster_manager.cds.version_text` is `version`.
async fn wait_cds_version(version: &str, deadline: Duration) -> Result<()> {
    let t0 = Instant::now();
    let want = format!("cluster_manager.cds.version_text: \"{version}\"");
    let mut last = String::new();
    while t0.elapsed() < deadline {
        match admin(
            "GET",
            "/stats?filter=%5Ecluster_manager%5C.cds%5C.version_text%24",
        )
        .await
        {
            Ok(body) if body.contains(&want) => return Ok(()),
            Ok(body) => last = body.trim().to_string(),
            Err(e) => last = format!("{e:#}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("Envoy did not take CDS version {version} within {deadline:?} (last: {last})")
}

fn read_input(path: &Path) -> Result<GatewayInput> {
    let text = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("parse {}", path.display()))
}

/// Polls the input file; sends each new content that parses.
async fn watch_input(path: PathBuf, tx: mpsc::Sender<Event>, mut last: Vec<u8>) {
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let Ok(text) = std::fs::read(&path) else {
            continue;
        };
        if text == last {
            continue;
        }
        match serde_json::from_slice::<GatewayInput>(&text) {
            Ok(i) => {
                last = text;
                if tx.send(Event::Input(Box::new(i))).await.is_err() {
                    return;
                }
            }
            Err(e) => eprintln!("cpmlab-gateway: {} does not parse yet: {e}", path.display()),
        }
    }
}

/// The kubelet's probe worker of one replica.
async fn probe_worker(
    r: Replica,
    generation: u64,
    timing: crate::topology::ProbeTiming,
    token: String,
    tx: mpsc::Sender<Event>,
) {
    let tls = probe::tls_config();
    let mut clock = ProbeClock::new(Instant::now(), &timing);
    let worker_start_ms = now_unix_ms();
    let started_ms = r.started_unix_ms.unwrap_or(worker_start_ms);
    loop {
        let at = clock.next_after(Instant::now());
        tokio::time::sleep_until(at.into()).await;
        // No probe while the container has run less than the initial delay.
        if now_unix_ms() - started_ms < timing.initial_delay_ms as f64 {
            continue;
        }
        let t0 = Instant::now();
        let got = probe::http_get(
            tls.clone(),
            r.address,
            "/readyz",
            &token,
            Duration::from_millis(timing.timeout_ms),
        )
        .await;
        let duration_ms = t0.elapsed().as_secs_f64() * 1e3;
        let (result, status, detail) = match got {
            Ok(s) if probe::success(s) => (ProbeResult::Success, Some(s), None),
            Ok(s) => (
                ProbeResult::Failure,
                Some(s),
                Some(format!("HTTP probe failed with statuscode: {s}")),
            ),
            Err(e) => (ProbeResult::Failure, None, Some(e)),
        };
        let ev = Event::Probe {
            replica: r.name.clone(),
            generation,
            result,
            status,
            detail,
            duration_ms,
        };
        if tx.send(ev).await.is_err() {
            return;
        }
    }
}

/// A replica the agent follows: its probe worker and readiness.
struct Followed {
    replica: Replica,
    generation: u64,
    worker: Option<tokio::task::JoinHandle<()>>,
    readiness: Readiness,
}

impl Drop for Followed {
    fn drop(&mut self) {
        if let Some(w) = self.worker.take() {
            w.abort();
        }
    }
}

/// Runs the gateway until SIGTERM (drained, exit 0) or until Envoy exits
/// (its exit code).
pub async fn run(paths: Paths) -> Result<u8> {
    let input = read_input(&paths.input)?;
    let token = std::fs::read_to_string(&paths.token)
        .with_context(|| format!("read {}", paths.token.display()))?
        .trim()
        .to_string();
    std::fs::create_dir_all(&paths.xds_dir)?;
    let mut rec = Recorder::open(&paths.records);
    let seed = input.seed.clone();
    let mut written = Written::default();
    push(&paths, &mut written, &input, &[], false).await?;
    let mut envoy = tokio::process::Command::new(&paths.envoy)
        .args([
            "-c",
            &paths.bootstrap.display().to_string(),
            // pilot-agent's: drain for drainDuration, clients told at once.
            "--drain-time-s",
            &render::DRAIN_TIME_S.to_string(),
            "--drain-strategy",
            "immediate",
            "--disable-hot-restart",
            "--log-level",
            "warning",
        ])
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("start {}", paths.envoy.display()))?;
    let mut r = Record::new(&seed, "started");
    r.detail = Some(format!("envoy pid {}", envoy.id().unwrap_or(0)));
    rec.write(&r);

    let (tx, mut rx) = mpsc::channel::<Event>(1024);
    let last = std::fs::read(&paths.input).unwrap_or_default();
    tokio::spawn(watch_input(paths.input.clone(), tx.clone(), last));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;

    let mut input = input;
    let mut followed: BTreeMap<String, Followed> = BTreeMap::new();
    let mut generation = 0u64;
    let mut debounce = Debouncer::default();
    let mut last_served: Vec<SocketAddrV4> = vec![];
    follow(
        &input,
        &mut followed,
        &mut generation,
        &token,
        &tx,
        &mut rec,
    );
    if followed.values().any(|f| f.readiness.ready) {
        debounce.change(Instant::now());
    }
    loop {
        let due = debounce.due(&input.debounce);
        let wake = async {
            match due {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            ev = rx.recv() => {
                let Some(ev) = ev else { continue };
                match ev {
                    Event::Input(new) => {
                        if new.exposure != input.exposure {
                            rec.write(&Record::new(&seed, "config"));
                        }
                        input = *new;
                        follow(&input, &mut followed, &mut generation, &token, &tx, &mut rec);
                        debounce.change(Instant::now());
                    }
                    Event::Probe { replica, generation: g, result, status, detail, duration_ms } => {
                        let Some(f) = followed.get_mut(&replica) else { continue };
                        if f.generation != g {
                            continue;
                        }
                        let mut r = Record::new(&seed, "probe");
                        r.replica = Some(replica.clone());
                        r.result = Some(result);
                        r.status = status;
                        r.detail = detail;
                        r.duration_ms = Some(duration_ms);
                        rec.write(&r);
                        if let Some(now_ready) = f.readiness.observe(result, &input.readiness) {
                            let mut r = Record::new(&seed, if now_ready { "ready" } else { "unready" });
                            r.replica = Some(replica);
                            rec.write(&r);
                            debounce.change(Instant::now());
                        }
                    }
                }
            }
            _ = wake => {
                if debounce.take(Instant::now(), &input.debounce) {
                    let ready: BTreeMap<String, bool> = followed
                        .iter()
                        .map(|(n, f)| (n.clone(), f.readiness.ready))
                        .collect();
                    let served = lifecycle::served(&input.replicas, &ready);
                    match push(&paths, &mut written, &input, &served, true).await {
                        Ok(0) => {}
                        Ok(files) => {
                            let mut r = Record::new(&seed, "push");
                            r.endpoints = Some(served.iter().map(|a| a.to_string()).collect());
                            r.detail = Some(format!("{files} file(s)"));
                            rec.write(&r);
                            last_served = served;
                        }
                        Err(e) => eprintln!("cpmlab-gateway: push failed: {e:#}"),
                    }
                }
            }
            _ = term.recv() => {
                let mut r = Record::new(&seed, "drain");
                r.endpoints = Some(last_served.iter().map(|a| a.to_string()).collect());
                r.detail = Some(format!(
                    "POST /drain_listeners?graceful, then {} ms",
                    input.termination_drain_ms
                ));
                rec.write(&r);
                if let Err(e) = drain_listeners().await {
                    eprintln!("cpmlab-gateway: drain_listeners: {e}");
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(input.termination_drain_ms)) => {}
                    _ = envoy.wait() => {}
                }
                let _ = envoy.start_kill();
                let _ = envoy.wait().await;
                rec.write(&Record::new(&seed, "stopped"));
                return Ok(0);
            }
            status = envoy.wait() => {
                let mut r = Record::new(&seed, "envoy-exited");
                r.detail = Some(format!("{status:?}"));
                rec.write(&r);
                let code = status.ok().and_then(|s| s.code()).unwrap_or(1);
                return Ok(u8::try_from(code).unwrap_or(1).max(1));
            }
        }
    }
}

/// Starts, restarts and stops probe workers as the replicas say: a new or
/// restarted container gets a new worker (readiness from scratch, but an
/// established replica followed for the first time starts Ready), a
/// stopped or terminating one none.
fn follow(
    input: &GatewayInput,
    followed: &mut BTreeMap<String, Followed>,
    generation: &mut u64,
    token: &str,
    tx: &mpsc::Sender<Event>,
    rec: &mut Recorder,
) {
    followed.retain(|name, _| input.replicas.iter().any(|r| &r.name == name));
    for r in &input.replicas {
        let known = followed.get(&r.name);
        let same_container = known.is_some_and(|f| {
            f.replica.address == r.address
                && f.replica.started_unix_ms == r.started_unix_ms
                && f.replica.running == r.running
        });
        if known.is_some_and(|f| !f.replica.terminating) && r.terminating {
            let mut x = Record::new(&input.seed, "terminating");
            x.replica = Some(r.name.clone());
            rec.write(&x);
        }
        if same_container {
            let f = followed.get_mut(&r.name).expect("known");
            f.replica.terminating = r.terminating;
            // A terminating pod's probe goes on in the kubelet, but its
            // endpoint is gone whatever it says.
            continue;
        }
        if known.is_some() && !r.running {
            let mut x = Record::new(&input.seed, "stopped");
            x.replica = Some(r.name.clone());
            rec.write(&x);
        }
        *generation += 1;
        // Only the first time the agent follows it running: a restarted
        // container is probed from scratch whatever the input says.
        let first_run = known.is_none_or(|f| !f.replica.running);
        let readiness = if first_run && r.running && r.established && !r.terminating {
            let mut x = Record::new(&input.seed, "ready");
            x.replica = Some(r.name.clone());
            x.detail = Some("established: the lab saw it answer /readyz at up".into());
            rec.write(&x);
            Readiness::established(&input.readiness)
        } else {
            Readiness::default()
        };
        let worker = r.running.then(|| {
            tokio::spawn(probe_worker(
                r.clone(),
                *generation,
                input.readiness,
                token.to_string(),
                tx.clone(),
            ))
        });
        followed.insert(
            r.name.clone(),
            Followed {
                replica: r.clone(),
                generation: *generation,
                worker,
                readiness,
            },
        );
    }
}

/// pilot-agent's drain: Envoy's listeners drain gracefully.
async fn drain_listeners() -> Result<()> {
    admin("POST", "/drain_listeners?graceful").await.map(|_| ())
}

/// One request to Envoy's admin interface on loopback; the response's body.
async fn admin(method: &str, path: &str) -> Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", render::ADMIN_PORT)).await?;
    s.write_all(
        format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await?;
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf);
    Ok(text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_renamed_into_place_and_rewritten_only_when_changed() {
        let d = tempfile::tempdir().unwrap();
        let mut w = Written::default();
        let v = serde_json::json!({"a": 1});
        assert_eq!(
            w.write(d.path(), &[("x.json".into(), v.clone())]).unwrap(),
            1
        );
        assert_eq!(
            w.write(d.path(), &[("x.json".into(), v.clone())]).unwrap(),
            0
        );
        assert!(!d.path().join(".x.json.tmp").exists());
        let back: Value =
            serde_json::from_slice(&std::fs::read(d.path().join("x.json")).unwrap()).unwrap();
        assert_eq!(back, v);
    }

    /// An established replica starts Ready the first time the agent follows
    /// it running (also when it knew it before its container ran, as at
    /// `up`); a restart of its container is probed from scratch, flag or not,
    /// and a replica without the flag waits for its probes.
    #[tokio::test]
    async fn only_an_established_replica_s_first_run_starts_ready() {
        let d = tempfile::tempdir().unwrap();
        let mut rec = Recorder::open(&d.path().join("records.ndjson"));
        let (tx, _rx) = mpsc::channel(16);
        let replica =
            |name: &str, ip: u8, running: bool, started: Option<f64>, established: bool| Replica {
                name: name.into(),
                address: SocketAddrV4::new([10, 0, 0, ip].into(), 443),
                running,
                started_unix_ms: started,
                terminating: false,
                established,
            };
        let input = |replicas: Vec<Replica>| GatewayInput {
            seed: "seed-a".into(),
            exposure: crate::exposure::Exposure {
                seed: "seed-a".into(),
                namespace: "shoot--local--local".into(),
                api: None,
                tls: vec![],
                max_connection_duration_ms: None,
                api_gateway_deleted: false,
                api_gateway_draining: false,
                api_forward: None,
            },
            replicas,
            readiness: crate::topology::ProbeSpec::default().timing("t").unwrap(),
            debounce: lifecycle::DebounceSettings::default(),
            termination_drain_ms: super::super::TERMINATION_DRAIN_MS,
        };
        let mut followed = BTreeMap::new();
        let mut generation = 0;
        let ready = |f: &BTreeMap<String, Followed>, n: &str| f[n].readiness.ready;
        // Created, not yet running (the gateway's first input at `up`).
        let i = input(vec![
            replica("a", 20, false, None, false),
            replica("b", 21, false, None, false),
        ]);
        follow(&i, &mut followed, &mut generation, "t", &tx, &mut rec);
        assert!(!ready(&followed, "a") && !ready(&followed, "b"));
        // Running: `a` established, `b` not.
        let i = input(vec![
            replica("a", 20, true, Some(1.0), true),
            replica("b", 21, true, Some(1.0), false),
        ]);
        follow(&i, &mut followed, &mut generation, "t", &tx, &mut rec);
        assert!(ready(&followed, "a"), "established: Ready at once");
        assert!(
            !ready(&followed, "b"),
            "not established: waits for its probes"
        );
        // `a`'s container restarted: from scratch, even with the flag.
        let i = input(vec![
            replica("a", 20, true, Some(2.0), true),
            replica("b", 21, true, Some(1.0), false),
        ]);
        follow(&i, &mut followed, &mut generation, "t", &tx, &mut rec);
        assert!(!ready(&followed, "a"), "a restart is probed from scratch");
        let text = std::fs::read_to_string(d.path().join("records.ndjson")).unwrap();
        let readies: Vec<_> = text.lines().filter(|l| l.contains("\"ready\"")).collect();
        assert_eq!(readies.len(), 1, "{text}");
        assert!(
            readies[0].contains("\"a\"") && readies[0].contains("established"),
            "{text}"
        );
    }
}
