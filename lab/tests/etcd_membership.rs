//! The membership calls a migration makes, against real etcd processes on
//! loopback: a second member joins as a learner, is promoted once in sync,
//! takes over leadership, and the first member leaves; writes go on.
//! Needs the host's etcd (scripts/setup installs it); fails when CI=true
//! and it is missing.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cpmlab::migrate::etcd_ops;

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn etcd(dir: &std::path::Path, name: &str, cp: u16, pp: u16, cluster: &str, state: &str) -> Killed {
    Killed(
        Command::new("etcd")
            .args([
                &format!("--name={name}"),
                &format!("--data-dir={}", dir.join(name).display()),
                &format!("--listen-client-urls=http://127.0.0.1:{cp}"),
                &format!("--advertise-client-urls=http://127.0.0.1:{cp}"),
                &format!("--listen-peer-urls=http://127.0.0.1:{pp}"),
                &format!("--initial-advertise-peer-urls=http://127.0.0.1:{pp}"),
                &format!("--initial-cluster={cluster}"),
                &format!("--initial-cluster-state={state}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start etcd"),
    )
}

async fn client(cp: u16) -> etcd_client::Client {
    let t0 = Instant::now();
    loop {
        if let Ok(mut c) =
            etcd_client::Client::connect([format!("http://127.0.0.1:{cp}")], None).await
        {
            if c.status().await.is_ok() {
                return c;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "etcd on {cp} did not answer"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learner_joins_is_promoted_takes_leadership_and_the_old_member_leaves() {
    if Command::new("etcd").arg("--version").output().is_err() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("etcd missing and CI=true: run scripts/setup");
        }
        eprintln!("SKIPPED: etcd not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (ca, pa, cb, pb) = (port(), port(), port(), port());
    let _a = etcd(
        dir.path(),
        "a",
        ca,
        pa,
        &format!("a=http://127.0.0.1:{pa}"),
        "new",
    );
    let mut c_a = client(ca).await;
    c_a.put("k", "before", None).await.unwrap();

    let b_id = etcd_ops::add_learner(&mut c_a, &format!("http://127.0.0.1:{pb}"))
        .await
        .unwrap();
    let _b = etcd(
        dir.path(),
        "b",
        cb,
        pb,
        &format!("a=http://127.0.0.1:{pa},b=http://127.0.0.1:{pb}"),
        "existing",
    );
    etcd_ops::promote_when_in_sync(&mut c_a, b_id, Duration::from_secs(30))
        .await
        .unwrap();
    let members = c_a.member_list().await.unwrap();
    assert_eq!(members.members().len(), 2);
    assert!(members.members().iter().all(|m| !m.is_learner()));

    let a_id = etcd_ops::leader(&mut c_a).await.unwrap();
    assert_ne!(a_id, b_id, "the first member leads until told otherwise");
    etcd_ops::move_leader(&mut c_a, b_id).await.unwrap();
    let mut c_b = client(cb).await;
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
