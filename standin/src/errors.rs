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
    } else if crate::store::connection_lost(&e) {
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
