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
use crate::link::schedule::{DelayQueue, LinkShaper, Verdict};
use crate::link::{DelaylineConfig, DELAYLINE_DEV, DELAYLINE_STATS};

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
    passed: u64,
    dropped: u64,
}

struct Shapers {
    names: Vec<String>,
    by_pair: HashMap<(usize, usize), LinkShaper>,
}

impl Shapers {
    fn new() -> Shapers {
        Shapers {
            names: Vec::new(),
            by_pair: HashMap::new(),
        }
    }

    /// Applies a new link table; shapers keep their state (ordering, wire).
    fn update(&mut self, cfg: &DelaylineConfig) {
        self.names = cfg.networks.iter().map(|n| n.name.clone()).collect();
        let mut seen = Vec::new();
        for (key, profile) in &cfg.links {
            let Some((a, b)) = key.split_once('>') else {
                continue;
            };
            let (Some(i), Some(j)) = (
                self.names.iter().position(|n| n == a),
                self.names.iter().position(|n| n == b),
            ) else {
                continue;
            };
            seen.push((i, j));
            let seed = 0x9E37_79B9_7F4A_7C15u64 ^ ((i as u64) << 8 | j as u64);
            self.by_pair
                .entry((i, j))
                .and_modify(|s| s.set_profile(*profile))
                .or_insert_with(|| LinkShaper::new(*profile, seed));
        }
        self.by_pair.retain(|k, _| seen.contains(k));
    }
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
    let mut queue: DelayQueue<Vec<u8>> = DelayQueue::default();
    let mut buf = vec![0u8; 65536];
    let mut last_check = Instant::now();
    let mut last_stats = Instant::now();
    let mut send_errors = 0u64;

    loop {
        let now = Instant::now();
        if now - last_check >= Duration::from_millis(50) {
            last_check = now;
            let m = mtime(config);
            if m != cfg_mtime {
                if let Some(c) = load(config) {
                    cfg = c;
                    cfg_mtime = m;
                    classifier = Classifier::new(&cfg);
                    shapers.update(&cfg);
                }
            }
        }
        if now - last_stats >= Duration::from_secs(1) {
            last_stats = now;
            write_stats(&shapers.names, &stats, queue.len(), send_errors);
        }
        while let Some(pkt) = queue.pop_due(now) {
            if tun.send(&pkt).is_err() {
                send_errors += 1;
            }
        }
        let wait = queue
            .next_due()
            .map(|d| d.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_millis(50))
            .min(Duration::from_millis(50));
        if !wait.is_zero() && !tun.wait(wait)? {
            continue;
        }
        // Drain what arrived.
        while let Some(n) = tun.recv(&mut buf)? {
            let pkt = &buf[..n];
            let arrived = Instant::now();
            let pair = classifier.classify(pkt);
            let verdict = match pair.and_then(|p| shapers.by_pair.get_mut(&p)) {
                Some(shaper) => shaper.admit(arrived, n),
                None => Verdict::Release(arrived),
            };
            let s = stats
                .entry(pair.unwrap_or((usize::MAX, usize::MAX)))
                .or_default();
            match verdict {
                Verdict::Drop => s.dropped += 1,
                Verdict::Release(at) => {
                    s.passed += 1;
                    if at <= arrived && queue.is_empty() {
                        if tun.send(pkt).is_err() {
                            send_errors += 1;
                        }
                    } else {
                        queue.push(at, pkt.to_vec());
                    }
                }
            }
        }
    }
}

fn write_stats(
    names: &[String],
    stats: &HashMap<(usize, usize), LinkStats>,
    queued: usize,
    send_errors: u64,
) {
    let name = |i: usize| names.get(i).cloned().unwrap_or_else(|| "other".into());
    let links: std::collections::BTreeMap<String, &LinkStats> = stats
        .iter()
        .map(|((a, b), s)| (format!("{}>{}", name(*a), name(*b)), s))
        .collect();
    let v = serde_json::json!({"queued": queued, "send_errors": send_errors, "links": links});
    let tmp = format!("{DELAYLINE_STATS}.tmp");
    if std::fs::write(&tmp, v.to_string()).is_ok() {
        let _ = std::fs::rename(&tmp, DELAYLINE_STATS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::DelaylineNetwork;

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
