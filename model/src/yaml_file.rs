//! YAML files the user writes (topologies, scenarios), read with every
//! error located: `file:line: field: message`. Unknown keys are refused by
//! the types (`deny_unknown_fields`); the line of a field is found from the
//! YAML event stream, so semantic checks after parsing can point at it too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// The largest YAML file read: a hand-written file is kilobytes.
pub const MAX_YAML_BYTES: u64 = 4 << 20;

/// A file that cannot be used, located as precisely as we can.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {field}: {message}", file = file.display())]
pub struct FileError {
    pub file: PathBuf,
    /// 1-based; 0 when the problem has no place in the file (e.g. unreadable).
    pub line: usize,
    /// Dotted path of the field, e.g. `seeds[1].name`.
    pub field: String,
    pub message: String,
}

impl FileError {
    pub fn whole(path: &Path, message: impl Into<String>) -> FileError {
        FileError {
            file: path.to_path_buf(),
            line: 0,
            field: "-".into(),
            message: message.into(),
        }
    }
}

/// An error at `field` of the file `path`, a `T` document read again for
/// the field's line: for checks made after loading, against flags and
/// forms the file does not know. Where the file cannot be read again,
/// the error names the file and the field.
pub fn error_at<T: DeserializeOwned + Default>(
    path: &Path,
    field: &str,
    message: impl Into<String>,
) -> FileError {
    let message = message.into();
    match read(path).and_then(|text| parse::<T>(&text, path)) {
        Ok((_, lines)) => lines.error(path, field, message),
        Err(_) => FileError {
            file: path.to_path_buf(),
            line: 0,
            field: field.into(),
            message,
        },
    }
}

/// Reads a user file, refusing what is not a small text file.
pub fn read(path: &Path) -> Result<String, FileError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| FileError::whole(path, format!("cannot read file: {e}")))?;
    if meta.len() > MAX_YAML_BYTES {
        return Err(FileError::whole(
            path,
            format!(
                "{} bytes; a YAML file here is at most {} MiB",
                meta.len(),
                MAX_YAML_BYTES >> 20
            ),
        ));
    }
    // Bounded even where the size says nothing (a pipe, /dev/zero).
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| {
            use std::io::Read;
            f.take(MAX_YAML_BYTES + 1).read_to_string(&mut text)
        })
        .map_err(|e| FileError::whole(path, format!("cannot read file: {e}")))?;
    if text.len() as u64 > MAX_YAML_BYTES {
        return Err(FileError::whole(
            path,
            format!(
                "more than {} MiB; a YAML file here is at most that",
                MAX_YAML_BYTES >> 20
            ),
        ));
    }
    Ok(text)
}

/// Parses YAML into `T` (an empty document is `T::default()`), with the
/// index of where each field sits for later, semantic errors.
pub fn parse<T: DeserializeOwned + Default>(
    text: &str,
    path: &Path,
) -> Result<(T, LineIndex), FileError> {
    let err = |line: usize, field: &str, message: String| FileError {
        file: path.to_path_buf(),
        line,
        field: field.to_string(),
        message,
    };
    let lines = match line_index(text) {
        Ok(l) => l,
        Err((line, msg)) => return Err(err(line, "-", format!("not valid YAML: {msg}"))),
    };
    if text.trim().is_empty() {
        return Ok((T::default(), lines));
    }
    let value = serde_saphyr::from_str(text).map_err(|e| {
        let (line, col) = e
            .location()
            .map(|l| (l.line() as usize, l.column() as usize))
            .unwrap_or((0, 0));
        let message = bare_message(&e);
        // An unknown key is not in the type, so name it from the message.
        let field = match (lines.field_at(line, col), unknown_key(&message)) {
            (Some(f), _) => f,
            (None, Some(k)) => k,
            (None, None) => "-".into(),
        };
        err(line, &field, message)
    })?;
    Ok((value, lines))
}

/// serde-saphyr's message without its `line L column C: ` prefix and its
/// source snippet: the error names the line itself.
fn bare_message(e: &serde_saphyr::Error) -> String {
    let text = e.without_snippet().to_string();
    let first = text.lines().next().unwrap_or("").trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let msg = match first.split_once(": ") {
        Some((head, rest)) if head.starts_with("line ") && head.contains(" column ") => rest,
        _ => first,
    };
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// The key an "unknown field `x`" message names.
fn unknown_key(message: &str) -> Option<String> {
    let i = message.find("unknown field `")?;
    Some(message[i + 15..].split('`').next()?.to_string())
}

/// Where each field of a YAML document sits: dotted paths (`seeds[1].name`)
/// to the 1-based line and column of their key or item.
pub struct LineIndex(BTreeMap<String, (usize, usize)>);

impl LineIndex {
    /// The line of `field`, else of its closest ancestor, else 1.
    pub fn line_of(&self, field: &str) -> usize {
        let mut f = field.to_string();
        loop {
            if let Some((l, _)) = self.0.get(&f) {
                return *l;
            }
            match f.rfind(['.', '[']) {
                Some(i) => f.truncate(i),
                None => return 1,
            }
        }
    }

    /// The field at a position the deserializer reported: the one that
    /// starts exactly there, else the deepest one on that line.
    fn field_at(&self, line: usize, col: usize) -> Option<String> {
        let on_line = self.0.iter().filter(|(_, (l, _))| *l == line);
        on_line
            .clone()
            .find(|(_, (_, c))| *c == col)
            .or_else(|| on_line.max_by_key(|(p, _)| p.matches(['.', '[']).count()))
            .map(|(p, _)| p.clone())
    }
}

/// Walks the YAML event stream and records where each key or item sits.
fn line_index(text: &str) -> Result<LineIndex, (usize, String)> {
    use serde_saphyr::granit_parser::{Event, Parser, Span, SpannedEventReceiver};

    enum Frame {
        Map { key: Option<String> },
        Seq { idx: usize },
    }
    struct Rx {
        stack: Vec<(String, Frame)>,
        out: BTreeMap<String, (usize, usize)>,
    }
    impl Rx {
        /// Path for the value about to start in the current frame.
        fn value_path(&mut self) -> Option<String> {
            let (path, frame) = self.stack.last_mut()?;
            match frame {
                Frame::Seq { idx } => {
                    let p = format!("{path}[{idx}]");
                    *idx += 1;
                    Some(p)
                }
                Frame::Map { key } => key.take().map(|k| {
                    if path.is_empty() {
                        k
                    } else {
                        format!("{path}.{k}")
                    }
                }),
            }
        }
    }
    impl<'i> SpannedEventReceiver<'i> for Rx {
        fn on_event(&mut self, ev: Event<'i>, span: Span) {
            let at = (span.start.line(), span.start.col() + 1);
            // A scalar in key position of a map only names the next value.
            if let (Event::Scalar(s, ..), Some((_, Frame::Map { key: k @ None }))) =
                (&ev, self.stack.last_mut())
            {
                *k = Some(s.to_string());
                let p = self
                    .stack
                    .last()
                    .map(|(p, _)| p.clone())
                    .unwrap_or_default();
                let full = if p.is_empty() {
                    s.to_string()
                } else {
                    format!("{p}.{s}")
                };
                self.out.entry(full).or_insert(at);
                return;
            }
            match ev {
                Event::MappingStart(..) | Event::SequenceStart(..) => {
                    let path = if self.stack.is_empty() {
                        String::new()
                    } else {
                        self.value_path().unwrap_or_default()
                    };
                    if !path.is_empty() {
                        self.out.entry(path.clone()).or_insert(at);
                    }
                    let frame = if matches!(ev, Event::MappingStart(..)) {
                        Frame::Map { key: None }
                    } else {
                        Frame::Seq { idx: 0 }
                    };
                    self.stack.push((path, frame));
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    self.stack.pop();
                }
                Event::Scalar(..) | Event::Alias(_) => {
                    if let Some(p) = self.value_path() {
                        self.out.entry(p).or_insert(at);
                    }
                }
                _ => {}
            }
        }
    }
    let mut rx = Rx {
        stack: Vec::new(),
        out: BTreeMap::new(),
    };
    let mut parser = Parser::new_from_str(text);
    parser
        .load(&mut rx, false)
        .map_err(|e| (e.marker().line(), e.info().to_string()))?;
    Ok(LineIndex(rx.out))
}

impl LineIndex {
    /// An error at `field` (its line, else its closest ancestor's).
    pub fn error(&self, path: &Path, field: &str, message: impl Into<String>) -> FileError {
        FileError {
            file: path.to_path_buf(),
            line: self.line_of(field),
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// Whether the document spells `field` out (not left to its default).
    pub fn has(&self, field: &str) -> bool {
        self.0.contains_key(field)
    }
}
