//! How probes reach the shoot API: the API name resolved through the lab's
//! DNS (cached for the record's TTL, as a client library would), TLS with
//! the API name as SNI, and either a new HTTP/1.1 connection per request,
//! one long-lived HTTP/2 connection that is re-established only when it
//! breaks (GOAWAY, reset), as kubectl and client-go keep theirs, or a pool
//! of HTTP/1.1 keep-alive connections, as urllib3 keeps them for
//! Kubernetes' Python client.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use tokio::sync::Mutex;

use super::record::Outcome;
use super::target::Resolve;

/// A failed request: its class and the message.
#[derive(Debug, Clone)]
pub struct Failure {
    pub outcome: Outcome,
    pub error: String,
    pub addr: Option<SocketAddr>,
}

impl Failure {
    fn new(outcome: Outcome, error: impl Into<String>, addr: Option<SocketAddr>) -> Self {
        Failure {
            outcome,
            error: error.into(),
            addr,
        }
    }
}

/// An attempt the server refused unprocessed: a stream a GOAWAY refused
/// (retried at once) or a 429/5xx with Retry-After (retried after it).
#[derive(Debug, Clone)]
pub struct Refused {
    pub started: Instant,
    pub ended: Instant,
    pub failure: Failure,
}

/// Who answered a request, and how.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub seed: Option<String>,
    pub server: Option<String>,
    pub addr: SocketAddr,
}

/// A response, read whole (or, for watches, still streaming).
pub struct Reply {
    pub status: u16,
    /// A 429 or 5xx's Retry-After: the server did not process the request
    /// and asks for it again after this long (kube-apiserver during a
    /// graceful shutdown, after its delay: 429, `Retry-After: 5`).
    pub retry_after: Option<Duration>,
    pub seed: Option<String>,
    pub server: Option<String>,
    pub addr: SocketAddr,
    pub body: hyper::body::Incoming,
}

impl Reply {
    pub fn answer(&self) -> Answer {
        Answer {
            status: self.status,
            seed: self.seed.clone(),
            server: self.server.clone(),
            addr: self.addr,
        }
    }

    pub async fn bytes(self, deadline: Instant) -> Result<(u16, Bytes), Failure> {
        let addr = self.addr;
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, self.body.collect()).await {
            Ok(Ok(b)) => Ok((self.status, b.to_bytes())),
            Ok(Err(e)) => Err(classify_hyper(&e, Some(addr))),
            Err(_) => Err(Failure::new(Outcome::Timeout, "body timed out", Some(addr))),
        }
    }
}

/// The server's name as addresses: through the lab DNS (cached for the
/// record's TTL, as a client library would), the host's resolver, or the
/// fixed address a kubeconfig gives.
pub struct Resolver {
    how: Resolve,
    name: String,
    cache: Mutex<Option<(Vec<IpAddr>, Instant)>>,
    /// How long an answer is kept past its TTL (zero: as the record says;
    /// the `late-dns` lane's resolvers keep it longer).
    past_ttl: Duration,
    /// The share of its lifetime the first answer is kept (1: all of it):
    /// caches filled at once but staggered so, refresh at spread times.
    first_share: f64,
}

impl Resolver {
    pub fn new(how: Resolve, name: &str) -> Resolver {
        Resolver {
            how,
            name: name.to_string(),
            cache: Mutex::new(None),
            past_ttl: Duration::ZERO,
            first_share: 1.0,
        }
    }

    /// As [`Resolver::new`], each answer kept `past_ttl` longer than its
    /// TTL: a cache that outlives the record (the `late-dns` lane); its
    /// first answer kept `first_share` (0 to 1) of that lifetime.
    pub fn late(how: Resolve, name: &str, past_ttl: Duration, first_share: f64) -> Resolver {
        Resolver {
            past_ttl,
            first_share: first_share.clamp(0.0, 1.0),
            ..Resolver::new(how, name)
        }
    }

    /// The `late-dns` lane's clients: `n` caches, each keeping its answers
    /// `past_ttl` past the TTL, whose first answers are kept 1/n, 2/n, …,
    /// n/n of their lifetime, so that their refreshes spread evenly over
    /// it. Whenever the API's record moves, one of them refreshed at most
    /// 1/n of TTL + `past_ttl` before: the fleet's latest client, which
    /// keeps the old answer about TTL + `past_ttl` after the move, is
    /// among them in every run, not in one run of n.
    pub fn late_fleet(how: &Resolve, name: &str, past_ttl: Duration, n: usize) -> Vec<Resolver> {
        (1..=n.max(1))
            .map(|i| Resolver::late(how.clone(), name, past_ttl, i as f64 / n.max(1) as f64))
            .collect()
    }

    /// The name's addresses: from the cache while its answer is fresh
    /// (the record's TTL, plus `past_ttl`), else asked again. A fixed
    /// address needs no cache; the host's resolver gives no TTL, so its
    /// answers are kept only `past_ttl` (none: each lookup its own, side
    /// by side).
    pub async fn resolve(&self) -> Result<Vec<IpAddr>, Failure> {
        let uncached = match self.how {
            Resolve::Fixed(_) => true,
            Resolve::System => self.past_ttl.is_zero(),
            Resolve::Lab(_) => false,
        };
        if uncached {
            return self.lookup().await.map(|(ips, _)| ips);
        }
        let mut c = self.cache.lock().await;
        if let Some((ips, until)) = c.as_ref() {
            if Instant::now() < *until {
                return Ok(ips.clone());
            }
        }
        let (ips, ttl) = self.lookup().await?;
        let life = ttl + self.past_ttl;
        let life = if c.is_none() {
            life.mul_f64(self.first_share)
        } else {
            life
        };
        *c = Some((ips.clone(), Instant::now() + life));
        Ok(ips)
    }

    /// The name's addresses and their TTL, asked afresh.
    async fn lookup(&self) -> Result<(Vec<IpAddr>, Duration), Failure> {
        let (ips, ttl): (Vec<IpAddr>, Duration) = match &self.how {
            Resolve::Fixed(ip) => (vec![*ip], Duration::ZERO),
            Resolve::System => {
                let found = tokio::net::lookup_host((self.name.as_str(), 0))
                    .await
                    .map_err(|e| Failure::new(Outcome::Dns, format!("{}: {e}", self.name), None))?;
                (found.map(|a| a.ip()).collect(), Duration::ZERO)
            }
            Resolve::Lab(dns) => {
                let (ips, ttl) = crate::dns::query_a(*dns, &self.name, Duration::from_secs(1))
                    .await
                    .map_err(|e| Failure::new(Outcome::Dns, e.to_string(), None))?;
                (
                    ips.into_iter().map(IpAddr::V4).collect(),
                    Duration::from_secs(u64::from(ttl.unwrap_or(0))),
                )
            }
        };
        if ips.is_empty() {
            return Err(Failure::new(
                Outcome::Dns,
                format!("no address for {}", self.name),
                None,
            ));
        }
        Ok((ips, ttl))
    }
}

/// Did the server refuse the request before processing it? A stream above
/// the last one a GOAWAY announced (or opened after it) fails with the
/// peer's GOAWAY; REFUSED_STREAM says the same per stream (RFC 9113 8.7);
/// a connection that closed before the request was written never carried
/// it. Go's HTTP/2 transport sends those again at once, so client-go's
/// callers never see them; the probes do the same and record both.
pub fn refused_unprocessed(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if let Some(h) = c.downcast_ref::<hyper::Error>() {
            if h.is_canceled() || h.is_closed() {
                return true;
            }
        }
        if let Some(h) = c.downcast_ref::<h2::Error>() {
            // A graceful GOAWAY (NO_ERROR) reaches only unprocessed streams:
            // streams it let finish end normally.
            let graceful_goaway =
                h.is_go_away() && h.is_remote() && h.reason() == Some(h2::Reason::NO_ERROR);
            if graceful_goaway || h.reason() == Some(h2::Reason::REFUSED_STREAM) {
                return true;
            }
        }
        cur = c.source();
    }
    false
}

/// A 429 or 5xx's Retry-After (whole seconds), as client-go honours it:
/// the server did not process the request and asks for it again then.
pub fn retry_after(status: u16, headers: &hyper::HeaderMap) -> Option<Duration> {
    if status != 429 && !(500..=504).contains(&status) {
        return None;
    }
    let secs = headers
        .get(hyper::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(Duration::from_secs(secs))
}

/// Classifies an I/O error the way the verdict reports it.
pub fn classify_io(e: &std::io::Error, addr: Option<SocketAddr>) -> Failure {
    use std::io::ErrorKind::*;
    let outcome = match e.kind() {
        ConnectionRefused => Outcome::Refused,
        ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof => Outcome::Reset,
        TimedOut => Outcome::Timeout,
        _ if e.to_string().contains("certificate") || e.to_string().contains("tls") => Outcome::Tls,
        _ => Outcome::Error,
    };
    Failure::new(outcome, e.to_string(), addr)
}

pub fn classify_hyper(e: &hyper::Error, addr: Option<SocketAddr>) -> Failure {
    let msg = format!("{e}");
    let src = std::error::Error::source(e)
        .map(|s| s.to_string())
        .unwrap_or_default();
    let outcome = if e.is_timeout() {
        Outcome::Timeout
    } else if e.is_closed()
        || e.is_incomplete_message()
        || msg.contains("reset")
        || src.contains("reset")
        || msg.contains("GOAWAY")
        || src.contains("go away")
    {
        Outcome::Reset
    } else {
        Outcome::Error
    };
    let full = if src.is_empty() {
        msg
    } else {
        format!("{msg}: {src}")
    };
    Failure::new(outcome, full, addr)
}

/// Connection settings shared by every probe.
pub struct Transport {
    pub resolver: Resolver,
    /// The `late-dns` lane's resolvers (`Resolver::late_fleet`), taken in
    /// turn request by request; none: that lane resolves as `new` does.
    pub late_resolvers: Vec<Resolver>,
    next_late: std::sync::atomic::AtomicUsize,
    /// The `seed-bound` lane's resolver, of the seed-bound name (none:
    /// that lane fails every request, saying so).
    pub seed_bound: Option<Resolver>,
    pub api_name: String,
    pub port: u16,
    /// The bearer token (none: a client certificate says who we are).
    pub token: Option<String>,
    pub tls: Arc<rustls::ClientConfig>,
    /// Gateway address -> seed, for servers that do not say (real kube-apiserver).
    pub seeds_by_addr: Vec<(Ipv4Addr, String)>,
    h2: H2Slot,
    /// The shoot node's apiserver-proxy (`node` lane), and its connection.
    pub node: Option<SocketAddr>,
    h2_node: H2Slot,
    /// The keep-alive lane's idle connections.
    h1_pool: Mutex<Vec<(http1::SendRequest<Full<Bytes>>, SocketAddr)>>,
    next_ip: std::sync::atomic::AtomicUsize,
}

/// The two lanes that keep one HTTP/2 connection: where each connects and
/// when a failed request ends its connection.
#[derive(Debug, Clone, Copy)]
enum KeptH2 {
    /// The API's name, through DNS; any failure ends the connection.
    Reused,
    /// The shoot node's apiserver-proxy, as client-go keeps a connection:
    /// its pings decide, a timed-out request does not; a closed connection
    /// or a GOAWAY ends it.
    Node(SocketAddr),
}

impl KeptH2 {
    fn slot(self, t: &Transport) -> &H2Slot {
        match self {
            KeptH2::Reused => &t.h2,
            KeptH2::Node(_) => &t.h2_node,
        }
    }

    fn to(self) -> Option<SocketAddr> {
        match self {
            KeptH2::Reused => None,
            KeptH2::Node(a) => Some(a),
        }
    }

    fn client_go_pings(self) -> bool {
        matches!(self, KeptH2::Node(_))
    }

    fn gives_up(self, closed: bool, timed_out: bool, unprocessed: bool) -> bool {
        match self {
            KeptH2::Reused => true,
            KeptH2::Node(_) => !timed_out && (closed || unprocessed),
        }
    }
}

type H2Slot = Mutex<Option<(http2::SendRequest<Full<Bytes>>, SocketAddr)>>;

/// client-go's HTTP/2 health check (k8s.io/apimachinery
/// pkg/util/net/http.go: `readIdleTimeout` 30 s, `pingTimeout` 15 s).
pub const CLIENT_GO_READ_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
pub const CLIENT_GO_PING_TIMEOUT: Duration = Duration::from_secs(15);

/// urllib3's `Retry.DEFAULT` (total 3, no backoff), which Kubernetes'
/// Python client keeps when its configuration sets no retries.
pub const KEEPALIVE_RETRIES: u32 = 3;
/// Idle connections the keep-alive pool keeps at most (urllib3's pool is
/// bounded the same way; Kubernetes' Python client sizes it 5 per CPU).
pub const KEEPALIVE_POOL: usize = 10;

/// Whether urllib3 sends a request again after it failed on the wire
/// (`Retry.DEFAULT_ALLOWED_METHODS`): idempotent methods, not POST or PATCH.
pub fn urllib3_retries(method: &str) -> bool {
    matches!(
        method,
        "GET" | "HEAD" | "PUT" | "DELETE" | "OPTIONS" | "TRACE"
    )
}

async fn connect_tls(
    t: &Transport,
    deadline: Instant,
    alpn_h2: bool,
    to: Option<SocketAddr>,
    resolver: &Resolver,
) -> Result<
    (
        tokio_rustls::client::TlsStream<crate::lab_net::LabStream>,
        SocketAddr,
    ),
    Failure,
> {
    let addr = match to {
        Some(a) => a,
        None => {
            let ips = resolver.resolve().await?;
            let i = t.next_ip.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % ips.len();
            SocketAddr::from((ips[i], t.port))
        }
    };
    let left = deadline.saturating_duration_since(Instant::now());
    // `lab_net`: direct in the lab's containers; on a host that cannot
    // reach the lab (`cpmlab fill`), through the relay.
    let tcp = match tokio::time::timeout(left, crate::lab_net::connect(addr)).await {
        Err(_) => {
            return Err(Failure::new(
                Outcome::Timeout,
                "connect timed out",
                Some(addr),
            ))
        }
        Ok(Err(e)) => return Err(classify_io(&e, Some(addr))),
        Ok(Ok(s)) => s,
    };
    let mut cfg = (*t.tls).clone();
    cfg.alpn_protocols = if alpn_h2 {
        vec![b"h2".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    // The server name is the resolved one's: the API's, or the seed-bound
    // name for that lane.
    let name = ServerName::try_from(resolver.name.clone())
        .map_err(|e| Failure::new(Outcome::Tls, e.to_string(), Some(addr)))?;
    let left = deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout(
        left,
        tokio_rustls::TlsConnector::from(Arc::new(cfg)).connect(name, tcp),
    )
    .await
    {
        Err(_) => Err(Failure::new(
            Outcome::Timeout,
            "TLS handshake timed out",
            Some(addr),
        )),
        Ok(Err(e)) => {
            let mut f = classify_io(&e, Some(addr));
            if f.outcome == Outcome::Error {
                f.outcome = Outcome::Tls;
            }
            Err(f)
        }
        Ok(Ok(s)) => Ok((s, addr)),
    }
}

fn request(
    t: &Transport,
    method: &str,
    path: &str,
    body: Option<Vec<u8>>,
) -> hyper::Request<Full<Bytes>> {
    request_to(t, &t.api_name, method, path, body)
}

/// A request to `host` (the `Host` header): the API's name, or the
/// seed-bound lane's.
fn request_to(
    t: &Transport,
    host: &str,
    method: &str,
    path: &str,
    body: Option<Vec<u8>>,
) -> hyper::Request<Full<Bytes>> {
    let mut b = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", host)
        .header("accept", "application/json")
        .header("user-agent", "cpmlab-probe");
    if let Some(token) = &t.token {
        b = b.header("authorization", format!("Bearer {token}"));
    }
    if body.is_some() {
        b = b.header("content-type", "application/json");
    }
    b.body(Full::new(Bytes::from(body.unwrap_or_default())))
        .expect("valid request")
}

impl Transport {
    pub fn new(
        resolver: Resolver,
        api_name: &str,
        port: u16,
        token: Option<String>,
        tls: Arc<rustls::ClientConfig>,
        seeds_by_addr: Vec<(Ipv4Addr, String)>,
    ) -> Transport {
        Transport {
            resolver,
            late_resolvers: Vec::new(),
            seed_bound: None,
            next_late: Default::default(),
            api_name: api_name.to_string(),
            port,
            token,
            tls,
            seeds_by_addr,
            h2: Mutex::new(None),
            node: None,
            h2_node: Mutex::new(None),
            h1_pool: Mutex::new(Vec::new()),
            next_ip: Default::default(),
        }
    }

    fn reply(&self, resp: hyper::Response<hyper::body::Incoming>, addr: SocketAddr) -> Reply {
        let h = |k: &str| {
            resp.headers()
                .get(k)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let seed = h("x-cpmlab-seed").or_else(|| {
            self.seeds_by_addr
                .iter()
                .find(|(ip, _)| SocketAddr::from((*ip, self.port)) == addr)
                .map(|(_, s)| s.clone())
        });
        let server = h("x-cpmlab-server");
        let status = resp.status().as_u16();
        let retry_after = retry_after(status, resp.headers());
        Reply {
            status,
            retry_after,
            seed,
            server,
            addr,
            body: resp.into_body(),
        }
    }

    /// A request on a new HTTP/1.1 connection of its own.
    pub async fn send_new(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        deadline: Instant,
    ) -> Result<Reply, Failure> {
        self.send_fresh(&self.resolver, method, path, body, deadline)
            .await
    }

    /// A request on a new HTTP/1.1 connection of its own, to an address
    /// `resolver` gives.
    async fn send_fresh(
        &self,
        resolver: &Resolver,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        deadline: Instant,
    ) -> Result<Reply, Failure> {
        let (tls, addr) = connect_tls(self, deadline, false, None, resolver).await?;
        let (mut sender, conn) = http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| classify_hyper(&e, Some(addr)))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let req = request_to(self, &resolver.name, method, path, body);
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, sender.send_request(req)).await {
            Err(_) => Err(Failure::new(
                Outcome::Timeout,
                "request timed out",
                Some(addr),
            )),
            Ok(Err(e)) => Err(classify_hyper(&e, Some(addr))),
            Ok(Ok(resp)) => Ok(self.reply(resp, addr)),
        }
    }

    /// A request on the shared HTTP/2 connection, (re)connecting if needed.
    /// A request the server refused unprocessed (the connection was already
    /// going away: GOAWAY) is retried once on a new connection, as Go's
    /// HTTP/2 transport (and so client-go) does; the refused attempt is
    /// returned beside the outcome, so that both are recorded.
    pub async fn send_reused(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        deadline: Instant,
    ) -> (Result<Reply, Failure>, Option<Refused>) {
        self.send_kept(KeptH2::Reused, method, path, body, deadline)
            .await
    }

    /// A request on the `node` lane: the kept connection to the shoot
    /// node's apiserver-proxy, as client-go keeps its own. A request that
    /// timed out leaves the connection in place (Go's transport does not
    /// give a connection up for a request's deadline; its pings decide);
    /// one refused unprocessed (GOAWAY, REFUSED_STREAM) is sent again at
    /// once on a new connection.
    pub async fn send_node(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        deadline: Instant,
    ) -> (Result<Reply, Failure>, Option<Refused>) {
        let Some(node) = self.node else {
            return (
                Err(Failure::new(
                    Outcome::Error,
                    "the node lane has no apiserver-proxy (--node)",
                    None,
                )),
                None,
            );
        };
        self.send_kept(KeptH2::Node(node), method, path, body, deadline)
            .await
    }

    /// A request on a kept HTTP/2 connection of `lane`; a request refused
    /// unprocessed is sent again once on a new connection, the refused
    /// attempt returned beside the outcome.
    async fn send_kept(
        &self,
        lane: KeptH2,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        deadline: Instant,
    ) -> (Result<Reply, Failure>, Option<Refused>) {
        let mut refused = None;
        loop {
            let started = Instant::now();
            let (mut sender, addr) = match self.h2_sender(lane, deadline).await {
                Ok(x) => x,
                Err(f) => return (Err(f), refused),
            };
            let req = request(self, method, path, body.clone());
            let left = deadline.saturating_duration_since(Instant::now());
            let (f, unprocessed, timed_out) =
                match tokio::time::timeout(left, sender.send_request(req)).await {
                    Ok(Ok(resp)) => return (Ok(self.reply(resp, addr)), refused),
                    Err(_) => (
                        Failure::new(Outcome::Timeout, "request timed out", Some(addr)),
                        false,
                        true,
                    ),
                    Ok(Err(e)) => (
                        classify_hyper(&e, Some(addr)),
                        refused_unprocessed(&e),
                        false,
                    ),
                };
            let mut g = lane.slot(self).lock().await;
            if g.as_ref().is_some_and(|(s, a)| {
                *a == addr && lane.gives_up(s.is_closed(), timed_out, unprocessed)
            }) {
                *g = None;
            }
            drop(g);
            if !unprocessed || refused.is_some() {
                return (Err(f), refused);
            }
            refused = Some(Refused {
                started,
                ended: Instant::now(),
                failure: f,
            });
        }
    }

    /// A request on a pooled HTTP/1.1 keep-alive connection, as urllib3
    /// sends it: an idle connection the server closed is not used (urllib3
    /// checks `is_connection_dropped` first); a new connection when none is
    /// idle; back to the pool after the answer unless the server said
    /// `Connection: close`. A failure before the request left (connect,
    /// TLS) is retried for any method, one on the wire only for idempotent
    /// methods, up to [`KEEPALIVE_RETRIES`] times with no pause (a reused
    /// connection's failure before any answer does not count: it is sent
    /// again on another, as Go's net/http does); the first
    /// failed attempt is returned beside the outcome, so that both are
    /// recorded.
    pub async fn send_keepalive(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        deadline: Instant,
    ) -> (Result<Reply, Failure>, Option<Refused>) {
        let mut first: Option<Refused> = None;
        let mut retries = 0;
        // Failures on reused connections: bounded by the pool, not by
        // `retries` (every idle connection may be one the server closed).
        let mut stale = 0;
        loop {
            let started = Instant::now();
            let idle = self.h1_idle().await;
            let reused = idle.is_some();
            let sent = match idle {
                Some(s) => Ok(s),
                None => match connect_tls(self, deadline, false, None, &self.resolver).await {
                    Ok((tls, addr)) => match http1::handshake(TokioIo::new(tls)).await {
                        Ok((s, conn)) => {
                            tokio::spawn(async move {
                                let _ = conn.await;
                            });
                            Ok((s, addr))
                        }
                        Err(e) => Err(classify_hyper(&e, Some(addr))),
                    },
                    Err(f) => Err(f),
                },
            };
            let (failure, on_wire) = match sent {
                Err(f) => (f, false),
                Ok((mut sender, addr)) => {
                    let req = request(self, method, path, body.clone());
                    let left = deadline.saturating_duration_since(Instant::now());
                    match tokio::time::timeout(left, sender.send_request(req)).await {
                        Err(_) => {
                            let f = Failure::new(Outcome::Timeout, "request timed out", Some(addr));
                            return (Err(f), first);
                        }
                        Ok(Ok(resp)) => {
                            let close = resp
                                .headers()
                                .get(hyper::header::CONNECTION)
                                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
                            if !close {
                                self.h1_return(sender, addr).await;
                            }
                            return (Ok(self.reply(resp, addr)), first);
                        }
                        // A request hyper never wrote (the connection was
                        // already closed) did not leave.
                        Ok(Err(e)) => (classify_hyper(&e, Some(addr)), !e.is_canceled()),
                    }
                }
            };
            let replayable = !on_wire || urllib3_retries(method);
            // A reused connection that failed before any answer is one the
            // server closed while it was idle (or as the request went
            // out): sent again on another connection without counting, as
            // Go's net/http does (`persistConn.shouldRetryRequest`); a new
            // connection's failure counts against the retries.
            let free = reused && replayable && stale <= KEEPALIVE_POOL;
            let again =
                (free || retries < KEEPALIVE_RETRIES && replayable) && Instant::now() < deadline;
            if !again {
                return (Err(failure), first);
            }
            if free {
                stale += 1;
            } else {
                retries += 1;
            }
            first.get_or_insert(Refused {
                started,
                ended: Instant::now(),
                failure,
            });
        }
    }

    /// An idle pooled connection the server has not closed (those it closed
    /// are dropped), if any.
    async fn h1_idle(&self) -> Option<(http1::SendRequest<Full<Bytes>>, SocketAddr)> {
        let mut pool = self.h1_pool.lock().await;
        pool.retain(|(s, _)| !s.is_closed());
        let i = pool.iter().position(|(s, _)| s.is_ready())?;
        Some(pool.swap_remove(i))
    }

    async fn h1_return(&self, sender: http1::SendRequest<Full<Bytes>>, addr: SocketAddr) {
        let mut pool = self.h1_pool.lock().await;
        pool.retain(|(s, _)| !s.is_closed());
        if pool.len() < KEEPALIVE_POOL {
            pool.push((sender, addr));
        }
    }

    /// `lane`'s connection, a new one when it has none that is usable.
    async fn h2_sender(
        &self,
        lane: KeptH2,
        deadline: Instant,
    ) -> Result<(http2::SendRequest<Full<Bytes>>, SocketAddr), Failure> {
        let mut g = lane.slot(self).lock().await;
        let usable = g
            .as_ref()
            .is_some_and(|(s, _)| !s.is_closed() && s.is_ready());
        if !usable {
            let (tls, addr) = connect_tls(self, deadline, true, lane.to(), &self.resolver).await?;
            let mut b = http2::Builder::new(TokioExecutor::new());
            if lane.client_go_pings() {
                b.timer(hyper_util::rt::TokioTimer::new())
                    .keep_alive_interval(CLIENT_GO_READ_IDLE_TIMEOUT)
                    .keep_alive_timeout(CLIENT_GO_PING_TIMEOUT);
            }
            let (sender, conn) = b
                .handshake(TokioIo::new(tls))
                .await
                .map_err(|e| classify_hyper(&e, Some(addr)))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            *g = Some((sender, addr));
        }
        let (s, a) = g.as_ref().expect("connected");
        Ok((s.clone(), *a))
    }

    /// A request in `mode`; with it, the attempt the server refused
    /// unprocessed before the retry, if there was one. A 429 or 5xx with
    /// Retry-After is sent again once after the time it asks for, when
    /// that fits before `deadline`, as client-go does for every verb (the
    /// server did not process it); otherwise it is the answer.
    pub async fn send(
        &self,
        mode: super::record::ConnMode,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        deadline: Instant,
    ) -> (Result<Reply, Failure>, Option<Refused>) {
        let started = Instant::now();
        let (res, refused) = self
            .send_once(mode, method, path, body.clone(), deadline)
            .await;
        let wait = match &res {
            Ok(rep) => rep.retry_after,
            Err(_) => None,
        };
        match (res, wait) {
            (Ok(rep), Some(wait)) if Instant::now() + wait < deadline => {
                let ended = Instant::now();
                let failure = Failure::new(
                    Outcome::Http,
                    format!(
                        "HTTP {} with Retry-After: {} s; sent again after it",
                        rep.status,
                        wait.as_secs()
                    ),
                    Some(rep.addr),
                );
                drop(rep);
                tokio::time::sleep(wait).await;
                let (again, _) = self.send_once(mode, method, path, body, deadline).await;
                let first = refused.unwrap_or(Refused {
                    started,
                    ended,
                    failure,
                });
                (again, Some(first))
            }
            (res, _) => (res, refused),
        }
    }

    async fn send_once(
        &self,
        mode: super::record::ConnMode,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        deadline: Instant,
    ) -> (Result<Reply, Failure>, Option<Refused>) {
        match mode {
            super::record::ConnMode::New => {
                (self.send_new(method, path, body, deadline).await, None)
            }
            super::record::ConnMode::Reused => self.send_reused(method, path, body, deadline).await,
            super::record::ConnMode::Keepalive => {
                self.send_keepalive(method, path, body, deadline).await
            }
            super::record::ConnMode::Node => self.send_node(method, path, body, deadline).await,
            super::record::ConnMode::LateDns => {
                let n = self.late_resolvers.len();
                let r = if n == 0 {
                    &self.resolver
                } else {
                    let i = self
                        .next_late
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    &self.late_resolvers[i % n]
                };
                (self.send_fresh(r, method, path, body, deadline).await, None)
            }
            super::record::ConnMode::SeedBound => match &self.seed_bound {
                Some(r) => (self.send_fresh(r, method, path, body, deadline).await, None),
                None => (
                    Err(Failure::new(
                        Outcome::Error,
                        "the seed-bound lane has no seed-bound name (--seed-bound-name)",
                        None,
                    )),
                    None,
                ),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How a test server treats each connection: answer this many requests
    /// on it, then close it (after reading one more request, unanswered,
    /// when `swallow`).
    #[derive(Clone, Copy)]
    struct Serve {
        answers: usize,
        swallow: bool,
    }

    /// An HTTPS/1.1 server on 127.0.0.1 with a lab CA's certificate for
    /// `api.test`; returns the transport that reaches it and the count of
    /// connections it accepted.
    async fn h1_server(serve: Serve) -> (Transport, Arc<std::sync::atomic::AtomicUsize>) {
        use rustls::pki_types::pem::PemObject;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let ca = crate::pki::Ca::generate("t").unwrap();
        let ck = ca.issue_member("api", &["api.test".into()], &[]).unwrap();
        let certs: Vec<_> =
            rustls::pki_types::CertificateDer::pem_slice_iter(ck.cert_pem.as_bytes())
                .map(Result::unwrap)
                .collect();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(ck.key_pem.as_bytes()).unwrap();
        let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut buf = Vec::new();
                    let mut answered = 0;
                    loop {
                        // One request head (the probes' GETs and these
                        // tests' bodies are small).
                        let mut chunk = [0u8; 4096];
                        match tls.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        if !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            continue;
                        }
                        buf.clear();
                        if answered == serve.answers {
                            // Read, never answered: the connection ends.
                            return;
                        }
                        answered += 1;
                        let _ = tls
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                            .await;
                        let _ = tls.flush().await;
                        if answered == serve.answers && !serve.swallow {
                            let _ = tls.shutdown().await;
                            return;
                        }
                    }
                });
            }
        });
        let t = Transport::new(
            Resolver::new(Resolve::Fixed("127.0.0.1".parse().unwrap()), "api.test"),
            "api.test",
            port,
            None,
            crate::apiserver::client::tls_client(&ca.cert_pem).unwrap(),
            vec![],
        );
        (t, accepted)
    }

    async fn body(r: Result<Reply, Failure>) -> Result<String, String> {
        match r {
            Ok(rep) => {
                let (_, b) = rep
                    .bytes(Instant::now() + Duration::from_secs(5))
                    .await
                    .map_err(|f| f.error)?;
                Ok(String::from_utf8_lossy(&b).into_owned())
            }
            Err(f) => Err(f.error),
        }
    }

    /// The seed-bound lane connects by its own name, as SNI and `Host`: a
    /// server whose certificate holds only the API's name refuses it; one
    /// named as the certificate answers; and without a name every request
    /// fails saying why.
    #[tokio::test]
    async fn the_seed_bound_lane_connects_by_its_own_name() {
        use super::super::record::ConnMode;
        let deadline = || Instant::now() + Duration::from_secs(5);
        let (mut t, _) = h1_server(Serve {
            answers: 100,
            swallow: false,
        })
        .await;
        let (r, _) = t
            .send(ConnMode::SeedBound, "GET", "/", None, deadline())
            .await;
        let e = r.err().expect("no name, no request");
        assert!(e.error.contains("--seed-bound-name"), "{}", e.error);
        let fixed = || Resolve::Fixed("127.0.0.1".parse().unwrap());
        t.seed_bound = Some(Resolver::new(
            fixed(),
            "api-local--local.ingress.seed-a.test",
        ));
        let (r, _) = t
            .send(ConnMode::SeedBound, "GET", "/", None, deadline())
            .await;
        let e = r
            .err()
            .expect("the certificate does not hold the seed-bound name");
        assert_eq!(e.outcome, Outcome::Tls, "{}", e.error);
        t.seed_bound = Some(Resolver::new(fixed(), "api.test"));
        let (r, _) = t
            .send(ConnMode::SeedBound, "GET", "/", None, deadline())
            .await;
        assert_eq!(body(r).await.as_deref(), Ok("ok"));
    }

    #[tokio::test]
    async fn the_keepalive_lane_reuses_its_connections_as_urllib3_does() {
        let deadline = || Instant::now() + Duration::from_secs(5);
        let n = |a: &std::sync::atomic::AtomicUsize| a.load(std::sync::atomic::Ordering::SeqCst);
        // Kept open: three requests, one connection.
        let (t, accepted) = h1_server(Serve {
            answers: 100,
            swallow: false,
        })
        .await;
        for _ in 0..3 {
            let (r, first) = t.send_keepalive("GET", "/", None, deadline()).await;
            assert_eq!(body(r).await.as_deref(), Ok("ok"));
            assert!(first.is_none());
        }
        assert_eq!(n(&accepted), 1);
        // The server closes each connection after one answer: the next
        // request still succeeds (the closed connection dropped before
        // reuse, or the request it never sent retried), on a new one.
        let (t, accepted) = h1_server(Serve {
            answers: 1,
            swallow: false,
        })
        .await;
        for _ in 0..3 {
            let (r, _) = t
                .send_keepalive("POST", "/", Some(b"{}".to_vec()), deadline())
                .await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(body(r).await.as_deref(), Ok("ok"));
        }
        assert_eq!(n(&accepted), 3);
        // A request read and never answered: a GET is sent again, three
        // times (urllib3's Retry.DEFAULT), the first failure kept; a POST
        // is not.
        let (t, accepted) = h1_server(Serve {
            answers: 0,
            swallow: true,
        })
        .await;
        let (r, first) = t.send_keepalive("GET", "/", None, deadline()).await;
        assert!(r.is_err());
        assert!(first.is_some(), "the first failed attempt is returned");
        assert_eq!(n(&accepted), 1 + KEEPALIVE_RETRIES as usize);
        let (t, accepted) = h1_server(Serve {
            answers: 0,
            swallow: true,
        })
        .await;
        let (r, first) = t
            .send_keepalive("POST", "/", Some(b"{}".to_vec()), deadline())
            .await;
        assert!(r.is_err() && first.is_none());
        assert_eq!(n(&accepted), 1);
        assert!(urllib3_retries("PUT") && !urllib3_retries("PATCH"));
    }

    /// Every pooled connection is one the server drops as the next request
    /// goes out (it reads it and closes, unanswered): a GET is sent again on
    /// each in turn without using up its retries, then on a new connection,
    /// as Go's net/http does, and is answered there.
    #[tokio::test]
    async fn a_get_on_stale_pooled_connections_goes_on_to_a_new_one() {
        let deadline = || Instant::now() + Duration::from_secs(5);
        let (t, accepted) = h1_server(Serve {
            answers: 1,
            swallow: true,
        })
        .await;
        let pooled = 5;
        let warm = futures_util::future::join_all(
            (0..pooled).map(|_| t.send_keepalive("GET", "/", None, deadline())),
        )
        .await;
        for (r, _) in warm {
            assert_eq!(body(r).await.as_deref(), Ok("ok"));
        }
        let n = |a: &std::sync::atomic::AtomicUsize| a.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(n(&accepted), pooled);
        let (r, first) = t.send_keepalive("GET", "/", None, deadline()).await;
        assert_eq!(body(r).await.as_deref(), Ok("ok"));
        assert!(first.is_some(), "the first failed attempt is kept");
        assert!(pooled > KEEPALIVE_RETRIES as usize + 1);
        assert_eq!(n(&accepted), pooled + 1, "one new connection answered it");
    }

    /// Sends one request over HTTP/2 to a server that treats it with
    /// `serve`, and returns hyper's error.
    async fn failed_request<F, Fut>(serve: F) -> hyper::Error
    where
        F: FnOnce(h2::server::Connection<tokio::io::DuplexStream, Bytes>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let (client_io, server_io) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            let conn = h2::server::handshake(server_io).await.expect("handshake");
            serve(conn).await;
        });
        let (mut sender, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(client_io))
            .await
            .expect("client handshake");
        tokio::spawn(conn);
        let req = hyper::Request::get("https://api.test/")
            .body(Full::new(Bytes::new()))
            .unwrap();
        sender
            .send_request(req)
            .await
            .expect_err("the server refused it")
    }

    /// A request whose stream the server resets with `reason`.
    async fn stream_reset(reason: h2::Reason) -> hyper::Error {
        failed_request(move |mut conn| async move {
            if let Some(Ok((_, mut respond))) = conn.accept().await {
                respond.send_reset(reason);
            }
            while conn.accept().await.is_some() {}
        })
        .await
    }

    #[tokio::test]
    async fn a_graceful_goaway_and_refused_stream_are_unprocessed_a_reset_is_not() {
        // GOAWAY (NO_ERROR) before any stream was processed.
        let e = failed_request(|mut conn| async move {
            conn.abrupt_shutdown(h2::Reason::NO_ERROR);
            while conn.accept().await.is_some() {}
        })
        .await;
        assert!(refused_unprocessed(&e), "{e:?}");

        // The stream refused on its own.
        let e = stream_reset(h2::Reason::REFUSED_STREAM).await;
        assert!(refused_unprocessed(&e), "{e:?}");

        // A stream the server began and then broke may have been processed.
        let e = stream_reset(h2::Reason::INTERNAL_ERROR).await;
        assert!(!refused_unprocessed(&e), "{e:?}");

        // So may a connection that went away with an error.
        let e = failed_request(|mut conn| async move {
            let _held = conn.accept().await;
            conn.abrupt_shutdown(h2::Reason::INTERNAL_ERROR);
            while conn.accept().await.is_some() {}
        })
        .await;
        assert!(!refused_unprocessed(&e), "{e:?}");
    }

    /// A DNS server on 127.0.0.1 answering `api.test` with one A record of
    /// TTL 1 s, the address `answer` holds at the time of the question.
    async fn one_record_dns(answer: Arc<std::sync::atomic::AtomicU32>) -> SocketAddr {
        use hickory_proto::op::{Message, MessageType};
        use hickory_proto::rr::{rdata::A, RData, Record};
        let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = sock.local_addr().unwrap();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 512];
            while let Ok((n, from)) = sock.recv_from(&mut buf).await {
                let q = Message::from_vec(&buf[..n]).unwrap();
                let mut r = Message::new();
                r.set_id(q.id()).set_message_type(MessageType::Response);
                let name = q.queries()[0].name().clone();
                r.add_query(q.queries()[0].clone());
                let ip = Ipv4Addr::from(answer.load(std::sync::atomic::Ordering::SeqCst));
                r.add_answer(Record::from_rdata(name, 1, RData::A(A(ip))));
                let _ = sock.send_to(&r.to_vec().unwrap(), from).await;
            }
        });
        addr
    }

    /// The API's record before and after it moves.
    const OLD: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const MOVED: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// A DNS server answering [`OLD`] for `api.test` (TTL 1 s) and the
    /// switch that makes it answer [`MOVED`].
    async fn moving_record() -> (SocketAddr, impl Fn()) {
        let answer = Arc::new(std::sync::atomic::AtomicU32::new(OLD.into()));
        let dns = one_record_dns(answer.clone()).await;
        (dns, move || {
            answer.store(MOVED.into(), std::sync::atomic::Ordering::SeqCst)
        })
    }

    /// After the API's record changes, the `new` lane's resolver follows
    /// once the TTL (1 s) has passed; the `late-dns` lane's keeps the old
    /// answer `past_ttl` longer, then follows too.
    #[tokio::test]
    async fn a_late_resolver_keeps_the_old_answer_past_the_ttl() {
        let (dns, move_it) = moving_record().await;
        let new = Resolver::new(Resolve::Lab(dns), "api.test");
        let late = Resolver::late(Resolve::Lab(dns), "api.test", Duration::from_secs(60), 1.0);
        let late_by_1s = Resolver::late(Resolve::Lab(dns), "api.test", Duration::from_secs(1), 1.0);
        for r in [&new, &late, &late_by_1s] {
            assert_eq!(r.resolve().await.unwrap(), [IpAddr::V4(OLD)]);
        }
        move_it();
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        assert_eq!(new.resolve().await.unwrap(), [IpAddr::V4(MOVED)]);
        assert_eq!(
            late.resolve().await.unwrap(),
            [IpAddr::V4(OLD)],
            "kept 60 s past the TTL"
        );
        assert_eq!(
            late_by_1s.resolve().await.unwrap(),
            [IpAddr::V4(MOVED)],
            "kept 1 s past a 1 s TTL: gone after 2.5 s"
        );
    }

    /// A fleet's caches refresh at spread times: filled at once, the
    /// first of four (lifetime 1 s + 7 s) keeps its first answer a quarter
    /// of that, 2 s, the last all 8 s; once the record moved, by 3.5 s the
    /// first has the new answer and the last still the old one.
    #[tokio::test]
    async fn a_late_fleet_refreshes_at_spread_times() {
        let (dns, move_it) = moving_record().await;
        let fleet = Resolver::late_fleet(&Resolve::Lab(dns), "api.test", Duration::from_secs(7), 4);
        assert_eq!(fleet.len(), 4);
        for r in &fleet {
            assert_eq!(r.resolve().await.unwrap(), [IpAddr::V4(OLD)]);
        }
        move_it();
        tokio::time::sleep(Duration::from_millis(3_500)).await;
        assert_eq!(
            fleet[0].resolve().await.unwrap(),
            [IpAddr::V4(MOVED)],
            "kept 2 s"
        );
        assert_eq!(
            fleet[3].resolve().await.unwrap(),
            [IpAddr::V4(OLD)],
            "kept 8 s"
        );
    }
}
