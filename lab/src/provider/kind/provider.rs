//! The kind provider behind the `Provider` interface: a workload is a pod,
//! named `<kubectl context>/<namespace>/<pod>`, reached with kubectl.
//!
//! What differs from the docker provider (README, "Providers"): a member is
//! stopped and started by scaling its StatefulSet (its data is a
//! PersistentVolumeClaim and stays); a joining member gets the cluster as
//! it is when it joins in a ConfigMap its StatefulSet reads, then one
//! replica; the destination's API replicas are the seed's kube-apiserver
//! Deployment scaled up; a pod cannot be frozen (Kubernetes has no pause:
//! `freeze` is refused, kill it instead); and what the docker provider does
//! to its own DNS and probe containers is not wired to the kind form yet:
//! those methods say so.

use std::net::Ipv4Addr;
use std::time::Duration;

use anyhow::{Context, Result};

use super::manifests::join_config_map;
use crate::pki::Ca;
use crate::provider::{ClientSpec, FileSpec, Output, Provider, Signal, Workload, WorkloadState};
use crate::state::{ApiServerState, LabState, MemberState};

pub struct KindProvider;

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

async fn kubectl(argv: &[String]) -> Result<Output> {
    kubectl_with_input(argv, None).await
}

/// Runs kubectl (or kind) with `input` on its standard input, if any.
async fn kubectl_with_input(argv: &[String], input: Option<&[u8]>) -> Result<Output> {
    use tokio::io::AsyncWriteExt;
    let mut cmd = tokio::process::Command::new(&argv[0]);
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
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .with_context(|| format!("`{}` took over 60 s", argv.join(" ")))?
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
                lab: label(p, crate::provider::docker::LABEL_LAB)?,
                role: label(p, crate::provider::docker::LABEL_ROLE).unwrap_or_default(),
                seed: label(p, crate::provider::docker::LABEL_SEED)
                    .or_else(|| label(p, "cpmlab.seed")),
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

/// The seed's kube-apiserver Deployment (manifests.rs).
const APISERVER_DEPLOYMENT: &str = "kube-apiserver";

/// How many replicas the seed's Deployment has once `a` runs: `a` and the
/// seed's replicas before it in the lab's order.
pub fn apiserver_replicas(state: &LabState, a: &ApiServerState) -> usize {
    state
        .apiservers
        .iter()
        .filter(|x| x.seed == a.seed)
        .position(|x| x.name == a.name)
        .map_or(1, |i| i + 1)
}

fn unsupported(what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "the kind provider cannot {what} yet: run this with the docker provider \
         (README, \"Providers\", says what each provider does)"
    )
}

#[async_trait::async_trait]
impl Provider for KindProvider {
    fn name(&self) -> &'static str {
        "kind"
    }

    async fn workload_state(&self, workload: &str) -> Result<WorkloadState> {
        let p = PodRef::parse(workload)?;
        let out = kubectl(&p.kubectl(&["get", "pod", &p.pod, "-o", "json"])).await?;
        if !out.ok() {
            return Ok(WorkloadState::Missing);
        }
        let v: serde_json::Value = serde_json::from_str(&out.stdout).context("kubectl get pod")?;
        Ok(state_of_pod(&v))
    }

    async fn signal(&self, workload: &str, signal: Signal) -> Result<()> {
        let p = PodRef::parse(workload)?;
        match signal {
            // As the kubelet stops a pod: SIGTERM, the grace period, SIGKILL.
            Signal::Term => kubectl_ok(p.kubectl(&["delete", "pod", &p.pod, "--wait=false"])).await,
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
        .map(|_| ())
    }

    async fn freeze(&self, _workload: &str, _frozen: bool) -> Result<()> {
        Err(unsupported(
            "freeze a pod (Kubernetes has no pause; kill it instead)",
        ))
    }

    async fn stop(&self, workload: &str, grace: Duration) -> Result<()> {
        let p = PodRef::parse(workload)?;
        let sts = p
            .statefulset()
            .with_context(|| format!("{workload} is not a member's pod"))?;
        kubectl_ok(p.kubectl(&["scale", "statefulset", sts, "--replicas=0"])).await?;
        let timeout = format!("--timeout={}s", grace.as_secs() + 30);
        kubectl_ok(p.kubectl(&["wait", "--for=delete", &format!("pod/{}", p.pod), &timeout]))
            .await
            .map(|_| ())
    }

    async fn start(&self, _state: &LabState, workload: &str) -> Result<()> {
        let p = PodRef::parse(workload)?;
        let sts = p
            .statefulset()
            .with_context(|| format!("{workload} is not a member's pod"))?;
        kubectl_ok(p.kubectl(&["scale", "statefulset", sts, "--replicas=1"]))
            .await
            .map(|_| ())
    }

    async fn release(&self, _state: &LabState, _workload: &str) -> Result<()> {
        // A pod starts with its routes and resolver: nothing waits.
        Ok(())
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
        let sts = p
            .statefulset()
            .with_context(|| format!("{} is not a member's pod", m.container))?;
        let cm = join_config_map(&state.name, &p.namespace, &m.seed, &m.name, cluster);
        let argv = p.kubectl(&["apply", "-f", "-"]);
        let refs: Vec<&str> = argv.iter().map(|s| s.as_str()).collect();
        kubectl_with_input(&argv, Some(&serde_json::to_vec(&cm)?))
            .await?
            .stdout_if_ok("kubectl", &refs)
            .with_context(|| format!("hand {} its initial cluster", m.name))?;
        kubectl_ok(p.kubectl(&["scale", "statefulset", sts, "--replicas=1"]))
            .await
            .map(|_| ())
    }

    async fn start_apiserver(
        &self,
        state: &LabState,
        _ca: &Ca,
        a: &ApiServerState,
        _etcd_servers: &[String],
        _sa: &(String, String),
    ) -> Result<()> {
        // Its flags (the seed's own etcd, the shutdown delay) are rendered
        // into the Deployment at `up`; starting a replica is scaling it.
        let p = PodRef::parse(&a.container)?;
        let replicas = format!("--replicas={}", apiserver_replicas(state, a));
        kubectl_ok(p.kubectl(&["scale", "deployment", APISERVER_DEPLOYMENT, &replicas])).await?;
        kubectl_ok(p.kubectl(&[
            "rollout",
            "status",
            &format!("deployment/{APISERVER_DEPLOYMENT}"),
            "--timeout=55s",
        ]))
        .await
        .map(|_| ())
    }

    async fn remove(&self, _state: &LabState, workload: &str, _data: Option<&str>) -> Result<()> {
        self.stop(workload, Duration::from_secs(30)).await
    }

    async fn sync_gateway(&self, _state: &LabState, _seed: &str) -> Result<()> {
        // Istio's routes are rendered for every planned member at `up`.
        Ok(())
    }

    async fn set_dns(&self, _state: &LabState, _records: &[(&str, &[Ipv4Addr])]) -> Result<()> {
        Err(unsupported("update the lab's DNS"))
    }

    async fn exec(&self, workload: &str, argv: &[&str]) -> Result<Output> {
        let p = PodRef::parse(workload)?;
        let mut args = vec!["exec", p.pod.as_str(), "--"];
        args.extend_from_slice(argv);
        kubectl(&p.kubectl(&args)).await
    }

    async fn upload(&self, _workload: &str, _files: &[FileSpec]) -> Result<()> {
        Err(unsupported(
            "write files into a pod (the kind form mounts Secrets)",
        ))
    }

    async fn labs(&self) -> Result<Vec<String>> {
        let mut labs: Vec<String> = kind_clusters()
            .await?
            .iter()
            .filter_map(|c| c.rsplit_once("-seed-").map(|(lab, _)| lab.to_string()))
            .collect();
        labs.sort();
        labs.dedup();
        Ok(labs)
    }

    async fn workloads(&self, lab: Option<&str>) -> Result<Vec<Workload>> {
        let clusters = kind_clusters().await?;
        let selector = match lab {
            Some(l) => format!("{}={l}", crate::provider::docker::LABEL_LAB),
            None => crate::provider::docker::LABEL_LAB.to_string(),
        };
        let mut out = Vec::new();
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

    async fn logs(&self, workload: &str) -> Result<Vec<u8>> {
        let p = PodRef::parse(workload)?;
        Ok(kubectl_ok(p.kubectl(&["logs", &p.pod, "--timestamps"]))
            .await?
            .into_bytes())
    }

    async fn start_client(&self, _state: &LabState, _client: &ClientSpec) -> Result<()> {
        Err(unsupported("start the probe agent"))
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
        assert_eq!(
            cm["metadata"]["labels"][crate::provider::docker::LABEL_LAB],
            "lab"
        );
    }

    #[test]
    fn an_api_replica_scales_its_seed_s_deployment_to_its_place() {
        let t = crate::topology::Topology::default();
        let nets = super::super::up::default_nets(&t).expect("networks");
        let mut state =
            crate::plan::LabPlan::new("lab", &t, &nets, "img").initial_state(String::new());
        let net = nets[0];
        let api = |seed: &str, i: usize| crate::plan::apiserver("lab", seed, net, i);
        state.apiservers = vec![
            api("seed-a", 0),
            api("seed-a", 1),
            api("seed-b", 0),
            api("seed-b", 1),
        ];
        let b = [api("seed-b", 0), api("seed-b", 1)];
        assert_eq!(apiserver_replicas(&state, &b[0]), 1);
        assert_eq!(apiserver_replicas(&state, &b[1]), 2);
        state.apiservers.retain(|a| a.seed != "seed-a");
        assert_eq!(apiserver_replicas(&state, &b[1]), 2);
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
}
