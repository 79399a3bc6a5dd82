//! One grid run's measures, read from its run directory (`result.json`,
//! and in `run/` the verdict, the records, the lab's events, etcd's
//! samples, the leader's raft progress and the members' logs). compare's
//! [`measures::of_run`] gives what a comparison measures (the migration's
//! time, the join and whether it completed); the rest is the envelope's
//! own: failures split into server errors and client timeouts, the SLO
//! rules that broke, what etcd dropped on a full peer stream, the database
//! and the snapshot a joiner received, the learners' raft progress. No
//! failure is excused here: the fixtures excuse known etcd hazards such
//! as a proposal dropped at MoveLeader; the envelope shows them as what
//! they are.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::compare::measures;

fn read(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn ndjson(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// An envelope point's measures: `envelope.json`'s cells.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub name: String,
    pub migration: Option<String>,
    pub wall_s: Option<f64>,
    pub error: Option<String>,
    /// The run got no verdict (`error` or `migration` says why).
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_verdict: bool,
    /// Requests that hit the probes' client timeout, and successes slower
    /// than the verdict's stall bound (the client waited, and got its
    /// answer late).
    #[serde(default)]
    pub timeouts: u64,
    /// Requests the API answered with an error (or reset, refused).
    #[serde(default)]
    pub server_errors: u64,
    #[serde(default)]
    pub downtime_ms: f64,
    /// The steps whose p99 broke the verdict's latency thresholds.
    #[serde(default)]
    pub slo_breaches: Vec<String>,
    #[serde(default)]
    pub migration_s: Option<f64>,
    /// Successes slower than `--slow` (watches and informers aside).
    #[serde(default)]
    pub slow: u64,
    #[serde(default)]
    pub buffer_drops: Option<u64>,
    #[serde(default)]
    pub db_mib: Option<f64>,
    #[serde(default)]
    pub snapshot_s: Option<f64>,
    #[serde(default)]
    pub write_p99_ms: Option<f64>,
    #[serde(default)]
    pub zero_downtime: bool,
}

/// The leader's view of one learner while it was one: samples per raft
/// progress state (probe, replicate, snapshot), its match index at the
/// first and the last sample, how far behind the leader's commit it ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LearnerProgress {
    pub samples: u64,
    pub states: BTreeMap<String, u64>,
    pub first_match: u64,
    pub last_match: u64,
    pub behind: u64,
}

/// A learner run's measures: `learner.json`'s rows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Learner {
    pub name: String,
    pub migration: Option<String>,
    pub error: Option<String>,
    pub joined: bool,
    pub failed_requests: Option<u64>,
    #[serde(default)]
    pub join_s: Option<f64>,
    #[serde(default)]
    pub buffer_drops: Option<u64>,
    /// TCP's view was sampled (`run/tcp.ndjson`).
    #[serde(default)]
    pub tcp_samples: bool,
    #[serde(default)]
    pub learners: BTreeMap<String, LearnerProgress>,
}

/// The p-quantile as the envelope has always taken it: the value at rank
/// ⌊q·n⌋ of the sorted sample.
fn percentile(mut v: Vec<f64>, q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[((q * v.len() as f64) as usize).min(v.len() - 1)])
}

/// Log entries (MsgApp) the members dropped because their stream to a peer
/// stayed full (the report's "What etcd said"): what keeps a learner from
/// catching up. Heartbeats are not counted. `None` when the run kept no
/// member logs.
pub fn buffer_drops(run: &Path) -> Option<u64> {
    if !run.join("logs").is_dir() {
        return None;
    }
    use crate::verdict::etcd_said::{read, Kind};
    Some(
        read(run)
            .iter()
            .filter(|f| f.kind == Kind::PeerBufferFull)
            .filter_map(|f| f.messages.get("MsgApp"))
            .sum(),
    )
}

/// An envelope point's measures from `dir` (the run's scenario directory);
/// `None` when it has no result.
pub fn point(dir: &Path, name: &str, slow_s: f64) -> Option<Point> {
    let res = read(&dir.join("result.json"))?;
    let mut c = Point {
        name: name.to_string(),
        migration: res["migration"].as_str().map(str::to_string),
        wall_s: res["wall_s"].as_f64(),
        error: res["error"].as_str().map(str::to_string),
        ..Point::default()
    };
    let run = dir.join("run");
    let Some(v) = read(&run.join("verdict.json")) else {
        c.no_verdict = true;
        return Some(c);
    };
    let fails = v["overall"]["failures"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let n = |k: &str| fails.get(k).and_then(Value::as_u64).unwrap_or(0);
    c.timeouts = n("timeout") + n("stall");
    c.server_errors = fails
        .iter()
        .filter(|(k, _)| *k != "timeout" && *k != "stall")
        .filter_map(|(_, n)| n.as_u64())
        .sum();
    c.downtime_ms = v["overall"]["downtime_ms"].as_f64().unwrap_or(0.0);
    let prefix = crate::verdict::slo::RULE_PREFIX;
    c.slo_breaches = v["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["status"] == "failed")
        .filter_map(|r| r["name"].as_str()?.strip_prefix(prefix).map(str::to_string))
        .collect();
    c.slo_breaches.sort();
    c.migration_s = measures::of_run(dir).values.get("migration_s").copied();
    let mut writes = Vec::new();
    for r in ndjson(&run.join("records.ndjson")) {
        if r["outcome"] != "ok" {
            continue;
        }
        let d = r["duration_ms"].as_f64().unwrap_or(0.0);
        let probe = r["probe"].as_str().unwrap_or("");
        if d > slow_s * 1e3 && probe != "watch" && probe != "informer" {
            c.slow += 1;
        }
        if probe == "write" || probe == "load" {
            writes.push(d);
        }
    }
    c.write_p99_ms = percentile(writes, 0.99);
    c.buffer_drops = buffer_drops(&run);
    // The database and what joining cost: the largest member's dbSize, and
    // the longest a joiner took to receive its snapshot (etcd's counters,
    // their last sample per member).
    let mut last: BTreeMap<String, Value> = BTreeMap::new();
    for s in ndjson(&run.join("etcd.ndjson")) {
        if s["up"] == true {
            if let Some(m) = s["member"].as_str() {
                last.insert(m.to_string(), s["metrics"].clone());
            }
        }
    }
    let metric = |m: &Value, k: &str| m[k].as_f64().unwrap_or(0.0);
    c.db_mib = last
        .values()
        .map(|m| metric(m, "etcd_mvcc_db_total_size_in_bytes"))
        .reduce(f64::max)
        .map(|b| b / (1u64 << 20) as f64);
    c.snapshot_s = last
        .values()
        .filter(|m| metric(m, "etcd_network_snapshot_receive_success") > 0.0)
        .map(|m| {
            metric(
                m,
                "etcd_network_snapshot_receive_total_duration_seconds_sum",
            )
        })
        .reduce(f64::max);
    c.zero_downtime = c.timeouts == 0 && c.server_errors == 0;
    Some(c)
}

/// The leader's view of each learner (`run/raft.ndjson`, a sample a
/// second), by name.
pub fn raft_progress(run: &Path) -> BTreeMap<String, LearnerProgress> {
    let mut out: BTreeMap<String, LearnerProgress> = BTreeMap::new();
    for s in ndjson(&run.join(crate::observe::raft::RAFT_FILE)) {
        let Some(peers) = s["peers"].as_object() else {
            continue;
        };
        for (name, p) in peers {
            if p["learner"] != true {
                continue;
            }
            let (Some(m), Some(state)) = (p["match"].as_u64(), p["state"].as_str()) else {
                continue;
            };
            let o = out.entry(name.clone()).or_insert_with(|| LearnerProgress {
                first_match: m,
                ..LearnerProgress::default()
            });
            o.samples += 1;
            *o.states.entry(state.to_string()).or_insert(0) += 1;
            o.last_match = m;
            o.behind = p["behind"].as_u64().unwrap_or(0);
        }
    }
    out
}

/// A learner run's measures from `dir`; `None` when it has no result.
pub fn learner(dir: &Path, name: &str) -> Option<Learner> {
    let res = read(&dir.join("result.json"))?;
    let m = measures::of_run(dir);
    let run = dir.join("run");
    Some(Learner {
        name: name.to_string(),
        migration: res["migration"].as_str().map(str::to_string),
        error: res["error"].as_str().map(str::to_string),
        joined: m.values.get("joined") == Some(&1.0),
        failed_requests: res["failed_requests"].as_u64(),
        join_s: m.values.get("join_s").copied(),
        buffer_drops: buffer_drops(&run),
        tcp_samples: run.join("tcp.ndjson").exists(),
        learners: raft_progress(&run),
    })
}

/// One line for the progress: the outcome, the failures, the p99 and the
/// migration's time.
pub fn point_text(c: Option<&Point>) -> String {
    let Some(c) = c else {
        return "not run".into();
    };
    if c.no_verdict {
        return format!(
            "no verdict ({})",
            c.error
                .as_deref()
                .or(c.migration.as_deref())
                .unwrap_or("none")
        );
    }
    let mut parts = vec![format!(
        "migration {}",
        c.migration.as_deref().unwrap_or("none")
    )];
    parts.push(if c.zero_downtime {
        "zero downtime".into()
    } else {
        format!("{} errors, {} timeouts", c.server_errors, c.timeouts)
    });
    if let Some(p) = c.write_p99_ms {
        parts.push(format!("write p99 {p:.0} ms"));
    }
    if let Some(s) = c.migration_s.filter(|s| *s > 0.0) {
        parts.push(format!("{s:.0} s"));
    }
    parts.join(", ")
}

/// The learner that ended furthest behind: its states and progress.
fn raft_text(learners: &BTreeMap<String, LearnerProgress>) -> String {
    let Some((name, o)) = learners.iter().max_by_key(|(_, o)| o.behind) else {
        return String::new();
    };
    let states = o
        .states
        .iter()
        .map(|(k, v)| format!("{k} {:.0} %", 100.0 * *v as f64 / o.samples.max(1) as f64))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "; {name} as learner: {states} of {} s, match {} -> {}, {} behind at the end",
        o.samples, o.first_match, o.last_match, o.behind
    )
}

/// One line for the progress: joined or not, what etcd dropped, and the
/// learner that ended furthest behind.
pub fn learner_text(c: Option<&Learner>) -> String {
    let Some(c) = c else {
        return "not run".into();
    };
    if let (Some(e), false) = (&c.error, c.joined) {
        return format!("no result ({})", e.lines().next().unwrap_or(""));
    }
    let j = match (c.joined, c.join_s) {
        (true, Some(s)) => format!("joined in {s:.0} s"),
        (true, None) => "joined".into(),
        (false, _) => "not joined".into(),
    };
    format!(
        "{j}, {} MsgApp dropped on a full stream{}",
        c.buffer_drops.unwrap_or(0),
        raft_text(&c.learners)
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A recorded point: a completed migration with two write timeouts and
    /// a 503, a broken SLO, etcd's samples and a dropped MsgApp stream.
    pub(crate) fn record_point(dir: &Path, migration: &str) {
        let run = dir.join("run");
        std::fs::create_dir_all(run.join("logs")).unwrap();
        std::fs::write(
            dir.join("result.json"),
            format!(r#"{{"migration": "{migration}", "wall_s": 200.0, "error": null}}"#),
        )
        .unwrap();
        std::fs::write(
            run.join("verdict.json"),
            r#"{"overall": {"failures": {"timeout": 2, "stall": 1, "http": 3}, "downtime_ms": 1500.0},
                "rules": [{"name": "slo-switch-over-get", "status": "failed"}, {"name": "slo-prepare-get", "status": "passed"}, {"name": "lost-writes", "status": "failed"}]}"#,
        )
        .unwrap();
        std::fs::write(
            run.join("events.ndjson"),
            "{\"kind\":\"phase\",\"name\":\"A\",\"at_unix_ms\":1000,\"end_unix_ms\":2000}\n\
             {\"kind\":\"phase\",\"name\":\"B\",\"at_unix_ms\":2000,\"end_unix_ms\":73000}\n",
        )
        .unwrap();
        let mut records = String::new();
        for i in 1..=100 {
            records.push_str(&format!(
                "{{\"probe\":\"load\",\"outcome\":\"ok\",\"duration_ms\":{}}}\n",
                i * 10
            ));
        }
        records.push_str("{\"probe\":\"get\",\"outcome\":\"ok\",\"duration_ms\":2500}\n");
        records.push_str("{\"probe\":\"watch\",\"outcome\":\"ok\",\"duration_ms\":60000}\n");
        records.push_str("{\"probe\":\"write\",\"outcome\":\"timeout\",\"duration_ms\":10000}\n");
        std::fs::write(run.join("records.ndjson"), records).unwrap();
        std::fs::write(
            run.join("etcd.ndjson"),
            "{\"member\":\"seed-a-etcd-0\",\"up\":true,\"metrics\":{\"etcd_mvcc_db_total_size_in_bytes\":4194304}}\n\
             {\"member\":\"seed-b-etcd-0\",\"up\":true,\"metrics\":{\"etcd_mvcc_db_total_size_in_bytes\":1048576,\"etcd_network_snapshot_receive_success\":1,\"etcd_network_snapshot_receive_total_duration_seconds_sum\":12.5}}\n\
             {\"member\":\"seed-a-etcd-0\",\"up\":false}\n",
        )
        .unwrap();
        std::fs::write(
            run.join("logs/seed-a-etcd-0.log"),
            "2026-01-01T00:00:00.000000000Z {\"level\":\"info\",\"msg\":\"starting an etcd server\",\"name\":\"seed-a-etcd-0\",\"local-member-id\":\"aa\"}\n\
             2026-01-01T00:00:10.000000000Z {\"msg\":\"dropped internal Raft message since sending buffer is full (overloaded network)\",\"message-type\":\"MsgApp\",\"local-member-id\":\"aa\",\"remote-peer-id\":\"bb\"}\n\
             2026-01-01T00:00:11.000000000Z {\"msg\":\"dropped internal Raft message since sending buffer is full (overloaded network)\",\"message-type\":\"MsgApp\",\"local-member-id\":\"aa\",\"remote-peer-id\":\"bb\"}\n\
             2026-01-01T00:00:12.000000000Z {\"msg\":\"dropped internal Raft message since sending buffer is full (overloaded network)\",\"message-type\":\"MsgHeartbeat\",\"local-member-id\":\"aa\",\"remote-peer-id\":\"bb\"}\n",
        )
        .unwrap();
    }

    /// A recorded learner run: stopped after its join (joined) or aborted.
    pub(crate) fn record_learner(dir: &Path, joined: bool, join_s: f64) {
        let run = dir.join("run");
        std::fs::create_dir_all(&run).unwrap();
        let migration = if joined { "stopped" } else { "aborted" };
        std::fs::write(
            dir.join("result.json"),
            format!(r#"{{"migration": "{migration}", "error": null, "failed_requests": 0}}"#),
        )
        .unwrap();
        std::fs::write(
            run.join("events.ndjson"),
            format!(
                "{{\"kind\":\"phase\",\"name\":\"SourceEtcdPreparedForPeerJoin\",\"at_unix_ms\":0,\"end_unix_ms\":1000}}\n\
                 {{\"kind\":\"phase\",\"name\":\"DestinationEtcdPeersJoined\",\"at_unix_ms\":1000,\"end_unix_ms\":{}}}\n",
                1000.0 + join_s * 1000.0
            ),
        )
        .unwrap();
        std::fs::write(
            run.join("raft.ndjson"),
            "{\"peers\":{\"seed-b-etcd-0\":{\"match\":0,\"state\":\"probe\",\"behind\":500,\"learner\":true},\"seed-a-etcd-1\":{\"match\":900,\"state\":\"replicate\",\"behind\":0,\"learner\":false}}}\n\
             {\"peers\":{\"seed-b-etcd-0\":{\"match\":1048,\"state\":\"replicate\",\"behind\":1618,\"learner\":true}}}\n\
             {\"peers\":{\"seed-b-etcd-0\":{\"match\":1048,\"state\":\"probe\",\"behind\":1618,\"learner\":true}}}\n",
        )
        .unwrap();
        std::fs::write(run.join("tcp.ndjson"), "{}\n").unwrap();
    }

    #[test]
    fn a_point_s_measures_come_from_its_recorded_run() {
        let d = tempfile::tempdir().unwrap();
        record_point(d.path(), "completed");
        let c = point(d.path(), "p", 2.0).unwrap();
        assert_eq!(c.timeouts, 3, "timeouts and stalls");
        assert_eq!(c.server_errors, 3);
        assert!(!c.zero_downtime);
        assert_eq!(c.slo_breaches, ["switch-over-get"]);
        assert_eq!(c.migration_s, Some(72.0));
        assert_eq!(c.slow, 1, "the get over 2 s; the watch aside");
        assert_eq!(c.write_p99_ms, Some(1000.0));
        assert_eq!(c.buffer_drops, Some(2), "MsgApp only");
        assert_eq!(c.db_mib, Some(4.0));
        assert_eq!(c.snapshot_s, Some(12.5));
        assert!(point_text(Some(&c)).starts_with("migration completed, 3 errors, 3 timeouts"));
        // No verdict: said so.
        std::fs::remove_file(d.path().join("run/verdict.json")).unwrap();
        let c = point(d.path(), "p", 2.0).unwrap();
        assert!(c.no_verdict);
        assert!(point(&d.path().join("none"), "p", 2.0).is_none());
    }

    #[test]
    fn a_learner_run_says_whether_it_joined_and_how_its_learner_progressed() {
        let d = tempfile::tempdir().unwrap();
        record_learner(d.path(), true, 12.0);
        let c = learner(d.path(), "l").unwrap();
        assert!(c.joined);
        assert_eq!(c.join_s, Some(12.0));
        assert!(c.tcp_samples);
        let p = &c.learners["seed-b-etcd-0"];
        assert_eq!(
            (p.samples, p.first_match, p.last_match, p.behind),
            (3, 0, 1048, 1618)
        );
        assert_eq!(p.states["probe"], 2);
        assert!(
            !c.learners.contains_key("seed-a-etcd-1"),
            "a voter is no learner"
        );
        let t = learner_text(Some(&c));
        assert!(t.starts_with("joined in 12 s, 0 MsgApp"), "{t}");
        assert!(t.contains("seed-b-etcd-0 as learner: probe 67 %, replicate 33 % of 3 s, match 0 -> 1048, 1618 behind"), "{t}");
        let d = tempfile::tempdir().unwrap();
        record_learner(d.path(), false, 120.0);
        assert!(!learner(d.path(), "l").unwrap().joined);
    }
}
