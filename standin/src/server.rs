//! The stand-in API server's HTTP side: TLS (HTTP/2 and HTTP/1.1), bearer
//! tokens, discovery, health, the resource verbs and streaming watches, and
//! kube-apiserver's shutdown: /readyz fails first, serving goes on for the
//! shutdown delay, then connections are closed (HTTP/2 GOAWAY).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::resources::{self, Resource};
use crate::store::{ListOpts, PatchKind, Store, WatchOpts};

pub const STANDIN_VERSION: &str = "v1.32.0+cpmlab-standin";

pub struct ApiServer {
    pub store: Store,
    pub token: String,
    /// Which seed this replica runs in, and its name (response headers).
    pub seed: String,
    pub name: String,
    pub ready: AtomicBool,
    pub stop_watches: tokio::sync::watch::Sender<bool>,
    pub advertise: String,
}

type Shared = Arc<ApiServer>;

fn json_response(code: u16, v: &Value) -> Response {
    let mut r = Response::new(Body::from(serde_json::to_vec(v).expect("JSON")));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn err(e: ApiError) -> Response {
    json_response(e.code(), &e.status())
}

fn text(code: StatusCode, body: &'static str) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

pub fn router(s: Shared) -> Router {
    Router::new()
        .route("/version", get(version))
        .route("/healthz", get(|| async { text(StatusCode::OK, "ok") }))
        .route("/livez", get(|| async { text(StatusCode::OK, "ok") }))
        .route("/readyz", get(readyz))
        .route("/api", get(api))
        .route(
            "/apis",
            get(|| async { json_response(200, &resources::api_groups()) }),
        )
        .route(
            "/openapi/v3",
            get(|| async { json_response(200, &resources::openapi_v3_index()) }),
        )
        .route("/openapi/v3/{*path}", get(openapi_doc))
        .fallback(resource_handler)
        .layer(axum::middleware::from_fn_with_state(
            s.clone(),
            auth_and_tag,
        ))
        .with_state(s)
}

/// Bearer-token auth (health and version are public, as in Kubernetes) and
/// headers saying which replica in which seed answered.
async fn auth_and_tag(State(s): State<Shared>, req: Request, next: Next) -> Response {
    let public = matches!(
        req.uri().path(),
        "/healthz" | "/livez" | "/readyz" | "/version"
    );
    let ok = public
        || req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| t == s.token);
    let mut resp = if ok {
        next.run(req).await
    } else {
        err(ApiError::Unauthorized)
    };
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&s.seed) {
        h.insert("x-cpmlab-seed", v);
    }
    if let Ok(v) = HeaderValue::from_str(&s.name) {
        h.insert("x-cpmlab-server", v);
    }
    resp
}

async fn version() -> Response {
    json_response(
        200,
        &json!({
            "major": "1", "minor": "32", "gitVersion": STANDIN_VERSION,
            "gitCommit": "cpmlab", "gitTreeState": "clean", "buildDate": "",
            "goVersion": "n/a (Rust stand-in, not kube-apiserver)", "compiler": "cpmlab",
            "platform": format!("linux/{}", match std::env::consts::ARCH {
                "x86_64" => "amd64",
                "aarch64" => "arm64",
                other => other,
            }),
        }),
    )
}

/// kube-apiserver's readiness: fails from the start of a graceful shutdown
/// (its `shutdown` check) and when etcd does not answer. `?exclude=shutdown`
/// asks only whether it can still serve, as kube-apiserver allows.
async fn readyz(State(s): State<Shared>, uri: axum::http::Uri) -> Response {
    let excluded = query(&uri)
        .iter()
        .any(|(k, v)| k == "exclude" && v == "shutdown");
    if !excluded && !s.ready.load(Ordering::SeqCst) {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "[-]shutdown failed: reason withheld\nreadyz check failed\n",
        );
    }
    let why = match tokio::time::timeout(Duration::from_secs(2), s.store.health()).await {
        Ok(Ok(())) => return text(StatusCode::OK, "ok"),
        Ok(Err(e)) => e.to_string(),
        Err(_) => "no answer in 2 s".to_string(),
    };
    tracing::warn!("readyz: etcd check failed: {why}");
    text(
        StatusCode::INTERNAL_SERVER_ERROR,
        "[-]etcd failed: reason withheld\nreadyz check failed\n",
    )
}

async fn api(State(s): State<Shared>) -> Response {
    json_response(200, &resources::api_versions(&s.advertise))
}

async fn openapi_doc(axum::extract::Path(path): axum::extract::Path<String>) -> Response {
    match resources::openapi_v3_doc(&path) {
        Some(d) => json_response(200, &d),
        None => err(ApiError::UnknownPath),
    }
}

/// What a resource URL names.
#[derive(Debug, PartialEq)]
pub struct Target {
    pub resource: Resource,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// Discovery documents (`/api/v1`, `/apis/g`, `/apis/g/v`) or a resource.
pub enum Route {
    Doc(Value),
    Resource(Target),
}

pub fn route(path: &str) -> Result<Route, ApiError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g] => {
            return resources::api_group(g)
                .map(Route::Doc)
                .ok_or(ApiError::UnknownPath)
        }
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::UnknownPath),
    };
    let find = |plural: &str| Resource::find(group, version, plural).ok_or(ApiError::UnknownPath);
    let t = |r: Resource, ns: Option<&str>, name: Option<&str>| {
        if r.namespaced != ns.is_some() && !(r.namespaced && name.is_none()) {
            return Err(ApiError::UnknownPath);
        }
        Ok(Route::Resource(Target {
            resource: r,
            namespace: ns.map(str::to_string),
            name: name.map(str::to_string),
        }))
    };
    match rest {
        [] => resources::resource_list(group, version)
            .map(Route::Doc)
            .ok_or(ApiError::UnknownPath),
        ["namespaces", ns, plural] => t(find(plural)?, Some(ns), None),
        ["namespaces", ns, plural, name] => t(find(plural)?, Some(ns), Some(name)),
        [plural] => t(find(plural)?, None, None),
        [plural, name] => t(find(plural)?, None, Some(name)),
        _ => Err(ApiError::UnknownPath),
    }
}

fn query(uri: &axum::http::Uri) -> Vec<(String, String)> {
    uri.query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default()
}

fn param<'a>(q: &'a [(String, String)], k: &str) -> Option<&'a str> {
    q.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
}

/// `metadata.name=x` (and `metadata.namespace=y`, implied by the URL).
fn field_name(q: &[(String, String)]) -> Result<Option<String>, ApiError> {
    let Some(fs) = param(q, "fieldSelector").filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let mut name = None;
    for term in fs.split(',') {
        match term.split_once('=') {
            Some(("metadata.name", v)) => name = Some(v.trim_start_matches('=').to_string()),
            Some(("metadata.namespace", _)) => {}
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "field selector `{term}` is not supported by the stand-in (metadata.name only)"
                )))
            }
        }
    }
    Ok(name)
}

fn label_selector(q: &[(String, String)]) -> Result<Vec<(String, String)>, ApiError> {
    let Some(ls) = param(q, "labelSelector").filter(|s| !s.is_empty()) else {
        return Ok(vec![]);
    };
    ls.split(',')
        .map(|t| {
            t.split_once('=')
                .map(|(k, v)| (k.to_string(), v.trim_start_matches('=').to_string()))
                .ok_or_else(|| {
                    ApiError::BadRequest(format!(
                        "label selector `{t}` is not supported by the stand-in (k=v only)"
                    ))
                })
        })
        .collect()
}

fn body_json(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("the stand-in reads JSON bodies only: {e}")))
}

async fn resource_handler(
    State(s): State<Shared>,
    method: Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match handle(&s, &method, &uri, &headers, body).await {
        Ok(r) => r,
        Err(e) => err(e),
    }
}

async fn handle(
    s: &Shared,
    method: &Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let t = match route(uri.path())? {
        Route::Doc(d) if method == Method::GET => return Ok(json_response(200, &d)),
        Route::Doc(_) => return Err(ApiError::MethodNotAllowed),
        Route::Resource(t) => t,
    };
    // Bodies are JSON, or protobuf from typed clients (decoded to JSON).
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let decoded = if !body.is_empty() && method != Method::PATCH {
        if ct.starts_with(crate::protobuf::CONTENT_TYPE) {
            Some(crate::protobuf::decode(t.resource.kind, &body)?)
        } else if ct.starts_with("application/json") {
            None
        } else {
            return Err(ApiError::UnsupportedMediaType(format!(
                "the stand-in reads JSON and protobuf bodies, not `{ct}`"
            )));
        }
    } else {
        None
    };
    let body_value = || match &decoded {
        Some(v) => Ok(v.clone()),
        None => body_json(&body),
    };
    let q = query(uri);
    let r = &t.resource;
    let ns = t.namespace.as_deref();
    let st = &s.store;
    match (method.clone(), t.name.as_deref()) {
        (Method::GET, Some(name)) => {
            let obj = st.get(r, ns, name).await?;
            if crate::failpoint::take(crate::failpoint::CORRUPT_BODY) {
                tracing::warn!(
                    "failpoint {}: a body cut short",
                    crate::failpoint::CORRUPT_BODY
                );
                let mut cut = serde_json::to_vec(&obj).expect("JSON");
                cut.truncate(cut.len() / 2);
                let mut resp = json_response(200, &Value::Null);
                *resp.body_mut() = Body::from(cut);
                return Ok(resp);
            }
            Ok(json_response(200, &obj))
        }
        (Method::GET, None) if param(&q, "watch").is_some_and(|w| w == "true" || w == "1") => {
            watch(s, &t, &q).await
        }
        (Method::GET, None) => {
            let o = ListOpts {
                limit: param(&q, "limit").and_then(|l| l.parse().ok()),
                continue_token: param(&q, "continue").map(str::to_string),
                resource_version: param(&q, "resourceVersion").map(str::to_string),
                resource_version_match: param(&q, "resourceVersionMatch").map(str::to_string),
                name: field_name(&q)?,
                labels: label_selector(&q)?,
            };
            Ok(json_response(200, &st.list(r, ns, &o).await?))
        }
        (Method::POST, None) => Ok(json_response(201, &st.create(r, ns, body_value()?).await?)),
        (Method::PUT, Some(name)) => Ok(json_response(
            200,
            &st.update(r, ns, name, body_value()?).await?,
        )),
        (Method::PATCH, Some(name)) => {
            let kind = match ct.split(';').next().unwrap_or("").trim() {
                "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                    PatchKind::Merge
                }
                "application/json-patch+json" => PatchKind::Json,
                other => {
                    return Err(ApiError::UnsupportedMediaType(format!(
                        "the stand-in does not support patch type `{other}` (server-side apply included)"
                    )))
                }
            };
            let patch = body_json(&body)?;
            tracing::debug!(%ct, %patch, "patch {}/{name}", r.plural);
            Ok(json_response(
                200,
                &st.patch(r, ns, name, kind, patch).await?,
            ))
        }
        (Method::DELETE, Some(name)) => Ok(json_response(200, &st.delete(r, ns, name).await?)),
        _ => Err(ApiError::MethodNotAllowed),
    }
}

async fn watch(s: &Shared, t: &Target, q: &[(String, String)]) -> Result<Response, ApiError> {
    let o = WatchOpts {
        resource_version: param(q, "resourceVersion").map(str::to_string),
        bookmarks: param(q, "allowWatchBookmarks").is_some_and(|v| v == "true"),
        timeout: Some(Duration::from_secs(
            param(q, "timeoutSeconds")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1800),
        )),
        name: field_name(q)?,
        labels: label_selector(q)?,
    };
    let rx = s
        .store
        .watch(
            t.resource,
            t.namespace.clone(),
            o,
            s.stop_watches.subscribe(),
        )
        .await?;
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let ev = rx.recv().await?;
        let mut line = serde_json::to_vec(&ev).expect("JSON");
        line.push(b'\n');
        Some((Ok::<_, Infallible>(Bytes::from(line)), rx))
    });
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

/// Serves until SIGTERM/SIGINT, then shuts down the way kube-apiserver does.
pub async fn serve(
    s: Shared,
    listen: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    shutdown_delay: Duration,
) -> Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;

    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("bind {listen}"))?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let app = router(s.clone());
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    eprintln!("stand-in API server {} ({}) on {listen}", s.name, s.seed);

    let serve_conn = |tcp: tokio::net::TcpStream| {
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let svc = TowerToHyperService::new(app.clone());
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let builder = Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), svc);
            let _ = watcher.watch(conn.into_owned()).await;
        });
    };
    let accept_loop = async {
        loop {
            if let Ok((tcp, _)) = listener.accept().await {
                serve_conn(tcp);
            }
        }
    };
    tokio::select! {
        _ = accept_loop => {}
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    // 1. Not ready any more; keep serving (and accepting) for the delay, so
    //    load balancers and clients move away first.
    s.ready.store(false, Ordering::SeqCst);
    eprintln!("shutting down: /readyz fails, serving for {shutdown_delay:?} more");
    let keep_serving = async {
        loop {
            if let Ok((tcp, _)) = listener.accept().await {
                serve_conn(tcp);
            }
        }
    };
    let _ = tokio::time::timeout(shutdown_delay, keep_serving).await;
    // 2. Stop accepting, end watches, GOAWAY to every connection.
    drop(listener);
    let _ = s.stop_watches.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), graceful.shutdown()).await;
    eprintln!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{CONFIGMAPS, LEASES, NAMESPACES};

    fn target(path: &str) -> Target {
        match route(path).unwrap_or_else(|e| panic!("{path}: {e}")) {
            Route::Resource(t) => t,
            Route::Doc(_) => panic!("{path} is a document"),
        }
    }

    #[test]
    fn resource_urls_are_routed() {
        let t = target("/api/v1/namespaces/default/configmaps/x");
        assert_eq!(
            t,
            Target {
                resource: CONFIGMAPS,
                namespace: Some("default".into()),
                name: Some("x".into())
            }
        );
        assert_eq!(target("/api/v1/configmaps").namespace, None);
        assert_eq!(target("/api/v1/namespaces").resource, NAMESPACES);
        assert_eq!(
            target("/api/v1/namespaces/kube-system").name.as_deref(),
            Some("kube-system")
        );
        let t = target("/apis/coordination.k8s.io/v1/namespaces/n/leases/l");
        assert_eq!(t.resource, LEASES);
        assert!(matches!(route("/api/v1"), Ok(Route::Doc(_))));
        assert!(matches!(
            route("/apis/coordination.k8s.io"),
            Ok(Route::Doc(_))
        ));
        assert!(matches!(
            route("/apis/coordination.k8s.io/v1"),
            Ok(Route::Doc(_))
        ));
        for bad in [
            "/api/v1/pods",
            "/apis/apps/v1/deployments",
            "/api/v1/configmaps/x",
            "/nope",
            "/api/v1/namespaces/default/configmaps/x/status",
        ] {
            assert!(route(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn selectors_are_parsed() {
        let q = vec![("fieldSelector".to_string(), "metadata.name=abc".to_string())];
        assert_eq!(field_name(&q).unwrap().as_deref(), Some("abc"));
        let q = vec![(
            "fieldSelector".to_string(),
            "status.phase=Running".to_string(),
        )];
        assert!(field_name(&q).is_err());
        let q = vec![("labelSelector".to_string(), "a=b,c==d".to_string())];
        assert_eq!(
            label_selector(&q).unwrap(),
            vec![("a".into(), "b".into()), ("c".into(), "d".into())]
        );
    }
}
