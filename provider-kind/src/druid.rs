//! The kind form's etcd through etcd-druid (`--with-etcd-druid`): each
//! seed's `Etcd` resource, the TLS Secrets it names, and the names and
//! labels druid gives what it makes from it (its StatefulSet, pods,
//! Services), so that the lab's own objects (the per-member Services the
//! ingress routes to) select druid's pods.
//!
//! Written against etcd-druid v0.38.1 (the `github.com/gardener/etcd-druid/api`
//! version Gardener's go.mod pins; the module's sources from the Go module
//! proxy, tag commit fb4bada21d0de59ba04ea5db4746c344f09fd653). Its `Etcd`
//! CRD is vendored in `fixtures/upstream/etcd-druid/`, and the tests below
//! check every rendered field against its schema and its CEL rules.

use serde_json::{json, Value};

use super::members::{self, KindMember};
use super::{KindSettings, PEER_PORT};
use crate::topology::Topology;

/// The version the rendered `Etcd` is written for (see the module doc).
pub const DRUID_VERSION: &str = "v0.38.1";

/// The names of what druid makes (the `Etcd`, its pods, Services and
/// members), shared with the lab state.
pub use cpmlab_model::kind::druid_names::{
    client_service, etcd_name, member_name, member_name_prefix, pod_name, ETCD_NAME,
};

/// The Secrets the `Etcd` names, with Gardener's names
/// (`pkg/component/etcd/etcd/etcd.go`: `etcd-server-<role>`,
/// `etcd-peer-server-<role>`, `etcd-client`; the CA bundle's data key
/// `bundle.crt`, `secretsutils.DataKeyCertificateBundle`). The lab has one
/// CA for clients and peers, so one bundle serves both.
pub const CA_BUNDLE_SECRET: &str = "ca-etcd-bundle";
pub const CA_BUNDLE_KEY: &str = "bundle.crt";
pub const SERVER_SECRET: &str = "etcd-server-main";
pub const PEER_SERVER_SECRET: &str = "etcd-peer-server-main";
pub const CLIENT_SECRET: &str = "etcd-client";
/// The keys druid reads from a server or client TLS Secret
/// (`internal/component/configmap/etcdconfig.go`,
/// `getSchemeAndSecurityConfig`; `internal/component/statefulset/builder.go`,
/// the backup-restore sidecar's `--cert`/`--key`).
pub const TLS_CERT_KEY: &str = "tls.crt";
pub const TLS_KEY_KEY: &str = "tls.key";

/// The labels druid puts on every pod of the `Etcd` named `etcd` besides
/// `spec.labels` (`GetDefaultLabels` in `api/core/v1alpha1/helper.go`, and
/// the StatefulSet's own in `internal/component/statefulset/builder.go`,
/// `getStatefulSetLabels`); its client and peer Services select the first
/// three (`internal/component/clientservice/clientservice.go`).
pub fn pod_labels(etcd: &str) -> Value {
    json!({
        "app.kubernetes.io/managed-by": "etcd-druid",
        "app.kubernetes.io/part-of": etcd,
        "app.kubernetes.io/component": "etcd-statefulset",
        "app.kubernetes.io/name": etcd,
    })
}

/// The peer URL druid advertises for pod `index` of the `Etcd` named
/// `etcd` inside its own cluster (`getAdvertiseURLs` in
/// `internal/component/configmap/etcdconfig.go`).
pub fn in_cluster_peer_url(etcd: &str, ns: &str, index: usize) -> String {
    format!(
        "https://{}.{etcd}-peer.{ns}.svc:{PEER_PORT}",
        pod_name(etcd, index)
    )
}

/// A per-member Service's selector: druid's pod of that member, by druid's
/// labels and the pod name the StatefulSet controller labels it with.
pub fn member_selector(etcd: &str, index: usize) -> Value {
    let mut v = pod_labels(etcd);
    v["statefulset.kubernetes.io/pod-name"] = json!(pod_name(etcd, index));
    v
}

/// The labels the lab adds to druid's pods (`spec.labels`): the lab's own
/// (its workloads are found by them) and Gardener's `app` label.
fn spec_labels(lab: &str, seed: &str) -> Value {
    json!({
        crate::labels::LABEL_LAB: lab,
        crate::labels::LABEL_SEED: seed,
        crate::labels::LABEL_ROLE: "etcd",
        "app": "etcd-statefulset",
    })
}

/// `seed`'s `Etcd` with `replicas` members running, named as
/// `s.druid_naming` says.
///
/// The source's runs all its members from `up`. The destination's is made
/// at `up` with `bootstrapWithExistingCluster` (druid accepts it at creation
/// only) and zero replicas; the migration scales it. Each running member
/// advertises its ingress URL beside druid's in-cluster one
/// (`additionalAdvertisePeerURLs`, keyed by member name, which druid's CRD
/// requires to start with `<memberNamePrefix>-<Etcd name>-` and to index a
/// member below `replicas`: at zero replicas there is none, so the
/// migration's scale-up sets `replicas` and the URLs in one update,
/// `etcd(.., n)`).
///
/// Known upstream gap (v0.38.1 and druid's master, 5b90b4a), the reason
/// for [`DruidNaming::Distinct`]: druid's ConfigMap looks the URLs up by
/// the bare pod name (`internal/component/configmap/etcdconfig.go`,
/// `memberURLs.MemberName == podName`), which the CRD's rule refuses
/// whenever `memberNamePrefix` is set, so under Gardener's naming druid
/// renders none of them: the members advertise their in-cluster URL only,
/// which the other seed cannot reach.
pub fn etcd(lab: &str, t: &Topology, s: &KindSettings, seed: &str, replicas: usize) -> Value {
    let ns = super::namespace(&t.shoot.name);
    let mine = members::members(t, s, seed);
    let source = t.source().name == seed;
    let name = etcd_name(t, s, seed);
    let ca = json!({"name": CA_BUNDLE_SECRET, "dataKey": CA_BUNDLE_KEY});
    let mut etcd = json!({
        // Gardener's (pkg/component/etcd/etcd/etcd.go).
        "quota": "8Gi",
        "metrics": "extensive",
        "clientUrlTls": {
            "tlsCASecretRef": ca,
            "serverTLSSecretRef": {"name": SERVER_SECRET},
            "clientTLSSecretRef": {"name": CLIENT_SECRET},
        },
        "peerUrlTls": {
            "tlsCASecretRef": ca,
            "serverTLSSecretRef": {"name": PEER_SERVER_SECRET},
            // Peers arrive from the other seed's gateway, not from an
            // address their certificate names (the GEP's "skip SAN
            // verification").
            "skipClientSANVerification": true,
        },
    });
    let advertised: Vec<Value> = mine
        .iter()
        .take(replicas)
        .map(|m| json!({"memberName": member_name(t, s, seed, m.index), "urls": [m.peer_url()]}))
        .collect();
    if !advertised.is_empty() {
        etcd["additionalAdvertisePeerURLs"] = json!(advertised);
    }
    if !source {
        let src = &t.source().name;
        let src_etcd = etcd_name(t, s, src);
        etcd["bootstrapWithExistingCluster"] = json!({
            // Every peer URL each source member advertises, as its member
            // list shows them: a joiner's initial cluster must name them
            // all (etcd compares them as sets; druid's
            // docs/usage/bootstrapping-with-existing-cluster.md).
            "members": members::members(t, s, src).iter().map(|m| json!({
                "name": member_name(t, s, src, m.index),
                "peerUrls": [in_cluster_peer_url(&src_etcd, &ns, m.index), m.peer_url()],
            })).collect::<Vec<_>>(),
            // Each source member's client URL on the source's ingress,
            // for the joiners' backup-restore sidecars: names the lab's
            // DNS serves (every member's host). The seed's client host,
            // which only the ingress's routes know, resolves nowhere
            // (a live run, 2026-11-28: "no such host", the sidecar's
            // scale-up check fell back to a new cluster). druid's CRD
            // refuses a change of them while the bootstrap runs.
            "clientEndpoints": members::members(t, s, src)
                .iter()
                .map(|m| m.client_url())
                .collect::<Vec<_>>(),
        });
    }
    let mut spread = pod_labels(&name);
    spread[crate::labels::LABEL_SEED] = json!(seed);
    let mut object = json!({
        "apiVersion": "druid.gardener.cloud/v1alpha1", "kind": "Etcd",
        "metadata": {"name": name, "namespace": ns, "labels": {
            crate::labels::LABEL_LAB: lab,
            crate::labels::LABEL_SEED: seed,
            crate::labels::LABEL_ROLE: "etcd",
        },
        // gardenlet asks druid to reconcile on every deploy (druid's spec
        // auto-reconcile is off): pkg/component/etcd/etcd/etcd.go.
        "annotations": {"gardener.cloud/operation": "reconcile"}},
        "spec": {
            "replicas": replicas,
            "labels": spec_labels(lab, seed),
            "selector": {"matchLabels": {crate::labels::LABEL_SEED: seed, "app": "etcd-statefulset"}},
            "etcd": etcd,
            // The sidecar's TLS, as Gardener sets it (pkg/component/etcd/etcd/etcd.go:
            // the CA bundle, the server and client Secrets of etcd's client
            // URL). druid also takes its readiness probe's scheme from it,
            // and the launcher serves HTTPS when etcd's client TLS is on.
            // The store and the snapshots' settings as Gardener's for a
            // shoot with a backup (pkg/component/etcd/etcd/etcd.go), on
            // the `Local` provider of Gardener's own local setup.
            "backup": {
                "port": BACKUP_PORT,
                "tls": {
                    "tlsCASecretRef": ca,
                    "serverTLSSecretRef": {"name": SERVER_SECRET},
                    "clientTLSSecretRef": {"name": CLIENT_SECRET},
                },
                "store": {
                    "provider": "Local",
                    "container": backup_bucket(seed),
                    "prefix": backup_prefix(lab, &ns),
                },
                "garbageCollectionPolicy": "Exponential",
                "garbageCollectionPeriod": "12h0m0s",
                // Gardener's `SnapshotCompression`, druid's `compression`.
                "compression": {"enabled": true, "policy": "gzip"},
                "deltaSnapshotPeriod": "5m0s",
                "deltaSnapshotMemoryLimit": "100Mi",
            },
            // druid's defaults, written out (etcdconfig.go).
            "sharedConfig": {"autoCompactionMode": "periodic", "autoCompactionRetention": "30m"},
            "storageCapacity": "10Gi",
            // druid runs etcd as user 65532 with that fsGroup; kind's
            // volumes (kube-controller-manager's host-path provisioner,
            // root-owned directories) ignore fsGroup, so the sidecar could
            // not write the data directory. Gardener's cloud disks honour
            // it; the lab runs the pod as root instead (druid's own switch).
            "runAsRoot": true,
            // A seed's members over its zones, as the lab's own StatefulSets.
            "schedulingConstraints": {"topologySpreadConstraints": members::zone_spread(spread)},
        },
    });
    if let Some(prefix) = member_name_prefix(s, seed) {
        object["spec"]["memberNamePrefix"] = json!(prefix);
    }
    object
}

/// The `Etcd` of `seed` as `up` makes it: the source's members running,
/// the destination's none.
pub fn etcd_at_up(lab: &str, t: &Topology, s: &KindSettings, seed: &str) -> Value {
    let replicas = if t.source().name == seed {
        t.etcd.members as usize
    } else {
        0
    };
    etcd(lab, t, s, seed, replicas)
}

/// The port of the backup-restore sidecar's HTTP server: Gardener's
/// (`PortBackupRestore`, pkg/component/etcd/etcd/constants/constants.go).
pub const BACKUP_PORT: u16 = 8080;

/// The bucket (the store's `container`) of `seed`'s backups: a directory
/// under `/etc/gardener/local-backupbuckets` on the seed's kind node,
/// where etcd-druid mounts a `Local` store that names no Secret
/// (`internal/store/store.go`, `LocalProviderDefaultMountPath`) and where
/// Gardener's local setup mounts its buckets. Gardener names a bucket after
/// its seed's BackupBucket; each seed of the lab has its own (its node's
/// file system), so the migration's backups are the source's until the
/// destination's sidecars take their own.
pub fn backup_bucket(seed: &str) -> String {
    format!("backup-{seed}")
}

/// The shoot's prefix in the bucket: Gardener's BackupEntry name (the
/// shoot's technical ID, then its UID: here the lab's name) and the
/// etcd's role (`<prefix>/etcd-main`, pkg/component/etcd/etcd/etcd.go).
pub fn backup_prefix(lab: &str, namespace: &str) -> String {
    format!("{namespace}--{lab}/etcd-main")
}

/// The path, on the seed's kube-apiserver, that asks the backup-restore
/// sidecar of `pod` for an out-of-schedule full snapshot
/// (etcd-backup-restore's `GET /snapshot/full`, pkg/server/httpAPI.go)
/// through the pod proxy (HTTPS: the sidecar serves the Etcd's
/// `backup.tls`).
pub fn full_snapshot_path(namespace: &str, pod: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/pods/https:{pod}:{BACKUP_PORT}/proxy/snapshot/full")
}

/// What etcd-backup-restore answers a full snapshot's trigger with (its
/// `Snapshot`, pkg/types/snapstore.go): the parts the flow reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullSnapshot {
    pub name: String,
    pub last_revision: i64,
}

impl FullSnapshot {
    pub fn parse(body: &str) -> anyhow::Result<FullSnapshot> {
        let v: Value = serde_json::from_str(body)
            .map_err(|e| anyhow::anyhow!("not a snapshot's JSON ({e}): {}", body.trim()))?;
        let kind = v["kind"].as_str().unwrap_or_default();
        anyhow::ensure!(
            kind == "Full",
            "a snapshot of kind `{kind}`, not `Full`: {}",
            body.trim()
        );
        Ok(FullSnapshot {
            name: v["snapName"]
                .as_str()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| anyhow::anyhow!("no `snapName` in {}", body.trim()))?
                .to_string(),
            last_revision: v["lastRevision"]
                .as_i64()
                .ok_or_else(|| anyhow::anyhow!("no `lastRevision` in {}", body.trim()))?,
        })
    }
}

/// The merge patch (RFC 7386: null deletes) that clears `bootstrapWithExistingCluster` on the
/// destination's `Etcd` (GEP-0039: "the three source members are removed
/// by clearing those bootstrap fields"; druid's CRD allows it once the
/// field was set at creation) and asks druid to reconcile, as gardenlet
/// asks on every deploy (spec auto-reconcile is off).
pub fn clear_bootstrap_patch() -> String {
    json!({
        "metadata": {"annotations": {"gardener.cloud/operation": "reconcile"}},
        "spec": {"etcd": {"bootstrapWithExistingCluster": null}},
    })
    .to_string()
}

/// Whether druid has reconciled the `Etcd` as it stands (its JSON): the
/// spec's generation observed and the reconcile annotation gone, the last
/// two steps of druid v0.38.1's reconcile
/// (`internal/controller/etcd/reconcile_complete.go`). Until then the
/// StatefulSet may not carry the change, and its rollout looks finished.
pub fn reconciled(etcd: &Value) -> bool {
    let generation = etcd["metadata"]["generation"].as_i64();
    generation.is_some()
        && etcd["status"]["observedGeneration"].as_i64() == generation
        && etcd["metadata"]["annotations"]
            .get("gardener.cloud/operation")
            .is_none()
}

/// A Secret's data: (key, PEM) pairs.
pub type SecretData = Vec<(&'static str, String)>;

/// The Secrets the `Etcd` names, as (name, data): the CA
/// bundle; the server certificate (clients, druid's sidecar at
/// `etcd-main-local`, kube-apiserver at `etcd-main-client`, the other
/// seed at the seed's client host and each member's host), with Gardener's
/// names (`pkg/component/etcd/etcd/tls.go`, `ClientServiceDNSNames`); the
/// peer certificate (druid's peer Service's names, `peerServiceDNSNames`,
/// and each member's host, which its peer URL names); and the client
/// certificate druid's sidecars present.
pub fn secrets(
    t: &Topology,
    s: &KindSettings,
    seed: &str,
    ca: &crate::pki::Ca,
) -> anyhow::Result<Vec<(String, SecretData)>> {
    let ns = super::namespace(&t.shoot.name);
    let service = |name: &str| {
        vec![
            name.to_string(),
            format!("{name}.{ns}"),
            format!("{name}.{ns}.svc"),
            format!("{name}.{ns}.svc.cluster.local"),
        ]
    };
    let hosts: Vec<String> = members::members(t, s, seed)
        .iter()
        .map(|m: &KindMember| m.host.clone())
        .collect();
    let loopback = [std::net::IpAddr::from(std::net::Ipv6Addr::LOCALHOST)];
    let name = etcd_name(t, s, seed);
    let mut server_names = vec![format!("{name}-local")];
    server_names.extend(service(&client_service(&name)));
    server_names.extend(service(&format!("*.{name}-peer")));
    server_names.push(members::client_host(t, seed));
    server_names.extend(hosts.iter().cloned());
    let server = ca.issue_member("etcd-server", &server_names, &loopback)?;
    let mut peer_names = service(&format!("{name}-peer"));
    peer_names.extend(service(&format!("*.{name}-peer")));
    peer_names.extend(hosts);
    let peer = ca.issue_member("etcd-server", &peer_names, &loopback)?;
    let client = ca.issue_client("etcd-client")?;
    let tls = |c: crate::pki::CertKey| vec![(TLS_CERT_KEY, c.cert_pem), (TLS_KEY_KEY, c.key_pem)];
    Ok(vec![
        (
            CA_BUNDLE_SECRET.into(),
            vec![(CA_BUNDLE_KEY, ca.cert_pem.clone())],
        ),
        (SERVER_SECRET.into(), tls(server)),
        (PEER_SERVER_SECRET.into(), tls(peer)),
        (CLIENT_SECRET.into(), tls(client)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{self, RenderedFile};
    use crate::topology::Topology;
    use crate::{DruidNaming, PeerExposure};
    use std::path::Path;

    /// etcd-druid v0.38.1's `Etcd` CRD (fixtures/upstream/etcd-druid/README.md).
    const CRD: &str =
        include_str!("../../fixtures/upstream/etcd-druid/druid.gardener.cloud_etcds.yaml");

    fn schema() -> Value {
        let crd: Value = serde_saphyr::from_str(CRD).expect("the vendored CRD parses");
        assert_eq!(crd["spec"]["names"]["kind"], "Etcd");
        let v = &crd["spec"]["versions"][0];
        assert_eq!(v["name"], "v1alpha1");
        v["schema"]["openAPIV3Schema"].clone()
    }

    /// The vendored CRD is the file its note names, of the version the
    /// renderer is written for.
    #[test]
    fn the_vendored_crd_is_druid_s_of_the_version_rendered_for() {
        use sha2::Digest as _;
        let note = include_str!("../../fixtures/upstream/etcd-druid/README.md");
        assert!(note.contains(&format!("**{DRUID_VERSION}**")), "{note}");
        let sum = hex::encode(sha2::Sha256::digest(CRD.as_bytes()));
        assert!(
            note.contains(&format!("sha256 `{sum}`")),
            "{sum} not in the note"
        );
    }

    /// druid with its documented naming (the default).
    fn druid() -> KindSettings {
        KindSettings {
            with_etcd_druid: true,
            ..Default::default()
        }
    }

    /// druid with Gardener's naming.
    fn gardener() -> KindSettings {
        KindSettings {
            druid_naming: DruidNaming::Gardener,
            ..druid()
        }
    }

    /// The path of `seed`'s rendered `Etcd`.
    fn etcd_file(t: &Topology, s: &KindSettings, seed: &str) -> String {
        format!("{seed}/manifests/11-etcd-{}.yaml", etcd_name(t, s, seed))
    }

    fn nets() -> Vec<crate::addressing::Net24> {
        (0..4)
            .map(|i| crate::addressing::Net24(std::net::Ipv4Addr::new(10, 213, i, 0)))
            .collect()
    }

    fn parse(f: &RenderedFile) -> Value {
        serde_saphyr::from_str(&f.contents)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", f.path.display(), f.contents))
    }

    fn file<'a>(files: &'a [RenderedFile], path: &str) -> &'a RenderedFile {
        files
            .iter()
            .find(|f| f.path == Path::new(path))
            .unwrap_or_else(|| panic!("{path} not rendered"))
    }

    /// What the API server checks of a new object against a structural
    /// schema: each field declared (an undeclared one would be pruned
    /// silently), of its declared type, within its pattern, enum and
    /// bounds, required fields present; and the CEL rules met on the way.
    struct Check {
        errors: Vec<String>,
        /// (where, rule, the value the rule's `self` is)
        rules: Vec<(String, String, Value)>,
    }

    impl Check {
        fn of(object: &Value) -> Check {
            let mut c = Check {
                errors: vec![],
                rules: vec![],
            };
            c.walk(&schema(), object, "");
            for (at, rule, this) in std::mem::take(&mut c.rules) {
                // Transition rules (on `oldSelf`) are checked on updates only.
                if rule.contains("oldSelf") {
                    continue;
                }
                match CEL.iter().find(|(text, _)| *text == rule) {
                    Some((_, holds)) => {
                        if !holds(&this, object) {
                            c.errors.push(format!("{at}: CEL rule fails: {rule}"));
                        }
                    }
                    None => c.errors.push(format!(
                        "{at}: a CEL rule this test does not restate (add it to CEL): {rule}"
                    )),
                }
            }
            c
        }

        fn walk(&mut self, schema: &Value, v: &Value, at: &str) {
            for r in schema["x-kubernetes-validations"]
                .as_array()
                .into_iter()
                .flatten()
            {
                self.rules.push((
                    at.to_string(),
                    r["rule"].as_str().expect("a rule").to_string(),
                    v.clone(),
                ));
            }
            if schema["x-kubernetes-int-or-string"] == true {
                match v {
                    Value::Number(n) if n.is_i64() || n.is_u64() => {}
                    Value::String(s) => self.pattern(schema, s, at),
                    _ => self
                        .errors
                        .push(format!("{at}: {v} is neither integer nor string")),
                }
                return;
            }
            match schema["type"].as_str() {
                Some("object") => {
                    let Some(obj) = v.as_object() else {
                        return self.errors.push(format!("{at}: {v} is not an object"));
                    };
                    let props = schema["properties"].as_object();
                    let extra = schema.get("additionalProperties").filter(|a| a.is_object());
                    if props.is_none() && extra.is_none() {
                        // `metadata`: the API server's own schema.
                        return;
                    }
                    for (k, x) in obj {
                        match props.and_then(|p| p.get(k)).or(extra) {
                            Some(sub) => self.walk(sub, x, &format!("{at}.{k}")),
                            None => self
                                .errors
                                .push(format!("{at}.{k}: no such field in druid's CRD")),
                        }
                    }
                    for r in schema["required"].as_array().into_iter().flatten() {
                        let r = r.as_str().unwrap();
                        if !obj.contains_key(r) {
                            self.errors.push(format!("{at}.{r}: required, missing"));
                        }
                    }
                }
                Some("array") => {
                    let Some(items) = v.as_array() else {
                        return self.errors.push(format!("{at}: {v} is not an array"));
                    };
                    let n = items.len() as u64;
                    if schema["minItems"].as_u64().is_some_and(|m| n < m)
                        || schema["maxItems"].as_u64().is_some_and(|m| n > m)
                    {
                        self.errors.push(format!("{at}: {n} items, out of bounds"));
                    }
                    if schema["x-kubernetes-list-type"] == "set" {
                        let mut seen = std::collections::BTreeSet::new();
                        if !items.iter().all(|i| seen.insert(i.to_string())) {
                            self.errors.push(format!("{at}: a set with duplicates"));
                        }
                    }
                    for (i, x) in items.iter().enumerate() {
                        self.walk(&schema["items"], x, &format!("{at}[{i}]"));
                    }
                }
                Some("string") => {
                    let Some(s) = v.as_str() else {
                        return self.errors.push(format!("{at}: {v} is not a string"));
                    };
                    if let Some(allowed) = schema["enum"].as_array() {
                        if !allowed.contains(v) {
                            self.errors
                                .push(format!("{at}: {s} is not one of {allowed:?}"));
                        }
                    }
                    let n = s.chars().count() as u64;
                    if schema["minLength"].as_u64().is_some_and(|m| n < m)
                        || schema["maxLength"].as_u64().is_some_and(|m| n > m)
                    {
                        self.errors.push(format!("{at}: length {n}, out of bounds"));
                    }
                    self.pattern(schema, s, at);
                }
                Some("integer") => match v.as_i64() {
                    Some(i) if schema["format"] == "int32" && i32::try_from(i).is_err() => {
                        self.errors.push(format!("{at}: {i} is not an int32"))
                    }
                    Some(_) => {}
                    None => self.errors.push(format!("{at}: {v} is not an integer")),
                },
                Some("boolean") => {
                    if !v.is_boolean() {
                        self.errors.push(format!("{at}: {v} is not a boolean"));
                    }
                }
                other => self.errors.push(format!(
                    "{at}: a schema type this test does not know: {other:?}"
                )),
            }
        }

        fn pattern(&mut self, schema: &Value, s: &str, at: &str) {
            if let Some(p) = schema["pattern"].as_str() {
                let re = regex::Regex::new(p).unwrap_or_else(|e| panic!("{at}: pattern {p}: {e}"));
                if !re.is_match(s) {
                    self.errors.push(format!("{at}: {s:?} does not match {p}"));
                }
            }
        }
    }

    type Rule = fn(&Value, &Value) -> bool;

    /// A Go duration's seconds (`12h0m0s`, `5m`, `1.5s`, `300ms`), as CEL's
    /// `duration()` reads it; None where it is not one.
    fn go_duration_secs(s: &str) -> Option<f64> {
        let mut rest = s;
        let mut total = 0.0;
        if rest.is_empty() {
            return None;
        }
        while !rest.is_empty() {
            let n = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .filter(|&n| n > 0)?;
            let value: f64 = rest[..n].parse().ok()?;
            rest = &rest[n..];
            let (unit, len) = [
                ("ms", 2, 0.001),
                ("h", 1, 3600.0),
                ("m", 1, 60.0),
                ("s", 1, 1.0),
            ]
            .iter()
            .find(|(u, _, _)| rest.starts_with(u))
            .map(|&(_, len, f)| (f, len))?;
            total += value * unit;
            rest = &rest[len..];
        }
        Some(total)
    }

    #[test]
    fn go_durations_read_as_cel_reads_them() {
        assert_eq!(go_duration_secs("12h0m0s"), Some(43_200.0));
        assert_eq!(go_duration_secs("5m0s"), Some(300.0));
        assert_eq!(go_duration_secs("300ms"), Some(0.3));
        assert_eq!(go_duration_secs("1.5s"), Some(1.5));
        assert_eq!(go_duration_secs(""), None);
        assert_eq!(go_duration_secs("5"), None);
        assert_eq!(go_duration_secs("5x"), None);
    }

    /// `isURL` as CEL's URL library has it, for what the lab renders: a
    /// scheme, `://`, and a host.
    fn is_url(u: &str) -> bool {
        u.split_once("://").is_some_and(|(scheme, rest)| {
            !scheme.is_empty()
                && !rest.is_empty()
                && !rest.starts_with(':')
                && !rest.starts_with('/')
                && !rest.contains(char::is_whitespace)
        })
    }

    fn strings(v: &Value) -> Vec<&str> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|x| x.as_str().unwrap())
            .collect()
    }

    /// The prefix druid's CRD requires of its own members' names and
    /// forbids for bootstrap members': `<memberNamePrefix>-<name>-`, or
    /// `<name>-` without a prefix.
    fn own_prefix(root: &Value) -> String {
        let name = root["metadata"]["name"].as_str().unwrap();
        match root["spec"]["memberNamePrefix"].as_str() {
            Some(p) => format!("{p}-{name}-"),
            None => format!("{name}-"),
        }
    }

    /// Every CEL rule of druid's CRD the API server checks at creation,
    /// each verbatim (a rule not found here fails the test) and restated in
    /// Rust for the values the lab renders.
    const CEL: &[(&str, Rule)] = &[
        (
            "!has(self.spec.etcd.additionalAdvertisePeerURLs) || self.spec.etcd.additionalAdvertisePeerURLs.all(m, has(self.spec.memberNamePrefix) ? m.memberName.startsWith(self.spec.memberNamePrefix + '-' + self.metadata.name + '-') : m.memberName.startsWith(self.metadata.name + '-'))",
            |this, _| {
                let want = own_prefix(this);
                this["spec"]["etcd"]["additionalAdvertisePeerURLs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .all(|m| m["memberName"].as_str().unwrap().starts_with(&want))
            },
        ),
        (
            "!has(self.spec.etcd.additionalAdvertisePeerURLs) || self.spec.etcd.additionalAdvertisePeerURLs.all(m, int(m.memberName.substring(m.memberName.lastIndexOf('-')+1)) < self.spec.replicas)",
            |this, _| {
                let replicas = this["spec"]["replicas"].as_i64().unwrap();
                this["spec"]["etcd"]["additionalAdvertisePeerURLs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .all(|m| {
                        let name = m["memberName"].as_str().unwrap();
                        let index = &name[name.rfind('-').map_or(0, |i| i + 1)..];
                        index.parse::<i64>().is_ok_and(|i| i < replicas)
                    })
            },
        ),
        (
            "!has(self.spec.etcd.bootstrapWithExistingCluster) || self.spec.etcd.bootstrapWithExistingCluster.members.all(m1, self.spec.etcd.bootstrapWithExistingCluster.members.filter(m2, m1.name == m2.name).size() == 1)",
            |this, _| {
                let names: Vec<&Value> = this["spec"]["etcd"]["bootstrapWithExistingCluster"]
                    ["members"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|m| &m["name"])
                    .collect();
                names
                    .iter()
                    .all(|a| names.iter().filter(|b| a == *b).count() == 1)
            },
        ),
        (
            "!has(self.spec.etcd.bootstrapWithExistingCluster) || self.spec.etcd.bootstrapWithExistingCluster.members.all(m, has(self.spec.memberNamePrefix) ? !m.name.startsWith(self.spec.memberNamePrefix + '-' + self.metadata.name + '-') : !m.name.startsWith(self.metadata.name + '-'))",
            |this, _| {
                let own = own_prefix(this);
                this["spec"]["etcd"]["bootstrapWithExistingCluster"]["members"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .all(|m| !m["name"].as_str().unwrap().starts_with(&own))
            },
        ),
        (
            "has(self.externallyManagedMemberAddresses) ? self.replicas == self.externallyManagedMemberAddresses.size() : true",
            |this, _| {
                this.get("externallyManagedMemberAddresses").is_none_or(|a| {
                    a.as_array().map(Vec::len) == this["replicas"].as_u64().map(|r| r as usize)
                })
            },
        ),
        (
            "!(has(self.deltaSnapshotPeriod) && has(self.garbageCollectionPeriod)) || duration(self.deltaSnapshotPeriod).getSeconds() < duration(self.garbageCollectionPeriod).getSeconds()",
            |this, _| match (
                this.get("deltaSnapshotPeriod"),
                this.get("garbageCollectionPeriod"),
            ) {
                (Some(d), Some(g)) => match (
                    d.as_str().and_then(go_duration_secs),
                    g.as_str().and_then(go_duration_secs),
                ) {
                    (Some(d), Some(g)) => d.trunc() < g.trunc(),
                    _ => false,
                },
                _ => true,
            },
        ),
        (
            "!has(self.additionalAdvertisePeerURLs) || !has(self.peerUrlTls) || self.additionalAdvertisePeerURLs.all(m, m.urls.all(u, u.startsWith('https://')))",
            |this, _| {
                this.get("peerUrlTls").is_none()
                    || this["additionalAdvertisePeerURLs"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .all(|m| strings(&m["urls"]).iter().all(|u| u.starts_with("https://")))
            },
        ),
        (
            "!has(self.additionalAdvertisePeerURLs) || has(self.peerUrlTls) || self.additionalAdvertisePeerURLs.all(m, m.urls.all(u, u.startsWith('http://')))",
            |this, _| {
                this.get("peerUrlTls").is_some()
                    || this["additionalAdvertisePeerURLs"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .all(|m| strings(&m["urls"]).iter().all(|u| u.starts_with("http://")))
            },
        ),
        (
            "!has(self.bootstrapWithExistingCluster) || !has(self.peerUrlTls) || self.bootstrapWithExistingCluster.members.all(m, m.peerUrls.all(u, u.startsWith('https://')))",
            |this, _| {
                this.get("peerUrlTls").is_none()
                    || this["bootstrapWithExistingCluster"]["members"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .all(|m| strings(&m["peerUrls"]).iter().all(|u| u.starts_with("https://")))
            },
        ),
        (
            "!has(self.bootstrapWithExistingCluster) || has(self.peerUrlTls) || self.bootstrapWithExistingCluster.members.all(m, m.peerUrls.all(u, u.startsWith('http://')))",
            |this, _| {
                this.get("peerUrlTls").is_some()
                    || this["bootstrapWithExistingCluster"]["members"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .all(|m| strings(&m["peerUrls"]).iter().all(|u| u.starts_with("http://")))
            },
        ),
        (
            "!has(self.bootstrapWithExistingCluster) || !has(self.clientUrlTls) || self.bootstrapWithExistingCluster.clientEndpoints.all(u, u.startsWith('https://'))",
            |this, _| {
                this.get("clientUrlTls").is_none()
                    || strings(&this["bootstrapWithExistingCluster"]["clientEndpoints"])
                        .iter()
                        .all(|u| u.starts_with("https://"))
            },
        ),
        (
            "!has(self.bootstrapWithExistingCluster) || has(self.clientUrlTls) || self.bootstrapWithExistingCluster.clientEndpoints.all(u, u.startsWith('http://'))",
            |this, _| {
                this.get("clientUrlTls").is_some()
                    || strings(&this["bootstrapWithExistingCluster"]["clientEndpoints"])
                        .iter()
                        .all(|u| u.starts_with("http://"))
            },
        ),
        (
            "(self.startsWith('http://') || self.startsWith('https://')) && isURL(self)",
            |this, _| {
                let u = this.as_str().unwrap();
                (u.starts_with("http://") || u.starts_with("https://")) && is_url(u)
            },
        ),
    ];

    fn assert_valid(object: &Value, what: &str) {
        let c = Check::of(object);
        assert!(
            c.errors.is_empty(),
            "{what} does not validate against druid's CRD:\n{}\n{}",
            c.errors.join("\n"),
            render::yaml(object)
        );
    }

    fn settings() -> Vec<KindSettings> {
        let ha = KindSettings {
            nodes: 3,
            exposure: PeerExposure::Address,
            ..druid()
        };
        vec![
            druid(),
            gardener(),
            KindSettings {
                druid_naming: DruidNaming::Gardener,
                ..ha.clone()
            },
            ha,
        ]
    }

    /// Every `Etcd` the kind form renders, both seeds, both exposures and
    /// both namings, validates against druid's CRD; so does the destination's at every
    /// replica count the migration's scale-up may set.
    #[test]
    fn every_rendered_etcd_validates_against_druid_s_crd() {
        let t = Topology::default();
        for s in settings() {
            let files = render::render("cpmlab", &t, &s, &nets());
            let etcds: Vec<&RenderedFile> = files
                .iter()
                .filter(|f| f.path.to_string_lossy().contains("/11-etcd-etcd-main"))
                .collect();
            assert_eq!(etcds.len(), 2, "{s:?}");
            for seed in ["seed-a", "seed-b"] {
                file(&files, &etcd_file(&t, &s, seed));
            }
            for f in etcds {
                assert_valid(&parse(f), &f.path.display().to_string());
            }
            for n in 0..=t.etcd.members as usize {
                assert_valid(
                    &etcd("cpmlab", &t, &s, "seed-b", n),
                    &format!("seed-b at {n} replicas"),
                );
            }
        }
    }

    /// The checker refuses what the review found in the earlier render
    /// (`memberNamePrefix` under `spec.etcd`, the `additionalAdvertisePeerUrls`
    /// spelling, a `joinMode`, no `clientEndpoints`, member names without
    /// the Etcd's name), and the URLs' index rule at zero replicas: the
    /// test above can fail.
    #[test]
    fn druid_s_crd_refuses_what_the_review_found() {
        let t = Topology::default();
        let mut old = etcd_at_up("cpmlab", &t, &gardener(), "seed-b");
        let spec = old["spec"].as_object_mut().unwrap();
        let prefix = spec.remove("memberNamePrefix").unwrap();
        spec.get_mut("etcd").unwrap()["memberNamePrefix"] = prefix;
        let etcd = spec.get_mut("etcd").unwrap().as_object_mut().unwrap();
        etcd.insert(
            "additionalAdvertisePeerUrls".into(),
            json!([{"memberName": "seed-b-etcd-0", "urls": ["https://x:9100"]}]),
        );
        let boot = etcd["bootstrapWithExistingCluster"]
            .as_object_mut()
            .unwrap();
        boot.insert("joinMode".into(), json!("learner"));
        boot.remove("clientEndpoints");
        let errors = Check::of(&old).errors.join("\n");
        for want in [
            ".spec.etcd.memberNamePrefix: no such field",
            ".spec.etcd.additionalAdvertisePeerUrls: no such field",
            ".spec.etcd.bootstrapWithExistingCluster.joinMode: no such field",
            ".spec.etcd.bootstrapWithExistingCluster.clientEndpoints: required, missing",
        ] {
            assert!(errors.contains(want), "{want} not in:\n{errors}");
        }
        // The right spelling with the lab's own member names, and URLs at
        // zero replicas: both of the top-level rules fail.
        let mut named = etcd_at_up("cpmlab", &t, &gardener(), "seed-b");
        named["spec"]["etcd"]["additionalAdvertisePeerURLs"] =
            json!([{"memberName": "seed-b-etcd-0", "urls": ["https://x:9100"]}]);
        let errors = Check::of(&named).errors;
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(errors.iter().all(|e| e.contains("CEL rule fails")));
        // Bootstrap members named like the target's own are refused.
        let mut clash = etcd_at_up("cpmlab", &t, &gardener(), "seed-b");
        clash["spec"]["etcd"]["bootstrapWithExistingCluster"]["members"][0]["name"] =
            json!("seed-b-etcd-main-0");
        assert_eq!(Check::of(&clash).errors.len(), 1);
        // Delta snapshots no more often than the garbage collection runs.
        let mut slow = etcd_at_up("cpmlab", &t, &druid(), "seed-b");
        slow["spec"]["backup"]["deltaSnapshotPeriod"] = json!("12h0m0s");
        let errors = Check::of(&slow).errors;
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(errors[0].contains("deltaSnapshotPeriod"), "{errors:#?}");
    }

    /// Under Gardener's naming, member names are druid's
    /// `<memberNamePrefix>-<pod name>` with the seed as prefix; each running
    /// member advertises its ingress URL; the destination bootstraps from
    /// every source member with the URLs the source advertises and the
    /// source's client endpoint.
    #[test]
    fn gardener_s_naming_prefixes_members_by_seed_and_bootstraps_the_destination() {
        let t = Topology::default();
        let files = render::render("cpmlab", &t, &gardener(), &nets());
        assert!(!files
            .iter()
            .any(|f| f.path.to_string_lossy().contains("statefulset")));
        let src = parse(file(&files, "seed-a/manifests/11-etcd-etcd-main.yaml"));
        assert_eq!(src["spec"]["memberNamePrefix"], "seed-a");
        assert_eq!(src["spec"]["replicas"], 3);
        assert_eq!(
            src["spec"]["etcd"]["additionalAdvertisePeerURLs"][2],
            json!({"memberName": "seed-a-etcd-main-2", "urls": ["https://seed-a-etcd-2.local.cpmlab.test:9102"]})
        );
        assert!(src["spec"]["etcd"]
            .get("bootstrapWithExistingCluster")
            .is_none());
        let dst = parse(file(&files, "seed-b/manifests/11-etcd-etcd-main.yaml"));
        assert_eq!(dst["spec"]["memberNamePrefix"], "seed-b");
        assert_eq!(dst["spec"]["replicas"], 0);
        assert!(dst["spec"]["etcd"]
            .get("additionalAdvertisePeerURLs")
            .is_none());
        assert_eq!(
            dst["spec"]["etcd"]["peerUrlTls"]["skipClientSANVerification"],
            true
        );
        let boot = &dst["spec"]["etcd"]["bootstrapWithExistingCluster"];
        assert_eq!(
            boot["members"][1],
            json!({"name": "seed-a-etcd-main-1", "peerUrls": [
                "https://etcd-main-1.etcd-main-peer.shoot--local--local.svc:2380",
                "https://seed-a-etcd-1.local.cpmlab.test:9101",
            ]})
        );
        // Exactly the URLs the source advertises for that member: druid's
        // in-cluster one (etcdconfig.go) and the one the source's Etcd adds.
        assert_eq!(
            boot["members"][1]["peerUrls"][1],
            src["spec"]["etcd"]["additionalAdvertisePeerURLs"][1]["urls"][0]
        );
        assert_eq!(
            boot["clientEndpoints"],
            json!([
                "https://seed-a-etcd-0.local.cpmlab.test:2379",
                "https://seed-a-etcd-1.local.cpmlab.test:2379",
                "https://seed-a-etcd-2.local.cpmlab.test:2379",
            ])
        );
        // The migration's scale-up: the destination's members named by
        // its own prefix, their ingress URLs added.
        let up = etcd("cpmlab", &t, &gardener(), "seed-b", 3);
        assert_eq!(
            up["spec"]["etcd"]["additionalAdvertisePeerURLs"][0]["memberName"],
            "seed-b-etcd-main-0"
        );
        assert_eq!(up["spec"]["etcd"]["bootstrapWithExistingCluster"], *boot);
    }

    /// Under druid's documented naming, the source's `Etcd` is Gardener's
    /// `etcd-main` without a prefix (its members `etcd-main-<i>`), the
    /// destination's `etcd-main-seed-b` (members `etcd-main-seed-b-<i>`):
    /// names that never clash, each `additionalAdvertisePeerURLs` entry
    /// named by the pod, as druid's ConfigMap looks it up; kube-apiserver,
    /// the ingress's client route, the Secrets and the NetworkPolicy follow
    /// each seed's `Etcd`.
    #[test]
    fn druid_s_documented_naming_gives_each_seed_its_own_etcd() {
        let t = Topology::default();
        let s = druid();
        let files = render::render("cpmlab", &t, &s, &nets());
        let src = parse(file(&files, "seed-a/manifests/11-etcd-etcd-main.yaml"));
        assert!(src["spec"].get("memberNamePrefix").is_none(), "{src:#}");
        assert_eq!(
            src["spec"]["etcd"]["additionalAdvertisePeerURLs"][1],
            json!({"memberName": "etcd-main-1", "urls": ["https://seed-a-etcd-1.local.cpmlab.test:9101"]})
        );
        let dst = parse(file(
            &files,
            "seed-b/manifests/11-etcd-etcd-main-seed-b.yaml",
        ));
        assert_eq!(dst["metadata"]["name"], "etcd-main-seed-b");
        assert!(dst["spec"].get("memberNamePrefix").is_none());
        assert_eq!(dst["spec"]["replicas"], 0);
        let boot = &dst["spec"]["etcd"]["bootstrapWithExistingCluster"];
        assert_eq!(
            boot["members"][2],
            json!({"name": "etcd-main-2", "peerUrls": [
                "https://etcd-main-2.etcd-main-peer.shoot--local--local.svc:2380",
                "https://seed-a-etcd-2.local.cpmlab.test:9102",
            ]})
        );
        // Every client endpoint names a host the lab's DNS serves: a
        // member's (the lab state's members are what `up` publishes).
        let state = crate::lab_state::kind_state("cpmlab", &t, &s, &nets(), "img", "k".into());
        for u in boot["clientEndpoints"].as_array().unwrap() {
            let host = u.as_str().unwrap().trim_start_matches("https://");
            let host = host.split(':').next().unwrap();
            assert!(
                state.members.iter().any(|m| m.host == host),
                "{host} is no name the lab's DNS serves"
            );
        }
        let up = etcd("cpmlab", &t, &s, "seed-b", 2);
        assert_eq!(
            up["spec"]["etcd"]["additionalAdvertisePeerURLs"],
            json!([
                {"memberName": "etcd-main-seed-b-0", "urls": ["https://seed-b-etcd-0.local.cpmlab.test:9100"]},
                {"memberName": "etcd-main-seed-b-1", "urls": ["https://seed-b-etcd-1.local.cpmlab.test:9101"]},
            ])
        );
        assert_eq!(member_name(&t, &s, "seed-b", 1), "etcd-main-seed-b-1");
        assert_eq!(member_name(&t, &s, "seed-a", 1), "etcd-main-1");
        // kube-apiserver and the ingress's client route follow each seed's
        // `Etcd`: the_lab_s_services_select_druid_s_pods, for both namings.
        let np = parse(file(
            &files,
            "seed-b/manifests/12-networkpolicy-allow-ingressgateway-to-etcd.yaml",
        ));
        assert_eq!(
            np["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/part-of"],
            "etcd-main-seed-b"
        );
    }

    fn druid_secrets(seed: &str) -> Vec<RenderedFile> {
        let keys = crate::render::RenderKeys {
            ca: crate::pki::Ca::generate("cpmlab").unwrap(),
            token: "tok".into(),
            health_token: "health".into(),
            sa: ("k".into(), "p".into()),
            front_proxy: crate::pki::Ca::generate("cpmlab front-proxy").unwrap(),
        };
        render::secrets("cpmlab", &Topology::default(), &druid(), seed, &keys).unwrap()
    }

    fn secret_data(
        files: &[RenderedFile],
        seed: &str,
        name: &str,
    ) -> serde_json::Map<String, Value> {
        let s = parse(file(files, &format!("{seed}/secrets/{name}.yaml")));
        assert_eq!(s["metadata"]["name"], name);
        assert_eq!(s["metadata"]["namespace"], "shoot--local--local");
        s["data"].as_object().unwrap().clone()
    }

    fn pem(data: &serde_json::Map<String, Value>, key: &str) -> Vec<u8> {
        use base64::Engine as _;
        let b = data
            .get(key)
            .unwrap_or_else(|| panic!("no {key} in {:?}", data.keys()));
        base64::engine::general_purpose::STANDARD
            .decode(b.as_str().unwrap())
            .unwrap()
    }

    fn der(pem: &[u8]) -> Vec<u8> {
        x509_parser::pem::parse_x509_pem(pem).unwrap().1.contents
    }

    fn dns_names(cert: &x509_parser::certificate::X509Certificate) -> Vec<String> {
        cert.subject_alternative_name()
            .unwrap()
            .map(|s| {
                s.value
                    .general_names
                    .iter()
                    .filter_map(|n| match n {
                        x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Each Secret the `Etcd` names is rendered with the keys druid reads:
    /// the CA under the data key the reference names, certificates and
    /// keys as `tls.crt` and `tls.key`; the certificates chain to that CA
    /// and name what druid's containers, kube-apiserver and the other seed
    /// dial them by.
    #[test]
    fn druid_s_secrets_carry_the_keys_it_reads() {
        let t = Topology::default();
        for seed in ["seed-a", "seed-b"] {
            let files = druid_secrets(seed);
            assert!(
                !files
                    .iter()
                    .any(|f| f.path.to_string_lossy().contains(&format!("{seed}-etcd-"))),
                "the lab's per-member Secrets are not rendered with druid"
            );
            let e = etcd_at_up("cpmlab", &t, &druid(), seed);
            let tls = &e["spec"]["etcd"];
            let mut refs = vec![];
            for (side, fields) in [
                (
                    "clientUrlTls",
                    &["tlsCASecretRef", "serverTLSSecretRef", "clientTLSSecretRef"][..],
                ),
                ("peerUrlTls", &["tlsCASecretRef", "serverTLSSecretRef"][..]),
            ] {
                for field in fields {
                    refs.push((*field, &tls[side][field]));
                }
            }
            let mut ca = None;
            for (field, r) in &refs {
                let data = secret_data(&files, seed, r["name"].as_str().unwrap());
                if *field == "tlsCASecretRef" {
                    // druid's default data key is ca.crt (etcdconfig.go).
                    let key = r["dataKey"].as_str().unwrap_or("ca.crt");
                    ca = Some(pem(&data, key));
                } else {
                    pem(&data, "tls.crt");
                    pem(&data, "tls.key");
                }
            }
            let ca_der = der(&ca.unwrap());
            let (_, ca_x) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
            let ns = "shoot--local--local";
            // The seed's own `Etcd`: `etcd-main-seed-b` in the destination.
            let etcd = etcd_name(&t, &druid(), seed);
            assert_eq!(etcd != "etcd-main", seed == "seed-b");
            for (name, must) in [
                (
                    SERVER_SECRET,
                    vec![
                        format!("{etcd}-local"),
                        format!("{etcd}-client"),
                        format!("{etcd}-client.{ns}.svc"),
                        format!("*.{etcd}-peer.{ns}.svc"),
                        format!("etcd-main-client.{seed}.local.cpmlab.test"),
                        format!("{seed}-etcd-1.local.cpmlab.test"),
                    ],
                ),
                (
                    PEER_SERVER_SECRET,
                    vec![
                        format!("*.{etcd}-peer.{ns}.svc"),
                        format!("{seed}-etcd-2.local.cpmlab.test"),
                    ],
                ),
                (CLIENT_SECRET, vec![]),
            ] {
                let data = secret_data(&files, seed, name);
                let leaf = der(&pem(&data, "tls.crt"));
                let (_, x) = x509_parser::parse_x509_certificate(&leaf).unwrap();
                x.verify_signature(Some(ca_x.public_key()))
                    .unwrap_or_else(|e| panic!("{name}: not signed by the bundle's CA: {e}"));
                let names = dns_names(&x);
                for n in must {
                    assert!(names.contains(&n), "{name}: {n} not in {names:?}");
                }
                let eku = x.extended_key_usage().unwrap().unwrap().value;
                assert!(eku.client_auth, "{name}");
                assert_eq!(eku.server_auth, name != CLIENT_SECRET, "{name}");
            }
        }
    }

    /// druid runs the members as pods `etcd-main-<i>` of its StatefulSet
    /// `etcd-main` and makes `etcd-main-client` itself: each member's
    /// Service selects its ordinal's pod by druid's labels, the lab renders
    /// no Service of druid's names, and the NetworkPolicy and the zone
    /// spread select druid's pods.
    #[test]
    fn the_lab_s_services_select_druid_s_pods() {
        let t = Topology::default();
        for s in [druid(), gardener()] {
            the_lab_s_services_select_druid_s_pods_named(&t, &s);
        }
    }

    fn the_lab_s_services_select_druid_s_pods_named(t: &Topology, s: &KindSettings) {
        let files = render::render("cpmlab", t, s, &nets());
        for seed in ["seed-a", "seed-b"] {
            let e = parse(file(&files, &etcd_file(t, s, seed)));
            let name = e["metadata"]["name"].as_str().unwrap().to_string();
            // A druid pod's labels, as druid's sources give them: spec.labels,
            // GetDefaultLabels (api/core/v1alpha1/helper.go), the StatefulSet's
            // (internal/component/statefulset/builder.go), and the pod name
            // the StatefulSet controller adds.
            let pod = |i: usize| {
                let mut l = e["spec"]["labels"].as_object().unwrap().clone();
                for (k, v) in [
                    ("app.kubernetes.io/managed-by", "etcd-druid".to_string()),
                    (
                        "app.kubernetes.io/part-of",
                        e["metadata"]["name"].as_str().unwrap().into(),
                    ),
                    ("app.kubernetes.io/component", "etcd-statefulset".into()),
                    (
                        "app.kubernetes.io/name",
                        e["metadata"]["name"].as_str().unwrap().into(),
                    ),
                    (
                        "statefulset.kubernetes.io/pod-name",
                        format!("{}-{i}", e["metadata"]["name"].as_str().unwrap()),
                    ),
                ] {
                    l.insert(k.into(), json!(v));
                }
                l
            };
            let selects = |selector: &Value, i: usize| {
                let p = pod(i);
                selector
                    .as_object()
                    .unwrap()
                    .iter()
                    .all(|(k, v)| p.get(k) == Some(v))
            };
            for i in 0..3 {
                let svc = parse(file(
                    &files,
                    &format!("{seed}/manifests/10-service-{seed}-etcd-{i}.yaml"),
                ));
                let sel = &svc["spec"]["selector"];
                let picked: Vec<usize> = (0..3).filter(|j| selects(sel, *j)).collect();
                assert_eq!(picked, [i], "{seed} member {i}: {sel}");
            }
            let services: Vec<Value> = files
                .iter()
                .filter(|f| f.path.starts_with(seed) && f.path.extension() == Some("yaml".as_ref()))
                .map(parse)
                .filter(|o| o["kind"] == "Service")
                .map(|o| o["metadata"]["name"].clone())
                .collect();
            assert_eq!(services.len(), 6, "{services:?}");
            for svc in [client_service(&name), format!("{name}-peer")] {
                assert!(!services.contains(&json!(svc)), "{seed}: druid makes {svc}");
            }
            let np = parse(file(
                &files,
                &format!("{seed}/manifests/12-networkpolicy-allow-ingressgateway-to-etcd.yaml"),
            ));
            assert!(selects(&np["spec"]["podSelector"]["matchLabels"], 0));
            let spread = &e["spec"]["schedulingConstraints"]["topologySpreadConstraints"][0];
            assert_eq!(spread["topologyKey"], "topology.kubernetes.io/zone");
            assert!(selects(&spread["labelSelector"]["matchLabels"], 2));
            // Pods the lab's workloads listing finds.
            assert!(selects(&json!({crate::labels::LABEL_LAB: "cpmlab"}), 0));
            // The ingress's client route and kube-apiserver reach druid's
            // client Service.
            let x = super::super::manifests::exposure(t, s, seed);
            let client = x
                .tls
                .iter()
                .find(|r| r.kind == "client" && r.owner == "etcd-main-client")
                .unwrap();
            assert_eq!(
                client.destination.host,
                format!("{name}-client.shoot--local--local.svc.cluster.local")
            );
            assert!(super::super::manifests::apiserver_command(t, s, seed)
                .contains(&format!("--etcd-servers=https://{name}-client:2379")));
        }
    }

    #[test]
    fn snapshots_of_druid_s_resources() {
        // Gardener's naming under the snapshots' first names.
        let files = render::render("cpmlab", &Topology::default(), &gardener(), &nets());
        for path in [
            "seed-a/manifests/11-etcd-etcd-main.yaml",
            "seed-b/manifests/11-etcd-etcd-main.yaml",
            "seed-b/manifests/10-service-seed-b-etcd-0.yaml",
        ] {
            let name = path
                .replace('/', "__")
                .trim_end_matches(".yaml")
                .to_string();
            insta::assert_snapshot!(name, file(&files, path).contents);
        }
        let files = render::render("cpmlab", &Topology::default(), &druid(), &nets());
        for path in [
            "seed-a/manifests/11-etcd-etcd-main.yaml",
            "seed-b/manifests/11-etcd-etcd-main-seed-b.yaml",
            "seed-b/manifests/10-service-seed-b-etcd-0.yaml",
        ] {
            let name = format!(
                "distinct__{}",
                path.replace('/', "__").trim_end_matches(".yaml")
            );
            insta::assert_snapshot!(name, file(&files, path).contents);
        }
    }

    /// Each seed's `Etcd` backs up to its own bucket on the `Local`
    /// provider, under the shoot's prefix, with Gardener's settings.
    #[test]
    fn each_seed_s_etcd_backs_up_to_its_own_local_bucket() {
        let t = Topology::default();
        for seed in ["seed-a", "seed-b"] {
            let e = etcd("cpmlab", &t, &druid(), seed, 3);
            let b = &e["spec"]["backup"];
            assert_eq!(b["port"], 8080);
            assert_eq!(b["store"]["provider"], "Local");
            assert_eq!(b["store"]["container"], format!("backup-{seed}"));
            assert_eq!(
                b["store"]["prefix"],
                format!("{}--cpmlab/etcd-main", crate::namespace(&t.shoot.name))
            );
            assert_eq!(b["deltaSnapshotPeriod"], "5m0s");
            assert_eq!(b["garbageCollectionPolicy"], "Exponential");
            assert!(
                b["store"].get("secretRef").is_none(),
                "druid's default host path"
            );
        }
    }

    #[test]
    fn a_full_snapshot_s_answer_is_read_and_anything_else_refused() {
        // etcd-backup-restore's `Snapshot` as its handler marshals it.
        let body = r#"{"createdOn":"2026-11-28T07:00:00Z","immutabilityExpriyTime":"0001-01-01T00:00:00Z","versionID":null,"kind":"Full","snapDir":"","snapName":"Full-00000000-00001234-1764313200.gz","prefix":"shoot--local--x--cpmlab/etcd-main/v2","compressionSuffix":".gz","startRevision":0,"lastRevision":1234,"isChunk":false,"isFinal":false}"#;
        let s = FullSnapshot::parse(body).unwrap();
        assert_eq!(s.last_revision, 1234);
        assert_eq!(s.name, "Full-00000000-00001234-1764313200.gz");
        let delta = body.replace(r#""kind":"Full""#, r#""kind":"Incr""#);
        assert!(FullSnapshot::parse(&delta)
            .unwrap_err()
            .to_string()
            .contains("Incr"));
        assert!(FullSnapshot::parse("405 Method Not Allowed").is_err());
        assert!(FullSnapshot::parse(&body.replace("Full-0", "")).is_ok());
        assert!(FullSnapshot::parse(&body.replace(
            r#""snapName":"Full-00000000-00001234-1764313200.gz""#,
            r#""snapName":"""#
        ))
        .is_err());
    }

    #[test]
    fn the_full_snapshot_is_asked_of_the_sidecar_s_https_port() {
        assert_eq!(
            full_snapshot_path("shoot--local--x", "etcd-main-1"),
            "/api/v1/namespaces/shoot--local--x/pods/https:etcd-main-1:8080/proxy/snapshot/full"
        );
    }

    /// The patch deletes the field (a merge patch's null) and asks druid
    /// to reconcile; the object it leaves is the destination's `Etcd`
    /// without the bootstrap, which druid's CRD accepts as an update.
    #[test]
    fn clearing_the_bootstrap_deletes_the_field_and_asks_for_a_reconcile() {
        let patch: Value = serde_json::from_str(&clear_bootstrap_patch()).unwrap();
        assert!(patch["spec"]["etcd"]["bootstrapWithExistingCluster"].is_null());
        assert!(patch["spec"]["etcd"]
            .as_object()
            .unwrap()
            .contains_key("bootstrapWithExistingCluster"));
        assert_eq!(
            patch["metadata"]["annotations"]["gardener.cloud/operation"],
            "reconcile"
        );
        let t = Topology::default();
        let before = etcd("cpmlab", &t, &druid(), "seed-b", 3);
        assert!(before["spec"]["etcd"]
            .get("bootstrapWithExistingCluster")
            .is_some());
        let mut after = before.clone();
        merge(&mut after, &patch);
        assert!(after["spec"]["etcd"]
            .get("bootstrapWithExistingCluster")
            .is_none());
        assert_eq!(after["spec"]["replicas"], 3);
        assert_eq!(
            after["spec"]["etcd"]["additionalAdvertisePeerURLs"],
            before["spec"]["etcd"]["additionalAdvertisePeerURLs"]
        );
    }

    /// RFC 7386's merge, as the API server applies a merge patch.
    fn merge(target: &mut Value, patch: &Value) {
        match (target, patch) {
            (Value::Object(t), Value::Object(p)) => {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
            (t, p) => *t = p.clone(),
        }
    }

    #[test]
    fn an_etcd_is_reconciled_once_its_generation_is_observed_and_the_ask_gone() {
        let at = |generation: i64, observed: Option<i64>, asked: bool| {
            let mut e =
                json!({"metadata": {"generation": generation, "annotations": {}}, "status": {}});
            if let Some(o) = observed {
                e["status"]["observedGeneration"] = json!(o);
            }
            if asked {
                e["metadata"]["annotations"]["gardener.cloud/operation"] = json!("reconcile");
            }
            e
        };
        assert!(reconciled(&at(4, Some(4), false)));
        assert!(
            !reconciled(&at(4, Some(3), false)),
            "the change not observed"
        );
        assert!(!reconciled(&at(4, Some(4), true)), "asked again");
        assert!(!reconciled(&at(4, None, false)), "never reconciled");
        assert!(!reconciled(&json!({})));
    }
}
