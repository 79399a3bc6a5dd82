//! The lab's own machine, saturated: where `cpu.ndjson` shows the machine
//! busy at or above `Criteria::saturation_pct` (95 % of all its cores by
//! default), a member or an API server that waited for a core failed
//! requests the migration need not have failed. A failure inside such a
//! window is a fact about the lab's machine as much as about the
//! migration: its mechanism line says so, with the window and the figure,
//! no hazard excuses it, and `cpmlab compare` keeps such runs apart.
//!
//! Each CPU sample is the machine's use since the sample before it (the
//! observer samples every 2 s), so a saturated sample covers the time
//! from the one before; consecutive saturated samples make one window.

use serde::{Deserialize, Serialize};

use crate::context::CpuSample;
use crate::record::Record;

/// One window in which the machine was saturated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saturated {
    pub from_unix_ms: f64,
    pub to_unix_ms: f64,
    /// The lowest and the highest sample in it, percent of all cores.
    pub min_pct: f64,
    pub max_pct: f64,
}

impl Saturated {
    pub fn overlaps(&self, a: f64, b: f64) -> bool {
        a <= self.to_unix_ms && b >= self.from_unix_ms
    }

    /// "from +26.0 s to +75.0 s (98–100 % of all cores, at or above 95 %)"
    pub fn words(&self, t0: f64, bound: f64) -> String {
        let (lo, hi) = (
            format!("{:.0}", self.min_pct),
            format!("{:.0}", self.max_pct),
        );
        let pct = if lo == hi {
            format!("{hi} %")
        } else {
            format!("{lo}–{hi} %")
        };
        format!(
            "from {:+.1} s to {:+.1} s ({pct} of all cores, at or above {bound:.0} %)",
            (self.from_unix_ms - t0) / 1e3,
            (self.to_unix_ms - t0) / 1e3
        )
    }
}

/// The observer's sampling interval, for a first sample with none before.
const SAMPLE_MS: f64 = 2_000.0;

/// The windows in which the machine was at or above `bound`.
pub fn windows(cpu: &[CpuSample], bound: f64) -> Vec<Saturated> {
    let mut samples: Vec<&CpuSample> = cpu.iter().collect();
    samples.sort_by(|a, b| a.at_unix_ms.total_cmp(&b.at_unix_ms));
    let mut out: Vec<Saturated> = Vec::new();
    let mut open = false;
    for (i, s) in samples.iter().enumerate() {
        if s.machine_busy_pct < bound {
            open = false;
            continue;
        }
        let since = if i > 0 {
            samples[i - 1].at_unix_ms
        } else {
            s.at_unix_ms - SAMPLE_MS
        };
        match out.last_mut().filter(|_| open) {
            Some(w) => {
                w.to_unix_ms = s.at_unix_ms;
                w.min_pct = w.min_pct.min(s.machine_busy_pct);
                w.max_pct = w.max_pct.max(s.machine_busy_pct);
            }
            None => out.push(Saturated {
                from_unix_ms: since,
                to_unix_ms: s.at_unix_ms,
                min_pct: s.machine_busy_pct,
                max_pct: s.machine_busy_pct,
            }),
        }
        open = true;
    }
    out
}

/// The windows a request overlaps.
pub fn of<'a>(w: &'a [Saturated], r: &Record) -> impl Iterator<Item = &'a Saturated> {
    let (a, b) = (r.start_unix_ms, crate::record_end(r));
    w.iter().filter(move |s| s.overlaps(a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: f64, pct: f64) -> CpuSample {
        CpuSample {
            at_unix_ms: t,
            machine_busy_pct: pct,
            cores: 2,
            ..CpuSample::default()
        }
    }

    #[test]
    fn consecutive_saturated_samples_make_one_window_from_the_sample_before() {
        let cpu = [
            s(0.0, 40.0),
            s(2_000.0, 98.0),
            s(4_000.0, 100.0),
            s(6_000.0, 60.0),
            s(8_000.0, 96.0),
        ];
        let w = windows(&cpu, 95.0);
        assert_eq!(w.len(), 2);
        assert_eq!((w[0].from_unix_ms, w[0].to_unix_ms), (0.0, 4_000.0));
        assert_eq!((w[0].min_pct, w[0].max_pct), (98.0, 100.0));
        assert_eq!(
            w[0].words(0.0, 95.0),
            "from +0.0 s to +4.0 s (98–100 % of all cores, at or above 95 %)"
        );
        assert!(w[1].overlaps(7_000.0, 7_500.0));
        assert!(!w[1].overlaps(1_000.0, 5_000.0) || w[0].overlaps(1_000.0, 5_000.0));
        assert!(windows(&cpu, 101.0).is_empty());
    }
}
