//! The lab's state on disk. The state root is the user's state directory
//! (`$XDG_STATE_HOME/cpmlab`, else `~/.local/state/cpmlab`; `--state-dir` or
//! `CPMLAB_STATE_DIR` override it), so every directory sees the same labs.
//! `<root>/labs/<NAME>/` holds what `up` built (addresses, names, the DNS
//! update key), the CA and the client certificates; `<root>/runs/` the run
//! directories, which outlive their lab. Live facts (is it running, who
//! leads etcd) are read from Docker and etcd, not here. Directories are
//! created 0700: they hold keys and the API token.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::addressing::Net24;
use crate::topology::{SeedRole, Topology};

pub const STATE_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// `up` is building the lab (or died while doing so).
    Creating,
    /// `up` finished.
    Ready,
}

/// The machinery a lab runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Containers on Docker networks, Envoy gateways.
    #[default]
    Docker,
    /// kind clusters with Istio; the lab's router, DNS and probe agent are
    /// containers beside them.
    Kind,
}

impl ProviderKind {
    pub fn is_docker(&self) -> bool {
        *self == ProviderKind::Docker
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    pub version: u32,
    pub name: String,
    pub phase: Phase,
    /// Which provider made the lab (and does what the lab's commands ask).
    #[serde(default, skip_serializing_if = "ProviderKind::is_docker")]
    pub provider: ProviderKind,
    pub created_unix: u64,
    pub image: String,
    pub topology: Topology,
    pub networks: Vec<NetworkState>,
    pub seeds: Vec<SeedState>,
    pub router: ContainerRef,
    pub toolbox: ContainerRef,
    pub dns: DnsState,
    pub members: Vec<MemberState>,
    /// API server replicas (the stand-in unless a real kube-apiserver is used).
    #[serde(default)]
    pub apiservers: Vec<ApiServerState>,
    /// Which API server the replicas run.
    #[serde(default)]
    pub api_kind: ApiServerKind,
    /// Bearer token the API servers accept.
    #[serde(default)]
    pub api_token: String,
    /// The front-proxy CA's certificate (PEM): the API servers trust the
    /// identity headers of a client certificate it signed (the gateway's,
    /// when TLS ends there). Its key is in the lab's `pki` directory.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub front_proxy_ca: String,
    /// Link profiles in force, by directed pair `src>dst`; absent is clear.
    #[serde(default)]
    pub links: std::collections::BTreeMap<String, crate::link::profile::LinkProfile>,
    /// The run directory of the probes running now, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_run: Option<PathBuf>,
    /// The backend that put the shaping in force (none while links are clear).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_backend: Option<crate::link::profile::Backend>,
    /// The delay line's seed, once `link set --seed` gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_seed: Option<crate::link::profile::LinkSeed>,
    /// The link trace the delay line follows, once `link replay` gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_replay: Option<crate::link::profile::Replay>,
    /// The control plane migration, once `cpmlab migrate` started one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<MigrationState>,
    /// The kind form's etcd is etcd-druid's, its `Etcd`s named this way:
    /// the members carry druid's member names, pods and claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_druid: Option<DruidNaming>,
    /// The garden (labs made before it have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub garden: Option<GardenState>,
    /// The engine runs the lab image by emulation (another architecture
    /// than its own): what that changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulation: Option<crate::platform::Emulation>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkState {
    /// Logical name: a seed's name or `clients`.
    pub name: String,
    /// Docker network name, prefixed by the lab name.
    pub docker_name: String,
    pub subnet: Net24,
    pub router_ip: Ipv4Addr,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedState {
    pub name: String,
    pub role: SeedRole,
    pub network: String,
    pub gateway: ContainerRef,
    /// The seed's gardenlet (labs made before the garden have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gardenlet: Option<ContainerRef>,
}

/// The garden: its etcd, its kube-apiserver and gardener-apiserver behind
/// it (aggregated), on a network of its own; and where its objects are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GardenState {
    pub etcd: ContainerRef,
    pub kube_apiserver: ContainerRef,
    pub gardener_apiserver: ContainerRef,
    /// gardener-apiserver's version (the module the lab built it from).
    pub gardener_version: String,
    /// The shoot's project namespace in the garden (`garden-<project>`).
    pub namespace: String,
}

impl GardenState {
    /// The garden's API, as its clients (gardenlets, the CLI) reach it.
    pub fn url(&self) -> String {
        format!("https://{}", self.kube_apiserver.ip)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerRef {
    pub container: String,
    /// The address on its (first) network.
    pub ip: Ipv4Addr,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DnsState {
    pub server: ContainerRef,
    pub zone: String,
    pub api_name: String,
    pub ttl: u32,
    pub tsig_key_name: String,
    /// base64 HMAC-SHA256 secret for RFC 2136 updates.
    pub tsig_secret: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiServerState {
    pub name: String,
    pub seed: String,
    pub container: String,
    pub ip: Ipv4Addr,
    /// Its pod is being deleted (the migration drains it): its endpoint
    /// leaves the gateway at once, whatever its probe says.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub terminating: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberState {
    /// etcd member name, prefixed by the seed name.
    pub name: String,
    pub seed: String,
    pub container: String,
    pub volume: String,
    pub ip: Ipv4Addr,
    /// DNS name in client and peer URLs; resolves to the seed's gateway.
    pub host: String,
    /// The gateway port its peer URL names: 2380, shared (an address per
    /// member), or a port of its own (`network.peer_exposure: port`).
    #[serde(
        default = "default_peer_port",
        skip_serializing_if = "is_default_peer_port"
    )]
    pub peer_port: u16,
}

fn default_peer_port() -> u16 {
    crate::ports::ETCD_PEER_PORT
}

fn is_default_peer_port(p: &u16) -> bool {
    *p == crate::ports::ETCD_PEER_PORT
}

impl MemberState {
    pub fn client_url(&self) -> String {
        format!("https://{}:2379", self.host)
    }
    pub fn peer_url(&self) -> String {
        format!("https://{}:{}", self.host, self.peer_port)
    }
    /// The name of the member's pod (its own address, as a headless
    /// Service's record): what the gateway resolves to reach it.
    pub fn pod_host(&self) -> String {
        let zone = self.host.split_once('.').map(|(_, z)| z).unwrap_or("");
        format!("{}.pods.{zone}", self.name)
    }

    /// The member's address on its seed's gateway; its DNS name resolves
    /// here: an address of its own, or with a peer port of its own the
    /// gateway's one address.
    pub fn vip(&self) -> Ipv4Addr {
        let o = self.ip.octets();
        if !is_default_peer_port(&self.peer_port) {
            return Ipv4Addr::new(o[0], o[1], o[2], crate::addressing::host::GATEWAY);
        }
        let i = o[3] - crate::addressing::host::ETCD;
        Ipv4Addr::new(o[0], o[1], o[2], crate::addressing::host::MEMBER_VIP + i)
    }
}

impl LabState {
    /// `d`, one of the lab's own waits, stretched by the factor its
    /// platform gets (`platform::wait_factor`: under emulation, several).
    pub fn stretch(&self, d: std::time::Duration) -> std::time::Duration {
        crate::platform::scaled(d, crate::platform::wait_factor(self.emulation.as_ref()))
    }

    pub fn network(&self, name: &str) -> Option<&NetworkState> {
        self.networks.iter().find(|n| n.name == name)
    }
    /// The names of the members the migration removed from etcd (they stay
    /// among `members` until their seed's cleanup).
    pub fn departed_members(&self) -> impl Iterator<Item = &str> {
        self.migration
            .iter()
            .flat_map(|m| m.departed_members.iter().map(|d| d.name.as_str()))
    }
    pub fn seed(&self, name: &str) -> Option<&SeedState> {
        self.seeds.iter().find(|s| s.name == name)
    }
    pub fn seed_by_role(&self, role: SeedRole) -> &SeedState {
        self.seeds
            .iter()
            .find(|s| s.role == role)
            .expect("state has both seed roles")
    }
    pub fn apiservers_of<'a>(
        &'a self,
        seed: &'a str,
    ) -> impl Iterator<Item = &'a ApiServerState> + 'a {
        self.apiservers.iter().filter(move |a| a.seed == seed)
    }
    pub fn members_of<'a>(&'a self, seed: &'a str) -> impl Iterator<Item = &'a MemberState> + 'a {
        self.members.iter().filter(move |m| m.seed == seed)
    }

    /// The members a seed's gateway fronts: the seed's members and, during
    /// a migration, the destination members planned for it.
    pub fn gateway_members(&self, seed: &str) -> Vec<MemberState> {
        let mut v: Vec<MemberState> = self.members_of(seed).cloned().collect();
        if let Some(mig) = &self.migration {
            for m in mig.destination_members.iter().filter(|m| m.seed == seed) {
                if !v.iter().any(|x| x.name == m.name) {
                    v.push(m.clone());
                }
            }
        }
        v
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a cpmlab state file: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: state version {found} is not supported (this cpmlab writes {STATE_VERSION}); run `cpmlab down` with the cpmlab that made it")]
    Version { path: PathBuf, found: u32 },
}

/// The state root a command uses: `explicit` (from `--state-dir` or
/// `CPMLAB_STATE_DIR`), else `$XDG_STATE_HOME/cpmlab` (when absolute, as the
/// XDG spec requires), else `$HOME/.local/state/cpmlab`.
pub fn resolve_root(
    explicit: Option<PathBuf>,
    xdg_state_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Result<PathBuf, crate::errors::EnvNotReady> {
    if let Some(p) = explicit.filter(|p| !p.as_os_str().is_empty()) {
        return Ok(p);
    }
    if let Some(x) = xdg_state_home
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        return Ok(x.join("cpmlab"));
    }
    if let Some(h) = home.map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Ok(h.join(".local/state/cpmlab"));
    }
    Err(crate::errors::EnvNotReady::new(
        "no state directory: neither XDG_STATE_HOME nor HOME is set to an absolute path",
        "set CPMLAB_STATE_DIR (or pass --state-dir) to a directory cpmlab may write",
    ))
}

/// The run directories under a state root: `<root>/runs/`.
pub fn runs_dir(state_root: &Path) -> PathBuf {
    state_root.join("runs")
}

/// Names of the labs with a state file under `state_root`, sorted.
pub fn lab_names(state_root: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(state_root.join("labs"))
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().join("state.json").exists())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Creates `path` and its missing parents, each new one readable by its
/// owner only.
/// Writes a file only its owner may read or write (0600), whatever the
/// umask, also when it exists already with a wider mode: secrets (keys,
/// the API token), kubeconfigs and the lab's state, which holds the token.
pub fn write_private(path: &Path, contents: impl AsRef<[u8]>) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    own_like_directory(&f, path);
    f.write_all(contents.as_ref())
}

/// A file written by root (a gardenlet's container, `sudo cpmlab`) into a
/// lab's directory takes the directory's owner, so that the user who made
/// the lab can still read what is private to it. Anyone else cannot change
/// an owner, and need not: their file is theirs.
fn own_like_directory(f: &std::fs::File, path: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Some(dir) = path
        .parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .and_then(|p| p.metadata().ok())
    else {
        return;
    };
    let Ok(mine) = f.metadata() else { return };
    if (mine.uid(), mine.gid()) != (dir.uid(), dir.gid()) {
        let _ = std::os::unix::fs::fchown(f, Some(dir.uid()), Some(dir.gid()));
    }
}

pub fn create_private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

/// Where one lab keeps its files.
#[derive(Debug, Clone)]
pub struct LabDir {
    pub root: PathBuf,
    state_root: PathBuf,
}

impl LabDir {
    pub fn new(state_root: &Path, lab: &str) -> LabDir {
        LabDir {
            root: state_root.join("labs").join(lab),
            state_root: state_root.to_path_buf(),
        }
    }
    /// Where this lab's runs go (beside the labs, kept after `down`).
    pub fn runs(&self) -> PathBuf {
        runs_dir(&self.state_root)
    }
    pub fn state_file(&self) -> PathBuf {
        self.root.join("state.json")
    }
    pub fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }
    /// The lab's backup bucket: etcd snapshots a `classic` migration takes
    /// from the source and restores in the destination.
    pub fn backups(&self) -> PathBuf {
        self.root.join("backups")
    }

    pub fn exists(&self) -> bool {
        self.state_file().exists()
    }

    /// Creates the lab's directory and its `pki/`, owner-only (0700), also
    /// where they exist already with a wider mode.
    pub fn create(&self) -> Result<(), StateError> {
        use std::os::unix::fs::PermissionsExt;
        create_private_dir(&self.pki()).map_err(|source| StateError::Io {
            path: self.pki(),
            source,
        })?;
        for d in [&self.root, &self.pki()] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).map_err(
                |source| StateError::Io {
                    path: d.to_path_buf(),
                    source,
                },
            )?;
        }
        Ok(())
    }

    /// Files and directories of this lab that others may read: secrets
    /// (keys, the token, the kubeconfig, the state holding the token) wider
    /// than 0600, directories wider than 0700. `doctor` warns of them.
    pub fn too_open(&self) -> Vec<(PathBuf, u32)> {
        use std::os::unix::fs::PermissionsExt;
        let mut paths = vec![self.root.clone(), self.pki()];
        paths.push(self.state_file());
        paths.push(self.root.join("kubeconfig"));
        if let Ok(rd) = std::fs::read_dir(self.pki()) {
            let mut keys: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "key") || p.ends_with("token"))
                .collect();
            keys.sort();
            paths.extend(keys);
        }
        paths
            .into_iter()
            .filter_map(|p| {
                let meta = std::fs::metadata(&p).ok()?;
                let mode = meta.permissions().mode() & 0o777;
                let allowed = if meta.is_dir() { 0o700 } else { 0o600 };
                (mode & !allowed != 0).then_some((p, mode))
            })
            .collect()
    }

    /// Writes atomically (temp file + rename), so a crash never leaves half a file.
    pub fn save(&self, state: &LabState) -> Result<(), StateError> {
        let path = self.state_file();
        let tmp = self.root.join(".state.json.tmp");
        let text = serde_json::to_string_pretty(state).expect("state serialises");
        write_private(&tmp, text).map_err(|source| StateError::Io {
            path: tmp.clone(),
            source,
        })?;
        std::fs::rename(&tmp, &path).map_err(|source| StateError::Io { path, source })
    }

    /// Read-modify-write under an exclusive lock on `.lock`: commands that
    /// run at the same time (`migrate`, `probe stop`, `link set`) each change
    /// only their own fields of the latest state. Returns the state written.
    pub fn update(&self, f: impl FnOnce(&mut LabState)) -> Result<LabState, StateError> {
        let lock_path = self.root.join(".lock");
        let io = |source| StateError::Io {
            path: lock_path.clone(),
            source,
        };
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io)?;
        lock.lock().map_err(io)?;
        let mut state = self.load()?;
        f(&mut state);
        let r = self.save(&state).map(|_| state);
        let _ = lock.unlock();
        r
    }

    pub fn load(&self) -> Result<LabState, StateError> {
        let path = self.state_file();
        let text = std::fs::read_to_string(&path).map_err(|source| StateError::Io {
            path: path.clone(),
            source,
        })?;
        #[derive(Deserialize)]
        struct Head {
            version: u32,
        }
        let head: Head = serde_json::from_str(&text).map_err(|source| StateError::Parse {
            path: path.clone(),
            source,
        })?;
        if head.version != STATE_VERSION {
            return Err(StateError::Version {
                path,
                found: head.version,
            });
        }
        serde_json::from_str(&text).map_err(|source| StateError::Parse { path, source })
    }

    pub fn remove(&self) -> Result<(), StateError> {
        match std::fs::remove_dir_all(&self.root) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StateError::Io {
                path: self.root.clone(),
                source: e,
            }),
            _ => Ok(()),
        }
    }
}

/// Which API server the lab runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApiServerKind {
    #[default]
    Standin,
    KubeApiserver,
    /// cpmlab-apiserver: Kubernetes' generic API server code (k8s.io/apiserver).
    Generic,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    /// cpmlab's reference controller (gardenlet's and etcd-druid's roles).
    Reference,
    /// A given command does the migration; the lab probes and records.
    External,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MigrationState {
    pub plan: crate::migrate::membership::Plan,
    pub from: String,
    pub to: String,
    pub driver: Driver,
    /// `--force-shrink-etcd`: source members leave before the destination
    /// API server, DNS switches at once (bounded downtime).
    #[serde(default)]
    pub force_shrink: bool,
    /// How the source leader leaves (a state from before the setting read
    /// as `move-leader`, what it did then).
    #[serde(default = "handover_before_the_setting")]
    pub leader_handover: crate::migrate::membership::LeaderHandover,
    /// The order of the steps around the DNS switch (a state from before
    /// the setting read as `early-drain`, what it did then).
    #[serde(default = "crate::migrate::order::order_before_the_setting")]
    pub order: crate::migrate::order::Order,
    /// What the source gateway does for kept connections (a state from
    /// before the setting: `none`, what it did then).
    #[serde(default)]
    pub gateway_handover: crate::migrate::gateway_handover::GatewayHandover,
    /// When the source seed's Gateway for the shoot was deleted
    /// (`drain-gateway`): from then its gateway exposes the shoot's etcd
    /// members only, and the hold runs from this time across a resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_gateway_released_unix_ms: Option<f64>,
    /// When the source seed's Gateway for the shoot was changed to drain
    /// its connections in place (`drain-gateway-in-place`): from then its
    /// server has the drain host and the apiserver-proxy's listener is
    /// gone; the hold before the deletion runs from this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_gateway_drained_unix_ms: Option<f64>,
    /// When the source seed's gateway reported that change in force
    /// (`drain-gateway-in-place`): its Envoy's listener manager counted the
    /// update and its drain running. The hold runs from this time, for the
    /// drain time that Envoy runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_gateway_drain_acked_unix_ms: Option<f64>,
    /// The drain time the source's gateway ran with, read from its
    /// admin's `server_info` when the drain started, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_gateway_drain_time_ms: Option<f64>,
    /// When the source's routes for the shoot API were turned to the
    /// destination's gateway (`forward`): from then until the cleanup its
    /// gateway sends the API's traffic across the WAN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_gateway_forwarded_unix_ms: Option<f64>,
    /// How long SourceSeedCleanup's steps before the source API servers'
    /// deletion take (the `gep` and `dns-first` orders), milliseconds.
    #[serde(default)]
    pub cleanup_before_api_ms: u64,
    pub conditions: crate::migrate::conditions::Conditions,
    pub started_unix_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_unix_ms: Option<f64>,
    /// RTT between the seeds measured before the start, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    /// How `rtt_ms` was measured and the bound it was held to, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_gate: Option<String>,
    /// The destination's members, in join order (planned at the start).
    pub destination_members: Vec<MemberState>,
    /// The destination's API server replicas (planned at the start).
    pub destination_apiservers: Vec<ApiServerState>,
    /// Source members removed from etcd whose containers still exist.
    #[serde(default)]
    pub departed_members: Vec<MemberState>,
    /// When the shoot API name started answering the destination (for the
    /// TTL wait across a resume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_switched_unix_ms: Option<f64>,
    /// The external driver's command, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

fn handover_before_the_setting() -> crate::migrate::membership::LeaderHandover {
    crate::migrate::membership::LeaderHandover::MoveLeader
}

impl MigrationState {
    pub fn completed(&self) -> bool {
        self.conditions.next_step().is_none()
    }
}

impl ApiServerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ApiServerKind::Standin => "standin",
            ApiServerKind::KubeApiserver => "kube-apiserver",
            ApiServerKind::Generic => "generic",
        }
    }

    /// Where its binary is in the lab image (the stand-in is the image's
    /// own `cpmlab`).
    pub fn image_bin(self) -> Option<&'static str> {
        match self {
            ApiServerKind::Standin => None,
            ApiServerKind::KubeApiserver => Some(KUBE_APISERVER_BIN),
            ApiServerKind::Generic => Some(GENERIC_APISERVER_BIN),
        }
    }
}

/// Where kube-apiserver is in the lab image.
pub const KUBE_APISERVER_BIN: &str = "/usr/local/bin/kube-apiserver";
/// Where cpmlab-apiserver is in the lab image.
pub const GENERIC_APISERVER_BIN: &str = "/usr/local/bin/cpmlab-apiserver";
/// How the seeds' `Etcd` resources and their members are named.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum DruidNaming {
    /// etcd-druid's documented way to grow a cluster across two `Etcd`
    /// resources (its `docs/usage/bootstrapping-with-existing-cluster.md`):
    /// each `Etcd` its own name and no member name prefix. The source's
    /// keeps Gardener's `etcd-main`, the destination's is
    /// `etcd-main-<seed>`. The only naming under which druid v0.38.1
    /// advertises the cross-seed peer URLs.
    #[default]
    Distinct,
    /// Gardener's: `etcd-main` in both seeds, the seed as
    /// `memberNamePrefix` (gardener `pkg/gardenlet/operation/botanist/etcd.go`
    /// with `UpgradeEtcdVersion` on). druid v0.38.1 drops every
    /// `additionalAdvertisePeerURLs` entry under it (docs/etcd-druid.md):
    /// rendered and checked against druid's CRD, not a live path.
    Gardener,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::sample_state;

    fn mode(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_private_file_takes_its_directorys_owner_when_root_writes_it() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let me = std::fs::metadata(dir.path()).unwrap().uid();
        // A directory another user owns (only root can make one here).
        let theirs = std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).is_ok();
        let p = dir.path().join("garden.kubeconfig");
        write_private(&p, "x").unwrap();
        let m = std::fs::metadata(&p).unwrap();
        if theirs {
            assert_eq!((m.uid(), m.gid()), (65534, 65534));
        } else {
            // Not root: the directory is this user's, and so is the file.
            assert_eq!(m.uid(), me);
        }
        assert_eq!(mode(&p), 0o600);
    }

    #[test]
    fn secrets_and_state_are_owner_only_and_wider_ones_are_found() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let lab = LabDir::new(dir.path(), "t");
        // A lab directory left 0755 by an older cpmlab is narrowed.
        std::fs::create_dir_all(lab.pki()).unwrap();
        std::fs::set_permissions(&lab.root, std::fs::Permissions::from_mode(0o755)).unwrap();
        lab.create().unwrap();
        lab.save(&sample_state()).unwrap();
        let token = lab.pki().join("token");
        std::fs::write(&token, "old").unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(lab.too_open(), vec![(token.clone(), 0o644)]);
        write_private(&token, "secret").unwrap();
        assert_eq!(mode(&token), 0o600, "an existing file is narrowed too");
        assert_eq!(std::fs::read_to_string(&token).unwrap(), "secret");
        assert_eq!(mode(&lab.root), 0o700);
        assert_eq!(mode(&lab.pki()), 0o700);
        assert_eq!(mode(&lab.state_file()), 0o600, "the state holds the token");
        assert!(lab.too_open().is_empty(), "{:?}", lab.too_open());
    }

    #[test]
    fn state_round_trips_through_disk() {
        let dir = tempfile::tempdir().unwrap();
        let lab = LabDir::new(dir.path(), "t");
        lab.create().unwrap();
        let s = sample_state();
        lab.save(&s).unwrap();
        assert!(lab.exists());
        let back = lab.load().unwrap();
        assert_eq!(back, s);
        assert_eq!(back.members.len(), 3);
        assert_eq!(
            back.members[0].client_url(),
            "https://seed-a-etcd-0.local.cpmlab.test:2379"
        );
        assert_eq!(lab_names(dir.path()), vec!["t".to_string()]);
        assert_eq!(lab.runs(), dir.path().join("runs"));
        use std::os::unix::fs::PermissionsExt;
        for d in [dir.path().join("labs"), lab.root.clone(), lab.pki()] {
            let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", d.display());
        }
        lab.remove().unwrap();
        assert!(!lab.exists());
        assert!(lab_names(dir.path()).is_empty());
        lab.remove().unwrap();
    }

    #[test]
    fn the_state_root_follows_xdg_then_home() {
        let os = |s: &str| Some(std::ffi::OsString::from(s));
        let r = |e: Option<&str>, x, h| resolve_root(e.map(PathBuf::from), x, h);
        assert_eq!(
            r(Some("/s"), os("/x"), os("/h")).unwrap(),
            PathBuf::from("/s")
        );
        assert_eq!(
            r(None, os("/x"), os("/h")).unwrap(),
            PathBuf::from("/x/cpmlab")
        );
        // A relative XDG_STATE_HOME is invalid by the spec and ignored.
        assert_eq!(
            r(None, os("rel"), os("/h")).unwrap(),
            PathBuf::from("/h/.local/state/cpmlab")
        );
        assert_eq!(
            r(Some(""), None, os("/h")).unwrap(),
            PathBuf::from("/h/.local/state/cpmlab")
        );
        let e = r(None, None, None).unwrap_err();
        assert!(e.to_string().contains("CPMLAB_STATE_DIR"), "{e}");
    }

    #[test]
    fn newer_state_version_is_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let lab = LabDir::new(dir.path(), "t");
        lab.create().unwrap();
        std::fs::write(lab.state_file(), r#"{"version": 99}"#).unwrap();
        let e = lab.load().unwrap_err();
        assert!(e.to_string().contains("version 99"), "{e}");
        std::fs::write(lab.state_file(), "{").unwrap();
        assert!(matches!(lab.load().unwrap_err(), StateError::Parse { .. }));
    }
}
