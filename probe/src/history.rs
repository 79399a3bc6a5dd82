//! The counter's history, captured while the run goes (`history.ndjson`,
//! read by the verdict's `history`): `probe start` names where it begins,
//! `cpmlab run`'s observer follows the counter's key with a watch from
//! there, resumed from the revision after the last one it saw whenever the
//! watch breaks, and `probe stop` completes it up to the counter's last
//! version. A compaction etcd made before a watch could resume is named,
//! with its revisions; a watch that keeps up is never compacted away.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use etcd_client::{Client, EventType, GetOptions, WatchOptions};

use super::clock::now_unix_ms;
use crate::errors::Cancel;
use crate::verdict::history::{resume, HistoryLine, HISTORY_FILE};

/// How long `probe stop` tries to complete the capture.
pub const COMPLETE_WITHIN: Duration = Duration::from_secs(30);
/// The pause before a broken watch is taken up again.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// A run's capture file.
pub struct Capture {
    path: PathBuf,
}

impl Capture {
    pub fn of(run: &Path) -> Capture {
        Capture {
            path: run.join(HISTORY_FILE),
        }
    }

    pub fn exists(&self) -> bool {
        self.path.is_file()
    }

    /// Appends one line (a file that cannot be written is logged: the
    /// verdict then finds the capture short, and says so).
    pub fn push(&self, l: &HistoryLine) {
        use std::io::Write;
        let r = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| {
                writeln!(
                    f,
                    "{}",
                    serde_json::to_string(l).expect("a history line is JSON")
                )
            });
        if let Err(e) = r {
            tracing::warn!("could not write {}: {e}", self.path.display());
        }
    }

    fn broken(&self, error: String) {
        self.push(&HistoryLine::Broken {
            at_unix_ms: now_unix_ms(),
            error,
        });
    }

    /// The lines so far.
    pub fn lines(&self) -> Result<Vec<HistoryLine>, String> {
        crate::verdict::load::read_lines_if(&self.path)
            .map(|l| l.map(|l| l.items).unwrap_or_default())
            .map_err(|e| e.to_string())
    }
}

/// A client of the lab's etcd cluster, its members as `state` has them.
pub async fn connect(
    dir: &crate::state::LabDir,
    state: &crate::state::LabState,
) -> Result<Client, String> {
    let tls = crate::etcd::lab_tls(dir).map_err(|e| format!("{e:#}"))?;
    crate::etcd::cluster_client(state, &tls, Duration::from_secs(3))
        .await
        .map_err(|e| format!("etcd: {e}"))
}

/// The same, the lab's state read afresh (the observer's: members come
/// and go during a migration).
pub async fn connect_now(dir: &crate::state::LabDir) -> Result<Client, String> {
    let state = dir.load().map_err(|e| format!("the lab's state: {e:#}"))?;
    connect(dir, &state).await
}

/// The cluster's ID, as the capture names it.
fn cluster_of(h: Option<&etcd_client::ResponseHeader>) -> String {
    format!("{:x}", h.map_or(0, |h| h.cluster_id()))
}

/// The line for a version's stored bytes.
fn version(rev: u64, bytes: &[u8]) -> HistoryLine {
    match stored_counter(bytes) {
        Some(value) => HistoryLine::Version { rev, value },
        None => HistoryLine::Unreadable {
            rev,
            error: format!(
                "{} is not a ConfigMap (JSON or Kubernetes protobuf) with a numeric value",
                counter_key()
            ),
        },
    }
}

/// `probe start`, before the agent starts: where the capture begins (the
/// counter's version then, or etcd's next revision when there is none),
/// and the first revision the run's writes can have.
pub async fn begin(client: Result<Client, String>, run: &Path) {
    let cap = Capture::of(run);
    let key = counter_key();
    let got = match client {
        Ok(mut c) => c.get(key, None).await.map_err(|e| format!("etcd get: {e}")),
        Err(e) => Err(e),
    };
    match got {
        Ok(resp) => {
            let next = resp.header().map_or(0, |h| h.revision()) as u64 + 1;
            let from = resp
                .kvs()
                .first()
                .map_or(next, |kv| kv.mod_revision() as u64);
            cap.push(&HistoryLine::Watch {
                at_unix_ms: now_unix_ms(),
                from_rev: from,
                cluster: cluster_of(resp.header()),
                by: "probe start".into(),
                run_from_rev: Some(next),
            });
        }
        Err(e) => cap.broken(format!("where the capture begins is unknown: {e}")),
    }
}

/// When a watch session is done.
enum Until<'a> {
    /// The observer's: until the run is over.
    Stopped(&'a Cancel),
    /// The final read's: until the counter's version at the end is seen.
    Last,
}

/// How a session ended.
enum Ended {
    /// Done: stopped, or the capture completed.
    Done,
    /// etcd had compacted where the watch began: begin again at once.
    Compacted,
}

/// One watch, from where the capture resumes.
async fn session(
    client: &mut Client,
    cap: &Capture,
    until: &Until<'_>,
    by: &str,
) -> Result<Ended, String> {
    let key = counter_key();
    let now = client
        .get(key.clone(), None)
        .await
        .map_err(|e| format!("etcd get {key}: {e}"))?;
    let cluster = cluster_of(now.header());
    let last = now.kvs().first().map(|kv| kv.mod_revision() as u64);
    // A cluster the capture has not followed yet (or none at all):
    // from its first revision.
    let from = match resume(&cap.lines()?) {
        Some((c, next)) if c == cluster => next,
        _ => 1,
    };
    if let Until::Last = until {
        let end = last.unwrap_or(from.saturating_sub(1));
        if from > end {
            cap.push(&HistoryLine::End {
                at_unix_ms: now_unix_ms(),
                rev: end,
            });
            return Ok(Ended::Done);
        }
    }
    cap.push(&HistoryLine::Watch {
        at_unix_ms: now_unix_ms(),
        from_rev: from,
        cluster,
        by: by.into(),
        run_from_rev: None,
    });
    let mut stream = client
        .watch(
            key.clone(),
            Some(
                WatchOptions::new()
                    .with_start_revision(from as i64)
                    .with_progress_notify(),
            ),
        )
        .await
        .map_err(|e| format!("etcd watch {key}: {e}"))?;
    let mut seen = from.saturating_sub(1);
    loop {
        // Checked before every message, not only when the stream is quiet:
        // a counter written every few tens of ms never leaves it quiet for
        // long, and a run (or its Ctrl-C) waited on this watch for ever.
        if let Until::Stopped(stop) = until {
            if stop.check().is_err() {
                return Ok(Ended::Done);
            }
        }
        let msg = tokio::select! {
            m = stream.message() => m,
            _ = tokio::time::sleep(Duration::from_millis(250)) => continue,
        };
        let resp = msg
            .map_err(|e| format!("etcd watch {key}: {e}"))?
            .ok_or_else(|| format!("the etcd watch of {key} ended"))?;
        if resp.compact_revision() > 0 {
            let c = resp.compact_revision() as u64;
            let at_c = client
                .get(key.clone(), Some(GetOptions::new().with_revision(c as i64)))
                .await
                .ok()
                .and_then(|r| {
                    r.kvs()
                        .first()
                        .map(|kv| (kv.mod_revision() as u64, kv.value().to_vec()))
                });
            cap.push(&HistoryLine::Compacted {
                at_unix_ms: now_unix_ms(),
                from_rev: from,
                compact_rev: c,
                latest_rev: at_c.as_ref().map(|(rev, _)| *rev),
            });
            if let Some((rev, bytes)) = at_c.filter(|(rev, _)| *rev >= from) {
                cap.push(&version(rev, &bytes));
            }
            return Ok(Ended::Compacted);
        }
        if resp.canceled() {
            return Err(format!(
                "etcd canceled the watch of {key}: {}",
                resp.cancel_reason()
            ));
        }
        for ev in resp.events() {
            let Some(kv) = ev.kv() else { continue };
            let rev = kv.mod_revision() as u64;
            cap.push(&match ev.event_type() {
                EventType::Put => version(rev, kv.value()),
                EventType::Delete => HistoryLine::Deleted { rev },
            });
            seen = seen.max(rev);
        }
        if let (Until::Last, Some(end)) = (until, last) {
            if seen >= end {
                cap.push(&HistoryLine::End {
                    at_unix_ms: now_unix_ms(),
                    rev: end,
                });
                return Ok(Ended::Done);
            }
        }
    }
}

/// `cpmlab run`'s observer: follows the counter until `stop`, taking a
/// broken watch up again (`connect` finds the cluster's members as they
/// are then).
pub async fn follow<F, Fut>(connect: F, run: &Path, stop: &Cancel)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Client, String>>,
{
    let cap = Capture::of(run);
    while stop.check().is_ok() {
        let r = match connect().await {
            Ok(mut c) => session(&mut c, &cap, &Until::Stopped(stop), "observer").await,
            Err(e) => Err(e),
        };
        match r {
            Ok(Ended::Done) => return,
            Ok(Ended::Compacted) => {}
            Err(e) => {
                if stop.check().is_err() {
                    return;
                }
                tracing::debug!("the counter's watch: {e}; resuming");
                cap.broken(e);
                let t = Instant::now();
                while t.elapsed() < RETRY_PAUSE && stop.check().is_ok() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

/// `probe stop`, after the agent stopped: the capture resumed up to the
/// counter's version then, and ended (`end`), within `within`.
pub async fn complete<F, Fut>(connect: F, run: &Path, within: Duration)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Client, String>>,
{
    let cap = Capture::of(run);
    let t = Instant::now();
    let work = async {
        loop {
            let r = match connect().await {
                Ok(mut c) => session(&mut c, &cap, &Until::Last, "final read").await,
                Err(e) => Err(e),
            };
            match r {
                Ok(Ended::Done) => return,
                Ok(Ended::Compacted) => {}
                Err(e) => {
                    cap.broken(e);
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
            }
        }
    };
    if tokio::time::timeout(within.saturating_sub(t.elapsed()), work)
        .await
        .is_err()
    {
        cap.broken(format!(
            "the capture was not completed within {within:?} after the probes stopped"
        ));
    }
}

/// The counter's key in etcd (kube-apiserver's storage layout).
pub fn counter_key() -> String {
    format!(
        "/registry/configmaps/{}/{}",
        crate::agent::NAMESPACE,
        crate::agent::COUNTER
    )
}

/// The counter's value in a ConfigMap as an API server stored it in etcd:
/// JSON (the stand-in) or Kubernetes' protobuf envelope (kube-apiserver and
/// the generic server).
pub fn stored_counter(bytes: &[u8]) -> Option<u64> {
    let v = if bytes.starts_with(b"k8s\x00") {
        crate::apiserver::protobuf::decode("ConfigMap", bytes).ok()?
    } else {
        serde_json::from_slice::<serde_json::Value>(bytes).ok()?
    };
    v["data"]["value"].as_str()?.parse().ok()
}
