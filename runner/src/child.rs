//! The runner drives each lab through cpmlab's own commands (`up`, `link`,
//! `probe`, `migrate`, `down`), as a user would, so a scenario exercises
//! exactly what the CLI does. Each runs in its own process group (a Ctrl-C
//! reaches the runner, which then asks the command to stop at its safe
//! point); its output goes into the scenario's `run.log`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use tokio::io::AsyncReadExt;

use crate::errors::Cancel;

/// How to call cpmlab for one lab, and where its output goes.
#[derive(Clone)]
pub struct Cpmlab {
    pub exe: PathBuf,
    pub state_root: PathBuf,
    pub lab: String,
    log: Arc<Mutex<std::fs::File>>,
}

/// A finished command.
#[derive(Debug)]
pub struct Done {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Done {
    pub fn ok(&self) -> bool {
        self.code == 0
    }
    /// The last line of stderr that says something (the error).
    pub fn error_line(&self) -> String {
        self.stderr
            .lines()
            .rev()
            .find(|l| l.starts_with("error:"))
            .or_else(|| self.stderr.lines().rev().find(|l| !l.trim().is_empty()))
            .unwrap_or("")
            .trim()
            .to_string()
    }
    /// The fix a failed command named: its `fix:` line and the lines
    /// after it, joined (`None` when it named none).
    pub fn fix(&self) -> Option<String> {
        crate::errors::fix_of(&self.stderr)
    }
    /// What a failed command said: its `error:` line and the `fix:` lines
    /// after it (`down`'s names what is left and how to clear it).
    pub fn said(&self) -> String {
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .skip_while(|l| !l.starts_with("error:"))
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        if lines.is_empty() {
            format!("exit {}: {}", self.code, self.error_line())
        } else {
            lines.join(" ")
        }
    }
}

impl Cpmlab {
    pub fn new(exe: &Path, state_root: &Path, lab: &str, log: &Path) -> Result<Cpmlab> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("open {}", log.display()))?;
        Ok(Cpmlab {
            exe: exe.to_path_buf(),
            state_root: state_root.to_path_buf(),
            lab: lab.to_string(),
            log: Arc::new(Mutex::new(f)),
        })
    }

    /// A line in run.log.
    pub fn log(&self, line: &str) {
        if let Ok(mut f) = self.log.lock() {
            let _ = writeln!(f, "[{}] {line}", crate::migrate::flow::now_rfc3339());
        }
    }

    /// Runs `cpmlab <args> --name <lab>`; on cancel, the command gets
    /// SIGINT (it stops at its safe point) and is waited for.
    pub async fn run(&self, args: &[String], cancel: &Cancel) -> Result<Done> {
        self.run_env(args, &[], cancel).await
    }

    pub async fn run_env(
        &self,
        args: &[String],
        env: &[(&str, &str)],
        cancel: &Cancel,
    ) -> Result<Done> {
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.args(args)
            .args(["--name", &self.lab])
            .env("CPMLAB_STATE_DIR", &self.state_root)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        self.log(&format!("$ cpmlab {} --name {}", args.join(" "), self.lab));
        let mut child = cmd
            .spawn()
            .with_context(|| format!("run {}", self.exe.display()))?;
        let pid = child.id();
        let mut out = child.stdout.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        let read_out = async {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s).await;
            s
        };
        let read_err = async {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s).await;
            s
        };
        let signalled = async {
            loop {
                if cancel.check().is_err() {
                    if let Some(pid) = pid {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid as i32),
                            nix::sys::signal::Signal::SIGINT,
                        );
                    }
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        };
        let waited = async {
            let (o, e) = tokio::join!(read_out, read_err);
            let st = child.wait().await;
            (o, e, st)
        };
        tokio::pin!(waited);
        let (stdout, stderr, status) = tokio::select! {
            r = &mut waited => r,
            _ = signalled => waited.await,
        };
        let status = status.context("wait for cpmlab")?;
        let code = status.code().unwrap_or(130);
        if let Ok(mut f) = self.log.lock() {
            let _ = f.write_all(stdout.as_bytes());
            let _ = f.write_all(stderr.as_bytes());
            let _ = writeln!(f, "(exit {code})");
        }
        Ok(Done {
            code,
            stdout,
            stderr,
        })
    }
}

/// `["a", "b"]` as owned arguments.
pub fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::Done;

    #[test]
    fn a_failed_down_is_told_with_its_fix() {
        let done = Done {
            code: 3,
            stdout: String::new(),
            stderr: "==> remove lab l\n    FAILED remove lab l (24.2s)\nerror: lab `l`: 1 objects could not be removed: a stale endpoint\n  fix: restart dockerd, then run `cpmlab down` again\n".into(),
        };
        assert_eq!(
            done.said(),
            "error: lab `l`: 1 objects could not be removed: a stale endpoint fix: restart dockerd, then run `cpmlab down` again"
        );
        let bare = Done {
            code: 1,
            stdout: String::new(),
            stderr: "killed\n".into(),
        };
        assert_eq!(bare.said(), "exit 1: killed");
    }

    #[test]
    fn a_fix_is_read_from_its_line_on() {
        let done = Done {
            code: 3,
            stdout: String::new(),
            stderr: "error: lab `l`: a stale endpoint\n  fix: restart dockerd,\n  then run `cpmlab down` again\n".into(),
        };
        assert_eq!(
            done.fix().as_deref(),
            Some("restart dockerd, then run `cpmlab down` again")
        );
        let none = Done {
            code: 3,
            stdout: String::new(),
            stderr: "error: no fix named\n".into(),
        };
        assert_eq!(none.fix(), None);
    }
}
