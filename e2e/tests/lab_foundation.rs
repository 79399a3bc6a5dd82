//! The lab foundation against real Docker: `up`, `status`, `down`, the
//! etcd cluster behind SNI gateways, TLS client auth, the wan router as the
//! only path between networks, idempotence and clean teardown.

mod common;

use std::time::{Duration, Instant};

use common::*;
use predicates::prelude::*;
use serde_json::Value;

fn members(status: &Value) -> Vec<Value> {
    status["etcd"]["members"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Asserts the contract of a freshly built lab and returns seed-a's gateway IP.
fn assert_fresh_lab(lab: &Lab) -> String {
    let s = lab.status();
    let seeds = s["seeds"].as_array().expect("seeds[]");
    assert_eq!(seeds.len(), 2, "{s:#}");
    let src = seeds
        .iter()
        .find(|x| x["role"] == "source")
        .expect("source seed");
    let dst = seeds
        .iter()
        .find(|x| x["role"] == "destination")
        .expect("destination seed");
    assert_eq!(src["name"], "seed-a");
    assert_eq!(dst["name"], "seed-b");
    assert_eq!(src["network"], format!("{}-seed-a", lab.name));
    let gw = src["gateway_ip"].as_str().expect("gateway_ip").to_string();

    let ms = members(&s);
    assert_eq!(ms.len(), 3, "three members: {s:#}");
    for m in &ms {
        assert_eq!(m["healthy"], true, "{m:#}");
        assert_eq!(m["is_learner"], false, "{m:#}");
        assert_eq!(m["seed"], "seed-a", "{m:#}");
        assert!(m["name"].as_str().unwrap().starts_with("seed-a"), "{m:#}");
        assert!(
            u64::from_str_radix(m["id"].as_str().unwrap(), 16).is_ok(),
            "{m:#}"
        );
        assert!(m["peer_urls"][0]
            .as_str()
            .unwrap()
            .starts_with("https://seed-a-etcd-"));
        assert!(m["client_urls"][0].as_str().unwrap().ends_with(":2379"));
    }
    let leaders = ms.iter().filter(|m| m["is_leader"] == true).count();
    assert_eq!(leaders, 1, "exactly one leader: {s:#}");
    assert_eq!(s["dns"]["name"], "api.local.cpmlab.test");
    assert_eq!(s["dns"]["answer"], serde_json::json!([gw.clone()]), "{s:#}");
    gw
}

fn mode(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

/// The token, the keys, the kubeconfig that holds the token and the state
/// are the owner's alone; so are the lab's directories (as kind and
/// kubectl write kubeconfigs 0600). `doctor` says so too.
fn assert_private_files(lab: &Lab) {
    let d = lab.dir();
    let kubeconfig = lab.ok(&["kubeconfig"]);
    let kubeconfig = std::path::PathBuf::from(kubeconfig.lines().last().unwrap().trim());
    for (p, want) in [
        (d.clone(), 0o700),
        (d.join("pki"), 0o700),
        (d.join("state.json"), 0o600),
        (d.join("pki/token"), 0o600),
        (d.join("pki/ca.key"), 0o600),
        (d.join("pki/client.key"), 0o600),
        (kubeconfig, 0o600),
    ] {
        assert_eq!(mode(&p), want, "{}: {:o}", p.display(), mode(&p));
    }
    let doctor = stdout(&lab.cpmlab(&["doctor"]));
    assert!(
        doctor.contains("lab files") && doctor.contains("owner-only"),
        "{doctor}"
    );
}

/// No container publishes a port or shares the host's network: nothing of
/// the lab listens on the host's addresses.
fn assert_nothing_on_host_addresses(lab: &Lab) {
    let filter = format!("label=cpmlab.lab={}", lab.name);
    let ids = stdout(
        &docker(&["ps", "-aq", "--filter", &filter])
            .assert()
            .success(),
    );
    let ids: Vec<&str> = ids.split_whitespace().collect();
    assert!(ids.len() >= 8, "the lab's containers: {ids:?}");
    let mut args = vec![
        "inspect",
        "--format",
        "{{.Name}} {{.HostConfig.NetworkMode}} {{len .HostConfig.PortBindings}} {{.HostConfig.PublishAllPorts}} {{len .NetworkSettings.Ports}}",
    ];
    args.extend(ids.iter().copied());
    let out = stdout(&docker(&args).assert().success());
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 5, "{line}");
        assert_ne!(f[1], "host", "host networking: {line}");
        assert_eq!(f[2], "0", "published ports: {line}");
        assert_eq!(f[3], "false", "publish-all: {line}");
    }
}

/// CAP_NET_ADMIN's bit in a capability set.
const CAP_NET_ADMIN: u64 = 1 << 12;

/// Only the wan router holds NET_ADMIN, as Docker was asked and as its
/// first process has it; a member cannot change its routes, and has them.
fn assert_capabilities(lab: &Lab) {
    let filter = format!("label=cpmlab.lab={}", lab.name);
    let names = stdout(
        &docker(&["ps", "--filter", &filter, "--format", "{{.Names}}"])
            .assert()
            .success(),
    );
    let names: Vec<&str> = names.split_whitespace().collect();
    assert!(names.len() >= 8, "the lab's containers: {names:?}");
    for c in &names {
        let cap_add = stdout(
            &docker(&["inspect", "--format", "{{.HostConfig.CapAdd}}", c])
                .assert()
                .success(),
        );
        let status = stdout(
            &docker(&["exec", c, "cat", "/proc/1/status"])
                .assert()
                .success(),
        );
        let eff = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .map(|h| u64::from_str_radix(h.trim(), 16).unwrap())
            .unwrap_or_else(|| panic!("{c}: no CapEff in /proc/1/status"));
        let router = c.ends_with("-router");
        assert_eq!(
            eff & CAP_NET_ADMIN != 0,
            router,
            "{c}: CapEff {eff:x}, CapAdd {cap_add}"
        );
        assert_eq!(
            cap_add.contains("NET_ADMIN"),
            router,
            "{c}: CapAdd {cap_add}"
        );
    }
    assert_member_routes(lab, "seed-a-etcd-1");
    lab.exec("seed-a-etcd-1", "ip route add 192.0.2.0/24 dev eth0")
        .assert()
        .failure()
        .stderr(predicate::str::contains("ermitted"));
}

/// A seed container's routes, set from the host: the other lab networks
/// (the other seed, the clients, the garden) via the router, no default
/// route; the lab's resolver.
fn assert_member_routes(lab: &Lab, what: &str) {
    let routes = stdout(&lab.exec(what, "ip route").assert().success());
    assert!(!routes.contains("default"), "{what}: {routes}");
    assert_eq!(routes.matches(" via ").count(), 3, "{what}: {routes}");
    let resolv = stdout(&lab.exec(what, "cat /etc/resolv.conf").assert().success());
    assert!(resolv.starts_with("nameserver "), "{what}: {resolv}");
}

/// A member stopped and started again waits for the lab, gets its routes
/// again (its namespace is new) and rejoins: as a pod comes back.
fn assert_restart_gets_routes(lab: &Lab) {
    let c = lab.container("seed-a-etcd-2");
    docker(&["kill", &c]).assert().success();
    let state = cpmlab_model::state::LabDir::new(lab.state.path(), &lab.name)
        .load()
        .unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let engine = cpmlab_provider_docker::engine::Engine::connect()
                .await
                .unwrap();
            cpmlab_provider_docker::up::start_released(&engine, &state, &c)
                .await
                .unwrap();
        });
    assert_member_routes(lab, "seed-a-etcd-2");
    let ep = "seed-a-etcd-2.local.cpmlab.test";
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = lab
            .exec("toolbox", &etcdctl(ep, true, "endpoint health"))
            .output()
            .unwrap();
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "seed-a-etcd-2 not healthy after its restart: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn lab_lifecycle() {
    if !needs_docker("lab_lifecycle") {
        return;
    }
    let lab = Lab::new("life");
    // A twin brought up at the same moment (`twin_up_got_its_own_networks`).
    let twin = Lab::new("lifetw");
    let started = Instant::now();
    let [up, twin_up] = [&lab, &twin].map(|l| {
        l.std_cmd()
            .arg("up")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn up")
    });
    let o = up.wait_with_output().expect("wait for up");
    eprintln!(
        "up took {:.1}s (beside a twin's)",
        started.elapsed().as_secs_f64()
    );
    if !o.status.success() {
        // The twin goes too, whatever it did.
        let _ = twin_up.wait_with_output();
        let _ = twin.cpmlab(&["down"]);
        panic!(
            "up exited {:?}: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    twin_up_got_its_own_networks(&lab, &twin, twin_up);
    let gw = assert_fresh_lab(&lab);

    // Every object carries the lab's label, and the expected ones exist.
    let objs = lab_objects(&lab.name);
    for want in [
        "router",
        "dns",
        "toolbox",
        "seed-a-gateway",
        "seed-b-gateway",
        "seed-a-etcd-0",
        "seed-a",
        "seed-b",
        "clients",
        "seed-a-etcd-2-data",
    ] {
        assert!(
            objs.contains(&lab.container(want)),
            "{want} missing from {objs:?}"
        );
    }

    assert_private_files(&lab);
    assert_nothing_on_host_addresses(&lab);
    assert_capabilities(&lab);
    assert_restart_gets_routes(&lab);

    // put and get through seed-a's gateway over TLS, by member name (SNI),
    // from the clients network (so through the router).
    let ep = "seed-a-etcd-1.local.cpmlab.test";
    lab.exec("toolbox", &etcdctl(ep, true, "put /e2e/key value-42"))
        .assert()
        .success();
    lab.exec(
        "toolbox",
        &etcdctl(ep, true, "get /e2e/key --print-value-only"),
    )
    .assert()
    .success()
    .stdout(predicate::str::diff("value-42").trim());

    // A client without a certificate is refused...
    lab.exec("toolbox", &etcdctl(ep, false, "get /e2e/key"))
        .assert()
        .failure();
    // ...and so is one from another CA.
    let rogue = cpmlab_core::pki::Ca::generate("rogue")
        .unwrap()
        .issue_client("rogue")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rogue.crt"), rogue.cert_pem).unwrap();
    std::fs::write(dir.path().join("rogue.key"), rogue.key_pem).unwrap();
    for f in ["rogue.crt", "rogue.key"] {
        docker(&[
            "cp",
            dir.path().join(f).to_str().unwrap(),
            &format!("{}:/tmp/{f}", lab.container("toolbox")),
        ])
        .assert()
        .success();
    }
    lab.exec(
        "toolbox",
        &format!(
            "{} --cert=/tmp/rogue.crt --key=/tmp/rogue.key",
            etcdctl(ep, false, "get /e2e/key")
        ),
    )
    .assert()
    .failure();
    // The valid cert still works.
    lab.exec(
        "toolbox",
        &etcdctl(ep, true, "get /e2e/key --print-value-only"),
    )
    .assert()
    .success();

    // The router is the first hop from clients to seed-a.
    let s = lab.status();
    let router_on_clients = s["networks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "clients")
        .unwrap()["router_ip"]
        .as_str()
        .unwrap()
        .to_string();
    let o = lab
        .exec("toolbox", &format!("traceroute -n -m 2 -w 1 {gw}"))
        .assert();
    let hops = stdout(&o);
    let first = hops
        .lines()
        .find(|l| l.split_whitespace().next() == Some("1"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("")
        .to_string();
    assert_eq!(
        first, router_on_clients,
        "first hop must be the router:\n{o}"
    );
    // No default route anywhere: nothing but the router leads off a network.
    for c in ["toolbox", "seed-a-etcd-0", "seed-b-gateway", "dns"] {
        let routes = stdout(&lab.exec(c, "ip route").assert());
        assert!(
            !routes.contains("default"),
            "{c} has a default route: {routes}"
        );
    }

    // Cut the router's forwarding: clients -> seed-a and seed-a -> seed-b fail...
    let seed_b_gw = s["seeds"][1]["gateway_ip"].as_str().unwrap().to_string();
    let cross = |lab: &Lab| {
        let a = lab
            .exec("toolbox", &etcdctl(ep, true, "endpoint health"))
            .ok()
            .is_ok();
        let b = lab
            .exec(
                "seed-a-etcd-0",
                &format!(
                    "timeout 3 nc -w 2 {seed_b_gw} {} </dev/null",
                    cpmlab_exposure::envoy::PROMETHEUS_PORT
                ),
            )
            .ok()
            .is_ok();
        (a, b)
    };
    assert_eq!(
        cross(&lab),
        (true, true),
        "cross-network paths work before the cut"
    );
    lab.exec("router", "iptables -P FORWARD DROP")
        .assert()
        .success();
    assert_eq!(
        cross(&lab),
        (false, false),
        "with the router cut, no cross-network path may exist"
    );
    // ...and come back when forwarding is restored.
    lab.exec("router", "iptables -P FORWARD ACCEPT")
        .assert()
        .success();
    assert_eq!(cross(&lab), (true, true), "paths come back with the router");

    // `up` on a running lab is idempotent.
    lab.cpmlab(&["up"])
        .success()
        .stderr(predicate::str::contains("already up"));

    // Without a name, `status` lists every lab, like `kind get clusters`;
    // without --state-dir it looks in $XDG_STATE_HOME/cpmlab (here a link
    // to this test's state directory).
    let xdg = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(lab.state.path(), xdg.path().join("cpmlab")).unwrap();
    let listed = lab
        .cmd()
        .env_remove("CPMLAB_NAME")
        .env_remove("CPMLAB_STATE_DIR")
        .env("XDG_STATE_HOME", xdg.path())
        .args(["status", "-o", "json"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&listed.get_output().stdout).unwrap();
    let me = v["labs"]
        .as_array()
        .and_then(|l| l.iter().find(|l| l["name"] == lab.name.as_str()))
        .unwrap_or_else(|| panic!("{} not listed: {v}", lab.name));
    assert_eq!(me["phase"], "ready", "{me}");
    assert_eq!(me["serving_seed"], "seed-a", "{me}");
    assert_eq!(me["containers_running"], me["containers"], "{me}");
    lab.cmd()
        .env_remove("CPMLAB_NAME")
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("NAME").and(predicate::str::contains(&*lab.name)));
    // The lab's directory holds keys and the API token: owner only.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(lab.dir()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{}", lab.dir().display());

    // `down` leaves nothing.
    let started = Instant::now();
    lab.ok(&["down"]);
    eprintln!("down took {:.1}s", started.elapsed().as_secs_f64());
    assert_eq!(lab_objects(&lab.name), Vec::<String>::new());
    assert!(!lab.dir().exists(), "state dir removed");
    // ...and is idempotent.
    lab.ok(&["down"]);
    // The status of a lab that is down.
    lab.cpmlab(&["status"]).code(3);

    // `up` after `down` works.
    lab.ok(&["up"]);
    assert_fresh_lab(&lab);
    lab.ok(&["down"]);
    assert_eq!(lab_objects(&lab.name), Vec::<String>::new());
}

/// Bad topology files: exit 2, the message names file, line and field, and
/// nothing is created (no Docker object, no state directory).
#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn bad_topologies_are_refused_before_anything_is_created() {
    let docker = needs_docker("bad_topologies_are_refused_before_anything_is_created");
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/topologies/bad");
    let cases = [
        ("unknown-field.yaml", 5, "seeds[1].zone"),
        ("even-members.yaml", 3, "etcd.members"),
        ("duplicate-seed.yaml", 4, "seeds[1].name"),
        ("unparseable.yaml", 5, "-"),
        ("etcd-version.yaml", 4, "etcd.version"),
        ("etcd-druid-version.yaml", 4, "etcd.operator"),
        ("probe-period.yaml", 5, "api.readiness_probe.period"),
        ("api-exposure.yaml", 5, "api.exposure"),
        // Names reach container names, DNS, Envoy configs and scripts.
        ("shell-name.yaml", 4, "seeds[0].name"),
        ("long-label.yaml", 3, "shoot.name"),
    ];
    let lab = Lab::new("bad");
    for (file, line, field) in cases {
        let path = fixtures.join(file);
        let want = format!("{}:{line}: {field}:", path.display());
        lab.cpmlab(&["up", "--topology", path.to_str().unwrap()])
            .code(2)
            .stderr(predicate::str::contains(want));
        assert!(!lab.dir().exists(), "{file}: state dir created");
        if docker {
            assert_eq!(
                lab_objects(&lab.name),
                Vec::<String>::new(),
                "{file}: objects created"
            );
        }
    }
    // etcd-druid belongs to the kind form: the docker form refuses a
    // topology that asks for it, naming the file and the field.
    let druid = fixtures.join("../etcd-druid.yaml");
    lab.cpmlab(&["up", "--topology", druid.to_str().unwrap()])
        .code(2)
        .stderr(predicate::str::contains(format!(
            "{}:9: etcd.operator: etcd-druid belongs to the kind form",
            druid.display()
        )));
    assert!(!lab.dir().exists(), "etcd-druid.yaml: state dir created");
    // The lab's own members' snapshot settings beside druid's members (the
    // flag, not the file, asks for druid): refused at the setting's line.
    let tmp = tempfile::tempdir().unwrap();
    let snap = tmp.path().join("snapshots.yaml");
    std::fs::write(&snap, "etcd:\n  version: \"3.5\"\n  snapshot_count: 1000\n").unwrap();
    lab.cpmlab(&[
        "up",
        "--provider",
        "kind",
        "--with-etcd-druid",
        "--topology",
        snap.to_str().unwrap(),
    ])
    .code(2)
    .stderr(predicate::str::contains(format!(
        "{}:3: etcd.snapshot_count: the lab's own members only",
        snap.display()
    )));
    assert!(!lab.dir().exists(), "snapshots.yaml: state dir created");
    // A bad lab name is bad input too.
    lab.cpmlab(&["up", "--name", "Not_A_Name"])
        .code(2)
        .stderr(predicate::str::contains("--name"));
}

/// Starts `up` and returns once it has created a few labelled objects.
fn spawn_up_until_objects_exist(lab: &Lab) -> std::process::Child {
    let mut child = lab.std_cmd().arg("up").spawn().expect("spawn up");
    let deadline = Instant::now() + Duration::from_secs(60);
    while lab_objects(&lab.name).len() < 3 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "up exited before creating anything"
        );
        assert!(Instant::now() < deadline, "up created nothing within 60s");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn ctrl_c_during_up_leaves_nothing_behind() {
    if !needs_docker("ctrl_c_during_up_leaves_nothing_behind") {
        return;
    }
    let lab = Lab::new("int");
    let mut child = spawn_up_until_objects_exist(&lab);
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("send SIGINT to up");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "interrupted up exits 130");
    assert_eq!(
        lab_objects(&lab.name),
        Vec::<String>::new(),
        "Ctrl-C left objects"
    );
    assert!(!lab.dir().exists(), "Ctrl-C left the state dir");
}

#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn down_cleans_up_after_a_crashed_up() {
    if !needs_docker("down_cleans_up_after_a_crashed_up") {
        return;
    }
    let lab = Lab::new("crash");
    let mut child = spawn_up_until_objects_exist(&lab);
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !lab_objects(&lab.name).is_empty(),
        "the crash should leave objects"
    );
    // A half-built lab is refused clearly by `up`...
    lab.cpmlab(&["up"])
        .code(3)
        .stderr(predicate::str::contains("cpmlab down"));
    // ...and `down` removes it.
    lab.ok(&["down"]);
    assert_eq!(lab_objects(&lab.name), Vec::<String>::new());
}

#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn doctor_reports_docker_and_the_link_backend() {
    if !needs_docker("doctor_reports_docker_and_the_link_backend") {
        return;
    }
    let lab = Lab::new("doc");
    let out = stdout(&lab.cpmlab(&["doctor", "-o", "json"]).code(0));
    let v: Value = serde_json::from_str(&out).unwrap();
    let checks = v["checks"].as_array().unwrap();
    let docker = checks.iter().find(|c| c["name"] == "docker").unwrap();
    assert_eq!(docker["level"], "ok", "{v:#}");
    for name in ["kernel netem", "kind", "istioctl", "kube-apiserver"] {
        assert!(
            checks.iter().any(|c| c["name"] == name),
            "{name} not checked: {v:#}"
        );
    }
    assert!(["netem", "delayline"].contains(&v["link_backend"].as_str().unwrap()));
}

#[test]
fn docker_unreachable_is_an_environment_error() {
    let lab = Lab::new("nodock");
    let nodock = |args: &[&str]| {
        lab.cmd()
            .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
            .args(args)
            .assert()
    };
    let status = nodock(&["status"]);
    // status of a missing lab also exits 3; use up, which connects first.
    nodock(&["up"])
        .code(3)
        .stderr(predicate::str::contains("fix:"))
        .stderr(predicate::str::contains("scripts/setup"));
    status.code(3);
    assert!(!lab.dir().exists());
}

/// `dpkg-query`'s list of the lab's Debian packages in `image`, and the
/// lab's own files under /usr/local/bin.
fn debian_content(image: &str) -> String {
    let mut args = vec![
        "run",
        "--rm",
        "--entrypoint",
        "/usr/bin/dpkg-query",
        image,
        "-W",
        "-f",
        "${Package} ${Version}\\n",
    ];
    args.extend(cpmlab_provider_docker::images::PACKAGES);
    let o = docker(&args).assert().success();
    let l = docker(&["run", "--rm", image, "ls", "/usr/local/bin"])
        .assert()
        .success();
    format!("{}{}", stdout(&o), stdout(&l))
}

#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn the_lab_image_s_base_is_built_by_apt_in_a_container_from_either_debian_image() {
    if !needs_docker("the_lab_image_s_base_is_built_by_apt_in_a_container_from_either_debian_image")
    {
        return;
    }
    let lab = Lab::new("imgbase");
    let build = |env: &[(&str, &str)], args: &[&str]| {
        let mut c = lab.cmd();
        c.args(["images", "build", "-o", "json"]).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.assert()
    };
    let json = |a: &assert_cmd::assert::Assert| -> Value {
        let out = stdout(a);
        serde_json::from_str(out.lines().last().unwrap_or_default()).unwrap()
    };
    // The local Debian image (scripts/debian-base; scripts/setup makes it).
    let local = json(&build(&[], &["--base", "local"]).code(0));
    let local_tag = local["image"].as_str().unwrap().to_string();
    let base = local["base"].as_str().unwrap();
    assert!(
        base.starts_with("local cpmlab/debian:bookworm sha256:"),
        "{local:#}"
    );
    let local_id = base.rsplit(' ').next().unwrap().to_string();
    let content = debian_content(&local_tag);
    for p in [
        "bind9 1:9.18",
        "iproute2 6.1",
        "nftables 1.0.6",
        "busybox-static 1:1.35",
    ] {
        assert!(content.contains(p), "{p} not installed by apt: {content}");
    }
    for f in ["cpmlab\n", "envoy\n", "kube-apiserver\n"] {
        assert!(content.contains(f), "{f} not in /usr/local/bin: {content}");
    }

    // The registry's way, from a reference the engine has: the same
    // Debian image under another name (a registry mirror's, say), so the
    // two builds differ only in where their base came from.
    let mirror = "cpmlab-test/debian:bookworm-slim";
    docker(&["tag", "cpmlab/debian:bookworm", mirror])
        .assert()
        .success();
    let reg = build(&[("CPMLAB_DEBIAN_IMAGE", mirror)], &["--base", "registry"]);
    let _ = docker(&["rmi", mirror]).output();
    let reg = json(&reg.code(0));
    let reg_tag = reg["image"].as_str().unwrap().to_string();
    assert_eq!(
        reg["base"].as_str().unwrap(),
        format!("registry {mirror} {local_id}"),
        "{reg:#}"
    );
    assert_ne!(reg_tag, local_tag, "the base is in the tag");
    assert_eq!(
        debian_content(&reg_tag),
        content,
        "the registry's way and the local way install the same packages and files"
    );
    // The test's images: the registry build's three layers.
    let base_tag = reg_tag.split("-p").next().unwrap().to_string();
    let parts_tag = reg_tag.rsplit_once("-a").unwrap().0.to_string();
    let _ = docker(&["rmi", &reg_tag, &parts_tag, &base_tag]).output();

    // A registry reference that cannot be pulled: exit 3, with the fix.
    build(
        &[("CPMLAB_DEBIAN_IMAGE", "cpmlab-test/no-such-image:none")],
        &["--base", "registry"],
    )
    .code(3)
    .stderr(predicate::str::contains("its pull failed"))
    .stderr(predicate::str::contains("fix:"))
    .stderr(predicate::str::contains("CPMLAB_IMAGE_BASE=local"));
    // A setting that names no way: exit 2, naming it.
    build(&[("CPMLAB_IMAGE_BASE", "docker-hub")], &[])
        .code(2)
        .stderr(predicate::str::contains("CPMLAB_IMAGE_BASE=docker-hub"));
    assert!(!lab.dir().exists() || lab_objects(&lab.name).is_empty());
}

/// The Docker subnets of a lab's networks.
fn subnets(lab: &Lab) -> Vec<String> {
    let filter = format!("label=cpmlab.lab={}", lab.name);
    let ids = stdout(&docker(&["network", "ls", "-q", "--filter", &filter]).assert());
    ids.split_whitespace()
        .map(|id| {
            let o = docker(&[
                "network",
                "inspect",
                "-f",
                "{{range .IPAM.Config}}{{.Subnet}}{{end}}",
                id,
            ])
            .assert();
            stdout(&o).trim().to_string()
        })
        .collect()
}

/// A second lab's `up`, started at the same moment as `lab_lifecycle`'s
/// own, once that one is up: both got networks, and they do not overlap.
/// Each `up` reads the engine's taken subnets, both take the pool's lowest
/// free /24s, one network create of each may fail as overlapping, and each
/// lab removes its networks and tries again. Before 2026-11-29 both tried
/// the same /24s again, in step, five times, and `up` failed with "other
/// labs kept taking the same subnets" (a binary of then failed this 3 of 3
/// times); now each retry waits and reads the pool from an offset of its
/// own lab's. The twin is taken down here, and leaves nothing.
fn twin_up_got_its_own_networks(lab: &Lab, twin: &Lab, up: std::process::Child) {
    let o = up.wait_with_output().expect("wait for the twin's up");
    let (mine, theirs) = (subnets(lab), subnets(twin));
    twin.ok(&["down"]);
    assert!(
        o.status.success(),
        "{}: up beside {} exited {:?}: {}",
        twin.name,
        lab.name,
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(lab_objects(&twin.name), Vec::<String>::new());
    assert!(
        !mine.is_empty() && !theirs.is_empty(),
        "{mine:?} {theirs:?}"
    );
    for n in &mine {
        assert!(
            !theirs.contains(n),
            "both labs have {n}: {mine:?} {theirs:?}"
        );
    }
}
