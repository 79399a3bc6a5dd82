//! The `cpmlab` command line (crate cpmlab): the argument types shared by every command,
//! and one module per command.

mod agent;
mod compare;
mod completion;
mod doctor;
mod down;
mod envelope;
mod fill;
mod images;
mod kubeconfig;
mod link;
mod migrate;
mod probe;
mod report;
mod run;
mod scenario;
mod status;
mod up;
mod verdict;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};

pub use agent::{AgentCommand, ApiserverArgs, ProbeArgs};
pub use images::ImagesCommand;
pub use link::LinkCommand;
pub use migrate::MigrateArgs;
pub use probe::ProbeCommand;

use cpmlab_core::errors::{exit_code, BadInput};
use cpmlab_model::topology::check_label;

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
    /// Directory holding every lab's state (`labs/<NAME>/`: state.json, CA,
    /// client certificates) and the run directories (`runs/`). Default:
    /// $XDG_STATE_HOME/cpmlab, else ~/.local/state/cpmlab.
    #[arg(long, global = true, env = "CPMLAB_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
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

/// `--platform`: a lab of another platform than the engine's.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PlatformArg {
    /// The lab image's platform, `linux/arm64` or `linux/amd64`, where it
    /// is not the engine's own: every container of the lab runs from an
    /// image of it, by emulation on an engine of the other architecture
    /// (`scripts/setup --arm64` prepares this host). Default: the
    /// engine's (CPMLAB_PLATFORM, which this flag sets for the commands
    /// it runs).
    #[arg(long, value_name = "OS/ARCH", value_parser = parse_platform)]
    pub platform: Option<String>,
}

fn parse_platform(s: &str) -> Result<String, String> {
    cpmlab_model::platform::parse(s)
        .map(|_| s.to_string())
        .map_err(|e| e.0)
}

/// The settings a command's flags carry to what it runs (the lab image's
/// build, the commands `run` starts): `--platform` as `CPMLAB_PLATFORM`,
/// `--slow-factor` as `CPMLAB_SLOW_FACTOR`. Set before the runtime starts
/// any thread.
fn export_settings(command: &Command) {
    use cpmlab_model::platform::{PLATFORM_ENV, SLOW_FACTOR_ENV};
    let (platform, factor) = match command {
        Command::Up { platform, .. } => (platform.platform.as_deref(), None),
        Command::Run(a) => (a.platform.platform.as_deref(), a.slow_factor),
        Command::Images {
            command: ImagesCommand::Build { platform, .. },
        } => (platform.platform.as_deref(), None),
        _ => (None, None),
    };
    if let Some(p) = platform {
        std::env::set_var(PLATFORM_ENV, p);
    }
    if let Some(f) = factor {
        std::env::set_var(SLOW_FACTOR_ENV, f.to_string());
    }
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
        /// The API server, over the topology's `api.server`: `auto`
        /// (kube-apiserver, else generic, else standin), `generic`
        /// (k8s.io/apiserver, built by scripts/build-go), `standin`
        /// (the lab's Rust imitation, with failpoints), `kube-apiserver`.
        #[arg(long, value_enum)]
        api_server: Option<cpmlab_model::topology::ApiServerChoice>,
        /// How the seed gateways expose the shoot API, over the topology's
        /// `api.exposure`: `termination` (Gardener's default) or `passthrough`.
        #[arg(long, value_enum)]
        api_exposure: Option<cpmlab_model::topology::ApiExposure>,
        #[command(flatten)]
        form: up::FormArgs,
        #[command(flatten)]
        platform: PlatformArg,
    },
    /// Show a lab as it is now (containers, etcd members, DNS, migration),
    /// or, without --name, list every lab.
    Status(status::StatusArgs),
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
        /// Also check what this provider needs (`kind`: kind, kubectl,
        /// istioctl and the images, each with how to get it).
        #[arg(long, value_enum, default_value = "docker")]
        provider: up::ProviderChoice,
    },
    /// Continuous probe clients of the shoot API, and their verdict.
    Probe {
        #[command(subcommand)]
        command: ProbeCommand,
    },
    /// Migrate the shoot's control plane to the other seed (Live CPM), or
    /// resume or abort a migration.
    Migrate(Box<MigrateArgs>),
    /// Write objects through the shoot API until etcd holds a shoot of
    /// real size (progress and rate; etcd's dbSize after).
    Fill(fill::FillArgs),
    /// Write a kubeconfig for the shoot API (or, with --garden, for the
    /// garden: `kubectl get shoot -o yaml` shows the migration as an
    /// operator sees it) and print its path.
    Kubeconfig {
        #[command(flatten)]
        lab: LabArgs,
        /// The garden's kubeconfig (the lab's operator, group system:masters).
        #[arg(long)]
        garden: bool,
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
    /// Judge a kept run again (verdict.json, junit.xml, report.html): exit 0
    /// passed, 1 failed, 2 bad input.
    Verdict(verdict::VerdictArgs),
    /// One scenario under several variants (a plan or a knob), repeated:
    /// compare.json, compare.html and compare.md with each variant's pass
    /// rate (95 % interval) and measures, and the differences with their
    /// p-values. Exit 0 when every run got to its verdict, 1 when one did
    /// not, 2 bad input, 3 environment.
    Compare(compare::CompareArgs),
    /// The operating envelope (each plan across delay × jitter × loss, or
    /// shoot sizes) or the learner grid (does a join complete over a lossy
    /// WAN: loss × delay × etcd version × who drops): each cell a compare
    /// variant of a generated scenario, one lab at a time, resumable, in
    /// shards; envelope.md/.html/.json or learner.md/.json. Exit 0 when the
    /// grid ran, 2 bad input, 3 environment (re-run to resume).
    Envelope(envelope::EnvelopeArgs),
    /// Reports over many runs: `report merge DIR... --out DIR` (shards of
    /// one nightly run, or several nights): exit 0 when every scenario
    /// passed, 1 when one did not, 2 bad input.
    Report {
        #[command(subcommand)]
        command: report::ReportCommand,
    },
    /// Run scenario files end to end (up, links, probes, timeline,
    /// migration, verdict, expectations, down): exit 0 when every
    /// expectation holds, 1 when one does not, 2 bad input, 3 environment.
    Run(run::RunArgs),
    /// Check scenario files, or print the format's JSON Schema.
    Scenario {
        #[command(subcommand)]
        command: scenario::ScenarioCommand,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    export_settings(&cli.command);
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
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours for a terminal only (a container's log has none).
        .with_ansi(std::io::stderr().is_terminal())
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

/// Where this host cannot reach the lab's networks (`lab_net`), every
/// connection to a lab address goes through the lab's toolbox over the
/// Docker API: as `CPMLAB_LAB_ACCESS` says, else where the engine's bridge
/// is not this host's.
async fn reach_the_lab() -> Result<()> {
    use cpmlab_core::lab_net::{self, Access};
    let wanted = lab_net::wanted_access().map_err(cpmlab_core::errors::BadInput)?;
    if wanted == Some(Access::Direct) {
        lab_net::set_direct_because(format!("{}=direct", lab_net::ACCESS_ENV));
        return Ok(());
    }
    // Without an engine there is no lab to reach: the command says so.
    let Ok(engine) = cpmlab_provider_docker::engine::Engine::connect().await else {
        return Ok(());
    };
    let because = match wanted {
        Some(_) => format!("{}=relay", lab_net::ACCESS_ENV),
        None => match cpmlab_provider_docker::relay::bridge_is_local(&engine).await {
            Ok(why) => {
                lab_net::set_direct_because(why);
                return Ok(());
            }
            Err(why) => why,
        },
    };
    lab_net::set_relay(std::sync::Arc::new(
        cpmlab_provider_docker::relay::ExecRelay::new(engine, because),
    ));
    Ok(())
}

async fn run(cli: Cli) -> Result<u8> {
    // Agents run inside containers and need no state directory.
    let command = match cli.command {
        Command::Agent { command } => return agent::run(command).await,
        Command::Doctor { output, provider } => {
            let root = cpmlab_model::state::resolve_root(
                cli.state_dir.clone(),
                std::env::var_os("XDG_STATE_HOME"),
                std::env::var_os("HOME"),
            )
            .ok();
            return doctor::run(output, root.as_deref(), provider).await;
        }
        Command::Completion { shell } => return completion::run(shell),
        Command::Verdict(args) => return verdict::run(&args),
        Command::Report { command } => return report::run(command),
        Command::Images { command } => return images::run(command).await,
        Command::Scenario { command } => return scenario::run(command),
        c => c,
    };
    reach_the_lab().await?;
    let state_root = cpmlab_model::state::resolve_root(
        cli.state_dir,
        std::env::var_os("XDG_STATE_HOME"),
        std::env::var_os("HOME"),
    )?;
    let root = state_root.as_path();
    match command {
        Command::Up {
            lab,
            topology,
            retain,
            api_server,
            api_exposure,
            form,
            platform: _,
        } => {
            up::run(
                root,
                &lab,
                topology.as_deref(),
                up::Overrides {
                    api_server,
                    api_exposure,
                },
                retain,
                &form,
            )
            .await
        }
        Command::Status(args) => status::run(root, &args).await,
        Command::Down { lab, all } => down::run(root, &lab, all).await,
        Command::Link { command } => link::run(root, command).await,
        Command::Migrate(args) => migrate::run(root, *args).await,
        Command::Probe { command } => probe::run(root, command).await,
        Command::Kubeconfig { lab, garden } => kubeconfig::run(root, &lab, garden).await,
        Command::Fill(args) => fill::run(root, &args).await,
        Command::Run(args) => run::run(root, args).await,
        Command::Compare(args) => compare::run(root, args).await,
        Command::Envelope(args) => envelope::run(root, args).await,
        Command::Agent { .. }
        | Command::Scenario { .. }
        | Command::Doctor { .. }
        | Command::Completion { .. }
        | Command::Verdict(_)
        | Command::Report { .. }
        | Command::Images { .. } => unreachable!("dispatched above"),
    }
}
