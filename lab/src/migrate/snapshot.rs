//! The `classic` plan's backup and restore, as etcdctl does them inside a
//! member's workload (the lab image's `/usr/bin/etcdctl`, Debian's
//! etcd-client): `snapshot save` of the source's leader over its own
//! client port with the member's certificate, `snapshot status` to read
//! the revision the snapshot holds, and `snapshot restore` into a new
//! member's data directory before its etcd starts (GEP-7's restore in the
//! destination, which etcd-backup-restore does with etcd's own restore).

use serde::{Deserialize, Serialize};

use crate::etcd::{DATA_DIR, PKI_DIR};
use crate::state::MemberState;

/// Where the snapshot is written in the source member and placed in the
/// destination one (on the member's data volume, beside `data/`).
pub const SNAPSHOT_FILE: &str = "/var/lib/etcd/cpmlab-snapshot.db";

/// The name the lab's backup bucket keeps the full snapshot under.
pub const BACKUP_NAME: &str = "etcd-main-full.db";

/// `etcdctl snapshot save` in member `m`'s workload, against its own
/// client port (its address is in its certificate, which is a client
/// certificate as well: peers use it both ways).
pub fn save_command(m: &MemberState) -> Vec<String> {
    let mut v = etcdctl(m);
    v.extend(["snapshot".into(), "save".into(), SNAPSHOT_FILE.into()]);
    v
}

/// `etcdctl snapshot status -w json` of the saved snapshot.
pub fn status_command() -> Vec<String> {
    ["etcdctl", "snapshot", "status", SNAPSHOT_FILE, "-w", "json"]
        .map(String::from)
        .to_vec()
}

/// `etcdctl snapshot restore` into member `m`'s data directory (which must
/// not exist yet): a new cluster of `m` alone with the lab's cluster token;
/// the member's etcd then starts on it (its `--initial-cluster` flags are
/// ignored where the data directory exists), and the other destination
/// members join it as learners, as etcd-druid scales a restored cluster up.
pub fn restore_command(m: &MemberState, token: &str) -> Vec<String> {
    vec![
        "etcdctl".into(),
        "snapshot".into(),
        "restore".into(),
        SNAPSHOT_FILE.into(),
        format!("--name={}", m.name),
        format!("--data-dir={DATA_DIR}/data"),
        format!("--initial-cluster={}={}", m.name, m.peer_url()),
        format!("--initial-cluster-token={token}"),
        format!("--initial-advertise-peer-urls={}", m.peer_url()),
    ]
}

fn etcdctl(m: &MemberState) -> Vec<String> {
    vec![
        "etcdctl".into(),
        format!("--endpoints=https://{}:2379", m.ip),
        format!("--cacert={PKI_DIR}/ca.crt"),
        format!("--cert={PKI_DIR}/server.crt"),
        format!("--key={PKI_DIR}/server.key"),
        "--command-timeout=120s".into(),
    ]
}

/// What `etcdctl snapshot status -w json` says of a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub hash: u64,
    pub revision: i64,
    pub total_key: u64,
    pub total_size: u64,
}

/// Parses `etcdctl snapshot status -w json`.
pub fn parse_status(out: &str) -> Result<Status, String> {
    serde_json::from_str(out.trim()).map_err(|e| format!("etcdctl snapshot status: {e}: {out}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_and_restore_speak_etcdctls_flags() {
        let s = crate::plan::sample_state();
        let m = &s.members[0];
        let save = save_command(m);
        assert_eq!(save[0], "etcdctl");
        assert!(save.contains(&format!("--endpoints=https://{}:2379", m.ip)));
        assert!(save.ends_with(&["snapshot".into(), "save".into(), SNAPSHOT_FILE.into()]));
        let r = restore_command(m, "cpmlab-t");
        assert!(r.contains(&format!("--initial-cluster={}={}", m.name, m.peer_url())));
        assert!(r.contains(&"--data-dir=/var/lib/etcd/data".to_string()));
        assert!(r.contains(&"--initial-cluster-token=cpmlab-t".to_string()));
        assert!(
            SNAPSHOT_FILE.starts_with(DATA_DIR),
            "on the member's volume"
        );
    }

    #[test]
    fn the_status_gives_the_revision() {
        let st = parse_status(
            "{\"hash\":3297163447,\"revision\":1234,\"totalKey\":77,\"totalSize\":2142208}\n",
        )
        .unwrap();
        assert_eq!(st.revision, 1234);
        assert_eq!(st.total_size, 2142208);
        assert!(parse_status("Error: snapshot file not found").is_err());
    }
}
