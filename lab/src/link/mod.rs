//! Shaping the links between the lab's networks, in the wan router.
//!
//! Partition works on every kernel (iptables in the router). Delay, jitter,
//! loss and rate need a backend: `netem` (tc netem, where the kernel has
//! sch_netem) or `delayline` (a userspace delay line in the router, for
//! kernels without netem; not built yet, see issue 3).

pub mod profile;
pub mod router;
pub mod schedule;

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::errors::EnvNotReady;
use crate::kernel::{qdisc_support, QdiscSupport};
use crate::provider::docker::engine::Engine;
use crate::state::LabState;
use profile::LinkProfile;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    Auto,
    Netem,
    Delayline,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Netem,
    Delayline,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Netem => "netem",
            Backend::Delayline => "delayline",
        }
    }

    /// What this host gets: netem where the kernel has it.
    pub fn detect() -> Backend {
        match qdisc_support("netem", "delay 1ms") {
            QdiscSupport::Works | QdiscSupport::Loaded => Backend::Netem,
            _ => Backend::Delayline,
        }
    }

    pub fn choose(choice: BackendChoice) -> Backend {
        match choice {
            BackendChoice::Auto => Backend::detect(),
            BackendChoice::Netem => Backend::Netem,
            BackendChoice::Delayline => Backend::Delayline,
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

/// Puts `links` in force in the lab's router with `backend`.
pub async fn apply(
    engine: &Engine,
    state: &LabState,
    links: &BTreeMap<String, LinkProfile>,
    backend: Backend,
) -> Result<()> {
    let router = &state.router.container;
    let shapes = links.values().any(|p| p.shapes());
    if shaping(links) != shaping(&state.links) {
        match backend {
            Backend::Netem => {
                let out = engine
                    .exec_ok(router, &["ip", "-o", "-4", "addr", "show"], false)
                    .await?;
                let ifaces = router::interfaces(state, &out);
                let script = router::netem_script(state, &ifaces, links);
                engine
                    .exec_ok(router, &["sh", "-c", &format!("set -e\n{script}")], false)
                    .await
                    .context("apply tc netem in the router")?;
            }
            Backend::Delayline if shapes => {
                return Err(EnvNotReady::new(
                    "this kernel has no sch_netem, and the userspace delay line backend is not built yet; \
                     only `cpmlab link partition` / `heal` work here",
                    "run on a kernel with sch_netem (`cpmlab doctor` tells), or force it with --backend netem",
                )
                .into());
            }
            Backend::Delayline => {}
        }
    }
    engine
        .exec_ok(
            router,
            &["sh", "-c", &router::partition_script(state, links)],
            false,
        )
        .await
        .context("apply partitions in the router")?;
    Ok(())
}
