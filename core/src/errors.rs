//! The lab's errors: the model's kinds (bad input, an environment not
//! ready, an interruption; `cpmlab_model::errors`) and the exit status an
//! error chain deserves, which also reads the verdict's errors.

pub use cpmlab_model::errors::*;

/// The exit status an error chain deserves.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if cause.is::<BadInput>() || cause.is::<cpmlab_model::yaml_file::FileError>() {
            return EXIT_BAD_INPUT;
        }
        if cause
            .downcast_ref::<cpmlab_verdict::Error>()
            .is_some_and(|e| e.is_bad_input())
        {
            return EXIT_BAD_INPUT;
        }
        if cause.is::<EnvNotReady>() {
            return EXIT_ENV;
        }
        if cause.is::<Interrupted>() {
            return EXIT_INTERRUPTED;
        }
    }
    EXIT_FAILED
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn exit_codes_follow_the_cause_through_context() {
        let e = anyhow::Error::new(BadInput("x".into())).context("while parsing");
        assert_eq!(exit_code(&e), 2);
        let e = Err::<(), _>(EnvNotReady::new("no docker", "run scripts/setup"))
            .context("up")
            .unwrap_err();
        assert_eq!(exit_code(&e), 3);
        assert_eq!(exit_code(&anyhow::anyhow!("boom")), 1);
    }
}
