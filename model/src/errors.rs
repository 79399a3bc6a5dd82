//! The two failures the CLI maps to their own exit status: bad input (2) and
//! an environment that is not ready (3). Everything else is exit 1.

/// Input the user can fix by changing what they typed or wrote. Exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// The machine lacks something; `fix` says what to run. Exit 3.
#[derive(Debug, thiserror::Error)]
#[error("{problem}\n  fix: {fix}")]
pub struct EnvNotReady {
    pub problem: String,
    pub fix: String,
}

impl EnvNotReady {
    pub fn new(problem: impl Into<String>, fix: impl Into<String>) -> Self {
        EnvNotReady {
            problem: problem.into(),
            fix: fix.into(),
        }
    }
}

/// The user interrupted (Ctrl-C, SIGTERM). Exit 130.
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// A cancellation flag that long work checks at safe points, so that no
/// request is in flight when the clean-up after an interrupt starts.
#[derive(Debug, Clone, Default)]
pub struct Cancel(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Cancel {
    pub fn cancel(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    pub fn check(&self) -> Result<(), Interrupted> {
        if self.0.load(std::sync::atomic::Ordering::SeqCst) {
            Err(Interrupted)
        } else {
            Ok(())
        }
    }
}

pub const EXIT_FAILED: u8 = 1;
pub const EXIT_BAD_INPUT: u8 = 2;
pub const EXIT_ENV: u8 = 3;
pub const EXIT_INTERRUPTED: u8 = 130;
