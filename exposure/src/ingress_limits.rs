//! The limits Gardener puts on every connection of a seed's Istio ingress
//! gateway (gardener/gardener at b312835,
//! `pkg/component/networking/istio/charts/istio/istio-ingress/templates/envoy-filter.yaml`):
//! on every HTTP connection manager of the gateway, HTTP/2 with at most
//! 100 concurrent streams, a 64 KiB stream window and a 1 MiB connection
//! window; on each listener of the ingress service's ports, a 32 KiB
//! buffer per connection and downstream TCP keepalive (SO_KEEPALIVE,
//! TCP_KEEPIDLE 55 s, TCP_KEEPINTVL 55 s, set on the listening socket).
//! Both forms render them from here: the docker form's Envoy
//! (`envoy`) and the kind form's EnvoyFilter (`istio`).

use serde_json::{json, Value};

pub const MAX_CONCURRENT_STREAMS: u32 = 100;
pub const INITIAL_STREAM_WINDOW_SIZE: u32 = 64 * 1024;
pub const INITIAL_CONNECTION_WINDOW_SIZE: u32 = 1024 * 1024;
pub const PER_CONNECTION_BUFFER_LIMIT_BYTES: u32 = 32 * 1024;
/// TCP_KEEPIDLE and TCP_KEEPINTVL, seconds.
pub const DOWNSTREAM_KEEPALIVE_S: u32 = 55;

// Linux socket option levels and names, as Envoy's SocketOption takes them.
const SOL_SOCKET: i64 = 1;
const SO_KEEPALIVE: i64 = 9;
const IPPROTO_TCP: i64 = 6;
const TCP_KEEPIDLE: i64 = 4;
const TCP_KEEPINTVL: i64 = 5;

/// The HTTP connection manager's `http2_protocol_options`.
pub fn http2_protocol_options() -> Value {
    json!({
        "max_concurrent_streams": MAX_CONCURRENT_STREAMS,
        "initial_stream_window_size": INITIAL_STREAM_WINDOW_SIZE,
        "initial_connection_window_size": INITIAL_CONNECTION_WINDOW_SIZE,
    })
}

/// A listener's `socket_options`: downstream TCP keepalive.
pub fn listener_socket_options() -> Value {
    let opt = |level: i64, name: i64, v: i64| json!({"level": level, "name": name, "int_value": v, "state": "STATE_LISTENING"});
    json!([
        opt(SOL_SOCKET, SO_KEEPALIVE, 1),
        opt(IPPROTO_TCP, TCP_KEEPIDLE, DOWNSTREAM_KEEPALIVE_S as i64),
        opt(IPPROTO_TCP, TCP_KEEPINTVL, DOWNSTREAM_KEEPALIVE_S as i64),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_values_are_gardeners() {
        assert_eq!(
            http2_protocol_options(),
            json!({"max_concurrent_streams": 100, "initial_stream_window_size": 65536, "initial_connection_window_size": 1048576})
        );
        let o = listener_socket_options();
        assert_eq!(o.as_array().unwrap().len(), 3);
        assert_eq!(
            o[1],
            json!({"level": 6, "name": 4, "int_value": 55, "state": "STATE_LISTENING"})
        );
        assert_eq!(PER_CONNECTION_BUFFER_LIMIT_BYTES, 32768);
    }
}
