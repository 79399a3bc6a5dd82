//! A scenario's expectations against what the run observed: one result per
//! expectation (each a JUnit testcase), with a message that says what was
//! wanted and what was seen.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::scenario::{Checked, MigrationOutcome, Scenario, VerdictExpect};
use crate::verdict::{ProbeStats, RuleStatus, Verdict};

/// The lab at the end of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EndObserved {
    /// The seed whose gateway the shoot API's name resolves to.
    pub serving: Option<String>,
    pub voters: BTreeMap<String, u32>,
    pub conditions: BTreeMap<String, String>,
    /// Where a lab with a garden read `conditions` from: `Ok(())` the
    /// Shoot in gardener-apiserver, `Err(why)` the lab's own copy because
    /// the garden did not answer. `None`: the lab has no garden.
    pub from_garden: Option<Result<(), String>>,
}

/// What happened to one timeline entry.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct EntryResult {
    pub index: usize,
    pub action: String,
    /// Seconds from the probes' start; `None`: never triggered.
    pub at_s: Option<f64>,
    /// What it hit, or why it failed.
    pub detail: String,
    pub ok: bool,
    /// The leader-election schedule's, not the file's: reported, and held
    /// to account only when it fired and failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scheduled: bool,
    /// The file's `optional`: no failed expectation when never triggered.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// Everything the expectations are checked against.
pub struct Observed<'a> {
    pub verdict: Option<&'a Verdict>,
    pub migration: Option<MigrationOutcome>,
    pub end: Option<&'a EndObserved>,
    pub timeline: &'a [EntryResult],
    /// What the members' logs said (see `verdict::etcd_said`).
    pub etcd_said: &'a [crate::verdict::etcd_said::Finding],
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ExpectResult {
    pub name: String,
    pub passed: bool,
    pub message: String,
}

fn res(name: impl Into<String>, passed: bool, message: impl Into<String>) -> ExpectResult {
    ExpectResult {
        name: name.into(),
        passed,
        message: message.into(),
    }
}

/// The lanes an expectation key covers: `overall`, a kind (every mode), or
/// one lane.
fn lanes<'a>(v: &'a Verdict, key: &str) -> Vec<&'a ProbeStats> {
    if key == "overall" {
        return vec![&v.overall];
    }
    v.probes
        .iter()
        .filter(|(k, _)| *k == key || k.split('/').next() == Some(key))
        .map(|(_, s)| s)
        .collect()
}

/// Whether the verdict is what the scenario wants, and what was seen.
fn verdict_outcome(want: VerdictExpect, v: &Verdict) -> (bool, String) {
    verdict_outcome_of(want, v.status, &v.rules, &v.accepted, &v.reasons)
}

fn verdict_outcome_of(
    want: VerdictExpect,
    status: crate::verdict::Status,
    rules: &[crate::verdict::Rule],
    accepted: &BTreeMap<String, String>,
    reasons: &[String],
) -> (bool, String) {
    let passed = status.passed();
    if want == VerdictExpect::Safe {
        let broken: Vec<String> = rules
            .iter()
            .filter(|r| r.fails(accepted) && !crate::verdict::is_availability_rule(&r.name))
            .map(|r| {
                if r.status == RuleStatus::Failed {
                    r.message.clone()
                } else {
                    format!("{} {}: {}", r.name, r.status.as_str(), r.message)
                }
            })
            .collect();
        if !broken.is_empty() {
            return (
                false,
                format!("a safety rule failed: {}", broken.join("; ")),
            );
        }
        let avail = if passed {
            status.headline().to_string()
        } else {
            format!("failed on availability only: {}", reasons.join("; "))
        };
        return (true, format!("every safety rule held; the verdict {avail}"));
    }
    let seen = if passed {
        format!("the verdict is {}", status.headline())
    } else {
        format!("the verdict failed: {}", reasons.join("; "))
    };
    (passed == (want == VerdictExpect::Pass), seen)
}

/// `expect.rules`: one rule of the verdict passes (does not fail it) or
/// fails, as the scenario wants.
fn rule_outcome(v: &Verdict, name: &str, want: crate::scenario::RuleExpect) -> ExpectResult {
    use crate::scenario::RuleExpect;
    let label = format!("rule {name}");
    let want_s = match want {
        RuleExpect::Pass => "pass",
        RuleExpect::Fail => "fail",
    };
    match v.rule(name) {
        Some(r) => {
            let passes = !r.fails(&v.accepted);
            res(
                label,
                passes == (want == RuleExpect::Pass),
                format!("want {want_s}, was {}: {}", r.status.as_str(), r.message),
            )
        }
        None => res(
            label,
            false,
            format!("want {want_s}, the verdict has no such rule"),
        ),
    }
}

/// Checks every expectation (the defaults included: the verdict passes, a
/// migration completes, every timeline entry ran).
pub fn check(s: &Scenario, c: &Checked, o: &Observed) -> Vec<ExpectResult> {
    let e = &s.expect;
    let mut out = Vec::new();
    let want_verdict = e.verdict.unwrap_or(VerdictExpect::Pass);
    match o.verdict {
        Some(v) => {
            let excused = if v.excuses.excused_count > 0 {
                format!(" ({})", crate::verdict::junit::observed_excused_budget(v))
            } else {
                String::new()
            };
            let (passed, seen) = verdict_outcome(want_verdict, v);
            out.push(res(
                "verdict",
                passed,
                format!("want {}, {seen}{excused}", want_verdict.as_str()),
            ));
            for (k, limit) in &c.downtime {
                let worst = lanes(v, k)
                    .iter()
                    .map(|l| l.downtime_ms)
                    .fold(0.0, f64::max);
                let lim = limit.as_secs_f64() * 1e3;
                out.push(res(
                    format!("downtime {k}"),
                    worst <= lim,
                    format!("at most {lim:.0} ms, was {worst:.0} ms"),
                ));
            }
            for (k, limit) in &e.failed_requests {
                let n: u64 = lanes(v, k).iter().map(|l| l.failed()).sum();
                out.push(res(
                    format!("failed requests {k}"),
                    n <= *limit,
                    format!("at most {limit}, were {n}"),
                ));
            }
            for ((step, kind), limit) in &c.p99 {
                let lim = limit.as_secs_f64() * 1e3;
                let phase = v.phases.iter().find(|p| &p.name == step);
                let lat = phase.and_then(|p| match kind.as_str() {
                    "get" => p.get,
                    "list" => p.list,
                    "write" => p.write,
                    _ => p.watch_delay,
                });
                let name = format!("p99 {step} {kind}");
                match lat {
                    Some(l) => out.push(res(
                        name,
                        l.p99_ms <= lim,
                        format!(
                            "at most {lim:.0} ms, was {:.0} ms over {} requests",
                            l.p99_ms, l.count
                        ),
                    )),
                    None => out.push(res(
                        name,
                        false,
                        format!("no successful {kind} in {step}: nothing to hold to {lim:.0} ms"),
                    )),
                }
            }
            for (name, want) in &e.rules {
                out.push(rule_outcome(v, name, *want));
            }
        }
        None => out.push(res("verdict", false, "the run has no verdict")),
    }
    let want_mig = e.migration.or(match &s.migration {
        Some(m) if m.stop_after.is_some() => None,
        Some(_) => Some(MigrationOutcome::Completed),
        None => None,
    });
    if let Some(want) = want_mig {
        let seen = o.migration.map(|m| m.as_str()).unwrap_or("not started");
        out.push(res(
            "migration",
            o.migration == Some(want),
            format!("want {}, was {seen}", want.as_str()),
        ));
    }
    if let Some(end) = &e.end {
        match o.end {
            None => out.push(res(
                "end state",
                false,
                "the lab's end state could not be read",
            )),
            Some(seen) => {
                if let Some(sv) = &end.serving {
                    out.push(res(
                        "end serving",
                        seen.serving.as_ref() == Some(sv),
                        format!(
                            "want {sv}, the API name resolves to {}",
                            seen.serving.as_deref().unwrap_or("no seed")
                        ),
                    ));
                }
                for (seed, n) in &end.voters {
                    let got = seen.voters.get(seed).copied().unwrap_or(0);
                    out.push(res(
                        format!("end voters {seed}"),
                        got == *n,
                        format!("want {n}, were {got}"),
                    ));
                }
                for (k, want) in &end.conditions {
                    out.push(end_condition(k, want, seen));
                }
            }
        }
    }
    out.extend(o.timeline.iter().filter_map(timeline_outcome));
    for kind in &e.etcd_said {
        out.push(diagnosis(*kind, o.etcd_said));
    }
    out
}

/// One step's condition at the end against the scenario's want. A lab
/// with a garden holds its conditions on the Shoot: the lab's own copy,
/// read because the garden did not answer, is no evidence of them.
fn end_condition(step: &str, want: &str, seen: &EndObserved) -> ExpectResult {
    let got = seen
        .conditions
        .get(step)
        .map(String::as_str)
        .unwrap_or("absent");
    let (read, from) = match &seen.from_garden {
        None => (true, String::new()),
        Some(Ok(())) => (true, " on the Shoot in the garden".to_string()),
        Some(Err(why)) => (
            false,
            format!(" in the lab's copy only: the garden did not answer ({why})"),
        ),
    };
    res(
        format!("end condition {step}"),
        read && got == want,
        format!("want {want}, was {got}{from}"),
    )
}

/// Messages dropped to a connected peer that make a stream that stayed
/// full, not a moment's congestion (a healthy join drops a handful; the
/// stall drops ~80 a second for minutes).
const STAYED_FULL_DROPS: u64 = 100;

/// A timeline entry's expectation: it fired and did what it says. A
/// scheduled entry (the leader-election schedule's) is held to account
/// only when it fired and failed; an optional one (a branch the run may
/// not take) holds when it never fired.
fn timeline_outcome(t: &EntryResult) -> Option<ExpectResult> {
    if t.scheduled {
        return (t.at_s.is_some() && !t.ok).then(|| {
            res(
                format!("leader election: {}", t.action),
                false,
                t.detail.clone(),
            )
        });
    }
    let name = format!("timeline[{}] {}", t.index, t.action);
    Some(match t.at_s {
        Some(at) => res(name, t.ok, format!("at {at:.1} s: {}", t.detail)),
        None if t.optional => res(name, true, format!("not taken (optional): {}", t.detail)),
        None => res(name, false, format!("never triggered: {}", t.detail)),
    })
}

/// Whether the members' logs show `kind` (for a full peer buffer: while the
/// peer was connected, since a member that is not up yet fills it too).
fn diagnosis(
    kind: crate::verdict::etcd_said::Kind,
    said: &[crate::verdict::etcd_said::Finding],
) -> ExpectResult {
    use crate::verdict::etcd_said::Kind;
    let worst = said
        .iter()
        .filter(|f| f.kind == kind)
        .filter(|f| kind != Kind::PeerBufferFull || f.count - f.peer_inactive >= STAYED_FULL_DROPS)
        .max_by_key(|f| f.count);
    res(
        format!("etcd said {}", kind.name()),
        worst.is_some(),
        match worst {
            Some(f) => f.plain(),
            None => format!("want `{}` in the members' logs; not said", kind.pattern()),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::etcd_said::{Finding, Kind};

    fn finding(kind: Kind, count: u64, inactive: u64) -> Finding {
        Finding {
            kind,
            member: "seed-a-etcd-0".into(),
            peer: Some("abd8".into()),
            first_unix_ms: 0.0,
            last_unix_ms: 1000.0,
            count,
            messages: Default::default(),
            peer_inactive: inactive,
        }
    }

    fn rule(name: &str, failed: bool) -> crate::verdict::Rule {
        crate::verdict::Rule {
            name: name.into(),
            status: if failed {
                RuleStatus::Failed
            } else {
                RuleStatus::Passed
            },
            message: format!("{name} message"),
        }
    }

    fn outcome(
        want: VerdictExpect,
        rules: &[crate::verdict::Rule],
        reasons: &[String],
    ) -> (bool, String) {
        let none = BTreeMap::new();
        let status = crate::verdict::Status::of(rules, &none);
        verdict_outcome_of(want, status, rules, &none, reasons)
    }

    #[test]
    fn a_safe_verdict_allows_an_outage_but_not_a_lost_write() {
        let outage = [
            rule("zero-downtime", true),
            rule("slo-migratednsrecords-write", true),
            rule("lost-writes", false),
        ];
        let reasons = ["233 of 20023 requests failed".to_string()];
        let (ok, msg) = outcome(VerdictExpect::Safe, &outage, &reasons);
        assert!(ok, "{msg}");
        assert!(msg.contains("availability only: 233 of 20023"), "{msg}");
        let (ok, _) = outcome(VerdictExpect::Pass, &outage, &reasons);
        assert!(!ok);
        let lost = [rule("zero-downtime", false), rule("lost-writes", true)];
        let (ok, msg) = outcome(VerdictExpect::Safe, &lost, &reasons);
        assert!(!ok);
        assert!(msg.contains("lost-writes message"), "{msg}");
        let (ok, _) = outcome(VerdictExpect::Fail, &lost, &reasons);
        assert!(ok);
        // A blind lane is no safety rule's business, but a lost-writes
        // check with nothing acknowledged is: not covered, not safe.
        let mut blind = rule("lost-writes", false);
        blind.status = RuleStatus::NotCovered;
        let (ok, msg) = outcome(VerdictExpect::Safe, &[blind.clone()], &reasons);
        assert!(!ok, "{msg}");
        // Excused within budget: `pass` holds, amber.
        let mut excused = rule("zero-downtime", false);
        excused.status = RuleStatus::Excused;
        let (ok, msg) = outcome(VerdictExpect::Pass, &[excused], &reasons);
        assert!(ok, "{msg}");
        assert!(msg.contains("PASSED WITH KNOWN HAZARDS"), "{msg}");
    }

    fn entry(at_s: Option<f64>, ok: bool, optional: bool) -> EntryResult {
        EntryResult {
            index: 0,
            action: "migrate --abort".into(),
            at_s,
            detail: "DestinationEtcdPeersJoined Failed + 0.0 s".into(),
            ok,
            scheduled: false,
            optional,
        }
    }

    #[test]
    fn an_end_condition_of_a_lab_with_a_garden_is_read_from_the_shoot() {
        let mut seen = EndObserved::default();
        seen.conditions
            .insert("MigrationCompleted".into(), "True".into());
        // No garden: the lab's record is all there is.
        assert!(end_condition("MigrationCompleted", "True", &seen).passed);
        seen.from_garden = Some(Ok(()));
        let r = end_condition("MigrationCompleted", "True", &seen);
        assert!(r.passed, "{r:?}");
        assert!(r.message.ends_with("on the Shoot in the garden"), "{r:?}");
        let r = end_condition("SourceSeedCleanup", "True", &seen);
        assert!(!r.passed && r.message.contains("was absent"), "{r:?}");
        // The same True, but the garden did not answer: not held.
        seen.from_garden = Some(Err("connection refused".into()));
        let r = end_condition("MigrationCompleted", "True", &seen);
        assert!(!r.passed, "{r:?}");
        assert!(
            r.message
                .contains("the lab's copy only: the garden did not answer (connection refused)"),
            "{r:?}"
        );
    }

    #[test]
    fn an_optional_entry_holds_untaken_but_not_when_it_fired_and_failed() {
        let r = timeline_outcome(&entry(None, false, false)).unwrap();
        assert!(
            !r.passed && r.message.starts_with("never triggered"),
            "{r:?}"
        );
        let r = timeline_outcome(&entry(None, false, true)).unwrap();
        assert!(
            r.passed && r.message.starts_with("not taken (optional)"),
            "{r:?}"
        );
        let r = timeline_outcome(&entry(Some(3.0), false, true)).unwrap();
        assert!(!r.passed, "{r:?}");
        let r = timeline_outcome(&entry(Some(3.0), true, true)).unwrap();
        assert!(r.passed, "{r:?}");
        assert_eq!(r.name, "timeline[0] migrate --abort");
    }

    #[test]
    fn a_diagnosis_needs_the_warning_while_the_peer_was_connected() {
        let r = diagnosis(Kind::PeerBufferFull, &[finding(Kind::PeerBufferFull, 9, 9)]);
        assert!(!r.passed, "only drops to a peer not yet up: {}", r.message);
        assert_eq!(r.name, "etcd said peer-buffer-full");
        let r = diagnosis(
            Kind::PeerBufferFull,
            &[finding(Kind::PeerBufferFull, 12, 9)],
        );
        assert!(!r.passed, "a healthy join's few drops: {}", r.message);
        let r = diagnosis(
            Kind::PeerBufferFull,
            &[
                finding(Kind::PeerBufferFull, 9, 9),
                finding(Kind::PeerBufferFull, 6451, 0),
            ],
        );
        assert!(r.passed);
        assert!(r.message.contains("6451×"), "{}", r.message);
        let r = diagnosis(Kind::MemberAddRefused, &[]);
        assert!(!r.passed);
        assert!(
            r.message.contains("rejecting member add request"),
            "{}",
            r.message
        );
    }
}
