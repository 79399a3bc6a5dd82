//! `cpmlab migrate` on the docker provider, with probes running: both
//! membership plans at 0 and 25 ms one-way between the seeds, the abort
//! path, force-shrink, the distant-region refusal (on the bad-input test's
//! lab), resume after SIGKILL, and
//! etcd members killed mid-migration.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::assert::{Assert, OutputAssertExt};
use base64::Engine as _;
use common::*;
use predicates::prelude::*;
use serde_json::Value;

fn quick_topology() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/topologies/quick-migration.yaml")
        .display()
        .to_string()
}

/// A quick lab on the real kube-apiserver (built from k8s.io/kubernetes by
/// scripts/build-go), which CI=true requires: the suite's default.
fn up(lab: &Lab) {
    up_with(lab, Api::Kube)
}

/// The shoot API by TLS passthrough: these tests hold the migration flow
/// to zero downtime on reused connections too, which only passthrough
/// gives (a draining replica's GOAWAY reaches the client). Gardener's
/// default, TLS termination at the gateway, fails requests on connections
/// kept to the source gateway by design: the fixtures
/// six-/five-member-25ms measure that (scenarios.rs).
fn up_with(lab: &Lab, api: Api) {
    let name = api.name();
    lab.ok(&[
        "up",
        "--topology",
        &quick_topology(),
        "--api-server",
        name,
        "--api-exposure",
        "passthrough",
    ]);
    let s = lab.status();
    assert_eq!(s["api"]["server"], name, "{s:#}");
}

/// Probes with [`PROBE_TIMEOUT_MS`]: longer than etcd's 7 s request
/// timeout, so a request etcd fails is seen with etcd's own error.
fn probe_start(lab: &Lab, extra: &[&str]) -> PathBuf {
    let timeout = format!("{PROBE_TIMEOUT_MS}ms");
    let mut a = vec!["probe", "start", "--timeout", &timeout];
    a.extend_from_slice(extra);
    PathBuf::from(lab.ok(&a).trim())
}

/// Stops the probes, once they show a write acknowledged after this call
/// (the verdict's coverage asks for one after the last step: a write in
/// flight when the migration ended may take up to the probe timeout);
/// the verdict (exit 0 passed, 1 failed) and its JSON.
fn probe_stop(lab: &Lab, run: &Path) -> (Option<i32>, Value) {
    until_a_write_after(run, unix_ms_now());
    let o = lab.cpmlab(&["probe", "stop"]);
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("verdict.json"))
            .unwrap_or_else(|e| panic!("verdict.json: {e}\n{o}")),
    )
    .unwrap();
    (o.get_output().status.code(), v)
}

fn unix_ms_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1e3
}

/// Waits until `records.ndjson` holds a write that started at or after
/// `since` and was acknowledged; fails after the probe timeout and 20 s
/// more: the API took no write at the end.
fn until_a_write_after(run: &Path, since: f64) {
    let limit = Duration::from_millis(PROBE_TIMEOUT_MS as u64 + 20_000);
    let acknowledged = until_records(&[run], limit, |rs| {
        rs[0].iter().any(|r| {
            r.probe == cpmlab_verdict::record::ProbeKind::Write
                && r.outcome == cpmlab_verdict::record::Outcome::Ok
                && r.start_unix_ms >= since
        })
    });
    assert!(
        acknowledged,
        "no write acknowledged within {limit:?} after the migration: the API took no writes at the end"
    );
}

/// The migration's conditions straight from the state file (cheap to poll).
fn state_file(lab: &Lab) -> Value {
    let p = lab.dir().join("state.json");
    std::fs::read_to_string(&p)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

fn condition(state: &Value, kind: &str) -> Value {
    state["migration"]["conditions"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["type"] == kind).cloned())
        .unwrap_or(Value::Null)
}

/// Waits until `pred` holds for the state file.
fn wait_state(lab: &Lab, what: &str, limit: Duration, pred: impl Fn(&Value) -> bool) -> Value {
    let t0 = Instant::now();
    loop {
        let s = state_file(lab);
        if pred(&s) {
            return s;
        }
        assert!(
            t0.elapsed() < limit,
            "{what}: not within {limit:?}; last state: {:#}",
            s["migration"]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn progressing(s: &Value, step: &str) -> bool {
    condition(s, step)["status"] == "Progressing"
}

/// Step 2 is running and a destination member is in the state.
fn destination_member_in_step_2(s: &Value) -> bool {
    progressing(s, "DestinationEtcdPeersJoined")
        && s["members"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["seed"] == "seed-b"))
}

/// `cpmlab migrate` in the background, to be killed or joined while the test
/// watches the state (a std Command: assert_cmd cannot spawn).
fn spawn_migrate(lab: &Lab, args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut c = lab.std_cmd();
    c.arg("migrate").args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cpmlab migrate")
}

/// Waits for a spawned migration; assert on its result.
fn finish(child: Child) -> Assert {
    child
        .wait_with_output()
        .expect("wait for cpmlab migrate")
        .assert()
}

/// The end state of a completed migration: three healthy voters, all in
/// seed-b, one leader; the API name answers seed-b's gateway; no shoot
/// container (etcd, API server) left in seed-a; every condition True.
fn assert_migrated(lab: &Lab) -> Value {
    let s = lab.status();
    let ms = s["etcd"]["members"].as_array().expect("members").clone();
    assert_eq!(ms.len(), 3, "three members: {:#}", s["etcd"]);
    for m in &ms {
        assert_eq!(m["seed"], "seed-b", "{m:#}");
        assert_eq!(m["is_learner"], false, "{m:#}");
        assert_eq!(m["healthy"], true, "{m:#}");
    }
    assert_eq!(ms.iter().filter(|m| m["is_leader"] == true).count(), 1);
    let gw_b = s["seeds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "seed-b")
        .unwrap()["gateway_ip"]
        .clone();
    assert_eq!(s["dns"]["answer"], serde_json::json!([gw_b]), "{s:#}");
    let left: Vec<&Value> = s["containers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["seed"] == "seed-a" && (c["role"] == "etcd" || c["role"] == "apiserver"))
        .collect();
    assert!(left.is_empty(), "source containers remain: {left:?}");
    let vols = stdout(
        &docker(&[
            "volume",
            "ls",
            "--filter",
            &format!("label=cpmlab.lab={}", lab.name),
            "--format",
            "{{.Name}}",
        ])
        .assert(),
    );
    assert!(!vols.contains("seed-a-etcd"), "source data remains: {vols}");
    let conds = s["migration"]["conditions"].as_array().expect("conditions");
    let kinds: Vec<&str> = conds.iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, STEPS);
    for c in conds {
        assert_eq!(c["status"], "True", "{c:#}");
        assert!(c["lastTransitionTime"].as_str().unwrap().contains('T'));
    }
    assert_eq!(s["migration"]["completed"], true);
    for r in s["api"]["replicas"].as_array().unwrap() {
        assert_eq!(r["seed"], "seed-b", "{r:#}");
        assert_eq!(r["ready"], true, "{r:#}");
    }
    s
}

/// Every acknowledged ledger write is in the destination's etcd history at
/// the revision it was acknowledged with, and revisions only go up: no
/// revision was lost on the way (what the GEP rejects mirror-maker for).
fn assert_ledger_in_history(lab: &Lab, run: &Path) {
    let acked = acked_writes(run);
    assert!(
        acked.len() > 20,
        "too few acknowledged writes: {}",
        acked.len()
    );
    let history = etcd_history(lab);
    assert!(
        history.windows(2).all(|w| w[0].1 < w[1].1),
        "revisions went back in the history"
    );
    for (value, rv) in &acked {
        assert!(
            history.contains(&(*value, *rv)),
            "acknowledged write {value} at rv {rv} is not in the destination's history"
        );
    }
}

/// (value, resourceVersion) of every write the API acknowledged (the
/// writer's reads too: each returned a version).
fn acked_writes(run: &Path) -> Vec<(u64, u64)> {
    let records = std::fs::read_to_string(run.join("records.ndjson")).unwrap();
    records
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["probe"] == "write" && r["outcome"] == "ok")
        .filter_map(|r| Some((r["value"].as_u64()?, r["rv"].as_u64()?)))
        .collect()
}

/// Every version of the probes' counter in etcd, (value, mod revision), as
/// etcdctl reads it from a destination member: the test's own look, not
/// the verdict's.
fn etcd_history(lab: &Lab) -> Vec<(u64, u64)> {
    let key = "/registry/configmaps/cpmlab-probes/probe-counter";
    let o = lab
        .exec(
            "toolbox",
            &format!(
                "timeout 6 env {} || true",
                etcdctl(
                    "seed-b-etcd-0.local.cpmlab.test",
                    true,
                    &format!("watch --rev=1 -w json {key}")
                )
            ),
        )
        .assert();
    let out = stdout(&o);
    let mut history: Vec<(u64, u64)> = Vec::new();
    for line in out.lines().filter(|l| l.starts_with('{')) {
        let w: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        for ev in w["Events"].as_array().into_iter().flatten() {
            let rev = ev["kv"]["mod_revision"].as_u64().unwrap_or(0);
            let raw = base64::engine::general_purpose::STANDARD
                .decode(ev["kv"]["value"].as_str().unwrap_or(""))
                .unwrap_or_default();
            // JSON from the stand-in, protobuf from k8s.io/apiserver.
            if let Some(v) = cpmlab_probe::final_read::stored_counter(&raw) {
                history.push((v, rev));
            }
        }
    }
    assert!(!history.is_empty(), "no history read:\n{o}");
    history
}

/// The probes' timeout in this suite: longer than etcd's 7 s request
/// timeout, so that a proposal MoveLeader drops shows as etcd's error.
const PROBE_TIMEOUT_MS: f64 = 10_000.0;

/// The known hazards a migration without injected faults meets: its own
/// MoveLeader may drop the write in flight (the scenario fixtures' budget),
/// and /readyz, which checks etcd, may fail while leadership changes hands
/// (the transfer etcd's own logs show; seen once in CI: `[-]etcd failed`,
/// 25 ms). Reads, lists and watches get no budget.
const MOVE_LEADER_BUDGET: &str = r#"{"excuse": {"move-leader": {"max": 1, "max_ms": 8000}, "leader-election": {"max": 2, "max_ms": 2000, "lanes": ["readyz"]}}}"#;

/// Zero downtime, but for what the migration's own MoveLeader may cost:
/// `cpmlab verdict` judges the run with [`MOVE_LEADER_BUDGET`] and must
/// exit 0, saying PASSED, or PASSED WITH KNOWN HAZARDS with at most one
/// excused write of at most 8 s and two readyz of at most 2 s in a
/// leadership change etcd logged; whether that write's value never applied
/// is checked here against etcd's own history (etcdctl), not the verdict's
/// read of it. `stop_code` is `probe stop`'s exit, which judged the run
/// with nothing excused: 0 exactly when nothing needed excusing. Returns
/// how many were excused.
fn assert_zero_downtime(lab: &Lab, run: &Path, stop_code: Option<i32>, what: &str) -> u64 {
    let criteria = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(criteria.path(), MOVE_LEADER_BUDGET).unwrap();
    let o = lab.cpmlab(&[
        "verdict",
        run.to_str().unwrap(),
        "--criteria",
        criteria.path().to_str().unwrap(),
    ]);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("verdict.json")).unwrap()).unwrap();
    assert_eq!(
        o.get_output().status.code(),
        Some(0),
        "{what}: the verdict failed with the move-leader budget: {:#}\n{}",
        v["reasons"],
        stdout(&o)
    );
    let n = v["excuses"]["excused_count"].as_u64().unwrap();
    assert!(
        n <= 3,
        "{what}: {n} excused, budget 1 + 2: {:#}",
        v["excuses"]
    );
    assert_eq!(
        v["status"],
        if n == 0 {
            "passed"
        } else {
            "passed-with-known-hazards"
        },
        "{what}: {:#}",
        v["rules"]
    );
    assert_eq!(
        stop_code,
        Some(if n == 0 { 0 } else { 1 }),
        "{what}: `probe stop` (nothing excused) and the budgeted verdict disagree"
    );
    if n == 0 {
        return 0;
    }
    let history = etcd_history(lab);
    let acked = acked_writes(run);
    for e in v["excuses"]["excused"].as_array().unwrap() {
        if e["hazard"] == "leader-election" {
            assert!(e["lane"].as_str().unwrap().starts_with("readyz/"), "{e}");
            assert!(e["duration_ms"].as_f64().unwrap() <= 2_000.0, "{e}");
            eprintln!("{what}: readyz failed while leadership changed hands, excused: {e}");
            continue;
        }
        assert_eq!(e["hazard"], "move-leader", "{e}");
        assert!(e["lane"].as_str().unwrap().starts_with("write/"), "{e}");
        assert!(e["duration_ms"].as_f64().unwrap() <= 8_000.0, "{e}");
        let seq = e["seq"].as_u64().unwrap();
        let rec = std::fs::read_to_string(run.join("records.ndjson"))
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["seq"] == seq && r["probe"] == "write")
            .unwrap_or_else(|| panic!("{what}: the excused write {seq} is in the records"));
        let value = rec["value"].as_u64().unwrap();
        // Every version carrying its value is another write's acknowledged
        // one: this write never applied.
        for (v, rev) in history.iter().filter(|(v, _)| *v == value) {
            assert!(
                acked.contains(&(*v, *rev)),
                "{what}: the excused write's value {value} is in etcd at rev {rev}, acknowledged by no write: it may have applied"
            );
        }
    }
    eprintln!("{what}: {n} excused within budget; etcd's history shows every excused write's value never applied");
    n
}

/// Which API server a migration test runs.
#[derive(Clone, Copy, PartialEq)]
enum Api {
    Kube,
    Standin,
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Api::Kube => "kube-apiserver",
            Api::Standin => "standin",
        }
    }
}

/// A full migration under probes: zero downtime, nothing lost, nothing missed.
fn migrate_with_zero_downtime(tag: &str, plan: &str, one_way_ms: u32, api: Api) {
    let test = format!("{plan} at {one_way_ms} ms ({})", api.name());
    if !needs_docker(&test) || (api == Api::Kube && !needs_kube_apiserver(&test)) {
        return;
    }
    let lab = Lab::new(tag);
    up_with(&lab, api);
    if one_way_ms > 0 {
        lab.ok(&[
            "link",
            "set",
            "seed-a:seed-b",
            "--delay",
            &format!("{one_way_ms}ms"),
        ]);
    }
    let run = probe_start(&lab, &[]);
    std::thread::sleep(Duration::from_secs(2));
    lab.cpmlab(&[
        "migrate",
        "--plan",
        plan,
        "--leader-handover",
        "move-leader",
        // The order whose drain passthrough turns into zero downtime on
        // kept connections; the GEP's is measured by scenarios.rs.
        "--order",
        "early-drain",
    ])
    .success()
    .stderr(predicate::str::contains("MigrationCompleted"));
    let (code, v) = probe_stop(&lab, &run);
    assert_zero_downtime(&lab, &run, code, &test);
    assert_migrated_run(&run, &v, &lab.name, &test);
    let s = assert_migrated(&lab);
    let joined = STEPS[1];
    let msg = s["migration"]["conditions"][1]["message"].as_str().unwrap();
    assert_eq!(s["migration"]["conditions"][1]["type"], joined);
    let peak = if plan == "six-member" {
        "6 voters"
    } else {
        "5 voters"
    };
    assert!(msg.contains(peak), "{plan}: {msg}");
    assert_ledger_in_history(&lab, &run);
}

// Both plans across the WAN on the real kube-apiserver are scenario
// fixtures (e2e/tests/scenarios.rs; every fixture runs nightly); the
// stand-in keeps its own smaller suite in CI: the six-member plan at 0 ms
// here, its failpoints in probes.rs.

#[test]
#[ignore = "nightly: scripts/nightly runs it; CI migrates on kube-apiserver; the stand-in keeps its failpoint tests in probes.rs"]
fn six_member_at_0ms_standin() {
    migrate_with_zero_downtime("m6z", "six-member", 0, Api::Standin);
}

/// `cpmlab migrate` is the operator: it triggers in the garden and follows
/// the Shoot's conditions. Killed (SIGKILL) in step 2, the gardenlets go
/// on without it; `--resume` follows again to the end, and a completed
/// migration has nothing to resume. The garden recorded it as an operator
/// sees it: each gardenlet's version on its Seed before, every condition
/// True on the Shoot read back from gardener-apiserver after, each written
/// by its owner's gardenlet, the Shoot bound to the destination, the intent
/// spent, and `cpmlab status` reading the conditions from the garden.
/// (Gardenlets killed inside their steps: scenarios.rs,
/// gardenlets-killed-in-two-steps.yaml.)
#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn the_gardenlets_go_on_when_the_operator_s_command_is_killed() {
    if !needs_docker("the_gardenlets_go_on_when_the_operator_s_command_is_killed") {
        return;
    }
    let lab = Lab::new("mrs");
    up(&lab);
    assert_garden_before_the_trigger(&lab);
    let run = probe_start(&lab, &[]);
    let hold = [("CPMLAB_TEST_HOLD", "DestinationEtcdPeersJoined:3s")];
    let mut child = spawn_migrate(
        &lab,
        &["--leader-handover", "move-leader", "--order", "early-drain"],
        &hold,
    );
    wait_state(
        &lab,
        "a destination member in step 2",
        Duration::from_secs(90),
        destination_member_in_step_2,
    );
    child.kill().unwrap();
    // SIGKILLed: no exit code.
    finish(child).interrupted();
    // The gardenlets went on: step 5 comes without the command.
    wait_state(
        &lab,
        "step 5 without the command",
        Duration::from_secs(180),
        |s| {
            condition(s, "MigrateDNSRecords")["status"] != "Unknown"
                && !condition(s, "MigrateDNSRecords").is_null()
        },
    );
    lab.cpmlab(&["migrate", "--resume"])
        .success()
        .stderr(predicate::str::contains("MigrationCompleted"));
    // Resuming a completed migration is refused clearly.
    lab.cpmlab(&["migrate", "--resume"])
        .code(2)
        .stderr(predicate::str::contains("no migration to resume"));
    assert_migrated(&lab);
    assert_garden_recorded_the_migration(&lab);
    let (code, _) = probe_stop(&lab, &run);
    assert_zero_downtime(&lab, &run, code, "resume");
    assert_ledger_in_history(&lab, &run);
}

#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn an_external_driver_migrates_under_the_same_verdict() {
    if !needs_docker("an_external_driver_migrates_under_the_same_verdict") {
        return;
    }
    let lab = Lab::new("mex");
    up(&lab);
    let run = probe_start(&lab, &[]);
    std::thread::sleep(Duration::from_secs(1));
    // The driver takes the gardenlets' place: the lab triggers in the
    // garden with `cpmlab.lab/driver: external` (its own gardenlets stand
    // aside), and the driver gets each seed's gardenlet identity in the
    // garden. Here it runs the lab's gardenlet code on this host, one per
    // seed, as an outside build would run, and waits for the Shoot's last
    // condition; the lab probes and judges meanwhile.
    let drive = r#"set -e
test -n "$KUBECONFIG" && test -f "$KUBECONFIG"
test -f "$CPMLAB_GARDEN_KUBECONFIG" && test -f "$CPMLAB_SOURCE_GARDEN_KUBECONFIG" && test -f "$CPMLAB_DESTINATION_GARDEN_KUBECONFIG"
test "$CPMLAB_SHOOT_NAMESPACE" = garden-local && test "$CPMLAB_SHOOT_NAME" = local
"$CPMLAB_BIN" link set seed-a:seed-b --delay 5ms >/dev/null
pids=
for s in "$CPMLAB_SOURCE_SEED" "$CPMLAB_DESTINATION_SEED"; do
  "$CPMLAB_BIN" agent gardenlet --external --name "$CPMLAB_NAME" --seed "$s" --state-dir "$CPMLAB_STATE_DIR" >>"$CPMLAB_STATE_DIR/external-$s.log" 2>&1 &
  pids="$pids $!"
done
n=0
until "$CPMLAB_BIN" status --name "$CPMLAB_NAME" -o json | grep -q '"completed": true'; do
  n=$((n + 1))
  if [ "$n" -gt 400 ]; then
    echo "no migration completed within 400 s; the gardenlets said:" >&2
    tail -n 40 "$CPMLAB_STATE_DIR"/external-*.log >&2
    "$CPMLAB_BIN" status --name "$CPMLAB_NAME" >&2
    kill $pids
    exit 1
  fi
  sleep 1
done
kill $pids
"$CPMLAB_BIN" link clear >/dev/null"#;
    // A driver that fails first: its exit is the command's, and the
    // migration it left stays in progress. The trigger's settings (the
    // early drain and MoveLeader, as the lab's zero-downtime migrations
    // run: the GEP's order with no gateway handover fails the connections
    // kept to the source once its members leave) travel on the Shoot to
    // the driver run again below.
    lab.cpmlab(&[
        "migrate",
        "--driver",
        "external",
        "--leader-handover",
        "move-leader",
        "--order",
        "early-drain",
        "--command",
        "exit 7",
    ])
    .code(1)
    .stderr(predicate::str::contains("exited 7"));
    // The lab's gardenlets stand aside from it: their resume and abort
    // refuse it and say what to run.
    lab.cpmlab(&["migrate", "--resume"])
        .code(2)
        .stderr(predicate::str::contains(
            "seed-a -> seed-b in progress was triggered for an external driver",
        ))
        .stderr(predicate::str::contains(
            "--driver external --resume --command",
        ));
    lab.cpmlab(&["migrate", "--abort"])
        .code(2)
        .stderr(predicate::str::contains("it aborts its own migration"));
    lab.cpmlab(&[
        "migrate",
        "--driver",
        "external",
        "--abort",
        "--command",
        "true",
    ])
    .code(2);
    // A new migration is refused while it is in progress.
    lab.cpmlab(&["migrate", "--driver", "external", "--command", "true"])
        .code(2)
        .stderr(predicate::str::contains("in progress"));
    // The driver run again for it runs every step, into seed-b (one
    // migration: CI's budget has no room for a second one back).
    let script = format!(
        "test \"$CPMLAB_SOURCE_SEED\" = seed-a && test \"$CPMLAB_DESTINATION_SEED\" = seed-b\n{drive}"
    );
    lab.ok(&[
        "migrate",
        "--driver",
        "external",
        "--resume",
        "--command",
        &script,
    ]);
    assert_migrated(&lab);
    // --command is required.
    lab.cpmlab(&["migrate", "--driver", "external"]).code(2);
    let (code, v) = probe_stop(&lab, &run);
    assert_zero_downtime(&lab, &run, code, "external driver");
    // The driver's run is a band, and so is each step the flow took in it.
    for s in STEPS {
        assert!(
            v["phases"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == *s),
            "phase {s} missing"
        );
    }
    let events = std::fs::read_to_string(run.join("events.ndjson")).unwrap();
    assert!(events.contains(r#""name":"ExternalDriver""#), "{events}");
    assert!(events.contains(r#""kind":"link""#), "{events}");
    assert!(v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "ExternalDriver"));
    let s = lab.status();
    assert_eq!(s["migration"]["driver"], "external");
    assert_eq!(s["garden"]["conditions_from"], "garden", "{s:#}");
    lab.cpmlab(&["migrate", "--resume"])
        .code(2)
        .stderr(predicate::str::contains("no migration to resume"));
}

#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn bad_migrate_input_exits_2_and_changes_nothing() {
    if !needs_docker("bad_migrate_input_exits_2_and_changes_nothing") {
        return;
    }
    let lab = Lab::new("mbi");
    up(&lab);
    // The replicas run kube-apiserver from the lab image: no container of
    // the lab mounts a file of the host (docs/hosts.md: on Docker Desktop or a
    // remote engine the host's files are not where the engine looks).
    assert_eq!(lab.status()["api"]["server"], "kube-apiserver");
    // The gardenlets alone mount what they act through: the engine's
    // socket (the docker form's seed API) and the lab's state directory
    // (at the same path, as the probe agent's run directory).
    for m in host_mounts(&lab.name) {
        assert!(
            m.contains("-gardenlet: ")
                && (m.ends_with("-> /var/run/docker.sock")
                    || m.contains(
                        &*std::fs::canonicalize(lab.state.path())
                            .unwrap()
                            .display()
                            .to_string()
                    )),
            "{m}"
        );
    }
    for args in [
        vec!["migrate", "--to", "seed-x"],
        vec!["migrate", "--from", "seed-b", "--to", "seed-a"],
        vec!["migrate", "--stop-after", "Nope"],
        vec!["migrate", "--max-rtt", "fast"],
        vec!["migrate", "--resume"],
        vec!["migrate", "--abort"],
        // A gateway handover the order does not separate from the source
        // members' removal, and an age the gateways were not brought up
        // with (nor could use: this lab passes TLS through).
        vec![
            "migrate",
            "--order",
            "early-drain",
            "--gateway-handover",
            "drain-gateway",
        ],
        vec!["migrate", "--gateway-handover", "max-connection-age"],
    ] {
        lab.cpmlab(&args).code(2);
        assert!(
            state_file(&lab)["migration"].is_null(),
            "{args:?} persisted"
        );
    }
    // Seeds too far apart are refused by gardener-apiserver's admission,
    // from the region ConfigMap's distance (garden.rs holds each of its
    // prerequisites).
    // Abort is refused unless the join failed.
    lab.ok(&["migrate", "--stop-after", "SourceEtcdPreparedForPeerJoin"]);
    // What runs is named: the GEP's order and plan by default, the leader
    // removed, no gateway handover, the lab's exposure.
    let s = lab.status();
    let m = &s["migration"];
    assert_eq!(
        (
            &m["order"],
            &m["plan"],
            &m["leader_handover"],
            &m["gateway_handover"]
        ),
        (
            &serde_json::json!("gep"),
            &serde_json::json!("five-member"),
            &serde_json::json!("remove"),
            &serde_json::json!("none")
        ),
        "{s:#}"
    );
    assert_eq!(m["cleanup_before_api_s"], 60.0, "{s:#}");
    assert_eq!(s["api"]["exposure"], "passthrough", "{s:#}");
    let text = lab.ok(&["status"]);
    assert!(
        text.contains("five-member, order gep, leader handover remove, gateway handover none"),
        "{text}"
    );
    lab.cpmlab(&["migrate", "--abort"])
        .code(2)
        .stderr(predicate::str::contains(
            "only while DestinationEtcdPeersJoined",
        ));
}
