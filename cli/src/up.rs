//! `cpmlab up`: build the lab, removing what was created when it fails or
//! is interrupted.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::{check_name, interrupted, print_json, print_json_line, LabArgs, Output};
use cpmlab_core::errors::{exit_code, Cancel, Interrupted, EXIT_INTERRUPTED};
use cpmlab_core::progress::{Mode, Progress};
use cpmlab_model::kind::KindSettings;
use cpmlab_model::state::ProviderKind;
use cpmlab_model::topology::Topology;
use cpmlab_runner::provider::{Up, UpRequest};

/// Which machinery makes the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ProviderChoice {
    /// Containers on Docker networks (Envoy gateways): the fast form.
    #[default]
    Docker,
    /// Two kind clusters with Istio, etcd StatefulSets and kube-apiserver.
    Kind,
}

/// The lab's form: the provider and the kind form's settings.
#[derive(Debug, Clone, clap::Args)]
pub struct FormArgs {
    #[arg(long, value_enum, default_value = "docker")]
    pub provider: ProviderChoice,
    /// kind: write every kind config, manifest and step into DIR and create
    /// nothing.
    #[arg(long, value_name = "DIR")]
    pub render: Option<std::path::PathBuf>,
    /// kind: nodes per seed, 1 (a laptop) or 3 (a control plane and two
    /// workers in three zones).
    #[arg(long, default_value_t = 1)]
    pub nodes: u8,
    /// kind: each member's peer endpoint on its own ingress port (as
    /// gardener/gardener#15576 does; the kind form's default) or on an
    /// address of its own; over the topology's `network.peer_exposure`.
    #[arg(long, value_enum)]
    pub peer_exposure: Option<cpmlab_model::topology::PeerExposure>,
    /// kind: etcd through etcd-druid's Etcd resources.
    #[arg(long)]
    pub with_etcd_druid: bool,
    /// kind, with --with-etcd-druid (or the topology's etcd.operator): how the seeds' Etcd resources are
    /// named. `distinct` (the default): druid's documented way, each seed's
    /// Etcd its own name (`etcd-main`, `etcd-main-<destination seed>`) and
    /// no member name prefix. `gardener`: `etcd-main` in both seeds, the
    /// seed as member name prefix, under which druid v0.38.1 drops the
    /// cross-seed peer URLs (docs/etcd-druid.md).
    #[arg(long, value_enum)]
    pub druid_naming: Option<cpmlab_model::kind::DruidNaming>,
}

impl FormArgs {
    fn kind_settings(&self, t: &Topology) -> Result<cpmlab_provider_kind::KindSettings> {
        let s = cpmlab_provider_kind::KindSettings {
            nodes: self.nodes,
            exposure: self
                .peer_exposure
                .or(t.network.peer_exposure)
                .unwrap_or(cpmlab_model::topology::PeerExposure::Port),
            with_etcd_druid: self.with_etcd_druid
                || t.etcd.operator == cpmlab_model::topology::EtcdOperator::EtcdDruid,
            druid_naming: self.druid_naming.unwrap_or_default(),
        };
        s.check()?;
        Ok(s)
    }
}

impl ProviderChoice {
    /// The lab's form this choice names.
    pub fn kind(self) -> ProviderKind {
        match self {
            ProviderChoice::Docker => ProviderKind::Docker,
            ProviderChoice::Kind => ProviderKind::Kind,
        }
    }
}

/// Flags that override the topology file.
#[derive(Debug, Clone, Copy, Default)]
pub struct Overrides {
    pub api_server: Option<cpmlab_model::topology::ApiServerChoice>,
    pub api_exposure: Option<cpmlab_model::topology::ApiExposure>,
}

pub async fn run(
    state_root: &Path,
    lab: &LabArgs,
    topology: Option<&Path>,
    overrides: Overrides,
    retain: bool,
    form: &FormArgs,
) -> Result<u8> {
    // All input is checked before anything is created.
    check_name(&lab.name)?;
    let topology_path = topology;
    let mut topology = match topology {
        Some(p) => Topology::load(p)?,
        None => Topology::default(),
    };
    if let Some(choice) = overrides.api_server {
        topology.api.server = choice;
    }
    if let Some(x) = overrides.api_exposure {
        topology.api.exposure = x;
    }
    if form.provider == ProviderChoice::Docker
        && topology.etcd.operator == cpmlab_model::topology::EtcdOperator::EtcdDruid
    {
        return Err(topology_error(
            topology_path,
            "etcd.operator",
            "etcd-druid belongs to the kind form: add --provider kind",
        ));
    }
    if form.with_etcd_druid {
        with_etcd_druid_flag(&mut topology);
        if let Some(field) = [
            ("snapshot_count", topology.etcd.snapshot_count),
            (
                "snapshot_catchup_entries",
                topology.etcd.snapshot_catchup_entries,
            ),
        ]
        .iter()
        .find_map(|(f, v)| v.map(|_| *f))
        {
            return Err(topology_error(
                topology_path,
                &format!("etcd.{field}"),
                "the lab's own members only; --with-etcd-druid's \
                 members take etcd-druid's configuration: leave it out",
            ));
        }
    }
    if form.druid_naming.is_some()
        && topology.etcd.operator != cpmlab_model::topology::EtcdOperator::EtcdDruid
    {
        return Err(cpmlab_core::errors::BadInput(
            "--druid-naming names etcd-druid's Etcds: add --with-etcd-druid \
             (or etcd.operator: etcd-druid in the topology)"
                .into(),
        )
        .into());
    }
    if form.provider == ProviderChoice::Kind {
        refuse_platform_for_kind()?;
    }
    if form.provider == ProviderChoice::Docker
        && (form.render.is_some()
            || form.with_etcd_druid
            || form.nodes != 1
            || form.peer_exposure.is_some())
    {
        return Err(cpmlab_core::errors::BadInput(
            "--render, --nodes, --peer-exposure and --with-etcd-druid belong to the kind form: \
             add --provider kind (the docker form reads `network.peer_exposure` from the topology)"
                .into(),
        )
        .into());
    }
    if let Some(dir) = &form.render {
        return render(lab, &topology, form, dir);
    }
    let (kind, settings) = match form.provider {
        ProviderChoice::Docker => (ProviderKind::Docker, KindSettings::default()),
        ProviderChoice::Kind => (ProviderKind::Kind, form.kind_settings(&topology)?),
    };
    let provider = cpmlab_runner::provider::connect_for(kind).await?;
    let progress = Progress::new(Mode::detect(lab.output == Output::Json));
    let req = UpRequest {
        lab: lab.name.clone(),
        topology,
        state_root: state_root.to_path_buf(),
        cancel: Cancel::default(),
        kind: settings,
        retain,
    };
    let started = std::time::Instant::now();
    // On Ctrl-C the provider stops (the docker form after the step in
    // flight, so that no request is left half sent; the kind form at once),
    // then everything is removed; a second Ctrl-C stops waiting.
    let make = provider.up(&req, &progress);
    tokio::pin!(make);
    let result = tokio::select! {
        r = &mut make => r,
        _ = interrupted() => {
            progress.note("interrupted: stopping after the current step, then removing the lab");
            req.cancel.cancel();
            tokio::select! {
                r = &mut make => r,
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
        Ok(Up::AlreadyUp(state)) => {
            progress.note(&format!(
                "lab `{}` is already up; nothing to do",
                state.name
            ));
            if lab.output == Output::Json {
                print_json(
                    &serde_json::json!({"event": "up", "lab": state.name, "result": "already-up"}),
                );
            }
            Ok(0)
        }
        Ok(Up::Created(state)) => {
            let secs = started.elapsed().as_secs_f64();
            match lab.output {
                Output::Json => print_json_line(&serde_json::json!({
                    "event": "up", "lab": state.name, "result": "created", "elapsed_s": secs,
                })),
                Output::Text => {
                    progress.note(&format!(
                        "lab `{}` is up in {secs:.1}s ({} form); shoot API name {} (DNS {}); see `cpmlab status --name {}`",
                        state.name,
                        provider.name(),
                        state.dns.api_name,
                        state.dns.server.ip,
                        state.name
                    ));
                }
            }
            Ok(0)
        }
        Err(e) if exit_code(&e) == EXIT_INTERRUPTED => {
            cleanup("interrupted");
            // Let requests already sent to the engine land before sweeping.
            tokio::time::sleep(Duration::from_millis(300)).await;
            provider
                .down(state_root, &req.lab)
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
                provider
                    .down(state_root, &req.lab)
                    .await
                    .context("cleaning up after a failed up")?;
            }
            Err(e)
        }
    }
}

/// The kind form runs on the engine's own platform only: under qemu-user
/// its nodes' kubelet, kube-proxy and CNI plugins could not program
/// netfilter (no NETLINK_NETFILTER), so `--platform` (CPMLAB_PLATFORM) is
/// the docker form's.
pub fn refuse_platform_for_kind() -> Result<()> {
    let wanted = cpmlab_model::platform::wanted()?;
    if let Some(arch) = wanted.filter(|a| a != cpmlab_core::go_parts::host_arch()) {
        return Err(cpmlab_core::errors::BadInput(format!(
            "--platform linux/{arch} ({}) belongs to the docker form: the kind form runs on the engine's own platform (under qemu-user its nodes could not program netfilter)",
            cpmlab_model::platform::PLATFORM_ENV
        ))
        .into());
    }
    Ok(())
}

/// Bad input at `field` of the topology (exit 2): its file's line, or
/// the default topology's field.
fn topology_error(path: Option<&Path>, field: &str, message: &str) -> anyhow::Error {
    match path {
        Some(p) => Topology::error_at(p, field, message).into(),
        None => cpmlab_core::errors::BadInput(format!("the default topology: {field}: {message}"))
            .into(),
    }
}

/// `--with-etcd-druid` is the topology's `etcd.operator: etcd-druid`. druid
/// runs etcd 3.5 (its `UpgradeEtcdVersion` images; the lab's launcher
/// embeds 3.5.27), so the lab's record of the version says so, whatever
/// the topology asked.
fn with_etcd_druid_flag(t: &mut Topology) {
    use cpmlab_model::topology::{EtcdOperator, EtcdVersion};
    t.etcd.operator = EtcdOperator::EtcdDruid;
    if t.etcd.etcd_version() != Ok(EtcdVersion::V3_5) {
        eprintln!(
            "note: --with-etcd-druid: etcd-druid runs etcd 3.5, not the topology's {}",
            t.etcd.version
        );
        t.etcd.version = EtcdVersion::V3_5.as_str().into();
    }
}

/// `up --provider kind --render DIR`: the kind form's configs, manifests
/// and steps written into DIR; nothing is created.
fn render(lab: &LabArgs, topology: &Topology, form: &FormArgs, dir: &Path) -> Result<u8> {
    use cpmlab_provider_kind as kind;
    let settings = form.kind_settings(topology)?;
    let nets = kind::up::default_nets(topology)?;
    let keys = kind::up::RenderKeys::generate(&lab.name)?;
    kind::up::render_all(&lab.name, topology, &settings, &nets, &keys, dir, None)?;
    match lab.output {
        Output::Json => print_json_line(&serde_json::json!({
            "event": "render", "lab": lab.name, "dir": dir,
        })),
        Output::Text => println!(
            "rendered the kind form of lab `{}` into {} (nothing created; README.md there says the order)",
            lab.name,
            dir.display()
        ),
    }
    Ok(0)
}
