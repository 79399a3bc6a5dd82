//! The lab's DNS: a real bind9 server on the clients network, authoritative
//! for the shoot's zone, accepting RFC 2136 updates signed with a TSIG key
//! (as Gardener's local setup does). Here: its configuration, the zone it
//! starts with, the update script for `nsupdate`, and a plain A query.

use std::fmt::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RData, RecordType};

pub const ZONE_FILE: &str = "/var/lib/bind/db.zone";
pub const CONF_FILE: &str = "/etc/bind/named.conf";

#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    #[error("invalid DNS name `{0}`")]
    Name(String),
    #[error("DNS query to {server} failed: {source}")]
    Io {
        server: SocketAddr,
        source: std::io::Error,
    },
    #[error("DNS query to {server} timed out after {after:?}")]
    Timeout { server: SocketAddr, after: Duration },
    #[error("DNS answer from {server} unreadable: {message}")]
    Parse { server: SocketAddr, message: String },
}

/// An A record the lab serves.
#[derive(Debug, Clone)]
pub struct ARecord {
    /// Fully qualified, without the trailing dot.
    pub name: String,
    pub ip: Ipv4Addr,
}

pub fn named_conf(zone: &str, key_name: &str, secret: &str) -> String {
    format!(
        "// cpmlab DNS: authoritative for {zone}, RFC 2136 updates with TSIG\n\
options {{\n  directory \"/var/cache/bind\";\n  listen-on {{ any; }};\n  listen-on-v6 {{ none; }};\n  recursion no;\n  allow-query {{ any; }};\n  dnssec-validation no;\n  pid-file none;\n  notify no;\n}};\n\
key \"{key_name}\" {{\n  algorithm hmac-sha256;\n  secret \"{secret}\";\n}};\n\
zone \"{zone}\" {{\n  type primary;\n  file \"{ZONE_FILE}\";\n  allow-update {{ key \"{key_name}\"; }};\n}};\n"
    )
}

/// A shoot node's resolver: a caching bind9 on the node's loopback that
/// forwards the shoot's zone to the lab's server and keeps each answer for
/// its TTL, as the resolver a real node asks does (a cloud's or
/// systemd-resolved's cache). The node's apiserver-proxy asks it every
/// 5 s (Envoy's DNS refresh); the record's TTL, not Envoy, decides when a
/// new tunnel follows a moved record.
pub fn caching_forwarder_conf(zone: &str, upstream: Ipv4Addr) -> String {
    format!(
        "// cpmlab node resolver: caches {zone} from {upstream} for its TTL\n\
options {{\n  directory \"/tmp\";\n  listen-on {{ 127.0.0.1; }};\n  listen-on-v6 {{ none; }};\n  recursion yes;\n  allow-query {{ localhost; }};\n  dnssec-validation no;\n  pid-file none;\n}};\n\
zone \"{zone}\" {{\n  type forward;\n  forward only;\n  forwarders {{ {upstream}; }};\n}};\n"
    )
}

/// The zone as `up` creates it. `ns_ip` is the DNS server itself.
pub fn zone_file(zone: &str, ttl: u32, ns_ip: Ipv4Addr, records: &[ARecord]) -> String {
    let mut z = String::new();
    let _ = write!(
        z,
        "$ORIGIN {zone}.\n$TTL {ttl}\n@ IN SOA ns.{zone}. hostmaster.{zone}. 1 3600 600 86400 {ttl}\n@ IN NS ns.{zone}.\nns IN A {ns_ip}\n"
    );
    for r in records {
        let _ = writeln!(z, "{}. {ttl} IN A {}", r.name, r.ip);
    }
    z
}

/// An `nsupdate` script that makes each name answer exactly its addresses
/// (none: the name's A records go), all in one update message.
pub fn nsupdate_script(
    server: Ipv4Addr,
    zone: &str,
    key_name: &str,
    secret: &str,
    ttl: u32,
    records: &[(&str, &[Ipv4Addr])],
) -> String {
    let mut s = format!("server {server} 53\nzone {zone}.\nkey hmac-sha256:{key_name} {secret}\n");
    for (name, ips) in records {
        let _ = writeln!(s, "update delete {name}. A");
        for ip in *ips {
            let _ = writeln!(s, "update add {name}. {ttl} A {ip}");
        }
    }
    s.push_str("send\n");
    s
}

/// Asks `server` for the A records of `name`: the addresses and their TTL.
pub async fn query_a(
    server: SocketAddr,
    name: &str,
    timeout: Duration,
) -> Result<(Vec<Ipv4Addr>, Option<u32>), DnsError> {
    let qname = Name::from_ascii(format!("{name}.")).map_err(|_| DnsError::Name(name.into()))?;
    let mut msg = Message::new();
    let id: u16 = (std::process::id() as u16)
        ^ (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u16)
            .unwrap_or(0));
    msg.set_id(id)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(false)
        .add_query(Query::query(qname, RecordType::A));
    let bytes = msg.to_vec().map_err(|e| DnsError::Parse {
        server,
        message: e.to_string(),
    })?;
    let io = |source| DnsError::Io { server, source };
    let parse = |b: &[u8]| {
        Message::from_vec(b).map_err(|e| DnsError::Parse {
            server,
            message: e.to_string(),
        })
    };
    let udp = async {
        let sock = tokio::net::UdpSocket::bind("0.0.0.0:0").await.map_err(io)?;
        sock.connect(server).await.map_err(io)?;
        sock.send(&bytes).await.map_err(io)?;
        let mut buf = vec![0u8; 4096];
        loop {
            let n = sock.recv(&mut buf).await.map_err(io)?;
            let reply = parse(&buf[..n])?;
            if reply.id() == id {
                return Ok(reply);
            }
        }
    };
    // Through a relay (the lab's addresses are not this host's): over TCP
    // (RFC 1035 4.2.2: each message after its two-byte length).
    let tcp = async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = crate::lab_net::connect(server).await.map_err(io)?;
        let len = u16::try_from(bytes.len()).map_err(|_| DnsError::Parse {
            server,
            message: "query too long".into(),
        })?;
        let mut framed = len.to_be_bytes().to_vec();
        framed.extend_from_slice(&bytes);
        s.write_all(&framed).await.map_err(io)?;
        let mut len = [0u8; 2];
        s.read_exact(&mut len).await.map_err(io)?;
        let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
        s.read_exact(&mut buf).await.map_err(io)?;
        parse(&buf)
    };
    let exchange = async {
        if crate::lab_net::relayed() {
            tcp.await
        } else {
            udp.await
        }
    };
    let reply = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| DnsError::Timeout {
            server,
            after: timeout,
        })??;
    let mut ips = Vec::new();
    let mut ttl = None;
    for r in reply.answers() {
        if let RData::A(a) = r.data() {
            ips.push(a.0);
            ttl = Some(r.ttl());
        }
    }
    ips.sort();
    Ok((ips, ttl))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_has_soa_ns_and_records() {
        let z = zone_file(
            "local.cpmlab.test",
            30,
            "10.0.2.3".parse().unwrap(),
            &[ARecord {
                name: "api.local.cpmlab.test".into(),
                ip: "10.0.0.3".parse().unwrap(),
            }],
        );
        assert!(z.contains("$ORIGIN local.cpmlab.test."));
        assert!(z.contains("@ IN SOA ns.local.cpmlab.test."));
        assert!(z.contains("ns IN A 10.0.2.3"));
        assert!(z.contains("api.local.cpmlab.test. 30 IN A 10.0.0.3"));
    }

    #[test]
    fn conf_allows_updates_only_with_the_key() {
        let f = caching_forwarder_conf("z.test", Ipv4Addr::new(10, 0, 0, 2));
        assert!(f.contains("forwarders { 10.0.0.2; }"), "{f}");
        assert!(f.contains("recursion yes"), "{f}");
        let c = named_conf("z.test", "k", "c2VjcmV0");
        assert!(c.contains("allow-update { key \"k\"; };"));
        assert!(c.contains("secret \"c2VjcmV0\";"));
        assert!(c.contains("recursion no;"));
    }

    #[test]
    fn nsupdate_replaces_the_rrset() {
        let s = nsupdate_script(
            "10.0.2.3".parse().unwrap(),
            "z.test",
            "k",
            "c2VjcmV0",
            30,
            &[("api.z.test", &["10.0.1.3".parse().unwrap()][..])],
        );
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[3], "update delete api.z.test. A");
        assert_eq!(lines[4], "update add api.z.test. 30 A 10.0.1.3");
        assert_eq!(lines[5], "send");
    }
}
