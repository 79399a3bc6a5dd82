//! The docker provider behind the `Provider` interface: a workload is a
//! container, a member's data a volume, a seed's ingress an HAProxy.

use std::net::Ipv4Addr;
use std::time::Duration;

use anyhow::Result;

use super::engine::Engine;
use super::{seed, up};
use crate::pki::Ca;
use crate::provider::{FileSpec, Output, Provider, Signal, WorkloadState};
use crate::state::{ApiServerState, LabState, MemberState};

pub struct DockerProvider {
    pub engine: Engine,
}

impl DockerProvider {
    /// Connects to the Docker engine (exit 3 with the fix when it cannot).
    pub async fn connect() -> Result<DockerProvider> {
        Ok(DockerProvider {
            engine: Engine::connect().await?,
        })
    }
}

#[async_trait::async_trait]
impl Provider for DockerProvider {
    fn name(&self) -> &'static str {
        "docker"
    }

    async fn workload_state(&self, workload: &str) -> Result<WorkloadState> {
        Ok(
            match self.engine.container_state(workload).await?.as_str() {
                "running" | "restarting" => WorkloadState::Running,
                "paused" => WorkloadState::Paused,
                "missing" => WorkloadState::Missing,
                "created" => WorkloadState::Created,
                _ => WorkloadState::Stopped,
            },
        )
    }

    async fn signal(&self, workload: &str, signal: Signal) -> Result<()> {
        let name = match signal {
            Signal::Term => "SIGTERM",
            Signal::Kill => "SIGKILL",
        };
        self.engine.signal(workload, name).await
    }

    async fn freeze(&self, workload: &str, frozen: bool) -> Result<()> {
        if frozen {
            self.engine.pause(workload).await
        } else {
            self.engine.unpause(workload).await
        }
    }

    async fn stop(&self, workload: &str, grace: Duration) -> Result<()> {
        let secs = i32::try_from(grace.as_secs()).unwrap_or(i32::MAX);
        self.engine.stop(workload, secs).await
    }

    async fn start(&self, state: &LabState, workload: &str) -> Result<()> {
        up::start_released(&self.engine, state, workload).await
    }

    async fn release(&self, state: &LabState, workload: &str) -> Result<()> {
        up::release_one(&self.engine, state, workload).await
    }

    async fn start_member(
        &self,
        state: &LabState,
        ca: &Ca,
        m: &MemberState,
        cluster: &[(String, String)],
    ) -> Result<()> {
        seed::start_joining_member(&self.engine, state, ca, m, cluster).await
    }

    async fn start_apiserver(
        &self,
        state: &LabState,
        ca: &Ca,
        a: &ApiServerState,
        etcd_servers: &[String],
        sa: &(String, String),
    ) -> Result<()> {
        seed::start_apiserver(&self.engine, state, ca, a, etcd_servers, sa).await
    }

    async fn remove(&self, state: &LabState, workload: &str, data: Option<&str>) -> Result<()> {
        crate::probe::container_logs::remove_keeping_log(&self.engine, state, workload).await?;
        if let Some(volume) = data {
            self.engine.remove_volume(volume).await?;
        }
        Ok(())
    }

    async fn sync_gateway(&self, state: &LabState, seed: &str) -> Result<()> {
        seed::sync_gateway(&self.engine, state, seed).await
    }

    async fn set_dns(&self, state: &LabState, records: &[(&str, &[Ipv4Addr])]) -> Result<()> {
        seed::dns_set(&self.engine, state, records).await
    }

    async fn exec(&self, workload: &str, argv: &[&str]) -> Result<Output> {
        self.engine.exec(workload, argv, false).await
    }

    async fn upload(&self, workload: &str, files: &[FileSpec]) -> Result<()> {
        self.engine.upload(workload, files).await
    }
}
