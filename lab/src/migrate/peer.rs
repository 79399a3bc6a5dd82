//! The peer check from the other seed: `agent peer-check` run in one of its
//! workloads, reaching a member's peer URL the way the joining members will
//! (DNS, the gateway's SNI route, TLS), with the round trip measured.

use anyhow::{Context, Result};

use crate::agent::peer_check::PeerCheckReport;
use crate::provider::{SeedOps, AGENT_BIN};
use crate::state::{LabState, MemberState};

/// Runs `agent peer-check` in `from` (a workload of the other seed) against
/// `member`'s peer URL (its name and its port on the gateway).
pub async fn peer_check(
    provider: &dyn SeedOps,
    state: &LabState,
    from: &str,
    member: &MemberState,
    count: u32,
) -> Result<PeerCheckReport> {
    let dns = state.dns.server.ip.to_string();
    let count = count.to_string();
    let host = member.host.as_str();
    let port = member.peer_port.to_string();
    let out = provider
        .exec(
            from,
            &[
                AGENT_BIN,
                "agent",
                "peer-check",
                "--host",
                host,
                "--port",
                &port,
                "--dns",
                &dns,
                "--count",
                &count,
            ],
        )
        .await?;
    serde_json::from_str(out.stdout.trim()).with_context(|| {
        format!(
            "peer check in {from} printed no report: {}{}",
            out.stdout.trim(),
            out.stderr.trim()
        )
    })
}
