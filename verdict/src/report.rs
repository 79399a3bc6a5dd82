//! The verdict as one self-contained HTML page: header, an SVG timeline of
//! every probe lane (outcome, answering seed, latency) and of every
//! leader-election candidate (when it believed it led) under the lab's
//! phase and fault bands, and the tables behind the verdict. No scripts,
//! no external assets; hover titles give details.
//!
//! The timeline is drawn in pixel buckets: each request covers the pixels
//! from its start to its end, the worst outcome in a pixel wins, and runs of
//! equal pixels become one rect. So the file stays small for any number of
//! records, and a single failed request is never hidden by its neighbours.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::availability::{merge_intervals, retried, unavailable_intervals, Classify};
use super::{
    escape_xml as esc, lane_key, outcome_name, Hazard, Interval, Latency, RuleStatus, Verdict,
};
use crate::record::{ConnMode, LabEvent, Outcome, ProbeKind, Record};

/// SVG width and the plot area in it (one bucket per pixel).
const SVG_W: usize = 1360;
const LEFT: usize = 120;
const PLOT_W: usize = SVG_W - LEFT - 16;
const LABEL_ROW_H: usize = 14;
const MAX_LABEL_ROWS: usize = 6;
const OUTCOME_H: usize = 14;
const SEED_H: usize = 5;
const EVENTS_H: usize = 5;
const LAT_H: usize = 34;
const LANE_GAP: usize = 9;
/// A candidate's lane: its leading bar, then a row of failed lock requests.
const LEASE_BAR_H: usize = 12;
const LEASE_H: usize = 24;
const AXIS_H: usize = 22;
/// The machine's CPU lane.
const CPU_H: usize = 24;
const CPU_COLOR: &str = "#8a9bb0";
const CPU_SATURATED_COLOR: &str = "#c0392b";
/// Hover titles on failure runs only while a lane has at most this many runs.
const MAX_TITLED_RUNS: usize = 300;
/// Lab events listed in the table at the end.
const MAX_EVENT_ROWS: usize = 500;

const OUTCOMES: [Outcome; 9] = [
    Outcome::Ok,
    Outcome::Http,
    Outcome::Decode,
    Outcome::Error,
    Outcome::Dns,
    Outcome::Tls,
    Outcome::Reset,
    Outcome::Refused,
    Outcome::Timeout,
];

/// Higher is worse; a pixel shows its worst: 0 ok, 1 excused, then the
/// failed outcomes in `OUTCOMES` order (a stall as a timeout).
fn severity(o: Outcome) -> u8 {
    match o {
        Outcome::Ok => 0,
        o => OUTCOMES.iter().position(|x| *x == o).unwrap() as u8 + 1,
    }
}

/// A failed request a known hazard excused.
const EXCUSED_SEV: u8 = 1;
pub const EXCUSED_COLOR: &str = "#9b59b6";
const HAZARD_BAND_COLOR: &str = "#d89000";

/// The colour and name of a severity.
fn sev_look(sev: u8) -> (&'static str, &'static str) {
    match sev {
        0 => (outcome_color(Outcome::Ok), "ok"),
        EXCUSED_SEV => (EXCUSED_COLOR, "excused"),
        k => {
            let o = OUTCOMES[(k - 1) as usize];
            (outcome_color(o), outcome_name(o))
        }
    }
}

fn outcome_color(o: Outcome) -> &'static str {
    match o {
        Outcome::Ok => "#2ca02c",
        Outcome::Http => "#ff8c00",
        Outcome::Decode => "#d2691e",
        Outcome::Error => "#ffb000",
        Outcome::Dns => "#a0522d",
        Outcome::Tls => "#c71585",
        Outcome::Reset => "#ff4500",
        Outcome::Refused => "#b22222",
        Outcome::Timeout => "#e0001b",
    }
}

const SEED_COLORS: [&str; 8] = [
    "#1f77b4", "#9467bd", "#17becf", "#bcbd22", "#8c564b", "#e377c2", "#7f7f7f", "#393b79",
];
const MIXED_SEED: &str = "#c0c0c0";
const LATENCY_COLOR: &str = "#333333";
const SLO_COLOR: &str = "#d62728";
const WATCH_EVENT_COLOR: &str = "#1f77b4";
const WATCH_ERROR_COLOR: &str = "#e0001b";
const ANOMALY_COLOR: &str = "#000000";
/// Leading bars of a candidate whose seed is unknown.
const LEADER_COLOR: &str = "#4e79a7";
const PAUSED_COLOR: &str = "#b0b0b0";
const PLANNED_LOSS_COLOR: &str = "#777777";

fn band_color(kind: &str, i: usize) -> (&'static str, f64) {
    match kind {
        "phase" => (["#4e79a7", "#59a14f", "#b07aa1", "#76b7b2"][i % 4], 0.12),
        "fault" => ("#e15759", 0.20),
        "link" => ("#f28e2b", 0.18),
        "hazard" => (HAZARD_BAND_COLOR, 0.16),
        "handoff" => ("#bab0ac", 0.22),
        _ => ("#999999", 0.15),
    }
}

/// Time → pixel mapping of the plot area.
/// Rows for the timeline's event labels: each label in the first row free
/// where it starts (a label is as wide as its text, a band at least as wide
/// as itself). Past [`MAX_LABEL_ROWS`] a band or line still goes in the row
/// that frees up first, without its text (its tooltip names it), so no
/// label is printed over another. Returns the placements (row, event,
/// labelled) and the rows used.
fn place_labels<'a>(
    events: &[&'a LabEvent],
    sc: &Scale,
    t0: f64,
    t1: f64,
) -> (Vec<(usize, &'a LabEvent, bool)>, usize) {
    let mut row_end: Vec<f64> = Vec::new();
    let mut placed = Vec::new();
    for e in events {
        let end = e.end_unix_ms.unwrap_or(e.at_unix_ms);
        if end < t0 || e.at_unix_ms > t1 {
            continue;
        }
        let x0 = sc.x(e.at_unix_ms);
        let text_w = 6.3 * e.name.chars().count() as f64 + 8.0;
        let x1 = (x0 + text_w).max(sc.x(end));
        let (row, labelled) = match row_end.iter().position(|re| *re <= x0) {
            Some(i) => (i, true),
            None if row_end.len() < MAX_LABEL_ROWS => {
                row_end.push(0.0);
                (row_end.len() - 1, true)
            }
            None => (
                (0..row_end.len())
                    .min_by(|a, b| row_end[*a].total_cmp(&row_end[*b]))
                    .expect("rows exist"),
                false,
            ),
        };
        if labelled {
            row_end[row] = x1;
        } else {
            row_end[row] = row_end[row].max(sc.x(end));
        }
        placed.push((row, *e, labelled));
    }
    (placed, row_end.len().max(1))
}

struct Scale {
    t0: f64,
    t1: f64,
}

impl Scale {
    fn frac(&self, t: f64) -> f64 {
        (t - self.t0) / (self.t1 - self.t0)
    }
    /// x coordinate in the SVG, clamped to the plot.
    fn x(&self, t: f64) -> f64 {
        LEFT as f64 + self.frac(t).clamp(0.0, 1.0) * PLOT_W as f64
    }
    fn bucket(&self, t: f64) -> usize {
        ((self.frac(t) * PLOT_W as f64).floor().max(0.0) as usize).min(PLOT_W - 1)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum SeedPx {
    None,
    One(usize),
    Mixed,
}

/// One lane's pixel buckets.
struct Lane {
    probe: ProbeKind,
    worst: Vec<Option<u8>>,
    seed: Vec<SeedPx>,
    lat_max: Vec<f64>,
    /// Watch only: 1 = events received, 2 = an ERROR event among them.
    events: Vec<u8>,
    requests: u64,
    watch_events: u64,
    /// The latency line bridges gaps up to this many pixels.
    hold_px: usize,
}

impl Lane {
    fn new(probe: ProbeKind) -> Self {
        Lane {
            probe,
            worst: vec![None; PLOT_W],
            seed: vec![SeedPx::None; PLOT_W],
            lat_max: vec![f64::NAN; PLOT_W],
            events: vec![0; PLOT_W],
            requests: 0,
            watch_events: 0,
            hold_px: 0,
        }
    }
    fn height(&self) -> usize {
        OUTCOME_H + SEED_H + if has_events(self.probe) { EVENTS_H } else { 0 } + LAT_H
    }
}

/// Lanes with an events strip: the watch and the informers.
fn has_events(p: ProbeKind) -> bool {
    matches!(
        p,
        ProbeKind::Watch | ProbeKind::Informer | ProbeKind::InformerGo
    )
}

/// A unix-ms time as `YYYY-MM-DD hh:mm:ss.mmm UTC`.
pub fn fmt_utc(ms: f64) -> String {
    let ns = (ms * 1e6) as i128;
    match time::OffsetDateTime::from_unix_timestamp_nanos(ns) {
        Ok(t) => {
            let d = t.date();
            format!(
                "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03} UTC",
                d.year(),
                d.month() as u8,
                d.day(),
                t.hour(),
                t.minute(),
                t.second(),
                t.millisecond()
            )
        }
        Err(_) => format!("{ms} ms"),
    }
}

/// Time since the window start, for titles and tables.
fn rel(ms: f64, t0: f64) -> String {
    format!("+{:.3} s", (ms - t0) / 1000.0)
}

fn ms(v: f64) -> String {
    if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn lat_cells(l: &Option<Latency>) -> String {
    match l {
        Some(l) => format!(
            "<td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            l.count,
            ms(l.p50_ms),
            ms(l.p99_ms),
            ms(l.max_ms)
        ),
        None => "<td>0</td><td>–</td><td>–</td><td>–</td>".into(),
    }
}

/// The time axis' most gaps between ticks (so at most 13 ticks):
/// [`tick_step`] picks its step for it, and the axis stops there. The cap
/// is what bounds the axis where `t0 + k * step` cannot leave `t0`: times a
/// damaged file puts near 1e32 ms, where one float step is ~2e16 ms,
/// would otherwise add ticks ~1e15 times over (the report hung, filling
/// memory). A sane span never reaches it: its step leaves at most 12 gaps.
const MAX_TICK_GAPS: f64 = 12.0;

/// The latency axis' highest top decade (log10 ms: 1e12 ms, ~31 years): no
/// request of a run takes that long, and a damaged record's 1e300 ms would
/// otherwise draw 300 decades, whose labels overflow (`10u64.pow`).
const MAX_LAT_DEC: f64 = 12.0;

/// Axis tick step: the smallest "nice" step giving at most
/// [`MAX_TICK_GAPS`] gaps between ticks.
fn tick_step(span_ms: f64) -> f64 {
    const STEPS: [f64; 20] = [
        10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1e3, 2e3, 5e3, 10e3, 15e3, 30e3, 60e3, 120e3, 300e3,
        600e3, 900e3, 1800e3, 3600e3, 7200e3,
    ];
    STEPS
        .iter()
        .copied()
        .find(|s| span_ms / s <= MAX_TICK_GAPS)
        .unwrap_or(span_ms / MAX_TICK_GAPS)
}

fn tick_label(off_ms: f64, step: f64) -> String {
    if step < 1000.0 {
        format!("+{:.1} s", off_ms / 1000.0)
    } else if off_ms >= 120_000.0 {
        let s = (off_ms / 1000.0).round() as u64;
        format!("+{}:{:02}", s / 60, s % 60)
    } else {
        format!("+{:.0} s", off_ms / 1000.0)
    }
}

/// Render the report page: the header, the legend, the timeline, then the
/// tables behind the verdict, in this order.
pub fn html(
    v: &Verdict,
    records: &[Record],
    events: &[LabEvent],
    etcd: &[super::context::EtcdSample],
    said: &[super::etcd_said::Finding],
    cpu: &[super::context::CpuSample],
    title: &str,
) -> String {
    let tl = Timeline::new(v, records, events);
    let t0 = tl.sc.t0;
    let x = |t| tl.sc.x(t);
    [
        head_section(v, title),
        summary_section(v, events),
        legend_section(v, &tl),
        timeline_section(v, &tl, cpu),
        probes_section(v),
        rules_section(v),
        informers_section(v),
        lease_section(v, t0),
        excused_section(v, t0),
        drained_readyz_section(v, t0),
        coverage_section(v, t0),
        phases_section(v, t0),
        ledger_watch_section(v),
        validator_section(v),
        super::context::section(v, events, etcd, said, t0, &x, SVG_W),
        super::context::said_section(said, cpu, t0),
        super::size::section(events, etcd, t0, &x, SVG_W),
        lab_events_section(events, &tl.shown_events, t0),
        "</body></html>\n".to_string(),
    ]
    .concat()
}

/// A probe lane: the probe and its connection mode.
type LaneKey = (ProbeKind, ConnMode);

/// A seed's colour, by its place in the seeds' name order.
fn seed_color(id: usize) -> &'static str {
    SEED_COLORS[id % SEED_COLORS.len()]
}

/// What the timeline draws, bucketed once: the records in start order,
/// the time axis, each seed's colour, each lane's pixels, the overall
/// unavailability and the lab's events.
struct Timeline<'a> {
    sorted: Vec<&'a Record>,
    sc: Scale,
    /// Seeds, in name order, each its color.
    seed_ids: BTreeMap<&'a str, usize>,
    lanes: BTreeMap<LaneKey, Lane>,
    /// The latency axis' top decade (log10 ms).
    lat_hi_dec: f64,
    /// The union of the lanes' unavailable intervals.
    overall: Vec<Interval>,
    /// Failed requests no known hazard excused: (start, end).
    unexcused: Vec<(f64, f64)>,
    /// The known hazards' windows, drawn as bands.
    hazard_bands: Vec<LabEvent>,
    /// The lab's events but the settings, in time order.
    shown_events: Vec<&'a LabEvent>,
}

impl<'a> Timeline<'a> {
    fn new(v: &Verdict, records: &'a [Record], events: &'a [LabEvent]) -> Self {
        let mut sorted: Vec<&Record> = records.iter().collect();
        sorted.sort_by(|a, b| {
            a.start_unix_ms
                .total_cmp(&b.start_unix_ms)
                .then(a.seq.cmp(&b.seq))
        });
        // The time axis: the window, stretched to the end of the last request.
        let t0 = sorted
            .first()
            .map_or(v.window.start_unix_ms, |r| r.start_unix_ms);
        let mut t1 = sorted
            .iter()
            .map(|r| r.start_unix_ms + r.duration_ms.max(0.0))
            .fold(v.window.end_unix_ms, f64::max);
        if sorted.is_empty() {
            t1 = t0;
        }
        if t1 - t0 < 1.0 {
            t1 = t0 + 1.0;
        }
        let sc = Scale { t0, t1 };

        // Seeds, in name order, each its color.
        let seeds: BTreeSet<&str> = sorted.iter().filter_map(|r| r.seed.as_deref()).collect();
        let seed_ids: BTreeMap<&str, usize> =
            seeds.iter().enumerate().map(|(i, s)| (*s, i)).collect();

        // Requests per lane, in start order.
        let mut per_lane: BTreeMap<LaneKey, Vec<&Record>> = BTreeMap::new();
        // As the verdict judges them: a refused attempt that was retried is not
        // a request of its own, nor is a superseded write; a stall failed.
        let retried = retried(&sorted);
        let classify = Classify::new(&sorted, v.criteria.stall_ms)
            .with_drained_readyz(v.drained_readyz.iter().map(|d| d.seq));
        let excused = super::excuse::excused_seqs(&v.excuses);
        for r in sorted
            .iter()
            .filter(|r| super::is_request(r) && !retried.contains(&r.seq) && !classify.set_aside(r))
        {
            per_lane.entry((r.probe, r.mode)).or_default().push(r);
        }

        let (mut lanes, max_lat) =
            bucket_requests(v, &per_lane, &sc, &classify, &excused, &seed_ids);
        bucket_watch_events(&mut lanes, &sorted, &retried, &sc);
        // Latency axis: log10 from 1 ms to the decade above the slowest request
        // (at least 1 s, so that the SLO line is on it; at most
        // `MAX_LAT_DEC`, above it a latency is drawn at the top).
        let lat_hi_dec = max_lat.log10().ceil().clamp(3.0, MAX_LAT_DEC);

        // Overall unavailability: the union of the lanes' intervals.
        let overall: Vec<Interval> = merge_intervals(
            per_lane
                .values()
                .flat_map(|rs| unavailable_intervals(rs, &classify))
                .collect(),
        );
        // An interval whose every failed request was excused is drawn in the
        // excused colour; one with any other failure in the failure colour.
        let unexcused: Vec<(f64, f64)> = per_lane
            .values()
            .flatten()
            .filter(|r| classify.failed(r) && !excused.contains_key(&r.seq))
            .map(|r| (r.start_unix_ms, r.start_unix_ms + r.duration_ms.max(0.0)))
            .collect();

        // Label rows above the lanes for bands and instant events; the known
        // hazards' windows are bands of their own.
        let hazard_bands: Vec<LabEvent> = v
            .excuses
            .windows
            .iter()
            .map(|w| LabEvent {
                at_unix_ms: w.start_unix_ms,
                end_unix_ms: Some(w.end_unix_ms.max(w.start_unix_ms + 1.0)),
                kind: "hazard".into(),
                name: w.hazard.name().into(),
                detail: w.what.clone(),
                status: None,
            })
            .collect();
        // The gaps between consecutive steps: the gardenlets' hand-offs.
        let hazard_bands: Vec<LabEvent> = hazard_bands
            .into_iter()
            .chain(crate::handoff::bands(events))
            .collect();
        // What ran is said in the header, not drawn.
        let mut shown_events: Vec<&LabEvent> = events
            .iter()
            .filter(|e| e.kind != crate::record::SETTINGS_EVENT)
            .collect();
        shown_events.sort_by(|a, b| a.at_unix_ms.total_cmp(&b.at_unix_ms));

        Timeline {
            sorted,
            sc,
            seed_ids,
            lanes,
            lat_hi_dec,
            overall,
            unexcused,
            hazard_bands,
            shown_events,
        }
    }

    /// The bands and instant events drawn: the lab's and the hazards', in
    /// time order.
    fn timeline_events(&self) -> Vec<&LabEvent> {
        let mut timeline_events: Vec<&LabEvent> = self
            .shown_events
            .iter()
            .copied()
            .chain(self.hazard_bands.iter())
            .collect();
        timeline_events.sort_by(|a, b| a.at_unix_ms.total_cmp(&b.at_unix_ms));
        timeline_events
    }
}

/// Buckets every request into its lane. A request stands for its lane until
/// the next request starts (as in the unavailable intervals), for at most
/// three typical gaps, so a steady probe draws a continuous strip and a
/// stalled one leaves a hole. Returns the lanes and the slowest successful
/// request's latency (at least 1 ms).
fn bucket_requests(
    v: &Verdict,
    per_lane: &BTreeMap<LaneKey, Vec<&Record>>,
    sc: &Scale,
    classify: &Classify,
    excused: &BTreeMap<u64, Hazard>,
    seed_ids: &BTreeMap<&str, usize>,
) -> (BTreeMap<LaneKey, Lane>, f64) {
    let (t0, t1) = (sc.t0, sc.t1);
    let mut lanes: BTreeMap<LaneKey, Lane> = BTreeMap::new();
    let mut max_lat: f64 = 1.0;
    for (key, rs) in per_lane {
        let lane = lanes.entry(*key).or_insert_with(|| Lane::new(key.0));
        let mut gaps: Vec<f64> = rs
            .windows(2)
            .map(|w| w[1].start_unix_ms - w[0].start_unix_ms)
            .collect();
        gaps.sort_by(f64::total_cmp);
        let watch = has_events(key.0);
        // A watch connect holds until the next connect (or the end): the
        // strip shows the connection state.
        let hold = if watch {
            f64::INFINITY
        } else {
            gaps.get(gaps.len() / 2).map_or(0.0, |g| 3.0 * g)
        };
        lane.hold_px = if hold.is_finite() {
            (hold / (t1 - t0) * PLOT_W as f64).ceil() as usize
        } else {
            0
        };
        for (i, r) in rs.iter().enumerate() {
            lane.requests += 1;
            let b0 = sc.bucket(r.start_unix_ms);
            let b_dur = sc.bucket(r.start_unix_ms + r.duration_ms.max(0.0));
            let b_state = match rs.get(i + 1) {
                // Up to the pixel before the next request's own.
                Some(next) if next.start_unix_ms <= r.start_unix_ms + hold => {
                    sc.bucket(next.start_unix_ms).saturating_sub(1)
                }
                Some(_) => sc.bucket(r.start_unix_ms + hold),
                None if watch => sc.bucket(v.window.end_unix_ms),
                None => b0,
            }
            .max(b0);
            let b1 = b_dur.max(b_state);
            let sev = if !classify.failed(r) {
                0
            } else if excused.contains_key(&r.seq) {
                EXCUSED_SEV
            } else if classify.stalled(r) {
                severity(Outcome::Timeout)
            } else {
                severity(r.outcome)
            };
            for w in &mut lane.worst[b0..=b1] {
                *w = Some(w.map_or(sev, |x| x.max(sev)));
            }
            if let Some(id) = r.seed.as_deref().and_then(|s| seed_ids.get(s)) {
                for px in &mut lane.seed[b0..=b_state] {
                    *px = match *px {
                        SeedPx::None => SeedPx::One(*id),
                        SeedPx::One(x) if x == *id => SeedPx::One(x),
                        _ => SeedPx::Mixed,
                    };
                }
            }
            if r.outcome == Outcome::Ok && r.duration_ms.is_finite() {
                let m = &mut lane.lat_max[b0];
                *m = if m.is_nan() {
                    r.duration_ms
                } else {
                    m.max(r.duration_ms)
                };
                max_lat = max_lat.max(r.duration_ms);
            }
        }
    }
    (lanes, max_lat)
}

/// Watch events: their own strip in the watch and informer lanes; an
/// error, and an informer's re-list, in the error color. The lease
/// candidates have lanes of their own (see [`lease_lanes`]).
fn bucket_watch_events(
    lanes: &mut BTreeMap<LaneKey, Lane>,
    sorted: &[&Record],
    retried: &BTreeSet<u64>,
    sc: &Scale,
) {
    let mut informer_inits: BTreeMap<ProbeKind, u64> = BTreeMap::new();
    for r in sorted.iter().filter(|r| {
        r.probe != ProbeKind::Lease && !super::is_request(r) && !retried.contains(&r.seq)
    }) {
        let lane = lanes
            .entry((r.probe, r.mode))
            .or_insert_with(|| Lane::new(r.probe));
        lane.watch_events += 1;
        let relist = matches!(r.probe, ProbeKind::Informer | ProbeKind::InformerGo)
            && r.event.as_deref() == Some(crate::record::informer_event::INIT)
            && {
                let n = informer_inits.entry(r.probe).or_default();
                *n += 1;
                *n > 1
            };
        let e = if r.event.as_deref() == Some("ERROR") || r.outcome != Outcome::Ok || relist {
            2
        } else {
            1
        };
        let b0 = sc.bucket(r.start_unix_ms);
        lane.events[b0] = lane.events[b0].max(e);
    }
}

/// The doctype, the style sheet and the title with the verdict's badge.
fn head_section(v: &Verdict, title: &str) -> String {
    let mut h = String::new();
    let status = v.status.headline();
    let _ = write!(
        h,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{} – {status}</title>
<style>
body{{font-family:sans-serif;font-size:13px;margin:10px 14px;color:#222}}
h1{{font-size:19px;margin:0 0 4px}} h2{{font-size:15px;margin:18px 0 6px}}
.badge{{display:inline-block;padding:1px 9px;border-radius:4px;color:#fff;font-size:15px;vertical-align:2px}}
.passed{{background:#2a8a2a}} .failed{{background:#c8102e}} .skipped{{background:#888}}
.hazards{{background:#d89000}} .excused{{background:#9b59b6}} .uncovered{{background:#8a5a00}}
.meta{{color:#444;margin:2px 0}} ul.reasons{{margin:4px 0;padding-left:20px;color:#a00}}
.legend{{display:flex;flex-wrap:wrap;gap:4px 14px;margin:6px 0 4px;font-size:12px}}
.sw{{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:-1px;border:1px solid #0002}}
table{{border-collapse:collapse;font-size:12px}} td,th{{border:1px solid #ddd;padding:2px 7px;text-align:right}}
th{{background:#f3f3f3}} td.l,th.l{{text-align:left}} td.msg{{text-align:left;max-width:900px}}
tr.bad td{{background:#fff0f0}} tr.amber td{{background:#fff6e0}}
</style></head><body>
<h1>{} <span class="badge {}">{status}</span></h1>
"#,
        esc(title),
        esc(title),
        match v.status {
            super::Status::Passed => "passed",
            super::Status::PassedWithKnownHazards => "hazards",
            super::Status::Failed => "failed",
        }
    );
    h
}

/// Under the title: the window and the totals, what ran, why the verdict
/// failed and why requests failed.
fn summary_section(v: &Verdict, events: &[LabEvent]) -> String {
    let mut h = String::new();
    let _ = writeln!(
        h,
        r#"<div class="meta">window {} → {} ({:.1} s) · {} requests, {} failed{} · downtime {} ms (longest {} ms), raw · watch: {}</div>"#,
        esc(&fmt_utc(v.window.start_unix_ms)),
        esc(&fmt_utc(v.window.end_unix_ms)),
        v.window.duration_ms() / 1000.0,
        v.overall.requests,
        v.overall.failed(),
        if v.excuses.excused_count > 0 {
            format!(
                " ({} excused as known hazards, {} not)",
                v.excuses.excused_count,
                v.overall.failed().saturating_sub(v.excuses.excused_count)
            )
        } else {
            String::new()
        },
        ms(v.overall.downtime_ms),
        ms(v.overall.longest_unavailable_ms),
        if v.watch.run { "checked" } else { "not run" }
    );
    for e in events
        .iter()
        .filter(|e| e.kind == crate::record::SETTINGS_EVENT)
    {
        let _ = writeln!(
            h,
            r#"<div class="meta"><b>{}:</b> {}</div>"#,
            esc(&e.name),
            esc(&e.detail)
        );
    }
    if !v.reasons.is_empty() {
        h.push_str("<ul class=\"reasons\">\n");
        for r in &v.reasons {
            let _ = writeln!(h, "<li>{}</li>", esc(r));
        }
        h.push_str("</ul>\n");
    }
    if !v.mechanisms.is_empty() || !v.silent_watches.is_empty() {
        h.push_str("<div class=\"meta\"><b>Why requests failed</b>, one line per mechanism (clients, the seed that answered and what, when, in which steps), and the watches that went silent:</div>\n<ul>\n");
        for s in &v.silent_watches {
            let _ = writeln!(h, "<li>{}</li>", esc(&s.line));
        }
        for m in &v.mechanisms {
            let _ = writeln!(
                h,
                "<li>{}{}</li>",
                esc(&m.line),
                m.example
                    .as_deref()
                    .map(|e| format!(" <small>(e.g. {})</small>", esc(e)))
                    .unwrap_or_default()
            );
        }
        h.push_str("</ul>\n");
    }
    h
}

/// The timeline's legend: what each colour, line and band means.
fn legend_section(v: &Verdict, tl: &Timeline) -> String {
    let mut h = String::new();
    h.push_str("<div class=\"legend\">");
    let sw = |color: &str, label: &str| {
        format!(
            r#"<span><span class="sw" style="background:{color}"></span>{}</span>"#,
            esc(label)
        )
    };
    for o in OUTCOMES {
        h.push_str(&sw(outcome_color(o), outcome_name(o)));
    }
    h.push_str(&sw(EXCUSED_COLOR, "failed, excused as a known hazard"));
    for (seed, id) in &tl.seed_ids {
        h.push_str(&sw(seed_color(*id), &format!("seed {seed}")));
    }
    if !tl.seed_ids.is_empty() {
        h.push_str(&sw(MIXED_SEED, "mixed seeds"));
    }
    if tl.lanes.contains_key(&(ProbeKind::Watch, ConnMode::New))
        || tl.lanes.contains_key(&(ProbeKind::Watch, ConnMode::Reused))
    {
        h.push_str(&sw(WATCH_EVENT_COLOR, "watch event"));
        h.push_str(&sw(WATCH_ERROR_COLOR, "watch ERROR event"));
        h.push_str(&sw(
            ANOMALY_COLOR,
            "missed / duplicated / out-of-order event, rv regression",
        ));
    }
    if v.lease.run {
        h.push_str(&sw(
            LEADER_COLOR,
            "candidate believes it leads (bar, in its seed's colour)",
        ));
        h.push_str(&sw(
            WATCH_ERROR_COLOR,
            "two candidates believe they lead at once",
        ));
        h.push_str(&sw(PAUSED_COLOR, "candidate paused by the lab"));
        let _ = write!(
            h,
            r#"<span><svg width="10" height="10"><line x1="5" y1="0" x2="5" y2="10" stroke="{ANOMALY_COLOR}" stroke-width="2"/></svg> leadership lost, not by the lab (grey: after the lab's stop, kill or pause)</span><span><svg width="10" height="10"><circle cx="5" cy="5" r="3" fill="{}"/></svg> failed lock request</span>"#,
            outcome_color(Outcome::Timeout)
        );
    }
    let _ = write!(
        h,
        r#"<span><svg width="22" height="10"><line x1="0" y1="5" x2="22" y2="5" stroke="{LATENCY_COLOR}"/></svg> latency (max per pixel, log)</span>"#
    );
    let _ = write!(
        h,
        r#"<span><svg width="22" height="10"><line x1="0" y1="5" x2="22" y2="5" stroke="{SLO_COLOR}" stroke-dasharray="4,3"/></svg> p99 SLO</span>"#
    );
    let timeline_events = tl.timeline_events();
    let kinds: BTreeSet<&str> = timeline_events
        .iter()
        .filter(|e| e.end_unix_ms.is_some())
        .map(|e| e.kind.as_str())
        .collect();
    for k in kinds {
        let (c, _) = band_color(k, 0);
        h.push_str(&sw(c, &format!("{k} (band)")));
    }
    if timeline_events.iter().any(|e| e.end_unix_ms.is_none()) {
        h.push_str(r##"<span><svg width="22" height="10"><line x1="11" y1="0" x2="11" y2="10" stroke="#444" stroke-dasharray="3,2"/></svg> instant event</span>"##);
    }
    h.push_str("</div>\n<div class=\"meta\" style=\"font-size:11px\">Lanes: outcome (worst per pixel) · answering seed · ");
    h.push_str("watch events (watch lanes; their outcome strip is the connection state) · latency of successful requests. Top lane: union of unavailable intervals.");
    if v.lease.run {
        h.push_str(" Last lanes: one per leader-election candidate, a bar while it believes it leads, failed lock requests as dots below.");
    }
    h.push_str("</div>\n");
    h
}

/// The SVG timeline: the time axis, the lab's bands and events, the overall
/// lane, a lane per probe and mode, the anomalies, a lane per
/// leader-election candidate.
fn timeline_section(v: &Verdict, tl: &Timeline, cpu: &[super::context::CpuSample]) -> String {
    let sc = &tl.sc;
    let (t0, t1) = (sc.t0, sc.t1);
    let timeline_events = tl.timeline_events();
    let (placed, label_rows) = place_labels(&timeline_events, sc, t0, t1);

    // Vertical layout.
    let top_overall = label_rows * LABEL_ROW_H + 4;
    let lanes_top = top_overall + OUTCOME_H + LANE_GAP;
    let mut y = lanes_top;
    let mut lane_y = Vec::new();
    for lane in tl.lanes.values() {
        lane_y.push(y);
        y += lane.height() + LANE_GAP;
    }
    let mut lease_y = Vec::new();
    for _ in &v.lease.candidates {
        lease_y.push(y);
        y += LEASE_H + LANE_GAP;
    }
    let cpu_y = (!cpu.is_empty()).then(|| {
        let at = y;
        y += CPU_H + LANE_GAP;
        at
    });
    let plot_bottom = y - LANE_GAP;
    let svg_h = plot_bottom + AXIS_H;

    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_W}" height="{svg_h}" viewBox="0 0 {SVG_W} {svg_h}" font-family="sans-serif" font-size="11">"#
    );
    s.push('\n');
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{top_overall}" width="{PLOT_W}" height="{}" fill="#fafafa" stroke="#ddd"/>"##,
        plot_bottom - top_overall
    );

    // Axis grid and labels.
    let step = tick_step(t1 - t0);
    let mut k = 0.0;
    // At most `MAX_TICK_GAPS` + 1 ticks, whatever the floats say.
    while k <= MAX_TICK_GAPS && t0 + k * step <= t1 + 1e-9 {
        let x = sc.x(t0 + k * step);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{top_overall}" x2="{x:.1}" y2="{}" stroke="#e4e4e4"/><text x="{x:.1}" y="{}" text-anchor="middle" fill="#555">{}</text>"##,
            plot_bottom + 4,
            plot_bottom + 16,
            esc(&tick_label(k * step, step))
        );
        k += 1.0;
    }

    s.push_str(&bands_svg(&placed, sc, top_overall, plot_bottom));
    s.push_str(&overall_lane_svg(v, tl, top_overall));
    for ((key, lane), y0) in tl.lanes.iter().zip(&lane_y) {
        s.push_str(&lane_svg(v, *key, lane, *y0, sc, tl.lat_hi_dec));
    }
    s.push_str(&anomaly_marks_svg(v, tl, &lane_y));
    s.push_str(&lease_lanes(v, &tl.sorted, sc, &lease_y, &|seed: &str| {
        tl.seed_ids.get(seed).map(|id| seed_color(*id))
    }));
    if let Some(y0) = cpu_y {
        s.push_str(&cpu_lane_svg(cpu, sc, y0, v.criteria.saturation_pct));
    }
    s.push_str("</svg>\n");
    s
}

/// The machine's CPU as a lane: each sample a bar from the sample before
/// it, its height the percent of all cores, in the saturated colour at or
/// above the bound.
fn cpu_lane_svg(cpu: &[super::context::CpuSample], sc: &Scale, y0: usize, bound: f64) -> String {
    let mut samples: Vec<&super::context::CpuSample> = cpu.iter().collect();
    samples.sort_by(|a, b| a.at_unix_ms.total_cmp(&b.at_unix_ms));
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<text x="4" y="{}" font-weight="bold">machine CPU</text><text x="4" y="{}" font-size="9.5" fill="#555">saturated ≥ {bound:.0} %</text><rect x="{LEFT}" y="{y0}" width="{PLOT_W}" height="{CPU_H}" fill="none" stroke="#e4e4e4"/>"##,
        y0 + 11,
        y0 + CPU_H - 2
    );
    for (i, c) in samples.iter().enumerate() {
        let from = if i > 0 {
            samples[i - 1].at_unix_ms
        } else {
            c.at_unix_ms - 2_000.0
        };
        if c.at_unix_ms < sc.t0 || from > sc.t1 {
            continue;
        }
        let (x0, x1) = (sc.x(from.max(sc.t0)), sc.x(c.at_unix_ms.min(sc.t1)));
        let pct = c.machine_busy_pct.clamp(0.0, 100.0);
        let h = (pct / 100.0 * CPU_H as f64).max(1.0);
        let color = if pct >= bound {
            CPU_SATURATED_COLOR
        } else {
            CPU_COLOR
        };
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{color}"><title>{} – {}: the machine {pct:.0} % busy ({} cores)</title></rect>"#,
            y0 as f64 + CPU_H as f64 - h,
            (x1 - x0).max(1.0),
            rel(from, sc.t0),
            rel(c.at_unix_ms, sc.t0),
            c.cores
        );
    }
    s
}

/// Bands and instant events, behind the lanes; labels on top rows.
fn bands_svg(
    placed: &[(usize, &LabEvent, bool)],
    sc: &Scale,
    top_overall: usize,
    plot_bottom: usize,
) -> String {
    let t0 = sc.t0;
    let mut s = String::new();
    let mut phase_i = 0;
    for (row, e, labelled) in placed {
        let ly = row * LABEL_ROW_H;
        let label = if *labelled {
            esc(&e.name)
        } else {
            String::new()
        };
        let (color, opacity) = band_color(&e.kind, phase_i);
        if e.kind == "phase" && e.end_unix_ms.is_some() {
            phase_i += 1;
        }
        let tip = esc(&format!(
            "{} {}: {} – {}{}{}",
            e.kind,
            e.name,
            rel(e.at_unix_ms, t0),
            e.end_unix_ms.map(|x| rel(x, t0)).unwrap_or_default(),
            if e.detail.is_empty() { "" } else { "\n" },
            e.detail
        ));
        let x0 = sc.x(e.at_unix_ms);
        if let Some(end) = e.end_unix_ms {
            let w = (sc.x(end) - x0).max(1.0);
            let _ = writeln!(
                s,
                r##"<g><title>{tip}</title><rect x="{x0:.1}" y="{ly}" width="{w:.1}" height="{}" fill="{color}" fill-opacity="{:.2}"/><rect x="{x0:.1}" y="{top_overall}" width="{w:.1}" height="{}" fill="{color}" fill-opacity="{opacity}"/><text x="{:.1}" y="{}" fill="#222">{}</text></g>"##,
                LABEL_ROW_H - 2,
                (opacity * 2.0).min(0.5),
                plot_bottom - top_overall,
                x0 + 3.0,
                ly + LABEL_ROW_H - 3,
                label
            );
        } else {
            let _ = writeln!(
                s,
                r##"<g><title>{tip}</title><line x1="{x0:.1}" y1="{ly}" x2="{x0:.1}" y2="{plot_bottom}" stroke="#444" stroke-width="1" stroke-dasharray="3,2"/><text x="{:.1}" y="{}" fill="#222">{}</text></g>"##,
                x0 + 3.0,
                ly + LABEL_ROW_H - 3,
                label
            );
        }
    }
    s
}

/// The overall lane: green where any request ran, red where the union of
/// unavailable intervals is.
fn overall_lane_svg(v: &Verdict, tl: &Timeline, top_overall: usize) -> String {
    let sc = &tl.sc;
    let t0 = sc.t0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<text x="4" y="{}" font-weight="bold">overall</text><rect x="{LEFT}" y="{top_overall}" width="{:.1}" height="{OUTCOME_H}" fill="{}" fill-opacity="0.35"/>"##,
        top_overall + OUTCOME_H - 3,
        (sc.x(v.window.end_unix_ms.max(t0)) - LEFT as f64).max(1.0),
        outcome_color(Outcome::Ok)
    );
    // An interval whose every failed request was excused is drawn in the
    // excused colour; one with any other failure in the failure colour.
    for iv in &tl.overall {
        let x0 = sc.x(iv.start_unix_ms);
        let w = (sc.x(iv.end_unix_ms) - x0).max(1.0);
        let all_excused = !tl
            .unexcused
            .iter()
            .any(|(a, b)| *a <= iv.end_unix_ms && *b >= iv.start_unix_ms);
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.1}" y="{top_overall}" width="{w:.1}" height="{OUTCOME_H}" fill="{}"><title>unavailable{} {} – {} ({} ms)</title></rect>"#,
            if all_excused {
                EXCUSED_COLOR
            } else {
                outcome_color(Outcome::Timeout)
            },
            if all_excused {
                " (every failure in it excused as a known hazard)"
            } else {
                ""
            },
            rel(iv.start_unix_ms, t0),
            rel(iv.end_unix_ms, t0),
            ms(iv.duration_ms())
        );
    }
    s
}

/// One probe lane at `y0`: its label and availability, then its outcome,
/// seed, events (watch lanes) and latency strips.
fn lane_svg(
    v: &Verdict,
    key: LaneKey,
    lane: &Lane,
    y0: usize,
    sc: &Scale,
    lat_hi_dec: f64,
) -> String {
    let (t0, t1) = (sc.t0, sc.t1);
    let mut s = String::new();
    let name = lane_key(key.0, key.1);
    let stats = v.probes.get(&name);
    // Label and availability.
    let _ = writeln!(
        s,
        r#"<text x="4" y="{}" font-weight="bold"{}>{}</text>"#,
        y0 + OUTCOME_H - 3,
        // informer-go/reused and the like: narrower, to stay left of
        // the plot.
        if name.chars().count() > 16 {
            r#" font-size="9.5""#
        } else {
            ""
        },
        esc(&name)
    );
    let sub = match stats {
        Some(st) if st.requests > 0 => {
            format!("{:.2}% · {} req", st.availability_pct, st.requests)
        }
        _ if lane.watch_events > 0 => String::new(),
        _ => "no requests".into(),
    };
    let sub2 = match stats {
        Some(st) if st.downtime_ms > 0.0 => format!("down {} ms", ms(st.downtime_ms)),
        _ if lane.probe == ProbeKind::Watch => format!("{} events", lane.watch_events),
        _ if lane.probe == ProbeKind::Informer => {
            format!(
                "{} events, {} relists",
                v.informer.events, v.informer.relists
            )
        }
        _ if lane.probe == ProbeKind::InformerGo => {
            format!(
                "{} events, {} relists",
                v.informer_go.events, v.informer_go.relists
            )
        }
        _ => String::new(),
    };
    let _ = writeln!(
        s,
        r##"<text x="4" y="{}" font-size="9.5" fill="#555">{}</text><text x="4" y="{}" font-size="9.5" fill="#555">{}</text>"##,
        y0 + OUTCOME_H + SEED_H + 11,
        esc(&sub),
        y0 + OUTCOME_H + SEED_H + 22,
        esc(&sub2)
    );

    // Outcome strip: runs of equal worst outcome.
    let runs = runs(&lane.worst);
    let failure_runs = runs.iter().filter(|r| r.2.is_some_and(|x| x > 0)).count();
    for (a, b, w) in &runs {
        let Some(w) = w else { continue };
        let (color, what) = sev_look(*w);
        let _ = write!(
            s,
            r#"<rect x="{}" y="{y0}" width="{}" height="{OUTCOME_H}" fill="{}""#,
            LEFT + a,
            b - a,
            color
        );
        if *w > 0 && failure_runs <= MAX_TITLED_RUNS {
            let ta = t0 + *a as f64 / PLOT_W as f64 * (t1 - t0);
            let tb = t0 + *b as f64 / PLOT_W as f64 * (t1 - t0);
            let _ = writeln!(
                s,
                "><title>{}: {} (worst) {} – {}</title></rect>",
                esc(&name),
                what,
                rel(ta, t0),
                rel(tb, t0)
            );
        } else {
            s.push_str("/>\n");
        }
    }
    // Seed strip.
    let sy = y0 + OUTCOME_H;
    for (a, b, px) in runs_of(&lane.seed) {
        let color = match px {
            SeedPx::None => continue,
            SeedPx::One(id) => seed_color(id),
            SeedPx::Mixed => MIXED_SEED,
        };
        let _ = writeln!(
            s,
            r#"<rect x="{}" y="{sy}" width="{}" height="{}" fill="{color}"/>"#,
            LEFT + a,
            b - a,
            SEED_H - 1
        );
    }
    // Watch events strip.
    let mut ly = sy + SEED_H;
    if has_events(lane.probe) {
        for (a, b, e) in runs_of(&lane.events) {
            let color = match e {
                0 => continue,
                1 => WATCH_EVENT_COLOR,
                _ => WATCH_ERROR_COLOR,
            };
            let _ = writeln!(
                s,
                r#"<rect x="{}" y="{ly}" width="{}" height="{}" fill="{color}" fill-opacity="0.7"/>"#,
                LEFT + a,
                b - a,
                EVENTS_H - 1
            );
        }
        ly += EVENTS_H;
    }
    s.push_str(&latency_strip_svg(v, lane, ly, lat_hi_dec));
    s
}

/// A lane's latency strip at `ly`, log scale from 1 ms to `lat_hi_dec`:
/// the decades, the lane's p99 SLO, the slowest successful request per
/// pixel.
fn latency_strip_svg(v: &Verdict, lane: &Lane, ly: usize, lat_hi_dec: f64) -> String {
    let lat_lo_dec = 0.0;
    let mut s = String::new();
    let lat_y = |l: f64| -> f64 {
        let d = l.max(1.0).log10().clamp(lat_lo_dec, lat_hi_dec);
        (ly + LAT_H) as f64
            - 2.0
            - (d - lat_lo_dec) / (lat_hi_dec - lat_lo_dec) * (LAT_H - 4) as f64
    };
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{ly}" width="{PLOT_W}" height="{LAT_H}" fill="#fff" fill-opacity="0.6" stroke="#eee"/>"##
    );
    let mut dec = lat_lo_dec;
    while dec <= lat_hi_dec {
        let gy = lat_y(10f64.powf(dec));
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{gy:.1}" x2="{}" y2="{gy:.1}" stroke="#eee"/>"##,
            LEFT + PLOT_W
        );
        if (dec as i64) % 2 == 1 {
            let label = match dec as i64 {
                0 => "1ms".to_string(),
                1 => "10ms".into(),
                2 => "100ms".into(),
                d => format!("{}s", 10u64.pow((d - 3) as u32)),
            };
            let _ = write!(
                s,
                r##"<text x="{}" y="{:.1}" font-size="8.5" text-anchor="end" fill="#888">{label}</text>"##,
                LEFT - 3,
                gy + 3.0
            );
        }
        s.push('\n');
        dec += 1.0;
    }
    let slo = match lane.probe {
        ProbeKind::Get => Some(v.thresholds.read_p99_ms),
        ProbeKind::Write | ProbeKind::Load => Some(v.thresholds.mutation_p99_ms),
        _ => None,
    };
    if let Some(slo) = slo {
        let gy = lat_y(slo);
        let _ = writeln!(
            s,
            r#"<line x1="{LEFT}" y1="{gy:.1}" x2="{}" y2="{gy:.1}" stroke="{SLO_COLOR}" stroke-dasharray="4,3" stroke-width="0.8"><title>p99 SLO {} ms</title></line>"#,
            LEFT + PLOT_W,
            ms(slo)
        );
    }
    let mut path = String::new();
    let points: Vec<(usize, f64)> = lane
        .lat_max
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.is_nan())
        .map(|(i, l)| (i, lat_y(*l)))
        .collect();
    let mut seg_len = 0;
    for (k, (i, y)) in points.iter().enumerate() {
        let joined = k > 0 && i - points[k - 1].0 <= lane.hold_px.max(1);
        if !joined {
            if seg_len == 1 {
                // A lone point still shows as a dot.
                path.push_str(" h1");
            }
            seg_len = 0;
        }
        let _ = write!(
            path,
            " {}{}.5 {y:.1}",
            if joined { "L" } else { "M" },
            LEFT + i
        );
        seg_len += 1;
    }
    if seg_len == 1 {
        path.push_str(" h1");
    }
    if !path.is_empty() {
        let _ = writeln!(
            s,
            r#"<path d="{}" fill="none" stroke="{LATENCY_COLOR}" stroke-width="1" stroke-linejoin="round"/>"#,
            path.trim_start()
        );
    }
    s
}

/// Anomalies the verdict found, marked where they happened: missed,
/// duplicated and out-of-order watch events, rv regressions.
fn anomaly_marks_svg(v: &Verdict, tl: &Timeline, lane_y: &[usize]) -> String {
    let mut s = String::new();
    let mode_of = |m: &str| match m {
        "new" => ConnMode::New,
        "keepalive" => ConnMode::Keepalive,
        "node" => ConnMode::Node,
        "late-dns" => ConnMode::LateDns,
        "seed-bound" => ConnMode::SeedBound,
        _ => ConnMode::Reused,
    };
    let mut marks: Vec<(LaneKey, f64, String)> = Vec::new();
    for m in &v.watch.watch_missed {
        marks.push((
            (ProbeKind::Watch, mode_of(&m.mode)),
            m.acked_unix_ms,
            format!(
                "value {} acknowledged but never seen by this watch",
                m.value
            ),
        ));
    }
    for (list, what) in [
        (&v.watch.watch_duplicated, "duplicated"),
        (&v.watch.watch_out_of_order, "out-of-order"),
    ] {
        for a in list {
            marks.push((
                (ProbeKind::Watch, mode_of(&a.mode)),
                a.at_unix_ms,
                format!("{what} event: rv {} (previous {})", a.rv, a.previous_rv),
            ));
        }
    }
    for r in &v.rv_regressions {
        marks.push((
            (ProbeKind::Write, mode_of(&r.mode)),
            r.at_unix_ms,
            format!("rv regression: rv {} after {}", r.rv, r.previous_rv),
        ));
    }
    for (key, at, what) in &marks {
        let Some(i) = tl.lanes.keys().position(|k| k == key) else {
            continue;
        };
        let lane = &tl.lanes[key];
        let x = tl.sc.x(*at);
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="{}" width="3" height="{}" fill="{ANOMALY_COLOR}" stroke="#fff" stroke-width="0.5"><title>{} at {}</title></rect>"##,
            x - 1.5,
            lane_y[i] - 2,
            lane.height() - LAT_H + 4,
            esc(what),
            rel(*at, tl.sc.t0)
        );
    }
    s
}

/// The availability, failures and latency of each probe lane.
fn probes_section(v: &Verdict) -> String {
    let mut h = String::new();
    h.push_str("<h2>Availability per probe</h2>\n<table><tr><th class=\"l\">probe/mode</th><th>requests</th><th>ok</th><th class=\"l\">failures</th><th>excused</th><th>availability %</th><th>downtime ms</th><th>longest ms</th><th>intervals</th><th>ok n</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th></tr>\n");
    let mut rows: Vec<(&String, &super::ProbeStats)> = v.probes.iter().collect();
    rows.sort_by_key(|(k, _)| {
        let (p, m) = k.split_once('/').unwrap_or((k.as_str(), ""));
        (
            ["readyz", "get", "list", "write", "watch"]
                .iter()
                .position(|x| *x == p)
                .unwrap_or(9),
            m.to_string(),
        )
    });
    let overall_key = "overall (union)".to_string();
    let rows = rows
        .into_iter()
        .map(|(k, st)| (k, st, false))
        .chain(std::iter::once((&overall_key, &v.overall, true)));
    for (k, st, is_overall) in rows {
        let fails: Vec<String> = st
            .failures
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect();
        let _ = writeln!(
            h,
            r#"<tr{}><td class="l">{}</td><td>{}</td><td>{}</td><td class="l">{}</td><td>{}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>"#,
            if st.failed() > st.excused {
                " class=\"bad\""
            } else if st.failed() > 0 {
                " class=\"amber\""
            } else {
                ""
            },
            esc(k),
            st.requests,
            st.ok,
            esc(&{
                let mut f = fails.join(", ");
                for (n, what) in [
                    (st.retried, "retried"),
                    (st.superseded, "superseded"),
                    (st.drained_readyz, "drained server's readyz"),
                    (st.watch_ends, "watch ends"),
                ] {
                    if n > 0 {
                        f.push_str(&format!(
                            "{}{what} {n}",
                            if f.is_empty() { "" } else { "; " }
                        ));
                    }
                }
                f
            }),
            st.excused,
            st.availability_pct,
            ms(st.downtime_ms),
            ms(st.longest_unavailable_ms),
            st.unavailable_count,
            if is_overall {
                "<td>–</td><td>–</td><td>–</td><td>–</td>".to_string()
            } else {
                lat_cells(&st.latency)
            }
        );
    }
    h.push_str("</table>\n");
    h
}

/// Each rule of the verdict with its status and message.
fn rules_section(v: &Verdict) -> String {
    let mut h = String::new();
    h.push_str("<h2>Rules</h2>\n<table><tr><th class=\"l\">rule</th><th class=\"l\">result</th><th class=\"l\">detail</th></tr>\n");
    for r in &v.rules {
        let accepted = v.accepted.get(&r.name);
        let (cls, label) = match r.status {
            RuleStatus::Passed => ("passed", "passed"),
            RuleStatus::Excused => ("excused", "EXCUSED"),
            RuleStatus::Failed => ("failed", "FAILED"),
            RuleStatus::NotCovered if accepted.is_some() => ("uncovered", "not covered, accepted"),
            RuleStatus::NotCovered => ("failed", "NOT COVERED"),
            RuleStatus::Degraded if accepted.is_some() => ("uncovered", "degraded, accepted"),
            RuleStatus::Degraded => ("failed", "DEGRADED"),
            RuleStatus::Skipped => ("skipped", "does not apply"),
        };
        let _ = writeln!(
            h,
            r#"<tr{}><td class="l">{}</td><td class="l"><span class="badge {cls}" style="font-size:11px">{label}</span></td><td class="msg">{}{}</td></tr>"#,
            if r.fails(&v.accepted) {
                " class=\"bad\""
            } else if r.by_declaration(&v.accepted) {
                " class=\"amber\""
            } else {
                ""
            },
            esc(&r.name),
            esc(&r.message),
            accepted
                .map(|w| format!("<br><i>accepted by the scenario: {}</i>", esc(w)))
                .unwrap_or_default()
        );
    }
    h.push_str("</table>\n");
    h
}

/// The migration's phases: requests, failures and latency in each.
fn phases_section(v: &Verdict, t0: f64) -> String {
    let mut h = String::new();
    h.push_str("<h2>Latency per phase (successful requests, ms)</h2>\n<table><tr><th class=\"l\">phase</th><th class=\"l\">band</th><th>requests</th><th>failed</th><th>get n</th><th>p50</th><th>p99</th><th>max</th><th>list n</th><th>p50</th><th>p99</th><th>max</th><th>write n</th><th>p50</th><th>p99</th><th>max</th><th class=\"l\">SLO</th></tr>\n");
    for p in &v.phases {
        let band = match (p.start_unix_ms, p.end_unix_ms) {
            (Some(a), Some(b)) => format!("{} – {}", rel(a, t0), rel(b, t0)),
            _ => "outside any phase".into(),
        };
        let slo = |met: Option<bool>, what: &str| match met {
            Some(true) => format!("{what} ok"),
            Some(false) => format!("{what} MISSED"),
            None => format!("{what} –"),
        };
        let bad = p.read_slo_met == Some(false) || p.mutation_slo_met == Some(false);
        let _ = writeln!(
            h,
            r#"<tr{}><td class="l">{}</td><td class="l">{}</td><td>{}</td><td>{}</td>{}{}{}<td class="l">{}, {}</td></tr>"#,
            if bad { " class=\"bad\"" } else { "" },
            esc(&p.name),
            esc(&band),
            p.requests,
            p.failed,
            lat_cells(&p.get),
            lat_cells(&p.list),
            lat_cells(&p.write),
            slo(p.read_slo_met, "read"),
            slo(p.mutation_slo_met, "mutation")
        );
    }
    h.push_str("</table>\n");
    h
}

/// The write ledger and the watch check.
fn ledger_watch_section(v: &Verdict) -> String {
    let mut h = String::new();
    let l = &v.ledger;
    let w = &v.watch;
    let _ = writeln!(
        h,
        r#"<h2>Write ledger and watch</h2>
<table>
<tr><td class="l">acknowledged writes</td><td>{}</td></tr>
<tr><td class="l">highest acknowledged value</td><td>{}</td></tr>
<tr><td class="l">final counter read back</td><td>{}</td></tr>
<tr{}><td class="l">lost writes</td><td>{}</td></tr>
<tr{}><td class="l">ledger conflicts</td><td>{}</td></tr>
<tr{}><td class="l">rv regressions</td><td>{}</td></tr>
<tr><td class="l">watch</td><td>{}</td></tr>
<tr{}><td class="l">watch: missed / duplicated / out of order</td><td>{} / {} / {}</td></tr>
</table>"#,
        l.acknowledged,
        l.max_acknowledged.map_or("–".into(), |x| x.to_string()),
        l.final_counter.map_or("not read".into(), |x| x.to_string()),
        if l.lost_count > 0 {
            " class=\"bad\""
        } else {
            ""
        },
        esc(&list_preview(&l.lost_writes, l.lost_count)),
        if l.ledger_conflicts.is_empty() {
            ""
        } else {
            " class=\"bad\""
        },
        l.ledger_conflicts.len(),
        if v.rv_regression_count > 0 {
            " class=\"bad\""
        } else {
            ""
        },
        v.rv_regression_count,
        if w.run {
            esc(&format!(
                "modes {}: {} events, {} connects, {} writes expected",
                w.modes.join(", "),
                w.events,
                w.connects,
                w.expected
            ))
        } else {
            "not run (no watch records)".into()
        },
        if w.missed_count + w.duplicated_count + w.out_of_order_count > 0 {
            " class=\"bad\""
        } else {
            ""
        },
        w.missed_count,
        w.duplicated_count,
        w.out_of_order_count,
    );
    h
}

/// What Gardener's zero-downtime validator would have said.
fn validator_section(v: &Verdict) -> String {
    let mut h = String::new();
    let vs = &v.validator;
    let _ = writeln!(
        h,
        r#"<h2>Gardener's zero-downtime validator (simulated)</h2>
<p>Curling /healthz every {:.0} s and failing after 3 consecutive failures, it would have <b>{}</b>: {} ticks, {} failed, at most {} in a row.{}</p>"#,
        vs.interval_ms / 1000.0,
        if vs.would_fail { "failed" } else { "passed" },
        vs.ticks,
        vs.failures,
        vs.max_consecutive_failures,
        if !vs.would_fail && !v.zero_downtime {
            " The lab saw downtime that this check would have missed."
        } else {
            ""
        }
    );
    h
}

/// What the lab did, in order.
fn lab_events_section(events: &[LabEvent], shown_events: &[&LabEvent], t0: f64) -> String {
    let mut h = String::new();
    if !events.is_empty() {
        h.push_str("<h2>Lab events</h2>\n<table><tr><th>at</th><th>end</th><th class=\"l\">kind</th><th class=\"l\">name</th><th class=\"l\">detail</th></tr>\n");
        for e in shown_events.iter().take(MAX_EVENT_ROWS) {
            let _ = writeln!(
                h,
                r#"<tr><td>{}</td><td>{}</td><td class="l">{}</td><td class="l">{}</td><td class="msg">{}</td></tr>"#,
                rel(e.at_unix_ms, t0),
                e.end_unix_ms.map(|x| rel(x, t0)).unwrap_or_default(),
                esc(&e.kind),
                esc(&e.name),
                esc(&e.detail)
            );
        }
        if shown_events.len() > MAX_EVENT_ROWS {
            let _ = writeln!(
                h,
                r#"<tr><td class="l" colspan="5">… and {} more (see events.ndjson)</td></tr>"#,
                shown_events.len() - MAX_EVENT_ROWS
            );
        }
        h.push_str("</table>\n");
    }
    h
}

/// One lane per leader-election candidate: a bar while it believes it
/// leads (in its seed's colour), paused spans under it, overlaps with
/// another candidate in the error colour, each loss a tick (black when
/// the lab did not cause it), failed lock requests as dots below (one per
/// pixel, the worst outcome).
fn lease_lanes(
    v: &Verdict,
    sorted: &[&Record],
    sc: &Scale,
    lease_y: &[usize],
    seed_color: &dyn Fn(&str) -> Option<&'static str>,
) -> String {
    let l = &v.lease;
    let mut s = String::new();
    let t0 = sc.t0;
    let lane_of: BTreeMap<&str, usize> = l
        .candidates
        .iter()
        .enumerate()
        .map(|(i, c)| (c.identity.as_str(), i))
        .collect();
    let bar = |s: &mut String, y0: usize, a: f64, b: f64, fill: &str, opacity: f64, tip: &str| {
        let x0 = sc.x(a);
        let w = (sc.x(b) - x0).max(1.0);
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.1}" y="{y0}" width="{w:.1}" height="{LEASE_BAR_H}" fill="{fill}" fill-opacity="{opacity}"><title>{}</title></rect>"#,
            esc(tip)
        );
    };
    for (c, y0) in l.candidates.iter().zip(lease_y) {
        let y0 = *y0;
        let _ = writeln!(
            s,
            r##"<text x="4" y="{}" font-weight="bold">{}</text><text x="4" y="{}" font-size="9.5" fill="#555">{}</text>"##,
            y0 + LEASE_BAR_H - 2,
            esc(&c.identity),
            y0 + LEASE_H - 2,
            esc(&format!(
                "lease · led {}× · lost {}×",
                c.acquisitions, c.losses
            ))
        );
        let _ = writeln!(
            s,
            r##"<rect x="{LEFT}" y="{y0}" width="{PLOT_W}" height="{LEASE_BAR_H}" fill="#fff" stroke="#eee"/>"##
        );
        let color = c
            .seed
            .as_deref()
            .and_then(seed_color)
            .unwrap_or(LEADER_COLOR);
        for iv in &c.leading {
            bar(
                &mut s,
                y0,
                iv.start_unix_ms,
                iv.end_unix_ms,
                color,
                0.85,
                &format!(
                    "{} believes it leads {} – {} ({} ms)",
                    c.identity,
                    rel(iv.start_unix_ms, t0),
                    rel(iv.end_unix_ms, t0),
                    ms(iv.duration_ms())
                ),
            );
        }
        // Over the bar: a paused leader still believes it leads.
        for p in &c.paused {
            bar(
                &mut s,
                y0,
                p.start_unix_ms,
                p.end_unix_ms,
                PAUSED_COLOR,
                0.6,
                &format!(
                    "{} paused by the lab {} – {}",
                    c.identity,
                    rel(p.start_unix_ms, t0),
                    rel(p.end_unix_ms, t0)
                ),
            );
        }
    }
    for o in &l.overlaps {
        for who in &o.candidates {
            let Some(i) = lane_of.get(who.as_str()) else {
                continue;
            };
            bar(
                &mut s,
                lease_y[*i],
                o.from_unix_ms,
                o.to_unix_ms,
                WATCH_ERROR_COLOR,
                0.9,
                &format!(
                    "{} both believe they lead {} – {} ({} ms)",
                    o.candidates.join(" and "),
                    rel(o.from_unix_ms, t0),
                    rel(o.to_unix_ms, t0),
                    ms(o.duration_ms)
                ),
            );
        }
    }
    for loss in &l.losses {
        let Some(i) = lane_of.get(loss.candidate.as_str()) else {
            continue;
        };
        let x = sc.x(loss.at_unix_ms);
        let (color, width, why) = match &loss.lab_action {
            Some(a) => (PLANNED_LOSS_COLOR, 1.5, format!("after the lab's {a}")),
            None => (
                ANOMALY_COLOR,
                2.5,
                format!(
                    "not caused by the lab; {} failed or slow lock request(s) in the renew deadline before",
                    loss.request_count
                ),
            ),
        };
        let _ = writeln!(
            s,
            r#"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="{color}" stroke-width="{width}"><title>{}</title></line>"#,
            lease_y[*i],
            lease_y[*i] + LEASE_BAR_H + 2,
            esc(&format!(
                "{} lost leadership at {} ({}): {why}",
                loss.candidate,
                rel(loss.at_unix_ms, t0),
                loss.how
            ))
        );
    }
    // Failed lock requests: the worst per pixel and lane.
    let mut dots: BTreeMap<(usize, usize), (u8, &Record, u64)> = BTreeMap::new();
    for r in sorted.iter().filter(|r| {
        r.probe == ProbeKind::Lease
            && crate::record::lease_event::is_request(r.event.as_deref())
            && r.outcome != Outcome::Ok
    }) {
        let Some(i) = lane_of.get(super::lease::candidate_of(r)) else {
            continue;
        };
        let sev = severity(r.outcome);
        let e = dots
            .entry((*i, sc.bucket(r.start_unix_ms)))
            .or_insert((sev, r, 0));
        e.2 += 1;
        if sev > e.0 {
            (e.0, e.1) = (sev, r);
        }
    }
    for ((i, px), (sev, r, n)) in &dots {
        let (color, what) = sev_look(*sev);
        let _ = writeln!(
            s,
            r#"<circle cx="{}.5" cy="{}" r="2.5" fill="{color}"><title>{}</title></circle>"#,
            LEFT + px,
            lease_y[*i] + LEASE_BAR_H + 5,
            esc(&format!(
                "{} {} failed at {}: {what}{}{}{}",
                super::lease::candidate_of(r),
                r.event.as_deref().unwrap_or(""),
                rel(r.start_unix_ms, t0),
                r.http_status.map(|h| format!(" {h}")).unwrap_or_default(),
                r.error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default(),
                if *n > 1 {
                    format!(" — {n} failed in this pixel")
                } else {
                    String::new()
                }
            ))
        );
    }
    s
}

/// Phase names in band order (as the latency phases list them), `outside`
/// last, each once.
fn in_band_order<'a>(v: &Verdict, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let rank = |n: &str| {
        if n == "outside" {
            usize::MAX
        } else {
            v.phases
                .iter()
                .position(|p| p.name == n)
                .unwrap_or(usize::MAX - 1)
        }
    };
    let mut out: Vec<&str> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out.sort_by_key(|n| rank(n));
    out
}

/// The two informers side by side: relists, errors and delivery delay per
/// phase, kube-rs' watcher against client-go's shared informer.
fn informers_section(v: &Verdict) -> String {
    let (k, g) = (&v.informer, &v.informer_go);
    if !k.run && !g.run {
        return String::new();
    }
    let names = in_band_order(v, k.phases.iter().chain(&g.phases).map(|p| p.name.as_str()));
    let delay = |d: &Option<Latency>| match d {
        Some(d) => format!("<td>{}</td><td>{}</td>", ms(d.p50_ms), ms(d.p99_ms)),
        None => "<td>–</td><td>–</td>".into(),
    };
    let cells = |c: &super::informer::InformerCheck, name: Option<&str>| -> String {
        if !c.run {
            return "<td colspan=\"4\" class=\"l\">not run</td>".into();
        }
        match name {
            None => format!(
                "<td>{}</td><td>{}</td>{}",
                c.relists,
                c.errors,
                delay(&c.delay)
            ),
            Some(n) => match c.phases.iter().find(|p| p.name == n) {
                Some(p) => format!(
                    "<td>{}</td><td>{}</td>{}",
                    p.relists,
                    p.errors,
                    delay(&p.delay)
                ),
                None => "<td>0</td><td>0</td><td>–</td><td>–</td>".into(),
            },
        }
    };
    let mut h = String::from(
        "<h2>Informers: kube-rs and client-go</h2>\n<table><tr><th class=\"l\" rowspan=\"2\">phase</th><th colspan=\"4\">kube-rs watcher (<code>informer</code>)</th><th colspan=\"4\">client-go shared informer (<code>informer-go</code>)</th></tr>\n<tr><th>relists</th><th>errors</th><th>delay p50 ms</th><th>delay p99 ms</th><th>relists</th><th>errors</th><th>delay p50 ms</th><th>delay p99 ms</th></tr>\n",
    );
    for n in names {
        let _ = writeln!(
            h,
            r#"<tr><td class="l">{}</td>{}{}</tr>"#,
            esc(n),
            cells(k, Some(n)),
            cells(g, Some(n))
        );
    }
    let _ = writeln!(
        h,
        r#"<tr><th class="l">whole run</th>{}{}</tr>"#,
        cells(k, None),
        cells(g, None)
    );
    let anomalies = |c: &super::informer::InformerCheck| {
        if c.run {
            format!(
                "<td colspan=\"4\" class=\"l\">{} missed, {} duplicated, {} out of order; {} of {} delivered, {} superseded</td>",
                c.missed_count,
                c.duplicated_count,
                c.out_of_order_count,
                c.delivered,
                c.expected,
                c.superseded_by_relist
            )
        } else {
            "<td colspan=\"4\" class=\"l\">not run</td>".into()
        }
    };
    let bad = |c: &super::informer::InformerCheck| {
        c.missed_count + c.duplicated_count + c.out_of_order_count > 0
    };
    let _ = writeln!(
        h,
        r#"<tr{}><th class="l">anomalies</th>{}{}</tr>"#,
        if bad(k) || bad(g) {
            " class=\"bad\""
        } else {
            ""
        },
        anomalies(k),
        anomalies(g)
    );
    h.push_str("</table>\n");
    h
}

/// The leader-election candidates: per candidate what it did, renew
/// latency p99 per phase, the longest leaderless gap, the etcd cross-check,
/// overlaps, losses and handovers.
fn lease_section(v: &Verdict, t0: f64) -> String {
    let l = &v.lease;
    if !l.run {
        return String::new();
    }
    use super::lease::{CrossCheckOutcome, HandoverOutcome};
    let x = &l.etcd_cross_check;
    let seq = |v: &[String]| {
        if v.is_empty() {
            "nobody".to_string()
        } else {
            v.join(" → ")
        }
    };
    let cross = match x.outcome {
        CrossCheckOutcome::Matched => format!(
            "the acquisitions recorded agree with etcd's history: {}",
            seq(&x.recorded)
        ),
        CrossCheckOutcome::Mismatched => format!(
            "the acquisitions recorded DISAGREE with etcd's history: etcd's holders {}, recorded {}",
            seq(x.etcd.as_deref().unwrap_or(&[])),
            seq(&x.recorded)
        ),
        CrossCheckOutcome::HistoryError => format!(
            "the acquisitions recorded were not cross-checked: the Lease's history could not be read ({})",
            x.error.as_deref().unwrap_or("")
        ),
        CrossCheckOutcome::NoHistory | CrossCheckOutcome::NotRun => {
            "the acquisitions recorded were not cross-checked: no Lease history read back".into()
        }
    };
    let mut h = format!(
        "<h2>Leader election (Lease)</h2>\n<p class=\"meta\">Longest without a leader: <b>{}</b> (from the first leader, {}, to the window's end) · {} overlap(s) beyond the {} ms tolerance · {} loss(es), {} not caused by the lab · {}.</p>\n",
        l.longest_leaderless_ms
            .map(|g| format!("{} ms", ms(g)))
            .unwrap_or_else(|| "nobody ever led".into()),
        l.first_leader_unix_ms
            .map(|t| rel(t, t0))
            .unwrap_or_else(|| "–".into()),
        l.overlap_count,
        ms(l.tolerance_ms),
        l.loss_count,
        l.candidates.iter().map(|c| c.unplanned_losses).sum::<u64>(),
        esc(&cross)
    );
    h.push_str("<table><tr><th class=\"l\">candidate</th><th class=\"l\">seed</th><th>led</th><th>lost</th><th>not by the lab</th><th>lock requests</th><th>failed</th><th>renewals</th><th>renew p50 ms</th><th>p99</th><th>max</th></tr>\n");
    for c in &l.candidates {
        let _ = writeln!(
            h,
            r#"<tr{}><td class="l">{}</td><td class="l">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>"#,
            if c.unplanned_losses > 0 {
                " class=\"bad\""
            } else {
                ""
            },
            esc(&c.identity),
            esc(c.seed.as_deref().unwrap_or("–")),
            c.acquisitions,
            c.losses,
            c.unplanned_losses,
            c.lock_requests,
            c.failed_lock_requests,
            lat_cells(&c.renew)
        );
    }
    h.push_str("</table>\n");
    // Renew latency p99 per phase (rows) and candidate (columns).
    let names = in_band_order(
        v,
        l.candidates
            .iter()
            .flat_map(|c| &c.phases)
            .map(|p| p.name.as_str()),
    );
    if !names.is_empty() {
        h.push_str("<p class=\"meta\">Renew latency p99 per phase, ms (renewals; failed lock requests in brackets):</p><table><tr><th class=\"l\">phase</th>");
        for c in &l.candidates {
            let _ = write!(h, "<th>{}</th>", esc(&c.identity));
        }
        h.push_str("</tr>\n");
        for n in names {
            let _ = write!(h, r#"<tr><td class="l">{}</td>"#, esc(n));
            for c in &l.candidates {
                let cell = match c.phases.iter().find(|p| p.name == n) {
                    None => "–".to_string(),
                    Some(p) => format!(
                        "{}{}",
                        p.renew
                            .map(|r| format!("{} (n {})", ms(r.p99_ms), r.count))
                            .unwrap_or_else(|| "–".into()),
                        if p.failed_lock_requests > 0 {
                            format!(" [{} failed]", p.failed_lock_requests)
                        } else {
                            String::new()
                        }
                    ),
                };
                let _ = write!(h, "<td>{}</td>", esc(&cell));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
    }
    if !l.overlaps.is_empty() {
        h.push_str("<p class=\"meta\">Two candidates believing they led at once:</p><table><tr><th class=\"l\">candidates</th><th>from</th><th>to</th><th>ms</th></tr>\n");
        for o in &l.overlaps {
            let _ = writeln!(
                h,
                r#"<tr class="bad"><td class="l">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
                esc(&o.candidates.join(" and ")),
                rel(o.from_unix_ms, t0),
                rel(o.to_unix_ms, t0),
                ms(o.duration_ms)
            );
        }
        h.push_str("</table>\n");
    }
    if !l.losses.is_empty() {
        h.push_str("<p class=\"meta\">Losses of leadership:</p><table><tr><th class=\"l\">candidate</th><th>led from</th><th>lost at</th><th class=\"l\">how</th><th class=\"l\">the lab's action</th><th class=\"l\">failed or slow lock requests in the renew deadline before</th><th class=\"l\">lab events then</th></tr>\n");
        for loss in &l.losses {
            let reqs: Vec<String> = loss
                .requests
                .iter()
                .map(|r| {
                    format!(
                        "{} {} {}{}{} {} ms",
                        rel(r.start_unix_ms, t0),
                        r.event,
                        if r.failed { r.outcome.as_str() } else { "slow" },
                        r.http_status.map(|s| format!(" {s}")).unwrap_or_default(),
                        r.error
                            .as_deref()
                            .map(|e| format!(" ({e})"))
                            .unwrap_or_default(),
                        ms(r.duration_ms)
                    )
                })
                .collect();
            let evs: Vec<String> = loss
                .lab_events
                .iter()
                .map(|e| format!("{} {} {}", e.kind, e.name, rel(e.at_unix_ms, t0)))
                .collect();
            let _ = writeln!(
                h,
                r#"<tr{}><td class="l">{}</td><td>{}</td><td>{}</td><td class="l">{}</td><td class="l">{}</td><td class="msg">{}{}</td><td class="msg">{}</td></tr>"#,
                if loss.planned() { "" } else { " class=\"bad\"" },
                esc(&loss.candidate),
                rel(loss.led_from_unix_ms, t0),
                rel(loss.at_unix_ms, t0),
                esc(&loss.how),
                esc(loss.lab_action.as_deref().unwrap_or("none")),
                esc(&reqs.join("; ")),
                if loss.request_count > loss.requests.len() as u64 {
                    format!(" … {} in all", loss.request_count)
                } else {
                    String::new()
                },
                esc(&evs.join("; "))
            );
        }
        h.push_str("</table>\n");
    }
    if !l.handovers.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"meta\">Handovers (bound {} ms):</p><table><tr><th class=\"l\">from</th><th class=\"l\">how</th><th>at</th><th class=\"l\">to</th><th>ms</th><th class=\"l\">outcome</th></tr>",
            ms(l.handover_bound_ms)
        );
        for ho in &l.handovers {
            let (cls, what) = match ho.outcome {
                HandoverOutcome::Within => ("", "within the bound"),
                HandoverOutcome::Late => (" class=\"bad\"", "LATE"),
                HandoverOutcome::Missing => (" class=\"bad\"", "NO HANDOVER"),
                HandoverOutcome::NotJudged => ("", "not judged (cut short)"),
            };
            let _ = writeln!(
                h,
                r#"<tr{cls}><td class="l">{}</td><td class="l">{}</td><td>{}</td><td class="l">{}</td><td>{}</td><td class="l">{what}</td></tr>"#,
                esc(&ho.from),
                esc(&ho.how),
                rel(ho.at_unix_ms, t0),
                esc(ho.to.as_deref().unwrap_or("–")),
                ho.handover_ms.map(ms).unwrap_or_else(|| "–".into())
            );
        }
        h.push_str("</table>\n");
    }
    h
}

/// The known hazards: each accepted hazard's budget and what it excused,
/// every excused request with its evidence, and the run's hazard windows.
fn excused_section(v: &Verdict, t0: f64) -> String {
    let x = &v.excuses;
    if x.hazards.is_empty() && x.windows.is_empty() {
        return String::new();
    }
    let mut h = String::from("<h2>Known hazards</h2>\n");
    if x.hazards.is_empty() {
        h.push_str("<p class=\"meta\">The scenario accepts no hazard: nothing is excused.</p>\n");
    } else {
        h.push_str("<table><tr><th class=\"l\">hazard</th><th>happened</th><th>excused</th><th>longest ms</th><th class=\"l\">budget</th><th class=\"l\">within</th></tr>\n");
        for s in &x.hazards {
            let _ = writeln!(
                h,
                r#"<tr{}><td class="l">{}</td><td>{}</td><td>{}</td><td>{}</td><td class="l">{}</td><td class="l">{}</td></tr>"#,
                if !s.within_budget {
                    " class=\"bad\""
                } else if s.excused > 0 {
                    " class=\"amber\""
                } else {
                    ""
                },
                s.hazard,
                s.happened,
                s.excused,
                ms(s.longest_ms),
                esc(&s.budget_text()),
                if s.within_budget {
                    "yes"
                } else {
                    "OVER BUDGET"
                }
            );
        }
        h.push_str("</table>\n");
    }
    if !x.excused.is_empty() {
        let _ = writeln!(
            h,
            "<h2>Excused requests ({})</h2>\n<table><tr><th class=\"l\">lane</th><th class=\"l\">hazard</th><th>start</th><th>ms</th><th class=\"l\">outcome</th><th class=\"l\">error</th><th class=\"l\">evidence</th></tr>",
            x.excused_count
        );
        for e in &x.excused {
            let _ = writeln!(
                h,
                r#"<tr class="amber"><td class="l">{}</td><td class="l">{}</td><td>{}</td><td>{}</td><td class="l">{}</td><td class="msg">{}</td><td class="msg">{}</td></tr>"#,
                esc(&e.lane),
                e.hazard,
                rel(e.start_unix_ms, t0),
                ms(e.duration_ms),
                esc(&e.outcome),
                esc(e.error.as_deref().unwrap_or("")),
                esc(&e.evidence)
            );
        }
        h.push_str("</table>\n");
    }
    if !x.windows.is_empty() {
        h.push_str("<p class=\"meta\">Hazard windows of this run (drawn as bands):</p><table><tr><th class=\"l\">hazard</th><th>from</th><th>to</th><th class=\"l\">what</th></tr>\n");
        for w in &x.windows {
            let _ = writeln!(
                h,
                r#"<tr><td class="l">{}</td><td>{}</td><td>{}</td><td class="msg">{}</td></tr>"#,
                w.hazard,
                rel(w.start_unix_ms, t0),
                rel(w.end_unix_ms, t0),
                esc(&w.what)
            );
        }
        h.push_str("</table>\n");
    }
    h
}

/// The readyz a draining API server answered, set aside, with the log
/// line that shows the drain.
fn drained_readyz_section(v: &Verdict, t0: f64) -> String {
    if v.drained_readyz.is_empty() {
        return String::new();
    }
    let mut h = format!(
        "<h2>Readyz answered by a draining API server ({})</h2>\n<p class=\"meta\">Set aside, neither a success nor a failure: kube-apiserver stops its etcd checks once its in-flight requests drain and still answers /readyz, so a readyz in its last milliseconds says <code>[-]etcd failed</code> although etcd is fine.</p>\n<table><tr><th class=\"l\">lane</th><th>start</th><th class=\"l\">evidence</th></tr>\n",
        v.drained_readyz.len()
    );
    for d in &v.drained_readyz {
        let _ = writeln!(
            h,
            r#"<tr><td class="l">{}</td><td>{}</td><td class="msg">{}</td></tr>"#,
            esc(&d.lane),
            rel(d.start_unix_ms, t0),
            esc(&d.evidence)
        );
    }
    h.push_str("</table>\n");
    h
}

/// Samples per lane in each phase long enough to be judged, and what was
/// not covered.
fn coverage_section(v: &Verdict, t0: f64) -> String {
    let c = &v.coverage;
    if c.phases.is_empty() && c.gaps.is_empty() {
        return String::new();
    }
    let mut h = format!(
        "<h2>Coverage</h2>\n<p class=\"meta\">Requests each lane started in each phase of {:.0} s or more (at least {} needed){}{}.</p>\n",
        c.min_phase_ms / 1e3,
        c.min_samples,
        c.writes_after_last_step
            .map(|n| format!("; writes acknowledged after the last step: {n}"))
            .unwrap_or_default(),
        c.writes_after_last_hazard
            .map(|n| format!("; after the last hazard: {n}"))
            .unwrap_or_default()
    );
    if !c.phases.is_empty() {
        h.push_str("<table><tr><th class=\"l\">phase</th><th class=\"l\">band</th>");
        for l in &c.lanes {
            let _ = write!(h, "<th>{}</th>", esc(l));
        }
        h.push_str("</tr>\n");
        for p in &c.phases {
            let _ = write!(
                h,
                r#"<tr><td class="l">{}</td><td class="l">{} – {}</td>"#,
                esc(&p.name),
                rel(p.start_unix_ms, t0),
                rel(p.end_unix_ms, t0)
            );
            for l in &c.lanes {
                let n = p.samples.get(l).copied().unwrap_or(0);
                let bad = n < c.min_samples;
                let _ = write!(
                    h,
                    "<td{}>{n}</td>",
                    if bad {
                        " style=\"background:#fdd\""
                    } else {
                        ""
                    }
                );
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
    }
    if !c.gaps.is_empty() {
        h.push_str("<ul class=\"reasons\">\n");
        for g in &c.gaps {
            let _ = writeln!(
                h,
                "<li>not covered: {}{}</li>",
                esc(&g.what),
                g.accepted
                    .as_ref()
                    .map(|w| format!(" (accepted by the scenario: {})", esc(w)))
                    .unwrap_or_default()
            );
        }
        h.push_str("</ul>\n");
    }
    h
}

fn list_preview(v: &[u64], total: u64) -> String {
    if total == 0 {
        return "none".into();
    }
    let shown: Vec<String> = v.iter().take(20).map(|x| x.to_string()).collect();
    if total as usize > shown.len() {
        format!("{total}: {} …", shown.join(", "))
    } else {
        format!("{total}: {}", shown.join(", "))
    }
}

/// Runs of equal values: (from, to exclusive, value).
fn runs_of<T: Copy + PartialEq>(v: &[T]) -> Vec<(usize, usize, T)> {
    let mut out: Vec<(usize, usize, T)> = Vec::new();
    for (i, x) in v.iter().enumerate() {
        match out.last_mut() {
            Some(last) if last.2 == *x => last.1 = i + 1,
            _ => out.push((i, i + 1, *x)),
        }
    }
    out
}

fn runs(v: &[Option<u8>]) -> Vec<(usize, usize, Option<u8>)> {
    runs_of(v)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::*;
    use super::*;

    #[test]
    fn event_labels_never_print_over_each_other() {
        // Forty notes a second apart with long names: more than the rows hold.
        let events: Vec<LabEvent> = (0..40)
            .map(|i| LabEvent {
                at_unix_ms: 1000.0 * f64::from(i),
                end_unix_ms: (i % 3 == 0).then_some(1000.0 * f64::from(i) + 2500.0),
                kind: if i % 3 == 0 { "phase" } else { "note" }.into(),
                name: format!("a rather long event name number {i}"),
                detail: String::new(),
                status: None,
            })
            .collect();
        let refs: Vec<&LabEvent> = events.iter().collect();
        let sc = Scale {
            t0: 0.0,
            t1: 40_000.0,
        };
        let (placed, rows) = place_labels(&refs, &sc, 0.0, 40_000.0);
        assert_eq!(placed.len(), 40, "every event is drawn");
        assert!(rows <= MAX_LABEL_ROWS);
        assert!(
            placed.iter().any(|(_, _, l)| !l),
            "some go without text here"
        );
        for row in 0..rows {
            let mut spans: Vec<(f64, f64)> = placed
                .iter()
                .filter(|(r, _, l)| *r == row && *l)
                .map(|(_, e, _)| {
                    let x0 = sc.x(e.at_unix_ms);
                    (x0, x0 + 6.3 * e.name.chars().count() as f64 + 8.0)
                })
                .collect();
            spans.sort_by(|a, b| a.0.total_cmp(&b.0));
            for w in spans.windows(2) {
                assert!(
                    w[0].1 <= w[1].0,
                    "row {row}: {:?} overprints {:?}",
                    w[0],
                    w[1]
                );
            }
        }
    }

    /// A migration-like run: every probe in both modes every `step` ms for
    /// `secs` s, seed-a answering until the switch, seed-b after, a 2 s
    /// outage of new connections during the switch, slow writes while
    /// etcd catches up, one missed watch event.
    fn demo(secs: f64, step: f64) -> (Vec<Record>, Vec<LabEvent>) {
        let end = secs * 1000.0;
        let switch = end * 0.5;
        let mut v = Vec::new();
        let mut value = 0u64;
        for mode in [ConnMode::New, ConnMode::Reused] {
            v.push(connect(mode, 0.0));
        }
        let mut t = 0.0;
        let mut i = 0u64;
        while t < end {
            for probe in [
                ProbeKind::Readyz,
                ProbeKind::Get,
                ProbeKind::List,
                ProbeKind::Write,
            ] {
                for mode in [ConnMode::New, ConnMode::Reused] {
                    // Writes of both modes start together, so their rvs
                    // (assigned in loop order) never go backwards.
                    let jitter = if probe == ProbeKind::Write {
                        0.0
                    } else {
                        ((i * 7919 + probe as u64 * 31 + mode as u64 * 17) % 97) as f64
                    };
                    let mut dur = 3.0 + jitter / 10.0;
                    let out = mode == ConnMode::New
                        && t >= switch
                        && t < switch + 2000.0
                        && probe != ProbeKind::Write;
                    if probe == ProbeKind::Write && t >= switch - 3000.0 && t < switch {
                        // etcd catching up: acks slow down steadily.
                        dur = 200.0 + 0.3 * (t - (switch - 3000.0));
                    }
                    let mut r = if out {
                        let o = if probe == ProbeKind::Readyz {
                            Outcome::Refused
                        } else {
                            Outcome::Reset
                        };
                        rec(probe, mode, t + jitter / 10.0, 2.0, o)
                    } else {
                        rec(probe, mode, t + jitter / 10.0, dur, Outcome::Ok)
                    };
                    r.seed = (!out).then(|| if t < switch { "seed-a" } else { "seed-b" }.into());
                    if probe == ProbeKind::Write && !out {
                        value += 1;
                        r.value = Some(value);
                        r.rv = Some(10_000 + value);
                        for wm in [ConnMode::New, ConnMode::Reused] {
                            if !(value == 77 && wm == ConnMode::New) {
                                // Committed (and watched) before the ack.
                                v.push(watch_event(wm, t + 2.0, value, 10_000 + value));
                            }
                        }
                    }
                    v.push(r);
                }
            }
            t += step;
            i += 1;
        }
        v.push(connect(ConnMode::New, switch + 2100.0));
        for (i, r) in v.iter_mut().enumerate() {
            r.seq = i as u64;
        }
        let ev = |at: f64, end: Option<f64>, kind: &str, name: &str, detail: &str| LabEvent {
            at_unix_ms: T0 + at,
            end_unix_ms: end.map(|e| T0 + e),
            kind: kind.into(),
            name: name.into(),
            detail: detail.into(),
            status: None,
        };
        let events = vec![
            ev(0.0, Some(switch - 3000.0), "phase", "prepare", ""),
            ev(
                switch - 3000.0,
                Some(switch),
                "phase",
                "etcd <join> & sync",
                "",
            ),
            ev(switch, Some(switch + 4000.0), "phase", "switch-dns", ""),
            ev(switch + 4000.0, Some(end), "phase", "cleanup", ""),
            ev(
                switch + 500.0,
                Some(switch + 1500.0),
                "fault",
                "link-cut",
                "seed-a ↔ seed-b down",
            ),
            ev(switch - 1000.0, None, "link", "latency 50ms", ""),
        ];
        (v, events)
    }

    #[test]
    fn verdict_report_has_timeline_lanes_bands_and_escapes() {
        let (recs, events) = demo(60.0, 100.0);
        let v = compute(
            &recs,
            &events,
            &read_back(&recs, Some(1_000_000)),
            &Thresholds::default(),
        );
        assert!(!v.passed);
        let page = html(&v, &recs, &events, &[], &[], &[], "run <1> & \"co\"");
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<svg"));
        assert!(page.contains("FAILED"));
        for lane in [
            "readyz/new",
            "get/reused",
            "list/new",
            "write/reused",
            "watch/new",
        ] {
            assert!(page.contains(&format!(">{lane}</text>")), "lane {lane}");
        }
        assert!(page.contains(">switch-dns</text>"));
        assert!(page.contains(">link-cut</text>"));
        assert!(page.contains("etcd &lt;join&gt; &amp; sync"));
        assert!(!page.contains("etcd <join>"));
        assert!(page.contains("run &lt;1&gt; &amp; &quot;co&quot;"));
        assert!(page.contains("seed seed-a") && page.contains("seed seed-b"));
        assert!(!page.contains("<script"));
        assert!(
            !page.contains("http://") || !page.contains("src="),
            "no external assets"
        );
        for reason in &v.reasons {
            assert!(page.contains(&escape_xml(reason)));
        }
    }

    #[test]
    fn verdict_report_stays_small_for_200k_records() {
        // 8 probe lanes at 10 ms over ~4 min, plus watch events: > 200k.
        let (recs, events) = demo(250.0, 10.0);
        assert!(recs.len() > 200_000, "{}", recs.len());
        let v = compute(&recs, &events, &nothing(), &Thresholds::default());
        let page = html(&v, &recs, &events, &[], &[], &[], "big");
        assert!(page.len() < 2_000_000, "{} bytes", page.len());
        assert!(page.contains("<svg"));
    }

    /// A damaged events file: the probes noted as started and stopped
    /// near 1.7e32 ms, and no record. One float step there is ~2e16 ms, so
    /// `t0 + k * step` stays `t0` for ~1e15 ticks: the axis must count its
    /// ticks, not walk them to the end (it hung and filled memory).
    #[test]
    fn verdict_report_axis_is_bounded_where_times_lose_precision() {
        let at = T0 * 1e20;
        let note = |name: &str| LabEvent {
            at_unix_ms: at,
            end_unix_ms: None,
            kind: "note".into(),
            name: name.into(),
            detail: String::new(),
            status: None,
        };
        let events = vec![note("probes started"), note("probes stopped")];
        let v = compute(&[], &events, &nothing(), &Thresholds::default());
        assert_eq!(v.window.start_unix_ms, at);
        let page = html(&v, &[], &events, &[], &[], &[], "far");
        let ticks = page.matches(r##"stroke="#e4e4e4"/><text"##).count();
        assert!((1..=13).contains(&ticks), "{ticks} ticks");
    }

    /// A damaged record: a get that took 1e300 ms. The latency axis stops
    /// at its top decade (1e12 ms) instead of drawing 300 decades, whose
    /// labels overflowed (`10u64.pow`: a panic in a debug build).
    #[test]
    fn verdict_report_latency_axis_is_bounded() {
        let mut recs = series(ProbeKind::Get, ConnMode::Reused, 0.0, 10_000.0, 100.0, None);
        recs.push(rec(
            ProbeKind::Get,
            ConnMode::Reused,
            10_000.0,
            1e300,
            Outcome::Ok,
        ));
        let v = compute(&recs, &[], &nothing(), &Thresholds::default());
        let page = html(&v, &recs, &[], &[], &[], &[], "slow");
        // The decades' grid lines: 1 ms to 1e12 ms, one lane.
        let grid = page
            .split("<line ")
            .filter(|l| l.split('>').next().unwrap().contains(r##"stroke="#eee""##))
            .count();
        assert_eq!(grid, 13);
        assert!(page.contains(">100000000s</text>"), "the 1e11 ms label");
    }

    #[test]
    fn verdict_report_handles_no_records() {
        let v = compute(&[], &[], &nothing(), &Thresholds::default());
        let page = html(&v, &[], &[], &[], &[], &[], "empty");
        assert!(page.contains("<svg") && page.contains("FAILED"));
    }

    #[test]
    fn verdict_report_draws_the_candidates_and_compares_the_informers() {
        use crate::lease::tests::{history, lock, split_brain, A, B};
        use crate::record::informer_event as ie;
        let (mut recs, events) = demo(60.0, 100.0);
        for kind in [ProbeKind::Informer, ProbeKind::InformerGo] {
            for (t, e) in [
                (1.0, ie::LIST),
                (2.0, ie::INIT),
                (3.0, ie::SYNCED),
                (4.0, ie::WATCH),
            ] {
                let mut r = rec(kind, ConnMode::Reused, t, 1.0, Outcome::Ok);
                r.event = Some(e.into());
                recs.push(r);
            }
        }
        // client-go's informer re-lists once; kube-rs' does not.
        let mut relist = rec(
            ProbeKind::InformerGo,
            ConnMode::Reused,
            30_000.0,
            0.0,
            Outcome::Ok,
        );
        relist.event = Some(ie::INIT.into());
        recs.push(relist);
        recs.extend(split_brain());
        recs.push(lock(B, 20_000.0, "get", Outcome::Refused, None));
        for (i, r) in recs.iter_mut().enumerate() {
            r.seq = i as u64;
        }
        let fin = FinalRead {
            lease_history: history(&[A, B]).lease_history,
            ..read_back(&recs, Some(1_000_000))
        };
        let v = judge(
            &Inputs {
                records: &recs,
                events: &events,
                final_read: &fin,
                elections: &[],
                plan: None,
                listeners_closed: &[],
                present: None,
                cpu: &[],
            },
            &Criteria::default(),
        );
        assert_eq!((v.informer.relists, v.informer_go.relists), (0, 1));
        let page = html(&v, &recs, &events, &[], &[], &[], "lease");
        // A lane per candidate, none per lease "probe".
        assert!(page.contains(">cpmlab-seed-a</text>") && page.contains(">cpmlab-seed-b</text>"));
        assert!(!page.contains(">lease/reused</text>"));
        assert!(page.contains(">informer-go/reused</text>"));
        assert!(page.contains("cpmlab-seed-b believes it leads +26.030 s"));
        assert!(page.contains(
            "cpmlab-seed-a and cpmlab-seed-b both believe they lead +26.030 s – +50.000 s (23970 ms)"
        ));
        assert!(page.contains("cpmlab-seed-a lost leadership at +50.000 s (stopped-leading): after the lab&#39;s paused"));
        assert!(page.contains("cpmlab-seed-b get failed at +20.000 s: refused"));
        assert!(page.contains("cpmlab-seed-a paused by the lab +10.500 s – +40.000 s"));
        // The tables.
        assert!(page.contains("<h2>Leader election (Lease)</h2>"));
        assert!(page.contains("Longest without a leader: <b>"));
        // Its phases in band order, whichever candidate saw them first.
        let renew = &page[page.find("Renew latency p99 per phase").unwrap()..];
        let row = |p: &str| {
            renew
                .find(&format!("<tr><td class=\"l\">{p}</td>"))
                .unwrap()
        };
        assert!(row("prepare") < row("etcd &lt;join&gt; &amp; sync"));
        assert!(row("etcd &lt;join&gt; &amp; sync") < row("switch-dns"));
        assert!(row("switch-dns") < row("cleanup"));
        assert!(page.contains("the acquisitions recorded agree with etcd&#39;s history"));
        assert!(page.contains("<h2>Informers: kube-rs and client-go</h2>"));
        assert!(page.contains(
            "<tr><th class=\"l\">whole run</th><td>0</td><td>0</td><td>–</td><td>–</td><td>1</td><td>0</td><td>–</td><td>–</td></tr>"
        ), "the informers side by side");
        for rule in ["informer-go", "lease-exclusive", "leader-kept", "handover"] {
            assert!(
                page.contains(&format!(">{rule}</td>")),
                "{rule} in the rules table"
            );
        }
    }

    /// Renders the page with headless Chromium and reads the screenshot
    /// back: the lanes in their outcome and seed colours, pixel by pixel.
    /// Set CPMLAB_KEEP_REPORT=<dir> to keep the HTML and PNG.
    #[test]
    #[cfg_attr(
        not(cpmlab_has_chromium),
        ignore = "needs /usr/bin/chromium (scripts/setup installs chromium)"
    )]
    fn verdict_report_renders_in_chromium() {
        cpmlab_testenv::require(
            "verdict_report_renders_in_chromium",
            cpmlab_testenv::Need::Chromium,
        );
        let chromium = std::path::Path::new("/usr/bin/chromium");
        let (recs, events) = demo(60.0, 50.0);
        let v = compute(
            &recs,
            &events,
            &read_back(&recs, Some(1_000_000)),
            &Thresholds::default(),
        );
        let page = html(
            &v,
            &recs,
            &events,
            &[],
            &[],
            &[],
            "cpmlab: live control plane migration",
        );
        let dir = tempfile::tempdir().unwrap();
        let html_path = dir.path().join("report.html");
        let png = dir.path().join("report.png");
        let profile = dir.path().join("profile");
        std::fs::write(&html_path, &page).unwrap();
        let mut child = std::process::Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(format!("--screenshot={}", png.display()))
            .arg("--window-size=1400,900")
            .arg(format!("file://{}", html_path.display()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start chromium");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium did not finish within 120 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        };
        let mut stderr = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut stderr);
        }
        let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
        if let Ok(keep) = std::env::var("CPMLAB_KEEP_REPORT") {
            let keep = std::path::Path::new(&keep);
            std::fs::create_dir_all(keep).unwrap();
            std::fs::write(keep.join("report.html"), &page).unwrap();
            if size > 0 {
                std::fs::copy(&png, keep.join("report.png")).unwrap();
            }
        }
        assert!(
            size > 10_000,
            "screenshot {} is {size} bytes (chromium {status}): {stderr}",
            png.display()
        );
        // What the page drew, read off the screenshot's pixels: the lanes
        // in the outcome colours (ok, and the demo's refused and reset
        // requests), which seed answered (seed-a, then seed-b).
        let decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
        let mut reader = decoder.read_info().expect("the screenshot is a PNG");
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader
            .next_frame(&mut buf)
            .expect("the screenshot's pixels");
        let channels = info.color_type.samples();
        assert!(
            info.bit_depth == png::BitDepth::Eight && channels >= 3,
            "an 8-bit RGB(A) screenshot: {info:?}"
        );
        let pixels: Vec<[u8; 3]> = buf[..info.buffer_size()]
            .chunks(channels)
            .map(|p| [p[0], p[1], p[2]])
            .collect();
        let count = |hex: &str| {
            let c = u32::from_str_radix(&hex[1..], 16).unwrap();
            let rgb = [(c >> 16) as u8, (c >> 8) as u8, c as u8];
            pixels
                .iter()
                .filter(|p| p.iter().zip(rgb).all(|(a, b)| a.abs_diff(b) <= 6))
                .count()
        };
        for (what, hex, at_least) in [
            ("ok requests", outcome_color(Outcome::Ok), 2_000),
            ("refused requests", outcome_color(Outcome::Refused), 10),
            ("reset requests", outcome_color(Outcome::Reset), 10),
            ("seed-a's answers", SEED_COLORS[0], 200),
            ("seed-b's answers", SEED_COLORS[1], 200),
        ] {
            let n = count(hex);
            assert!(
                n >= at_least,
                "the screenshot shows {n} pixels of {what} ({hex}), expected {at_least} or more: {}",
                png.display()
            );
        }
    }
}

/// The rule judged through the whole verdict (`compute`), on synthetic
/// runs (`testutil`).
#[cfg(test)]
mod judged {
    use crate::testutil::*;
    use crate::*;

    #[test]
    fn verdict_report_shows_the_outcome_and_the_excused() {
        let events = leadership_move_events();
        let mut recs = clean_run();
        recs.push(dropped_in_the_move(4_000.0));
        let c = one_move_leader();
        let v = judged(&recs, &events, &c);
        let html = report::html(&v, &recs, &events, &[], &[], &[], "t");
        assert!(html.contains("PASSED WITH KNOWN HAZARDS"));
        assert!(html.contains("Excused requests (1)"));
        assert!(html.contains("acknowledged revision (final.json)"));
        assert!(
            html.contains(report::EXCUSED_COLOR),
            "drawn in its own colour"
        );
        assert!(
            html.contains(">move-leader</text>"),
            "the hazard's window is a band"
        );
    }

    #[test]
    fn a_failure_on_a_saturated_machine_says_so_is_not_excused_and_the_cpu_is_a_lane() {
        let events = leadership_move_events();
        let mut recs = clean_run();
        recs.push(dropped_in_the_move(4_000.0));
        let c = one_move_leader();
        // The machine at 98-100 % from +4 s to +10 s, 40 % before and after.
        let cpu: Vec<context::CpuSample> = (0..7)
            .map(|i| context::CpuSample {
                at_unix_ms: T0 + i as f64 * 2_000.0,
                machine_busy_pct: if (3..=5).contains(&i) {
                    98.0 + (i - 3) as f64
                } else {
                    40.0
                },
                cores: 2,
                ..Default::default()
            })
            .collect();
        let fin = read_back(&recs, Some(100));
        let v = judged_with_cpu(&recs, &events, &fin, &cpu, &c);
        assert_eq!(v.status, Status::Failed, "no hazard excuses it");
        assert_eq!(v.saturated_failures, 1);
        assert_eq!(v.excuses.excused_count, 0);
        let line = &v.mechanisms[0].line;
        assert!(
            line.contains(
                "the lab's machine was saturated from +4.0 s to +10.0 s (98–100 % of all cores, at or above 95 %)"
            ),
            "{line}"
        );
        let html = report::html(&v, &recs, &events, &[], &[], &cpu, "t");
        assert!(html.contains(">machine CPU</text>"), "the CPU is a lane");
        assert!(html.contains(super::CPU_SATURATED_COLOR));
        // Below the bound the same failure is excused as before.
        let calm: Vec<context::CpuSample> = cpu
            .iter()
            .map(|s| context::CpuSample {
                machine_busy_pct: 40.0,
                ..s.clone()
            })
            .collect();
        let v = judged_with_cpu(&recs, &events, &fin, &calm, &c);
        assert_eq!(v.status, Status::PassedWithKnownHazards, "{:?}", v.reasons);
    }

    #[test]
    fn the_header_says_what_ran_and_why_requests_failed() {
        let mut events = leadership_move_events();
        events.push(LabEvent {
            at_unix_ms: 1_000.0,
            end_unix_ms: None,
            kind: record::SETTINGS_EVENT.into(),
            name: "what ran".into(),
            detail: "exposure termination · order gep".into(),
            status: None,
        });
        let mut recs = clean_run();
        let mut refused = rec(
            ProbeKind::Get,
            ConnMode::Reused,
            5_050.0,
            3.0,
            Outcome::Http,
        );
        refused.seq = 90_001;
        refused.http_status = Some(503);
        refused.seed = Some("seed-a".into());
        refused.error = Some("no healthy upstream".into());
        recs.push(refused);
        let v = judged(&recs, &events, &Criteria::default());
        assert_eq!(v.mechanisms.len(), 1, "{:#?}", v.mechanisms);
        let html = report::html(&v, &recs, &events, &[], &[], &[], "t");
        assert!(
            html.contains("<b>what ran:</b> exposure termination · order gep"),
            "the header names what ran"
        );
        assert!(
            !html.contains(">what ran</text>"),
            "what ran is said, not drawn on the timeline"
        );
        assert!(html.contains("Why requests failed"));
        assert!(html.contains(
            "1 request(s) on kept connections (HTTP/2) to seed-a got HTTP 503 &quot;no healthy upstream&quot;"
        ));
    }
}
