//! What etcd did around a run's failures: the leader and raft term over
//! time as a lane, and for each unavailable interval the lab events, leader
//! changes and member health around it, from the samples `cpmlab run`
//! keeps in `etcd.ndjson` (see `runner::observe`). A run without them (a
//! bare `probe start`) has no such section.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::etcd_said::{around, Finding};
use super::{escape_xml as esc, Verdict};
use crate::record::LabEvent;

pub const ETCD_FILE: &str = "etcd.ndjson";
/// The machine's and each container's CPU use, every 2 s (`runner::observe`).
pub const CPU_FILE: &str = "cpu.ndjson";

/// One CPU sample: the machine busy (percent of all its cores) and each
/// lab container (percent of one core).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSample {
    pub at_unix_ms: f64,
    pub machine_busy_pct: f64,
    #[serde(default)]
    pub cores: usize,
    #[serde(default)]
    pub containers: BTreeMap<String, f64>,
}

/// How busy the machine was over an interval.
pub struct CpuDuring {
    /// Mean and max percent of all cores.
    pub mean: f64,
    pub max: f64,
    /// The busiest container, and its mean percent of one core.
    pub top: Option<(String, f64)>,
}

/// How busy the machine was over [a, b] (samples within a second of it).
pub fn cpu_during(cpu: &[CpuSample], a: f64, b: f64) -> Option<CpuDuring> {
    let within: Vec<&CpuSample> = cpu
        .iter()
        .filter(|s| s.at_unix_ms >= a - 1_000.0 && s.at_unix_ms <= b + 2_000.0)
        .collect();
    if within.is_empty() {
        return None;
    }
    let mean = within.iter().map(|s| s.machine_busy_pct).sum::<f64>() / within.len() as f64;
    let max = within
        .iter()
        .map(|s| s.machine_busy_pct)
        .fold(0.0, f64::max);
    let mut per: BTreeMap<&str, f64> = BTreeMap::new();
    for s in &within {
        for (c, p) in &s.containers {
            *per.entry(c).or_insert(0.0) += p / within.len() as f64;
        }
    }
    let top = per
        .into_iter()
        .max_by(|x, y| x.1.total_cmp(&y.1))
        .map(|(c, p)| (c.to_string(), p));
    Some(CpuDuring { mean, max, top })
}

/// One member at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EtcdSample {
    pub at_unix_ms: f64,
    pub member: String,
    pub seed: String,
    /// Answered /metrics.
    pub up: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub is_leader: bool,
    #[serde(default)]
    pub has_leader: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raft_term: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raft_index: Option<u64>,
    #[serde(default)]
    pub is_learner: bool,
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
}

/// The cluster at one sampling moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Moment {
    pub at_unix_ms: f64,
    /// The member that says it leads (`None`: nobody).
    pub leader: Option<String>,
    pub term: Option<u64>,
    /// Members that did not answer or had no leader.
    pub unhealthy: Vec<String>,
}

/// Groups samples by sampling time.
pub fn moments(samples: &[EtcdSample]) -> Vec<Moment> {
    let mut by_t: BTreeMap<i64, Vec<&EtcdSample>> = BTreeMap::new();
    for s in samples {
        by_t.entry(s.at_unix_ms as i64).or_default().push(s);
    }
    by_t.into_iter()
        .map(|(t, ss)| Moment {
            at_unix_ms: t as f64,
            leader: ss.iter().find(|s| s.is_leader).map(|s| s.member.clone()),
            term: ss.iter().filter_map(|s| s.raft_term).max(),
            unhealthy: ss
                .iter()
                .filter(|s| !s.up || !s.has_leader)
                .map(|s| {
                    if s.up {
                        format!("{} (no leader)", s.member)
                    } else {
                        format!(
                            "{} (down: {})",
                            s.member,
                            s.error.as_deref().unwrap_or("no answer")
                        )
                    }
                })
                .collect(),
        })
        .collect()
}

/// A leader change: (time, from, to, term).
pub type LeaderChange = (f64, Option<String>, Option<String>, Option<u64>);

/// Leader changes: where the leader differs from the moment before.
pub fn leader_changes(ms: &[Moment]) -> Vec<LeaderChange> {
    ms.windows(2)
        .filter(|w| w[0].leader != w[1].leader)
        .map(|w| {
            (
                w[1].at_unix_ms,
                w[0].leader.clone(),
                w[1].leader.clone(),
                w[1].term,
            )
        })
        .collect()
}

const COLORS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f",
];

/// How far around an unavailable interval its context reaches.
const AROUND_MS: f64 = 5_000.0;
/// The most intervals explained one by one.
const MAX_EXPLAINED: usize = 20;

fn rel(t: f64, t0: f64) -> String {
    format!("{:+.1} s", (t - t0) / 1e3)
}

/// The report's section: the leader lane on the report's time axis
/// (`x(t)` maps a time to the SVG's x), and the context of each
/// unavailable interval.
pub fn section(
    v: &Verdict,
    events: &[LabEvent],
    samples: &[EtcdSample],
    said: &[Finding],
    t0: f64,
    x: &dyn Fn(f64) -> f64,
    svg_w: usize,
) -> String {
    if samples.is_empty() {
        return String::new();
    }
    let ms = moments(samples);
    let changes = leader_changes(&ms);
    let mut members: Vec<&str> = samples.iter().map(|s| s.member.as_str()).collect();
    members.sort();
    members.dedup();
    let color = |m: &str| {
        members
            .iter()
            .position(|x| *x == m)
            .map_or("#ccc", |i| COLORS[i % COLORS.len()])
    };
    let mut h = String::new();
    h.push_str("<h2>What etcd did</h2>\n<p>The leader (colour per member, grey: none) and the raft term, sampled every second; hover for details. Kept in <code>etcd.ndjson</code> with each member's counters (proposals, WAL fsync, peer round trips); the gateways' counters in <code>gateways.ndjson</code>, the delay line's in <code>delayline.ndjson</code>.</p>\n");
    let _ = write!(
        h,
        "<svg width=\"{svg_w}\" height=\"40\" xmlns=\"http://www.w3.org/2000/svg\"><text x=\"4\" y=\"16\" font-size=\"11\">etcd leader</text>"
    );
    for w in ms.windows(2) {
        let (a, b) = (x(w[0].at_unix_ms), x(w[1].at_unix_ms));
        let c = w[0].leader.as_deref().map_or("#bbb", color);
        let _ = write!(
            h,
            "<rect x=\"{a:.1}\" y=\"4\" width=\"{:.1}\" height=\"16\" fill=\"{c}\"><title>{} {}: leader {}, term {}{}</title></rect>",
            (b - a).max(0.5),
            rel(w[0].at_unix_ms, t0),
            rel(w[1].at_unix_ms, t0),
            esc(w[0].leader.as_deref().unwrap_or("none")),
            w[0].term.map_or("-".into(), |t| t.to_string()),
            if w[0].unhealthy.is_empty() {
                String::new()
            } else {
                format!("; {}", esc(&w[0].unhealthy.join(", ")))
            }
        );
    }
    for (t, _, to, term) in &changes {
        let _ = write!(
            h,
            "<text x=\"{:.1}\" y=\"34\" font-size=\"10\">{} t{}</text>",
            x(*t),
            esc(to.as_deref().unwrap_or("none")),
            term.map_or("-".into(), |t| t.to_string())
        );
    }
    h.push_str("</svg>\n");
    let _ = writeln!(
        h,
        "<p>{} leader change(s): {}</p>",
        changes.len(),
        changes
            .iter()
            .map(|(t, from, to, term)| format!(
                "{} {} → {} (term {})",
                rel(*t, t0),
                esc(from.as_deref().unwrap_or("none")),
                esc(to.as_deref().unwrap_or("none")),
                term.map_or("-".into(), |t| t.to_string())
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let intervals = &v.overall.unavailable;
    if intervals.is_empty() {
        return h;
    }
    h.push_str("<h3>Around each unavailable interval (± 5 s)</h3>\n<table><tr><th>interval</th><th class=\"l\">lab events</th><th class=\"l\">leader changes</th><th class=\"l\">members unhealthy</th><th class=\"l\">etcd said</th></tr>\n");
    for iv in intervals.iter().take(MAX_EXPLAINED) {
        let (a, b) = (iv.start_unix_ms - AROUND_MS, iv.end_unix_ms + AROUND_MS);
        let evs: Vec<String> = events
            .iter()
            .filter(|e| e.at_unix_ms >= a && e.at_unix_ms <= b)
            .map(|e| format!("{} {}", rel(e.at_unix_ms, t0), esc(&e.name)))
            .collect();
        let lc: Vec<String> = changes
            .iter()
            .filter(|c| c.0 >= a && c.0 <= b)
            .map(|(t, f, to, term)| {
                format!(
                    "{} {} → {} (term {})",
                    rel(*t, t0),
                    esc(f.as_deref().unwrap_or("none")),
                    esc(to.as_deref().unwrap_or("none")),
                    term.map_or("-".into(), |t| t.to_string())
                )
            })
            .collect();
        let mut sick: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for m in ms.iter().filter(|m| m.at_unix_ms >= a && m.at_unix_ms <= b) {
            for u in &m.unhealthy {
                let e = sick
                    .entry(u.clone())
                    .or_insert((m.at_unix_ms, m.at_unix_ms));
                e.1 = m.at_unix_ms;
            }
        }
        let sick: Vec<String> = sick
            .iter()
            .map(|(u, (f, l))| format!("{} {}…{}", esc(u), rel(*f, t0), rel(*l, t0)))
            .collect();
        let told: Vec<String> = around(said, a, b)
            .map(|f| {
                format!(
                    "{} {} {}{} ×{}",
                    rel(f.first_unix_ms, t0),
                    esc(&f.member),
                    esc(f.kind_text()),
                    f.peer
                        .as_deref()
                        .map(|p| format!(" → {}", esc(p)))
                        .unwrap_or_default(),
                    f.count
                )
            })
            .collect();
        let none = |v: Vec<String>, what: &str| {
            if v.is_empty() {
                format!("<i>{what}</i>")
            } else {
                v.join("<br>")
            }
        };
        let _ = writeln!(
            h,
            "<tr><td>{} … {} ({:.0} ms)</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            rel(iv.start_unix_ms, t0),
            rel(iv.end_unix_ms, t0),
            iv.duration_ms(),
            none(evs, "none"),
            none(lc, "none: the leader held"),
            none(sick, "all answered, all saw a leader"),
            none(told, "no warning")
        );
    }
    h.push_str("</table>\n");
    h
}

/// The report's "What etcd said" section: the warnings in the members'
/// logs that explain stalls, worst first, in plain words.
pub fn said_section(said: &[Finding], cpu: &[CpuSample], t0: f64) -> String {
    let shown: Vec<&Finding> = said
        .iter()
        .filter(|f| f.kind != super::etcd_said::Kind::BecameLeader)
        .take(MAX_SAID)
        .collect();
    if shown.is_empty() {
        return String::new();
    }
    let mut h = String::from("<h2>What etcd said</h2>\n<p>Warnings in the members' logs (<code>logs/</code>) that explain stalls, grouped into episodes (occurrences less than 5 s apart), the most frequent first.</p>\n<table><tr><th>from</th><th>to</th><th class=\"l\">member</th><th class=\"l\">what it said, and what that means</th><th class=\"l\">machine CPU meanwhile</th></tr>\n");
    for f in shown {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            rel(f.first_unix_ms, t0),
            rel(f.last_unix_ms, t0),
            esc(&f.member),
            esc(&f.plain()),
            esc(&cpu_text(cpu, f.first_unix_ms, f.last_unix_ms))
        );
    }
    h.push_str("</table>\n");
    h
}

/// The machine's CPU over [a, b] in words: busy enough to starve a member
/// (at least 90 % of all cores at some point), or with headroom.
pub fn cpu_text(cpu: &[CpuSample], a: f64, b: f64) -> String {
    match cpu_during(cpu, a, b) {
        None => "not sampled".into(),
        Some(CpuDuring { mean, max, top }) => {
            let top = top
                .map(|(c, p)| format!("; busiest {c} at {p:.0} % of a core"))
                .unwrap_or_default();
            let verdict = if max >= 90.0 {
                "saturated: CPU starvation is likely part of it"
            } else {
                "headroom left: not starved"
            };
            format!("{mean:.0} % mean, {max:.0} % max of all cores ({verdict}){top}")
        }
    }
}

/// The most findings the report lists.
const MAX_SAID: usize = 12;

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: f64, m: &str, leader: bool, term: u64, up: bool) -> EtcdSample {
        EtcdSample {
            at_unix_ms: t,
            member: m.into(),
            seed: "seed-a".into(),
            up,
            is_leader: leader,
            has_leader: up,
            raft_term: Some(term),
            ..Default::default()
        }
    }

    #[test]
    fn cpu_in_words_tells_a_saturated_machine_from_one_with_headroom() {
        let c = |t: f64, busy: f64, etcd: f64| CpuSample {
            at_unix_ms: t,
            machine_busy_pct: busy,
            cores: 2,
            containers: [("lab-seed-a-etcd-0".to_string(), etcd)].into(),
        };
        let cpu = [
            c(0.0, 50.0, 20.0),
            c(2000.0, 96.0, 80.0),
            c(10_000.0, 10.0, 1.0),
        ];
        let t = cpu_text(&cpu, 0.0, 2000.0);
        assert!(t.starts_with("73 % mean, 96 % max"), "{t}");
        assert!(
            t.contains("saturated") && t.contains("lab-seed-a-etcd-0 at 50 %"),
            "{t}"
        );
        assert!(cpu_text(&cpu, 9_500.0, 10_000.0).contains("headroom"));
        assert_eq!(cpu_text(&[], 0.0, 1.0), "not sampled");
    }

    #[test]
    fn leader_changes_and_unhealthy_members_are_found() {
        let samples = vec![
            s(1000.0, "a", true, 2, true),
            s(1000.0, "b", false, 2, true),
            s(2000.0, "a", false, 2, false),
            s(2000.0, "b", false, 2, true),
            s(3000.0, "a", false, 3, false),
            s(3000.0, "b", true, 3, true),
        ];
        let ms = moments(&samples);
        assert_eq!(ms.len(), 3);
        assert_eq!(ms[1].leader, None);
        assert_eq!(ms[1].unhealthy, vec!["a (down: no answer)"]);
        let c = leader_changes(&ms);
        assert_eq!(c.len(), 2);
        assert_eq!(c[1].2.as_deref(), Some("b"));
        assert_eq!(c[1].3, Some(3));
    }
}
