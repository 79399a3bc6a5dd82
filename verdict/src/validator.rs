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
