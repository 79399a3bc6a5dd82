//! A lab container's routes and addresses, set from the host inside the
//! container's network namespace, so that no lab container but the wan
//! router needs NET_ADMIN.
//!
//! `cpmlab` enters the namespace (`setns` on `/proc/<pid>/ns/net`) on a
//! thread of its own that is thrown away afterwards, and runs `ip` there
//! with arguments, never through a shell. A child process inherits the
//! namespace of the thread that spawned it.

use std::fs::File;
use std::net::Ipv4Addr;
use std::process::Command;

use crate::addressing::Net24;

/// What a container's network namespace gets before its process starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetPlan {
    /// Routes to the other lab networks: (subnet, via).
    pub routes: Vec<(Net24, Ipv4Addr)>,
    /// Extra addresses on eth0 (a gateway's per-member addresses), as /24s.
    pub addresses: Vec<Ipv4Addr>,
}

impl NetPlan {
    /// The `ip` invocations, in order: the default route goes (a lab
    /// container reaches only the lab), then routes and addresses.
    /// Each is idempotent (`replace`), so applying a plan twice is harmless.
    pub fn commands(&self) -> Vec<Vec<String>> {
        let mut v = Vec::new();
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
}

fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("open the network namespace of pid {pid}: {source}")]
    Open { pid: u32, source: std::io::Error },
    #[error("enter the network namespace of pid {pid}: {source}")]
    Enter { pid: u32, source: nix::Error },
    #[error("run `ip {args}` in the network namespace of pid {pid}: {source}")]
    Spawn {
        pid: u32,
        args: String,
        source: std::io::Error,
    },
    #[error("`ip {args}` in the network namespace of pid {pid} failed: {stderr}")]
    Failed {
        pid: u32,
        args: String,
        stderr: String,
    },
    #[error("the thread that entered the network namespace of pid {pid} panicked")]
    Panicked { pid: u32 },
}

impl NetnsError {
    /// True when the host does not let cpmlab enter the namespace: not root,
    /// or dockerd on another machine or in another PID namespace.
    pub fn is_permission(&self) -> bool {
        match self {
            NetnsError::Open { source, .. } => {
                matches!(
                    source.kind(),
                    std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::NotFound
                )
            }
            NetnsError::Enter { source, .. } => *source == nix::Error::EPERM,
            _ => false,
        }
    }
}

/// Applies `plan` in the network namespace of host process `pid` (a
/// container's first process, from `docker inspect`). Blocks: call it from
/// `spawn_blocking`.
pub fn apply(pid: u32, plan: &NetPlan) -> Result<(), NetnsError> {
    let commands = plan.commands();
    let ns = File::open(format!("/proc/{pid}/ns/net"))
        .map_err(|source| NetnsError::Open { pid, source })?;
    // A fresh thread: setns changes the calling thread only, and this one
    // ends with the work, so no thread of ours stays in the container's
    // namespace.
    std::thread::spawn(move || {
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(|source| NetnsError::Enter { pid, source })?;
        // No default route: best effort, there may be none.
        let _ = Command::new("ip")
            .args(["route", "del", "default"])
            .output();
        for args in &commands {
            let out =
                Command::new("ip")
                    .args(args)
                    .output()
                    .map_err(|source| NetnsError::Spawn {
                        pid,
                        args: args.join(" "),
                        source,
                    })?;
            if !out.status.success() {
                return Err(NetnsError::Failed {
                    pid,
                    args: args.join(" "),
                    stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
                });
            }
        }
        Ok(())
    })
    .join()
    .map_err(|_| NetnsError::Panicked { pid })?
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
                argv(&["route", "replace", "10.213.1.0/24", "via", "10.213.0.2"]),
                argv(&["addr", "replace", "10.213.1.30/24", "dev", "eth0"]),
            ]
        );
    }

    #[test]
    fn entering_a_namespace_that_does_not_exist_is_an_error_not_a_panic() {
        let e = apply(u32::MAX, &NetPlan::default()).unwrap_err();
        assert!(matches!(e, NetnsError::Open { .. }), "{e}");
        assert!(e.is_permission());
    }
}
