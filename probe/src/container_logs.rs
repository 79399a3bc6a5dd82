//! The logs of the lab's containers, kept in the run directory: a failed
//! run must say what etcd, the API servers and the gateways did around it.
//! Containers the migration removes are kept just before their removal,
//! the rest when the probes stop (`<run>/logs/<container>.log`).

use std::path::{Path, PathBuf};

use std::io::Write;

use crate::provider::Provider;

/// What names a member's backup-restore sidecar beside its pod's workload
/// (`<workload>.backup-restore`): its log is kept apart from etcd's.
pub use crate::verdict::etcd_said::SIDECAR_SUFFIX;

/// Where a container's log goes in a run directory.
pub fn path(run: &Path, container: &str) -> PathBuf {
    run.join("logs").join(format!("{container}.log"))
}

/// Appends each container's log to its file in `run` (a container
/// re-created under the same name adds a second section); best effort: a
/// log that cannot be had is named in a warning, never fails the caller.
pub async fn keep(provider: &dyn Provider, run: &Path, containers: &[String]) {
    for c in containers {
        let p = path(run, c);
        let got = match provider.logs(c).await {
            Ok(b) => append(&p, c, &b).map_err(anyhow::Error::from),
            Err(e) => Err(e),
        };
        if let Err(e) = got {
            tracing::warn!("could not keep the log of {c} in {}: {e:#}", p.display());
        }
    }
}

fn append(p: &Path, container: &str, log: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)?;
    writeln!(
        f,
        "=== {container}{}{:.0} (unix ms) ===",
        crate::verdict::election::KEPT_AT,
        super::clock::now_unix_ms()
    )?;
    f.write_all(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_go_under_the_run_by_container_name() {
        assert_eq!(
            path(Path::new("/r/lab-1"), "lab-seed-a-etcd-0"),
            PathBuf::from("/r/lab-1/logs/lab-seed-a-etcd-0.log")
        );
    }

    #[test]
    fn a_recreated_container_adds_a_section() {
        let d = tempfile::tempdir().unwrap();
        let p = path(d.path(), "c");
        append(&p, "c", b"first\n").unwrap();
        append(&p, "c", b"second\n").unwrap();
        let t = std::fs::read_to_string(&p).unwrap();
        assert_eq!(t.matches("=== c:").count(), 2, "{t}");
        assert!(t.find("first").unwrap() < t.find("second").unwrap());
    }
}
