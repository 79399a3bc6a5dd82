//! Progress of long work: a step list with spinners on a terminal, plain
//! lines otherwise, NDJSON events for machines (`-o json`).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Terminal,
    Plain,
    Json,
    Quiet,
}

impl Mode {
    /// Spinners only on an interactive terminal outside CI.
    pub fn detect(json: bool) -> Mode {
        if json {
            Mode::Json
        } else if std::io::stderr().is_terminal() && std::env::var_os("CI").is_none() {
            Mode::Terminal
        } else {
            Mode::Plain
        }
    }
}

pub struct Progress {
    mode: Mode,
    multi: MultiProgress,
}

pub struct Step {
    mode: Mode,
    name: String,
    started: Instant,
    bar: Option<ProgressBar>,
    done: bool,
}

fn json_line(v: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

impl Progress {
    pub fn new(mode: Mode) -> Progress {
        Progress {
            mode,
            multi: MultiProgress::new(),
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Starts a step; finish it with `done` or `fail` (dropping fails it).
    pub fn step(&self, name: impl Into<String>) -> Step {
        let name = name.into();
        let bar = match self.mode {
            Mode::Terminal => {
                let b = self.multi.add(ProgressBar::new_spinner());
                b.set_style(
                    ProgressStyle::with_template("{spinner:.cyan} {msg} {elapsed:.dim}")
                        .expect("valid template"),
                );
                b.set_message(name.clone());
                b.enable_steady_tick(Duration::from_millis(80));
                Some(b)
            }
            Mode::Plain => {
                eprintln!("==> {name}");
                None
            }
            Mode::Json => {
                json_line(serde_json::json!({"event": "step", "step": name, "status": "started"}));
                None
            }
            Mode::Quiet => None,
        };
        Step {
            mode: self.mode,
            name,
            started: Instant::now(),
            bar,
            done: false,
        }
    }

    /// A line of information between steps.
    pub fn note(&self, msg: &str) {
        match self.mode {
            Mode::Terminal => {
                let _ = self.multi.println(msg);
            }
            Mode::Plain => eprintln!("{msg}"),
            Mode::Json => json_line(serde_json::json!({"event": "note", "message": msg})),
            Mode::Quiet => {}
        }
    }
}

impl Step {
    /// Updates the text shown for a running step (terminal only).
    pub fn detail(&self, msg: &str) {
        if let Some(b) = &self.bar {
            b.set_message(format!("{} ({msg})", self.name));
        }
    }

    fn finish(&mut self, ok: bool, extra: &str) {
        self.done = true;
        let secs = self.started.elapsed().as_secs_f64();
        let mark = if ok { "ok" } else { "FAILED" };
        let tail = if extra.is_empty() {
            String::new()
        } else {
            format!(": {extra}")
        };
        match self.mode {
            Mode::Terminal => {
                if let Some(b) = &self.bar {
                    b.set_style(ProgressStyle::with_template("{msg}").expect("valid template"));
                    let sym = if ok { "✔" } else { "✘" };
                    b.finish_with_message(format!("{sym} {} ({secs:.1}s){tail}", self.name));
                }
            }
            Mode::Plain => eprintln!("    {mark} {} ({secs:.1}s){tail}", self.name),
            Mode::Json => json_line(serde_json::json!({
                "event": "step", "step": self.name, "status": if ok { "done" } else { "failed" },
                "elapsed_ms": (secs * 1000.0).round() as u64, "detail": extra,
            })),
            Mode::Quiet => {}
        }
    }

    pub fn done(mut self) {
        self.finish(true, "");
    }
    pub fn done_with(mut self, extra: &str) {
        self.finish(true, extra);
    }
    pub fn fail(mut self, why: &str) {
        self.finish(false, why);
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        if !self.done {
            self.finish(false, "did not finish");
        }
    }
}
