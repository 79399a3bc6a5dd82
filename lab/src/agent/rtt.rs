//! `cpmlab agent rtt`: measures round trips to `cpmlab agent echo` over UDP
//! (paced, pipelined: loss and RTT at a packet rate) or over one TCP
//! connection (ping-pong: a real client's round trip, and proof that the
//! connection survives link changes).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    Udp,
    Tcp,
}

#[derive(Debug, Clone)]
pub struct RttConfig {
    pub target: SocketAddr,
    pub proto: Proto,
    pub count: u32,
    pub interval: Duration,
    pub timeout: Duration,
    pub size: usize,
    /// Report every probe (sequence, send time, round trip or lost).
    pub samples: bool,
}

/// One UDP probe: when it was sent and its round trip (`None`: lost).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Sample {
    pub seq: u32,
    pub sent_unix_ms: f64,
    pub rtt_ms: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RttReport {
    pub proto: Proto,
    pub target: String,
    pub sent: u32,
    pub received: u32,
    pub loss_pct: f64,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    pub errors: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<Vec<Sample>>,
}

/// The q-quantile (0..=1) of sorted samples, nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

pub fn summarize(
    cfg: &RttConfig,
    sent: u32,
    mut rtts_ms: Vec<f64>,
    errors: Vec<String>,
) -> RttReport {
    rtts_ms.sort_by(|a, b| a.total_cmp(b));
    let received = rtts_ms.len() as u32;
    RttReport {
        proto: cfg.proto,
        target: cfg.target.to_string(),
        sent,
        received,
        loss_pct: if sent == 0 {
            0.0
        } else {
            100.0 * (sent - received) as f64 / sent as f64
        },
        min_ms: rtts_ms.first().copied().unwrap_or(f64::NAN),
        p50_ms: quantile(&rtts_ms, 0.5),
        p99_ms: quantile(&rtts_ms, 0.99),
        max_ms: rtts_ms.last().copied().unwrap_or(f64::NAN),
        mean_ms: if rtts_ms.is_empty() {
            f64::NAN
        } else {
            rtts_ms.iter().sum::<f64>() / rtts_ms.len() as f64
        },
        errors,
        samples: None,
    }
}

/// Sleeps until `at`, the last stretch spinning, for accurate pacing.
fn sleep_until(at: Instant) {
    loop {
        let now = Instant::now();
        if now >= at {
            return;
        }
        let left = at - now;
        if left > Duration::from_micros(200) {
            std::thread::sleep(left - Duration::from_micros(100));
        } else {
            std::hint::spin_loop();
        }
    }
}

pub fn run(cfg: &RttConfig) -> Result<RttReport> {
    super::tun::tight_timers();
    match cfg.proto {
        Proto::Udp => udp(cfg),
        Proto::Tcp => tcp(cfg),
    }
}

fn udp(cfg: &RttConfig) -> Result<RttReport> {
    let sock = UdpSocket::bind("0.0.0.0:0").context("bind udp")?;
    sock.connect(cfg.target).context("connect udp")?;
    let rx = sock.try_clone()?;
    rx.set_read_timeout(Some(Duration::from_millis(20)))?;
    let start = Instant::now();
    let start_unix_ms = crate::probe::clock::now_unix_ms();
    let n = cfg.count as usize;
    let size = cfg.size.max(16);
    let deadline_after_send = cfg.timeout;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done_rx = done.clone();
    let receiver = std::thread::spawn(move || {
        let mut got: Vec<Option<f64>> = vec![None; n];
        let mut buf = [0u8; 65536];
        loop {
            match rx.recv(&mut buf) {
                Ok(len) if len >= 16 => {
                    let now_ns = start.elapsed().as_nanos() as u64;
                    let seq = u64::from_be_bytes(buf[0..8].try_into().unwrap()) as usize;
                    let sent_ns = u64::from_be_bytes(buf[8..16].try_into().unwrap());
                    if seq < n && got[seq].is_none() {
                        got[seq] = Some((now_ns.saturating_sub(sent_ns)) as f64 / 1e6);
                    }
                }
                Ok(_) => {}
                Err(_) if done_rx.load(std::sync::atomic::Ordering::SeqCst) => break,
                Err(_) => {}
            }
        }
        got
    });
    let mut errors = Vec::new();
    let mut pkt = vec![0u8; size];
    for i in 0..n {
        sleep_until(start + cfg.interval * i as u32);
        pkt[0..8].copy_from_slice(&(i as u64).to_be_bytes());
        pkt[8..16].copy_from_slice(&(start.elapsed().as_nanos() as u64).to_be_bytes());
        if let Err(e) = sock.send(&pkt) {
            if errors.len() < 5 {
                errors.push(format!("send {i}: {e}"));
            }
        }
    }
    std::thread::sleep(deadline_after_send);
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let got = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("receiver panicked"))?;
    let samples = cfg.samples.then(|| {
        got.iter()
            .enumerate()
            .map(|(i, r)| Sample {
                seq: i as u32,
                sent_unix_ms: start_unix_ms + (cfg.interval * i as u32).as_secs_f64() * 1e3,
                rtt_ms: *r,
            })
            .collect()
    });
    // Replies for "connection refused" show as send errors; not here.
    let mut report = summarize(cfg, n as u32, got.into_iter().flatten().collect(), errors);
    report.samples = samples;
    Ok(report)
}

fn tcp(cfg: &RttConfig) -> Result<RttReport> {
    let mut conn = TcpStream::connect_timeout(&cfg.target, cfg.timeout)
        .with_context(|| format!("tcp connect {}", cfg.target))?;
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(cfg.timeout))?;
    let size = cfg.size.max(16);
    let mut out = vec![0u8; size];
    let mut back = vec![0u8; size];
    let mut rtts = Vec::new();
    let mut errors = Vec::new();
    let start = Instant::now();
    let mut sent = 0;
    for i in 0..cfg.count {
        sleep_until(start + cfg.interval * i);
        out[0..8].copy_from_slice(&(i as u64).to_be_bytes());
        let t = Instant::now();
        sent += 1;
        let r = conn
            .write_all(&out)
            .and_then(|_| conn.read_exact(&mut back));
        match r {
            Ok(()) if back[0..8] == out[0..8] => rtts.push(t.elapsed().as_secs_f64() * 1e3),
            Ok(()) => {
                errors.push(format!("round {i}: echo out of step"));
                break;
            }
            Err(e) => {
                errors.push(format!("round {i}: {e}"));
                break;
            }
        }
    }
    Ok(summarize(cfg, sent, rtts, errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&v, 1.0), 100.0);
        assert_eq!(quantile(&[7.0], 0.99), 7.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn echo_and_rtt_over_loopback() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        std::thread::spawn(move || super::super::echo::run(addr));
        std::thread::sleep(Duration::from_millis(100));
        for proto in [Proto::Udp, Proto::Tcp] {
            let cfg = RttConfig {
                target: addr,
                proto,
                count: 200,
                interval: Duration::from_micros(500),
                timeout: Duration::from_millis(200),
                size: 64,
                samples: proto == Proto::Udp,
            };
            let r = run(&cfg).unwrap();
            if proto == Proto::Udp {
                let s = r.samples.as_ref().unwrap();
                assert_eq!(s.len(), 200);
                assert!(s.iter().all(|x| x.rtt_ms.is_some()));
            }
            assert_eq!(r.sent, 200, "{r:?}");
            assert_eq!(r.received, 200, "{r:?}");
            assert!(r.errors.is_empty(), "{r:?}");
            assert!(r.p50_ms < 5.0, "{r:?}");
        }
    }
}
