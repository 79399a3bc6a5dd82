//! A watch stream the peer closed under it, judged as client-go judges
//! it: the watch's end, not a failed request.
//!
//! client-go's watch decoder ends a watch quietly when its stream ends in
//! an EOF of any kind (k8s.io/apimachinery `pkg/watch/streamwatcher.go`,
//! `receive`: `io.EOF` is "watch closed normally"; `io.ErrUnexpectedEOF`
//! and every error `pkg/util/net.IsProbableEOF` names, a reset connection,
//! a GOAWAY'd and closed HTTP/2 connection, a closed network connection,
//! are logged at V(1) and V(5) and end the watch the same way). The
//! reflector then watches again from the last resourceVersion it saw, with
//! no re-list (`tools/cache/reflector.go`). That is how every watch of
//! kube-apiserver ends when a gateway drains a connection or a server
//! stops: no client sees an error, and what matters is whether the watch
//! resumes, which the lane's next `connect` shows (a failed reconnect is a
//! failed request), and whether an event was missed, which
//! `watch-continuity` and the informer rules judge.
//!
//! A broken stream (`broken` of the watch probe; `watch-broke` of the
//! kube-rs informer) is such an end when its error names one of those
//! EOFs in the words of the probes' HTTP stacks (hyper, h2, Go's
//! net/http). Any other broken stream, an ERROR event in the stream, and a
//! broken stream that carries no error text are failures.

use std::collections::BTreeSet;

use crate::record::{informer_event, ProbeKind, Record};

/// The EOFs client-go ends a watch on quietly, as the probes' HTTP stacks
/// word them (lower case).
pub const PEER_CLOSED: [&str; 8] = [
    // io.ErrUnexpectedEOF: hyper's "unexpected EOF during chunk size line",
    // "end of file before message length reached"; Go's "unexpected EOF".
    "unexpected eof",
    "end of file before message length reached",
    // The connection closed under an HTTP/2 stream (h2; Go names it a
    // GoAwayError after the gateway's GOAWAY notice).
    "broken pipe",
    "server sent goaway and closed the connection",
    "connection reset",
    "use of closed network connection",
    "connection closed before message completed",
    "http: can't write http request on broken connection",
];

/// Whether a broken stream's error is one of the EOFs client-go ends a
/// watch on.
pub fn peer_closed(error: &str) -> bool {
    let e = error.to_ascii_lowercase();
    PEER_CLOSED.iter().any(|p| e.contains(p))
}

/// Whether a record is a broken watch stream (of the watch probe or an
/// informer).
fn broken_stream(r: &Record) -> bool {
    match r.probe {
        ProbeKind::Watch => r.event.as_deref() == Some("broken"),
        ProbeKind::Informer | ProbeKind::InformerGo => {
            r.event.as_deref() == Some(informer_event::WATCH_BROKE)
        }
        _ => false,
    }
}

/// The seqs of the broken streams client-go would have ended quietly.
pub fn find(all: &[&Record]) -> BTreeSet<u64> {
    all.iter()
        .filter(|r| broken_stream(r) && r.error.as_deref().is_some_and(peer_closed))
        .map(|r| r.seq)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ConnMode, Outcome};

    fn broken(seq: u64, probe: ProbeKind, event: &str, error: Option<&str>) -> Record {
        let mut r = Record::new(
            seq,
            probe,
            ConnMode::Reused,
            (1.0, 0.0),
            0.0,
            Outcome::Error,
        );
        r.event = Some(event.into());
        r.error = error.map(str::to_string);
        r
    }

    #[test]
    fn the_eofs_client_go_ends_a_watch_on_are_its_end() {
        let rs = [
            broken(1, ProbeKind::Watch, "broken", Some("error reading a body from connection: unexpected EOF during chunk size line")),
            broken(2, ProbeKind::Watch, "broken", Some("error reading a body from connection: stream closed because of a broken pipe")),
            broken(3, ProbeKind::Informer, informer_event::WATCH_BROKE, Some("watch stream failed: Error reading events stream: ServiceError: error reading a body from connection: stream closed because of a broken pipe")),
            // A stream the server ended with an error: a failure.
            broken(4, ProbeKind::Watch, "broken", Some("stream error received: unexpected internal error encountered")),
            // No error text: no evidence.
            broken(5, ProbeKind::Watch, "broken", None),
            // An ERROR event is never a stream's end.
            broken(6, ProbeKind::Watch, "ERROR", Some("connection reset by peer")),
            // A request that failed to connect is not a broken stream.
            broken(7, ProbeKind::Watch, "connect", Some("connection reset by peer")),
            broken(8, ProbeKind::InformerGo, informer_event::WATCH_BROKE, Some("http2: server sent GOAWAY and closed the connection; LastStreamID=5")),
        ];
        let all: Vec<&Record> = rs.iter().collect();
        assert_eq!(find(&all), BTreeSet::from([1, 2, 3, 8]));
    }
}
