//! The scheduling core of the userspace delay line: for each packet on a
//! directed link, drop it or give it a release time (delay, jitter, rate),
//! and a queue that hands packets back when they are due. Pure logic with an
//! injected clock and a seeded generator, so it is tested without a network;
//! the TUN plumbing in the router builds on it.
//!
//! Packets on one link leave in the order they arrived (a jittered packet
//! never overtakes an earlier one), as on a real path and as TCP expects;
//! netem reorders under jitter, which the netem backend keeps. Keeping order
//! biases the delay upward when packets come closer together than the jitter
//! (a packet waits for a later-released predecessor); the tests pin both.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use super::profile::{Distribution, LinkProfile};

/// xorshift64*: small, fast, seedable; good enough for loss and jitter.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(f64::MIN_POSITIVE);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// What happens to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Drop,
    Release(Instant),
}

/// One direction of one link.
#[derive(Debug, Clone)]
pub struct LinkShaper {
    pub profile: LinkProfile,
    rng: Rng,
    /// When the (rate-limited) wire is free again.
    wire_free: Option<Instant>,
    /// Release time of the previous packet: order is kept.
    last_release: Option<Instant>,
}

impl LinkShaper {
    pub fn new(profile: LinkProfile, seed: u64) -> LinkShaper {
        LinkShaper {
            profile,
            rng: Rng::new(seed),
            wire_free: None,
            last_release: None,
        }
    }

    /// Changes the profile at run time; packets already queued keep their time.
    pub fn set_profile(&mut self, profile: LinkProfile) {
        self.profile = profile;
        if profile.rate_bps.is_none() {
            self.wire_free = None;
        }
    }

    fn jittered_delay(&mut self) -> Duration {
        let p = &self.profile;
        let base = p.delay.as_secs_f64();
        let j = p.jitter.as_secs_f64();
        let d = if j == 0.0 {
            base
        } else {
            match p.distribution {
                Distribution::Normal => base + j * self.rng.normal(),
                Distribution::Uniform => base + j * (2.0 * self.rng.unit() - 1.0),
                // Heavy tail to the right; mean stays close to `delay`.
                Distribution::Pareto => {
                    let alpha = 3.0;
                    let x = (1.0 - self.rng.unit()).powf(-1.0 / alpha) - 1.0;
                    base + j * (x - 0.5)
                }
                Distribution::Paretonormal => {
                    let alpha = 3.0;
                    let x = (1.0 - self.rng.unit()).powf(-1.0 / alpha) - 1.0;
                    base + j * (0.25 * (x - 0.5) + 0.75 * self.rng.normal())
                }
            }
        };
        Duration::from_secs_f64(d.clamp(0.0, 60.0))
    }

    /// Decides the fate of a packet of `len` bytes arriving at `now`.
    pub fn admit(&mut self, now: Instant, len: usize) -> Verdict {
        let p = self.profile;
        if p.partition
            || (p.shaper_loss_pct() > 0.0 && self.rng.unit() * 100.0 < p.shaper_loss_pct())
        {
            return Verdict::Drop;
        }
        let mut sent = now;
        if let Some(rate) = p.rate_bps {
            let start = self.wire_free.map_or(now, |f| f.max(now));
            let tx = Duration::from_secs_f64(len as f64 * 8.0 / rate as f64);
            sent = start + tx;
            self.wire_free = Some(sent);
        }
        let mut release = sent + self.jittered_delay();
        if let Some(last) = self.last_release {
            release = release.max(last);
        }
        self.last_release = Some(release);
        Verdict::Release(release)
    }
}

/// Packets waiting for their release time, earliest first (FIFO on ties).
#[derive(Debug)]
pub struct DelayQueue<P> {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    items: std::collections::HashMap<u64, P>,
    seq: u64,
}

impl<P> Default for DelayQueue<P> {
    fn default() -> Self {
        DelayQueue {
            heap: BinaryHeap::new(),
            items: std::collections::HashMap::new(),
            seq: 0,
        }
    }
}

impl<P> DelayQueue<P> {
    pub fn push(&mut self, at: Instant, packet: P) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq)));
        self.items.insert(self.seq, packet);
    }
    /// When the next packet is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }
    /// The next packet if it is due at `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<P> {
        match self.heap.peek() {
            Some(Reverse((at, _))) if *at <= now => {
                let Reverse((_, seq)) = self.heap.pop()?;
                self.items.remove(&seq)
            }
            _ => None,
        }
    }
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(f: impl FnOnce(&mut LinkProfile)) -> LinkProfile {
        let mut p = LinkProfile::default();
        f(&mut p);
        p
    }

    fn release(v: Verdict) -> Instant {
        match v {
            Verdict::Release(t) => t,
            Verdict::Drop => panic!("dropped"),
        }
    }

    #[test]
    fn fixed_delay_is_exact() {
        let t0 = Instant::now();
        let mut s = LinkShaper::new(profile(|p| p.delay = Duration::from_millis(25)), 7);
        assert_eq!(release(s.admit(t0, 100)), t0 + Duration::from_millis(25));
        let t1 = t0 + Duration::from_micros(300);
        assert_eq!(release(s.admit(t1, 100)), t1 + Duration::from_millis(25));
    }

    #[test]
    fn loss_rate_matches_the_profile() {
        let t0 = Instant::now();
        let mut s = LinkShaper::new(profile(|p| p.loss_pct = 20.0), 42);
        let n = 100_000;
        let dropped = (0..n).filter(|_| s.admit(t0, 64) == Verdict::Drop).count();
        let pct = dropped as f64 * 100.0 / n as f64;
        assert!((19.5..20.5).contains(&pct), "{pct}% dropped");
        // Loss the kernel draws is not the delay line's to drop.
        let mut s = LinkShaper::new(
            profile(|p| {
                p.loss_pct = 20.0;
                p.loss_by = super::super::profile::LossBy::Kernel;
            }),
            42,
        );
        assert!((0..n).all(|_| s.admit(t0, 64) != Verdict::Drop));
    }

    #[test]
    fn partition_drops_everything() {
        let mut s = LinkShaper::new(profile(|p| p.partition = true), 1);
        assert!((0..100).all(|_| s.admit(Instant::now(), 64) == Verdict::Drop));
    }

    #[test]
    fn rate_serialises_packets_on_the_wire() {
        let t0 = Instant::now();
        // 1250 bytes at 1 Mbit/s = 10 ms on the wire each.
        let mut s = LinkShaper::new(profile(|p| p.rate_bps = Some(1_000_000)), 1);
        let times: Vec<Instant> = (0..5).map(|_| release(s.admit(t0, 1250))).collect();
        for (i, t) in times.iter().enumerate() {
            assert_eq!(*t, t0 + Duration::from_millis(10 * (i as u64 + 1)));
        }
    }

    #[test]
    fn jitter_spreads_but_keeps_order_and_mean() {
        let jittery = || {
            LinkShaper::new(
                profile(|p| {
                    p.delay = Duration::from_millis(20);
                    p.jitter = Duration::from_millis(2);
                }),
                3,
            )
        };
        let t0 = Instant::now();
        // Sparse packets (20 ms apart, far wider than the jitter): the mean
        // delay is the configured one and the spread is the jitter.
        let mut s = jittery();
        let n = 10_000;
        let delays: Vec<f64> = (0..n)
            .map(|i| {
                let now = t0 + Duration::from_millis(20 * i);
                (release(s.admit(now, 64)) - now).as_secs_f64() * 1e3
            })
            .collect();
        let mean = delays.iter().sum::<f64>() / n as f64;
        let sd = (delays.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!((19.9..20.1).contains(&mean), "mean delay {mean} ms");
        assert!((1.6..2.4).contains(&sd), "spread {sd} ms");
        // Dense packets (1 ms apart): nobody overtakes its predecessor.
        let mut s = jittery();
        let mut last = t0;
        for i in 0..n {
            let r = release(s.admit(t0 + Duration::from_millis(i), 64));
            assert!(r >= last, "packet {i} overtook its predecessor");
            last = r;
        }
    }

    #[test]
    fn every_distribution_stays_non_negative() {
        for d in [
            Distribution::Normal,
            Distribution::Uniform,
            Distribution::Pareto,
            Distribution::Paretonormal,
        ] {
            let t0 = Instant::now();
            let mut s = LinkShaper::new(
                profile(|p| {
                    p.delay = Duration::from_millis(1);
                    p.jitter = Duration::from_millis(1);
                    p.distribution = d;
                }),
                9,
            );
            for _ in 0..1000 {
                assert!(release(s.admit(t0, 64)) >= t0, "{d:?}");
            }
        }
    }

    #[test]
    fn queue_releases_in_time_order() {
        let t0 = Instant::now();
        let mut q = DelayQueue::default();
        q.push(t0 + Duration::from_millis(3), "c");
        q.push(t0 + Duration::from_millis(1), "a");
        q.push(t0 + Duration::from_millis(1), "b");
        assert_eq!(q.next_due(), Some(t0 + Duration::from_millis(1)));
        assert_eq!(q.pop_due(t0), None);
        assert_eq!(q.pop_due(t0 + Duration::from_millis(2)), Some("a"));
        assert_eq!(q.pop_due(t0 + Duration::from_millis(2)), Some("b"));
        assert_eq!(q.pop_due(t0 + Duration::from_millis(2)), None);
        assert_eq!(q.len(), 1);
        assert_eq!(q.pop_due(t0 + Duration::from_millis(3)), Some("c"));
        assert!(q.is_empty());
    }
}
