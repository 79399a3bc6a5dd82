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

/// The fix an error's text names: an [`EnvNotReady`]'s `fix:` line and the
/// lines after it, joined (`None` when it names none). What a command
/// printed (`error: ...` then `  fix: ...`) reads the same way.
pub fn fix_of(text: &str) -> Option<String> {
    let mut lines = text
        .lines()
        .map(str::trim)
        .skip_while(|l| !l.starts_with("fix:"))
        .filter(|l| !l.is_empty());
    let first = lines.next()?.trim_start_matches("fix:").trim();
    Some(
        std::iter::once(first)
            .chain(lines)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// An error's text on one line, for a summary: its first line and, when it
/// names one, its fix (`...; fix: ...`), so that a refusal the environment
/// gave keeps its fix wherever it is shown.
pub fn said(text: &str) -> String {
    let first = text.lines().next().unwrap_or("").trim();
    match fix_of(text) {
        Some(f) if !first.starts_with("fix:") => format!("{first}; fix: {f}"),
        _ => first.to_string(),
    }
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

    #[test]
    fn a_refusal_said_on_one_line_keeps_its_fix() {
        let e = anyhow::Error::new(EnvNotReady::new(
            "no etcd 3.5",
            "run `scripts/build-go etcd-3.5`",
        ))
        .context("cpmlab up");
        let text = format!("{e:#}");
        assert_eq!(
            fix_of(&text).as_deref(),
            Some("run `scripts/build-go etcd-3.5`")
        );
        assert_eq!(
            said(&text),
            "cpmlab up: no etcd 3.5; fix: run `scripts/build-go etcd-3.5`"
        );
        assert_eq!(said("boom\nmore"), "boom");
        assert_eq!(fix_of("boom"), None);
        // A fix over several lines is joined.
        assert_eq!(
            fix_of("error: x\n  fix: restart dockerd\n  then `cpmlab down`\n").as_deref(),
            Some("restart dockerd then `cpmlab down`")
        );
    }
}
