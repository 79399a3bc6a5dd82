//! `cpmlab fill`: write a shoot of real size through the lab's API before
//! a migration, with progress and a rate; etcd's database size after it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::{check_name, print_json_line, LabArgs, Output};
use cpmlab_core::progress::{Mode, Progress};
use cpmlab_lab::fill::{FillPlan, Poster};
use cpmlab_probe::target::Resolve;
use cpmlab_probe::transport::{Resolver, Transport};

#[derive(Debug, Clone, clap::Args)]
pub struct FillArgs {
    #[command(flatten)]
    pub lab: LabArgs,
    /// How much to write (object bytes as sent): 500MiB, 1GiB, ...
    #[arg(long)]
    pub size: String,
    /// Each ConfigMap's payload.
    #[arg(long, default_value = "10KiB")]
    pub object_size: String,
    /// What to write, taking turns: configmaps (the bytes), leases (small,
    /// many, as controllers keep them).
    #[arg(long, value_delimiter = ',', default_value = "configmaps")]
    pub kinds: Vec<String>,
    #[arg(long, default_value = cpmlab_lab::fill::NAMESPACE)]
    pub namespace: String,
    /// Requests in flight (on one HTTP/2 connection).
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
}

struct Api(Transport);

#[async_trait::async_trait]
impl Poster for Api {
    async fn post(&self, path: &str, body: Vec<u8>) -> Result<u16, String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        match self
            .0
            .send_reused("POST", path, Some(body), deadline)
            .await
            .0
        {
            Ok(reply) => {
                let status = reply.status;
                // Read the answer whole: the stream's window is returned.
                let _ = reply.bytes(deadline).await;
                Ok(status)
            }
            Err(f) => Err(f.error),
        }
    }
}

pub async fn run(state_root: &Path, a: &FillArgs) -> Result<u8> {
    check_name(&a.lab.name)?;
    let plan = FillPlan::new(&a.size, &a.object_size, &a.kinds, &a.namespace)?;
    let (dir, state) = cpmlab_lab::status::load_lab(state_root, &a.lab.name)?;
    let ca = std::fs::read_to_string(dir.pki().join("ca.crt")).context("read the lab CA")?;
    let tls = cpmlab_core::apiserver::client::tls_client(&ca)?;
    let api = Arc::new(Api(Transport::new(
        Resolver::new(
            Resolve::Lab((state.dns.server.ip, 53).into()),
            &state.dns.api_name,
        ),
        &state.dns.api_name,
        cpmlab_lab::gateway::API_PORT,
        Some(state.api_token.clone()),
        tls,
        vec![],
    )));
    // The namespace first (there already: fine).
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": plan.namespace}});
    match api
        .post("/api/v1/namespaces", serde_json::to_vec(&ns)?)
        .await
    {
        Ok(200 | 201 | 409) => {}
        Ok(code) => anyhow::bail!("create namespace {}: HTTP {code}", plan.namespace),
        Err(e) => anyhow::bail!("create namespace {}: {e}", plan.namespace),
    }
    let progress = Progress::new(Mode::detect(a.lab.output == Output::Json));
    let step = progress.step(format!(
        "fill {} of {}",
        human(plan.total_bytes),
        plan.kinds
            .iter()
            .map(|k| format!("{k:?}").to_lowercase())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let t0 = Instant::now();
    let total = plan.total_bytes;
    let show = |bytes: u64, objects: u64| {
        let s = t0.elapsed().as_secs_f64().max(1e-3);
        step.detail(&format!(
            "{} of {} ({objects} objects), {:.1} MiB/s",
            human(bytes),
            human(total),
            bytes as f64 / (1 << 20) as f64 / s
        ));
    };
    let mut report = cpmlab_lab::fill::fill(api, &plan, a.concurrency, &show)
        .await
        .map_err(|e| anyhow::anyhow!("fill: {e}"))?;
    if let Ok(tls) = cpmlab_core::etcd::lab_tls(&dir) {
        let view = cpmlab_core::etcd::cluster_view(&state, &tls, Duration::from_secs(5)).await;
        report.db_size = view
            .members
            .iter()
            .filter_map(|m| Some((m.name.clone(), m.db_size?, m.db_size_in_use?)))
            .collect();
    }
    step.done_with(&format!(
        "{} objects, {} in {:.1} s ({:.1} MiB/s){}",
        report.objects,
        human(report.bytes),
        report.seconds,
        report.mib_per_s,
        report
            .db_size
            .iter()
            .map(|(_, size, _)| *size)
            .max()
            .map(|s| format!("; etcd dbSize {}", human(s)))
            .unwrap_or_default()
    ));
    if a.lab.output == Output::Json {
        print_json_line(&serde_json::json!({"event": "fill", "lab": state.name, "report": report}));
    }
    Ok(0)
}

/// Bytes in binary units.
pub fn human(b: u64) -> String {
    let f = b as f64;
    if f >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", f / (1u64 << 30) as f64)
    } else if f >= (1u64 << 20) as f64 {
        format!("{:.1} MiB", f / (1u64 << 20) as f64)
    } else if f >= 1024.0 {
        format!("{:.1} KiB", f / 1024.0)
    } else {
        format!("{b} B")
    }
}
