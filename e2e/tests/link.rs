//! Link shaping against real Docker: partitions in the wan router (every
//! kernel), tc netem where the kernel has it, and bad input changing nothing.

mod common;

use common::*;
use serde_json::Value;

fn links(lab: &Lab) -> Value {
    let o = lab.ok(&["link", "show", "-o", "json"]);
    serde_json::from_slice(&o.stdout).unwrap()
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

/// A TCP connect from a seed-a member to seed-b's gateway (peer port).
fn seed_a_reaches_seed_b(lab: &Lab, seed_b_gw: &str) -> bool {
    lab.exec(
        "seed-a-etcd-0",
        &format!("timeout 3 nc -w 2 {seed_b_gw} 2380 </dev/null"),
    )
    .status
    .success()
}

#[test]
fn partition_and_heal() {
    if !docker_or_skip("partition_and_heal") {
        return;
    }
    let lab = Lab::new("part");
    lab.ok(&["up"]);
    let s = lab.status();
    let gw_b = s["seeds"][1]["gateway_ip"].as_str().unwrap().to_string();
    assert!(seed_a_reaches_seed_b(&lab, &gw_b));

    lab.ok(&["link", "partition", "seed-a:seed-b"]);
    let v = links(&lab);
    assert_eq!(summary(&v, "seed-a", "seed-b"), "partitioned", "{v:#}");
    assert_eq!(summary(&v, "seed-b", "seed-a"), "partitioned", "{v:#}");
    assert_eq!(summary(&v, "clients", "seed-a"), "clear", "{v:#}");
    assert!(
        !seed_a_reaches_seed_b(&lab, &gw_b),
        "partitioned seeds must not connect"
    );
    // The clients keep reaching seed-a: the partition is per pair.
    let o = lab.exec(
        "toolbox",
        &etcdctl("seed-a-etcd-0.local.cpmlab.test", true, "endpoint health"),
    );
    assert!(
        o.status.success(),
        "clients:seed-a is not partitioned: {}",
        text(&o)
    );

    lab.ok(&["link", "heal", "seed-a:seed-b"]);
    assert_eq!(summary(&links(&lab), "seed-a", "seed-b"), "clear");
    assert!(seed_a_reaches_seed_b(&lab, &gw_b), "heal restores the link");

    // One direction only.
    lab.ok(&[
        "link",
        "partition",
        "seed-b:seed-a",
        "--direction",
        "a-to-b",
    ]);
    let v = links(&lab);
    assert_eq!(summary(&v, "seed-b", "seed-a"), "partitioned", "{v:#}");
    assert_eq!(summary(&v, "seed-a", "seed-b"), "clear", "{v:#}");
    lab.ok(&["link", "clear"]);
    assert_eq!(summary(&links(&lab), "seed-b", "seed-a"), "clear");
    assert!(seed_a_reaches_seed_b(&lab, &gw_b));

    // Bad input: exit 2 and nothing changes.
    lab.ok(&["link", "partition", "clients:seed-b"]);
    let before = links(&lab);
    for args in [
        vec!["link", "set", "seed-a:seed-b", "--delay", "-5ms"],
        vec!["link", "set", "seed-a:seed-b", "--delay", "soon"],
        vec!["link", "set", "seed-a:seed-b", "--loss", "120%"],
        vec!["link", "set", "seed-a:nowhere", "--delay", "5ms"],
        vec!["link", "partition", "seed-a"],
    ] {
        let o = lab.cpmlab(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert_eq!(links(&lab), before, "{args:?} changed the links");
    }
    let o = lab.exec("router", "iptables -S CPMLAB-LINK");
    let rules = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(
        rules.matches("-j DROP").count(),
        2,
        "only clients<->seed-b dropped: {rules}"
    );
    lab.ok(&["down"]);
}

/// tc netem in the router; runs only where the kernel has sch_netem.
#[test]
fn netem_backend_shapes_where_the_kernel_has_netem() {
    if !docker_or_skip("netem_backend_shapes_where_the_kernel_has_netem") {
        return;
    }
    let lab = Lab::new("netem");
    let o = lab.ok(&["doctor", "-o", "json"]);
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    if d["link_backend"] != "netem" {
        eprintln!("NOT RUN: this kernel has no sch_netem (doctor: {}); the netem backend is covered by unit tests here", d["link_backend"]);
        // Without netem, shaping is refused clearly (exit 3) and nothing changes.
        lab.ok(&["up"]);
        let o = lab.cpmlab(&["link", "set", "seed-a:seed-b", "--delay", "25ms"]);
        assert_eq!(o.status.code(), Some(3), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("fix:"),
            "{}",
            text(&o)
        );
        assert_eq!(summary(&links(&lab), "seed-a", "seed-b"), "clear");
        lab.ok(&["down"]);
        return;
    }
    lab.ok(&["up"]);
    lab.ok(&[
        "link",
        "set",
        "seed-a:seed-b",
        "--delay",
        "25ms",
        "--backend",
        "netem",
    ]);
    let s = lab.status();
    let gw_b = s["seeds"][1]["gateway_ip"].as_str().unwrap().to_string();
    let o = lab.exec("seed-a-etcd-0", &format!("ping -c 5 -q {gw_b}"));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let avg: f64 = out
        .split('=')
        .next_back()
        .and_then(|t| t.split('/').nth(1))
        .and_then(|x| x.trim().parse().ok())
        .unwrap_or(0.0);
    assert!(
        (45.0..70.0).contains(&avg),
        "RTT {avg} ms with 25 ms one-way: {out}"
    );
    lab.ok(&["down"]);
}
