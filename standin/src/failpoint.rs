//! Failpoints of the stand-in, for tests that must prove a check catches a
//! real fault (as etcd's robustness suite arms gofail failpoints): a file
//! under `/run/cpmlab/failpoints/` arms one for a single firing (`touch`
//! it). Never armed in normal runs.

use std::path::Path;

pub const DIR: &str = "/run/cpmlab/failpoints";
/// The next watch event (of any watch) is not sent.
pub const DROP_WATCH_EVENT: &str = "drop-watch-event";
/// The next watch event is an ERROR (503, as when the etcd watch fails)
/// instead, and that watch ends.
pub const WATCH_ERROR: &str = "watch-error";
/// The next GET of one object returns the version 5 writes before the
/// current one, as a replica reading from a lagging member would.
pub const STALE_READ: &str = "stale-read";
/// The next GET of one object answers 200 with a body cut short.
pub const CORRUPT_BODY: &str = "corrupt-body";

/// Fires the failpoint once if it is armed.
pub fn take(name: &str) -> bool {
    take_in(Path::new(DIR), name)
}

fn take_in(dir: &Path, name: &str) -> bool {
    let p = dir.join(name);
    if !p.exists() {
        return false;
    }
    // Remove it first: concurrent watches fire it once between them.
    std::fs::remove_file(&p).is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_failpoint_fires_once() {
        let d = tempfile::tempdir().unwrap();
        assert!(!crate::failpoint::take_in(d.path(), "x"));
        std::fs::write(d.path().join("x"), "").unwrap();
        assert!(crate::failpoint::take_in(d.path(), "x"));
        assert!(!crate::failpoint::take_in(d.path(), "x"));
    }
}
