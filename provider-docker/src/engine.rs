//! A thin layer over the Docker Engine API (bollard): only the calls the lab
//! makes, with the lab's labels applied and errors that say what failed.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use anyhow::{Context, Result};
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{
    ContainerCreateBody, ContainerSummary, EndpointIpamConfig, EndpointSettings, HostConfig, Ipam,
    IpamConfig, NetworkConnectRequest, NetworkCreateRequest, NetworkingConfig, VolumeCreateRequest,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, ListNetworksOptionsBuilder,
    ListVolumesOptionsBuilder, RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder,
    UploadToContainerOptionsBuilder,
};
use futures_util::StreamExt;

use super::{LABEL_LAB, LABEL_ROLE, LABEL_SEED};
use crate::errors::EnvNotReady;

/// A tmpfs in every lab container: empty at each start.
pub const RUN_DIR: &str = "/run/cpmlab";

/// The role label of a helper that works in a lab container's network
/// namespace (`Engine::run_in_netns`).
pub const NETNS_ROLE: &str = "netns";

#[derive(Clone)]
pub struct Engine {
    pub api: bollard::Docker,
}

/// What a command run in a container printed, and how it ended.
pub use cpmlab_provider::Output as ExecOutput;

pub use cpmlab_provider::FileSpec;

/// One container of the lab.
pub struct ContainerSpec {
    pub name: String,
    pub lab: String,
    pub role: String,
    pub seed: Option<String>,
    pub image: String,
    pub cmd: Vec<String>,
    /// (docker network, address); the first is attached at create.
    pub networks: Vec<(String, Ipv4Addr)>,
    pub cap_add: Vec<String>,
    pub sysctls: HashMap<String, String>,
    /// (volume or absolute host path, mount path[:ro])
    pub volumes: Vec<(String, String)>,
    /// Host devices to expose (e.g. /dev/net/tun).
    pub devices: Vec<String>,
    pub files: Vec<FileSpec>,
}

pub fn lab_labels(lab: &str, role: &str, seed: Option<&str>) -> HashMap<String, String> {
    let mut l = HashMap::from([
        (LABEL_LAB.to_string(), lab.to_string()),
        (LABEL_ROLE.to_string(), role.to_string()),
    ]);
    if let Some(s) = seed {
        l.insert(LABEL_SEED.to_string(), s.to_string());
    }
    l
}

fn lab_filter(lab: Option<&str>) -> HashMap<String, Vec<String>> {
    let v = match lab {
        Some(l) => format!("{LABEL_LAB}={l}"),
        None => LABEL_LAB.to_string(),
    };
    HashMap::from([("label".to_string(), vec![v])])
}

/// A unique name for a short-lived helper container: `<stem>-<pid>-<n>`.
fn helper_name(stem: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{stem}-{}-{n}", std::process::id())
}

/// A 404 from Docker: the object is already gone.
pub fn is_not_found(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// Objects of one lab, as Docker lists them (the interface's type).
pub use cpmlab_provider::LabObjects;

impl Engine {
    /// Connects to the local engine and agrees on an API version.
    pub async fn connect() -> Result<Engine, EnvNotReady> {
        let fix = "run `scripts/setup` (installs docker.io and starts dockerd), or start the Docker daemon yourself";
        let api = bollard::Docker::connect_with_local_defaults()
            .map_err(|e| EnvNotReady::new(format!("cannot reach the Docker engine: {e}"), fix))?;
        let api = api.negotiate_version().await.map_err(|e| {
            EnvNotReady::new(
                format!("the Docker engine does not answer ({}): {e}", docker_host()),
                fix,
            )
        })?;
        Ok(Engine { api })
    }

    /// (server version, API version)
    pub async fn version(&self) -> Result<(String, String)> {
        let v = self.api.version().await.context("docker version")?;
        Ok((
            v.version.unwrap_or_default(),
            v.api_version.unwrap_or_default(),
        ))
    }

    /// The engine's (os, architecture) as Docker names them (`linux`,
    /// `amd64` or `arm64`).
    pub async fn platform(&self) -> Result<(String, String)> {
        let v = self.api.version().await.context("docker version")?;
        Ok((v.os.unwrap_or_default(), v.arch.unwrap_or_default()))
    }

    pub async fn image_exists(&self, image: &str) -> Result<bool> {
        match self.api.inspect_image(image).await {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(e).with_context(|| format!("inspect image {image}")),
        }
    }

    /// An image's ID and architecture, or None when it is not present.
    pub async fn image_id_arch(&self, image: &str) -> Result<Option<(String, String)>> {
        match self.api.inspect_image(image).await {
            Ok(i) => Ok(Some((
                i.id.unwrap_or_default(),
                i.architecture.unwrap_or_default(),
            ))),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e).with_context(|| format!("inspect image {image}")),
        }
    }

    /// An image's labels, or None when it is not present.
    pub async fn image_labels(
        &self,
        image: &str,
    ) -> Result<Option<std::collections::HashMap<String, String>>> {
        match self.api.inspect_image(image).await {
            Ok(i) => Ok(Some(i.config.and_then(|c| c.labels).unwrap_or_default())),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e).with_context(|| format!("inspect image {image}")),
        }
    }

    /// Subnets of every Docker network, to allocate around them.
    pub async fn taken_subnets(&self) -> Result<Vec<String>> {
        let nets = self
            .api
            .list_networks(None::<bollard::query_parameters::ListNetworksOptions>)
            .await
            .context("list Docker networks")?;
        Ok(nets
            .into_iter()
            .flat_map(|n| n.ipam.and_then(|i| i.config).unwrap_or_default())
            .filter_map(|c| c.subnet)
            .collect())
    }

    pub async fn create_network(
        &self,
        lab: &str,
        name: &str,
        logical: &str,
        subnet: &str,
        bridge_ip: Ipv4Addr,
        dynamic_range: Option<&str>,
    ) -> Result<(), bollard::errors::Error> {
        self.api
            .create_network(NetworkCreateRequest {
                name: name.to_string(),
                driver: Some("bridge".into()),
                ipam: Some(Ipam {
                    driver: Some("default".into()),
                    config: Some(vec![IpamConfig {
                        subnet: Some(subnet.to_string()),
                        gateway: Some(bridge_ip.to_string()),
                        // Where Docker picks addresses for containers that
                        // ask for none (kind's nodes).
                        ip_range: dynamic_range.map(str::to_string),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                labels: Some(lab_labels(lab, "network", Some(logical))),
                ..Default::default()
            })
            .await
            .map(|_| ())
    }

    pub async fn create_volume(&self, lab: &str, name: &str, seed: &str) -> Result<()> {
        self.api
            .create_volume(VolumeCreateRequest {
                name: Some(name.to_string()),
                labels: Some(lab_labels(lab, "etcd-data", Some(seed))),
                ..Default::default()
            })
            .await
            .with_context(|| format!("create volume {name}"))?;
        Ok(())
    }

    /// Creates the container, attaches its networks, uploads its files.
    /// It is not started.
    pub async fn create_container(&self, spec: &ContainerSpec) -> Result<()> {
        let endpoint = |ip: Ipv4Addr| EndpointSettings {
            ipam_config: Some(EndpointIpamConfig {
                ipv4_address: Some(ip.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let (first_net, first_ip) = spec.networks.first().context("container has no network")?;
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: Some(spec.cmd.clone()),
            hostname: Some(spec.name.clone()),
            labels: Some(lab_labels(&spec.lab, &spec.role, spec.seed.as_deref())),
            host_config: Some(HostConfig {
                network_mode: Some(first_net.clone()),
                cap_add: (!spec.cap_add.is_empty()).then(|| spec.cap_add.clone()),
                sysctls: (!spec.sysctls.is_empty()).then(|| spec.sysctls.clone()),
                binds: (!spec.volumes.is_empty()).then(|| {
                    spec.volumes
                        .iter()
                        .map(|(v, p)| format!("{v}:{p}"))
                        .collect()
                }),
                devices: (!spec.devices.is_empty()).then(|| {
                    spec.devices
                        .iter()
                        .map(|d| bollard::models::DeviceMapping {
                            path_on_host: Some(d.clone()),
                            path_in_container: Some(d.clone()),
                            cgroup_permissions: Some("rwm".into()),
                        })
                        .collect()
                }),
                init: Some(true),
                // The barrier's release lives here: empty at each start.
                tmpfs: Some(HashMap::from([(
                    RUN_DIR.to_string(),
                    "mode=0755".to_string(),
                )])),
                ..Default::default()
            }),
            networking_config: Some(NetworkingConfig {
                endpoints_config: Some(HashMap::from([(first_net.clone(), endpoint(*first_ip))])),
            }),
            ..Default::default()
        };
        let opts = CreateContainerOptionsBuilder::default()
            .name(&spec.name)
            .build();
        self.api
            .create_container(Some(opts), body)
            .await
            .with_context(|| format!("create container {}", spec.name))?;
        for (net, ip) in spec.networks.iter().skip(1) {
            self.api
                .connect_network(
                    net,
                    NetworkConnectRequest {
                        container: spec.name.clone(),
                        endpoint_config: Some(endpoint(*ip)),
                    },
                )
                .await
                .with_context(|| format!("connect {} to network {net}", spec.name))?;
        }
        if !spec.files.is_empty() {
            self.upload(&spec.name, &spec.files).await?;
        }
        Ok(())
    }

    /// Copies files into a container (created or running) as one tar.
    pub async fn upload(&self, container: &str, files: &[FileSpec]) -> Result<()> {
        let mut tar = tar::Builder::new(Vec::new());
        for f in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(f.contents.len() as u64);
            h.set_mode(f.mode);
            h.set_mtime(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0),
            );
            h.set_entry_type(tar::EntryType::Regular);
            tar.append_data(
                &mut h,
                f.path.trim_start_matches('/'),
                f.contents.as_slice(),
            )
            .context("build tar")?;
        }
        let bytes = tar.into_inner().context("build tar")?;
        let opts = UploadToContainerOptionsBuilder::default().path("/").build();
        self.api
            .upload_to_container(container, Some(opts), bollard::body_full(bytes.into()))
            .await
            .with_context(|| format!("upload files to {container}"))
    }

    /// Runs `cmd` to its end in a short-lived container that shares the
    /// network namespace of `target` (Docker's `--network container:`)
    /// with NET_ADMIN, `files` placed in it first, and removes it. Only the
    /// Docker API is used: no host process enters a container's namespace,
    /// so this works where the engine runs in a VM or the caller is not
    /// root. The helper carries the lab's labels (role `netns`), so `down`
    /// finds one a crash left behind.
    pub async fn run_in_netns(
        &self,
        target: &str,
        lab: &str,
        image: &str,
        cmd: &[String],
        files: &[FileSpec],
    ) -> Result<ExecOutput> {
        let name = helper_name(&format!("{target}-netns"));
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            cmd: Some(cmd.to_vec()),
            labels: Some(lab_labels(lab, NETNS_ROLE, None)),
            host_config: Some(HostConfig {
                network_mode: Some(format!("container:{target}")),
                cap_add: Some(vec!["NET_ADMIN".into()]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let ran = async {
            if !files.is_empty() {
                self.upload(&name, files).await?;
            }
            self.start_and_wait(&name).await
        };
        self.with_helper(
            &name,
            body,
            &format!("in the network namespace of {target}"),
            ran,
        )
        .await
    }

    /// Runs `cmd` to its end in a short-lived container of `image` with no
    /// network and `mounts` (bind mounts, which the engine refuses where
    /// the source does not exist on its side), and removes it: how it
    /// ended and what it wrote to stdout and stderr. No lab's: `what`
    /// names it in errors.
    pub async fn run_once(
        &self,
        image: &str,
        cmd: &[String],
        mounts: Vec<bollard::models::Mount>,
        what: &str,
    ) -> Result<ExecOutput> {
        let name = helper_name("cpmlab-check");
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            cmd: Some(cmd.to_vec()),
            labels: Some(HashMap::from([(
                "cpmlab.check".to_string(),
                what.to_string(),
            )])),
            host_config: Some(HostConfig {
                network_mode: Some("none".into()),
                mounts: (!mounts.is_empty()).then_some(mounts),
                ..Default::default()
            }),
            ..Default::default()
        };
        let ran = async { self.start_and_wait(&name).await };
        self.with_helper(&name, body, what, ran).await
    }

    /// What `uname -m` says in a container of `image`: whether, and as
    /// what, the engine runs that image's architecture.
    pub async fn uname_m(&self, image: &str) -> Result<String> {
        let out = self
            .run_once(
                image,
                &["uname".into(), "-m".into()],
                vec![],
                &format!("of {image} to run uname -m"),
            )
            .await?;
        anyhow::ensure!(
            out.ok(),
            "`uname -m` in {image} exited {}: {}",
            out.code,
            out.stderr.trim()
        );
        Ok(out.stdout.trim().to_string())
    }

    /// A container's stdout and stderr, apart, without time stamps.
    /// Starts a created container, waits for it to exit and returns its
    /// exit code and output.
    async fn start_and_wait(&self, name: &str) -> Result<ExecOutput> {
        self.start(name).await?;
        let mut wait = self.api.wait_container(
            name,
            None::<bollard::query_parameters::WaitContainerOptions>,
        );
        let code = match wait.next().await {
            Some(Ok(r)) => r.status_code,
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
            Some(Err(e)) => return Err(e).with_context(|| format!("wait for {name}")),
            None => anyhow::bail!("wait for {name}: the engine said nothing"),
        };
        let (stdout, stderr) = self.output_of(name).await?;
        Ok(ExecOutput {
            code,
            stdout,
            stderr,
        })
    }

    async fn output_of(&self, container: &str) -> Result<(String, String)> {
        let mut out = (String::new(), String::new());
        for stdout in [true, false] {
            let opts = bollard::query_parameters::LogsOptionsBuilder::new()
                .stdout(stdout)
                .stderr(!stdout)
                .build();
            let mut stream = self.api.logs(container, Some(opts));
            let mut text = Vec::new();
            while let Some(chunk) = stream.next().await {
                text.extend_from_slice(
                    &chunk
                        .with_context(|| format!("logs of {container}"))?
                        .into_bytes(),
                );
            }
            let text = String::from_utf8_lossy(&text).into_owned();
            if stdout {
                out.0 = text;
            } else {
                out.1 = text;
            }
        }
        Ok(out)
    }

    /// Creates the short-lived container `name` from `body`, awaits `work`
    /// (which uses it) and removes the container, whatever `work` returned.
    async fn with_helper<T>(
        &self,
        name: &str,
        body: ContainerCreateBody,
        what: &str,
        work: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let opts = CreateContainerOptionsBuilder::default().name(name).build();
        self.api
            .create_container(Some(opts), body)
            .await
            .with_context(|| format!("create {name} {what}"))?;
        let out = work.await;
        let removed = self.remove_container(name).await;
        let out = out?;
        removed?;
        Ok(out)
    }

    /// Reads one file out of an image: a container is created from it
    /// (never started), the file downloaded, the container removed.
    pub async fn image_file(&self, lab: &str, image: &str, path: &str) -> Result<Vec<u8>> {
        let name = helper_name(&format!("cpmlab-{lab}-image-file"));
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            cmd: Some(vec!["true".into()]),
            labels: Some(lab_labels(lab, "image-file", None)),
            host_config: Some(HostConfig {
                network_mode: Some("none".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.with_helper(
            &name,
            body,
            &format!("of {image} to read {path}"),
            self.download(&name, path),
        )
        .await
    }

    /// Reads one file out of a container (Docker's archive of `path`, a tar
    /// holding that file).
    pub async fn download(&self, container: &str, path: &str) -> Result<Vec<u8>> {
        use futures_util::TryStreamExt;
        let opts = bollard::query_parameters::DownloadFromContainerOptionsBuilder::default()
            .path(path)
            .build();
        let chunks: Vec<bytes::Bytes> = self
            .api
            .download_from_container(container, Some(opts))
            .try_collect()
            .await
            .with_context(|| format!("download {path} from {container}"))?;
        let tar_bytes: Vec<u8> = chunks.concat();
        let mut archive = tar::Archive::new(tar_bytes.as_slice());
        for entry in archive.entries().context("read the archive")? {
            let mut entry = entry.context("read the archive")?;
            if entry.header().entry_type() == tar::EntryType::Regular {
                let mut out = Vec::new();
                std::io::Read::read_to_end(&mut entry, &mut out)
                    .with_context(|| format!("read {path} from the archive of {container}"))?;
                return Ok(out);
            }
        }
        anyhow::bail!("the archive of {path} from {container} holds no file")
    }

    /// Starts a container; one that runs already is left as it is (two
    /// controllers may start it at once: the migration and the kubelet).
    pub async fn start(&self, container: &str) -> Result<()> {
        match self
            .api
            .start_container(
                container,
                None::<bollard::query_parameters::StartContainerOptions>,
            )
            .await
        {
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 304, ..
            }) => Ok(()),
            r => r.with_context(|| format!("start container {container}")),
        }
    }

    /// Freezes every process of a container (the cgroup freezer).
    pub async fn pause(&self, container: &str) -> Result<()> {
        self.api
            .pause_container(container)
            .await
            .with_context(|| format!("pause container {container}"))
    }

    pub async fn unpause(&self, container: &str) -> Result<()> {
        self.api
            .unpause_container(container)
            .await
            .with_context(|| format!("unpause container {container}"))
    }

    /// Stops a container (SIGTERM, then SIGKILL after `timeout_s`).
    pub async fn stop(&self, container: &str, timeout_s: i32) -> Result<()> {
        let opts = bollard::query_parameters::StopContainerOptionsBuilder::default()
            .t(timeout_s)
            .build();
        match self.api.stop_container(container, Some(opts)).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 304, ..
            }) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("stop container {container}")),
        }
    }

    /// A container's whole log (stdout and stderr, each line with Docker's
    /// timestamp); empty when the container is gone.
    pub async fn logs(&self, container: &str) -> Result<Vec<u8>> {
        let opts = bollard::query_parameters::LogsOptionsBuilder::new()
            .stdout(true)
            .stderr(true)
            .timestamps(true)
            .build();
        let mut out = Vec::new();
        let mut stream = self.api.logs(container, Some(opts));
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(c) => out.extend_from_slice(&c.into_bytes()),
                Err(e) if is_not_found(&e) => break,
                Err(e) => return Err(e).with_context(|| format!("logs of {container}")),
            }
        }
        Ok(out)
    }

    /// Sends `signal` (e.g. `SIGUSR2`) to a container's main process.
    pub async fn signal(&self, container: &str, signal: &str) -> Result<()> {
        let opts = bollard::query_parameters::KillContainerOptionsBuilder::default()
            .signal(signal)
            .build();
        self.api
            .kill_container(container, Some(opts))
            .await
            .with_context(|| format!("send {signal} to {container}"))
    }

    /// Runs `cmd` in a running container and waits for it.
    pub async fn exec(
        &self,
        container: &str,
        cmd: &[&str],
        privileged: bool,
    ) -> Result<ExecOutput> {
        let exec = self
            .api
            .create_exec(
                container,
                CreateExecOptions {
                    cmd: Some(cmd.iter().map(|s| s.to_string()).collect()),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    privileged: Some(privileged),
                    ..Default::default()
                },
            )
            .await
            .with_context(|| format!("exec in {container}: {}", cmd.join(" ")))?;
        let mut stdout = String::new();
        let mut stderr = String::new();
        if let StartExecResults::Attached { mut output, .. } = self
            .api
            .start_exec(&exec.id, None::<StartExecOptions>)
            .await
            .with_context(|| format!("start exec in {container}"))?
        {
            while let Some(chunk) = output.next().await {
                match chunk.with_context(|| format!("read exec output in {container}"))? {
                    bollard::container::LogOutput::StdErr { message } => {
                        stderr.push_str(&String::from_utf8_lossy(&message))
                    }
                    other => stdout.push_str(&String::from_utf8_lossy(&other.into_bytes())),
                }
            }
        }
        let code = self
            .api
            .inspect_exec(&exec.id)
            .await
            .context("inspect exec")?
            .exit_code
            .unwrap_or(-1);
        Ok(ExecOutput {
            code,
            stdout,
            stderr,
        })
    }

    /// Like `exec`, but a non-zero exit is an error carrying its output.
    pub async fn exec_ok(&self, container: &str, cmd: &[&str], privileged: bool) -> Result<String> {
        self.exec(container, cmd, privileged)
            .await?
            .stdout_if_ok(container, cmd)
    }

    pub async fn containers(&self, lab: Option<&str>) -> Result<Vec<ContainerSummary>> {
        let opts = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&lab_filter(lab))
            .build();
        self.api
            .list_containers(Some(opts))
            .await
            .context("list containers")
    }

    /// Raw listings of everything labelled for `lab` (any lab when `None`).
    async fn labelled(
        &self,
        lab: Option<&str>,
    ) -> Result<(
        Vec<ContainerSummary>,
        Vec<bollard::models::Network>,
        Vec<bollard::models::Volume>,
    )> {
        let containers = self.containers(lab).await?;
        let networks = self
            .api
            .list_networks(Some(
                ListNetworksOptionsBuilder::default()
                    .filters(&lab_filter(lab))
                    .build(),
            ))
            .await
            .context("list networks")?;
        let volumes = self
            .api
            .list_volumes(Some(
                ListVolumesOptionsBuilder::default()
                    .filters(&lab_filter(lab))
                    .build(),
            ))
            .await
            .context("list volumes")?
            .volumes
            .unwrap_or_default();
        Ok((containers, networks, volumes))
    }

    /// Everything labelled for `lab` (or for any lab when `None`).
    pub async fn lab_objects(&self, lab: Option<&str>) -> Result<LabObjects> {
        let (containers, networks, volumes) = self.labelled(lab).await?;
        Ok(LabObjects {
            containers: containers
                .into_iter()
                .filter_map(|c| c.names.and_then(|n| n.first().cloned()))
                .map(|n| n.trim_start_matches('/').to_string())
                .collect(),
            networks: networks.into_iter().filter_map(|n| n.name).collect(),
            volumes: volumes.into_iter().map(|v| v.name).collect(),
        })
    }

    /// Whether a network of that name exists, labelled or not (dockerd
    /// 20.10 can keep a removed lab's network half there, and a `create`
    /// of the same name would then meet it).
    pub async fn network_exists(&self, name: &str) -> Result<bool> {
        match self
            .api
            .inspect_network(
                name,
                None::<bollard::query_parameters::InspectNetworkOptions>,
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(e).with_context(|| format!("inspect network {name}")),
        }
    }

    /// Lab names that own at least one labelled object.
    pub async fn lab_names(&self) -> Result<Vec<String>> {
        let (containers, networks, volumes) = self.labelled(None).await?;
        let mut names: Vec<String> = containers
            .into_iter()
            .filter_map(|c| c.labels.and_then(|l| l.get(LABEL_LAB).cloned()))
            .chain(
                networks
                    .into_iter()
                    .filter_map(|n| n.labels.and_then(|l| l.get(LABEL_LAB).cloned())),
            )
            .chain(
                volumes
                    .into_iter()
                    .filter_map(|v| v.labels.get(LABEL_LAB).cloned()),
            )
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Removes a container, disconnecting it from its networks first:
    /// dockerd can keep the endpoint of a container removed while still
    /// connected (the network then cannot be removed, and `down` no longer
    /// knows the container's name to disconnect it by force).
    pub async fn remove_container(&self, name: &str) -> Result<()> {
        if let Ok(c) = self
            .api
            .inspect_container(
                name,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
        {
            let networks = c
                .network_settings
                .and_then(|n| n.networks)
                .unwrap_or_default();
            for network in networks.keys() {
                let _ = self
                    .api
                    .disconnect_network(
                        network,
                        bollard::models::NetworkDisconnectRequest {
                            container: name.to_string(),
                            force: Some(true),
                        },
                    )
                    .await;
            }
        }
        let opts = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        match self.api.remove_container(name, Some(opts)).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            // "removal already in progress": another `down` got there first.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("remove container {name}")),
        }
    }

    /// Removes a network. Docker can keep the endpoint of a container that is
    /// already gone ("has active endpoints", sometimes with an empty
    /// container list); such endpoints are disconnected by force, by the
    /// names inspect shows and by `gone` (containers just removed), which is
    /// Docker's own remedy, and the removal is tried again.
    pub async fn remove_network(&self, name: &str) -> Result<()> {
        self.remove_network_after(name, &[]).await
    }

    /// Removes a network. Docker can keep a removed container's endpoint
    /// for a moment ("has active endpoints"): each endpoint it still lists,
    /// and each container in `gone`, is disconnected by force and the
    /// removal retried, for up to 3 s (`down` sweeps again); an endpoint
    /// Docker keeps with no container is an environment problem.
    pub async fn remove_network_after(&self, name: &str, gone: &[String]) -> Result<()> {
        let t0 = std::time::Instant::now();
        loop {
            match self.api.remove_network(name).await {
                Ok(()) => return Ok(()),
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(e)
                    if e.to_string().contains("active endpoints")
                        && t0.elapsed() < std::time::Duration::from_secs(3) =>
                {
                    let net = self
                        .api
                        .inspect_network(
                            name,
                            None::<bollard::query_parameters::InspectNetworkOptions>,
                        )
                        .await
                        .with_context(|| format!("inspect network {name}"))?;
                    let mut names: Vec<String> = net
                        .containers
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(id, ep)| ep.name.unwrap_or(id))
                        .collect();
                    names.extend(gone.iter().cloned());
                    for container in names {
                        let _ = self
                            .api
                            .disconnect_network(
                                name,
                                bollard::models::NetworkDisconnectRequest {
                                    container,
                                    force: Some(true),
                                },
                            )
                            .await;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
                Err(e) if e.to_string().contains("active endpoints") => {
                    return Err(crate::errors::EnvNotReady::new(
                        format!(
                            "Docker keeps a stale endpoint in network {name} although no container \
                             uses it any more (a dockerd bug after a container is removed quickly)"
                        ),
                        "restart dockerd, which drops stale endpoints (`systemctl restart docker`, \
                         or `pkill dockerd` then `scripts/setup`), then run `cpmlab down` again"
                            .to_string(),
                    )
                    .into())
                }
                Err(e) => return Err(e).with_context(|| format!("remove network {name}")),
            }
        }
    }

    pub async fn remove_volume(&self, name: &str) -> Result<()> {
        let opts = RemoveVolumeOptionsBuilder::default().force(true).build();
        match self.api.remove_volume(name, Some(opts)).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("remove volume {name}")),
        }
    }

    /// A running container's Docker networks and its lab labels; an error
    /// when it is not running.
    pub async fn running_container(&self, name: &str) -> Result<RunningContainer> {
        let c = self
            .api
            .inspect_container(
                name,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
            .with_context(|| format!("inspect container {name}"))?;
        anyhow::ensure!(
            c.state.as_ref().and_then(|s| s.running) == Some(true),
            "container {name} is not running (see `docker logs {name}`)"
        );
        let labels = c.config.and_then(|c| c.labels).unwrap_or_default();
        Ok(RunningContainer {
            networks: c
                .network_settings
                .and_then(|n| n.networks)
                .map(|n| n.into_keys().collect())
                .unwrap_or_default(),
            role: labels.get(super::LABEL_ROLE).cloned().unwrap_or_default(),
            seed: labels.get(super::LABEL_SEED).cloned(),
        })
    }

    /// `running`, `exited`, `paused`, ... or `missing`.
    pub async fn container_state(&self, name: &str) -> Result<String> {
        match self
            .api
            .inspect_container(
                name,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
        {
            Ok(c) => Ok(c
                .state
                .and_then(|s| s.status)
                .map(|s| s.to_string())
                .unwrap_or_else(|| "unknown".into())),
            Err(e) if is_not_found(&e) => Ok("missing".into()),
            Err(e) => Err(e).with_context(|| format!("inspect container {name}")),
        }
    }

    /// Whether a container runs (paused counts: its process exists) and
    /// when it last started (ms since the epoch); a missing one does not run.
    pub async fn run_state(&self, name: &str) -> Result<(bool, Option<f64>)> {
        match self
            .api
            .inspect_container(
                name,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
        {
            Ok(c) => {
                let st = c.state.unwrap_or_default();
                let running = st.running.unwrap_or(false);
                let started = st
                    .started_at
                    .as_deref()
                    .and_then(|t| {
                        time::OffsetDateTime::parse(
                            t,
                            &time::format_description::well_known::Rfc3339,
                        )
                        .ok()
                    })
                    .map(|t| t.unix_timestamp_nanos() as f64 / 1e6);
                Ok((running, started))
            }
            Err(e) if is_not_found(&e) => Ok((false, None)),
            Err(e) => Err(e).with_context(|| format!("inspect container {name}")),
        }
    }
}

/// What `Engine::running_container` tells.
#[derive(Debug, Clone)]
pub struct RunningContainer {
    /// Docker network names.
    pub networks: Vec<String>,
    pub role: String,
    pub seed: Option<String>,
}

/// Where bollard looks for the engine, for messages.
pub fn docker_host() -> String {
    std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into())
}
