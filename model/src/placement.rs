//! Where a migration's planned members and API replicas run, named as the
//! lab's provider names them, and a migration's plan from the lab state: a
//! pure function of the lab's plan (`plan`) and the kind form's placement
//! (`kind::lab_state`).

use crate::plan;
use crate::state::{ApiServerState, LabState, MemberState, MigrationState, ProviderKind};

/// Member `index` of the seed a migration plans (`plan::member` names its
/// workload as a container), named as the lab's provider has it.
pub fn planned_member(state: &LabState, m: MemberState, index: usize) -> MemberState {
    match state.provider {
        ProviderKind::Docker => m,
        ProviderKind::Kind => crate::kind::lab_state::kind_member(state, m, index),
    }
}

/// API replica `index` a migration plans in a seed, named as the lab's
/// provider has it.
pub fn planned_apiserver(state: &LabState, a: ApiServerState, index: usize) -> ApiServerState {
    match state.provider {
        ProviderKind::Docker => a,
        ProviderKind::Kind => crate::kind::lab_state::kind_apiserver(state, a, index),
    }
}

/// The plan of a migration from `from` to `to` started at `now_rfc3339`
/// (`now_unix_ms`): destination members and API replicas mirror the
/// source's, named as the lab's provider has them. None when the lab has
/// no network for `to`.
pub fn migration(
    state: &LabState,
    from: &str,
    to: &str,
    now_rfc3339: &str,
    now_unix_ms: f64,
) -> Option<MigrationState> {
    let net = state.network(to)?.subnet;
    let n = state.members_of(from).count();
    let replicas = state.apiservers_of(from).count().max(1);
    Some(MigrationState {
        plan: crate::migrate::membership::Plan::FiveMember,
        from: from.to_string(),
        to: to.to_string(),
        driver: crate::state::Driver::Reference,
        force_shrink: false,
        leader_handover: Default::default(),
        order: Default::default(),
        gateway_handover: Default::default(),
        source_gateway_released_unix_ms: None,
        source_gateway_drained_unix_ms: None,
        source_gateway_drain_acked_unix_ms: None,
        source_gateway_drain_time_ms: None,
        source_gateway_forwarded_unix_ms: None,
        cleanup_before_api_ms: 0,
        conditions: crate::migrate::conditions::Conditions::new(now_rfc3339),
        started_unix_ms: now_unix_ms,
        finished_unix_ms: None,
        rtt_ms: None,
        rtt_gate: None,
        destination_members: (0..n)
            .map(|i| {
                let m = plan::member(
                    &state.name,
                    to,
                    net,
                    i,
                    &state.dns.zone,
                    state.topology.network.peer_exposure,
                );
                planned_member(state, m, i)
            })
            .collect(),
        destination_apiservers: (0..replicas)
            .map(|i| planned_apiserver(state, plan::apiserver(&state.name, to, net, i), i))
            .collect(),
        departed_members: vec![],
        dns_switched_unix_ms: None,
        command: None,
    })
}
