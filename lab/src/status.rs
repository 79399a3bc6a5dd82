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
use crate::provider::{Provider, WorkloadState};
use crate::state::{LabDir, LabState, Phase};

#[derive(Debug, Serialize)]
pub struct StatusReport {
    pub lab: String,
    pub phase: Phase,
    pub provider: &'static str,
    pub image: String,
    /// The engine runs the image by emulation: the platforms and the factor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulation: Option<cpmlab_model::platform::Emulation>,
    pub seeds: Vec<SeedStatus>,
    pub networks: Vec<NetworkStatus>,
    pub containers: Vec<ContainerStatus>,
    pub etcd: ClusterView,
    pub dns: DnsStatus,
    pub api: ApiStatus,
    /// The migration, once one started: plan, seeds and the conditions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migration: Option<MigrationStatus>,
    /// The garden: its API, the Shoot's seeds as gardener-apiserver has
    /// them, and whence the migration's conditions above come.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub garden: Option<GardenStatus>,
}

#[derive(Debug, Serialize)]
pub struct GardenStatus {
    /// The garden's API (its kube-apiserver; gardener-apiserver behind it).
    pub api: String,
    pub gardener_version: String,
    /// `namespace/name` of the Shoot.
    pub shoot: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_seed: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_seed: Option<String>,
    /// `garden` (read from the Shoot now) or `cache` (the lab's copy: the
    /// garden did not answer).
    pub conditions_from: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The garden's view for `status`: the Shoot read back, its conditions
/// put in `migration` where the garden answers.
async fn garden_status(
    dir: &LabDir,
    state: &LabState,
    migration: &mut Option<MigrationStatus>,
) -> Option<GardenStatus> {
    let g = state.garden.as_ref()?;
    let (ns, name) = crate::garden::objects::shoot_ref(state);
    let mut out = GardenStatus {
        api: format!("https://{}", g.kube_apiserver.ip),
        gardener_version: g.gardener_version.clone(),
        shoot: format!("{ns}/{name}"),
        spec_seed: None,
        status_seed: None,
        conditions_from: "cache",
        error: None,
    };
    let client =
        crate::garden::access::client(dir, state, &crate::garden::access::Identity::Operator)
            .map(|c| c.with_timeout(Duration::from_secs(3)));
    let shoot = match client {
        Ok(c) => c.shoot(&ns, &name).await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match shoot {
        Ok(shoot) => {
            let (spec, st) = crate::garden::client::seeds_of(&shoot);
            out.spec_seed = spec;
            out.status_seed = st;
            if let Some(m) = migration.as_mut() {
                m.conditions = crate::garden::client::conditions_of(&shoot).0;
                m.completed = m
                    .conditions
                    .iter()
                    .all(|c| c.status == crate::migrate::conditions::Status::True);
                out.conditions_from = "garden";
            }
        }
        Err(e) => out.error = Some(e),
    }
    Some(out)
}

#[derive(Debug, Serialize)]
pub struct MigrationStatus {
    pub plan: String,
    /// The steps' order around the DNS switch (`gep`, `early-drain`,
    /// `dns-first`).
    pub order: &'static str,
    /// How the source leader leaves etcd (`remove`, `move-leader`).
    pub leader_handover: &'static str,
    /// What the source gateway does for the clients kept on it: `none`
    /// (Gardener's objects as they are), `drain-gateway` or
    /// `max-connection-age`.
    pub gateway_handover: &'static str,
    /// SourceSeedCleanup's steps before the source API servers' deletion,
    /// seconds (the `gep` and `dns-first` orders).
    pub cleanup_before_api_s: f64,
    pub from: String,
    pub to: String,
    pub driver: crate::migrate::record::Driver,
    pub force_shrink: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_gate: Option<String>,
    pub completed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    pub conditions: Vec<crate::migrate::conditions::Condition>,
}

impl MigrationStatus {
    pub fn of(m: &crate::migrate::record::MigrationState) -> MigrationStatus {
        MigrationStatus {
            plan: crate::migrate::flow::plan_name(m.plan).into(),
            order: m.order.name(),
            leader_handover: m.leader_handover.as_str(),
            gateway_handover: m.gateway_handover.as_str(),
            cleanup_before_api_s: m.cleanup_before_api_ms as f64 / 1e3,
            from: m.from.clone(),
            to: m.to.clone(),
            driver: m.driver,
            force_shrink: m.force_shrink,
            rtt_ms: m.rtt_ms,
            rtt_gate: m.rtt_gate.clone(),
            completed: m.completed(),
            duration_s: m.finished_unix_ms.map(|f| (f - m.started_unix_ms) / 1e3),
            conditions: m.conditions.0.clone(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ApiStatus {
    pub name: String,
    /// Which API server serves: `generic` (k8s.io/apiserver), `standin`
    /// or `kube-apiserver`.
    pub server: &'static str,
    /// True: the lab's stand-in.
    pub standin: bool,
    /// How the seeds' gateways expose it: `termination` (TLS ends at the
    /// gateway, Gardener's default) or `passthrough`.
    pub exposure: &'static str,
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

/// The etcd part of the status alone: each member's view through its
/// seed's gateway, asked at once, `timeout` each. What a fault aimed at a
/// role (`leader`, `follower`, `learner`) resolves against: quick, where
/// the whole status waits on the API servers too.
pub async fn etcd_view(state_root: &Path, lab: &str, timeout: Duration) -> Result<ClusterView> {
    let (dir, state) = load_lab(state_root, lab)?;
    Ok(etcd_view_of(&dir, &state, timeout).await)
}

async fn etcd_view_of(dir: &LabDir, state: &LabState, timeout: Duration) -> ClusterView {
    match crate::etcd::lab_tls(dir) {
        Ok(tls) => etcd::cluster_view(state, &tls, timeout).await,
        Err(e) => ClusterView {
            members: vec![],
            leader: None,
            error: Some(e.to_string()),
        },
    }
}

pub async fn status(provider: &dyn Provider, state_root: &Path, lab: &str) -> Result<StatusReport> {
    let (dir, state) = load_lab(state_root, lab)?;
    let containers: Vec<ContainerStatus> = provider
        .workloads(Some(lab))
        .await?
        .into_iter()
        .map(|w| ContainerStatus {
            name: w.name,
            role: w.role,
            seed: w.seed,
            state: w.state.to_string(),
        })
        .collect();

    let etcd_view = etcd_view_of(&dir, &state, Duration::from_secs(3));
    let dns_answer = dns::query_a(
        SocketAddr::from((state.dns.server.ip, 53)),
        &state.dns.api_name,
        Duration::from_secs(2),
    );
    let api = api_status(&dir, &state);
    let mut migration = state.migration.as_ref().map(MigrationStatus::of);
    let garden = garden_status(&dir, &state, &mut migration);
    let (etcd_view, dns_answer, api, garden) = tokio::join!(etcd_view, dns_answer, api, garden);
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
        provider: provider.name(),
        image: state.image.clone(),
        emulation: state.emulation.clone(),
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
        migration,
        garden,
    })
}

/// Each replica asked at its address (its /readyz; a kind replica's is its
/// seed's ingress), and the version it reports.
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
                let token = Some(state.api_token.as_str()).filter(|t| !t.is_empty());
                match client::get(addr, &state.dns.api_name, tls.clone(), "/readyz", token, t).await
                {
                    Ok((200, _)) => {
                        if version.is_none() {
                            version = client::get(
                                addr,
                                &state.dns.api_name,
                                tls.clone(),
                                "/version",
                                token,
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
        server: state.api_kind.as_str(),
        standin: state.api_kind == crate::apiserver::launch::ApiServerKind::Standin,
        exposure: state.topology.api.exposure.as_str(),
        version,
        replicas,
    }
}

/// One line of `cpmlab status` without `--name`: every lab this user's
/// state directory or this Docker engine knows, like `kind get clusters`.
#[derive(Debug, Serialize)]
pub struct LabSummary {
    pub name: String,
    /// `ready`, `creating`, or `orphaned` (Docker objects without a state
    /// file here: another state directory's lab, or a crashed run).
    pub phase: String,
    pub containers_running: usize,
    pub containers: usize,
    /// The seed whose etcd members hold the shoot (per the state file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serving_seed: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// The migration in short: `seed-a -> seed-b completed`, `... at <step>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migration: Option<String>,
    /// The probe run directory while probes run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_run: Option<std::path::PathBuf>,
}

/// Every lab: state files under `state_root` and labelled Docker objects.
pub async fn list(provider: &dyn Provider, state_root: &Path) -> Result<Vec<LabSummary>> {
    let mut names = crate::state::lab_names(state_root);
    names.extend(provider.labs().await?);
    let all = provider.workloads(None).await?;
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        let mine: Vec<_> = all.iter().filter(|w| w.lab == name).collect();
        let running = mine
            .iter()
            .filter(|w| w.state == WorkloadState::Running)
            .count();
        let state = LabDir::new(state_root, &name).load().ok();
        out.push(LabSummary {
            phase: match state.as_ref().map(|s| s.phase) {
                Some(Phase::Ready) => "ready".into(),
                Some(Phase::Creating) => "creating".into(),
                None => "orphaned".into(),
            },
            containers_running: running,
            containers: mine.len(),
            serving_seed: state.as_ref().and_then(|s| {
                s.seeds
                    .iter()
                    .find(|seed| s.members_of(&seed.name).next().is_some())
                    .map(|seed| seed.name.clone())
            }),
            api: state
                .as_ref()
                .map(|s| format!("{} x{}", s.api_kind.as_str(), s.apiservers.len())),
            migration: state.as_ref().and_then(|s| s.migration.as_ref()).map(|m| {
                let where_ = if m.completed() {
                    "completed".to_string()
                } else if let Some(f) = m.conditions.failed() {
                    format!("failed at {}", f.kind)
                } else {
                    format!("next {}", m.conditions.next_step().unwrap_or("-"))
                };
                format!("{} -> {} {where_}", m.from, m.to)
            }),
            probe_run: state.and_then(|s| s.probe_run),
            name,
        });
    }
    Ok(out)
}

/// The table `cpmlab status` prints without `--name`.
pub fn render_list(labs: &[LabSummary], state_root: &Path) -> String {
    let mut o = String::new();
    if labs.is_empty() {
        let _ = writeln!(
            o,
            "no labs (state directory {}); create one with `cpmlab up`",
            state_root.display()
        );
        return o;
    }
    let _ = writeln!(
        o,
        "{:<20} {:<9} {:<11} {:<9} {:<14} MIGRATION",
        "NAME", "PHASE", "CONTAINERS", "ETCD IN", "API"
    );
    for l in labs {
        let _ = writeln!(
            o,
            "{:<20} {:<9} {:<11} {:<9} {:<14} {}{}",
            l.name,
            l.phase,
            format!("{}/{} up", l.containers_running, l.containers),
            l.serving_seed.as_deref().unwrap_or("-"),
            l.api.as_deref().unwrap_or("-"),
            l.migration.as_deref().unwrap_or("-"),
            if l.probe_run.is_some() {
                "  (probes running)"
            } else {
                ""
            }
        );
    }
    if labs.iter().any(|l| l.phase == "orphaned") {
        let _ = writeln!(
            o,
            "\norphaned: Docker objects without a state file in {} (another state directory, or a crashed run); `cpmlab down --name NAME` removes them",
            state_root.display()
        );
    }
    o
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
        if let Some(e) = &self.emulation {
            let _ = writeln!(o, "platform: {}", e.summary());
        }
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
                "  {:<16} {:<16} {:<8} {:<7} {:<8} {:<8} {}{}",
                m.id,
                m.name,
                m.seed,
                if m.is_learner { "learner" } else { "voter" },
                if m.healthy { "healthy" } else { "UNHEALTHY" },
                m.version.as_deref().unwrap_or("-"),
                if m.is_leader { "leader" } else { "" },
                m.error
                    .as_ref()
                    .map(|e| format!("  ({e})"))
                    .unwrap_or_default()
            );
        }
        let _ = writeln!(
            o,
            "\nSHOOT API {} ({} server, {}, exposure {})",
            self.api.name,
            self.api.server,
            self.api.version.as_deref().unwrap_or("version unknown"),
            self.api.exposure
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
        if let Some(g) = &self.garden {
            let _ = writeln!(
                o,
                "\nGARDEN {} (gardener-apiserver {})\n  shoot {}: spec.seedName {}, status.seedName {}{}",
                g.api,
                g.gardener_version,
                g.shoot,
                g.spec_seed.as_deref().unwrap_or("-"),
                g.status_seed.as_deref().unwrap_or("-"),
                g.error
                    .as_ref()
                    .map(|e| format!("\n  the garden did not answer: {e}; the conditions below are the lab's cache"))
                    .unwrap_or_default()
            );
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
            "\nMIGRATION {} -> {} ({}, order {}, leader handover {}, gateway handover {}, driver {:?}{}){}",
            self.from,
            self.to,
            self.plan,
            self.order,
            self.leader_handover,
            self.gateway_handover,
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
        if let Some(g) = &self.rtt_gate {
            let _ = writeln!(o, "  {g}");
        }
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
