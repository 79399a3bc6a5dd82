//! The `mirror` plan's etcd Mirror Maker, as etcdctl runs it inside the
//! first destination member's workload (the lab image's `/usr/bin/etcdctl`,
//! Debian's etcd-client): `etcdctl make-mirror` from the source's members
//! (their client URLs, through the source gateway by SNI, with the
//! member's certificate, which is a client certificate as well) into the
//! destination's new cluster (the member's own client port). It runs in
//! the background of the workload, its output on the member's volume, its
//! process id beside it, so a later step (or a resumed run) finds, reads
//! and stops it. Upstream's description: etcd's
//! `etcdctl/doc/mirror_maker.md` ("make-mirror ... replicates key-value
//! data ... an initial sync followed by asynchronous update propagation";
//! every 30 s it prints how many keys it has mirrored so far).

#[cfg(test)]
use crate::etcd::DATA_DIR;
use crate::etcd::PKI_DIR;
use crate::state::MemberState;

/// make-mirror's output (stdout and stderr), on the member's volume.
pub const LOG_FILE: &str = "/var/lib/etcd/cpmlab-mirror.log";
/// make-mirror's process id, beside it.
pub const PID_FILE: &str = "/var/lib/etcd/cpmlab-mirror.pid";
/// The key the flow writes into the source to see the mirror catch up:
/// make-mirror applies the source's events in revision order, so once the
/// destination holds the value last written here, it holds everything the
/// source had before it. Outside `/registry` (kube-apiserver's prefix).
pub const SYNC_KEY: &str = "/cpmlab/mirror-sync";

/// How many times the sync key is written and waited for: make-mirror's
/// first sync puts the keys it found in key order, and the sync key sorts
/// before `/registry`, so a value that arrived then says nothing of the
/// keys after it; a value written once the first has arrived comes
/// through make-mirror's watch, after its first sync and every event
/// before it.
pub const SYNC_ROUNDS: usize = 2;

/// The shell line that starts make-mirror in the background of member
/// `dest`'s workload, from `sources` into `dest`; it prints the process id.
/// The whole keyspace is mirrored (make-mirror's default, no `--prefix`).
pub fn start_command(sources: &[MemberState], dest: &MemberState) -> Vec<String> {
    let endpoints: Vec<String> = sources.iter().map(MemberState::client_url).collect();
    let etcdctl = [
        "etcdctl".to_string(),
        format!("--endpoints={}", endpoints.join(",")),
        format!("--cacert={PKI_DIR}/ca.crt"),
        format!("--cert={PKI_DIR}/server.crt"),
        format!("--key={PKI_DIR}/server.key"),
        "make-mirror".into(),
        format!("--dest-cacert={PKI_DIR}/ca.crt"),
        format!("--dest-cert={PKI_DIR}/server.crt"),
        format!("--dest-key={PKI_DIR}/server.key"),
        format!("https://{}:2379", dest.ip),
    ];
    debug_assert!(etcdctl.iter().all(|a| a
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_=:/.,".contains(c))));
    sh(&format!(
        "{} >{LOG_FILE} 2>&1 </dev/null & echo $! >{PID_FILE}; cat {PID_FILE}",
        etcdctl.join(" ")
    ))
}

/// Exits 0 while the make-mirror the pid file names runs.
pub fn running_command() -> Vec<String> {
    sh(&format!(
        "test -f {PID_FILE} && kill -0 \"$(cat {PID_FILE})\""
    ))
}

/// Stops make-mirror (SIGTERM) and forgets its pid; harmless when it has
/// stopped already.
pub fn stop_command() -> Vec<String> {
    sh(&format!(
        "if test -f {PID_FILE}; then kill \"$(cat {PID_FILE})\" 2>/dev/null; rm -f {PID_FILE}; fi; true"
    ))
}

/// Prints make-mirror's output so far (nothing before it started).
pub fn log_command() -> Vec<String> {
    sh(&format!("cat {LOG_FILE} 2>/dev/null; true"))
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

/// The running totals make-mirror printed (one number a line, every 30 s:
/// the keys it has put or deleted so far); other lines are its errors.
pub fn totals(log: &str) -> Vec<u64> {
    log.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// What make-mirror said besides its totals (its errors, when it stopped
/// on its own), at most `max` lines.
pub fn complaints(log: &str, max: usize) -> Vec<String> {
    log.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && l.parse::<u64>().is_err())
        .take(max)
        .map(String::from)
        .collect()
}

/// Whether the destination has caught up with the source's sync key:
/// it holds exactly the value last written there.
pub fn caught_up(written: &str, at_destination: Option<&[u8]>) -> bool {
    at_destination == Some(written.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn make_mirror_goes_from_the_source_members_to_the_destinations_own_port() {
        let s = crate::plan::sample_state();
        let sources: Vec<MemberState> = s.members.clone();
        let dest = &s.members[0];
        let c = start_command(&sources, dest);
        assert_eq!(c[..2], ["sh".to_string(), "-c".to_string()]);
        let line = &c[2];
        let urls: Vec<String> = sources.iter().map(|m| m.client_url()).collect();
        assert!(
            line.contains(&format!("--endpoints={} ", urls.join(","))),
            "{line}"
        );
        assert!(line.contains(" make-mirror --dest-cacert="), "{line}");
        assert!(
            line.contains(&format!("https://{}:2379 >{LOG_FILE}", dest.ip)),
            "{line}"
        );
        assert!(line.ends_with(&format!("echo $! >{PID_FILE}; cat {PID_FILE}")));
        assert!(!line.contains("--prefix"), "the whole keyspace");
        assert!(LOG_FILE.starts_with(DATA_DIR) && PID_FILE.starts_with(DATA_DIR));
        for c in [running_command(), stop_command(), log_command()] {
            assert_eq!(c[0], "sh");
            assert!(c[2].contains("/var/lib/etcd/cpmlab-mirror."), "{c:?}");
        }
    }

    #[test]
    fn the_log_gives_totals_and_complaints() {
        let log = "120\n4411\nError: rpc error: code = Unavailable\n\n9000\n";
        assert_eq!(totals(log), [120, 4411, 9000]);
        assert_eq!(complaints(log, 5), ["Error: rpc error: code = Unavailable"]);
        assert!(totals("").is_empty());
    }

    #[test]
    fn one_round_is_not_enough_the_sync_key_sorts_before_the_shoots_keys() {
        assert!(SYNC_KEY < "/registry/");
        assert_eq!(SYNC_ROUNDS, 2);
    }

    #[test]
    fn caught_up_only_on_the_value_last_written() {
        assert!(caught_up("1700", Some(b"1700")));
        assert!(!caught_up("1700", Some(b"1699")));
        assert!(!caught_up("1700", None));
    }
}
