//! Link traces: what a link did over time (from an incident's monitoring,
//! or written by hand), replayed into a lab link. Two forms, told apart by
//! the file's extension:
//!
//! - CSV (`.csv`) with a header naming the columns, in any order:
//!   `offset_ms,delay_ms,jitter_ms,loss_pct,partition` (`jitter_ms`,
//!   `loss_pct` and `partition` may be left out; `partition` is
//!   `true`/`false` or `1`/`0`). `#` starts a comment line.
//! - NDJSON (`.ndjson`, `.jsonl`): one object per line with those keys.
//!
//! Each row is the link's one-way profile from its offset until the next
//! row. Offsets rise strictly. Read line by line, with bounded size.

use std::io::BufRead;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::link::profile::LinkProfile;
use crate::yaml_file::FileError;

/// The largest trace file read (about a million rows).
pub const MAX_TRACE_BYTES: u64 = 64 << 20;
/// The most rows a trace may have.
pub const MAX_TRACE_ROWS: usize = 1_000_000;

/// One change of the link, at an offset from the replay's start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub offset: Duration,
    pub profile: LinkProfile,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    pub changes: Vec<Change>,
}

impl Trace {
    /// How long the trace runs (the last change's offset).
    pub fn span(&self) -> Duration {
        self.changes.last().map(|c| c.offset).unwrap_or_default()
    }
    /// The profile in force at `t` from the start.
    pub fn at(&self, t: Duration) -> Option<&LinkProfile> {
        let i = self.changes.partition_point(|c| c.offset <= t);
        i.checked_sub(1).map(|i| &self.changes[i].profile)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    offset_ms: f64,
    delay_ms: f64,
    #[serde(default)]
    jitter_ms: f64,
    #[serde(default)]
    loss_pct: f64,
    #[serde(default)]
    partition: bool,
}

/// Reads a trace file (CSV or NDJSON by extension).
pub fn load(path: &Path) -> Result<Trace, FileError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| FileError::whole(path, format!("cannot read trace: {e}")))?;
    if meta.len() > MAX_TRACE_BYTES {
        return Err(FileError::whole(
            path,
            format!(
                "{} bytes; a trace is at most {} MiB (about {MAX_TRACE_ROWS} rows): resample it",
                meta.len(),
                MAX_TRACE_BYTES >> 20
            ),
        ));
    }
    let f = std::fs::File::open(path)
        .map_err(|e| FileError::whole(path, format!("cannot read trace: {e}")))?;
    let ndjson = path
        .extension()
        .is_some_and(|x| x == "ndjson" || x == "jsonl" || x == "json");
    // Bounded even where the size says nothing (a pipe, /dev/zero): a
    // file cut at the limit fails to parse or misses rows, so say why.
    let mut bounded = std::io::Read::take(f, MAX_TRACE_BYTES + 1);
    let trace = parse(std::io::BufReader::new(&mut bounded), path, ndjson);
    if bounded.limit() == 0 {
        return Err(FileError::whole(
            path,
            format!(
                "more than {} MiB; a trace is at most that: resample it",
                MAX_TRACE_BYTES >> 20
            ),
        ));
    }
    trace
}

/// Parses a trace from a reader; `path` names it in errors.
pub fn parse(r: impl BufRead, path: &Path, ndjson: bool) -> Result<Trace, FileError> {
    let err = |line: usize, field: &str, message: String| FileError {
        file: path.to_path_buf(),
        line,
        field: field.to_string(),
        message,
    };
    let mut header: Option<Vec<String>> = None;
    let mut changes: Vec<Change> = Vec::new();
    for (i, line) in r.lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| err(n, "-", format!("cannot read: {e}")))?;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let row: Row = if ndjson {
            serde_json::from_str(t).map_err(|e| {
                let m = e.to_string();
                let field = m
                    .split('`')
                    .nth(1)
                    .filter(|_| m.contains("field"))
                    .unwrap_or("-")
                    .to_string();
                err(n, &field, m)
            })?
        } else {
            let cells: Vec<&str> = t.split(',').map(str::trim).collect();
            let Some(h) = &header else {
                let names: Vec<String> = cells.iter().map(|c| c.to_string()).collect();
                for c in &names {
                    if ![
                        "offset_ms",
                        "delay_ms",
                        "jitter_ms",
                        "loss_pct",
                        "partition",
                    ]
                    .contains(&c.as_str())
                    {
                        return Err(err(
                            n,
                            c,
                            "unknown column (offset_ms, delay_ms, jitter_ms, loss_pct, partition)"
                                .into(),
                        ));
                    }
                }
                for need in ["offset_ms", "delay_ms"] {
                    if !names.iter().any(|c| c == need) {
                        return Err(err(n, need, "the header must name this column".into()));
                    }
                }
                header = Some(names);
                continue;
            };
            if cells.len() != h.len() {
                return Err(err(
                    n,
                    "-",
                    format!("{} cells, the header names {}", cells.len(), h.len()),
                ));
            }
            let mut row = Row {
                offset_ms: 0.0,
                delay_ms: 0.0,
                jitter_ms: 0.0,
                loss_pct: 0.0,
                partition: false,
            };
            for (name, cell) in h.iter().zip(&cells) {
                if name == "partition" {
                    row.partition = match *cell {
                        "true" | "1" => true,
                        "false" | "0" | "" => false,
                        _ => return Err(err(n, name, format!("`{cell}`: true or false"))),
                    };
                    continue;
                }
                let v: f64 = cell
                    .parse()
                    .map_err(|_| err(n, name, format!("`{cell}` is not a number")))?;
                match name.as_str() {
                    "offset_ms" => row.offset_ms = v,
                    "delay_ms" => row.delay_ms = v,
                    "jitter_ms" => row.jitter_ms = v,
                    _ => row.loss_pct = v,
                }
            }
            row
        };
        let ms = |field: &str, v: f64, max: f64| -> Result<Duration, FileError> {
            if !v.is_finite() || v < 0.0 || v > max {
                return Err(err(n, field, format!("{v}: between 0 and {max}")));
            }
            Ok(Duration::from_micros((v * 1e3).round() as u64))
        };
        let offset = ms("offset_ms", row.offset_ms, 86_400_000.0)?;
        let delay = ms("delay_ms", row.delay_ms, 60_000.0)?;
        let jitter = ms("jitter_ms", row.jitter_ms, 60_000.0)?;
        if jitter > delay {
            return Err(err(
                n,
                "jitter_ms",
                format!("{} ms is more than the delay", row.jitter_ms),
            ));
        }
        if !(0.0..=100.0).contains(&row.loss_pct) {
            return Err(err(
                n,
                "loss_pct",
                format!("{}: between 0 and 100", row.loss_pct),
            ));
        }
        if let Some(prev) = changes.last() {
            if offset <= prev.offset {
                return Err(err(
                    n,
                    "offset_ms",
                    format!(
                        "{} ms: offsets must rise (the row before is at {} ms)",
                        row.offset_ms,
                        prev.offset.as_secs_f64() * 1e3
                    ),
                ));
            }
        }
        if changes.len() >= MAX_TRACE_ROWS {
            return Err(err(
                n,
                "-",
                format!("more than {MAX_TRACE_ROWS} rows: resample the trace"),
            ));
        }
        changes.push(Change {
            offset,
            profile: LinkProfile {
                delay,
                jitter,
                loss_pct: row.loss_pct,
                partition: row.partition,
                ..Default::default()
            },
        });
    }
    if changes.is_empty() {
        return Err(FileError::whole(path, "the trace has no rows"));
    }
    Ok(Trace { changes })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_file_without_end_is_refused_at_the_limit() {
        // /dev/zero says it is empty and never ends.
        let e = load(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(e.starts_with("/dev/zero:0: -: more than 64 MiB"), "{e}");
        let e = crate::yaml_file::read(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/dev/zero:0: -: more than 4 MiB"), "{e}");
    }

    use super::*;

    fn csv(s: &str) -> Result<Trace, FileError> {
        parse(s.as_bytes(), Path::new("t.csv"), false)
    }

    #[test]
    fn csv_with_any_column_order_and_comments() {
        let t =
            csv("# incident 42\ndelay_ms,offset_ms,loss_pct\n25,0,0\n30.5,100,1.5\n\n90,250,0\n")
                .unwrap();
        assert_eq!(t.changes.len(), 3);
        assert_eq!(t.changes[1].profile.delay, Duration::from_micros(30_500));
        assert_eq!(t.changes[1].profile.loss_pct, 1.5);
        assert_eq!(t.span(), Duration::from_millis(250));
        assert_eq!(
            t.at(Duration::from_millis(120)).unwrap().delay,
            Duration::from_micros(30_500)
        );
        assert!(t.at(Duration::ZERO).is_some());
    }

    #[test]
    fn ndjson_rows_and_partitions() {
        let t = parse(
            "{\"offset_ms\":0,\"delay_ms\":10}\n{\"offset_ms\":50,\"delay_ms\":10,\"partition\":true}\n"
                .as_bytes(),
            Path::new("t.ndjson"),
            true,
        )
        .unwrap();
        assert!(t.changes[1].profile.partition);
        let e = parse(
            "{\"offset_ms\":0,\"delay_ms\":10,\"colour\":1}\n".as_bytes(),
            Path::new("t.ndjson"),
            true,
        )
        .unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (1, "colour"), "{e}");
    }

    #[test]
    fn bad_rows_name_line_and_column() {
        let e = csv("offset_ms,delay_ms\n0,10\n0,20\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (3, "offset_ms"), "{e}");
        let e = csv("offset_ms,delay_ms\n0,ten\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "delay_ms"), "{e}");
        let e = csv("offset_ms,delay_ms,jitter_ms\n0,10,20\n").unwrap_err();
        assert_eq!(e.field, "jitter_ms", "{e}");
        let e = csv("offset_ms,delay_ms,loss_pct\n0,10,120\n").unwrap_err();
        assert_eq!(e.field, "loss_pct", "{e}");
        let e = csv("offset_ms,latency\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (1, "latency"), "{e}");
        let e = csv("offset_ms\n").unwrap_err();
        assert_eq!(e.field, "delay_ms", "{e}");
        let e = csv("offset_ms,delay_ms\n0,10,3\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(csv("offset_ms,delay_ms\n").is_err());
        assert!(e.to_string().starts_with("t.csv:2:"), "{e}");
    }
}
