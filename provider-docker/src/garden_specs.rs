//! The garden's containers, in both forms (the kind form's garden is the
//! docker form's, on the garden network beside its seeds' clusters): its
//! etcd, its kube-apiserver (the aggregator gardener-apiserver is
//! registered with) and gardener-apiserver; and, in the docker form, each
//! seed's gardenlet (a container on the seed's network that acts on its
//! seed through the engine's socket and reaches the garden through the wan
//! router, as a gardenlet reaches its garden over the internet).
//!
//! gardener-apiserver's arguments follow gardener's envtest
//! (`test/envtest/apiserver.go`: its etcd, TLS, `--cluster-identity`,
//! delegated authentication and authorization and its informers against
//! the garden's kube-apiserver), with the `LiveControlPlaneMigration`
//! feature gate on (`pkg/features/features.go`, alpha, off by default).
//! The kube-apiserver's aggregation flags are envtest's
//! (`test/envtest/aggregator.go`).

use std::path::Path;

use anyhow::Result;

use super::container::{base_spec, behind_barrier, docker_network};
use super::engine::{ContainerSpec, FileSpec};
use crate::pki::Ca;
use crate::state::{LabState, SeedState};
use cpmlab_garden::access::{self, GardenKeys, FRONT_PROXY_CLIENT, GARDEN_PORT};
use cpmlab_garden::objects::GARDENER_APISERVER_PORT;

pub use crate::images::GARDENER_APISERVER_BIN;
/// Where the garden's containers find their keys.
const DIR: &str = "/etc/cpmlab/garden";
/// The garden's etcd client port (plain HTTP on the garden network: the
/// garden's own etcd, not the shoot's).
const ETCD_PORT: u16 = 2379;
/// The feature gate Live CPM is behind in gardener-apiserver.
pub const FEATURE_GATES: &str = "LiveControlPlaneMigration=true";

/// The role label of each garden container (`garden-<part>`).
pub const ROLE_ETCD: &str = "garden-etcd";
pub const ROLE_KUBE_APISERVER: &str = "garden-kube-apiserver";
pub const ROLE_GARDENER_APISERVER: &str = "gardener-apiserver";
pub const ROLE_GARDENLET: &str = "gardenlet";

fn garden(state: &LabState) -> &crate::state::GardenState {
    state.garden.as_ref().expect("a lab with a garden")
}

/// A kubeconfig file for a container of the garden: the garden's
/// kube-apiserver at its address, a client certificate in `DIR`.
fn local_kubeconfig(state: &LabState, cert: &str, key: &str) -> String {
    let g = garden(state);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: garden\n  cluster:\n    server: https://{}:{GARDEN_PORT}\n    tls-server-name: {}\n    certificate-authority: {DIR}/ca.crt\n\
users:\n- name: garden\n  user:\n    client-certificate: {DIR}/{cert}\n    client-key: {DIR}/{key}\n\
contexts:\n- name: garden\n  context:\n    cluster: garden\n    user: garden\ncurrent-context: garden\n",
        g.kube_apiserver.ip,
        cpmlab_garden::client::GARDEN_SNI,
    )
}

/// The garden's three containers.
pub fn garden_specs(
    state: &LabState,
    ca: &Ca,
    front_proxy_ca_pem: &str,
    keys: &GardenKeys,
) -> Vec<ContainerSpec> {
    let g = garden(state);
    let net = docker_network(state, crate::topology::GARDEN);
    let etcd_url = format!("http://{}:{ETCD_PORT}", g.etcd.ip);
    let ca_file = FileSpec::new(format!("{DIR}/ca.crt"), ca.cert_pem.clone(), 0o644);

    let mut etcd = base_spec(state, &g.etcd.container, ROLE_ETCD, None);
    etcd.networks = vec![(net.clone(), g.etcd.ip)];
    etcd.cmd = behind_barrier(
        state,
        vec![
            crate::images::ETCD_34_IN_IMAGE.into(),
            "--name=garden".into(),
            "--data-dir=/var/lib/garden-etcd".into(),
            format!("--listen-client-urls=http://0.0.0.0:{ETCD_PORT}"),
            format!("--advertise-client-urls={etcd_url}"),
            "--listen-peer-urls=http://127.0.0.1:2380".into(),
            "--initial-advertise-peer-urls=http://127.0.0.1:2380".into(),
            "--initial-cluster=garden=http://127.0.0.1:2380".into(),
        ],
    );

    let mut kapi = base_spec(
        state,
        &g.kube_apiserver.container,
        ROLE_KUBE_APISERVER,
        None,
    );
    kapi.networks = vec![(net.clone(), g.kube_apiserver.ip)];
    kapi.files = vec![
        ca_file.clone(),
        FileSpec::new(
            format!("{DIR}/server.crt"),
            keys.kube_apiserver.cert_pem.clone(),
            0o644,
        ),
        FileSpec::new(
            format!("{DIR}/server.key"),
            keys.kube_apiserver.key_pem.clone(),
            0o600,
        ),
        FileSpec::new(
            format!("{DIR}/front-proxy-ca.crt"),
            front_proxy_ca_pem.to_string(),
            0o644,
        ),
        FileSpec::new(
            format!("{DIR}/proxy.crt"),
            keys.front_proxy_client.cert_pem.clone(),
            0o644,
        ),
        FileSpec::new(
            format!("{DIR}/proxy.key"),
            keys.front_proxy_client.key_pem.clone(),
            0o600,
        ),
        FileSpec::new(format!("{DIR}/sa.key"), keys.sa.0.clone(), 0o600),
        FileSpec::new(format!("{DIR}/sa.pub"), keys.sa.1.clone(), 0o644),
    ];
    kapi.cmd = behind_barrier(
        state,
        vec![
            crate::apiserver::launch::KUBE_APISERVER_BIN.into(),
            format!("--etcd-servers={etcd_url}"),
            format!("--secure-port={GARDEN_PORT}"),
            "--bind-address=0.0.0.0".into(),
            format!("--advertise-address={}", g.kube_apiserver.ip),
            format!("--tls-cert-file={DIR}/server.crt"),
            format!("--tls-private-key-file={DIR}/server.key"),
            format!("--client-ca-file={DIR}/ca.crt"),
            "--anonymous-auth=false".into(),
            "--authorization-mode=RBAC".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            format!(
                "--service-account-issuer=https://{}",
                cpmlab_garden::client::GARDEN_SNI
            ),
            format!("--service-account-key-file={DIR}/sa.pub"),
            format!("--service-account-signing-key-file={DIR}/sa.key"),
            format!("--requestheader-client-ca-file={DIR}/front-proxy-ca.crt"),
            format!("--requestheader-allowed-names={FRONT_PROXY_CLIENT}"),
            "--requestheader-username-headers=X-Remote-User".into(),
            "--requestheader-group-headers=X-Remote-Group".into(),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
            format!("--proxy-client-cert-file={DIR}/proxy.crt"),
            format!("--proxy-client-key-file={DIR}/proxy.key"),
            "--profiling=false".into(),
        ],
    );

    let mut gapi = base_spec(
        state,
        &g.gardener_apiserver.container,
        ROLE_GARDENER_APISERVER,
        None,
    );
    gapi.networks = vec![(net, g.gardener_apiserver.ip)];
    gapi.files = vec![
        ca_file,
        FileSpec::new(
            format!("{DIR}/server.crt"),
            keys.gardener_apiserver.cert_pem.clone(),
            0o644,
        ),
        FileSpec::new(
            format!("{DIR}/server.key"),
            keys.gardener_apiserver.key_pem.clone(),
            0o600,
        ),
        FileSpec::new(
            format!("{DIR}/client.crt"),
            keys.gardener_apiserver_client.cert_pem.clone(),
            0o644,
        ),
        FileSpec::new(
            format!("{DIR}/client.key"),
            keys.gardener_apiserver_client.key_pem.clone(),
            0o600,
        ),
        FileSpec::new(
            format!("{DIR}/kubeconfig"),
            local_kubeconfig(state, "client.crt", "client.key"),
            0o600,
        ),
    ];
    gapi.cmd = behind_barrier(
        state,
        vec![
            GARDENER_APISERVER_BIN.into(),
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=0.0.0.0".into(),
            format!("--secure-port={GARDENER_APISERVER_PORT}"),
            format!("--tls-cert-file={DIR}/server.crt"),
            format!("--tls-private-key-file={DIR}/server.key"),
            format!("--cluster-identity=cpmlab-{}", state.name),
            "--authorization-always-allow-paths=/healthz,/readyz,/livez".into(),
            format!("--authentication-kubeconfig={DIR}/kubeconfig"),
            format!("--authorization-kubeconfig={DIR}/kubeconfig"),
            format!("--kubeconfig={DIR}/kubeconfig"),
            format!("--feature-gates={FEATURE_GATES}"),
        ],
    );
    vec![etcd, kapi, gapi]
}

/// What a gardenlet logs (its steps, its waits, the garden's answers).
/// The gardenlets' `RUST_LOG`.
pub const GARDENLET_LOG: &str =
    "info,rustls=warn,hyper=warn,hyper_util=warn,bollard=warn,h2=warn,tower=warn,etcd_client=warn";

/// The garden's containers released with the lab's own (etcd, its
/// kube-apiserver); gardener-apiserver waits for that kube-apiserver
/// (it reads its authentication configuration from it at start).
pub fn garden_first(state: &LabState) -> Vec<String> {
    state
        .garden
        .iter()
        .flat_map(|g| [g.etcd.container.clone(), g.kube_apiserver.container.clone()])
        .collect()
}

/// gardener-apiserver's container.
pub fn gardener_apiserver(state: &LabState) -> Vec<String> {
    state
        .garden
        .iter()
        .map(|g| g.gardener_apiserver.container.clone())
        .collect()
}

/// Where a gardenlet container finds the engine: the engine's own socket,
/// as the engine sees it (`CPMLAB_ENGINE_SOCKET`, else Docker's default).
pub fn engine_socket() -> String {
    std::env::var("CPMLAB_ENGINE_SOCKET").unwrap_or_else(|_| "/var/run/docker.sock".into())
}

/// A seed's gardenlet: on the seed's network, the engine's socket and the
/// lab's state directory (at the same path, as every run directory is
/// under it) mounted, `cpmlab agent gardenlet`. (The kind form's is a
/// Deployment in its seed: provider-kind's `gardenlet.rs`.)
pub fn gardenlet_spec(
    state: &LabState,
    seed: &SeedState,
    state_root: &Path,
) -> Option<ContainerSpec> {
    let gl = seed.gardenlet.as_ref()?;
    let mut c = base_spec(state, &gl.container, ROLE_GARDENLET, Some(&seed.name));
    c.networks = vec![(docker_network(state, &seed.network), gl.ip)];
    let root = state_root.display().to_string();
    c.volumes = vec![
        (engine_socket(), "/var/run/docker.sock".into()),
        (root.clone(), root.clone()),
    ];
    let env = vec!["env".to_string(), format!("RUST_LOG={GARDENLET_LOG}")];
    let mut cmd = env;
    cmd.extend([
        cpmlab_provider::AGENT_BIN.to_string(),
        "agent".into(),
        "gardenlet".into(),
        "--name".into(),
        state.name.clone(),
        "--seed".into(),
        seed.name.clone(),
        "--state-dir".into(),
        root,
    ]);
    c.cmd = behind_barrier(state, cmd);
    Some(c)
}

/// The containers of the garden and the gardenlets, by name: the garden's
/// first (they are released together, the gardenlets after the garden's
/// objects are in place).
pub fn garden_containers(state: &LabState) -> Vec<String> {
    state
        .garden
        .iter()
        .flat_map(|g| {
            [
                g.etcd.container.clone(),
                g.kube_apiserver.container.clone(),
                g.gardener_apiserver.container.clone(),
            ]
        })
        .collect()
}

/// The gardenlets' containers.
pub fn gardenlet_containers(state: &LabState) -> Vec<String> {
    state
        .seeds
        .iter()
        .filter_map(|s| s.gardenlet.as_ref().map(|g| g.container.clone()))
        .collect()
}

/// The garden's objects' inputs from the lab: its CA, the shoot's
/// Kubernetes version (the lab image's kube-apiserver's), the distance
/// between the seeds' regions.
pub fn garden_inputs(state: &LabState, ca: &Ca) -> cpmlab_garden::objects::Inputs {
    cpmlab_garden::objects::Inputs {
        ca_pem: ca.cert_pem.clone(),
        kubernetes_version: crate::go_parts::KUBE_APISERVER
            .manifest()
            .map(|m| m.version.trim_start_matches('v').to_string())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| DEFAULT_SHOOT_KUBERNETES.into()),
        distance: state.topology.garden.distance.unwrap_or(0),
    }
}

/// The shoot's Kubernetes version where the lab image's kube-apiserver
/// does not say (the version go/go.mod pins).
pub const DEFAULT_SHOOT_KUBERNETES: &str = "1.36.3";

/// The garden's client for the operator (`cpmlab` on the host).
pub fn operator(
    dir: &crate::state::LabDir,
    state: &LabState,
) -> Result<cpmlab_garden::client::Garden> {
    Ok(access::client(dir, state, &access::Identity::Operator)?)
}
