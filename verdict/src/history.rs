//! The counter's history, captured while the run goes (`history.ndjson`):
//! the lost-writes and linearizable rules hold the acknowledged writes and
//! the reads to it. An etcd that compacts its history (etcd-druid's
//! members do, and kube-apiserver asks for a compaction every five
//! minutes) leaves nothing to read back at the end of a long run; a watch
//! that follows the counter's key from the start sees every version as it
//! is written, and a compaction can take only what the watch had not yet
//! seen when it had to start again.
//!
//! The file is written in turn, never at once, by:
//! - `cpmlab probe start`, before the agent starts: the first `watch` line,
//!   from the counter's version then (etcd's revision then, plus one, when
//!   there is none yet), with `run_from_rev`, the first revision the run's
//!   writes can have;
//! - `cpmlab run`'s observer, while the probes run: every version the
//!   watch delivers, and a new `watch` line from the revision after the
//!   last one seen whenever the watch breaks (a member killed or removed,
//!   the cluster moved between seeds);
//! - `cpmlab probe stop`'s final read, after the agent stopped: the watch
//!   resumed once more, up to the counter's revision then, and `end`.
//!
//! A watch that starts from a revision etcd has compacted away is told the
//! compaction's revision; the writer then reads the counter at that
//! revision and writes a `compacted` line with the revision of the version
//! it found (`latest_rev`). Versions between the revision asked for and
//! that one were never seen: the capture names them, and the rules that
//! read the history are degraded with those revisions. When the counter
//! had not changed since (the watch had seen it all), nothing is lost.
//!
//! A `watch` line names the etcd cluster (its ID): a plan that moves the
//! counter to a new cluster (the mirror plan, a restore) starts a section
//! of its own, from that cluster's first revision; the rules read the last
//! cluster's, as the final read of the history always did.

use serde::{Deserialize, Serialize};

use crate::record::HistoryEntry;

/// The file in a run directory.
pub const HISTORY_FILE: &str = "history.ndjson";

/// One line of `history.ndjson`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum HistoryLine {
    /// A watch of the counter's key began (or began again) at `from_rev`.
    Watch {
        at_unix_ms: f64,
        from_rev: u64,
        /// The etcd cluster's ID (hex).
        cluster: String,
        /// Who watched: `probe start`, `observer`, `final read`.
        by: String,
        /// On the first line: the first revision the run's writes can have.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_from_rev: Option<u64>,
    },
    /// A version of the counter: its mod revision and its value.
    Version { rev: u64, value: u64 },
    /// The counter was deleted at `rev`.
    Deleted { rev: u64 },
    /// A version whose stored bytes hold no counter value.
    Unreadable { rev: u64, error: String },
    /// etcd had compacted its history to `compact_rev` when the watch asked
    /// from `from_rev`; the counter's version at `compact_rev` had mod
    /// revision `latest_rev` (`None`: it could not be read).
    Compacted {
        at_unix_ms: f64,
        from_rev: u64,
        compact_rev: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        latest_rev: Option<u64>,
    },
    /// The watch broke (a `watch` line resumes it).
    Broken { at_unix_ms: f64, error: String },
    /// Complete: every version up to `rev`, the counter's mod revision
    /// after the probes stopped, is above.
    End { at_unix_ms: f64, rev: u64 },
}

/// What a capture holds, as the rules read it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Captured {
    /// The last cluster's versions, in revision order.
    pub versions: Vec<HistoryEntry>,
    /// Where its first watch began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_rev: Option<u64>,
    /// The revision the capture was complete to (`end`), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_rev: Option<u64>,
    /// How many watches it took (the first and each resumption).
    pub watches: u64,
    /// How many etcd clusters it followed.
    pub clusters: u64,
    /// Compactions that met a watch and took nothing from it.
    pub harmless_compactions: u64,
    /// What it lacks, each with its revisions: the rules that read the
    /// history are degraded by any.
    pub gaps: Vec<String>,
}

impl Captured {
    /// The history the rules read, or why there is none to trust.
    pub fn history(&self) -> Result<Vec<HistoryEntry>, String> {
        if self.gaps.is_empty() {
            Ok(self.versions.clone())
        } else {
            Err(self.gaps.join("; "))
        }
    }

    /// In words, for the rules' messages and `--explain-layout`.
    pub fn summary(&self) -> String {
        let span = match (self.from_rev, self.end_rev) {
            (Some(a), Some(b)) => format!("from revision {a} to {b}"),
            (Some(a), None) => format!("from revision {a}, never completed"),
            _ => "never started".into(),
        };
        format!(
            "watched during the run ({HISTORY_FILE}): {} version(s) {span}, {} watch(es){}{}",
            self.versions.len(),
            self.watches,
            if self.clusters > 1 {
                format!(", the last of {} etcd clusters", self.clusters)
            } else {
                String::new()
            },
            if self.harmless_compactions > 0 {
                format!(
                    ", {} compaction(s) met it and took nothing it had not seen",
                    self.harmless_compactions
                )
            } else {
                String::new()
            }
        )
    }
}

/// Where a writer resumes the capture: the last section's cluster and the
/// revision after the last one it accounts for (the last version seen,
/// or where a compaction it was told of left it, or where its first watch
/// began); `None` when the capture holds no watch yet.
pub fn resume(lines: &[HistoryLine]) -> Option<(String, u64)> {
    let mut at: Option<(String, u64)> = None;
    for l in lines {
        let next = match l {
            HistoryLine::Watch {
                from_rev, cluster, ..
            } => {
                if at.as_ref().is_none_or(|(c, _)| c != cluster) {
                    at = Some((cluster.clone(), *from_rev));
                    continue;
                }
                *from_rev
            }
            HistoryLine::Version { rev, .. }
            | HistoryLine::Deleted { rev }
            | HistoryLine::Unreadable { rev, .. } => rev + 1,
            HistoryLine::Compacted { compact_rev, .. } => *compact_rev,
            HistoryLine::Broken { .. } | HistoryLine::End { .. } => continue,
        };
        if let Some((_, n)) = at.as_mut() {
            *n = (*n).max(next);
        }
    }
    at
}

/// Reads a capture's lines (see the module doc).
pub fn read(lines: &[HistoryLine]) -> Captured {
    let mut c = Captured::default();
    let mut cluster: Option<&str> = None;
    let mut last_seen: Option<u64> = None;
    // Where the next watch must start, at the latest: after the last
    // version seen, or where a compaction it was told of left it.
    let mut next: Option<u64> = None;
    // Why the watch last broke: where none ever began, that is the reason.
    let mut last_break: Option<&str> = None;
    for l in lines {
        match l {
            HistoryLine::Watch {
                from_rev,
                cluster: id,
                ..
            } => {
                c.watches += 1;
                if cluster != Some(id.as_str()) {
                    // A new cluster: its own section.
                    cluster = Some(id);
                    c.clusters += 1;
                    c.versions.clear();
                    c.gaps.clear();
                    c.end_rev = None;
                    c.harmless_compactions = 0;
                    c.from_rev = Some(*from_rev);
                    last_seen = None;
                } else if let Some(n) = next.filter(|n| from_rev > n) {
                    // A resumption must not skip what came after the last
                    // version seen.
                    c.gaps.push(format!(
                        "the watch resumed from revision {from_rev}, after revision {n} it had to resume from: revisions {n} to {} were not watched",
                        from_rev - 1
                    ));
                }
                next = Some(next.map_or(*from_rev, |n| n.max(*from_rev)));
                c.end_rev = None;
            }
            HistoryLine::Version { rev, value } => {
                if last_seen.is_none_or(|s| *rev > s) {
                    c.versions.push(HistoryEntry {
                        value: *value,
                        rev: *rev,
                    });
                    last_seen = Some(*rev);
                }
                next = Some(next.unwrap_or(0).max(rev + 1));
            }
            HistoryLine::Deleted { rev } => {
                last_seen = Some(last_seen.map_or(*rev, |s| s.max(*rev)));
                next = Some(next.unwrap_or(0).max(rev + 1));
            }
            HistoryLine::Unreadable { rev, error } => {
                c.gaps
                    .push(format!("the counter's version at revision {rev}: {error}"));
                last_seen = Some(last_seen.map_or(*rev, |s| s.max(*rev)));
                next = Some(next.unwrap_or(0).max(rev + 1));
            }
            HistoryLine::Compacted {
                from_rev,
                compact_rev,
                latest_rev,
                ..
            } => {
                next = Some(next.unwrap_or(0).max(*compact_rev));
                match latest_rev {
                Some(l) if l <= from_rev => c.harmless_compactions += 1,
                Some(l) => c.gaps.push(format!(
                    "etcd compacted its history to revision {compact_rev} before the watch, resumed from revision {from_rev}, could read it: the counter's versions from revision {from_rev} to {} were never seen (its version at revision {l} was)",
                    l - 1
                )),
                None => c.gaps.push(format!(
                    "etcd compacted its history to revision {compact_rev} before the watch, resumed from revision {from_rev}, could read it, and the counter at revision {compact_rev} could not be read: versions from revision {from_rev} to {} may be missing",
                    compact_rev - 1
                )),
            }
            }
            HistoryLine::Broken { error, .. } => last_break = Some(error),
            HistoryLine::End { rev, .. } => {
                c.end_rev = Some(*rev);
                if let Some(seen) = last_seen.filter(|s| s < rev) {
                    c.gaps.push(format!(
                        "the capture ends at revision {rev}, but its last version seen is at revision {seen}"
                    ));
                }
            }
        }
    }
    if c.watches == 0 {
        let why = last_break.map(|w| format!(": {w}")).unwrap_or_default();
        c.gaps
            .push(format!("{HISTORY_FILE} holds no watch of the counter{why}"));
    } else if c.end_rev.is_none() {
        c.gaps.push(format!(
            "the capture was never completed after the probes stopped (no `end` line): versions after revision {} may be missing",
            last_seen.or(c.from_rev).unwrap_or(0)
        ));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(from: u64, cluster: &str) -> HistoryLine {
        HistoryLine::Watch {
            at_unix_ms: 0.0,
            from_rev: from,
            cluster: cluster.into(),
            by: "observer".into(),
            run_from_rev: None,
        }
    }
    fn v(rev: u64, value: u64) -> HistoryLine {
        HistoryLine::Version { rev, value }
    }
    fn end(rev: u64) -> HistoryLine {
        HistoryLine::End {
            at_unix_ms: 0.0,
            rev,
        }
    }
    fn compacted(from: u64, to: u64, latest: Option<u64>) -> HistoryLine {
        HistoryLine::Compacted {
            at_unix_ms: 0.0,
            from_rev: from,
            compact_rev: to,
            latest_rev: latest,
        }
    }

    #[test]
    fn a_capture_resumed_after_a_break_is_whole() {
        let lines = [
            watch(10, "c1"),
            v(10, 0),
            v(12, 1),
            HistoryLine::Broken {
                at_unix_ms: 0.0,
                error: "member removed".into(),
            },
            watch(13, "c1"),
            v(15, 2),
            end(15),
        ];
        let c = read(&lines);
        assert_eq!(c.gaps, Vec::<String>::new());
        assert_eq!(c.history().unwrap().len(), 3);
        assert_eq!((c.from_rev, c.end_rev, c.watches), (Some(10), Some(15), 2));
        assert!(c.summary().contains("3 version(s) from revision 10 to 15"));
    }

    #[test]
    fn a_compaction_that_overtook_the_watch_is_named_with_its_revisions() {
        let lines = [
            watch(10, "c1"),
            v(10, 0),
            v(12, 1),
            watch(13, "c1"),
            compacted(13, 40, Some(30)),
            v(30, 5),
            end(30),
        ];
        let err = read(&lines).history().unwrap_err();
        assert!(
            err.contains("compacted its history to revision 40")
                && err.contains("from revision 13 to 29"),
            "{err}"
        );
        // The counter had not changed since the last version seen: nothing
        // was lost.
        let lines = [
            watch(10, "c1"),
            v(12, 1),
            watch(13, "c1"),
            compacted(13, 40, Some(12)),
            end(12),
        ];
        let c = read(&lines);
        assert_eq!(c.history().unwrap().len(), 1);
        assert_eq!(c.harmless_compactions, 1);
    }

    #[test]
    fn a_capture_never_completed_or_skipping_revisions_is_not_trusted() {
        let err = read(&[watch(10, "c1"), v(12, 1)]).history().unwrap_err();
        assert!(err.contains("never completed"), "{err}");
        let err = read(&[watch(10, "c1"), v(12, 1), watch(20, "c1"), end(12)])
            .history()
            .unwrap_err();
        assert!(err.contains("revisions 13 to 19 were not watched"), "{err}");
        // After a compaction it was told of, a watch resumes where it left.
        let c = read(&[
            watch(10, "c1"),
            v(12, 1),
            watch(13, "c1"),
            compacted(13, 40, Some(12)),
            watch(40, "c1"),
            end(12),
        ]);
        assert_eq!(c.gaps, Vec::<String>::new());
        assert!(read(&[]).history().is_err());
        // A capture that never watched says why, from its last break.
        let err = read(&[HistoryLine::Broken {
            at_unix_ms: 0.0,
            error: "etcd is out of reach".into(),
        }])
        .history()
        .unwrap_err();
        assert!(
            err.contains("no watch of the counter: etcd is out of reach"),
            "{err}"
        );
    }

    #[test]
    fn a_new_cluster_starts_a_section_of_its_own() {
        let lines = [
            watch(10, "c1"),
            v(12, 1),
            watch(1, "c2"),
            v(5, 1),
            v(6, 2),
            end(6),
        ];
        let c = read(&lines);
        assert_eq!(c.clusters, 2);
        assert_eq!(
            c.history().unwrap(),
            vec![
                HistoryEntry { value: 1, rev: 5 },
                HistoryEntry { value: 2, rev: 6 }
            ]
        );
    }

    #[test]
    fn a_writer_resumes_after_what_it_accounts_for() {
        assert_eq!(resume(&[]), None);
        let lines = [watch(10, "c1"), v(12, 1), v(15, 2)];
        assert_eq!(resume(&lines), Some(("c1".into(), 16)));
        let lines = [watch(10, "c1"), compacted(10, 40, Some(30)), v(30, 5)];
        assert_eq!(resume(&lines), Some(("c1".into(), 40)));
        let lines = [watch(10, "c1"), v(12, 1), watch(1, "c2")];
        assert_eq!(resume(&lines), Some(("c2".into(), 1)));
    }

    #[test]
    fn lines_round_trip_with_their_kind() {
        let l = compacted(13, 40, Some(30));
        let text = serde_json::to_string(&l).unwrap();
        assert!(text.starts_with(r#"{"kind":"compacted""#), "{text}");
        assert_eq!(serde_json::from_str::<HistoryLine>(&text).unwrap(), l);
    }
}
