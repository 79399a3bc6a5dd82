//! When each migration step was seen to start, end or fail, from the
//! conditions in the lab's state (polled): step triggers fire from here.

use std::collections::HashMap;
use std::time::Instant;

use crate::migrate::conditions::{Conditions, Status};
use crate::scenario::StepEvent;

#[derive(Debug, Default)]
pub struct StepWatch {
    seen: HashMap<(String, StepEvent), Instant>,
}

impl StepWatch {
    /// Records the first sight of every transition the conditions show. A
    /// step seen over (True or False) was entered too, even if it started
    /// and ended between two looks.
    pub fn observe(&mut self, conditions: &Conditions, now: Instant) {
        for c in &conditions.0 {
            let entered = c.reason == "Progressing" || c.status != Status::Unknown;
            // (A gardenlet's Progressing is a status of its own.)
            if entered {
                self.seen
                    .entry((c.kind.clone(), StepEvent::Entering))
                    .or_insert(now);
            }
            let ev = match c.status {
                Status::True => Some(StepEvent::Leaving),
                Status::False => Some(StepEvent::Failed),
                Status::Unknown | Status::Progressing => None,
            };
            if let Some(ev) = ev {
                self.seen.entry((c.kind.clone(), ev)).or_insert(now);
            }
        }
    }

    pub fn fired_at(&self, step: &str, on: StepEvent) -> Option<Instant> {
        self.seen.get(&(step.to_string(), on)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn transitions_are_seen_once_and_a_quick_step_counts_as_entered() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        let mut c = Conditions::new("t");
        let mut w = StepWatch::default();
        w.observe(&c, t0);
        assert_eq!(
            w.fired_at("SourceEtcdPreparedForPeerJoin", StepEvent::Entering),
            None
        );
        c.set(
            "SourceEtcdPreparedForPeerJoin",
            Status::Unknown,
            "Progressing",
            "",
            "t",
        );
        w.observe(&c, t0);
        c.set(
            "SourceEtcdPreparedForPeerJoin",
            Status::True,
            "Prepared",
            "",
            "t",
        );
        c.set(
            "DestinationEtcdPeersJoined",
            Status::False,
            "Failed",
            "",
            "t",
        );
        w.observe(&c, t1);
        w.observe(&c, t1 + Duration::from_secs(5));
        assert_eq!(
            w.fired_at("SourceEtcdPreparedForPeerJoin", StepEvent::Entering),
            Some(t0)
        );
        assert_eq!(
            w.fired_at("SourceEtcdPreparedForPeerJoin", StepEvent::Leaving),
            Some(t1)
        );
        assert_eq!(
            w.fired_at("DestinationEtcdPeersJoined", StepEvent::Entering),
            Some(t1)
        );
        assert_eq!(
            w.fired_at("DestinationEtcdPeersJoined", StepEvent::Failed),
            Some(t1)
        );
        assert_eq!(w.fired_at("MigrateDNSRecords", StepEvent::Entering), None);
    }
}
