//! What Gardener's own zero-downtime validator would have said of the run:
//! it curls /healthz every 10 s and fails after 3 consecutive failures.
//! Simulated from the readyz records; informational, not a rule.

use serde::{Deserialize, Serialize};

use super::{Window, VALIDATOR_FAILURES_TO_FAIL, VALIDATOR_INTERVAL_MS};
use crate::record::{Outcome, ProbeKind, Record};

/// What Gardener's zero-downtime validator would have concluded: it curls
/// /healthz every 10 s and fails after 3 consecutive failures. Simulated from
/// the readyz records, informational only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidatorSim {
    pub interval_ms: f64,
    /// Ticks that had a readyz record to look at.
    pub ticks: u64,
    pub failures: u64,
    pub max_consecutive_failures: u64,
    pub would_fail: bool,
}

/// Gardener's validator, simulated: at each 10 s tick from the window start,
/// the first readyz record (either mode) that starts at or after the tick and
/// before the next one is the curl; ticks without one are not counted.
///
/// Walks the records, not the ticks: a tick without a record changes
/// nothing, so the work is the number of records whatever the window spans
/// (a record or window far in the future, or an endless window, in a
/// damaged file, cannot make the verdict loop).
pub fn validator_sim(requests: &[&Record], window: &Window) -> ValidatorSim {
    let mut readyz: Vec<&Record> = requests
        .iter()
        .copied()
        .filter(|r| r.probe == ProbeKind::Readyz)
        .collect();
    readyz.sort_by(|a, b| a.start_unix_ms.total_cmp(&b.start_unix_ms));
    let mut sim = ValidatorSim {
        interval_ms: VALIDATOR_INTERVAL_MS,
        ticks: 0,
        failures: 0,
        max_consecutive_failures: 0,
        would_fail: false,
    };
    let mut consecutive = 0;
    let mut last_tick: Option<f64> = None;
    for r in readyz {
        let since_start = r.start_unix_ms - window.start_unix_ms;
        // Before the window (or not a time at all): no tick looks at it.
        if since_start.is_nan() || since_start < 0.0 {
            continue;
        }
        // The tick this record is the curl of, if it is the first after it.
        let k = (since_start / VALIDATOR_INTERVAL_MS).floor();
        let tick = window.start_unix_ms + k * VALIDATOR_INTERVAL_MS;
        if !tick.is_finite() || tick > window.end_unix_ms {
            break;
        }
        if last_tick == Some(k) {
            continue;
        }
        last_tick = Some(k);
        sim.ticks += 1;
        if r.outcome == Outcome::Ok {
            consecutive = 0;
        } else {
            sim.failures += 1;
            consecutive += 1;
            sim.max_consecutive_failures = sim.max_consecutive_failures.max(consecutive);
        }
    }
    sim.would_fail = sim.max_consecutive_failures >= VALIDATOR_FAILURES_TO_FAIL;
    sim
}

/// The rule judged through the whole verdict (`compute`), on synthetic
/// runs (`testutil`).
#[cfg(test)]
mod judged {
    use crate::testutil::*;
    use crate::*;

    #[test]
    fn verdict_validator_sim_25s_outage_would_fail() {
        // Ticks at 0, 10, ..., 60 s; the outage covers the ticks at 20, 30, 40.
        let sim = readyz_outage(20_000.0, 45_000.0);
        assert_eq!(sim.ticks, 7);
        assert_eq!(sim.failures, 3);
        assert_eq!(sim.max_consecutive_failures, 3);
        assert!(sim.would_fail);
    }

    #[test]
    fn verdict_validator_sim_15s_outage_goes_unnoticed() {
        // The ticks at 20 and 30 s fail, 40 s is fine again: 2 in a row.
        let sim = readyz_outage(20_000.0, 35_000.0);
        assert_eq!(sim.ticks, 7);
        assert_eq!(sim.failures, 2);
        assert_eq!(sim.max_consecutive_failures, 2);
        assert!(!sim.would_fail);
        // The verdict itself fails all the same.
        let recs = series(
            ProbeKind::Readyz,
            ConnMode::New,
            0.0,
            60_001.0,
            100.0,
            Some((20_000.0, 35_000.0)),
        );
        let v = compute(&recs, &[], &nothing(), &th());
        assert!(!v.passed);
        assert_eq!(v.overall.downtime_ms, 15_005.0);
    }

    /// A damaged file: one readyz record a hundred years on, and a window
    /// without end. The simulation looks at the records it has, at once.
    #[test]
    fn verdict_validator_sim_is_bounded_by_its_records() {
        let mut recs = series(
            ProbeKind::Readyz,
            ConnMode::New,
            0.0,
            30_001.0,
            1_000.0,
            None,
        );
        recs.push(rec(
            ProbeKind::Readyz,
            ConnMode::New,
            3.2e12,
            5.0,
            Outcome::Timeout,
        ));
        let refs: Vec<&Record> = recs.iter().collect();
        for end in [T0 + 3.2e12 + 1.0, f64::INFINITY] {
            let w = Window {
                start_unix_ms: T0,
                end_unix_ms: end,
            };
            let sim = crate::validator::validator_sim(&refs, &w);
            // Ticks at 0, 10, 20, 30 s and the one far away.
            assert_eq!(sim.ticks, 5, "window end {end}");
            assert_eq!(sim.failures, 1);
        }
    }
}
