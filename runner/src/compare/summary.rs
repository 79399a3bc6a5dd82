//! A comparison's results put together: per variant its pass rate with a
//! 95 % interval and the spread of each measure; against the first variant
//! (the reference) the difference in pass rate (Fisher's exact test) and in
//! each measure (Mann-Whitney U), each stated in words with its p-value.

use std::collections::BTreeMap;

use serde::Serialize;

use super::measures::{RunMeasures, MEASURES};
use super::stats::{fisher_exact, mann_whitney, median_interval, spread, wilson, Spread};

/// One variant over its repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct VariantSummary {
    pub name: String,
    pub runs: u32,
    pub passed: u32,
    /// Wilson's 95 % interval of the pass rate.
    pub pass_interval: (f64, f64),
    /// How many runs ended in each verdict status.
    pub statuses: BTreeMap<String, u32>,
    /// Runs kept apart: their failures met the lab's machine saturated
    /// (not in `runs`, `passed`, the statuses or the measures).
    #[serde(skip_serializing_if = "is_zero")]
    pub saturated: u32,
    pub measures: BTreeMap<String, Spread>,
    /// Per measure the median's distribution-free interval (low, high,
    /// coverage): `stats::median_interval`.
    pub median_intervals: BTreeMap<String, (f64, f64, f64)>,
}

/// One difference against the reference variant.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    pub variant: String,
    pub reference: String,
    /// `pass rate` or a measure's name.
    pub measure: String,
    pub p_value: f64,
    /// In words, with both sides' figures.
    pub statement: String,
}

/// Everything `compare.json` holds beside the runs.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub variants: Vec<VariantSummary>,
    pub differences: Vec<Difference>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A comparison's results. A run whose failures met the lab's machine
/// saturated is kept apart: not counted as its variant's pass or failure,
/// nor in its measures, only in `saturated`.
pub fn summarise(order: &[String], all: &[RunMeasures]) -> Summary {
    let runs: Vec<RunMeasures> = all
        .iter()
        .filter(|r| r.saturated.is_none())
        .cloned()
        .collect();
    let runs = &runs[..];
    let variants: Vec<VariantSummary> = order
        .iter()
        .map(|name| {
            let saturated = all
                .iter()
                .filter(|r| &r.variant == name && r.saturated.is_some())
                .count() as u32;
            let mine: Vec<&RunMeasures> = runs.iter().filter(|r| &r.variant == name).collect();
            let n = mine.len() as u32;
            let k = mine.iter().filter(|r| r.passed).count() as u32;
            let mut statuses = BTreeMap::new();
            for r in &mine {
                *statuses.entry(r.status.clone()).or_insert(0) += 1;
            }
            let of = |m: &str| -> Vec<f64> {
                mine.iter()
                    .filter_map(|r| r.values.get(m).copied())
                    .collect()
            };
            let measures = MEASURES
                .iter()
                .filter_map(|(m, _, _)| spread(&of(m)).map(|s| (m.to_string(), s)))
                .collect();
            let median_intervals = MEASURES
                .iter()
                .filter_map(|(m, _, _)| median_interval(&of(m)).map(|i| (m.to_string(), i)))
                .collect();
            VariantSummary {
                name: name.clone(),
                runs: n,
                passed: k,
                pass_interval: wilson(k, n),
                statuses,
                saturated,
                measures,
                median_intervals,
            }
        })
        .collect();
    let mut differences = Vec::new();
    if let Some((reference, others)) = variants.split_first() {
        let values = |variant: &str, m: &str| -> Vec<f64> {
            runs.iter()
                .filter(|r| r.variant == variant)
                .filter_map(|r| r.values.get(m).copied())
                .collect()
        };
        for v in others {
            let p = fisher_exact(v.passed, v.runs, reference.passed, reference.runs);
            differences.push(Difference {
                variant: v.name.clone(),
                reference: reference.name.clone(),
                measure: "pass rate".into(),
                p_value: p,
                statement: format!(
                    "{}: {} of {} runs failed, {}: {} of {}; Fisher's exact p = {}",
                    v.name,
                    v.runs - v.passed,
                    v.runs,
                    reference.name,
                    reference.runs - reference.passed,
                    reference.runs,
                    fmt_p(p)
                ),
            });
            for (m, unit, what) in MEASURES {
                let (a, b) = (values(&v.name, m), values(&reference.name, m));
                let (Some(p), Some(sa), Some(sb)) = (mann_whitney(&a, &b), spread(&a), spread(&b))
                else {
                    continue;
                };
                differences.push(Difference {
                    variant: v.name.clone(),
                    reference: reference.name.clone(),
                    measure: m.to_string(),
                    p_value: p,
                    statement: format!(
                        "{what}: {} median {} (IQR {}–{}), {} median {} (IQR {}–{}); Mann-Whitney p = {}",
                        v.name,
                        fmt_v(sa.median, unit),
                        fmt_v(sa.q1, unit),
                        fmt_v(sa.q3, unit),
                        reference.name,
                        fmt_v(sb.median, unit),
                        fmt_v(sb.q1, unit),
                        fmt_v(sb.q3, unit),
                        fmt_p(p)
                    ),
                });
            }
        }
    }
    Summary {
        variants,
        differences,
    }
}

impl Summary {
    /// The difference of `variant` from the reference in `measure` (`pass
    /// rate` or a measure's name), if it was tested.
    pub fn difference(&self, variant: &str, measure: &str) -> Option<&Difference> {
        self.differences
            .iter()
            .find(|d| d.variant == variant && d.measure == measure)
    }
}

pub fn fmt_p(p: f64) -> String {
    if p < 0.001 {
        "< 0.001".into()
    } else {
        format!("{p:.3}")
    }
}

pub fn fmt_v(v: f64, unit: &str) -> String {
    let n = if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    };
    if unit.is_empty() {
        n
    } else {
        format!("{n} {unit}")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A run of `variant` with its downtime, for the comparison's tests.
    pub(crate) fn run(variant: &str, passed: bool, downtime: f64) -> RunMeasures {
        RunMeasures {
            variant: variant.into(),
            passed,
            status: if passed { "PASSED" } else { "FAILED" }.into(),
            values: [("downtime_ms".to_string(), downtime)]
                .into_iter()
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn differences_are_stated_against_the_first_variant_with_their_uncertainty() {
        let mut runs = Vec::new();
        for i in 0..10 {
            runs.push(run("cc=bbr", true, 0.0));
            runs.push(run("cc=cubic", i >= 7, 5000.0 + i as f64));
        }
        let s = summarise(&["cc=bbr".into(), "cc=cubic".into()], &runs);
        assert_eq!(s.variants[0].passed, 10);
        assert_eq!(s.variants[1].passed, 3);
        let (lo, hi) = s.variants[1].pass_interval;
        assert!(lo > 0.1 && hi < 0.61, "{lo} {hi}");
        let rate = &s.differences[0];
        assert_eq!(rate.measure, "pass rate");
        assert!(rate.p_value < 0.01, "{rate:?}");
        assert!(
            rate.statement
                .starts_with("cc=cubic: 7 of 10 runs failed, cc=bbr: 0 of 10"),
            "{}",
            rate.statement
        );
        let d = s
            .differences
            .iter()
            .find(|d| d.measure == "downtime_ms")
            .unwrap();
        assert!(d.p_value < 0.001, "{d:?}");
    }

    #[test]
    fn runs_on_a_saturated_machine_are_kept_apart() {
        let mut runs = Vec::new();
        for i in 0..4 {
            runs.push(run("a", true, 0.0));
            let mut b = run("b", i > 0, 10.0);
            if i == 0 {
                b.saturated = Some("the lab's machine was saturated".into());
                b.values.insert("downtime_ms".into(), 90_000.0);
            }
            runs.push(b);
        }
        let s = summarise(&["a".into(), "b".into()], &runs);
        let b = &s.variants[1];
        assert_eq!((b.runs, b.passed, b.saturated), (3, 3, 1));
        assert_eq!(b.measures["downtime_ms"].max, 10.0, "not in its measures");
        assert!(s.differences[0]
            .statement
            .starts_with("b: 0 of 3 runs failed"));
    }
}
