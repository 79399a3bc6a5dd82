//! `cpmlab up --provider kind`: the steps that make the kind form, as data
//! (each a command with its arguments and environment, never a shell line),
//! so that they can be read (`--render` writes them to `DIR/steps.txt`),
//! tested, and run one by one with progress.

pub use super::render::RenderKeys;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use super::lab_state::{context, kind_state, node_range};
use super::{cluster_name, namespace, KindSettings, INGRESS_NAMESPACE};
use crate::addressing::Net24;
use crate::topology::Topology;

/// One step: a command run on the host, or one of cpmlab's own actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub what: String,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Done by cpmlab itself instead of `argv` (which then only names it).
    pub action: Option<Action>,
    /// Run again every few seconds while it fails, up to this long: for a
    /// step that races what the cluster is still setting up.
    pub retry_for: Option<Duration>,
}

/// What cpmlab does itself between the commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Each node's CNI configuration and routes (`cni.rs`).
    PodNetwork { context: String, nodes: Vec<String> },
    /// The lab image's cpmlab binary copied into a node of lab `lab`, as
    /// the agent the migration's checks run from that seed
    /// (`Provider::vantage`).
    AgentInNode { lab: String, node: String },
}

/// The node of `seed` that carries the agent (its cluster's control plane).
pub fn agent_node(lab: &str, seed: &str) -> String {
    format!("{}-control-plane", cluster_name(lab, seed))
}

impl Step {
    fn new(what: impl Into<String>, argv: &[&str]) -> Step {
        Step {
            what: what.into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: vec![],
            action: None,
            retry_for: None,
        }
    }

    /// A step of an argv already built (`new`'s, owned).
    fn of(what: impl Into<String>, argv: Vec<String>) -> Step {
        Step {
            argv,
            ..Step::new(what, &[])
        }
    }

    fn retried_for(mut self, window: Duration) -> Step {
        self.retry_for = Some(window);
        self
    }

    fn env(mut self, k: &str, v: &str) -> Step {
        self.env.push((k.into(), v.into()));
        self
    }

    /// The step as one readable line (for `steps.txt`; never run as such).
    pub fn line(&self) -> String {
        let env: Vec<String> = self.env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
        format!("{}{}", env.concat(), self.argv.join(" "))
    }
}

/// The steps after the rendered files are in `dir`: per seed, its cluster
/// on its own Docker network (made beforehand, `<lab>-<seed>`), its nodes'
/// routes to the other networks through the wan router, CoreDNS asking the
/// lab's DNS server for the shoot's zone, the shoot's namespace (with
/// druid, druid) and etcd's objects, MetalLB with the seed's addresses,
/// Istio's ingress gateway, then the rest of the secrets and manifests,
/// and the waits that make each ready.
pub fn steps(lab: &str, t: &Topology, s: &KindSettings, nets: &[Net24], dir: &Path) -> Vec<Step> {
    let d = |p: String| dir.join(p).display().to_string();
    let ns = namespace(&t.shoot.name);
    let mut v = Vec::new();
    for (i, seed) in t.seeds.iter().enumerate() {
        let seed = &seed.name;
        let c = cluster_name(lab, seed);
        let ctx = format!("kind-{c}");
        let kubectl = |what: String, args: &[&str]| {
            let mut argv = vec!["kubectl", "--context", ctx.as_str()];
            argv.extend_from_slice(args);
            Step::new(what, &argv)
        };
        let net = crate::plan::network_name(lab, seed);
        // No `--wait`: with kind's CNI off, nodes are Ready once the pod
        // network below is configured.
        v.push(
            Step::new(
                format!("{seed}: kind cluster {c}"),
                &[
                    "kind",
                    "create",
                    "cluster",
                    "--config",
                    &d(format!("kind/{seed}.yaml")),
                ],
            )
            .env("KIND_EXPERIMENTAL_DOCKER_NETWORK", &net),
        );
        // The same paths as the docker form's: every other network through
        // the router, where `cpmlab link` shapes them.
        let via = nets[i].host(crate::addressing::host::ROUTER).to_string();
        let nodes = super::config::node_names(lab, seed, s);
        for node in &nodes {
            for (j, other) in nets.iter().enumerate().filter(|(j, _)| *j != i) {
                v.push(Step::new(
                    format!(
                        "{seed}: node {node} reaches {} via the router",
                        t.network_names()[j]
                    ),
                    &[
                        "docker",
                        "exec",
                        node,
                        "ip",
                        "route",
                        "replace",
                        &other.cidr(),
                        "via",
                        &via,
                    ],
                ));
            }
        }
        let mut net_step = Step::new(
            format!("{seed}: pod network (each node's CNI configuration, routes between nodes)"),
            &[
                "cpmlab:",
                "write",
                super::cni::CONF_PATH,
                "on",
                &nodes.join(","),
            ],
        );
        net_step.action = Some(Action::PodNetwork {
            context: ctx.clone(),
            nodes: nodes.clone(),
        });
        v.push(net_step);
        let node = agent_node(lab, seed);
        let mut agent = Step::new(
            format!("{seed}: the cpmlab agent in node {node} (the seed's checks run there)"),
            &[
                "cpmlab:",
                "docker",
                "cp",
                "<the lab image's cpmlab>",
                &format!("{node}:{}", cpmlab_provider::AGENT_BIN),
            ],
        );
        agent.action = Some(Action::AgentInNode {
            lab: lab.to_string(),
            node,
        });
        v.push(agent);
        v.push(kubectl(
            format!("{seed}: nodes ready"),
            &[
                "wait",
                "--for=condition=Ready",
                "node",
                "--all",
                "--timeout=180s",
            ],
        ));
        v.push(kubectl(
            format!("{seed}: CoreDNS asks the lab's DNS server for the shoot's zone"),
            &["apply", "-f", &d(format!("{seed}/coredns.yaml"))],
        ));
        v.push(kubectl(
            format!("{seed}: CoreDNS restarted"),
            &[
                "-n",
                "kube-system",
                "rollout",
                "restart",
                "deployment/coredns",
            ],
        ));
        v.push(kubectl(
            format!("{seed}: CoreDNS ready"),
            &[
                "-n",
                "kube-system",
                "rollout",
                "status",
                "deployment/coredns",
                "--timeout=120s",
            ],
        ));
        v.push(kubectl(
            format!("{seed}: shoot namespace"),
            &[
                "apply",
                "-f",
                &d(format!("{seed}/manifests/00-namespace-{ns}.yaml")),
            ],
        ));
        // gardener-resource-manager as gardenlet deploys it in a seed: it
        // delivers the shoot API's ManagedResource (below).
        v.push(Step::of(
            format!("{seed}: gardener-resource-manager (gardener's component)"),
            super::resource_manager::apply_argv(
                &ctx,
                &d(format!("{seed}/{}", super::resource_manager::VALUES_FILE)),
            ),
        ));
        if s.with_etcd_druid {
            // etcd-druid as gardenlet deploys it, before any `Etcd`.
            v.push(kubectl(
                format!("{seed}: etcd-druid (its CRDs, RBAC, configuration, Deployment)"),
                &[
                    "apply",
                    "--server-side",
                    "-f",
                    &d(format!("{seed}/etcd-druid")),
                ],
            ));
            v.push(kubectl(
                format!("{seed}: druid's CRDs established"),
                &[
                    "wait",
                    "--for=condition=Established",
                    "crd/etcds.druid.gardener.cloud",
                    "--timeout=60s",
                ],
            ));
            v.push(kubectl(
                format!("{seed}: etcd-druid ready"),
                &[
                    "-n",
                    super::druid_operator::NAMESPACE,
                    "rollout",
                    "status",
                    &format!("deployment/{}", super::druid_operator::NAME),
                    "--timeout=180s",
                ],
            ));
        }
        // etcd's own objects next, before the ingress: the source's members
        // (druid's, or the lab's StatefulSets) bootstrap while MetalLB and
        // Istio install. Nothing of them needs either: their peers meet by
        // in-cluster names, and the ingress names they also advertise
        // resolve through the lab's DNS. The rest follows Istio below.
        let files: Vec<String> = super::render::etcd_secret_files(t, s, seed)
            .iter()
            .map(|f| d(format!("{seed}/secrets/{f}")))
            .chain(
                super::manifests::etcd_files(lab, t, s, seed)
                    .iter()
                    .map(|f| d(format!("{seed}/manifests/{f}"))),
            )
            .collect();
        let mut etcd_objects = vec!["apply"];
        for f in &files {
            etcd_objects.extend(["-f", f.as_str()]);
        }
        v.push(kubectl(
            format!("{seed}: secrets and etcd's objects"),
            &etcd_objects,
        ));
        // MetalLB's own manifest, from its module (scripts/build-kind-images
        // puts it beside the images).
        let metallb = super::tools::metallb_manifest().display().to_string();
        v.push(kubectl(
            format!("{seed}: MetalLB"),
            &["apply", "-f", &metallb],
        ));
        v.push(kubectl(
            format!("{seed}: MetalLB ready"),
            &[
                "-n",
                "metallb-system",
                "wait",
                "--for=condition=Available",
                "deployment/controller",
                "--timeout=180s",
            ],
        ));
        // MetalLB's validating webhook answers only once its controller has
        // written the webhook's certificate and kube-proxy has programmed
        // the webhook Service: a deployment Available is not yet that (seen
        // here: the API server's call to the Service's address left the
        // node unrouted and met the host's own HTTPS proxy). So the pool is
        // applied again until the webhook accepts it.
        v.push(
            kubectl(
                format!("{seed}: MetalLB address pool"),
                &["apply", "-f", &d(format!("{seed}/metallb"))],
            )
            .retried_for(METALLB_WEBHOOK_WAIT),
        );
        v.push(kubectl(
            format!("{seed}: namespace {INGRESS_NAMESPACE}"),
            &["apply", "-f", &d(format!("{seed}/istio-namespace.yaml"))],
        ));
        v.push(Step::new(
            format!("{seed}: Istio (istiod, ingress gateway)"),
            &[
                "istioctl",
                "install",
                "-y",
                "--context",
                &ctx,
                "-f",
                &d(format!("{seed}/istio-operator.yaml")),
            ],
        ));
        let apiserver = d(format!("{seed}/{}", super::render::APISERVER_DIR));
        let (secrets, manifests) = (d(format!("{seed}/secrets")), d(format!("{seed}/manifests")));
        let mut rest = vec!["apply", "-f", &secrets, "-f", &manifests];
        // The destination's Deployment has no replica yet (the migration
        // scales it): applied with the rest.
        if seed != &t.source().name {
            rest.extend(["-f", &apiserver]);
        }
        v.push(kubectl(format!("{seed}: secrets and manifests"), &rest));
        v.push(kubectl(
            format!("{seed}: gardener-resource-manager ready"),
            &[
                "-n",
                super::resource_manager::NAMESPACE,
                "rollout",
                "status",
                &format!("deployment/{}", super::resource_manager::DEPLOYMENT),
                "--timeout=180s",
            ],
        ));
        // The shoot API's Gateway, VirtualService and DestinationRules as
        // Gardener's apiserverexposure component renders them, and its
        // EnvoyFilters as the ManagedResource gardener-resource-manager
        // delivers (it reads the namespace's UID and kube-apiserver's
        // ClusterIP, so after the manifests).
        v.push(Step::of(
            format!("{seed}: the shoot API's exposure (gardener's apiserverexposure)"),
            super::apiserver_exposure::apply_argv(
                &ctx,
                &d(format!("{seed}/{}", super::apiserver_exposure::VALUES_FILE)),
            ),
        ));
        if seed == &t.source().name {
            // With druid, druid makes the pods: its own word that every
            // member is ready (the Etcd's `status.ready`) is waited for.
            v.push(if s.with_etcd_druid {
                kubectl(
                    format!("{seed}: etcd ready (druid's Etcd status)"),
                    &[
                        "-n",
                        &ns,
                        "wait",
                        "--for=jsonpath={.status.ready}=true",
                        &format!("etcd/{}", super::druid::etcd_name(t, s, seed)),
                        "--timeout=300s",
                    ],
                )
            } else {
                kubectl(
                    format!("{seed}: etcd ready"),
                    &[
                        "-n",
                        &ns,
                        "wait",
                        "--for=condition=Ready",
                        "pod",
                        "-l",
                        "app.kubernetes.io/part-of=etcd-main",
                        "--timeout=300s",
                    ],
                )
            });
            // kube-apiserver once etcd is ready, as gardenlet deploys it
            // (gardener v1.150.0 `pkg/gardenlet/controller/shoot/shoot/
            // reconciler_reconcile.go`: "Deploying Kubernetes API server"
            // depends on waitUntilEtcdReady), not crash-looping before.
            v.push(kubectl(
                format!("{seed}: kube-apiserver"),
                &["apply", "-f", &apiserver],
            ));
            v.push(kubectl(
                format!("{seed}: kube-apiserver ready"),
                &[
                    "-n",
                    &ns,
                    "rollout",
                    "status",
                    "deployment/kube-apiserver",
                    "--timeout=300s",
                ],
            ));
        }
        v.push(kubectl(
            format!("{seed}: ingress address"),
            &[
                "-n",
                INGRESS_NAMESPACE,
                "wait",
                "--for=jsonpath={.status.loadBalancer.ingress[0].ip}",
                "service/istio-ingressgateway",
                "--timeout=180s",
            ],
        ));
    }
    v
}

/// The steps in chains, one per seed in the order `steps` gives them
/// (a step's seed is the prefix of its `what`, `<seed>: ...`).
pub fn by_seed(steps: Vec<Step>) -> Vec<Vec<Step>> {
    let mut chains: Vec<(String, Vec<Step>)> = Vec::new();
    for step in steps {
        let seed = step
            .what
            .split_once(": ")
            .map(|(s, _)| s.to_string())
            .unwrap_or_default();
        match chains.iter_mut().find(|(s, _)| *s == seed) {
            Some((_, c)) => c.push(step),
            None => chains.push((seed, vec![step])),
        }
    }
    chains.into_iter().map(|(_, c)| c).collect()
}

/// The environment the steps run in: the lab's Go-built tools
/// (`scripts/build-go --kind` installs kind, kubectl and istioctl in
/// `go_parts::install_dir()`) first on PATH, and where Docker refuses
/// `--privileged`, the privileged adapter before them (`adapter.rs`), with
/// the real docker named for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tooling {
    pub env: Vec<(String, String)>,
}

/// The adapter kind's docker calls go through (`adapter.rs`): its
/// directory, the lab whose node containers it labels, and whether it
/// gives privileged calls the grant (where Docker refuses `--privileged`).
#[derive(Debug, Clone)]
pub struct Adapter<'a> {
    pub dir: &'a Path,
    pub lab: &'a str,
    pub grant: bool,
}

impl Tooling {
    pub fn new(adapter: Option<Adapter<'_>>) -> Tooling {
        let mut dirs: Vec<std::path::PathBuf> = Vec::new();
        dirs.extend(adapter.as_ref().map(|a| a.dir.to_path_buf()));
        dirs.extend(crate::go_parts::install_dir());
        if let Some(p) = std::env::var_os("PATH") {
            dirs.extend(std::env::split_paths(&p));
        }
        let mut env = vec![(
            "PATH".to_string(),
            std::env::join_paths(dirs)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
        )];
        if let Some(a) = &adapter {
            if let Some(d) = super::adapter::real_docker() {
                env.push((
                    super::adapter::REAL_DOCKER_ENV.to_string(),
                    d.display().to_string(),
                ));
            }
            env.push((super::adapter::LAB_ENV.to_string(), a.lab.to_string()));
            if a.grant {
                env.push((super::adapter::GRANT_ENV.to_string(), "1".into()));
            }
        }
        Tooling { env }
    }

    /// `program` (kind, kubectl, istioctl, ...) as a command with the
    /// tools' environment, looked up on the tools' PATH first: the lab's
    /// Go-built tools are found whether or not they are on the caller's.
    pub fn command(&self, program: &str) -> tokio::process::Command {
        let found = self
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .and_then(|(_, path)| {
                std::env::split_paths(path)
                    .map(|d| d.join(program))
                    .find(|p| p.is_file())
            })
            .unwrap_or_else(|| program.into());
        let mut cmd = tokio::process::Command::new(found);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }
}

/// How long the MetalLB address pool is applied again while MetalLB's
/// webhook does not accept it yet.
pub const METALLB_WEBHOOK_WAIT: Duration = Duration::from_secs(120);
/// The pause between a failed attempt of a retried step and the next.
const RETRY_PAUSE: Duration = Duration::from_secs(3);

/// Runs one step; its output is kept in `log` (appended), and a failure
/// names the step, its command and the log. A step with `retry_for` is run
/// again while it fails, until that window has passed (each attempt is in
/// the log; the error is the last attempt's, with their count).
pub async fn run_step(step: &Step, log: &Path, timeout: Duration, tools: &Tooling) -> Result<()> {
    let Some(window) = step.retry_for else {
        return run_step_once(step, log, timeout, tools).await;
    };
    let started = std::time::Instant::now();
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        match run_step_once(step, log, timeout, tools).await {
            Ok(()) => return Ok(()),
            Err(e) if started.elapsed() + RETRY_PAUSE >= window => {
                return Err(e.context(format!(
                    "{}: still failing after {attempts} attempt(s) in {:.0?}",
                    step.what,
                    started.elapsed()
                )));
            }
            Err(e) => {
                tracing::info!(step = %step.what, attempt = attempts, error = %format!("{e:#}"), "retrying");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

/// After a failed kubectl step, what the cluster looked like: its pods,
/// the step's namespace's pods described, and the events, into the steps'
/// log, so that a wait that timed out says why (a pod pending, crashing,
/// unready).
async fn diagnose(step: &Step, f: &mut std::fs::File, tools: &Tooling) {
    use std::io::Write;
    let a = &step.argv;
    if a.first().map(String::as_str) != Some("kubectl") {
        return;
    }
    let Some(ctx) = a
        .iter()
        .position(|x| x == "--context")
        .and_then(|i| a.get(i + 1))
    else {
        return;
    };
    let ns = a.iter().position(|x| x == "-n").and_then(|i| a.get(i + 1));
    let mut looks: Vec<Vec<&str>> = vec![
        vec!["get", "pods", "-A", "-o", "wide"],
        vec!["get", "events", "-A", "--sort-by=.lastTimestamp"],
    ];
    if let Some(ns) = ns {
        looks.insert(1, vec!["-n", ns, "describe", "pods"]);
    }
    for look in looks {
        let mut cmd = tools.command("kubectl");
        cmd.args(["--context", ctx]).args(&look).kill_on_drop(true);
        let _ = writeln!(
            f,
            "=== diagnosis: kubectl --context {ctx} {}",
            look.join(" ")
        );
        match tokio::time::timeout(Duration::from_secs(20), cmd.output()).await {
            Ok(Ok(o)) => {
                let _ = f.write_all(&o.stdout);
                let _ = f.write_all(&o.stderr);
            }
            Ok(Err(e)) => {
                let _ = writeln!(f, "(not run: {e})");
            }
            Err(_) => {
                let _ = writeln!(f, "(no answer within 20 s)");
            }
        }
    }
}

async fn run_step_once(step: &Step, log: &Path, timeout: Duration, tools: &Tooling) -> Result<()> {
    use std::io::Write;
    if let Some(action) = &step.action {
        let run = async {
            match action {
                Action::PodNetwork { context, nodes } => {
                    super::cni::configure(context, nodes).await
                }
                Action::AgentInNode { lab, node } => copy_agent(lab, node).await,
            }
        };
        return tokio::time::timeout(timeout, run)
            .await
            .with_context(|| format!("{}: took over {timeout:?}", step.what))?
            .with_context(|| step.what.clone());
    }
    let mut cmd = tools.command(&step.argv[0]);
    cmd.args(&step.argv[1..]).kill_on_drop(true);
    for (k, v) in &step.env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(timeout, cmd.output())
        .await
        .with_context(|| format!("{}: `{}` took over {timeout:?}", step.what, step.line()))?
        .with_context(|| format!("{}: run `{}`", step.what, step.line()))?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("open {}", log.display()))?;
    writeln!(f, "=== {}: {}", step.what, step.line())?;
    f.write_all(&out.stdout)?;
    f.write_all(&out.stderr)?;
    if !out.status.success() {
        diagnose(step, &mut f, tools).await;
    }
    anyhow::ensure!(
        out.status.success(),
        "{}: `{}` exited {}: {} (whole output in {})",
        step.what,
        step.line(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .last()
            .unwrap_or(""),
        log.display()
    );
    Ok(())
}

/// Copies the cpmlab binary of the lab image (`images::ensure`: the Linux
/// binary built for the engine, whatever the host runs) into `node` at the
/// agent's path, through the Docker API.
async fn copy_agent(lab: &str, node: &str) -> Result<()> {
    let engine = cpmlab_provider_docker::engine::Engine::connect().await?;
    let image = cpmlab_provider_docker::images::ensure(&engine).await?.tag;
    let bin = engine
        .image_file(lab, &image, cpmlab_provider::AGENT_BIN)
        .await?;
    engine
        .upload(
            node,
            &[cpmlab_provider::FileSpec::new(
                cpmlab_provider::AGENT_BIN,
                bin,
                0o755,
            )],
        )
        .await
        .with_context(|| format!("copy the cpmlab binary of {image} into {node}"))?;
    // The seed's gardenlet renders Gardener's objects for the handovers
    // with the renderer `up` ran (`apiserver_exposure`), mounted from here.
    let renderer =
        super::tools::find_tool(super::apiserver_exposure::RENDERER).with_context(|| {
            format!(
                "{} is not built: run scripts/setup --kind",
                super::apiserver_exposure::RENDERER
            )
        })?;
    let bytes = std::fs::read(&renderer).with_context(|| format!("read {}", renderer.display()))?;
    engine
        .upload(
            node,
            &[cpmlab_provider::FileSpec::new(
                super::gardenlet::NODE_RENDERER,
                bytes,
                0o755,
            )],
        )
        .await
        .with_context(|| format!("copy {} into {node}", renderer.display()))
}

/// The networks of a kind lab: the seeds' (kind's nodes join them) and the
/// clients', as the docker form allocates them.
pub fn default_nets(t: &Topology) -> Result<Vec<Net24>, crate::errors::BadInput> {
    let pool = crate::addressing::Pool::parse(&t.network.pool)
        .map_err(|e| crate::errors::BadInput(format!("network.pool: {e}")))?;
    pool.allocate(t.network_names().len(), &[])
        .ok_or_else(|| crate::errors::BadInput("network.pool: too small for the lab".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each seed's steps form one chain, in `steps`' order, every step in
    /// exactly one: the seeds are made side by side.
    #[test]
    fn each_seed_s_steps_are_one_chain_in_order() {
        let t = Topology::default();
        let nets = default_nets(&t).unwrap();
        let all = steps("lab", &t, &KindSettings::default(), &nets, Path::new("/r"));
        let whats: Vec<String> = all.iter().map(|s| s.what.clone()).collect();
        let chains = by_seed(all);
        assert_eq!(chains.len(), t.seeds.len());
        for (chain, seed) in chains.iter().zip(&t.seeds) {
            assert!(
                chain
                    .iter()
                    .all(|s| s.what.starts_with(&format!("{}: ", seed.name))),
                "{seed:?}"
            );
            let mine: Vec<&String> = whats
                .iter()
                .filter(|w| w.starts_with(&format!("{}: ", seed.name)))
                .collect();
            let got: Vec<&String> = chain.iter().map(|s| &s.what).collect();
            assert_eq!(got, mine, "the chain keeps the order");
        }
        assert_eq!(chains.iter().map(Vec::len).sum::<usize>(), whats.len());
    }

    /// MetalLB's webhook is not ready when its controller is Available:
    /// its address pool is the step that is applied again, and only it.
    #[test]
    fn only_metallb_s_address_pool_is_retried() {
        let t = Topology::default();
        let nets = default_nets(&t).unwrap();
        let s = steps("lab", &t, &KindSettings::default(), &nets, Path::new("/r"));
        let retried: Vec<&str> = s
            .iter()
            .filter(|s| s.retry_for.is_some())
            .map(|s| s.what.as_str())
            .collect();
        assert_eq!(
            retried,
            [
                "seed-a: MetalLB address pool",
                "seed-b: MetalLB address pool"
            ]
        );
        assert!(s
            .iter()
            .all(|s| s.retry_for.is_none_or(|w| w == METALLB_WEBHOOK_WAIT)));
    }

    /// A retried step runs again after a failure and succeeds; one whose
    /// window is over fails with the last attempt's error and the count.
    #[tokio::test]
    async fn a_retried_step_runs_again_until_it_succeeds_or_its_window_ends() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("up.log");
        let marker = dir.path().join("second");
        let m = marker.display().to_string();
        // Fails the first time (and leaves the marker), succeeds after.
        let script = format!("test -e {m} || {{ touch {m}; echo not yet >&2; exit 1; }}");
        let step = Step::new("flaky", &["sh", "-c", &script]).retried_for(Duration::from_secs(30));
        run_step(&step, &log, Duration::from_secs(10), &Tooling::default())
            .await
            .unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text.matches("=== flaky").count(), 2, "{text}");
        assert!(text.contains("not yet"), "{text}");
        let never = Step::new("never", &["sh", "-c", "echo still no >&2; exit 1"])
            .retried_for(Duration::from_secs(1));
        let e = run_step(&never, &log, Duration::from_secs(10), &Tooling::default())
            .await
            .unwrap_err();
        let e = format!("{e:#}");
        assert!(e.contains("still failing after 1 attempt(s)"), "{e}");
        assert!(e.contains("still no"), "{e}");
    }

    #[test]
    fn each_seed_gets_its_cluster_on_its_own_network_and_no_shell() {
        let t = Topology::default();
        let nets = default_nets(&t).unwrap();
        let s = steps("lab", &t, &KindSettings::default(), &nets, Path::new("/r"));
        let kind: Vec<&Step> = s.iter().filter(|s| s.argv[0] == "kind").collect();
        assert_eq!(kind.len(), 2);
        assert_eq!(
            kind[1].env,
            [(
                "KIND_EXPERIMENTAL_DOCKER_NETWORK".to_string(),
                "lab-seed-b".to_string()
            )]
        );
        assert!(s
            .iter()
            .all(|s| !["sh", "bash"].contains(&s.argv[0].as_str())));
        // Each seed's checks (the RTT gate, the peer URLs) run from its
        // first node, which gets the agent once its cluster exists.
        let agents: Vec<&Action> = s.iter().filter_map(|s| s.action.as_ref()).collect();
        for seed in ["seed-a", "seed-b"] {
            assert!(
                agents.contains(&&Action::AgentInNode {
                    lab: "lab".into(),
                    node: format!("lab-{seed}-control-plane")
                }),
                "{agents:?}"
            );
        }
        let kind_a = s
            .iter()
            .position(|s| s.what == "seed-a: kind cluster lab-seed-a");
        let agent_a = s.iter().position(|s| {
            s.action
                == Some(Action::AgentInNode {
                    lab: "lab".into(),
                    node: agent_node("lab", "seed-a"),
                })
        });
        assert!(kind_a.unwrap() < agent_a.unwrap());
        // Only the source waits for etcd: the destination's members are
        // the migration's to start.
        assert_eq!(
            s.iter().filter(|s| s.what.ends_with("etcd ready")).count(),
            1
        );
        // seed-a's node reaches seed-b's network and the clients' through
        // the router's address on seed-a's network.
        let routes: Vec<String> = s
            .iter()
            .filter(|s| s.argv.get(3).is_some_and(|a| a == "ip"))
            .map(|s| s.line())
            .collect();
        assert_eq!(routes.len(), 6, "{routes:#?}");
        assert_eq!(
            routes[0],
            format!(
                "docker exec lab-seed-a-control-plane ip route replace {} via {}",
                nets[1].cidr(),
                nets[0].host(2)
            )
        );
        // CoreDNS is configured before the shoot's pods need names.
        let pos = |what: &str| s.iter().position(|x| x.what.contains(what)).unwrap();
        assert!(pos("seed-a: CoreDNS ready") < pos("seed-a: secrets and manifests"));
        // etcd's objects before the ingress (MetalLB, Istio), so that etcd
        // bootstraps while those install; the rest after Istio.
        assert!(pos("seed-a: CoreDNS ready") < pos("seed-a: secrets and etcd's objects"));
        assert!(pos("seed-a: secrets and etcd's objects") < pos("seed-a: MetalLB"));
        assert!(pos("seed-a: Istio") < pos("seed-a: secrets and manifests"));
        // The source's kube-apiserver once its etcd is ready (as gardenlet
        // deploys it); the destination's, without replicas, with the rest.
        let exact = |what: &str| s.iter().position(|x| x.what == what).unwrap();
        assert!(pos("seed-a: etcd ready") < exact("seed-a: kube-apiserver"));
        assert!(exact("seed-a: kube-apiserver") < pos("seed-a: kube-apiserver ready"));
        assert!(!s[pos("seed-a: secrets and manifests")]
            .line()
            .contains("/apiserver"));
        assert!(s[pos("seed-b: secrets and manifests")]
            .line()
            .contains("seed-b/apiserver"));
        let early = &s[pos("seed-a: secrets and etcd's objects")];
        assert!(
            early
                .argv
                .iter()
                .any(|a| a.ends_with("seed-a/secrets/ca.yaml"))
                && early.argv.iter().all(|a| !a.ends_with("/secrets")
                    && !a.contains("deployment-kube-apiserver")
                    && !a.contains("-30-")),
            "{}",
            early.line()
        );
    }
}

/// What `up` made of a kind lab, for `down`: `<lab dir>/kind.json`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct KindLab {
    pub clusters: Vec<String>,
    pub networks: Vec<String>,
}

pub const KIND_FILE: &str = "kind.json";
/// The rendered files `up` applied, in the lab's directory.
pub const RENDER_DIR: &str = "kind-form";

/// Renders every file of the kind form, secrets included, into `dir`.
pub fn render_all(
    lab: &str,
    t: &Topology,
    s: &KindSettings,
    nets: &[Net24],
    keys: &RenderKeys,
    dir: &Path,
    host: Option<&super::gardenlet::HostMounts>,
) -> Result<()> {
    let mut files = super::render::render_with(lab, t, s, nets, host);
    for seed in &t.seeds {
        files.extend(super::render::secrets(lab, t, s, &seed.name, keys)?);
    }
    files.push(super::render::RenderedFile {
        path: "steps.txt".into(),
        contents: steps(lab, t, s, nets, dir)
            .iter()
            .map(|s| format!("# {}\n{}\n", s.what, s.line()))
            .collect(),
        secret: false,
    });
    super::render::write(dir, &files)
}

/// Makes the kind form of lab `lab`: refuses (exit 3) while a tool or an
/// image is missing, naming each; on a failed step removes what it made.
/// The lab's router, DNS server and toolbox are the docker form's
/// containers; the lab state it saves is what `migrate`, `link` and
/// `probe` read.
pub async fn create(
    state_root: &Path,
    lab: &str,
    t: &Topology,
    s: &KindSettings,
    retain: bool,
    progress: &crate::progress::Progress,
) -> Result<()> {
    let engine = cpmlab_provider_docker::engine::Engine::connect().await?;
    let reqs = super::tools::check(Some(&engine)).await;
    if let Some(missing) = super::tools::missing_line(&reqs) {
        return Err(crate::errors::EnvNotReady::new(
            format!("the kind form needs what this host lacks: {missing}"),
            "`cpmlab doctor --provider kind` names each with how to get it; \
             `cpmlab up --provider kind --render DIR` writes what would be applied"
                .to_string(),
        )
        .into());
    }
    make(
        &engine,
        state_root,
        lab,
        t,
        s,
        Make {
            ready: ReadyWhen::ShootApiAnswers,
            retain,
        },
        progress,
    )
    .await
}

/// How [`make`] finishes.
#[derive(Debug, Clone, Copy)]
pub struct Make {
    /// When the lab counts as ready.
    pub ready: ReadyWhen,
    /// `--retain`: keep what was made when a step fails.
    pub retain: bool,
}

/// When a made kind lab counts as ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadyWhen {
    /// The shoot API answers through the source seed's ingress, as its
    /// clients reach it (what `cpmlab up` waits for).
    ShootApiAnswers,
    /// Every step ran. Only for a test whose `kind`, `kubectl` and
    /// `istioctl` are stubs: nothing there serves the shoot API or runs a
    /// gardenlet's pod.
    StepsRan,
}

/// What `create` does once the host has every tool and image: the lab's
/// networks, containers, keys and state, then the steps (run with the
/// `kind`, `kubectl` and `istioctl` on PATH), then the wait `ready` names.
pub async fn make(
    engine: &cpmlab_provider_docker::engine::Engine,
    state_root: &Path,
    lab: &str,
    t: &Topology,
    s: &KindSettings,
    how: Make,
    progress: &crate::progress::Progress,
) -> Result<()> {
    let Make { ready, retain } = how;
    use cpmlab_provider_docker::{images, up as docker_up};
    let dir = crate::state::LabDir::new(state_root, lab);
    if dir.exists() {
        return Err(crate::errors::EnvNotReady::new(
            format!("lab `{lab}` exists already ({})", dir.root.display()),
            format!("remove it with `cpmlab down --name {lab}`, or choose another --name"),
        )
        .into());
    }
    dir.create()?;
    let pool = crate::addressing::Pool::parse(&t.network.pool)
        .map_err(|e| crate::errors::BadInput(format!("network.pool: {e}")))?;
    let names = t.network_names();
    let nets = pool
        .allocate(names.len(), &engine.taken_subnets().await?)
        .context("no free /24s left in network.pool")?;
    let made = KindLab {
        clusters: t.seeds.iter().map(|s| cluster_name(lab, &s.name)).collect(),
        networks: names
            .iter()
            .map(|n| crate::plan::network_name(lab, n))
            .collect(),
    };
    crate::state::write_private(&dir.root.join(KIND_FILE), serde_json::to_vec_pretty(&made)?)?;
    let result = async {
        let step = progress.step("lab image (router, DNS, toolbox)");
        let image = images::ensure(engine).await?;
        // Every lab has a garden: its kube-apiserver and gardener-apiserver
        // run from this image, as on the docker form.
        docker_up::check_garden_parts(&image)?;
        let image = image.tag;
        step.done_with(&image);
        let step = progress.step("networks seed + clients");
        for ((name, logical), net) in made.networks.iter().zip(&names).zip(&nets) {
            // kind's nodes take addresses from the upper half: the lab's
            // fixed ones stay free.
            let nodes = (logical != crate::topology::CLIENTS).then(|| node_range(*net));
            engine
                .create_network(
                    lab,
                    name,
                    logical,
                    &net.cidr(),
                    net.host(1),
                    nodes.as_deref(),
                )
                .await
                .with_context(|| format!("create network {name}"))?;
        }
        step.done_with(&nets.iter().map(|n| n.cidr()).collect::<Vec<_>>().join(", "));

        let step = progress.step("certificates and state");
        let mut state = kind_state(lab, t, s, &nets, &image, crate::pki::random_secret());
        state.api_kind = crate::apiserver::launch::ApiServerKind::KubeApiserver;
        state.api_token = crate::pki::random_token();
        let keys = docker_up::LabKeys::generate(&dir, &mut state)?;
        docker_up::stamp_gardener_version(&mut state);
        let garden_keys =
            cpmlab_garden::access::GardenKeys::generate(&dir, &state, &keys.ca, &keys.front_proxy)?;
        dir.save(&state)?;
        step.done();

        let step = progress.step("containers: router, dns, toolbox, garden");
        let mut specs = docker_up::infra_specs(&state, &keys.ca, &keys.client);
        let infra: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        specs.extend(cpmlab_provider_docker::garden_specs::garden_specs(
            &state,
            &keys.ca,
            &state.front_proxy_ca,
            &garden_keys,
        ));
        for spec in &specs {
            engine.create_container(spec).await?;
            engine.start(&spec.name).await?;
        }
        let mut first = infra.clone();
        first.extend(cpmlab_provider_docker::garden_specs::garden_first(&state));
        docker_up::release(engine, &state, &first).await?;
        // CoreDNS will forward the shoot's zone here.
        docker_up::wait_dns(&state, &crate::errors::Cancel::default()).await?;
        step.done();

        let step = progress.step("garden: gardener-apiserver, the Seeds and the Shoot");
        let said = docker_up::bring_up(engine, &dir, &state, &keys.ca, &step).await?;
        step.done_with(&said);

        let render = dir.root.join(RENDER_DIR);
        let render_keys = RenderKeys {
            sa: keys.sa(),
            token: state.api_token.clone(),
            health_token: crate::pki::random_token(),
            ca: keys.ca,
            front_proxy: keys.front_proxy,
        };
        let host = super::gardenlet::HostMounts {
            state_root: std::fs::canonicalize(state_root)
                .unwrap_or_else(|_| state_root.to_path_buf()),
            engine_socket: cpmlab_provider_docker::garden_specs::engine_socket(),
        };
        render_all(lab, t, s, &nets, &render_keys, &render, Some(&host))?;
        let log = render.join("up.log");
        let step = progress.step("docker run --privileged");
        // kind's docker calls go through the adapter everywhere: it labels
        // each node container with the lab (a crashed kind lab's nodes
        // are then found by `down` without its state), and where Docker
        // refuses `--privileged` it also gives the nodes the grant.
        let exe = cpmlab_provider::agent_exe().context("the cpmlab binary's path")?;
        let adapter = super::adapter::dir(&dir.root);
        super::adapter::install(&adapter, &exe)?;
        let refused = super::adapter::privileged_refused(super::KIND_NODE_IMAGE).await?;
        match &refused {
            None => step.done_with("allowed: kind runs its nodes as it does everywhere"),
            Some(why) => step.done_with(&format!(
                "refused ({why}): kind runs through the privileged adapter"
            )),
        }
        let tools = Tooling::new(Some(Adapter {
            dir: &adapter,
            lab,
            grant: refused.is_some(),
        }));
        // Each seed's steps touch only its own cluster and nodes: the seeds
        // are made side by side, each its steps in order (most of a step's
        // time is a wait on its cluster: MetalLB's pods, CoreDNS, istiod).
        // kind itself runs one at a time: it locks the kubeconfig it
        // writes, and a second kind finding the lock fails.
        let chains = by_seed(steps(lab, t, s, &nets, &render));
        let kind_lock = tokio::sync::Mutex::new(());
        futures_util::future::try_join_all(chains.iter().map(|chain| {
            let (log, tools, progress, kind_lock) = (&log, &tools, &progress, &kind_lock);
            async move {
                for step in chain {
                    let _kind = match step.argv.first().map(String::as_str) {
                        Some("kind") => Some(kind_lock.lock().await),
                        _ => None,
                    };
                    let p = progress.step(step.what.clone());
                    run_step(step, log, Duration::from_secs(600), tools).await?;
                    p.done();
                }
                anyhow::Ok(())
            }
        }))
        .await?;
        // Ready as the docker form is: the shoot API answers through the
        // source seed's ingress, as its clients reach it. A rendered object
        // istiod's proxy rejects shows here, not at the probes' start.
        if ready == ReadyWhen::ShootApiAnswers {
            let source = &t.source().name;
            let gw = state.seed(source).expect("the source seed").gateway.ip;
            let p = progress.step(format!("{source}: the shoot API through the ingress ({gw}:443)"));
            let ca_pem = std::fs::read_to_string(dir.pki().join("ca.crt")).context("the lab's CA")?;
            crate::apiserver::ready::wait_api_at(&state, gw, &ca_pem, &crate::errors::Cancel::default())
                .await
                .with_context(|| {
                    format!(
                        "the ingress gateway of `{source}` does not serve the shoot API: see its \
                         log for rejected configuration (`kubectl --context kind-{} -n {INGRESS_NAMESPACE} \
                         logs deploy/istio-ingressgateway`)",
                        cluster_name(lab, source)
                    )
                })?;
            p.done();
        }
        let step = progress.step("gardenlets, one per seed");
        gardenlets(&dir, &state, &host.state_root, &tools, &step).await?;
        // Each reports its version on its Seed once its pod runs; stubbed
        // clusters run no pod.
        if ready == ReadyWhen::ShootApiAnswers {
            let garden = cpmlab_provider_docker::garden_specs::operator(&dir, &state)?;
            cpmlab_garden::bootstrap::wait_gardenlets(
                &garden,
                &state,
                cpmlab_garden::bootstrap::DEADLINE,
                &|w| step.detail(w),
            )
            .await?;
        }
        step.done();
        state.phase = crate::state::Phase::Ready;
        dir.save(&state)?;
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = result {
        // The steps' log goes with the lab's directory: keep a copy, so the
        // failure explains itself after the lab is gone.
        let log = crate::state::LabDir::new(state_root, lab)
            .root
            .join(RENDER_DIR)
            .join("up.log");
        let kept = state_root.join(format!("{lab}-kind-up-failed.log"));
        let e = match std::fs::copy(&log, &kept) {
            Ok(_) => e.context(format!("the steps' whole output: {}", kept.display())),
            Err(_) => e,
        };
        if retain {
            progress.note("the kind form could not be made: kept what was made (--retain)");
            return Err(e);
        }
        progress.note("the kind form could not be made: removing what was made");
        if let Err(d) = down(state_root, lab).await {
            tracing::warn!("removing the kind lab {lab}: {d:#}");
        }
        if let Err(d) = cpmlab_provider_docker::down::down(engine, lab, state_root).await {
            tracing::warn!("removing the kind lab {lab}'s containers: {d:#}");
        }
        return Err(e);
    }
    Ok(())
}

/// Each seed's gardenlet in its cluster: the chart's objects
/// (`gardenlet.rs`) applied in the seed's `garden` namespace, the
/// Deployment rolled out on the node that mounts the host's lab state.
/// Its pod reaches the garden through the wan router, as the node does.
async fn gardenlets(
    dir: &crate::state::LabDir,
    state: &crate::state::LabState,
    root: &Path,
    tools: &Tooling,
    progress: &crate::progress::Step,
) -> Result<()> {
    let log = dir.root.join(RENDER_DIR).join("up.log");
    for seed in &state.seeds {
        let ctx = context(&state.name, &seed.name);
        let node = agent_node(&state.name, &seed.name);
        let garden = cpmlab_garden::access::kubeconfig(
            dir,
            state,
            &cpmlab_garden::access::Identity::Gardenlet(seed.name.clone()),
        )?;
        let objects = super::gardenlet::objects(&super::gardenlet::Inputs {
            lab: &state.name,
            seed: &seed.name,
            context: &ctx,
            node: &node,
            state_root: root,
            garden_kubeconfig: &garden,
            log: cpmlab_provider_docker::garden_specs::GARDENLET_LOG,
        });
        // It holds the garden's key: owner-only, beside the other rendered files.
        let file = dir
            .root
            .join(RENDER_DIR)
            .join(&seed.name)
            .join("gardenlet.yaml");
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
        crate::state::write_private(&file, super::render::yaml(&list))
            .with_context(|| format!("write {}", file.display()))?;
        let file = file.display().to_string();
        // The seed's kubeconfig for an external driver's gardenlet
        // (`cpmlab migrate --driver external`, docs/migration.md), which
        // runs on the host: kind's own, the cluster's address on the host.
        let cluster = cluster_name(&state.name, &seed.name);
        let out = tools
            .command("kind")
            .args(["get", "kubeconfig", "--name", &cluster])
            .output()
            .await
            .context("kind get kubeconfig")?;
        anyhow::ensure!(
            out.status.success(),
            "kind get kubeconfig --name {cluster}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let external = root_dir(dir).join(format!("gardenlet-{}.kubeconfig", seed.name));
        crate::state::write_private(&external, &out.stdout)?;
        progress.detail(&format!("{}: Deployment garden/gardenlet", seed.name));
        for step in [
            Step::new(
                format!("{}: the gardenlet's objects", seed.name),
                &["kubectl", "--context", &ctx, "apply", "-f", &file],
            ),
            Step::new(
                format!("{}: the gardenlet rolled out", seed.name),
                &[
                    "kubectl",
                    "--context",
                    &ctx,
                    "-n",
                    crate::GARDENLET_NAMESPACE,
                    "rollout",
                    "status",
                    &format!("deployment/{}", crate::GARDENLET_DEPLOYMENT),
                    "--timeout=120s",
                ],
            ),
        ] {
            run_step(&step, &log, Duration::from_secs(150), tools).await?;
        }
    }
    Ok(())
}

/// The lab's directory as the host names it, canonical.
fn root_dir(dir: &crate::state::LabDir) -> std::path::PathBuf {
    std::fs::canonicalize(&dir.root).unwrap_or_else(|_| dir.root.clone())
}

/// Removes a kind lab's clusters (as `kind.json` lists them; without it,
/// those whose node containers carry the lab's label); the docker
/// provider's `down` removes its containers and networks after it.
pub async fn down(state_root: &Path, lab: &str) -> Result<()> {
    let file = crate::state::LabDir::new(state_root, lab)
        .root
        .join(KIND_FILE);
    let clusters = match std::fs::read_to_string(&file) {
        Ok(text) => {
            let made: KindLab =
                serde_json::from_str(&text).with_context(|| format!("read {}", file.display()))?;
            made.clusters
        }
        // No state (a crash took it, or another state directory): the
        // clusters whose nodes carry the lab's label (the adapter's).
        Err(_) => labelled_clusters(lab).await,
    };
    // One after the other: kind locks the kubeconfig it edits, and a
    // second `kind delete` finding the lock fails ("failed to lock config
    // file"), which left a lab behind when they ran side by side.
    for c in &clusters {
        let step = Step::new(
            format!("delete kind cluster {c}"),
            &["kind", "delete", "cluster", "--name", c],
        );
        let log = std::env::temp_dir().join(format!("cpmlab-{lab}-down.log"));
        run_step(&step, &log, Duration::from_secs(300), &Tooling::new(None)).await?;
    }
    // The networks carry the lab's labels: the docker provider's `down`
    // removes them with the router, DNS server and probe agent on them.
    if file.exists() {
        std::fs::remove_file(&file).with_context(|| format!("remove {}", file.display()))?;
    }
    Ok(())
}

/// The kind clusters of `lab` by the engine alone: kind's cluster label of
/// every node container the adapter labelled with the lab.
async fn labelled_clusters(lab: &str) -> Vec<String> {
    let Ok(engine) = cpmlab_provider_docker::engine::Engine::connect().await else {
        return Vec::new();
    };
    let mut clusters: Vec<String> = engine
        .containers(Some(lab))
        .await
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| {
            let labels = c.labels?;
            (labels.get(crate::labels::LABEL_ROLE)?.as_str() == super::adapter::NODE_ROLE)
                .then(|| labels.get("io.x-k8s.kind.cluster").cloned())
                .flatten()
        })
        .collect();
    clusters.sort();
    clusters.dedup();
    clusters
}
