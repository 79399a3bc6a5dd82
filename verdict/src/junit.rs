//! The verdict as JUnit XML: one testcase per rule, so CI shows which rule
//! failed and why. As OpenShift's disruption tests report disruption, a
//! rule that holds only because known hazards excused failed requests
//! within their budgets is a *flake*: a failing and a passing testcase of
//! the same name, the failure saying "observed X, excused Y, budget Z".

use std::fmt::Write as _;

use super::{escape_xml, RuleStatus, Verdict};

/// "observed 3 failed request(s), excused 1 (move-leader 1 of budget 1
/// request(s) of at most 7500 ms)": the excused rule's flake message.
pub fn observed_excused_budget(v: &Verdict) -> String {
    let per: Vec<String> = v
        .excuses
        .hazards
        .iter()
        .map(|h| {
            format!(
                "{} {}, longest {:.0} ms; {}{}",
                h.hazard,
                h.excused,
                h.longest_ms,
                h.budget_text(),
                if h.within_budget { "" } else { " (OVER)" }
            )
        })
        .collect();
    format!(
        "observed {} failed request(s), excused {}, budget: {}",
        v.overall.failed(),
        v.excuses.excused_count,
        if per.is_empty() {
            "none accepted".to_string()
        } else {
            per.join("; ")
        }
    )
}

/// JUnit XML for the verdict. Failed rules, and rules not covered or
/// degraded that the scenario does not accept, carry their reason both in
/// the `message` attribute and as the failure text; an excused rule is a
/// flake (see the module doc); an accepted one passes and says why; rules
/// that do not apply are `<skipped/>`. Gardener's validator simulation
/// goes to `<system-out>`.
pub fn junit(v: &Verdict, suite: &str) -> String {
    let flakes = v
        .rules
        .iter()
        .filter(|r| r.status == RuleStatus::Excused)
        .count();
    let tests = v.rules.len() + flakes;
    let failures = v.rules.iter().filter(|r| r.fails(&v.accepted)).count() + flakes;
    let skipped = v
        .rules
        .iter()
        .filter(|r| r.status == RuleStatus::Skipped)
        .count();
    let secs = (v.window.duration_ms() / 1000.0).max(0.0);
    let suite_e = escape_xml(suite);
    let mut x = String::new();
    x.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"{suite_e}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{secs:.3}\">"
    );
    let _ = writeln!(
        x,
        "  <testsuite name=\"{suite_e}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{secs:.3}\">"
    );
    x.push_str("    <properties>\n");
    for (k, val) in [
        ("passed", v.passed.to_string()),
        ("status", v.status.headline().to_string()),
        ("excused_requests", v.excuses.excused_count.to_string()),
        (
            "window_start_unix_ms",
            format!("{}", v.window.start_unix_ms),
        ),
        ("window_end_unix_ms", format!("{}", v.window.end_unix_ms)),
        ("requests", v.overall.requests.to_string()),
        ("failed_requests", v.overall.failed().to_string()),
        ("downtime_ms", format!("{}", v.overall.downtime_ms)),
        (
            "longest_unavailable_ms",
            format!("{}", v.overall.longest_unavailable_ms),
        ),
    ] {
        let _ = writeln!(
            x,
            "      <property name=\"{}\" value=\"{}\"/>",
            escape_xml(k),
            escape_xml(&val)
        );
    }
    x.push_str("    </properties>\n");
    for r in &v.rules {
        let name = escape_xml(&r.name);
        let msg = escape_xml(&r.message);
        let case = |body: &str| {
            format!(
                "    <testcase classname=\"{suite_e}\" name=\"{name}\" time=\"0\">\n      {body}\n    </testcase>\n"
            )
        };
        let failure = |m: &str| {
            let m = escape_xml(m);
            case(&format!(
                "<failure message=\"{m}\" type=\"{name}\">{m}</failure>"
            ))
        };
        let out = match r.status {
            RuleStatus::Passed => case(&format!("<system-out>{msg}</system-out>")),
            RuleStatus::Excused => {
                let flake = observed_excused_budget(v);
                failure(&flake)
                    + &case(&format!(
                        "<system-out>{}</system-out>",
                        escape_xml(&format!("{flake}: within budget. {}", r.message))
                    ))
            }
            RuleStatus::Failed => failure(&r.message),
            RuleStatus::NotCovered | RuleStatus::Degraded => match v.accepted.get(&r.name) {
                Some(why) => case(&format!(
                    "<system-out>{}</system-out>",
                    escape_xml(&format!(
                        "{}, accepted by the scenario: {why}. {}",
                        r.status.as_str(),
                        r.message
                    ))
                )),
                None => failure(&format!("{}: {}", r.status.as_str(), r.message)),
            },
            RuleStatus::Skipped => case(&format!("<skipped message=\"{msg}\"/>")),
        };
        x.push_str(&out);
    }
    let s = &v.validator;
    let _ = writeln!(
        x,
        "    <system-out>{}</system-out>",
        escape_xml(&format!(
            "Gardener's zero-downtime validator (curl every {:.0} s, fails after 3 in a row) would have {}: {} ticks, {} failed, at most {} in a row.",
            s.interval_ms / 1000.0,
            if s.would_fail { "failed" } else { "passed" },
            s.ticks,
            s.failures,
            s.max_consecutive_failures
        ))
    );
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::*;
    use super::*;

    /// A small well-formedness check: tags balance, attributes are quoted,
    /// no raw `<` or `&` in text. Returns the element names in order.
    fn check_balanced(x: &str) -> Vec<String> {
        let mut stack: Vec<String> = Vec::new();
        let mut seen = Vec::new();
        let mut rest = x;
        while let Some(i) = rest.find(['<', '&']) {
            let (text, tail) = rest.split_at(i);
            assert!(!text.contains('>'), "raw > in text: {text}");
            if tail.starts_with('&') {
                let end = tail.find(';').expect("unterminated entity");
                let ent = &tail[1..end];
                assert!(
                    ["amp", "lt", "gt", "quot", "apos"].contains(&ent) || ent.starts_with('#'),
                    "bad entity &{ent};"
                );
                rest = &tail[end + 1..];
                continue;
            }
            let end = tail.find('>').expect("unterminated tag");
            let tag = &tail[1..end];
            assert!(!tag.contains('<'), "< inside a tag: {tag}");
            assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes: {tag}");
            rest = &tail[end + 1..];
            if tag.starts_with('?') {
                continue;
            }
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop().as_deref(), Some(name), "mismatched </{name}>");
            } else {
                let name = tag.split_whitespace().next().unwrap().trim_end_matches('/');
                seen.push(name.to_string());
                if !tag.ends_with('/') {
                    stack.push(name.to_string());
                }
            }
        }
        assert!(stack.is_empty(), "unclosed: {stack:?}");
        seen
    }

    #[test]
    fn verdict_junit_passing_run_is_well_formed() {
        let recs = clean_run();
        let v = compute(
            &recs,
            &[],
            &read_back(&recs, Some(100)),
            &Thresholds::default(),
        );
        let x = junit(&v, "cpmlab <migration> & \"co\"");
        let tags = check_balanced(&x);
        assert_eq!(
            tags.iter().filter(|t| *t == "testcase").count(),
            v.rules.len()
        );
        assert!(!x.contains("<failure"));
        // The run has no informer, no leader-election candidate, no
        // migration expected and no list records: those rules are
        // skipped, not passed.
        let skipped: Vec<&str> = v
            .rules
            .iter()
            .filter(|r| r.status == RuleStatus::Skipped)
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(
            skipped,
            [
                "informer",
                "informer-go",
                "lease-exclusive",
                "leader-kept",
                "handover",
                "migration-completed",
                "slo-outside-list"
            ]
        );
        assert_eq!(tags.iter().filter(|t| *t == "skipped").count(), 7);
        assert!(x.contains("cpmlab &lt;migration&gt; &amp; &quot;co&quot;"));
    }

    #[test]
    fn verdict_junit_one_failure_per_failed_rule_with_reason() {
        let mut recs = clean_run();
        // Outage in get (zero-downtime), a lost write, an rv regression.
        for r in recs.iter_mut() {
            let t = r.start_unix_ms - T0;
            if r.probe == ProbeKind::Get && (3000.0..3500.0).contains(&t) {
                r.outcome = Outcome::Reset;
                r.error = Some("connection reset <by peer> & \"gone\"".into());
            }
        }
        recs.push(write(9_990.0, 101, 5));
        let v = compute(
            &recs,
            &[],
            &read_back(&recs, Some(100)),
            &Thresholds::default(),
        );
        let failed: Vec<&str> = v
            .rules
            .iter()
            .filter(|r| r.status == RuleStatus::Failed)
            .map(|r| r.name.as_str())
            .collect();
        // The write at rv 5 after rv 1099 is also a history that goes back.
        assert_eq!(
            failed,
            [
                "zero-downtime",
                "lost-writes",
                "rv-monotonic",
                "linearizable"
            ]
        );
        let x = junit(&v, "cpmlab");
        check_balanced(&x);
        assert_eq!(x.matches("<failure ").count(), 4);
        assert!(x.contains("failures=\"4\""));
        for name in failed {
            let rule = v.rule(name).unwrap();
            let start = x.find(&format!("name=\"{name}\"")).unwrap();
            let case = &x[start..start + x[start..].find("</testcase>").unwrap()];
            assert!(case.contains("<failure message=\""), "{case}");
            assert!(case.contains(&escape_xml(&rule.message)), "{case}");
        }
        assert!(x.contains("rv 5 after 1099"));
        assert!(x.contains("would have passed"));
    }
}
