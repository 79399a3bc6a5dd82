//! The parsers of user files never panic, whatever they are given: each
//! returns a value or an error. Inputs are arbitrary text and the lab's own
//! fixtures mutated (bytes replaced, inserted, lines cut or repeated), which
//! reach far deeper into each format than random text does, and the
//! corpus under `fuzz/corpus/` (probe records and lab events of real runs).
//! Records that parse are judged: the verdict does not panic either. A
//! failing input is kept in `fuzz/findings/` and replayed first on every
//! run; `scripts/fuzz` runs the same properties for minutes outside CI
//! (see `fuzz/README.md`).

use std::path::Path;

use cpmlab_model::topology::Topology;
use cpmlab_probe::record::{LabEvent, Record};
use cpmlab_runner::scenario;
use cpmlab_verdict::load::parse_ndjson;
use proptest::prelude::*;

fn fixtures(dir: &str, ext: &[&str]) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
    let mut out = Vec::new();
    for e in std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display())) {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| ext.iter().any(|w| x == *w)) {
            out.push(std::fs::read_to_string(&p).unwrap());
        }
    }
    assert!(!out.is_empty(), "no fixtures in {}", root.display());
    out
}

/// A mutation of `text`: at a position, replace, insert or delete bytes, or
/// duplicate or drop a line. Kept as valid UTF-8 (the files are read as text).
#[derive(Debug, Clone)]
enum Edit {
    Replace(usize, String),
    Insert(usize, String),
    Delete(usize, usize),
    DupLine(usize),
    DropLine(usize),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let piece = prop_oneof![
        Just(":".to_string()),
        Just("-".to_string()),
        Just("\n".to_string()),
        Just("  ".to_string()),
        Just("{".to_string()),
        Just("[".to_string()),
        Just("'".to_string()),
        Just("\"".to_string()),
        Just("&a".to_string()),
        Just("*a".to_string()),
        Just("!!binary".to_string()),
        Just("-1".to_string()),
        Just("1e309".to_string()),
        Just("18446744073709551616".to_string()),
        Just("99999999999h".to_string()),
        Just("nan".to_string()),
        Just(",".to_string()),
        "[ -~]{0,12}",
        "\\PC{0,4}",
    ];
    let edit = prop_oneof![
        (any::<usize>(), piece.clone()).prop_map(|(i, s)| Edit::Replace(i, s)),
        (any::<usize>(), piece).prop_map(|(i, s)| Edit::Insert(i, s)),
        (any::<usize>(), 0usize..40).prop_map(|(i, n)| Edit::Delete(i, n)),
        any::<usize>().prop_map(Edit::DupLine),
        any::<usize>().prop_map(Edit::DropLine),
    ];
    prop::collection::vec(edit, 1..6)
}

fn boundary(s: &str, i: usize) -> usize {
    let mut i = i % (s.len() + 1);
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut s = text.to_string();
    for e in edits {
        match e {
            Edit::Replace(i, p) => {
                let a = boundary(&s, *i);
                let b = boundary(&s, a + p.len().max(1));
                let b = b.max(a);
                s.replace_range(a..b, p);
            }
            Edit::Insert(i, p) => {
                let a = boundary(&s, *i);
                s.insert_str(a, p);
            }
            Edit::Delete(i, n) => {
                let a = boundary(&s, *i);
                let b = boundary(&s, a + n).max(a);
                s.replace_range(a..b, "");
            }
            Edit::DupLine(i) | Edit::DropLine(i) => {
                let mut lines: Vec<&str> = s.lines().collect();
                if lines.is_empty() {
                    continue;
                }
                let k = i % lines.len();
                if matches!(e, Edit::DupLine(_)) {
                    lines.insert(k, lines[k]);
                } else {
                    lines.remove(k);
                }
                s = lines.join("\n");
            }
        }
    }
    s
}

fn cases() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(400),
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../fuzz/findings/parsers_never_panic.proptest-regressions"
            )),
        )),
        ..ProptestConfig::default()
    }
}

/// Judges records and events that parsed, as `cpmlab verdict` would.
fn judge(records: &[Record], events: &[LabEvent]) {
    let v = cpmlab_verdict::compute(
        records,
        events,
        &cpmlab_probe::record::FinalRead::default(),
        &cpmlab_verdict::Thresholds::default(),
    );
    let _ = cpmlab_verdict::report::html(&v, records, events, &[], &[], &[], "fuzz");
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn topology_files(i in any::<usize>(), e in edits(), junk in "\\PC{0,200}") {
        let all = fixtures("fixtures/topologies", &["yaml"]);
        let text = apply(&all[i % all.len()], &e);
        let _ = Topology::parse(&text, Path::new("t.yaml"));
        let _ = Topology::parse(&junk, Path::new("t.yaml"));
    }

    #[test]
    fn scenario_files(i in any::<usize>(), e in edits(), junk in "\\PC{0,200}") {
        let all = fixtures("fixtures/scenarios", &["yaml"]);
        let text = apply(&all[i % all.len()], &e);
        let _ = scenario::parse(&text, Path::new("s.yaml"));
        let _ = scenario::parse(&junk, Path::new("s.yaml"));
    }

    #[test]
    fn link_traces(i in any::<usize>(), e in edits(), junk in "\\PC{0,200}", ndjson in any::<bool>()) {
        let all = fixtures("fixtures/incidents", &["csv", "ndjson"]);
        let text = apply(&all[i % all.len()], &e);
        let _ = scenario::trace::parse(text.as_bytes(), Path::new("t.csv"), false);
        let _ = scenario::trace::parse(text.as_bytes(), Path::new("t.ndjson"), true);
        let _ = scenario::trace::parse(junk.as_bytes(), Path::new("t"), ndjson);
    }

    #[test]
    fn records_and_events(i in any::<usize>(), e in edits(), junk in "\\PC{0,200}") {
        let records = fixtures("fuzz/corpus", &["ndjson"]);
        let text = apply(&records[i % records.len()], &e);
        let _ = parse_ndjson::<Record>(&junk, "records.ndjson");
        let _ = parse_ndjson::<LabEvent>(&junk, "events.ndjson");
        let recs = parse_ndjson::<Record>(&text, "records.ndjson").unwrap_or_default();
        let evs = parse_ndjson::<LabEvent>(&text, "events.ndjson").unwrap_or_default();
        // Whatever parsed, from the mutated file and the original ones.
        let all_recs = parse_ndjson::<Record>(&records.join(""), "records.ndjson").unwrap_or_default();
        let all_evs = parse_ndjson::<LabEvent>(&records.join(""), "events.ndjson").unwrap_or_default();
        judge(&recs, &all_evs);
        judge(&all_recs, &evs);
    }
}
