//! `cpmlab status`: the lab as it is now, read from Docker, etcd and DNS
//! (the state file only says where to look).

use std::fmt::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use crate::dns;
use crate::errors::EnvNotReady;
use crate::etcd::{self, ClusterView};
use crate::provider::docker::engine::Engine;
use crate::provider::docker::up::etcd_tls;
use crate::provider::docker::{LABEL_ROLE, LABEL_SEED};
use crate::state::{LabDir, LabState, Phase};

#[derive(Debug, Serialize)]
pub struct StatusReport {
    pub lab: String,
    pub phase: Phase,
    pub provider: &'static str,
    pub image: String,
    pub seeds: Vec<SeedStatus>,
    pub networks: Vec<NetworkStatus>,
    pub containers: Vec<ContainerStatus>,
    pub etcd: ClusterView,
    pub dns: DnsStatus,
    pub api: ApiStatus,
    /// The migration, once one started: plan, seeds and the conditions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migration: Option<MigrationStatus>,
}

#[derive(Debug, Serialize)]
pub struct MigrationStatus {
    pub plan: String,
    pub from: String,
    pub to: String,
    pub driver: crate::migrate::record::Driver,
    pub force_shrink: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    pub completed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    pub conditions: Vec<crate::migrate::conditions::Condition>,
}

impl MigrationStatus {
    pub fn of(m: &crate::migrate::record::MigrationState) -> MigrationStatus {
        MigrationStatus {
            plan: crate::migrate::flow::plan_name(m.plan).into(),
            from: m.from.clone(),
            to: m.to.clone(),
            driver: m.driver,
            force_shrink: m.force_shrink,
            rtt_ms: m.rtt_ms,
            completed: m.completed(),
            duration_s: m.finished_unix_ms.map(|f| (f - m.started_unix_ms) / 1e3),
            conditions: m.conditions.0.clone(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ApiStatus {
    pub name: String,
    /// True: the lab's stand-in, not kube-apiserver.
    pub standin: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub replicas: Vec<ApiReplicaStatus>,
}

#[derive(Debug, Serialize)]
pub struct ApiReplicaStatus {
    pub name: String,
    pub seed: String,
    pub ip: String,
    pub ready: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct SeedStatus {
    pub name: String,
    pub role: &'static str,
    pub network: String,
    pub subnet: String,
    pub gateway_ip: String,
    pub gateway_container: String,
}

#[derive(Debug, Serialize)]
pub struct NetworkStatus {
    pub name: String,
    pub docker_name: String,
    pub subnet: String,
    pub router_ip: String,
}

#[derive(Debug, Serialize)]
pub struct ContainerStatus {
    pub name: String,
    pub role: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    pub state: String,
}

#[derive(Debug, Serialize)]
pub struct DnsStatus {
    pub server: String,
    pub name: String,
    pub answer: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub fn load_lab(state_root: &Path, lab: &str) -> Result<(LabDir, LabState)> {
    let dir = LabDir::new(state_root, lab);
    if !dir.exists() {
        return Err(EnvNotReady::new(
            format!("lab `{lab}` is not up (no {})", dir.state_file().display()),
            format!("run `cpmlab up --name {lab}`"),
        )
        .into());
    }
    Ok((dir.clone(), dir.load()?))
}

pub async fn status(engine: &Engine, state_root: &Path, lab: &str) -> Result<StatusReport> {
    let (dir, state) = load_lab(state_root, lab)?;
    let mut containers: Vec<ContainerStatus> = engine
        .containers(Some(lab))
        .await?
        .into_iter()
        .map(|c| {
            let labels = c.labels.unwrap_or_default();
            ContainerStatus {
                name: c
                    .names
                    .and_then(|n| n.first().cloned())
                    .unwrap_or_default()
                    .trim_start_matches('/')
                    .to_string(),
                role: labels.get(LABEL_ROLE).cloned().unwrap_or_default(),
                seed: labels.get(LABEL_SEED).cloned(),
                state: c.state.map(|s| s.to_string()).unwrap_or_default(),
            }
        })
        .collect();
    containers.sort_by(|a, b| a.name.cmp(&b.name));

    let etcd_view = async {
        match etcd_tls(&dir) {
            Ok(tls) => etcd::cluster_view(&state, &tls, Duration::from_secs(3)).await,
            Err(e) => ClusterView {
                members: vec![],
                leader: None,
                error: Some(e.to_string()),
            },
        }
    };
    let dns_answer = dns::query_a(
        SocketAddr::from((state.dns.server.ip, 53)),
        &state.dns.api_name,
        Duration::from_secs(2),
    );
    let api = api_status(&dir, &state);
    let (etcd_view, dns_answer, api) = tokio::join!(etcd_view, dns_answer, api);
    let dns = match dns_answer {
        Ok((ips, ttl)) => DnsStatus {
            server: state.dns.server.ip.to_string(),
            name: state.dns.api_name.clone(),
            answer: ips.iter().map(|i| i.to_string()).collect(),
            ttl,
            error: None,
        },
        Err(e) => DnsStatus {
            server: state.dns.server.ip.to_string(),
            name: state.dns.api_name.clone(),
            answer: vec![],
            ttl: None,
            error: Some(e.to_string()),
        },
    };
    Ok(StatusReport {
        lab: state.name.clone(),
        phase: state.phase,
        provider: "docker",
        image: state.image.clone(),
        seeds: state
            .seeds
            .iter()
            .map(|s| SeedStatus {
                name: s.name.clone(),
                role: s.role.as_str(),
                network: state
                    .network(&s.network)
                    .map(|n| n.docker_name.clone())
                    .unwrap_or_default(),
                subnet: state
                    .network(&s.network)
                    .map(|n| n.subnet.cidr())
                    .unwrap_or_default(),
                gateway_ip: s.gateway.ip.to_string(),
                gateway_container: s.gateway.container.clone(),
            })
            .collect(),
        networks: state
            .networks
            .iter()
            .map(|n| NetworkStatus {
                name: n.name.clone(),
                docker_name: n.docker_name.clone(),
                subnet: n.subnet.cidr(),
                router_ip: n.router_ip.to_string(),
            })
            .collect(),
        containers,
        etcd: etcd_view,
        dns,
        api,
        migration: state.migration.as_ref().map(MigrationStatus::of),
    })
}

/// Each replica asked directly (its /readyz), and the version it reports.
async fn api_status(dir: &LabDir, state: &LabState) -> ApiStatus {
    use crate::apiserver::client;
    let tls = std::fs::read_to_string(dir.pki().join("ca.crt"))
        .ok()
        .and_then(|ca| client::tls_client(&ca).ok());
    let mut replicas = Vec::new();
    let mut version = None;
    for a in &state.apiservers {
        let addr = SocketAddr::from((a.ip, crate::gateway::API_PORT));
        let (ready, error) = match &tls {
            Some(tls) => {
                let t = Duration::from_secs(2);
                match client::get(addr, &state.dns.api_name, tls.clone(), "/readyz", None, t).await
                {
                    Ok((200, _)) => {
                        if version.is_none() {
                            version = client::get(
                                addr,
                                &state.dns.api_name,
                                tls.clone(),
                                "/version",
                                None,
                                t,
                            )
                            .await
                            .ok()
                            .and_then(|(_, b)| serde_json::from_str::<serde_json::Value>(&b).ok())
                            .and_then(|v| v["gitVersion"].as_str().map(str::to_string));
                        }
                        (true, None)
                    }
                    Ok((code, body)) => (false, Some(format!("/readyz {code}: {}", body.trim()))),
                    Err(e) => (false, Some(format!("{e:#}"))),
                }
            }
            None => (false, Some("the lab CA is unreadable".into())),
        };
        replicas.push(ApiReplicaStatus {
            name: a.name.clone(),
            seed: a.seed.clone(),
            ip: a.ip.to_string(),
            ready,
            error,
        });
    }
    ApiStatus {
        name: state.dns.api_name.clone(),
        standin: state.api_kind == crate::apiserver::launch::ApiServerKind::Standin,
        version,
        replicas,
    }
}

impl StatusReport {
    /// The human view.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "lab {}  ({}, provider {}, image {})",
            self.lab,
            match self.phase {
                Phase::Ready => "ready",
                Phase::Creating => "creating or crashed during up",
            },
            self.provider,
            self.image
        );
        let _ = writeln!(o, "\nSEEDS");
        for s in &self.seeds {
            let _ = writeln!(
                o,
                "  {:<12} {:<12} network {:<18} {:<16} gateway {}",
                s.name, s.role, s.network, s.subnet, s.gateway_ip
            );
        }
        let _ = writeln!(o, "\nCONTAINERS");
        for c in &self.containers {
            let _ = writeln!(
                o,
                "  {:<30} {:<9} {:<8} {}",
                c.name,
                c.role,
                c.seed.as_deref().unwrap_or("-"),
                c.state
            );
        }
        let _ = writeln!(o, "\nETCD");
        if let Some(e) = &self.etcd.error {
            let _ = writeln!(o, "  unreachable: {e}");
        }
        for m in &self.etcd.members {
            let _ = writeln!(
                o,
                "  {:<16} {:<16} {:<8} {:<7} {:<8} {}{}",
                m.id,
                m.name,
                m.seed,
                if m.is_learner { "learner" } else { "voter" },
                if m.healthy { "healthy" } else { "UNHEALTHY" },
                if m.is_leader { "leader" } else { "" },
                m.error
                    .as_ref()
                    .map(|e| format!("  ({e})"))
                    .unwrap_or_default()
            );
        }
        let _ = writeln!(
            o,
            "\nSHOOT API {} ({})",
            self.api.name,
            self.api.version.as_deref().unwrap_or("version unknown")
        );
        for r in &self.api.replicas {
            let _ = writeln!(
                o,
                "  {:<22} {:<8} {:<14} {}{}",
                r.name,
                r.seed,
                r.ip,
                if r.ready { "ready" } else { "NOT READY" },
                r.error
                    .as_ref()
                    .map(|e| format!("  ({e})"))
                    .unwrap_or_default()
            );
        }
        let _ = writeln!(o, "\nDNS ({})", self.dns.server);
        match &self.dns.error {
            Some(e) => {
                let _ = writeln!(o, "  {}: {e}", self.dns.name);
            }
            None => {
                let _ = writeln!(
                    o,
                    "  {} -> {} (ttl {})",
                    self.dns.name,
                    self.dns.answer.join(", "),
                    self.dns.ttl.map(|t| t.to_string()).unwrap_or("-".into())
                );
            }
        }
        if let Some(m) = &self.migration {
            o.push_str(&m.render());
        }
        o
    }
}

impl MigrationStatus {
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "\nMIGRATION {} -> {} ({}, driver {:?}{}){}",
            self.from,
            self.to,
            self.plan,
            self.driver,
            if self.force_shrink {
                ", force-shrink"
            } else {
                ""
            },
            match (self.completed, self.duration_s) {
                (true, Some(d)) => format!(": completed in {d:.1} s"),
                (true, None) => ": completed".into(),
                _ => String::new(),
            }
        );
        for c in &self.conditions {
            let _ = writeln!(
                o,
                "  {:<44} {:<8} {:<20} {}{}",
                c.kind,
                format!("{:?}", c.status),
                c.reason,
                c.last_transition_time,
                if c.message.is_empty() {
                    String::new()
                } else {
                    format!("\n      {}", c.message)
                }
            );
        }
        o
    }
}
