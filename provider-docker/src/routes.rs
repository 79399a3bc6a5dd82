//! A lab container's routes and addresses, set from the host inside its
//! network namespace: to every other lab network through the router, and
//! on a seed's gateway the addresses of the members it fronts.

use anyhow::Result;

use super::netns::{self, NetPlan};
use crate::errors::EnvNotReady;
use crate::state::LabState;

/// The routes of a container on `own` networks: to every other lab network
/// via the router, when it is on one network (the router is on all), and
/// for a seed's gateway, its members' addresses.
pub fn net_plan(state: &LabState, own: &[&str], gateway_of: Option<&str>) -> NetPlan {
    let mut plan = NetPlan::default();
    if let [one] = own {
        if let Some(via) = state.network(one).map(|n| n.router_ip) {
            plan.routes = state
                .networks
                .iter()
                .filter(|n| n.name != *one)
                .map(|n| (n.subnet, via))
                .collect();
        }
    }
    if let Some(seed) = gateway_of {
        // With a peer port per member, members share the gateway's own
        // address: no address to add.
        let own = state.seed(seed).map(|s| s.gateway.ip);
        plan.addresses = state
            .gateway_members(seed)
            .iter()
            .map(|m| m.vip())
            .filter(|ip| Some(*ip) != own)
            .collect();
        plan.addresses.dedup();
    }
    plan
}

/// Applies `plan` in the network namespace of host process `pid`. Not
/// being allowed to is the environment's problem, with the fix.
pub async fn set_routes(pid: u32, plan: NetPlan) -> Result<()> {
    match tokio::task::spawn_blocking(move || netns::apply(pid, &plan)).await? {
        Ok(()) => Ok(()),
        Err(e) if e.is_permission() => Err(EnvNotReady::new(
            e.to_string(),
            "cpmlab sets lab containers' routes from the host, inside their network \
             namespaces: run it as root on the machine that runs dockerd",
        )
        .into()),
        Err(e) => Err(e.into()),
    }
}
