//! `cpmlab agent <role>`: the roles that run inside lab containers.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Subcommand;

use crate::print_json_line;
use cpmlab_core::errors::BadInput;

/// The probe agent: against the lab's shoot API (`--api-name`, `--dns`,
/// `--ca`, `--token-file`: inside the lab) or any API server a kubeconfig
/// names (`--kubeconfig`: from the host, `cpmlab probe start --kubeconfig`).
#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    #[arg(long, conflicts_with_all = ["api_name", "dns", "ca", "token_file"])]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig's context (default: its current context).
    #[arg(long, requires = "kubeconfig")]
    context: Option<String>,
    #[arg(long, required_unless_present = "kubeconfig")]
    api_name: Option<String>,
    #[arg(long, default_value_t = 443)]
    port: u16,
    /// The lab DNS server (ip:port).
    #[arg(long, required_unless_present = "kubeconfig")]
    dns: Option<std::net::SocketAddr>,
    #[arg(long, required_unless_present = "kubeconfig")]
    ca: Option<PathBuf>,
    #[arg(long, required_unless_present = "kubeconfig")]
    token_file: Option<PathBuf>,
    /// The namespace of the probes' objects.
    #[arg(long, default_value = cpmlab_probe::agent::NAMESPACE)]
    namespace: String,
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    settings: cpmlab_probe::run::ProbeSettings,
    /// seed=gateway-ip pairs, to name the seed when the server does not
    /// (and the way each seed's leader-election candidate goes).
    #[arg(long, default_value = "")]
    seed_gateways: String,
    /// `cpmlab-clientgo`, for the informer-go lane and the candidates.
    #[arg(long)]
    clientgo: Option<PathBuf>,
    /// The shoot node's apiserver-proxy (ip:port), for the `node` lane.
    #[arg(long)]
    node: Option<std::net::SocketAddr>,
    /// The shoot API's seed-bound name, for the `seed-bound` lane.
    #[arg(long)]
    seed_bound_name: Option<String>,
}

impl ProbeArgs {
    fn target(&self) -> Result<cpmlab_probe::target::Target> {
        use cpmlab_probe::target::{from_kubeconfig, Target};
        match (
            &self.kubeconfig,
            &self.api_name,
            self.dns,
            &self.ca,
            &self.token_file,
        ) {
            (Some(k), ..) => Ok(from_kubeconfig(k, self.context.as_deref())?),
            (None, Some(name), Some(dns), Some(ca), Some(token)) => {
                Target::lab(name, self.port, dns, ca, token)
            }
            _ => Err(BadInput(
                "give --kubeconfig, or --api-name, --dns, --ca and --token-file".into(),
            )
            .into()),
        }
    }
}

/// client-go's lanes as the agent's flags ask for them.
fn clientgo_lanes(
    a: &ProbeArgs,
    p: &cpmlab_probe::run::Parsed,
    seeds_by_addr: &[(std::net::Ipv4Addr, String)],
) -> Result<Option<cpmlab_probe::clientgo::ClientGo>> {
    use cpmlab_probe::record::ProbeKind;
    let informer = p.probes.contains(&ProbeKind::InformerGo);
    if !informer && p.candidates.is_empty() {
        return Ok(None);
    }
    let bin = a.clientgo.clone().ok_or_else(|| {
        BadInput("--probes informer-go and --candidates need --clientgo (cpmlab-clientgo)".into())
    })?;
    let candidates = p
        .candidates
        .iter()
        .map(|seed| {
            seeds_by_addr
                .iter()
                .find(|(_, s)| s == seed)
                .map(|(ip, _)| (seed.clone(), *ip))
                .ok_or_else(|| {
                    BadInput(format!(
                        "--candidates: `{seed}` has no gateway in --seed-gateways"
                    ))
                })
        })
        .collect::<Result<Vec<_>, BadInput>>()?;
    let control = a
        .out
        .parent()
        .map(|d| d.join(cpmlab_probe::clientgo::CONTROL_FILE))
        .unwrap_or_else(|| PathBuf::from(cpmlab_probe::clientgo::CONTROL_FILE));
    Ok(Some(cpmlab_probe::clientgo::ClientGo {
        bin,
        informer,
        candidates,
        start: p.start_candidates.clone(),
        timings: p.lease,
        control,
        kubeconfig: a.kubeconfig.clone(),
        node: a
            .node
            .filter(|_| p.modes.contains(&cpmlab_probe::record::ConnMode::Node)),
    }))
}

#[derive(clap::Args, Debug)]
pub struct ApiserverArgs {
    #[arg(long, default_value = "0.0.0.0:443")]
    listen: std::net::SocketAddr,
    #[arg(long)]
    cert: PathBuf,
    #[arg(long)]
    key: PathBuf,
    /// File holding the bearer token clients must present.
    #[arg(long)]
    token_file: PathBuf,
    /// Comma-separated etcd client URLs (its own seed's members only).
    #[arg(long, value_delimiter = ',', required = true)]
    etcd_servers: Vec<String>,
    #[arg(long)]
    etcd_ca: Option<PathBuf>,
    #[arg(long)]
    etcd_cert: Option<PathBuf>,
    #[arg(long)]
    etcd_key: Option<PathBuf>,
    /// Serving goes on this long after /readyz starts failing (Gardener sets 15 s).
    #[arg(long, default_value = "15s")]
    shutdown_delay: String,
    #[arg(long, default_value = "")]
    seed: String,
    #[arg(long, default_value = "standin")]
    name: String,
    #[arg(long, default_value = "")]
    advertise: String,
}

#[derive(Subcommand, Debug)]
pub enum AgentCommand {
    /// The wan router's delay line (userspace link shaping over TUN).
    Router {
        #[arg(long, default_value = cpmlab_lab::link::DELAYLINE_CONFIG)]
        config: PathBuf,
    },
    /// The stand-in API server (used where the real kube-apiserver is absent).
    Apiserver(Box<ApiserverArgs>),
    /// Continuous probe clients of the shoot API (NDJSON records).
    Probe(Box<ProbeArgs>),
    /// A seed's gateway: Envoy, with the endpoint lifecycle of the API
    /// replicas (probes, endpoints, debounced pushes) and pilot-agent's drain.
    Gateway {
        #[arg(long, default_value = cpmlab_lab::gateway::INPUT)]
        input: PathBuf,
    },
    /// A TCP connection to a lab address over stdin and stdout (the host's
    /// way into the lab where it cannot reach the lab's networks).
    Relay {
        to: std::net::SocketAddr,
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
    },
    /// Echo UDP datagrams and TCP bytes (far end of `agent rtt`).
    Echo {
        #[arg(long, default_value = "0.0.0.0:7007")]
        listen: std::net::SocketAddr,
    },
    /// Resolve an etcd peer URL's host through the lab DNS, time TCP
    /// connects to it and check the certificate behind its SNI route.
    PeerCheck {
        /// The peer URL's host name (sent as SNI).
        #[arg(long)]
        host: String,
        #[arg(long, default_value_t = 2380)]
        port: u16,
        /// The lab's DNS server.
        #[arg(long)]
        dns: std::net::IpAddr,
        #[arg(long, default_value_t = 5)]
        count: u32,
        #[arg(long, default_value_t = 3000)]
        timeout_ms: u64,
    },
    /// Measure round trips to `agent echo`; prints one JSON line.
    Rtt {
        #[arg(long)]
        target: std::net::SocketAddr,
        #[arg(long, value_enum, default_value = "udp")]
        proto: cpmlab_lab::agent::rtt::Proto,
        #[arg(long, default_value_t = 1000)]
        count: u32,
        /// Time between probes in microseconds (1000 = 1000 probes/s).
        #[arg(long, default_value_t = 1000)]
        interval_us: u64,
        /// How long to wait for a reply, in milliseconds.
        #[arg(long, default_value_t = 1000)]
        timeout_ms: u64,
        #[arg(long, default_value_t = 64)]
        size: usize,
        /// Print every UDP probe (sequence, send time, round trip or lost).
        #[arg(long)]
        samples: bool,
    },
    /// A seed's gardenlet for Live CPM: it reports its Seed to the garden,
    /// and runs the migration steps its seed owns, writing their conditions
    /// on the garden's Shoot (docs/migration.md).
    Gardenlet {
        /// The lab.
        #[arg(long)]
        name: String,
        /// The seed this gardenlet runs in.
        #[arg(long)]
        seed: String,
        /// The lab's state root (mounted at the same path as on the host).
        #[arg(long)]
        state_dir: PathBuf,
        /// Run as an external driver's gardenlet: act on a migration the
        /// Shoot leaves to one (`cpmlab migrate --driver external`), where
        /// the lab's own gardenlets stand aside.
        #[arg(long)]
        external: bool,
        /// The garden's kubeconfig to authenticate with (a kind seed's
        /// gardenlet has it from a Secret in its pod); without it, the
        /// gardenlet's client certificate in the lab's state directory.
        #[arg(long, env = "CPMLAB_GARDEN_KUBECONFIG")]
        garden_kubeconfig: Option<PathBuf>,
    },
    /// The privileged adapter: `docker` with kind's `--privileged` replaced
    /// by what this host can grant (provider-kind/src/adapter.rs).
    DockerAdapter {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn run_blocking(command: AgentCommand) -> Result<u8> {
    match command {
        AgentCommand::Router { config } => cpmlab_lab::agent::router::run(&config).map(|_| 0),
        AgentCommand::Echo { listen } => cpmlab_lab::agent::echo::run(listen).map(|_| 0),
        AgentCommand::Relay { to, timeout_ms } => {
            cpmlab_lab::agent::relay::run(to, Duration::from_millis(timeout_ms)).map(|_| 0)
        }
        AgentCommand::DockerAdapter { args } => cpmlab_provider_kind::adapter::run(&args),
        AgentCommand::Apiserver(_)
        | AgentCommand::Gardenlet { .. }
        | AgentCommand::Probe(_)
        | AgentCommand::PeerCheck { .. }
        | AgentCommand::Gateway { .. } => {
            unreachable!("these agents run on the async runtime")
        }
        AgentCommand::Rtt {
            target,
            proto,
            count,
            interval_us,
            timeout_ms,
            size,
            samples,
        } => {
            let report = cpmlab_lab::agent::rtt::run(&cpmlab_lab::agent::rtt::RttConfig {
                target,
                proto,
                count,
                interval: Duration::from_micros(interval_us),
                timeout: Duration::from_millis(timeout_ms),
                size,
                samples,
            })?;
            print_json_line(&report);
            Ok(if report.errors.is_empty() { 0 } else { 1 })
        }
    }
}

pub async fn run(command: AgentCommand) -> Result<u8> {
    match command {
        AgentCommand::Apiserver(a) => {
            let a = *a;
            let shutdown_delay =
                cpmlab_lab::link::profile::parse_duration("--shutdown-delay", &a.shutdown_delay)?;
            cpmlab_core::apiserver::run(cpmlab_core::apiserver::ApiServerConfig {
                listen: a.listen,
                cert: a.cert,
                key: a.key,
                token_file: a.token_file,
                etcd_servers: a.etcd_servers,
                etcd_ca: a.etcd_ca,
                etcd_cert: a.etcd_cert,
                etcd_key: a.etcd_key,
                shutdown_delay,
                seed: a.seed,
                name: a.name,
                advertise: a.advertise,
            })
            .await?;
            Ok(0)
        }
        AgentCommand::Probe(a) => {
            let parsed = a.settings.parse()?;
            let seeds_by_addr = a
                .seed_gateways
                .split(',')
                .filter(|x| !x.is_empty())
                .map(|pair| {
                    let (s, ip) = pair.split_once('=').ok_or_else(|| {
                        BadInput(format!("--seed-gateways: `{pair}` is not seed=ip"))
                    })?;
                    let ip = ip.parse().map_err(|_| {
                        BadInput(format!("--seed-gateways: `{ip}` is not an IPv4 address"))
                    })?;
                    Ok((ip, s.to_string()))
                })
                .collect::<Result<Vec<_>, BadInput>>()?;
            let clientgo = clientgo_lanes(&a, &parsed, &seeds_by_addr)?;
            if parsed.modes.contains(&cpmlab_probe::record::ConnMode::Node) && a.node.is_none() {
                return Err(BadInput(
                    "--modes node: give --node, the shoot node's apiserver-proxy (ip:port)".into(),
                )
                .into());
            }
            if parsed
                .modes
                .contains(&cpmlab_probe::record::ConnMode::SeedBound)
                && a.seed_bound_name.is_none()
            {
                return Err(BadInput(
                    "--modes seed-bound: give --seed-bound-name, the shoot API's name under the serving seed's ingress domain".into(),
                )
                .into());
            }
            cpmlab_probe::agent::run(cpmlab_probe::agent::ProbeConfig {
                clientgo,
                target: a.target()?,
                namespace: a.namespace,
                out: a.out,
                rate: parsed.rate,
                timeout: parsed.timeout,
                probes: parsed.probes,
                modes: parsed.modes,
                late_dns: parsed.late_dns,
                write_rate: parsed.write_rate,
                write_bytes: parsed.write_bytes,
                seeds_by_addr,
                node: a.node,
                seed_bound_name: a.seed_bound_name,
            })
            .await?;
            Ok(0)
        }
        AgentCommand::PeerCheck {
            host,
            port,
            dns,
            count,
            timeout_ms,
        } => {
            let report = cpmlab_lab::agent::peer_check::run(
                &cpmlab_lab::agent::peer_check::PeerCheckConfig {
                    host,
                    port,
                    dns,
                    count,
                    timeout: Duration::from_millis(timeout_ms),
                },
            )
            .await;
            print_json_line(&report);
            Ok(if report.ok() { 0 } else { 1 })
        }
        AgentCommand::Gateway { input } => {
            cpmlab_lab::gateway::agent::run(cpmlab_lab::gateway::agent::Paths {
                input,
                ..Default::default()
            })
            .await
        }
        AgentCommand::Gardenlet {
            name,
            seed,
            state_dir,
            external,
            garden_kubeconfig,
        } => {
            crate::check_name(&name)?;
            let dir = cpmlab_model::state::LabDir::new(&state_dir, &name);
            let state = dir.load()?;
            let provider = cpmlab_runner::provider::for_lab(&state).await?;
            let cancel = cpmlab_core::errors::Cancel::default();
            let run = cpmlab_lab::migrate::gardenlet::run(
                provider.as_ref(),
                dir,
                cpmlab_lab::migrate::gardenlet::Options {
                    seed,
                    external,
                    garden_kubeconfig,
                },
                cancel.clone(),
            );
            tokio::pin!(run);
            tokio::select! {
                r = &mut run => r.map(|_| 0),
                _ = crate::interrupted() => { cancel.cancel(); run.await.map(|_| 0).or(Ok(0)) }
            }
        }
        // These agents are synchronous loops: give them a thread.
        command => tokio::task::spawn_blocking(move || run_blocking(command)).await?,
    }
}
