//! A lab container's routes and addresses, set inside its network
//! namespace (`netns`): to every other lab network through the router, and
//! on a seed's gateway the addresses of the members it fronts.

use anyhow::Result;

use super::netns::{self, NetPlan};
use crate::engine::Engine;
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

/// Applies `plan` in the network namespace of the running container
/// `target`, through a helper container (see `netns`).
pub async fn set_routes(
    engine: &Engine,
    state: &LabState,
    target: &str,
    plan: NetPlan,
) -> Result<()> {
    netns::apply(engine, &state.name, &state.image, target, &plan).await
}
