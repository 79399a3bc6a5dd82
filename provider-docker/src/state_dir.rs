//! Does the engine see the state directory at the path cpmlab writes it?
//! The probe agent's container gets its run directory, under the state
//! directory, as a bind mount of that path on the engine's side. Where the
//! engine sees another directory there, or none (cpmlab in a container
//! whose state directory is its own, a Docker Desktop that does not share
//! the path), the agent writes where nobody reads, and a run fails much
//! later, at the probes, with nothing to say why. So `up` asks before it
//! creates anything: a marker file with a random token is written into the
//! state directory, and a short-lived container of the lab image, with
//! that directory bind-mounted read-only at the same path, reads it back.

use std::path::Path;

use anyhow::Result;
use bollard::models::{Mount, MountType};

use crate::engine::Engine;
use crate::errors::EnvNotReady;

/// The marker's name in the state directory (its token is in the name and
/// the file, so two `up`s at once do not read each other's).
const MARKER_PREFIX: &str = ".cpmlab-engine-sees-";

/// What the helper found at `root` on the engine's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// The same directory: the marker, with this run's token.
    Same,
    /// A directory, without the marker (or with another token).
    Other(String),
    /// Nothing: the engine refused the bind mount, or the helper could not
    /// run.
    Nothing(String),
}

/// The environment problem `seen` is for `root`, with its fix; None for
/// `Same`.
pub fn problem(root: &Path, seen: &Seen) -> Option<EnvNotReady> {
    let why = match seen {
        Seen::Same => return None,
        Seen::Other(w) => format!("it sees another directory at that path ({w})"),
        Seen::Nothing(w) => format!("it sees no directory at that path ({w})"),
    };
    Some(EnvNotReady::new(
        format!(
            "the Docker engine does not see the state directory {} that cpmlab writes: {why}; the probes' records would be written where cpmlab cannot read them",
            root.display()
        ),
        format!(
            "share {} with the engine at the same path (Docker Desktop: Settings, Resources, File sharing; a container running cpmlab: -v {0}:{0}), or set CPMLAB_STATE_DIR (--state-dir) to a directory the engine shares at its own path",
            root.display()
        ),
    ))
}

/// Writes the marker under `root`, has a container of `image` read it
/// through a read-only bind mount of `root` at the same path, and removes
/// the marker.
pub async fn look(engine: &Engine, image: &str, root: &Path) -> Result<Seen> {
    std::fs::create_dir_all(root).map_err(|e| {
        EnvNotReady::new(
            format!("cannot create the state directory {}: {e}", root.display()),
            "set CPMLAB_STATE_DIR (or pass --state-dir) to a directory cpmlab may write",
        )
    })?;
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let token = crate::pki::random_token();
    let name = format!("{MARKER_PREFIX}{}", &token[..token.len().min(16)]);
    let marker = root.join(&name);
    std::fs::write(&marker, &token).map_err(|e| {
        EnvNotReady::new(
            format!("cannot write {}: {e}", marker.display()),
            "set CPMLAB_STATE_DIR (or pass --state-dir) to a directory cpmlab may write",
        )
    })?;
    let mount = Mount {
        target: Some(root.display().to_string()),
        source: Some(root.display().to_string()),
        typ: Some(MountType::BIND),
        read_only: Some(true),
        ..Default::default()
    };
    let cmd = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        "cat \"$1\" 2>/dev/null || { echo \"no $1; there: $(ls -A \"$2\" | head -5 | tr '\\n' ' ')\" >&2; exit 1; }".into(),
        "look".into(),
        marker.display().to_string(),
        root.display().to_string(),
    ];
    let out = engine
        .run_once(
            image,
            &cmd,
            vec![mount],
            &format!("to look for {}", marker.display()),
        )
        .await;
    let _ = std::fs::remove_file(&marker);
    Ok(match out {
        Err(e) => Seen::Nothing(format!("{e:#}")),
        Ok(o) if o.ok() && o.stdout.trim() == token => Seen::Same,
        Ok(o) if o.ok() => Seen::Other(format!("{name} holds another token")),
        Ok(o) => Seen::Other(
            o.stderr
                .trim()
                .strip_prefix(&format!("no {}; ", marker.display()))
                .map(|t| t.trim().to_string())
                .unwrap_or_else(|| o.stderr.trim().to_string()),
        ),
    })
}

/// `look`, an environment not ready where the engine sees anything but the
/// same directory.
pub async fn check(engine: &Engine, image: &str, root: &Path) -> Result<()> {
    let seen = look(engine, image, root).await?;
    match problem(root, &seen) {
        None => Ok(()),
        Some(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_finding_names_the_path_and_both_fixes() {
        let root = Path::new("/home/me/.local/state/cpmlab");
        assert!(problem(root, &Seen::Same).is_none());
        for seen in [
            Seen::Other("there: labs runs".into()),
            Seen::Nothing("bind source path does not exist".into()),
        ] {
            let e = problem(root, &seen).unwrap();
            assert!(e.problem.contains(root.to_str().unwrap()), "{e}");
            assert!(e.fix.contains("at the same path"), "{e}");
            assert!(e.fix.contains("CPMLAB_STATE_DIR"), "{e}");
        }
        let other = problem(root, &Seen::Other("there: x".into())).unwrap();
        assert!(other.problem.contains("another directory"), "{other}");
        let none = problem(root, &Seen::Nothing("refused".into())).unwrap();
        assert!(none.problem.contains("no directory"), "{none}");
    }
}
