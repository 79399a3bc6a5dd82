//! Import circles inside the crates (issue 30): which modules reach into
//! each other. A module is a file under `src/`; it depends on another when
//! its code (comments and its `#[cfg(test)] mod tests` left out) names a
//! path into it (`crate::a::b`, `super::x`, `use crate::{a, b}`). Modules
//! that depend on each other, directly or around a loop, form a circle
//! (a strongly connected component of that graph). Not read: paths
//! relative to a module (`child::f` from a `mod.rs`, a parent reaching into
//! its children, as Rust modules nest) and `super::super::` (counted as the
//! parent).
//!
//! Neither crate has one, and the tests keep it so: a module that needs
//! something from a module that needs it back takes a type or constant
//! that both may depend on from a third place (the lab state, `ports`,
//! `probe::context`, ...), never from the other side.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every module of the crate at `src`, by path (`a::b`), with its file.
fn modules(src: &Path) -> BTreeMap<String, std::path::PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            out.insert(parts.join("::"), p);
        }
    }
    out
}

/// The code of a file without comments and without its test module.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a file names from `prefix` (`crate::` or `super::`), with
/// `{a, b::c}` groups expanded one level.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        // Only a path's start: `crate::` not preceded by an identifier.
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let head = rest[..end].trim_end_matches(':').to_string();
        if rest[end..].starts_with('{') && rest[..end].ends_with("::") || end == 0 {
            let close = rest.find('}').unwrap_or(rest.len());
            for item in rest[end + 1..close].split(',') {
                let item = item.split_whitespace().next().unwrap_or("");
                if item.is_empty() {
                    continue;
                }
                out.push(if head.is_empty() {
                    item.to_string()
                } else {
                    format!("{head}::{item}")
                });
            }
        } else {
            out.push(head);
        }
    }
    out
}

/// The longest module `path` starts with.
fn owner(mods: &BTreeMap<String, std::path::PathBuf>, path: &str) -> Option<String> {
    let segs: Vec<&str> = path.split("::").collect();
    (1..=segs.len())
        .rev()
        .map(|n| segs[..n].join("::"))
        .find(|m| mods.contains_key(m))
}

fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(src);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, file) in &mods {
        let code = code(&std::fs::read_to_string(file).unwrap());
        // `super::` in x/a.rs and in x/a/mod.rs alike is `x`.
        let parent: Vec<&str> = {
            let mut p: Vec<&str> = m.split("::").filter(|s| !s.is_empty()).collect();
            p.pop();
            p
        };
        let mut targets: Vec<String> = paths_after(&code, "crate::");
        for p in paths_after(&code, "super::") {
            let mut full = parent.clone();
            full.push(&p);
            targets.push(full.join("::"));
        }
        let set = edges.entry(m.clone()).or_default();
        for t in targets {
            if let Some(o) = owner(&mods, &t) {
                // A module naming itself or an ancestor (its own mod.rs) is
                // not an import between rooms.
                if o != *m && !m.starts_with(&format!("{o}::")) && !o.is_empty() {
                    set.insert(o);
                }
            }
        }
    }
    edges
}

/// Strongly connected components with more than one module (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        let empty = BTreeSet::new();
        let ws: Vec<&'a str> = t
            .edges
            .get(v)
            .unwrap_or(&empty)
            .iter()
            .filter_map(|w| t.edges.get_key_value(w).map(|(k, _)| k.as_str()))
            .collect();
        for w in ws {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v.as_str());
        }
    }
    t.out.sort();
    t.out
}

fn crate_src(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join(name)
        .join("src")
}

fn show(c: &[Vec<String>]) -> String {
    c.iter()
        .map(|m| format!("  {}: {}", m.len(), m.join(", ")))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_verdict_crate_has_no_import_circle() {
    let found = circles(&graph(&crate_src("verdict")));
    assert!(
        found.is_empty(),
        "import circles in verdict/src:\n{}",
        show(&found)
    );
}

#[test]
fn the_lab_crate_has_no_import_circle() {
    let found = circles(&graph(&crate_src("lab")));
    assert!(
        found.is_empty(),
        "import circles in lab/src (cut each: a type or constant goes where both \
         sides may depend on it):\n{}",
        show(&found)
    );
}

#[test]
fn the_model_cli_and_standin_crates_have_no_import_circle() {
    for krate in ["model", "cli", "standin"] {
        let found = circles(&graph(&crate_src(krate)));
        assert!(
            found.is_empty(),
            "import circles in {krate}/src:\n{}",
            show(&found)
        );
    }
}

#[test]
fn a_two_module_loop_is_found() {
    let mut e: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    e.insert("a".into(), ["b".to_string()].into());
    e.insert("b".into(), ["c".to_string()].into());
    e.insert("c".into(), ["a".to_string()].into());
    e.insert("d".into(), ["a".to_string()].into());
    assert_eq!(circles(&e), vec![vec!["a", "b", "c"]]);
    let code = "use crate::{x::y, z};\nfn f() { super::w::g(); } // crate::q\n";
    assert_eq!(paths_after(&self::code(code), "crate::"), vec!["x::y", "z"]);
    assert_eq!(paths_after(&self::code(code), "super::"), vec!["w::g"]);
}
