//! A lab container's routes and addresses, set inside the container's
//! network namespace by a short-lived helper container that shares it
//! (`Engine::run_in_netns`), so that no lab container but the wan router
//! holds NET_ADMIN, and nothing on the host enters a namespace: the work
//! goes through the Docker API alone, as it must where the engine runs in a
//! VM (Docker Desktop, Colima) or the caller is not root.
//!
//! The helper runs `ip -batch` on a file of `ip` commands, never a shell.

use std::net::Ipv4Addr;

use anyhow::Result;

use crate::addressing::Net24;
use crate::engine::{Engine, FileSpec};

/// Where the helper finds its `ip -batch` file.
const BATCH: &str = "/run/cpmlab-netplan.ip";

/// What a container's network namespace gets before its process starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetPlan {
    /// Routes to the other lab networks: (subnet, via).
    pub routes: Vec<(Net24, Ipv4Addr)>,
    /// Extra addresses on eth0 (a gateway's per-member addresses), as /24s.
    pub addresses: Vec<Ipv4Addr>,
}

impl NetPlan {
    /// The `ip` commands, in order: the default route goes (a lab container
    /// reaches only the lab), then routes and addresses. Each is idempotent
    /// (`flush` of nothing succeeds, `replace`), so applying a plan twice is
    /// harmless.
    pub fn commands(&self) -> Vec<Vec<String>> {
        let mut v = vec![argv(&["route", "flush", "exact", "0.0.0.0/0"])];
        for (net, via) in &self.routes {
            v.push(argv(&[
                "route",
                "replace",
                &net.cidr(),
                "via",
                &via.to_string(),
            ]));
        }
        for a in &self.addresses {
            v.push(argv(&[
                "addr",
                "replace",
                &format!("{a}/24"),
                "dev",
                "eth0",
            ]));
        }
        v
    }

    /// The commands as `ip -batch` reads them: one per line. `ip` stops at
    /// the first that fails and names its line.
    pub fn batch(&self) -> String {
        self.commands().iter().map(|c| c.join(" ") + "\n").collect()
    }
}

fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Applies `plan` in the network namespace of the running container
/// `target` of lab `lab`, through a helper of `image` (the lab's image,
/// which has `ip`).
pub async fn apply(
    engine: &Engine,
    lab: &str,
    image: &str,
    target: &str,
    plan: &NetPlan,
) -> Result<()> {
    let cmd = argv(&["ip", "-batch", BATCH]);
    let files = [FileSpec::new(BATCH, plan.batch().into_bytes(), 0o644)];
    let out = engine
        .run_in_netns(target, lab, image, &cmd, &files)
        .await?;
    anyhow::ensure!(
        out.ok(),
        "`ip -batch` in the network namespace of {target} exited {}: {}\nthe batch:\n{}",
        out.code,
        out.stderr.trim(),
        plan.batch()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_ip_arguments_not_a_script() {
        let plan = NetPlan {
            routes: vec![(Net24([10, 213, 1, 0].into()), [10, 213, 0, 2].into())],
            addresses: vec![[10, 213, 1, 30].into()],
        };
        assert_eq!(
            plan.commands(),
            vec![
                argv(&["route", "flush", "exact", "0.0.0.0/0"]),
                argv(&["route", "replace", "10.213.1.0/24", "via", "10.213.0.2"]),
                argv(&["addr", "replace", "10.213.1.30/24", "dev", "eth0"]),
            ]
        );
        assert_eq!(
            plan.batch(),
            "route flush exact 0.0.0.0/0\n\
             route replace 10.213.1.0/24 via 10.213.0.2\n\
             addr replace 10.213.1.30/24 dev eth0\n"
        );
    }
}
