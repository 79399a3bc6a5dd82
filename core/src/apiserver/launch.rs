//! How an API server replica is started: the real kube-apiserver where a
//! binary can be had (`scripts/build-go` builds it from k8s.io/kubernetes),
//! else the generic server built on k8s.io/apiserver (also
//! `scripts/build-go`), else the Rust stand-in. All get the same files (server certificate for the API name, the lab
//! CA, etcd client certificate, the token) and talk only to their own
//! seed's etcd members.

use std::path::PathBuf;

pub use crate::state::{ApiServerKind, GENERIC_APISERVER_BIN, KUBE_APISERVER_BIN};

/// The files of a replica.
pub const DIR: &str = "/etc/cpmlab/api";
/// The front-proxy CA's certificate in `DIR`.
pub const FRONT_PROXY_CA: &str = "front-proxy-ca.crt";

/// kube-apiserver on this host: `$CPMLAB_KUBE_APISERVER`, else
/// `$KUBEBUILDER_ASSETS` or PATH, else where `scripts/build-go` installs it.
pub fn find_kube_apiserver() -> Option<PathBuf> {
    crate::go_parts::KUBE_APISERVER
        .find()
        .map(|f| f.path().clone())
}

/// cpmlab-apiserver on this host: `$CPMLAB_APISERVER`, else on PATH, else
/// where `scripts/build-go` installs it (`${XDG_CACHE_HOME:-~/.cache}/cpmlab/bin`).
pub fn find_generic_apiserver() -> Option<PathBuf> {
    crate::go_parts::GENERIC_APISERVER
        .find()
        .map(|f| f.path().clone())
}

pub struct Replica<'a> {
    pub name: &'a str,
    pub seed: &'a str,
    pub ip: std::net::Ipv4Addr,
    pub api_name: &'a str,
    /// Its own seed's etcd client URLs.
    pub etcd_servers: &'a [String],
    pub shutdown_delay: &'a str,
    pub watch_termination_grace: &'a str,
    /// --shutdown-send-retry-after (see the topology's `api`).
    pub send_retry_after: bool,
}

/// The stand-in's command line (`cpmlab agent apiserver`).
pub fn standin_command(agent_bin: &str, r: &Replica) -> Vec<String> {
    vec![
        agent_bin.into(),
        "agent".into(),
        "apiserver".into(),
        "--listen=0.0.0.0:443".into(),
        format!("--cert={DIR}/server.crt"),
        format!("--key={DIR}/server.key"),
        format!("--token-file={DIR}/token"),
        format!("--etcd-servers={}", r.etcd_servers.join(",")),
        format!("--etcd-ca={DIR}/ca.crt"),
        format!("--etcd-cert={DIR}/server.crt"),
        format!("--etcd-key={DIR}/server.key"),
        format!("--shutdown-delay={}", r.shutdown_delay),
        format!("--seed={}", r.seed),
        format!("--name={}", r.name),
        format!("--advertise={}:443", r.api_name),
    ]
}

/// The flags kube-apiserver and the generic server share, for what the lab
/// uses: serving on 443 with the API name's certificate, etcd over TLS,
/// the static token and client certificates of the lab CA, and the
/// shutdown (delay, watch termination, and whether 429 Retry-After answers
/// precede the GOAWAY).
fn kube_flags(bin: &str, r: &Replica) -> Vec<String> {
    vec![
        bin.into(),
        "--secure-port=443".into(),
        "--bind-address=0.0.0.0".into(),
        format!("--advertise-address={}", r.ip),
        format!("--etcd-servers={}", r.etcd_servers.join(",")),
        format!("--etcd-cafile={DIR}/ca.crt"),
        format!("--etcd-certfile={DIR}/server.crt"),
        format!("--etcd-keyfile={DIR}/server.key"),
        format!("--tls-cert-file={DIR}/server.crt"),
        format!("--tls-private-key-file={DIR}/server.key"),
        format!("--client-ca-file={DIR}/ca.crt"),
        format!("--token-auth-file={DIR}/tokens.csv"),
        // The gateway that ends TLS is an authenticating proxy: requests on
        // its front-proxy certificate carry the user in headers, as
        // Gardener configures kube-apiserver
        // (pkg/component/kubernetes/apiserver/deployment.go).
        format!("--requestheader-client-ca-file={DIR}/{FRONT_PROXY_CA}"),
        format!(
            "--requestheader-username-headers={}",
            crate::exposure::REQUEST_HEADER_USER
        ),
        format!(
            "--requestheader-group-headers={}",
            crate::exposure::REQUEST_HEADER_GROUP
        ),
        format!(
            "--requestheader-extra-headers-prefix={}",
            crate::exposure::REQUEST_HEADER_EXTRA_PREFIX
        ),
        format!("--shutdown-delay-duration={}", r.shutdown_delay),
        format!(
            "--shutdown-watch-termination-grace-period={}",
            r.watch_termination_grace
        ),
        format!("--shutdown-send-retry-after={}", r.send_retry_after),
    ]
}

/// kube-apiserver's command line, as Gardener runs it where it matters to
/// the lab (see [`kube_flags`]), plus Gardener's flags of its own:
/// `pkg/component/apiserver/deployment.go` (shared by Gardener's API
/// servers: `--http2-max-streams-per-connection=1000`,
/// `--livez-grace-period=1m`, `--profiling=false`) and
/// `pkg/component/kubernetes/apiserver/` (deployment.go: audiences,
/// bootstrap tokens, `--allow-privileged`; authentication.go:
/// `--anonymous-auth=false`; authorization.go: Node and RBAC;
/// `pkg/component/shared/kubeapiserver.go`: NodeRestriction on top of
/// Kubernetes' default admission plugins). API Priority and Fairness stays
/// on, as Kubernetes and Gardener leave it. The probes' token is in
/// system:masters, so RBAC allows it everything.
pub fn kube_apiserver_command(r: &Replica) -> Vec<String> {
    let mut c = kube_flags(KUBE_APISERVER_BIN, r);
    c.extend([
        "--anonymous-auth=false".into(),
        "--authorization-mode=Node,RBAC".into(),
        "--enable-admission-plugins=NodeRestriction".into(),
        "--enable-bootstrap-token-auth=true".into(),
        "--allow-privileged=true".into(),
        "--api-audiences=kubernetes,gardener".into(),
        "--http2-max-streams-per-connection=1000".into(),
        "--livez-grace-period=1m".into(),
        "--profiling=false".into(),
        format!("--external-hostname={}", r.api_name),
        format!("--service-account-issuer=https://{}", r.api_name),
        format!("--service-account-key-file={DIR}/sa.pub"),
        format!("--service-account-signing-key-file={DIR}/sa.key"),
        // One shoot, one service range in every seed (the shoot's
        // spec.networking.services).
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--storage-backend=etcd3".into(),
    ]);
    c.extend(extra_args());
    c
}

/// cpmlab-apiserver's command line: kube-apiserver's flags (see
/// [`kube_flags`]), protobuf storage as kube-apiserver's default, and the
/// replica's seed and name, which it answers in headers as the stand-in
/// does.
pub fn generic_command(r: &Replica) -> Vec<String> {
    let mut c = kube_flags(GENERIC_APISERVER_BIN, r);
    c.extend([
        "--storage-media-type=application/vnd.kubernetes.protobuf".into(),
        format!("--cpmlab-seed={}", r.seed),
        format!("--cpmlab-name={}", r.name),
    ]);
    c.extend(extra_args());
    c
}

/// `CPMLAB_APISERVER_EXTRA_ARGS`: flags appended to the generic server's and
/// kube-apiserver's command lines where `cpmlab` starts a replica (later
/// flags win), e.g. `-v=4` to see the etcd client and the watch cache.
fn extra_args() -> Vec<String> {
    std::env::var("CPMLAB_APISERVER_EXTRA_ARGS")
        .map(|v| v.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

/// `--token-auth-file` contents: the probe user, in system:masters.
pub fn tokens_csv(token: &str) -> String {
    format!("{token},cpmlab-probe,cpmlab-probe,\"system:masters\"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(servers: &[String]) -> Replica<'_> {
        Replica {
            name: "seed-a-apiserver-0",
            seed: "seed-a",
            ip: "10.213.0.20".parse().unwrap(),
            api_name: "api.local.cpmlab.test",
            etcd_servers: servers,
            shutdown_delay: "15s",
            watch_termination_grace: "3s",
            send_retry_after: false,
        }
    }

    #[test]
    fn kube_apiserver_talks_tls_to_its_own_etcd_and_serves_the_api_name() {
        let servers = vec![
            "https://10.213.0.10:2379".to_string(),
            "https://10.213.0.11:2379".to_string(),
        ];
        let cmd = kube_apiserver_command(&replica(&servers));
        let has = |f: &str| cmd.iter().any(|a| a == f);
        assert_eq!(cmd[0], KUBE_APISERVER_BIN);
        assert!(has(
            "--etcd-servers=https://10.213.0.10:2379,https://10.213.0.11:2379"
        ));
        assert!(has("--etcd-certfile=/etc/cpmlab/api/server.crt"));
        assert!(has("--secure-port=443"));
        assert!(has("--shutdown-delay-duration=15s"));
        assert!(has("--token-auth-file=/etc/cpmlab/api/tokens.csv"));
        assert!(has(
            "--service-account-signing-key-file=/etc/cpmlab/api/sa.key"
        ));
        assert!(has("--advertise-address=10.213.0.20"));
        // Gardener's: no anonymous requests (its probes carry a token),
        // Node and RBAC, the API servers' shared flags.
        assert!(has("--anonymous-auth=false"));
        assert!(has("--authorization-mode=Node,RBAC"));
        assert!(has("--http2-max-streams-per-connection=1000"));
        assert!(has("--livez-grace-period=1m"));
        assert!(!cmd
            .iter()
            .any(|a| a.starts_with("--enable-priority-and-fairness")));
        assert!(has(
            "--requestheader-client-ca-file=/etc/cpmlab/api/front-proxy-ca.crt"
        ));
        assert!(has("--requestheader-username-headers=X-Remote-User"));
        assert!(has("--requestheader-group-headers=X-Remote-Group"));
        assert_eq!(
            tokens_csv("t"),
            "t,cpmlab-probe,cpmlab-probe,\"system:masters\"\n"
        );
    }

    #[test]
    fn the_generic_server_gets_kube_apiservers_flags_and_names_itself() {
        let servers = vec!["https://10.213.0.10:2379".to_string()];
        let cmd = generic_command(&replica(&servers));
        let has = |f: &str| cmd.iter().any(|a| a == f);
        assert_eq!(cmd[0], GENERIC_APISERVER_BIN);
        assert_eq!(
            ApiServerKind::Generic.image_bin(),
            Some(GENERIC_APISERVER_BIN)
        );
        assert!(has("--etcd-servers=https://10.213.0.10:2379"));
        assert!(has("--etcd-keyfile=/etc/cpmlab/api/server.key"));
        assert!(has("--token-auth-file=/etc/cpmlab/api/tokens.csv"));
        assert!(has("--shutdown-delay-duration=15s"));
        assert!(has("--requestheader-username-headers=X-Remote-User"));
        assert!(has(
            "--storage-media-type=application/vnd.kubernetes.protobuf"
        ));
        assert!(has("--shutdown-watch-termination-grace-period=3s"));
        // Gardener's (and Kubernetes') default: GOAWAY, no 429 first.
        assert!(has("--shutdown-send-retry-after=false"));
        let mut r = replica(&servers);
        r.send_retry_after = true;
        assert!(generic_command(&r).contains(&"--shutdown-send-retry-after=true".to_string()));
        assert!(has("--cpmlab-seed=seed-a"));
        assert!(has("--cpmlab-name=seed-a-apiserver-0"));
    }

    #[test]
    fn standin_gets_the_same_inputs() {
        let servers = vec!["https://10.213.0.10:2379".to_string()];
        let cmd = standin_command("/usr/local/bin/cpmlab", &replica(&servers));
        assert_eq!(&cmd[1..3], ["agent", "apiserver"]);
        assert!(cmd.contains(&"--etcd-servers=https://10.213.0.10:2379".to_string()));
        assert!(cmd.contains(&"--shutdown-delay=15s".to_string()));
    }

    #[test]
    fn kube_apiserver_is_found_through_kubebuilder_assets() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("kube-apiserver"), "").unwrap();
        // SAFETY of env mutation: this test alone reads KUBEBUILDER_ASSETS.
        unsafe { std::env::set_var("KUBEBUILDER_ASSETS", d.path()) };
        assert_eq!(find_kube_apiserver(), Some(d.path().join("kube-apiserver")));
        unsafe { std::env::remove_var("KUBEBUILDER_ASSETS") };
    }
}
