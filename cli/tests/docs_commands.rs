//! The README and the pages in `docs/` stay true to the tool: every
//! `cpmlab ...` command they show parses with cpmlab's own command line
//! (clap's parser, nothing is run), every `scripts/...` and `fixtures/...`
//! path they name exists, and every link between them (file and anchor)
//! resolves. A failure names the page, the line and why. Two more rules
//! keep the pages reference, not a diary: no page, and no file of the
//! repository's code, names an issue of the tracker (users cannot follow
//! it: name the capability), and no page is longer than a reader takes in
//! for one task (`PAGE_LINES`, with the reference pages exempt by name).
//!
//! A command is a line of a fenced code block that starts with `cpmlab`,
//! `$cpmlab` or `target/release/cpmlab` (after a `$ ` prompt and `VAR=value`
//! assignments; a line ending in `\` goes on), or an inline code span in the
//! text that starts with `cpmlab `. The usage notation the pages use is
//! expanded before parsing: `[...]` is optional (parsed without it, and with
//! each group alone), `a|b` are alternatives (each parsed), `...` is elision,
//! `# ...` a comment. A value may be a placeholder in capitals (`RUN_DIR`,
//! `N`, `K/N`, `A:B`); any other value must be one the command accepts. A
//! code block's command must be complete (its required arguments given); an
//! inline span may name a command without them (`cpmlab probe`,
//! `cpmlab run`), or a flag without its value (`cpmlab up --api-server`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::Parser;
use cpmlab_cli::Cli;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// README.md and every page under docs/ (`docs/findings/` included), as
/// (path relative to the repo, text).
fn pages() -> Vec<(String, String)> {
    let root = repo();
    let mut names = vec!["README.md".to_string()];
    let mut docs = Vec::new();
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                docs.push(p.strip_prefix(&root).unwrap().display().to_string());
            }
        }
    }
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|n| {
            let text = std::fs::read_to_string(root.join(&n)).unwrap();
            (n, text)
        })
        .collect()
}

/// Whether a line opens or closes a fenced code block.
fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

/// The lines of fenced code blocks, each with its 1-based line number;
/// continuation lines (`\` at the end) joined onto the first.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut inside = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        if is_fence(line) {
            inside = !inside;
            continue;
        }
        if !inside {
            continue;
        }
        let (n, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        joined.push_str(line.trim_end_matches('\\'));
        joined.push(' ');
        if line.ends_with('\\') {
            pending = Some((n, joined));
        } else {
            out.push((n, joined));
        }
    }
    out
}

/// The text outside fenced code blocks, line by line (code lines blanked,
/// so that line numbers stay).
fn prose_lines(text: &str) -> Vec<String> {
    let mut inside = false;
    text.lines()
        .map(|line| {
            if is_fence(line) {
                inside = !inside;
                return String::new();
            }
            if inside {
                String::new()
            } else {
                line.to_string()
            }
        })
        .collect()
}

/// Inline code spans of the prose that start with `cpmlab `, with the line
/// each starts on. A span may wrap onto the next line of its paragraph.
fn inline_commands(text: &str) -> Vec<(usize, String)> {
    let lines = prose_lines(text);
    let mut out = Vec::new();
    // Paragraphs: runs of non-blank lines, joined with spaces; each char
    // remembers its line.
    let mut para = String::new();
    let mut line_of: Vec<usize> = Vec::new();
    let mut flush = |para: &mut String, line_of: &mut Vec<usize>| {
        let chars: Vec<char> = para.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if chars[i] != '`' {
                i += 1;
                continue;
            }
            // A run of backticks opens a span closed by a run as long.
            let mut ticks = 0;
            while i + ticks < chars.len() && chars[i + ticks] == '`' {
                ticks += 1;
            }
            let start = i + ticks;
            let mut j = start;
            let mut end = None;
            while j < chars.len() {
                if chars[j] == '`' {
                    let mut k = 0;
                    while j + k < chars.len() && chars[j + k] == '`' {
                        k += 1;
                    }
                    if k == ticks {
                        end = Some(j);
                        break;
                    }
                    j += k;
                } else {
                    j += 1;
                }
            }
            let Some(end) = end else { break };
            let span: String = chars[start..end].iter().collect();
            let span = span.trim();
            if span.starts_with("cpmlab ") {
                out.push((line_of[start], span.to_string()));
            }
            i = end + ticks;
        }
        para.clear();
        line_of.clear();
    };
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            flush(&mut para, &mut line_of);
            continue;
        }
        if !para.is_empty() {
            para.push(' ');
            line_of.push(i + 1);
        }
        for c in line.chars() {
            para.push(c);
            line_of.push(i + 1);
        }
    }
    flush(&mut para, &mut line_of);
    out
}

/// A word of a command line: its text, whether it was quoted, and the
/// optional group (`[...]`) it is in.
#[derive(Debug, Clone)]
struct Word {
    text: String,
    quoted: bool,
    group: Option<usize>,
}

/// Splits a line as a shell would (quotes, a `#` comment), keeping the
/// usage notation's optional groups. `None` when the quoting is unbalanced.
fn words(line: &str) -> Option<Vec<Word>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut in_word = false;
    let mut depth = 0usize;
    let mut groups = 0usize;
    let mut group: Option<usize> = None;
    let mut chars = line.chars().peekable();
    let push = |out: &mut Vec<Word>, cur: &mut String, quoted: &mut bool, group| {
        out.push(Word {
            text: std::mem::take(cur),
            quoted: std::mem::take(quoted),
            group,
        });
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                let mut closed = false;
                for d in chars.by_ref() {
                    if d == c {
                        closed = true;
                        break;
                    }
                    cur.push(d);
                }
                if !closed {
                    return None;
                }
                quoted = true;
                in_word = true;
            }
            '#' if !in_word => break,
            c if c.is_whitespace() => {
                if in_word {
                    push(&mut out, &mut cur, &mut quoted, group);
                    in_word = false;
                }
                if depth == 0 {
                    group = None;
                }
            }
            '[' if !in_word || cur.is_empty() => {
                if depth == 0 {
                    group = Some(groups);
                    groups += 1;
                }
                depth += 1;
            }
            ']' if depth > 0 => {
                depth -= 1;
                if in_word && depth == 0 {
                    push(&mut out, &mut cur, &mut quoted, group);
                    in_word = false;
                }
                if depth == 0 {
                    group = None;
                }
            }
            c => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        push(&mut out, &mut cur, &mut quoted, group);
    }
    Some(out)
}

/// The words after the program when the line runs cpmlab, else `None`.
fn cpmlab_args(line: &str) -> Option<Vec<Word>> {
    let line = line.trim();
    let line = line.strip_prefix("$ ").unwrap_or(line);
    let ws = words(line)?;
    let mut it = ws.into_iter().skip_while(|w| {
        !w.quoted
            && w.group.is_none()
            && w.text.split_once('=').is_some_and(|(k, _)| {
                !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
    });
    let program = it.next()?;
    let p = program.text.as_str();
    let runs = ["cpmlab", "$cpmlab", "${cpmlab}", "target/release/cpmlab"]
        .iter()
        .any(|x| p == *x || p.strip_prefix("./") == Some(x));
    if program.quoted || program.group.is_some() || !runs {
        return None;
    }
    Some(it.collect())
}

/// `...` is elision: a word of its own is dropped, and it is cut from the
/// ends of a word (`FILE|DIR...`, `...,informer-go`).
fn without_elision(w: &Word) -> Option<String> {
    if w.quoted {
        return Some(w.text.clone());
    }
    if w.text == "..." || w.text == "…" {
        return None;
    }
    let t = w.text.trim_end_matches("...");
    let t = t.trim_start_matches("...");
    let t = t.trim_matches(',');
    (!t.is_empty()).then(|| t.to_string())
}

/// The argument vectors a usage line stands for: with no optional group,
/// and with each group alone; each of those once per alternative index
/// (`a|b|c`: the i-th alternative, or the last when a word has fewer).
fn expansions(ws: &[Word]) -> Vec<Vec<String>> {
    let groups: BTreeSet<usize> = ws.iter().filter_map(|w| w.group).collect();
    let alts = ws
        .iter()
        .filter(|w| !w.quoted)
        .map(|w| w.text.split('|').count())
        .max()
        .unwrap_or(1);
    let mut choices: Vec<Option<usize>> = vec![None];
    choices.extend(groups.iter().map(|g| Some(*g)));
    let mut out = Vec::new();
    for choice in choices {
        for a in 0..alts {
            let argv: Vec<String> = ws
                .iter()
                .filter(|w| w.group.is_none() || w.group == choice)
                .filter_map(|w| {
                    let t = without_elision(w)?;
                    if w.quoted {
                        return Some(t);
                    }
                    let parts: Vec<&str> = t.split('|').collect();
                    Some(parts[a.min(parts.len() - 1)].to_string())
                })
                .collect();
            if !out.contains(&argv) {
                out.push(argv);
            }
        }
    }
    out
}

/// A value in capitals stands for one the reader chooses.
fn is_placeholder(v: &str) -> bool {
    let v = v.trim_end_matches("...");
    !v.is_empty()
        && v.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && v.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || "_:/-.".contains(c))
}

fn invalid_value(e: &clap::Error) -> Option<String> {
    match e.get(ContextKind::InvalidValue) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => v.first().cloned(),
        _ => None,
    }
}

/// Why clap refuses an argument vector, or `None` when the page is right.
/// `complete`: the page claims the command is whole (a code block), so a
/// missing required argument or subcommand is an error too.
fn refusal(argv: &[String], complete: bool) -> Option<String> {
    let e = match Cli::try_parse_from(
        std::iter::once("cpmlab".to_string()).chain(argv.iter().cloned()),
    ) {
        Ok(_) => return None,
        Err(e) => e,
    };
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => None,
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        | ErrorKind::MissingRequiredArgument
        | ErrorKind::MissingSubcommand
            if !complete =>
        {
            None
        }
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
            if invalid_value(&e).is_some_and(|v| is_placeholder(&v)) =>
        {
            None
        }
        // Prose may name a flag without its value (`cpmlab up --api-server`).
        ErrorKind::InvalidValue if !complete && invalid_value(&e).as_deref() == Some("") => None,
        _ => Some(e.render().to_string()),
    }
}

#[derive(Default)]
struct Findings {
    checked: usize,
    bad: Vec<String>,
}

impl Findings {
    fn check(&mut self, page: &str, line: usize, text: &str, ws: &[Word], complete: bool) {
        self.checked += 1;
        for argv in expansions(ws) {
            if let Some(why) = refusal(&argv, complete) {
                self.bad.push(format!(
                    "{page}:{line}: `{}`\n    parsed as: cpmlab {}\n    {}",
                    text.trim(),
                    argv.join(" "),
                    why.trim().replace('\n', "\n    ")
                ));
                return;
            }
        }
    }
}

#[test]
fn every_cpmlab_command_in_the_readme_and_docs_parses() {
    let mut f = Findings::default();
    let mut per_page = Vec::new();
    for (page, text) in pages() {
        let before = f.checked;
        for (n, line) in code_lines(&text) {
            if let Some(ws) = cpmlab_args(&line) {
                f.check(&page, n, &line, &ws, true);
            }
        }
        for (n, span) in inline_commands(&text) {
            match cpmlab_args(&span) {
                Some(ws) => f.check(&page, n, &span, &ws, false),
                None => f
                    .bad
                    .push(format!("{page}:{n}: `{span}`: unbalanced quotes")),
            }
        }
        per_page.push(format!("{page}: {}", f.checked - before));
    }
    // The pages hold some hundred commands; far fewer means the extraction
    // broke, not that the pages are right.
    assert!(
        f.checked >= 100,
        "only {} commands found ({})",
        f.checked,
        per_page.join(", ")
    );
    println!(
        "{} documented commands checked ({})",
        f.checked,
        per_page.join(", ")
    );
    assert!(
        f.bad.is_empty(),
        "{} of {} documented commands do not parse with cpmlab's command line:\n{}",
        f.bad.len(),
        f.checked,
        f.bad.join("\n")
    );
}

/// `scripts/...` and `fixtures/...` paths named anywhere in a page: each
/// with its line. A path ends at a character a path here never holds; a
/// `<placeholder>` ends it too (`fixtures/scenarios/<file>.yaml` names the
/// folder).
fn named_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for prefix in ["scripts/", "fixtures/"] {
            let mut from = 0;
            while let Some(k) = line[from..].find(prefix) {
                let at = from + k;
                from = at + prefix.len();
                let before = line[..at].chars().next_back();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || "/._-$".contains(c)) {
                    continue;
                }
                let path: String = line[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || "._/*-".contains(*c))
                    .collect();
                let path = path.trim_end_matches('.').to_string();
                out.push((i + 1, path));
            }
        }
    }
    out
}

/// Whether a path exists; a `*` in its last part matches any run of
/// characters there.
fn path_exists(root: &Path, path: &str) -> bool {
    let (dir, last) = match path.rsplit_once('/') {
        Some((d, l)) => (d, l),
        None => ("", path),
    };
    if !last.contains('*') {
        return root.join(path).exists();
    }
    let (pre, post) = last.split_once('*').unwrap();
    std::fs::read_dir(root.join(dir)).is_ok_and(|rd| {
        rd.filter_map(|e| e.ok()).any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.len() >= pre.len() + post.len() && n.starts_with(pre) && n.ends_with(post)
        })
    })
}

#[test]
fn every_script_and_fixture_the_pages_name_exists() {
    let root = repo();
    let mut checked = 0;
    let mut missing = Vec::new();
    for (page, text) in pages() {
        for (n, path) in named_paths(&text) {
            checked += 1;
            if !path_exists(&root, &path) {
                missing.push(format!("{page}:{n}: {path}"));
            }
        }
    }
    assert!(checked >= 50, "only {checked} paths found");
    println!("{checked} named paths checked");
    assert!(
        missing.is_empty(),
        "paths the pages name that do not exist:\n{}",
        missing.join("\n")
    );
}

/// Backticked spans in a page that name a path in this repository: the
/// span's first segment is a top-level directory (`lab/...`,
/// `provider-kind/src/druid.rs`, `go/apiserver/`), each with its line. A
/// `<placeholder>`, a `{a,b}` group or a `:line` ends the path there.
fn backticked_repo_paths(root: &Path, text: &str) -> Vec<(usize, String)> {
    let tops: BTreeSet<String> = std::fs::read_dir(root)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && n != "target")
        .collect();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for (k, span) in line.split('`').enumerate() {
            if k % 2 == 0 || span.contains(char::is_whitespace) || !span.contains('/') {
                continue;
            }
            let Some((top, _)) = span.split_once('/') else {
                continue;
            };
            if !tops.contains(top) {
                continue;
            }
            let end = span.find(['<', '{', ':', '(']).unwrap_or(span.len());
            // `seed-{a,b}.yaml`: the group's directory names a path.
            let path = &span[..end];
            let path = if end < span.len() && !path.ends_with('/') {
                path.rsplit_once('/').map_or(path, |(d, _)| d)
            } else {
                path
            };
            out.push((i + 1, path.to_string()));
        }
    }
    out
}

#[test]
fn every_backticked_repository_path_exists() {
    let root = repo();
    let mut checked = 0;
    let mut missing = Vec::new();
    for (page, text) in pages() {
        for (n, path) in backticked_repo_paths(&root, &text) {
            checked += 1;
            if !path_exists(&root, &path) {
                missing.push(format!("{page}:{n}: `{path}`"));
            }
        }
    }
    assert!(checked >= 50, "only {checked} backticked paths found");
    println!("{checked} backticked repository paths checked");
    assert!(
        missing.is_empty(),
        "paths in backticks that do not exist in the repository:\n{}",
        missing.join("\n")
    );
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces
/// as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings (a repeated one gets `-1`, `-2`, ...).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in prose_lines(text) {
        let t = line.trim_start();
        let hashes = t.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') {
            let base = slug(&t[hashes..]);
            let mut s = base.clone();
            let mut k = 0;
            while out.contains(&s) {
                k += 1;
                s = format!("{base}-{k}");
            }
            out.insert(s);
        }
    }
    out
}

/// Markdown links `[text](target)` of the prose, with their lines.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in prose_lines(text).iter().enumerate() {
        let mut from = 0;
        while let Some(k) = line[from..].find("](") {
            let start = from + k + 2;
            let Some(len) = line[start..].find(')') else {
                break;
            };
            out.push((i + 1, line[start..start + len].to_string()));
            from = start + len;
        }
    }
    out
}

#[test]
fn every_link_between_the_pages_resolves() {
    let root = repo();
    let pages = pages();
    let mut checked = 0;
    let mut broken = Vec::new();
    for (page, text) in &pages {
        let dir = Path::new(page).parent().unwrap_or(Path::new(""));
        for (n, target) in links(text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let (rel, body) = if file.is_empty() {
                (PathBuf::from(page), Some(text.clone()))
            } else {
                let rel = dir.join(file);
                let body = std::fs::read_to_string(root.join(&rel)).ok();
                if !root.join(&rel).exists() {
                    broken.push(format!("{page}:{n}: ({target}): no {}", rel.display()));
                    continue;
                }
                (rel, body)
            };
            if let Some(a) = anchor {
                let ok = rel.extension().is_some_and(|x| x == "md")
                    && body.as_deref().is_some_and(|b| anchors(b).contains(a));
                if !ok {
                    broken.push(format!(
                        "{page}:{n}: ({target}): no heading `{a}` in {}",
                        rel.display()
                    ));
                }
            }
        }
    }
    assert!(checked >= 20, "only {checked} links found");
    println!("{checked} links checked");
    assert!(
        broken.is_empty(),
        "links that do not resolve:\n{}",
        broken.join("\n")
    );
}

/// The notation the pages use expands as the module doc says.
#[test]
fn usage_notation_expands_to_each_form() {
    let ws = cpmlab_args("cpmlab down [--name NAME] [--all]   # comment").unwrap();
    let ex = expansions(&ws);
    assert_eq!(
        ex,
        vec![
            vec!["down".to_string()],
            vec!["down".into(), "--name".into(), "NAME".into()],
            vec!["down".into(), "--all".into()],
        ]
    );
    let ws =
        cpmlab_args("X=1 $cpmlab migrate --plan six-member|five-member --command '...'").unwrap();
    assert_eq!(
        expansions(&ws),
        vec![
            vec!["migrate", "--plan", "six-member", "--command", "..."],
            vec!["migrate", "--plan", "five-member", "--command", "..."],
        ]
    );
    assert!(cpmlab_args("docker exec cpmlab-toolbox sh").is_none());
    assert!(cpmlab_args("cpmlab=target/release/cpmlab").is_none());
    assert!(is_placeholder("RUN_DIR") && is_placeholder("K/N") && is_placeholder("A:B"));
    assert!(!is_placeholder("six-member") && !is_placeholder("2/4"));
    // A wrong flag, a wrong value and a wrong subcommand are refused; a
    // placeholder value and help are not.
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert!(refusal(
        &s(&["link", "set", "seed-a:seed-b", "--dely", "25ms"]),
        true
    )
    .is_some());
    assert!(refusal(&s(&["migrate", "--plan", "seven-member"]), true).is_some());
    assert!(refusal(&s(&["migrat"]), false).is_some());
    assert!(refusal(&s(&["link", "set", "A:B", "--seed", "N"]), true).is_none());
    assert!(refusal(&s(&["probe"]), false).is_none());
    assert!(refusal(&s(&["probe"]), true).is_some());
    assert!(refusal(&s(&["up", "--api-server"]), false).is_none());
    assert!(refusal(&s(&["up", "--api-server"]), true).is_some());
    assert_eq!(
        slug("Prow (Gardener's CI): a starting point"),
        "prow-gardeners-ci-a-starting-point"
    );
    assert_eq!(
        slug("`up`, `down`, the link and the probes"),
        "up-down-the-link-and-the-probes"
    );
}

/// Where an issue of the tracker is named in `text`: the word `issue`
/// (or `issues`), then a number, with spaces or a `#` between; or an
/// anchor made from such a heading (`issue-` and a number). Each with its
/// line. Upstream's own references (`etcd#8975`, a GitHub URL's
/// `issues/1373`) are not this project's tracker and do not match.
fn issue_references(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lower = line.to_lowercase();
        let b = lower.as_bytes();
        let mut from = 0;
        while let Some(k) = lower[from..].find("issue") {
            let at = from + k;
            from = at + 5;
            if at > 0 && (b[at - 1] as char).is_ascii_alphanumeric() {
                continue;
            }
            let mut j = at + 5;
            if j < b.len() && b[j] == b's' {
                j += 1;
            }
            let gap_start = j;
            while j < b.len() && (b[j] == b' ' || b[j] == b'#' || b[j] == b'-') {
                j += 1;
            }
            let gap = &lower[gap_start..j];
            let anchor = gap == "-";
            let spaced = !gap.is_empty() && !gap.contains('-');
            if (anchor || spaced) && j < b.len() && b[j].is_ascii_digit() {
                let end = (j + 8).min(line.len());
                out.push((i + 1, line[at..end].trim().to_string()));
            }
        }
    }
    out
}

/// Every file of the repository a person reads: the pages, and the code
/// with its comments (Rust, Go, shell, YAML, TOML, the scripts), as paths
/// relative to the repository. Not read: build output, git's own files,
/// lock files, and `fixtures/upstream/` (upstream's files, vendored
/// unchanged).
fn repository_files() -> Vec<String> {
    let root = repo();
    let skip_dirs = ["target", ".git", "node_modules"];
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = p.strip_prefix(&root).unwrap().display().to_string();
            if p.is_dir() {
                if !skip_dirs.contains(&name.as_str()) && rel != "fixtures/upstream" {
                    stack.push(p);
                }
                continue;
            }
            let read = ["rs", "go", "md", "yaml", "yml", "toml", "sh", "py", "tpl"]
                .iter()
                .any(|x| name.ends_with(&format!(".{x}")))
                || rel.starts_with("scripts/")
                || rel.starts_with(".ci/");
            if read && name != "Cargo.lock" && !name.ends_with(".sum") {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_page_and_no_code_comment_names_an_issue_of_the_tracker() {
    let root = repo();
    let files = repository_files();
    // README, docs, every crate, the Go parts, scripts, fixtures, CI.
    assert!(files.len() >= 300, "only {} files found", files.len());
    for must in [
        "README.md",
        "scripts/nightly",
        ".github/workflows/nightly.yml",
        "go/README.md",
    ] {
        assert!(files.iter().any(|f| f == must), "{must} is read");
    }
    let mut found = Vec::new();
    for f in &files {
        let Ok(text) = std::fs::read_to_string(root.join(f)) else {
            continue;
        };
        for (n, what) in issue_references(&text) {
            found.push(format!("{f}:{n}: `{what}`"));
        }
    }
    println!("{} files checked for issue numbers", files.len());
    assert!(
        found.is_empty(),
        "issue numbers the reader cannot follow (name the capability instead):\n{}",
        found.join("\n")
    );
}

/// The most lines a page may have: about 3,000 words at this project's
/// ten or so a line, which a reader takes in at one sitting for one task
/// (some ten minutes; kind's and nextest's pages, the model, run from a
/// few hundred to a few thousand words). A page that needs more is split
/// by task, as `docs/findings/` splits the findings.
const PAGE_LINES: usize = 300;

/// Pages exempt from `PAGE_LINES`, and why: reference pages that are
/// looked up, a row or a rule at a time, not read through.
const REFERENCE_PAGES: &[(&str, &str)] = &[
    (
        "docs/verdict.md",
        "the verdict's rules, each with its exact definition, inputs and statuses",
    ),
    (
        "docs/topology.md",
        "the topology file's fields, one row each",
    ),
];

/// `docs/ci.md` says what CI runs and how long each step takes in fewer
/// lines than this; the findings' index fits on one screen.
const CI_PAGE_LINES: usize = 250;
const FINDINGS_INDEX_LINES: usize = 40;

#[test]
fn every_page_is_short_enough_to_read_for_one_task() {
    let mut long = Vec::new();
    for (page, text) in pages() {
        let n = text.lines().count();
        let limit = match page.as_str() {
            "docs/ci.md" => CI_PAGE_LINES - 1,
            "docs/findings.md" => FINDINGS_INDEX_LINES,
            p if REFERENCE_PAGES.iter().any(|(r, _)| *r == p) => usize::MAX,
            _ => PAGE_LINES,
        };
        if n > limit {
            long.push(format!("{page}: {n} lines, over {limit}"));
        }
    }
    assert!(
        long.is_empty(),
        "pages too long to read for one task (split them by task; a reference page is exempt by name in REFERENCE_PAGES, with why):\n{}",
        long.join("\n")
    );
    // Every exemption names a page that exists.
    let names: Vec<String> = pages().into_iter().map(|(p, _)| p).collect();
    for (r, why) in REFERENCE_PAGES {
        assert!(names.iter().any(|n| n == r), "{r} ({why}) is no page");
    }
}

/// The reading of an issue reference: what counts and what does not.
#[test]
fn issue_references_are_found_in_their_forms() {
    let n = 45;
    let cases = [
        (format!("see (issue {n})"), true),
        (format!("Issue {n}'s question"), true),
        (format!("issues {n} and 43"), true),
        (format!("[x](findings.md#the-serving-path-issue-{n})"), true),
        (format!("issue #{n}"), true),
        (format!("etcd#{n} upstream"), false),
        (format!("github.com/gardener/etcd-druid/issues/{n}"), false),
        ("fn issue(&self)".to_string(), false),
        ("an issue the lab found".to_string(), false),
        (format!("tissue {n}"), false),
    ];
    for (text, hit) in cases {
        assert_eq!(!issue_references(&text).is_empty(), hit, "{text}");
    }
    assert_eq!(issue_references(&format!("a\nb (issue {n})"))[0].0, 2);
}
