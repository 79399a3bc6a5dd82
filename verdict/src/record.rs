//! What the probe agent writes, one JSON object per line: every request in
//! `records.ndjson`, every lab event in `events.ndjson`. The verdict is
//! computed from these files alone.

use serde::{Deserialize, Serialize};

/// Which probe made a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    /// GET /readyz?exclude=shutdown (can the server still serve?)
    Readyz,
    /// GET of the counter ConfigMap (a linearizable single-object read)
    Get,
    /// LIST of ConfigMaps in the probe namespace
    List,
    /// UPDATE of the counter ConfigMap (optimistic concurrency); the ledger
    Write,
    /// WATCH of the counter ConfigMap: one record per (re)connect and per event
    Watch,
    /// A kube-rs watcher (informer) over the probe namespace's ConfigMaps:
    /// one record per list/watch request, (re)list, error and counter state
    Informer,
    /// CREATE of a new ConfigMap per request (`--write-rate`): the write
    /// load of distinct objects controllers generate, beside the ledger
    Load,
    /// client-go's shared informer (`cpmlab-clientgo informer`) over the
    /// probe namespace's ConfigMaps through the public name: the same
    /// events as the kube-rs informer (`informer_event`), from Kubernetes'
    /// own client library.
    #[serde(rename = "informer-go")]
    InformerGo,
    /// One leader-election candidate (`cpmlab-clientgo elect`, client-go's
    /// `leaderelection` on a Lease) per seed, through its own seed's API
    /// replicas: every get/create/update of the lock and every acquire,
    /// loss and lab action on it (`lease_event`). Judged by the lease
    /// rules, not counted as the shoot API's availability.
    Lease,
}

/// How the request reached the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConnMode {
    /// A new TCP+TLS connection (and a DNS lookup, cached per TTL) per request.
    New,
    /// One long-lived HTTP/2 connection, re-established only when it fails.
    Reused,
    /// A pool of HTTP/1.1 keep-alive connections, as urllib3 keeps them for
    /// Kubernetes' Python client: an idle connection the server closed is
    /// dropped before reuse, and a request that failed on a connection is
    /// sent again (up to 3 times) only when its method is idempotent or
    /// it never left; a failure before any answer on a reused connection
    /// (one the server closed as the request went out) is sent again on
    /// another without counting, as Go's net/http does.
    Keepalive,
    /// Through the shoot node's apiserver-proxy (Gardener's Envoy on every
    /// node, which tunnels each connection with HTTP CONNECT to the seed
    /// gateway's port 8443, the gateway found by the API's DNS name): one
    /// long-lived HTTP/2 connection to the node, kept as client-go keeps
    /// its own — given up when it fails or the server closes it, not when
    /// a request on it times out; HTTP/2 pings after 30 s without a frame,
    /// dead after 15 s unanswered (k8s.io/apimachinery's
    /// `pkg/util/net/http.go`). In-cluster clients (kube-proxy, controllers,
    /// kubelets' pods) reach the API this way.
    Node,
    /// A new connection per request, as `New`, through caches that keep
    /// their answer past the record's TTL (by the probes' `late_dns`, 60 s
    /// by default): clients behind a cache that outlives the TTL (a
    /// node-local cache serving stale answers, a JVM's own address cache, a
    /// resolver that clamps TTLs up). Twelve caches, refreshed at spread
    /// times, taken in turn: after the API's record moves, the latest of
    /// them keeps connecting to the source's gateway for about TTL +
    /// `late_dns`, in every run.
    #[serde(rename = "late-dns")]
    LateDns,
    /// A new connection per request by the shoot API's seed-bound name in
    /// the seed that served it when the probes started (Gardener's
    /// advertised address `wildcard-tls-seed-bound`,
    /// `api-<technical ID>.<the seed's ingress domain>`, served by the
    /// Gateway's `wildcard-tls` server): a name that stays with that
    /// seed's gateway, so its clients never follow the shoot's DNS.
    #[serde(rename = "seed-bound")]
    SeedBound,
}

/// The class of a request's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Ok,
    /// An HTTP status that is a failure for this probe (see `http_status`).
    Http,
    Timeout,
    Refused,
    Reset,
    Dns,
    Tls,
    /// A success status whose body does not parse: the client got nothing.
    Decode,
    /// Anything else (see `error`).
    Error,
}

/// One request (or, for the watch probe, one received event or reconnect).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Per agent, increasing.
    pub seq: u64,
    pub probe: ProbeKind,
    pub mode: ConnMode,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub start_unix_ms: f64,
    /// Monotonic start, milliseconds since the agent started.
    pub start_mono_ms: f64,
    pub duration_ms: f64,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// The seed whose API server answered (`X-Cpmlab-Seed`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// The replica that answered (`X-Cpmlab-Server`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The address the request went to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// write: the counter value written (acknowledged when outcome is ok);
    /// watch: the counter value the event carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
    /// The resourceVersion the response or event carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rv: Option<u64>,
    /// watch: ADDED, MODIFIED, DELETED, BOOKMARK, ERROR, `connect`, `read`
    /// (the GET the watch starts from), `broken` (the stream failed) or
    /// `closed` (the server ended it); write: `read` (the GET before an
    /// update); informer: see `probe::informer::event`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// This request retries the one with this `seq` (the server refused that
    /// one unprocessed, with GOAWAY): a client sees only the retry's outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_of: Option<u64>,
    /// write: the resourceVersion the update was conditional on (the
    /// counter's version it replaces). Absent in records made before it
    /// was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_rv: Option<u64>,
    /// lease: the candidate's identity (`cpmlab-<seed>`); its seed is `seed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<String>,
    /// lease: the lease's holderIdentity as read or written (empty: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// lease: the lease's renewTime as read or written, ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_unix_ms: Option<f64>,
}

impl Record {
    /// A request's record with what every record has; the rest (status,
    /// seed, value, event, ...) is none until the lane fills it in.
    pub fn new(
        seq: u64,
        probe: ProbeKind,
        mode: ConnMode,
        (start_unix_ms, start_mono_ms): (f64, f64),
        duration_ms: f64,
        outcome: Outcome,
    ) -> Record {
        Record {
            seq,
            probe,
            mode,
            start_unix_ms,
            start_mono_ms,
            duration_ms,
            outcome,
            http_status: None,
            seed: None,
            server: None,
            addr: None,
            error: None,
            value: None,
            rv: None,
            event: None,
            retry_of: None,
            base_rv: None,
            candidate: None,
            holder: None,
            renew_unix_ms: None,
        }
    }
}

/// What the probes were told to do, kept as `probes.json` in the run
/// directory: which lanes ran, so that a lane without a record is blind,
/// not absent. Runs made before it was kept have none: then the lanes are
/// those the records show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbePlan {
    pub probes: Vec<ProbeKind>,
    pub modes: Vec<ConnMode>,
    /// Requests per second per probe and mode.
    pub rate: f64,
    /// The per-request timeout, ms.
    pub timeout_ms: f64,
    /// The write load's creates per second (0: none).
    #[serde(default)]
    pub write_rate: f64,
}

/// The file `ProbePlan` is kept in.
pub const PROBES_FILE: &str = "probes.json";

/// What was read back after a run, kept as `final.json` in the run
/// directory so the run can be judged again: the counter through the API,
/// and the counter's history from etcd.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FinalRead {
    /// The counter's value as the API returned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_rv: Option<u64>,
    /// Why the counter could not be read (after every attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_error: Option<String>,
    #[serde(default)]
    pub counter_attempts: u32,
    /// Every version of the counter in etcd, oldest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<HistoryEntry>>,
    /// Why the history could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_error: Option<String>,
    /// Every version of the candidates' Lease in etcd, oldest first (runs
    /// with leader-election candidates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_history: Option<Vec<LeaseVersion>>,
    /// Why the Lease's history could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_history_error: Option<String>,
}

/// One version of the candidates' Lease in etcd.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseVersion {
    /// Its mod revision.
    pub rev: u64,
    /// The holderIdentity it names (one of the candidates' identities found
    /// in the stored object; empty when it names none).
    pub holder: String,
}

/// One version of the counter in etcd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub value: u64,
    /// Its mod revision (the resourceVersion the API returned for it).
    pub rev: u64,
}

/// The kind of the lab event that says what ran (the exposure, the
/// migration's order, plan and handovers): the report's header shows it.
pub const SETTINGS_EVENT: &str = "settings";

/// Something that happened in the lab during a run: a phase (migration
/// step), a fault, a link change, what ran (`settings`). Phases and
/// faults with an end are bands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabEvent {
    pub at_unix_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_unix_ms: Option<f64>,
    /// `phase`, `fault`, `link`, `note`, `settings`
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// A migration step's outcome, as its condition ended (`True`,
    /// `False`, `Unknown`); none on other events and in older layouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// A leader-election candidate's records (`ProbeKind::Lease`): `event` is
/// one of these. `GET`, `CREATE` and `UPDATE` are requests of the lock (with
/// outcome, latency, and the lease as read or written in `holder` and
/// `renew_unix_ms`); the others are moments (duration 0).
pub mod lease_event {
    /// The candidate process started (`detail`-free; its settings are in the
    /// lab event that started it).
    pub const START: &str = "start";
    pub const GET: &str = "get";
    pub const CREATE: &str = "create";
    pub const UPDATE: &str = "update";
    /// client-go's OnStartedLeading: from here the candidate believes it leads.
    pub const STARTED_LEADING: &str = "started-leading";
    /// client-go's OnStoppedLeading: it no longer believes it leads.
    pub const STOPPED_LEADING: &str = "stopped-leading";
    /// client-go's OnNewLeader: the holder it observed changed (`holder`).
    pub const NEW_LEADER: &str = "new-leader";
    /// The lab stopped it (SIGTERM: client-go releases the lease on cancel).
    pub const STOP: &str = "stop";
    /// The lab froze it (SIGSTOP): it still believes what it believed.
    pub const PAUSED: &str = "paused";
    /// The lab let it go on (SIGCONT).
    pub const RESUMED: &str = "resumed";
    /// The lab killed it (SIGKILL): no release; its belief ends with it.
    pub const KILLED: &str = "killed";
    /// The process ended by itself (`error` says why).
    pub const EXITED: &str = "exited";

    /// The records that are requests of the lock.
    pub fn is_request(event: Option<&str>) -> bool {
        matches!(event, Some(GET | CREATE | UPDATE))
    }
}

/// The informer's records: `event` is one of these.
pub mod informer_event {
    /// A LIST request (the tower layer; outcome of the response head).
    pub const LIST: &str = "list";
    /// A WATCH request (the tower layer; outcome of the response head).
    pub const WATCH: &str = "watch";
    /// The watcher starts a (re)list: the first is the initial list.
    pub const INIT: &str = "init";
    /// The counter's state in a (re)list.
    pub const INIT_APPLY: &str = "init-apply";
    /// The (re)list is complete; watching from its revision.
    pub const SYNCED: &str = "synced";
    /// A watch event for the counter (ADDED or MODIFIED).
    pub const APPLY: &str = "apply";
    /// The counter was deleted.
    pub const DELETE: &str = "delete";
    /// A list or watch request failed; its `list`/`watch` record is the
    /// request, this one carries the watcher's message.
    pub const REQUEST_FAILED: &str = "request-failed";
    /// The server ended a watch with 410 Gone: the watcher re-lists.
    pub const EXPIRED: &str = "expired";
    /// The server sent another ERROR event in a watch: the watch failed.
    pub const WATCH_ERROR: &str = "watch-error";
    /// A watch stream broke (reset, timeout, decode error).
    pub const WATCH_BROKE: &str = "watch-broke";
    /// A watch stream ended quietly (client-go's informer: an EOF, or a
    /// reset client-go takes for one).
    pub const WATCH_CLOSED: &str = "watch-closed";
    /// The lane could not start (no kube client).
    pub const SETUP_FAILED: &str = "setup-failed";

    /// The records that are requests of the API (and count for its
    /// availability): list and watch requests, and watches that failed
    /// after they started.
    pub fn is_request(event: Option<&str>) -> bool {
        matches!(
            event,
            Some(LIST | WATCH | WATCH_ERROR | WATCH_BROKE | SETUP_FAILED)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_compact_ndjson() {
        let mut r = Record::new(
            1,
            ProbeKind::Write,
            ConnMode::Reused,
            (1.5, 0.5),
            2.0,
            Outcome::Ok,
        );
        r.http_status = Some(200);
        r.seed = Some("seed-a".into());
        r.value = Some(7);
        r.rv = Some(42);
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.contains(r#""probe":"write""#) && line.contains(r#""mode":"reused""#));
        assert!(
            !line.contains("server"),
            "absent fields are omitted: {line}"
        );
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), r);
    }
}
