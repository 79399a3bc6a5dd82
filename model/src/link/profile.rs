//! A link profile between two lab networks: one-way delay, jitter with a
//! distribution, loss, rate, partition. Profiles are per direction; the CLI
//! sets both directions unless told otherwise.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::errors::BadInput;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    Default,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    #[default]
    Normal,
    Uniform,
    Pareto,
    Paretonormal,
}

impl Distribution {
    pub fn as_str(self) -> &'static str {
        match self {
            Distribution::Normal => "normal",
            Distribution::Uniform => "uniform",
            Distribution::Pareto => "pareto",
            Distribution::Paretonormal => "paretonormal",
        }
    }
}

/// Who drops a link's lost packets: the shaper that delays them (the
/// delay line, or netem where the kernel has it), or the kernel on the
/// router's forward path (an iptables `statistic` match, nftables' `numgen
/// random`), a second, independent way to lose packets.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    Default,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum LossBy {
    #[default]
    Shaper,
    Kernel,
}

impl LossBy {
    /// As `--loss-by` takes it (`shaper`, `kernel`).
    pub fn flag(self) -> &'static str {
        match self {
            LossBy::Shaper => "shaper",
            LossBy::Kernel => "kernel",
        }
    }
}

/// What one direction of a link does to packets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct LinkProfile {
    /// One-way delay added.
    #[serde(with = "micros")]
    pub delay: Duration,
    #[serde(with = "micros")]
    pub jitter: Duration,
    pub distribution: Distribution,
    /// Percent of packets dropped, 0 to 100.
    pub loss_pct: f64,
    /// Who drops them.
    #[serde(default, skip_serializing_if = "is_shaper")]
    pub loss_by: LossBy,
    /// Bits per second; `None` is unlimited.
    pub rate_bps: Option<u64>,
    /// Drop everything.
    pub partition: bool,
}

fn is_shaper(b: &LossBy) -> bool {
    *b == LossBy::Shaper
}

mod micros {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_micros() as u64)
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_micros(u64::deserialize(d)?))
    }
}

impl LinkProfile {
    /// The loss the shaper applies (none when the kernel drops).
    pub fn shaper_loss_pct(&self) -> f64 {
        match self.loss_by {
            LossBy::Shaper => self.loss_pct,
            LossBy::Kernel => 0.0,
        }
    }

    /// The loss the kernel applies on the router's forward path.
    pub fn kernel_loss_pct(&self) -> f64 {
        self.loss_pct - self.shaper_loss_pct()
    }

    /// Does this profile change anything besides partition?
    pub fn shapes(&self) -> bool {
        !self.delay.is_zero()
            || !self.jitter.is_zero()
            || self.loss_pct > 0.0
            || self.rate_bps.is_some()
    }
    pub fn is_clear(&self) -> bool {
        !self.shapes() && !self.partition
    }
}

impl fmt::Display for LinkProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.partition {
            return write!(f, "partitioned");
        }
        if !self.shapes() {
            return write!(f, "clear");
        }
        write!(f, "delay {}", fmt_duration(self.delay))?;
        if !self.jitter.is_zero() {
            write!(
                f,
                " jitter {} ({})",
                fmt_duration(self.jitter),
                self.distribution.as_str()
            )?;
        }
        if self.loss_pct > 0.0 {
            write!(f, " loss {}%", self.loss_pct)?;
            if self.loss_by == LossBy::Kernel {
                write!(f, " (by the kernel)")?;
            }
        }
        if let Some(r) = self.rate_bps {
            write!(f, " rate {}", fmt_rate(r))?;
        }
        Ok(())
    }
}

pub fn fmt_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{}us", us)
    }
}

pub fn fmt_rate(bps: u64) -> String {
    for (unit, div) in [
        ("gbit", 1_000_000_000),
        ("mbit", 1_000_000),
        ("kbit", 1_000),
    ] {
        if bps >= div && bps.is_multiple_of(div) {
            return format!("{}{unit}", bps / div);
        }
    }
    format!("{bps}bit")
}

/// `1.5ms` -> (1.5, "ms"): a non-negative number followed by its unit.
fn number_and_unit(s: &str) -> Result<(f64, &str), &'static str> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or("needs a unit")?;
    let (num, unit) = s.split_at(split);
    Ok((num.parse().map_err(|_| "not a number")?, unit))
}

/// `25ms`, `1.5ms`, `500us`, `0`, `2s`. Negative or unit-less non-zero
/// values are refused.
pub fn parse_duration(flag: &str, s: &str) -> Result<Duration, BadInput> {
    parse_duration_max(flag, s, Duration::from_secs(60))
}

/// Like `parse_duration`, up to `max`; also takes minutes (`2m`).
pub fn parse_duration_max(flag: &str, s: &str, max: Duration) -> Result<Duration, BadInput> {
    let s = s.trim();
    let bad = |why: &str| BadInput(format!("{flag} `{s}`: {why} (e.g. 25ms, 1.5ms, 500us, 0)"));
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.starts_with('-') {
        return Err(bad("must not be negative"));
    }
    let (v, unit) = number_and_unit(s).map_err(&bad)?;
    let micros = match unit {
        "us" | "µs" => v,
        "ms" => v * 1e3,
        "s" => v * 1e6,
        "m" => v * 60e6,
        _ => return Err(bad("unknown unit")),
    };
    if !micros.is_finite() || micros > max.as_micros() as f64 {
        return Err(bad(&format!("must be at most {max:?}")));
    }
    Ok(Duration::from_micros(micros.round() as u64))
}

/// `0.5%`, `20%`, `20` (percent).
pub fn parse_percent(flag: &str, s: &str) -> Result<f64, BadInput> {
    let t = s.trim().trim_end_matches('%');
    let v: f64 = t
        .parse()
        .map_err(|_| BadInput(format!("{flag} `{s}`: not a percentage (e.g. 0.5%)")))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(BadInput(format!(
            "{flag} `{s}`: must be between 0% and 100%"
        )));
    }
    Ok(v)
}

/// `100mbit`, `1gbit`, `500kbit`, `64000bit` (tc's units, bits per second).
pub fn parse_rate(flag: &str, s: &str) -> Result<u64, BadInput> {
    let t = s.trim().to_ascii_lowercase();
    let bad = |why: &str| {
        BadInput(format!(
            "{flag} `{s}`: {why} (e.g. 100mbit, 1gbit, 500kbit)"
        ))
    };
    let (v, unit) = number_and_unit(&t).map_err(&bad)?;
    let mult = match unit {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        _ => return Err(bad("unknown unit")),
    };
    let bps = (v * mult).round();
    if !(8_000.0..=100e9).contains(&bps) {
        return Err(bad("must be between 8kbit and 100gbit"));
    }
    Ok(bps as u64)
}

/// Which directions of a pair `A:B` a change applies to.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    #[default]
    Both,
    /// Only packets from A to B.
    AToB,
    /// Only packets from B to A.
    BToA,
}

/// `A:B`, both lab networks, different.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub a: String,
    pub b: String,
}

impl Pair {
    pub fn parse(s: &str, networks: &[String]) -> Result<Pair, BadInput> {
        let (a, b) = s.split_once(':').ok_or_else(|| {
            BadInput(format!(
                "link `{s}`: expected two networks as A:B, e.g. seed-a:seed-b"
            ))
        })?;
        for n in [a, b] {
            if !networks.iter().any(|x| x == n) {
                return Err(BadInput(format!(
                    "link `{s}`: unknown network `{n}` (this lab has {})",
                    networks.join(", ")
                )));
            }
        }
        if a == b {
            return Err(BadInput(format!(
                "link `{s}`: a link joins two different networks"
            )));
        }
        Ok(Pair {
            a: a.to_string(),
            b: b.to_string(),
        })
    }

    /// Directed keys (`src>dst`) a change in `dir` touches.
    pub fn directed(&self, dir: Direction) -> Vec<(String, String)> {
        let ab = (self.a.clone(), self.b.clone());
        let ba = (self.b.clone(), self.a.clone());
        match dir {
            Direction::Both => vec![ab, ba],
            Direction::AToB => vec![ab],
            Direction::BToA => vec![ba],
        }
    }
}

impl Direction {
    /// As `--direction` takes it (`both`, `a-to-b`, `b-to-a`).
    pub fn flag(self) -> &'static str {
        match self {
            Direction::Both => "both",
            Direction::AToB => "a-to-b",
            Direction::BToA => "b-to-a",
        }
    }
}

/// The key a directed link is stored under.
pub fn key(src: &str, dst: &str) -> String {
    format!("{src}>{dst}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Netem,
    Delayline,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    Auto,
    Netem,
    Delayline,
}

/// The seed of the delay line's loss and jitter draws. Each directed link
/// draws from its own generator seeded from this; setting a seed again
/// (a new `epoch`) starts every generator over, so the same packets on a
/// link meet the same fates.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct LinkSeed {
    pub seed: u64,
    /// When it was set (unix ms): a change restarts the generators.
    pub epoch: u64,
}

/// A link trace the delay line follows on its own clock: from
/// `start_unix_ms`, each change puts its profile in force on `links`
/// until the next one.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct Replay {
    pub start_unix_ms: f64,
    /// Directed keys (`a>b`) the trace drives.
    pub links: Vec<String>,
    /// (offset in microseconds, profile), offsets rising.
    pub changes: Vec<(u64, LinkProfile)>,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Netem => "netem",
            Backend::Delayline => "delayline",
        }
    }
}

impl Replay {
    /// The index of the change in force `since_start_us` after the start.
    pub fn index_at(&self, since_start_us: u64) -> Option<usize> {
        let i = self.changes.partition_point(|(o, _)| *o <= since_start_us);
        i.checked_sub(1)
    }
}

impl Replay {
    /// One line on where the replay stands at `now_unix_ms`.
    pub fn summary(&self, now_unix_ms: f64) -> String {
        let span = self.changes.last().map(|(o, _)| *o).unwrap_or(0) as f64 / 1e6;
        let links = self.links.join(", ");
        let head = format!("{} changes over {span:.1} s on {links}", self.changes.len());
        let since = now_unix_ms - self.start_unix_ms;
        if since < 0.0 {
            return format!("{head}; starts in {:.1} s", -since / 1e3);
        }
        let us = (since * 1e3) as u64;
        match self.index_at(us) {
            Some(i)
                if i + 1 == self.changes.len() && us >= self.changes[i].0 && since / 1e3 > span =>
            {
                format!(
                    "{head}; finished, its last profile ({}) stays until `link clear`",
                    self.changes[i].1
                )
            }
            Some(i) => format!(
                "{head}; {:.1} s in, change {} of {} in force ({})",
                since / 1e3,
                i + 1,
                self.changes.len(),
                self.changes[i].1
            ),
            None => format!("{head}; {:.1} s in, before its first change", since / 1e3),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("--delay", "25ms").unwrap(),
            Duration::from_millis(25)
        );
        assert_eq!(
            parse_duration("--delay", "1.5ms").unwrap(),
            Duration::from_micros(1500)
        );
        assert_eq!(
            parse_duration("--delay", "500us").unwrap(),
            Duration::from_micros(500)
        );
        assert_eq!(parse_duration("--delay", "0").unwrap(), Duration::ZERO);
        assert_eq!(
            parse_duration("--delay", "2s").unwrap(),
            Duration::from_secs(2)
        );
        for bad in ["-5ms", "25", "fast", "5min", "1e9s", ""] {
            let e = parse_duration("--delay", bad).unwrap_err();
            assert!(e.0.starts_with("--delay"), "{bad}: {e}");
        }
    }

    #[test]
    fn percents_and_rates() {
        assert_eq!(parse_percent("--loss", "0.5%").unwrap(), 0.5);
        assert_eq!(parse_percent("--loss", "20").unwrap(), 20.0);
        assert!(parse_percent("--loss", "101%").is_err());
        assert!(parse_percent("--loss", "-1%").is_err());
        assert!(parse_percent("--loss", "lots").is_err());
        assert_eq!(parse_rate("--rate", "100mbit").unwrap(), 100_000_000);
        assert_eq!(parse_rate("--rate", "1Gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate("--rate", "500kbit").unwrap(), 500_000);
        assert!(parse_rate("--rate", "100").is_err());
        assert!(parse_rate("--rate", "100mb").is_err());
        assert!(parse_rate("--rate", "1bit").is_err());
        assert_eq!(fmt_rate(100_000_000), "100mbit");
        assert_eq!(fmt_duration(Duration::from_micros(1500)), "1500us");
    }

    #[test]
    fn pairs_and_directions() {
        let nets: Vec<String> = ["seed-a", "seed-b", "clients"].map(String::from).to_vec();
        let p = Pair::parse("seed-a:seed-b", &nets).unwrap();
        assert_eq!(p.directed(Direction::Both).len(), 2);
        assert_eq!(
            p.directed(Direction::BToA),
            vec![("seed-b".to_string(), "seed-a".to_string())]
        );
        assert!(Pair::parse("seed-a:seed-c", &nets)
            .unwrap_err()
            .0
            .contains("unknown network `seed-c`"));
        assert!(Pair::parse("seed-a", &nets).is_err());
        assert!(Pair::parse("seed-a:seed-a", &nets).is_err());
    }

    #[test]
    fn display_and_serde() {
        let p = LinkProfile {
            delay: Duration::from_millis(25),
            jitter: Duration::from_millis(2),
            loss_pct: 0.5,
            rate_bps: Some(100_000_000),
            ..Default::default()
        };
        assert_eq!(
            p.to_string(),
            "delay 25ms jitter 2ms (normal) loss 0.5% rate 100mbit"
        );
        let back: LinkProfile = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
        assert_eq!(LinkProfile::default().to_string(), "clear");
        assert!(LinkProfile::default().is_clear());
    }
}
