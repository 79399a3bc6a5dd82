//! The etcd v3 membership calls a migration makes, with the waiting etcd
//! needs around them: a learner is promoted only once it is in sync, and
//! leadership moves only through the current leader.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use etcd_client::{Client, MemberAddOptions};

/// Adds `peer_url` as a learner; returns its member ID.
pub async fn add_learner(c: &mut Client, peer_url: &str) -> Result<u64> {
    let r = c
        .member_add([peer_url], Some(MemberAddOptions::new().with_is_learner()))
        .await
        .with_context(|| format!("member add --learner {peer_url}"))?;
    Ok(r.member().context("member add returned no member")?.id())
}

/// One promotion attempt: Ok(false) while etcd says the learner is not in
/// sync with the leader yet.
pub async fn try_promote(c: &mut Client, id: u64) -> Result<bool> {
    match c.member_promote(id).await {
        Ok(_) => Ok(true),
        Err(e) => {
            let msg = e.to_string();
            if msg.contains("in sync") || msg.contains("not ready") {
                Ok(false)
            } else {
                Err(e).with_context(|| format!("promote {id:x}"))
            }
        }
    }
}

/// Promotes a learner, retrying while etcd says it is not in sync yet.
pub async fn promote_when_in_sync(c: &mut Client, id: u64, deadline: Duration) -> Result<()> {
    let t0 = Instant::now();
    while !try_promote(c, id).await? {
        if t0.elapsed() >= deadline {
            anyhow::bail!("learner {id:x} was not in sync within {deadline:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// The current leader's member ID, as the member `c` talks to reports it.
pub async fn leader(c: &mut Client) -> Result<u64> {
    Ok(c.status().await.context("etcd status")?.leader())
}

/// Removes a member once etcd agrees the rest is healthy: with its strict
/// reconfiguration check etcd refuses ("unhealthy cluster") until the
/// remaining members have been active long enough — the quorum gate.
/// What passes (a request that timed out while the cluster elected a
/// leader, a leader that changed under it) is tried again until
/// `deadline`; a member already gone after such a try was removed by it.
pub async fn remove_when_healthy(c: &mut Client, id: u64, deadline: Duration) -> Result<()> {
    let t0 = Instant::now();
    let mut tried = false;
    loop {
        match c.member_remove(id).await {
            Ok(_) => return Ok(()),
            Err(e) if tried && e.to_string().contains("member not found") => return Ok(()),
            Err(e) if t0.elapsed() < deadline && passes(&e.to_string()) => {
                tracing::debug!("member remove {id:x}: {e}; trying again");
                tried = true;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => return Err(e).with_context(|| format!("member remove {id:x}")),
        }
    }
}

/// An etcd error that says "not now" rather than "no": worth another try.
fn passes(e: &str) -> bool {
    [
        "unhealthy cluster",
        "Timeout expired",
        "timed out",
        "leader changed",
        "no leader",
        "Unavailable",
    ]
    .iter()
    .any(|w| e.contains(w))
}

/// Moves leadership to `to`; `leader_client` must talk to the current leader.
pub async fn move_leader(leader_client: &mut Client, to: u64) -> Result<()> {
    leader_client
        .move_leader(to)
        .await
        .with_context(|| format!("move leader to {to:x}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_timeout_or_an_election_is_tried_again_a_refusal_is_not() {
        for e in [
            "grpc request error: code: 'The operation was cancelled', message: \"Timeout expired\"",
            "etcdserver: unhealthy cluster",
            "etcdserver: leader changed",
            "etcdserver: request timed out",
        ] {
            assert!(super::passes(e), "{e}");
        }
        assert!(!super::passes("etcdserver: member not found"));
        assert!(!super::passes(
            "etcdserver: re-configuration failed due to not enough started members"
        ));
    }
}
