//! Shaping the links between the lab's networks, in the wan router.
//!
//! Partition works on every kernel (iptables in the router). Delay, jitter,
//! loss and rate need a backend: `netem` (tc netem, where the kernel has
//! sch_netem) or `delayline` (a userspace delay line in the router, for
//! kernels without netem: `cpmlab agent router`, fed by policy routing).

pub use cpmlab_model::link::profile;
pub mod router;
pub mod schedule;

pub use profile::{Backend, BackendChoice, LinkSeed, Replay};
use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::kernel::{qdisc_support, QdiscSupport};
use crate::provider::{FileSpec, Provider};
use crate::state::LabState;
use profile::LinkProfile;

/// What this host gets: netem where the kernel has it.
pub fn detect_backend() -> Backend {
    match qdisc_support("netem", "delay 1ms") {
        QdiscSupport::Works | QdiscSupport::Loaded => Backend::Netem,
        _ => Backend::Delayline,
    }
}

/// The backend `choice` names on this host.
pub fn choose_backend(choice: BackendChoice) -> Backend {
    match choice {
        BackendChoice::Auto => detect_backend(),
        BackendChoice::Netem => Backend::Netem,
        BackendChoice::Delayline => Backend::Delayline,
    }
}

/// The delay line's link table in the router, re-read when it changes.
pub const DELAYLINE_CONFIG: &str = "/etc/cpmlab/links.json";
/// Counters the delay line writes every second.
pub const DELAYLINE_STATS: &str = "/run/cpmlab/delayline.json";
/// `off` keeps the delay line's TUN offloads off (see `DelaylineConfig`).
pub const OFFLOADS_ENV: &str = "CPMLAB_DELAYLINE_OFFLOADS";
/// The TUN device forwarded packets are diverted into.
pub const DELAYLINE_DEV: &str = "dl0";

#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct DelaylineNetwork {
    pub name: String,
    pub subnet: String,
}

/// The most changes a replay hands to the delay line.
pub const MAX_REPLAY_CHANGES: usize = 200_000;

/// What the delay line needs: the networks and the link table.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct DelaylineConfig {
    pub networks: Vec<DelaylineNetwork>,
    pub links: BTreeMap<String, LinkProfile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<LinkSeed>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<Replay>,
    /// Keeps the kernel from handing the delay line superpackets (TUN
    /// offloads), for comparison: `CPMLAB_DELAYLINE_OFFLOADS=off` when the
    /// table is written.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub offloads_off: bool,
}

impl DelaylineConfig {
    pub fn new(state: &LabState, links: &BTreeMap<String, LinkProfile>) -> Self {
        DelaylineConfig {
            networks: state
                .networks
                .iter()
                .map(|n| DelaylineNetwork {
                    name: n.name.clone(),
                    subnet: n.subnet.cidr(),
                })
                .collect(),
            links: links.clone(),
            seed: state.link_seed,
            replay: state.link_replay.clone(),
            offloads_off: std::env::var(OFFLOADS_ENV).is_ok_and(|v| v == "off"),
        }
    }
}

/// One directed link as `link show` reports it.
#[derive(Debug, Serialize)]
pub struct LinkView {
    pub from: String,
    pub to: String,
    pub profile: LinkProfile,
    pub summary: String,
}

/// Every directed pair of the lab's networks with the profile in force.
pub fn view(state: &LabState) -> Vec<LinkView> {
    let names: Vec<&str> = state.networks.iter().map(|n| n.name.as_str()).collect();
    let mut v = Vec::new();
    for a in &names {
        for b in &names {
            if a == b {
                continue;
            }
            let p = state
                .links
                .get(&profile::key(a, b))
                .copied()
                .unwrap_or_default();
            v.push(LinkView {
                from: a.to_string(),
                to: b.to_string(),
                summary: p.to_string(),
                profile: p,
            });
        }
    }
    v
}

/// The shaping part of a link table (partition masked out, clear links dropped).
fn shaping(links: &BTreeMap<String, LinkProfile>) -> BTreeMap<&String, LinkProfile> {
    links
        .iter()
        .filter(|(_, p)| p.shapes())
        .map(|(k, p)| {
            (
                k,
                LinkProfile {
                    partition: false,
                    ..*p
                },
            )
        })
        .collect()
}

/// Puts `links` in force in the lab's router with `backend`. `state` holds
/// the links in force so far, and the seed and replay to put in force;
/// `renew` rewrites the delay line's table even when the links did not
/// change (a new seed or replay).
pub async fn apply(
    provider: &dyn Provider,
    state: &LabState,
    links: &BTreeMap<String, LinkProfile>,
    backend: Backend,
    renew: bool,
) -> Result<()> {
    let router = &state.router.container;
    if backend == Backend::Netem {
        if let Some((k, _)) = links.iter().find(|(_, p)| p.kernel_loss_pct() > 0.0) {
            return Err(crate::errors::BadInput(format!(
                "{k}: loss by the kernel needs the delay line backend (it drops the segments the delay line hands back; netem sees superpackets)"
            ))
            .into());
        }
    }
    let backend_changed = state.link_backend.is_some_and(|b| b != backend);
    if shaping(links) != shaping(&state.links) || backend_changed || renew {
        let out = provider
            .exec_ok(router, &["ip", "-o", "-4", "addr", "show"])
            .await?;
        let ifaces = router::interfaces(state, &out);
        let shapes = links.values().any(|p| p.shapes()) || state.link_replay.is_some();
        let (netem_links, divert) = match backend {
            Backend::Netem => (links.clone(), false),
            Backend::Delayline => (BTreeMap::new(), shapes),
        };
        if backend == Backend::Delayline {
            let cfg = serde_json::to_vec_pretty(&DelaylineConfig::new(state, links))?;
            let tmp = format!("{DELAYLINE_CONFIG}.tmp");
            provider
                .upload(router, &[FileSpec::new(tmp.clone(), cfg, 0o644)])
                .await?;
            provider
                .exec_ok(router, &["mv", &tmp, DELAYLINE_CONFIG])
                .await
                .context("hand the link table to the delay line")?;
        }
        let script = format!(
            "set -e\n{}{}",
            router::netem_script(state, &ifaces, &netem_links),
            router::divert_script(state, &ifaces, divert)
        );
        provider
            .exec_netlink_ok(state, router, &["sh", "-c", &script])
            .await
            .with_context(|| format!("apply link shaping ({}) in the router", backend.as_str()))?;
    }
    provider
        .exec_netlink_ok(
            state,
            router,
            &["sh", "-c", &router::partition_script(state, links)],
        )
        .await
        .context("apply partitions in the router")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_says_where_it_stands() {
        let p = |ms: u64| LinkProfile {
            delay: std::time::Duration::from_millis(ms),
            ..Default::default()
        };
        let r = Replay {
            start_unix_ms: 10_000.0,
            links: vec!["seed-a>seed-b".into()],
            changes: vec![(0, p(10)), (1_000_000, p(50))],
        };
        assert!(
            r.summary(9_000.0).ends_with("starts in 1.0 s"),
            "{}",
            r.summary(9_000.0)
        );
        let mid = r.summary(10_500.0);
        assert!(
            mid.contains("2 changes over 1.0 s on seed-a>seed-b"),
            "{mid}"
        );
        assert!(mid.contains("0.5 s in, change 1 of 2"), "{mid}");
        assert!(
            r.summary(20_000.0).contains("finished"),
            "{}",
            r.summary(20_000.0)
        );
    }
}
