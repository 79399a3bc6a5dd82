//! The kind form's own side, on a machine without kind: `up --provider
//! kind` past its tool check (`provider::kind::up::make`) with `kind`,
//! `kubectl` and `istioctl` stubbed by scripts (the one boundary faked).
//! The stub `kind` makes each cluster's node as a container of the lab
//! image on the seed's network, as kind does, so what is real here is what
//! the lab does around kind: the networks (nodes take addresses from the
//! upper half only), the router, bind9 and toolbox, the keys and the lab
//! state, the nodes' routes through the router, the DNS answers a node
//! gets for the shoot's names, `cpmlab link` shaping the path between two
//! seeds' nodes, and `cpmlab down` removing all of it (the stub's clusters
//! through `kind delete`).
//! Needs Docker: compiled as ignored where e2e/build.rs did not find it
//! (reported skipped), except with CI=true.

mod common;

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use cpmlab_model::topology::Topology;
use cpmlab_provider_docker::engine::Engine;
use cpmlab_provider_docker::images;
use cpmlab_provider_kind::KindSettings;

const KIND: &str = r#"#!/bin/sh
echo "kind $*" >> "$STUB_LOG"
case "$1 $2" in
"create cluster")
  name=$(sed -n 's/^name: *//p' "$4" | tr -d '"')
  exec docker run -d --name "$name-control-plane" \
    --label io.x-k8s.kind.cluster="$name" --label cpmlab.test.stub=kind \
    --network "$KIND_EXPERIMENTAL_DOCKER_NETWORK" --cap-add NET_ADMIN \
    "$STUB_NODE_IMAGE" sh -c 'mkdir -p /etc/cni/net.d && exec sleep 2147483647' ;;
"delete cluster")
  docker rm -f "$4-control-plane" >/dev/null 2>&1; exit 0 ;;
"get kubeconfig")
  printf 'apiVersion: v1\nkind: Config\nclusters: []\n' ;;
"get clusters")
  docker ps -a --filter label=io.x-k8s.kind.cluster \
    --format '{{.Label "io.x-k8s.kind.cluster"}}' ;;
esac
exit 0
"#;

const KUBECTL: &str = r#"#!/bin/sh
echo "kubectl $*" >> "$STUB_LOG"
case "$*" in
*"get pods"*) echo '{"items":[]}' ;;
*podCIDR*) echo 10.244.0.0/24 ;;
*InternalIP*) docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$5" ;;
esac
exit 0
"#;

const ISTIOCTL: &str = r#"#!/bin/sh
echo "istioctl $*" >> "$STUB_LOG"
exit 0
"#;

const RENDER: &str = r#"#!/bin/sh
echo "cpmlab-gardener-render $*" >> "$STUB_LOG"
exit 0
"#;

fn write_stub(dir: &Path, name: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn docker(args: &[&str]) -> std::process::Output {
    Command::new("docker").args(args).output().unwrap()
}

fn docker_out(args: &[&str]) -> String {
    let o = docker(args);
    assert!(
        o.status.success(),
        "docker {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn node_exec(node: &str, args: &[&str]) -> String {
    let mut a = vec!["exec", node];
    a.extend_from_slice(args);
    docker_out(&a)
}

/// The mean round trip `ping` printed.
fn ping_avg_ms(out: &str) -> f64 {
    out.lines()
        .find(|l| l.contains("min/avg/max"))
        .and_then(|l| l.split('=').nth(1))
        .and_then(|v| v.trim().split('/').nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no round trip in: {out}"))
}

#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn the_kind_form_s_own_side_with_kind_stubbed() {
    // The lab's containers run cpmlab, not this test.
    // SAFETY: no other thread runs yet.
    unsafe { std::env::set_var("CPMLAB_AGENT_EXE", common::bin()) };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let engine = match rt.block_on(Engine::connect()) {
        Ok(e) => e,
        Err(e) => panic!("Docker is not ready: {e:#}"),
    };
    let image = rt
        .block_on(images::ensure(&engine))
        .unwrap_or_else(|e| panic!("the lab image: {e:#}"))
        .tag;
    let stubs = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    for (n, t) in [
        ("kind", KIND),
        ("kubectl", KUBECTL),
        ("istioctl", ISTIOCTL),
        ("cpmlab-gardener-render", RENDER),
    ] {
        write_stub(stubs.path(), n, t);
    }
    let log = stubs.path().join("calls.log");
    // An empty cache for the lab's Go-built tools: they come first on the
    // kind steps' PATH, and a machine where `scripts/build-go --kind` ran
    // has the real kind there, which would run instead of the stub.
    // (Envoy, which the lab image takes, is named where it was found.)
    let no_tools = tempfile::tempdir().unwrap();
    let envoy = cpmlab_core::go_parts::ENVOY
        .find()
        .expect("Envoy (scripts/fetch-envoy)")
        .path()
        .to_path_buf();
    // So are the garden's API servers, which every lab runs.
    let garden_parts: Vec<(&str, std::path::PathBuf)> = [
        cpmlab_core::go_parts::KUBE_APISERVER,
        cpmlab_core::go_parts::GARDENER_APISERVER,
    ]
    .iter()
    .map(|p| {
        let found = p
            .find()
            .unwrap_or_else(|| panic!("{} (scripts/build-go {})", p.name, p.name));
        (p.env, found.path().to_path_buf())
    })
    .collect();
    let path = format!(
        "{}:{}",
        stubs.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Set before anything else runs threads of its own that read them.
    // SAFETY: the runtime's workers do not read the environment, and this
    // test is its process's only test (nextest runs each in its own).
    unsafe {
        std::env::set_var("PATH", &path);
        std::env::set_var("STUB_LOG", &log);
        std::env::set_var("STUB_NODE_IMAGE", &image);
        std::env::set_var("XDG_CACHE_HOME", no_tools.path());
        std::env::set_var(cpmlab_core::go_parts::ENVOY.env, &envoy);
        for (env, path) in &garden_parts {
            std::env::set_var(env, path);
        }
    }
    let lab = format!("kst{}", std::process::id() % 100000);
    let t = Topology::default();
    let progress = cpmlab_core::progress::Progress::new(cpmlab_core::progress::Mode::Plain);
    let made = rt.block_on(cpmlab_provider_kind::up::make(
        &engine,
        state.path(),
        &lab,
        &t,
        &KindSettings::default(),
        // Nothing behind the stubs serves the shoot API; the kind e2e
        // (nightly) waits for it through the real ingress.
        cpmlab_provider_kind::up::Make {
            ready: cpmlab_provider_kind::up::ReadyWhen::StepsRan,
            retain: false,
        },
        &progress,
    ));
    let cli = |args: &[&str]| {
        let o = Command::new(common::bin())
            .env("CPMLAB_STATE_DIR", state.path())
            .env("CPMLAB_NAME", &lab)
            .env("PATH", &path)
            .env_remove("RUST_LOG")
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "cpmlab {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // Whatever fails below, the lab goes (quietly: a panic is under way).
    struct Down(std::path::PathBuf, String, String);
    impl Drop for Down {
        fn drop(&mut self) {
            if std::thread::panicking() {
                let _ = Command::new(common::bin())
                    .env("CPMLAB_STATE_DIR", &self.0)
                    .env("PATH", &self.2)
                    .args(["down", "--name", &self.1])
                    .output();
            }
        }
    }
    let _down = Down(state.path().to_path_buf(), lab.clone(), path.clone());
    made.unwrap_or_else(|e| {
        panic!(
            "make: {e:#}\ncalls:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });

    // The state says kind, names pods, and is ready.
    let st: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("labs").join(&lab).join("state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (st["provider"].as_str(), st["phase"].as_str()),
        (Some("kind"), Some("ready"))
    );
    assert!(st["members"][0]["container"]
        .as_str()
        .unwrap()
        .starts_with(&format!("kind-{lab}-seed-a/")));
    let subnet = |i: usize| -> Ipv4Addr {
        st["networks"][i]["subnet"]
            .as_str()
            .unwrap()
            .trim_end_matches("/24")
            .parse()
            .unwrap()
    };
    let host = |i: usize, h: u8| {
        let o = subnet(i).octets();
        Ipv4Addr::new(o[0], o[1], o[2], h)
    };

    // Each node took an address from its network's upper half.
    let node = |seed: &str| format!("{lab}-{seed}-control-plane");
    let addr = |seed: &str, net: &str| -> Ipv4Addr {
        docker_out(&[
            "inspect",
            "-f",
            &format!("{{{{(index .NetworkSettings.Networks \"{lab}-{net}\").IPAddress}}}}"),
            &node(seed),
        ])
        .parse()
        .unwrap()
    };
    let (a, b) = (addr("seed-a", "seed-a"), addr("seed-b", "seed-b"));
    for ip in [a, b] {
        assert!(
            (128..192).contains(&ip.octets()[3]),
            "{ip} outside the nodes' range"
        );
    }
    // Its routes to the other networks go through the router.
    let routes = node_exec(&node("seed-a"), &["ip", "route"]);
    assert!(
        routes.contains(&format!("{}/24 via {}", subnet(2), host(0, 2))),
        "{routes}"
    );
    // The lab's DNS server, across the router, answers the shoot's names
    // with the source seed's ingress address (port exposure: one address
    // per seed; the destination's members get theirs in the migration).
    let dns = host(2, 3).to_string();
    let answer = node_exec(
        &node("seed-b"),
        &[
            "dig",
            "+short",
            &format!("@{dns}"),
            "seed-a-etcd-1.local.cpmlab.test",
        ],
    );
    assert_eq!(answer, host(0, 3).to_string());
    let api = node_exec(
        &node("seed-a"),
        &["dig", "+short", &format!("@{dns}"), "api.local.cpmlab.test"],
    );
    assert_eq!(api, host(0, 3).to_string());

    // `cpmlab link` shapes the path between the seeds' nodes.
    let ping = || {
        ping_avg_ms(&node_exec(
            &node("seed-a"),
            &["ping", "-c", "5", "-i", "0.2", "-W", "2", &b.to_string()],
        ))
    };
    let before = ping();
    cli(&["link", "set", "seed-a:seed-b", "--delay", "20ms"]);
    std::thread::sleep(Duration::from_millis(300));
    let shaped = ping();
    eprintln!("node to node: {before:.2} ms, with 20 ms each way {shaped:.2} ms");
    assert!(
        (40.0..80.0).contains(&shaped) && before < 20.0,
        "{before} ms, then {shaped} ms"
    );

    // `status` goes through the kind provider: the lab's containers are
    // listed beside the clusters' pods (none: kubectl is a stub).
    let status: serde_json::Value =
        serde_json::from_str(&cli(&["status", "--name", &lab, "-o", "json"])).unwrap();
    assert_eq!(status["provider"], "kind", "{status}");
    let roles: Vec<&str> = status["containers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["state"] == "running")
        .filter_map(|c| c["role"].as_str())
        .collect();
    for role in ["router", "dns", "toolbox"] {
        assert!(roles.contains(&role), "{role} not running: {status}");
    }

    // The stubs saw the steps in order: the clusters, then Istio, then the
    // manifests, last each seed's gardenlet.
    let calls = std::fs::read_to_string(&log).unwrap();
    let at = |s: &str| {
        calls
            .find(s)
            .unwrap_or_else(|| panic!("{s} not called:\n{calls}"))
    };
    assert!(at("kind create cluster") < at("istioctl install"));
    assert!(at("coredns.yaml") < at("/secrets"));
    for seed in ["seed-a", "seed-b"] {
        assert!(at("/secrets") < at(&format!("{seed}/gardenlet.yaml")));
        // The shoot API's exposure, rendered by Gardener's component, once
        // its namespace and kube-apiserver's Service are there.
        let exposure = "cpmlab-gardener-render --values ";
        let rendered = calls
            .lines()
            .position(|l| {
                l.starts_with(exposure) && l.contains(&format!("{seed}/apiserver-exposure.json"))
            })
            .unwrap_or_else(|| panic!("{seed}'s exposure not rendered:\n{calls}"));
        let manifests = calls
            .lines()
            .position(|l| l.contains(&format!("{seed}/manifests")))
            .unwrap_or_else(|| panic!("{seed}'s manifests not applied:\n{calls}"));
        assert!(manifests < rendered, "{calls}");
    }

    // `down` removes the clusters (kind delete), containers and networks.
    cli(&["down", "--name", &lab]);
    let left = docker_out(&[
        "ps",
        "-a",
        "--filter",
        &format!("name={lab}-"),
        "--format",
        "{{.Names}}",
    ]);
    assert_eq!(left, "", "containers left");
    let nets = docker_out(&[
        "network",
        "ls",
        "--filter",
        &format!("name={lab}-"),
        "--format",
        "{{.Name}}",
    ]);
    assert_eq!(nets, "", "networks left");
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        calls.contains(&format!("kind delete cluster --name {lab}-seed-b")),
        "{calls}"
    );
}
