//! The membership calls a migration makes, against real etcd: a second member
//! joins as a learner, is promoted once in sync, takes over leadership, and
//! the first member leaves; writes go on.
//! Each member runs in a throw-away container of the lab image (which carries
//! the host's etcd) on a Docker network of this run's own, where members reach
//! each other by container name; the test's clients reach them from the host
//! at their addresses on that network (no port is published). testcontainers
//! removes the containers and the network when the test ends, panics included.
//! Needs Docker: compiled as ignored where e2e/build.rs did not find it
//! (reported skipped), except with CI=true; a Docker or lab image that fails
//! it once it runs is a failure.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use cpmlab_core::errors::EnvNotReady;
use cpmlab_lab::migrate::etcd_ops;
use cpmlab_provider_docker::engine::Engine;
use cpmlab_provider_docker::{images, LABEL_LAB};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

/// This run's lab image, and the name of its network, its containers' prefix
/// and their `cpmlab.lab` label (so the test script's leak check sees them).
struct Run {
    image: String,
    tag: String,
    lab: String,
}

impl Run {
    fn host(&self, member: &str) -> String {
        format!("{}-{member}", self.lab)
    }

    fn peer_url(&self, member: &str) -> String {
        format!("http://{}:2380", self.host(member))
    }
}

/// The lab image; a machine that cannot make it fails the test, saying
/// why (the test runs only where Docker was found, or with CI=true).
async fn lab_image() -> Option<String> {
    let not_ready = |e: &dyn std::fmt::Display| {
        panic!("Docker is not ready: {e}");
    };
    let engine = match Engine::connect().await {
        Ok(engine) => engine,
        Err(e) => {
            not_ready(&e);
            return None;
        }
    };
    match images::ensure(&engine).await {
        Ok(image) => Some(image.tag),
        Err(e) => match e.downcast_ref::<EnvNotReady>() {
            Some(e) => {
                not_ready(e);
                None
            }
            None => panic!("build the lab image: {e:#}"),
        },
    }
}

/// Starts member `name`; returns its container (removed when dropped) and
/// its address on the run's network.
async fn etcd(
    run: &Run,
    name: &str,
    cluster: &str,
    state: &str,
) -> (ContainerAsync<GenericImage>, IpAddr) {
    let host = run.host(name);
    let container = GenericImage::new(run.image.clone(), run.tag.clone())
        .with_entrypoint("/usr/bin/etcd")
        .with_cmd([
            format!("--name={name}"),
            format!("--data-dir=/var/lib/etcd/{name}"),
            "--listen-client-urls=http://0.0.0.0:2379".to_string(),
            format!("--advertise-client-urls=http://{host}:2379"),
            "--listen-peer-urls=http://0.0.0.0:2380".to_string(),
            format!("--initial-advertise-peer-urls={}", run.peer_url(name)),
            format!("--initial-cluster={cluster}"),
            format!("--initial-cluster-state={state}"),
        ])
        .with_container_name(&host)
        .with_network(&run.lab)
        .with_label(LABEL_LAB, &run.lab)
        // testcontainers publishes every exposed port unless told otherwise;
        // the project publishes none.
        .with_host_config_modifier(|hc| hc.publish_all_ports = Some(false))
        .start()
        .await
        .unwrap_or_else(|e| panic!("start etcd member {name}: {e}"));
    let ip = container
        .get_bridge_ip_address()
        .await
        .unwrap_or_else(|e| panic!("address of etcd member {name}: {e}"));
    (container, ip)
}

async fn client(ip: IpAddr) -> etcd_client::Client {
    let t0 = Instant::now();
    loop {
        if let Ok(mut c) = etcd_client::Client::connect([format!("http://{ip}:2379")], None).await {
            if c.status().await.is_ok() {
                return c;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "etcd on {ip} did not answer"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
async fn learner_joins_is_promoted_takes_leadership_and_the_old_member_leaves() {
    let Some(image) = lab_image().await else {
        return;
    };
    let (image, tag) = image.rsplit_once(':').expect("image tag");
    let run = Run {
        image: image.to_string(),
        tag: tag.to_string(),
        lab: format!("tc-etcd-{}", std::process::id()),
    };
    let (_a, ip_a) = etcd(&run, "a", &format!("a={}", run.peer_url("a")), "new").await;
    let mut c_a = client(ip_a).await;
    c_a.put("k", "before", None).await.unwrap();

    let b_id = etcd_ops::add_learner(&mut c_a, &run.peer_url("b"))
        .await
        .unwrap();
    let (_b, ip_b) = etcd(
        &run,
        "b",
        &format!("a={},b={}", run.peer_url("a"), run.peer_url("b")),
        "existing",
    )
    .await;
    etcd_ops::promote_when_in_sync(&mut c_a, b_id, Duration::from_secs(30))
        .await
        .unwrap();
    let members = c_a.member_list().await.unwrap();
    assert_eq!(members.members().len(), 2);
    assert!(members.members().iter().all(|m| !m.is_learner()));

    let a_id = etcd_ops::leader(&mut c_a).await.unwrap();
    assert_ne!(a_id, b_id, "the first member leads until told otherwise");
    etcd_ops::move_leader(&mut c_a, b_id).await.unwrap();
    let mut c_b = client(ip_b).await;
    let t0 = Instant::now();
    while etcd_ops::leader(&mut c_b).await.unwrap() != b_id {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "leadership did not move"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let t = Instant::now();
    etcd_ops::remove_when_healthy(&mut c_b, a_id, Duration::from_secs(30))
        .await
        .unwrap();
    eprintln!("the quorum gate held the removal for {:?}", t.elapsed());
    assert_eq!(c_b.member_list().await.unwrap().members().len(), 1);
    // Nothing lost, and writes go on with the member that stayed.
    let got = c_b.get("k", None).await.unwrap();
    assert_eq!(got.kvs()[0].value(), b"before");
    c_b.put("k", "after", None).await.unwrap();
}
