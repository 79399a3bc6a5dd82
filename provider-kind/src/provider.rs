//! The kind provider behind the `Provider` interface. A member's workload
//! is its pod, `<kubectl context>/<namespace>/<pod>`; an API replica's is
//! `<context>/<namespace>/kube-apiserver@<i>`, the seed's Deployment's
//! `i`-th pod by age; the lab's router, DNS server, toolbox and probe agent
//! are containers, as in the docker form, and go to the docker provider.
//!
//! What differs from the docker provider (docs/providers.md): a member is
//! stopped and started by scaling its StatefulSet (its data is a
//! PersistentVolumeClaim and stays); a joining member gets the cluster as
//! it is when it joins in a ConfigMap its StatefulSet reads, then one
//! replica; API replicas are the seed's kube-apiserver Deployment scaled:
//! stopping or signalling replica `i` scales it to `i` (the kubelet sends
//! SIGTERM, waits the grace, then SIGKILL, as when Gardener scales it), and
//! starting it scales it back to its place; a pod cannot be frozen
//! (Kubernetes has no pause: `freeze` is refused, kill it instead); files
//! reach pods as Secrets rendered at `up`, never by upload.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use super::manifests::join_config_map;
use crate::pki::Ca;
use crate::progress::Progress;
use crate::state::{ApiServerState, LabState, MemberState};
use cpmlab_probe::container_logs::SIDECAR_SUFFIX;
use cpmlab_provider::{
    ClientSpec, DownReport, FileSpec, Output, Provider, SeedOps, Signal, Up, UpRequest, Workload,
    WorkloadState,
};

pub struct KindProvider {
    /// The lab's own containers (router, DNS, toolbox, probe agent).
    docker: cpmlab_provider_docker::DockerProvider,
}

impl KindProvider {
    pub fn new(docker: cpmlab_provider_docker::DockerProvider) -> KindProvider {
        KindProvider { docker }
    }

    /// Keeps the logs of `seed`'s members as etcd-druid runs them (etcd's
    /// and its backup-restore sidecar's, `<pod>.backup-restore.log`) in
    /// the run directory, before druid replaces the pods: a rollout's new
    /// pods start new logs, and a join's story is in the old ones. Best
    /// effort, as every kept log.
    async fn keep_member_logs(&self, state: &LabState, seed: &str) {
        let Some(run) = &state.probe_run else {
            return;
        };
        let names: Vec<String> = state
            .members_of(seed)
            .flat_map(|m| with_sidecar(&m.container))
            .collect();
        cpmlab_probe::container_logs::keep(self, run, &names).await;
    }
}

/// What a workload name names in the kind form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One of the lab's containers (no `/` in its name).
    Container(String),
    /// A member's pod.
    Pod(PodRef),
    /// API replica `index` of a seed's Deployment.
    Replica(ReplicaRef),
}

impl Target {
    pub fn parse(workload: &str) -> Result<Target> {
        if !workload.contains('/') {
            return Ok(Target::Container(workload.to_string()));
        }
        let p = PodRef::parse(workload)?;
        Ok(match p.pod.split_once('@') {
            Some((deployment, i)) => Target::Replica(ReplicaRef {
                index: i.parse().with_context(|| {
                    format!("`{workload}`: the replica after `@` is not a number")
                })?,
                deployment: deployment.to_string(),
                at: PodRef {
                    pod: deployment.to_string(),
                    ..p
                },
            }),
            None => Target::Pod(p),
        })
    }
}

impl Target {
    /// The pod it is now (where to run kubectl, and the pod's name), or
    /// the container's name.
    async fn pod_now(self) -> Result<std::result::Result<(PodRef, String), String>> {
        Ok(match self {
            Target::Container(c) => Err(c),
            Target::Pod(p) => {
                let pod = p.pod.clone();
                Ok((p, pod))
            }
            Target::Replica(r) => {
                let pod = r.pod_name().await?;
                Ok((r.at, pod))
            }
        })
    }
}

/// An API replica: the `index`-th pod, oldest first, of `deployment`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRef {
    /// The Deployment's context and namespace (`pod` is its name).
    pub at: PodRef,
    pub deployment: String,
    pub index: usize,
}

pub use super::lab_state::replica_workload;

/// A pod of an API replica's Deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaPod {
    pub name: String,
    pub state: WorkloadState,
    /// Being deleted (draining: it runs until its grace is over).
    pub terminating: bool,
}

/// The Deployment's pods (`kubectl get pods -o json`), oldest first (by
/// creation, then name): a replica's place picks one.
pub fn pods_by_age(list: &serde_json::Value) -> Vec<ReplicaPod> {
    let mut pods: Vec<(String, ReplicaPod)> = list["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| {
            let meta = &p["metadata"];
            Some((
                meta["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                ReplicaPod {
                    name: meta["name"].as_str()?.to_string(),
                    state: state_of_pod(p),
                    terminating: meta["deletionTimestamp"].is_string(),
                },
            ))
        })
        .collect();
    pods.sort_by(|a, b| (&a.0, &a.1.name).cmp(&(&b.0, &b.1.name)));
    pods.into_iter().map(|(_, p)| p).collect()
}

/// A Deployment's pod selector (`matchLabels`, as kubectl prints it) as a
/// label selector argument.
pub fn selector_of(match_labels: &str) -> Result<String> {
    let m: std::collections::BTreeMap<String, String> =
        serde_json::from_str(match_labels).context("the Deployment's matchLabels")?;
    anyhow::ensure!(!m.is_empty(), "the Deployment selects no labels");
    Ok(m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(","))
}

impl ReplicaRef {
    async fn pods(&self) -> Result<Vec<ReplicaPod>> {
        let labels = kubectl_ok(self.at.kubectl(&[
            "get",
            "deployment",
            &self.deployment,
            "-o",
            "jsonpath={.spec.selector.matchLabels}",
        ]))
        .await?;
        let out = kubectl_ok(self.at.kubectl(&[
            "get",
            "pods",
            "-l",
            &selector_of(&labels)?,
            "-o",
            "json",
        ]))
        .await?;
        Ok(pods_by_age(
            &serde_json::from_str(&out).context("kubectl get pods -o json")?,
        ))
    }

    /// The replica's pod, if the Deployment has that many.
    async fn pod(&self) -> Result<Option<ReplicaPod>> {
        Ok(self.pods().await?.into_iter().nth(self.index))
    }

    async fn replicas(&self) -> Result<usize> {
        let out = kubectl_ok(self.at.kubectl(&[
            "get",
            "deployment",
            &self.deployment,
            "-o",
            "jsonpath={.spec.replicas}",
        ]))
        .await?;
        out.trim()
            .parse()
            .with_context(|| format!("deployment {}: replicas `{}`", self.deployment, out.trim()))
    }

    async fn scale(&self, replicas: usize) -> Result<()> {
        kubectl_ok(self.at.kubectl(&[
            "scale",
            "deployment",
            &self.deployment,
            &format!("--replicas={replicas}"),
        ]))
        .await
        .map(|_| ())
    }

    /// Takes this replica and those after it away: the kubelet drains them
    /// (SIGTERM, the grace, SIGKILL); `now` deletes them at once.
    async fn take_away(&self, now: bool) -> Result<()> {
        let n = self.replicas().await?;
        if n > self.index {
            self.scale(self.index).await?;
        }
        if now {
            for p in self.pods().await?.iter().filter(|p| p.terminating) {
                kubectl_ok(self.at.kubectl(&[
                    "delete",
                    "pod",
                    &p.name,
                    "--grace-period=0",
                    "--force",
                    "--wait=false",
                ]))
                .await?;
            }
        }
        Ok(())
    }

    /// Scales the Deployment so that this replica runs.
    async fn bring_back(&self) -> Result<()> {
        let n = self.replicas().await?;
        if n <= self.index {
            self.scale(self.index + 1).await?;
        }
        // Until the rollout is done: a replica whose post-start hooks are
        // slow (a loaded machine, etcd across the link) is restarted by its
        // liveness probe and may take minutes. Each wait is under the
        // 60 s kubectl call limit; a failure other than the wait's timeout
        // ends it at once.
        let t0 = std::time::Instant::now();
        loop {
            let argv = self.at.kubectl(&[
                "rollout",
                "status",
                &format!("deployment/{}", self.deployment),
                "--timeout=50s",
            ]);
            let out = kubectl(&argv).await?;
            if out.code == 0 {
                return Ok(());
            }
            let timed_out = out.stderr.contains("timed out waiting");
            if !timed_out || t0.elapsed() > ROLLOUT_DEADLINE {
                let refs: Vec<&str> = argv.iter().map(|s| s.as_str()).collect();
                return out
                    .stdout_if_ok("kubectl", &refs)
                    .map(|_| ())
                    .with_context(|| {
                        format!(
                            "deployment {} not rolled out after {:.0} s",
                            self.deployment,
                            t0.elapsed().as_secs_f64()
                        )
                    });
            }
        }
    }

    /// Its pod's name, to exec in or read logs of.
    async fn pod_name(&self) -> Result<String> {
        self.pod().await?.map(|p| p.name).with_context(|| {
            format!(
                "deployment {} has no replica {} now",
                self.deployment, self.index
            )
        })
    }
}

/// A pod's address in the kind form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub context: String,
    pub namespace: String,
    pub pod: String,
}

impl PodRef {
    pub fn parse(workload: &str) -> Result<PodRef> {
        let mut it = workload.splitn(3, '/');
        match (it.next(), it.next(), it.next()) {
            (Some(c), Some(n), Some(p)) if !c.is_empty() && !n.is_empty() && !p.is_empty() => {
                Ok(PodRef {
                    context: c.into(),
                    namespace: n.into(),
                    pod: p.into(),
                })
            }
            _ => {
                anyhow::bail!("`{workload}` is not a kind workload (`<context>/<namespace>/<pod>`)")
            }
        }
    }

    fn kubectl(&self, args: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = vec![
            "kubectl".into(),
            "--context".into(),
            self.context.clone(),
            "-n".into(),
            self.namespace.clone(),
        ];
        v.extend(args.iter().map(|s| s.to_string()));
        v
    }

    /// The StatefulSet a member's pod belongs to (`<member>-0` → `<member>`).
    fn statefulset(&self) -> Option<&str> {
        self.pod.strip_suffix("-0")
    }
}

/// A member pod etcd-druid runs for the lab: its seed (by the pod's kind
/// context), its `Etcd` and its ordinal. None when the lab's etcd is not
/// druid's or `p` is no pod of a seed's `Etcd`.
#[derive(Debug, PartialEq, Eq)]
struct DruidPod {
    seed: String,
    etcd: String,
    index: usize,
}

/// `seed`'s `Etcd` as etcd-druid runs it: its name, and where kubectl
/// finds it (the seed's context, the shoot's namespace; no pod).
fn druid_etcd(state: &LabState, seed: &str) -> (String, PodRef) {
    let s = crate::KindSettings::of_state(state);
    let etcd = crate::druid::etcd_name(&state.topology, &s, seed);
    let p = PodRef {
        context: crate::lab_state::context(&state.name, seed),
        namespace: crate::namespace(&state.topology.shoot.name),
        pod: String::new(),
    };
    (etcd, p)
}

/// The logs kept of a member etcd-druid runs: its pod's (etcd's) and its
/// backup-restore sidecar's (`<pod>.backup-restore.log`).
fn with_sidecar(workload: &str) -> [String; 2] {
    [workload.to_string(), format!("{workload}{SIDECAR_SUFFIX}")]
}

fn druid_pod(state: &LabState, p: &PodRef) -> Option<DruidPod> {
    state.etcd_druid?;
    let s = crate::KindSettings::of_state(state);
    let seed = state
        .topology
        .seeds
        .iter()
        .find(|seed| p.context == crate::lab_state::context(&state.name, &seed.name))?;
    let etcd = crate::druid::etcd_name(&state.topology, &s, &seed.name);
    let index = p.pod.strip_prefix(&format!("{etcd}-"))?.parse().ok()?;
    Some(DruidPod {
        seed: seed.name.clone(),
        etcd,
        index,
    })
}

async fn kubectl(argv: &[String]) -> Result<Output> {
    kubectl_with_input(argv, None).await
}

/// Runs `kubectl ... apply -f -` (`argv`) with `object` on its standard
/// input; its output, or what it said when it failed.
async fn kubectl_apply(argv: &[String], object: &serde_json::Value) -> Result<String> {
    let refs: Vec<&str> = argv.iter().map(|s| s.as_str()).collect();
    kubectl_with_input(argv, Some(&serde_json::to_vec(object)?))
        .await?
        .stdout_if_ok("kubectl", &refs)
}

/// Runs kubectl (or kind) with `input` on its standard input, if any,
/// for at most a minute.
async fn kubectl_with_input(argv: &[String], input: Option<&[u8]>) -> Result<Output> {
    kubectl_within(argv, input, Duration::from_secs(60)).await
}

/// [`kubectl_with_input`], for at most `limit`.
async fn kubectl_within(argv: &[String], input: Option<&[u8]>, limit: Duration) -> Result<Output> {
    use tokio::io::AsyncWriteExt;
    // kind and kubectl from the lab's Go install dir, as `up` ran them.
    let mut cmd = super::up::Tooling::new(None).command(&argv[0]);
    cmd.args(&argv[1..])
        .kill_on_drop(true)
        .stdin(if input.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let run = async {
        let mut child = cmd.spawn()?;
        if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin.write_all(data).await?;
        }
        child.wait_with_output().await
    };
    let out = tokio::time::timeout(limit, run)
        .await
        .with_context(|| format!("`{}` took over {} s", argv.join(" "), limit.as_secs()))?
        .with_context(|| format!("run `{}` (is kubectl installed?)", argv.join(" ")))?;
    Ok(Output {
        code: out.status.code().unwrap_or(-1) as i64,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

async fn kubectl_ok(argv: Vec<String>) -> Result<String> {
    let refs: Vec<&str> = argv.iter().map(|s| s.as_str()).collect();
    let out = kubectl(&argv).await?;
    out.stdout_if_ok("kubectl", &refs)
}

/// Waits for etcd-druid to reconcile the `Etcd` `etcd` in `seed` (up to
/// 2 minutes), then for its StatefulSet to finish rolling out (up to 10
/// minutes: three members restarted one at a time, each waited ready by
/// the StatefulSet controller). Without the first wait a rollout asked
/// for right after a change looks finished: druid has not yet written the
/// change into the StatefulSet (a live run: "rolled in 0.8 s").
async fn rollout(p: &PodRef, etcd: &str, seed: &str) -> Result<()> {
    const LIMIT: Duration = Duration::from_secs(600);
    const RECONCILE: Duration = Duration::from_secs(120);
    let t0 = std::time::Instant::now();
    loop {
        let got = kubectl_ok(p.kubectl(&["get", "etcd", etcd, "-o", "json"])).await;
        let last = match got
            .as_deref()
            .map(serde_json::from_str::<serde_json::Value>)
        {
            Ok(Ok(e)) if crate::druid::reconciled(&e) => break,
            Ok(Ok(e)) => format!(
                "generation {} observed {}, annotations {}",
                e["metadata"]["generation"],
                e["status"]["observedGeneration"],
                e["metadata"]["annotations"]
            ),
            Ok(Err(e)) => format!("{e}"),
            Err(e) => format!("{e:#}"),
        };
        if t0.elapsed() > RECONCILE {
            anyhow::bail!(
                "etcd-druid did not reconcile {etcd} in {seed} within {RECONCILE:?}: {last} \
                 (its log: kubectl --context {} -n garden logs deploy/etcd-druid)",
                p.context
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let argv = p.kubectl(&[
        "rollout",
        "status",
        &format!("statefulset/{etcd}"),
        &format!("--timeout={}s", LIMIT.as_secs()),
    ]);
    let refs: Vec<&str> = argv.iter().map(|s| s.as_str()).collect();
    kubectl_within(&argv, None, LIMIT + Duration::from_secs(30))
        .await?
        .stdout_if_ok("kubectl", &refs)
        .map(|_| ())
        .with_context(|| format!("etcd-druid's rollout of {etcd} in {seed}"))
}

/// Deletes a removed member's claim (its data), waiting until it is gone.
pub fn claim_removal(p: &PodRef, claim: &str) -> Vec<String> {
    p.kubectl(&[
        "delete",
        "pvc",
        claim,
        "--ignore-not-found",
        "--wait=true",
        "--timeout=60s",
    ])
}

/// The API server's proxy path to a member pod's etcd metrics.
pub fn metrics_path(p: &PodRef) -> String {
    format!(
        "/api/v1/namespaces/{}/pods/{}:2381/proxy/metrics",
        p.namespace, p.pod
    )
}

/// A pod's phase as the interface's state.
pub fn state_of_pod(pod: &serde_json::Value) -> WorkloadState {
    match pod["status"]["phase"].as_str() {
        Some("Running") => WorkloadState::Running,
        Some("Pending") => WorkloadState::Created,
        Some(_) => WorkloadState::Stopped,
        None => WorkloadState::Missing,
    }
}

/// The lab's pods in one cluster (`kubectl get pods -o json`), as workloads.
pub fn workloads_of(context: &str, list: &str) -> Result<Vec<Workload>> {
    let v: serde_json::Value = serde_json::from_str(list).context("kubectl get pods -o json")?;
    let label =
        |p: &serde_json::Value, k: &str| p["metadata"]["labels"][k].as_str().map(str::to_string);
    Ok(v["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| {
            Some(Workload {
                name: format!(
                    "{context}/{}/{}",
                    p["metadata"]["namespace"].as_str()?,
                    p["metadata"]["name"].as_str()?
                ),
                lab: label(p, crate::labels::LABEL_LAB)?,
                role: label(p, crate::labels::LABEL_ROLE).unwrap_or_default(),
                seed: label(p, crate::labels::LABEL_SEED).or_else(|| label(p, "cpmlab.seed")),
                state: state_of_pod(p),
                cpu_ns: None,
            })
        })
        .collect())
}

/// The kind clusters on this machine (`kind get clusters`).
async fn kind_clusters() -> Result<Vec<String>> {
    let out = kubectl(&["kind".into(), "get".into(), "clusters".into()]).await?;
    Ok(out.stdout.lines().map(|c| c.trim().to_string()).collect())
}

/// How long a replica brought back may take to roll out.
const ROLLOUT_DEADLINE: Duration = Duration::from_secs(600);

/// The seed's kube-apiserver Deployment (manifests.rs).
use super::lab_state::APISERVER_DEPLOYMENT;

fn unsupported(what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "the kind provider cannot {what}: run this with the docker provider \
         (docs/providers.md says what each provider does)"
    )
}

#[async_trait::async_trait]
impl Provider for KindProvider {
    /// The kind form's clusters and the docker form's router, DNS server
    /// and toolbox (`up::create`, which removes what it made when a step
    /// fails). On `req.cancel` it returns at once, `Interrupted`: the step
    /// in flight is dropped (its command killed), and `down` removes what
    /// was made.
    async fn up(&self, req: &UpRequest, progress: &Progress) -> Result<Up> {
        if req.topology.api.wildcard_certificate {
            return Err(crate::errors::BadInput(
                "api.wildcard_certificate: the kind form has no seed-bound server yet (the docker form has)".into(),
            )
            .into());
        }
        let make = super::up::create(
            &req.state_root,
            &req.lab,
            &req.topology,
            &req.kind,
            req.retain,
            progress,
        );
        tokio::pin!(make);
        loop {
            tokio::select! {
                r = &mut make => {
                    r?;
                    break;
                }
                _ = tokio::time::sleep(Duration::from_millis(100)) => req.cancel.check()?,
            }
        }
        let state = crate::state::LabDir::new(&req.state_root, &req.lab)
            .load()
            .context("the kind lab's state after `up`")?;
        Ok(Up::Created(Box::new(state)))
    }

    /// The lab's kind clusters (`kind.json` says which; none for a docker
    /// lab), then the docker form's objects and the lab's files.
    async fn down(&self, state_root: &Path, lab: &str) -> Result<DownReport> {
        super::up::down(state_root, lab).await?;
        self.docker.down(state_root, lab).await
    }

    async fn labs(&self) -> Result<Vec<String>> {
        let mut labs: Vec<String> = kind_clusters()
            .await?
            .iter()
            .filter_map(|c| c.rsplit_once("-seed-").map(|(lab, _)| lab.to_string()))
            .collect();
        labs.extend(self.docker.labs().await?);
        labs.sort();
        labs.dedup();
        Ok(labs)
    }

    async fn workloads(&self, lab: Option<&str>) -> Result<Vec<Workload>> {
        let clusters = kind_clusters().await?;
        let selector = match lab {
            Some(l) => format!("{}={l}", crate::labels::LABEL_LAB),
            None => crate::labels::LABEL_LAB.to_string(),
        };
        let mut out = self.docker.workloads(lab).await?;
        for c in clusters
            .iter()
            .filter(|c| lab.is_none_or(|l| c.strip_prefix(l).is_some_and(|r| r.starts_with('-'))))
        {
            let context = format!("kind-{c}");
            let list = kubectl_ok(vec![
                "kubectl".into(),
                "--context".into(),
                context.clone(),
                "get".into(),
                "pods".into(),
                "-A".into(),
                "-l".into(),
                selector.clone(),
                "-o".into(),
                "json".into(),
            ])
            .await?;
            out.extend(workloads_of(&context, &list)?);
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn start_client(&self, state: &LabState, client: &ClientSpec) -> Result<()> {
        // On the clients network, as in the docker form: the shoot API and
        // the members are reached through the router and the seeds'
        // ingress addresses.
        self.docker.start_client(state, client).await
    }
}

#[async_trait::async_trait]
impl SeedOps for KindProvider {
    fn name(&self) -> &'static str {
        "kind"
    }

    /// The seed's first node: Istio's gateway pod has no agent, and the
    /// node's traffic to the other seed takes the same way as its pods'
    /// (through the router). `up` puts the agent there.
    fn vantage(&self, state: &LabState, seed: &str) -> Option<String> {
        state.seed(seed)?;
        Some(super::up::agent_node(&state.name, seed))
    }

    async fn workload_state(&self, workload: &str) -> Result<WorkloadState> {
        match Target::parse(workload)? {
            Target::Container(c) => self.docker.workload_state(&c).await,
            Target::Pod(p) => {
                let out = kubectl(&p.kubectl(&["get", "pod", &p.pod, "-o", "json"])).await?;
                if !out.ok() {
                    return Ok(WorkloadState::Missing);
                }
                let v: serde_json::Value =
                    serde_json::from_str(&out.stdout).context("kubectl get pod")?;
                Ok(state_of_pod(&v))
            }
            Target::Replica(r) => Ok(r.pod().await?.map_or(WorkloadState::Missing, |p| p.state)),
        }
    }

    async fn signal(&self, workload: &str, signal: Signal) -> Result<()> {
        match Target::parse(workload)? {
            Target::Container(c) => self.docker.signal(&c, signal).await,
            // As the kubelet stops a pod: SIGTERM, the grace period, SIGKILL.
            Target::Pod(p) => match signal {
                Signal::Term => {
                    kubectl_ok(p.kubectl(&["delete", "pod", &p.pod, "--wait=false"])).await
                }
                Signal::Kill => {
                    kubectl_ok(p.kubectl(&[
                        "delete",
                        "pod",
                        &p.pod,
                        "--grace-period=0",
                        "--force",
                        "--wait=false",
                    ]))
                    .await
                }
            }
            .map(|_| ()),
            // A Deployment replaces a deleted pod: the replica goes by
            // scaling, as Gardener takes API servers away.
            Target::Replica(r) => r.take_away(signal == Signal::Kill).await,
        }
    }

    async fn freeze(&self, workload: &str, frozen: bool) -> Result<()> {
        match Target::parse(workload)? {
            Target::Container(c) => self.docker.freeze(&c, frozen).await,
            _ => Err(unsupported(
                "freeze a pod (Kubernetes has no pause; kill it instead)",
            )),
        }
    }

    async fn stop(&self, workload: &str, grace: Duration) -> Result<()> {
        let timeout = grace + Duration::from_secs(30);
        match Target::parse(workload)? {
            Target::Container(c) => self.docker.stop(&c, grace).await,
            Target::Pod(p) => {
                // Scaling a StatefulSet to zero stops all of etcd-druid's
                // members, not one: refused.
                let labels = kubectl(&p.kubectl(&[
                    "get",
                    "pod",
                    &p.pod,
                    "-o",
                    "jsonpath={.metadata.labels.app\\.kubernetes\\.io/managed-by}",
                ]))
                .await?;
                anyhow::ensure!(
                    labels.stdout.trim() != "etcd-druid",
                    "{workload} is etcd-druid's: one member of an Etcd cannot be stopped alone \
                     (signal it, or remove the Etcd)"
                );
                let sts = p
                    .statefulset()
                    .with_context(|| format!("{workload} is not a member's pod"))?;
                kubectl_ok(p.kubectl(&["scale", "statefulset", sts, "--replicas=0"])).await?;
                kubectl_ok(p.kubectl(&[
                    "wait",
                    "--for=delete",
                    &format!("pod/{}", p.pod),
                    &format!("--timeout={}s", timeout.as_secs()),
                ]))
                .await
                .map(|_| ())
            }
            Target::Replica(r) => {
                r.take_away(false).await?;
                let t0 = std::time::Instant::now();
                while r.pods().await?.len() > r.index {
                    anyhow::ensure!(
                        t0.elapsed() < timeout,
                        "{workload}: still running {} s after it was scaled away",
                        timeout.as_secs()
                    );
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Ok(())
            }
        }
    }

    async fn start(&self, state: &LabState, workload: &str) -> Result<()> {
        match Target::parse(workload)? {
            Target::Container(c) => self.docker.start(state, &c).await,
            Target::Pod(p) => {
                let sts = p
                    .statefulset()
                    .with_context(|| format!("{workload} is not a member's pod"))?;
                kubectl_ok(p.kubectl(&["scale", "statefulset", sts, "--replicas=1"]))
                    .await
                    .map(|_| ())
            }
            Target::Replica(r) => r.bring_back().await,
        }
    }

    async fn release(&self, state: &LabState, workload: &str) -> Result<()> {
        match Target::parse(workload)? {
            Target::Container(c) => self.docker.release(state, &c).await,
            // A pod starts with its routes and resolver: nothing waits.
            _ => Ok(()),
        }
    }

    async fn start_member(
        &self,
        state: &LabState,
        _ca: &Ca,
        m: &MemberState,
        cluster: &[(String, String)],
    ) -> Result<()> {
        // The member's certificates are the Secret rendered at `up`.
        let p = PodRef::parse(&m.container)?;
        if let Some(DruidPod { etcd, index, .. }) = druid_pod(state, &p) {
            // druid makes it: the seed's `Etcd` with one more member (its
            // ingress URL added in the same update, as druid's CRD wants),
            // never fewer than it runs. Its initial cluster is druid's and
            // backup-restore's, not `cluster`.
            let s = crate::KindSettings::of_state(state);
            let running = state.members_of(&m.seed).count();
            let replicas = (index + 1).max(running);
            let object = crate::druid::etcd(&state.name, &state.topology, &s, &m.seed, replicas);
            return kubectl_apply(&p.kubectl(&["apply", "-f", "-"]), &object)
                .await
                .map(|_| ())
                .with_context(|| format!("scale etcd-druid's {etcd} to {replicas} member(s)"));
        }
        let sts = p
            .statefulset()
            .with_context(|| format!("{} is not a member's pod", m.container))?;
        let cm = join_config_map(&state.name, &p.namespace, &m.seed, &m.name, cluster);
        kubectl_apply(&p.kubectl(&["apply", "-f", "-"]), &cm)
            .await
            .with_context(|| format!("hand {} its initial cluster", m.name))?;
        kubectl_ok(p.kubectl(&["scale", "statefulset", sts, "--replicas=1"]))
            .await
            .map(|_| ())
    }

    async fn settle_members(&self, state: &LabState, seed: &str) -> Result<()> {
        if state.etcd_druid.is_none() {
            return Ok(());
        }
        // Each scale-up changes druid's ConfigMap, whose checksum is in
        // the pod template: the StatefulSet replaces every running member,
        // one at a time. Waited out before the flow goes on, the members'
        // logs kept first (a replaced pod's go with it).
        let (etcd, p) = druid_etcd(state, seed);
        self.keep_member_logs(state, seed).await;
        rollout(&p, &etcd, seed).await
    }

    async fn full_snapshot(
        &self,
        state: &LabState,
        leader: &MemberState,
    ) -> Result<Option<String>> {
        if state.etcd_druid.is_none() {
            return Ok(None);
        }
        // Through kube-apiserver's pod proxy: the sidecar's image has no
        // shell to exec (Gardener execs `curl -k` in its own image), and
        // asking the leader's sidecar spares backup-restore its own
        // search for the leader.
        let p = PodRef::parse(&leader.container)?;
        let path = crate::druid::full_snapshot_path(&p.namespace, &p.pod);
        let t0 = std::time::Instant::now();
        let out = kubectl_ok(p.kubectl(&["get", "--raw", &path]))
            .await
            .with_context(|| format!("etcd-backup-restore's full snapshot through {}", p.pod))?;
        let snap = crate::druid::FullSnapshot::parse(&out)
            .with_context(|| format!("etcd-backup-restore's answer to {path}"))?;
        Ok(Some(format!(
            "etcd-backup-restore beside {} took full snapshot {} (revision {}) into bucket `{}` in {:.1} s",
            leader.name,
            snap.name,
            snap.last_revision,
            crate::druid::backup_bucket(&leader.seed),
            t0.elapsed().as_secs_f64()
        )))
    }

    async fn clear_bootstrap(&self, state: &LabState, seed: &str) -> Result<Option<String>> {
        if state.etcd_druid.is_none() {
            return Ok(None);
        }
        let (etcd, p) = druid_etcd(state, seed);
        let now = kubectl_ok(p.kubectl(&[
            "get",
            "etcd",
            &etcd,
            "-o",
            "jsonpath={.spec.etcd.bootstrapWithExistingCluster}",
        ]))
        .await?;
        if now.trim().is_empty() {
            return Ok(None);
        }
        self.keep_member_logs(state, seed).await;
        let t0 = std::time::Instant::now();
        let patch = crate::druid::clear_bootstrap_patch();
        kubectl_ok(p.kubectl(&["patch", "etcd", &etcd, "--type=merge", "-p", &patch]))
            .await
            .with_context(|| format!("clear bootstrapWithExistingCluster on {etcd} in {seed}"))?;
        // druid drops the source's members from its ConfigMap and the
        // sidecars' `--service-endpoints`: a changed pod template, rolled
        // out one member at a time.
        rollout(&p, &etcd, seed).await?;
        Ok(Some(format!(
            "bootstrapWithExistingCluster cleared on {etcd}; etcd-druid reconciled and rolled its members in {:.1} s",
            t0.elapsed().as_secs_f64()
        )))
    }

    async fn start_apiserver(
        &self,
        _state: &LabState,
        _ca: &Ca,
        a: &ApiServerState,
        _etcd_servers: &[String],
        _sa: &(String, String),
    ) -> Result<()> {
        // Its flags (the seed's own etcd, the shutdown delay) are rendered
        // into the Deployment at `up`; starting a replica is scaling it.
        match Target::parse(&a.container)? {
            Target::Replica(r) => r.bring_back().await,
            _ => anyhow::bail!(
                "{} is not an API replica of the kind form (`<context>/<namespace>/{APISERVER_DEPLOYMENT}@<i>`)",
                a.container
            ),
        }
    }

    async fn remove(&self, state: &LabState, workload: &str, data: Option<&str>) -> Result<()> {
        match Target::parse(workload)? {
            Target::Container(c) => self.docker.remove(state, &c, data).await,
            Target::Pod(p) if druid_pod(state, &p).is_some() => {
                // A member of druid's `Etcd` goes with the `Etcd` (as
                // gardenlet deletes the source's in SourceSeedCleanup):
                // druid deletes its StatefulSet and pods; the claims are
                // the lab's to delete.
                if let Some(run) = &state.probe_run {
                    cpmlab_probe::container_logs::keep(self, run, &with_sidecar(workload)).await;
                }
                let etcd = druid_pod(state, &p).expect("a druid pod").etcd;
                kubectl_ok(p.kubectl(&[
                    "delete",
                    "etcd",
                    &etcd,
                    "--ignore-not-found",
                    "--wait=true",
                    "--timeout=120s",
                ]))
                .await?;
                kubectl_ok(p.kubectl(&[
                    "wait",
                    "--for=delete",
                    &format!("pod/{}", p.pod),
                    "--timeout=120s",
                ]))
                .await?;
                if let Some(claim) = data {
                    kubectl_ok(claim_removal(&p, claim)).await?;
                }
                Ok(())
            }
            Target::Pod(p) => {
                // Its log first, as the docker form keeps a removed
                // container's: the run must say what a removed member did.
                if let Some(run) = &state.probe_run {
                    cpmlab_probe::container_logs::keep(self, run, &[workload.to_string()]).await;
                }
                self.stop(workload, Duration::from_secs(30)).await?;
                // A StatefulSet keeps its claims when scaled down (its
                // retention policy's default, which stopping a member
                // relies on); a removed member's data goes with it, so that
                // one joining again (after an abort) starts empty.
                if let Some(claim) = data {
                    kubectl_ok(claim_removal(&p, claim)).await?;
                }
                Ok(())
            }
            Target::Replica(_) => self.stop(workload, Duration::from_secs(30)).await,
        }
    }

    async fn sync_gateway(&self, state: &LabState, seed: &str) -> Result<()> {
        for a in super::gateway_sync::actions(state, seed) {
            match &a.input {
                None => kubectl_ok(a.argv.clone()).await.map(|_| ()),
                Some(input) => kubectl_apply(&a.argv, input).await.map(|_| ()),
            }
            .with_context(|| format!("{seed}: {}", a.what))?;
        }
        Ok(())
    }

    async fn set_dns(&self, state: &LabState, records: &[(&str, &[Ipv4Addr])]) -> Result<()> {
        // The lab's own DNS server, which each cluster's CoreDNS forwards
        // the shoot's zone to.
        self.docker.set_dns(state, records).await
    }

    async fn exec(&self, workload: &str, argv: &[&str]) -> Result<Output> {
        let (p, pod) = match Target::parse(workload)?.pod_now().await? {
            Err(c) => return self.docker.exec(&c, argv).await,
            Ok(at) => at,
        };
        let mut args = vec!["exec", pod.as_str(), "--"];
        args.extend_from_slice(argv);
        kubectl(&p.kubectl(&args)).await
    }

    async fn upload(&self, workload: &str, files: &[FileSpec]) -> Result<()> {
        match Target::parse(workload)? {
            Target::Container(c) => self.docker.upload(&c, files).await,
            _ => Err(unsupported(
                "write files into a pod (the kind form mounts Secrets rendered at `up`)",
            )),
        }
    }

    async fn logs(&self, workload: &str) -> Result<Vec<u8>> {
        // `<pod>.backup-restore`: the sidecar of a member etcd-druid runs.
        let (p, pod, container) = match workload.strip_suffix(SIDECAR_SUFFIX) {
            Some(member) => {
                let p = PodRef::parse(member)?;
                let pod = p.pod.clone();
                (p, pod, Some("backup-restore"))
            }
            None => match Target::parse(workload)?.pod_now().await? {
                Err(c) => return self.docker.logs(&c).await,
                Ok((p, pod)) => (p, pod, None),
            },
        };
        let mut args = vec!["logs", pod.as_str(), "--timestamps"];
        if let Some(c) = container {
            args.extend(["-c", c]);
        }
        Ok(kubectl_ok(p.kubectl(&args)).await?.into_bytes())
    }

    async fn member_metrics(&self, m: &MemberState, timeout: Duration) -> Result<String> {
        // No pod address is the host's to reach: through the seed's
        // Kubernetes API, its proxy to the pod's metrics port.
        let p = PodRef::parse(&m.container)?;
        let argv = p.kubectl(&["get", "--raw", &metrics_path(&p)]);
        tokio::time::timeout(timeout + Duration::from_secs(2), kubectl_ok(argv))
            .await
            .with_context(|| format!("{}: no metrics within {timeout:?}", m.name))?
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// Lab `lab`'s state with a migration from seed-a to seed-b planned.
    pub fn migrating(lab: &str) -> LabState {
        let topo = crate::topology::Topology::default();
        let nets: Vec<crate::addressing::Net24> = (0..4)
            .map(|i| crate::addressing::Net24([10, 213, i, 0].into()))
            .collect();
        let mut s = crate::plan::LabPlan::new(lab, &topo, &nets, "img:1").initial_state("x".into());
        s.migration =
            Some(cpmlab_model::placement::migration(&s, "seed-a", "seed-b", "", 0.0).unwrap());
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_are_context_namespace_pod() {
        let p = PodRef::parse("kind-lab-seed-a/shoot--local--x/seed-a-etcd-0-0").unwrap();
        assert_eq!(p.context, "kind-lab-seed-a");
        assert_eq!(p.statefulset(), Some("seed-a-etcd-0"));
        assert_eq!(
            p.kubectl(&["get", "pod", "x"])[..5],
            [
                "kubectl",
                "--context",
                "kind-lab-seed-a",
                "-n",
                "shoot--local--x"
            ]
        );
        assert!(PodRef::parse("lab-seed-a-etcd-0").is_err());
        assert!(PodRef::parse("a//b").is_err());
    }

    #[test]
    fn a_lab_s_pods_are_its_workloads() {
        let list = serde_json::json!({"items": [
            {"metadata": {"name": "seed-a-etcd-0-0", "namespace": "shoot--local--local",
                "labels": {"cpmlab.lab": "l", "cpmlab.role": "etcd", "cpmlab.seed": "seed-a"}},
             "status": {"phase": "Running"}},
            {"metadata": {"name": "other", "namespace": "x", "labels": {}}, "status": {}},
        ]});
        let w = workloads_of("kind-l-seed-a", &list.to_string()).unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!(
            w[0].name,
            "kind-l-seed-a/shoot--local--local/seed-a-etcd-0-0"
        );
        assert_eq!(
            (w[0].role.as_str(), w[0].seed.as_deref()),
            ("etcd", Some("seed-a"))
        );
        assert_eq!(w[0].state, WorkloadState::Running);
    }

    #[test]
    fn a_joiner_s_config_map_holds_the_cluster_as_it_is_when_it_joins() {
        let cluster = vec![
            (
                "seed-a-etcd-0".to_string(),
                "https://seed-a-etcd-0.local.cpmlab.test:9100".to_string(),
            ),
            (
                "seed-b-etcd-0".to_string(),
                "https://seed-b-etcd-0.local.cpmlab.test:9100".to_string(),
            ),
        ];
        let cm = join_config_map(
            "lab",
            "shoot--local--local",
            "seed-b",
            "seed-b-etcd-0",
            &cluster,
        );
        let parsed: k8s_openapi::api::core::v1::ConfigMap =
            serde_json::from_value(cm.clone()).expect("a ConfigMap");
        assert_eq!(parsed.metadata.name.as_deref(), Some("seed-b-etcd-0-join"));
        assert_eq!(
            cm["data"]["ETCD_INITIAL_CLUSTER"],
            "seed-a-etcd-0=https://seed-a-etcd-0.local.cpmlab.test:9100,\
             seed-b-etcd-0=https://seed-b-etcd-0.local.cpmlab.test:9100"
        );
        assert_eq!(cm["data"]["ETCD_INITIAL_CLUSTER_STATE"], "existing");
        assert_eq!(cm["metadata"]["labels"][crate::labels::LABEL_LAB], "lab");
    }

    #[test]
    fn workload_names_say_container_pod_or_replica() {
        assert_eq!(
            Target::parse("lab-router").unwrap(),
            Target::Container("lab-router".into())
        );
        assert!(matches!(
            Target::parse("kind-lab-seed-b/ns/seed-b-etcd-1-0").unwrap(),
            Target::Pod(p) if p.statefulset() == Some("seed-b-etcd-1")
        ));
        match Target::parse("kind-lab-seed-b/ns/kube-apiserver@2").unwrap() {
            Target::Replica(r) => {
                assert_eq!((r.deployment.as_str(), r.index), ("kube-apiserver", 2));
                assert_eq!(r.at.kubectl(&[])[2], "kind-lab-seed-b");
            }
            t => panic!("{t:?}"),
        }
        let e = Target::parse("kind-lab-seed-b/ns/kube-apiserver@x").unwrap_err();
        assert!(format!("{e:#}").contains("not a number"), "{e:#}");
    }

    /// A StatefulSet keeps its claims when scaled down; a removed member's
    /// goes, so that a member joining again (after `--abort`) starts from
    /// an empty data directory, as in the docker form.
    #[test]
    fn a_removed_member_s_claim_is_deleted_with_it() {
        let st = crate::lab_state::kind_state(
            "lab",
            &crate::topology::Topology::default(),
            &crate::KindSettings::default(),
            &[
                crate::addressing::Net24(std::net::Ipv4Addr::new(10, 213, 0, 0)),
                crate::addressing::Net24(std::net::Ipv4Addr::new(10, 213, 1, 0)),
                crate::addressing::Net24(std::net::Ipv4Addr::new(10, 213, 2, 0)),
                crate::addressing::Net24(std::net::Ipv4Addr::new(10, 213, 3, 0)),
            ],
            "img",
            "k".into(),
        );
        let m = &st.members[1];
        let p = PodRef::parse(&m.container).unwrap();
        assert_eq!(
            claim_removal(&p, &m.volume).join(" "),
            "kubectl --context kind-lab-seed-a -n shoot--local--local delete pvc \
             data-seed-a-etcd-1-0 --ignore-not-found --wait=true --timeout=60s"
        );
        // The claim is the one the member's StatefulSet makes for its pod
        // (volumeClaimTemplates `data`, pod `<member>-0`).
        assert_eq!(m.volume, format!("data-{}", p.pod));
    }

    #[test]
    fn a_member_s_metrics_come_through_its_seed_s_api_proxy() {
        let p = PodRef::parse("kind-lab-seed-a/shoot--local--local/seed-a-etcd-1-0").unwrap();
        assert_eq!(
            p.kubectl(&["get", "--raw", &metrics_path(&p)]).join(" "),
            "kubectl --context kind-lab-seed-a -n shoot--local--local get --raw \
             /api/v1/namespaces/shoot--local--local/pods/seed-a-etcd-1-0:2381/proxy/metrics"
        );
    }

    #[test]
    fn a_deployment_s_selector_becomes_a_label_selector() {
        assert_eq!(
            selector_of(r#"{"role":"apiserver","app":"kubernetes"}"#).unwrap(),
            "app=kubernetes,role=apiserver"
        );
        assert!(selector_of("{}").is_err());
        assert!(selector_of("").is_err());
    }

    #[test]
    fn a_replica_is_its_deployment_s_pod_by_age() {
        let pod = |name: &str, created: &str, deleting: bool| {
            let mut p = serde_json::json!({
                "metadata": {"name": name, "creationTimestamp": created},
                "status": {"phase": "Running"},
            });
            if deleting {
                p["metadata"]["deletionTimestamp"] = "2026-11-23T10:00:00Z".into();
            }
            p
        };
        let list = serde_json::json!({"items": [
            pod("kube-apiserver-b", "2026-11-23T09:00:05Z", false),
            pod("kube-apiserver-c", "2026-11-23T09:00:01Z", true),
            pod("kube-apiserver-a", "2026-11-23T09:00:05Z", false),
        ]});
        let pods = pods_by_age(&list);
        let names: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["kube-apiserver-c", "kube-apiserver-a", "kube-apiserver-b"]
        );
        assert!(pods[0].terminating && !pods[1].terminating);
        assert_eq!(pods[2].state, WorkloadState::Running);
    }

    #[tokio::test]
    async fn a_manifest_reaches_kubectl_on_its_standard_input() {
        // `cat` stands in for kubectl: what it prints is what it was given.
        let argv = vec!["cat".to_string()];
        let out = kubectl_with_input(&argv, Some(b"{\"kind\":\"ConfigMap\"}"))
            .await
            .unwrap();
        assert_eq!(
            (out.code, out.stdout.as_str()),
            (0, "{\"kind\":\"ConfigMap\"}")
        );
        let out = kubectl(&argv).await.unwrap();
        assert_eq!(out.stdout, "", "no input: stdin is empty, not inherited");
    }

    #[test]
    fn pod_phases_map_to_workload_states() {
        let pod = |phase: &str| serde_json::json!({"status": {"phase": phase}});
        assert_eq!(state_of_pod(&pod("Running")), WorkloadState::Running);
        assert_eq!(state_of_pod(&pod("Pending")), WorkloadState::Created);
        assert_eq!(state_of_pod(&pod("Failed")), WorkloadState::Stopped);
        assert_eq!(state_of_pod(&serde_json::json!({})), WorkloadState::Missing);
    }

    /// With etcd-druid, the provider knows druid's member pods by their
    /// seed's kind context and `Etcd` (`start_member` scales that `Etcd`,
    /// `remove` deletes it); the lab's own StatefulSets' pods are not
    /// druid's, nor is any pod of a lab without druid.
    #[test]
    fn druid_s_member_pods_are_known_by_seed_and_etcd() {
        let nets =
            [0, 1, 2, 3].map(|i| crate::addressing::Net24(std::net::Ipv4Addr::new(10, 213, i, 0)));
        let t = crate::topology::Topology::default();
        let druid = crate::KindSettings {
            with_etcd_druid: true,
            ..Default::default()
        };
        let st = crate::lab_state::kind_state("lab", &t, &druid, &nets, "img", "k".into());
        let pod = |w: &str| PodRef::parse(w).unwrap();
        let dst = pod("kind-lab-seed-b/shoot--local--local/etcd-main-seed-b-1");
        assert_eq!(
            druid_pod(&st, &dst),
            Some(DruidPod {
                seed: "seed-b".into(),
                etcd: "etcd-main-seed-b".into(),
                index: 1
            })
        );
        let src = pod(&st.members[2].container);
        assert_eq!(
            druid_pod(&st, &src),
            Some(DruidPod {
                seed: "seed-a".into(),
                etcd: "etcd-main".into(),
                index: 2
            })
        );
        // The source's name in the destination's cluster is no member of it.
        assert_eq!(
            druid_pod(&st, &pod("kind-lab-seed-b/shoot--local--local/etcd-main-1")),
            None
        );
        assert_eq!(
            druid_pod(
                &st,
                &pod("kind-lab-seed-a/shoot--local--local/seed-a-etcd-0-0")
            ),
            None
        );
        let own = crate::lab_state::kind_state(
            "lab",
            &t,
            &crate::KindSettings::default(),
            &nets,
            "img",
            "k".into(),
        );
        assert_eq!(druid_pod(&own, &src), None);
    }
}
