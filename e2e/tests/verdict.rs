//! `cpmlab verdict RUN_DIR` through the built binary on run directories
//! edited by hand (no Docker): a failure under an excuse budget gives
//! PASSED WITH KNOWN HAZARDS (exit 0), over budget FAILED (exit 1), a lane
//! silent for a whole phase FAILED (not covered), and a directory an older
//! cpmlab rewrote is judged on all its records.

mod common;

use std::path::Path;

use assert_cmd::Command;
use common::*;
use cpmlab_verdict::record::{
    ConnMode, FinalRead, HistoryEntry, LabEvent, Outcome, ProbeKind, ProbePlan, Record,
};
use serde_json::Value;

const T0: f64 = 1_790_000_000_000.0;
/// The steps of the edited run, (name, from s, to s).
const PHASES: [(&str, f64, f64); 3] = [
    ("DestinationEtcdPeersJoined", 10.0, 25.0),
    ("MigrateDNSRecords", 25.0, 40.0),
    ("EtcdMigrationComplete", 40.0, 50.0),
];
/// The leadership move inside EtcdMigrationComplete, ms from T0.
const MOVE: (f64, f64) = (42_000.0, 42_300.0);

fn rec(seq: u64, probe: ProbeKind, mode: ConnMode, t_ms: f64, dur: f64) -> Record {
    let mut r = Record::new(seq, probe, mode, (T0 + t_ms, t_ms), dur, Outcome::Ok);
    r.http_status = Some(200);
    r.seed = Some("seed-a".into());
    r
}

/// A clean run of 60 s: readyz, get and list every 100 ms per mode, a write
/// every 100 ms (modes alternating), each acknowledged; its phases, a
/// leadership move, the counter's history in etcd and the probes' plan.
struct Run {
    records: Vec<Record>,
    events: Vec<LabEvent>,
    fin: FinalRead,
}

fn clean() -> Run {
    let mut records = Vec::new();
    let mut seq = 0;
    let mut next = || {
        seq += 1;
        seq
    };
    for i in 0..600 {
        let t = i as f64 * 100.0;
        for p in [ProbeKind::Readyz, ProbeKind::Get, ProbeKind::List] {
            for m in [ConnMode::New, ConnMode::Reused] {
                let mut r = rec(next(), p, m, t + 3.0, 4.0);
                // What a read read: the write acknowledged before it
                // (none yet before the first: the counter's first value).
                match p {
                    ProbeKind::Get => (r.value, r.rv) = (Some(i), Some(1000 + i)),
                    ProbeKind::List => r.rv = Some(1000 + i),
                    _ => {}
                }
                records.push(r);
            }
        }
        let mode = if i % 2 == 0 {
            ConnMode::New
        } else {
            ConnMode::Reused
        };
        let mut w = rec(next(), ProbeKind::Write, mode, t, 8.0);
        w.value = Some(i + 1);
        w.rv = Some(1000 + i + 1);
        w.base_rv = Some(1000 + i);
        records.push(w);
    }
    let mut events: Vec<LabEvent> = PHASES
        .iter()
        .map(|(n, a, b)| LabEvent {
            at_unix_ms: T0 + a * 1e3,
            end_unix_ms: Some(T0 + b * 1e3),
            kind: "phase".into(),
            name: n.to_string(),
            detail: String::new(),
            status: None,
        })
        .collect();
    for (at, name) in [
        (
            -50.0,
            "probes started; the kube-apiserver API server serves",
        ),
        (61_000.0, "probes stopped"),
        (
            MOVE.0,
            "moving leadership from seed-a-etcd-0 to seed-b-etcd-1",
        ),
        (
            MOVE.1,
            "leadership moved from seed-a-etcd-0 to seed-b-etcd-1",
        ),
    ] {
        events.push(LabEvent {
            at_unix_ms: T0 + at,
            end_unix_ms: None,
            kind: "note".into(),
            name: name.into(),
            detail: String::new(),
            status: None,
        });
    }
    let history = (0..600)
        .map(|i| HistoryEntry {
            value: i + 1,
            rev: 1000 + i + 1,
        })
        .collect();
    let fin = FinalRead {
        counter: Some(600),
        counter_rv: Some(1600),
        history: Some(history),
        ..FinalRead::default()
    };
    Run {
        records,
        events,
        fin,
    }
}

impl Run {
    /// A write MoveLeader dropped: started inside the move, failed after
    /// etcd's request timeout; the writer's next write set the same value
    /// on the same version, and that one applied.
    fn drop_write(&mut self, at_ms: f64) {
        let i = (at_ms / 100.0) as u64;
        let seq = 900_000 + i;
        let mut w = rec(seq, ProbeKind::Write, ConnMode::New, at_ms, 7_050.0);
        w.outcome = Outcome::Http;
        w.http_status = Some(500);
        w.error = Some("etcdserver: request timed out".into());
        w.value = Some(i + 2);
        w.base_rv = Some(1000 + i + 1);
        self.records.push(w);
    }

    fn write(&self, dir: &Path, criteria: Option<&str>) {
        std::fs::create_dir_all(dir).unwrap();
        let nd = |v: Vec<String>| v.join("\n") + "\n";
        std::fs::write(
            dir.join("records.ndjson"),
            nd(self
                .records
                .iter()
                .map(|r| serde_json::to_string(r).unwrap())
                .collect()),
        )
        .unwrap();
        std::fs::write(
            dir.join("events.ndjson"),
            nd(self
                .events
                .iter()
                .map(|e| serde_json::to_string(e).unwrap())
                .collect()),
        )
        .unwrap();
        std::fs::write(
            dir.join("final.json"),
            serde_json::to_string(&self.fin).unwrap(),
        )
        .unwrap();
        let plan = ProbePlan {
            probes: vec![
                ProbeKind::Readyz,
                ProbeKind::Get,
                ProbeKind::List,
                ProbeKind::Write,
            ],
            modes: vec![ConnMode::New, ConnMode::Reused],
            rate: 10.0,
            timeout_ms: 10_000.0,
            write_rate: 0.0,
        };
        std::fs::write(
            dir.join("probes.json"),
            serde_json::to_string(&plan).unwrap(),
        )
        .unwrap();
        // As this cpmlab writes a run directory (layout 2): its layout,
        // criteria always, and the counter's history as watched.
        std::fs::write(dir.join("criteria.json"), criteria.unwrap_or("{}")).unwrap();
        std::fs::write(dir.join("layout.json"), r#"{"layout": 2}"#).unwrap();
        let h = self.fin.history.clone().unwrap_or_default();
        let mut lines = vec![format!(
            r#"{{"kind":"watch","at_unix_ms":{T0},"from_rev":{},"cluster":"c","by":"probe start"}}"#,
            h.first().map_or(1, |e| e.rev)
        )];
        lines.extend(h.iter().map(|e| {
            format!(
                r#"{{"kind":"version","rev":{},"value":{}}}"#,
                e.rev, e.value
            )
        }));
        lines.push(format!(
            r#"{{"kind":"end","at_unix_ms":{T0},"rev":{}}}"#,
            h.iter().map(|e| e.rev).max().unwrap_or(0)
        ));
        std::fs::write(dir.join("history.ndjson"), nd(lines)).unwrap();
    }
}

const BUDGET_ONE: &str = r#"{"excuse": {"move-leader": {"max": 1, "max_ms": 7500}}}"#;

/// `cpmlab verdict DIR`: exit code, stdout, verdict.json, junit.xml.
fn verdict(dir: &Path) -> (Option<i32>, String, Value, String) {
    let o = Command::new(bin())
        .args(["verdict"])
        .arg(dir)
        .env_remove("RUST_LOG")
        .assert();
    let out = stdout(&o);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("verdict.json")).unwrap()).unwrap();
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    (o.get_output().status.code(), out, v, junit)
}

#[test]
fn an_edited_run_passes_clean_with_known_hazards_or_fails_over_budget_or_blind() {
    let tmp = tempfile::tempdir().unwrap();

    // Untouched: PASSED, exit 0.
    let d = tmp.path().join("clean");
    clean().write(&d, Some(BUDGET_ONE));
    let (code, out, v, _) = verdict(&d);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("verdict: PASSED\n"), "{out}");
    assert_eq!(v["status"], "passed");

    // One write dropped by the move, within a budget of one: PASSED WITH
    // KNOWN HAZARDS, exit 0; the raw figures keep it, the report shows it,
    // JUnit calls it a flake.
    let d = tmp.path().join("excused");
    let mut r = clean();
    r.drop_write(MOVE.0 + 100.0);
    r.write(&d, Some(BUDGET_ONE));
    let (code, out, v, junit) = verdict(&d);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.starts_with("verdict: PASSED WITH KNOWN HAZARDS\n"),
        "{out}"
    );
    assert!(out.contains("1 failed (1 excused)"), "{out}");
    assert_eq!(v["status"], "passed-with-known-hazards");
    assert_eq!(
        v["overall"]["failures"]["http"], 1,
        "raw: {:#}",
        v["overall"]
    );
    let e = &v["excuses"]["excused"][0];
    assert_eq!(e["hazard"], "move-leader");
    assert!(
        e["evidence"]
            .as_str()
            .unwrap()
            .contains("another write's acknowledged revision"),
        "{e}"
    );
    assert_eq!(
        junit.matches("name=\"zero-downtime\"").count(),
        2,
        "a flake: {junit}"
    );
    assert!(
        junit.contains("observed 1 failed request(s), excused 1"),
        "{junit}"
    );
    let html = std::fs::read_to_string(d.join("report.html")).unwrap();
    assert!(html.contains("PASSED WITH KNOWN HAZARDS"));
    assert!(html.contains("Excused requests (1)"));
    // Nothing was rewritten.
    let lines = std::fs::read_to_string(d.join("records.ndjson"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(lines, r.records.len());

    // The same run without the budget: FAILED, exit 1.
    std::fs::remove_file(d.join("criteria.json")).unwrap();
    let (code, out, v, _) = verdict(&d);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(v["status"], "failed");
    assert!(out.contains("failed: write/new"), "{out}");

    // Two dropped, a budget of one: FAILED, over budget.
    let d = tmp.path().join("over");
    let mut r = clean();
    r.drop_write(MOVE.0 + 100.0);
    r.drop_write(MOVE.0 + 250.0);
    r.write(&d, Some(BUDGET_ONE));
    let (code, out, v, junit) = verdict(&d);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.starts_with("verdict: FAILED"), "{out}");
    assert!(out.contains("OVER BUDGET"), "{out}");
    assert_eq!(v["excuses"]["hazards"][0]["within_budget"], false);
    assert_eq!(junit.matches("name=\"zero-downtime\"").count(), 1);

    // The dropped value has a version in etcd nobody acknowledged: it may
    // have applied; no evidence, no excuse: FAILED.
    let d = tmp.path().join("applied");
    let mut r = clean();
    r.drop_write(MOVE.0 + 100.0);
    let dropped = r.records.last().unwrap().value.unwrap();
    if let Some(h) = r.fin.history.as_mut() {
        h.push(HistoryEntry {
            value: dropped,
            rev: 5000,
        });
    }
    r.write(&d, Some(BUDGET_ONE));
    let (code, out, v, _) = verdict(&d);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(v["excuses"]["excused_count"], 0);

    // get/new silent for the whole of MigrateDNSRecords: FAILED, not
    // covered, although nothing failed.
    let d = tmp.path().join("blind");
    let mut r = clean();
    r.records.retain(|x| {
        !(x.probe == ProbeKind::Get
            && x.mode == ConnMode::New
            && x.start_unix_ms >= T0 + 25_000.0
            && x.start_unix_ms < T0 + 40_000.0)
    });
    r.write(&d, Some(BUDGET_ONE));
    let (code, out, v, _) = verdict(&d);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.starts_with("verdict: FAILED"), "{out}");
    assert!(out.contains("coverage (not covered)"), "{out}");
    assert!(
        out.contains("get/new started 0 request(s) in MigrateDNSRecords"),
        "{out}"
    );
    // The lane's 15 s without a request is blind as time too.
    assert!(
        out.contains("get/new started no request for 15.1 s"),
        "{out}"
    );
    assert_eq!(v["overall"]["failures"], serde_json::json!({}));
    // ... unless the scenario says why, for each gap: then amber, exit 0.
    std::fs::write(
        d.join("criteria.json"),
        r#"{"uncovered": {"get/new@MigrateDNSRecords": "the edited lane"}}"#,
    )
    .unwrap();
    let (code, out, _, _) = verdict(&d);
    assert_eq!(code, Some(1), "one gap of two accepted: {out}");
    std::fs::write(
        d.join("criteria.json"),
        r#"{"uncovered": {"get/new@MigrateDNSRecords": "the edited lane", "get/new@silence": "the edited lane"}}"#,
    )
    .unwrap();
    let (code, out, v, _) = verdict(&d);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(v["status"], "passed-with-known-hazards");
    assert_eq!(
        v["accepted"]["coverage"],
        "get/new@MigrateDNSRecords: the edited lane; get/new@silence: the edited lane"
    );

    // No write acknowledged after the last step: FAILED, not covered.
    let d = tmp.path().join("no-writes-at-the-end");
    let mut r = clean();
    r.records
        .retain(|x| !(x.probe == ProbeKind::Write && x.start_unix_ms >= T0 + 50_000.0));
    r.write(&d, Some(BUDGET_ONE));
    let (code, out, _, _) = verdict(&d);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("no write was acknowledged after the last step ended"),
        "{out}"
    );
}

/// A run an older cpmlab judged: it rewrote `records.ndjson` without the
/// requests it excused and kept them all in `records.all.ndjson`. Judged
/// again, every record counts: the failure is back.
#[test]
fn a_rewritten_old_run_is_judged_on_all_its_records() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("old");
    let mut r = clean();
    r.drop_write(MOVE.0 + 100.0);
    r.write(&d, None);
    std::fs::rename(d.join("records.ndjson"), d.join("records.all.ndjson")).unwrap();
    let kept: String = r.records[..r.records.len() - 1]
        .iter()
        .map(|x| serde_json::to_string(x).unwrap() + "\n")
        .collect();
    std::fs::write(d.join("records.ndjson"), kept).unwrap();
    // As an older cpmlab wrote it: no layout, no plan, no watched history.
    for f in ["probes.json", "layout.json", "history.ndjson"] {
        std::fs::remove_file(d.join(f)).unwrap();
    }
    let (code, out, v, _) = verdict(&d);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(v["overall"]["failures"]["http"], 1);
}

/// Criteria that are not criteria: exit 2, naming the file and the field;
/// and the run's earlier judgement, which said it passed, is gone.
#[test]
fn bad_criteria_are_refused_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("run");
    clean().write(&d, None);
    Command::new(bin()).arg("verdict").arg(&d).assert().code(0);
    for f in ["verdict.json", "junit.xml", "report.html"] {
        assert!(d.join(f).is_file(), "{f} written");
    }
    std::fs::write(
        d.join("criteria.json"),
        r#"{"excuse": {"leader-election": {"max": 1, "max_ms": 5000}}}"#,
    )
    .unwrap();
    let o = Command::new(bin()).arg("verdict").arg(&d).assert().code(2);
    let err = String::from_utf8_lossy(&o.get_output().stderr).into_owned();
    assert!(
        err.contains("criteria.json: excuse.leader-election.lanes"),
        "{err}"
    );
    assert!(
        err.contains("the earlier judgement's verdict.json, junit.xml, report.html removed"),
        "{err}"
    );
    for f in ["verdict.json", "junit.xml", "report.html"] {
        assert!(!d.join(f).exists(), "{f} still says what it said");
    }
    let o = Command::new(bin())
        .arg("verdict")
        .arg(tmp.path())
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&o.get_output().stderr).into_owned();
    assert!(err.contains("not a run directory"), "{err}");
}
