//! What etcd said: the members' logs kept in a run directory
//! (`logs/<container>.log`, Docker's timestamp before each JSON line), read
//! for the warnings that explain stalls and failed joins, grouped into
//! episodes and put in plain words. The metrics say *that* a member fell
//! behind; these lines say *why* (a peer stream that could not drain, a
//! member add refused, a leader too slow to send its heartbeats).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Occurrences closer than this belong to one episode.
const EPISODE_GAP_MS: f64 = 5_000.0;
/// The most episodes kept per run (the worst first by count).
const MAX_FINDINGS: usize = 50;

/// A warning etcd logs that explains a stall.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// rafthttp: "dropped internal Raft message since sending buffer is full".
    PeerBufferFull,
    /// "rejecting member add request; local member has not been connected to all peers".
    MemberAddRefused,
    /// "failed to send out heartbeat on time".
    HeartbeatLate,
    /// "lost TCP streaming connection with remote peer".
    StreamLost,
    /// "apply request took too long".
    SlowApply,
    /// "slow fdatasync".
    SlowFsync,
    /// "<id> became leader at term N".
    BecameLeader,
}

impl Kind {
    /// The name scenario files use (`peer-buffer-full`).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    const ALL: [Kind; 7] = [
        Kind::PeerBufferFull,
        Kind::MemberAddRefused,
        Kind::HeartbeatLate,
        Kind::StreamLost,
        Kind::SlowApply,
        Kind::SlowFsync,
        Kind::BecameLeader,
    ];

    pub fn pattern(self) -> &'static str {
        match self {
            Kind::PeerBufferFull => "sending buffer is full",
            Kind::MemberAddRefused => "rejecting member add request",
            Kind::HeartbeatLate => "failed to send out heartbeat on time",
            Kind::StreamLost => "lost TCP streaming connection with remote peer",
            Kind::SlowApply => "apply request took too long",
            Kind::SlowFsync => "slow fdatasync",
            Kind::BecameLeader => "became leader at term",
        }
    }

    /// What it means, in plain words.
    pub fn meaning(self) -> &'static str {
        match self {
            Kind::PeerBufferFull => "its stream to the peer could not drain, so etcd dropped raft messages to it (log entries, heartbeats): the peer falls behind — a learner cannot be promoted, a voter stops counting for quorum — until the stream drains. The link carried less than replication needed (loss-limited TCP over a long round trip, a rate limit), or the sender was starved of CPU",
            Kind::MemberAddRefused => "the leader refused to add a member because it had not been connected to every voter for the last 5 s (etcd's strict reconfiguration check; the client sees `etcdserver: unhealthy cluster`): a peer stream broke or stalled just before",
            Kind::HeartbeatLate => "the leader sent heartbeats late: it was too slow (CPU, disk) or its peer streams were full; followers may start an election",
            Kind::StreamLost => "a peer stream broke and is re-established; messages in flight are lost and resent",
            Kind::SlowApply => "applying requests took over 100 ms: a slow disk, CPU starvation, or a member waiting for its peers",
            Kind::SlowFsync => "a WAL fsync took over a second: the disk is slow",
            Kind::BecameLeader => "a new leader was elected",
        }
    }
}

/// One episode of a warning: a member saying it, about a peer, from first
/// to last occurrence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub kind: Kind,
    pub member: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    pub first_unix_ms: f64,
    pub last_unix_ms: f64,
    pub count: u64,
    /// Raft message types dropped (PeerBufferFull), with counts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub messages: BTreeMap<String, u64>,
    /// Of `count`, said while the peer was not connected at all.
    #[serde(default)]
    pub peer_inactive: u64,
}

impl Finding {
    /// What was said, as etcd words it.
    pub fn kind_text(&self) -> &'static str {
        self.kind.pattern()
    }

    /// One line: who, how often, about whom, and what it means.
    pub fn plain(&self) -> String {
        let peer = self
            .peer
            .as_deref()
            .map(|p| format!(" to/about {p}"))
            .unwrap_or_default();
        let msgs = if self.messages.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                self.messages
                    .iter()
                    .map(|(m, n)| format!("{n} {m}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let meaning = if self.kind == Kind::PeerBufferFull && self.peer_inactive == self.count {
            "the peer was not connected (not started yet, or unreachable), so etcd dropped what it had for it; expected for a moment after a member is added"
        } else {
            self.kind.meaning()
        };
        format!(
            "{} {}{peer}, {}× over {:.1} s{msgs}: {meaning}",
            self.member,
            self.kind.pattern(),
            self.count,
            (self.last_unix_ms - self.first_unix_ms) / 1e3,
        )
    }
}

/// Docker's timestamp (`2026-11-22T16:39:10.356366045Z`) in unix ms.
pub(crate) fn docker_time(s: &str) -> Option<f64> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    Some(t.unix_timestamp_nanos() as f64 / 1e6)
}

/// A string field of a zap JSON line, without parsing the whole line.
pub(crate) fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("\"{key}\":\"");
    let i = line.find(&pat)? + pat.len();
    let rest = &line[i..];
    Some(&rest[..rest.find('"')?])
}

/// Every member's findings in a run directory's `logs/`, episodes of one
/// (kind, member, peer) merged, most frequent first.
pub fn read(run: &Path) -> Vec<Finding> {
    from_logs(&read_logs(run))
}

/// Checks every log of a run directory the verdict reads (the etcd
/// members' and the API servers') by the one rule for input it cannot
/// read (see `load`): each line is a kept section's header (`=== ... ===`)
/// or a line as Docker and kubectl keep it, after its RFC 3339 timestamp;
/// any other is bad input naming the file and the line, but a last line
/// without its newline, which is dropped (and named). Returns how many
/// member logs there are, and what was dropped.
pub fn check_logs(run: &Path) -> crate::Result<(usize, Vec<crate::load::Dropped>)> {
    let mut members = 0;
    let mut dropped = Vec::new();
    let mut files = log_files(&run.join("logs"));
    files.sort();
    for p in files {
        let Some(f) = p.file_name().map(|f| f.to_string_lossy().into_owned()) else {
            continue;
        };
        let member = is_member_log(&f);
        if !member && !f.contains("-apiserver-") {
            continue;
        }
        members += usize::from(member);
        let bytes = std::fs::read(&p)
            .map_err(|e| crate::Error::io(format!("reading {}", p.display()), e))?;
        let text = String::from_utf8_lossy(&bytes);
        let n = text.split_inclusive('\n').count();
        for (i, line) in text.split_inclusive('\n').enumerate() {
            let l = line.trim_end_matches(['\n', '\r']);
            if l.trim().is_empty() || is_log_line(l) {
                continue;
            }
            let name = p
                .strip_prefix(run)
                .unwrap_or(&p)
                .to_string_lossy()
                .into_owned();
            if i + 1 == n && !line.ends_with('\n') {
                dropped.push(crate::load::Dropped {
                    file: name,
                    line: i + 1,
                    bytes: line.len(),
                });
                continue;
            }
            return Err(crate::Error::BadInput(format!(
                "{}:{}: a line that does not parse: neither a kept section's header nor a timestamped log line (only an unterminated last line, a killed writer's tail, is dropped)",
                p.display(),
                i + 1
            )));
        }
    }
    Ok((members, dropped))
}

/// A kept log's line: a section's header, or a timestamped line.
fn is_log_line(l: &str) -> bool {
    if l.starts_with("=== ") && l.ends_with(" ===") {
        return true;
    }
    let stamp = l.split_once(' ').map_or(l, |(t, _)| t);
    docker_time(stamp).is_some()
}

/// The etcd members' logs of a run directory: (file stem, text), in name
/// order; none when the run kept no logs.
pub fn read_logs(run: &Path) -> Vec<(String, String)> {
    read_logs_where(run, is_member_log)
}

/// Whether a kept log (its file name) is an etcd member's: the lab's own
/// members (`<lab>-seed-a-etcd-0`, `seed-a-etcd-0-0`) and etcd-druid's
/// (`etcd-main-0`, `etcd-main-seed-b-2`); not druid's operator
/// (`etcd-druid-…`) nor a member's backup-restore sidecar
/// (`<pod>.backup-restore.log`).
pub(crate) fn is_member_log(file_name: &str) -> bool {
    let Some(stem) = file_name.strip_suffix(".log") else {
        return false;
    };
    if stem.ends_with(SIDECAR_SUFFIX) || stem.starts_with("etcd-druid") {
        return false;
    }
    stem.contains("-etcd-") || stem.starts_with("etcd-")
}

/// What a backup-restore sidecar's kept log adds to its pod's name.
pub const SIDECAR_SUFFIX: &str = ".backup-restore";

/// The logs of a run directory whose file name holds `needle`: (file
/// stem, text), in name order.
pub(crate) fn read_logs_named(run: &Path, needle: &str) -> Vec<(String, String)> {
    read_logs_where(run, |f| f.contains(needle))
}

/// The logs of a run directory whose file name `keep` takes: (file stem,
/// text), in name order.
fn read_logs_where(run: &Path, keep: impl Fn(&str) -> bool) -> Vec<(String, String)> {
    let mut logs: Vec<(String, String)> = log_files(&run.join("logs"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|f| keep(&f.to_string_lossy())))
        .filter_map(|p| {
            let stem = p.file_stem()?.to_string_lossy().into_owned();
            Some((stem, std::fs::read_to_string(&p).ok()?))
        })
        .collect();
    logs.sort();
    logs
}

/// Every `.log` file under `dir`: the docker form keeps each container's
/// log at the top (`<container>.log`), the kind form each pod's under its
/// cluster and namespace (`kind-<lab>-<seed>/<namespace>/<pod>.log`).
pub(crate) fn log_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let p = e.path();
        if p.is_dir() {
            out.extend(log_files(&p));
        } else if p.extension().is_some_and(|x| x == "log") {
            out.push(p);
        }
    }
    out
}

/// Member IDs to names, and each log's member name: from its "starting an
/// etcd server" line (else the file stem) and its `local-member-id`.
pub(crate) fn member_names(logs: &[(String, String)]) -> (BTreeMap<String, String>, Vec<String>) {
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut member_of: Vec<String> = Vec::new();
    for (stem, text) in logs {
        let name = text
            .lines()
            .find(|l| l.contains("starting an etcd server"))
            .and_then(|l| field(l, "name"))
            .unwrap_or(stem)
            .to_string();
        if let Some(id) = text.lines().find_map(|l| field(l, "local-member-id")) {
            names.insert(id.to_string(), name.clone());
        }
        member_of.push(name);
    }
    (names, member_of)
}

/// Findings from (file stem, text) pairs: the member's name comes from its
/// "starting an etcd server" line (else the file stem), peer IDs become
/// names through each log's own member ID.
pub fn from_logs(logs: &[(String, String)]) -> Vec<Finding> {
    let (names, member_of) = member_names(logs);
    let name_of = |id: &str| names.get(id).cloned().unwrap_or_else(|| id.to_string());
    let mut out: Vec<Finding> = Vec::new();
    // (kind, member, peer) -> index of its open episode in `out`.
    let mut open: BTreeMap<(Kind, String, Option<String>), usize> = BTreeMap::new();
    for ((_, text), member) in logs.iter().zip(&member_of) {
        for line in text.lines() {
            let Some(kind) = Kind::ALL.into_iter().find(|k| line.contains(k.pattern())) else {
                continue;
            };
            let Some(at) = line.split_once(' ').and_then(|(t, _)| docker_time(t)) else {
                continue;
            };
            let peer = match kind {
                Kind::PeerBufferFull | Kind::StreamLost => {
                    field(line, "remote-peer-id").map(name_of)
                }
                Kind::MemberAddRefused => field(line, "requested-member-add")
                    .and_then(|m| m.split("PeerURLs:[").nth(1))
                    .and_then(|u| u.split(']').next())
                    .map(str::to_string),
                _ => None,
            };
            let key = (kind, member.clone(), peer.clone());
            let i = match open.get(&key) {
                Some(&i) if at - out[i].last_unix_ms <= EPISODE_GAP_MS => i,
                _ => {
                    out.push(Finding {
                        kind,
                        member: member.clone(),
                        peer,
                        first_unix_ms: at,
                        last_unix_ms: at,
                        count: 0,
                        messages: BTreeMap::new(),
                        peer_inactive: 0,
                    });
                    open.insert(key, out.len() - 1);
                    out.len() - 1
                }
            };
            let f = &mut out[i];
            f.count += 1;
            f.last_unix_ms = f.last_unix_ms.max(at);
            if line.contains("\"remote-peer-active\":false") {
                f.peer_inactive += 1;
            }
            if let Some(m) = field(line, "message-type") {
                *f.messages.entry(m.to_string()).or_insert(0) += 1;
            }
        }
    }
    // The worst first; then in time.
    out.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(a.first_unix_ms.total_cmp(&b.first_unix_ms))
    });
    out.truncate(MAX_FINDINGS);
    out
}

/// Findings that overlap [a, b].
pub fn around(findings: &[Finding], a: f64, b: f64) -> impl Iterator<Item = &Finding> {
    findings
        .iter()
        .filter(move |f| f.first_unix_ms <= b && f.last_unix_ms >= a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(t: &str, json: &str) -> String {
        format!("2026-11-22T16:39:{t}Z {json}\n")
    }

    #[test]
    fn drops_to_a_peer_become_one_episode_with_names_and_message_types() {
        let leader = [
            line("00.000000000", r#"{"msg":"starting an etcd server","name":"seed-a-etcd-0"}"#),
            line("00.100000000", r#"{"msg":"x","local-member-id":"aa"}"#),
            line("10.000000000", r#"{"msg":"dropped internal Raft message since sending buffer is full (overloaded network)","message-type":"MsgApp","local-member-id":"aa","remote-peer-id":"bb"}"#),
            line("11.000000000", r#"{"msg":"dropped internal Raft message since sending buffer is full (overloaded network)","message-type":"MsgHeartbeat","local-member-id":"aa","remote-peer-id":"bb","remote-peer-active":true}"#),
            // More than 5 s later: a second episode.
            line("30.000000000", r#"{"msg":"dropped internal Raft message since sending buffer is full (overloaded network)","message-type":"MsgApp","local-member-id":"aa","remote-peer-id":"bb","remote-peer-active":false}"#),
            line("31.000000000", r#"{"msg":"rejecting member add request; local member has not been connected to all peers, reconfigure breaks active quorum","local-member-id":"aa","requested-member-add":"{ID:1 RaftAttributes:{PeerURLs:[https://seed-b-etcd-2.x:2380] IsLearner:true}}"}"#),
        ]
        .concat();
        let learner = [
            line(
                "00.000000000",
                r#"{"msg":"starting an etcd server","name":"seed-b-etcd-2"}"#,
            ),
            line("00.100000000", r#"{"msg":"y","local-member-id":"bb"}"#),
        ]
        .concat();
        let f = from_logs(&[
            ("lab-seed-a-etcd-0".into(), leader),
            ("lab-seed-b-etcd-2".into(), learner),
        ]);
        assert_eq!(f.len(), 3, "{f:#?}");
        let first = &f[0];
        assert_eq!(first.kind, Kind::PeerBufferFull);
        assert_eq!(first.member, "seed-a-etcd-0");
        assert_eq!(first.peer.as_deref(), Some("seed-b-etcd-2"));
        assert_eq!(first.count, 2);
        assert_eq!(first.last_unix_ms - first.first_unix_ms, 1000.0);
        assert_eq!(first.messages.get("MsgHeartbeat"), Some(&1));
        assert!(
            first.plain().contains("could not drain"),
            "{}",
            first.plain()
        );
        // Said only while the peer was not connected: a different story.
        let idle = f
            .iter()
            .find(|x| x.kind == Kind::PeerBufferFull && x.count == 1)
            .unwrap();
        assert!(idle.plain().contains("not connected"), "{}", idle.plain());
        let add = f.iter().find(|x| x.kind == Kind::MemberAddRefused).unwrap();
        assert_eq!(add.peer.as_deref(), Some("https://seed-b-etcd-2.x:2380"));
        assert_eq!(
            around(&f, first.first_unix_ms, first.first_unix_ms).count(),
            1
        );
    }

    #[test]
    fn the_kind_form_s_pod_logs_are_read_from_their_cluster_and_namespace() {
        let run = tempfile::tempdir().unwrap();
        let ns = run.path().join("logs/kind-lab-seed-b/shoot--local--local");
        std::fs::create_dir_all(&ns).unwrap();
        std::fs::write(ns.join("seed-b-etcd-0-0.log"), "x\n").unwrap();
        std::fs::write(ns.join("kube-apiserver-7fd6-q.log"), "x\n").unwrap();
        std::fs::write(run.path().join("logs/lab-seed-a-etcd-0.log"), "y\n").unwrap();
        let stems: Vec<String> = read_logs(run.path()).into_iter().map(|(s, _)| s).collect();
        assert_eq!(stems, vec!["lab-seed-a-etcd-0", "seed-b-etcd-0-0"]);
    }

    #[test]
    fn docker_timestamps_are_read_to_the_millisecond() {
        let t = docker_time("2026-11-22T16:39:10.356366045Z").unwrap();
        assert_eq!((t % 1000.0).round(), 356.0);
    }

    #[test]
    fn member_logs_are_told_from_the_operator_s_and_the_sidecars_() {
        for member in [
            "lab-seed-a-etcd-0.log",
            "seed-b-etcd-0-0.log",
            "etcd-main-0.log",
            "etcd-main-seed-b-2.log",
        ] {
            assert!(is_member_log(member), "{member}");
        }
        for other in [
            "etcd-druid-5fd459c9dc-wwrsz.log",
            "etcd-main-seed-b-2.backup-restore.log",
            "kube-apiserver-85ff64b598-87rbl.log",
            "lab-seed-a-apiserver-0.log",
            "etcd-main-0.txt",
        ] {
            assert!(!is_member_log(other), "{other}");
        }
    }
}
