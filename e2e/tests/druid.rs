//! etcd-druid v0.38.1's own controller against a real kube-apiserver, on
//! loopback: etcd, kube-apiserver and druid as host processes, the way
//! controller-runtime's envtest runs an operator (no kubelet: druid's
//! objects are made, its pods never run). What the kind form renders for
//! druid goes through druid's own CRDs (CEL rules checked by the API
//! server) and druid's own ConfigMap rendering, so what druid does with the
//! lab's `Etcd` is druid's answer, not the lab's reading of its code.
//!
//! Needs etcd and kubectl (scripts/setup, scripts/build-go --kind),
//! kube-apiserver (scripts/build-go) and etcd-druid (scripts/build-go
//! --druid): compiled as ignored where e2e/build.rs did not find them
//! (reported skipped), except with CI=true.

mod common;

use common::free_port;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use cpmlab_provider_kind::druid_operator::{self, OperatorSettings};
use serde_json::{json, Value};

/// A host process, killed with the test.
struct Proc(Child, &'static str);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A built part, where the lab finds it.
fn part(p: cpmlab_core::go_parts::Part) -> PathBuf {
    p.find()
        .map(|f| f.path().clone())
        .unwrap_or_else(|| panic!("{} is not built ({})", p.name, p.installer))
}

struct Env {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    procs: Vec<Proc>,
}

impl Env {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }
    fn kubectl(&self, args: &[&str]) -> Output {
        common::kubectl_at(&self.kubeconfig, args)
    }
    fn ok(&self, args: &[&str]) -> String {
        common::kubectl_ok(&self.kubeconfig, args)
    }
    /// `kubectl apply` of one object; the output on failure.
    fn apply(&self, object: &Value) -> Result<(), String> {
        let f = self.write("object.json", &object.to_string());
        let o = self.kubectl(&["apply", "--server-side", "-f", f.to_str().unwrap()]);
        if o.status.success() {
            Ok(())
        } else {
            Err(common::show_output(&o))
        }
    }
    /// A process's log so far (its stderr went to `<name>.log`).
    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(&format!("{name}.log"))).unwrap_or_default()
    }
    fn spawn(&mut self, name: &'static str, mut cmd: Command) {
        let log = std::fs::File::create(self.path(&format!("{name}.log"))).unwrap();
        let child = cmd
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        self.procs.push(Proc(child, name));
    }
    /// Fails with each process's log tail when one has exited.
    fn alive(&mut self) {
        for p in &mut self.procs {
            if let Ok(Some(exit)) = p.0.try_wait() {
                let name = p.1;
                let log = std::fs::read_to_string(self.dir.path().join(format!("{name}.log")))
                    .unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                panic!(
                    "{name} exited ({exit}):\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
        }
    }
}

/// etcd, kube-apiserver (its token user in system:masters) and druid's
/// CRDs, established.
fn api_server() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let mut env = Env {
        kubeconfig: dir.path().join("kubeconfig"),
        dir,
        procs: vec![],
    };
    let (cp, pp, ap) = (free_port(), free_port(), free_port());
    let etcd_url = format!("http://127.0.0.1:{cp}");
    let mut etcd = Command::new("etcd");
    etcd.args(common::loopback_etcd_args(&env.path("etcd"), cp, pp));
    env.spawn("etcd", etcd);

    let keys = cpmlab_provider_kind::render::RenderKeys::generate("druid-test").unwrap();
    let ca = &keys.ca;
    let sa_key = env.write("sa.key", &keys.sa.0);
    let sa_pub = env.write("sa.pub", &keys.sa.1);
    let serving = common::loopback_serving_cert(ca);
    let cert = env.write("server.crt", &serving.cert_pem);
    let key = env.write("server.key", &serving.key_pem);
    let tokens = env.write(
        "tokens.csv",
        "druid-test-token,admin,admin,\"system:masters\"\n",
    );
    let mut api = Command::new(part(cpmlab_core::go_parts::KUBE_APISERVER));
    api.args([
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        &format!("--secure-port={ap}"),
        &format!("--etcd-servers={etcd_url}"),
        &format!("--tls-cert-file={}", cert.display()),
        &format!("--tls-private-key-file={}", key.display()),
        &format!("--token-auth-file={}", tokens.display()),
        // Nothing here uses service account tokens, but kube-apiserver
        // will not start without their keys.
        "--service-account-issuer=https://kubernetes.default.svc",
        &format!("--service-account-key-file={}", sa_pub.display()),
        &format!("--service-account-signing-key-file={}", sa_key.display()),
        "--service-cluster-ip-range=10.0.0.0/24",
        "--authorization-mode=RBAC",
    ]);
    env.spawn("kube-apiserver", api);

    use base64::Engine as _;
    let ca_b64 = base64::engine::general_purpose::STANDARD.encode(&ca.cert_pem);
    std::fs::write(
        &env.kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: https://127.0.0.1:{ap}\n    certificate-authority-data: {ca_b64}\nusers:\n- name: admin\n  user:\n    token: druid-test-token\ncontexts:\n- name: t\n  context:\n    cluster: t\n    user: admin\ncurrent-context: t\n"
        ),
    )
    .unwrap();
    let t0 = Instant::now();
    while !env.kubectl(&["get", "--raw", "/readyz"]).status.success() {
        env.alive();
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "kube-apiserver not ready in 90 s:\n{}",
            env.log("kube-apiserver")
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    for crd in druid_operator::crds() {
        env.apply(&crd).unwrap();
    }
    env.ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/etcds.druid.gardener.cloud",
        "crd/etcdcopybackupstasks.druid.gardener.cloud",
        "crd/etcdopstasks.druid.gardener.cloud",
    ]);
    env
}

/// druid, with gardenlet's configuration but for what running outside a
/// cluster needs (no leader election: no lease namespace; free ports).
fn start_druid(env: &mut Env) {
    let settings = OperatorSettings {
        leader_election: false,
        webhook_port: free_port(),
        metrics_port: free_port(),
        ..OperatorSettings::gardener()
    };
    let config =
        druid_operator::operator_config(&settings, env.path("webhook-certs").to_str().unwrap());
    let config = env.write("druid-config.json", &config.to_string());
    let overwrite = env.write(
        "images-overwrite.json",
        &druid_operator::image_vector_overwrite(
            druid_operator::WRAPPER_IMAGE,
            druid_operator::BACKUP_RESTORE_IMAGE,
        )
        .to_string(),
    );
    let mut druid = Command::new(part(cpmlab_core::go_parts::ETCD_DRUID));
    druid
        .arg(format!("--config={}", config.display()))
        .env("KUBECONFIG", &env.kubeconfig)
        .env("IMAGEVECTOR_OVERWRITE", &overwrite);
    env.spawn("etcd-druid", druid);
}

/// The kind form's objects, rendered by the binary as a user renders them
/// (`cpmlab up --provider kind --with-etcd-druid --druid-naming NAMING
/// --render`).
fn rendered(dir: &Path, naming: &str) -> PathBuf {
    let out = dir.join("render");
    let o = Command::new(common::bin())
        .args([
            "up",
            "--provider",
            "kind",
            "--with-etcd-druid",
            "--druid-naming",
        ])
        .arg(naming)
        .arg("--render")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "render: {}", common::show_output(&o));
    out
}

/// The shoot's namespace and druid's TLS Secrets of the rendered seed
/// `seed`, applied; the namespace's name.
fn apply_namespace_and_secrets(env: &Env, seed: &Path) -> String {
    let ns_obj = read_yaml(&seed.join("manifests/00-namespace-shoot--local--local.yaml"));
    let ns = ns_obj["metadata"]["name"].as_str().unwrap().to_string();
    env.apply(&ns_obj).unwrap();
    for s in [
        "ca-etcd-bundle",
        "etcd-server-main",
        "etcd-peer-server-main",
        "etcd-client",
    ] {
        env.apply(&read_yaml(&seed.join(format!("secrets/{s}.yaml"))))
            .unwrap();
    }
    ns
}

fn read_yaml(p: &Path) -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(p).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// druid's rendering of `etcd` in `ns`: its ConfigMap's `etcd.conf.yaml`,
/// once druid has made it.
fn druid_config(env: &mut Env, ns: &str, etcd: &str) -> Value {
    let t0 = Instant::now();
    loop {
        let o = env.kubectl(&[
            "-n",
            ns,
            "get",
            "configmap",
            &format!("{etcd}-config"),
            "-o",
            "jsonpath={.data.etcd\\.conf\\.yaml}",
        ]);
        if o.status.success() && !o.stdout.is_empty() {
            return serde_saphyr::from_str(&String::from_utf8_lossy(&o.stdout)).unwrap();
        }
        env.alive();
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "druid made no ConfigMap for {ns}/{etcd} in 90 s; the Etcd's status: {}\ndruid's log:\n{}",
            String::from_utf8_lossy(&env.kubectl(&["-n", ns, "get", "etcd", etcd, "-o", "json"]).stdout),
            env.log("etcd-druid")
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The URLs druid's configuration advertises for each member, by member.
fn advertised(config: &Value) -> Vec<(String, Vec<String>)> {
    let mut v: Vec<(String, Vec<String>)> = config["initial-advertise-peer-urls"]
        .as_object()
        .unwrap_or_else(|| panic!("no initial-advertise-peer-urls map: {config:#}"))
        .iter()
        .map(|(m, urls)| {
            let urls = urls
                .as_array()
                .unwrap()
                .iter()
                .map(|u| u.as_str().unwrap().to_string())
                .collect();
            (m.clone(), urls)
        })
        .collect();
    v.sort();
    v
}

/// The ingress URLs the `Etcd` asks druid to advertise, by member name.
fn asked(etcd: &Value) -> Vec<(String, String)> {
    etcd["spec"]["etcd"]["additionalAdvertisePeerURLs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["memberName"].as_str().unwrap().to_string(),
                m["urls"][0].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The source seed's `Etcd` as the kind form renders it, Gardener's way
/// (one name in both seeds, the seed as `memberNamePrefix`), against druid
/// v0.38.1's CRD and controller:
///
/// 1. the API server accepts it (druid's CEL rules want the prefixed
///    member names the lab writes);
/// 2. druid's ConfigMap advertises none of the extra peer URLs: it looks
///    them up by the bare pod name (`internal/component/configmap/
///    etcdconfig.go`), so the members would advertise only their in-cluster
///    URL, which the other seed cannot reach — the upstream finding;
/// 3. the bare pod names with the prefix set, which druid's code would
///    match, are refused by its CRD: no spelling works with a prefix;
/// 4. the same `Etcd` without a prefix and with the pod names (druid's own
///    documented way, `docs/usage/bootstrapping-with-existing-cluster.md`)
///    gets every extra URL advertised: the prefix alone makes the
///    difference.
#[test]
#[cfg_attr(
    not(all(cpmlab_has_etcd_kubectl, cpmlab_has_kube_apiserver, cpmlab_has_druid)),
    ignore = "needs etcd and kubectl (scripts/setup, scripts/build-go --kind), kube-apiserver (scripts/build-go) and etcd-druid (scripts/build-go --druid)"
)]
fn druid_v0_38_1_drops_the_peer_urls_of_prefixed_members() {
    for need in [
        cpmlab_testenv::Need::EtcdKubectl,
        cpmlab_testenv::Need::KubeApiserver,
        cpmlab_testenv::Need::Druid,
    ] {
        common::needs(
            "druid_v0_38_1_drops_the_peer_urls_of_prefixed_members",
            need,
        );
    }
    let mut env = api_server();
    let render = rendered(env.dir.path(), "gardener");
    start_druid(&mut env);

    // 1. Gardener's way, as rendered: the namespace, druid's TLS Secrets
    // and the source's Etcd.
    let seed = render.join("seed-a");
    let ns = apply_namespace_and_secrets(&env, &seed);
    let gardener = read_yaml(&seed.join("manifests/11-etcd-etcd-main.yaml"));
    assert_eq!(gardener["spec"]["memberNamePrefix"], "seed-a");
    let wanted = asked(&gardener);
    assert_eq!(wanted.len(), 3, "{gardener:#}");
    env.apply(&gardener)
        .unwrap_or_else(|e| panic!("druid's CRD refused the rendered Etcd: {e}"));

    // 2. What druid made of it.
    let config = druid_config(&mut env, &ns, "etcd-main");
    let got = advertised(&config);
    assert_eq!(
        got.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(),
        wanted.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(),
        "druid names the members as the Etcd does: {config:#}"
    );
    for ((member, urls), (_, ingress)) in got.iter().zip(&wanted) {
        assert_eq!(urls.len(), 1, "{member}: {urls:?}");
        assert!(urls[0].contains(".etcd-main-peer."), "{member}: {urls:?}");
        assert!(
            !urls.contains(ingress),
            "{member}: druid v0.38.1 now advertises {ingress}: the finding no longer holds; {urls:?}"
        );
    }
    let initial = config["initial-cluster"].as_str().unwrap();
    assert!(
        wanted.iter().all(|(_, u)| !initial.contains(u.as_str())),
        "{initial}"
    );

    // 3. The names druid's code compares with, under the prefix: refused.
    let mut bare = gardener.clone();
    bare["metadata"]["name"] = json!("etcd-bare");
    bare["spec"]["etcd"]["additionalAdvertisePeerURLs"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
        .for_each(|(i, m)| m["memberName"] = json!(format!("etcd-bare-{i}")));
    let refused = env
        .apply(&bare)
        .expect_err("druid's CRD took bare names under a prefix");
    assert!(
        refused.contains("member names must start with"),
        "{refused}"
    );

    // 4. druid's documented way: no prefix, the pod names.
    let mut plain = bare.clone();
    plain["metadata"]["name"] = json!("etcd-plain");
    plain["spec"]
        .as_object_mut()
        .unwrap()
        .remove("memberNamePrefix");
    let mut wanted_plain = vec![];
    for (i, m) in plain["spec"]["etcd"]["additionalAdvertisePeerURLs"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        m["memberName"] = json!(format!("etcd-plain-{i}"));
        wanted_plain.push((
            format!("etcd-plain-{i}"),
            m["urls"][0].as_str().unwrap().to_string(),
        ));
    }
    env.apply(&plain)
        .unwrap_or_else(|e| panic!("druid's CRD refused the Etcd without a prefix: {e}"));
    let config = druid_config(&mut env, &ns, "etcd-plain");
    let got = advertised(&config);
    assert_eq!(got.len(), 3, "{config:#}");
    for ((member, urls), (name, ingress)) in got.iter().zip(&wanted_plain) {
        assert_eq!(member, name);
        assert!(
            urls.contains(ingress) && urls.len() == 2,
            "{member}: druid did not advertise {ingress}: {urls:?}"
        );
    }
    // druid's StatefulSets, with the lab's images through the overwrite.
    let image = env.ok(&[
        "-n",
        &ns,
        "get",
        "statefulset",
        "etcd-plain",
        "-o",
        "jsonpath={.spec.template.spec.containers[*].image}",
    ]);
    assert_eq!(
        image,
        format!(
            "{} {}",
            druid_operator::WRAPPER_IMAGE,
            druid_operator::BACKUP_RESTORE_IMAGE
        ),
        "druid's log:\n{}",
        env.log("etcd-druid")
    );
}

/// The migration's etcd cluster as druid v0.38.1 renders it under its own
/// documented naming (the kind form's default, `--druid-naming distinct`):
/// the source's `etcd-main` and the destination's `etcd-main-seed-b` in
/// one namespace of one API server (their names never clash), the
/// destination scaled to the five-member plan's two members as the
/// migration scales it.
///
/// 1. Both rendered `Etcd`s, and the destination's at two replicas, pass
///    druid's CRD.
/// 2. The source's members advertise their ingress URLs (what Gardener's
///    naming loses).
/// 3. The destination's configuration names the source's members by
///    their own member names and ingress URLs in `initial-cluster`
///    (`bootstrapWithExistingCluster`), and each destination member
///    advertises its own ingress URL.
/// 4. The destination's backup-restore sidecars get the source's client
///    endpoint (`--service-endpoints`), through which they add their
///    member to the source's cluster.
#[test]
#[cfg_attr(
    not(all(cpmlab_has_etcd_kubectl, cpmlab_has_kube_apiserver, cpmlab_has_druid)),
    ignore = "needs etcd and kubectl (scripts/setup, scripts/build-go --kind), kube-apiserver (scripts/build-go) and etcd-druid (scripts/build-go --druid)"
)]
fn druid_v0_38_1_renders_the_migration_s_cluster_under_its_documented_naming() {
    const NAME: &str = "druid_v0_38_1_renders_the_migration_s_cluster_under_its_documented_naming";
    for need in [
        cpmlab_testenv::Need::EtcdKubectl,
        cpmlab_testenv::Need::KubeApiserver,
        cpmlab_testenv::Need::Druid,
    ] {
        common::needs(NAME, need);
    }
    let mut env = api_server();
    let render = rendered(env.dir.path(), "distinct");
    start_druid(&mut env);
    let ns = apply_namespace_and_secrets(&env, &render.join("seed-a"));

    // 1. The source's and the destination's Etcd as rendered, then the
    // destination's scaled to two members as the migration renders it.
    let source = read_yaml(&render.join("seed-a/manifests/11-etcd-etcd-main.yaml"));
    let at_up = read_yaml(&render.join("seed-b/manifests/11-etcd-etcd-main-seed-b.yaml"));
    assert!(
        source["spec"].get("memberNamePrefix").is_none(),
        "{source:#}"
    );
    for e in [&source, &at_up] {
        env.apply(e)
            .unwrap_or_else(|err| panic!("druid's CRD refused {}: {err}", e["metadata"]["name"]));
    }
    let t = cpmlab_model::topology::Topology::default();
    let s = cpmlab_provider_kind::KindSettings {
        with_etcd_druid: true,
        ..Default::default()
    };
    let lab = source["metadata"]["labels"][cpmlab_model::labels::LABEL_LAB]
        .as_str()
        .unwrap();
    let scaled = cpmlab_provider_kind::druid::etcd(lab, &t, &s, "seed-b", 2);
    assert_eq!(
        scaled["spec"]["etcd"]["bootstrapWithExistingCluster"],
        at_up["spec"]["etcd"]["bootstrapWithExistingCluster"]
    );
    env.apply(&scaled)
        .unwrap_or_else(|e| panic!("druid's CRD refused the scale-up: {e}"));

    // 2. The source advertises each member's ingress URL.
    let config = druid_config(&mut env, &ns, "etcd-main");
    let wanted = asked(&source);
    let got = advertised(&config);
    assert_eq!(got.len(), 3, "{config:#}");
    for ((member, urls), (name, ingress)) in got.iter().zip(&wanted) {
        assert_eq!(member, name);
        assert!(
            urls.contains(ingress) && urls.len() == 2,
            "{member}: druid did not advertise {ingress}: {urls:?}"
        );
    }

    // 3. The destination's configuration: its members' ingress URLs, and
    // the source's members in its initial cluster.
    let config = loop_until_replicas(&mut env, &ns, "etcd-main-seed-b", 2);
    let got = advertised(&config);
    let wanted = asked(&scaled);
    assert_eq!(
        got.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(),
        ["etcd-main-seed-b-0", "etcd-main-seed-b-1"],
        "{config:#}"
    );
    for ((member, urls), (_, ingress)) in got.iter().zip(&wanted) {
        assert!(urls.contains(ingress), "{member}: {urls:?}");
    }
    let initial: Vec<&str> = config["initial-cluster"]
        .as_str()
        .unwrap()
        .split(',')
        .collect();
    for m in source["spec"]["etcd"]["additionalAdvertisePeerURLs"]
        .as_array()
        .unwrap()
    {
        let entry = format!(
            "{}={}",
            m["memberName"].as_str().unwrap(),
            m["urls"][0].as_str().unwrap()
        );
        assert!(
            initial.contains(&entry.as_str()),
            "{entry} not in {initial:?}"
        );
    }
    for (member, ingress) in &wanted {
        let entry = format!("{member}={ingress}");
        assert!(
            initial.contains(&entry.as_str()),
            "{entry} not in {initial:?}"
        );
    }

    // 4. The sidecars reach the source's cluster.
    let sts: Value = serde_json::from_str(&env.ok(&[
        "-n",
        &ns,
        "get",
        "statefulset",
        "etcd-main-seed-b",
        "-o",
        "json",
    ]))
    .unwrap();
    let sidecar = sts["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "backup-restore")
        .unwrap_or_else(|| panic!("no backup-restore container: {sts:#}"));
    let args: Vec<&str> = sidecar["args"]
        .as_array()
        .into_iter()
        .chain(sidecar["command"].as_array())
        .flatten()
        .filter_map(|a| a.as_str())
        .collect();
    let endpoints = args
        .iter()
        .find_map(|a| a.strip_prefix("--service-endpoints="))
        .unwrap_or_else(|| panic!("no --service-endpoints: {sidecar:#}"));
    let source_clients: Vec<&str> = at_up["spec"]["etcd"]["bootstrapWithExistingCluster"]
        ["clientEndpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    assert_eq!(source_clients.len(), 3);
    assert_eq!(
        endpoints,
        format!(
            "https://etcd-main-seed-b-client:2379,{}",
            source_clients.join(",")
        )
    );

    // 5. The sidecars back up to the seed's bucket on the `Local` provider:
    // druid mounts it from the node's default path.
    for want in [
        "--storage-provider=Local",
        "--store-prefix=shoot--local--local--cpmlab/etcd-main",
        "--delta-snapshot-period=5m0s",
        "--garbage-collection-policy=Exponential",
        "--compress-snapshots=true",
    ] {
        assert!(args.contains(&want), "{want} not in the sidecar's {args:?}");
    }
    let container = sidecar["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == "STORAGE_CONTAINER")
        .unwrap_or_else(|| panic!("no STORAGE_CONTAINER: {sidecar:#}"));
    assert_eq!(container["value"], "backup-seed-b");
    let bucket = sts["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|v| v["hostPath"]["path"].as_str())
        .unwrap_or_else(|| panic!("no host path volume: {sts:#}"));
    assert_eq!(bucket, "/etc/gardener/local-backupbuckets/backup-seed-b");
}

/// druid's configuration of `etcd` once it renders `replicas` members.
fn loop_until_replicas(env: &mut Env, ns: &str, etcd: &str, replicas: usize) -> Value {
    let t0 = Instant::now();
    loop {
        let config = druid_config(env, ns, etcd);
        if advertised(&config).len() == replicas {
            return config;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "druid's configuration of {etcd} has not {replicas} members in 60 s: {config:#}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
