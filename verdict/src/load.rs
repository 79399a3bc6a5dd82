//! Reading the files of a run directory, by one rule for input the
//! verdict cannot read, whichever file it is (records, lab events, the
//! observer's samples, the counter's watched history):
//!
//! - a line that does not parse is bad input, an error naming the file and
//!   the line (the caller's exit 2): the verdict never judges what is left
//!   of a file it could not read;
//! - except one: the last line, when it does not end in a newline (an
//!   agent killed while writing it). That line is dropped and said to be
//!   ([`Dropped`]: the file, the line, its size).
//!
//! Blank lines are skipped. A JSON document (`final.json`, `criteria.json`,
//! `probes.json`) that does not parse is bad input naming its line and
//! column.

use std::io::{BufRead, Read};
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::record::{FinalRead, LabEvent, Record};

/// The unterminated last line of a file, dropped (a killed writer's tail).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    /// The file's name in the run directory (`records.ndjson`).
    pub file: String,
    /// Its line number, from 1.
    pub line: usize,
    /// Its size in bytes.
    pub bytes: usize,
}

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} line {} ({} bytes, no newline: a killed writer's tail)",
            self.file, self.line, self.bytes
        )
    }
}

/// What a line file held: its values, and the tail dropped, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Lines<T> {
    pub items: Vec<T>,
    pub dropped: Option<Dropped>,
}

/// All records of `records.ndjson`.
pub fn read_records(path: &Path) -> Result<Vec<Record>> {
    Ok(read_lines(path)?.items)
}

/// All lab events of `events.ndjson`.
pub fn read_events(path: &Path) -> Result<Vec<LabEvent>> {
    Ok(read_lines(path)?.items)
}

/// `final.json`: what was read back after the run. A run kept from before
/// it existed has none: then nothing was read back.
pub fn read_final(path: &Path) -> Result<FinalRead> {
    Ok(read_json(path)?.unwrap_or_default())
}

/// A JSON document; `None` when the file is missing. One that does not
/// parse is bad input naming its line and column.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_json(&text, &path.display().to_string()).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("reading {}", path.display()), e)),
    }
}

/// Parse one JSON document; `name` is used in messages.
pub fn parse_json<T: DeserializeOwned>(text: &str, name: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| {
        Error::BadInput(format!(
            "{name}:{}:{}: does not parse: {e}",
            e.line(),
            e.column()
        ))
    })
}

/// The most lines a records or events file may hold: 20 probes at 50
/// requests/s for over 5 hours. The verdict keeps every record in memory.
pub const MAX_LINES: usize = 20_000_000;
/// The longest line: a record is a few hundred bytes.
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// Parse NDJSON text; `name` is used in messages (see the module doc).
pub fn parse_ndjson<T: DeserializeOwned>(text: &str, name: &str) -> Result<Vec<T>> {
    Ok(parse_lines(text.as_bytes(), name, MAX_LINES)?.items)
}

/// Parse NDJSON line by line from `reader`, holding one line at a time (at
/// most `MAX_LINE_BYTES`) beside what was parsed; more than `max_lines`
/// lines is refused. Blank lines are skipped; a line that does not parse
/// is an error, but the last one when it has no newline, which is
/// dropped (see the module doc).
pub fn parse_lines<T: DeserializeOwned>(
    mut reader: impl BufRead,
    name: &str,
    max_lines: usize,
) -> Result<Lines<T>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    // A line that did not parse, kept until we know whether it was the
    // last: (line number, error, ended with a newline, size).
    let mut failed: Option<(usize, serde_json::Error, bool, usize)> = None;
    let mut n = 0usize;
    loop {
        buf.clear();
        let got = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::io(format!("reading {name}"), e))?;
        if got == 0 {
            break;
        }
        n += 1;
        let terminated = buf.last() == Some(&b'\n');
        if !terminated && buf.len() > MAX_LINE_BYTES {
            return Err(Error::BadInput(format!(
                "{name}:{n}: a line of over {} KiB: not a line this file holds",
                MAX_LINE_BYTES >> 10
            )));
        }
        if n > max_lines {
            return Err(Error::BadInput(format!(
                "{name}: over {max_lines} lines; the verdict holds every record in memory \
                 and judges at most that many: judge a shorter run"
            )));
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            continue;
        }
        if let Some((i, e, _, _)) = failed.take() {
            return Err(malformed(name, i, &e));
        }
        match serde_json::from_str::<T>(line) {
            Ok(v) => out.push(v),
            Err(e) => failed = Some((n, e, terminated, buf.len())),
        }
    }
    let mut dropped = None;
    if let Some((line, e, terminated, bytes)) = failed {
        if terminated {
            return Err(malformed(name, line, &e));
        }
        tracing::warn!("{name}:{line}: dropping an unterminated last line of {bytes} bytes ({e})");
        dropped = Some(Dropped {
            file: short_name(name),
            line,
            bytes,
        });
    }
    Ok(Lines {
        items: out,
        dropped,
    })
}

fn malformed(name: &str, line: usize, e: &serde_json::Error) -> Error {
    Error::BadInput(format!(
        "{name}:{line}: a line that does not parse: {e} (only an unterminated last line, a killed writer's tail, is dropped)"
    ))
}

/// A path's file name, as `Dropped` names it.
fn short_name(name: &str) -> String {
    Path::new(name)
        .file_name()
        .map_or_else(|| name.to_string(), |f| f.to_string_lossy().into_owned())
}

/// A line file of the run directory (see the module doc).
pub fn read_lines<T: DeserializeOwned>(path: &Path) -> Result<Lines<T>> {
    let f = std::fs::File::open(path)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    parse_lines(
        std::io::BufReader::with_capacity(1 << 20, f),
        &path.display().to_string(),
        MAX_LINES,
    )
}

/// A line file that may be missing (`None`).
pub fn read_lines_if<T: DeserializeOwned>(path: &Path) -> Result<Option<Lines<T>>> {
    if !path.exists() {
        return Ok(None);
    }
    read_lines(path).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::clean_run;

    fn ndjson(recs: &[Record]) -> String {
        recs.iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect()
    }

    #[test]
    fn verdict_load_round_trip_and_truncated_last_line() {
        let recs = clean_run();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("records.ndjson");
        let mut text = ndjson(&recs);
        std::fs::write(&p, &text).unwrap();
        let read = read_lines::<Record>(&p).unwrap();
        assert_eq!(read.items, recs);
        assert_eq!(read.dropped, None);

        // A killed agent: half a line at the end, without its newline:
        // dropped, and said to be.
        let extra = serde_json::to_string(&recs[0]).unwrap();
        let half = &extra[..extra.len() / 2];
        text.push_str(half);
        std::fs::write(&p, &text).unwrap();
        let read = read_lines::<Record>(&p).unwrap();
        assert_eq!(read.items, recs);
        assert_eq!(
            read.dropped,
            Some(Dropped {
                file: "records.ndjson".into(),
                line: recs.len() + 1,
                bytes: half.len()
            })
        );

        // The same half line ending in a newline is no killed writer's
        // tail: a collector wrote half a record and went on.
        text.push('\n');
        std::fs::write(&p, &text).unwrap();
        let err = read_records(&p).unwrap_err().to_string();
        assert!(
            err.contains(&format!(
                "records.ndjson:{}: a line that does not parse",
                recs.len() + 1
            )),
            "{err}"
        );
    }

    #[test]
    fn a_json_document_that_does_not_parse_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("final.json");
        std::fs::write(&p, "{\n  \"counter\": 5,\n  \"history\": [}\n").unwrap();
        let err = read_final(&p).unwrap_err();
        assert!(err.is_bad_input());
        assert!(err.to_string().contains("final.json:3:"), "{err}");
        // Missing: nothing was read back.
        assert_eq!(
            read_final(&dir.path().join("none.json")).unwrap(),
            FinalRead::default()
        );
    }

    #[test]
    fn verdict_load_malformed_middle_line_names_file_and_line() {
        let recs = clean_run();
        let mut lines: Vec<String> = recs[..5]
            .iter()
            .map(|r| serde_json::to_string(r).unwrap())
            .collect();
        lines[2] = "{\"seq\": 2, \"probe\": \"nope\"}".into();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("records.ndjson");
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        let err = read_records(&p).unwrap_err().to_string();
        assert!(err.contains("records.ndjson:3:"), "{err}");
        assert!(err.contains("a line that does not parse"), "{err}");
    }

    #[test]
    fn an_endless_line_is_refused_after_its_first_64_kib() {
        // A reader that never ends and never breaks a line: 1 GiB or more
        // of it is refused without being read.
        let err = parse_lines::<Record>(
            std::io::BufReader::new(std::io::repeat(b'x')),
            "records.ndjson",
            MAX_LINES,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("records.ndjson:1: a line of over 64 KiB"),
            "{err}"
        );
    }

    #[test]
    fn too_many_lines_are_refused_with_the_limit() {
        let line = serde_json::to_string(&clean_run()[0]).unwrap() + "\n";
        // Endless records: refused at the limit, not read to the end.
        let endless = std::io::BufReader::new(Forever(line.into_bytes(), 0));
        let err = parse_lines::<Record>(endless, "records.ndjson", 1000)
            .unwrap_err()
            .to_string();
        assert!(err.contains("records.ndjson: over 1000 lines"), "{err}");
        assert!(err.contains("judge a shorter run"), "{err}");
    }

    /// Its bytes again and again: a file that does not end.
    struct Forever(Vec<u8>, usize);
    impl Read for Forever {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = out.len().min(self.0.len() - self.1);
            out[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
            self.1 = (self.1 + n) % self.0.len();
            Ok(n)
        }
    }

    #[test]
    fn verdict_load_events() {
        let text = concat!(
            r#"{"at_unix_ms":1.0,"end_unix_ms":5.0,"kind":"phase","name":"prepare"}"#,
            "\n\n",
            r#"{"at_unix_ms":2.0,"kind":"fault","name":"cut","detail":"link down"}"#,
            "\n",
        );
        let ev: Vec<LabEvent> = parse_ndjson(text, "events.ndjson").unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].end_unix_ms, Some(5.0));
        assert_eq!(ev[1].detail, "link down");
    }
}
