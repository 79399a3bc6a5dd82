//! The lab's API servers against a real etcd and the real kubectl and
//! kube-rs, on loopback: discovery, create/get/list/apply/replace/delete,
//! watch, optimistic concurrency, paging, 410 Gone after compaction, auth.
//! The same checks for the generic server (cpmlab-apiserver, on Kubernetes'
//! k8s.io/apiserver) and for the Rust stand-in.
//! Needs the host's etcd and kubectl (scripts/setup installs etcd;
//! scripts/build-go --kind builds kubectl) and, for the generic server, a
//! built cpmlab-apiserver (scripts/setup builds it): compiled as ignored
//! where e2e/build.rs did not find them (reported skipped), except with
//! CI=true.

mod common;

use common::free_port;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// etcd, etcdctl and kubectl are there (see `common::needs`).
fn tools_or_skip(test: &str) -> bool {
    common::needs(test, cpmlab_testenv::Need::EtcdKubectl)
}

/// Which server a test starts.
#[derive(Clone, Copy, Debug)]
enum Server {
    Standin,
    Generic,
}

impl Server {
    /// What its /version's gitVersion contains.
    fn marker(self) -> &'static str {
        match self {
            Server::Standin => "cpmlab-standin",
            Server::Generic => "cpmlab.generic",
        }
    }
}

/// The generic server's binary (see `common::needs`).
fn generic_or_skip(test: &str) -> Option<PathBuf> {
    tools_or_skip(test);
    common::needs(test, cpmlab_testenv::Need::GenericApiserver);
    cpmlab_core::apiserver::launch::find_generic_apiserver()
}

/// The tools for `server` are there (see `common::needs`).
fn ready_or_skip(test: &str, server: Server) -> bool {
    match server {
        Server::Standin => tools_or_skip(test),
        Server::Generic => generic_or_skip(test).is_some(),
    }
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Env {
    dir: tempfile::TempDir,
    etcd_url: String,
    kubeconfig: PathBuf,
    _etcd: Killed,
    _api: Killed,
}

impl Env {
    fn kubectl(&self, args: &[&str]) -> Output {
        common::kubectl_at(&self.kubeconfig, args)
    }
    fn ok(&self, args: &[&str]) -> String {
        common::kubectl_ok(&self.kubeconfig, args)
    }
    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

fn show(o: &Output) -> String {
    common::show_output(o)
}

fn start(server: Server) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let (cp, pp, ap) = (free_port(), free_port(), free_port());
    let etcd_url = format!("http://127.0.0.1:{cp}");
    let etcd = Command::new("etcd")
        .args(common::loopback_etcd_args(&dir.path().join("etcd"), cp, pp))
        .arg("--log-outputs=stderr")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start etcd");
    let etcd = Killed(etcd);

    let ca = cpmlab_core::pki::Ca::generate("standin-test").unwrap();
    let serving = common::loopback_serving_cert(&ca);
    let w = |n: &str, t: &str| {
        let p = dir.path().join(n);
        std::fs::write(&p, t).unwrap();
        p
    };
    let cert = w("server.crt", &serving.cert_pem);
    let key = w("server.key", &serving.key_pem);
    let token = w("token", "s3cret-token\n");
    let tokens = w(
        "tokens.csv",
        "s3cret-token,probe,probe,\"system:masters\"\n",
    );
    let mut cmd = match server {
        Server::Standin => {
            let mut c = Command::new(common::bin());
            c.args([
                "agent",
                "apiserver",
                &format!("--listen=127.0.0.1:{ap}"),
                &format!("--cert={}", cert.display()),
                &format!("--key={}", key.display()),
                &format!("--token-file={}", token.display()),
                &format!("--etcd-servers={etcd_url}"),
                "--shutdown-delay=1s",
                "--seed=seed-a",
                "--name=standin-0",
            ]);
            c
        }
        Server::Generic => {
            let bin = cpmlab_core::apiserver::launch::find_generic_apiserver().expect("built");
            let mut c = Command::new(bin);
            c.args([
                "--bind-address=127.0.0.1",
                &format!("--secure-port={ap}"),
                &format!("--tls-cert-file={}", cert.display()),
                &format!("--tls-private-key-file={}", key.display()),
                &format!("--token-auth-file={}", tokens.display()),
                &format!("--etcd-servers={etcd_url}"),
                "--shutdown-delay-duration=1s",
                "--cpmlab-seed=seed-a",
                "--cpmlab-name=generic-0",
                "-v=0",
            ]);
            c
        }
    };
    let api = cmd
        .stdout(Stdio::null())
        .stderr(if std::env::var_os("CPMLAB_TEST_SERVER_LOG").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()
        .unwrap_or_else(|e| panic!("start the {server:?} server: {e}"));
    let api = Killed(api);

    use base64::Engine as _;
    let ca_b64 = base64::engine::general_purpose::STANDARD.encode(&ca.cert_pem);
    let kubeconfig = w(
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: https://127.0.0.1:{ap}\n    certificate-authority-data: {ca_b64}\nusers:\n- name: probe\n  user:\n    token: s3cret-token\ncontexts:\n- name: lab\n  context:\n    cluster: lab\n    user: probe\n    namespace: default\ncurrent-context: lab\n"
        ),
    );
    let mut env = Env {
        dir,
        etcd_url,
        kubeconfig,
        _etcd: etcd,
        _api: api,
    };
    let t0 = Instant::now();
    loop {
        let o = env.kubectl(&["get", "--raw", "/readyz"]);
        if o.status.success() {
            break;
        }
        if let Ok(Some(exit)) = env._api.0.try_wait() {
            panic!("the {server:?} server exited ({exit}); CPMLAB_TEST_SERVER_LOG=1 shows its log");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{server:?} server not ready: {}",
            show(&o)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    env
}

#[test]
#[cfg_attr(
    not(all(cpmlab_has_etcd_kubectl, cpmlab_has_generic_apiserver)),
    ignore = "needs etcd, etcdctl and kubectl (scripts/setup, scripts/build-go --kind); needs cpmlab-apiserver (scripts/build-go --tests)"
)]
fn kubectl_works_against_the_standin() {
    if ready_or_skip("kubectl_works_against_the_standin", Server::Standin) {
        kubectl_works(Server::Standin);
    }
}

#[test]
#[cfg_attr(
    not(all(cpmlab_has_etcd_kubectl, cpmlab_has_generic_apiserver)),
    ignore = "needs etcd, etcdctl and kubectl (scripts/setup, scripts/build-go --kind); needs cpmlab-apiserver (scripts/build-go --tests)"
)]
fn kubectl_works_against_the_generic_server() {
    if ready_or_skip("kubectl_works_against_the_generic_server", Server::Generic) {
        kubectl_works(Server::Generic);
    }
}

fn kubectl_works(server: Server) {
    let env = start(server);

    // Discovery and version: named as the server it is.
    let v = env.ok(&["version", "-o", "json"]);
    assert!(v.contains(server.marker()), "{v}");
    let r = env.ok(&["api-resources"]);
    for want in ["configmaps", "namespaces", "leases"] {
        assert!(r.contains(want), "{want} missing from:\n{r}");
    }
    let ns = env.json(&["get", "namespaces", "-o", "json"]);
    let names: Vec<&str> = ns["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"default") && names.contains(&"kube-system"),
        "{names:?}"
    );

    // create from a generator (typed client: a protobuf body) and from a file
    env.ok(&["create", "configmap", "delta", "--from-literal=d=4"]);
    let d = env.json(&["get", "configmap", "delta", "-o", "json"]);
    assert_eq!(d["data"]["d"], "4", "{d}");
    env.ok(&["create", "namespace", "probes"]);
    env.ok(&["get", "namespace", "probes"]);
    let alpha = env.file(
        "alpha.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: alpha\ndata:\n  k: v1\n",
    );
    env.ok(&["create", "-f", alpha.to_str().unwrap()]);
    let a = env.json(&["get", "configmap", "alpha", "-o", "json"]);
    assert_eq!(a["data"]["k"], "v1");
    let rv1: i64 = a["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(a["metadata"]["uid"].as_str().unwrap().len() == 36);
    let o = env.kubectl(&["create", "-f", alpha.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("AlreadyExists"),
        "{}",
        show(&o)
    );

    // apply: create, then change (a patch)
    let f = env.file(
        "beta.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: beta\n  labels: {app: probe}\ndata:\n  x: \"1\"\n",
    );
    env.ok(&["apply", "-f", f.to_str().unwrap()]);
    let f = env.file(
        "beta.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: beta\n  labels: {app: probe}\ndata:\n  x: \"2\"\n  w: \"3\"\n",
    );
    let out = env.ok(&["apply", "-f", f.to_str().unwrap()]);
    assert!(out.contains("configured"), "{out}");
    let b = env.json(&["get", "cm", "beta", "-o", "json"]);
    assert_eq!(
        (b["data"]["x"].as_str(), b["data"]["w"].as_str()),
        (Some("2"), Some("3"))
    );

    // list with a label selector
    let l = env.json(&["get", "cm", "-l", "app=probe", "-o", "json"]);
    assert_eq!(l["items"].as_array().unwrap().len(), 1, "{l}");

    // optimistic concurrency: replace with a stale resourceVersion is a conflict
    let mut stale = a.clone();
    stale["data"]["k"] = Value::from("stale");
    env.ok(&[
        "patch",
        "cm",
        "alpha",
        "--type=merge",
        "-p",
        r#"{"data":{"k":"v2"}}"#,
    ]);
    let f = env.file("stale.json", &stale.to_string());
    let o = env.kubectl(&["replace", "-f", f.to_str().unwrap()]);
    assert!(!o.status.success(), "stale replace must fail: {}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("modified"),
        "{}",
        show(&o)
    );
    let a2 = env.json(&["get", "cm", "alpha", "-o", "json"]);
    assert_eq!(a2["data"]["k"], "v2");
    assert!(
        a2["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<i64>()
            .unwrap()
            > rv1
    );

    // paging: limit 1 gives a continue token that leads to the rest
    let p1 = env.json(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/configmaps?limit=1",
    ]);
    assert_eq!(p1["items"].as_array().unwrap().len(), 1);
    let cont = p1["metadata"]["continue"].as_str().expect("continue token");
    let p2 = env.json(&[
        "get",
        "--raw",
        &format!("/api/v1/namespaces/default/configmaps?limit=5&continue={cont}"),
    ]);
    let all = env.json(&["get", "cm", "-o", "json"]);
    let total = all["items"].as_array().unwrap().len();
    assert_eq!(p2["items"].as_array().unwrap().len(), total - 1, "{p2}");
    assert_eq!(
        p2["metadata"]["resourceVersion"],
        p1["metadata"]["resourceVersion"]
    );

    // watch: kubectl sees a create that happens while it watches
    let mut watch = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .args(["get", "cm", "-w", "--output-watch-events", "-o", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let gamma = env.file(
        "gamma.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gamma\ndata:\n  g: \"1\"\n",
    );
    env.ok(&["create", "-f", gamma.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(1500));
    let _ = watch.kill();
    let wo = watch.wait_with_output().unwrap();
    let seen = String::from_utf8_lossy(&wo.stdout);
    assert!(
        seen.contains("\"gamma\"") && seen.contains("ADDED"),
        "watch saw: {seen}\n{}",
        String::from_utf8_lossy(&wo.stderr)
    );

    // Leases
    let f = env.file(
        "lease.yaml",
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: probe\nspec:\n  holderIdentity: me\n",
    );
    env.ok(&["apply", "-f", f.to_str().unwrap()]);
    let lease = env.json(&["get", "lease", "probe", "-o", "json"]);
    assert_eq!(lease["spec"]["holderIdentity"], "me");

    // delete
    env.ok(&["delete", "cm", "alpha"]);
    let o = env.kubectl(&["get", "cm", "alpha"]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("NotFound"),
        "{}",
        show(&o)
    );

    // a wrong token is refused
    let cfg = std::fs::read_to_string(&env.kubeconfig).unwrap();
    let bad = env.file("bad-kubeconfig", &cfg.replace("s3cret-token", "wrong"));
    let o = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&bad)
        .args(["get", "cm"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Unauthorized"),
        "{}",
        show(&o)
    );
}

#[test]
#[cfg_attr(
    not(all(cpmlab_has_etcd_kubectl, cpmlab_has_generic_apiserver)),
    ignore = "needs etcd, etcdctl and kubectl (scripts/setup, scripts/build-go --kind); needs cpmlab-apiserver (scripts/build-go --tests)"
)]
fn watch_from_a_compacted_revision_is_gone_on_the_standin() {
    if ready_or_skip(
        "watch_from_a_compacted_revision_is_gone_on_the_standin",
        Server::Standin,
    ) {
        watch_from_a_compacted_revision(Server::Standin);
    }
}

#[test]
#[cfg_attr(
    not(all(cpmlab_has_etcd_kubectl, cpmlab_has_generic_apiserver)),
    ignore = "needs etcd, etcdctl and kubectl (scripts/setup, scripts/build-go --kind); needs cpmlab-apiserver (scripts/build-go --tests)"
)]
fn watch_from_a_compacted_revision_is_served_by_the_watch_cache() {
    if ready_or_skip(
        "watch_from_a_compacted_revision_is_served_by_the_watch_cache",
        Server::Generic,
    ) {
        watch_from_a_compacted_revision(Server::Generic);
    }
}

fn watch_from_a_compacted_revision(server: Server) {
    let env = start(server);
    let one = env.file(
        "one.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\ndata:\n  a: \"1\"\n",
    );
    env.ok(&["create", "-f", one.to_str().unwrap()]);
    for i in 0..3 {
        env.ok(&[
            "patch",
            "cm",
            "one",
            "--type=merge",
            "-p",
            &format!(r#"{{"data":{{"a":"{i}"}}}}"#),
        ]);
    }
    let cm = env.json(&["get", "cm", "one", "-o", "json"]);
    let rv: i64 = cm["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let o = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &env.etcd_url, "compact", &rv.to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    // Watching from before the compaction.
    let out = env.ok(&[
        "get",
        "--raw",
        &format!(
            "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={}&timeoutSeconds=3",
            rv - 2
        ),
    ]);
    let first: Value = serde_json::from_str(out.lines().next().unwrap_or("{}")).unwrap();
    match server {
        // The stand-in watches etcd directly: one ERROR event with 410.
        Server::Standin => {
            assert_eq!(first["type"], "ERROR", "{out}");
            assert_eq!(first["object"]["code"], 410, "{out}");
        }
        // k8s.io/apiserver answers from its watch cache, which keeps the
        // events etcd has compacted away: the two changes after rv - 2.
        Server::Generic => {
            let rvs: Vec<String> = out
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|e| e["type"] == "MODIFIED")
                .filter_map(|e| {
                    e["object"]["metadata"]["resourceVersion"]
                        .as_str()
                        .map(str::to_string)
                })
                .collect();
            assert_eq!(rvs, [(rv - 1).to_string(), rv.to_string()], "{out}");
        }
    }
    // From the current revision: a change arrives as MODIFIED with a newer rv.
    let url = format!(
        "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=3&allowWatchBookmarks=true"
    );
    let w = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .args(["get", "--raw", &url])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    env.ok(&[
        "patch",
        "cm",
        "one",
        "--type=merge",
        "-p",
        r#"{"data":{"a":"new"}}"#,
    ]);
    let out = w.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let first: Value = serde_json::from_str(text.lines().next().unwrap_or("{}")).unwrap();
    assert_eq!(first["type"], "MODIFIED", "{text}");
    assert_eq!(first["object"]["data"]["a"], "new");
    let new_rv: i64 = first["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(new_rv > rv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(cpmlab_has_etcd_kubectl, cpmlab_has_generic_apiserver)),
    ignore = "needs etcd, etcdctl and kubectl (scripts/setup, scripts/build-go --kind); needs cpmlab-apiserver (scripts/build-go --tests)"
)]
async fn kube_rs_works_against_the_standin() {
    if ready_or_skip("kube_rs_works_against_the_standin", Server::Standin) {
        kube_rs_works(Server::Standin).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(cpmlab_has_etcd_kubectl, cpmlab_has_generic_apiserver)),
    ignore = "needs etcd, etcdctl and kubectl (scripts/setup, scripts/build-go --kind); needs cpmlab-apiserver (scripts/build-go --tests)"
)]
async fn kube_rs_works_against_the_generic_server() {
    if ready_or_skip("kube_rs_works_against_the_generic_server", Server::Generic) {
        kube_rs_works(Server::Generic).await;
    }
}

/// kube-rs (the client the Rust ecosystem uses) against `server`:
/// version, create, get, list, conflict on a stale update, merge patch,
/// watch, delete, Leases.
async fn kube_rs_works(server: Server) {
    use futures_util::{StreamExt, TryStreamExt};
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{
        Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
    };
    use kube::config::{KubeConfigOptions, Kubeconfig};

    let env = tokio::task::spawn_blocking(move || start(server))
        .await
        .unwrap();
    let kc = Kubeconfig::read_from(&env.kubeconfig).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(cfg).unwrap();
    let v = client.apiserver_version().await.unwrap();
    assert!(v.git_version.contains(server.marker()), "{v:?}");

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "kube-rs"}, "data": {"a": "1"}
    }))
    .unwrap();
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    let got = cms.get("kube-rs").await.unwrap();
    assert_eq!(got.data.unwrap()["a"], "1");
    let list = cms.list(&ListParams::default()).await.unwrap();
    assert!(list
        .items
        .iter()
        .any(|c| c.metadata.name.as_deref() == Some("kube-rs")));

    // A watch from the creation's resourceVersion sees the next change.
    let mut events = cms
        .watch(&WatchParams::default().fields("metadata.name=kube-rs"), &rv)
        .await
        .unwrap()
        .boxed();
    cms.patch(
        "kube-rs",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"a": "2"}})),
    )
    .await
    .unwrap();
    let ev = tokio::time::timeout(std::time::Duration::from_secs(5), events.try_next())
        .await
        .expect("a watch event within 5 s")
        .unwrap()
        .unwrap();
    match ev {
        WatchEvent::Modified(c) => assert_eq!(c.data.unwrap()["a"], "2"),
        other => panic!("expected MODIFIED, got {other:?}"),
    }

    // A stale resourceVersion is a 409 Conflict.
    cm.metadata.name = Some("kube-rs".into());
    cm.metadata.resource_version = Some(rv);
    let err = cms
        .replace("kube-rs", &PostParams::default(), &cm)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => assert_eq!(s.code, 409, "{s:?}"),
        other => panic!("expected a 409, got {other:?}"),
    }

    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let l: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "kube-rs"}, "spec": {"holderIdentity": "rust"}
    }))
    .unwrap();
    leases.create(&PostParams::default(), &l).await.unwrap();
    assert_eq!(
        leases
            .get("kube-rs")
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("rust")
    );
    cms.delete("kube-rs", &DeleteParams::default())
        .await
        .unwrap();
    assert!(cms.get_opt("kube-rs").await.unwrap().is_none());
    drop(env);
}
