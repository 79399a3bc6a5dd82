//! The Envoy pieces every listener of the lab's Envoys shares: the router
//! HTTP filter every connection manager ends with, and the access log of
//! what went wrong.

use serde_json::{json, Value};

/// The router HTTP filter, last in every connection manager.
pub fn router() -> Value {
    json!({
        "name": "envoy.filters.http.router",
        "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
    })
}

/// An access log of what went wrong only (a response flag, or a 5xx when
/// `http`), on Envoy's stdout: the gateway's container log, kept in the run.
pub fn access_log(http: bool) -> Value {
    let flags = json!({"response_flag_filter": {}});
    let filter = if http {
        json!({"or_filter": {"filters": [
            flags,
            {"status_code_filter": {"comparison": {"op": "GE", "value": {"default_value": 500, "runtime_key": "cpmlab.access_log.min_status"}}}},
        ]}})
    } else {
        flags
    };
    json!([{
        "name": "envoy.access_loggers.stdout",
        "filter": filter,
        "typed_config": {"@type": "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog"},
    }])
}
