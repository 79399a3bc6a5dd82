//! Reading `records.ndjson` and `events.ndjson`. An agent that was killed may
//! leave a half-written last line: that line is dropped with a warning. A
//! malformed line anywhere else is an error naming file and line.

use std::io::{BufRead, Read};
use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::record::{FinalRead, LabEvent, Record};

/// All records of `records.ndjson`.
pub fn read_records(path: &Path) -> Result<Vec<Record>> {
    read_ndjson(path)
}

/// All lab events of `events.ndjson`.
pub fn read_events(path: &Path) -> Result<Vec<LabEvent>> {
    read_ndjson(path)
}

/// `final.json`: what was read back after the run. A run kept from before
/// it existed has none: then nothing was read back.
pub fn read_final(path: &Path) -> Result<FinalRead> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| Error::BadInput(format!("{}: not a final read: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FinalRead::default()),
        Err(e) => Err(Error::io(format!("reading {}", path.display()), e)),
    }
}

/// The most lines a records or events file may hold: 20 probes at 50
/// requests/s for over 5 hours. The verdict keeps every record in memory.
pub const MAX_LINES: usize = 20_000_000;
/// The longest line: a record is a few hundred bytes.
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// Parse NDJSON text; `name` is used in messages. Blank lines are skipped.
pub fn parse_ndjson<T: DeserializeOwned>(text: &str, name: &str) -> Result<Vec<T>> {
    parse_ndjson_from(text.as_bytes(), name, MAX_LINES)
}

/// Parse NDJSON line by line from `reader`, holding one line at a time (at
/// most `MAX_LINE_BYTES`) beside what was parsed; more than `max_lines`
/// lines is refused. Blank lines are skipped; a last line cut short is
/// dropped with a warning.
pub fn parse_ndjson_from<T: DeserializeOwned>(
    mut reader: impl BufRead,
    name: &str,
    max_lines: usize,
) -> Result<Vec<T>> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    // A line that did not parse, kept until we know whether it was the
    // last: (line number, error, ended with a newline).
    let mut failed: Option<(usize, serde_json::Error, bool)> = None;
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
                "{name}:{n}: a line of over {} KiB: not a probe record or lab event",
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
        if let Some((i, e, _)) = failed.take() {
            return Err(Error::BadInput(format!("{name}:{i}: malformed line: {e}")));
        }
        match serde_json::from_str::<T>(line) {
            Ok(v) => out.push(v),
            Err(e) => failed = Some((n, e, terminated)),
        }
    }
    if let Some((i, e, terminated)) = failed {
        if !terminated || e.is_eof() {
            tracing::warn!("{name}:{i}: dropping a truncated last line ({e})");
        } else {
            return Err(Error::BadInput(format!("{name}:{i}: malformed line: {e}")));
        }
    }
    Ok(out)
}

fn read_ndjson<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let f = std::fs::File::open(path)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    parse_ndjson_from(
        std::io::BufReader::with_capacity(1 << 20, f),
        &path.display().to_string(),
        MAX_LINES,
    )
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
        assert_eq!(read_records(&p).unwrap(), recs);

        // A killed agent: half a line at the end.
        let extra = serde_json::to_string(&recs[0]).unwrap();
        text.push_str(&extra[..extra.len() / 2]);
        std::fs::write(&p, &text).unwrap();
        assert_eq!(read_records(&p).unwrap(), recs);
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
        assert!(err.contains("malformed line"), "{err}");
    }

    #[test]
    fn an_endless_line_is_refused_after_its_first_64_kib() {
        // A reader that never ends and never breaks a line: 1 GiB or more
        // of it is refused without being read.
        let err = parse_ndjson_from::<Record>(
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
        let err = parse_ndjson_from::<Record>(endless, "records.ndjson", 1000)
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
