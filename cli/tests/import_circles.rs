//! Import circles between the files of every crate: which modules reach
//! into each other. A module is a file under a crate's `src/`; it depends
//! on another when its code names a path into it (`crate::a::b`,
//! `super::x`, `use crate::{a, b}`, also inside macro calls). Each file is
//! parsed (syn), so every item counts wherever it stands in the file; items
//! under `#[cfg(test)]` are left out (a test may look anywhere). Not read:
//! paths relative to a module (`child::f` from a `mod.rs`, a parent reaching
//! into its children, as Rust modules nest).
//!
//! No crate has a circle, and this keeps it so: a module that needs
//! something from a module that needs it back takes a type or constant that
//! both may depend on from a third place (a lower crate, the lab state,
//! `ports`, ...), never from the other side.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// Every crate of the workspace with its own code (the workspace's members
/// with a `src/`; e2e's only anchors its test binaries).
fn crates() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let ws: toml::Value =
        toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap()).unwrap();
    ws["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .filter(|m| m != "e2e" && root.join(m).join("src").is_dir())
        .collect()
}

/// Every module of the crate at `src`, by path (`a::b`), with its file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
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

/// Whether an item's attributes keep it to tests (`#[cfg(test)]`).
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().trim() == "test")
    })
}

/// The `crate::` and `super::` paths a file's code names, as
/// (`crate` or `super`, the rest).
#[derive(Default)]
struct Paths(Vec<(String, Vec<String>)>);

impl Paths {
    fn push(&mut self, segs: Vec<String>) {
        let mut segs = segs.into_iter();
        if let Some(head @ ("crate" | "super")) = segs.next().as_deref() {
            let mut rest: Vec<String> = segs.collect();
            // `super::super::x` names the grandparent: one more hop.
            let mut head = head.to_string();
            while rest.first().is_some_and(|s| s == "super") {
                rest.remove(0);
                head.push_str("::super");
            }
            self.0.push((head, rest));
        }
    }

    fn tree(&mut self, prefix: &[String], t: &syn::UseTree) {
        match t {
            syn::UseTree::Path(p) => {
                let mut v = prefix.to_vec();
                v.push(p.ident.to_string());
                self.tree(&v, &p.tree);
            }
            syn::UseTree::Name(n) => {
                let mut v = prefix.to_vec();
                if n.ident != "self" {
                    v.push(n.ident.to_string());
                }
                self.push(v);
            }
            syn::UseTree::Rename(r) => {
                let mut v = prefix.to_vec();
                v.push(r.ident.to_string());
                self.push(v);
            }
            syn::UseTree::Glob(_) => self.push(prefix.to_vec()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.tree(prefix, t);
                }
            }
        }
    }

    /// Paths in a macro's tokens: `crate :: a :: b` sequences.
    fn tokens(&mut self, ts: TokenStream) {
        let toks: Vec<TokenTree> = ts.into_iter().collect();
        let mut i = 0;
        while i < toks.len() {
            match &toks[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if id == "crate" || id == "super" => {
                    let mut segs = vec![id.to_string()];
                    let mut j = i + 1;
                    loop {
                        let colons = matches!((&toks.get(j), &toks.get(j + 1)),
                            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                                if a.as_char() == ':' && b.as_char() == ':');
                        match (colons, toks.get(j + 2)) {
                            (true, Some(TokenTree::Ident(n))) => {
                                segs.push(n.to_string());
                                j += 3;
                            }
                            _ => break,
                        }
                    }
                    if segs.len() > 1 {
                        self.push(segs);
                    }
                    i = j.max(i + 1);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match i {
            syn::Item::Const(x) => &x.attrs,
            syn::Item::Enum(x) => &x.attrs,
            syn::Item::Fn(x) => &x.attrs,
            syn::Item::Impl(x) => &x.attrs,
            syn::Item::Macro(x) => &x.attrs,
            syn::Item::Mod(x) => &x.attrs,
            syn::Item::Static(x) => &x.attrs,
            syn::Item::Struct(x) => &x.attrs,
            syn::Item::Trait(x) => &x.attrs,
            syn::Item::Type(x) => &x.attrs,
            syn::Item::Use(x) => &x.attrs,
            _ => &[],
        };
        if !test_only(attrs) {
            syn::visit::visit_item(self, i);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.tree(&[], &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.push(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}

/// The `crate::`/`super::` paths a file's code names, resolved against
/// module `m` to paths from the crate root.
fn targets(m: &str, text: &str) -> Vec<String> {
    let file = syn::parse_file(text).unwrap_or_else(|e| panic!("{m}: {e}"));
    let mut p = Paths::default();
    p.visit_file(&file);
    // `super::` in x/a.rs and in x/a/mod.rs alike is `x`.
    let here: Vec<&str> = m.split("::").filter(|s| !s.is_empty()).collect();
    p.0.into_iter()
        .map(|(head, rest)| {
            let mut full: Vec<String> = match head.as_str() {
                "crate" => vec![],
                _ => {
                    let ups = head.matches("super").count();
                    here[..here.len().saturating_sub(ups)]
                        .iter()
                        .map(|s| s.to_string())
                        .collect()
                }
            };
            full.extend(rest);
            full.join("::")
        })
        .collect()
}

/// The longest module `path` starts with.
fn owner(mods: &BTreeMap<String, PathBuf>, path: &str) -> Option<String> {
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
        let text = std::fs::read_to_string(file).unwrap();
        let set = edges.entry(m.clone()).or_default();
        for t in targets(m, &text) {
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

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join(name)
        .join("src")
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut found = Vec::new();
    let crates = crates();
    assert!(crates.len() >= 12, "{crates:?}");
    for krate in &crates {
        let src = crate_src(krate);
        assert!(src.is_dir(), "{}: no such crate", src.display());
        for c in circles(&graph(&src)) {
            found.push(format!("  {krate}/src: {}", c.join(", ")));
        }
    }
    assert!(
        found.is_empty(),
        "import circles (cut each: a type or constant goes where both sides may \
         depend on it):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_loop_is_found_wherever_it_stands_in_a_file() {
    let mut e: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    e.insert("a".into(), ["b".to_string()].into());
    e.insert("b".into(), ["c".to_string()].into());
    e.insert("c".into(), ["a".to_string()].into());
    e.insert("d".into(), ["a".to_string()].into());
    assert_eq!(circles(&e), vec![vec!["a", "b", "c"]]);
    // Paths after a test module count; the test module's do not; macros'
    // and `super::super::` are read.
    let code = "use crate::{x::y, z};\n\
                #[cfg(test)]\nmod tests { use crate::t; }\n\
                fn f() { super::w::g(); format!(\"{}\", crate::q::h()); }\n\
                fn k() -> super::super::v::T { todo!() }\n";
    let mut got = targets("m::n", code);
    got.sort();
    assert_eq!(got, vec!["m::w::g", "q::h", "v::T", "x::y", "z"]);
}
