//! `cpmlab agent router`: the wan router's userspace delay line, for kernels
//! without sch_netem. Policy routing in the router sends forwarded packets
//! into a TUN device (see `link::router::divert_script`); this loop reads
//! each one, classifies it by source and destination network, drops it
//! (loss, partition) or queues it until its release time (delay, jitter,
//! rate), and writes it back to the TUN, whence the kernel forwards it on.
//! One thread, pipelined: any number of packets are in flight at once.
//! The link table is re-read when its file changes.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use serde::Serialize;

use super::tun::{tight_timers, Tun};
use super::vnet_hdr::{self, VnetHdr};
use crate::link::profile::LinkProfile;
use crate::link::schedule::{DelayQueue, LinkShaper, Verdict};
use crate::link::{DelaylineConfig, LinkSeed, DELAYLINE_DEV, DELAYLINE_STATS};

/// Finds the lab network of an address.
pub struct Classifier {
    nets: Vec<(u32, u32)>,
}

impl Classifier {
    pub fn new(cfg: &DelaylineConfig) -> Classifier {
        Classifier {
            nets: cfg
                .networks
                .iter()
                .filter_map(|n| crate::addressing::parse_cidr(&n.subnet))
                .map(|(base, p)| {
                    let mask = if p == 0 { 0 } else { u32::MAX << (32 - p) };
                    (base & mask, mask)
                })
                .collect(),
        }
    }
    fn net_of(&self, ip: u32) -> Option<usize> {
        self.nets.iter().position(|(b, m)| ip & m == *b)
    }
    /// (source network, destination network) of an IPv4 packet.
    pub fn classify(&self, pkt: &[u8]) -> Option<(usize, usize)> {
        if pkt.len() < 20 || pkt[0] >> 4 != 4 {
            return None;
        }
        let src = u32::from_be_bytes([pkt[12], pkt[13], pkt[14], pkt[15]]);
        let dst = u32::from_be_bytes([pkt[16], pkt[17], pkt[18], pkt[19]]);
        Some((self.net_of(src)?, self.net_of(dst)?))
    }
}

#[derive(Debug, Default, Clone, Serialize)]
struct LinkStats {
    /// Packets as they are on the wire (a superpacket counts its segments).
    passed: u64,
    dropped: u64,
    /// IP bytes passed, as on the wire.
    bytes: u64,
}

/// Superpackets seen, and the offloads in force.
#[derive(Debug, Default, Clone, Serialize)]
struct OffloadStats {
    offloads: bool,
    reads: u64,
    superpackets: u64,
    /// Why offloads are off, when they are.
    off_because: Option<&'static str>,
}

struct Shapers {
    names: Vec<String>,
    by_pair: HashMap<(usize, usize), LinkShaper>,
    seed: Option<LinkSeed>,
    /// The replay's change in force, once one is.
    replay_at: Option<usize>,
}

/// The generator seed of one directed link: the lab's seed (or a fixed
/// one) mixed with the link's names, so links draw independently.
pub fn link_seed(seed: Option<LinkSeed>, from: &str, to: &str) -> u64 {
    let mut h = seed.map_or(0x9E37_79B9_7F4A_7C15, |s| s.seed ^ 0x5851_F42D_4C95_7F2D);
    for b in from.bytes().chain([b'>']).chain(to.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

impl Shapers {
    fn new() -> Shapers {
        Shapers {
            names: Vec::new(),
            by_pair: HashMap::new(),
            seed: None,
            replay_at: None,
        }
    }

    fn pair(&self, key: &str) -> Option<(usize, usize)> {
        let (a, b) = key.split_once('>')?;
        Some((
            self.names.iter().position(|n| n == a)?,
            self.names.iter().position(|n| n == b)?,
        ))
    }

    /// Applies a new link table; shapers keep their state (ordering, wire)
    /// unless the seed changed, which starts every generator over.
    fn update(&mut self, cfg: &DelaylineConfig) {
        self.names = cfg.networks.iter().map(|n| n.name.clone()).collect();
        if cfg.seed != self.seed {
            self.seed = cfg.seed;
            self.by_pair.clear();
        }
        let mut table: Vec<(String, LinkProfile)> =
            cfg.links.iter().map(|(k, p)| (k.clone(), *p)).collect();
        self.replay_at = None;
        if let Some(r) = &cfg.replay {
            if let Some(i) = r.index_at(since_us(r.start_unix_ms)) {
                self.replay_at = Some(i);
                let p = r.changes[i].1;
                for k in &r.links {
                    table.retain(|(x, _)| x != k);
                    table.push((k.clone(), p));
                }
            }
        }
        let mut seen = Vec::new();
        for (key, profile) in &table {
            let Some((i, j)) = self.pair(key) else {
                continue;
            };
            seen.push((i, j));
            let seed = link_seed(self.seed, &self.names[i], &self.names[j]);
            self.by_pair
                .entry((i, j))
                .and_modify(|s| s.set_profile(*profile))
                .or_insert_with(|| LinkShaper::new(*profile, seed));
        }
        self.by_pair.retain(|k, _| seen.contains(k));
    }

    /// Follows the replay: puts the change due now in force. Returns when
    /// the next one is due (unix ms), if any.
    fn follow(&mut self, cfg: &DelaylineConfig) -> Option<f64> {
        let r = cfg.replay.as_ref()?;
        let i = r.index_at(since_us(r.start_unix_ms));
        if i != self.replay_at {
            self.update(cfg);
        }
        let next = i.map_or(0, |i| i + 1);
        r.changes
            .get(next)
            .map(|(o, _)| r.start_unix_ms + *o as f64 / 1e3)
    }
}

/// Microseconds since a unix-ms instant (0 before it).
fn since_us(start_unix_ms: f64) -> u64 {
    let now = crate::probe::clock::now_unix_ms();
    ((now - start_unix_ms) * 1e3).max(0.0) as u64
}

/// Identity of the table file: it is replaced by rename, so the inode changes.
fn mtime(p: &Path) -> Option<(SystemTime, u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).ok()?;
    Some((m.modified().ok()?, m.ino(), m.len()))
}

fn load(path: &Path) -> Option<DelaylineConfig> {
    let text = std::fs::read_to_string(path).ok()?;
    match serde_json::from_str(&text) {
        Ok(c) => Some(c),
        Err(e) => {
            // A half-written file: keep the old table, read again next tick.
            tracing::warn!("ignoring {}: {e}", path.display());
            None
        }
    }
}

/// Whether the table lets the kernel hand over superpackets, and if not,
/// why. Loss is drawn per packet on the wire, so a link with loss (now or
/// in a replay) needs every packet cut to the MTU before the delay line sees
/// it; delay, jitter, rate and partitions treat a superpacket as a burst of
/// back-to-back segments, which is what it becomes on the wire.
fn offloads_for(cfg: &DelaylineConfig) -> Result<(), &'static str> {
    if cfg.offloads_off {
        return Err("turned off in the link table");
    }
    let replayed = cfg
        .replay
        .iter()
        .flat_map(|r| r.changes.iter().map(|c| &c.1));
    if cfg.links.values().chain(replayed).any(|p| p.loss_pct > 0.0) {
        return Err("a link has loss, drawn per packet");
    }
    Ok(())
}

pub fn run(config: &Path) -> Result<()> {
    tight_timers();
    let tun = Tun::open(DELAYLINE_DEV).context("create the delay line's TUN device")?;
    let st = Command::new("ip")
        .args([
            "link",
            "set",
            DELAYLINE_DEV,
            "up",
            "mtu",
            "1500",
            "txqueuelen",
            "10000",
        ])
        .status()
        .context("run ip")?;
    anyhow::ensure!(st.success(), "ip link set {DELAYLINE_DEV} up failed");
    eprintln!(
        "delay line on {DELAYLINE_DEV}, link table {}",
        config.display()
    );

    let mut cfg = load(config).unwrap_or_default();
    let mut cfg_mtime = mtime(config);
    let mut classifier = Classifier::new(&cfg);
    let mut shapers = Shapers::new();
    shapers.update(&cfg);
    let mut stats: HashMap<(usize, usize), LinkStats> = HashMap::new();
    let mut offload = OffloadStats::default();
    let set_offloads = |cfg: &DelaylineConfig, o: &mut OffloadStats| {
        let want = offloads_for(cfg);
        if want.is_ok() != o.offloads {
            match tun.set_offloads(want.is_ok()) {
                Ok(()) => o.offloads = want.is_ok(),
                Err(e) => tracing::warn!("offloads on {DELAYLINE_DEV}: {e}"),
            }
        }
        // Off because the table says so, or because the kernel refused.
        o.off_because = match (o.offloads, want) {
            (true, _) => None,
            (false, Err(why)) => Some(why),
            (false, Ok(())) => Some("the kernel refused TUNSETOFFLOAD"),
        };
    };
    set_offloads(&cfg, &mut offload);
    let mut queue: DelayQueue<Vec<u8>> = DelayQueue::default();
    // A superpacket is at most 64 KiB; room for more in case a kernel
    // raises the device's GSO limit.
    let mut buf = vec![0u8; 256 * 1024];
    let mut last_check = Instant::now();
    let mut last_stats = Instant::now();
    let mut send_errors = 0u64;
    let mut max_queued = 0usize;
    let mut next_change: Option<f64> = shapers.follow(&cfg);

    loop {
        let now = Instant::now();
        if next_change.is_some_and(|t| crate::probe::clock::now_unix_ms() >= t) {
            next_change = shapers.follow(&cfg);
        }
        if now - last_check >= Duration::from_millis(50) {
            last_check = now;
            let m = mtime(config);
            if m != cfg_mtime {
                if let Some(c) = load(config) {
                    cfg = c;
                    cfg_mtime = m;
                    classifier = Classifier::new(&cfg);
                    shapers.update(&cfg);
                    next_change = shapers.follow(&cfg);
                    set_offloads(&cfg, &mut offload);
                }
            }
        }
        if now - last_stats >= Duration::from_secs(1) {
            last_stats = now;
            write_stats(
                &shapers.names,
                &stats,
                (queue.len(), max_queued),
                send_errors,
                shapers.replay_at,
                &offload,
            );
        }
        while let Some(pkt) = queue.pop_due(now) {
            if tun.send(&pkt).is_err() {
                send_errors += 1;
            }
        }
        // A replay's next change is waited for as exactly as a packet.
        let change_in = next_change.map(|t| {
            Duration::from_secs_f64(((t - crate::probe::clock::now_unix_ms()) / 1e3).max(0.0))
        });
        let wait = queue
            .next_due()
            .map(|d| d.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_millis(50))
            .min(change_in.unwrap_or(Duration::from_millis(50)))
            .min(Duration::from_millis(50));
        if !wait.is_zero() && !tun.wait(wait)? {
            continue;
        }
        // Drain what arrived: each read is a virtio-net header and a packet
        // or superpacket, written back as it came.
        while let Some(n) = tun.recv(&mut buf)? {
            let frame = &buf[..n];
            let Some(hdr) = VnetHdr::parse(frame) else {
                continue;
            };
            let ip = &frame[vnet_hdr::LEN..];
            let (segments, wire_bytes) = vnet_hdr::wire_size(&hdr, ip);
            offload.reads += 1;
            offload.superpackets += u64::from(hdr.is_gso());
            let arrived = Instant::now();
            let pair = classifier.classify(ip);
            let verdict = match pair.and_then(|p| shapers.by_pair.get_mut(&p)) {
                Some(shaper) => shaper.admit(arrived, wire_bytes),
                None => Verdict::Release(arrived),
            };
            let s = stats
                .entry(pair.unwrap_or((usize::MAX, usize::MAX)))
                .or_default();
            match verdict {
                Verdict::Drop => s.dropped += u64::from(segments),
                Verdict::Release(at) => {
                    s.passed += u64::from(segments);
                    s.bytes += wire_bytes as u64;
                    if at <= arrived && queue.is_empty() {
                        if tun.send(frame).is_err() {
                            send_errors += 1;
                        }
                    } else {
                        queue.push(at, frame.to_vec());
                        max_queued = max_queued.max(queue.len());
                    }
                }
            }
        }
    }
}

fn write_stats(
    names: &[String],
    stats: &HashMap<(usize, usize), LinkStats>,
    (queued, max_queued): (usize, usize),
    send_errors: u64,
    replay_at: Option<usize>,
    offload: &OffloadStats,
) {
    let name = |i: usize| names.get(i).cloned().unwrap_or_else(|| "other".into());
    let links: std::collections::BTreeMap<String, &LinkStats> = stats
        .iter()
        .map(|((a, b), s)| (format!("{}>{}", name(*a), name(*b)), s))
        .collect();
    let v = serde_json::json!({
        "at_unix_ms": crate::probe::clock::now_unix_ms(),
        "queued": queued,
        "max_queued": max_queued,
        "send_errors": send_errors,
        "replay_change": replay_at,
        "offload": offload,
        "links": links,
    });
    let tmp = format!("{DELAYLINE_STATS}.tmp");
    if std::fs::write(&tmp, v.to_string()).is_ok() {
        let _ = std::fs::rename(&tmp, DELAYLINE_STATS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{DelaylineNetwork, Replay};

    fn two_nets() -> Vec<DelaylineNetwork> {
        ["seed-a", "seed-b"]
            .iter()
            .enumerate()
            .map(|(i, n)| DelaylineNetwork {
                name: n.to_string(),
                subnet: format!("10.213.{i}.0/24"),
            })
            .collect()
    }

    /// The fates (dropped or not) of `n` packets on seed-a>seed-b.
    fn fates(s: &mut Shapers, n: usize) -> Vec<bool> {
        let sh = s.by_pair.get_mut(&(0, 1)).expect("a shaper");
        let t = Instant::now();
        (0..n)
            .map(|_| sh.admit(t, 100) == crate::link::schedule::Verdict::Drop)
            .collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_packet_fates() {
        let lossy = LinkProfile {
            loss_pct: 30.0,
            ..Default::default()
        };
        let cfg = |seed: u64, epoch: u64| DelaylineConfig {
            networks: two_nets(),
            links: [("seed-a>seed-b".to_string(), lossy)].into(),
            seed: Some(LinkSeed { seed, epoch }),
            ..Default::default()
        };
        let mut s = Shapers::new();
        s.update(&cfg(7, 1));
        let first = fates(&mut s, 500);
        // The same seed set again starts the generator over.
        s.update(&cfg(7, 2));
        assert_eq!(fates(&mut s, 500), first);
        // The same table re-read keeps drawing on.
        s.update(&cfg(7, 2));
        assert_ne!(fates(&mut s, 500), first);
        s.update(&cfg(8, 3));
        assert_ne!(fates(&mut s, 500), first);
        let dropped = first.iter().filter(|d| **d).count();
        assert!((100..200).contains(&dropped), "{dropped} of 500 at 30 %");
        assert_ne!(link_seed(None, "a", "b"), link_seed(None, "b", "a"));
    }

    #[test]
    fn a_replay_puts_each_change_in_force_in_turn() {
        let p = |ms: u64| LinkProfile {
            delay: Duration::from_millis(ms),
            ..Default::default()
        };
        let now = crate::probe::clock::now_unix_ms();
        let cfg = DelaylineConfig {
            networks: two_nets(),
            links: Default::default(),
            seed: None,
            replay: Some(Replay {
                start_unix_ms: now - 150.0,
                links: vec!["seed-a>seed-b".into(), "seed-b>seed-a".into()],
                changes: vec![(0, p(10)), (100_000, p(40)), (10_000_000, p(5))],
            }),
            ..Default::default()
        };
        let mut s = Shapers::new();
        s.update(&cfg);
        let next = s.follow(&cfg).expect("a later change");
        assert_eq!(s.replay_at, Some(1));
        assert_eq!(s.by_pair[&(0, 1)].profile.delay, Duration::from_millis(40));
        assert_eq!(s.by_pair[&(1, 0)].profile.delay, Duration::from_millis(40));
        assert!((next - (now - 150.0 + 10_000.0)).abs() < 1.0, "{next}");
    }

    #[test]
    fn offloads_stay_on_unless_loss_is_drawn_per_packet() {
        let p = |loss_pct: f64| LinkProfile {
            delay: Duration::from_millis(10),
            loss_pct,
            ..Default::default()
        };
        let mut cfg = DelaylineConfig {
            networks: two_nets(),
            links: [("seed-a>seed-b".to_string(), p(0.0))].into(),
            ..Default::default()
        };
        assert_eq!(offloads_for(&cfg), Ok(()));
        cfg.replay = Some(Replay {
            links: vec!["seed-b>seed-a".into()],
            changes: vec![(0, p(0.0)), (1_000, p(2.0))],
            ..Default::default()
        });
        assert!(offloads_for(&cfg).unwrap_err().contains("loss"));
        cfg.replay = None;
        cfg.links.insert("seed-b>seed-a".into(), p(0.5));
        assert!(offloads_for(&cfg).is_err());
        cfg.links.clear();
        cfg.offloads_off = true;
        assert!(offloads_for(&cfg).unwrap_err().contains("turned off"));
    }

    #[test]
    fn packets_are_classified_by_subnet() {
        let cfg = DelaylineConfig {
            networks: vec![
                DelaylineNetwork {
                    name: "seed-a".into(),
                    subnet: "10.213.0.0/24".into(),
                },
                DelaylineNetwork {
                    name: "seed-b".into(),
                    subnet: "10.213.1.0/24".into(),
                },
            ],
            links: Default::default(),
            ..Default::default()
        };
        let c = Classifier::new(&cfg);
        let mut pkt = [0u8; 20];
        pkt[0] = 0x45;
        pkt[12..16].copy_from_slice(&[10, 213, 0, 10]);
        pkt[16..20].copy_from_slice(&[10, 213, 1, 3]);
        assert_eq!(c.classify(&pkt), Some((0, 1)));
        pkt[16..20].copy_from_slice(&[8, 8, 8, 8]);
        assert_eq!(c.classify(&pkt), None);
        pkt[0] = 0x60;
        assert_eq!(c.classify(&pkt), None);
        assert_eq!(c.classify(&pkt[..10]), None);
    }
}
