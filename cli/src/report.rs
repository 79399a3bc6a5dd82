//! `cpmlab report merge DIR...`: one index.html, junit.xml, summary.json and
//! summary.md over many report directories (the shards of one nightly run,
//! or several nights), failures first, each row linking its scenario's
//! report where it lies. Pure: it reads `result.json` files, nothing else.

use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result};

use cpmlab_core::errors::{BadInput, EXIT_FAILED};
use cpmlab_runner::summary;

#[derive(clap::Subcommand, Debug)]
pub enum ReportCommand {
    /// Merge report directories of `cpmlab run` (each holding
    /// `<scenario>/result.json`; a directory of such directories, as CI
    /// artifacts download, works too) into one.
    Merge {
        /// Report directories to merge.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Where the merged index.html, junit.xml, summary.json and
        /// summary.md go.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The merged index's title.
        #[arg(long, default_value = "cpmlab scenarios")]
        title: String,
    },
}

pub fn run(command: ReportCommand) -> Result<u8> {
    match command {
        ReportCommand::Merge { dirs, out, title } => merge(&dirs, &out, &title),
    }
}

/// The report directories under `dir`: itself when it holds scenario
/// results, else its subdirectories that do.
fn report_dirs(dir: &Path) -> Vec<PathBuf> {
    if !summary::load_results(dir).is_empty() {
        return vec![dir.to_path_buf()];
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && !summary::load_results(p).is_empty())
        .collect();
    v.sort();
    v
}

fn merge(dirs: &[PathBuf], out: &Path, title: &str) -> Result<u8> {
    let mut results = Vec::new();
    for d in dirs {
        if !d.is_dir() {
            return Err(BadInput(format!("{}: not a directory", d.display())).into());
        }
        let found = report_dirs(d);
        if found.is_empty() {
            return Err(BadInput(format!(
                "{}: no scenario results here (no <scenario>/result.json in it or in a directory below it)",
                d.display()
            ))
            .into());
        }
        for rd in found {
            let rd = rd.canonicalize()?;
            for mut r in summary::load_results(&rd) {
                // Where the scenario is now, not where it ran: artifacts move.
                r.dir = rd.join(&r.name);
                results.push(r);
            }
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    let out = out.canonicalize()?;
    summary::write_all(&out, &results, title, |r| {
        let parent = r.dir.parent().unwrap_or(Path::new("/"));
        let rel = relative(&out, parent);
        if rel.as_os_str().is_empty() {
            String::new()
        } else {
            format!("{}/", rel.display())
        }
    })
    .with_context(|| format!("write the merged summaries into {}", out.display()))?;
    print!("{}", summary::table(&results));
    println!("{}", out.join("index.html").display());
    Ok(if results.iter().all(|r| r.passed) {
        0
    } else {
        EXIT_FAILED
    })
}

/// `to` as seen from the directory `from` (both absolute).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let f: Vec<Component> = from.components().collect();
    let t: Vec<Component> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut p = PathBuf::new();
    for _ in common..f.len() {
        p.push("..");
    }
    for c in &t[common..] {
        p.push(c.as_os_str());
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_climb_then_descend() {
        assert_eq!(
            relative(Path::new("/r/merged"), Path::new("/r/shard-1")),
            PathBuf::from("../shard-1")
        );
        assert_eq!(
            relative(Path::new("/r"), Path::new("/r/a/b")),
            PathBuf::from("a/b")
        );
        assert_eq!(relative(Path::new("/r"), Path::new("/r")), PathBuf::new());
    }
}
