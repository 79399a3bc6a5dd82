//! Every refusal that depends on the environment (exit 3) carries its fix,
//! as `cpmlab doctor`'s lines do.
//!
//! Exit 3 comes from one error type, `EnvNotReady { problem, fix }`
//! (`cpmlab_core::errors::exit_code`), so the refusals `up`, `run` and
//! `migrate` can give, and every other command's, are its constructions.
//! The first test walks every one in the workspace's code (syn; test code
//! left out) and reads its `fix` as far as the code says it: a string, a
//! `format!`, a `match` or `if` of them, a local `let` or a function of the
//! same file that makes one, a fallback after a relayed fix
//! (`d.fix().unwrap_or_else(...)`). Each must name what to do: a command
//! (backticked, `cpmlab ...` or a `scripts/...`), or one of its
//! alternatives must begin with what to do (run, set, point, remove,
//! restart, ...). A fix the walk cannot read fails it, so
//! that a new refusal's fix stays readable here.
//!
//! The second follows the refusal a newcomer met (a scenario with
//! `etcd.version: "3.5"` on an image without etcd 3.5) from `up` through
//! the runner into what `cpmlab run` prints: the fix must arrive.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every `.rs` file under the workspace members' `src/` (e2e holds tests
/// only).
fn sources() -> Vec<PathBuf> {
    let root = root();
    let ws: toml::Value =
        toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap()).unwrap();
    let mut out = Vec::new();
    for m in ws["workspace"]["members"].as_array().unwrap() {
        let m = m.as_str().unwrap();
        if m == "e2e" {
            continue;
        }
        let mut stack = vec![root.join(m).join("src")];
        while let Some(dir) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

/// Whether attributes keep an item to tests (`#[cfg(test)]`, `#[test]`).
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("test")
            || (a.path().is_ident("cfg")
                && a.meta
                    .require_list()
                    .is_ok_and(|l| l.tokens.to_string().trim() == "test"))
    })
}

/// The functions of a file by name: their bodies, for a fix a helper makes.
#[derive(Default)]
struct Fns(BTreeMap<String, syn::Block>);

impl<'a> Visit<'a> for Fns {
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        if !test_only(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        self.0.insert(f.sig.ident.to_string(), (*f.block).clone());
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        self.0.insert(f.sig.ident.to_string(), f.block.clone());
        syn::visit::visit_impl_item_fn(self, f);
    }
}

/// The `let NAME = EXPR` bindings of a function body.
#[derive(Default)]
struct Lets(BTreeMap<String, syn::Expr>);

impl<'a> Visit<'a> for Lets {
    fn visit_local(&mut self, l: &'a syn::Local) {
        if let (syn::Pat::Ident(p), Some(init)) = (&l.pat, &l.init) {
            self.0.insert(p.ident.to_string(), (*init.expr).clone());
        }
        syn::visit::visit_local(self, l);
    }
}

/// One construction of `EnvNotReady` and its fix expression.
struct Refusal {
    at: String,
    fix: syn::Expr,
    lets: BTreeMap<String, syn::Expr>,
}

struct Walk<'f> {
    file: String,
    lets: Vec<BTreeMap<String, syn::Expr>>,
    found: &'f mut Vec<Refusal>,
}

impl Walk<'_> {
    fn in_fn(&mut self, block: &syn::Block, f: impl FnOnce(&mut Self)) {
        let mut l = Lets::default();
        l.visit_block(block);
        self.lets.push(l.0);
        f(self);
        self.lets.pop();
    }
    fn record(&mut self, span: proc_macro2::Span, fix: &syn::Expr) {
        let mut lets = BTreeMap::new();
        for l in &self.lets {
            lets.extend(l.clone());
        }
        self.found.push(Refusal {
            at: format!("{}:{}", self.file, span.start().line),
            fix: fix.clone(),
            lets,
        });
    }
}

fn ends_with(path: &syn::Path, tail: &[&str]) -> bool {
    let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    segs.len() >= tail.len() && segs[segs.len() - tail.len()..] == *tail
}

impl<'a> Visit<'a> for Walk<'_> {
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        if !test_only(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        if test_only(&f.attrs) {
            return;
        }
        self.in_fn(&f.block, |w| syn::visit::visit_item_fn(w, f));
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        if test_only(&f.attrs) {
            return;
        }
        self.in_fn(&f.block, |w| syn::visit::visit_impl_item_fn(w, f));
    }
    fn visit_expr_call(&mut self, c: &'a syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func {
            if ends_with(&p.path, &["EnvNotReady", "new"]) && c.args.len() == 2 {
                self.record(p.path.segments.last().unwrap().ident.span(), &c.args[1]);
            }
        }
        syn::visit::visit_expr_call(self, c);
    }
    fn visit_expr_struct(&mut self, s: &'a syn::ExprStruct) {
        // The constructor itself (`EnvNotReady { problem, fix: fix.into() }`
        // in `new`) is where every fix arrives, not a refusal.
        if ends_with(&s.path, &["EnvNotReady"]) && !self.file.ends_with("model/src/errors.rs") {
            if let Some(f) = s
                .fields
                .iter()
                .find(|f| matches!(&f.member, syn::Member::Named(i) if i == "fix"))
            {
                self.record(s.path.segments.last().unwrap().ident.span(), &f.expr);
            }
        }
        syn::visit::visit_expr_struct(self, s);
    }
}

/// The first word a fix may begin with: what to do.
const DO: &[&str] = &[
    "run", "set", "unset", "point", "remove", "restart", "give", "choose", "check", "load",
    "as root", "make", "switch", "install", "apt-get", "free", "start", "stop", "read", "use",
    "build", "pass", "add", "delete", "wait", "re-run",
];

/// Whether a fix's text (a `format!` template included) names what to do.
fn names_an_action(text: &str) -> Result<(), String> {
    let t = text.trim().to_lowercase();
    if t.is_empty() {
        return Err("the fix is empty".into());
    }
    // One of its alternatives (`X, or Y`; `X; Y`) begins with what to do.
    let begins = t.split([';', ',']).map(|a| a.trim()).any(|a| {
        let a = a.strip_prefix("or ").unwrap_or(a);
        DO.iter().any(|d| {
            a.starts_with(d)
                && a[d.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !c.is_alphanumeric())
        })
    });
    let command = t.contains("scripts/") || t.contains('`') || t.starts_with("cpmlab ");
    if begins || command {
        Ok(())
    } else {
        Err(format!(
            "`{text}` names nothing to do (begin with what to do, or name the command)"
        ))
    }
}

/// Reads a fix expression as far as the code says it.
fn judge(
    e: &syn::Expr,
    lets: &BTreeMap<String, syn::Expr>,
    fns: &Fns,
    depth: usize,
) -> Result<(), String> {
    use syn::Expr;
    if depth > 8 {
        return Err("the fix is made too far away to read".into());
    }
    let again = |e: &Expr| judge(e, lets, fns, depth + 1);
    match e {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => names_an_action(&s.value()),
        Expr::Macro(m) if m.mac.path.is_ident("format") => {
            let lit: syn::LitStr = m
                .mac
                .parse_body_with(|p: syn::parse::ParseStream| {
                    let l: syn::LitStr = p.parse()?;
                    let _: proc_macro2::TokenStream = p.parse()?;
                    Ok(l)
                })
                .map_err(|e| format!("format! without a template: {e}"))?;
            names_an_action(&lit.value())
        }
        Expr::MethodCall(m) => match m.method.to_string().as_str() {
            "to_string" | "into" | "to_owned" | "clone" => again(&m.receiver),
            // A relayed fix (a child command's) with a fallback: the
            // fallback is this code's.
            "unwrap_or_else" | "unwrap_or" => again(&m.args[0]),
            other => Err(format!(
                "a fix from `.{other}()`, which the walk cannot read"
            )),
        },
        Expr::Closure(c) => again(&c.body),
        Expr::Reference(r) => again(&r.expr),
        Expr::Paren(p) => again(&p.expr),
        Expr::Group(g) => again(&g.expr),
        Expr::Block(b) => match b.block.stmts.last() {
            Some(syn::Stmt::Expr(e, None)) => again(e),
            _ => Err("a block without a value".into()),
        },
        Expr::If(i) => {
            let syn::Stmt::Expr(then, None) = i.then_branch.stmts.last().ok_or("an empty if")?
            else {
                return Err("an if without a value".into());
            };
            again(then)?;
            match &i.else_branch {
                Some((_, e)) => again(e),
                None => Err("an if without an else".into()),
            }
        }
        Expr::Match(m) => m.arms.iter().try_for_each(|a| again(&a.body)),
        Expr::Path(p) if p.path.segments.len() == 1 => {
            let name = p.path.segments[0].ident.to_string();
            match lets.get(&name) {
                Some(e) => again(e),
                None => Err(format!(
                    "a fix from `{name}`, which is no local of the function"
                )),
            }
        }
        Expr::Call(c) => {
            let syn::Expr::Path(p) = &*c.func else {
                return Err("a fix from a call the walk cannot read".into());
            };
            let name = p.path.segments.last().unwrap().ident.to_string();
            let body = fns
                .0
                .get(&name)
                .ok_or_else(|| format!("a fix from `{name}()`, not a function of this file"))?;
            match body.stmts.last() {
                Some(syn::Stmt::Expr(e, None)) => again(e),
                _ => Err(format!("`{name}()` ends without a value")),
            }
        }
        _ => Err("a fix the walk cannot read (say it as a string, a format! or a local)".into()),
    }
}

#[test]
fn every_refusal_of_the_environment_names_its_fix() {
    let root = root();
    let mut found = Vec::new();
    let mut fns_of = BTreeMap::new();
    for path in sources() {
        let text = std::fs::read_to_string(&path).unwrap();
        let file = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{}: does not parse: {e}", path.display()));
        let rel = path.strip_prefix(&root).unwrap().display().to_string();
        let mut fns = Fns::default();
        fns.visit_file(&file);
        let before = found.len();
        Walk {
            file: rel.clone(),
            lets: Vec::new(),
            found: &mut found,
        }
        .visit_file(&file);
        if found.len() > before {
            fns_of.insert(rel, fns);
        }
    }
    let mut bad = Vec::new();
    for r in &found {
        let file = r.at.rsplit_once(':').unwrap().0;
        if let Err(why) = judge(&r.fix, &r.lets, &fns_of[file], 0) {
            bad.push(format!("{}: {why}", r.at));
        }
    }
    // The workspace has some forty refusals; far fewer means the walk broke.
    assert!(
        found.len() >= 30,
        "only {} refusals found: {}",
        found.len(),
        found
            .iter()
            .map(|r| r.at.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("{} refusals of the environment checked", found.len());
    assert!(
        bad.is_empty(),
        "{} of {} refusals (exit 3) name no fix the walk can read:\n{}",
        bad.len(),
        found.len(),
        bad.join("\n")
    );
}

/// The walk's reading: what passes and what does not.
#[test]
fn a_fix_must_name_what_to_do() {
    assert!(names_an_action("run `scripts/build-go etcd-3.5`").is_ok());
    assert!(names_an_action("as root: sysctl -w x=y").is_ok());
    assert!(names_an_action("`cpmlab doctor --provider kind` names each").is_ok());
    assert!(names_an_action("restart dockerd").is_ok());
    assert!(names_an_action("{}, or make a registry reachable").is_ok());
    assert!(names_an_action("cpmlab images build (pulls it)").is_ok());
    assert!(names_an_action("").is_err());
    assert!(names_an_action("see run.log").is_err());
    assert!(
        names_an_action("running out of room").is_err(),
        "a word, not a prefix"
    );
    let lets = BTreeMap::new();
    let fns = Fns::default();
    let e: syn::Expr = syn::parse_str(r#"format!("point {} at a binary", env)"#).unwrap();
    assert!(judge(&e, &lets, &fns, 0).is_ok());
    let e: syn::Expr =
        syn::parse_str(r#"match s { A => "run x".into(), B => "nothing".into() }"#).unwrap();
    assert!(judge(&e, &lets, &fns, 0).is_err(), "every arm is read");
    let e: syn::Expr = syn::parse_str("some_param").unwrap();
    assert!(
        judge(&e, &lets, &fns, 0).is_err(),
        "a fix the walk cannot read fails"
    );
}

/// The refusal a newcomer met: a scenario asking for etcd 3.5 on a lab
/// image without it. `up` refuses with the fix; `cpmlab main` prints it as
/// `error: ...` with a `fix:` line; the runner turns the child's exit 3
/// back into a refusal with that fix; `cpmlab run`'s table and words show
/// it.
#[test]
fn the_etcd_3_5_refusal_reaches_cpmlab_run_s_output_with_its_fix() {
    use cpmlab_model::topology::{EtcdVersion, Topology};
    let mut topo = Topology::default();
    topo.etcd.version = "3.5".into();
    let image = cpmlab_provider_docker::images::LabImage {
        tag: "cpmlab/lab:x".into(),
        built: false,
        etcd_versions: vec![EtcdVersion::V3_4],
        parts: Vec::new(),
        arch: "amd64".into(),
    };
    let e = cpmlab_provider_docker::up::check_etcd_version(&topo, &image).unwrap_err();
    assert_eq!(cpmlab_core::errors::exit_code(&e), 3);
    // What `cpmlab up` prints (cpmlab_cli::main), then what the runner
    // makes of its exit.
    let child = cpmlab_runner::child::Done {
        code: 3,
        stdout: String::new(),
        stderr: format!("==> lab image\nerror: {e:#}\n"),
    };
    let e = cpmlab_runner::ensure_ok(&child, "up").unwrap_err();
    assert_eq!(cpmlab_core::errors::exit_code(&e), 3);
    let fix = "run `scripts/build-go etcd-3.5`";
    let mut r: cpmlab_runner::ScenarioResult = serde_json::from_value(serde_json::json!({
        "name": "six-member-25ms-etcd-3.5", "file": "f.yaml", "description": "", "seed": 1,
        "lab": "run", "passed": false, "incomplete": false, "error": null, "env_error": true,
        "wall_s": 1.0, "migration": null, "expectations": [], "timeline": [], "dir": "/tmp/x",
        "report": null}))
    .unwrap();
    r.error = Some(format!("{e:#}"));
    let table = cpmlab_runner::summary::table(std::slice::from_ref(&r));
    assert!(table.contains(fix), "the table names the fix:\n{table}");
    let words = cpmlab_runner::summary::in_words(&[r]);
    assert!(
        words.contains("holds etcd 3.4 only") && words.contains(&format!("fix: {fix}")),
        "the words name the fix:\n{words}"
    );
}
