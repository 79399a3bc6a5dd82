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
