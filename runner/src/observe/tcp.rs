//! TCP's own view of etcd's peer connections, for runs whose link drops
//! packets: `ss -tin` inside each etcd member and each seed's gateway (the
//! gateway ends the member's connection and opens its own across the WAN,
//! so the WAN leg's congestion window, retransmits and delivery rate are
//! the gateway's sockets', the member's own are its LAN leg's), every two
//! seconds into `tcp.ndjson`. Only connections with a peer port at either
//! end are kept; each end's address is named after the lab's containers
//! where it is one of theirs.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use cpmlab_model::state::LabState;

pub const TCP_FILE: &str = "tcp.ndjson";

/// What `ss -tin` runs as inside a container (iproute2's `ss`, in the lab
/// image): established TCP sockets, numeric, with TCP's internals.
pub const SS_ARGV: &[&str] = &["ss", "-H", "-t", "-i", "-n", "state", "established"];

/// One established connection, as `ss -ti` shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conn {
    pub local: String,
    pub peer: String,
    /// The lab's name for the peer's address (a member, a gateway, the
    /// router), where it is one of the lab's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_is: Option<String>,
    pub recv_q: u64,
    /// Bytes the application wrote that the peer has not acknowledged or
    /// the socket not sent yet.
    pub send_q: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwnd: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
    /// Retransmitted segments over the connection's life (`retrans:a/b`'s b).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrans: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unacked: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_acked: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_received: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_rate_bps: Option<f64>,
}

/// `ss`'s rates: `115Mbps`, `9.8Kbps`, `532bps`.
fn rate_bps(s: &str) -> Option<f64> {
    let s = s.strip_suffix("bps")?;
    let (num, mult) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1e3),
        'M' => (&s[..s.len() - 1], 1e6),
        'G' => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    num.parse::<f64>().ok().map(|n| n * mult)
}

/// The connections of `ss -H -tin state established`: an address line
/// (`Recv-Q Send-Q Local Peer`, with the state column where `ss` prints
/// one) followed by an indented line of TCP's internals.
pub fn parse_ss(text: &str) -> Vec<Conn> {
    let mut out: Vec<Conn> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(char::is_whitespace) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // With or without the state column.
            let f = if f.first().is_some_and(|s| s.parse::<u64>().is_err()) {
                &f[1..]
            } else {
                &f[..]
            };
            if f.len() < 4 {
                continue;
            }
            out.push(Conn {
                recv_q: f[0].parse().unwrap_or(0),
                send_q: f[1].parse().unwrap_or(0),
                local: f[2].to_string(),
                peer: f[3].to_string(),
                ..Conn::default()
            });
            continue;
        }
        let Some(c) = out.last_mut() else { continue };
        let mut words = line.split_whitespace().peekable();
        while let Some(w) = words.next() {
            let (k, v) = w.split_once(':').unwrap_or((w, ""));
            match k {
                "cwnd" => c.cwnd = v.parse().ok(),
                "rtt" => c.rtt_ms = v.split('/').next().and_then(|x| x.parse().ok()),
                "retrans" => c.retrans = v.split('/').nth(1).and_then(|x| x.parse().ok()),
                "lost" => c.lost = v.parse().ok(),
                "unacked" => c.unacked = v.parse().ok(),
                "bytes_acked" => c.bytes_acked = v.parse().ok(),
                "bytes_received" => c.bytes_received = v.parse().ok(),
                "delivery_rate" => c.delivery_rate_bps = words.next().and_then(rate_bps),
                _ => {}
            }
        }
    }
    out
}

fn port_of(addr: &str) -> Option<u16> {
    addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok())
}

fn ip_of(addr: &str) -> Option<Ipv4Addr> {
    addr.rsplit_once(':').and_then(|(h, _)| {
        h.trim_start_matches("[::ffff:")
            .trim_end_matches(']')
            .parse()
            .ok()
    })
}

/// The lab's names for its addresses: members (their own address and the
/// address their peer URL resolves to), gateways and the router.
pub fn names(state: &LabState) -> BTreeMap<Ipv4Addr, String> {
    let mut n = BTreeMap::new();
    for s in &state.seeds {
        n.insert(s.gateway.ip, format!("{} gateway", s.name));
    }
    for m in &state.members {
        n.insert(m.ip, m.name.clone());
        n.entry(m.vip())
            .or_insert_with(|| format!("{} (gateway)", m.name));
    }
    n.insert(state.router.ip, "router".into());
    n
}

/// The peer ports in use: 2380 and each member's own gateway port.
pub fn peer_ports(state: &LabState) -> Vec<u16> {
    let mut p: Vec<u16> = state.members.iter().map(|m| m.peer_port).collect();
    p.push(cpmlab_model::ports::ETCD_PEER_PORT);
    p.sort_unstable();
    p.dedup();
    p
}

/// The connections with a peer port at either end, their peers named.
pub fn peer_conns(text: &str, ports: &[u16], names: &BTreeMap<Ipv4Addr, String>) -> Vec<Conn> {
    parse_ss(text)
        .into_iter()
        .filter(|c| {
            [&c.local, &c.peer]
                .iter()
                .any(|a| port_of(a).is_some_and(|p| ports.contains(&p)))
        })
        .map(|mut c| {
            c.peer_is = ip_of(&c.peer).and_then(|ip| names.get(&ip).cloned());
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SS: &str = "\
0      4194304    172.30.1.11:2380      172.30.1.2:41872\n\
\t cubic wscale:7,7 rto:204 rtt:0.062/0.031 ato:40 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:10 bytes_sent:90112 bytes_acked:90112 bytes_received:2048 segs_out:70 segs_in:40 data_segs_out:68 send 1.87Gbps lastsnd:4 lastrcv:8 lastack:4 pacing_rate 3.74Gbps delivery_rate 1.2Gbps delivered:69 app_limited busy:20ms rcv_space:14480 rcv_ssthresh:64088 minrtt:0.04 snd_wnd:64256\n\
ESTAB 0 131072 172.30.1.2:55000 172.30.2.2:2381\n\
\t cubic wscale:7,7 rto:280 rtt:61.5/3.2 mss:1448 cwnd:4 ssthresh:7 bytes_sent:5000000 bytes_retrans:40000 bytes_acked:4900000 unacked:9 retrans:1/37 lost:2 send 753Kbps delivery_rate 412.5Kbps busy:98000ms\n\
0 0 172.30.1.11:2379 172.30.1.3:50000\n\
\t cubic rtt:0.1/0.05 cwnd:10\n";

    #[test]
    fn ss_lines_read_as_connections_with_tcp_s_internals() {
        let c = parse_ss(SS);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].local, "172.30.1.11:2380");
        assert_eq!(c[0].send_q, 4_194_304);
        assert_eq!(c[0].cwnd, Some(10));
        assert_eq!(c[0].rtt_ms, Some(0.062));
        assert_eq!(c[0].delivery_rate_bps, Some(1.2e9));
        assert_eq!(c[0].retrans, None);
        // With the state column.
        assert_eq!(c[1].peer, "172.30.2.2:2381");
        assert_eq!(c[1].send_q, 131_072);
        assert_eq!(c[1].cwnd, Some(4));
        assert_eq!(c[1].rtt_ms, Some(61.5));
        assert_eq!(c[1].retrans, Some(37));
        assert_eq!(c[1].lost, Some(2));
        assert_eq!(c[1].unacked, Some(9));
        assert_eq!(c[1].bytes_acked, Some(4_900_000));
        assert_eq!(c[1].delivery_rate_bps, Some(412_500.0));
    }

    #[test]
    fn only_peer_port_connections_are_kept_and_their_peers_named() {
        let names = BTreeMap::from([
            ("172.30.2.2".parse().unwrap(), "seed-b gateway".to_string()),
            ("172.30.1.2".parse().unwrap(), "seed-a gateway".to_string()),
        ]);
        let c = peer_conns(SS, &[2380, 2381], &names);
        assert_eq!(c.len(), 2, "the client connection on 2379 is not a peer's");
        assert_eq!(c[0].peer_is.as_deref(), Some("seed-a gateway"));
        assert_eq!(c[1].peer_is.as_deref(), Some("seed-b gateway"));
    }

    #[test]
    fn rates_in_ss_units() {
        assert_eq!(rate_bps("532bps"), Some(532.0));
        assert_eq!(rate_bps("9.5Kbps"), Some(9_500.0));
        assert_eq!(rate_bps("2Gbps"), Some(2e9));
        assert_eq!(rate_bps("fast"), None);
    }
}
