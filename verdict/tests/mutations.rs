//! The verdict's own regression suite: real run directories (`corpus/`)
//! judged clean, then with one failure a real landscape can produce
//! injected at a time, each of which the rule written for it must fail. No
//! Docker, no lab: seconds.
//!
//! - `quiet/`, kept from a CI run of the lab: kube-apiserver, three etcd
//!   members, readyz, get and write lanes on new and reused connections,
//!   13 s. It passes as recorded.
//! - `election/`, recorded with `cpmlab run` (the scenario is in its
//!   `scenario.yaml`): readyz, get, write, watch and informer lanes on new
//!   and reused connections at 10/s, 23 s, the etcd leader SIGKILLed at
//!   +6 s (the kubelet starts it again); its members' logs are kept. Two
//!   writes fail, excused: one in flight at the kill (`killed-member`,
//!   confirmed by the member's log), one in the election that followed
//!   (`leader-election`). Its read SLO is relaxed in `criteria.json` (it
//!   was recorded beside another lab on 2 cores); no mutation is about
//!   latency. It passes as recorded, with those excuses.
//!
//! Each mutation edits a copy of the records, the final read (etcd's
//! history of the counter), the events or the criteria the way the fault
//! would have shown, and names the rule that must fail; the others are not
//! asserted (a fault may show in more than one).

mod common;

use common::{copy_tree, corpus};
use cpmlab_verdict::run_dir;
use serde_json::Value;

struct Run {
    records: Vec<Value>,
    fin: Value,
    dir: tempfile::TempDir,
}

impl Run {
    fn of(name: &str) -> Run {
        let src = corpus(name);
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&src, dir.path());
        let records = std::fs::read_to_string(src.join("records.ndjson"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let fin = serde_json::from_str(&std::fs::read_to_string(src.join("final.json")).unwrap())
            .unwrap();
        Run { records, fin, dir }
    }

    /// The rules that did not pass (failed, not covered, degraded), by
    /// name; a rule that holds through excuses within budget passes.
    fn judge(&self) -> Vec<(String, String)> {
        use cpmlab_verdict::RuleStatus::{Excused, Passed, Skipped};
        self.verdict()
            .rules
            .iter()
            .filter(|r| !matches!(r.status, Passed | Skipped | Excused))
            .map(|r| (r.name.clone(), r.message.clone()))
            .collect()
    }

    /// The verdict on the run as edited.
    fn verdict(&self) -> cpmlab_verdict::Verdict {
        let text: String = self.records.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(self.dir.path().join("records.ndjson"), text).unwrap();
        std::fs::write(self.dir.path().join("final.json"), self.fin.to_string()).unwrap();
        let c = run_dir::read_criteria(self.dir.path()).unwrap();
        run_dir::judge(self.dir.path(), &c).unwrap()
    }

    fn must_fail(&self, rule: &str, words: &str) {
        let bad = self.judge();
        let hit = bad.iter().find(|(n, _)| n == rule);
        assert!(
            hit.is_some_and(|(_, m)| m.contains(words)),
            "{rule} must fail saying {words:?}; what did not pass: {bad:#?}"
        );
    }

    /// Indexes of the successful records of `probe` (requests, not the
    /// writer's reads), in file order.
    fn ok(&self, probe: &str) -> Vec<usize> {
        (0..self.records.len())
            .filter(|&i| {
                let r = &self.records[i];
                r["probe"] == probe && r["outcome"] == "ok" && r.get("event").is_none()
            })
            .collect()
    }

    /// Sets one field of the run's criteria (as the runner writes them).
    fn criteria(&self, key: &str, value: Value) {
        let path = self.dir.path().join("criteria.json");
        let mut c: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        c[key] = value;
        std::fs::write(path, c.to_string()).unwrap();
    }

    /// Rewrites the run's lab events (`events.ndjson`) through `edit`.
    fn events(&self, edit: impl Fn(&mut Value)) {
        let path = self.dir.path().join("events.ndjson");
        let text: String = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| {
                let mut e: Value = serde_json::from_str(l).unwrap();
                edit(&mut e);
                format!("{e}\n")
            })
            .collect();
        std::fs::write(path, text).unwrap();
    }

    /// The index of the record with sequence number `seq`.
    fn seq(&self, seq: u64) -> usize {
        self.records
            .iter()
            .position(|r| r["seq"] == seq)
            .unwrap_or_else(|| panic!("no record {seq}"))
    }

    /// Indexes of `lane`'s records whose `event` is `event`, in file order.
    fn with_event(&self, probe: &str, mode: &str, event: &str) -> Vec<usize> {
        (0..self.records.len())
            .filter(|&i| {
                let r = &self.records[i];
                r["probe"] == probe && r["mode"] == mode && r["event"] == event
            })
            .collect()
    }

    fn history(&mut self) -> &mut Vec<Value> {
        self.fin["history"].as_array_mut().unwrap()
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn the_recorded_run_passes() {
    let r = Run::of("quiet");
    assert_eq!(r.judge(), Vec::<(String, String)>::new());
}

/// A get served by a lagging member: the value five writes back.
#[test]
fn a_stale_read_fails_linearizable_and_stale_reads() {
    let mut r = Run::of("quiet");
    let gets = r.ok("get");
    let i = gets[gets.len() / 2];
    let v = r.records[i]["value"].as_u64().unwrap();
    r.records[i]["value"] = (v - 5).into();
    r.must_fail("linearizable", "stale-read");
    r.must_fail("stale-reads", "returned less than a write acknowledged");
}

/// A get that returns a value no one ever wrote.
#[test]
fn an_invented_value_fails_linearizable() {
    let mut r = Run::of("quiet");
    let i = r.ok("get")[10];
    r.records[i]["value"] = 1_000_000.into();
    r.must_fail("linearizable", "invented-value");
}

/// Two gets of one lane in a row, the later older than the earlier one,
/// where neither is older than an acknowledged write: a watch cache or a
/// lagging member serving the second (stale-reads cannot see it).
#[test]
fn a_non_monotonic_read_fails_linearizable() {
    let mut r = Run::of("quiet");
    // A write whose request overlaps a get that started after it: the get
    // may return the new value or the old one; a second get that starts
    // after the first ended, while the write is still in flight, may too,
    // but not the old value once the first returned the new one.
    let writes = r.ok("write");
    let w = writes[writes.len() / 2];
    let (ws, wd) = (
        f(&r.records[w]["start_unix_ms"]),
        f(&r.records[w]["duration_ms"]),
    );
    let value = r.records[w]["value"].as_u64().unwrap();
    let seq = r
        .records
        .iter()
        .map(|x| x["seq"].as_u64().unwrap())
        .max()
        .unwrap();
    let get = |s: u64, t: f64, v: u64| {
        serde_json::json!({"seq": s, "probe": "get", "mode": "new", "start_unix_ms": t,
            "start_mono_ms": 0.0, "duration_ms": wd / 10.0, "outcome": "ok",
            "http_status": 200, "seed": "seed-a", "value": v})
    };
    r.records.push(get(seq + 1, ws + wd * 0.1, value));
    r.records.push(get(seq + 2, ws + wd * 0.5, value - 1));
    r.must_fail("linearizable", "non-monotonic-read");
}

/// etcd's history of the counter goes back (a restored stale snapshot).
#[test]
fn a_history_that_goes_back_fails_linearizable() {
    let mut r = Run::of("quiet");
    let h = r.history();
    let n = h.len();
    let v = h[n / 2]["value"].as_u64().unwrap();
    h[n / 2 + 1]["value"] = (v - 3).into();
    r.must_fail("linearizable", "history-back");
}

/// An acknowledged write missing from etcd's history.
#[test]
fn a_write_missing_from_etcd_fails_lost_writes() {
    let mut r = Run::of("quiet");
    let h = r.history();
    h.remove(h.len() / 2);
    r.must_fail("lost-writes", "not in the counter's history");
}

/// A write acknowledged as replacing a version that is not the one before
/// it in etcd.
#[test]
fn a_write_on_the_wrong_base_fails_linearizable() {
    let mut r = Run::of("quiet");
    let i = r.ok("write")[20];
    let b = r.records[i]["base_rv"].as_u64().unwrap();
    r.records[i]["base_rv"] = (b - 2).into();
    r.must_fail("linearizable", "base-revision");
}

/// Records the probes cannot have written: a seq twice, a success with a
/// 500, a success an hour after the probes stopped.
#[test]
fn records_that_contradict_themselves_fail_record_integrity() {
    let mut r = Run::of("quiet");
    let s = r.records[5]["seq"].clone();
    r.records[9]["seq"] = s;
    r.must_fail("record-integrity", "seq taken already");

    let mut r = Run::of("quiet");
    let i = r.ok("get")[3];
    r.records[i]["http_status"] = 500.into();
    r.must_fail("record-integrity", "outcome ok with HTTP 500");

    let mut r = Run::of("quiet");
    let i = r.ok("readyz")[3];
    let t = f(&r.records[i]["start_unix_ms"]);
    r.records[i]["start_unix_ms"] = (t + 3_600_000.0).into();
    r.must_fail("record-integrity", "outside the probes' run");
}

/// A failed request "retried" by a record of another lane, or a timeout
/// "retried" at all, is still a failed request.
#[test]
fn a_retry_taken_on_trust_does_not_hide_a_failure() {
    let mut r = Run::of("quiet");
    let i = r.ok("get")[30];
    r.records[i]["outcome"] = "timeout".into();
    r.records[i]["duration_ms"] = 1_900.0.into();
    r.records[i].as_object_mut().unwrap().remove("http_status");
    let seq = r.records[i]["seq"].clone();
    // The next readyz names it as its retry.
    let j = r.ok("readyz")[30];
    r.records[j]["retry_of"] = seq;
    r.must_fail("zero-downtime", "1 of");
}

/// A write acknowledged with two revisions (two writers won one update).
#[test]
fn one_value_acknowledged_twice_fails_ledger_conflicts() {
    let mut r = Run::of("quiet");
    let writes = r.ok("write");
    let (a, b) = (writes[10], writes[11]);
    let v = r.records[a]["value"].clone();
    r.records[b]["value"] = v;
    r.must_fail(
        "ledger-conflicts",
        "acknowledged twice with different resourceVersions",
    );
}

/// A lane that went quiet (a stuck agent) for longer than its timeout:
/// blind, although every step has its samples.
#[test]
fn a_lane_that_went_quiet_fails_coverage() {
    let mut r = Run::of("quiet");
    let gets: Vec<f64> = r
        .ok("get")
        .iter()
        .map(|&i| f(&r.records[i]["start_unix_ms"]))
        .collect();
    let (from, to) = (gets[40], gets[40] + 5_000.0);
    r.records.retain(|x| {
        !(x["probe"] == "get" && x["mode"] == "new" && (from..to).contains(&f(&x["start_unix_ms"])))
    });
    r.must_fail("coverage", "get/new started no request for");
}

/// A migration the criteria expect to complete, of which the run shows no
/// completed step (here: none at all), is not a pass.
#[test]
fn a_migration_that_did_not_finish_fails_migration_completed() {
    let r = Run::of("quiet");
    r.criteria("migration", "completed".into());
    r.must_fail(
        "migration-completed",
        "stop early: no MigrationCompleted step",
    );
}

/// How `zero-downtime` names `n` failures nothing excused.
fn unexcused(n: u32) -> String {
    format!("{n} failed request(s) no known hazard explains")
}

/// The write in flight at the kill (seq 999) and the one in the election
/// after it (seq 1076), as recorded.
const AT_KILL: u64 = 999;
const IN_ELECTION: u64 = 1076;

#[test]
fn the_recorded_election_passes_with_its_two_excuses() {
    let r = Run::of("election");
    assert_eq!(r.judge(), Vec::<(String, String)>::new());
    let v = r.verdict();
    let zd = v.rules.iter().find(|r| r.name == "zero-downtime").unwrap();
    assert_eq!(
        zd.status,
        cpmlab_verdict::RuleStatus::Excused,
        "{}",
        zd.message
    );
    let by: Vec<(u64, &str)> = v
        .excuses
        .excused
        .iter()
        .map(|e| (e.seq, e.hazard.name()))
        .collect();
    assert_eq!(
        by,
        [(AT_KILL, "killed-member"), (IN_ELECTION, "leader-election")]
    );
}

/// A gateway's 503 "no healthy upstream" in the election's window is the
/// gateway's failure, not etcd's: no hazard excuses its class.
#[test]
fn a_gateways_503_in_an_election_is_not_excused() {
    let mut r = Run::of("election");
    let i = r.seq(IN_ELECTION);
    r.records[i]["http_status"] = 503.into();
    r.records[i]["error"] = "no healthy upstream".into();
    r.records[i]["duration_ms"] = 2.0.into();
    r.must_fail("zero-downtime", &unexcused(1));
}

/// The same etcd error 9 s after the election (three election timeouts
/// are 3 s) and long after the killed member came back: nothing excuses it.
#[test]
fn an_etcd_error_outside_the_elections_window_is_not_excused() {
    let mut r = Run::of("election");
    let i = r.seq(IN_ELECTION);
    let t = f(&r.records[i]["start_unix_ms"]);
    r.records[i]["start_unix_ms"] = (t + 9_000.0).into();
    r.records[i]["duration_ms"] = 1_000.0.into();
    r.must_fail("zero-downtime", &unexcused(1));
}

/// A kill the member's log does not confirm (the event names a member
/// whose log goes on, whose container no kubelet started again, whose
/// peers lost no stream with it) excuses nothing. The election may excuse
/// readyz only here, so that the write at the kill has only the kill.
#[test]
fn a_kill_nothing_confirms_excuses_nothing() {
    let r = Run::of("election");
    r.criteria(
        "excuse",
        serde_json::json!({
            "killed-member": {"max": 4, "max_ms": 10000.0},
            "leader-election": {"max": 6, "max_ms": 10000.0, "lanes": ["readyz"]},
        }),
    );
    // The kill as recorded excuses the write at the kill; the write in
    // the election is left.
    r.must_fail("zero-downtime", &unexcused(1));
    r.events(|e| {
        if e["kind"] == "fault" {
            e["name"] = "kill member seed-a-etcd-0 (leader)".into();
        }
    });
    r.must_fail("zero-downtime", &unexcused(2));
    let v = r.verdict();
    let unconfirmed = serde_json::to_string(&v.excuses).unwrap();
    assert!(
        unconfirmed.contains("seed-a-etcd-0's log goes on after it"),
        "{unconfirmed}"
    );
}

/// A watch ERROR 410 resets nothing without a fresh read: the events it
/// skips are missed.
#[test]
fn a_410_with_no_fresh_read_after_it_hides_no_missed_event() {
    let mut r = Run::of("election");
    let events = r.with_event("watch", "reused", "MODIFIED");
    let k = events[events.len() / 2];
    let mut gone = r.records[k].clone();
    gone["outcome"] = "http".into();
    gone["http_status"] = 410.into();
    gone["event"] = "ERROR".into();
    gone["error"] = "too old resource version".into();
    let skipped: Vec<usize> = events[events.len() / 2..events.len() / 2 + 3].to_vec();
    for i in skipped.iter().rev() {
        r.records.remove(*i);
    }
    r.records.insert(k, gone);
    r.must_fail("watch-continuity", "none followed by a fresh read");
}

/// A re-list storm: an informer that lists again and again with no 410
/// and no failed list to explain it, past the criteria's budget (none).
#[test]
fn an_informer_relist_storm_fails_informer() {
    let mut r = Run::of("election");
    let applies = r.with_event("informer", "reused", "apply");
    let at = applies[applies.len() / 2];
    let t = f(&r.records[at]["start_unix_ms"]);
    for n in 0..3 {
        for ev in ["synced", "init"] {
            let mut x = r.records[at].clone();
            let o = x.as_object_mut().unwrap();
            o.retain(|k, _| ["probe", "mode", "outcome", "start_mono_ms"].contains(&k.as_str()));
            o.insert("event".into(), ev.into());
            o.insert(
                "seq".into(),
                (900_000 + n * 2 + (ev == "init") as u64).into(),
            );
            o.insert("start_unix_ms".into(), (t - 1.0 + n as f64 * 0.1).into());
            o.insert("duration_ms".into(), 0.0.into());
            r.records.insert(at, x);
        }
    }
    r.must_fail("informer", "3 beyond them (budget 0)");
}

/// A watch that broke and was not opened again for 12 s (a client stuck
/// in its back-off) was blind that long, whatever its events before and
/// after say.
#[test]
fn a_watch_without_an_open_stream_fails_coverage() {
    let mut r = Run::of("election");
    let connect = r.with_event("watch", "new", "connect")[0];
    let t0 = f(&r.records[connect]["start_unix_ms"]);
    let (from, to) = (t0 + 5_000.0, t0 + 17_000.0);
    r.records.retain(|x| {
        !(x["probe"] == "watch"
            && x["mode"] == "new"
            && (from..to).contains(&f(&x["start_unix_ms"])))
    });
    let mut broken = r.records[connect].clone();
    broken["event"] = "broken".into();
    broken["outcome"] = "reset".into();
    broken["error"] = "stream reset".into();
    broken["start_unix_ms"] = from.into();
    broken["duration_ms"] = 0.0.into();
    broken["seq"] = 900_100.into();
    let mut again = r.records[connect].clone();
    again["start_unix_ms"] = to.into();
    again["seq"] = 900_101.into();
    r.records.push(broken);
    r.records.push(again);
    r.must_fail("coverage", "watch/new had no open stream for 12.0 s");
}

/// An 8 s stall of one get: its own length is downtime, in its lane's
/// figures and overall, not only the next request's.
#[test]
fn a_stall_counts_its_own_length_as_downtime() {
    let mut r = Run::of("quiet");
    let i = r.ok("get")[40];
    r.records[i]["duration_ms"] = 8_000.0.into();
    r.must_fail("zero-downtime", "stall");
    let v = r.verdict();
    let lane = format!("get/{}", r.records[i]["mode"].as_str().unwrap());
    assert!(
        v.probes[&lane].downtime_ms >= 8_000.0,
        "{lane}: {:?}",
        v.probes[&lane]
    );
    assert!(v.overall.downtime_ms >= 8_000.0, "{:?}", v.overall);
}

/// A watch whose stream stayed open and delivered nothing for 12 s while
/// writes were acknowledged, then everything it had held back (a server
/// that lost etcd and found it again): no request failed and no event was
/// missed, and its client saw the counter stand still for 12 s.
#[test]
fn a_watch_silent_on_an_open_stream_fails_watch_silence_and_counts_as_downtime() {
    let mut r = Run::of("election");
    let events = r.with_event("watch", "reused", "MODIFIED");
    let t0 = f(&r.records[events[0]]["start_unix_ms"]);
    let (from, to) = (t0 + 1_000.0, t0 + 13_000.0);
    for i in events {
        let t = f(&r.records[i]["start_unix_ms"]);
        if (from..to).contains(&t) {
            // Delivered at the end of the silence, in order.
            r.records[i]["start_unix_ms"] = (to + (t - from) / 1_000.0).into();
        }
    }
    r.must_fail("watch-silence", "watch/reused: no event for");
    let v = r.verdict();
    assert!(
        v.probes["watch/reused"].downtime_ms >= 11_000.0,
        "{:?}",
        v.probes["watch/reused"]
    );
    assert!(v.overall.downtime_ms >= 11_000.0, "{:?}", v.overall);
}

/// A lane whose agent died half-way, while the others went on: silent
/// from its last request to the end of the probes' sending.
#[test]
fn a_lane_that_stopped_early_fails_coverage() {
    let mut r = Run::of("quiet");
    let gets = r.ok("get");
    let cut = f(&r.records[gets[gets.len() / 2]]["start_unix_ms"]);
    r.records
        .retain(|x| !(x["probe"] == "get" && x["mode"] == "new" && f(&x["start_unix_ms"]) > cut));
    r.must_fail("coverage", "get/new started no request for");
}

/// One acknowledged write whose resourceVersion is below the one before
/// it: the rule names that one write, not the correct ones after it.
#[test]
fn one_write_that_goes_back_is_the_one_rv_monotonic_names() {
    let mut r = Run::of("quiet");
    let writes: Vec<usize> = r
        .ok("write")
        .into_iter()
        .filter(|&i| r.records[i].get("base_rv").is_some())
        .collect();
    let i = writes[writes.len() / 2];
    let before = r.records[writes[writes.len() / 2 - 1]]["rv"]
        .as_u64()
        .unwrap();
    r.records[i]["rv"] = (before - 1).into();
    r.must_fail(
        "rv-monotonic",
        &format!("1 acknowledged write(s) with a resourceVersion lower than one acknowledged before: rv {} after {before}", before - 1),
    );
}

/// Successful gets that carry no value cannot be checked, and the rule
/// says so instead of counting them as checked.
#[test]
fn gets_without_a_value_are_said_to_be_unchecked() {
    let mut r = Run::of("quiet");
    for i in r.ok("get").into_iter().take(3) {
        r.records[i].as_object_mut().unwrap().remove("value");
    }
    let v = r.verdict();
    let rule = v.rule("linearizable").unwrap();
    assert!(
        rule.message
            .contains("3 successful read(s) carried no value and were not checked"),
        "{}",
        rule.message
    );
}

/// A lagging member's pre-vote 6.3 s before the election, which changed
/// nothing: it is no sign of this election (more than three election
/// timeouts before the leader change), and an etcd timeout just after it
/// is not the election's to excuse.
#[test]
fn an_old_pre_vote_opens_no_election_window() {
    let mut r = Run::of("election");
    // 13:39:49.5: the pre-vote; the leader changed at 13:39:55.80.
    let log = r.dir.path().join("logs/corp-seed-a-etcd-0.log");
    let text = std::fs::read_to_string(&log).unwrap();
    let line = r#"2026-11-27T13:39:49.500000000Z {"level":"info","ts":"2026-11-27T13:39:49.500000Z","caller":"raft/raft.go:929","msg":"9f1a2b3c4d5e6f70 became pre-candidate at term 2"}"#;
    let mut lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.as_bytes()[..30] > line.as_bytes()[..30])
        .unwrap_or(lines.len());
    lines.insert(at, line);
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    // The election's write, moved to 13:39:50.0 (before the kill at
    // 13:39:54.1), failing in 1 s with the same error.
    let i = r.seq(IN_ELECTION);
    r.records[i]["start_unix_ms"] = 1_795_786_790_000.0.into();
    r.records[i]["duration_ms"] = 1_000.0.into();
    r.must_fail("zero-downtime", &unexcused(1));
}

/// A plain 503 (no Retry-After) that a record names as retried: clients
/// do not resend it by themselves, so it stays a failure, and no message
/// invents a Retry-After wait for it.
#[test]
fn a_plain_503_retried_is_no_retry_after_wait() {
    let mut r = Run::of("quiet");
    let i = r.ok("get")[30];
    r.records[i]["outcome"] = "http".into();
    r.records[i]["http_status"] = 503.into();
    r.records[i]["error"] = "HTTP 503 Service Unavailable".into();
    let seq = r.records[i]["seq"].clone();
    // The lane's next get: a retry in every respect but the failure's class.
    let mode = r.records[i]["mode"].clone();
    let j = r
        .ok("get")
        .into_iter()
        .find(|&j| j > i && r.records[j]["mode"] == mode)
        .unwrap();
    r.records[j]["retry_of"] = seq;
    r.must_fail("zero-downtime", "1 of");
    let bad = r.judge();
    assert!(
        bad.iter().all(|(_, m)| !m.contains("Retry-After")),
        "{bad:#?}"
    );
}
