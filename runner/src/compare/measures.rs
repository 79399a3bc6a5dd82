//! What a comparison measures of each run, from the run's own files (the
//! scenario's `result.json`, and in `run/` the verdict, the lab events and
//! the delay line's counters): raw figures, as the verdict states them
//! before any excuse.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The measures, each with its unit, in the order the page shows them.
pub const MEASURES: &[(&str, &str, &str)] = &[
    ("failed_requests", "", "failed requests (raw)"),
    ("failed_new", "", "failed on new connections"),
    ("failed_reused", "", "failed on kept HTTP/2 connections"),
    (
        "failed_keepalive",
        "",
        "failed on kept HTTP/1.1 keep-alive connections",
    ),
    (
        "failed_node",
        "",
        "failed on shoot nodes' kept connections (apiserver-proxy)",
    ),
    ("failed_informer", "", "informer requests failed"),
    (
        "kept_window_s",
        "s",
        "first to last failure on kept connections",
    ),
    (
        "node_window_s",
        "s",
        "first to last failure on shoot nodes' connections",
    ),
    (
        "watch_silence_s",
        "s",
        "longest watch silence while writes were acknowledged",
    ),
    ("downtime_ms", "ms", "downtime, all lanes merged"),
    ("longest_outage_ms", "ms", "longest unavailable interval"),
    ("write_p99_ms", "ms", "write p99 (worst lane)"),
    ("lost_writes", "", "acknowledged writes lost"),
    ("migration_s", "s", "migration time (first step to last)"),
    (
        "joined",
        "",
        "the destination members joined (1) or not (0)",
    ),
    ("join_s", "s", "DestinationEtcdPeersJoined, start to end"),
    (
        "handoff_s",
        "s",
        "the gardenlets' hand-offs, summed (a step's end to the next one's start)",
    ),
    ("handoff_max_s", "s", "the longest hand-off"),
    ("wan_mib", "MiB", "bytes between the seeds"),
    (
        "lab_s",
        "s",
        "lab up and down (what reusing a lab would save)",
    ),
];

/// One run's outcome and measures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunMeasures {
    pub variant: String,
    pub repetition: u32,
    pub seed: u64,
    /// The scenario's directory, relative to the comparison's.
    pub dir: String,
    /// Every expectation held.
    pub passed: bool,
    /// The verdict's status (PASSED, PASSED WITH KNOWN HAZARDS, FAILED), or
    /// why there is none.
    pub status: String,
    pub wall_s: f64,
    /// Requests failed while the lab's machine was saturated (the
    /// verdict's `saturated_failures`): the run is kept apart, its
    /// failures the lab's machine's as much as the migration's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated: Option<String>,
    /// By measure name; a measure the run has no figure for is absent.
    pub values: std::collections::BTreeMap<String, f64>,
}

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

/// The step whose length and outcome are a run's join.
const JOIN_STEP: &str = "DestinationEtcdPeersJoined";

/// The measures of the scenario run in `dir` (a `cpmlab run` scenario
/// directory).
pub fn of_run(dir: &Path) -> RunMeasures {
    let mut m = RunMeasures::default();
    let result = read(&dir.join("result.json"));
    if let Some(r) = &result {
        m.passed = r["passed"].as_bool().unwrap_or(false);
        m.wall_s = r["wall_s"].as_f64().unwrap_or(0.0);
        m.seed = r["seed"].as_u64().unwrap_or(0);
        if let Some(l) = r["lab_s"].as_f64().filter(|l| *l > 0.0) {
            m.values.insert("lab_s".into(), l);
        }
        if let Some(e) = r["error"].as_str() {
            m.status = format!("ERROR: {}", e.lines().next().unwrap_or(""));
        }
    }
    let run = dir.join("run");
    if let Some(v) = read(&run.join("verdict.json")) {
        if m.status.is_empty() {
            m.status = v["status"].as_str().map(str::to_string).unwrap_or_else(|| {
                if v["passed"] == true {
                    "PASSED"
                } else {
                    "FAILED"
                }
                .into()
            });
        }
        let o = &v["overall"];
        if let (Some(req), Some(ok)) = (o["requests"].as_f64(), o["ok"].as_f64()) {
            m.values.insert("failed_requests".into(), req - ok);
        }
        for (k, src) in [
            ("downtime_ms", "downtime_ms"),
            ("longest_outage_ms", "longest_unavailable_ms"),
        ] {
            if let Some(x) = o[src].as_f64() {
                m.values.insert(k.into(), x);
            }
        }
        let p99 = v["probes"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.starts_with("write/"))
            .filter_map(|(_, s)| s["latency"]["p99_ms"].as_f64())
            .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
        if let Some(p) = p99 {
            m.values.insert("write_p99_ms".into(), p);
        }
        let failed_in = |pred: &dyn Fn(&str) -> bool| -> f64 {
            v["probes"]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| pred(k))
                .filter_map(|(_, s)| Some(s["requests"].as_f64()? - s["ok"].as_f64()?))
                .sum()
        };
        if v["probes"].is_object() {
            let informer = |k: &str| k.starts_with("informer");
            m.values.insert(
                "failed_new".into(),
                failed_in(&|k| k.ends_with("/new") && !informer(k)),
            );
            m.values.insert(
                "failed_reused".into(),
                failed_in(&|k| k.ends_with("/reused") && !informer(k)),
            );
            m.values.insert(
                "failed_keepalive".into(),
                failed_in(&|k| k.ends_with("/keepalive") && !informer(k)),
            );
            m.values.insert(
                "failed_node".into(),
                failed_in(&|k| k.ends_with("/node") && !informer(k)),
            );
            m.values
                .insert("failed_informer".into(), failed_in(&informer));
        }
        // First to last failure of the mechanisms whose clients `of` names.
        let window = |of: &dyn Fn(&str) -> bool| -> Option<f64> {
            let spans: Vec<(f64, f64)> = v["mechanisms"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["clients"].as_str().is_some_and(of))
                .filter_map(|m| {
                    Some((
                        m["first_unix_ms"].as_f64()?,
                        m["last_end_unix_ms"].as_f64()?,
                    ))
                })
                .collect();
            let a = spans.iter().map(|k| k.0).reduce(f64::min)?;
            let b = spans.iter().map(|k| k.1).reduce(f64::max)?;
            Some((b - a) / 1e3)
        };
        if v["probes"].is_object() {
            let kept = window(&|c| c.starts_with("kept")).unwrap_or(0.0);
            m.values.insert("kept_window_s".into(), kept);
            let node = window(&|c| c == crate::verdict::mechanisms::NODE_CLIENTS).unwrap_or(0.0);
            m.values.insert("node_window_s".into(), node);
        }
        if v["probes"].is_object() {
            let silence = v["silent_watches"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| Some(s["to_unix_ms"].as_f64()? - s["from_unix_ms"].as_f64()?))
                .fold(0.0, f64::max);
            m.values.insert("watch_silence_s".into(), silence / 1e3);
        }
        if let Some(l) = v["ledger"]["lost_count"].as_f64() {
            m.values.insert("lost_writes".into(), l);
        }
        if v["saturated_failures"].as_u64().is_some_and(|n| n > 0) {
            m.saturated = v["mechanisms"]
                .as_array()
                .into_iter()
                .flatten()
                .find_map(|m| m["saturated"].as_str().map(str::to_string))
                .or_else(|| Some(crate::verdict::mechanisms::SATURATED.to_string()));
        }
    } else if m.status.is_empty() {
        m.status = "no verdict".into();
    }
    // A lab `down` could not remove: the run's status says so, whatever
    // the verdict (the command exits 3 with down's fix).
    if result.is_some_and(|r| r["teardown_error"].is_string()) {
        m.status.push_str(" (down failed)");
    }
    let events = ndjson(&run.join("events.ndjson"));
    let phases: Vec<(f64, f64)> = events
        .iter()
        .filter(|e| e["kind"] == "phase")
        .filter_map(|e| Some((e["at_unix_ms"].as_f64()?, e["end_unix_ms"].as_f64()?)))
        .collect();
    // The destination members' joins, from the first ask to the last vote
    // or to the step's failure; and whether they joined: a step followed
    // the join, or the run stopped there (`stop_after`) or completed.
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "phase")
        .filter_map(|e| e["name"].as_str())
        .collect();
    if let Some(j) = events
        .iter()
        .filter(|e| e["kind"] == "phase" && e["name"] == JOIN_STEP)
        .find_map(|e| Some(e["end_unix_ms"].as_f64()? - e["at_unix_ms"].as_f64()?))
    {
        m.values.insert("join_s".into(), j / 1000.0);
        let outcome = read(&dir.join("result.json"))
            .and_then(|r| r["migration"].as_str().map(str::to_string))
            .unwrap_or_default();
        let after = names.iter().skip_while(|n| **n != JOIN_STEP).count() > 1;
        let joined = after
            || outcome == "completed"
            || (outcome == "stopped" && names.last() == Some(&JOIN_STEP));
        m.values
            .insert("joined".into(), if joined { 1.0 } else { 0.0 });
    }
    let typed: Vec<crate::verdict::record::LabEvent> = events
        .iter()
        .filter_map(|e| serde_json::from_value(e.clone()).ok())
        .collect();
    let handoffs = crate::handoff::of_events(&typed);
    if !handoffs.is_empty() {
        m.values
            .insert("handoff_s".into(), crate::handoff::total_s(&handoffs));
        m.values.insert(
            "handoff_max_s".into(),
            handoffs.iter().map(|h| h.s).fold(0.0, f64::max),
        );
    }
    if let (Some(start), Some(end)) = (
        phases.iter().map(|p| p.0).reduce(f64::min),
        phases.iter().map(|p| p.1).reduce(f64::max),
    ) {
        m.values
            .insert("migration_s".into(), (end - start) / 1000.0);
    }
    if let Some(last) = ndjson(&run.join("delayline.ndjson")).last() {
        let bytes: f64 = last["links"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| {
                let (a, b) = k.split_once('>').unwrap_or(("", ""));
                a != "clients" && b != "clients"
            })
            .filter_map(|(_, l)| l["bytes"].as_f64())
            .sum();
        m.values
            .insert("wan_mib".into(), bytes / (1u64 << 20) as f64);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_down_marks_the_run_s_status() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("run")).unwrap();
        std::fs::write(
            d.path().join("result.json"),
            r#"{"passed": true, "wall_s": 60.0, "seed": 7, "error": null, "teardown_error": "error: lab `l`: 1 objects could not be removed"}"#,
        )
        .unwrap();
        std::fs::write(
            d.path().join("run/verdict.json"),
            r#"{"status": "PASSED", "passed": true}"#,
        )
        .unwrap();
        let m = of_run(d.path());
        assert_eq!(m.status, "PASSED (down failed)");
        assert!(m.passed, "the run's expectations held all the same");
    }

    #[test]
    fn measures_come_from_the_runs_own_files() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(
            d.path().join("result.json"),
            r#"{"passed": false, "wall_s": 120.5, "lab_s": 17.5, "seed": 7, "error": null}"#,
        )
        .unwrap();
        std::fs::write(
            run.join("verdict.json"),
            r#"{"status": "PASSED WITH KNOWN HAZARDS", "passed": true,
                "overall": {"requests": 109, "ok": 100, "downtime_ms": 66.0, "longest_unavailable_ms": 50.0},
                "probes": {"write/new": {"requests": 50, "ok": 50, "latency": {"p99_ms": 120.0}}, "write/reused": {"requests": 40, "ok": 39, "latency": {"p99_ms": 300.0}},
                           "get/new": {"requests": 5, "ok": 5, "latency": {"p99_ms": 900.0}}, "informer/reused": {"requests": 5, "ok": 4},
                           "get/node": {"requests": 9, "ok": 2}},
                "mechanisms": [{"clients": "kept connections (HTTP/2)", "first_unix_ms": 10000, "last_end_unix_ms": 25000},
                               {"clients": "shoot nodes' kept connections (through the apiserver-proxy)", "first_unix_ms": 11000, "last_end_unix_ms": 104000},
                               {"clients": "new connections", "first_unix_ms": 1000, "last_end_unix_ms": 90000}],
                "silent_watches": [{"from_unix_ms": 20000, "to_unix_ms": 62000}, {"from_unix_ms": 0, "to_unix_ms": 6000}],
                "ledger": {"lost_count": 0}}"#,
        )
        .unwrap();
        std::fs::write(
            run.join("events.ndjson"),
            "{\"kind\":\"phase\",\"name\":\"A\",\"at_unix_ms\":1000,\"end_unix_ms\":2000}\n\
             {\"kind\":\"fault\",\"name\":\"kill\",\"at_unix_ms\":0,\"end_unix_ms\":99000}\n\
             {\"kind\":\"phase\",\"name\":\"DestinationEtcdPeersJoined\",\"at_unix_ms\":2000,\"end_unix_ms\":31000}\n",
        )
        .unwrap();
        std::fs::write(
            run.join("delayline.ndjson"),
            "{\"links\":{}}\n{\"links\":{\"seed-a>seed-b\":{\"bytes\":2097152},\"seed-b>seed-a\":{\"bytes\":1048576},\"clients>seed-a\":{\"bytes\":999999}}}\n",
        )
        .unwrap();
        let m = of_run(d.path());
        assert_eq!(m.status, "PASSED WITH KNOWN HAZARDS");
        assert!(!m.passed);
        assert_eq!(m.values["failed_requests"], 9.0);
        assert_eq!(m.values["downtime_ms"], 66.0);
        assert_eq!(m.values["write_p99_ms"], 300.0);
        assert_eq!(m.values["lost_writes"], 0.0);
        assert_eq!(m.values["migration_s"], 30.0);
        assert_eq!(m.values["join_s"], 29.0);
        assert_eq!(
            m.values["joined"], 0.0,
            "the join was the last step, and the run failed"
        );
        assert_eq!(m.values["wan_mib"], 3.0);
        assert_eq!(m.values["lab_s"], 17.5);
        assert_eq!(m.values["failed_new"], 0.0);
        assert_eq!(m.values["failed_reused"], 1.0);
        assert_eq!(m.values["failed_informer"], 1.0);
        assert_eq!(m.values["kept_window_s"], 15.0);
        assert_eq!(m.values["failed_node"], 7.0);
        assert_eq!(m.values["node_window_s"], 93.0);
        assert_eq!(m.values["watch_silence_s"], 42.0);
        assert_eq!(m.saturated, None);
        // A run that stopped at the join (`stop_after`) joined.
        std::fs::write(
            d.path().join("result.json"),
            r#"{"passed": true, "wall_s": 40.0, "migration": "stopped"}"#,
        )
        .unwrap();
        assert_eq!(of_run(d.path()).values["joined"], 1.0);
    }

    #[test]
    fn a_run_whose_failures_met_a_saturated_machine_is_marked() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("run")).unwrap();
        std::fs::write(
            d.path().join("run/verdict.json"),
            r#"{"status": "FAILED", "passed": false, "saturated_failures": 12,
                "mechanisms": [{"clients": "new connections", "saturated": "the lab's machine was saturated from +26.0 s to +75.0 s (98–100 % of all cores, at or above 95 %)"}]}"#,
        )
        .unwrap();
        let m = of_run(d.path());
        assert!(
            m.saturated
                .as_deref()
                .is_some_and(|s| s.contains("+26.0 s to +75.0 s")),
            "{m:?}"
        );
    }
}
