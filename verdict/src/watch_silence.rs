//! The `watch-silence` rule: no watch or informer lane goes without an
//! event for longer than [`SILENT_MS`](crate::mechanisms::SILENT_MS) while
//! writes to the counter are acknowledged (the silences
//! [`silent_watches`](crate::mechanisms::silent_watches) finds, between two
//! events the lane delivered).
//!
//! A watch whose stream stays open while its server lost etcd delivers
//! nothing and reports no error: every request of it succeeded, and its
//! events may all arrive once it resumes, so neither `zero-downtime` nor
//! `watch-continuity` fails it. Its client saw the counter stand still for
//! the whole silence. Each silence counts in the lane's downtime too (see
//! [`availability`](crate::availability)), so "downtime" is the time the
//! client could not see the API's state change, not only the time its
//! requests failed.

use super::{Rule, RuleStatus};
use crate::mechanisms::{Silence, SILENT_MS};

pub const RULE: &str = "watch-silence";

/// `ran`: whether any watch or informer lane ran.
pub fn rule(silences: &[Silence], ran: bool) -> Rule {
    let name = RULE.to_string();
    if !ran {
        return Rule {
            name,
            status: RuleStatus::Skipped,
            message: "no watch or informer ran".into(),
        };
    }
    if silences.is_empty() {
        return Rule {
            name,
            status: RuleStatus::Passed,
            message: format!(
                "every watch and informer lane delivered an event at least every {:.0} s while writes were acknowledged",
                SILENT_MS / 1e3
            ),
        };
    }
    // `silences` is longest first: the worst is named first.
    let lines: Vec<&str> = silences.iter().take(5).map(|s| s.line.as_str()).collect();
    let more = silences.len().saturating_sub(lines.len());
    Rule {
        name,
        status: RuleStatus::Failed,
        message: format!(
            "{} silence(s) longer than {:.0} s while writes were acknowledged: {}{}",
            silences.len(),
            SILENT_MS / 1e3,
            lines.join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn silence(lane: &str, from: f64, to: f64) -> Silence {
        Silence {
            lane: lane.into(),
            seed: Some("seed-a".into()),
            from_unix_ms: from,
            to_unix_ms: to,
            writes: 10,
            from_step: "A".into(),
            to_step: "B".into(),
            line: format!("{lane}: no event for {:.1} s", (to - from) / 1e3),
        }
    }

    #[test]
    fn a_silence_fails_and_is_named() {
        let r = rule(&[silence("watch/reused", 0.0, 93_000.0)], true);
        assert_eq!(r.status, RuleStatus::Failed);
        assert!(
            r.message.contains("watch/reused: no event for 93.0 s"),
            "{}",
            r.message
        );
    }

    #[test]
    fn no_silence_passes_and_no_watch_skips() {
        assert_eq!(rule(&[], true).status, RuleStatus::Passed);
        assert_eq!(rule(&[], false).status, RuleStatus::Skipped);
    }
}
