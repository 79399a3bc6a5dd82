//! What can go wrong reading a run: input that is not what the verdict
//! reads (the caller's exit 2), or a file that cannot be read or written.

/// The verdict crate's error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Input the user can fix: a malformed record, an unknown hazard, a
    /// run directory without its records. `cpmlab` exits 2 on it.
    #[error("{0}")]
    BadInput(String),
    /// A file that could not be read or written.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }

    /// Whether this is bad input (exit 2) rather than a failure to read.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, Error::BadInput(_))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
