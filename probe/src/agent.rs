//! `cpmlab agent probe`: continuous clients of the shoot API. Per connection
//! mode, readyz/get/list requests fire on a fixed schedule (concurrently, so
//! an outage does not slow the clock down); one writer updates a counter
//! ConfigMap with optimistic concurrency, alternating modes, and every
//! acknowledged value is the ledger; a watch per mode follows the counter.
//! Every request is one line in the records file.
//!
//! The writer keeps its schedule too: a write still in flight after
//! [`WRITE_HOLD`] no longer holds the next one back, so one stuck request
//! (a proposal etcd dropped waits out its 7 s timeout) cannot leave the
//! rest of the run without writes. At most [`WRITES_IN_FLIGHT`] are out at
//! once. Each is conditional on the freshest version of the counter known
//! and sets it to that value + 1, so the counter still takes every value
//! once, in order: of writes racing on one version, one applies and the
//! others are answered 409 Conflict (the verdict counts those as
//! superseded, not failed) or fail.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::context::{first_cert_der, Ctx};
pub use super::context::{
    ProbeConfig, COUNTER, INFORMER_CATCH_UP, NAMESPACE, TARGET, WRITES_IN_FLIGHT, WRITE_HOLD,
};
use super::record::{ConnMode, Outcome, ProbeKind, Record};
use super::transport::{Answer, Failure, Refused, Resolver, Transport};

fn cm_path(c: &Ctx, name: &str) -> String {
    format!("/api/v1/namespaces/{}/configmaps/{name}", c.cfg.namespace)
}

fn counter_of(obj: &Value) -> (u64, u64) {
    let v = obj["data"]["value"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let rv = obj["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (v, rv)
}

/// One JSON request with the agent's timeout, its body parsed; with it the
/// attempt the server refused unprocessed before a retry, if any. A success
/// status whose body does not parse is a `decode` failure: the client got
/// nothing it could use.
async fn fetch(
    c: &Ctx,
    mode: ConnMode,
    method: &str,
    path: &str,
    body: Option<Value>,
    json: bool,
) -> (Result<(Answer, Value), Failure>, Option<Refused>) {
    let deadline = Instant::now() + c.cfg.timeout;
    let (rep, refused) =
        c.t.send(
            mode,
            method,
            path,
            body.map(|b| b.to_string().into_bytes()),
            deadline,
        )
        .await;
    let res = async {
        let rep = rep?;
        let answer = rep.answer();
        let (status, bytes) = rep.bytes(deadline).await?;
        if !json {
            // A text answer (readyz): what a failure says is kept as its
            // message, e.g. the checks that failed.
            let text = String::from_utf8_lossy(&bytes);
            let failed: Vec<&str> = text.lines().filter(|l| l.starts_with("[-]")).collect();
            let message = if failed.is_empty() {
                text.trim().chars().take(200).collect::<String>()
            } else {
                failed.join("; ")
            };
            return Ok((answer, json!({ "message": message })));
        }
        match serde_json::from_slice(&bytes) {
            Ok(v) => Ok((answer, v)),
            Err(e) if (200..300).contains(&status) => Err(Failure {
                outcome: Outcome::Decode,
                error: format!(
                    "{status} with a body that does not parse ({e}): {}",
                    String::from_utf8_lossy(&bytes[..bytes.len().min(80)])
                ),
                addr: Some(answer.addr),
            }),
            Err(_) => Ok((answer, Value::Null)),
        }
    }
    .await;
    (res, refused)
}

/// A probe's request: [`fetch`], with the refused attempt (if any) recorded
/// as a request of `probe` that the returned `retry_of` points at.
struct Called {
    res: Result<(Answer, Value), Failure>,
    retry_of: Option<u64>,
}

#[allow(clippy::too_many_arguments)]
async fn call(
    c: &Ctx,
    probe: ProbeKind,
    mode: ConnMode,
    event: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
    json: bool,
) -> Called {
    let (res, refused) = fetch(c, mode, method, path, body, json).await;
    let retry_of = refused.map(|rf| c.record_refused(probe, mode, event, rf));
    Called { res, retry_of }
}

/// Fills a record from a request's outcome: who answered, the status, and
/// (for a GET of the counter) its value and resourceVersion.
fn outcome_into(c: &Ctx, r: &mut Record, called: Called, counter: bool) -> Option<(u64, u64)> {
    r.retry_of = called.retry_of;
    match called.res {
        Ok((rep, body)) => {
            c.answered(r, &rep);
            if !(200..300).contains(&rep.status) {
                r.outcome = Outcome::Http;
                r.error = body["message"].as_str().map(str::to_string);
                return None;
            }
            r.rv = body["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|s| s.parse().ok());
            if counter {
                let (v, rv) = counter_of(&body);
                r.value = Some(v);
                return Some((v, rv));
            }
            None
        }
        Err(f) => {
            c.fail(r, f);
            None
        }
    }
}

/// Creates the namespace and the probes' objects, waiting for the API.
async fn setup(c: &Ctx) -> Result<()> {
    let started = Instant::now();
    loop {
        let r = async {
            let load = (c.cfg.write_rate > 0.0).then(|| load_namespace(&c.cfg.namespace));
            for name in std::iter::once(&c.cfg.namespace).chain(load.as_ref()) {
                let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
                let st = fetch(c, ConnMode::New, "POST", "/api/v1/namespaces", Some(ns), true).await.0?.0.status;
                if st != 201 && st != 409 {
                    return Err(Failure { outcome: Outcome::Http, error: format!("create namespace {name}: {st}"), addr: None });
                }
            }
            for (name, data) in [(TARGET, json!({"probe": "target"})), (COUNTER, json!({"value": "0"}))] {
                let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data});
                let path = format!("/api/v1/namespaces/{}/configmaps", c.cfg.namespace);
                let st = fetch(c, ConnMode::New, "POST", &path, Some(cm), true).await.0?.0.status;
                if st != 201 && st != 409 {
                    return Err(Failure { outcome: Outcome::Http, error: format!("create {name}: {st}"), addr: None });
                }
            }
            Ok(())
        }
        .await;
        match r {
            Ok(()) => return Ok(()),
            Err(f) if started.elapsed() < Duration::from_secs(60) => {
                tracing::warn!("probe setup: {}; retrying", f.error);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(f) => anyhow::bail!("probe setup failed: {}", f.error),
        }
    }
}

/// readyz, get, list: one request per tick, each in its own task. get reads
/// the counter, so that its value can be held against the writes
/// acknowledged before it (a stale read).
async fn simple_loop(
    c: Arc<Ctx>,
    probe: ProbeKind,
    mode: ConnMode,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let path = match probe {
        // Can the server serve? A draining server fails plain /readyz on
        // purpose (for load balancers) while it still serves every request.
        ProbeKind::Readyz => "/readyz?exclude=shutdown&verbose".to_string(),
        ProbeKind::Get => cm_path(&c, COUNTER),
        ProbeKind::List => format!("/api/v1/namespaces/{}/configmaps?limit=50", c.cfg.namespace),
        _ => unreachable!("not a simple probe"),
    };
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / c.cfg.rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tick.tick() => {}
        }
        let c = c.clone();
        let path = path.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            // readyz answers text: only its status counts.
            let json = probe != ProbeKind::Readyz;
            let called = call(&c, probe, mode, None, "GET", &path, None, json).await;
            let mut r = c.record(probe, mode, start);
            outcome_into(&c, &mut r, called, probe == ProbeKind::Get);
            c.emit(r);
        });
    }
}

/// A recorded GET of the counter by `probe` (event `read`): the writer's
/// read before an update, the watch's read it starts from.
async fn read_counter(c: &Ctx, probe: ProbeKind, mode: ConnMode) -> Option<(u64, u64)> {
    let start = Instant::now();
    let called = call(
        c,
        probe,
        mode,
        Some("read"),
        "GET",
        &cm_path(c, COUNTER),
        None,
        true,
    )
    .await;
    let mut r = c.record(probe, mode, start);
    r.event = Some("read".into());
    let got = outcome_into(c, &mut r, called, true);
    c.emit(r);
    got
}

/// Where the write load's objects go: beside the probes' namespace, so that
/// the list probe and the informer see the same objects with or without it.
pub fn load_namespace(namespace: &str) -> String {
    format!("{namespace}-load")
}

/// The write load (`--write-rate`): a new ConfigMap per tick, modes
/// alternating, each create in its own task (an outage does not slow the
/// clock down), as controllers create objects. Names carry the agent's
/// start time, so that runs in one namespace never collide.
async fn load_loop(
    c: Arc<Ctx>,
    modes: Vec<ConnMode>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / c.cfg.write_rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let path = format!(
        "/api/v1/namespaces/{}/configmaps",
        load_namespace(&c.cfg.namespace)
    );
    let payload = "x".repeat(c.cfg.write_bytes);
    let run = c
        .wall0
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let mut i = 0u64;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tick.tick() => {}
        }
        let mode = modes[i as usize % modes.len()];
        i += 1;
        let body = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("load-{run}-{i}")},
            "data": {"payload": payload},
        });
        let c = c.clone();
        let path = path.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            let called = call(
                &c,
                ProbeKind::Load,
                mode,
                None,
                "POST",
                &path,
                Some(body),
                true,
            )
            .await;
            let mut r = c.record(ProbeKind::Load, mode, start);
            outcome_into(&c, &mut r, called, false);
            c.emit(r);
        });
    }
}

/// What the writer knows between its writes.
#[derive(Default)]
struct Writer {
    /// The freshest (value, resourceVersion) of the counter known: from an
    /// acknowledged write or a read. `None` after a write that may or may
    /// not have happened: the next one reads first.
    known: Option<(u64, u64)>,
    /// When each write in flight started.
    in_flight: Vec<(u64, Instant)>,
}

impl Writer {
    /// Keeps `k` when it is fresher than what is known.
    fn learn(&mut self, k: (u64, u64)) {
        if self.known.is_none_or(|(_, rv)| k.1 > rv) {
            self.known = Some(k);
        }
    }
}

/// The writer: read-modify-write of the counter, modes alternating, on
/// schedule (see the module doc).
async fn write_loop(
    c: Arc<Ctx>,
    modes: Vec<ConnMode>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / c.cfg.rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let st = Arc::new(std::sync::Mutex::new(Writer::default()));
    let done = Arc::new(tokio::sync::Notify::new());
    let mut writes = tokio::task::JoinSet::new();
    let mut i = 0u64;
    'ticks: loop {
        // A write begun once the probes stop would be acknowledged after the
        // informer stopped waiting for it: stop wins over a ready tick.
        if *stop.borrow() {
            break;
        }
        tokio::select! {
            biased;
            _ = stop.changed() => break,
            _ = tick.tick() => {}
        }
        // Held back while the youngest write in flight is under WRITE_HOLD
        // old, or WRITES_IN_FLIGHT are out.
        loop {
            let wait = {
                let w = st.lock().expect("writer state");
                if w.in_flight.len() >= WRITES_IN_FLIGHT {
                    Some(None)
                } else {
                    match w.in_flight.iter().map(|(_, t)| *t).max() {
                        Some(t) if t.elapsed() < WRITE_HOLD => Some(Some(WRITE_HOLD - t.elapsed())),
                        _ => None,
                    }
                }
            };
            let Some(wait) = wait else { break };
            let nap = wait.unwrap_or(Duration::from_secs(3600));
            tokio::select! {
                biased;
                _ = stop.changed() => break 'ticks,
                _ = done.notified() => {}
                _ = tokio::time::sleep(nap) => {}
            }
        }
        while writes.try_join_next().is_some() {}
        let mode = modes[i as usize % modes.len()];
        let id = i;
        i += 1;
        st.lock()
            .expect("writer state")
            .in_flight
            .push((id, Instant::now()));
        let (c, st, done) = (c.clone(), st.clone(), done.clone());
        writes.spawn(async move {
            write_once(&c, &st, mode).await;
            st.lock()
                .expect("writer state")
                .in_flight
                .retain(|(x, _)| *x != id);
            done.notify_one();
        });
    }
    // The writes in flight end within the probe timeout: only then is the
    // last acknowledged value final.
    while writes.join_next().await.is_some() {}
}

/// One write: from the freshest version known (or a read), that value + 1,
/// conditional on its resourceVersion; recorded with the version it was
/// conditional on.
async fn write_once(c: &Ctx, st: &std::sync::Mutex<Writer>, mode: ConnMode) {
    let known = st.lock().expect("writer state").known;
    let (value, rv) = match known {
        Some(k) => k,
        None => match read_counter(c, ProbeKind::Write, mode).await {
            Some(k) => {
                st.lock().expect("writer state").learn(k);
                k
            }
            None => return,
        },
    };
    let next = value + 1;
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": COUNTER, "namespace": c.cfg.namespace, "resourceVersion": rv.to_string()},
        "data": {"value": next.to_string()}});
    let start = Instant::now();
    let called = call(
        c,
        ProbeKind::Write,
        mode,
        None,
        "PUT",
        &cm_path(c, COUNTER),
        Some(body),
        true,
    )
    .await;
    let mut r = c.record(ProbeKind::Write, mode, start);
    let acked = outcome_into(c, &mut r, called, true);
    // The value this write set (acknowledged when the outcome is ok).
    r.value = Some(next);
    r.base_rv = Some(rv);
    {
        let mut w = st.lock().expect("writer state");
        match acked {
            Some(k) => {
                w.learn(k);
                c.last_acked.fetch_max(next, Ordering::SeqCst);
            }
            // It may or may not have happened: unless a later version is
            // known, the next write reads first.
            None => {
                if w.known.is_some_and(|(_, k)| k <= rv) {
                    w.known = None;
                }
            }
        }
    }
    c.emit(r);
}

/// The counter listed, as client-go's reflector lists before it watches:
/// the list's resourceVersion is the store's revision, from which a watch
/// resumes even when the counter itself has not changed since the server
/// compacted its watch cache past the counter's own revision (resuming
/// from that gets 410 Gone again, until the next write). The record is the
/// watch's `read`, with the counter's value and the list's revision.
async fn list_counter(c: &Ctx, mode: ConnMode) -> Option<u64> {
    let start = Instant::now();
    let path = format!(
        "/api/v1/namespaces/{}/configmaps?fieldSelector=metadata.name%3D{COUNTER}",
        c.cfg.namespace
    );
    let called = call(
        c,
        ProbeKind::Watch,
        mode,
        Some("read"),
        "GET",
        &path,
        None,
        true,
    )
    .await;
    let item = called
        .res
        .as_ref()
        .ok()
        .and_then(|(_, body)| body["items"].get(0).cloned());
    let mut r = c.record(ProbeKind::Watch, mode, start);
    r.event = Some("read".into());
    outcome_into(c, &mut r, called, false);
    if let (Some(_), Some(item)) = (r.rv, item) {
        r.value = Some(counter_of(&item).0);
    }
    let rv = r.rv;
    c.emit(r);
    rv
}

/// Follows the counter from the last seen resourceVersion, reconnecting.
/// Only a 410 Gone resets the revision it resumes from (to a new list).
/// `stop` says the writer has stopped: from then on the lane goes on until it has
/// seen the last acknowledged value as an event, or for `catch_up` at
/// most, so that a write acknowledged in the run's last seconds is judged
/// by what the watch delivered, not by when the lane was told to stop (on
/// a slow lab an event can take seconds to arrive).
async fn watch_loop(
    c: Arc<Ctx>,
    mode: ConnMode,
    mut stop: tokio::sync::watch::Receiver<bool>,
    catch_up: Duration,
) {
    use http_body_util::BodyExt;
    let mut last_rv: Option<u64> = None;
    // The highest counter value an event of this lane carried.
    let mut seen: u64 = 0;
    let mut deadline: Option<tokio::time::Instant> = None;
    let caught_up = |seen: u64| c.has_seen_last_ack(seen);
    loop {
        if *stop.borrow() {
            let d = *deadline.get_or_insert_with(|| tokio::time::Instant::now() + catch_up);
            if caught_up(seen) || tokio::time::Instant::now() >= d {
                return;
            }
        }
        if last_rv.is_none() {
            match list_counter(&c, mode).await {
                Some(rv) => last_rv = Some(rv),
                None => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            }
        }
        let path = format!(
            "/api/v1/namespaces/{}/configmaps?watch=1&fieldSelector=metadata.name%3D{COUNTER}&allowWatchBookmarks=true&timeoutSeconds=600{}",
            c.cfg.namespace,
            last_rv.map(|r| format!("&resourceVersion={r}")).unwrap_or_default()
        );
        let start = Instant::now();
        let (res, refused) =
            c.t.send(mode, "GET", &path, None, start + c.cfg.timeout)
                .await;
        let retry_of =
            refused.map(|rf| c.record_refused(ProbeKind::Watch, mode, Some("connect"), rf));
        let mut r = c.record(ProbeKind::Watch, mode, start);
        r.event = Some("connect".into());
        r.rv = last_rv;
        r.retry_of = retry_of;
        let rep = match res {
            Ok(rep) if rep.status == 200 => {
                c.answered(&mut r, &rep.answer());
                c.emit(r);
                rep
            }
            Ok(rep) => {
                c.answered(&mut r, &rep.answer());
                r.outcome = Outcome::Http;
                c.emit(r);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(f) => {
                c.fail(&mut r, f);
                c.emit(r);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (seed, server, addr) = (rep.seed.clone(), rep.server.clone(), rep.addr);
        let mut body = rep.body;
        let mut buf: Vec<u8> = Vec::new();
        loop {
            let frame = tokio::select! {
                _ = stop.changed(), if deadline.is_none() => {
                    deadline = Some(tokio::time::Instant::now() + catch_up);
                    if caught_up(seen) {
                        return;
                    }
                    continue;
                }
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => return,
                f = body.frame() => f,
            };
            let data = match frame {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(d) => d,
                    Err(_) => continue,
                },
                // The stream ended or broke: say which, then watch again.
                end => {
                    let mut r = c.record(ProbeKind::Watch, mode, Instant::now());
                    r.seed = seed.clone();
                    r.server = server.clone();
                    r.addr = Some(addr.to_string());
                    r.rv = last_rv;
                    match end {
                        Some(Err(e)) => {
                            r.event = Some("broken".into());
                            c.fail(&mut r, super::transport::classify_hyper(&e, Some(addr)));
                        }
                        _ => r.event = Some("closed".into()),
                    }
                    c.emit(r);
                    break;
                }
            };
            buf.extend_from_slice(&data);
            while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=nl).collect();
                let mut r = c.record(ProbeKind::Watch, mode, Instant::now());
                r.seed = seed.clone();
                r.server = server.clone();
                let ev = match serde_json::from_slice::<Value>(&line) {
                    Ok(ev) => ev,
                    Err(e) => {
                        // The client cannot use what it was sent.
                        r.event = Some("ERROR".into());
                        r.outcome = Outcome::Decode;
                        r.error = Some(format!(
                            "a watch line that does not parse ({e}): {}",
                            String::from_utf8_lossy(&line[..line.len().min(80)])
                        ));
                        c.emit(r);
                        continue;
                    }
                };
                let ty = ev["type"].as_str().unwrap_or("").to_string();
                r.event = Some(ty.clone());
                if ty == "ERROR" {
                    r.outcome = Outcome::Http;
                    r.http_status = ev["object"]["code"].as_u64().map(|c| c as u16);
                    r.error = ev["object"]["message"].as_str().map(str::to_string);
                    if r.http_status == Some(410) {
                        last_rv = None;
                    }
                } else {
                    let (v, rv) = counter_of(&ev["object"]);
                    r.rv = Some(rv);
                    if ty != "BOOKMARK" {
                        r.value = Some(v);
                        seen = seen.max(v);
                    }
                    last_rv = Some(rv.max(last_rv.unwrap_or(0)));
                }
                c.emit(r);
            }
            if deadline.is_some() && caught_up(seen) {
                return;
            }
        }
    }
}

/// How many caches the `late-dns` lane spreads its requests over
/// (`Resolver::late_fleet`): at Gardener's 120 s TTL and the default 60 s
/// past it, their refreshes are 15 s apart, so the latest client of a
/// fleet is matched within 15 s in every run.
const LATE_DNS_CLIENTS: usize = 12;

pub async fn run(cfg: ProbeConfig) -> Result<()> {
    let target = &cfg.target;
    let tls = target.tls()?;
    let mut transport = Transport::new(
        Resolver::new(target.resolve.clone(), &target.server_name),
        &target.server_name,
        target.port,
        target.token().map(str::to_string),
        tls,
        cfg.seeds_by_addr.clone(),
    );
    transport.node = cfg.node;
    transport.seed_bound = cfg
        .seed_bound_name
        .as_deref()
        .map(|n| Resolver::new(target.resolve.clone(), n));
    if cfg.modes.contains(&ConnMode::LateDns) {
        transport.late_resolvers = Resolver::late_fleet(
            &target.resolve,
            &target.server_name,
            cfg.late_dns,
            LATE_DNS_CLIENTS,
        );
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<Record>();
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&cfg.out)
        .await
        .with_context(|| format!("open {}", cfg.out.display()))?;
    let writer = tokio::spawn(async move {
        while let Some(r) = rx.recv().await {
            let mut batch = serde_json::to_vec(&r).expect("record JSON");
            batch.push(b'\n');
            while let Ok(r) = rx.try_recv() {
                batch.extend(serde_json::to_vec(&r).expect("record JSON"));
                batch.push(b'\n');
            }
            if file.write_all(&batch).await.is_err() {
                break;
            }
            let _ = file.flush().await;
        }
    });
    let c = Arc::new(Ctx {
        t: transport,
        cfg: cfg.clone(),
        t0: Instant::now(),
        wall0: SystemTime::now(),
        seq: AtomicU64::new(0),
        out: tx,
        last_acked: AtomicU64::new(0),
        ca_der: first_cert_der(&target.ca_pem)?,
    });
    setup(&c).await?;
    eprintln!(
        "probing {} ({}) at {}/s per probe and mode",
        target.server_name, target.server, cfg.rate
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    // The informer and the watch lanes stop after the others, once each
    // has seen the last acknowledged write (or gave up waiting for it).
    let (writer_stopped_tx, writer_stopped_rx) = tokio::sync::watch::channel(false);
    let mut informer = None;
    // The watch lanes stop as the informer does, caught up.
    let mut watches = Vec::new();
    let mut write_task = None;
    for p in &cfg.probes {
        match p {
            ProbeKind::Informer => {
                informer = Some(tokio::spawn(super::informer::run(
                    c.clone(),
                    Arc::new(Resolver::new(target.resolve.clone(), &target.server_name)),
                    writer_stopped_rx.clone(),
                    INFORMER_CATCH_UP,
                )));
            }
            ProbeKind::Write => {
                write_task = Some(tokio::spawn(write_loop(
                    c.clone(),
                    cfg.modes.clone(),
                    stop_rx.clone(),
                )))
            }
            ProbeKind::Load => unreachable!("--write-rate starts the load"),
            // Child processes (see `clientgo`), started below.
            ProbeKind::InformerGo | ProbeKind::Lease => {}
            ProbeKind::Watch => {
                for m in &cfg.modes {
                    watches.push(tokio::spawn(watch_loop(
                        c.clone(),
                        *m,
                        writer_stopped_rx.clone(),
                        INFORMER_CATCH_UP,
                    )));
                }
            }
            simple => {
                for m in &cfg.modes {
                    tasks.push(tokio::spawn(simple_loop(
                        c.clone(),
                        *simple,
                        *m,
                        stop_rx.clone(),
                    )));
                }
            }
        }
    }
    if cfg.write_rate > 0.0 {
        tasks.push(tokio::spawn(load_loop(
            c.clone(),
            cfg.modes.clone(),
            stop_rx.clone(),
        )));
    }
    // client-go's lanes, and the task that follows the lab's commands to
    // the candidates (it hands the lanes back when told to stop).
    let (cg_stop_tx, cg_stop_rx) = tokio::sync::watch::channel(false);
    let clientgo = match cfg.clientgo.clone() {
        Some(cg) => {
            let mut lanes = super::clientgo::Lanes::start(
                c.clone(),
                cg,
                &target.ca_pem,
                target.token().unwrap_or(""),
            )
            .await?;
            Some(tokio::spawn(async move {
                lanes.follow(cg_stop_rx).await;
                lanes
            }))
        }
        None => None,
    };
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    let _ = stop_tx.send(true);
    // The writer's last request ends within the probe timeout (a write
    // etcd dropped takes that long): only then is the last acknowledged
    // value final.
    if let Some(t) = write_task {
        let _ = tokio::time::timeout(cfg.timeout + Duration::from_secs(1), t).await;
    }
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(3), t).await;
    }
    // The writer has stopped: the last acknowledged value is final now.
    let _ = writer_stopped_tx.send(true);
    let _ = cg_stop_tx.send(true);
    let lanes = match clientgo {
        Some(t) => t.await.ok(),
        None => None,
    };
    if let Some(t) = informer {
        let _ = tokio::time::timeout(INFORMER_CATCH_UP + Duration::from_secs(1), t).await;
    }
    // They caught up beside the informer: each is done or about to be.
    for t in watches {
        let _ = tokio::time::timeout(INFORMER_CATCH_UP + Duration::from_secs(1), t).await;
    }
    if let Some(mut lanes) = lanes {
        // client-go's informer catches up as the kube-rs one does.
        let since = Instant::now();
        while !c.has_seen_last_ack(lanes.informer_seen.load(Ordering::SeqCst))
            && since.elapsed() < INFORMER_CATCH_UP
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        lanes.stop_informer().await;
        lanes.end_candidates().await;
    }
    // In-flight requests finish within the timeout.
    tokio::time::sleep(cfg.timeout.min(Duration::from_secs(3))).await;
    drop(c);
    let _ = tokio::time::timeout(Duration::from_secs(3), writer).await;
    eprintln!("probe stopped");
    Ok(())
}
