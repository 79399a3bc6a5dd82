//! What the wan router runs to put link profiles in force: iptables rules
//! for partitions (any kernel), and tc netem per destination with
//! classification by source network, as chaos tools build it (where the
//! kernel has sch_netem). Pure functions from the link table to scripts.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::profile::{fmt_duration, LinkProfile};
use crate::state::LabState;

/// The router's own chain for partitions, jumped to first from FORWARD.
pub const CHAIN: &str = "CPMLAB-LINK";

/// Router interface per network name, from `ip -o -4 addr show` output.
pub fn interfaces(state: &LabState, ip_addr_output: &str) -> BTreeMap<String, String> {
    let mut by_ip = BTreeMap::new();
    for line in ip_addr_output.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let (Some(ifname), Some(pos)) = (f.get(1), f.iter().position(|w| *w == "inet")) {
            let ifname = ifname.trim_end_matches(':');
            // The names go into the router's tc and ip lines: plain ones only.
            let plain = !ifname.is_empty()
                && ifname
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
            if let (true, Some(addr)) = (plain, f.get(pos + 1).and_then(|a| a.split('/').next())) {
                by_ip.insert(addr.to_string(), ifname.to_string());
            }
        }
    }
    state
        .networks
        .iter()
        .filter_map(|n| {
            by_ip
                .get(&n.router_ip.to_string())
                .map(|i| (n.name.clone(), i.clone()))
        })
        .collect()
}

fn subnet(state: &LabState, net: &str) -> String {
    state
        .network(net)
        .map(|n| n.subnet.cidr())
        .unwrap_or_else(|| panic!("network {net} is in the state"))
}

/// Rebuilds the router's chain from the link table: a DROP per partitioned
/// direction, and a random drop (iptables' `statistic` match, nftables'
/// `numgen random`) per direction whose loss the kernel applies. A packet
/// the delay line holds crosses FORWARD twice, into its TUN and back out;
/// the loss matches the way back (`-i` the TUN): on the way in a TCP
/// sender's segments may still be one superpacket (veth passes them
/// unsegmented), while the delay line, which keeps offloads off on a link
/// with loss, hands every segment back on its own. So a kernel's loss
/// needs the delay line (`apply` refuses it with netem).
pub fn partition_script(state: &LabState, links: &BTreeMap<String, LinkProfile>) -> String {
    let mut s = format!(
        "set -e\niptables -N {CHAIN} 2>/dev/null || true\n\
         iptables -C FORWARD -j {CHAIN} 2>/dev/null || iptables -I FORWARD 1 -j {CHAIN}\n\
         iptables -F {CHAIN}\n"
    );
    for (k, p) in links {
        let Some((src, dst)) = k.split_once('>') else {
            continue;
        };
        if p.partition {
            let _ = writeln!(
                s,
                "iptables -A {CHAIN} -s {} -d {} -j DROP",
                subnet(state, src),
                subnet(state, dst)
            );
        } else if p.kernel_loss_pct() > 0.0 {
            let _ = writeln!(
                s,
                "iptables -A {CHAIN} -s {} -d {} -i {} -m statistic --mode random --probability {:.6} -j DROP",
                subnet(state, src),
                subnet(state, dst),
                super::DELAYLINE_DEV,
                p.kernel_loss_pct() / 100.0
            );
        }
    }
    s
}

/// The netem arguments of a profile (`delay 25ms 2ms distribution normal loss 0.5%`).
pub fn netem_args(p: &LinkProfile) -> String {
    let mut a = format!("delay {}", fmt_duration(p.delay));
    if !p.jitter.is_zero() {
        let _ = write!(
            a,
            " {} distribution {}",
            fmt_duration(p.jitter),
            p.distribution.as_str()
        );
    }
    if p.shaper_loss_pct() > 0.0 {
        let _ = write!(a, " loss {}%", p.shaper_loss_pct());
    }
    // A deep queue: netem's default (1000 packets) drops at high rate x delay.
    a.push_str(" limit 100000");
    a
}

/// tc for every router leg: an htb root whose default class passes traffic
/// untouched, and per shaped source network a class (rate) with a netem leaf,
/// selected by a u32 match on the source subnet. Legs with nothing to shape
/// get their root qdisc removed.
pub fn netem_script(
    state: &LabState,
    ifaces: &BTreeMap<String, String>,
    links: &BTreeMap<String, LinkProfile>,
) -> String {
    let mut s = String::new();
    for (dst, ifname) in ifaces {
        let shaped: Vec<(&str, &LinkProfile)> = links
            .iter()
            .filter_map(|(k, p)| {
                let (src, d) = k.split_once('>')?;
                (d == dst && p.shapes()).then_some((src, p))
            })
            .collect();
        let _ = writeln!(s, "tc qdisc del dev {ifname} root 2>/dev/null || true");
        if shaped.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "tc qdisc add dev {ifname} root handle 1: htb default 1\n\
             tc class add dev {ifname} parent 1: classid 1:1 htb rate 100gbit"
        );
        for (i, (src, p)) in shaped.iter().enumerate() {
            let class = 10 + i;
            let rate = p
                .rate_bps
                .map(super::profile::fmt_rate)
                .unwrap_or_else(|| "100gbit".into());
            let _ = writeln!(
                s,
                "tc class add dev {ifname} parent 1: classid 1:{class} htb rate {rate} ceil {rate}\n\
                 tc qdisc add dev {ifname} parent 1:{class} handle {class}: netem {}\n\
                 tc filter add dev {ifname} protocol ip parent 1: prio 1 u32 match ip src {} flowid 1:{class}",
                netem_args(p),
                subnet(state, src)
            );
        }
    }
    s
}

/// Policy routing that sends every packet forwarded between lab networks
/// through the delay line's TUN device (`on`), or takes it out (`!on`).
/// Packets the delay line writes back arrive on the TUN, match no rule and
/// are forwarded by the main table.
pub fn divert_script(state: &LabState, ifaces: &BTreeMap<String, String>, on: bool) -> String {
    let dev = super::DELAYLINE_DEV;
    let mut s = String::new();
    for n in &state.networks {
        let _ = writeln!(
            s,
            "ip route replace {} dev {dev} table {TABLE}",
            n.subnet.cidr()
        );
    }
    for leg in ifaces.values() {
        let _ = writeln!(
            s,
            "while ip rule del iif {leg} lookup {TABLE} 2>/dev/null; do :; done"
        );
        if on {
            let _ = writeln!(s, "ip rule add iif {leg} lookup {TABLE} prio 100");
        }
    }
    s
}

/// The routing table the diversion uses.
pub const TABLE: u32 = 100;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::profile::{key, LossBy};
    use std::time::Duration;

    const IP_ADDR: &str = "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n\
        2: eth0    inet 10.213.2.2/24 brd 10.213.2.255 scope global eth0\\       valid_lft forever\n\
        3: eth1    inet 10.213.1.2/24 brd 10.213.1.255 scope global eth1\\       valid_lft forever\n\
        4: eth2    inet 10.213.0.2/24 brd 10.213.0.255 scope global eth2\\       valid_lft forever\n";

    #[test]
    fn diversion_sends_each_leg_to_the_tun_and_back() {
        let s = crate::plan::sample_state();
        let ifaces = interfaces(&s, IP_ADDR);
        let on = divert_script(&s, &ifaces, true);
        assert!(on.contains("ip route replace 10.213.1.0/24 dev dl0 table 100"));
        for leg in ["eth0", "eth1", "eth2"] {
            assert!(
                on.contains(&format!("ip rule add iif {leg} lookup 100 prio 100")),
                "{on}"
            );
        }
        assert!(
            !on.contains("iif dl0"),
            "packets from the TUN must use the main table"
        );
        let off = divert_script(&s, &ifaces, false);
        assert!(!off.contains("ip rule add"));
        assert!(off.contains("ip rule del iif eth1 lookup 100"));
    }

    #[test]
    fn router_legs_are_found_by_address() {
        let s = crate::plan::sample_state();
        let m = interfaces(&s, IP_ADDR);
        assert_eq!(m.get("seed-a").map(String::as_str), Some("eth2"));
        assert_eq!(m.get("seed-b").map(String::as_str), Some("eth1"));
        assert_eq!(m.get("clients").map(String::as_str), Some("eth0"));
    }

    #[test]
    fn partition_drops_each_partitioned_direction() {
        let s = crate::plan::sample_state();
        let mut links = BTreeMap::new();
        links.insert(
            key("seed-a", "seed-b"),
            LinkProfile {
                partition: true,
                ..Default::default()
            },
        );
        links.insert(key("seed-b", "seed-a"), LinkProfile::default());
        let sc = partition_script(&s, &links);
        assert!(sc.contains("iptables -F CPMLAB-LINK"));
        assert!(sc.contains("iptables -A CPMLAB-LINK -s 10.213.0.0/24 -d 10.213.1.0/24 -j DROP"));
        assert!(!sc.contains("-s 10.213.1.0/24 -d 10.213.0.0/24"));
        // Healing everything leaves only the flush.
        assert!(!partition_script(&s, &BTreeMap::new()).contains("-j DROP"));
    }

    #[test]
    fn the_kernels_loss_drops_what_the_delay_line_hands_back() {
        let s = crate::plan::sample_state();
        let lossy = |by| LinkProfile {
            loss_pct: 0.5,
            loss_by: by,
            ..Default::default()
        };
        let links = BTreeMap::from([(key("seed-a", "seed-b"), lossy(LossBy::Kernel))]);
        let sc = partition_script(&s, &links);
        assert!(
            sc.contains("iptables -A CPMLAB-LINK -s 10.213.0.0/24 -d 10.213.1.0/24 -i dl0 -m statistic --mode random --probability 0.005000 -j DROP"),
            "{sc}"
        );
        // The shaper's loss is no rule of the kernel's, and netem carries it.
        let links = BTreeMap::from([(key("seed-a", "seed-b"), lossy(LossBy::Shaper))]);
        assert!(!partition_script(&s, &links).contains("statistic"));
        assert!(netem_args(&lossy(LossBy::Shaper)).contains("loss 0.5%"));
        assert!(!netem_args(&lossy(LossBy::Kernel)).contains("loss"));
    }

    #[test]
    fn netem_classifies_by_source_on_the_destination_leg() {
        let s = crate::plan::sample_state();
        let ifaces = interfaces(&s, IP_ADDR);
        let mut links = BTreeMap::new();
        links.insert(
            key("seed-a", "seed-b"),
            LinkProfile {
                delay: Duration::from_millis(25),
                jitter: Duration::from_millis(2),
                loss_pct: 0.5,
                rate_bps: Some(100_000_000),
                ..Default::default()
            },
        );
        let sc = netem_script(&s, &ifaces, &links);
        assert!(
            sc.contains("tc qdisc add dev eth1 root handle 1: htb default 1"),
            "{sc}"
        );
        assert!(sc.contains(
            "tc class add dev eth1 parent 1: classid 1:10 htb rate 100mbit ceil 100mbit"
        ));
        assert!(sc.contains(
            "tc qdisc add dev eth1 parent 1:10 handle 10: netem delay 25ms 2ms distribution normal loss 0.5% limit 100000"
        ), "{sc}");
        assert!(sc.contains("u32 match ip src 10.213.0.0/24 flowid 1:10"));
        // Other legs are reset, not shaped.
        assert!(sc.contains("tc qdisc del dev eth2 root"));
        assert!(!sc.contains("tc qdisc add dev eth2"));
    }

    /// What the router's scripts may contain besides letters, digits and
    /// spaces: no quote, expansion, glob or grouping can come from a value.
    fn plain_shell(script: &str) -> Result<(), char> {
        match script
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || " \n./:%_-=>|&;!".contains(*c)))
        {
            Some(c) => Err(c),
            None => Ok(()),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// Link profiles come from users' files; the scripts the router runs
        /// are built from their typed values (durations, percentages, rates,
        /// an enum), never from the text that was written.
        #[test]
        fn router_scripts_carry_values_not_text(
            delay_us in 0u64..100_000_000,
            jitter_us in 0u64..10_000_000,
            dist in 0usize..4,
            loss in 0.0f64..=100.0,
            rate in proptest::option::of(1u64..1_000_000_000_000),
            partition: bool,
            by_kernel: bool,
        ) {
            use crate::link::profile::Distribution;
            let s = crate::plan::sample_state();
            let ifaces = interfaces(&s, IP_ADDR);
            let p = LinkProfile {
                delay: Duration::from_micros(delay_us),
                jitter: Duration::from_micros(jitter_us),
                distribution: [
                    Distribution::Normal,
                    Distribution::Uniform,
                    Distribution::Pareto,
                    Distribution::Paretonormal,
                ][dist],
                loss_pct: loss,
                loss_by: if by_kernel { LossBy::Kernel } else { LossBy::Shaper },
                rate_bps: rate,
                partition,
            };
            let links = BTreeMap::from([
                (key("seed-a", "seed-b"), p),
                (key("clients", "seed-a"), p),
            ]);
            for script in [
                netem_script(&s, &ifaces, &links),
                divert_script(&s, &ifaces, true),
                partition_script(&s, &links),
            ] {
                proptest::prop_assert_eq!(plain_shell(&script), Ok(()), "{}", script);
            }
        }
    }

    #[test]
    fn an_interface_name_that_is_not_plain_is_not_used() {
        let s = crate::plan::sample_state();
        let out = "2: e$(reboot)    inet 10.213.2.2/24 scope global x\n";
        assert!(interfaces(&s, out).is_empty());
    }
}
