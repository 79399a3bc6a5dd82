//! Link shaping against real Docker: partitions in the wan router (every
//! kernel), tc netem where the kernel has it, and bad input changing nothing.

mod common;

use std::time::Duration;

use assert_cmd::assert::OutputAssertExt;
use common::*;
use predicates::prelude::*;
use serde_json::Value;

fn links(lab: &Lab) -> Value {
    serde_json::from_str(&lab.ok(&["link", "show", "-o", "json"])).unwrap()
}

fn summary(v: &Value, from: &str, to: &str) -> String {
    v["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["from"] == from && l["to"] == to)
        .map(|l| l["summary"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

/// How late a round trip may be on top of the configured delay, at the
/// median: the delay line releases each packet when it is due, so what a
/// client sees on top is the machine's scheduling of the router's process,
/// the echo server's and its own. On a quiet machine that is under 0.5 ms
/// (scripts/bench-link prints the figure); beside a lab's garden starting
/// on two busy cores CI measured +2.9 ms at the median (p99 +16.8 ms).
/// 5 ms holds against the faults this check is for (a delay applied twice,
/// or not at all, or a packet held for a timer tick or behind another),
/// while the floor below holds exactly: never faster than configured.
const LATE_P50_MS: f64 = 5.0;

/// The round trip `r` against the configured `rtt_ms`: never under it, at
/// the median no later than [`LATE_P50_MS`] over it; the error printed.
fn assert_delayed(r: &Value, rtt_ms: f64, what: &str) {
    eprintln!(
        "{what}: p50 +{:.3} ms, p99 +{:.3} ms over {rtt_ms} ms",
        f(r, "p50_ms") - rtt_ms,
        f(r, "p99_ms") - rtt_ms
    );
    assert!(
        f(r, "min_ms") >= rtt_ms,
        "{what}: never faster than configured: {r}"
    );
    assert!(
        (rtt_ms..rtt_ms + LATE_P50_MS).contains(&f(r, "p50_ms")),
        "{what}: median within {LATE_P50_MS} ms over {rtt_ms} ms: {r}"
    );
}

/// A TCP connect from a seed-a member to seed-b's gateway (Istio's stats
/// listener, there whatever the gateway exposes: a plain `up` exposes
/// nothing in seed-b yet).
fn seed_a_reaches_seed_b(lab: &Lab, seed_b_gw: &str) -> bool {
    lab.exec(
        "seed-a-etcd-0",
        &format!(
            "timeout 3 nc -w 2 {seed_b_gw} {} </dev/null",
            cpmlab_exposure::envoy::PROMETHEUS_PORT
        ),
    )
    .ok()
    .is_ok()
}

/// Partitions and heals the seeds' link on `lab` (clear links), both ways
/// and one way; bad input exits 2 and changes nothing.
fn partition_and_heal(lab: &Lab) {
    let gw_b = gw_b(lab);
    assert!(seed_a_reaches_seed_b(lab, &gw_b));

    lab.ok(&["link", "partition", "seed-a:seed-b"]);
    let v = links(lab);
    assert_eq!(summary(&v, "seed-a", "seed-b"), "partitioned", "{v:#}");
    assert_eq!(summary(&v, "seed-b", "seed-a"), "partitioned", "{v:#}");
    assert_eq!(summary(&v, "clients", "seed-a"), "clear", "{v:#}");
    assert!(
        !seed_a_reaches_seed_b(lab, &gw_b),
        "partitioned seeds must not connect"
    );
    // The clients keep reaching seed-a: the partition is per pair.
    lab.exec(
        "toolbox",
        &etcdctl("seed-a-etcd-0.local.cpmlab.test", true, "endpoint health"),
    )
    .assert()
    .success();

    lab.ok(&["link", "heal", "seed-a:seed-b"]);
    assert_eq!(summary(&links(lab), "seed-a", "seed-b"), "clear");
    assert!(seed_a_reaches_seed_b(lab, &gw_b), "heal restores the link");

    // One direction only.
    lab.ok(&[
        "link",
        "partition",
        "seed-b:seed-a",
        "--direction",
        "a-to-b",
    ]);
    let v = links(lab);
    assert_eq!(summary(&v, "seed-b", "seed-a"), "partitioned", "{v:#}");
    assert_eq!(summary(&v, "seed-a", "seed-b"), "clear", "{v:#}");
    lab.ok(&["link", "clear"]);
    assert_eq!(summary(&links(lab), "seed-b", "seed-a"), "clear");
    assert!(seed_a_reaches_seed_b(lab, &gw_b));

    // Bad input: exit 2 and nothing changes.
    lab.ok(&["link", "partition", "clients:seed-b"]);
    let before = links(lab);
    for args in [
        vec!["link", "set", "seed-a:seed-b", "--delay", "-5ms"],
        vec!["link", "set", "seed-a:seed-b", "--delay", "soon"],
        vec!["link", "set", "seed-a:seed-b", "--loss", "120%"],
        vec!["link", "set", "seed-a:nowhere", "--delay", "5ms"],
        vec!["link", "partition", "seed-a"],
    ] {
        lab.cpmlab(&args).code(2);
        assert_eq!(links(lab), before, "{args:?} changed the links");
    }
    let rules = stdout(&lab.exec("router", "iptables -S CPMLAB-LINK").assert());
    assert_eq!(
        rules.matches("-j DROP").count(),
        2,
        "only clients<->seed-b dropped: {rules}"
    );
    lab.ok(&["link", "clear"]);
}

/// 25 ms between the seeds, by netem.
const NETEM_25MS: [&str; 7] = [
    "link",
    "set",
    "seed-a:seed-b",
    "--delay",
    "25ms",
    "--backend",
    "netem",
];

/// Starts `cpmlab agent echo` in seed-b's gateway container.
fn start_echo(lab: &Lab) {
    docker(&[
        "exec",
        "-d",
        &lab.container("seed-b-gateway"),
        "cpmlab",
        "agent",
        "echo",
        "--listen",
        "0.0.0.0:7007",
    ])
    .assert()
    .success();
    std::thread::sleep(Duration::from_millis(300));
}

/// `cpmlab agent rtt` from a seed-a member to seed-b's gateway.
fn rtt(lab: &Lab, gw_b: &str, args: &str) -> Value {
    let o = lab
        .exec(
            "seed-a-etcd-0",
            &format!("cpmlab agent rtt --target {gw_b}:7007 {args}"),
        )
        .assert();
    serde_json::from_slice(&o.get_output().stdout).unwrap_or_else(|e| panic!("rtt json: {e}:\n{o}"))
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"))
}

fn gw_b(lab: &Lab) -> String {
    lab.status()["seeds"][1]["gateway_ip"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The backend this host gets (delay line here; netem where the kernel has
/// it): one-way delay shows as twice the delay in a real client's TCP round
/// trip; loss measures as set; an established TCP connection survives a
/// delay change. Then, on the same lab: forcing netem where the kernel has
/// none fails clearly and changes nothing, and the seeds' link partitions
/// and heals (one lab for the link's checks: an `up` is 20 s of CI).
#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn shaped_link_delay_loss_live_change_partition_and_heal() {
    if !needs_docker("shaped_link_delay_loss_live_change_partition_and_heal") {
        return;
    }
    let lab = Lab::new("shape");
    lab.ok(&["up"]);
    let gw = gw_b(&lab);
    start_echo(&lab);

    // 25 ms one-way: round trip 50 ms, never less, late only by the
    // machine's scheduling (assert_delayed).
    lab.ok(&["link", "set", "seed-a:seed-b", "--delay", "25ms"]);
    let v = links(&lab);
    assert_eq!(summary(&v, "seed-a", "seed-b"), "delay 25ms", "{v:#}");
    let r = rtt(&lab, &gw, "--proto tcp --count 100 --interval-us 10000");
    assert_eq!(r["errors"], serde_json::json!([]), "{r}");
    assert_delayed(&r, 50.0, "TCP RTT with 25 ms one-way");
    let r = rtt(&lab, &gw, "--proto udp --count 1000 --interval-us 1000");
    assert_delayed(&r, 50.0, "UDP RTT at 1000/s with 25 ms one-way");

    // 20 % loss one way, over 2000 probes: 20 % +- 4 (about 4.5 sigma);
    // drawn by the delay line, then by the kernel instead (the router's
    // forward path, per packet the delay line hands back).
    for by in ["shaper", "kernel"] {
        lab.ok(&[
            "link",
            "set",
            "seed-a:seed-b",
            "--loss",
            "20%",
            "--loss-by",
            by,
            "--direction",
            "a-to-b",
        ]);
        std::thread::sleep(Duration::from_millis(200));
        let r = rtt(&lab, &gw, "--proto udp --count 2000 --interval-us 1000");
        let loss = f(&r, "loss_pct");
        assert!(
            (16.0..24.0).contains(&loss),
            "20% set (by the {by}), {loss}% measured: {r}"
        );
    }
    let v = links(&lab);
    assert_eq!(
        summary(&v, "seed-a", "seed-b"),
        "delay 0ms loss 20% (by the kernel)",
        "{v:#}"
    );
    let rules = stdout(&lab.exec("router", "iptables -S CPMLAB-LINK").assert());
    assert!(
        rules.contains("-m statistic --mode random --probability 0.2"),
        "{rules}"
    );

    // An established TCP connection survives a delay change mid-stream.
    lab.ok(&["link", "set", "seed-a:seed-b", "--delay", "5ms"]);
    std::thread::sleep(Duration::from_millis(200));
    let child = lab.exec_spawn(
        "seed-a-etcd-0",
        &format!("cpmlab agent rtt --target {gw}:7007 --proto tcp --count 150 --interval-us 20000"),
    );
    std::thread::sleep(Duration::from_millis(1500));
    lab.ok(&["link", "set", "seed-a:seed-b", "--delay", "30ms"]);
    let o = child.wait_with_output().unwrap().assert();
    let r: Value =
        serde_json::from_slice(&o.get_output().stdout).unwrap_or_else(|e| panic!("{e}:\n{o}"));
    assert_eq!(r["errors"], serde_json::json!([]), "connection broke: {r}");
    assert_eq!(r["received"], 150, "{r}");
    assert!(
        f(&r, "min_ms") < 15.0 && f(&r, "max_ms") > 60.0,
        "both delays seen: {r}"
    );

    // Clearing takes the shaping out again.
    lab.ok(&["link", "clear"]);
    std::thread::sleep(Duration::from_millis(200));
    let r = rtt(&lab, &gw, "--proto udp --count 200 --interval-us 1000");
    assert!(f(&r, "p50_ms") < 2.0 && f(&r, "loss_pct") == 0.0, "{r}");

    let d: Value = serde_json::from_str(&lab.ok(&["doctor", "-o", "json"])).unwrap();
    if d["link_backend"] != "netem" {
        lab.cpmlab(&NETEM_25MS)
            .code(1)
            .stderr(predicate::str::contains("netem"));
        assert_eq!(summary(&links(&lab), "seed-a", "seed-b"), "clear");
    }

    partition_and_heal(&lab);
    lab.ok(&["down"]);
}

/// A 3-member etcd cluster with one member 50 ms away keeps serving writes.
#[test]
#[cfg_attr(
    not(cpmlab_has_docker),
    ignore = "needs Docker (scripts/setup starts it)"
)]
fn etcd_with_a_member_across_a_50ms_link_keeps_serving_writes() {
    if !needs_docker("etcd_with_a_member_across_a_50ms_link_keeps_serving_writes") {
        return;
    }
    let lab = Lab::new("span");
    let topo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/topologies/spanning.yaml");
    lab.ok(&["up", "--topology", topo.to_str().unwrap()]);
    lab.ok(&["link", "set", "seed-a:seed-b", "--delay", "50ms"]);
    let ep = "seed-a-etcd-0.local.cpmlab.test";
    let script = format!(
        "for i in $(seq 1 30); do {} || exit 1; done",
        etcdctl(ep, true, "put /span/key value-$i")
    );
    // No write fails with a member 50 ms away.
    lab.exec("toolbox", &script).assert().success();
    lab.exec(
        "toolbox",
        &etcdctl(ep, true, "get /span/key --print-value-only --consistency=l"),
    )
    .assert()
    .stdout(predicate::str::diff("value-30").trim());
    let s = lab.status();
    let ms = s["etcd"]["members"].as_array().unwrap();
    assert_eq!(ms.len(), 3, "{s:#}");
    assert!(ms.iter().all(|m| m["healthy"] == true), "{s:#}");
    assert_eq!(
        ms.iter().filter(|m| m["seed"] == "seed-b").count(),
        1,
        "{s:#}"
    );
    lab.ok(&["down"]);
}

/// tc netem in the router; runs only where the kernel has sch_netem.
#[test]
#[cfg_attr(
    not(cpmlab_has_netem),
    ignore = "needs a kernel with sch_netem (this project's machines have none; CI checks that forcing netem there fails clearly, in shaped_link_delay_loss_live_change_partition_and_heal)"
)]
fn netem_backend_shapes_where_the_kernel_has_netem() {
    let test = "netem_backend_shapes_where_the_kernel_has_netem";
    if !needs_docker(test) || !needs(test, cpmlab_testenv::Need::Netem) {
        return;
    }
    let lab = Lab::new("netem");
    let d: Value = serde_json::from_str(&lab.ok(&["doctor", "-o", "json"])).unwrap();
    assert_eq!(
        d["link_backend"], "netem",
        "the kernel has sch_netem: {d:#}"
    );
    lab.ok(&["up"]);
    let gw = gw_b(&lab);
    start_echo(&lab);
    lab.ok(&NETEM_25MS);
    let r = rtt(&lab, &gw, "--proto tcp --count 50 --interval-us 10000");
    assert_delayed(&r, 50.0, "netem RTT with 25 ms one-way");
    lab.ok(&["down"]);
}

/// The seqs of the UDP probes lost in an `agent rtt --samples` report.
fn lost(r: &Value) -> Vec<u64> {
    r["samples"]
        .as_array()
        .unwrap_or_else(|| panic!("samples in {r}"))
        .iter()
        .filter(|s| s["rtt_ms"].is_null())
        .map(|s| s["seq"].as_u64().unwrap())
        .collect()
}

/// The delay line draws loss from a seeded generator: the same seed gives
/// the same packets the same fates (compared packet by packet, not by
/// timing), another seed other fates. And it follows a replayed trace of
/// ten changes a second: each probe's round trip is what the trace's
/// profiles (in force when the probe and its reply crossed, packets kept
/// in order) make it.
#[test]
#[ignore = "nightly: scripts/nightly runs it; CI keeps within 30 minutes; the delay line is shaped in shaped_link_delay_loss_live_change_partition_and_heal"]
fn seeded_loss_replays_and_a_trace_is_followed() {
    if !needs_docker("seeded_loss_replays_and_a_trace_is_followed") {
        return;
    }
    let lab = Lab::new("seed");
    lab.ok(&["up"]);
    let gw = gw_b(&lab);
    start_echo(&lab);
    let probes = "--proto udp --count 400 --interval-us 2000 --timeout-ms 300 --samples";
    let mut fates = Vec::new();
    for seed in ["7", "7", "8"] {
        lab.ok(&[
            "link",
            "set",
            "seed-a:seed-b",
            "--loss",
            "30%",
            "--direction",
            "a-to-b",
            "--seed",
            seed,
        ]);
        std::thread::sleep(Duration::from_millis(300));
        fates.push(lost(&rtt(&lab, &gw, probes)));
    }
    assert!(
        (80..160).contains(&fates[0].len()),
        "30 % of 400 lost: {}",
        fates[0].len()
    );
    assert_eq!(fates[0], fates[1], "seed 7 twice: the same packets lost");
    assert_ne!(fates[0], fates[2], "seed 8: other packets lost");
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(lab.dir().join("state.json")).unwrap())
            .unwrap();
    assert_eq!(
        state["link_seed"]["seed"], 8,
        "the seed is in the lab's state"
    );

    // A trace: 8 s, a change every 100 ms, delays jumping up and down.
    lab.ok(&["link", "clear"]);
    let delays: Vec<f64> = (0..80).map(|i| 5.0 + ((i * 7) % 40) as f64).collect();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.csv");
    let mut csv = String::from("offset_ms,delay_ms\n");
    for (i, d) in delays.iter().enumerate() {
        csv.push_str(&format!("{},{d}\n", i * 100));
    }
    std::fs::write(&trace, csv).unwrap();
    lab.ok(&["link", "replay", trace.to_str().unwrap()]);
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(lab.dir().join("state.json")).unwrap())
            .unwrap();
    let start = state["link_replay"]["start_unix_ms"].as_f64().unwrap();
    let r = rtt(
        &lab,
        &gw,
        "--proto udp --count 3500 --interval-us 2000 --timeout-ms 500 --samples",
    );
    // The one-way delay in force at unix ms t.
    let d = |t: f64| {
        let i = ((t - start) / 100.0).floor();
        if i < 0.0 {
            0.0
        } else {
            delays[(i as usize).min(delays.len() - 1)]
        }
    };
    let (mut fwd_last, mut back_last) = (0.0f64, 0.0f64);
    let mut errors = Vec::new();
    for s in r["samples"].as_array().unwrap() {
        let sent = s["sent_unix_ms"].as_f64().unwrap();
        // Packets leave in the order they came: a probe waits for the one
        // before it when the delay dropped in between.
        let fwd = (sent + d(sent)).max(fwd_last);
        let back = (fwd + d(fwd)).max(back_last);
        fwd_last = fwd;
        back_last = back;
        if sent < start + 50.0 || sent > start + 7_900.0 {
            continue;
        }
        let rtt = s["rtt_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("probe {s} lost on a lossless trace"));
        errors.push(rtt - (back - sent));
    }
    errors.sort_by(f64::total_cmp);
    let q = |p: f64| errors[((errors.len() as f64 * p) as usize).min(errors.len() - 1)];
    eprintln!(
        "trace followed: RTT error over {} probes at 500/s, 10 changes/s: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, min {:.2} ms",
        errors.len(),
        q(0.5),
        q(0.9),
        q(0.99),
        errors[0]
    );
    assert!(errors.len() > 3000, "{} probes judged", errors.len());
    assert!(q(0.5).abs() < 1.5, "p50 error {:.2} ms", q(0.5));
    assert!(q(0.9).abs() < 3.0, "p90 error {:.2} ms", q(0.9));
    lab.ok(&["link", "clear"]);
    lab.ok(&["down"]);
}

/// The delay line's counters in the router (written every second).
fn delayline_stats(lab: &Lab) -> Value {
    std::thread::sleep(Duration::from_millis(1100));
    let o = lab
        .exec("router", "cat /run/cpmlab/delayline.json")
        .assert();
    serde_json::from_slice(&o.get_output().stdout).unwrap_or_else(|e| panic!("{e}:\n{o}"))
}

/// iperf3 from seed-b's gateway to a seed-a member (`-R`: the member
/// receives and reports), as JSON.
fn iperf_to_seed_a(lab: &Lab, gw: &str, args: &str) -> Value {
    let o = lab
        .exec(
            "seed-a-etcd-0",
            &format!("iperf3 -c {gw} -p 5201 -R -J {args}"),
        )
        .assert()
        .success();
    serde_json::from_slice(&o.get_output().stdout).unwrap_or_else(|e| panic!("{e}:\n{o}"))
}

/// With the delay line's TUN offloads on (the default): the kernel hands
/// it superpackets and bulk TCP passes as they are; a small packet's round
/// trip stays exact beside them; packets larger than the MTU (fragmented
/// ICMP) and ICMP itself pass; `--rate` holds within 2 % at two rates, as
/// iperf3 measures it at the receiver; loss turns the offloads off, since
/// it is drawn per packet on the wire.
#[test]
#[ignore = "nightly: scripts/nightly runs it; CI keeps within 30 minutes; scripts/bench-link prints the figures"]
fn delay_line_offloads_keep_rtt_rate_mtu_and_icmp() {
    if !needs_docker("delay_line_offloads_keep_rtt_rate_mtu_and_icmp") {
        return;
    }
    let lab = Lab::new("offload");
    lab.ok(&["up"]);
    let gw = gw_b(&lab);
    start_echo(&lab);
    docker(&[
        "exec",
        "-d",
        &lab.container("seed-b-gateway"),
        "iperf3",
        "-s",
        "-p",
        "5201",
    ])
    .assert()
    .success();

    // Bulk TCP through a 10 ms link: superpackets, and the small packets'
    // round trip stays within 0.5 ms (p50) of 20 ms, never under it. The
    // delay line on every host, netem or not; later changes keep it.
    lab.ok(&[
        "link",
        "set",
        "seed-a:seed-b",
        "--delay",
        "10ms",
        "--backend",
        "delayline",
    ]);
    std::thread::sleep(Duration::from_millis(300));
    let bulk = iperf_to_seed_a(&lab, &gw, "-t 3");
    let st = delayline_stats(&lab);
    assert_eq!(st["offload"]["offloads"], true, "{st}");
    let (reads, supers) = (
        st["offload"]["reads"].as_f64().unwrap(),
        st["offload"]["superpackets"].as_f64().unwrap(),
    );
    assert!(
        supers > 0.1 * reads,
        "bulk TCP came as superpackets ({supers} of {reads} reads): {st}"
    );
    let mbit = bulk["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap()
        / 1e6;
    eprintln!(
        "bulk TCP at 10 ms one-way: {mbit:.0} Mbit/s, {supers} superpackets of {reads} reads"
    );
    // The p99 goal (2 ms) is a figure of scripts/bench-link, measured on a
    // quiet machine; here, on a shared CI machine just after bulk TCP, the
    // floor and the median are held as everywhere in this file
    // (assert_delayed), the tail only against a gross fault (small packets
    // held behind superpackets for good).
    std::thread::sleep(Duration::from_secs(1));
    let r = rtt(&lab, &gw, "--proto udp --count 2000 --interval-us 1000");
    assert_delayed(&r, 20.0, "UDP RTT at 1000/s with 10 ms one-way");
    assert!(
        f(&r, "p99_ms") - 20.0 <= 25.0,
        "UDP RTT at 1000/s over 10 ms one-way: {r}"
    );

    // Larger than the MTU: 4000-byte ICMP echoes go as IP fragments.
    let o = lab
        .exec("seed-a-etcd-0", &format!("ping -c 5 -s 4000 -W 3 {gw}"))
        .assert()
        .success();
    let out = stdout(&o);
    assert!(
        out.contains("5 packets received"),
        "ICMP larger than the MTU: {out}"
    );

    // The rate, at the receiver: TCP payload over the intervals after slow
    // start, against the rate times the payload's share of each packet.
    for (rate, mbit) in [("20mbit", 20.0), ("200mbit", 200.0)] {
        lab.ok(&[
            "link",
            "set",
            "seed-a:seed-b",
            "--delay",
            "10ms",
            "--rate",
            rate,
        ]);
        std::thread::sleep(Duration::from_millis(300));
        let v = iperf_to_seed_a(&lab, &gw, "-t 6");
        let mss = v["start"]["tcp_mss_default"].as_f64().unwrap_or(1448.0);
        let steady: Vec<f64> = v["intervals"].as_array().unwrap()[2..]
            .iter()
            .map(|i| i["sum"]["bits_per_second"].as_f64().unwrap() / 1e6)
            .collect();
        let got = steady.iter().sum::<f64>() / steady.len() as f64;
        // Each 1500-byte packet carries `mss` bytes of payload.
        let want = mbit * mss / (mss + 52.0);
        eprintln!("--rate {rate}: {got:.2} Mbit/s of payload, {want:.2} expected");
        assert!(
            (got / want - 1.0).abs() <= 0.02,
            "--rate {rate}: {got:.2} Mbit/s of payload at the receiver, {want:.2} expected \
             (intervals {steady:?})"
        );
    }

    // Loss is drawn per packet: offloads go off, and come back with it gone.
    let offloads_at_loss = |loss: &str| {
        lab.ok(&[
            "link",
            "set",
            "seed-a:seed-b",
            "--delay",
            "10ms",
            "--loss",
            loss,
        ]);
        delayline_stats(&lab)["offload"].clone()
    };
    let o = offloads_at_loss("1%");
    assert_eq!(o["offloads"], false, "{o}");
    assert!(
        o["off_because"]
            .as_str()
            .is_some_and(|s| s.contains("loss")),
        "{o}"
    );
    let o = offloads_at_loss("0");
    assert_eq!(o["offloads"], true, "{o}");
    lab.ok(&["down"]);
}
