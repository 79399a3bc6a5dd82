//! `cpmlab probe start|stop|status`: the probe agent as a container on the
//! clients network, writing into a run directory on the host
//! (`<state root>/runs/<NAME>-<time>/`, kept after `down`), and the verdict when
//! it stops.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

pub use super::clock::now_unix_ms;
use super::record::{ConnMode, LabEvent, ProbeKind};
use crate::errors::{BadInput, EnvNotReady};
use crate::provider::{ClientSpec, FileSpec, Provider, WorkloadState, CLIENT_OUT};
use crate::state::{LabDir, LabState};

/// What the probes do: shared by `cpmlab probe start` and the agent, and
/// checked in one place so that bad input fails before anything starts.
#[derive(Debug, Clone, clap::Args)]
pub struct ProbeSettings {
    /// Requests per second per probe and connection mode.
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    /// Per-request timeout.
    #[arg(long, default_value = "2s")]
    pub timeout: String,
    /// Which probes run: readyz, get, list, write, watch, informer (a
    /// kube-rs watcher, as controllers list and watch).
    #[arg(long, default_value = "readyz,get,list,write,watch,informer")]
    pub probes: String,
    /// How the probes reach the API: new (a connection per request),
    /// reused (one kept HTTP/2 connection), keepalive (urllib3's pool),
    /// node (a kept connection through a shoot node's apiserver-proxy,
    /// as in-cluster clients reach it), late-dns (a connection per
    /// request through a DNS cache that keeps each answer --late-dns past
    /// its TTL), seed-bound (a connection per request by the shoot API's
    /// seed-bound name in the seed serving at the start; the topology's
    /// api.wildcard_certificate).
    #[arg(long, default_value = "new,reused")]
    pub modes: String,
    /// How long the late-dns lane keeps an answer past its TTL.
    #[arg(long, default_value = LATE_DNS)]
    pub late_dns: String,
    /// A write load beside the probes: this many new ConfigMaps per second
    /// (modes alternating) in the namespace `<probe namespace>-load`, as
    /// controllers create objects; 0: none.
    #[arg(long, default_value_t = 0.0)]
    pub write_rate: f64,
    /// The size of each load object's data.
    #[arg(long, default_value_t = 1024)]
    pub write_bytes: usize,
    /// Seeds that run a leader-election candidate (client-go, through its
    /// own seed's gateway), comma-separated; none by default.
    #[arg(long, default_value = "")]
    pub candidates: String,
    /// Those of them that start with the probes (the others start on
    /// `cpmlab probe candidate start SEED`).
    #[arg(long, default_value = "")]
    pub start_candidates: String,
    /// client-go's leader election: how long a lease holds unrenewed.
    #[arg(long, default_value = "15s")]
    pub lease_duration: String,
    /// How long a leader retries renewing before it gives up.
    #[arg(long, default_value = "10s")]
    pub renew_deadline: String,
    /// How often candidates try to acquire or renew.
    #[arg(long, default_value = "2s")]
    pub retry_period: String,
}

/// How long the late-dns lane keeps an answer past its TTL unless told: a
/// minute, the lab's choice (no landscape's measured figure; the finding
/// it serves, docs/findings/late-dns.md, says what each margin covers).
pub const LATE_DNS: &str = "60s";

/// `ProbeSettings`, checked.
pub struct Parsed {
    pub rate: f64,
    pub write_rate: f64,
    pub write_bytes: usize,
    pub timeout: Duration,
    pub probes: Vec<ProbeKind>,
    pub modes: Vec<ConnMode>,
    /// The late-dns lane's resolver keeps each answer this long past its TTL.
    pub late_dns: Duration,
    pub candidates: Vec<String>,
    pub start_candidates: Vec<String>,
    pub lease: super::clientgo::LeaseTimings,
}

fn parse_list<T: serde::de::DeserializeOwned>(
    flag: &str,
    s: &str,
    known: &str,
) -> Result<Vec<T>, BadInput> {
    let items: Vec<&str> = s.split(',').filter(|x| !x.is_empty()).collect();
    if items.is_empty() {
        return Err(BadInput(format!("{flag}: empty (choose from {known})")));
    }
    items
        .into_iter()
        .map(|x| {
            serde_json::from_value(serde_json::json!(x))
                .map_err(|_| BadInput(format!("{flag}: unknown `{x}` (choose from {known})")))
        })
        .collect()
}

impl ProbeSettings {
    pub fn parse(&self) -> Result<Parsed, BadInput> {
        if !(self.rate > 0.0 && self.rate <= 5000.0) {
            return Err(BadInput(format!(
                "--rate {}: between 0 and 5000 requests/s per probe and mode",
                self.rate
            )));
        }
        if !(self.write_rate >= 0.0 && self.write_rate <= 2000.0) {
            return Err(BadInput(format!(
                "--write-rate {}: between 0 (no load) and 2000 objects/s",
                self.write_rate
            )));
        }
        if self.write_bytes > 512 * 1024 {
            return Err(BadInput(format!(
                "--write-bytes {}: at most 512 KiB (etcd's request limit is 1.5 MiB)",
                self.write_bytes
            )));
        }
        let probes: Vec<ProbeKind> = parse_list(
            "--probes",
            &self.probes,
            "readyz, get, list, write, watch, informer, informer-go",
        )?;
        if probes.contains(&ProbeKind::Load) {
            return Err(BadInput(
                "--probes: `load` is not a probe; --write-rate starts the write load".into(),
            ));
        }
        if probes.contains(&ProbeKind::Lease) {
            return Err(BadInput(
                "--probes: `lease` is not a probe; --candidates starts leader-election candidates"
                    .into(),
            ));
        }
        let names = |s: &str| -> Vec<String> {
            s.split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect()
        };
        let candidates = names(&self.candidates);
        let start_candidates = names(&self.start_candidates);
        if let Some(s) = start_candidates.iter().find(|s| !candidates.contains(s)) {
            return Err(BadInput(format!(
                "--start-candidates: `{s}` has no candidate (--candidates {})",
                self.candidates
            )));
        }
        let d = |flag: &str, v: &str| crate::link::profile::parse_duration(flag, v);
        let lease = super::clientgo::LeaseTimings {
            lease_duration: d("--lease-duration", &self.lease_duration)?,
            renew_deadline: d("--renew-deadline", &self.renew_deadline)?,
            retry_period: d("--retry-period", &self.retry_period)?,
        };
        lease.check()?;
        Ok(Parsed {
            rate: self.rate,
            write_rate: self.write_rate,
            write_bytes: self.write_bytes,
            timeout: crate::link::profile::parse_duration("--timeout", &self.timeout)?,
            probes,
            modes: parse_list(
                "--modes",
                &self.modes,
                "new, reused, keepalive, node, late-dns, seed-bound",
            )?,
            late_dns: d("--late-dns", &self.late_dns)?,
            candidates,
            start_candidates,
            lease,
        })
    }
}

/// A new run directory `<runs>/<name>-<UTC time>/`, absolute (a probe
/// container mounts it).
pub fn new_run_dir(runs: &Path, name: &str) -> Result<PathBuf> {
    crate::state::create_private_dir(runs).with_context(|| format!("create {}", runs.display()))?;
    let runs = std::fs::canonicalize(runs)?;
    let stamp = time::OffsetDateTime::now_utc();
    let run = runs.join(format!(
        "{name}-{:04}{:02}{:02}-{:02}{:02}{:02}",
        stamp.year(),
        u8::from(stamp.month()),
        stamp.day(),
        stamp.hour(),
        stamp.minute(),
        stamp.second()
    ));
    std::fs::create_dir_all(&run).with_context(|| format!("create {}", run.display()))?;
    Ok(run)
}

pub fn container(state: &LabState) -> String {
    crate::provider::probe_client(state)
}

/// Appends a lab event to a run's events.ndjson.
pub fn append_event(run: &Path, ev: &LabEvent) -> Result<()> {
    use std::io::Write;
    let p = run.join("events.ndjson");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .with_context(|| format!("open {}", p.display()))?;
    writeln!(f, "{}", serde_json::to_string(ev)?)?;
    Ok(())
}

/// Records a lab event in the lab's probe run, if probes are running now
/// (a missing run or an unwritable file is only logged: events annotate a
/// run, they never stop the work they describe).
pub fn record_lab_event(
    dir: &LabDir,
    kind: &str,
    name: &str,
    detail: &str,
    at: f64,
    end: Option<f64>,
) {
    record(dir, kind, name, detail, at, end, None);
}

/// Records a migration step's band with its outcome: the step's condition
/// as the step ended (`True`, `False`, `Unknown`), which the verdict's
/// `migration-completed` rule reads.
pub fn record_step(dir: &LabDir, step: &str, detail: &str, status: &str, at: f64, end: f64) {
    record(dir, "phase", step, detail, at, Some(end), Some(status));
}

fn record(
    dir: &LabDir,
    kind: &str,
    name: &str,
    detail: &str,
    at: f64,
    end: Option<f64>,
    status: Option<&str>,
) {
    if let Some(run) = dir.load().ok().and_then(|s| s.probe_run) {
        let ev = LabEvent {
            at_unix_ms: at,
            end_unix_ms: end,
            kind: kind.into(),
            name: name.into(),
            detail: detail.into(),
            status: status.map(str::to_string),
        };
        if let Err(e) = append_event(&run, &ev) {
            tracing::warn!("could not record event {name}: {e:#}");
        }
    }
}

/// Records what ran (the report's header line `name: detail`), if probes
/// are running now.
pub fn record_settings(dir: &LabDir, name: &str, detail: &str) {
    record_lab_event(
        dir,
        crate::verdict::record::SETTINGS_EVENT,
        name,
        detail,
        now_unix_ms(),
        None,
    );
}

pub fn note(run: &Path, name: &str) -> Result<()> {
    append_event(
        run,
        &LabEvent {
            at_unix_ms: now_unix_ms(),
            end_unix_ms: None,
            kind: "note".into(),
            name: name.into(),
            detail: String::new(),
            status: None,
        },
    )
}

pub async fn start(
    provider: &dyn Provider,
    dir: &LabDir,
    state: &mut LabState,
    s: &ProbeSettings,
) -> Result<PathBuf> {
    // Under emulation the clients' per-request timeout stretches with the
    // lab's other limits about time: a request a slowed API answers late
    // is latency, which the stretched SLOs judge, not a failure.
    let factor = cpmlab_model::platform::wait_factor(state.emulation.as_ref());
    let stretched;
    let s = if factor != 1.0 {
        let t = s.parse()?.timeout.mul_f64(factor);
        stretched = ProbeSettings {
            timeout: format!("{}ms", t.as_millis()),
            ..s.clone()
        };
        &stretched
    } else {
        s
    };
    let parsed = s.parse()?;
    let c = container(state);
    if provider.workload_state(&c).await? != WorkloadState::Missing {
        return Err(EnvNotReady::new(
            format!("probes are already running in lab `{}`", state.name),
            format!("run `cpmlab probe stop --name {}` first", state.name),
        )
        .into());
    }
    // Runs outlive the lab: `<state root>/runs/<lab>-<time>/`, kept by `down`.
    let run = new_run_dir(&dir.runs(), &state.name)?;
    // The layout first: the verdict reads the directory by it.
    crate::verdict::layout::write(&run)?;
    crate::verdict::run_dir::write_plan(&run, &plan(&parsed))?;
    let mut k = crate::verdict::Criteria::default();
    if !parsed.candidates.is_empty() {
        lease_criteria(&mut k, &parsed.lease);
    }
    // Under emulation the limits about time stretch (`cpmlab run` writes
    // the scenario's own, stretched alike, over these).
    crate::verdict::run_dir::write_criteria(&run, &k.stretched(factor))?;
    // Where the counter's history begins, before the agent writes it.
    super::history::begin(super::history::connect(dir, state).await, &run).await;
    let ca = std::fs::read_to_string(dir.pki().join("ca.crt"))?;
    if let Some(s) = parsed.candidates.iter().find(|c| state.seed(c).is_none()) {
        return Err(BadInput(format!(
            "--candidates: lab `{}` has no seed `{s}` (seeds: {})",
            state.name,
            state
                .seeds
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into());
    }
    let seeds: Vec<String> = state
        .seeds
        .iter()
        .map(|s| format!("{}={}", s.name, s.gateway.ip))
        .collect();
    let client = ClientSpec {
        args: vec![
            "agent".into(),
            "probe".into(),
            format!("--api-name={}", state.dns.api_name),
            format!("--dns={}:53", state.dns.server.ip),
            "--ca=/etc/cpmlab/probe/ca.crt".into(),
            "--token-file=/etc/cpmlab/probe/token".into(),
            format!("--out={CLIENT_OUT}/records.ndjson"),
            format!("--rate={}", s.rate),
            format!("--timeout={}", s.timeout),
            format!("--probes={}", s.probes),
            format!("--modes={}", s.modes),
            format!("--late-dns={}", s.late_dns),
            format!("--write-rate={}", s.write_rate),
            format!("--write-bytes={}", s.write_bytes),
            format!("--seed-gateways={}", seeds.join(",")),
            format!("--candidates={}", s.candidates),
            format!("--start-candidates={}", s.start_candidates),
            format!("--lease-duration={}", s.lease_duration),
            format!("--renew-deadline={}", s.renew_deadline),
            format!("--retry-period={}", s.retry_period),
        ],
        files: vec![
            FileSpec::new("/etc/cpmlab/probe/ca.crt", ca, 0o644),
            FileSpec::new("/etc/cpmlab/probe/token", state.api_token.clone(), 0o600),
        ],
        out: run.clone(),
        image_parts: Vec::new(),
        node: None,
    };
    let mut client = client;
    if parsed.modes.contains(&ConnMode::SeedBound) {
        if !state.topology.api.wildcard_certificate {
            return Err(BadInput(
                "--modes seed-bound: the seeds have no wildcard certificate, so no seed-bound name (topology api.wildcard_certificate: true)".into(),
            )
            .into());
        }
        let source = state.seed_by_role(crate::topology::SeedRole::Source);
        client.args.push(format!(
            "--seed-bound-name={}",
            state.topology.shoot.seed_bound_name(&source.name)
        ));
    }
    if parsed.modes.contains(&ConnMode::Node) {
        client.node = Some(super::node::spec(state));
        client
            .args
            .push(format!("--node={}", super::node::address(state)?));
    }
    if needs_clientgo(&parsed) {
        client
            .image_parts
            .push(crate::go_parts::CLIENTGO.name.into());
        client
            .args
            .push(format!("--clientgo={}", super::clientgo::CONTAINER_BIN));
    }
    provider.start_client(state, &client).await?;
    note(
        &run,
        &format!(
            "probes started; the {} API server serves{}",
            state.api_kind.as_str(),
            if factor != 1.0 {
                format!(
                    " (per-request timeout {} ms: x{} under emulation)",
                    parsed.timeout.as_millis(),
                    cpmlab_model::platform::fmt_factor(factor)
                )
            } else {
                String::new()
            }
        ),
    )?;
    // Wait for the first records: the agent has set up its objects.
    let records = run.join("records.ndjson");
    let t0 = std::time::Instant::now();
    let first = state.stretch(Duration::from_secs(60));
    while std::fs::metadata(&records).map(|m| m.len()).unwrap_or(0) == 0 {
        if t0.elapsed() > first {
            let log = provider.logs(&c).await.unwrap_or_default();
            let log = String::from_utf8_lossy(&log);
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            anyhow::bail!(
                "the probe agent ({c}) wrote no record within {} s; its last lines:\n{}",
                first.as_secs(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let probe_run = Some(run.clone());
    *state = dir.update(|s| s.probe_run = probe_run)?;
    Ok(run)
}

/// The lease rules' bounds from the candidates' timings: client-go's renew
/// deadline, and a handover within the lease plus two retry periods (the
/// bound for a leader that ends without releasing; a released lease is
/// taken within about one retry period).
pub fn lease_criteria(k: &mut crate::verdict::Criteria, t: &super::clientgo::LeaseTimings) {
    k.renew_deadline_ms = t.renew_deadline.as_secs_f64() * 1e3;
    k.handover_ms = (t.lease_duration + 2 * t.retry_period).as_secs_f64() * 1e3;
}

/// Whether the probes run a lane of `cpmlab-clientgo` (the lab image's:
/// `ClientSpec::image_parts`).
pub fn needs_clientgo(p: &Parsed) -> bool {
    p.probes.contains(&ProbeKind::InformerGo) || !p.candidates.is_empty()
}

pub struct StopOutcome {
    pub run: PathBuf,
    pub verdict: crate::verdict::Verdict,
}

pub async fn stop(
    provider: &dyn Provider,
    dir: &LabDir,
    state: &mut LabState,
) -> Result<StopOutcome> {
    let run = state.probe_run.clone().ok_or_else(|| {
        EnvNotReady::new(
            format!("no probe run in lab `{}`", state.name),
            format!("run `cpmlab probe start --name {}` first", state.name),
        )
    })?;
    let c = container(state);
    // The agent lets its last write end (up to the probe timeout), then the
    // informer catch up (10 s): it exits long before this unless stuck.
    provider.stop(&c, Duration::from_secs(60)).await?;
    // Every workload's log: the run explains itself after `down`. The
    // agent's is kept as it is removed.
    let names: Vec<String> = provider
        .workloads(Some(&state.name))
        .await
        .map(|w| w.into_iter().map(|w| w.name).filter(|n| *n != c).collect())
        .unwrap_or_default();
    super::container_logs::keep(provider, &run, &names).await;
    provider.remove(state, &c, None).await?;
    // The shoot node, where the node lane ran (its log is kept above).
    let node = crate::provider::node_client(state);
    if provider.workload_state(&node).await? != WorkloadState::Missing {
        provider.remove(state, &node, None).await?;
    }
    note(&run, "probes stopped")?;
    // Candidates ran when the plan kept with the run says so.
    let candidates = std::fs::read(run.join(crate::verdict::record::PROBES_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice::<crate::verdict::record::ProbePlan>(&b).ok())
        .is_some_and(|p| p.probes.contains(&ProbeKind::Lease));
    let fin = super::final_read::read(dir, state, candidates, &run).await;
    std::fs::write(run.join(FINAL_FILE), serde_json::to_string_pretty(&fin)?)?;
    let verdict = judge(&run)?;
    *state = dir.update(|s| s.probe_run = None)?;
    Ok(StopOutcome { run, verdict })
}

/// What was read back after the run (see `final_read`).
pub const FINAL_FILE: &str = crate::verdict::run_dir::FINAL_FILE;

/// Judges a run directory by the criteria it keeps (`criteria.json`, else
/// the defaults): from its records, events, final read and etcd logs,
/// writes verdict.json, junit.xml and report.html. Used by `probe stop`,
/// `cpmlab run` and `cpmlab verdict`, which judges a kept run again.
pub fn judge(run: &Path) -> Result<crate::verdict::Verdict> {
    let c = crate::verdict::run_dir::read_criteria(run)?;
    Ok(crate::verdict::run_dir::judge(run, &c)?)
}

/// What the probes were told to do, as the verdict keeps it.
pub fn plan(p: &Parsed) -> crate::verdict::record::ProbePlan {
    let mut probes = p.probes.clone();
    if p.write_rate > 0.0 {
        probes.push(ProbeKind::Load);
    }
    if !p.candidates.is_empty() {
        probes.push(ProbeKind::Lease);
    }
    crate::verdict::record::ProbePlan {
        probes,
        modes: p.modes.clone(),
        rate: p.rate,
        timeout_ms: p.timeout.as_secs_f64() * 1e3,
        write_rate: p.write_rate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(rate: f64, timeout: &str, probes: &str, modes: &str) -> ProbeSettings {
        ProbeSettings {
            rate,
            timeout: timeout.into(),
            probes: probes.into(),
            modes: modes.into(),
            late_dns: LATE_DNS.into(),
            write_rate: 0.0,
            write_bytes: 1024,
            candidates: String::new(),
            start_candidates: String::new(),
            lease_duration: "15s".into(),
            renew_deadline: "10s".into(),
            retry_period: "2s".into(),
        }
    }

    #[test]
    fn settings_are_checked_in_one_place() {
        let p = s(20.0, "2s", "readyz,write", "reused").parse().unwrap();
        assert_eq!(p.probes, [ProbeKind::Readyz, ProbeKind::Write]);
        assert_eq!(p.modes, [ConnMode::Reused]);
        assert_eq!(p.timeout, Duration::from_secs(2));
        for bad in [
            s(0.0, "2s", "get", "new"),
            s(20.0, "soon", "get", "new"),
            s(20.0, "2s", "bogus", "new"),
            s(20.0, "2s", "get", ""),
        ] {
            assert!(bad.parse().is_err(), "{bad:?}");
        }
    }
}
