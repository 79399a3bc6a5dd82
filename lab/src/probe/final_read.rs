//! What is read back after a run, for the lost-writes rule: the counter
//! through the shoot API (retried: the migration is over, the API should be
//! up; a reason when it still cannot be read), and every version of the
//! counter from etcd's history. Kept as `final.json` in the run directory.

use std::net::SocketAddr;
use std::time::Duration;

use super::agent::{COUNTER, NAMESPACE};
use super::record::{FinalRead, HistoryEntry};
use crate::state::{LabDir, LabState};

/// Attempts at reading the counter, and the pause before each retry.
const COUNTER_ATTEMPTS: u32 = 5;
const COUNTER_RETRY_PAUSE: Duration = Duration::from_secs(2);
/// How long reading the history may take.
const HISTORY_TIMEOUT: Duration = Duration::from_secs(15);

/// The counter's key in etcd (kube-apiserver's storage layout).
pub fn counter_key() -> String {
    format!("/registry/configmaps/{NAMESPACE}/{COUNTER}")
}

pub async fn read(dir: &LabDir, state: &LabState) -> FinalRead {
    let mut f = FinalRead::default();
    for attempt in 1..=COUNTER_ATTEMPTS {
        f.counter_attempts = attempt;
        match counter(dir, state).await {
            Ok((v, rv)) => {
                f.counter = Some(v);
                f.counter_rv = Some(rv);
                f.counter_error = None;
                break;
            }
            Err(e) => {
                tracing::warn!("reading the counter back (attempt {attempt}): {e}");
                f.counter_error = Some(e);
                if attempt < COUNTER_ATTEMPTS {
                    tokio::time::sleep(COUNTER_RETRY_PAUSE).await;
                }
            }
        }
    }
    match tokio::time::timeout(HISTORY_TIMEOUT, history(dir, state)).await {
        Ok(Ok(h)) => f.history = Some(h),
        Ok(Err(e)) => f.history_error = Some(e),
        Err(_) => f.history_error = Some(format!("not read within {HISTORY_TIMEOUT:?}")),
    }
    f
}

/// The counter through the API: its value and resourceVersion.
async fn counter(dir: &LabDir, state: &LabState) -> Result<(u64, u64), String> {
    let ca = std::fs::read_to_string(dir.pki().join("ca.crt")).map_err(|e| e.to_string())?;
    let tls = crate::apiserver::client::tls_client(&ca).map_err(|e| format!("{e:#}"))?;
    let (ips, _) = crate::dns::query_a(
        SocketAddr::from((state.dns.server.ip, 53)),
        &state.dns.api_name,
        Duration::from_secs(2),
    )
    .await
    .map_err(|e| format!("DNS: {e}"))?;
    let ip = ips
        .first()
        .ok_or_else(|| format!("DNS: no address for {}", state.dns.api_name))?;
    let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps/{COUNTER}");
    let (code, body) = crate::apiserver::client::get(
        SocketAddr::from((*ip, crate::gateway::API_PORT)),
        &state.dns.api_name,
        tls,
        &path,
        Some(&state.api_token),
        Duration::from_secs(5),
    )
    .await
    .map_err(|e| format!("{e:#}"))?;
    if code != 200 {
        return Err(format!("GET {path}: {code}: {}", body.trim()));
    }
    let v: serde_json::Value = serde_json::from_str(&body)
        .map_err(|e| format!("GET {path}: a body that does not parse: {e}"))?;
    let value = v["data"]["value"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("GET {path}: no numeric data.value"))?;
    let rv = v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("GET {path}: no resourceVersion"))?;
    Ok((value, rv))
}

/// Every version of the counter, oldest first: a watch of its key from
/// revision 1 up to its current revision.
async fn history(dir: &LabDir, state: &LabState) -> Result<Vec<HistoryEntry>, String> {
    use etcd_client::{EventType, WatchOptions};
    let tls = crate::provider::docker::up::etcd_tls(dir).map_err(|e| format!("{e:#}"))?;
    let mut client = crate::etcd::cluster_client(state, &tls, Duration::from_secs(3))
        .await
        .map_err(|e| format!("etcd: {e}"))?;
    let key = counter_key();
    let now = client
        .get(key.as_str(), None)
        .await
        .map_err(|e| format!("etcd get {key}: {e}"))?;
    let Some(last) = now.kvs().first().map(|kv| kv.mod_revision()) else {
        return Err(format!("{key} is not in etcd"));
    };
    let mut stream = client
        .watch(
            key.as_str(),
            Some(WatchOptions::new().with_start_revision(1)),
        )
        .await
        .map_err(|e| format!("etcd watch {key}: {e}"))?;
    let mut out = Vec::new();
    while let Some(resp) = stream
        .message()
        .await
        .map_err(|e| format!("etcd watch {key}: {e}"))?
    {
        if resp.compact_revision() > 0 {
            return Err(format!(
                "etcd compacted the history (to revision {})",
                resp.compact_revision()
            ));
        }
        for ev in resp.events() {
            let Some(kv) = ev.kv() else { continue };
            if ev.event_type() == EventType::Put {
                let value = serde_json::from_slice::<serde_json::Value>(kv.value())
                    .ok()
                    .and_then(|v| v["data"]["value"].as_str().and_then(|s| s.parse().ok()))
                    .ok_or_else(|| {
                        format!(
                            "{key} at revision {} is not a JSON ConfigMap with a numeric value (kube-apiserver stores protobuf)",
                            kv.mod_revision()
                        )
                    })?;
                out.push(HistoryEntry {
                    value,
                    rev: kv.mod_revision() as u64,
                });
            }
            if kv.mod_revision() >= last {
                return Ok(out);
            }
        }
    }
    Err(format!(
        "the etcd watch of {key} ended before revision {last}"
    ))
}
