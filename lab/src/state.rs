//! The lab's state on disk, `.cpmlab/<NAME>/`: what `up` built (addresses,
//! names, the DNS update key), the CA and the client certificates. Live facts
//! (is it running, who leads etcd) are read from Docker and etcd, not here.

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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    pub version: u32,
    pub name: String,
    pub phase: Phase,
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
    pub api_kind: crate::apiserver::launch::ApiServerKind,
    /// Bearer token the API servers accept.
    #[serde(default)]
    pub api_token: String,
    /// Link profiles in force, by directed pair `src>dst`; absent is clear.
    #[serde(default)]
    pub links: std::collections::BTreeMap<String, crate::link::profile::LinkProfile>,
    /// The run directory of the probes running now, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_run: Option<PathBuf>,
    /// The backend that put the shaping in force (none while links are clear).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_backend: Option<crate::link::Backend>,
    /// The control plane migration, once `cpmlab migrate` started one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<crate::migrate::record::MigrationState>,
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
}

impl MemberState {
    pub fn client_url(&self) -> String {
        format!("https://{}:2379", self.host)
    }
    pub fn peer_url(&self) -> String {
        format!("https://{}:2380", self.host)
    }
    /// The member's address on its seed's gateway; its DNS name resolves here.
    pub fn vip(&self) -> Ipv4Addr {
        let o = self.ip.octets();
        let i = o[3] - crate::addressing::host::ETCD;
        Ipv4Addr::new(o[0], o[1], o[2], crate::addressing::host::MEMBER_VIP + i)
    }
}

impl LabState {
    pub fn network(&self, name: &str) -> Option<&NetworkState> {
        self.networks.iter().find(|n| n.name == name)
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

/// Where one lab keeps its files.
#[derive(Debug, Clone)]
pub struct LabDir {
    pub root: PathBuf,
}

impl LabDir {
    pub fn new(state_root: &Path, lab: &str) -> LabDir {
        LabDir {
            root: state_root.join(lab),
        }
    }
    pub fn state_file(&self) -> PathBuf {
        self.root.join("state.json")
    }
    pub fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }

    pub fn exists(&self) -> bool {
        self.state_file().exists()
    }

    pub fn create(&self) -> Result<(), StateError> {
        std::fs::create_dir_all(self.pki()).map_err(|source| StateError::Io {
            path: self.pki(),
            source,
        })
    }

    /// Writes atomically (temp file + rename), so a crash never leaves half a file.
    pub fn save(&self, state: &LabState) -> Result<(), StateError> {
        let path = self.state_file();
        let tmp = self.root.join(".state.json.tmp");
        let text = serde_json::to_string_pretty(state).expect("state serialises");
        std::fs::write(&tmp, text).map_err(|source| StateError::Io {
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

#[cfg(test)]
pub(crate) fn sample_state() -> LabState {
    let topo = Topology::default();
    let nets: Vec<Net24> = (0..3)
        .map(|i| Net24(Ipv4Addr::new(10, 213, i, 0)))
        .collect();
    let plan = crate::plan::LabPlan::new("t", &topo, &nets, "img:1");
    plan.initial_state("secret".into())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        lab.remove().unwrap();
        assert!(!lab.exists());
        lab.remove().unwrap();
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
