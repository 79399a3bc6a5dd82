//! What the host kernel offers for link shaping. The definitive test is to
//! add the qdisc in a throwaway network namespace; without root we fall back
//! to what /sys/module says.

use std::path::Path;
use std::process::{Command, Stdio};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QdiscSupport {
    /// Adding the qdisc in a scratch namespace worked.
    Works,
    /// The kernel refused it ("unknown qdisc kind").
    Missing,
    /// Could not test (no root, no `unshare` or `tc`); loaded per /sys/module.
    Loaded,
    Unknown,
}

/// Tries `tc qdisc add dev lo root <kind> <args>` in a new network namespace.
pub fn qdisc_support(kind: &str, args: &str) -> QdiscSupport {
    let script = format!("tc qdisc add dev lo root {kind} {args}");
    let r = Command::new("unshare")
        .args(["-n", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match r {
        Ok(out) if out.status.success() => QdiscSupport::Works,
        Ok(out) if String::from_utf8_lossy(&out.stderr).contains("unknown") => {
            QdiscSupport::Missing
        }
        _ if Path::new(&format!("/sys/module/sch_{kind}")).exists() => QdiscSupport::Loaded,
        _ => QdiscSupport::Unknown,
    }
}

/// Whether a container may be set to TCP congestion control `name`: the
/// kernel must have it, and a network namespace other than the host's may
/// only pick an algorithm on the host's allowed list (the kernel refuses the
/// sysctl otherwise, and Docker fails the container's start).
pub fn check_congestion_control(name: &str) -> Result<(), crate::errors::EnvNotReady> {
    let read =
        |f: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{f}")).unwrap_or_default();
    congestion_control_verdict(
        name,
        &read("tcp_available_congestion_control"),
        &read("tcp_allowed_congestion_control"),
    )
}

/// The rule of [`check_congestion_control`] on the two lists' contents.
pub fn congestion_control_verdict(
    name: &str,
    available: &str,
    allowed: &str,
) -> Result<(), crate::errors::EnvNotReady> {
    use crate::errors::EnvNotReady;
    let has = |list: &str| list.split_whitespace().any(|a| a == name);
    if !has(available) && !Path::new(&format!("/sys/module/tcp_{name}")).exists() {
        return Err(EnvNotReady::new(
            format!(
                "the topology sets TCP congestion control `{name}` (network.tcp_congestion_control), and the kernel does not offer it (available: {})",
                available.trim()
            ),
            format!("load it (`modprobe tcp_{name}`), or set network.tcp_congestion_control to one of the available ones, or `host`"),
        ));
    }
    if !has(allowed) {
        let list = format!("{} {name}", allowed.trim());
        return Err(EnvNotReady::new(
            format!(
                "the topology sets TCP congestion control `{name}` (network.tcp_congestion_control), and containers may only choose one the host allows (allowed: {})",
                allowed.trim()
            ),
            format!("as root: sysctl -w net.ipv4.tcp_allowed_congestion_control='{}' (scripts/setup does this), or set network.tcp_congestion_control: host", list.trim()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn congestion_control_must_be_available_and_allowed() {
        assert!(congestion_control_verdict("cubic", "reno cubic bbr", "reno cubic").is_ok());
        let e = congestion_control_verdict("cubic", "reno bbr cubic\n", "reno bbr\n").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("allowed: reno bbr"), "{text}");
        assert!(
            e.fix
                .contains("tcp_allowed_congestion_control='reno bbr cubic'"),
            "{}",
            e.fix
        );
        let e = congestion_control_verdict("nosuchcc", "reno cubic", "reno cubic").unwrap_err();
        assert!(e.fix.contains("modprobe tcp_nosuchcc"), "{}", e.fix);
    }
}
