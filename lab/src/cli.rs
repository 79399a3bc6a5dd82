//! The `cpmlab` command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

use crate::errors::{exit_code, BadInput, Cancel, Interrupted, EXIT_INTERRUPTED};
use crate::progress::{Mode, Progress};
use crate::provider::docker::engine::Engine;
use crate::provider::docker::{down, images, up};
use crate::topology::{check_label, Topology};

#[derive(Parser, Debug)]
#[command(
    name = "cpmlab",
    version,
    about = "Local dual-seed lab for Gardener's Live Control Plane Migration",
    long_about = "Builds two seeds with a real TLS etcd cluster, DNS and SNI gateways, \
                  joined only through a wan router, to test Live Control Plane Migration.\n\n\
                  Exit status: 0 ok, 1 failed, 2 bad input, 3 environment not ready."
)]
pub struct Cli {
    /// Directory holding each lab's state (state.json, CA, client certificates).
    #[arg(
        long,
        global = true,
        env = "CPMLAB_STATE_DIR",
        default_value = ".cpmlab"
    )]
    pub state_dir: PathBuf,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
}

#[derive(clap::Args, Debug, Clone)]
pub struct LabArgs {
    /// Lab name: prefixes every Docker object and labels it `cpmlab.lab=<NAME>`.
    #[arg(long, env = "CPMLAB_NAME", default_value = "cpmlab")]
    pub name: String,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Build the lab: networks, wan router, gateways, etcd, DNS.
    Up {
        #[command(flatten)]
        lab: LabArgs,
        /// Topology file (YAML); defaults to two seeds and three etcd members.
        #[arg(long)]
        topology: Option<PathBuf>,
        /// Keep what was created when `up` fails (for debugging).
        #[arg(long)]
        retain: bool,
    },
    /// Show the lab as it is now: containers, etcd members, DNS.
    Status {
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Remove every object of the lab (also after a crashed `up`).
    Down {
        #[command(flatten)]
        lab: LabArgs,
        /// Remove every cpmlab lab on this Docker engine.
        #[arg(long)]
        all: bool,
    },
    /// Check this host: Docker, images, kernel qdiscs, optional tools.
    Doctor {
        #[arg(short = 'o', long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Continuous probe clients of the shoot API, and their verdict.
    Probe {
        #[command(subcommand)]
        command: ProbeCommand,
    },
    /// Migrate the shoot's control plane to the other seed (Live CPM), or
    /// resume or abort a migration.
    Migrate(Box<MigrateArgs>),
    /// Write a kubeconfig for the shoot API and print its path.
    Kubeconfig {
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Shape the links between the lab's networks (applied in the wan router).
    Link {
        #[command(subcommand)]
        command: LinkCommand,
    },
    /// Roles that run inside lab containers.
    #[command(hide = true)]
    Agent {
        #[command(subcommand)]
        command: AgentCommand,
    },
    /// Lab images.
    Images {
        #[command(subcommand)]
        command: ImagesCommand,
    },
}

#[derive(clap::Args, Debug)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub lab: LabArgs,
    /// etcd membership plan: six-member (3 join, 6 voters) or five-member
    /// (2 join, 5 voters; the third joins once the API has moved).
    #[arg(long, value_enum, default_value = "six-member")]
    pub plan: crate::migrate::membership::Plan,
    /// Source seed (default: the seed holding the shoot's etcd).
    #[arg(long)]
    pub from: Option<String>,
    /// Destination seed (default: the other seed).
    #[arg(long)]
    pub to: Option<String>,
    /// Go on with the migration in the state file (after a kill or a failure).
    #[arg(long, conflicts_with_all = ["abort", "plan", "from", "to"])]
    pub resume: bool,
    /// Abort: allowed only while DestinationEtcdPeersJoined is False.
    #[arg(long, conflicts_with_all = ["force_shrink_etcd", "stop_after"])]
    pub abort: bool,
    /// Remove the source members before the destination API server starts
    /// and switch DNS at once (the GEP's escape hatch; costs downtime).
    #[arg(long)]
    pub force_shrink_etcd: bool,
    /// Migrate even when the seeds' RTT exceeds --max-rtt.
    #[arg(long)]
    pub allow_distant_regions: bool,
    /// The largest RTT between the seeds a migration accepts.
    #[arg(long, default_value = "180ms")]
    pub max_rtt: String,
    /// How long a destination member may take to join and catch up.
    #[arg(long, default_value = "120s")]
    pub join_timeout: String,
    /// Stop once this step is True (go on with --resume).
    #[arg(long, value_name = "CONDITION_TYPE")]
    pub stop_after: Option<String>,
    /// reference: cpmlab's controller; external: --command does the migration.
    #[arg(long, value_enum, default_value = "reference")]
    pub driver: crate::migrate::record::Driver,
    /// The external driver's command (run with `sh -c`).
    #[arg(long, required_if_eq("driver", "external"))]
    pub command: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum LinkCommand {
    /// Set delay, jitter, loss and rate on a link, e.g. `seed-a:seed-b --delay 25ms`.
    Set {
        /// Two networks: seed-a:seed-b, clients:seed-a, clients:seed-b.
        pair: String,
        /// One-way delay (25ms, 1.5ms, 500us, 0).
        #[arg(long, default_value = "0", allow_hyphen_values = true)]
        delay: String,
        /// Jitter around the delay.
        #[arg(long, default_value = "0", allow_hyphen_values = true)]
        jitter: String,
        /// Distribution of the jitter.
        #[arg(long, value_enum, default_value = "normal")]
        distribution: crate::link::profile::Distribution,
        /// Packet loss (0.5%).
        #[arg(long, default_value = "0%", allow_hyphen_values = true)]
        loss: String,
        /// Rate limit (100mbit, 1gbit).
        #[arg(long, allow_hyphen_values = true)]
        rate: Option<String>,
        #[arg(long, value_enum, default_value = "both")]
        direction: crate::link::profile::Direction,
        #[arg(long, value_enum, default_value = "auto")]
        backend: crate::link::BackendChoice,
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Drop everything on a link (works on every kernel).
    Partition {
        pair: String,
        #[arg(long, value_enum, default_value = "both")]
        direction: crate::link::profile::Direction,
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Undo a partition (shaping stays as set).
    Heal {
        pair: String,
        #[arg(long, value_enum, default_value = "both")]
        direction: crate::link::profile::Direction,
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Remove every profile and partition (or those of one pair).
    Clear {
        pair: Option<String>,
        #[arg(long, value_enum, default_value = "auto")]
        backend: crate::link::BackendChoice,
        #[command(flatten)]
        lab: LabArgs,
    },
    /// The profile in force per directed pair, and the backend.
    Show {
        #[command(flatten)]
        lab: LabArgs,
    },
}

#[derive(Subcommand, Debug)]
pub enum ProbeCommand {
    /// Start the probe agent on the clients network.
    Start {
        #[command(flatten)]
        lab: LabArgs,
        #[command(flatten)]
        settings: crate::probe::run::ProbeSettings,
    },
    /// Stop the probes and write verdict.json, junit.xml and report.html.
    /// Exits 1 when the verdict failed.
    Stop {
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Whether probes run, and how the run looks so far.
    Status {
        #[command(flatten)]
        lab: LabArgs,
    },
}

#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    #[arg(long)]
    api_name: String,
    #[arg(long, default_value_t = 443)]
    port: u16,
    /// The lab DNS server (ip:port).
    #[arg(long)]
    dns: std::net::SocketAddr,
    #[arg(long)]
    ca: PathBuf,
    #[arg(long)]
    token_file: PathBuf,
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    settings: crate::probe::run::ProbeSettings,
    /// seed=gateway-ip pairs, to name the seed when the server does not.
    #[arg(long, default_value = "")]
    seed_gateways: String,
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
        #[arg(long, default_value = crate::link::DELAYLINE_CONFIG)]
        config: PathBuf,
    },
    /// The stand-in API server (used where the real kube-apiserver is absent).
    Apiserver(Box<ApiserverArgs>),
    /// Continuous probe clients of the shoot API (NDJSON records).
    Probe(Box<ProbeArgs>),
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
        proto: crate::agent::rtt::Proto,
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
    },
}

#[derive(Subcommand, Debug)]
pub enum ImagesCommand {
    /// Build the lab image from host binaries (cached by content).
    Build {
        #[arg(short = 'o', long, value_enum, default_value = "text")]
        output: Output,
    },
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit_code(&e))
        }
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn check_name(name: &str) -> Result<()> {
    check_label(name, 20).map_err(|m| BadInput(format!("--name: {m}")))?;
    Ok(())
}

/// One compact line: the last event of a command whose progress is NDJSON.
fn print_json_line<T: serde::Serialize>(v: &T) {
    println!("{}", serde_json::to_string(v).expect("serialisable output"));
}

fn print_json<T: serde::Serialize>(v: &T) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).expect("serialisable output")
    );
}

/// Resolves on Ctrl-C or SIGTERM.
async fn interrupted() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

async fn run(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Up {
            lab,
            topology,
            retain,
        } => cmd_up(&cli.state_dir, &lab, topology.as_deref(), retain).await,
        Command::Status { lab } => {
            check_name(&lab.name)?;
            let engine = Engine::connect().await?;
            let report = crate::status::status(&engine, &cli.state_dir, &lab.name).await?;
            match lab.output {
                Output::Json => print_json(&report),
                Output::Text => print!("{}", report.render()),
            }
            Ok(0)
        }
        Command::Down { lab, all } => {
            check_name(&lab.name)?;
            let engine = Engine::connect().await?;
            let labs = if all {
                down::all_labs(&engine, &cli.state_dir).await?
            } else {
                vec![lab.name.clone()]
            };
            let progress = Progress::new(Mode::detect(lab.output == Output::Json));
            let mut reports = Vec::new();
            for l in labs {
                let step = progress.step(format!("remove lab {l}"));
                let r = down::down(&engine, &l, &cli.state_dir).await?;
                step.done_with(&format!(
                    "{} containers, {} networks, {} volumes",
                    r.removed.containers.len(),
                    r.removed.networks.len(),
                    r.removed.volumes.len()
                ));
                reports.push(r);
            }
            if lab.output == Output::Json {
                print_json_line(&serde_json::json!({"event": "down", "labs": reports}));
            }
            Ok(0)
        }
        Command::Doctor { output } => {
            let report = crate::doctor::doctor().await;
            match output {
                Output::Json => print_json(&report),
                Output::Text => print!("{}", report.render()),
            }
            Ok(if report.ready() {
                0
            } else {
                crate::errors::EXIT_ENV
            })
        }
        Command::Link { command } => cmd_link(&cli.state_dir, command).await,
        Command::Migrate(args) => cmd_migrate(&cli.state_dir, *args).await,
        Command::Probe { command } => cmd_probe(&cli.state_dir, command).await,
        Command::Kubeconfig { lab } => {
            check_name(&lab.name)?;
            let (dir, state) = crate::status::load_lab(&cli.state_dir, &lab.name)?;
            let path = crate::kubeconfig::write(&dir, &state).await?;
            println!("{}", path.display());
            Ok(0)
        }
        Command::Agent {
            command: AgentCommand::Apiserver(a),
        } => {
            let a = *a;
            let shutdown_delay =
                crate::link::profile::parse_duration("--shutdown-delay", &a.shutdown_delay)?;
            crate::apiserver::run(crate::apiserver::ApiServerConfig {
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
        Command::Agent {
            command: AgentCommand::Probe(a),
        } => {
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
            crate::probe::agent::run(crate::probe::agent::ProbeConfig {
                api_name: a.api_name,
                port: a.port,
                dns: a.dns,
                ca: a.ca,
                token_file: a.token_file,
                out: a.out,
                rate: parsed.rate,
                timeout: parsed.timeout,
                probes: parsed.probes,
                modes: parsed.modes,
                seeds_by_addr,
            })
            .await?;
            Ok(0)
        }
        Command::Agent {
            command:
                AgentCommand::PeerCheck {
                    host,
                    port,
                    dns,
                    count,
                    timeout_ms,
                },
        } => {
            let report =
                crate::agent::peer_check::run(&crate::agent::peer_check::PeerCheckConfig {
                    host,
                    port,
                    dns,
                    count,
                    timeout: Duration::from_millis(timeout_ms),
                })
                .await;
            print_json_line(&report);
            Ok(if report.ok() { 0 } else { 1 })
        }
        Command::Agent { command } => {
            // These agents are synchronous loops: give them a thread.
            tokio::task::spawn_blocking(move || cmd_agent(command)).await?
        }
        Command::Images {
            command: ImagesCommand::Build { output },
        } => {
            let engine = Engine::connect().await?;
            let progress = Progress::new(Mode::detect(output == Output::Json));
            let step = progress.step("lab image");
            let (tag, built) = images::ensure(&engine).await?;
            step.done_with(if built { "built" } else { "cached" });
            match output {
                Output::Json => print_json_line(&serde_json::json!({"image": tag, "built": built})),
                Output::Text => println!("{tag}"),
            }
            Ok(0)
        }
    }
}

async fn cmd_up(
    state_root: &Path,
    lab: &LabArgs,
    topology: Option<&Path>,
    retain: bool,
) -> Result<u8> {
    // All input is checked before anything is created.
    check_name(&lab.name)?;
    let topology = match topology {
        Some(p) => Topology::load(p)?,
        None => Topology::default(),
    };
    let engine = Engine::connect().await?;
    let progress = Progress::new(Mode::detect(lab.output == Output::Json));
    let req = up::UpRequest {
        lab: lab.name.clone(),
        topology,
        state_root: state_root.to_path_buf(),
        cancel: Cancel::default(),
    };
    if let Some(state) = up::preflight(&engine, &req).await? {
        progress.note(&format!(
            "lab `{}` is already up; nothing to do",
            state.name
        ));
        if lab.output == Output::Json {
            print_json(
                &serde_json::json!({"event": "up", "lab": state.name, "result": "already-up"}),
            );
        }
        return Ok(0);
    }
    let started = std::time::Instant::now();
    // On Ctrl-C the current step finishes (no request is left in flight),
    // then everything is removed; a second Ctrl-C stops waiting for the step.
    let create = up::create(&engine, &req, &progress);
    tokio::pin!(create);
    let result = tokio::select! {
        r = &mut create => r,
        _ = interrupted() => {
            progress.note("interrupted: stopping after the current step, then removing the lab");
            req.cancel.cancel();
            tokio::select! {
                r = &mut create => r,
                _ = interrupted() => Err(Interrupted.into()),
            }
        }
    };
    let cleanup = |why: &str| {
        progress.note(&format!(
            "{why}: removing what `up` created for lab `{}`",
            req.lab
        ));
    };
    match result {
        Ok(state) => {
            let secs = started.elapsed().as_secs_f64();
            match lab.output {
                Output::Json => print_json_line(&serde_json::json!({
                    "event": "up", "lab": state.name, "result": "created", "elapsed_s": secs,
                })),
                Output::Text => {
                    progress.note(&format!(
                        "lab `{}` is up in {secs:.1}s; shoot API name {} (DNS {}); see `cpmlab status --name {}`",
                        state.name, state.dns.api_name, state.dns.server.ip, state.name
                    ));
                }
            }
            Ok(0)
        }
        Err(e) if exit_code(&e) == EXIT_INTERRUPTED => {
            cleanup("interrupted");
            // Let requests already sent to the engine land before sweeping.
            tokio::time::sleep(Duration::from_millis(300)).await;
            down::down(&engine, &req.lab, state_root)
                .await
                .context("cleaning up after an interrupted up")?;
            Ok(EXIT_INTERRUPTED)
        }
        Err(e) => {
            if retain {
                progress.note(&format!(
                    "kept the half-built lab for debugging (--retain); remove it with `cpmlab down --name {}`",
                    req.lab
                ));
            } else {
                cleanup("up failed");
                down::down(&engine, &req.lab, state_root)
                    .await
                    .context("cleaning up after a failed up")?;
            }
            Err(e)
        }
    }
}

async fn cmd_migrate(state_root: &Path, a: MigrateArgs) -> Result<u8> {
    use crate::migrate::flow::{self, Ended, Flow, StartOptions};
    use crate::migrate::record::Driver;
    // Every flag is checked before anything is looked at or changed.
    check_name(&a.lab.name)?;
    let max_rtt = crate::link::profile::parse_duration("--max-rtt", &a.max_rtt)?;
    let join_timeout = crate::link::profile::parse_duration_max(
        "--join-timeout",
        &a.join_timeout,
        Duration::from_secs(3600),
    )?;
    if let Some(s) = &a.stop_after {
        if !crate::migrate::conditions::STEPS.contains(&s.as_str()) {
            return Err(BadInput(format!(
                "--stop-after: unknown condition type `{s}` (one of {})",
                crate::migrate::conditions::STEPS.join(", ")
            ))
            .into());
        }
    }
    if a.driver == Driver::External && (a.resume || a.abort || a.force_shrink_etcd) {
        return Err(BadInput(
            "--driver external runs the given command; --resume, --abort and --force-shrink-etcd belong to the reference driver".into(),
        )
        .into());
    }
    let (dir, state) = crate::status::load_lab(state_root, &a.lab.name)?;
    let holding = state
        .seeds
        .iter()
        .find(|s| state.members_of(&s.name).next().is_some())
        .map(|s| s.name.clone());
    let from = a
        .from
        .clone()
        .or(holding)
        .unwrap_or_else(|| state.seeds[0].name.clone());
    let to = a.to.clone().unwrap_or_else(|| {
        state
            .seeds
            .iter()
            .find(|s| s.name != from)
            .map(|s| s.name.clone())
            .unwrap_or_default()
    });
    let engine = Engine::connect().await?;
    let progress = Progress::new(Mode::detect(a.lab.output == Output::Json));
    let cancel = Cancel::default();
    // An external driver's run leaves a record, never a migration to resume.
    let in_progress = state
        .migration
        .as_ref()
        .filter(|m| !m.completed() && m.driver == Driver::Reference);

    if a.driver == Driver::External {
        if let Some(m) = in_progress {
            return Err(BadInput(format!(
                "a reference migration {} -> {} is in progress; finish it (--resume) or abort it first",
                m.from, m.to
            ))
            .into());
        }
        flow::check_seeds(&state, &from, &to).or_else(|e| {
            if a.from.is_some() {
                Err(e)
            } else {
                Ok(())
            }
        })?;
        let command = a.command.clone().expect("clap requires --command");
        progress.note(&format!("external driver: `{command}`"));
        let run = crate::migrate::external::run(&dir, state_root, &command, &from, &to, &cancel);
        tokio::pin!(run);
        let code = tokio::select! {
            r = &mut run => r?,
            _ = interrupted() => { cancel.cancel(); run.await? }
        };
        if a.lab.output == Output::Json {
            print_json_line(
                &serde_json::json!({"event": "migrate", "driver": "external", "exit": code}),
            );
        }
        if code != 0 {
            anyhow::bail!("the external driver `{command}` exited {code}");
        }
        progress.note("the external driver finished; `cpmlab probe stop` judges the run");
        return Ok(0);
    }

    let mut f = Flow::new(
        &engine,
        dir,
        state.clone(),
        &progress,
        cancel.clone(),
        join_timeout,
    )?;
    if a.abort {
        f.abort().await?;
        if a.lab.output == Output::Json {
            print_json_line(&serde_json::json!({"event": "migrate", "result": "aborted"}));
        }
        return Ok(0);
    }
    if a.resume {
        f.resume(a.force_shrink_etcd)?;
    } else {
        if let Some(m) = in_progress {
            return Err(BadInput(format!(
                "a migration {} -> {} is in progress (next: {}); run `cpmlab migrate --resume`{}",
                m.from,
                m.to,
                m.conditions.next_step().unwrap_or("-"),
                if m.conditions.failed().is_some() {
                    " or `cpmlab migrate --abort`"
                } else {
                    ""
                }
            ))
            .into());
        }
        let rtt = f
            .begin(&StartOptions {
                plan: a.plan,
                from: from.clone(),
                to: to.clone(),
                force_shrink: a.force_shrink_etcd,
                max_rtt_ms: max_rtt.as_secs_f64() * 1e3,
                allow_distant_regions: a.allow_distant_regions,
            })
            .await?;
        progress.note(&format!(
            "migrating lab `{}` from `{from}` to `{to}` ({}{}); RTT between the seeds {rtt:.1} ms",
            a.lab.name,
            flow::plan_name(a.plan),
            if a.force_shrink_etcd {
                ", force-shrink"
            } else {
                ""
            }
        ));
    }
    let started = std::time::Instant::now();
    let result = {
        let run = f.run(a.stop_after.as_deref());
        tokio::pin!(run);
        tokio::select! {
            r = &mut run => r,
            _ = interrupted() => {
                progress.note("interrupted: stopping at the next safe point; `cpmlab migrate --resume` goes on");
                cancel.cancel();
                run.await
            }
        }
    };
    let mig = f.state().migration.clone();
    let conditions = mig
        .as_ref()
        .map(crate::status::MigrationStatus::of)
        .map(|m| serde_json::to_value(m).unwrap_or_default());
    match result {
        Ok(ended) => {
            if a.lab.output == Output::Json {
                print_json_line(&serde_json::json!({
                    "event": "migrate",
                    "result": match &ended { Ended::Completed => "completed".to_string(), Ended::StoppedAfter(s) => format!("stopped-after {s}") },
                    "elapsed_s": started.elapsed().as_secs_f64(),
                    "migration": conditions,
                }));
            } else {
                match ended {
                    Ended::Completed => progress.note(&format!(
                        "migrated: the control plane of lab `{}` runs in `{}` ({:.1} s); conditions in `cpmlab status`",
                        a.lab.name,
                        mig.map(|m| m.to).unwrap_or_default(),
                        started.elapsed().as_secs_f64()
                    )),
                    Ended::StoppedAfter(s) => progress.note(&format!(
                        "stopped after {s} as asked; `cpmlab migrate --resume` goes on"
                    )),
                }
            }
            Ok(0)
        }
        Err(e) => Err(e),
    }
}

async fn cmd_link(state_root: &Path, command: LinkCommand) -> Result<u8> {
    use crate::link::profile::{self, key, Direction, LinkProfile, Pair};
    use crate::link::{apply, view, Backend, BackendChoice};

    let lab = match &command {
        LinkCommand::Set { lab, .. }
        | LinkCommand::Partition { lab, .. }
        | LinkCommand::Heal { lab, .. }
        | LinkCommand::Clear { lab, .. }
        | LinkCommand::Show { lab } => lab.clone(),
    };
    check_name(&lab.name)?;
    let (dir, mut state) = crate::status::load_lab(state_root, &lab.name)?;
    let nets: Vec<String> = state.networks.iter().map(|n| n.name.clone()).collect();
    let mut links = state.links.clone();
    let mut edit = |pair: &str, dir: Direction, f: &dyn Fn(&mut LinkProfile)| -> Result<()> {
        let pair = Pair::parse(pair, &nets)?;
        for (a, b) in pair.directed(dir) {
            let p = links.entry(key(&a, &b)).or_default();
            f(p);
        }
        Ok(())
    };
    // Every input is checked before anything changes.
    let backend_choice = match &command {
        LinkCommand::Set {
            pair,
            delay,
            jitter,
            distribution,
            loss,
            rate,
            direction,
            backend,
            ..
        } => {
            let new = LinkProfile {
                delay: profile::parse_duration("--delay", delay)?,
                jitter: profile::parse_duration("--jitter", jitter)?,
                distribution: *distribution,
                loss_pct: profile::parse_percent("--loss", loss)?,
                rate_bps: rate
                    .as_deref()
                    .map(|r| profile::parse_rate("--rate", r))
                    .transpose()?,
                partition: false,
            };
            if new.jitter > new.delay {
                return Err(BadInput(format!(
                    "--jitter {jitter} is larger than --delay {delay}: packets cannot leave before they arrive"
                ))
                .into());
            }
            edit(pair, *direction, &|p| {
                *p = LinkProfile {
                    partition: p.partition,
                    ..new
                }
            })?;
            *backend
        }
        LinkCommand::Partition {
            pair, direction, ..
        } => {
            edit(pair, *direction, &|p| p.partition = true)?;
            BackendChoice::Auto
        }
        LinkCommand::Heal {
            pair, direction, ..
        } => {
            edit(pair, *direction, &|p| p.partition = false)?;
            BackendChoice::Auto
        }
        LinkCommand::Clear { pair, backend, .. } => {
            match pair {
                Some(pair) => edit(pair, Direction::Both, &|p| *p = LinkProfile::default())?,
                None => links.clear(),
            }
            *backend
        }
        LinkCommand::Show { .. } => BackendChoice::Auto,
    };
    links.retain(|_, p| !p.is_clear());
    // Shaping stays with the backend that put it in force unless forced.
    let backend = match (backend_choice, state.link_backend) {
        (BackendChoice::Auto, Some(b)) => b,
        (choice, _) => Backend::choose(choice),
    };
    if !matches!(command, LinkCommand::Show { .. }) {
        let engine = Engine::connect().await?;
        apply(&engine, &state, &links, backend).await?;
        // A change while probes run is an event on the run's timeline.
        if let Some(run) = &state.probe_run {
            let what = std::env::args().skip(2).collect::<Vec<_>>().join(" ");
            let _ = crate::probe::run::append_event(
                run,
                &crate::probe::record::LabEvent {
                    at_unix_ms: crate::probe::run::now_unix_ms(),
                    end_unix_ms: None,
                    kind: "link".into(),
                    name: format!("link {what}"),
                    detail: String::new(),
                },
            );
        }
        let link_backend = links.values().any(|p| p.shapes()).then_some(backend);
        state = dir.update(|s| {
            s.link_backend = link_backend;
            s.links = links;
        })?;
    }
    let views = view(&state);
    match lab.output {
        Output::Json => print_json(&serde_json::json!({
            "lab": state.name, "backend": backend.as_str(), "links": views,
        })),
        Output::Text => {
            println!("backend: {}", backend.as_str());
            for v in views {
                println!("  {:>8} -> {:<8} {}", v.from, v.to, v.summary);
            }
        }
    }
    Ok(0)
}

fn cmd_agent(command: AgentCommand) -> Result<u8> {
    match command {
        AgentCommand::Router { config } => crate::agent::router::run(&config).map(|_| 0),
        AgentCommand::Echo { listen } => crate::agent::echo::run(listen).map(|_| 0),
        AgentCommand::Apiserver(_) | AgentCommand::Probe(_) | AgentCommand::PeerCheck { .. } => {
            unreachable!("these agents run on the async runtime")
        }
        AgentCommand::Rtt {
            target,
            proto,
            count,
            interval_us,
            timeout_ms,
            size,
        } => {
            let report = crate::agent::rtt::run(&crate::agent::rtt::RttConfig {
                target,
                proto,
                count,
                interval: Duration::from_micros(interval_us),
                timeout: Duration::from_millis(timeout_ms),
                size,
            })?;
            print_json_line(&report);
            Ok(if report.errors.is_empty() { 0 } else { 1 })
        }
    }
}

async fn cmd_probe(state_root: &Path, command: ProbeCommand) -> Result<u8> {
    use crate::probe::run;
    let lab = match &command {
        ProbeCommand::Start { lab, .. }
        | ProbeCommand::Stop { lab }
        | ProbeCommand::Status { lab } => lab.clone(),
    };
    check_name(&lab.name)?;
    // Bad flags fail with exit 2 before anything is looked at or started.
    if let ProbeCommand::Start { settings, .. } = &command {
        settings.parse()?;
    }
    let (dir, mut state) = crate::status::load_lab(state_root, &lab.name)?;
    let engine = Engine::connect().await?;
    match command {
        ProbeCommand::Start { settings, .. } => {
            let dir_run = run::start(&engine, &dir, &mut state, &settings).await?;
            match lab.output {
                Output::Json => {
                    print_json_line(&serde_json::json!({"event": "probe-start", "run": dir_run}))
                }
                Output::Text => println!("{}", dir_run.display()),
            }
            Ok(0)
        }
        ProbeCommand::Stop { .. } => {
            let out = run::stop(&engine, &dir, &mut state).await?;
            let v = &out.verdict;
            match lab.output {
                Output::Json => print_json_line(&serde_json::json!({
                    "event": "probe-stop", "run": out.run, "passed": v.passed, "reasons": v.reasons,
                })),
                Output::Text => {
                    println!(
                        "verdict: {}{}",
                        if v.passed { "PASSED" } else { "FAILED" },
                        if v.reasons.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", v.reasons.join("; "))
                        }
                    );
                    println!("report: {}", out.run.join("report.html").display());
                }
            }
            Ok(if v.passed {
                0
            } else {
                crate::errors::EXIT_FAILED
            })
        }
        ProbeCommand::Status { .. } => {
            let running = engine.container_state(&run::container(&state)).await?;
            let records = state
                .probe_run
                .as_ref()
                .map(|r| {
                    crate::verdict::read_records(&r.join("records.ndjson")).unwrap_or_default()
                })
                .unwrap_or_default();
            let failed = records
                .iter()
                .filter(|r| r.outcome != crate::probe::record::Outcome::Ok)
                .count();
            let v = serde_json::json!({
                "container": running, "run": state.probe_run, "records": records.len(), "failed": failed,
            });
            match lab.output {
                Output::Json => print_json(&v),
                Output::Text => println!(
                    "probes: {running}; run {}; {} records, {failed} failed",
                    state
                        .probe_run
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or("-".into()),
                    records.len()
                ),
            }
            Ok(0)
        }
    }
}
