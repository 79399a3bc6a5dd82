//! Objects in etcd with kube-apiserver's etcd3-store semantics: keys under
//! `/registry/...`, resourceVersion = the key's mod revision, optimistic
//! concurrency by comparing mod revisions in a transaction, linearizable
//! reads, consistent paging at one revision, watches from a revision with
//! 410 Gone once it is compacted. Objects are stored as JSON (kube-apiserver
//! stores protobuf for built-in types; the stand-in says so in /version).

use std::time::Duration;

use base64::Engine as _;
use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, KeyValue, Txn, TxnOp, WatchOptions,
};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::errors::{from_etcd, never_sent, unavailable, ApiError};
use crate::resources::{Resource, NAMESPACES};

#[derive(Clone)]
pub struct Store {
    client: Client,
}

/// Query options of a LIST.
#[derive(Debug, Default, Clone)]
pub struct ListOpts {
    pub limit: Option<i64>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    /// `metadata.name=<x>` field selector.
    pub name: Option<String>,
    /// `k=v,k2=v2` label selector (equality only).
    pub labels: Vec<(String, String)>,
}

/// Query options of a WATCH.
#[derive(Debug, Default, Clone)]
pub struct WatchOpts {
    pub resource_version: Option<String>,
    pub bookmarks: bool,
    pub timeout: Option<Duration>,
    pub name: Option<String>,
    pub labels: Vec<(String, String)>,
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

fn new_uid() -> String {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 16];
    let _ = ring::rand::SystemRandom::new().fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The object stored at `kv`, with its resourceVersion.
pub fn decode(r: &Resource, kv: &KeyValue) -> Result<Value, ApiError> {
    let mut obj: Value = serde_json::from_slice(kv.value()).map_err(|e| {
        ApiError::Internal(format!("undecodable object at {:?}: {e}", kv.key_str()))
    })?;
    obj["apiVersion"] = json!(r.api_version());
    obj["kind"] = json!(r.kind);
    obj["metadata"]["resourceVersion"] = json!(kv.mod_revision().to_string());
    Ok(obj)
}

fn encode(obj: &Value) -> Vec<u8> {
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    serde_json::to_vec(&o).expect("JSON values serialise")
}

fn name_of(obj: &Value) -> Option<&str> {
    obj["metadata"]["name"].as_str().filter(|s| !s.is_empty())
}

fn labels_match(obj: &Value, want: &[(String, String)]) -> bool {
    want.iter()
        .all(|(k, v)| obj["metadata"]["labels"][k].as_str() == Some(v.as_str()))
}

/// Key just after every key with this prefix.
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    for i in (0..end.len()).rev() {
        if end[i] < 0xff {
            end[i] += 1;
            end.truncate(i + 1);
            return end;
        }
    }
    vec![0]
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Continue {
    rv: i64,
    start: String,
}

pub fn encode_continue(rv: i64, start: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
        serde_json::to_vec(&Continue {
            rv,
            start: start.to_string(),
        })
        .unwrap(),
    )
}

pub fn decode_continue(token: &str) -> Result<(i64, String), ApiError> {
    let bad = || ApiError::BadRequest(format!("invalid continue token `{token}`"));
    let b = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let c: Continue = serde_json::from_slice(&b).map_err(|_| bad())?;
    Ok((c.rv, c.start))
}

fn parse_rv(rv: &str) -> Result<i64, ApiError> {
    rv.parse::<i64>()
        .map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion `{rv}`")))
}

/// etcd's clientv3 retries a unary request up to 100 times, 25 ms apart
/// (`defaultUnaryMaxRetries`, `defaultBackoffWaitBetween`): about 2.5 s.
const ETCD_CLIENT_RETRIES: u32 = 100;
const ETCD_CLIENT_BACKOFF: Duration = Duration::from_millis(25);

/// Tries `f` again, on another member, when etcd's own client would:
/// reads whenever a member was unavailable (or had no leader), writes only
/// when the request provably never left. (The balanced channel stops
/// picking a dead member once its connection has failed.)
async fn retrying<T, F, Fut>(idempotent: bool, mut f: F) -> Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
{
    let mut attempt = 0;
    loop {
        match f().await {
            Err(e)
                if attempt < ETCD_CLIENT_RETRIES
                    && (never_sent(&e) || (idempotent && unavailable(&e))) =>
            {
                attempt += 1;
                tracing::debug!("etcd request failed ({e}); retry {attempt}");
                tokio::time::sleep(ETCD_CLIENT_BACKOFF).await;
            }
            other => return other,
        }
    }
}

/// How long a broken etcd watch is re-established before the client's
/// watch gets an error (clientv3 resumes a watch on another member on its
/// own; kube-apiserver's clients never see the member go).
const REWATCH_FOR: Duration = Duration::from_secs(30);

fn watch_options(prefix: &str, from_revision: i64) -> WatchOptions {
    WatchOptions::new()
        .with_range(prefix_end(prefix))
        .with_start_revision(from_revision)
        .with_prev_key()
        .with_progress_notify()
}

/// Re-opens a watch from `from_revision` after its stream broke, on
/// whichever member answers, as clientv3 does; `None` when none did within
/// [`REWATCH_FOR`] or the client's watch went away.
async fn rewatch(
    client: &mut Client,
    prefix: &str,
    from_revision: i64,
    tx: &mpsc::Sender<Value>,
) -> Option<etcd_client::WatchStream> {
    let t0 = tokio::time::Instant::now();
    let mut backoff = ETCD_CLIENT_BACKOFF;
    while t0.elapsed() < REWATCH_FOR && !tx.is_closed() {
        match client
            .watch(prefix, Some(watch_options(prefix, from_revision)))
            .await
        {
            Ok(s) => return Some(s),
            Err(e) => {
                tracing::debug!("re-watch {prefix} from {from_revision}: {e}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
    None
}

impl Store {
    pub fn new(client: Client) -> Store {
        Store { client }
    }

    fn kv(&self) -> etcd_client::KvClient {
        self.client.kv_client()
    }

    /// A transaction: retried only when it never reached a member.
    async fn txn(&self, txn: Txn) -> Result<etcd_client::TxnResponse, ApiError> {
        let kv = self.kv();
        retrying(false, || {
            let (mut kv, txn) = (kv.clone(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await
        .map_err(from_etcd)
    }

    /// A linearizable read: etcd has a leader and answers.
    pub async fn health(&self) -> Result<(), ApiError> {
        let kv = self.kv();
        retrying(true, || {
            let mut kv = kv.clone();
            async move { kv.get("/registry/health", None).await }
        })
        .await
        .map_err(from_etcd)?;
        Ok(())
    }

    /// Creates the namespaces every cluster has, if missing.
    pub async fn bootstrap(&self) -> Result<(), ApiError> {
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let obj = json!({"metadata": {"name": ns}});
            match self.create(&NAMESPACES, None, obj).await {
                Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    async fn get_kv(&self, key: &str) -> Result<Option<KeyValue>, ApiError> {
        let kv = self.kv();
        let resp = retrying(true, || {
            let mut kv = kv.clone();
            async move { kv.get(key, None).await }
        })
        .await
        .map_err(from_etcd)?;
        Ok(resp.kvs().first().cloned())
    }

    /// The version of `key` up to `back` writes before `current` (the
    /// oldest there is), if it has an older one.
    async fn older_version(
        &self,
        key: &str,
        current: Option<&KeyValue>,
        back: usize,
    ) -> Result<Option<KeyValue>, ApiError> {
        let mut older: Option<KeyValue> = None;
        let mut at = current.cloned();
        for _ in 0..back {
            let Some(cur) = at.filter(|c| c.mod_revision() > c.create_revision()) else {
                break;
            };
            let opts = GetOptions::new().with_revision(cur.mod_revision() - 1);
            let resp = self.kv().get(key, Some(opts)).await.map_err(from_etcd)?;
            at = resp.kvs().first().cloned();
            older = at.clone().or(older);
        }
        Ok(older)
    }

    pub async fn get(&self, r: &Resource, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let key = r.key(ns, name);
        let mut found = self.get_kv(&key).await?;
        if crate::failpoint::take(crate::failpoint::STALE_READ) {
            if let Some(older) = self.older_version(&key, found.as_ref(), 5).await? {
                tracing::warn!(
                    "failpoint {}: served {key} at revision {}",
                    crate::failpoint::STALE_READ,
                    older.mod_revision()
                );
                found = Some(older);
            }
        }
        match found {
            Some(kv) => decode(r, &kv),
            None => Err(ApiError::NotFound {
                kind: r.plural.into(),
                name: name.into(),
            }),
        }
    }

    async fn namespace_exists(&self, ns: &str) -> Result<(), ApiError> {
        match self.get_kv(&NAMESPACES.key(None, ns)).await? {
            Some(_) => Ok(()),
            None => Err(ApiError::NotFound {
                kind: "namespaces".into(),
                name: ns.into(),
            }),
        }
    }

    pub async fn list(
        &self,
        r: &Resource,
        ns: Option<&str>,
        o: &ListOpts,
    ) -> Result<Value, ApiError> {
        let prefix = r.prefix(ns);
        let (mut rev, mut start) = (0i64, prefix.clone());
        if let Some(tok) = o.continue_token.as_deref().filter(|t| !t.is_empty()) {
            (rev, start) = decode_continue(tok)?;
            if !start.starts_with(&prefix) {
                return Err(ApiError::BadRequest(
                    "continue token is for another list".into(),
                ));
            }
        } else if let (Some(rv), Some("Exact")) = (
            o.resource_version.as_deref(),
            o.resource_version_match.as_deref(),
        ) {
            rev = parse_rv(rv)?;
        }
        let mut opts = GetOptions::new().with_range(prefix_end(&prefix));
        if rev > 0 {
            opts = opts.with_revision(rev);
        }
        let filtered = o.name.is_some() || !o.labels.is_empty();
        if let Some(limit) = o.limit.filter(|l| *l > 0 && !filtered) {
            opts = opts.with_limit(limit);
        }
        let kv = self.kv();
        let resp = retrying(true, || {
            let (mut kv, opts) = (kv.clone(), opts.clone());
            let start = start.clone();
            async move { kv.get(start.as_str(), Some(opts)).await }
        })
        .await
        .map_err(|e| match from_etcd(e) {
                ApiError::Gone(_) if o.continue_token.is_some() => ApiError::Gone(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into(),
                ),
                other => other,
            })?;
        let list_rev = if rev > 0 {
            rev
        } else {
            resp.header().map(|h| h.revision()).unwrap_or(0)
        };
        let mut items = Vec::new();
        for kv in resp.kvs() {
            let obj = decode(r, kv)?;
            if o.name.as_deref().is_some_and(|n| name_of(&obj) != Some(n)) {
                continue;
            }
            if !labels_match(&obj, &o.labels) {
                continue;
            }
            items.push(obj);
        }
        let mut meta = json!({"resourceVersion": list_rev.to_string()});
        if resp.more() {
            if let Some(last) = resp.kvs().last() {
                let next = format!("{}\u{0}", last.key_str().unwrap_or_default());
                meta["continue"] = json!(encode_continue(list_rev, &next));
                let remaining = resp.count() - resp.kvs().len() as i64;
                meta["remainingItemCount"] = json!(remaining.max(0));
            }
        }
        Ok(json!({
            "kind": format!("{}List", r.kind),
            "apiVersion": r.api_version(),
            "metadata": meta,
            "items": items,
        }))
    }

    pub async fn create(
        &self,
        r: &Resource,
        ns: Option<&str>,
        mut obj: Value,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::BadRequest(
                "the body must be a JSON object".into(),
            ));
        }
        if name_of(&obj).is_none() {
            match obj["metadata"]["generateName"].as_str() {
                Some(g) if !g.is_empty() => {
                    let suffix: String = new_uid()
                        .chars()
                        .filter(|c| c.is_ascii_alphanumeric())
                        .take(5)
                        .collect();
                    obj["metadata"]["name"] = json!(format!("{g}{suffix}"));
                }
                _ => {
                    return Err(ApiError::BadRequest(
                        "name or generateName is required".into(),
                    ))
                }
            }
        }
        let name = name_of(&obj).unwrap_or_default().to_string();
        if let Some(ns) = ns.filter(|_| r.namespaced) {
            if let Some(body_ns) = obj["metadata"]["namespace"].as_str() {
                if !body_ns.is_empty() && body_ns != ns {
                    return Err(ApiError::BadRequest(format!(
                        "the namespace of the object ({body_ns}) does not match the namespace on the request ({ns})"
                    )));
                }
            }
            self.namespace_exists(ns).await?;
            obj["metadata"]["namespace"] = json!(ns);
        }
        obj["metadata"]["uid"] = json!(new_uid());
        obj["metadata"]["creationTimestamp"] = json!(now_rfc3339());
        if r.kind == "Namespace" {
            obj["status"] = json!({"phase": "Active"});
        }
        let key = r.key(ns, &name);
        let txn = Txn::new()
            .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.as_str(), encode(&obj), None)]);
        let resp = self.txn(txn).await?;
        if !resp.succeeded() {
            return Err(ApiError::AlreadyExists {
                kind: r.plural.into(),
                name,
            });
        }
        let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
        obj["apiVersion"] = json!(r.api_version());
        obj["kind"] = json!(r.kind);
        obj["metadata"]["resourceVersion"] = json!(rev.to_string());
        Ok(obj)
    }

    /// PUT: replaces the object; with a resourceVersion in the body only if
    /// it is still the current one (409 otherwise).
    pub async fn update(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
        mut obj: Value,
    ) -> Result<Value, ApiError> {
        if name_of(&obj).is_some_and(|n| n != name) {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                name_of(&obj).unwrap_or_default()
            )));
        }
        let key = r.key(ns, name);
        let current = self.get_kv(&key).await?.ok_or_else(|| ApiError::NotFound {
            kind: r.plural.into(),
            name: name.into(),
        })?;
        let expected = match obj["metadata"]["resourceVersion"]
            .as_str()
            .filter(|s| !s.is_empty())
        {
            Some(rv) => parse_rv(rv)?,
            None => current.mod_revision(),
        };
        let old = decode(r, &current)?;
        obj["metadata"]["name"] = json!(name);
        obj["metadata"]["uid"] = old["metadata"]["uid"].clone();
        obj["metadata"]["creationTimestamp"] = old["metadata"]["creationTimestamp"].clone();
        if let Some(ns) = ns.filter(|_| r.namespaced) {
            obj["metadata"]["namespace"] = json!(ns);
        }
        self.put_if(r, &key, name, expected, obj).await
    }

    async fn put_if(
        &self,
        r: &Resource,
        key: &str,
        name: &str,
        rev: i64,
        mut obj: Value,
    ) -> Result<Value, ApiError> {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, rev)])
            .and_then([TxnOp::put(key, encode(&obj), None)]);
        let resp = self.txn(txn).await?;
        if !resp.succeeded() {
            return Err(ApiError::Conflict {
                kind: r.plural.into(),
                name: name.into(),
            });
        }
        let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
        obj["apiVersion"] = json!(r.api_version());
        obj["kind"] = json!(r.kind);
        obj["metadata"]["resourceVersion"] = json!(rev.to_string());
        Ok(obj)
    }

    /// PATCH: merge patch (RFC 7386; strategic merge patch is treated the
    /// same, which is exact for the stand-in's types) or JSON patch (RFC 6902),
    /// retried on concurrent changes as kube-apiserver does.
    pub async fn patch(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
        kind: PatchKind,
        patch: Value,
    ) -> Result<Value, ApiError> {
        let key = r.key(ns, name);
        for _ in 0..5 {
            let current = self.get_kv(&key).await?.ok_or_else(|| ApiError::NotFound {
                kind: r.plural.into(),
                name: name.into(),
            })?;
            let old = decode(r, &current)?;
            let mut new = old.clone();
            match kind {
                PatchKind::Merge => json_merge(&mut new, &patch),
                PatchKind::Json => {
                    let p: json_patch::Patch = serde_json::from_value(patch.clone())
                        .map_err(|e| ApiError::BadRequest(format!("invalid JSON patch: {e}")))?;
                    json_patch::patch(&mut new, &p)
                        .map_err(|e| ApiError::BadRequest(format!("JSON patch failed: {e}")))?;
                }
            }
            // Identity cannot be patched away.
            for f in ["name", "uid", "creationTimestamp", "namespace"] {
                new["metadata"][f] = old["metadata"][f].clone();
            }
            if let Some(rv) = new["metadata"]["resourceVersion"].as_str() {
                if rv
                    != old["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default()
                {
                    return Err(ApiError::Conflict {
                        kind: r.plural.into(),
                        name: name.into(),
                    });
                }
            }
            match self
                .put_if(r, &key, name, current.mod_revision(), new)
                .await
            {
                Err(ApiError::Conflict { .. }) => continue,
                other => return other,
            }
        }
        Err(ApiError::Conflict {
            kind: r.plural.into(),
            name: name.into(),
        })
    }

    pub async fn delete(
        &self,
        r: &Resource,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let key = r.key(ns, name);
        let current = self.get_kv(&key).await?.ok_or_else(|| ApiError::NotFound {
            kind: r.plural.into(),
            name: name.into(),
        })?;
        let old = decode(r, &current)?;
        let txn = Txn::new()
            .when([Compare::mod_revision(
                key.as_str(),
                CompareOp::Equal,
                current.mod_revision(),
            )])
            .and_then([TxnOp::delete(key.as_str(), None)]);
        let resp = self.txn(txn).await?;
        if !resp.succeeded() {
            return Err(ApiError::Conflict {
                kind: r.plural.into(),
                name: name.into(),
            });
        }
        Ok(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "kind": r.plural, "uid": old["metadata"]["uid"]},
        }))
    }

    /// Starts a watch; events arrive on the returned channel as watch-event
    /// JSON values. The channel closes at timeout, on error (after an ERROR
    /// event), or when `stop` fires.
    pub async fn watch(
        &self,
        r: Resource,
        ns: Option<String>,
        o: WatchOpts,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) -> Result<mpsc::Receiver<Value>, ApiError> {
        let prefix = r.prefix(ns.as_deref());
        let (tx, rx) = mpsc::channel::<Value>(1024);
        // rv "" or "0": the current state first (as ADDED), then changes.
        let start = match o
            .resource_version
            .as_deref()
            .filter(|s| !s.is_empty() && *s != "0")
        {
            Some(rv) => parse_rv(rv)?,
            None => {
                let list = self
                    .list(
                        &r,
                        ns.as_deref(),
                        &ListOpts {
                            name: o.name.clone(),
                            labels: o.labels.clone(),
                            ..Default::default()
                        },
                    )
                    .await?;
                for item in list["items"].as_array().cloned().unwrap_or_default() {
                    let _ = tx.send(json!({"type": "ADDED", "object": item})).await;
                }
                parse_rv(list["metadata"]["resourceVersion"].as_str().unwrap_or("0"))?
            }
        };
        let mut client = self.client.clone();
        let mut stream = client
            .watch(prefix.as_str(), Some(watch_options(&prefix, start + 1)))
            .await
            .map_err(from_etcd)?;
        let deadline = o.timeout.map(|t| tokio::time::Instant::now() + t);
        tokio::spawn(async move {
            let mut last_rv = start;
            let mut progress = tokio::time::interval(Duration::from_secs(5));
            progress.tick().await;
            let gone =
                |msg: String| json!({"type": "ERROR", "object": ApiError::Gone(msg).status()});
            loop {
                // A watch that arrived once the server had begun to stop
                // (its subscription never sees the change) ends at once,
                // cleanly, so its client watches elsewhere.
                if *stop.borrow() {
                    break;
                }
                let timeout = async {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = timeout => break,
                    _ = stop.changed() => break,
                    _ = tx.closed() => break,
                    _ = progress.tick(), if o.bookmarks => {
                        let _ = stream.request_progress().await;
                    }
                    msg = stream.message() => {
                        let resp = match msg {
                            Ok(Some(resp)) => resp,
                            // The member went away: go on from the last
                            // revision on another one.
                            broken => {
                                let why = match broken {
                                    Err(e) => from_etcd(e),
                                    _ => ApiError::Unavailable("etcd: the watch stream ended".into()),
                                };
                                match rewatch(&mut client, &prefix, last_rv + 1, &tx).await {
                                    Some(s) => {
                                        tracing::info!("watch of {prefix} resumed from revision {} after: {why:?}", last_rv + 1);
                                        stream = s;
                                        continue;
                                    }
                                    None => {
                                        let _ = tx.send(json!({"type": "ERROR", "object": why.status()})).await;
                                        break;
                                    }
                                }
                            }
                        };
                        if resp.compact_revision() > 0 {
                            let _ = tx.send(gone(format!(
                                "too old resource version: {start} ({})",
                                resp.compact_revision()
                            ))).await;
                            break;
                        }
                        if resp.canceled() {
                            let _ = tx.send(gone(format!("watch canceled: {}", resp.cancel_reason()))).await;
                            break;
                        }
                        if resp.events().is_empty() {
                            // Progress notification: nothing is pending below this revision.
                            let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
                            if o.bookmarks && !resp.created() && rev > last_rv {
                                last_rv = rev;
                                let bm = json!({"type": "BOOKMARK", "object": {
                                    "kind": r.kind, "apiVersion": r.api_version(),
                                    "metadata": {"resourceVersion": rev.to_string()}}});
                                if tx.send(bm).await.is_err() { break; }
                            }
                            continue;
                        }
                        for ev in resp.events() {
                            let (ty, obj) = match ev.event_type() {
                                EventType::Put => {
                                    let Some(kv) = ev.kv() else { continue };
                                    let ty = if kv.create_revision() == kv.mod_revision() { "ADDED" } else { "MODIFIED" };
                                    (ty, decode(&r, kv))
                                }
                                EventType::Delete => {
                                    let (Some(kv), Some(prev)) = (ev.kv(), ev.prev_kv()) else { continue };
                                    let obj = decode(&r, prev).map(|mut o| {
                                        o["metadata"]["resourceVersion"] = json!(kv.mod_revision().to_string());
                                        o
                                    });
                                    ("DELETED", obj)
                                }
                            };
                            let Ok(obj) = obj else { continue };
                            if o.name.as_deref().is_some_and(|n| name_of(&obj) != Some(n)) || !labels_match(&obj, &o.labels) {
                                continue;
                            }
                            if let Some(rv) = obj["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()) {
                                last_rv = last_rv.max(rv);
                            }
                            if crate::failpoint::take(crate::failpoint::WATCH_ERROR) {
                                tracing::warn!("failpoint {}: an ERROR instead of a {ty} event", crate::failpoint::WATCH_ERROR);
                                let e = ApiError::Unavailable("etcd: failpoint watch-error".into());
                                let _ = tx.send(json!({"type": "ERROR", "object": e.status()})).await;
                                return;
                            }
                            if crate::failpoint::take(crate::failpoint::DROP_WATCH_EVENT) {
                                tracing::warn!("failpoint {}: dropped a {ty} event", crate::failpoint::DROP_WATCH_EVENT);
                                continue;
                            }
                            if tx.send(json!({"type": ty, "object": obj})).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            }
        });
        Ok(rx)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Json,
}

/// RFC 7386 JSON merge patch.
pub fn json_merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().expect("object");
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    json_merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads are retried on what grpc-go would call `Unavailable`; an
    /// answer etcd gave (a compacted revision) is not retried.

    #[test]
    fn merge_patch_follows_rfc7386() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        json_merge(&mut t, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(t, json!({"a": "z", "c": {"d": "e"}}));
        let mut t = json!({"a": [1, 2]});
        json_merge(&mut t, &json!({"a": [3]}));
        assert_eq!(t, json!({"a": [3]}));
    }

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let t = encode_continue(42, "/registry/configmaps/default/b\u{0}");
        assert_eq!(
            decode_continue(&t).unwrap(),
            (42, "/registry/configmaps/default/b\u{0}".into())
        );
        assert!(decode_continue("!!").is_err());
    }

    #[test]
    fn prefix_end_is_the_next_key() {
        assert_eq!(prefix_end("/registry/a/"), b"/registry/a0".to_vec());
    }

    #[test]
    fn uids_look_like_uuids() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(u.matches('-').count(), 4);
        assert_ne!(u, new_uid());
    }
}
