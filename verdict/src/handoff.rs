//! The hand-off between consecutive steps of a migration: the time from
//! one step's band ending (its condition True) to the next step's band
//! beginning (its Progressing), which with two gardenlets is the other
//! gardenlet's next look at the Shoot (up to its step interval). The
//! report draws each as a band; `cpmlab run` puts them in `result.json`.

use serde::{Deserialize, Serialize};

use crate::record::LabEvent;

/// One hand-off: `from` ended, `to` began `s` seconds later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Handoff {
    pub from: String,
    pub to: String,
    /// When `from` ended and `to` began (Unix ms).
    #[serde(skip)]
    pub span_unix_ms: (f64, f64),
    /// From the end of `from` to the start of `to`, seconds.
    pub s: f64,
    /// Whether the two steps have different owners (a hand-off between
    /// the gardenlets, not within one).
    pub across: bool,
}

/// The hand-offs between consecutive `steps` (in their order), each step
/// taken by its last band among `events` (a step run again after a
/// restart counts as it last ran); `owner` names the side that runs a
/// step.
pub fn of_events(
    events: &[LabEvent],
    steps: &[&str],
    owner: impl Fn(&str) -> Option<&'static str>,
) -> Vec<Handoff> {
    let band = |step: &str| {
        events
            .iter()
            .filter(|e| e.kind == "phase" && e.name == step)
            .filter_map(|e| Some((e.at_unix_ms, e.end_unix_ms?)))
            .next_back()
    };
    let mut v = Vec::new();
    for w in steps.windows(2) {
        let (Some(a), Some(b)) = (band(w[0]), band(w[1])) else {
            continue;
        };
        v.push(Handoff {
            from: w[0].to_string(),
            to: w[1].to_string(),
            span_unix_ms: (a.1, b.0.max(a.1)),
            s: ((b.0 - a.1) / 1e3).max(0.0),
            across: owner(w[0]) != owner(w[1]),
        });
    }
    v
}

/// Their sum, seconds.
pub fn total_s(h: &[Handoff]) -> f64 {
    h.iter().map(|h| h.s).sum()
}

/// The report's bands: each hand-off of a run's steps (the phases in the
/// order they began) as a `handoff` event.
pub fn bands(events: &[LabEvent]) -> Vec<LabEvent> {
    let mut phases: Vec<&LabEvent> = events
        .iter()
        .filter(|e| e.kind == "phase" && e.end_unix_ms.is_some())
        .collect();
    phases.sort_by(|a, b| a.at_unix_ms.total_cmp(&b.at_unix_ms));
    let mut names: Vec<&str> = Vec::new();
    for p in &phases {
        if !names.contains(&p.name.as_str()) {
            names.push(&p.name);
        }
    }
    of_events(events, &names, |_| None)
        .into_iter()
        .filter(|h| h.s > 0.0)
        .map(|h| LabEvent {
            at_unix_ms: h.span_unix_ms.0,
            end_unix_ms: Some(h.span_unix_ms.1),
            kind: "handoff".into(),
            name: "hand-off".into(),
            detail: format!("{} True to {} Progressing: {:.1} s", h.from, h.to, h.s),
            status: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: &str, n: &str, a: f64, b: Option<f64>) -> LabEvent {
        LabEvent {
            at_unix_ms: a,
            end_unix_ms: b,
            kind: kind.into(),
            name: n.into(),
            detail: String::new(),
            status: None,
        }
    }

    #[test]
    fn hand_offs_are_the_gaps_between_consecutive_steps() {
        let steps = ["A", "B", "C", "D"];
        let events = vec![
            ev("phase", "A", 0.0, Some(1000.0)),
            ev("phase", "B", 4000.0, Some(9000.0)),
            // A step ended, then ran again (a restart): its last band counts.
            ev("phase", "C", 9500.0, Some(9600.0)),
            ev("phase", "C", 12000.0, Some(12500.0)),
            ev("note", "D", 0.0, None),
        ];
        let owner = |s: &str| Some(if s == "A" { "source" } else { "destination" });
        let h = of_events(&events, &steps, owner);
        assert_eq!(h.len(), 2);
        assert_eq!((h[0].from.as_str(), h[0].s, h[0].across), ("A", 3.0, true));
        assert_eq!((h[1].s, h[1].across), (3.0, false));
        assert_eq!(total_s(&h), 6.0);
        assert!(of_events(&[], &steps, owner).is_empty());
    }

    #[test]
    fn the_report_draws_each_gap_between_phases_as_a_band() {
        let events = vec![
            ev("phase", "A", 0.0, Some(1000.0)),
            ev("phase", "B", 4000.0, Some(9000.0)),
            ev("phase", "C", 9000.0, Some(9600.0)),
            ev("fault", "kill", 500.0, Some(700.0)),
        ];
        let b = bands(&events);
        assert_eq!(
            b.len(),
            1,
            "no band where a step began as the last ended: {b:?}"
        );
        assert_eq!((b[0].at_unix_ms, b[0].end_unix_ms), (1000.0, Some(4000.0)));
        assert_eq!(b[0].detail, "A True to B Progressing: 3.0 s");
    }
}
