//! Probes and the verdict against a live lab: a quiet run is zero downtime
//! with no lost write; a 500 ms pause of the only API server is one ~500 ms
//! outage and a failed verdict; a write removed behind the API's back is
//! caught by the ledger; a graceful shutdown of one of two replicas costs
//! no request.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use cpmlab_verdict::record::{ConnMode, Outcome, ProbeKind, Record};
use predicates::prelude::*;
use serde_json::Value;

fn topology(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/topologies")
        .join(name)
        .display()
        .to_string()
}

fn start(lab: &Lab, args: &[&str]) -> PathBuf {
    let mut a = vec!["probe", "start"];
    a.extend_from_slice(args);
    PathBuf::from(lab.ok(&a).trim())
}

fn verdict(run: &Path) -> Value {
    let text = std::fs::read_to_string(run.join("verdict.json")).expect("verdict.json");
    serde_json::from_str(&text).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn quiet_run_is_zero_downtime_then_a_write_put_past_the_api_fails_the_ledger() {
    if !needs_docker("quiet_run_is_zero_downtime_then_a_write_put_past_the_api_fails_the_ledger") {
        return;
    }
    let lab = Lab::new("quiet");
    // Seeds with a wildcard certificate: the seed-bound lane beside the
    // others reaches the API by its seed-bound name through the Gateway's
    // `wildcard-tls` server.
    lab.ok(&["up", "--topology", &topology("seed-bound.yaml")]);
    // With a write load of new objects beside the ledger.
    let run = start(
        &lab,
        &["--write-rate", "10", "--modes", "new,reused,seed-bound"],
    );
    // Beside the lab's probes, the same agent from the host through the
    // lab's kubeconfig, as it would measure any API server
    // (`probe start --kubeconfig`): it runs as a host process, in a
    // namespace of its own, and is judged by the same rules.
    let kc = lab.ok(&["kubeconfig"]).trim().to_string();
    let outside = format!("{}-out", lab.name);
    let outside_run = PathBuf::from(
        lab.ok(&["probe", "start", "--name", &outside, "--kubeconfig", &kc])
            .trim(),
    );
    let st = lab.ok(&["probe", "status", "--name", &outside]);
    assert!(
        st.contains("probes from the host") && st.contains("running"),
        "{st}"
    );
    // At least 6 s, and until both runs hold what the assertions below
    // count (for 2 minutes at most: past that they say what was short):
    // on a busy machine the agents start later and write slower, and a
    // fixed sleep would then test the machine's speed.
    std::thread::sleep(Duration::from_secs(6));
    until_records(&[&run, &outside_run], Duration::from_secs(120), |rs| {
        let n = |i: usize, p: &dyn Fn(&Record) -> bool| rs[i].iter().filter(|r| p(r)).count();
        n(0, &|r| {
            r.probe == ProbeKind::Write && r.outcome == Outcome::Ok && r.value.is_some()
        }) > 60
            && n(0, &|r| r.probe == ProbeKind::Load) >= 70
            && n(0, &|r| {
                r.probe == ProbeKind::Get && r.mode == ConnMode::SeedBound
            }) > 60
            && n(1, &|_| true) > 350
    });
    lab.cpmlab(&["probe", "stop"]).code(0);
    lab.cpmlab(&["probe", "stop", "--name", &outside]).code(0);
    let o = verdict(&outside_run);
    assert_eq!(o["passed"], true, "{o:#}");
    // From outside, etcd's history is out of reach: the lost-writes and
    // linearizability checks are degraded, which the outside run accepts
    // and says why: amber.
    assert_eq!(o["status"], "passed-with-known-hazards", "{:#}", o["rules"]);
    for rule in ["lost-writes", "linearizable"] {
        assert!(
            o["accepted"][rule]
                .as_str()
                .is_some_and(|w| w.contains("cannot read etcd")),
            "{rule}: {:#}",
            o["accepted"]
        );
    }
    assert_eq!(o["overall"]["requests"], o["overall"]["ok"], "{o:#}");
    assert!(f(&o["overall"]["requests"]) > 300.0, "{}", o["overall"]);
    // Outside the lab etcd is out of reach: the counter read back through
    // the API checks the ledger's tail.
    assert_eq!(
        o["ledger"]["final_counter"],
        o["ledger"]["max_acknowledged"]
    );
    assert!(o["ledger"]["history_error"]
        .as_str()
        .unwrap()
        .contains("out of reach"));
    assert_eq!(o["informer"]["missed_count"], 0, "{:#}", o["informer"]);
    assert!(!lab
        .state
        .path()
        .join(format!("outside/{outside}.json"))
        .exists());
    let v = verdict(&run);
    assert_eq!(v["passed"], true, "{v:#}");
    assert_eq!(v["status"], "passed", "{:#}", v["rules"]);
    let bound = &v["probes"]["get/seed-bound"];
    assert!(f(&bound["requests"]) > 50.0, "{bound:#}");
    assert_eq!(bound["requests"], bound["ok"], "{bound:#}");
    assert_eq!(v["zero_downtime"], true);
    assert_eq!(v["overall"]["requests"], v["overall"]["ok"]);
    assert!(f(&v["overall"]["requests"]) > 300.0, "{}", v["overall"]);
    assert_eq!(v["ledger"]["lost_count"], 0);
    assert!(f(&v["ledger"]["acknowledged"]) > 50.0);
    assert_eq!(
        v["ledger"]["final_counter"],
        v["ledger"]["max_acknowledged"]
    );
    // Every acknowledged write is in etcd's history, and no read was stale.
    assert!(
        f(&v["ledger"]["history_versions"]) > 50.0,
        "{:#}",
        v["ledger"]
    );
    assert!(
        f(&v["stale_reads"]["checked"]) > 50.0,
        "{:#}",
        v["stale_reads"]
    );
    assert_eq!(v["stale_reads"]["count"], 0, "{:#}", v["stale_reads"]);
    assert!(run.join("final.json").is_file());
    assert_eq!(v["watch"]["run"], true);
    assert_eq!(v["watch"]["missed_count"], 0);
    // The informer (a controller's list+watch): no relist, no error, every
    // acknowledged write delivered as an event.
    let inf = &v["informer"];
    assert_eq!(inf["run"], true, "{inf:#}");
    assert_eq!(inf["relists"], 0, "{inf:#}");
    assert_eq!(inf["errors"], 0, "{inf:#}");
    assert_eq!(inf["missed_count"], 0, "{inf:#}");
    assert!(f(&inf["expected"]) > 50.0, "{inf:#}");
    assert_eq!(inf["delivered"], inf["expected"], "{inf:#}");
    assert!(f(&inf["delay"]["max_ms"]) < 1000.0, "{inf:#}");
    for lane in [
        "informer/reused",
        "readyz/new",
        "readyz/reused",
        "get/new",
        "list/reused",
        "write/new",
        "write/reused",
        "load/new",
        "load/reused",
    ] {
        assert!(
            v["probes"][lane]["requests"].as_u64().unwrap_or(0) > 0,
            "{lane} missing"
        );
    }
    // 10 creates/s for the run's 8 s or more, every one acknowledged.
    // (alternating over the modes: the seed-bound one's too).
    let load: f64 = ["load/new", "load/reused", "load/seed-bound"]
        .iter()
        .map(|l| f(&v["probes"][*l]["requests"]))
        .sum();
    assert!(load >= 60.0, "{load} load requests");
    let records = std::fs::read_to_string(run.join("records.ndjson")).unwrap();
    assert!(records.contains(r#""seed":"seed-a""#));
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("PASSED"));
    let junit = std::fs::read_to_string(run.join("junit.xml")).unwrap();
    assert!(
        junit.contains("<testsuite") && !junit.contains("<failure"),
        "{junit}"
    );
    // The same lab, quiet no more: the ledger must see what etcd was made
    // to forget (one lab for both: an `up` is 20 s of CI).
    the_ledger_catches_a_write_removed_behind_the_apis_back(&lab);
    lab.ok(&["down"]);
}

#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn pausing_the_only_api_server_is_one_outage_of_its_length() {
    if !needs_docker("pausing_the_only_api_server_is_one_outage_of_its_length") {
        return;
    }
    let lab = Lab::new("pause");
    lab.ok(&["up", "--topology", &topology("single-api.yaml")]);
    let run = start(
        &lab,
        &[
            "--rate",
            "50",
            "--timeout",
            "80ms",
            "--probes",
            "readyz,get",
            "--modes",
            "reused",
        ],
    );
    std::thread::sleep(Duration::from_secs(3));
    let api = lab.container("seed-a-apiserver-0");
    let unix_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            * 1e3
    };
    let t0 = std::time::Instant::now();
    let paused_at = unix_ms();
    docker(&["pause", &api]).assert().success();
    std::thread::sleep(Duration::from_millis(500));
    docker(&["unpause", &api]).assert().success();
    let unpaused_at = unix_ms();
    let paused_ms = t0.elapsed().as_secs_f64() * 1e3;
    std::thread::sleep(Duration::from_secs(3));
    // A failed verdict exits 1.
    lab.cpmlab(&["probe", "stop"]).code(1);
    let v = verdict(&run);
    assert_eq!(v["passed"], false);
    assert_eq!(v["zero_downtime"], false);
    // The pause is one outage, from the pause to the unpause (a request
    // sent in the pause times out 80 ms after it). A window elsewhere is
    // one slow request of a busy machine, never an outage of its own.
    type Window = (f64, f64);
    let windows: Vec<Window> = v["overall"]["unavailable"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| (f(&w["start_unix_ms"]), f(&w["end_unix_ms"])))
        .collect();
    let (during, elsewhere): (Vec<Window>, Vec<Window>) = windows
        .into_iter()
        .partition(|(start, end)| *end >= paused_at && *start <= unpaused_at + 200.0);
    assert_eq!(during.len(), 1, "one outage in the pause: {}", v["overall"]);
    let outage = during[0].1 - during[0].0;
    assert!(
        (400.0..=600.0).contains(&outage),
        "a 500 ms pause (docker took {paused_ms:.0} ms for pause+sleep+unpause) measured as {outage:.0} ms"
    );
    assert!(
        elsewhere.iter().all(|(start, end)| end - start < 200.0),
        "an outage outside the pause: {}",
        v["overall"]
    );
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("FAILED"));
    lab.ok(&["down"]);
}

/// On a quiet lab: a write put straight into etcd, past the API (the
/// counter goes back to 1), must fail the ledger.
fn the_ledger_catches_a_write_removed_behind_the_apis_back(lab: &Lab) {
    let run = start(lab, &["--probes", "write,watch"]);
    std::thread::sleep(Duration::from_secs(3));
    let obj = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"probe-counter","namespace":"cpmlab-probes"},"data":{"value":"1"}}"#;
    lab.exec(
        "toolbox",
        &etcdctl(
            "seed-a-etcd-0.local.cpmlab.test",
            true,
            &format!("put /registry/configmaps/cpmlab-probes/probe-counter '{obj}'"),
        ),
    )
    .assert()
    .success();
    lab.cpmlab(&["probe", "stop"]).code(1);
    let v = verdict(&run);
    assert_eq!(v["passed"], false);
    assert!(
        v["ledger"]["lost_count"].as_u64().unwrap_or(0) > 0
            || !v["ledger"]["ledger_conflicts"]
                .as_array()
                .unwrap()
                .is_empty(),
        "the ledger must catch it: {}",
        v["ledger"]
    );
}

/// On a lab whose API server can fire `failpoint` once (a real fault of
/// the server) while `probes` run over reused connections: `probe stop`
/// must fail with `reason`. Returns the verdict.
fn fire_failpoint(lab: &Lab, failpoint: &str, probes: &str, reason: &str) -> Value {
    let run = start(lab, &["--probes", probes, "--modes", "reused"]);
    std::thread::sleep(Duration::from_secs(2));
    lab.exec(
        "seed-a-apiserver-0",
        &format!("mkdir -p /run/cpmlab/failpoints && touch /run/cpmlab/failpoints/{failpoint}"),
    )
    .assert()
    .success();
    std::thread::sleep(Duration::from_secs(3));
    lab.cpmlab(&["probe", "stop"])
        .code(1)
        .stdout(predicate::str::contains(reason));
    let v = verdict(&run);
    assert_eq!(v["ledger"]["lost_count"], 0, "{failpoint}");
    v
}

/// Each fault of the stand-in is caught by the check written for it, one
/// probe run per fault on one single-replica lab (failpoints are the
/// stand-in's; each fires once, so the runs do not see each other's):
/// - a dropped watch event costs no request; the watch check sees it;
/// - the informer sees the same drop as a counter value it never saw,
///   with no re-list to hide it;
/// - a watch ERROR is unavailability of the watch, which comes back and
///   misses nothing;
/// - a read of a version five writes old is a stale read;
/// - a body cut short is a decode failure.
#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn each_fault_of_the_api_server_is_caught_by_its_check() {
    if !needs_docker("each_fault_of_the_api_server_is_caught_by_its_check") {
        return;
    }
    let lab = Lab::new("faults");
    lab.ok(&[
        "up",
        "--topology",
        &topology("single-api.yaml"),
        "--api-server",
        "standin",
    ]);

    let v = fire_failpoint(&lab, "drop-watch-event", "write,watch", "watch-continuity");
    assert_eq!(
        v["zero_downtime"], true,
        "dropped watch event: {}",
        v["overall"]
    );
    assert_eq!(v["watch"]["missed_count"], 1, "{:#}", v["watch"]);

    let v = fire_failpoint(
        &lab,
        "drop-watch-event",
        "write,informer",
        "informer: 1 counter value(s) never seen by the informer",
    );
    assert_eq!(v["zero_downtime"], true, "informer: {}", v["overall"]);
    let inf = &v["informer"];
    assert_eq!(inf["missed_count"], 1, "{inf:#}");
    assert_eq!(inf["relists"], 0, "{inf:#}");
    let rule = v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "informer")
        .expect("an informer rule");
    assert_eq!(rule["status"], "failed", "{rule}");

    let v = fire_failpoint(&lab, "watch-error", "write,watch", "watch/reused: 1 http");
    assert_eq!(
        v["probes"]["watch/reused"]["failures"]["http"], 1,
        "{:#}",
        v["probes"]
    );
    assert_eq!(v["watch"]["errors"], 1, "{:#}", v["watch"]);
    // The watch came back and missed nothing.
    assert_eq!(v["watch"]["missed_count"], 0, "{:#}", v["watch"]);

    let v = fire_failpoint(&lab, "stale-read", "write,get", "stale-reads: 1 of");
    assert_eq!(v["stale_reads"]["count"], 1, "{:#}", v["stale_reads"]);
    assert_eq!(
        v["stale_reads"]["by_lane"]["get/reused"], 1,
        "{:#}",
        v["stale_reads"]
    );
    assert_eq!(v["zero_downtime"], true, "stale read: {}", v["overall"]);

    let v = fire_failpoint(&lab, "corrupt-body", "get", "get/reused: 1 decode");
    assert_eq!(
        v["probes"]["get/reused"]["failures"]["decode"], 1,
        "{:#}",
        v["probes"]
    );
    lab.ok(&["down"]);
}

/// The stand-in fails over between its seed's etcd members: losing a
/// follower costs no read, no watch and no informer event. A write in
/// flight through the killed member may fail, as with k8s.io/apiserver's
/// etcd client (`error reading from server: EOF`): its outcome is unknown,
/// so it is not retried (CI saw it once in about 20 runs: one write 114 ms
/// after the kill). The test records the kill as `cpmlab run` does and
/// judges the run with a `killed-member` budget of one write: the verdict
/// exits 0, PASSED, or PASSED WITH KNOWN HAZARDS with that write alone
/// excused; `probe stop` (nothing excused) exits 0 exactly when nothing
/// failed.
#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn losing_an_etcd_follower_fails_at_most_the_write_through_it() {
    if !needs_docker("losing_an_etcd_follower_fails_at_most_the_write_through_it") {
        return;
    }
    let lab = Lab::new("etcdf");
    lab.ok(&["up", "--api-server", "standin"]);
    // Every probe, watches and the informer too: the stand-in resumes a
    // broken etcd watch on another member, as etcd's client does.
    let run = start(&lab, &[]);
    std::thread::sleep(Duration::from_secs(2));
    let s = lab.status();
    let follower = s["etcd"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["is_leader"] == false)
        .map(|m| m["name"].as_str().unwrap().to_string())
        .expect("a follower");
    // The kill's time is taken before the signal is sent, as the runner's
    // timeline takes it: the member dies somewhere after it.
    let killed_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0;
    docker(&["kill", &lab.container(&follower)])
        .assert()
        .success();
    // The kill, as the runner's timeline records it.
    let ev = serde_json::json!({
        "at_unix_ms": killed_at, "kind": "fault",
        "name": format!("kill member {follower}"), "detail": "test seed=seed-a",
    });
    use std::io::Write;
    writeln!(
        std::fs::OpenOptions::new()
            .append(true)
            .open(run.join("events.ndjson"))
            .unwrap(),
        "{ev}"
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let stop = lab.cpmlab(&["probe", "stop"]);
    let raw = verdict(&run);
    let criteria = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        criteria.path(),
        r#"{"excuse": {"killed-member": {"max": 1, "max_ms": 2000}}}"#,
    )
    .unwrap();
    let o = lab.cpmlab(&[
        "verdict",
        run.to_str().unwrap(),
        "--criteria",
        criteria.path().to_str().unwrap(),
    ]);
    let v = verdict(&run);
    assert_eq!(
        o.get_output().status.code(),
        Some(0),
        "only a write through the killed member may fail: {:#}\n{:#}\nthe hazards: {:#}",
        v["reasons"],
        v["failed_requests"],
        v["excuses"]["hazards"]
    );
    // The kill is confirmed by what etcd said (the member's peers lost
    // their streams with it), not taken on the event's word.
    let kills: Vec<&Value> = v["excuses"]["windows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["hazard"] == "killed-member")
        .collect();
    assert_eq!(kills.len(), 1, "{:#}", v["excuses"]["windows"]);
    assert!(
        kills[0]["unconfirmed"].is_null(),
        "the kill was not confirmed by etcd's logs: {}",
        kills[0]
    );
    let n = v["excuses"]["excused_count"].as_u64().unwrap();
    assert!(n <= 1, "{:#}", v["excuses"]);
    for e in v["excuses"]["excused"].as_array().unwrap() {
        assert_eq!(e["hazard"], "killed-member", "{e}");
        assert!(e["lane"].as_str().unwrap().starts_with("write/"), "{e}");
    }
    assert_eq!(
        v["status"],
        if n == 0 {
            "passed"
        } else {
            "passed-with-known-hazards"
        }
    );
    assert_eq!(
        raw["overall"]["requests"].as_u64().unwrap() - raw["overall"]["ok"].as_u64().unwrap(),
        n,
        "the raw failures are the excused ones"
    );
    stop.code(if n == 0 { 0 } else { 1 });
    lab.ok(&["down"]);
}

#[test]
#[cfg_attr(
    not(all(cpmlab_has_docker, cpmlab_has_generic_apiserver)),
    ignore = "needs Docker (scripts/setup starts it); needs cpmlab-apiserver (scripts/build-go --tests)"
)]
fn graceful_shutdown_of_one_of_two_api_servers_fails_no_request() {
    let test = "graceful_shutdown_of_one_of_two_api_servers_fails_no_request";
    if !needs_docker(test) || !needs_generic(test) {
        return;
    }
    let lab = Lab::new("grace");
    // The generic server names the replica that answered (X-Cpmlab-Server),
    // which kube-apiserver does not: the records say who served what.
    lab.ok(&[
        "up",
        "--topology",
        &topology("fast-shutdown.yaml"),
        "--api-server",
        "generic",
    ]);
    let run = start(&lab, &[]);
    std::thread::sleep(Duration::from_secs(2));
    // Its pod deleted: the endpoint leaves the gateway at once, then the
    // replica shuts down as kube-apiserver does.
    lab.delete_replica("seed-a-apiserver-0").success();
    std::thread::sleep(Duration::from_secs(2));
    let o = lab.cpmlab(&["probe", "stop"]);
    let v = verdict(&run);
    o.append_context("overall", format!("{:#}", v["overall"]))
        .code(0);
    assert_eq!(v["zero_downtime"], true, "{:#}", v["probes"]);
    // Both replicas answered before, only one after.
    let records = std::fs::read_to_string(run.join("records.ndjson")).unwrap();
    assert!(records.contains("seed-a-apiserver-0") && records.contains("seed-a-apiserver-1"));
    lab.ok(&["down"]);
}
