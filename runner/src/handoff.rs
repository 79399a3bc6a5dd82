//! The gardenlets' hand-offs in a run's result: the verdict's
//! [`handoff`](crate::verdict::handoff) over the run's lab events, in the
//! eight steps' order, each with whether it crosses between the seeds.

pub use crate::verdict::handoff::{total_s, Handoff};
use crate::verdict::record::LabEvent;

use crate::migrate::conditions::{owner, STEPS};

/// The hand-offs of a run's lab events (`events.ndjson`), in step order.
pub fn of_events(events: &[LabEvent]) -> Vec<Handoff> {
    crate::verdict::handoff::of_events(events, STEPS, |s| owner(s).map(|o| o.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steps_hand_off_across_the_seeds_where_their_owners_differ() {
        let ev = |n: &str, a: f64, b: f64| LabEvent {
            at_unix_ms: a,
            end_unix_ms: Some(b),
            kind: "phase".into(),
            name: n.into(),
            detail: String::new(),
            status: None,
        };
        let h = of_events(&[ev(STEPS[0], 0.0, 1000.0), ev(STEPS[1], 4000.0, 9000.0)]);
        assert_eq!(h.len(), 1);
        assert_eq!((h[0].s, h[0].across), (3.0, true));
    }
}
