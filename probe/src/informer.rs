//! The informer lane: the shoot API as its controllers see it. A kube-rs
//! watcher (list, then watch from that revision with bookmarks, re-list on
//! 410 Gone, re-watch with client-go's backoff when a stream ends or fails)
//! over the probe namespace's ConfigMaps, through one pooled HTTP/2
//! connection as client-go keeps it. It records every list and watch
//! request (a tower layer under the kube client), every (re)list, every
//! error the watcher surfaces, and every state of the counter ConfigMap it
//! sees, so the verdict can check that it never misses or reorders an
//! acknowledged write and measure how late it learns of each.

use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::Result;
use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;

use super::context::{Ctx, COUNTER};
use super::record::{ConnMode, Outcome, ProbeKind};
use super::transport::{refused_unprocessed, Resolver};

/// The informer's records: `event` is one of these.
pub use cpmlab_verdict::record::informer_event as event;

/// The lab DNS as hyper's resolver: the same TTL-cached lookup the other
/// probes use.
#[derive(Clone)]
struct LabDns(Arc<Resolver>);

impl tower::Service<hyper_util::client::legacy::connect::dns::Name> for LabDns {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _name: hyper_util::client::legacy::connect::dns::Name) -> Self::Future {
        let r = self.0.clone();
        Box::pin(async move {
            let ips = r
                .resolve()
                .await
                .map_err(|f| std::io::Error::other(f.error))?;
            // hyper sets the URI's port on each address.
            Ok(ips
                .into_iter()
                .map(|ip| SocketAddr::from((ip, 0)))
                .collect::<Vec<_>>()
                .into_iter())
        })
    }
}

/// Records each list and watch request the kube client sends: when, how
/// the response head came back, and which seed answered.
#[derive(Clone)]
struct RecordRequests<S> {
    inner: S,
    ctx: Arc<Ctx>,
}

impl<S, B> tower::Service<hyper::Request<kube::client::Body>> for RecordRequests<S>
where
    S: tower::Service<
            hyper::Request<kube::client::Body>,
            Response = hyper::Response<B>,
            Error = hyper_util::client::legacy::Error,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: hyper::Request<kube::client::Body>) -> Self::Future {
        let ctx = self.ctx.clone();
        let query = req.uri().query().unwrap_or("").to_string();
        let kind = if query
            .split('&')
            .any(|p| p == "watch=true" || p == "watch=1")
        {
            event::WATCH
        } else {
            event::LIST
        };
        // A GET the server refused unprocessed (GOAWAY, REFUSED_STREAM) is
        // sent again at once, as Go's HTTP/2 transport does for client-go.
        let again = (req.method() == hyper::Method::GET).then(|| {
            let mut b = hyper::Request::builder()
                .method(req.method().clone())
                .uri(req.uri().clone())
                .version(req.version());
            if let Some(h) = b.headers_mut() {
                *h = req.headers().clone();
            }
            b
        });
        let mut inner = self.inner.clone();
        let fut = self.inner.call(req);
        Box::pin(async move {
            use tower::ServiceExt;
            let start = Instant::now();
            let mut res = fut.await;
            let mut r = ctx.record(ProbeKind::Informer, ConnMode::Reused, start);
            r.event = Some(kind.into());
            // A 429/5xx with Retry-After was not processed either: client-go
            // sends it again after the time asked for (kube-apiserver answers
            // so on a connection still open once its shutdown delay is over).
            let refused = match (&res, again) {
                (Err(e), Some(b)) if refused_unprocessed(e) => Some((classify(e), None, b)),
                (Ok(resp), Some(b)) => retry_after(resp).map(|wait| {
                    let status = resp.status().as_u16();
                    let text = format!(
                        "HTTP {status} with Retry-After: {} s; sent again after it",
                        wait.as_secs()
                    );
                    ((Outcome::Http, text), Some((status, wait)), b)
                }),
                _ => None,
            };
            if let Some(((outcome, text), answered, b)) = refused {
                r.outcome = outcome;
                r.error = Some(text);
                let refused_seq = r.seq;
                if let Some((status, wait)) = answered {
                    r.http_status = Some(status);
                    ctx.emit(r);
                    tokio::time::sleep(wait).await;
                } else {
                    ctx.emit(r);
                }
                let retry = b
                    .body(kube::client::Body::empty())
                    .expect("the request it copies was valid");
                let start = Instant::now();
                res = inner.ready().await?.call(retry).await;
                r = ctx.record(ProbeKind::Informer, ConnMode::Reused, start);
                r.event = Some(kind.into());
                r.retry_of = Some(refused_seq);
            }
            match &res {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    r.http_status = Some(status);
                    let h = |n: &str| {
                        resp.headers()
                            .get(n)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_string)
                    };
                    let addr = resp
                        .extensions()
                        .get::<hyper_util::client::legacy::connect::HttpInfo>()
                        .map(|i| i.remote_addr());
                    r.addr = addr.map(|a| a.to_string());
                    r.seed = h("x-cpmlab-seed").or_else(|| ctx.seed_of(addr));
                    r.server = h("x-cpmlab-server");
                    if status != 200 {
                        r.outcome = Outcome::Http;
                    }
                }
                Err(e) => {
                    let f = classify(e);
                    r.outcome = f.0;
                    r.error = Some(f.1);
                }
            }
            ctx.emit(r);
            res
        })
    }
}

/// A response's Retry-After, judged as the other probes judge it.
fn retry_after<B>(resp: &hyper::Response<B>) -> Option<Duration> {
    super::transport::retry_after(resp.status().as_u16(), resp.headers())
}

/// The outcome class of a failed request of the kube client's stack.
fn classify(e: &(dyn std::error::Error + 'static)) -> (Outcome, String) {
    let mut chain = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut io_kind = None;
    while let Some(c) = cur {
        chain.push(c.to_string());
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            io_kind.get_or_insert(io.kind());
        }
        cur = c.source();
    }
    let text = chain.join(": ");
    let lower = text.to_lowercase();
    use std::io::ErrorKind::*;
    let outcome = match io_kind {
        Some(ConnectionRefused) => Outcome::Refused,
        Some(ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof) => Outcome::Reset,
        Some(TimedOut) => Outcome::Timeout,
        _ if lower.contains("dns") || lower.contains("no address for") => Outcome::Dns,
        _ if lower.contains("certificate") || lower.contains("tls") => Outcome::Tls,
        _ if lower.contains("timed out") || lower.contains("timeout") => Outcome::Timeout,
        _ if lower.contains("reset")
            || lower.contains("goaway")
            || lower.contains("go away")
            || lower.contains("connection closed")
            || lower.contains("incomplete message") =>
        {
            Outcome::Reset
        }
        _ if lower.contains("refused") => Outcome::Refused,
        _ => Outcome::Error,
    };
    (outcome, text)
}

/// A kube client over the lab DNS, TLS with the lab CA and the API name as
/// SNI, HTTP/2 when the server offers it, every request recorded.
fn client(ctx: &Arc<Ctx>, resolver: Arc<Resolver>) -> Result<kube::Client> {
    use kube::client::ConfigExt;
    let cfg = &ctx.cfg;
    let target = &cfg.target;
    let url: hyper::Uri = format!("https://{}:{}", target.server_name, target.port).parse()?;
    let mut kc = kube::Config::new(url);
    kc.default_namespace = cfg.namespace.clone();
    kc.root_cert = Some(vec![ctx.ca_der.clone()]);
    match &target.auth {
        super::target::Auth::Token(t) => kc.auth_info.token = Some(t.clone().into()),
        super::target::Auth::ClientCert { cert_pem, key_pem } => {
            use base64::Engine as _;
            let b64 = base64::engine::general_purpose::STANDARD;
            kc.auth_info.client_certificate_data = Some(b64.encode(cert_pem));
            kc.auth_info.client_key_data = Some(b64.encode(key_pem).into());
        }
    }
    kc.read_timeout = None;
    let tls = kc.rustls_client_config()?;
    let mut http =
        hyper_util::client::legacy::connect::HttpConnector::new_with_resolver(LabDns(resolver));
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(cfg.timeout));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    let hyper = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(https);
    let recorded = RecordRequests {
        inner: hyper,
        ctx: ctx.clone(),
    };
    let service = tower::ServiceBuilder::new()
        .layer(kc.base_uri_layer())
        .option_layer(kc.auth_layer()?)
        .map_err(tower::BoxError::from)
        .service(recorded);
    Ok(kube::Client::new(service, cfg.namespace.clone()))
}

fn counter_state(cm: &ConfigMap) -> Option<(u64, u64)> {
    if cm.metadata.name.as_deref() != Some(COUNTER) {
        return None;
    }
    let value = cm.data.as_ref()?.get("value")?.parse().ok()?;
    let rv = cm.metadata.resource_version.as_deref()?.parse().ok()?;
    Some((value, rv))
}

/// Runs the watcher until `stop`, then goes on until it has seen the last
/// acknowledged counter value (at most `catch_up`), so that the end of the
/// run does not count as a missed write.
pub(super) async fn run(
    ctx: Arc<Ctx>,
    resolver: Arc<Resolver>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    catch_up: Duration,
) {
    let client = match client(&ctx, resolver) {
        Ok(c) => c,
        Err(e) => {
            let mut r = ctx.record(ProbeKind::Informer, ConnMode::Reused, Instant::now());
            r.event = Some(event::SETUP_FAILED.into());
            r.outcome = Outcome::Error;
            r.error = Some(format!("cannot build the kube client: {e:#}"));
            ctx.emit(r);
            return;
        }
    };
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, &ctx.cfg.namespace);
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut seen: u64 = 0;
    let mut stopping_since: Option<Instant> = None;
    loop {
        let next = if stopping_since.is_some() {
            tokio::time::timeout(Duration::from_millis(100), stream.next())
                .await
                .ok()
                .flatten()
        } else {
            tokio::select! {
                _ = stop.changed() => {
                    stopping_since = Some(Instant::now());
                    continue;
                }
                e = stream.next() => e,
            }
        };
        if let Some(since) = stopping_since {
            if ctx.has_seen_last_ack(seen) || since.elapsed() > catch_up {
                return;
            }
        }
        let Some(item) = next else { continue };
        let mut r = ctx.record(ProbeKind::Informer, ConnMode::Reused, Instant::now());
        match item {
            Ok(Event::Init) => r.event = Some(event::INIT.into()),
            Ok(Event::InitDone) => r.event = Some(event::SYNCED.into()),
            Ok(Event::InitApply(cm)) | Ok(Event::Apply(cm)) | Ok(Event::Delete(cm))
                if counter_state(&cm).is_none() =>
            {
                continue
            }
            Ok(ev @ (Event::InitApply(_) | Event::Apply(_) | Event::Delete(_))) => {
                let (name, cm) = match ev {
                    Event::InitApply(cm) => (event::INIT_APPLY, cm),
                    Event::Apply(cm) => (event::APPLY, cm),
                    Event::Delete(cm) => (event::DELETE, cm),
                    _ => unreachable!("matched above"),
                };
                let (value, rv) = counter_state(&cm).expect("checked above");
                seen = seen.max(value);
                r.event = Some(name.into());
                r.value = Some(value);
                r.rv = Some(rv);
            }
            Err(e) => {
                let (outcome, text) = classify(&e);
                r.outcome = outcome;
                r.error = Some(text);
                r.event = Some(
                    match &e {
                        watcher::Error::WatchError(status) => {
                            r.outcome = Outcome::Http;
                            r.http_status = Some(status.code);
                            if status.code == 410 {
                                event::EXPIRED
                            } else {
                                event::WATCH_ERROR
                            }
                        }
                        watcher::Error::WatchFailed(_) => event::WATCH_BROKE,
                        watcher::Error::InitialListFailed(_)
                        | watcher::Error::WatchStartFailed(_)
                        | watcher::Error::NoResourceVersion => event::REQUEST_FAILED,
                    }
                    .into(),
                );
            }
        }
        ctx.emit(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_in_the_chain_decide_the_class() {
        #[derive(Debug)]
        struct Wrap(std::io::Error);
        impl std::fmt::Display for Wrap {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "client error (Connect)")
            }
        }
        impl std::error::Error for Wrap {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let refused = Wrap(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(classify(&refused).0, Outcome::Refused);
        let reset = Wrap(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(classify(&reset).0, Outcome::Reset);
        let dns = Wrap(std::io::Error::other("no address for api.x"));
        assert_eq!(classify(&dns).0, Outcome::Dns);
        let (_, text) = classify(&dns);
        assert!(text.starts_with("client error (Connect): "), "{text}");
    }

    #[test]
    fn a_retry_after_is_honoured_only_on_429_and_5xx() {
        let resp = |status: u16, ra: Option<&str>| {
            let mut b = hyper::Response::builder().status(status);
            if let Some(v) = ra {
                b = b.header("Retry-After", v);
            }
            b.body(()).unwrap()
        };
        assert_eq!(
            retry_after(&resp(429, Some("5"))),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            retry_after(&resp(503, Some("1"))),
            Some(Duration::from_secs(1))
        );
        assert_eq!(retry_after(&resp(429, None)), None);
        assert_eq!(retry_after(&resp(200, Some("5"))), None);
        assert_eq!(retry_after(&resp(429, Some("soon"))), None);
    }

    #[test]
    fn only_the_counter_carries_a_state() {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": COUNTER, "resourceVersion": "42"},
            "data": {"value": "7"}
        }))
        .unwrap();
        assert_eq!(counter_state(&cm), Some((7, 42)));
        let other: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "probe-target", "resourceVersion": "3"},
            "data": {"value": "1"}
        }))
        .unwrap();
        assert_eq!(counter_state(&other), None);
    }
}
