//! Checks a parsed scenario as a whole (the topology, every duration, every
//! name a trigger, an action or an expectation uses) and turns it into the
//! typed form the runner executes. An error is `(field path, message)`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    trace, Expect, LinkSpec, MigrateAction, MigrationOutcome, Scenario, StepEvent, Target,
    TimelineEntry,
};
use crate::link::profile::{parse_duration_max, parse_percent, parse_rate, LinkProfile, Pair};
use crate::migrate::conditions::STEPS;
use crate::migrate::record::Driver;

/// The longest time a scenario may name.
const MAX_TIME: Duration = Duration::from_secs(3600);
/// The longest a whole scenario may be expected to take.
const MAX_EXPECTED_DURATION: Duration = Duration::from_secs(6 * 3600);

type Problem = (String, String);

/// A scenario ready to run: durations parsed, names resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// How long the probes run at least.
    pub duration: Duration,
    pub warmup: Duration,
    pub cooldown: Duration,
    pub timeline: Vec<Planned>,
    /// The trace file (resolved) and its changes.
    pub trace: Option<(PathBuf, trace::Trace)>,
    pub downtime: BTreeMap<String, Duration>,
    /// (step, kind) to the largest p99 allowed.
    pub p99: BTreeMap<(String, String), Duration>,
    /// `expected_duration`, parsed.
    pub expected_duration: Option<Duration>,
    /// The hazards accepted, with their budgets.
    pub excuse: BTreeMap<crate::verdict::Hazard, crate::verdict::Budget>,
    /// The stall bound, when the scenario sets one.
    pub stall: Option<Duration>,
    /// The factor the limits about time were stretched by (`slowed`): 1
    /// as the file declares them.
    pub slow_factor: f64,
}

impl Checked {
    /// The expectations about time stretched by `factor` (a lab the engine
    /// runs by emulation, or `--slow-factor`): each `downtime` and `p99`;
    /// `slow_factor` carries it to the verdict's criteria
    /// (`Criteria::stretched`: the latency limits, the stall bound, the
    /// hazard budgets' `max_ms`). What is not about time stays as the file
    /// says: failed-request counts, budgets' `max`, the safety rules,
    /// coverage.
    pub fn slowed(&self, factor: f64) -> Checked {
        let f = factor.max(1.0);
        let mut c = self.clone();
        c.slow_factor = self.slow_factor * f;
        for d in c.downtime.values_mut().chain(c.p99.values_mut()) {
            *d = d.mul_f64(f);
        }
        c
    }
}

/// A timeline entry, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// Its index in the file (`timeline[i]`).
    pub index: usize,
    pub trigger: Trigger,
    pub action: Action,
    /// Part of the leader-election schedule (`probes.leader_election`), not
    /// of the file's timeline: carried out alike, but a step the run never
    /// reaches is no failed expectation.
    pub scheduled: bool,
    /// The file's `optional`: a branch that may not be taken.
    pub optional: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// From the start of the probes.
    At(Duration),
    Step {
        step: String,
        on: StepEvent,
        after: Duration,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Kill(TargetRef),
    /// Killed, and not started again (the pod is gone for good).
    Stop(TargetRef),
    Pause(TargetRef),
    Unpause(TargetRef),
    Restart(TargetRef),
    /// The pod deleted: SIGTERM, SIGKILL after `grace`, started again.
    Delete {
        target: TargetRef,
        grace: Duration,
    },
    Partition(String),
    Heal(String),
    Link(LinkSpec),
    Migrate(MigrateAction),
}

impl Action {
    /// A short description: `kill member leader`, `partition seed-a:seed-b`.
    pub fn describe(&self) -> String {
        match self {
            Action::Kill(t) => format!("kill {t}"),
            Action::Stop(t) => format!("stop {t}"),
            Action::Pause(t) => format!("pause {t}"),
            Action::Unpause(t) => format!("unpause {t}"),
            Action::Restart(t) => format!("restart {t}"),
            Action::Delete { target, .. } => format!("delete {target}"),
            Action::Partition(p) => format!("partition {p}"),
            Action::Heal(p) => format!("heal {p}"),
            Action::Link(l) => format!("link {}", l.between),
            Action::Migrate(MigrateAction::Resume) => "migrate --resume".into(),
            Action::Migrate(MigrateAction::Abort) => "migrate --abort".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower,
    Learner,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetRef {
    /// A member by role, optionally only in one seed.
    MemberRole {
        role: Role,
        seed: Option<String>,
    },
    /// The seed's members in name order, 0-based.
    Member {
        seed: String,
        index: usize,
    },
    Api {
        seed: String,
        index: usize,
    },
    Gateway(String),
    /// A seed's leader-election candidate.
    Candidate(String),
    /// A seed's gardenlet.
    Gardenlet(String),
    /// A part of the garden.
    Garden(crate::scenario::GardenPart),
}

impl std::fmt::Display for TargetRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetRef::MemberRole { role, seed } => {
                let r = match role {
                    Role::Leader => "leader",
                    Role::Follower => "follower",
                    Role::Learner => "learner",
                };
                match seed {
                    Some(s) => write!(f, "member {r} in {s}"),
                    None => write!(f, "member {r}"),
                }
            }
            TargetRef::Member { seed, index } => write!(f, "member {seed}/{index}"),
            TargetRef::Api { seed, index } => write!(f, "api {seed}/{index}"),
            TargetRef::Gateway(s) => write!(f, "gateway {s}"),
            TargetRef::Candidate(s) => write!(f, "candidate {s}"),
            TargetRef::Gardenlet(s) => write!(f, "gardenlet {s}"),
            TargetRef::Garden(p) => write!(f, "garden {}", p.as_str()),
        }
    }
}

fn p(field: impl Into<String>, message: impl Into<String>) -> Problem {
    (field.into(), message.into())
}

/// A deleted pod's time between SIGTERM and SIGKILL: Kubernetes' default
/// `terminationGracePeriodSeconds` (k8s.io/api core/v1
/// `DefaultTerminationGracePeriodSeconds`), which etcd-druid v0.38.1's
/// StatefulSet does not set (internal/component/statefulset/builder.go).
pub const POD_GRACE: Duration = Duration::from_secs(30);

fn time(field: &str, s: &str) -> Result<Duration, Problem> {
    parse_duration_max(field, s, MAX_TIME).map_err(|e| p(field, strip_flag(&e.0, field)))
}

/// `parse_*` messages start with the flag's name; the located error names
/// the field already.
fn strip_flag(msg: &str, field: &str) -> String {
    msg.strip_prefix(field)
        .map(|m| m.trim_start().to_string())
        .unwrap_or_else(|| msg.to_string())
}

/// Checks the whole scenario; `path` anchors the trace file.
pub fn check(s: &Scenario, path: &Path) -> Result<Checked, Problem> {
    if s.description.trim().is_empty() {
        return Err(p("description", "say in one line what this scenario shows"));
    }
    s.topology
        .validate()
        .map_err(|(f, m)| p(format!("topology.{f}"), m))?;
    if let Some(f) = &s.fill {
        crate::fill::FillPlan::new(&f.size, f.object_size(), &f.kinds(), crate::fill::NAMESPACE)
            .map_err(|e| {
                let field = if e.0.starts_with("--object-size") {
                    "fill.object_size"
                } else if e.0.starts_with("--kinds") {
                    "fill.kinds"
                } else {
                    "fill.size"
                };
                // "--size 9GiB: between ..." -> "between ...".
                let msg = e.0.split_once(": ").map_or(e.0.as_str(), |(_, m)| m);
                p(field, msg)
            })?;
    }
    let nets = s.topology.network_names();
    let seeds: Vec<String> = s.topology.seeds.iter().map(|x| x.name.clone()).collect();
    for (i, l) in s.links.iter().enumerate() {
        link_profile(l, &nets, &format!("links[{i}]"))?;
    }
    if let Some(le) = &s.probes.leader_election {
        for (i, seed) in le.seeds.iter().enumerate() {
            if !seeds.contains(seed) {
                return Err(p(
                    format!("probes.leader_election.seeds[{i}]"),
                    format!("`{seed}` is not a seed of this lab ({})", seeds.join(", ")),
                ));
            }
        }
        if le.source_until() != "never" {
            known_step("probes.leader_election.source_until", le.source_until())?;
        }
        if le.destination_from() != "start" {
            known_step(
                "probes.leader_election.destination_from",
                le.destination_from(),
            )?;
        }
    }
    let settings = s.probes.settings(&s.topology);
    let parsed = settings.parse().map_err(|e| {
        let field = if e.0.starts_with("--lease-duration") {
            "probes.leader_election.lease_duration"
        } else if e.0.starts_with("--renew-deadline") {
            "probes.leader_election.renew_deadline"
        } else if e.0.starts_with("--retry-period") {
            "probes.leader_election.retry_period"
        } else if e.0.starts_with("--candidates") || e.0.starts_with("--start-candidates") {
            "probes.leader_election.seeds"
        } else if e.0.starts_with("--rate") {
            "probes.rate"
        } else if e.0.starts_with("--timeout") {
            "probes.timeout"
        } else if e.0.starts_with("--probes") {
            "probes.probes"
        } else if e.0.starts_with("--write-rate") {
            "probes.write_rate"
        } else if e.0.starts_with("--write-bytes") {
            "probes.write_bytes"
        } else if e.0.starts_with("--late-dns") {
            "probes.late_dns"
        } else {
            "probes.modes"
        };
        p(field, e.0)
    })?;
    if parsed
        .modes
        .contains(&crate::probe::record::ConnMode::SeedBound)
        && !s.topology.api.wildcard_certificate
    {
        return Err(p(
            "probes.modes",
            "`seed-bound` connects by the shoot API's seed-bound name, which the seeds have only with a wildcard certificate: set topology.api.wildcard_certificate: true",
        ));
    }
    let warmup = time("probes.warmup", &s.probes.warmup)?;
    let mut cooldown = time("probes.cooldown", &s.probes.cooldown)?;
    // The destination's candidate takes a lease the source could not
    // release only once it expired: the probes run on for the handover's
    // bound, so that the takeover is seen and judged.
    if let (Some(le), Some(_)) = (&s.probes.leader_election, &s.migration) {
        if le.source_until() != "never" {
            if let Ok(p) = s.probes.settings(&s.topology).parse() {
                let bound = p.lease.lease_duration + 2 * p.lease.retry_period;
                cooldown = cooldown.max(bound);
            }
        }
    }
    let duration = match &s.duration {
        Some(d) => time("duration", d)?,
        None if s.migration.is_none() => Duration::from_secs(20),
        None => Duration::ZERO,
    };
    let expected_duration = match &s.expected_duration {
        Some(d) => Some(
            parse_duration_max("expected_duration", d, MAX_EXPECTED_DURATION)
                .map_err(|e| p("expected_duration", strip_flag(&e.0, "expected_duration")))?,
        ),
        None => None,
    };
    if let Some(m) = &s.migration {
        for (f, v) in [
            ("max_rtt", &m.max_rtt),
            ("join_timeout", &m.join_timeout),
            ("cleanup_before_api", &m.cleanup_before_api),
        ] {
            if let Some(v) = v {
                time(&format!("migration.{f}"), v)?;
            }
        }
        if let Some(st) = &m.stop_after {
            known_step("migration.stop_after", st)?;
        }
        for (st, d) in &m.hold {
            let f = format!("migration.hold.{st}");
            known_step(&f, st)?;
            time(&f, d)?;
        }
        let age = s
            .topology
            .api
            .gateway_max_connection_duration()
            .ok()
            .flatten();
        m.order
            .for_plan(m.plan)
            .check_gateway_handover(
                m.gateway_handover,
                m.force_shrink,
                s.topology.api.exposure,
                age,
            )
            .map_err(|(f, msg)| p(f, msg))?;
        match (m.driver, &m.command) {
            (Driver::External, None) => {
                return Err(p(
                    "migration.command",
                    "the external driver needs the command that migrates",
                ))
            }
            (Driver::Reference, Some(_)) => {
                return Err(p(
                    "migration.command",
                    "only the external driver runs a command (set `driver: external`)",
                ))
            }
            _ => {}
        }
    }
    let trace = match &s.trace {
        Some(t) => {
            Pair::parse(&t.between, &nets).map_err(|e| p("trace.between", e.0))?;
            let file = path.parent().unwrap_or(Path::new(".")).join(&t.file);
            let tr = trace::load(&file).map_err(|e| {
                let m = if e.line == 0 {
                    format!("{}: {}", file.display(), e.message)
                } else {
                    e.to_string()
                };
                p("trace.file", m)
            })?;
            Some((file, tr))
        }
        None => None,
    };
    let mut timeline = s
        .timeline
        .iter()
        .enumerate()
        .map(|(i, e)| planned(s, i, e, &nets, &seeds))
        .collect::<Result<Vec<_>, _>>()?;
    reachable(s, &timeline)?;
    timeline.extend(leader_election_schedule(s, timeline.len()));
    let (downtime, p99, excuse, stall) = expectations(&s.expect, s, &seeds)?;
    Ok(Checked {
        duration,
        warmup,
        cooldown,
        timeline,
        trace,
        downtime,
        p99,
        expected_duration,
        excuse,
        stall,
        slow_factor: 1.0,
    })
}

/// The leader-election schedule as timeline entries after the file's: the
/// source's candidate stops when `source_until` starts, the destination's
/// starts when `destination_from` turned True (GEP: source components run
/// until their step hands over; destination components start once the
/// destination's API server is ready).
fn leader_election_schedule(s: &Scenario, first: usize) -> Vec<Planned> {
    let (Some(le), Some(_)) = (&s.probes.leader_election, &s.migration) else {
        return Vec::new();
    };
    let with = le.seeds(&s.topology);
    let (src, dst) = (
        s.topology.source().name.clone(),
        s.topology.destination().name.clone(),
    );
    let mut out = Vec::new();
    if le.destination_from() != "start" && with.contains(&dst) {
        out.push((
            Trigger::Step {
                step: le.destination_from().to_string(),
                on: StepEvent::Leaving,
                after: Duration::ZERO,
            },
            Action::Restart(TargetRef::Candidate(dst)),
        ));
    }
    if le.source_until() != "never" && with.contains(&src) {
        out.push((
            Trigger::Step {
                step: le.source_until().to_string(),
                on: StepEvent::Entering,
                after: Duration::ZERO,
            },
            Action::Stop(TargetRef::Candidate(src)),
        ));
    }
    out.into_iter()
        .enumerate()
        .map(|(k, (trigger, action))| Planned {
            index: first + k,
            trigger,
            action,
            scheduled: true,
            optional: false,
        })
        .collect()
}

fn known_step(field: &str, step: &str) -> Result<(), Problem> {
    if STEPS.contains(&step) {
        Ok(())
    } else {
        Err(p(
            field,
            format!("unknown step `{step}` (one of {})", STEPS.join(", ")),
        ))
    }
}

/// The profile a link spec puts in force (partition off).
pub fn link_profile(l: &LinkSpec, nets: &[String], field: &str) -> Result<LinkProfile, Problem> {
    Pair::parse(&l.between, nets).map_err(|e| p(format!("{field}.between"), e.0))?;
    let d = |name: &str, v: &Option<String>| -> Result<Duration, Problem> {
        let f = format!("{field}.{name}");
        match v {
            Some(v) => {
                crate::link::profile::parse_duration(&f, v).map_err(|e| p(&f, strip_flag(&e.0, &f)))
            }
            None => Ok(Duration::ZERO),
        }
    };
    let prof = LinkProfile {
        delay: d("delay", &l.delay)?,
        jitter: d("jitter", &l.jitter)?,
        distribution: l.distribution.unwrap_or_default(),
        loss_pct: match &l.loss {
            Some(v) => {
                let f = format!("{field}.loss");
                parse_percent(&f, v).map_err(|e| p(&f, strip_flag(&e.0, &f)))?
            }
            None => 0.0,
        },
        loss_by: l.loss_by.unwrap_or_default(),
        rate_bps: match &l.rate {
            Some(v) => {
                let f = format!("{field}.rate");
                Some(parse_rate(&f, v).map_err(|e| p(&f, strip_flag(&e.0, &f)))?)
            }
            None => None,
        },
        partition: false,
    };
    if prof.jitter > prof.delay {
        return Err(p(
            format!("{field}.jitter"),
            "jitter larger than the delay would reorder time; keep it at most the delay",
        ));
    }
    Ok(prof)
}

fn planned(
    s: &Scenario,
    i: usize,
    e: &TimelineEntry,
    nets: &[String],
    seeds: &[String],
) -> Result<Planned, Problem> {
    let f = format!("timeline[{i}]");
    let trigger = match (&e.at, &e.when) {
        (Some(_), None) if e.optional => {
            return Err(p(
                format!("{f}.optional"),
                "belongs to a `when` entry: an `at` entry always fires",
            ))
        }
        (Some(at), None) => Trigger::At(time(&format!("{f}.at"), at)?),
        (None, Some(w)) => {
            known_step(&format!("{f}.when.step"), &w.step)?;
            if s.migration.is_none() {
                return Err(p(
                    format!("{f}.when"),
                    "a step trigger needs a `migration`; this scenario has none",
                ));
            }
            let after = match &w.after {
                Some(a) => time(&format!("{f}.when.after"), a)?,
                None => Duration::ZERO,
            };
            Trigger::Step {
                step: w.step.clone(),
                on: w.on,
                after,
            }
        }
        (Some(_), Some(_)) => {
            return Err(p(
                &f,
                "give either `at` (a time) or `when` (a step), not both",
            ))
        }
        (None, None) => {
            return Err(p(
                &f,
                "needs a trigger: `at: 10s` or `when: {step: ..., on: entering}`",
            ))
        }
    };
    let mut actions = Vec::new();
    let t = |name: &str, v: &Option<Target>| -> Result<Option<TargetRef>, Problem> {
        v.as_ref()
            .map(|t| target(s, t, &format!("{f}.{name}"), seeds))
            .transpose()
    };
    if let Some(x) = t("kill", &e.kill)? {
        actions.push(Action::Kill(x));
    }
    if let Some(x) = t("stop", &e.stop)? {
        actions.push(Action::Stop(x));
    }
    if let Some(x) = t("pause", &e.pause)? {
        actions.push(Action::Pause(x));
    }
    if let Some(x) = t("unpause", &e.unpause)? {
        actions.push(Action::Unpause(x));
    }
    if let Some(x) = t("restart", &e.restart)? {
        actions.push(Action::Restart(x));
    }
    if let Some(x) = t("delete", &e.delete)? {
        let d = e.delete.as_ref().expect("parsed");
        if !matches!(
            x,
            TargetRef::Member { .. } | TargetRef::MemberRole { .. } | TargetRef::Api { .. }
        ) {
            return Err(p(
                format!("{f}.delete"),
                "deletes a member's or an API replica's pod (`member` or `api`)",
            ));
        }
        let grace = match &d.grace {
            Some(g) => time(&format!("{f}.delete.grace"), g)?,
            None => POD_GRACE,
        };
        actions.push(Action::Delete { target: x, grace });
    }
    for (name, v) in [
        ("kill", &e.kill),
        ("stop", &e.stop),
        ("pause", &e.pause),
        ("unpause", &e.unpause),
        ("restart", &e.restart),
    ] {
        if v.as_ref().is_some_and(|t| t.grace.is_some()) {
            return Err(p(
                format!("{f}.{name}.grace"),
                "a grace belongs to `delete` (SIGTERM, then SIGKILL after it)",
            ));
        }
    }
    for (name, v, heal) in [("partition", &e.partition, false), ("heal", &e.heal, true)] {
        if let Some(pair) = v {
            Pair::parse(pair, nets).map_err(|e| p(format!("{f}.{name}"), e.0))?;
            actions.push(if heal {
                Action::Heal(pair.clone())
            } else {
                Action::Partition(pair.clone())
            });
        }
    }
    if let Some(l) = &e.link {
        link_profile(l, nets, &format!("{f}.link"))?;
        actions.push(Action::Link(l.clone()));
    }
    if let Some(m) = e.migrate {
        match &s.migration {
            None => {
                return Err(p(
                    format!("{f}.migrate"),
                    "there is no `migration` to resume or abort",
                ))
            }
            Some(mig) if mig.driver == Driver::External => {
                return Err(p(
                    format!("{f}.migrate"),
                    "resume and abort belong to the reference driver",
                ))
            }
            _ => {}
        }
        actions.push(Action::Migrate(m));
    }
    match actions.len() {
        1 => Ok(Planned {
            index: i,
            trigger,
            action: actions.remove(0),
            scheduled: false,
            optional: e.optional,
        }),
        0 => Err(p(
            &f,
            "needs an action: kill, stop, pause, unpause, restart, delete, partition, heal, link or migrate",
        )),
        _ => Err(p(
            &f,
            format!(
                "one action per entry, found {} ({}); split it into entries with the same trigger",
                actions.len(),
                actions
                    .iter()
                    .map(Action::describe)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

fn seed_index(s: &str, field: &str, seeds: &[String]) -> Result<(String, usize), Problem> {
    let (seed, idx) = s.split_once('/').ok_or_else(|| {
        p(
            field,
            format!("`{s}`: expected <seed>/<index>, e.g. seed-a/0"),
        )
    })?;
    if !seeds.iter().any(|x| x == seed) {
        return Err(p(
            field,
            format!("`{seed}` is not a seed of this lab ({})", seeds.join(", ")),
        ));
    }
    let index: usize = idx
        .parse()
        .map_err(|_| p(field, format!("`{idx}` is not an index (0, 1, ...)")))?;
    Ok((seed.to_string(), index))
}

fn target(s: &Scenario, t: &Target, f: &str, seeds: &[String]) -> Result<TargetRef, Problem> {
    let given = [
        t.member.is_some(),
        t.api.is_some(),
        t.gateway.is_some(),
        t.candidate.is_some(),
        t.gardenlet.is_some(),
        t.garden.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if given != 1 {
        return Err(p(
            f,
            "name exactly one of `member`, `api`, `gateway`, `candidate`, `gardenlet` or `garden`",
        ));
    }
    if let Some(g) = t.garden {
        return Ok(TargetRef::Garden(g));
    }
    if let Some(g) = &t.gardenlet {
        if !seeds.contains(g) {
            return Err(p(
                format!("{f}.gardenlet"),
                format!("`{g}` is not a seed of this lab ({})", seeds.join(", ")),
            ));
        }
        return Ok(TargetRef::Gardenlet(g.clone()));
    }
    if let Some(c) = &t.candidate {
        let field = format!("{f}.candidate");
        let Some(le) = &s.probes.leader_election else {
            return Err(p(
                field,
                "there are candidates only with `probes.leader_election`",
            ));
        };
        let with = le.seeds(&s.topology);
        if !with.contains(c) {
            return Err(p(
                field,
                format!(
                    "`{c}` runs no candidate (probes.leader_election.seeds: {})",
                    with.join(", ")
                ),
            ));
        }
        return Ok(TargetRef::Candidate(c.clone()));
    }
    if let Some(seed) = &t.seed {
        if !seeds.contains(seed) {
            return Err(p(
                format!("{f}.seed"),
                format!("`{seed}` is not a seed of this lab ({})", seeds.join(", ")),
            ));
        }
        if t.member.as_deref().is_none_or(|m| m.contains('/')) {
            return Err(p(
                format!("{f}.seed"),
                "`seed` narrows a member role (leader, follower, learner)",
            ));
        }
    }
    if let Some(m) = &t.member {
        let role = match m.as_str() {
            "leader" => Some(Role::Leader),
            "follower" => Some(Role::Follower),
            "learner" => Some(Role::Learner),
            _ => None,
        };
        if let Some(role) = role {
            if role == Role::Learner && s.migration.is_none() {
                return Err(p(
                    format!("{f}.member"),
                    "there are learners only while a migration joins members",
                ));
            }
            return Ok(TargetRef::MemberRole {
                role,
                seed: t.seed.clone(),
            });
        }
        let field = format!("{f}.member");
        let (seed, index) = seed_index(m, &field, seeds)?;
        // Destination members exist once they joined: up to the members count.
        let most = s.topology.etcd.members as usize;
        if index >= most {
            return Err(p(
                field,
                format!(
                    "`{m}`: a seed holds at most {most} members (indices 0 to {})",
                    most - 1
                ),
            ));
        }
        return Ok(TargetRef::Member { seed, index });
    }
    if let Some(a) = &t.api {
        let field = format!("{f}.api");
        let (seed, index) = seed_index(a, &field, seeds)?;
        let most = s.topology.api.replicas as usize;
        if index >= most {
            return Err(p(
                field,
                format!(
                    "`{a}`: a seed runs {most} API replicas (indices 0 to {})",
                    most - 1
                ),
            ));
        }
        return Ok(TargetRef::Api { seed, index });
    }
    let g = t.gateway.clone().expect("one of the three");
    if !seeds.contains(&g) {
        return Err(p(
            format!("{f}.gateway"),
            format!("`{g}` is not a seed of this lab ({})", seeds.join(", ")),
        ));
    }
    Ok(TargetRef::Gateway(g))
}

/// Step triggers the migration can never reach are refused: a step after
/// `stop_after` with nothing to resume, a `failed` of a step that cannot
/// fail, a resume or abort with nothing to trigger it.
fn reachable(s: &Scenario, timeline: &[Planned]) -> Result<(), Problem> {
    let Some(m) = &s.migration else {
        return Ok(());
    };
    let resumes = timeline
        .iter()
        .any(|t| t.action == Action::Migrate(MigrateAction::Resume));
    let pos = |st: &str| STEPS.iter().position(|x| *x == st).unwrap_or(0);
    for t in timeline {
        let Trigger::Step { step, on, .. } = &t.trigger else {
            continue;
        };
        let f = format!("timeline[{}].when", t.index);
        if let (Some(stop), false) = (&m.stop_after, resumes) {
            if pos(step) > pos(stop) {
                return Err(p(
                    &f,
                    format!(
                        "`{step}` comes after `stop_after: {stop}` and nothing resumes the migration: it is never reached"
                    ),
                ));
            }
        }
        if *on == StepEvent::Failed
            && matches!(
                step.as_str(),
                "MigrateExtensionsNeededBeforeKubeAPIServer" | "MigrationCompleted"
            )
        {
            return Err(p(
                format!("{f}.on"),
                format!("`{step}` cannot fail: the trigger never fires"),
            ));
        }
        if m.driver == Driver::External && *on == StepEvent::Failed {
            return Err(p(
                format!("{f}.on"),
                "an external driver's steps are not watched for failure",
            ));
        }
    }
    Ok(())
}

/// The probe keys an expectation may name: a probe kind, a lane
/// (`kind/mode`) or `overall`.
fn known_probe(key: &str) -> bool {
    use crate::probe::record::{ConnMode, ProbeKind};
    let kind = |k: &str| serde_json::from_value::<ProbeKind>(k.into()).is_ok();
    let mode = |m: &str| serde_json::from_value::<ConnMode>(m.into()).is_ok();
    key == "overall"
        || match key.split_once('/') {
            Some((k, m)) => kind(k) && mode(m),
            None => kind(key),
        }
}

type Limits = (
    BTreeMap<String, Duration>,
    BTreeMap<(String, String), Duration>,
    BTreeMap<crate::verdict::Hazard, crate::verdict::Budget>,
    Option<Duration>,
);

/// `expect.excuse`: a budget per known hazard.
fn excuses(
    v: Option<&serde_json::Value>,
) -> Result<BTreeMap<crate::verdict::Hazard, crate::verdict::Budget>, Problem> {
    use crate::verdict::{Budget, Criteria, Hazard};
    let example = "e.g. `excuse: {move-leader: {max: 1, max_ms: 7500}}`";
    let mut out = BTreeMap::new();
    let Some(v) = v else { return Ok(out) };
    let map = match v {
        serde_json::Value::Object(m) => m,
        serde_json::Value::Array(_) => {
            return Err(p(
                "expect.excuse",
                format!(
                "each known hazard needs a budget (how many requests, how long each): {example}"
            ),
            ))
        }
        _ => {
            return Err(p(
                "expect.excuse",
                format!("a budget per hazard, {example}"),
            ))
        }
    };
    for (k, b) in map {
        let f = format!("expect.excuse.{k}");
        let h: Hazard =
            serde_json::from_value(serde_json::Value::String(k.clone())).map_err(|_| {
                p(
                    f.clone(),
                    "not a known hazard: move-leader, killed-member, leader-election",
                )
            })?;
        let budget: Budget = serde_json::from_value(b.clone()).map_err(|e| {
            p(
                f.clone(),
                format!(
                    "{e}: a budget is {{max: <requests>, max_ms: <milliseconds>, lanes: [..]}}"
                ),
            )
        })?;
        out.insert(h, budget);
    }
    let c = Criteria {
        excuse: out.clone(),
        ..Criteria::default()
    };
    c.check().map_err(|(f, m)| p(format!("expect.{f}"), m))?;
    Ok(out)
}

/// The rule names and coverage keys `expect.uncovered` may name.
fn known_uncovered(k: &str) -> bool {
    if [
        "lost-writes",
        "stale-reads",
        "watch-continuity",
        "informer",
        "informer-go",
        "lease-exclusive",
        "leader-kept",
        "handover",
        "writes-after-last-step",
        "writes-after-last-hazard",
    ]
    .contains(&k)
    {
        return true;
    }
    if k == "lab-events@end" {
        return true;
    }
    match k.split_once('@') {
        // A lane in a step, a lane quiet (or a watch without a stream)
        // too long, or a lane that recorded nothing: the coverage rule's
        // keys (docs/verdict.md).
        Some((lane, at)) => {
            crate::verdict::criteria::is_lane_pattern(lane)
                && lane.contains('/')
                && (["silence", "none"].contains(&at) || known_step("-", at).is_ok())
        }
        None => false,
    }
}

fn expectations(e: &Expect, s: &Scenario, seeds: &[String]) -> Result<Limits, Problem> {
    for k in e.rules.keys() {
        if !super::RULES.contains(&k.as_str()) && !k.starts_with("slo-") {
            return Err(p(
                format!("expect.rules.{k}"),
                format!(
                    "not a rule of the verdict ({}, or slo-*)",
                    super::RULES.join(", ")
                ),
            ));
        }
    }
    let mut downtime = BTreeMap::new();
    for (k, v) in &e.downtime {
        let f = format!("expect.downtime.{k}");
        if !known_probe(k) {
            return Err(p(
                f,
                "not a probe: readyz, get, list, write, watch, informer (optionally /new or /reused), or overall",
            ));
        }
        downtime.insert(k.clone(), time(&f, v)?);
    }
    for k in e.failed_requests.keys() {
        if !known_probe(k) {
            return Err(p(
                format!("expect.failed_requests.{k}"),
                "not a probe: readyz, get, list, write, watch, informer (optionally /new or /reused), or overall",
            ));
        }
    }
    let mut p99 = BTreeMap::new();
    for (step, kinds) in &e.p99 {
        let f = format!("expect.p99.{step}");
        if step != "outside" && step != "ExternalDriver" {
            known_step(&f, step)?;
        }
        for (kind, v) in kinds {
            let fk = format!("{f}.{kind}");
            if !["get", "list", "write", "watch_delay"].contains(&kind.as_str()) {
                return Err(p(fk, "one of get, list, write, watch_delay"));
            }
            p99.insert((step.clone(), kind.clone()), time(&fk, v)?);
        }
    }
    for (k, v) in &e.slo {
        let f = format!("expect.slo.{k}");
        if ![
            "read_p99",
            "list_p99",
            "mutation_p99",
            "watch_delay_p99",
            "watch_grace",
        ]
        .contains(&k.as_str())
        {
            return Err(p(
                f,
                "one of read_p99, list_p99, mutation_p99, watch_delay_p99, watch_grace",
            ));
        }
        time(&f, v)?;
    }
    let excuse = excuses(e.excuse.as_ref())?;
    let stall = match &e.stall {
        Some(v) => {
            let d = time("expect.stall", v)?;
            if d.is_zero() {
                return Err(p("expect.stall", "a duration above zero"));
            }
            Some(d)
        }
        None => None,
    };
    for (k, why) in &e.uncovered {
        let f = format!("expect.uncovered.{k}");
        if !known_uncovered(k) {
            return Err(p(
                f,
                "a lane in a step (`write/new@MigrateDNSRecords`), a lane with `@silence` or `@none`, lab-events@end, writes-after-last-step, writes-after-last-hazard, or a rule: lost-writes, stale-reads, watch-continuity, informer",
            ));
        }
        if why.trim().is_empty() {
            return Err(p(f, "say why it is not covered"));
        }
    }
    if let (Some(o), None) = (e.migration, &s.migration) {
        if o != MigrationOutcome::Refused {
            return Err(p(
                "expect.migration",
                format!("`{}`: this scenario has no `migration`", o.as_str()),
            ));
        }
    }
    if let Some(end) = &e.end {
        if let Some(sv) = &end.serving {
            if !seeds.contains(sv) {
                return Err(p(
                    "expect.end.serving",
                    format!("`{sv}` is not a seed of this lab ({})", seeds.join(", ")),
                ));
            }
        }
        for k in end.voters.keys() {
            if !seeds.contains(k) {
                return Err(p(
                    format!("expect.end.voters.{k}"),
                    format!("`{k}` is not a seed of this lab ({})", seeds.join(", ")),
                ));
            }
        }
        for (k, v) in &end.conditions {
            known_step(&format!("expect.end.conditions.{k}"), k)?;
            if !["True", "False", "Unknown"].contains(&v.as_str()) {
                return Err(p(
                    format!("expect.end.conditions.{k}"),
                    format!("`{v}`: a condition is True, False or Unknown"),
                ));
            }
        }
    }
    Ok((downtime, p99, excuse, stall))
}
