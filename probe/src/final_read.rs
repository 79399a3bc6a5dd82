//! What is read back after a run, for the lost-writes rule: the counter
//! through the shoot API (retried: the migration is over, the API should be
//! up; a reason when it still cannot be read), and every version of the
//! counter from etcd's history. Kept as `final.json` in the run directory.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::agent::{COUNTER, NAMESPACE};
use super::record::{FinalRead, HistoryEntry, LeaseVersion};
use crate::state::{LabDir, LabState};

/// Attempts at reading the counter, and the pause before each retry.
const COUNTER_ATTEMPTS: u32 = 5;
const COUNTER_RETRY_PAUSE: Duration = Duration::from_secs(2);
/// How long reading the history may take.
const HISTORY_TIMEOUT: Duration = Duration::from_secs(15);

// The counter as etcd keeps it: the history's business too.
pub use super::history::{counter_key, stored_counter};

/// The candidates' Lease's key in etcd.
pub fn lease_key() -> String {
    format!("/registry/leases/{NAMESPACE}/{}", super::clientgo::LEASE)
}

/// What is read back; `candidates`: the run had leader-election candidates
/// (their Lease's history is read too). The counter's history is the one
/// watched during the run (`history.ndjson`, see `history`), completed
/// here up to its last version and copied into `final.json`; only a run
/// directory without it has its history read back from etcd here.
pub async fn read(dir: &LabDir, state: &LabState, candidates: bool, run: &Path) -> FinalRead {
    let mut f = FinalRead::default();
    read_counter(&mut f, || counter(dir, state)).await;
    let capture = super::history::Capture::of(run);
    if capture.exists() {
        super::history::complete(
            || super::history::connect(dir, state),
            run,
            super::history::COMPLETE_WITHIN,
        )
        .await;
        // What the capture holds, for the readers of final.json (the
        // verdict reads the capture itself).
        match capture
            .lines()
            .and_then(|l| crate::verdict::history::read(&l).history())
        {
            Ok(h) => f.history = Some(h),
            Err(e) => f.history_error = Some(e),
        }
        read_lease(&mut f, dir, state, candidates).await;
        return f;
    }
    let key = counter_key();
    let counter = |rev: i64, bytes: &[u8]| {
        stored_counter(bytes)
            .map(|value| HistoryEntry {
                value,
                rev: rev as u64,
            })
            .ok_or_else(|| {
                format!(
                    "{key} at revision {rev} is not a ConfigMap (JSON or Kubernetes protobuf) with a numeric value"
                )
            })
    };
    match tokio::time::timeout(HISTORY_TIMEOUT, history(dir, state, &key, counter)).await {
        Ok(Ok(h)) => f.history = Some(h),
        Ok(Err(e)) => f.history_error = Some(e),
        Err(_) => f.history_error = Some(format!("not read within {HISTORY_TIMEOUT:?}")),
    }
    read_lease(&mut f, dir, state, candidates).await;
    f
}

/// The candidates' Lease's history, for a run that had them.
async fn read_lease(f: &mut FinalRead, dir: &LabDir, state: &LabState, candidates: bool) {
    if candidates {
        let ids: Vec<String> = state
            .seeds
            .iter()
            .map(|s| super::clientgo::identity(&s.name))
            .collect();
        let lease = |rev: i64, bytes: &[u8]| {
            Ok(LeaseVersion {
                rev: rev as u64,
                holder: stored_holder(bytes, &ids),
            })
        };
        let key = lease_key();
        match tokio::time::timeout(HISTORY_TIMEOUT, history(dir, state, &key, lease)).await {
            Ok(Ok(h)) => f.lease_history = Some(h),
            Ok(Err(e)) => f.lease_history_error = Some(e),
            Err(_) => f.lease_history_error = Some(format!("not read within {HISTORY_TIMEOUT:?}")),
        }
    }
}

/// The candidate a stored Lease names as its holder: the longest of the
/// identities found in its bytes (JSON or Kubernetes protobuf alike: the
/// identities are the only strings of their kind in it); empty when none
/// (a released lease).
pub fn stored_holder(bytes: &[u8], identities: &[String]) -> String {
    identities
        .iter()
        .filter(|id| !id.is_empty() && bytes.windows(id.len()).any(|w| w == id.as_bytes()))
        .max_by_key(|id| id.len())
        .cloned()
        .unwrap_or_default()
}

/// Reads the counter back with `get`, retrying, into `f`.
pub async fn read_counter<F, Fut>(f: &mut FinalRead, mut get: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(u64, u64), String>>,
{
    for attempt in 1..=COUNTER_ATTEMPTS {
        f.counter_attempts = attempt;
        match get().await {
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
}

/// The path of the counter in the API, in the probes' namespace.
pub fn counter_path(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/configmaps/{COUNTER}")
}

/// The counter's value and resourceVersion from a GET of it.
pub fn parse_counter(path: &str, code: u16, body: &str) -> Result<(u64, u64), String> {
    if code != 200 {
        return Err(format!("GET {path}: {code}: {}", body.trim()));
    }
    let v: serde_json::Value = serde_json::from_str(body)
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
    let path = counter_path(NAMESPACE);
    let (code, body) = crate::apiserver::client::get(
        SocketAddr::from((*ip, crate::exposure::API_PORT)),
        &state.dns.api_name,
        tls,
        &path,
        Some(&state.api_token),
        Duration::from_secs(5),
    )
    .await
    .map_err(|e| format!("{e:#}"))?;
    parse_counter(&path, code, &body)
}

/// Every version of the counter, oldest first: a watch of its key from
/// revision 1 up to its current revision.
/// Every version of `key`, oldest first, each turned into an entry by
/// `entry`: a watch of the key from revision 1 up to its current revision.
async fn history<T>(
    dir: &LabDir,
    state: &LabState,
    key: &str,
    entry: impl Fn(i64, &[u8]) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    use etcd_client::{EventType, WatchOptions};
    let tls = crate::etcd::lab_tls(dir).map_err(|e| format!("{e:#}"))?;
    let mut client = crate::etcd::cluster_client(state, &tls, Duration::from_secs(3))
        .await
        .map_err(|e| format!("etcd: {e}"))?;
    let now = client
        .get(key, None)
        .await
        .map_err(|e| format!("etcd get {key}: {e}"))?;
    let Some(last) = now.kvs().first().map(|kv| kv.mod_revision()) else {
        return Err(format!("{key} is not in etcd"));
    };
    let mut stream = client
        .watch(key, Some(WatchOptions::new().with_start_revision(1)))
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
                out.push(entry(kv.mod_revision(), kv.value())?);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes k8s.io/apiserver (cpmlab-apiserver, storage media type
    /// protobuf) stored in etcd for a ConfigMap `counter` with value "1".
    const GENERIC_SERVER_COUNTER: &str = "6b3873000a0f0a0276311209436f6e6669674d617012a2010a93010a07636f756e74657212001a017022002a2463663833343665342d356265312d346535372d393939352d32393465303230303166393432003801420808f7988ad80610008a014c0a046375726c12065570646174651a027631220808f7988ad806100032084669656c647356313a220a207b22663a64617461223a7b222e223a7b7d2c22663a76616c7565223a7b7d7d7d4200120a0a0576616c75651201311a002200";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn the_counter_is_read_from_protobuf_and_json_values() {
        assert_eq!(stored_counter(&unhex(GENERIC_SERVER_COUNTER)), Some(1));
        assert_eq!(
            stored_counter(br#"{"kind":"ConfigMap","data":{"value":"42"}}"#),
            Some(42)
        );
        assert_eq!(stored_counter(br#"{"data":{"value":"x"}}"#), None);
        assert_eq!(stored_counter(b"k8s\x00\x0a"), None);
    }

    #[test]
    fn a_leases_holder_is_the_identity_it_names() {
        let ids = ["cpmlab-seed-a".to_string(), "cpmlab-seed-b".to_string()];
        let proto = b"k8s\x00\x0a\x12\x0dcpmlab-seed-b\x1a\x02\x08\x0f";
        assert_eq!(stored_holder(proto, &ids), "cpmlab-seed-b");
        let json = br#"{"spec":{"holderIdentity":"cpmlab-seed-a","leaseDurationSeconds":15}}"#;
        assert_eq!(stored_holder(json, &ids), "cpmlab-seed-a");
        // client-go's release on cancel writes an empty holder.
        assert_eq!(
            stored_holder(br#"{"spec":{"holderIdentity":""}}"#, &ids),
            ""
        );
        // A longer identity wins over one it contains.
        let nested = ["seed".to_string(), "seed-b".to_string()];
        assert_eq!(stored_holder(b"..seed-b..", &nested), "seed-b");
    }
}
