//! The platform a lab's containers run as, where it is not the engine's
//! own: a linux/arm64 lab (what Apple silicon's engines run) on a
//! linux/amd64 engine, whose kernel hands the arm64 binaries to qemu-user
//! (binfmt_misc). What that changes is said, never hidden: the lab is
//! several times slower, so the scenario's time limits get a factor (the
//! platform's default, measured on the default scenario, or
//! `--slow-factor`), and what qemu-user cannot translate (netfilter's
//! netlink, routing rules, queueing disciplines, socket diagnostics) is
//! done in the container's network namespace by a helper of the engine's
//! own architecture. The rules that are not about time are as strict as
//! ever.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::errors::BadInput;

/// Asks for a lab of this platform (`linux/arm64`, `linux/amd64`) instead
/// of the engine's own; the `--platform` flag of `images build`, `up` and
/// `run` sets it.
pub const PLATFORM_ENV: &str = "CPMLAB_PLATFORM";

/// The factor on the scenario's time limits (and the lab's own waits) for
/// this run, over the platform's default.
pub const SLOW_FACTOR_ENV: &str = "CPMLAB_SLOW_FACTOR";

/// The architectures a lab image is built for.
pub const ARCHES: [&str; 2] = ["amd64", "arm64"];

/// The factor an emulated lab's time limits and waits get, and its load
/// is divided by, unless `--slow-factor` says otherwise. Measured on the
/// default scenario (`scripts/bench-platform`, two runs each, a quarter of
/// the load emulated; docs/figures.md): the wall time 2.17 times
/// linux/amd64's, one request's latency 27 to 133 times. No one factor
/// fits both; 4 is above the first (the lab's waits are not cut short)
/// and divides the load enough for a migration to complete on two cores.
pub const EMULATED_SLOW_FACTOR: f64 = 4.0;

/// The architecture `linux/<arch>` names, or why it is not one the lab
/// builds for.
pub fn parse(platform: &str) -> Result<String, BadInput> {
    let bad = || {
        BadInput(format!(
            "platform `{platform}`: not one of {} (os/architecture, as Docker names them)",
            ARCHES.map(|a| format!("linux/{a}")).join(", ")
        ))
    };
    let (os, arch) = platform.split_once('/').ok_or_else(bad)?;
    if os != "linux" || !ARCHES.contains(&arch) {
        return Err(bad());
    }
    Ok(arch.to_string())
}

/// `CPMLAB_PLATFORM`'s architecture; None where it is unset or empty.
pub fn wanted() -> Result<Option<String>, BadInput> {
    match std::env::var(PLATFORM_ENV) {
        Ok(v) if !v.is_empty() => parse(&v)
            .map(Some)
            .map_err(|e| BadInput(format!("{PLATFORM_ENV}: {e}"))),
        _ => Ok(None),
    }
}

/// A slow factor as given: a number from 1 to 100.
pub fn parse_factor(s: &str) -> Result<f64, String> {
    let f: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))?;
    if !(1.0..=100.0).contains(&f) {
        return Err(format!("{f} is outside 1 to 100"));
    }
    Ok(f)
}

/// `CPMLAB_SLOW_FACTOR`; None where it is unset or empty.
pub fn factor_from_env() -> Result<Option<f64>, BadInput> {
    match std::env::var(SLOW_FACTOR_ENV) {
        Ok(v) if !v.is_empty() => parse_factor(&v)
            .map(Some)
            .map_err(|e| BadInput(format!("{SLOW_FACTOR_ENV}: {e}"))),
        _ => Ok(None),
    }
}

/// What a lab whose image the engine runs by emulation records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Emulation {
    /// The lab image's platform (`linux/arm64`).
    pub platform: String,
    /// The engine's own (`linux/amd64`).
    pub engine: String,
    /// The lab image of the engine's own architecture: a helper of it
    /// runs, in a lab container's network namespace, the commands whose
    /// netlink families qemu-user does not translate (the router's
    /// iptables, `ip rule`, `tc`; `ss`).
    pub netlink_image: String,
    /// The factor on the lab's waits and the scenario's time limits.
    pub slow_factor: f64,
    /// Where the factor came from: `CPMLAB_SLOW_FACTOR` or the platform's
    /// default.
    pub factor_from: String,
}

impl Emulation {
    /// The factor in force where the engine runs `image_platform` by
    /// emulation: `CPMLAB_SLOW_FACTOR`, else the platform's default.
    pub fn new(
        image_platform: &str,
        engine: &str,
        netlink_image: &str,
    ) -> Result<Emulation, BadInput> {
        let (slow_factor, factor_from) = match factor_from_env()? {
            Some(f) => (f, SLOW_FACTOR_ENV.to_string()),
            None => (EMULATED_SLOW_FACTOR, "the platform's default".to_string()),
        };
        Ok(Emulation {
            platform: image_platform.into(),
            engine: engine.into(),
            netlink_image: netlink_image.into(),
            slow_factor,
            factor_from,
        })
    }

    /// One line: what runs how, and the factor.
    pub fn summary(&self) -> String {
        format!(
            "{} containers on a {} engine, by emulation (qemu-user); time limits x{} ({})",
            self.platform,
            self.engine,
            fmt_factor(self.slow_factor),
            self.factor_from
        )
    }
}

/// `4`, `2.5`.
pub fn fmt_factor(f: f64) -> String {
    let s = format!("{f:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The factor a lab's own waits get: its emulation's, else
/// `CPMLAB_SLOW_FACTOR` (a slow machine), else 1.
pub fn wait_factor(emulation: Option<&Emulation>) -> f64 {
    match emulation {
        Some(e) => e.slow_factor,
        None => factor_from_env().ok().flatten().unwrap_or(1.0),
    }
}

/// `d` stretched by `factor`.
pub fn scaled(d: Duration, factor: f64) -> Duration {
    d.mul_f64(factor.max(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platforms_and_factors_are_checked() {
        assert_eq!(parse("linux/arm64").unwrap(), "arm64");
        assert_eq!(parse("linux/amd64").unwrap(), "amd64");
        for bad in ["arm64", "linux/riscv64", "darwin/arm64", ""] {
            let e = parse(bad).unwrap_err().0;
            assert!(e.contains("linux/amd64, linux/arm64"), "{bad}: {e}");
        }
        assert_eq!(parse_factor("2.5"), Ok(2.5));
        assert!(parse_factor("0.5").is_err());
        assert!(parse_factor("x").is_err());
        assert_eq!(fmt_factor(4.0), "4");
        assert_eq!(fmt_factor(2.5), "2.5");
        assert_eq!(
            scaled(Duration::from_secs(30), 4.0),
            Duration::from_secs(120)
        );
        assert_eq!(
            scaled(Duration::from_secs(30), 0.5),
            Duration::from_secs(30),
            "never shorter"
        );
        let e = Emulation {
            platform: "linux/arm64".into(),
            engine: "linux/amd64".into(),
            netlink_image: "cpmlab/lab:x".into(),
            slow_factor: 4.0,
            factor_from: "the platform's default".into(),
        };
        assert_eq!(
            e.summary(),
            "linux/arm64 containers on a linux/amd64 engine, by emulation (qemu-user); time limits x4 (the platform's default)"
        );
        assert_eq!(wait_factor(Some(&e)), 4.0);
    }
}
