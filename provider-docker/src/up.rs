//! `cpmlab up` for the docker provider: networks, the wan router, DNS, the
//! seeds' gateways, the shoot's etcd in the source seed, and a toolbox client.
//!
//! Every container starts with a small barrier: it writes the lab's resolver
//! and waits until the lab releases it, so that e.g. etcd starts only once
//! DNS answers. Before the release, `cpmlab` sets the container's routes
//! (to the other lab networks via the wan router, no default route) and a
//! gateway's per-member addresses inside the container's network namespace,
//! through a helper container that shares it (`netns`): no lab container
//! but the router holds NET_ADMIN, and nothing on the host enters a
//! namespace. The barrier's file lives on a tmpfs, so a container that is
//! started again waits for the lab again, and gets its routes again.

pub use super::routes::{net_plan, set_routes};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures_util::future::try_join_all;

use super::engine::{ContainerSpec, Engine, FileSpec};
use super::images;
use crate::addressing::{Net24, Pool};
use crate::dns::{self, ARecord};
use crate::errors::{BadInput, Cancel, EnvNotReady};
use crate::etcd::{self, ClusterState, EtcdTls};
use crate::pki::{write_pem, Ca};
use crate::plan::LabPlan;
use crate::progress::Progress;
use crate::state::{LabDir, LabState, MemberState, Phase};
use crate::topology::Topology;

/// What `up` is asked to make (the interface's; `cancel` is checked
/// between steps and while waiting).
pub use cpmlab_provider::UpRequest;

pub use super::container::{base_spec, behind_barrier, docker_network, lab_sysctls, READY_FILE};
pub use super::engine::RUN_DIR;
pub use cpmlab_provider::AGENT_BIN;

/// How long `up` waits for DNS and for etcd to elect a leader.
const DNS_DEADLINE: Duration = Duration::from_secs(30);
const ETCD_DEADLINE: Duration = Duration::from_secs(90);

/// Is every container of a finished lab running?
async fn all_running(engine: &Engine, state: &LabState) -> Result<bool> {
    let running: Vec<String> = engine
        .containers(Some(&state.name))
        .await?
        .into_iter()
        .filter(|c| c.state.as_ref().map(|s| s.to_string()) == Some("running".into()))
        .filter_map(|c| c.names.and_then(|n| n.first().cloned()))
        .map(|n| n.trim_start_matches('/').to_string())
        .collect();
    Ok(expected_containers(state)
        .iter()
        .all(|c| running.contains(c)))
}

pub fn expected_containers(state: &LabState) -> Vec<String> {
    let mut v = vec![
        state.router.container.clone(),
        state.dns.server.container.clone(),
        state.toolbox.container.clone(),
    ];
    v.extend(state.seeds.iter().map(|s| s.gateway.container.clone()));
    v.extend(state.members.iter().map(|m| m.container.clone()));
    v.extend(state.apiservers.iter().map(|a| a.container.clone()));
    v.extend(super::garden_specs::garden_containers(state));
    v.extend(super::garden_specs::gardenlet_containers(state));
    v
}

/// Before anything is created: `Some(state)` when the lab is already up as
/// requested (idempotent), an error when a lab of that name is in the way.
pub async fn preflight(engine: &Engine, req: &UpRequest) -> Result<Option<LabState>> {
    let dir = LabDir::new(&req.state_root, &req.lab);
    let mut existing = engine.lab_objects(Some(&req.lab)).await?;
    // The lab's networks by name too: one its label filter misses (left
    // half removed by dockerd) is in the way all the same.
    for n in req.topology.network_names() {
        let name = crate::plan::network_name(&req.lab, &n);
        if !existing.networks.contains(&name) && engine.network_exists(&name).await? {
            existing.networks.push(name);
        }
    }
    if !dir.exists() && existing.is_empty() {
        return Ok(None);
    }
    if let Ok(state) = dir.load() {
        if state.phase == Phase::Ready && all_running(engine, &state).await? {
            if state.topology != req.topology {
                return Err(BadInput(format!(
                    "lab `{}` is already up with a different topology; run `cpmlab down --name {}` first",
                    req.lab, req.lab
                ))
                .into());
            }
            return Ok(Some(state));
        }
    }
    Err(EnvNotReady::new(
        format!(
            "lab `{}` exists but is not complete and running ({} Docker objects, state file {})",
            req.lab,
            existing.count(),
            if dir.exists() { "present" } else { "missing" }
        ),
        format!(
            "run `cpmlab down --name {}` and then `cpmlab up` again",
            req.lab
        ),
    )
    .into())
}

/// Builds the lab; call after `preflight` said there is none.
pub async fn create(engine: &Engine, req: &UpRequest, p: &Progress) -> Result<LabState> {
    let dir = LabDir::new(&req.state_root, &req.lab);
    // Before anything exists: is the API server asked for there? (On this
    // host, where the lab image is built here; the image is asked below.)
    if !images::image_is_given() {
        resolve_api_server(
            req.topology.api.server,
            |p| p.find().is_some(),
            "on this host",
        )?;
    }
    if let Some(cc) = req.topology.network.congestion_control() {
        crate::kernel::check_congestion_control(cc)?;
    }
    req.cancel.check()?;
    let step = p.step("lab image");
    let lab_image = images::ensure(engine).await?;
    check_etcd_version(&req.topology, &lab_image)?;
    let image = lab_image.tag.clone();
    let api_kind = resolve_api_server(
        req.topology.api.server,
        |p| lab_image.has_part(p.name),
        &format!("in the lab image {image}"),
    )?;
    check_garden_parts(&lab_image)?;
    let emulation = emulation_of(engine, &lab_image).await?;
    step.done_with(&format!(
        "{image}{}, etcd {}{}",
        if lab_image.built {
            " (built)"
        } else {
            " (cached)"
        },
        req.topology.etcd.version,
        emulation
            .as_ref()
            .map(|e| format!("; {}", e.summary()))
            .unwrap_or_default()
    ));

    // Before anything of the lab exists: the probes' run directories
    // are bind mounts of the state directory's path on the engine's side.
    req.cancel.check()?;
    let step = p.step("the engine sees the state directory");
    super::state_dir::check(engine, &image, &req.state_root).await?;
    step.done_with(&req.state_root.display().to_string());

    req.cancel.check()?;
    let step = p.step("networks seed + clients");
    let nets = create_networks(engine, &req.lab, &req.topology).await?;
    step.done_with(&nets.iter().map(|n| n.cidr()).collect::<Vec<_>>().join(", "));

    req.cancel.check()?;
    let step = p.step("certificates and state");
    let plan = LabPlan::new(&req.lab, &req.topology, &nets, &image);
    let mut state = plan.initial_state(crate::pki::random_secret());
    state.api_kind = api_kind;
    state.emulation = emulation;
    state.api_token = crate::pki::random_token();
    dir.create()?;
    let keys = LabKeys::generate(&dir, &mut state)?;
    stamp_gardener_version(&mut state);
    let garden_keys =
        cpmlab_garden::access::GardenKeys::generate(&dir, &state, &keys.ca, &keys.front_proxy)?;
    dir.save(&state)?;
    step.done();

    req.cancel.check()?;
    let step = p.step("containers: router, dns, toolbox, garden, gateways, etcd, gardenlets");
    let mut specs = container_specs(&state, &keys)?;
    specs.extend(super::garden_specs::garden_specs(
        &state,
        &keys.ca,
        &state.front_proxy_ca,
        &garden_keys,
    ));
    let state_root =
        std::fs::canonicalize(&req.state_root).unwrap_or_else(|_| req.state_root.clone());
    for s in &state.seeds {
        specs.extend(super::garden_specs::gardenlet_spec(&state, s, &state_root));
    }
    for m in &state.members {
        engine.create_volume(&req.lab, &m.volume, &m.seed).await?;
    }
    try_join_all(specs.iter().map(|s| engine.create_container(s))).await?;
    try_join_all(specs.iter().map(|s| engine.start(&s.name))).await?;
    step.done_with(&format!("{} containers", specs.len()));

    req.cancel.check()?;
    let step = p.step("routes through the wan router");
    // The gateways come after the members listen (see the etcd step).
    let gateways: Vec<String> = state
        .seeds
        .iter()
        .map(|s| s.gateway.container.clone())
        .collect();
    let gardenlets = super::garden_specs::gardenlet_containers(&state);
    let gapi = super::garden_specs::gardener_apiserver(&state);
    let late: Vec<&String> = state
        .members
        .iter()
        .map(|m| &m.container)
        .chain(state.apiservers.iter().map(|a| &a.container))
        .chain(gateways.iter())
        .chain(gardenlets.iter())
        .chain(gapi.iter())
        .collect();
    let infra: Vec<String> = expected_containers(&state)
        .into_iter()
        .filter(|c| !late.contains(&c))
        .collect();
    release(engine, &state, &infra).await?;
    step.done();

    req.cancel.check()?;
    let step = p.step("dns answers the shoot API name");
    wait_dns(&state, &req.cancel).await?;
    step.done_with(&format!(
        "{} -> {}",
        state.dns.api_name, state.seeds[0].gateway.ip
    ));

    // The garden comes up beside the seeds' etcd and shoot API: nothing of
    // either waits for the other (the gardenlets only report to the
    // garden until a migration is triggered), so its ~15 s hide behind
    // theirs.
    req.cancel.check()?;
    let garden_step =
        p.step("garden: gardener-apiserver, the Seeds and the Shoot (beside the seeds)");
    let garden = async {
        let said = bring_up(engine, &dir, &state, &keys.ca, &garden_step).await?;
        gardenlets_up(engine, &dir, &state, &garden_step).await?;
        anyhow::Ok(said)
    };
    let seeds = seeds_up(engine, &dir, &state, p, &req.cancel);
    let (said, ()) = tokio::try_join!(garden, seeds)?;
    garden_step.done_with(&said);

    state.phase = Phase::Ready;
    dir.save(&state)?;
    Ok(state)
}

/// The seeds' etcd (a leader elected behind their gateways) and the shoot
/// API (every replica ready, served through the source's gateway).
async fn seeds_up(
    engine: &Engine,
    dir: &crate::state::LabDir,
    state: &LabState,
    p: &crate::progress::Progress,
    cancel: &crate::errors::Cancel,
) -> Result<()> {
    let step = p.step(format!(
        "etcd: {} members elect a leader",
        state.members.len()
    ));
    let members: Vec<String> = state.members.iter().map(|m| m.container.clone()).collect();
    let t = Instant::now();
    release(engine, state, &members).await?;
    // The gateways start once every member listens. A member's peers dial
    // it through its seed's gateway from their first moment, and the
    // gateway's outlier detection (Envoy's defaults under Istio's
    // rendering of Gardener's DestinationRule: 5 consecutive failures,
    // 30 s ejection, panic threshold 0) ejects a member that is not
    // listening yet for 30 s or more: the election then waited 60 s. The
    // control plane the lab starts from has had its gateway in front of
    // running members for months; a member that joins in a migration
    // meets the gateway as production's would.
    try_join_all(
        members
            .iter()
            .map(|c| wait_listening(engine, c, &ETCD_PORTS, state.stretch(LISTEN_DEADLINE))),
    )
    .await?;
    let gateways: Vec<String> = state
        .seeds
        .iter()
        .map(|s| s.gateway.container.clone())
        .collect();
    release(engine, state, &gateways).await?;
    let released = t.elapsed();
    let tls = crate::etcd::lab_tls(dir)?;
    let last = wait_etcd(state, &tls, &step, cancel).await?;
    // A slow election says where its time went (now and then one `up` in
    // an e2e suite spends about 60 s here: the next one names why).
    if t.elapsed() > Duration::from_secs(10) {
        step.done_with(&format!(
            "members released in {:.1}s, then {:.1}s to settle; the last answer before: {}",
            released.as_secs_f64(),
            (t.elapsed() - released).as_secs_f64(),
            if last.is_empty() { "-" } else { &last }
        ));
    } else {
        step.done();
    }

    cancel.check()?;
    let step = p.step(format!(
        "shoot API: {} {} replicas ready through the gateway",
        state.apiservers.len(),
        state.api_kind.as_str()
    ));
    let apis: Vec<String> = state
        .apiservers
        .iter()
        .map(|a| a.container.clone())
        .collect();
    release(engine, state, &apis).await?;
    // The control plane the lab starts from is one production has had
    // serving long before: once each replica answers /readyz itself, the
    // gateway is told they are established and serves them at once, not
    // after the readiness probe's initial delay and a period (Gardener's
    // 10 s and 10 s, which every replica a migration starts still waits).
    try_join_all(
        state
            .apiservers
            .iter()
            .map(|a| crate::apiserver::ready::wait_replica_ready(state, a, &tls.ca_pem, cancel)),
    )
    .await?;
    let source = state
        .seed_by_role(crate::topology::SeedRole::Source)
        .name
        .clone();
    super::gateway_sync::sync_gateway_established(engine, state, &source).await?;
    wait_api(state, &tls.ca_pem, cancel).await?;
    super::gateway_sync::wait_served(engine, state, &source, cancel).await?;
    step.done_with(&format!("https://{}", state.dns.api_name));

    Ok(())
}

/// The garden's gardener-apiserver version, as the part the lab image
/// holds was built (its manifest), into the state.
pub fn stamp_gardener_version(state: &mut LabState) {
    if let Some(g) = state.garden.as_mut() {
        g.gardener_version = crate::go_parts::GARDENER_APISERVER
            .manifest()
            .map(|m| m.version)
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| cpmlab_garden::objects::GARDENER_VERSION.into());
    }
}

/// The garden brought up to the shoot bound to the source seed, its
/// containers made and started already (etcd and its kube-apiserver
/// released with the lab's own): gardener-apiserver released once that
/// kube-apiserver answers, then the garden's objects; what ran, in a line.
pub async fn bring_up(
    engine: &Engine,
    dir: &crate::state::LabDir,
    state: &LabState,
    ca: &Ca,
    step: &crate::progress::Step,
) -> Result<String> {
    let garden = super::garden_specs::operator(dir, state)?;
    let inputs = super::garden_specs::garden_inputs(state, ca);
    cpmlab_garden::bootstrap::garden_api_ready(&garden, &|w| step.detail(w)).await?;
    release(
        engine,
        state,
        &super::garden_specs::gardener_apiserver(state),
    )
    .await?;
    cpmlab_garden::bootstrap::bootstrap(&garden, state, &inputs, &|w| step.detail(w)).await?;
    Ok(format!(
        "gardener-apiserver {}; shoot {} bound to {}",
        state
            .garden
            .as_ref()
            .map(|g| g.gardener_version.as_str())
            .unwrap_or("-"),
        state.topology.shoot.name,
        state.topology.source().name
    ))
}

/// Releases the gardenlets and waits until each reported its Seed and the
/// source's recorded the shoot as running there.
pub async fn gardenlets_up(
    engine: &Engine,
    dir: &crate::state::LabDir,
    state: &LabState,
    step: &crate::progress::Step,
) -> Result<()> {
    let garden = super::garden_specs::operator(dir, state)?;
    release(
        engine,
        state,
        &super::garden_specs::gardenlet_containers(state),
    )
    .await?;
    cpmlab_garden::bootstrap::wait_gardenlets(
        &garden,
        state,
        cpmlab_garden::bootstrap::DEADLINE,
        &|w| step.detail(w),
    )
    .await?;
    Ok(())
}

/// Does the lab image hold what the garden runs (kube-apiserver and
/// gardener-apiserver)? Checked before anything of the lab exists.
pub fn check_garden_parts(image: &images::LabImage) -> Result<()> {
    let missing: Vec<&str> = [
        crate::go_parts::KUBE_APISERVER,
        crate::go_parts::GARDENER_APISERVER,
    ]
    .iter()
    .filter(|p| !image.has_part(p.name))
    .map(|p| p.name)
    .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(EnvNotReady::new(
        format!(
            "the lab image {} holds no {} (every lab has a garden: the garden's kube-apiserver and gardener-apiserver)",
            image.tag,
            missing.join(" and ")
        ),
        format!(
            "scripts/build-go {} (then `cpmlab up` builds the image with it)",
            missing.join(" ")
        ),
    )
    .into())
}

/// What the lab records where the engine runs `image` by emulation
/// (another architecture than its own): the platforms, the factor on its
/// waits and time limits, and the engine's own lab image, whose helpers
/// run what qemu-user cannot translate (built here when missing). None
/// where the engine runs the image natively.
pub async fn emulation_of(
    engine: &Engine,
    image: &images::LabImage,
) -> Result<Option<cpmlab_model::platform::Emulation>> {
    let (_, engine_arch) = engine.platform().await?;
    if image.arch.is_empty() || image.arch == engine_arch {
        return Ok(None);
    }
    let native = images::ensure_native(engine).await?;
    Ok(Some(cpmlab_model::platform::Emulation::new(
        &format!("linux/{}", image.arch),
        &format!("linux/{engine_arch}"),
        &native.tag,
    )?))
}

/// Does the lab image hold the etcd the topology asks for? Checked before
/// anything of the lab exists.
/// The lab's keys, written to its `pki` directory: the CA, the client
/// certificate the lab's commands use, the API token (the state's) and the
/// service-account signing key pair kube-apiserver insists on (kept for
/// the replicas a migration starts in the destination seed).
pub struct LabKeys {
    pub ca: Ca,
    pub client: crate::pki::CertKey,
    pub sa_key: rcgen::KeyPair,
    /// The front-proxy CA (Gardener's ca-front-proxy): it signs the
    /// gateway's client certificate, whose identity headers the API
    /// servers trust (`--requestheader-client-ca-file`).
    pub front_proxy: Ca,
}

impl LabKeys {
    /// Generates the keys, writes them to the lab's `pki` directory, and
    /// puts the front-proxy CA's certificate into `state`.
    pub fn generate(dir: &LabDir, state: &mut LabState) -> Result<LabKeys> {
        let ca = Ca::generate(&state.name)?;
        let client = ca.issue_client("cpmlab")?;
        let sa_key = rcgen::KeyPair::generate()?;
        let front_proxy = Ca::generate(&format!("{} front-proxy", state.name))?;
        state.front_proxy_ca = front_proxy.cert_pem.clone();
        let pki = dir.pki();
        write_pem(&pki.join("ca.crt"), &ca.cert_pem)?;
        write_pem(&pki.join("ca.key"), &ca.key_pem())?;
        write_pem(&pki.join("front-proxy-ca.crt"), &front_proxy.cert_pem)?;
        write_pem(&pki.join("front-proxy-ca.key"), &front_proxy.key_pem())?;
        write_pem(&pki.join("client.crt"), &client.cert_pem)?;
        write_pem(&pki.join("client.key"), &client.key_pem)?;
        write_pem(&pki.join("sa.key"), &sa_key.serialize_pem())?;
        crate::state::write_private(&pki.join("token"), &state.api_token)
            .context("write the API token")?;
        Ok(LabKeys {
            ca,
            client,
            sa_key,
            front_proxy,
        })
    }

    /// The service-account key pair as (private, public) PEM.
    pub fn sa(&self) -> (String, String) {
        (self.sa_key.serialize_pem(), self.sa_key.public_key_pem())
    }
}

pub fn check_etcd_version(topo: &Topology, image: &images::LabImage) -> Result<()> {
    let want = topo.etcd.etcd_version().map_err(BadInput)?;
    if image.has_etcd(want) {
        return Ok(());
    }
    Err(EnvNotReady::new(
        format!(
            "the topology asks for etcd {want} (etcd.version), and the lab image {} holds etcd {} only",
            image.tag,
            image.etcd_versions_label()
        ),
        format!(
            "run `{} {}` (`scripts/setup --tests` does; built from the Go module proxy), and the next `cpmlab up` makes the lab image with it; or point {} at an etcd 3.5 binary",
            crate::go_parts::ETCD_35.installer,
            crate::go_parts::ETCD_35.name,
            crate::go_parts::ETCD_35.env,
        ),
    )
    .into())
}

/// Which API server `choice` means where `has` tells which Go parts can
/// be had (`whence` says where: this host, before its image is built; the
/// lab image, whose replicas run its baked-in binary), or why it cannot be
/// had.
pub fn resolve_api_server(
    choice: crate::topology::ApiServerChoice,
    has: impl Fn(&crate::go_parts::Part) -> bool,
    whence: &str,
) -> Result<crate::apiserver::launch::ApiServerKind> {
    use crate::apiserver::launch::ApiServerKind;
    use crate::go_parts::{GENERIC_APISERVER, KUBE_APISERVER};
    use crate::topology::ApiServerChoice;
    Ok(match choice {
        ApiServerChoice::Standin => ApiServerKind::Standin,
        ApiServerChoice::Auto if has(&KUBE_APISERVER) => ApiServerKind::KubeApiserver,
        ApiServerChoice::Auto if has(&GENERIC_APISERVER) => ApiServerKind::Generic,
        ApiServerChoice::Auto => ApiServerKind::Standin,
        ApiServerChoice::KubeApiserver if has(&KUBE_APISERVER) => ApiServerKind::KubeApiserver,
        ApiServerChoice::KubeApiserver => return Err(EnvNotReady::new(
            format!("the topology asks for kube-apiserver (api.server), and no binary was found {whence}"),
            "run scripts/build-go kube-apiserver (scripts/setup does), set CPMLAB_KUBE_APISERVER or KUBEBUILDER_ASSETS, or use api.server: generic or standin",
        )
        .into()),
        ApiServerChoice::Generic if has(&GENERIC_APISERVER) => ApiServerKind::Generic,
        ApiServerChoice::Generic => return Err(EnvNotReady::new(
            format!("the topology asks for the generic API server (api.server: generic), and cpmlab-apiserver was not found {whence}"),
            "run `scripts/build-go cpmlab-apiserver` (`scripts/setup --tests` does), set CPMLAB_APISERVER to the binary, or use api.server: standin",
        )
        .into()),
    })
}

/// Creates the lab's networks, re-allocating if another creator raced us.
/// The first attempt takes the pool's lowest free /24s. Two labs that
/// start together both take those, both find them overlapping and remove
/// theirs: each then waits a while of its own and reads the pool from an
/// offset of its own (both drawn from a hash of the lab's name and the
/// attempt), so that they part instead of racing again in step.
async fn create_networks(engine: &Engine, lab: &str, topo: &Topology) -> Result<Vec<Net24>> {
    let pool = Pool::parse(&topo.network.pool).map_err(BadInput)?;
    let names = topo.network_names();
    for attempt in 0..5u64 {
        let draw = if attempt == 0 {
            0
        } else {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (lab, attempt).hash(&mut h);
            let draw = h.finish();
            tokio::time::sleep(std::time::Duration::from_millis(100 + draw % 900)).await;
            draw
        };
        let taken = engine.taken_subnets().await?;
        let nets = pool
            .allocate_from(names.len(), &taken, (draw >> 16) as usize)
            .ok_or_else(|| {
                EnvNotReady::new(
                format!("no {} free /24 networks left in pool {}", names.len(), topo.network.pool),
                "run `cpmlab down --all` to remove old labs, or set network.pool in the topology",
            )
            })?;
        let results =
            futures_util::future::join_all(names.iter().zip(&nets).map(|(n, net)| async move {
                let docker_name = crate::plan::network_name(lab, n);
                engine
                    .create_network(lab, &docker_name, n, &net.cidr(), net.host(1), None)
                    .await
            }))
            .await;
        let raced = results
            .iter()
            .any(|r| matches!(r, Err(e) if e.to_string().contains("overlap")));
        if raced {
            for n in &names {
                engine
                    .remove_network(&crate::plan::network_name(lab, n))
                    .await?;
            }
            continue;
        }
        for (r, n) in results.into_iter().zip(&names) {
            r.with_context(|| format!("create network {}", crate::plan::network_name(lab, n)))?;
        }
        return Ok(nets);
    }
    anyhow::bail!("could not allocate networks: other labs kept taking the same subnets")
}

fn zone_records(state: &LabState) -> Vec<ARecord> {
    let zone = &state.dns.zone;
    let mut r = vec![ARecord {
        name: state.dns.api_name.clone(),
        ip: state
            .seed_by_role(crate::topology::SeedRole::Source)
            .gateway
            .ip,
    }];
    for s in &state.seeds {
        r.push(ARecord {
            name: format!("{}-gateway.{zone}", s.name),
            ip: s.gateway.ip,
        });
        // The seed-bound name: under the seed's ingress domain, its
        // gateway's for good (a seed's wildcard record, not the shoot's).
        if state.topology.api.wildcard_certificate {
            r.push(ARecord {
                name: state.topology.shoot.seed_bound_name(&s.name),
                ip: s.gateway.ip,
            });
        }
    }
    for m in &state.members {
        r.extend(member_records(m));
    }
    r
}

/// A member's name resolves to its address on its own seed's gateway
/// (Gardener's per-member DNSRecord); its pod's name to the member itself
/// (what the gateway resolves to reach it, as a headless Service's record).
pub fn member_records(m: &MemberState) -> [ARecord; 2] {
    [
        ARecord {
            name: m.host.clone(),
            ip: m.vip(),
        },
        ARecord {
            name: m.pod_host(),
            ip: m.ip,
        },
    ]
}

/// The members a seed's gateway fronts (`LabState::gateway_members`).
pub fn gateway_members(state: &LabState, seed: &str) -> Vec<MemberState> {
    state.gateway_members(seed)
}

/// The files of a seed's gateway container at its creation: Envoy's
/// bootstrap, the lab's input (what the seed exposes, its replicas), the
/// probes' token, and the certificates: the API name's (TLS ends here in
/// termination mode), the lab CA (client certificates and the replicas'
/// serving certificates are checked against it), and the gateway's
/// front-proxy client certificate (`system:istio-gateway`).
pub fn gateway_files(
    state: &LabState,
    seed: &crate::state::SeedState,
    keys: &LabKeys,
) -> Result<Vec<FileSpec>> {
    use crate::exposure::envoy::{self, tls};
    let input =
        crate::gateway::GatewayInput::of(state, &seed.name, |_| (false, None)).map_err(BadInput)?;
    let server = keys.ca.issue_member(
        &format!("{}-gateway", seed.name),
        std::slice::from_ref(&state.dns.api_name),
        &[seed.gateway.ip.into()],
    )?;
    let proxy = keys
        .front_proxy
        .issue_client(crate::exposure::GATEWAY_CLIENT_CN)?;
    let at = |f: &str| format!("{}/{f}", envoy::TLS_DIR);
    // The seed's wildcard certificate for its ingress domain, where the
    // topology gives the seeds one: signed by the lab CA here (a public
    // CA's in a landscape, which is why Gardener's kubeconfig for the
    // seed-bound address carries no CA).
    let wildcard = if state.topology.api.wildcard_certificate {
        let c = keys.ca.issue_member(
            &format!("{}-ingress-wildcard", seed.name),
            &[format!(
                "*.{}",
                state.topology.shoot.ingress_domain(&seed.name)
            )],
            &[],
        )?;
        vec![
            FileSpec::new(at(tls::WILDCARD_CERT), c.cert_pem, 0o644),
            FileSpec::new(at(tls::WILDCARD_KEY), c.key_pem, 0o600),
        ]
    } else {
        vec![]
    };
    let mut files = vec![
        FileSpec::new(
            envoy::BOOTSTRAP,
            serde_json::to_vec_pretty(&envoy::bootstrap(&format!("{}-gateway", seed.name)))?,
            0o644,
        ),
        FileSpec::new(
            crate::gateway::INPUT,
            serde_json::to_vec_pretty(&input)?,
            0o644,
        ),
        FileSpec::new(crate::gateway::TOKEN_FILE, state.api_token.clone(), 0o600),
        FileSpec::new(at(tls::SERVER_CERT), server.cert_pem, 0o644),
        FileSpec::new(at(tls::SERVER_KEY), server.key_pem, 0o600),
        FileSpec::new(at(tls::CLIENT_CA), keys.ca.cert_pem.clone(), 0o644),
        FileSpec::new(at(tls::UPSTREAM_CA), keys.ca.cert_pem.clone(), 0o644),
        FileSpec::new(at(tls::PROXY_CERT), proxy.cert_pem, 0o644),
        FileSpec::new(at(tls::PROXY_KEY), proxy.key_pem, 0o600),
    ];
    files.extend(wildcard);
    Ok(files)
}

/// An etcd member's container; `cluster` is `--initial-cluster` (name, peer URL).
pub fn member_spec(
    state: &LabState,
    ca: &Ca,
    m: &MemberState,
    cluster: &[(String, String)],
    cluster_state: ClusterState,
) -> Result<ContainerSpec> {
    let mut c = base_spec(state, &m.container, "etcd", Some(&m.seed));
    c.networks = vec![(docker_network(state, &m.seed), m.ip)];
    c.volumes.push((m.volume.clone(), etcd::DATA_DIR.into()));
    let cert = ca.issue_member(&m.name, std::slice::from_ref(&m.host), &[m.ip.into()])?;
    c.files = vec![
        FileSpec::new(
            format!("{}/ca.crt", etcd::PKI_DIR),
            ca.cert_pem.clone(),
            0o644,
        ),
        FileSpec::new(
            format!("{}/server.crt", etcd::PKI_DIR),
            cert.cert_pem,
            0o644,
        ),
        FileSpec::new(format!("{}/server.key", etcd::PKI_DIR), cert.key_pem, 0o600),
    ];
    let version = state.topology.etcd.etcd_version().map_err(BadInput)?;
    c.cmd = behind_barrier(
        state,
        etcd::member_command(
            m,
            cluster,
            cluster_state,
            &format!("cpmlab-{}", state.name),
            version,
            &state.topology.etcd,
        ),
    );
    Ok(c)
}

/// An API server replica's container, talking to `etcd_servers`.
pub fn apiserver_spec(
    state: &LabState,
    ca: &Ca,
    a: &crate::state::ApiServerState,
    etcd_servers: &[String],
    sa: &(String, String),
) -> Result<ContainerSpec> {
    use crate::apiserver::launch::{self, ApiServerKind, DIR};
    let mut c = base_spec(state, &a.container, "apiserver", Some(&a.seed));
    c.networks = vec![(docker_network(state, &a.seed), a.ip)];
    // kube-apiserver's names, with the one a gateway that ends TLS sends
    // as SNI (`kubernetes.default.svc.cluster.local`).
    let cert = ca.issue_member(
        &a.name,
        &[
            state.dns.api_name.clone(),
            "kubernetes".into(),
            "kubernetes.default".into(),
            "kubernetes.default.svc".into(),
            crate::exposure::UPSTREAM_SNI.into(),
        ],
        &[a.ip.into()],
    )?;
    c.files = vec![
        FileSpec::new(format!("{DIR}/ca.crt"), ca.cert_pem.clone(), 0o644),
        FileSpec::new(
            format!("{DIR}/{}", crate::apiserver::launch::FRONT_PROXY_CA),
            state.front_proxy_ca.clone(),
            0o644,
        ),
        FileSpec::new(format!("{DIR}/server.crt"), cert.cert_pem, 0o644),
        FileSpec::new(format!("{DIR}/server.key"), cert.key_pem, 0o600),
        FileSpec::new(format!("{DIR}/token"), state.api_token.clone(), 0o600),
    ];
    let replica = launch::Replica {
        name: &a.name,
        seed: &a.seed,
        ip: a.ip,
        api_name: &state.dns.api_name,
        etcd_servers,
        shutdown_delay: &state.topology.api.shutdown_delay,
        watch_termination_grace: &state.topology.api.watch_termination_grace,
        send_retry_after: state.topology.api.shutdown_send_retry_after,
    };
    // The binary is the lab image's (`images::with_parts`), never the
    // host's: the image was asked for it when the lab was made.
    if state.api_kind.image_bin().is_some() {
        c.files.push(FileSpec::new(
            format!("{DIR}/tokens.csv"),
            launch::tokens_csv(&state.api_token),
            0o600,
        ));
    }
    c.cmd = match state.api_kind {
        ApiServerKind::KubeApiserver => {
            c.files
                .push(FileSpec::new(format!("{DIR}/sa.key"), sa.0.clone(), 0o600));
            c.files
                .push(FileSpec::new(format!("{DIR}/sa.pub"), sa.1.clone(), 0o644));
            behind_barrier(state, launch::kube_apiserver_command(&replica))
        }
        ApiServerKind::Generic => behind_barrier(state, launch::generic_command(&replica)),
        ApiServerKind::Standin => {
            behind_barrier(state, launch::standin_command(AGENT_BIN, &replica))
        }
    };
    Ok(c)
}

/// The lab's own containers, in both forms: the wan router on every
/// network, the DNS server and the toolbox on the clients network.
pub fn infra_specs(state: &LabState, ca: &Ca, client: &crate::pki::CertKey) -> Vec<ContainerSpec> {
    let docker_net = |n: &str| docker_network(state, n);
    let base = |name: &str, role: &str, seed: Option<&str>| base_spec(state, name, role, seed);
    let mut specs = Vec::new();
    let mut router = base(&state.router.container, "router", None);
    router.networks = state
        .networks
        .iter()
        .rev() // clients first: the router's "own" address is on clients
        .map(|n| (n.docker_name.clone(), n.router_ip))
        .collect();
    // The one container that shapes traffic: the delay line's TUN, tc,
    // iptables.
    router.cap_add = vec!["NET_ADMIN".into()];
    router.sysctls.extend([
        ("net.ipv4.ip_forward".into(), "1".into()),
        ("net.ipv4.conf.all.send_redirects".into(), "0".into()),
        // Packets come back from the delay line's TUN with foreign sources.
        ("net.ipv4.conf.all.rp_filter".into(), "0".into()),
        ("net.ipv4.conf.default.rp_filter".into(), "0".into()),
    ]);
    router.devices = vec!["/dev/net/tun".into()];
    router.cmd = behind_barrier(
        state,
        vec![
            AGENT_BIN.into(),
            "agent".into(),
            "router".into(),
            "--config".into(),
            crate::link::DELAYLINE_CONFIG.into(),
        ],
    );
    specs.push(router);

    let mut d = base(&state.dns.server.container, "dns", None);
    d.networks = vec![(docker_net("clients"), state.dns.server.ip)];
    d.cmd = behind_barrier(
        state,
        vec![
            "named".into(),
            "-g".into(),
            "-c".into(),
            dns::CONF_FILE.into(),
        ],
    );
    d.files = vec![
        FileSpec::new(
            dns::CONF_FILE,
            dns::named_conf(
                &state.dns.zone,
                &state.dns.tsig_key_name,
                &state.dns.tsig_secret,
            ),
            0o644,
        ),
        FileSpec::new(
            dns::ZONE_FILE,
            dns::zone_file(
                &state.dns.zone,
                state.dns.ttl,
                state.dns.server.ip,
                &zone_records(state),
            ),
            0o644,
        ),
    ];
    specs.push(d);

    let mut tb = base(&state.toolbox.container, "toolbox", None);
    tb.networks = vec![(docker_net("clients"), state.toolbox.ip)];
    tb.files = vec![
        FileSpec::new("/etc/cpmlab/pki/ca.crt", ca.cert_pem.clone(), 0o644),
        FileSpec::new("/etc/cpmlab/pki/client.crt", client.cert_pem.clone(), 0o644),
        FileSpec::new("/etc/cpmlab/pki/client.key", client.key_pem.clone(), 0o600),
    ];
    specs.push(tb);

    specs
}

fn container_specs(state: &LabState, keys: &LabKeys) -> Result<Vec<ContainerSpec>> {
    let docker_net = |n: &str| docker_network(state, n);
    let base = |name: &str, role: &str, seed: Option<&str>| base_spec(state, name, role, seed);
    let (ca, sa_key) = (&keys.ca, &keys.sa_key);
    let mut specs = infra_specs(state, ca, &keys.client);

    for s in &state.seeds {
        let mut g = base(&s.gateway.container, "gateway", Some(&s.name));
        g.networks = vec![(docker_net(&s.network), s.gateway.ip)];
        g.files = gateway_files(state, s, keys)?;
        g.cmd = behind_barrier(
            state,
            vec![AGENT_BIN.into(), "agent".into(), "gateway".into()],
        );
        specs.push(g);
    }

    let cluster: Vec<(String, String)> = state
        .members
        .iter()
        .map(|m| (m.name.clone(), m.peer_url()))
        .collect();
    for m in &state.members {
        specs.push(member_spec(state, ca, m, &cluster, ClusterState::New)?);
    }

    let sa = (sa_key.serialize_pem(), sa_key.public_key_pem());
    for a in &state.apiservers {
        let etcd_servers: Vec<String> = state
            .members_of(&a.seed)
            .map(|m| format!("https://{}:2379", m.ip))
            .collect();
        specs.push(apiserver_spec(state, ca, a, &etcd_servers, &sa)?);
    }
    Ok(specs)
}

/// Releases one container (see `release`).
pub async fn release_one(engine: &Engine, state: &LabState, container: &str) -> Result<()> {
    release(engine, state, &[container.to_string()]).await
}

/// Starts a created or stopped container and releases it: as a
/// StatefulSet's pod comes back, with its routes.
pub async fn start_released(engine: &Engine, state: &LabState, container: &str) -> Result<()> {
    engine.start(container).await?;
    release_one(engine, state, container).await
}

/// Sets each container's routes (its networks as Docker has
/// them), then releases its barrier.
pub async fn release(engine: &Engine, state: &LabState, which: &[String]) -> Result<()> {
    try_join_all(which.iter().map(|c| async move {
        let r = engine.running_container(c).await?;
        let own: Vec<&str> = state
            .networks
            .iter()
            .filter(|n| r.networks.contains(&n.docker_name))
            .map(|n| n.name.as_str())
            .collect();
        let gateway_of = (r.role == "gateway").then_some(r.seed.as_deref()).flatten();
        set_routes(engine, state, c, net_plan(state, &own, gateway_of))
            .await
            .with_context(|| format!("set the routes of {c}"))?;
        engine
            .exec_ok(c, &["touch", READY_FILE], false)
            .await
            .with_context(|| format!("release {c} (see `docker logs {c}`)"))
    }))
    .await?;
    Ok(())
}

/// etcd's client and peer ports.
const ETCD_PORTS: [u16; 2] = [2379, 2380];

/// How long a released member may take to listen before the gateways
/// start anyway.
const LISTEN_DEADLINE: Duration = Duration::from_secs(30);

/// Waits until `container` has a listening TCP socket on each of `ports`,
/// as its own network namespace lists them (`/proc/net/tcp` and `tcp6`
/// read inside the container); after `LISTEN_DEADLINE` it goes on, noting
/// what was missing.
async fn wait_listening(
    engine: &Engine,
    container: &str,
    ports: &[u16],
    deadline: Duration,
) -> Result<()> {
    let started = Instant::now();
    loop {
        let mut table = String::new();
        for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
            if let Ok(out) = engine.exec(container, &["cat", f], false).await {
                table.push_str(&out.stdout);
            }
        }
        let missing: Vec<u16> = ports
            .iter()
            .copied()
            .filter(|p| !listens(&table, *p))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if started.elapsed() > deadline {
            tracing::warn!(
                container,
                ?missing,
                "not listening yet; starting the gateways anyway"
            );
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Whether a `/proc/net/tcp`-style table has a socket listening on `port`
/// (state 0A) on any address.
pub fn listens(table: &str, port: u16) -> bool {
    let want = format!(":{port:04X}");
    table.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && f[1].ends_with(&want) && f[3] == "0A"
    })
}

/// Waits until the lab's DNS server answers the shoot API's name.
pub async fn wait_dns(state: &LabState, cancel: &Cancel) -> Result<()> {
    let server = SocketAddr::from((state.dns.server.ip, 53));
    let want: Ipv4Addr = state
        .seed_by_role(crate::topology::SeedRole::Source)
        .gateway
        .ip;
    let started = Instant::now();
    let mut last = String::new();
    let deadline = state.stretch(DNS_DEADLINE);
    while started.elapsed() < deadline {
        cancel.check()?;
        match dns::query_a(server, &state.dns.api_name, Duration::from_millis(500)).await {
            Ok((ips, _)) if ips == vec![want] => return Ok(()),
            Ok((ips, _)) => last = format!("answered {ips:?}, want {want}"),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!(
        "the lab DNS server did not answer {} within {deadline:?}: {last} (see `docker logs {}`)",
        state.dns.api_name,
        state.dns.server.container
    )
}

/// Waits until the shoot API answers /readyz through the source gateway.
async fn wait_api(state: &LabState, ca_pem: &str, cancel: &Cancel) -> Result<()> {
    let gw = state
        .seed_by_role(crate::topology::SeedRole::Source)
        .gateway
        .ip;
    crate::apiserver::ready::wait_api_at(state, gw, ca_pem, cancel).await
}

/// Until every member is healthy under one leader; what the last view
/// before that said was wrong (empty when the first view was settled).
async fn wait_etcd(
    state: &LabState,
    tls: &EtcdTls,
    step: &crate::progress::Step,
    cancel: &Cancel,
) -> Result<String> {
    let started = Instant::now();
    let want = state.members.len();
    let mut last = String::new();
    let deadline = state.stretch(ETCD_DEADLINE);
    loop {
        cancel.check()?;
        let view = etcd::cluster_view(state, tls, Duration::from_secs(2)).await;
        if view.is_settled(want) {
            return Ok(last);
        }
        let healthy = view.members.iter().filter(|m| m.healthy).count();
        step.detail(&format!("{healthy}/{want} healthy"));
        last = view.error.clone().unwrap_or_else(|| {
            view.members
                .iter()
                .filter_map(|m| m.error.as_ref().map(|e| format!("{}: {e}", m.name)))
                .collect::<Vec<_>>()
                .join("; ")
        });
        if started.elapsed() > deadline {
            anyhow::bail!(
                "etcd did not settle within {deadline:?} ({healthy}/{want} healthy): {last} (see `docker logs {}`)",
                state.members[0].container
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_socket_is_found_by_port_in_either_table() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 00000000:0951 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n\
   1: 0A00D50A:094C 0A00D50B:8A3C 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1\n";
        let tcp6 = "   0: 00000000000000000000000000000000:094C 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1 0 100 0 0 10 0\n";
        // 2385 listens; 2380 has only an established connection in tcp.
        assert!(listens(tcp, 2385));
        assert!(!listens(tcp, 2380));
        // etcd's [::]:2380 is in tcp6.
        assert!(listens(&format!("{tcp}{tcp6}"), 2380));
        assert!(!listens(tcp, 2379));
    }

    #[test]
    fn etcd_3_5_on_an_image_without_it_is_env_not_ready() {
        use crate::topology::EtcdVersion;
        let image = |v: Vec<EtcdVersion>| images::LabImage {
            tag: "cpmlab/lab:x".into(),
            built: false,
            etcd_versions: v,
            parts: Vec::new(),
            arch: "amd64".into(),
        };
        let mut topo = Topology::default();
        check_etcd_version(&topo, &image(vec![EtcdVersion::V3_4])).unwrap();
        topo.etcd.version = "3.5".into();
        let e = check_etcd_version(&topo, &image(vec![EtcdVersion::V3_4])).unwrap_err();
        assert_eq!(crate::errors::exit_code(&e), crate::errors::EXIT_ENV, "{e}");
        let msg = e.to_string();
        assert!(msg.contains("etcd 3.5 (etcd.version)"), "{msg}");
        assert!(
            msg.contains("fix: run `scripts/build-go etcd-3.5` (`scripts/setup --tests` does"),
            "{msg}"
        );
        check_etcd_version(&topo, &image(vec![EtcdVersion::V3_4, EtcdVersion::V3_5])).unwrap();
        let s = crate::plan::sample_state();
        let mut s35 = s.clone();
        s35.topology.etcd.version = "3.5".into();
        let ca = crate::pki::Ca::generate("t").unwrap();
        let all = vec![(s.members[0].name.clone(), s.members[0].peer_url())];
        for (state, bin) in [(&s, "etcd"), (&s35, images::ETCD_35_IN_IMAGE)] {
            let spec = member_spec(state, &ca, &state.members[0], &all, ClusterState::New).unwrap();
            let at = spec.cmd.iter().position(|a| a == "barrier").unwrap();
            assert_eq!(spec.cmd[at + 2], bin, "{:?}", spec.cmd);
        }
    }

    #[test]
    fn seed_containers_route_other_networks_via_the_router() {
        let s = crate::plan::sample_state();
        let plan = net_plan(&s, &["seed-a"], None);
        let via: Ipv4Addr = [10, 213, 0, 2].into();
        assert_eq!(
            plan.routes,
            vec![
                (Net24([10, 213, 1, 0].into()), via),
                (Net24([10, 213, 2, 0].into()), via),
                (Net24([10, 213, 3, 0].into()), via)
            ]
        );
        assert!(plan.addresses.is_empty());
        let router = net_plan(&s, &["seed-a", "seed-b", "clients"], None);
        assert_eq!(router, crate::netns::NetPlan::default());
    }

    #[test]
    fn only_the_router_holds_net_admin() {
        let mut s = crate::plan::sample_state();
        let dir = tempfile::tempdir().unwrap();
        let lab = LabDir::new(dir.path(), "t");
        lab.create().unwrap();
        let keys = LabKeys::generate(&lab, &mut s).unwrap();
        s.api_kind = crate::apiserver::launch::ApiServerKind::KubeApiserver;
        let specs = container_specs(&s, &keys).unwrap();
        // kube-apiserver is the lab image's: nothing of the host is mounted.
        for spec in &specs {
            let binds: Vec<_> = spec
                .volumes
                .iter()
                .filter(|(src, _)| src.starts_with('/'))
                .collect();
            assert!(binds.is_empty(), "{}: {binds:?}", spec.name);
        }
        let api = specs.iter().find(|c| c.role == "apiserver").unwrap();
        assert!(api
            .cmd
            .iter()
            .any(|a| a == crate::apiserver::launch::KUBE_APISERVER_BIN));
        // The gateway gets Envoy's bootstrap, the lab's input and its keys.
        let gw = specs.iter().find(|c| c.role == "gateway").unwrap();
        for f in [
            crate::exposure::envoy::BOOTSTRAP,
            crate::gateway::INPUT,
            "/etc/envoy/tls/front-proxy-client.key",
        ] {
            assert!(gw.files.iter().any(|x| x.path == f), "{f}");
        }
        assert!(gw
            .cmd
            .ends_with(&["agent".to_string(), "gateway".to_string()]));
        for spec in specs {
            let want: &[&str] = if spec.role == "router" {
                &["NET_ADMIN"]
            } else {
                &[]
            };
            assert_eq!(spec.cap_add, want, "{}", spec.name);
            assert!(
                !spec.files.iter().any(|f| f.path.ends_with(".sh")),
                "{}",
                spec.name
            );
        }
    }

    #[test]
    fn zone_points_members_and_api_at_gateways() {
        let s = crate::plan::sample_state();
        let r = zone_records(&s);
        let find = |n: &str| r.iter().find(|a| a.name == n).map(|a| a.ip.to_string());
        assert_eq!(find("api.local.cpmlab.test").as_deref(), Some("10.213.0.3"));
        assert_eq!(
            find("seed-a-etcd-2.local.cpmlab.test").as_deref(),
            Some("10.213.0.32")
        );
        let gw = net_plan(&s, &["seed-a"], Some("seed-a"));
        assert!(gw.addresses.contains(&[10, 213, 0, 30].into()));
        assert!(gw.addresses.contains(&[10, 213, 0, 32].into()));
        assert_eq!(
            find("seed-b-gateway.local.cpmlab.test").as_deref(),
            Some("10.213.1.3")
        );
    }

    /// `network.peer_exposure: port`: each member's peer URL names a port of
    /// its own, its name resolves to the gateway's one address (which gets
    /// no extra addresses), and the gateway listens on each port.
    #[test]
    fn port_exposure_puts_members_on_ports_of_the_gateway() {
        let mut topo = Topology::default();
        topo.network.peer_exposure = Some(crate::topology::PeerExposure::Port);
        let nets: Vec<crate::addressing::Net24> = (0..4)
            .map(|i| crate::addressing::Net24([10, 213, i, 0].into()))
            .collect();
        let s = crate::plan::LabPlan::new("t", &topo, &nets, "img:1").initial_state("x".into());
        assert_eq!(
            s.members[2].peer_url(),
            "https://seed-a-etcd-2.local.cpmlab.test:9102"
        );
        let r = zone_records(&s);
        let find = |n: &str| r.iter().find(|a| a.name == n).map(|a| a.ip.to_string());
        assert_eq!(
            find("seed-a-etcd-2.local.cpmlab.test").as_deref(),
            Some("10.213.0.3")
        );
        assert!(net_plan(&s, &["seed-a"], Some("seed-a"))
            .addresses
            .is_empty());
        let x = crate::exposure::Exposure::of_docker_seed(&s, "seed-a");
        assert_eq!(x.tls_ports(), vec![2379, 9100, 9101, 9102]);
        // The member's pod name resolves to the member itself.
        assert_eq!(
            find("seed-a-etcd-2.pods.local.cpmlab.test").as_deref(),
            Some("10.213.0.12")
        );
        // The state of a lab made before the setting reads as before.
        let mut v = serde_json::to_value(crate::plan::sample_state().members).unwrap();
        v[0].as_object_mut().unwrap().remove("peer_port");
        let old: Vec<MemberState> = serde_json::from_value(v).unwrap();
        assert_eq!(old[0].peer_port, 2380);
    }

    #[test]
    fn barrier_wraps_the_command() {
        let s = crate::plan::sample_state();
        let c = behind_barrier(&s, vec!["etcd".into(), "--name=x".into()]);
        assert_eq!(c[0], "/bin/sh");
        assert!(c[2].contains(READY_FILE));
        assert!(c[2].starts_with("printf 'nameserver %s"));
        assert_eq!(c[3], "barrier");
        assert_eq!(c[4], "10.213.2.3");
        assert_eq!(&c[5..], ["etcd", "--name=x"]);
        assert!(c[2].contains("do sleep 0.05; done"), "{}", c[2]);
        // Under emulation each look is an emulated process: fewer looks.
        let mut s = s;
        s.emulation = Some(cpmlab_model::platform::Emulation {
            platform: "linux/arm64".into(),
            engine: "linux/amd64".into(),
            netlink_image: "cpmlab/lab:amd64".into(),
            slow_factor: 4.0,
            factor_from: "the platform's default".into(),
        });
        let c = behind_barrier(&s, vec!["etcd".into()]);
        assert!(c[2].contains("do sleep 0.5; done"), "{}", c[2]);
    }
}
