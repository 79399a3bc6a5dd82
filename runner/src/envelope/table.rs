//! A grid's tables, rendered from what its runs recorded (`grid.json` and
//! each run's directory): for the envelope grids `envelope.md` (the tables
//! the docs carry), `envelope.html` (a heatmap per plan and measure, each
//! cell linking its run's report) and `envelope.json`; for the learner
//! grid `learner.md` (joined runs of runs done per cell, and the median
//! join time, by compare's statistics) and `learner.json`. A run not (yet)
//! done shows as `not run`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::cell::{self, Learner, Point};
use super::{num, plan_name, run_dir, runs, Cell, Grid, Spec};
use crate::compare::stats::{spread, wilson};
use crate::link::profile::LossBy;
use cpmlab_verdict::escape_xml as esc;

/// The measures of an envelope cell, in the order the tables show them.
const MEASURES: &[(&str, &str)] = &[
    ("outcome", "Zero downtime and migration completed"),
    ("failed", "Failed requests: server errors + client timeouts"),
    ("write_p99", "Write p99 (ms)"),
    ("duration", "Migration duration (s)"),
    (
        "etcd",
        "What etcd said: log entries (MsgApp) dropped on a full peer stream",
    ),
    (
        "join",
        "The database (MiB) and the longest snapshot a joiner received (s)",
    ),
];

const GREEN: &str = "#8c8";
const AMBER: &str = "#ec8";
const RED: &str = "#e88";
const NONE: &str = "#eee";

/// (text, colour) of one cell for one measure.
fn value(c: Option<&Point>, m: &str) -> (String, &'static str) {
    let Some(c) = c else {
        return (String::new(), NONE);
    };
    if c.no_verdict {
        return ("no run".into(), "#ccc");
    }
    let completed = c.migration.as_deref() == Some("completed");
    let band = |x: f64, amber: f64, red: f64| {
        if x < amber {
            GREEN
        } else if x < red {
            AMBER
        } else {
            RED
        }
    };
    match m {
        "outcome" => {
            if c.migration.as_deref() == Some("refused") {
                ("refused".into(), "#bbb")
            } else if completed && c.zero_downtime {
                if c.slo_breaches.is_empty() {
                    ("pass".into(), GREEN)
                } else {
                    ("pass (slo)".into(), "#cd8")
                }
            } else if completed {
                ("fail".into(), RED)
            } else {
                (c.migration.clone().unwrap_or_else(|| "failed".into()), RED)
            }
        }
        "failed" => {
            let n = c.server_errors + c.timeouts;
            (
                format!("{}+{}", c.server_errors, c.timeouts),
                if n == 0 {
                    GREEN
                } else if n < 5 {
                    AMBER
                } else {
                    RED
                },
            )
        }
        "write_p99" => match c.write_p99_ms {
            None => ("-".into(), NONE),
            Some(p) => (format!("{p:.0}"), band(p, 1000.0, 4000.0)),
        },
        "duration" => match c.migration_s.filter(|s| *s > 0.0 && completed) {
            None => ("-".into(), NONE),
            Some(s) => (format!("{s:.0}"), band(s, 120.0, 240.0)),
        },
        "etcd" => match c.buffer_drops {
            None => ("-".into(), NONE),
            Some(0) => ("0".into(), GREEN),
            Some(n) => (
                format!("{n} MsgApp dropped"),
                if n < 100 { GREEN } else { RED },
            ),
        },
        "join" => match (c.db_mib, c.snapshot_s) {
            (None, _) => ("-".into(), NONE),
            (Some(db), None) => (format!("{db:.0} MiB, no snapshot"), GREEN),
            (Some(db), Some(s)) => (format!("{db:.0} MiB, {s:.1} s"), band(s, 30.0, 60.0)),
        },
        _ => unreachable!("a measure of MEASURES"),
    }
}

/// One envelope cell, keyed as `envelope.json` has it.
#[derive(Serialize)]
struct Row<'a> {
    plan: String,
    delay_ms: f64,
    jitter_ms: f64,
    loss_pct: f64,
    size: &'a str,
    #[serde(flatten)]
    cell: Option<&'a Point>,
}

fn setting(spec: &Spec) -> String {
    let defaults = crate::topology::Topology::default();
    let ttl = spec
        .ttl
        .map_or(format!("the topology's ({} s)", defaults.dns.ttl), |t| {
            format!("{t} s")
        });
    let delay = spec.shutdown_delay.clone().unwrap_or_else(|| {
        format!(
            "the topology's (Gardener's {})",
            defaults.api.shutdown_delay
        )
    });
    format!(
        "write load {}/s; probe timeout {}; DNS TTL {ttl}; API shutdown delay {delay}; join timeout {}; delay line seed {}",
        spec.write_rate, spec.timeout, spec.join_timeout, spec.seed
    )
}

/// The envelope's files from its spec and its points' measures (by run
/// name); `took` is the grid's time (`grid-time.txt`).
pub fn envelope(
    spec: &Spec,
    cells: &std::collections::BTreeMap<String, Point>,
    took: &str,
) -> (String, String, String) {
    let cols: Vec<(f64, f64)> = spec
        .jitters_ms
        .iter()
        .flat_map(|j| spec.losses_pct.iter().map(move |l| (*j, *l)))
        .collect();
    let sections: Vec<(super::Plan, &String)> = spec
        .plans
        .iter()
        .flat_map(|p| spec.sizes.iter().map(move |s| (*p, s)))
        .collect();
    let name = |plan, d, j, l, size: &str| {
        Cell::Point {
            plan,
            delay_ms: d,
            jitter_ms: j,
            loss_pct: l,
            size: size.to_string(),
        }
        .point_name()
    };
    let setting = setting(spec);
    let mut h = String::from(
        "<!doctype html><meta charset=utf-8><title>cpmlab operating envelope</title>\n\
         <style>body{font:14px sans-serif;margin:2em}table{border-collapse:collapse;margin:.5em 0 1.5em}\
         td,th{border:1px solid #999;padding:3px 6px;text-align:center}th{background:#f4f4f4}</style>\n\
         <h1>Operating envelope of Live Control Plane Migration</h1>\n",
    );
    let _ = writeln!(
        h,
        "<p>{}.<br>Rows: one-way delay between the seeds (RTT is twice that). Columns: jitter / loss, each way. \
         Failed requests are server errors + client timeouts. {}</p>",
        esc(&setting),
        esc(took)
    );
    let mut md = format!(
        "Setting: {setting}. Cells: `result` / failed requests (server errors + timeouts) / write p99 ms / \
         migration s / log entries (MsgApp) etcd dropped on a full peer stream / the database and the longest \
         snapshot a joiner received. Rows: one-way delay; columns: jitter / loss each way.\n\n"
    );
    let mut rows = Vec::new();
    for (plan, size) in &sections {
        let section = format!(
            "{} plan{}",
            plan_name(*plan),
            if *size == "0" {
                String::new()
            } else {
                format!(", a shoot of {size}")
            }
        );
        let _ = writeln!(h, "<h2>{}</h2>", esc(&section));
        for (m, title) in MEASURES {
            let _ = write!(
                h,
                "<h3>{}</h3><table><tr><th>one-way \\ jitter / loss</th>",
                esc(title)
            );
            for (j, l) in &cols {
                let _ = write!(h, "<th>{} ms / {} %</th>", num(*j), num(*l));
            }
            h.push_str("</tr>\n");
            for d in &spec.delays_ms {
                let _ = write!(h, "<tr><th>{} ms</th>", num(*d));
                for (j, l) in &cols {
                    let n = name(*plan, *d, *j, *l, size);
                    let (text, colour) = value(cells.get(&n), m);
                    let _ = write!(
                        h,
                        "<td style='background:{colour}'><a href='runs/{n}/run/report.html'>{}</a></td>",
                        esc(&text)
                    );
                }
                h.push_str("</tr>\n");
            }
            h.push_str("</table>\n");
        }
        let _ = writeln!(md, "**{section}**\n");
        md.push_str("| one-way |");
        for (j, l) in &cols {
            let _ = write!(md, " {} ms / {} % |", num(*j), num(*l));
        }
        md.push_str("\n|---|");
        md.push_str(&"---|".repeat(cols.len()));
        md.push('\n');
        for d in &spec.delays_ms {
            let _ = write!(md, "| {} ms |", num(*d));
            for (j, l) in &cols {
                let n = name(*plan, *d, *j, *l, size);
                let c = cells.get(&n);
                let parts: Vec<String> = MEASURES
                    .iter()
                    .map(|(m, _)| value(c, m).0)
                    .filter(|p| !p.is_empty())
                    .collect();
                let text = if parts.is_empty() {
                    "not run".to_string()
                } else {
                    parts.join(" / ")
                };
                let _ = write!(md, " {text} |");
                rows.push(Row {
                    plan: plan_name(*plan),
                    delay_ms: *d,
                    jitter_ms: *j,
                    loss_pct: *l,
                    size,
                    cell: c,
                });
            }
            md.push('\n');
        }
        md.push('\n');
    }
    if !took.is_empty() {
        let _ = writeln!(md, "Grid time: {took}.");
    }
    let json = serde_json::to_string_pretty(&rows).expect("serialisable rows") + "\n";
    (md, h, json)
}

/// One learner run as `learner.json` has it: the cell, and its measures
/// or `not_run`.
#[derive(Serialize)]
struct LearnerRow<'a> {
    version: &'a str,
    delay_ms: f64,
    loss_pct: f64,
    /// `none` at 0 % loss, where nobody drops.
    loss_by: &'static str,
    run: u32,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    not_run: bool,
    #[serde(flatten)]
    cell: Option<&'a Learner>,
}

/// The learner grid's files from its spec and its runs' measures (by run
/// name).
pub fn learner(
    spec: &Spec,
    cells: &std::collections::BTreeMap<String, Learner>,
) -> (String, String) {
    let all = runs(spec);
    let rows: Vec<LearnerRow> = all
        .iter()
        .filter_map(|r| {
            let Cell::Learner {
                version,
                delay_ms,
                loss_pct,
                loss_by,
            } = &r.cell
            else {
                return None;
            };
            let c = cells.get(&r.name());
            Some(LearnerRow {
                version,
                delay_ms: *delay_ms,
                loss_pct: *loss_pct,
                loss_by: if *loss_pct > 0.0 {
                    loss_by.flag()
                } else {
                    "none"
                },
                run: r.rep,
                not_run: c.is_none(),
                cell: c,
            })
        })
        .collect();
    let mut md = format!(
        "The learner grid: five-member plan, join timeout {}, {} writes/s, delay-line seeds {} and up. \
         A cell: joined runs / runs done (Wilson's 95 % interval), and the median join time of those that \
         joined. Rows: one-way delay; columns: loss each way.\n\n",
        spec.join_timeout, spec.write_rate, spec.seed
    );
    for v in &spec.versions {
        for by in &spec.loss_by {
            let who = match by {
                LossBy::Shaper => "delay line",
                LossBy::Kernel => "kernel",
            };
            let _ = writeln!(md, "**etcd {v}, loss dropped by the {who}**\n");
            md.push_str("| one-way |");
            for l in &spec.losses_pct {
                let _ = write!(md, " {} % |", num(*l));
            }
            md.push_str("\n|---|");
            md.push_str(&"---|".repeat(spec.losses_pct.len()));
            md.push('\n');
            for d in &spec.delays_ms {
                let _ = write!(md, "| {} ms |", num(*d));
                for l in &spec.losses_pct {
                    let mine: Vec<&Learner> = rows
                        .iter()
                        .filter(|x| {
                            x.version == v
                                && x.delay_ms == *d
                                && x.loss_pct == *l
                                && (x.loss_by == by.flag() || x.loss_by == "none")
                        })
                        .filter_map(|x| x.cell)
                        .collect();
                    if mine.is_empty() {
                        md.push_str(" not run |");
                        continue;
                    }
                    let joined: Vec<f64> = mine
                        .iter()
                        .filter(|c| c.joined)
                        .filter_map(|c| c.join_s)
                        .collect();
                    let k = mine.iter().filter(|c| c.joined).count() as u32;
                    let n = mine.len() as u32;
                    let (lo, hi) = wilson(k, n);
                    let t = spread(&joined)
                        .map(|s| format!(", {:.0} s", s.median))
                        .unwrap_or_default();
                    let _ = write!(md, " {k}/{n} ({:.0}–{:.0} %){t} |", lo * 100.0, hi * 100.0);
                }
                md.push('\n');
            }
            md.push('\n');
        }
    }
    let json = serde_json::to_string_pretty(&rows).expect("serialisable rows") + "\n";
    (md, json)
}

/// Renders the tables of the grid in `out` from what its runs recorded.
/// Returns the main table's path.
pub fn render(out: &Path) -> Result<std::path::PathBuf> {
    let spec = Spec::read(out)?;
    // A run the environment kept from its verdict, or cut short, is not
    // a cell yet: it runs again on a resume.
    let all: Vec<super::Run> = runs(&spec)
        .into_iter()
        .filter(|r| super::done(out, &r.name()))
        .collect();
    if spec.grid == Grid::Learner {
        let cells = all
            .iter()
            .filter_map(|r| {
                cell::learner(&run_dir(out, &r.name()), &r.name()).map(|c| (r.name(), c))
            })
            .collect();
        let (md, json) = learner(&spec, &cells);
        std::fs::write(out.join("learner.md"), md)?;
        std::fs::write(out.join("learner.json"), json)?;
        return Ok(out.join("learner.md"));
    }
    let cells = all
        .iter()
        .filter_map(|r| {
            cell::point(&run_dir(out, &r.name()), &r.name(), spec.slow_s).map(|c| (r.name(), c))
        })
        .collect();
    let took = std::fs::read_to_string(out.join("grid-time.txt"))
        .unwrap_or_default()
        .trim()
        .replace('\n', "; ");
    let (md, html, json) = envelope(&spec, &cells, &took);
    std::fs::write(out.join("envelope.md"), md)?;
    std::fs::write(out.join("envelope.html"), html)?;
    std::fs::write(out.join("envelope.json"), json)?;
    Ok(out.join("envelope.md"))
}

#[cfg(test)]
mod tests {
    use super::super::tests::asked;
    use super::super::*;
    use super::*;

    #[test]
    fn the_envelope_tables_render_from_recorded_runs() {
        let mut a = asked(Grid::Quick);
        a.plans = Some(vec![Plan::FiveMember]);
        a.delays = Some("25,50".into());
        a.ttl = Some(10);
        let spec = Spec::new(&a).unwrap();
        let out = tempfile::tempdir().unwrap();
        spec.write(out.path()).unwrap();
        cell::tests::record_point(&run_dir(out.path(), "five-member-d25-j0-l0"), "completed");
        cell::tests::record_point(&run_dir(out.path(), "five-member-d50-j0-l1"), "aborted");
        std::fs::write(
            out.path().join("grid-time.txt"),
            "2 points, 7.5 min this invocation\n",
        )
        .unwrap();
        let md_path = render(out.path()).unwrap();
        let md = std::fs::read_to_string(md_path).unwrap();
        assert!(md.starts_with("Setting: write load 25/s; probe timeout 10s; DNS TTL 10 s; API shutdown delay the topology's (Gardener's 15s); join timeout 90s; delay line seed 2024."), "{md}");
        assert!(
            md.contains(
                "**five-member plan**\n\n| one-way | 0 ms / 0 % | 0 ms / 1 % |\n|---|---|---|\n"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| 25 ms | fail / 3+3 / 1000 / 72 / 2 MsgApp dropped / 4 MiB, 12.5 s | not run |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| 50 ms | not run | aborted / 3+3 / 1000 / - / 2 MsgApp dropped / 4 MiB, 12.5 s |"
            ),
            "{md}"
        );
        assert!(
            md.ends_with("Grid time: 2 points, 7.5 min this invocation.\n"),
            "{md}"
        );
        let html = std::fs::read_to_string(out.path().join("envelope.html")).unwrap();
        assert!(
            html.contains("<a href='runs/five-member-d25-j0-l0/run/report.html'>3+3</a>"),
            "{html}"
        );
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.path().join("envelope.json")).unwrap(),
        )
        .unwrap();
        let rows = json.as_array().unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0]["plan"], "five-member");
        assert_eq!(rows[0]["server_errors"], 3);
        assert!(
            rows[1].get("server_errors").is_none(),
            "not run: no measures"
        );
    }

    #[test]
    fn the_sizes_grid_renders_a_section_per_size() {
        let mut a = asked(Grid::Sizes);
        a.plans = Some(vec![Plan::SixMember]);
        let spec = Spec::new(&a).unwrap();
        let (md, _, _) = envelope(&spec, &Default::default(), "");
        for s in ["10MiB", "500MiB", "2GiB"] {
            assert!(
                md.contains(&format!("**six-member plan, a shoot of {s}**")),
                "{md}"
            );
        }
        assert!(md.contains("| 25 ms | not run |"), "{md}");
        assert!(!md.contains("Grid time"));
    }

    #[test]
    fn the_learner_table_counts_joins_per_cell_with_their_interval_and_median() {
        let mut a = asked(Grid::Learner);
        a.versions = Some("3.5".into());
        a.delays = Some("30".into());
        a.losses = Some("0,0.1".into());
        a.loss_by = Some(vec![LossBy::Kernel]);
        let spec = Spec::new(&a).unwrap();
        let out = tempfile::tempdir().unwrap();
        spec.write(out.path()).unwrap();
        for (name, joined, s) in [
            ("learner-e3p5-d30-l0-shaper-r1", true, 11.0),
            ("learner-e3p5-d30-l0-shaper-r2", true, 13.0),
            ("learner-e3p5-d30-l0p1-kernel-r1", true, 75.0),
            ("learner-e3p5-d30-l0p1-kernel-r2", false, 120.0),
            ("learner-e3p5-d30-l0p1-kernel-r3", false, 120.0),
        ] {
            cell::tests::record_learner(&run_dir(out.path(), name), joined, s);
        }
        render(out.path()).unwrap();
        let md = std::fs::read_to_string(out.path().join("learner.md")).unwrap();
        assert!(
            md.contains("**etcd 3.5, loss dropped by the kernel**\n\n| one-way | 0 % | 0.1 % |"),
            "{md}"
        );
        // 2 of 2 (one run not done) at 0 %, median 12 s; 1 of 3 at 0.1 %.
        assert!(
            md.contains("| 30 ms | 2/2 (34–100 %), 12 s | 1/3 (6–79 %), 75 s |"),
            "{md}"
        );
        let rows: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.path().join("learner.json")).unwrap(),
        )
        .unwrap();
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), 6);
        assert_eq!(rows[0]["loss_by"], "none");
        assert_eq!(rows[0]["version"], "3.5");
        assert_eq!(rows[0]["joined"], true);
        assert_eq!(rows[2]["not_run"], true);
        assert_eq!(rows[3]["loss_by"], "kernel");
        assert_eq!(rows[4]["joined"], false);
        assert_eq!(rows[4]["migration"], "aborted");
    }
}
