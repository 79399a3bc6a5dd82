//! `cpmlab fill`: a shoot of real size. Writes objects through the shoot
//! API (so they are stored as the API server stores them) until the
//! written bytes reach a size: ConfigMaps carrying a payload of the object
//! size, and Leases as controllers keep them (small, many). The payload is
//! incompressible, so a snapshot carries every byte. Names are fixed
//! (`fill-<kind>-<n>`): a fill cut short and run again continues, objects
//! already there count as written.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::errors::BadInput;

/// The namespace fill objects go to, unless told otherwise.
pub const NAMESPACE: &str = "cpmlab-fill";

/// What the lab's API servers serve that a fill can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FillKind {
    /// ConfigMaps carrying the payload: the bulk of the bytes.
    Configmaps,
    /// Leases as controllers keep them: small (a few hundred bytes).
    Leases,
}

impl FillKind {
    pub fn parse(s: &str) -> Option<FillKind> {
        match s {
            "configmaps" | "configmap" | "cm" => Some(FillKind::Configmaps),
            "leases" | "lease" => Some(FillKind::Leases),
            _ => None,
        }
    }
    fn plural(self) -> &'static str {
        match self {
            FillKind::Configmaps => "configmaps",
            FillKind::Leases => "leases",
        }
    }
}

/// Parses a size: `1GiB`, `500MiB`, `10KiB`, `2GB`, `1024` (bytes).
pub fn parse_size(field: &str, s: &str) -> Result<u64, BadInput> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "Ki" => 1 << 10,
        "MiB" | "Mi" => 1 << 20,
        "GiB" | "Gi" => 1 << 30,
        "KB" | "kB" | "K" | "k" => 1_000,
        "MB" | "M" => 1_000_000,
        "GB" | "G" => 1_000_000_000,
        other => {
            return Err(BadInput(format!(
                "{field}: `{s}`: unknown unit `{other}` (B, KiB, MiB, GiB, KB, MB, GB)"
            )))
        }
    };
    let n: f64 = num
        .parse()
        .map_err(|_| BadInput(format!("{field}: `{s}` is not a size (e.g. 500MiB)")))?;
    if !(n.is_finite() && n >= 0.0) {
        return Err(BadInput(format!("{field}: `{s}` is not a size")));
    }
    Ok((n * mult as f64).round() as u64)
}

/// A fill, checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FillPlan {
    pub total_bytes: u64,
    pub object_bytes: usize,
    pub kinds: Vec<FillKind>,
    pub namespace: String,
}

/// The largest payload per object: etcd takes requests up to 1.5 MiB.
pub const MAX_OBJECT_BYTES: usize = 1 << 20;
/// More than etcd's default quota (8 GiB) cannot be stored.
pub const MAX_TOTAL_BYTES: u64 = 8 << 30;

impl FillPlan {
    pub fn new(
        size: &str,
        object_size: &str,
        kinds: &[String],
        namespace: &str,
    ) -> Result<FillPlan, BadInput> {
        let total_bytes = parse_size("--size", size)?;
        if total_bytes == 0 || total_bytes > MAX_TOTAL_BYTES {
            return Err(BadInput(format!(
                "--size {size}: between 1 byte and 8GiB (etcd-druid's default quota)"
            )));
        }
        let object_bytes = parse_size("--object-size", object_size)? as usize;
        if !(64..=MAX_OBJECT_BYTES).contains(&object_bytes) {
            return Err(BadInput(format!(
                "--object-size {object_size}: between 64B and 1MiB (etcd takes requests up to 1.5 MiB)"
            )));
        }
        let kinds = kinds
            .iter()
            .map(|k| {
                FillKind::parse(k.trim()).ok_or_else(|| {
                    BadInput(format!(
                        "--kinds: unknown `{k}` (configmaps, leases: what the lab's API servers serve)"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !kinds.contains(&FillKind::Configmaps) {
            return Err(BadInput(
                "--kinds: configmaps must be among them (they carry the bytes; leases are small)"
                    .into(),
            ));
        }
        crate::topology::check_label(namespace, 63)
            .map_err(|e| BadInput(format!("--namespace: {e}")))?;
        Ok(FillPlan {
            total_bytes,
            object_bytes,
            kinds,
            namespace: namespace.to_string(),
        })
    }

    /// Object `n`: its kind (the kinds take turns), the collection path it
    /// is POSTed to, and its body.
    pub fn object(&self, n: u64) -> (FillKind, String, Vec<u8>) {
        let kind = self.kinds[(n % self.kinds.len() as u64) as usize];
        let ns = &self.namespace;
        let name = format!("fill-{}-{n:08}", kind.plural());
        let body = match kind {
            FillKind::Configmaps => serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "labels": {"cpmlab.fill": "true"}},
                "data": {"payload": payload(n, self.object_bytes)},
            }),
            FillKind::Leases => serde_json::json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "labels": {"cpmlab.fill": "true"}},
                "spec": {
                    "holderIdentity": format!("controller-{n}"),
                    "leaseDurationSeconds": 15,
                    "renewTime": "2026-01-01T00:00:00.000000Z",
                },
            }),
        };
        let path = match kind {
            FillKind::Configmaps => format!("/api/v1/namespaces/{ns}/configmaps"),
            FillKind::Leases => format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"),
        };
        (kind, path, serde_json::to_vec(&body).expect("json"))
    }
}

/// `len` characters that do not compress (xorshift over a 64-character
/// alphabet), the same for the same `n`.
pub fn payload(n: u64, len: usize) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHABET[(x & 63) as usize] as char
        })
        .collect()
}

/// How a fill went.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FillReport {
    pub objects: u64,
    /// Objects that were there already (a fill run again).
    pub existing: u64,
    /// Bytes of the objects as sent (JSON).
    pub bytes: u64,
    pub seconds: f64,
    pub mib_per_s: f64,
    /// etcd's database size after the fill, per member (bytes, in use).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub db_size: Vec<(String, u64, u64)>,
}

/// Something that POSTs a body and answers the HTTP status (the shoot API
/// through the probes' transport; a fake in tests).
#[async_trait::async_trait]
pub trait Poster: Send + Sync {
    async fn post(&self, path: &str, body: Vec<u8>) -> Result<u16, String>;
}

/// Writes the plan's objects with `concurrency` requests in flight,
/// calling `progress(bytes, objects)` every second. A request that fails
/// is tried again (up to 5 times, the API may be between replicas); one
/// refused for another reason stops the fill with the server's status.
pub async fn fill(
    poster: Arc<dyn Poster>,
    plan: &FillPlan,
    concurrency: usize,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<FillReport, String> {
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let objects = Arc::new(AtomicU64::new(0));
    let existing = Arc::new(AtomicU64::new(0));
    let workers = (0..concurrency.max(1)).map(|_| {
        let (poster, next, bytes, objects, existing) = (
            poster.clone(),
            next.clone(),
            bytes.clone(),
            objects.clone(),
            existing.clone(),
        );
        let plan = plan.clone();
        tokio::spawn(async move {
            loop {
                if bytes.load(Ordering::Relaxed) >= plan.total_bytes {
                    return Ok::<(), String>(());
                }
                let n = next.fetch_add(1, Ordering::Relaxed);
                let (_, path, body) = plan.object(n);
                let len = body.len() as u64;
                let mut tries = 0;
                loop {
                    tries += 1;
                    match poster.post(&path, body.clone()).await {
                        Ok(201) | Ok(200) => break,
                        Ok(409) => {
                            existing.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                        Ok(429 | 500..=599) | Err(_) if tries < 5 => {
                            tokio::time::sleep(Duration::from_millis(200 * tries)).await;
                        }
                        Ok(code) => return Err(format!("POST {path}: HTTP {code}")),
                        Err(e) => return Err(format!("POST {path}: {e}")),
                    }
                }
                bytes.fetch_add(len, Ordering::Relaxed);
                objects.fetch_add(1, Ordering::Relaxed);
            }
        })
    });
    let all = futures_util::future::join_all(workers);
    tokio::pin!(all);
    let results = loop {
        tokio::select! {
            r = &mut all => break r,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                progress(bytes.load(Ordering::Relaxed), objects.load(Ordering::Relaxed));
            }
        }
    };
    for r in results {
        r.map_err(|e| format!("a fill worker panicked: {e}"))??;
    }
    let seconds = started.elapsed().as_secs_f64();
    let b = bytes.load(Ordering::Relaxed);
    progress(b, objects.load(Ordering::Relaxed));
    Ok(FillReport {
        objects: objects.load(Ordering::Relaxed),
        existing: existing.load(Ordering::Relaxed),
        bytes: b,
        seconds,
        mib_per_s: b as f64 / (1 << 20) as f64 / seconds.max(1e-9),
        db_size: vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(parse_size("s", "1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("s", "500MiB").unwrap(), 500 << 20);
        assert_eq!(parse_size("s", "10KiB").unwrap(), 10 << 10);
        assert_eq!(parse_size("s", "1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("s", "2GB").unwrap(), 2_000_000_000);
        assert_eq!(parse_size("s", "4096").unwrap(), 4096);
        for bad in ["", "GiB", "1 TiB", "-1MiB", "lots"] {
            assert!(parse_size("--size", bad).is_err(), "{bad}");
        }
        assert!(parse_size("--size", "1TiB")
            .unwrap_err()
            .0
            .contains("unknown unit `TiB`"));
    }

    #[test]
    fn plans_are_checked() {
        let k = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let p = FillPlan::new("1GiB", "10KiB", &k(&["configmaps", "leases"]), NAMESPACE).unwrap();
        assert_eq!((p.total_bytes, p.object_bytes), (1 << 30, 10 << 10));
        for (size, obj, kinds) in [
            ("0", "10KiB", k(&["configmaps"])),
            ("9GiB", "10KiB", k(&["configmaps"])),
            ("1GiB", "2MiB", k(&["configmaps"])),
            ("1GiB", "10KiB", k(&["secrets"])),
            ("1GiB", "10KiB", k(&["leases"])),
        ] {
            assert!(
                FillPlan::new(size, obj, &kinds, NAMESPACE).is_err(),
                "{size} {obj} {kinds:?}"
            );
        }
        assert!(FillPlan::new("1GiB", "10KiB", &k(&["configmaps"]), "Bad_NS").is_err());
    }

    #[test]
    fn objects_take_turns_and_carry_incompressible_payload() {
        let p = FillPlan::new(
            "1MiB",
            "4KiB",
            &["configmaps".into(), "leases".into()],
            "ns",
        )
        .unwrap();
        let (k0, path0, body0) = p.object(0);
        let (k1, path1, body1) = p.object(1);
        assert_eq!((k0, k1), (FillKind::Configmaps, FillKind::Leases));
        assert_eq!(path0, "/api/v1/namespaces/ns/configmaps");
        assert_eq!(path1, "/apis/coordination.k8s.io/v1/namespaces/ns/leases");
        assert!(
            body0.len() > 4096 && body1.len() < 400,
            "{} {}",
            body0.len(),
            body1.len()
        );
        let v: serde_json::Value = serde_json::from_slice(&body0).unwrap();
        assert_eq!(v["metadata"]["name"], "fill-configmaps-00000000");
        // Deterministic, and as varied as its alphabet allows.
        assert_eq!(payload(7, 100), payload(7, 100));
        assert_ne!(payload(7, 100), payload(8, 100));
        let s = payload(3, 65536);
        let distinct: std::collections::BTreeSet<char> = s.chars().collect();
        assert_eq!(distinct.len(), 64);
    }

    struct Fake {
        seen: std::sync::Mutex<Vec<String>>,
        fail_first: AtomicU64,
    }

    #[async_trait::async_trait]
    impl Poster for Fake {
        async fn post(&self, path: &str, body: Vec<u8>) -> Result<u16, String> {
            if self
                .fail_first
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1))
                .is_ok()
            {
                return Ok(503);
            }
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let name = format!("{path}/{}", v["metadata"]["name"].as_str().unwrap());
            let mut seen = self.seen.lock().unwrap();
            if seen.contains(&name) {
                return Ok(409);
            }
            seen.push(name);
            Ok(201)
        }
    }

    #[tokio::test]
    async fn a_fill_reaches_its_size_and_a_second_one_continues() {
        let p = FillPlan::new("100KiB", "4KiB", &["configmaps".into()], "ns").unwrap();
        let fake = Arc::new(Fake {
            seen: Default::default(),
            fail_first: AtomicU64::new(2),
        });
        let r = fill(fake.clone(), &p, 4, &|_, _| {}).await.unwrap();
        assert!(r.bytes >= 100 << 10, "{r:?}");
        assert!(r.objects >= 25 && r.objects <= 25 + 4, "{r:?}");
        assert_eq!(r.existing, 0);
        let again = fill(fake, &p, 4, &|_, _| {}).await.unwrap();
        assert!(again.existing >= 24, "{again:?}");
    }
}
