//! Shared helpers of the e2e suite: the built `cpmlab` binary, real Docker,
//! and a lab guard that always runs `cpmlab down`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::assert::Assert;
use assert_cmd::Command;
use serde_json::Value;

/// The eight steps of Live CPM, as upstream's conditions spell them, in
/// the order the GEP's diagram runs them (each test binary includes this
/// module; not every one reads them).
#[allow(unused_imports)]
pub use cpmlab_model::migrate::conditions::STEPS;

/// The cpmlab binary under test: `CPMLAB_BIN`, else the workspace's release
/// build (what scripts/setup builds; the delay line needs optimised code),
/// else the debug build, whichever is there and not older than the
/// workspace's sources: a binary built before the last change is refused,
/// never tested in the change's place.
pub fn bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CPMLAB_BIN") {
        return PathBuf::from(p);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let sources = newest_source(&root);
    let fresh = |p: &Path| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= sources)
    };
    for b in [target.join("release/cpmlab"), target.join("debug/cpmlab")] {
        if fresh(&b) {
            return b;
        }
    }
    panic!(
        "no cpmlab binary under {} as new as the sources: build it with \
         `cargo build --release -p cpmlab` (scripts/setup does), or name one in CPMLAB_BIN",
        target.display()
    )
}

/// The newest modification time of the Rust sources and manifests of the
/// workspace's crates (the binary's inputs).
fn newest_source(root: &Path) -> std::time::SystemTime {
    fn walk(p: &Path, newest: &mut std::time::SystemTime) {
        let Ok(rd) = std::fs::read_dir(p) else { return };
        for e in rd.flatten() {
            let path = e.path();
            let name = e.file_name();
            if path.is_dir() {
                if name != "target" && name != "tests" && !name.to_string_lossy().starts_with('.') {
                    walk(&path, newest);
                }
            } else if path.extension().is_some_and(|x| x == "rs") || name == "Cargo.toml" {
                if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
                    *newest = (*newest).max(t);
                }
            }
        }
    }
    let mut newest = std::time::SystemTime::UNIX_EPOCH;
    // The workspace's members, from `members = [...]` in its manifest.
    let ws = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    let list = ws
        .split_once("members")
        .and_then(|(_, r)| r.split_once('['))
        .and_then(|(_, r)| r.split_once(']'))
        .map(|(l, _)| l.to_string())
        .unwrap_or_default();
    for krate in list
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
    {
        walk(&root.join(krate).join("src"), &mut newest);
        if let Ok(t) =
            std::fs::metadata(root.join(krate).join("Cargo.toml")).and_then(|m| m.modified())
        {
            newest = newest.max(t);
        }
    }
    newest
}

/// A need of the test that is not met fails it, naming the fix. Tests
/// that need something of the host are compiled in only where e2e/build.rs
/// found it, or with CI=true (`#[cfg_attr(not(cpmlab_has_<need>), ignore)]`:
/// reported skipped, with the reason, where it is missing); so a test that
/// runs has its needs, or fails saying which it lost (`cpmlab-testenv`).
pub fn needs(test: &str, need: cpmlab_testenv::Need) -> bool {
    cpmlab_testenv::require(test, need);
    true
}

/// Docker answers (see [`needs`]).
pub fn needs_docker(test: &str) -> bool {
    needs(test, cpmlab_testenv::Need::Docker)
}

/// kube-apiserver is built (see [`needs`]).
pub fn needs_kube_apiserver(test: &str) -> bool {
    needs(test, cpmlab_testenv::Need::KubeApiserver)
}

/// The generic API server (cpmlab-apiserver) is built (see [`needs`]).
pub fn needs_generic(test: &str) -> bool {
    needs(test, cpmlab_testenv::Need::GenericApiserver)
}

/// The JSON lines of a run's file (`events.ndjson`, `raft.ndjson`, ...).
pub fn ndjson(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}: {l}", path.display())))
        .collect()
}

/// A command's stdout, as text.
pub fn stdout(a: &Assert) -> String {
    String::from_utf8_lossy(&a.get_output().stdout).into_owned()
}

/// `docker args…`, to run to completion and assert on.
pub fn docker(args: &[&str]) -> Command {
    let mut c = Command::new("docker");
    c.args(args);
    c
}

/// What `cpmlab down` says when dockerd 20.10 keeps a network's endpoint
/// count above zero with no endpoint left (its stale-endpoint bug: `docker
/// network disconnect -f` finds no endpoint, only a dockerd restart clears
/// the count).
const STALE_ENDPOINT: &str = "Docker keeps a stale endpoint";

/// Networks `down` left for dockerd's stale-endpoint bug: the rest of the
/// test goes on without them, and scripts/test restarts dockerd after the
/// suite and removes them (any other leftover still fails).
static STALE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// True when `down` failed only for dockerd's stale-endpoint bug: exit 3
/// saying so, and nothing of the lab left but networks no container uses.
/// Said loudly: it is a fault of the machine's dockerd, not a pass.
pub fn down_hit_stale_endpoint(lab: &str, code: Option<i32>, stderr: &str) -> bool {
    if code != Some(3) || !stderr.contains(STALE_ENDPOINT) {
        return false;
    }
    let left = raw_lab_objects(lab);
    let only_empty_networks = !left.is_empty() && left.iter().all(|o| is_empty_network(o));
    if only_empty_networks {
        eprintln!(
            "DOCKERD STALE ENDPOINT (dockerd 20.10's endpoint count, not a lab leak): \
             `down` of {lab} could not remove {left:?}; scripts/test restarts dockerd after the suite and removes them"
        );
        note_stale(&left);
    }
    only_empty_networks
}

/// A network no container uses.
fn is_empty_network(name: &str) -> bool {
    let used = docker(&["network", "inspect", "-f", "{{len .Containers}}", name]).output();
    matches!(used, Ok(u) if u.status.success() && String::from_utf8_lossy(&u.stdout).trim() == "0")
}

/// What a teardown the lab did on its own (a run's end, Ctrl-C) left of
/// `lab`, less networks dockerd's stale-endpoint bug keeps: no container
/// uses them and `docker network rm` still says "has active endpoints".
/// Said loudly. A network `rm` does remove was a leak, and stays counted.
pub fn left_after_teardown(lab: &str) -> Vec<String> {
    let mut left = Vec::new();
    let mut stale = Vec::new();
    for o in lab_objects(lab) {
        let refused = is_empty_network(&o)
            && docker(&["network", "rm", &o])
                .output()
                .is_ok_and(|r| String::from_utf8_lossy(&r.stderr).contains("has active endpoints"));
        if refused {
            stale.push(o);
        } else {
            left.push(o);
        }
    }
    if !stale.is_empty() {
        eprintln!(
            "DOCKERD STALE ENDPOINT (dockerd 20.10's endpoint count, not a lab leak): \
             {lab}'s teardown could not remove {stale:?}; scripts/test restarts dockerd after the suite and removes them"
        );
        note_stale(&stale);
    }
    left
}

/// Keeps networks dockerd's stale-endpoint bug held: left out of this
/// process's leak checks, and named in `e2e-stale.txt` (Cargo's scratch
/// directory for tests), the only networks scripts/test removes after
/// restarting dockerd; any other leftover it counts as a leak.
fn note_stale(networks: &[String]) {
    use std::io::Write;
    STALE.lock().unwrap().extend(networks.iter().cloned());
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("e2e-stale.txt");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        for n in networks {
            let _ = writeln!(f, "{n}");
        }
    }
}

/// The bind mounts (host paths) of `lab`'s containers, as
/// `container: source -> destination`.
pub fn host_mounts(lab: &str) -> Vec<String> {
    let filter = format!("label=cpmlab.lab={lab}");
    let ids = stdout(
        &docker(&["ps", "-aq", "--filter", &filter])
            .assert()
            .success(),
    );
    let mut v = Vec::new();
    for id in ids.lines().filter(|l| !l.is_empty()) {
        let out = stdout(
            &docker(&[
                "inspect",
                "-f",
                "{{.Name}}{{range .Mounts}}{{if eq .Type \"bind\"}}|{{.Source}} -> {{.Destination}}{{end}}{{end}}",
                id,
            ])
            .assert()
            .success(),
        );
        let mut fields = out.trim().split('|');
        let name = fields
            .next()
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string();
        v.extend(fields.map(|m| format!("{name}: {m}")));
    }
    v
}

/// Names of labelled Docker objects of `lab`: containers, networks, volumes
/// (networks dockerd's stale-endpoint bug kept, see `STALE`, left out).
pub fn lab_objects(lab: &str) -> Vec<String> {
    let stale = STALE.lock().unwrap().clone();
    raw_lab_objects(lab)
        .into_iter()
        .filter(|o| !stale.contains(o))
        .collect()
}

fn raw_lab_objects(lab: &str) -> Vec<String> {
    let filter = format!("label=cpmlab.lab={lab}");
    let mut v = Vec::new();
    for args in [
        vec!["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"],
        vec![
            "network",
            "ls",
            "--filter",
            &filter,
            "--format",
            "{{.Name}}",
        ],
        vec!["volume", "ls", "--filter", &filter, "--format", "{{.Name}}"],
    ] {
        let out = stdout(&docker(&args).assert().success());
        v.extend(out.lines().filter(|l| !l.is_empty()).map(str::to_string));
    }
    v
}

/// A lab under test with its own state directory; removed on drop.
pub struct Lab {
    pub name: String,
    pub state: tempfile::TempDir,
}

impl Lab {
    /// `tag` keeps names unique across tests; the pid across runs.
    pub fn new(tag: &str) -> Lab {
        let name = format!("e2e{tag}{}", std::process::id() % 10000);
        assert!(name.len() <= 20, "lab name {name} too long");
        Lab {
            name,
            state: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// `cpmlab` in the lab's environment as a std `Command`, for a process
    /// that runs in the background while the test goes on (an `up` to
    /// interrupt, a migration under probes): assert_cmd only runs a command
    /// to completion, it cannot spawn one.
    pub fn std_cmd(&self) -> std::process::Command {
        let mut c = std::process::Command::new(bin());
        c.env("CPMLAB_STATE_DIR", self.state.path())
            .env("CPMLAB_NAME", &self.name)
            .env_remove("RUST_LOG");
        c
    }

    /// `cpmlab` in the lab's environment, to run to completion and assert on.
    pub fn cmd(&self) -> Command {
        Command::from_std(self.std_cmd())
    }

    /// Runs `cpmlab args…` to completion; assert on the result.
    pub fn cpmlab(&self, args: &[&str]) -> Assert {
        let t = std::time::Instant::now();
        let a = self.cmd().args(args).assert();
        step_time(&self.name, args, t.elapsed(), a.get_output().status.code());
        slow_output(&self.name, args, t.elapsed(), &a.get_output().stderr);
        a
    }

    /// Runs, asserts exit 0, and returns stdout (a `down` that dockerd's
    /// stale-endpoint bug stopped counts, said loudly: `down_hit_stale_endpoint`).
    pub fn ok(&self, args: &[&str]) -> String {
        let a = self.cpmlab(args);
        if args == ["down"] {
            let o = a.get_output();
            if down_hit_stale_endpoint(
                &self.name,
                o.status.code(),
                &String::from_utf8_lossy(&o.stderr),
            ) {
                // What `down` does after removing the objects.
                let _ = std::fs::remove_dir_all(self.dir());
                return stdout(&a);
            }
        }
        stdout(&a.success())
    }

    pub fn status(&self) -> Value {
        let o = self.cpmlab(&["status", "-o", "json"]).success();
        serde_json::from_slice(&o.get_output().stdout)
            .unwrap_or_else(|e| panic!("status json: {e}\n{o}"))
    }

    /// This lab's directory under its state root (`labs/<NAME>`).
    pub fn dir(&self) -> PathBuf {
        self.state.path().join("labs").join(&self.name)
    }

    pub fn container(&self, what: &str) -> String {
        format!("{}-{what}", self.name)
    }

    /// A shell command in one of the lab's containers, to run to completion.
    pub fn exec(&self, what: &str, script: &str) -> Command {
        docker(&["exec", &self.container(what), "sh", "-c", script])
    }

    /// Starts a shell command in a container; collect it with
    /// `wait_with_output`. A std `Command`: it runs in the background while
    /// the test changes the lab, which assert_cmd cannot do.
    pub fn exec_spawn(&self, what: &str, script: &str) -> std::process::Child {
        std::process::Command::new("docker")
            .args(["exec", &self.container(what), "sh", "-c", script])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn docker exec")
    }
}

impl Lab {
    /// Deletes the API replica `name`'s pod as Kubernetes does, through the
    /// lab's own code path: its endpoint leaves its seed's gateway at once
    /// (terminating, pushed as istiod would), then the container gets
    /// SIGTERM (`docker stop -t 30`, the termination grace) and shuts down
    /// as kube-apiserver does. Returns once it stopped.
    pub fn delete_replica(&self, name: &str) -> Assert {
        let dir = cpmlab_model::state::LabDir::new(self.state.path(), &self.name);
        let mut st = dir.load().expect("the lab's state");
        let seed = {
            let a = st
                .apiservers
                .iter_mut()
                .find(|a| a.name == name)
                .unwrap_or_else(|| panic!("no replica {name}"));
            a.terminating = true;
            a.seed.clone()
        };
        dir.save(&st).expect("save the lab's state");
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            use cpmlab_runner::provider::SeedOps;
            let p = cpmlab_provider_docker::DockerProvider::connect()
                .await
                .expect("docker");
            p.sync_gateway(&st, &seed).await.expect("sync the gateway");
        });
        docker(&["stop", "-t", "30", &self.container(name)]).assert()
    }
}

impl Drop for Lab {
    /// Tears the lab down; a teardown that fails fails the test (unless it
    /// already failed), so a leak is blamed on the test that caused it.
    fn drop(&mut self) {
        let t = std::time::Instant::now();
        let out = self.cmd().arg("down").output();
        step_time(
            &self.name,
            &["down"],
            t.elapsed(),
            out.as_ref().ok().and_then(|o| o.status.code()),
        );
        let failed = match &out {
            Ok(o) if o.status.success() => return,
            Ok(o)
                if down_hit_stale_endpoint(
                    &self.name,
                    o.status.code(),
                    &String::from_utf8_lossy(&o.stderr),
                ) =>
            {
                return
            }
            Ok(o) => format!(
                "{}\n{}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim_end()
            ),
            Err(e) => e.to_string(),
        };
        eprintln!("cpmlab down of lab {} failed: {failed}", self.name);
        if !std::thread::panicking() {
            panic!("cpmlab down of lab {} failed: {failed}", self.name);
        }
    }
}

/// Where each lab command's time goes: one line per `cpmlab` command a
/// `Lab` ran (`unix time, lab, command, seconds, exit`), appended to
/// `e2e-steps.tsv` in Cargo's scratch directory for tests; scripts/test
/// prints the slowest after the suite, so a CI run says where its minutes
/// went.
pub fn step_time(lab: &str, args: &[&str], took: std::time::Duration, code: Option<i32>) {
    use std::io::Write;
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("e2e-steps.tsv");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let line = format!(
        "{now}\t{lab}\t{}\t{:.1}\t{}\n",
        args.join(" "),
        took.as_secs_f64(),
        code.map_or("-".to_string(), |c| c.to_string())
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// A lab command that took over 30 s keeps its progress lines in
/// `e2e-slow.log` (Cargo's scratch directory for tests), which
/// scripts/test prints after the suite: a minute lost in one `up` of a
/// passing test says where it went.
pub fn slow_output(lab: &str, args: &[&str], took: std::time::Duration, stderr: &[u8]) {
    use std::io::Write;
    if took < std::time::Duration::from_secs(30) {
        return;
    }
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("==>"))
        .collect();
    let tail = lines[lines.len().saturating_sub(40)..].join("\n");
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("e2e-slow.log");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(
            f,
            "=== {lab}: cpmlab {} ({:.1} s)\n{tail}",
            args.join(" "),
            took.as_secs_f64()
        );
    }
}

/// etcdctl in the toolbox (clients network), against `endpoint` by name.
pub fn etcdctl(endpoint: &str, cert: bool, args: &str) -> String {
    let auth = if cert {
        "--cert=/etc/cpmlab/pki/client.crt --key=/etc/cpmlab/pki/client.key"
    } else {
        ""
    };
    format!(
        "ETCDCTL_API=3 etcdctl --dial-timeout=2s --command-timeout=4s --endpoints=https://{endpoint}:2379 --cacert=/etc/cpmlab/pki/ca.crt {auth} {args}"
    )
}

/// The informer (a controller's list+watch) saw every acknowledged write,
/// as an event or superseded by a re-list, in order; prints its relists.
pub fn assert_informer_saw_every_write(v: &Value, what: &str) {
    let inf = &v["informer"];
    assert_eq!(inf["run"], true, "{what}: {inf:#}");
    for k in ["missed_count", "duplicated_count", "out_of_order_count"] {
        assert_eq!(inf[k], 0, "{what}: {k}: {inf:#}");
    }
    assert!(num(&inf["expected"]) > 20.0, "{what}: {inf:#}");
    assert_eq!(
        num(&inf["delivered"]) + num(&inf["superseded_by_relist"]),
        num(&inf["expected"]),
        "{what}: {inf:#}"
    );
    let by_phase: Vec<String> = inf["phases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            format!(
                "{} {} relist(s) {} error(s) worst delay {} ms",
                p["name"].as_str().unwrap_or(""),
                p["relists"],
                p["errors"],
                p["delay"]["max_ms"]
            )
        })
        .collect();
    eprintln!(
        "{what}: informer {} of {} writes as events, {} relist(s); {}",
        inf["delivered"],
        inf["expected"],
        inf["relists"],
        by_phase.join("; ")
    );
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A completed migration's run, beyond its verdict: the informer saw every
/// write, requests were answered from both seeds and the informer's last
/// watch from the destination, every step is a phase, and the logs of what
/// the migration removed (and of what runs on) are kept in `run/logs`.
pub fn assert_migrated_run(run: &Path, v: &Value, lab: &str, what: &str) {
    assert_informer_saw_every_write(v, what);
    let records = std::fs::read_to_string(run.join("records.ndjson")).unwrap();
    assert!(records.contains(r#""seed":"seed-a""#) && records.contains(r#""seed":"seed-b""#));
    let last_watch = records
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["probe"] == "informer" && r["event"] == "watch" && r["outcome"] == "ok")
        .expect("the informer watched");
    assert_eq!(last_watch["seed"], "seed-b", "{what}: {last_watch}");
    let phases: Vec<&str> = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for s in cpmlab_lab::migrate::conditions::STEPS {
        assert!(phases.contains(s), "{what}: phase {s} missing: {phases:?}");
    }
    for c in [
        "seed-a-apiserver-0",
        "seed-a-etcd-0",
        "seed-b-apiserver-0",
        "seed-b-etcd-0",
        "seed-b-gateway",
    ] {
        let p = run.join("logs").join(format!("{lab}-{c}.log"));
        let log = std::fs::read_to_string(&p).unwrap_or_default();
        assert!(
            log.lines().count() > 1,
            "{what}: no log kept at {}",
            p.display()
        );
    }
}

/// Envoy refused nothing the lab wrote to either seed's gateway during a
/// run, and took its configuration: in every sample of `gateways.ndjson`
/// no `*.update_rejected` counter is above 0, and each gateway counted
/// updates taken.
pub fn assert_envoy_rejected_nothing(run: &Path, what: &str) {
    let text = std::fs::read_to_string(run.join("gateways.ndjson")).unwrap();
    let mut took: std::collections::BTreeMap<String, f64> = Default::default();
    for l in text.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        let seed = v["seed"].as_str().unwrap_or("").to_string();
        let Some(stats) = v["stats"].as_object() else {
            continue;
        };
        for (k, n) in stats {
            if k.ends_with(".update_rejected") {
                assert_eq!(
                    n.as_f64(),
                    Some(0.0),
                    "{what}: Envoy at {seed} rejected an update: {k}; what its log says:\n{}",
                    gateway_rejections(run, &seed)
                );
            }
            if k.ends_with(".update_success") {
                *took.entry(seed.clone()).or_default() += n.as_f64().unwrap_or(0.0);
            }
        }
    }
    for seed in ["seed-a", "seed-b"] {
        assert!(
            took.get(seed).copied().unwrap_or(0.0) > 0.0,
            "{what}: no update taken at {seed}'s gateway: {took:?}"
        );
    }
}

/// The lines of `seed`'s gateway log (`run/logs/*-<seed>-gateway.log`) in
/// which Envoy says why it rejected a configuration.
fn gateway_rejections(run: &Path, seed: &str) -> String {
    let suffix = format!("-{seed}-gateway.log");
    let mut out = String::new();
    for entry in std::fs::read_dir(run.join("logs"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().to_string();
        if !name.ends_with(&suffix) {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for l in text
            .lines()
            .filter(|l| l.contains("rejected") || l.contains("gRPC config"))
        {
            out.push_str(&format!("  {name}: {l}\n"));
        }
    }
    if out.is_empty() {
        out = format!("  (no rejection in {}/logs/*{suffix})\n", run.display());
    }
    out
}

/// A run that did not pass explains itself in the test's output (CI keeps
/// only that): each failed request as the probes recorded it, and where a
/// copy of the whole report directory stays for a person to read.
pub fn explain_failure(report: &Path, lab: &str) {
    let kept = std::env::temp_dir().join("cpmlab-e2e-failed").join(lab);
    let _ = std::fs::remove_dir_all(&kept);
    let _ = std::fs::create_dir_all(kept.parent().unwrap());
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(report)
        .arg(&kept)
        .status()
        .is_ok_and(|s| s.success());
    if copied {
        eprintln!("the report directory is kept in {}", kept.display());
    }
    for dir in std::fs::read_dir(report).into_iter().flatten().flatten() {
        let records = dir.path().join("run/records.ndjson");
        let Ok(text) = std::fs::read_to_string(&records) else {
            continue;
        };
        let failed: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["outcome"].as_str().is_some_and(|o| o != "ok"))
            .collect();
        eprintln!(
            "{}: {} failed record(s), the first 20:",
            records.display(),
            failed.len()
        );
        for r in failed.iter().take(20) {
            eprintln!(
                "  {} {}/{} {} {} seed={} at {} ms: {}",
                r["seq"],
                r["probe"].as_str().unwrap_or("?"),
                r["mode"].as_str().unwrap_or("?"),
                r["event"].as_str().unwrap_or("-"),
                r["outcome"].as_str().unwrap_or("?"),
                r["seed"].as_str().unwrap_or("?"),
                r["start_unix_ms"].as_f64().map(|t| t as u64).unwrap_or(0),
                r["error"].as_str().unwrap_or("")
            );
        }
    }
}

/// A finished command's exit code, stdout and stderr, for a failure message.
pub fn show_output(o: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `kubectl --kubeconfig <kubeconfig> args…`, run to completion.
pub fn kubectl_at(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap()
}

/// `kubectl` as [`kubectl_at`], asserting it succeeded; its stdout.
pub fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let o = kubectl_at(kubeconfig, args);
    assert!(o.status.success(), "kubectl {args:?}: {}", show_output(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The Shoot as the garden has it (`kubectl get shoot -o json` through the
/// garden's kubeconfig, `cpmlab kubeconfig --garden`).
pub fn garden_shoot(lab: &Lab) -> Value {
    garden_get(
        lab,
        &["-n", "garden-local", "get", "shoot", "local", "-o", "json"],
    )
}

/// `kubectl args…` against the garden (`cpmlab kubeconfig --garden`), its
/// JSON output.
fn garden_get(lab: &Lab, args: &[&str]) -> Value {
    let k = lab.ok(&["kubeconfig", "--garden"]);
    serde_json::from_str(&kubectl_ok(Path::new(k.trim()), args)).unwrap()
}

/// The Shoot's live-migration intent (the annotation an operator sets with
/// the trigger), if it is still there.
pub fn live_migrate_intent(shoot: &Value) -> Option<&Value> {
    shoot["metadata"]["annotations"].get("migration.gardener.cloud/live-migrate")
}

/// One step's condition on the Shoot's `status.liveMigration`.
pub fn shoot_condition(shoot: &Value, step: &str) -> Value {
    shoot["status"]["liveMigration"]["conditions"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["type"] == step).cloned())
        .unwrap_or(Value::Null)
}

/// Before a trigger: each gardenlet reported its version on its Seed in
/// the garden, and the Shoot is bound to the source.
pub fn assert_garden_before_the_trigger(lab: &Lab) {
    let before = garden_shoot(lab);
    assert_eq!(before["status"]["seedName"], "seed-a", "{before:#}");
    let seeds = garden_get(lab, &["get", "seeds", "-o", "json"]);
    for s in seeds["items"].as_array().unwrap() {
        assert_eq!(s["status"]["gardener"]["version"], "v1.150.0", "{s:#}");
    }
}

/// A completed migration as an operator sees it in the garden: every
/// condition True (`StepCompleted`) on the Shoot read back from
/// gardener-apiserver, the Shoot bound to the destination, the intent
/// spent, `cpmlab status` reading its conditions from the garden, and
/// each gardenlet's log naming a step it owns (the source's
/// SourceSeedCleanup, the destination's EtcdMigrationComplete).
pub fn assert_garden_recorded_the_migration(lab: &Lab) {
    let s = garden_shoot(lab);
    for step in STEPS {
        let c = shoot_condition(&s, step);
        assert_eq!(c["status"], "True", "{step}: {c:#}");
        assert_eq!(c["reason"], "StepCompleted", "{step}: {c:#}");
    }
    assert_eq!(s["spec"]["seedName"], "seed-b");
    assert_eq!(s["status"]["seedName"], "seed-b");
    assert!(live_migrate_intent(&s).is_none(), "{s:#}");
    let st = lab.status();
    assert_eq!(st["garden"]["conditions_from"], "garden", "{st:#}");
    assert_eq!(st["migration"]["completed"], true, "{st:#}");
    for (seed, step) in [
        ("seed-a", "SourceSeedCleanup"),
        ("seed-b", "EtcdMigrationComplete"),
    ] {
        let o = docker(&["logs", &format!("{}-{seed}-gardenlet", lab.name)])
            .output()
            .unwrap();
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(log.contains(step), "{seed}'s gardenlet ran {step}:\n{log}");
    }
}

/// A one-member etcd on loopback: the arguments for `etcd`, its data in
/// `data_dir`, clients on `client_port`, its peer URL on `peer_port`.
pub fn loopback_etcd_args(data_dir: &Path, client_port: u16, peer_port: u16) -> Vec<String> {
    let client = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    vec![
        "--name=t".into(),
        format!("--data-dir={}", data_dir.display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=t={peer}"),
    ]
}

/// An API server's serving certificate for loopback (`localhost`,
/// 127.0.0.1), signed by `ca`.
pub fn loopback_serving_cert(ca: &cpmlab_core::pki::Ca) -> cpmlab_core::pki::CertKey {
    ca.issue_member(
        "apiserver",
        &["localhost".into()],
        &["127.0.0.1".parse().unwrap()],
    )
    .unwrap()
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A user who is not root, in the `docker` group, with a home of its own
/// (`/tmp/cpmlab-nonroot`): the shape of a developer's Linux machine, where
/// cpmlab runs with nothing but access to Docker's socket. Made by root
/// (`Need::Root`), idempotently.
pub struct NonRoot {
    pub user: &'static str,
    pub home: PathBuf,
    /// A copy of the binary under test the user can run.
    pub bin: PathBuf,
}

/// The Go parts a docker-form run uses, and their build records.
const DOCKER_FORM_PARTS: &[&str] = &[
    "kube-apiserver",
    "cpmlab-apiserver",
    "cpmlab-clientgo",
    "envoy",
    "etcd-3.4",
    "etcd-3.5",
    "etcd-3.6",
    "etcdctl-3.6",
    // The garden's API, in every lab.
    "gardener-apiserver",
];

/// The docker form's Go parts, as this machine built them, placed in
/// `parts` (another cache's `cpmlab/bin`): hard links, or copies across
/// file systems.
pub fn link_go_parts(parts: &Path) {
    std::fs::create_dir_all(parts).unwrap();
    let ours = cpmlab_core::go_parts::install_dir().expect("HOME or XDG_CACHE_HOME");
    for p in DOCKER_FORM_PARTS {
        for name in [p.to_string(), format!("{p}.json")] {
            let (from, to) = (ours.join(&name), parts.join(&name));
            if !from.is_file() {
                continue;
            }
            let _ = std::fs::remove_file(&to);
            if std::fs::hard_link(&from, &to).is_err() {
                std::fs::copy(&from, &to).unwrap();
            }
        }
    }
}

impl NonRoot {
    pub fn prepare() -> NonRoot {
        let user = "cpmlab-nonroot";
        let home = PathBuf::from("/tmp").join(user);
        let run = |args: &[&str]| {
            let o = std::process::Command::new(args[0])
                .args(&args[1..])
                .output()
                .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")));
            assert!(
                o.status.success(),
                "{}: {}",
                args.join(" "),
                String::from_utf8_lossy(&o.stderr)
            );
        };
        let exists = std::process::Command::new("id")
            .arg(user)
            .output()
            .is_ok_and(|o| o.status.success());
        if !exists {
            run(&[
                "useradd",
                "--no-create-home",
                "--home-dir",
                home.to_str().unwrap(),
                "--shell",
                "/usr/sbin/nologin",
                "--groups",
                "docker",
                user,
            ]);
        }
        // The user's cache holds the Go parts as root built them: hard
        // links (or copies across file systems), never root's files
        // handed over (their owner stays root).
        let parts = home.join("cache/cpmlab/bin");
        link_go_parts(&parts);
        let bin = home.join("cpmlab");
        let _ = std::fs::remove_file(&bin);
        std::fs::copy(self::bin(), &bin).unwrap();
        for d in [
            home.clone(),
            home.join("cache"),
            home.join("cache/cpmlab"),
            parts,
        ] {
            run(&["chown", user, d.to_str().unwrap()]);
        }
        NonRoot { user, home, bin }
    }

    /// The binary, run as the user (its HOME and cache, a plain PATH).
    pub fn cpmlab(&self) -> Command {
        let mut c = Command::new("runuser");
        c.args(["-u", self.user, "--", "env"])
            .arg(format!("HOME={}", self.home.display()))
            .arg(format!(
                "XDG_CACHE_HOME={}",
                self.home.join("cache").display()
            ))
            .arg("PATH=/usr/local/bin:/usr/bin:/bin")
            .arg(&self.bin);
        c
    }

    /// Hands an (empty) directory root made to the user.
    pub fn own(&self, dir: &Path) {
        let o = std::process::Command::new("chown")
            .arg(self.user)
            .arg(dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "chown {}", dir.display());
    }
}

/// What read a command's exit past dockerd's stale-endpoint bug: which
/// exit the command gives when its runs' teardowns all went well.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exits {
    /// `cpmlab run`: 0 when every scenario passed, else 1.
    Run,
    /// `cpmlab compare`: 0 when every run got to its verdict, else 1.
    Compare,
    /// `cpmlab envelope`: 0 (it stops with 3 after a run whose `down` failed).
    Envelope,
}

/// The exit of `cpmlab run`, `compare` or `envelope` read past
/// dockerd's stale-endpoint bug at a run's teardown. A run whose `down`
/// failed exits 3 (an environment problem, rightly); when the only such
/// problems under `report` (the result.json files of its runs) are that bug
/// (the teardown names the stale endpoint, the run had no error of its own,
/// and [`left_after_teardown`] or [`down_hit_stale_endpoint`] found the
/// lab's network held by it), the exit is what the command gives without
/// it, computed from the same results. Said loudly. Any other exit, and any
/// other environment problem, is returned as it was.
pub fn exit_past_stale_teardown(code: Option<i32>, report: &Path, cmd: Exits) -> Option<i32> {
    if code != Some(3) {
        return code;
    }
    let results = result_files(report);
    let stale = STALE.lock().unwrap().clone();
    let held = |r: &Value| {
        let lab = r["lab"].as_str().unwrap_or("");
        r["error"].is_null()
            && r["teardown_error"]
                .as_str()
                .is_some_and(|e| e.contains(STALE_ENDPOINT))
            && stale
                .iter()
                .any(|n| !lab.is_empty() && n.starts_with(&format!("{lab}-")))
    };
    let by_bug: Vec<&Value> = results.iter().filter(|r| held(r)).collect();
    if by_bug.is_empty() || results.iter().any(|r| r["env_error"] == true && !held(r)) {
        return code;
    }
    let without = match cmd {
        Exits::Run => i32::from(!results.iter().all(|r| r["passed"] == true)),
        Exits::Compare => i32::from(
            !results
                .iter()
                .all(|r| r["error"].is_null() && r["incomplete"] != true),
        ),
        Exits::Envelope => 0,
    };
    eprintln!(
        "DOCKERD STALE ENDPOINT (dockerd 20.10's endpoint count, not a lab leak): {} run(s) exited 3 \
         only because their `down` hit it ({}); read as exit {without}, what the runs themselves give",
        by_bug.len(),
        by_bug
            .iter()
            .map(|r| r["name"].as_str().unwrap_or("?"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Some(without)
}

/// The labs the runs under `report` had (their result.json files say).
pub fn labs_in(report: &Path) -> Vec<String> {
    let mut labs: Vec<String> = result_files(report)
        .iter()
        .filter_map(|r| r["lab"].as_str().map(str::to_string))
        .collect();
    labs.sort();
    labs.dedup();
    labs
}

/// Every result.json under `dir`, parsed (those that do not parse are left
/// out: the command's own checks name them).
fn result_files(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(result_files(&p));
        } else if p.file_name().is_some_and(|n| n == "result.json") {
            if let Some(v) = std::fs::read_to_string(&p)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
            {
                out.push(v);
            }
        }
    }
    out
}

/// The suite's DNS TTL, 10 s, where a fixture that is not about DNS sets
/// 30 s (`FIXTURE_TTL`): a migration waits one TTL for DNS caches
/// (EtcdMigrationComplete), so each such run gives CI's budget 20 s back;
/// clients that honour the TTL move as before.
pub const SUITE_TTL: &str = "  dns: {ttl: 10}\n";
/// The 30 s TTL such a fixture's topology sets.
pub const FIXTURE_TTL: &str = "  dns: {ttl: 30}\n";

/// `fixture`'s text with the suite's TTL in place of its 30 s, in a file
/// of the same name in a new directory (kept as long as the returned
/// guard); `None` where the fixture sets no 30 s TTL.
pub fn at_suite_ttl(fixture: &Path) -> Option<(PathBuf, tempfile::TempDir)> {
    let text =
        std::fs::read_to_string(fixture).unwrap_or_else(|e| panic!("{}: {e}", fixture.display()));
    if !text.contains(FIXTURE_TTL) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(fixture.file_name().unwrap());
    std::fs::write(&p, text.replace(FIXTURE_TTL, SUITE_TTL)).unwrap();
    Some((p, dir))
}

/// Polls the runs' records so far (each `records.ndjson`, written as the
/// agents go) until `enough` holds of them, for at most `limit`; whether
/// it held.
pub fn until_records(
    runs: &[&Path],
    limit: std::time::Duration,
    enough: impl Fn(&[Vec<cpmlab_verdict::record::Record>]) -> bool,
) -> bool {
    let t0 = std::time::Instant::now();
    loop {
        let rs: Vec<_> = runs
            .iter()
            .map(|r| cpmlab_verdict::read_records(&r.join("records.ndjson")).unwrap_or_default())
            .collect();
        if enough(&rs) {
            return true;
        }
        if t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
