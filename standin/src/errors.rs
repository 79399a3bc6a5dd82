//! API errors as Kubernetes `Status` objects.

use serde_json::{json, Value};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    #[error("{kind} \"{name}\" not found")]
    NotFound { kind: String, name: String },
    #[error("{kind} \"{name}\" already exists")]
    AlreadyExists { kind: String, name: String },
    #[error("Operation cannot be fulfilled on {kind} \"{name}\": the object has been modified; please apply your changes to the latest version and try again")]
    Conflict { kind: String, name: String },
    #[error("{0}")]
    Gone(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("Unauthorized")]
    Unauthorized,
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    #[error("the server could not find the requested resource")]
    UnknownPath,
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    pub fn code(&self) -> u16 {
        match self {
            ApiError::NotFound { .. } | ApiError::UnknownPath => 404,
            ApiError::AlreadyExists { .. } | ApiError::Conflict { .. } => 409,
            ApiError::Gone(_) => 410,
            ApiError::BadRequest(_) => 400,
            ApiError::Unauthorized => 401,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::MethodNotAllowed => 405,
            ApiError::Unavailable(_) => 503,
            ApiError::Internal(_) => 500,
        }
    }

    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::NotFound { .. } | ApiError::UnknownPath => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } => "Conflict",
            ApiError::Gone(_) => "Expired",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::MethodNotAllowed => "MethodNotAllowed",
            ApiError::Unavailable(_) => "ServiceUnavailable",
            ApiError::Internal(_) => "InternalError",
        }
    }

    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        match self {
            ApiError::NotFound { kind, name }
            | ApiError::AlreadyExists { kind, name }
            | ApiError::Conflict { kind, name } => {
                s["details"] = json!({"name": name, "kind": kind});
            }
            _ => {}
        }
        s
    }
}

/// Did the request never reach a member (so retrying cannot apply it twice)?
pub(crate) fn never_sent(e: &etcd_client::Error) -> bool {
    let m = e.to_string();
    m.contains("connect error") || m.contains("Connection refused") || m.contains("tcp connect")
}

/// Is the member we talked to gone or unreachable, or without a leader?
/// The request may or may not have been applied. etcd's clientv3 retries a
/// read on `Unavailable` (`isSafeRetryImmutableRPC`), and grpc-go reports
/// every connection-level failure — a reset, an EOF, a stream the dying
/// member never answered — as `Unavailable`. tonic reports the same
/// failures as `Unknown`, `Internal` or `Cancelled` with an `h2 protocol
/// error` message, or as a transport error, so those count too; statuses
/// etcd itself sends with another code (a compacted revision, a bad
/// argument) are answers and are not retried.
pub(crate) fn unavailable(e: &etcd_client::Error) -> bool {
    use tonic::Code;
    match e {
        etcd_client::Error::GRpcStatus(st) => match st.code() {
            Code::Unavailable => true,
            Code::Unknown | Code::Internal | Code::Cancelled => {
                let m = st.message();
                [
                    "h2 protocol error",
                    "transport error",
                    "connection",
                    "broken pipe",
                    "operation was canceled",
                    "error trying to connect",
                ]
                .iter()
                .any(|s| m.contains(s))
            }
            _ => false,
        },
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        _ => never_sent(e),
    }
}

/// The connection to a member was lost (or never made), as opposed to an
/// answer etcd gave (`etcdserver: ...`, even with code `Unavailable`).
pub(crate) fn connection_lost(e: &etcd_client::Error) -> bool {
    let answered =
        matches!(e, etcd_client::Error::GRpcStatus(st) if st.message().starts_with("etcdserver:"));
    unavailable(e) && !answered
}

/// etcd errors: compaction is 410 Gone, the rest 503 (etcd unavailable).
/// A connection to a member lost mid-request is worded as grpc-go words
/// it (`code = Unavailable`), whatever code tonic gave it: kube-apiserver's
/// etcd client says `rpc error: code = Unavailable desc = error reading
/// from server: EOF` for the same failure, and the verdict reads that
/// wording as "the API server's etcd client lost its member".
pub fn from_etcd(e: etcd_client::Error) -> ApiError {
    let msg = e.to_string();
    if msg.contains("compacted") {
        ApiError::Gone(format!("too old resource version: {msg}"))
    } else if connection_lost(&e) {
        ApiError::Unavailable(format!(
            "etcd: rpc error: code = Unavailable desc = connection to the member lost: {msg}"
        ))
    } else {
        ApiError::Unavailable(format!("etcd: {msg}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_retry_on_connection_failures_not_on_answers() {
        let status = |c, m: &str| etcd_client::Error::GRpcStatus(tonic::Status::new(c, m));
        for e in [
            status(tonic::Code::Unavailable, "etcdserver: no leader"),
            status(
                tonic::Code::Unknown,
                "h2 protocol error: error reading a body from connection",
            ),
            status(tonic::Code::Internal, "h2 protocol error: broken pipe"),
            status(
                tonic::Code::Cancelled,
                "operation was canceled: connection closed",
            ),
            etcd_client::Error::IoError(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
        ] {
            assert!(unavailable(&e), "{e}");
        }
        for e in [
            status(
                tonic::Code::OutOfRange,
                "etcdserver: mvcc: required revision has been compacted",
            ),
            status(
                tonic::Code::InvalidArgument,
                "etcdserver: key is not provided",
            ),
            status(tonic::Code::Unknown, "etcdserver: some answer"),
        ] {
            assert!(!unavailable(&e), "{e}");
        }
    }

    #[test]
    fn a_lost_member_is_worded_as_grpc_go_words_it_and_etcd_s_answers_are_not() {
        let lost = etcd_client::Error::GRpcStatus(tonic::Status::new(
            tonic::Code::Unknown,
            "transport error",
        ));
        let m = from_etcd(lost).to_string();
        assert!(m.contains("code = Unavailable"), "{m}");
        let answer = etcd_client::Error::GRpcStatus(tonic::Status::new(
            tonic::Code::Unavailable,
            "etcdserver: no leader",
        ));
        let m = from_etcd(answer).to_string();
        assert!(!m.contains("code = Unavailable"), "{m}");
        assert!(m.contains("etcdserver: no leader"), "{m}");
    }

    #[test]
    fn statuses_carry_code_reason_and_details() {
        let e = ApiError::Conflict {
            kind: "configmaps".into(),
            name: "x".into(),
        };
        let s = e.status();
        assert_eq!(s["code"], 409);
        assert_eq!(s["reason"], "Conflict");
        assert_eq!(s["details"]["name"], "x");
        assert!(s["message"].as_str().unwrap().contains("has been modified"));
        assert_eq!(ApiError::Gone("old".into()).code(), 410);
        assert_eq!(ApiError::Gone("old".into()).reason(), "Expired");
    }
}
