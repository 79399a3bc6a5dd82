//! The counter's history captured while the run goes (`probe::history`),
//! against a real etcd on loopback: a watch that keeps up loses nothing to
//! a compaction, and a compaction that overtakes a watch that had to start
//! again is named with its revisions, as the verdict reads them.
//! Needs the host's etcd (scripts/setup installs it).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cpmlab_probe::final_read::counter_key;
use cpmlab_probe::history::{begin, complete, follow, Capture};
use cpmlab_verdict::history::read;
use etcd_client::Client;

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A single-member etcd on loopback and its client URL.
fn etcd(dir: &std::path::Path) -> (Killed, String) {
    let (cp, pp) = (common::free_port(), common::free_port());
    let child = Command::new("etcd")
        .args(common::loopback_etcd_args(&dir.join("etcd"), cp, pp))
        .arg("--log-outputs=stderr")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start etcd");
    (Killed(child), format!("http://127.0.0.1:{cp}"))
}

async fn client(url: &str) -> Result<Client, String> {
    Client::connect([url], None)
        .await
        .map_err(|e| e.to_string())
}

async fn ready(url: &str) -> Client {
    let t = Instant::now();
    loop {
        if let Ok(mut c) = client(url).await {
            if c.status().await.is_ok() {
                return c;
            }
        }
        assert!(t.elapsed() < Duration::from_secs(20), "etcd did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Writes the counter `value` as a ConfigMap's JSON; its revision.
async fn put(c: &mut Client, value: u64) -> u64 {
    let cm = format!(r#"{{"kind":"ConfigMap","data":{{"value":"{value}"}}}}"#);
    let r = c.put(counter_key(), cm, None).await.unwrap();
    r.header().unwrap().revision() as u64
}

#[cfg_attr(
    not(cpmlab_has_etcd_kubectl),
    ignore = "needs etcd, etcdctl and kubectl (scripts/setup, scripts/build-go --kind)"
)]
#[tokio::test]
async fn a_watch_that_keeps_up_loses_nothing_to_a_compaction_and_one_that_fell_behind_is_named() {
    common::needs(
        "a_watch_that_keeps_up_loses_nothing_to_a_compaction",
        cpmlab_testenv::Need::EtcdKubectl,
    );
    let dir = tempfile::tempdir().unwrap();
    let (_etcd, url) = etcd(dir.path());
    let mut c = ready(&url).await;
    put(&mut c, 0).await;

    // Kept up: the observer's watch follows every write; etcd compacts
    // to the last revision; the final read completes it.
    let run = tempfile::tempdir().unwrap();
    begin(client(&url).await, run.path()).await;
    let stop = cpmlab_model::errors::Cancel::default();
    let (u, r) = (url.clone(), run.path().to_path_buf());
    let s = stop.clone();
    let observer = tokio::spawn(async move { follow(|| client(&u), &r, &s).await });
    let mut last = 0;
    for v in 1..=20 {
        last = put(&mut c, v).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    c.compact(last as i64, None).await.unwrap();
    stop.cancel();
    observer.await.unwrap();
    complete(|| client(&url), run.path(), Duration::from_secs(10)).await;
    let captured = read(&Capture::of(run.path()).lines().unwrap());
    let h = captured.history().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        h.iter().map(|e| e.value).collect::<Vec<_>>(),
        (0..=20).collect::<Vec<_>>(),
        "every version from the counter's at the start"
    );
    assert_eq!(captured.end_rev, Some(last));

    // Fell behind: no observer; writes, a compaction, and then the final
    // read's watch must begin where the capture began.
    let run = tempfile::tempdir().unwrap();
    begin(client(&url).await, run.path()).await;
    let from = last;
    for v in 21..=30 {
        last = put(&mut c, v).await;
    }
    c.compact(last as i64, None).await.unwrap();
    complete(|| client(&url), run.path(), Duration::from_secs(10)).await;
    let err = read(&Capture::of(run.path()).lines().unwrap())
        .history()
        .unwrap_err();
    assert!(
        err.contains(&format!(
            "etcd compacted its history to revision {last} before the watch, resumed from revision {from}"
        )) && err.contains(&format!("from revision {from} to {}", last - 1)),
        "{err}"
    );
}
