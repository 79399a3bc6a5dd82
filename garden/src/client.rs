//! A client of the garden's API (the garden's kube-apiserver, which
//! aggregates gardener-apiserver): applying the garden's objects, what an
//! operator does to trigger a Live CPM, and what a gardenlet does on the
//! Shoot and its Seed. JSON over HTTPS with a client certificate, each
//! request on a connection of its own through [`cpmlab_core::lab_net`]
//! (so the host reaches the garden as it reaches the lab, relayed where
//! the engine's networks are not reachable), each bounded in time (a
//! gardenlet cut off from the garden gets an error it can retry).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use cpmlab_model::migrate::conditions::{Condition, Conditions, Status, STEPS};

use crate::GardenError;

/// Gardener's intent annotation for a live migration
/// (`v1beta1constants.AnnotationMigrationLiveMigrate`).
pub const ANNOTATION_LIVE_MIGRATE: &str = "migration.gardener.cloud/live-migrate";
/// Allows seeds farther apart than the region ConfigMap's threshold
/// (`v1beta1constants.AnnotationMigrationAllowDistantRegions`).
pub const ANNOTATION_ALLOW_DISTANT_REGIONS: &str = "migration.gardener.cloud/allow-distant-regions";
/// GEP-0039's escape hatch: the destination gardenlet shrinks etcd to the
/// destination before its kube-apiserver starts.
pub const ANNOTATION_FORCE_SHRINK: &str = "migration.gardener.cloud/force-shrink-etcd";

/// The garden's TLS server name (its kube-apiserver's certificate names it).
pub const GARDEN_SNI: &str = "garden.cpmlab.local";

/// Who talks to the garden, and how.
#[derive(Clone)]
pub struct Garden {
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    timeout: Duration,
}

/// Paths of the lab's resources, by kind.
fn resource(api_version: &str, kind: &str) -> Result<(String, bool), GardenError> {
    let (plural, namespaced) = match kind {
        "Namespace" => ("namespaces", false),
        "Service" => ("services", true),
        "Secret" => ("secrets", true),
        "ConfigMap" => ("configmaps", true),
        "APIService" => ("apiservices", false),
        "ClusterRole" => ("clusterroles", false),
        "ClusterRoleBinding" => ("clusterrolebindings", false),
        "Project" => ("projects", false),
        "CloudProfile" => ("cloudprofiles", false),
        "ControllerRegistration" => ("controllerregistrations", false),
        "Seed" => ("seeds", false),
        "Shoot" => ("shoots", true),
        other => {
            return Err(GardenError::Other(format!(
                "the lab does not know the resource of kind {other}"
            )))
        }
    };
    let base = if api_version.contains('/') {
        format!("/apis/{api_version}")
    } else {
        format!("/api/{api_version}")
    };
    Ok((format!("{base}/{plural}"), namespaced))
}

fn object_path(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<String, GardenError> {
    let (collection, namespaced) = resource(api_version, kind)?;
    Ok(match (namespaced, namespace) {
        (true, Some(ns)) => {
            let (base, plural) = collection.rsplit_once('/').expect("a collection path");
            format!("{base}/namespaces/{ns}/{plural}/{name}")
        }
        _ => format!("{collection}/{name}"),
    })
}

fn shoot_path(namespace: &str, name: &str) -> String {
    format!("/apis/core.gardener.cloud/v1beta1/namespaces/{namespace}/shoots/{name}")
}

fn seed_path(name: &str) -> String {
    format!("/apis/core.gardener.cloud/v1beta1/seeds/{name}")
}

const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";
const JSON: &str = "application/json";

impl Garden {
    /// A client of the garden at `addr` (its kube-apiserver), trusting
    /// `ca_pem`, authenticating with `cert_pem`/`key_pem`.
    pub fn new(
        addr: SocketAddr,
        ca_pem: &str,
        cert_pem: &str,
        key_pem: &str,
    ) -> Result<Garden, GardenError> {
        let bad = |what: &str, e: String| GardenError::Other(format!("{what}: {e}"));
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots
                .add(c.map_err(|e| bad("the garden's CA", e.to_string()))?)
                .map_err(|e| bad("the garden's CA", e.to_string()))?;
        }
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| bad("the client certificate", e.to_string()))?;
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| bad("the client key", e.to_string()))?;
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("TLS", e.to_string()))?
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .map_err(|e| bad("the client certificate", e.to_string()))?;
        Ok(Garden {
            addr,
            tls: Arc::new(tls),
            timeout: Duration::from_secs(15),
        })
    }

    /// The same client with another bound on each request.
    pub fn with_timeout(mut self, timeout: Duration) -> Garden {
        self.timeout = timeout;
        self
    }

    /// One request; the body as JSON. A status of 400 or more is
    /// [`GardenError::Refused`] with the server's message.
    async fn call(
        &self,
        what: &str,
        method: &str,
        path: &str,
        body: Option<(&str, &Value)>,
    ) -> Result<Value, GardenError> {
        let unreachable = |detail: String| GardenError::Unreachable {
            what: what.to_string(),
            detail,
        };
        let payload = body
            .map(|(_, v)| serde_json::to_vec(v).unwrap_or_default())
            .unwrap_or_default();
        let mut head = format!(
            "{method} {path} HTTP/1.0\r\nHost: {GARDEN_SNI}\r\nAccept: application/json\r\nUser-Agent: cpmlab\r\n"
        );
        if let Some((ct, _)) = body {
            head.push_str(&format!(
                "Content-Type: {ct}\r\nContent-Length: {}\r\n",
                payload.len()
            ));
        }
        head.push_str("\r\n");
        let work = async {
            let tcp = cpmlab_core::lab_net::connect(self.addr)
                .await
                .map_err(|e| unreachable(format!("connect {}: {e}", self.addr)))?;
            let name = ServerName::try_from(GARDEN_SNI.to_string()).expect("a valid name");
            let mut s = tokio_rustls::TlsConnector::from(self.tls.clone())
                .connect(name, tcp)
                .await
                .map_err(|e| unreachable(format!("TLS to {}: {e}", self.addr)))?;
            s.write_all(head.as_bytes())
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            s.write_all(&payload)
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            let mut buf = Vec::new();
            // The server closes after an HTTP/1.0 answer (no chunking).
            let _ = s.read_to_end(&mut buf).await;
            Ok::<Vec<u8>, GardenError>(buf)
        };
        let buf = tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| {
                unreachable(format!(
                    "no answer from {} within {:?}",
                    self.addr, self.timeout
                ))
            })??;
        let text = String::from_utf8_lossy(&buf);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let code: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| unreachable(format!("no HTTP status from {}", self.addr)))?;
        let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        if code >= 400 {
            return Err(GardenError::Refused {
                what: what.to_string(),
                code,
                reason: v["reason"].as_str().unwrap_or_default().to_string(),
                message: v["message"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| body.trim().to_string()),
            });
        }
        Ok(v)
    }

    /// The garden's kube-apiserver's `/readyz`, answered 200.
    pub async fn ready(&self) -> Result<(), GardenError> {
        let unreachable = |detail: String| GardenError::Unreachable {
            what: "/readyz".into(),
            detail,
        };
        let work = async {
            let tcp = cpmlab_core::lab_net::connect(self.addr)
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            let name = ServerName::try_from(GARDEN_SNI.to_string()).expect("a valid name");
            let mut s = tokio_rustls::TlsConnector::from(self.tls.clone())
                .connect(name, tcp)
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            s.write_all(format!("GET /readyz HTTP/1.0\r\nHost: {GARDEN_SNI}\r\n\r\n").as_bytes())
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            let mut buf = Vec::new();
            let _ = s.read_to_end(&mut buf).await;
            Ok::<Vec<u8>, GardenError>(buf)
        };
        let buf = tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| unreachable("timed out".into()))??;
        let text = String::from_utf8_lossy(&buf);
        if text.split_whitespace().nth(1) == Some("200") {
            Ok(())
        } else {
            Err(unreachable(
                text.lines().next().unwrap_or("no answer").to_string(),
            ))
        }
    }

    /// Server-side applies each object (field manager `cpmlab`), in order.
    pub async fn apply(&self, objects: &[Value]) -> Result<(), GardenError> {
        for o in objects {
            let api_version = o["apiVersion"].as_str().unwrap_or_default();
            let kind = o["kind"].as_str().unwrap_or_default();
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            let path = object_path(api_version, kind, o["metadata"]["namespace"].as_str(), name)?;
            self.call(
                &format!("apply {kind} {name}"),
                "PATCH",
                &format!("{path}?fieldManager=cpmlab&force=true"),
                Some((APPLY, o)),
            )
            .await?;
        }
        Ok(())
    }

    /// Is gardener-apiserver's API served through the garden's
    /// kube-apiserver (Shoots listable)?
    pub async fn serves_gardener_api(&self, namespace: &str) -> Result<(), GardenError> {
        self.call(
            "list shoots",
            "GET",
            &format!("/apis/core.gardener.cloud/v1beta1/namespaces/{namespace}/shoots?limit=1"),
            None,
        )
        .await
        .map(|_| ())
    }

    /// A Seed as gardener-apiserver has it.
    pub async fn seed(&self, name: &str) -> Result<Value, GardenError> {
        self.call(&format!("get seed {name}"), "GET", &seed_path(name), None)
            .await
    }

    /// A Seed's status as its gardenlet reports it: the gardener version
    /// (what the admission compares) and its identity.
    pub async fn report_seed_version(&self, seed: &str, version: &str) -> Result<(), GardenError> {
        let patch = json!({"status": {"gardener": {
            "id": format!("cpmlab-gardenlet-{seed}"),
            "name": format!("gardenlet-{seed}"),
            "version": version,
        }}});
        self.call(
            &format!("seeds/{seed}/status"),
            "PATCH",
            &format!("{}/status", seed_path(seed)),
            Some((MERGE, &patch)),
        )
        .await
        .map(|_| ())
    }

    /// The Shoot as gardener-apiserver has it.
    pub async fn shoot(&self, namespace: &str, name: &str) -> Result<Value, GardenError> {
        self.call(
            &format!("get shoot {namespace}/{name}"),
            "GET",
            &shoot_path(namespace, name),
            None,
        )
        .await
    }

    /// The seed the shoot's control plane runs in (`status.seedName`) and
    /// its last operation, as a gardenlet writes them once it reconciled
    /// the shoot there.
    pub async fn set_shoot_running_in(
        &self,
        namespace: &str,
        name: &str,
        seed: &str,
    ) -> Result<(), GardenError> {
        let now = now_rfc3339();
        let patch = json!({"status": {
            "seedName": seed,
            "technicalID": format!("shoot--{}--{name}", namespace.trim_start_matches("garden-")),
            "lastOperation": {"type": "Reconcile", "state": "Succeeded", "progress": 100,
                              "description": format!("the shoot's control plane runs in seed {seed}"),
                              "lastUpdateTime": now},
        }});
        self.call(
            &format!("shoots/{name}/status"),
            "PATCH",
            &format!("{}/status", shoot_path(namespace, name)),
            Some((MERGE, &patch)),
        )
        .await
        .map(|_| ())
    }

    /// Sets (or, with `None`, removes) annotations on the Shoot.
    pub async fn annotate_shoot(
        &self,
        namespace: &str,
        name: &str,
        annotations: &[(&str, Option<String>)],
    ) -> Result<(), GardenError> {
        let mut m = serde_json::Map::new();
        for (k, v) in annotations {
            m.insert(
                k.to_string(),
                v.clone().map(Value::String).unwrap_or(Value::Null),
            );
        }
        let patch = json!({"metadata": {"annotations": m}});
        self.call(
            &format!("annotate shoot {name}"),
            "PATCH",
            &shoot_path(namespace, name),
            Some((MERGE, &patch)),
        )
        .await
        .map(|_| ())
    }

    /// What an operator does to move the shoot: `spec.seedName` changed
    /// through the `shoots/binding` subresource (gardener
    /// `docs/operations/live_control_plane_migration.md`). A refusal by
    /// gardener-apiserver's admission comes back as [`GardenError::Refused`]
    /// with its own message.
    pub async fn bind(&self, namespace: &str, name: &str, seed: &str) -> Result<(), GardenError> {
        let mut shoot = self.shoot(namespace, name).await?;
        shoot["spec"]["seedName"] = Value::String(seed.to_string());
        self.call(
            &format!("shoots/{name}/binding"),
            "PUT",
            &format!("{}/binding", shoot_path(namespace, name)),
            Some((JSON, &shoot)),
        )
        .await
        .map(|_| ())
    }

    /// The Shoot's `status.liveMigration.conditions`, every step present
    /// (a step the garden has no condition for yet is Unknown).
    pub async fn conditions(&self, namespace: &str, name: &str) -> Result<Conditions, GardenError> {
        Ok(conditions_of(&self.shoot(namespace, name).await?))
    }

    /// Sets one step's condition on the Shoot's status (a strategic merge
    /// patch keyed by `type`, so the other gardenlet's conditions stay):
    /// the transition time moves only when the status does, the update
    /// time always. The conditions after the write.
    pub async fn set_condition(
        &self,
        namespace: &str,
        name: &str,
        step: &str,
        status: Status,
        reason: &str,
        message: &str,
    ) -> Result<Conditions, GardenError> {
        let before = self.conditions(namespace, name).await?;
        let now = now_rfc3339();
        let transition = match before.get(step) {
            Some(c) if c.status == status && !c.last_transition_time.is_empty() => {
                c.last_transition_time.clone()
            }
            _ => now.clone(),
        };
        let patch = json!({"status": {"liveMigration": {"conditions": [{
            "type": step,
            "status": status.as_str(),
            "reason": reason,
            "message": truncate(message, 1024),
            "lastTransitionTime": transition,
            "lastUpdateTime": now,
        }]}}});
        let v = self
            .call(
                &format!("shoots/{name}/status ({step})"),
                "PATCH",
                &format!("{}/status", shoot_path(namespace, name)),
                Some((STRATEGIC, &patch)),
            )
            .await?;
        Ok(conditions_of(&v))
    }

    /// Removes every live-migration condition (a new migration starts
    /// from none).
    pub async fn clear_conditions(&self, namespace: &str, name: &str) -> Result<(), GardenError> {
        let patch = json!({"status": {"liveMigration": null}});
        self.call(
            &format!("shoots/{name}/status"),
            "PATCH",
            &format!("{}/status", shoot_path(namespace, name)),
            Some((MERGE, &patch)),
        )
        .await
        .map(|_| ())
    }
}

/// The live-migration conditions of a Shoot object, every step present.
pub fn conditions_of(shoot: &Value) -> Conditions {
    let listed = shoot["status"]["liveMigration"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Conditions(
        STEPS
            .iter()
            .map(
                |step| match listed.iter().find(|c| c["type"].as_str() == Some(step)) {
                    Some(c) => Condition {
                        kind: step.to_string(),
                        status: Status::parse(c["status"].as_str().unwrap_or("")),
                        reason: c["reason"].as_str().unwrap_or_default().to_string(),
                        message: c["message"].as_str().unwrap_or_default().to_string(),
                        last_transition_time: c["lastTransitionTime"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                    },
                    None => Condition {
                        kind: step.to_string(),
                        status: Status::Unknown,
                        reason: "Pending".into(),
                        message: String::new(),
                        last_transition_time: String::new(),
                    },
                },
            )
            .collect(),
    )
}

/// The annotations of a Shoot object.
pub fn annotations_of(shoot: &Value) -> std::collections::BTreeMap<String, String> {
    shoot["metadata"]["annotations"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// `spec.seedName` and `status.seedName` of a Shoot object.
pub fn seeds_of(shoot: &Value) -> (Option<String>, Option<String>) {
    let s = |v: &Value| v.as_str().map(str::to_string);
    (
        s(&shoot["spec"]["seedName"]),
        s(&shoot["status"]["seedName"]),
    )
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Now, as the garden's conditions spell time (RFC 3339, seconds).
pub fn now_rfc3339() -> String {
    let t = time::OffsetDateTime::now_utc();
    let t = t.replace_nanosecond(0).unwrap_or(t);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_read_by_type_and_missing_ones_are_pending() {
        let shoot = json!({"status": {"liveMigration": {"conditions": [
            {"type": "DestinationEtcdPeersJoined", "status": "Progressing", "reason": "StepInProgress",
             "message": "1/2", "lastTransitionTime": "2026-12-01T10:00:00Z"},
            {"type": "SourceEtcdPreparedForPeerJoin", "status": "True", "reason": "StepCompleted",
             "message": "", "lastTransitionTime": "2026-12-01T09:59:00Z"},
        ]}}});
        let c = conditions_of(&shoot);
        assert_eq!(c.0.len(), 8);
        assert_eq!(c.0[0].status, Status::True);
        assert_eq!(c.0[1].status, Status::Progressing);
        assert_eq!(c.0[1].message, "1/2");
        assert_eq!(c.0[2].status, Status::Unknown);
        assert_eq!(c.0[2].reason, "Pending");
        assert_eq!(c.next_step(), Some("DestinationEtcdPeersJoined"));
        assert_eq!(conditions_of(&json!({})).next_step(), Some(STEPS[0]));
    }

    #[test]
    fn paths_are_the_resources_own() {
        assert_eq!(
            object_path("v1", "ConfigMap", Some("garden"), "x").unwrap(),
            "/api/v1/namespaces/garden/configmaps/x"
        );
        assert_eq!(
            object_path("core.gardener.cloud/v1beta1", "Seed", None, "seed-a").unwrap(),
            "/apis/core.gardener.cloud/v1beta1/seeds/seed-a"
        );
        assert_eq!(
            object_path(
                "core.gardener.cloud/v1beta1",
                "Shoot",
                Some("garden-local"),
                "local"
            )
            .unwrap(),
            shoot_path("garden-local", "local")
        );
        assert!(object_path("v1", "Pod", Some("x"), "y").is_err());
    }

    #[test]
    fn seeds_and_annotations_are_read_off_the_shoot() {
        let shoot = json!({"metadata": {"annotations": {ANNOTATION_LIVE_MIGRATE: "true"}},
                           "spec": {"seedName": "seed-b"}, "status": {"seedName": "seed-a"}});
        assert_eq!(annotations_of(&shoot)[ANNOTATION_LIVE_MIGRATE], "true");
        assert_eq!(
            seeds_of(&shoot),
            (Some("seed-b".into()), Some("seed-a".into()))
        );
        assert!(truncate(&"é".repeat(10), 5).ends_with('…'));
        assert!(now_rfc3339().ends_with('Z'));
    }
}
