//! `compare.html` and `compare.md`: the comparison on one page. Per measure a
//! plot with a row per variant (every run a dot, the box its quartiles, the
//! line its median), the pass rates with their 95 % intervals, and every
//! difference against the reference variant in words with its p-value; the
//! markdown is the same for a pull request comment.

use std::fmt::Write;

use super::measures::{RunMeasures, MEASURES};
use super::summary::{fmt_p, fmt_v, Summary};
use cpmlab_verdict::escape_xml as esc;

const W: f64 = 640.0;
const LABEL: f64 = 190.0;
const ROW: f64 = 34.0;

/// One measure's plot: a row per variant.
fn plot(measure: &str, unit: &str, what: &str, summary: &Summary, runs: &[RunMeasures]) -> String {
    let all: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.values.get(measure).copied())
        .collect();
    if all.is_empty() {
        return String::new();
    }
    let max = all.iter().copied().fold(0.0_f64, f64::max);
    let hi = if max <= 0.0 { 1.0 } else { max * 1.05 };
    let x = |v: f64| LABEL + (v / hi) * (W - LABEL - 20.0);
    let h = ROW * summary.variants.len() as f64 + 30.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    for (i, v) in summary.variants.iter().enumerate() {
        let y = 10.0 + ROW * i as f64 + ROW / 2.0;
        let _ = write!(
            svg,
            "<text x=\"4\" y=\"{:.1}\">{}</text><line x1=\"{LABEL}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/>",
            y + 4.0,
            esc(&v.name),
            W - 20.0
        );
        if let Some(s) = v.measures.get(measure) {
            let _ = write!(
                svg,
                "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#888\"/>\
                 <rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"14\" fill=\"#dde8f5\" stroke=\"#4a78b0\"/>\
                 <line x1=\"{m:.1}\" x2=\"{m:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#1b3f6e\" stroke-width=\"2\"/>",
                x(s.min),
                x(s.max),
                x(s.q1),
                y - 7.0,
                (x(s.q3) - x(s.q1)).max(1.0),
                y - 7.0,
                y + 7.0,
                m = x(s.median)
            );
        }
        // Every run a dot, spread over the row so that equal values show.
        let mine: Vec<&RunMeasures> = runs.iter().filter(|r| r.variant == v.name).collect();
        for (j, r) in mine.iter().enumerate() {
            if let Some(val) = r.values.get(measure) {
                let dy = ((j % 5) as f64 - 2.0) * 2.5;
                let colour = if r.passed { "#2a7" } else { "#c33" };
                let _ = write!(
                    svg,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\" fill-opacity=\"0.8\"><title>{} rep {}: {} ({})</title></circle>",
                    x(*val),
                    y + dy,
                    esc(&r.variant),
                    r.repetition,
                    fmt_v(*val, unit),
                    esc(&r.status)
                );
            }
        }
    }
    let axis_y = h - 8.0;
    let _ = write!(
        svg,
        "<text x=\"{LABEL}\" y=\"{axis_y}\">0</text><text x=\"{:.1}\" y=\"{axis_y}\" text-anchor=\"end\">{}</text></svg>",
        W - 20.0,
        esc(&fmt_v(hi, unit))
    );
    format!("<h3>{}</h3>{svg}", esc(what))
}

/// Where a variant differs from the reference with p < 0.05: `higher` or
/// `lower` (for the pass rate, `more passed` or `fewer passed`).
fn marked(summary: &Summary, variant: &str, measure: &str) -> Option<&'static str> {
    let d = summary.difference(variant, measure)?;
    if d.p_value >= 0.05 {
        return None;
    }
    let reference = summary.variants.first()?;
    let mine = summary.variants.iter().find(|v| v.name == variant)?;
    if measure == "pass rate" {
        let rate = |v: &super::summary::VariantSummary| v.passed as f64 / v.runs.max(1) as f64;
        return Some(if rate(mine) > rate(reference) {
            "more passed"
        } else {
            "fewer passed"
        });
    }
    let m = |v: &super::summary::VariantSummary| v.measures.get(measure).map(|s| s.median);
    Some(if m(mine) > m(reference) {
        "higher"
    } else {
        "lower"
    })
}

/// One cell: the median and its interval (`12 [8–30]`).
fn cell(v: &super::summary::VariantSummary, measure: &str, unit: &str) -> Option<String> {
    let s = v.measures.get(measure)?;
    let (lo, hi, _) = v.median_intervals.get(measure)?;
    Some(if lo == hi {
        fmt_v(s.median, unit)
    } else {
        format!(
            "{} [{}–{}]",
            fmt_v(s.median, unit),
            fmt_v(*lo, ""),
            fmt_v(*hi, "")
        )
    })
}

/// The measures any run has a figure for.
fn measured(summary: &Summary) -> Vec<&'static (&'static str, &'static str, &'static str)> {
    MEASURES
        .iter()
        .filter(|(m, _, _)| summary.variants.iter().any(|v| v.measures.contains_key(*m)))
        .collect()
}

/// The page's lead: variants × measures, each cell the median and its
/// interval, marked where it differs from the reference (p < 0.05).
fn glance(summary: &Summary) -> String {
    let cols = measured(summary);
    let mut t = String::from("<table class=\"glance\"><tr><th>variant</th><th>passed</th>");
    for (_, _, what) in &cols {
        let _ = write!(t, "<th>{}</th>", esc(what));
    }
    t.push_str("</tr>");
    for (i, v) in summary.variants.iter().enumerate() {
        let mark = |measure: &str| {
            marked(summary, &v.name, measure)
                .map(|w| format!(" class=\"diff\" title=\"{w} than the reference (p &lt; 0.05)\""))
                .unwrap_or_default()
        };
        let _ = write!(
            t,
            "<tr><td><b>{}</b>{}</td><td{}>{} of {}{}</td>",
            esc(&v.name),
            if i == 0 { " (reference)" } else { "" },
            mark("pass rate"),
            v.passed,
            v.runs,
            kept_apart(v.saturated)
        );
        for (m, unit, _) in &cols {
            let _ = write!(
                t,
                "<td{}>{}</td>",
                mark(m),
                esc(&cell(v, m, unit).unwrap_or_else(|| "-".into()))
            );
        }
        t.push_str("</tr>");
    }
    t.push_str("</table>");
    t
}

/// The mark of a run whose failures met the lab's machine saturated.
pub const SATURATED_MARK: &str = "[saturated machine: kept apart]";

/// The pass-rate cell's note of the runs kept apart.
fn kept_apart(n: u32) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" ({n} more kept apart: the lab's machine was saturated)")
    }
}

pub fn html(title: &str, summary: &Summary, runs: &[RunMeasures], command: &str) -> String {
    let mut rows = String::new();
    for v in &summary.variants {
        let statuses = v
            .statuses
            .iter()
            .map(|(s, n)| format!("{n}× {}", esc(s)))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = write!(
            rows,
            "<tr><td><b>{}</b></td><td>{} of {}{}</td><td>{:.0}–{:.0} %</td><td>{statuses}</td></tr>",
            esc(&v.name),
            v.passed,
            v.runs,
            kept_apart(v.saturated),
            v.pass_interval.0 * 100.0,
            v.pass_interval.1 * 100.0
        );
    }
    let mut diffs = String::new();
    for d in &summary.differences {
        let strong = d.p_value < 0.05;
        let _ = write!(
            diffs,
            "<li{}>{}</li>",
            if strong {
                " style=\"font-weight:bold\""
            } else {
                ""
            },
            esc(&d.statement)
        );
    }
    let plots: String = MEASURES
        .iter()
        .map(|(m, unit, what)| plot(m, unit, what, summary, runs))
        .collect();
    let mut run_rows = String::new();
    for r in runs {
        let _ = write!(
            run_rows,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td style=\"color:{}\">{}{}</td><td><a href=\"{}/run/report.html\">report</a></td></tr>",
            esc(&r.variant),
            r.repetition,
            r.seed,
            if r.passed { "#2a7" } else { "#c33" },
            esc(&r.status),
            r.saturated
                .as_deref()
                .map(|s| format!(" <b title=\"{}\">{SATURATED_MARK}</b>", esc(s)))
                .unwrap_or_default(),
            esc(&r.dir)
        );
    }
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title>\
<style>body{{font-family:sans-serif;margin:2em;max-width:80em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}code{{background:#f4f4f4}}table.glance td{{white-space:nowrap}}td.diff{{background:#fde9c8;font-weight:bold}}</style>\
</head><body><h1>{t}</h1><p><code>{cmd}</code></p>\
<h2>At a glance</h2><p>Each cell the median of the variant's runs and, in brackets, the interval that holds the true median with at least 95 % confidence (order statistics; with 5 runs or fewer none reaches 95 % and the bracket is the whole range: 93.8 % at 5). Highlighted: different from the reference ({reference}) with p &lt; 0.05 (Fisher's exact test for the pass rate, Mann-Whitney for a measure; the test's words are below).</p>{glance}\
<h2>Measures</h2><p>Each dot a run (green: every expectation held, red: not), the box its variant's quartiles, the dark line the median.</p>{plots}\
<h2>Pass rate</h2><table><tr><th>variant</th><th>passed</th><th>95 % interval (Wilson)</th><th>verdicts</th></tr>{rows}</table>\
<h2>Against the reference ({reference}), in words</h2><p>Differences with p &lt; 0.05 in bold. A p-value says how surprising the difference would be if the variants behaved alike; with few runs, no difference found is not a difference ruled out.</p><ul>{diffs}</ul>\
<h2>Runs</h2><table><tr><th>variant</th><th>rep</th><th>seed</th><th>verdict</th><th></th></tr>{run_rows}</table></body></html>\n",
        t = esc(title),
        cmd = esc(command),
        glance = glance(summary),
        reference = summary
            .variants
            .first()
            .map(|v| esc(&v.name))
            .unwrap_or_default(),
    )
}

pub fn markdown(title: &str, summary: &Summary, command: &str) -> String {
    let cols = measured(summary);
    let mut o = format!("### {title}\n\n`{command}`\n\nMedian [interval holding it with ≥ 95 % confidence, or the range with 5 runs or fewer]; **bold**: differs from the first variant with p < 0.05.\n\n| variant | passed | 95 % interval |");
    o.push_str(
        &cols
            .iter()
            .map(|(m, _, _)| format!(" {m} |"))
            .collect::<String>(),
    );
    o.push_str("\n| --- | --- | --- |");
    o.push_str(&" --- |".repeat(cols.len()));
    o.push('\n');
    for v in &summary.variants {
        let _ = write!(
            o,
            "| {} | {} of {}{} | {:.0}–{:.0} % |",
            v.name,
            v.passed,
            v.runs,
            kept_apart(v.saturated),
            v.pass_interval.0 * 100.0,
            v.pass_interval.1 * 100.0
        );
        for (m, unit, _) in &cols {
            let c = cell(v, m, unit).unwrap_or_else(|| "-".into());
            if marked(summary, &v.name, m).is_some() {
                let _ = write!(o, " **{c}** |");
            } else {
                let _ = write!(o, " {c} |");
            }
        }
        o.push('\n');
    }
    let notable: Vec<_> = summary
        .differences
        .iter()
        .filter(|d| d.p_value < 0.05)
        .collect();
    if !notable.is_empty() {
        o.push_str("\nDifferences with p < 0.05:\n");
        for d in notable {
            let _ = writeln!(o, "- {}", d.statement);
        }
    } else if !summary.differences.is_empty() {
        let _ = writeln!(
            o,
            "\nNo difference with p < 0.05 (smallest p = {}).",
            fmt_p(
                summary
                    .differences
                    .iter()
                    .map(|d| d.p_value)
                    .fold(1.0, f64::min)
            )
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::summary::summarise;
    use crate::compare::summary::tests::run;

    #[test]
    fn the_page_leads_with_variants_by_measures_marking_differences() {
        let mut runs = Vec::new();
        for i in 0..10 {
            runs.push(run("gateway=none", false, 90_000.0 + i as f64));
            runs.push(run("gateway=drain-gateway", true, 1_000.0 + i as f64));
            runs.push(run("gateway=other", false, 90_000.0 + i as f64));
        }
        let order = [
            "gateway=none".to_string(),
            "gateway=drain-gateway".to_string(),
            "gateway=other".to_string(),
        ];
        let s = summarise(&order, &runs);
        let html = html("t", &s, &runs, "cmd");
        let glance = html.find("At a glance").unwrap();
        assert!(glance < html.find("<h2>Measures").unwrap());
        assert!(glance < html.find("in words</h2>").unwrap());
        // The downtime column: the median and its interval, marked where
        // the variant differs from the reference, not where it does not.
        let row = |name: &str| {
            let at = html[glance..].find(&format!("<b>{name}</b>")).unwrap() + glance;
            html[at..at + html[at..].find("</tr>").unwrap()].to_string()
        };
        let drained = row("gateway=drain-gateway");
        assert!(drained.contains("1004 ms [1001–1008]"), "{drained}");
        assert!(drained.contains("class=\"diff\""), "{drained}");
        assert!(!row("gateway=other").contains("class=\"diff\""));
        let md = markdown("t", &s, "cmd");
        assert!(md.contains("**1004 ms [1001–1008]**"), "{md}");
    }
}
