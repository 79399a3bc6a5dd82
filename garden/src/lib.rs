//! The lab's garden, as Gardener's operators and gardenlets meet it: the
//! objects gardener-apiserver holds for the lab (`objects`), rendered from
//! the topology; a client for what is done there (`client`): the operator's
//! trigger of a Live CPM (the annotation, `shoots/binding`), a gardenlet's
//! report of its Seed and its writes of the Shoot's live-migration
//! conditions; the garden's kubeconfigs (`kubeconfig`).

pub mod access;
pub mod bootstrap;
pub mod client;
pub mod kubeconfig;
pub mod objects;
pub mod trigger;

/// What went wrong talking to the garden.
#[derive(Debug, thiserror::Error)]
pub enum GardenError {
    /// gardener-apiserver (or the garden's kube-apiserver) refused the
    /// request; `message` is its own words.
    #[error("{what}: refused by the garden ({code} {reason}): {message}")]
    Refused {
        what: String,
        code: u16,
        reason: String,
        message: String,
    },
    /// The garden did not answer (down, cut off, timed out).
    #[error("{what}: the garden did not answer: {detail}")]
    Unreachable { what: String, detail: String },
    #[error("{0}")]
    Other(String),
}

impl GardenError {
    /// An admission's refusal (403 Forbidden or 422 Invalid), with
    /// gardener-apiserver's message.
    pub fn admission_message(&self) -> Option<&str> {
        match self {
            GardenError::Refused {
                code: 403 | 422,
                message,
                ..
            } => Some(message),
            _ => None,
        }
    }
}
