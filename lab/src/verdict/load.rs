//! Reading `records.ndjson` and `events.ndjson`. An agent that was killed may
//! leave a half-written last line: that line is dropped with a warning. A
//! malformed line anywhere else is an error naming file and line.

use std::path::Path;

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;

use crate::errors::BadInput;
use crate::probe::record::{FinalRead, LabEvent, Record};

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
            .map_err(|e| BadInput(format!("{}: not a final read: {e}", path.display())).into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FinalRead::default()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Parse NDJSON text; `name` is used in messages. Blank lines are skipped.
pub fn parse_ndjson<T: DeserializeOwned>(text: &str, name: &str) -> Result<Vec<T>> {
    let lines: Vec<&str> = text.split('\n').collect();
    // The last line with content, and whether the file ends after it with
    // a newline (a complete line) or not (possibly cut short).
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    let terminated = text.ends_with('\n');
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<T>(line) {
            Ok(v) => out.push(v),
            Err(e) if Some(i) == last && (!terminated || e.is_eof()) => {
                tracing::warn!("{name}:{}: dropping a truncated last line ({e})", i + 1);
            }
            Err(e) => {
                return Err(BadInput(format!("{name}:{}: malformed line: {e}", i + 1)).into());
            }
        }
    }
    Ok(out)
}

fn read_ndjson<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_ndjson(&text, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::testutil::clean_run;

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
