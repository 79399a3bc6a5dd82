//! `cpmlab link`: shape, partition and heal the links between the lab's
//! networks (applied in the wan router).

use std::path::Path;

use anyhow::Result;
use clap::Subcommand;

use crate::{check_name, print_json, LabArgs, Output};
use cpmlab_core::errors::BadInput;

#[derive(Subcommand, Debug)]
pub enum LinkCommand {
    /// Set delay, jitter, loss and rate on a link, e.g. `seed-a:seed-b --delay 25ms`.
    Set {
        /// Two networks: seed-a:seed-b, clients:seed-a, clients:seed-b.
        pair: String,
        /// One-way delay (25ms, 1.5ms, 500us, 0).
        #[arg(long, default_value = "0", allow_hyphen_values = true)]
        delay: String,
        /// Jitter around the delay.
        #[arg(long, default_value = "0", allow_hyphen_values = true)]
        jitter: String,
        /// Distribution of the jitter.
        #[arg(long, value_enum, default_value = "normal")]
        distribution: cpmlab_lab::link::profile::Distribution,
        /// Packet loss (0.5%).
        #[arg(long, default_value = "0%", allow_hyphen_values = true)]
        loss: String,
        /// Who drops the lost packets: the shaper (the delay line's own
        /// draw, or netem's), or the kernel on the router's forward path
        /// (iptables' statistic match, per packet the delay line hands
        /// back): a second, independent way to lose packets.
        #[arg(long, value_enum, default_value = "shaper")]
        loss_by: cpmlab_lab::link::profile::LossBy,
        /// Rate limit (100mbit, 1gbit).
        #[arg(long, allow_hyphen_values = true)]
        rate: Option<String>,
        #[arg(long, value_enum, default_value = "both")]
        direction: cpmlab_lab::link::profile::Direction,
        #[arg(long, value_enum, default_value = "auto")]
        backend: cpmlab_lab::link::BackendChoice,
        /// Seed the delay line's loss and jitter draws: the same seed gives
        /// the same packets the same fates (setting it again starts over).
        #[arg(long)]
        seed: Option<u64>,
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Replay a link trace (CSV or NDJSON: offset_ms, delay_ms, jitter_ms,
    /// loss_pct, partition) into a link, both directions, from now; the
    /// delay line follows it on its own clock. `link clear` ends it.
    Replay {
        /// The trace file.
        trace: std::path::PathBuf,
        /// The link: seed-a:seed-b, clients:seed-a, ...
        #[arg(long, default_value = "seed-a:seed-b")]
        between: String,
        #[arg(long)]
        seed: Option<u64>,
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Drop everything on a link (works on every kernel).
    Partition {
        pair: String,
        #[arg(long, value_enum, default_value = "both")]
        direction: cpmlab_lab::link::profile::Direction,
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Undo a partition (shaping stays as set).
    Heal {
        pair: String,
        #[arg(long, value_enum, default_value = "both")]
        direction: cpmlab_lab::link::profile::Direction,
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Remove every profile and partition (or those of one pair).
    Clear {
        pair: Option<String>,
        #[arg(long, value_enum, default_value = "auto")]
        backend: cpmlab_lab::link::BackendChoice,
        #[command(flatten)]
        lab: LabArgs,
    },
    /// The profile in force per directed pair, and the backend.
    Show {
        #[command(flatten)]
        lab: LabArgs,
    },
}

pub async fn run(state_root: &Path, command: LinkCommand) -> Result<u8> {
    use cpmlab_lab::link::profile::{self, key, Direction, LinkProfile, Pair};
    use cpmlab_lab::link::{apply, view, BackendChoice};

    let lab = match &command {
        LinkCommand::Set { lab, .. }
        | LinkCommand::Replay { lab, .. }
        | LinkCommand::Partition { lab, .. }
        | LinkCommand::Heal { lab, .. }
        | LinkCommand::Clear { lab, .. }
        | LinkCommand::Show { lab } => lab.clone(),
    };
    check_name(&lab.name)?;
    let (dir, mut state) = cpmlab_lab::status::load_lab(state_root, &lab.name)?;
    let nets: Vec<String> = state.networks.iter().map(|n| n.name.clone()).collect();
    let mut links = state.links.clone();
    let mut edit = |pair: &str, dir: Direction, f: &dyn Fn(&mut LinkProfile)| -> Result<()> {
        let pair = Pair::parse(pair, &nets)?;
        for (a, b) in pair.directed(dir) {
            let p = links.entry(key(&a, &b)).or_default();
            f(p);
        }
        Ok(())
    };
    let mut link_seed = state.link_seed;
    let mut replay = state.link_replay.clone();
    let new_seed = |s: &Option<u64>| {
        s.map(|seed| cpmlab_lab::link::LinkSeed {
            seed,
            epoch: cpmlab_probe::clock::now_unix_ms() as u64,
        })
    };
    // Every input is checked before anything changes.
    let backend_choice = match &command {
        LinkCommand::Set {
            pair,
            delay,
            jitter,
            distribution,
            loss,
            loss_by,
            rate,
            direction,
            backend,
            seed,
            ..
        } => {
            if seed.is_some() {
                link_seed = new_seed(seed);
            }
            let new = LinkProfile {
                delay: profile::parse_duration("--delay", delay)?,
                jitter: profile::parse_duration("--jitter", jitter)?,
                distribution: *distribution,
                loss_pct: profile::parse_percent("--loss", loss)?,
                loss_by: *loss_by,
                rate_bps: rate
                    .as_deref()
                    .map(|r| profile::parse_rate("--rate", r))
                    .transpose()?,
                partition: false,
            };
            if new.jitter > new.delay {
                return Err(BadInput(format!(
                    "--jitter {jitter} is larger than --delay {delay}: packets cannot leave before they arrive"
                ))
                .into());
            }
            edit(pair, *direction, &|p| {
                *p = LinkProfile {
                    partition: p.partition,
                    ..new
                }
            })?;
            *backend
        }
        LinkCommand::Replay {
            trace,
            between,
            seed,
            ..
        } => {
            let t = cpmlab_runner::scenario::trace::load(trace)?;
            if t.changes.len() > cpmlab_lab::link::MAX_REPLAY_CHANGES {
                return Err(BadInput(format!(
                    "{}: {} changes; the delay line takes at most {} (resample the trace)",
                    trace.display(),
                    t.changes.len(),
                    cpmlab_lab::link::MAX_REPLAY_CHANGES
                ))
                .into());
            }
            let pair = Pair::parse(between, &nets)?;
            if seed.is_some() {
                link_seed = new_seed(seed);
            }
            replay = Some(cpmlab_lab::link::Replay {
                start_unix_ms: cpmlab_probe::clock::now_unix_ms() + 300.0,
                links: pair
                    .directed(Direction::Both)
                    .into_iter()
                    .map(|(a, b)| key(&a, &b))
                    .collect(),
                changes: t
                    .changes
                    .iter()
                    .map(|c| (c.offset.as_micros() as u64, c.profile))
                    .collect(),
            });
            // Only the delay line follows a trace on its own clock.
            BackendChoice::Delayline
        }
        LinkCommand::Partition {
            pair, direction, ..
        } => {
            edit(pair, *direction, &|p| p.partition = true)?;
            BackendChoice::Auto
        }
        LinkCommand::Heal {
            pair, direction, ..
        } => {
            edit(pair, *direction, &|p| p.partition = false)?;
            BackendChoice::Auto
        }
        LinkCommand::Clear { pair, backend, .. } => {
            match pair {
                Some(pair) => edit(pair, Direction::Both, &|p| *p = LinkProfile::default())?,
                None => {
                    links.clear();
                    replay = None;
                }
            }
            *backend
        }
        LinkCommand::Show { .. } => BackendChoice::Auto,
    };
    links.retain(|_, p| !p.is_clear());
    // Shaping stays with the backend that put it in force unless forced.
    let backend = match (backend_choice, state.link_backend) {
        (BackendChoice::Auto, Some(b)) => b,
        (choice, _) => cpmlab_lab::link::choose_backend(choice),
    };
    if !matches!(command, LinkCommand::Show { .. }) {
        let provider = cpmlab_runner::provider::for_lab(&state).await?;
        let renew = link_seed != state.link_seed || replay != state.link_replay;
        let mut next = state.clone();
        next.link_seed = link_seed;
        next.link_replay = replay.clone();
        apply(provider.as_ref(), &next, &links, backend, renew).await?;
        // A change while probes run is an event on the run's timeline.
        if let Some(run) = &state.probe_run {
            let what = std::env::args().skip(2).collect::<Vec<_>>().join(" ");
            let _ = cpmlab_probe::run::append_event(
                run,
                &cpmlab_probe::record::LabEvent {
                    at_unix_ms: cpmlab_probe::clock::now_unix_ms(),
                    end_unix_ms: None,
                    kind: "link".into(),
                    name: format!("link {what}"),
                    detail: String::new(),
                    status: None,
                },
            );
        }
        let link_backend =
            (links.values().any(|p| p.shapes()) || replay.is_some()).then_some(backend);
        state = dir.update(|s| {
            s.link_backend = link_backend;
            s.links = links;
            s.link_seed = link_seed;
            s.link_replay = replay;
        })?;
    }
    let views = view(&state);
    match lab.output {
        Output::Json => print_json(&serde_json::json!({
            "lab": state.name, "backend": backend.as_str(), "links": views,
            "seed": state.link_seed.map(|s| s.seed),
            "replay": state.link_replay.as_ref().map(|r| r.summary(cpmlab_probe::clock::now_unix_ms())),
        })),
        Output::Text => {
            println!("backend: {}", backend.as_str());
            if let Some(s) = state.link_seed {
                println!("seed: {} (loss and jitter draws replay with it)", s.seed);
            }
            if let Some(r) = &state.link_replay {
                println!(
                    "replay: {} (the trace drives these links, not the table below)",
                    r.summary(cpmlab_probe::clock::now_unix_ms())
                );
            }
            for v in views {
                println!("  {:>8} -> {:<8} {}", v.from, v.to, v.summary);
            }
        }
    }
    Ok(0)
}
