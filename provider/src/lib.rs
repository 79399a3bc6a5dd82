//! The provider interface: what materialises a lab's topology and does to
//! it what the lab's commands ask. Two crates implement it:
//! `cpmlab-provider-docker` builds the fast Docker-only form (one Docker
//! network per seed); `cpmlab-provider-kind` two kind clusters with Istio,
//! with the docker form's router, DNS server and probe agent beside them.
//! The factory that picks one for a lab sits above both (`cpmlab-runner`).
//!
//! The interface is what the migration, the scenario runner and the probes
//! need from the machinery under the lab, and no more (kind's
//! `providers/provider.go` is the model). A *workload* is what the lab's
//! state names as a member's, API replica's or gateway's `container`: a
//! container in the docker form, a pod in kind's.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

use cpmlab_core::errors::Cancel;
use cpmlab_core::pki::Ca;
use cpmlab_core::progress::Progress;
use cpmlab_model::kind::KindSettings;
use cpmlab_model::state::{ApiServerState, LabState, MemberState};
use cpmlab_model::topology::Topology;
// The lower crates' modules under the paths the interface names.
use cpmlab_core::errors;
use cpmlab_model::plan;

/// What `up` is asked to make.
#[derive(Debug, Clone)]
pub struct UpRequest {
    pub lab: String,
    pub topology: Topology,
    /// Where labs keep their state (`CPMLAB_STATE_DIR`).
    pub state_root: PathBuf,
    /// Set on Ctrl-C: the docker form finishes the step in flight (no
    /// request is left half sent) and returns `Interrupted`; the kind form
    /// returns at once.
    pub cancel: Cancel,
    /// The kind form's own settings; the docker form reads none of them.
    pub kind: KindSettings,
    /// `--retain`: a failed `up` leaves what it made, for debugging (the
    /// kind form removes it itself otherwise; the docker form's caller does).
    pub retain: bool,
}

/// What `up` did.
#[derive(Debug, Clone)]
pub enum Up {
    /// The lab was made.
    Created(Box<LabState>),
    /// The lab was up already, as asked: nothing was done.
    AlreadyUp(Box<LabState>),
}

/// Objects of one lab, as the engine lists them.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct LabObjects {
    pub containers: Vec<String>,
    pub networks: Vec<String>,
    pub volumes: Vec<String>,
}

impl LabObjects {
    pub fn is_empty(&self) -> bool {
        self.containers.is_empty() && self.networks.is_empty() && self.volumes.is_empty()
    }
    pub fn count(&self) -> usize {
        self.containers.len() + self.networks.len() + self.volumes.len()
    }
}

/// What `down` removed.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct DownReport {
    pub lab: String,
    pub removed: LabObjects,
}

/// Where every workload finds the cpmlab binary the lab image carries (its
/// in-lab roles: router, probe agent, stand-in API server, peer check).
pub const AGENT_BIN: &str = "/usr/local/bin/cpmlab";

/// The cpmlab binary the lab image carries at `AGENT_BIN` (baked in by the
/// docker provider's `images::with_agent`): this process's own, unless `CPMLAB_AGENT_EXE` names another (a program
/// that uses the library and is not cpmlab itself, such as an integration
/// test, points it at cpmlab).
pub fn agent_exe() -> std::io::Result<std::path::PathBuf> {
    match std::env::var_os("CPMLAB_AGENT_EXE") {
        Some(p) => Ok(p.into()),
        None => std::env::current_exe(),
    }
}

/// What a workload is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkloadState {
    Running,
    Paused,
    /// Made but never started (a start that was cut short).
    Created,
    /// It ran and stopped: it can be started again, with its data.
    Stopped,
    Missing,
}

impl std::fmt::Display for WorkloadState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WorkloadState::Running => "running",
            WorkloadState::Paused => "paused",
            WorkloadState::Created => "created",
            WorkloadState::Stopped => "stopped",
            WorkloadState::Missing => "missing",
        })
    }
}

/// A signal for a workload's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Graceful shutdown (an API server drains).
    Term,
    Kill,
}

/// What a command run inside a workload printed, and how it ended.
#[derive(Debug, Clone)]
pub struct Output {
    pub code: i64,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn ok(&self) -> bool {
        self.code == 0
    }

    /// Its stdout when `argv` exited 0 in `workload`, else an error carrying
    /// what it printed.
    pub fn stdout_if_ok(self, workload: &str, argv: &[&str]) -> Result<String> {
        anyhow::ensure!(
            self.ok(),
            "`{}` in {workload} exited {}: {}{}",
            argv.join(" "),
            self.code,
            self.stderr.trim(),
            self.stdout.trim()
        );
        Ok(self.stdout)
    }
}

/// A file to place in a workload.
#[derive(Debug, Clone)]
pub struct FileSpec {
    pub path: String,
    pub contents: Vec<u8>,
    pub mode: u32,
}

impl FileSpec {
    pub fn new(path: impl Into<String>, contents: impl Into<Vec<u8>>, mode: u32) -> Self {
        FileSpec {
            path: path.into(),
            contents: contents.into(),
            mode,
        }
    }
}

/// A workload as the provider lists it.
#[derive(Debug, Clone)]
pub struct Workload {
    pub name: String,
    /// The lab it belongs to.
    pub lab: String,
    /// `etcd`, `apiserver`, `gateway`, `router`, `dns`, `toolbox`, `probe`.
    pub role: String,
    pub seed: Option<String>,
    pub state: WorkloadState,
    /// CPU time used so far, in nanoseconds, where the provider can read it.
    pub cpu_ns: Option<u64>,
}

/// The probe agent's workload: on the clients network, its records written
/// to `out` on the host (the run directory).
#[derive(Debug, Clone)]
pub struct ClientSpec {
    /// The agent's arguments after the binary.
    pub args: Vec<String>,
    pub files: Vec<FileSpec>,
    pub out: std::path::PathBuf,
    /// Go parts the agent runs from the lab image (`cpmlab-clientgo`):
    /// a lab whose image lacks one is refused with the fix.
    pub image_parts: Vec<String>,
    /// A shoot node to start first (the `node` lane's apiserver-proxy).
    pub node: Option<NodeSpec>,
}

/// A shoot node on the clients network (`node_client`'s name, at
/// `node_address`): its files and its command, run in the lab image
/// behind the barrier, as any lab workload.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub cmd: Vec<String>,
    pub files: Vec<FileSpec>,
    /// A plain-HTTP path on the node that answers 200 once it serves.
    pub ready: (u16, String),
}

/// The shoot node's workload name in a lab.
pub fn node_client(state: &LabState) -> String {
    crate::plan::container_name(&state.name, "node")
}

/// Host number of the shoot node on the clients network (the probe
/// agent is 5).
pub const NODE_HOST: u8 = 6;

/// The shoot node's address on the clients network.
pub fn node_address(state: &LabState) -> Option<std::net::Ipv4Addr> {
    state
        .network(cpmlab_model::topology::CLIENTS)
        .map(|n| n.subnet.host(NODE_HOST))
}

/// Where the probe agent writes, inside its workload (`out` on the host).
pub const CLIENT_OUT: &str = "/out";

/// What a seed's gardenlet does to its seed's workloads: start, stop,
/// signal and remove them, their members and API servers, the gateway
/// and DNS, exec, files and logs. The migration's steps see only this
/// (`cpmlab_lab::migrate`); making and removing the lab, listing labs
/// and workloads and starting its clients are [`Provider`]'s.
#[async_trait::async_trait]
pub trait SeedOps: Send + Sync {
    /// `docker` or `kind`.
    fn name(&self) -> &'static str;

    /// The workload in `seed` that runs the agent's checks from that seed
    /// (the RTT gate, the source's peer URLs as a joining member reaches
    /// them): by default the seed's gateway, which carries the agent.
    fn vantage(&self, state: &LabState, seed: &str) -> Option<String> {
        state.seed(seed).map(|s| s.gateway.container.clone())
    }

    /// What `workload` is doing now.
    async fn workload_state(&self, workload: &str) -> Result<WorkloadState>;

    /// Sends `signal` to a running workload's process.
    async fn signal(&self, workload: &str, signal: Signal) -> Result<()>;

    /// Freezes (`true`) or thaws every process of a workload.
    async fn freeze(&self, workload: &str, frozen: bool) -> Result<()>;

    /// Stops a workload: SIGTERM, SIGKILL after `grace`.
    async fn stop(&self, workload: &str, grace: Duration) -> Result<()>;

    /// Starts a stopped workload again as its pod would come back: with its
    /// routes and resolver, released once they are in place.
    async fn start(&self, state: &LabState, workload: &str) -> Result<()>;

    /// Releases a workload that was started but waits for the lab (a run
    /// stopped between the two). Harmless when it was released before.
    async fn release(&self, state: &LabState, workload: &str) -> Result<()>;

    /// Waits until whatever runs `seed`'s etcd members for the lab has
    /// finished changing them (the kind form with etcd-druid: druid's
    /// StatefulSet rolled out after a scale-up). Nothing to wait for
    /// where the lab starts its members itself.
    async fn settle_members(&self, _state: &LabState, _seed: &str) -> Result<()> {
        Ok(())
    }

    /// A full snapshot of the shoot's etcd into its backup bucket, taken by
    /// the backup sidecar of `leader` (etcd's leader), as Gardener has
    /// etcd-backup-restore take one (`GET /snapshot/full`). What was taken,
    /// in a line; None where the members have no backup sidecar (the lab
    /// runs them itself, and the migration's snapshot is its own).
    async fn full_snapshot(
        &self,
        _state: &LabState,
        _leader: &MemberState,
    ) -> Result<Option<String>> {
        Ok(None)
    }

    /// GEP-0039's release of the source's members where etcd-druid runs
    /// the destination's etcd: `bootstrapWithExistingCluster` cleared on
    /// `seed`'s `Etcd`, and druid's reconcile of the change waited out.
    /// What was done, in a line; None where nothing but the lab runs the
    /// members (or the field was cleared before: a resumed run).
    async fn clear_bootstrap(&self, _state: &LabState, _seed: &str) -> Result<Option<String>> {
        Ok(None)
    }

    /// Creates and starts an etcd member joining the cluster whose members
    /// are `cluster` (name, peer URL, itself included): the initial cluster
    /// state `existing`. An earlier attempt's workload and data are
    /// replaced.
    async fn start_member(
        &self,
        state: &LabState,
        ca: &Ca,
        m: &MemberState,
        cluster: &[(String, String)],
    ) -> Result<()>;

    /// Whether [`Provider::start_restored_member`],
    /// [`Provider::start_empty_member`] and [`Provider::download`] work
    /// here (the `classic` and `mirror` plans need them).
    fn restores_members(&self) -> bool {
        false
    }

    /// Creates and starts etcd member `m` as the one member of a new
    /// cluster whose data is restored from `snapshot` (an etcd snapshot
    /// file's bytes): the snapshot is placed in its workload and restored
    /// there by `restore` (etcdctl's argv) before its etcd starts with the
    /// initial cluster state `new`. An earlier attempt's workload and data
    /// are replaced.
    async fn start_restored_member(
        &self,
        _state: &LabState,
        _ca: &Ca,
        _m: &MemberState,
        _snapshot: &[u8],
        _restore: &[String],
    ) -> Result<()> {
        anyhow::bail!(
            "the {} provider cannot restore an etcd member from a snapshot (the classic plan runs in the docker form)",
            self.name()
        )
    }

    /// Creates and starts etcd member `m` as the one member of a new,
    /// empty cluster (the initial cluster state `new`, `m` alone), as the
    /// `mirror` plan's destination begins; the other destination members
    /// join it as learners. An earlier attempt's workload and data are
    /// replaced.
    async fn start_empty_member(
        &self,
        _state: &LabState,
        _ca: &Ca,
        _m: &MemberState,
    ) -> Result<()> {
        anyhow::bail!(
            "the {} provider cannot start a new etcd cluster beside the shoot's (the mirror plan runs in the docker form)",
            self.name()
        )
    }

    /// Reads a file out of a workload.
    async fn download(&self, workload: &str, _path: &str) -> Result<Vec<u8>> {
        anyhow::bail!(
            "the {} provider cannot read files out of {workload}",
            self.name()
        )
    }

    /// Creates and starts an API server replica talking to `etcd_servers`,
    /// with the service-account key pair `sa` (private, public PEM).
    async fn start_apiserver(
        &self,
        state: &LabState,
        ca: &Ca,
        a: &ApiServerState,
        etcd_servers: &[String],
        sa: &(String, String),
    ) -> Result<()>;

    /// Removes a workload, and `data` (a member's volume) with it; its log
    /// is kept in the probe run first, if one runs.
    async fn remove(&self, state: &LabState, workload: &str, data: Option<&str>) -> Result<()>;

    /// Routes the seed's gateway to the members and API replicas the state
    /// gives the seed (and a migration's destination members planned for
    /// it), in place: connections it carries go on.
    async fn sync_gateway(&self, state: &LabState, seed: &str) -> Result<()>;

    /// Waits until the seed's gateway serves every API replica of the seed
    /// that runs and is not terminating (a Deployment rolled out: each
    /// pod Ready, its endpoint pushed). The kind form's rollout is the
    /// real kubelet's and the Deployment's, waited for where it starts them.
    async fn wait_gateway_serves(
        &self,
        _state: &LabState,
        _seed: &str,
        _cancel: &crate::errors::Cancel,
    ) -> Result<()> {
        Ok(())
    }

    /// Makes each DNS name answer exactly its addresses (none: the record
    /// goes), in one update.
    async fn set_dns(&self, state: &LabState, records: &[(&str, &[Ipv4Addr])]) -> Result<()>;

    /// Runs `argv` (no shell) in a workload.
    async fn exec(&self, workload: &str, argv: &[&str]) -> Result<Output>;

    /// Like `exec`, but a non-zero exit is an error carrying the output;
    /// returns stdout.
    async fn exec_ok(&self, workload: &str, argv: &[&str]) -> Result<String> {
        self.exec(workload, argv)
            .await?
            .stdout_if_ok(workload, argv)
    }

    /// Runs `argv` (no shell) for the network namespace of a workload
    /// where it speaks a netlink family qemu-user does not translate
    /// (netfilter's, routing rules, queueing disciplines, socket
    /// diagnostics: iptables, `ip rule`, `tc`, `ss`). Where the engine
    /// runs the lab by emulation (`state.emulation`), a provider runs it in
    /// a helper of the engine's own architecture that shares the
    /// workload's network namespace; elsewhere it is `exec`.
    async fn exec_netlink(
        &self,
        state: &LabState,
        workload: &str,
        argv: &[&str],
    ) -> Result<Output> {
        let _ = state;
        self.exec(workload, argv).await
    }

    /// `exec_netlink`, a non-zero exit an error carrying the output;
    /// returns stdout.
    async fn exec_netlink_ok(
        &self,
        state: &LabState,
        workload: &str,
        argv: &[&str],
    ) -> Result<String> {
        self.exec_netlink(state, workload, argv)
            .await?
            .stdout_if_ok(workload, argv)
    }

    /// Writes files into a workload (created or running).
    async fn upload(&self, workload: &str, files: &[FileSpec]) -> Result<()>;

    /// What a workload has logged so far (stdout and stderr).
    async fn logs(&self, workload: &str) -> Result<Vec<u8>>;

    /// etcd's `/metrics` of member `m` (its metrics listener, port 2381),
    /// within `timeout`.
    async fn member_metrics(&self, m: &MemberState, timeout: Duration) -> Result<String>;
}

/// The machinery under a lab: it makes and removes labs, lists them and
/// their workloads, starts their clients; what it does to a seed is
/// [`SeedOps`].
#[async_trait::async_trait]
pub trait Provider: SeedOps {
    /// Makes the lab `req` asks for, with progress on `progress`; a lab
    /// already up as asked is left as it is. An `up` that fails or is
    /// interrupted leaves what it made for `down`.
    async fn up(&self, req: &UpRequest, progress: &Progress) -> Result<Up>;

    /// Removes every object of lab `lab` and its files, whatever state it
    /// is in (also after a crashed `up`); a lab already gone is fine.
    async fn down(&self, state_root: &Path, lab: &str) -> Result<DownReport>;

    /// Every lab this provider holds anything of (a workload, a network,
    /// data), finished or left half-made by a crash.
    async fn labs(&self) -> Result<Vec<String>>;

    /// The workloads of `lab` (every lab's: `None`), sorted by name.
    async fn workloads(&self, lab: Option<&str>) -> Result<Vec<Workload>>;

    /// Creates and starts the probe agent's workload (`probe_client`'s
    /// name) on the clients network.
    async fn start_client(&self, state: &LabState, client: &ClientSpec) -> Result<()>;
}

/// A GET of Envoy's admin `path` in a seed's gateway, with each form's
/// own client (`cpmlab_core::gateway_admin::argv`): the response's body.
pub async fn gateway_admin(
    ops: &dyn SeedOps,
    state: &LabState,
    gateway: &str,
    path: &str,
) -> Result<String> {
    let argv = cpmlab_core::gateway_admin::argv(state.provider.is_docker(), path);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    ops.exec_ok(gateway, &argv).await
}

/// The probe agent's workload name in a lab.
pub fn probe_client(state: &LabState) -> String {
    crate::plan::container_name(&state.name, "probe")
}

/// Where a migration's planned members and API replicas run, as the
/// lab's provider names them (pure: the model's plan).
pub use cpmlab_model::placement::{planned_apiserver, planned_member};
