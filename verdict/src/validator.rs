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
pub fn validator_sim(requests: &[&Record], window: &Window) -> ValidatorSim {
    let readyz: Vec<&Record> = requests
        .iter()
        .copied()
        .filter(|r| r.probe == ProbeKind::Readyz)
        .collect();
    let mut sim = ValidatorSim {
        interval_ms: VALIDATOR_INTERVAL_MS,
        ticks: 0,
        failures: 0,
        max_consecutive_failures: 0,
        would_fail: false,
    };
    if readyz.is_empty() {
        return sim;
    }
    let mut consecutive = 0;
    let mut k = 0u64;
    loop {
        let tick = window.start_unix_ms + k as f64 * VALIDATOR_INTERVAL_MS;
        if tick > window.end_unix_ms {
            break;
        }
        k += 1;
        let i = readyz.partition_point(|r| r.start_unix_ms < tick);
        let Some(r) = readyz.get(i) else { break };
        if r.start_unix_ms >= tick + VALIDATOR_INTERVAL_MS {
            continue;
        }
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
}
