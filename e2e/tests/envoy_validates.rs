//! `envoy --mode validate` on every configuration the docker form renders:
//! the bootstrap with its files, and each exposure (both API modes; a
//! lab's seeds before, during and after a migration; a peer port per
//! member) as one static configuration with every listener, cluster, route
//! and endpoint inline. Needs Envoy (scripts/fetch-envoy): compiled as
//! ignored where e2e/build.rs did not find it, except with CI=true.
use std::collections::BTreeMap;
use std::net::SocketAddrV4;

use serde_json::Value;

use cpmlab_exposure::envoy::{bootstrap, render, static_bootstrap, tls, TLS_DIR, XDS_DIR};
use cpmlab_exposure::{ApiExposure, Exposure};

mod validate {
    use super::*;
    use std::path::Path;

    fn envoy() -> Option<std::path::PathBuf> {
        cpmlab_testenv::require("envoy_validates", cpmlab_testenv::Need::Envoy);
        cpmlab_core::go_parts::ENVOY
            .find()
            .map(|f| f.path().clone())
    }

    /// The certificates the configuration names, in `dir`.
    fn certs(dir: &Path) {
        let ca = cpmlab_core::pki::Ca::generate("t").unwrap();
        let server = ca
            .issue_member("g", &["api.local.cpmlab.test".into()], &[])
            .unwrap();
        let proxy = ca.issue_client(cpmlab_exposure::GATEWAY_CLIENT_CN).unwrap();
        for (f, c) in [
            (tls::SERVER_CERT, &server.cert_pem),
            (tls::SERVER_KEY, &server.key_pem),
            (tls::CLIENT_CA, &ca.cert_pem),
            (tls::UPSTREAM_CA, &ca.cert_pem),
            (tls::PROXY_CERT, &proxy.cert_pem),
            (tls::PROXY_KEY, &proxy.key_pem),
        ] {
            std::fs::write(dir.join(f), c).unwrap();
        }
    }

    /// The configuration with its paths moved under `dir`.
    fn relocate(v: &Value, dir: &Path) -> String {
        serde_json::to_string_pretty(v)
            .unwrap()
            .replace(TLS_DIR, &dir.join("tls").display().to_string())
            .replace(XDS_DIR, &dir.join("xds").display().to_string())
    }

    fn check(envoy: &Path, dir: &Path, name: &str, config: &str) {
        let file = dir.join(format!("{name}.json"));
        std::fs::write(&file, config).unwrap();
        let out = std::process::Command::new(envoy)
            .args(["--mode", "validate", "-c"])
            .arg(&file)
            .args(["--log-level", "error"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "envoy rejects {name}: {}{}\n{config}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Exposures of a lab through a migration, in both modes and both peer
    /// exposures.
    fn exposures() -> Vec<(String, Exposure)> {
        let mut v = vec![];
        for mode in [ApiExposure::Termination, ApiExposure::Passthrough] {
            for peer in [
                cpmlab_model::topology::PeerExposure::Address,
                cpmlab_model::topology::PeerExposure::Port,
            ] {
                let mut topo = cpmlab_model::topology::Topology::default();
                topo.api.exposure = mode;
                topo.network.peer_exposure = Some(peer);
                let nets: Vec<cpmlab_model::addressing::Net24> = (0..topo.network_names().len()
                    as u8)
                    .map(|i| cpmlab_model::addressing::Net24([10, 213, i, 0].into()))
                    .collect();
                let mut s = cpmlab_model::plan::LabPlan::new("t", &topo, &nets, "img:1")
                    .initial_state("x".into());
                // Before, and with the destination planned and its API up.
                for seed in ["seed-a", "seed-b"] {
                    v.push((
                        format!("{mode:?}-{peer:?}-{seed}-before"),
                        Exposure::of_docker_seed(&s, seed),
                    ));
                }
                let mig =
                    cpmlab_model::placement::migration(&s, "seed-a", "seed-b", "", 0.0).unwrap();
                s.apiservers.extend(mig.destination_apiservers.clone());
                s.migration = Some(mig);
                v.push((
                    format!("{mode:?}-{peer:?}-seed-b-during"),
                    Exposure::of_docker_seed(&s, "seed-b"),
                ));
                // The source forwarding the API to the destination's
                // gateway (the `forward` handover).
                if let Some(m) = s.migration.as_mut() {
                    m.source_gateway_forwarded_unix_ms = Some(1.0);
                }
                let x = Exposure::of_docker_seed(&s, "seed-a");
                assert!(x.api_forward.is_some());
                v.push((format!("{mode:?}-{peer:?}-seed-a-forwarding"), x));
            }
        }
        v
    }

    #[test]
    #[cfg_attr(not(cpmlab_has_envoy), ignore = "needs Envoy (scripts/fetch-envoy)")]
    fn envoy_accepts_every_configuration_the_lab_writes() {
        let Some(envoy) = envoy() else { return };
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tls")).unwrap();
        std::fs::create_dir_all(dir.path().join("xds")).unwrap();
        certs(&dir.path().join("tls"));
        // The bootstrap, with files as the agent writes them.
        let (_, x) = exposures().remove(0);
        let xds = render(&x);
        for (name, v) in xds.files() {
            std::fs::write(dir.path().join("xds").join(name), relocate(&v, dir.path())).unwrap();
        }
        check(
            &envoy,
            dir.path(),
            "bootstrap",
            &relocate(&bootstrap("g"), dir.path()),
        );
        for (name, x) in exposures() {
            let ready: BTreeMap<String, Vec<SocketAddrV4>> = x
                .api_destinations()
                .into_iter()
                .map(|(_, d)| (d.cluster(), vec!["10.213.0.20:443".parse().unwrap()]))
                .collect();
            let b = static_bootstrap("g", &render(&x), &ready);
            check(&envoy, dir.path(), &name, &relocate(&b, dir.path()));
        }
        // A shoot node's apiserver-proxy, in both of Gardener's modes.
        for mode in [ApiExposure::Termination, ApiExposure::Passthrough] {
            let mut api = cpmlab_exposure::api_route(&Default::default());
            api.mode = mode;
            let node = cpmlab_exposure::apiserver_proxy::config(
                &cpmlab_exposure::apiserver_proxy::NodeProxy {
                    advertise_address: "0.0.0.0".into(),
                    api_host: api.host.clone(),
                    destination: cpmlab_exposure::http_proxy::destination_header_value(
                        &api,
                        "shoot--local--local",
                    ),
                },
            );
            check(
                &envoy,
                dir.path(),
                &format!("apiserver-proxy ({mode:?})"),
                &node.to_string(),
            );
        }
    }
}
