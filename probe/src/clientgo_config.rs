//! What the probe agent's client-go lanes are given: the `cpmlab-clientgo`
//! binary, the informer switch, the leader-election candidates and
//! client-go's leader-election timings. Data only: the agent's
//! configuration holds it, the lanes (`clientgo`) run it.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::errors::BadInput;

/// client-go's leader-election timings. The defaults are component-base's
/// `RecommendedDefaultLeaderElectionConfiguration` (15 s, 10 s, 2 s), which
/// Gardener's components keep (gardener-resource-manager:
/// pkg/apis/config/resourcemanager/v1alpha1/defaults.go; kube-controller-
/// manager's --leader-elect-* defaults are the same).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LeaseTimings {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Default for LeaseTimings {
    fn default() -> Self {
        LeaseTimings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl LeaseTimings {
    /// client-go's own checks (leaderelection.NewLeaderElector): the lease
    /// outlasts the renew deadline, which outlasts the retry period times
    /// its jitter factor (1.2).
    pub fn check(&self) -> Result<(), BadInput> {
        let (l, d, r) = (self.lease_duration, self.renew_deadline, self.retry_period);
        if r.is_zero() {
            return Err(BadInput("--retry-period: must be more than 0".into()));
        }
        if l <= d {
            return Err(BadInput(format!(
                "--lease-duration {l:?} must be longer than --renew-deadline {d:?} (client-go refuses it)"
            )));
        }
        if d.as_secs_f64() <= 1.2 * r.as_secs_f64() {
            return Err(BadInput(format!(
                "--renew-deadline {d:?} must be longer than 1.2 × --retry-period {r:?} (client-go refuses it)"
            )));
        }
        Ok(())
    }
}

/// The client-go lanes an agent runs.
#[derive(Debug, Clone)]
pub struct ClientGo {
    /// `cpmlab-clientgo`.
    pub bin: PathBuf,
    pub informer: bool,
    /// Seeds with a candidate, and the gateway each reaches its seed's
    /// replicas through.
    pub candidates: Vec<(String, std::net::Ipv4Addr)>,
    /// Those started with the probes.
    pub start: Vec<String>,
    pub timings: LeaseTimings,
    /// The control file the agent reads.
    pub control: PathBuf,
    /// A kubeconfig for the public name (the agent writes one when absent).
    pub kubeconfig: Option<PathBuf>,
    /// The shoot node's apiserver-proxy: where the node lane runs, the
    /// informer goes through it, as in-shoot controllers reach the API.
    pub node: Option<std::net::SocketAddr>,
}
