//! The endpoint lifecycle of the shoot API's replicas, as Kubernetes and
//! istiod run it, in one place: the kubelet's readiness probe (its timing:
//! a ticker of `period` whose missed ticks are dropped, no probe before
//! `initialDelay` after the container started, `timeout` per probe,
//! `failureThreshold` failures in a row to go unready, `successThreshold`
//! successes to come back), the EndpointSlice controller (an endpoint is
//! served while its pod is ready and not terminating; a deleted pod's
//! endpoint goes at once, as a terminating one), and istiod's debounce
//! (a push once 100 ms passed without a change, at most 10 s after the
//! first: PILOT_DEBOUNCE_AFTER and PILOT_DEBOUNCE_MAX, istio/istio
//! pilot/pkg/features/tuning.go; EDS pushes are debounced too,
//! PILOT_ENABLE_EDS_DEBOUNCE).
//!
//! Pure state; `gateway::agent` drives it with clocks and sockets.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::topology::ProbeTiming;

/// istiod's debounce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DebounceSettings {
    pub after_ms: u64,
    pub max_ms: u64,
}

impl Default for DebounceSettings {
    /// PILOT_DEBOUNCE_AFTER 100 ms, PILOT_DEBOUNCE_MAX 10 s.
    fn default() -> Self {
        DebounceSettings {
            after_ms: 100,
            max_ms: 10_000,
        }
    }
}

/// Changes waiting for a push.
#[derive(Debug, Clone, Default)]
pub struct Debouncer {
    first: Option<Instant>,
    last: Option<Instant>,
}

impl Debouncer {
    /// A change happened at `now`.
    pub fn change(&mut self, now: Instant) {
        self.first.get_or_insert(now);
        self.last = Some(now);
    }

    /// When the pending changes are to be pushed, if any are pending.
    pub fn due(&self, s: &DebounceSettings) -> Option<Instant> {
        let (first, last) = (self.first?, self.last?);
        Some(
            (last + Duration::from_millis(s.after_ms)).min(first + Duration::from_millis(s.max_ms)),
        )
    }

    /// Takes the pending changes when they are due at `now`.
    pub fn take(&mut self, now: Instant, s: &DebounceSettings) -> bool {
        match self.due(s) {
            Some(at) if now >= at => {
                *self = Debouncer::default();
                true
            }
            _ => false,
        }
    }
}

/// A probe's verdict on one replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeResult {
    Success,
    Failure,
}

/// The kubelet's readiness of one container from its probe results: not
/// ready until the probe succeeded `successThreshold` times in a row;
/// unready again after `failureThreshold` failures in a row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Readiness {
    pub ready: bool,
    successes: u32,
    failures: u32,
}

impl Readiness {
    /// Ready, as after `successThreshold` successes: an established replica.
    pub fn established(t: &ProbeTiming) -> Readiness {
        Readiness {
            ready: true,
            successes: t.success_threshold,
            failures: 0,
        }
    }

    /// Takes a result; returns the new readiness when it changed.
    pub fn observe(&mut self, r: ProbeResult, t: &ProbeTiming) -> Option<bool> {
        match r {
            ProbeResult::Success => {
                self.failures = 0;
                self.successes = self.successes.saturating_add(1);
                if !self.ready && self.successes >= t.success_threshold {
                    self.ready = true;
                    return Some(true);
                }
            }
            ProbeResult::Failure => {
                self.successes = 0;
                self.failures = self.failures.saturating_add(1);
                if self.ready && self.failures >= t.failure_threshold {
                    self.ready = false;
                    return Some(false);
                }
            }
        }
        None
    }
}

/// The kubelet's probe worker clock: a ticker of `period` from the worker's
/// start whose channel holds one tick (Go's time.Ticker drops the ticks a
/// slow reader misses), and no probe while the container has run less than
/// `initialDelay` (the probe is skipped, and the next tick tried).
#[derive(Debug, Clone)]
pub struct ProbeClock {
    start: Instant,
    period: Duration,
    /// The next tick not yet taken.
    next_tick: u64,
}

impl ProbeClock {
    pub fn new(start: Instant, t: &ProbeTiming) -> ProbeClock {
        ProbeClock {
            start,
            period: Duration::from_millis(t.period_ms),
            next_tick: 0,
        }
    }

    fn tick_at(&self, n: u64) -> Instant {
        self.start + self.period * n as u32
    }

    /// When the next probe may start, given that the previous one ended at
    /// `now`: the worker probes at its start, then waits for a tick; a tick
    /// that fell while it probed is waiting in the channel (one, the rest
    /// were dropped).
    pub fn next_after(&mut self, now: Instant) -> Instant {
        if self.next_tick == 0 {
            self.next_tick = 1;
            return self.start;
        }
        // Ticks at or before `now` that the worker missed: one is buffered.
        let mut n = self.next_tick;
        while self.tick_at(n + 1) <= now {
            n += 1;
        }
        self.next_tick = n + 1;
        self.tick_at(n).max(now)
    }
}

/// A replica as the gateway is told of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replica {
    pub name: String,
    pub address: SocketAddrV4,
    /// Its container runs (the kubelet knows at once when it does not).
    pub running: bool,
    /// When its container started (the initial delay counts from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_unix_ms: Option<f64>,
    /// Its pod is being deleted: the endpoint goes at once.
    #[serde(default)]
    pub terminating: bool,
    /// One of the replicas `up` starts the lab with, which production has
    /// had serving long before any migration: the lab has seen it answer
    /// /readyz itself, so the gateway takes it as Ready when it first
    /// follows it (a pod Ready for months is Ready) instead of waiting out
    /// the initial delay and a period, and probes it on the topology's
    /// cadence from then on. A restarted container, or any replica a
    /// migration starts, is probed from scratch.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub established: bool,
}

/// The served endpoints: replicas that run, are ready, and are not
/// terminating (the EndpointSlice controller's `ready` condition, which
/// istiod sends as the cluster's healthy endpoints), sorted.
pub fn served(replicas: &[Replica], ready: &BTreeMap<String, bool>) -> Vec<SocketAddrV4> {
    let mut v: Vec<SocketAddrV4> = replicas
        .iter()
        .filter(|r| r.running && !r.terminating && ready.get(&r.name) == Some(&true))
        .map(|r| r.address)
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> ProbeTiming {
        crate::topology::ProbeSpec::default().timing("t").unwrap()
    }

    #[test]
    fn pushes_wait_for_quiet_and_never_longer_than_the_maximum() {
        let s = DebounceSettings::default();
        let t0 = Instant::now();
        let mut d = Debouncer::default();
        assert_eq!(d.due(&s), None);
        d.change(t0);
        assert_eq!(d.due(&s), Some(t0 + Duration::from_millis(100)));
        assert!(!d.take(t0 + Duration::from_millis(99), &s));
        // Changes every 50 ms keep it waiting, up to 10 s.
        let mut now = t0;
        for _ in 0..300 {
            now += Duration::from_millis(50);
            d.change(now);
        }
        assert_eq!(d.due(&s), Some(t0 + Duration::from_secs(10)));
        assert!(d.take(t0 + Duration::from_secs(10), &s));
        assert_eq!(d.due(&s), None);
    }

    #[test]
    fn unready_after_the_failure_threshold_ready_after_one_success() {
        let t = timing();
        let mut r = Readiness::default();
        assert!(!r.ready, "not ready before a probe succeeded");
        assert_eq!(r.observe(ProbeResult::Failure, &t), None);
        assert_eq!(r.observe(ProbeResult::Success, &t), Some(true));
        assert_eq!(r.observe(ProbeResult::Failure, &t), None);
        assert_eq!(r.observe(ProbeResult::Failure, &t), None);
        assert_eq!(
            r.observe(ProbeResult::Success, &t),
            None,
            "a success resets the count"
        );
        assert_eq!(r.observe(ProbeResult::Failure, &t), None);
        assert_eq!(r.observe(ProbeResult::Failure, &t), None);
        assert_eq!(r.observe(ProbeResult::Failure, &t), Some(false));
        assert_eq!(r.observe(ProbeResult::Success, &t), Some(true));
    }

    /// A frozen replica: each probe takes the whole 15 s timeout. The
    /// ticker keeps one missed tick, so the next probe starts at once: the
    /// third failure ends 45 s after the first probe began — the 30–45 s
    /// (and more, with the phase of the ticker) a kube-apiserver that
    /// hangs stays an endpoint.
    #[test]
    fn a_hanging_replica_fails_three_probes_back_to_back() {
        let t = timing();
        let start = Instant::now();
        let mut c = ProbeClock::new(start, &t);
        let s = |d: u64| start + Duration::from_secs(d);
        assert_eq!(c.next_after(start), s(0), "the worker probes at once");
        assert_eq!(c.next_after(s(1)), s(10), "then on the ticks");
        // Hangs from 10 s on: probes end at 25, 40, 55 and start at once.
        assert_eq!(c.next_after(s(25)), s(25));
        assert_eq!(c.next_after(s(40)), s(40));
        assert_eq!(c.next_after(s(55)), s(55));
        // Quick again: the ticks resume their phase.
        assert_eq!(c.next_after(s(56)), s(60));
        assert_eq!(c.next_after(s(61)), s(70));
    }

    #[test]
    fn served_endpoints_are_ready_running_and_not_terminating() {
        let r = |name: &str, ip: u8, running: bool, terminating: bool| Replica {
            name: name.into(),
            address: SocketAddrV4::new([10, 0, 0, ip].into(), 443),
            running,
            started_unix_ms: None,
            terminating,
            established: false,
        };
        let replicas = vec![
            r("a", 21, true, false),
            r("b", 20, true, false),
            r("c", 22, true, true),
            r("d", 23, false, false),
            r("e", 24, true, false),
        ];
        let ready = BTreeMap::from([
            ("a".to_string(), true),
            ("b".to_string(), true),
            ("c".to_string(), true),
            ("d".to_string(), true),
            ("e".to_string(), false),
        ]);
        assert_eq!(
            served(&replicas, &ready),
            vec![
                "10.0.0.20:443".parse::<SocketAddrV4>().unwrap(),
                "10.0.0.21:443".parse().unwrap()
            ]
        );
    }
}
