//! What every lab container shares, in both forms: its labels, the lab
//! image, the lab's sysctls, and the barrier its command waits behind
//! until the lab releases it (routes and resolver in place).

use std::collections::HashMap;

use super::engine::ContainerSpec;
use crate::state::LabState;

/// File whose existence releases a container's barrier (on `RUN_DIR`).
pub const READY_FILE: &str = "/run/cpmlab/released";

/// How often a container waiting behind its barrier looks for the release:
/// natively each 50 ms (a restarted member waits on it for its routes).
/// Under emulation every look starts an emulated `sleep`, some 20 ms of a
/// core measured here (100 looks: 2.0 s of CPU in 7.0 s); a dozen
/// containers waiting at 50 ms would ask for more than this 2-core
/// machine has while the DNS server, released first, starts.
pub fn barrier_poll(state: &LabState) -> &'static str {
    if state.emulation.is_some() {
        "0.5"
    } else {
        "0.05"
    }
}

/// `cmd` behind the barrier: the lab's DNS server as resolver, then wait for
/// the release, then exec. Values reach the shell as arguments (`$1`, `$@`),
/// never inside its script.
pub fn behind_barrier(state: &LabState, cmd: Vec<String>) -> Vec<String> {
    let poll = barrier_poll(state);
    let mut v = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        format!(
            "printf 'nameserver %s\\noptions timeout:1 attempts:2\\n' \"$1\" > /etc/resolv.conf || exit 1; shift; \
             while [ ! -e {READY_FILE} ]; do sleep {poll}; done; exec \"$@\""
        ),
        "barrier".into(),
        state.dns.server.ip.to_string(),
    ];
    v.extend(cmd);
    v
}

fn idle() -> Vec<String> {
    vec!["sleep".into(), "2147483647".into()]
}

pub fn docker_network(state: &LabState, n: &str) -> String {
    state
        .network(n)
        .map(|n| n.docker_name.clone())
        .expect("planned network")
}

/// What every lab container shares: labels, the image (which carries the
/// cpmlab binary for the in-container roles at `AGENT_BIN`) and the
/// barrier. No capabilities beyond Docker's defaults: a helper sets the
/// routes (`netns`).
pub fn base_spec(state: &LabState, name: &str, role: &str, seed: Option<&str>) -> ContainerSpec {
    ContainerSpec {
        name: name.to_string(),
        lab: state.name.clone(),
        role: role.to_string(),
        seed: seed.map(str::to_string),
        image: state.image.clone(),
        cmd: behind_barrier(state, idle()),
        networks: vec![],
        cap_add: vec![],
        sysctls: lab_sysctls(state),
        volumes: vec![],
        devices: vec![],
        files: vec![],
    }
}

/// The sysctls every lab container gets: the topology's TCP congestion
/// control (each container is its own network namespace).
pub fn lab_sysctls(state: &LabState) -> HashMap<String, String> {
    state
        .topology
        .network
        .congestion_control()
        .map(|cc| {
            HashMap::from([(
                "net.ipv4.tcp_congestion_control".to_string(),
                cc.to_string(),
            )])
        })
        .unwrap_or_default()
}
