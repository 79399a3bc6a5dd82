//! IPv4 addressing of the lab: a pool carved into /24 networks, and the fixed
//! host numbers every role gets inside its network.

use std::net::Ipv4Addr;

/// Host numbers inside each lab /24. `.1` is the Docker bridge (the host).
pub mod host {
    /// The wan router's leg on every network.
    pub const ROUTER: u8 = 2;
    /// A seed's ingress gateway.
    pub const GATEWAY: u8 = 3;
    /// The DNS server on the clients network.
    pub const DNS: u8 = 3;
    /// The toolbox client on the clients network.
    pub const TOOLBOX: u8 = 4;
    /// First etcd member; member `i` is `ETCD + i`.
    pub const ETCD: u8 = 10;
    /// First API server replica; replica `i` is `APISERVER + i`.
    pub const APISERVER: u8 = 20;
    /// Member `i`'s own address on its seed's gateway (`MEMBER_VIP + i`):
    /// a load balancer per member, as the GEP's `additionalAdvertisePeerUrls`
    /// show. etcd compares peer URLs by resolved address when a member joins
    /// an existing cluster, so members must not share one.
    pub const MEMBER_VIP: u8 = 30;
    /// A seed's gardenlet, on the seed's network.
    pub const GARDENLET: u8 = 6;
    /// The garden's etcd, on the garden network.
    pub const GARDEN_ETCD: u8 = 10;
    /// The garden's kube-apiserver, on the garden network.
    pub const GARDEN_KUBE_APISERVER: u8 = 11;
    /// gardener-apiserver, on the garden network.
    pub const GARDENER_APISERVER: u8 = 12;
}

/// An IPv4 /24 network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Net24(pub Ipv4Addr);

impl Net24 {
    pub fn host(&self, n: u8) -> Ipv4Addr {
        let o = self.0.octets();
        Ipv4Addr::new(o[0], o[1], o[2], n)
    }
    pub fn cidr(&self) -> String {
        format!("{}/24", self.0)
    }
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.0.octets()[..3] == ip.octets()[..3]
    }
}

/// A pool of addresses the lab's networks are carved from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool {
    base: u32,
    prefix: u8,
}

/// A CIDR in Docker's form, for overlap checks against existing networks.
pub fn parse_cidr(s: &str) -> Option<(u32, u8)> {
    let (ip, p) = s.split_once('/')?;
    let ip: Ipv4Addr = ip.parse().ok()?;
    let p: u8 = p.parse().ok()?;
    (p <= 32).then_some((u32::from(ip), p))
}

fn mask(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    }
}

fn overlaps(a: (u32, u8), b: (u32, u8)) -> bool {
    let p = a.1.min(b.1);
    a.0 & mask(p) == b.0 & mask(p)
}

impl Pool {
    pub fn parse(s: &str) -> Result<Pool, String> {
        let (base, prefix) =
            parse_cidr(s).ok_or_else(|| format!("`{s}` is not an IPv4 CIDR like 10.213.0.0/16"))?;
        if prefix > 22 {
            return Err(format!(
                "`{s}` is too small: the pool must hold at least four /24 networks (prefix /22 or shorter)"
            ));
        }
        if base & !mask(prefix) != 0 {
            return Err(format!("`{s}` has host bits set"));
        }
        Ok(Pool { base, prefix })
    }

    /// Every /24 of the pool, in order.
    pub fn nets(&self) -> impl Iterator<Item = Net24> + '_ {
        let count = 1u32 << (24 - self.prefix);
        (0..count).map(move |i| Net24(Ipv4Addr::from(self.base + (i << 8))))
    }

    /// `n` /24s of the pool that overlap none of `taken` (Docker CIDRs),
    /// the lowest first.
    pub fn allocate(&self, n: usize, taken: &[String]) -> Option<Vec<Net24>> {
        self.allocate_from(n, taken, 0)
    }

    /// `allocate`, reading the pool from its `start`th /24 on and wrapping
    /// round: two labs that raced for the same lowest free /24s start apart
    /// on their next attempt (each from its own `start`), instead of
    /// taking the same ones again.
    pub fn allocate_from(&self, n: usize, taken: &[String], start: usize) -> Option<Vec<Net24>> {
        let taken: Vec<(u32, u8)> = taken.iter().filter_map(|s| parse_cidr(s)).collect();
        let mut nets: Vec<Net24> = self.nets().collect();
        let len = nets.len();
        nets.rotate_left(start % len);
        let free: Vec<Net24> = nets
            .into_iter()
            .filter(|net| !taken.iter().any(|t| overlaps(*t, (u32::from(net.0), 24))))
            .take(n)
            .collect();
        (free.len() == n).then_some(free)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_skips_taken_and_overlapping() {
        let pool = Pool::parse("10.213.0.0/16").unwrap();
        let got = pool
            .allocate(
                3,
                &[
                    "10.213.0.0/24".into(),
                    "10.213.2.0/23".into(),
                    "172.17.0.0/16".into(),
                ],
            )
            .unwrap();
        let got: Vec<String> = got.iter().map(|n| n.cidr()).collect();
        assert_eq!(got, ["10.213.1.0/24", "10.213.4.0/24", "10.213.5.0/24"]);
        assert!(pool.allocate(3, &["10.0.0.0/8".into()]).is_none());
    }

    #[test]
    fn allocation_from_an_offset_wraps_round_the_pool() {
        let pool = Pool::parse("10.213.0.0/22").unwrap();
        let cidrs = |got: Option<Vec<Net24>>| -> Vec<String> {
            got.unwrap().iter().map(|n| n.cidr()).collect()
        };
        assert_eq!(
            cidrs(pool.allocate_from(2, &["10.213.3.0/24".into()], 2)),
            ["10.213.2.0/24", "10.213.0.0/24"]
        );
        // The offset is taken modulo the pool's four /24s.
        assert_eq!(cidrs(pool.allocate_from(1, &[], 5)), ["10.213.1.0/24"]);
        assert!(pool
            .allocate_from(2, &["10.213.0.0/23".into(), "10.213.3.0/24".into()], 1)
            .is_none());
    }

    #[test]
    fn hosts_and_bad_pools() {
        let n = Net24("10.1.2.0".parse().unwrap());
        assert_eq!(n.host(host::ROUTER).to_string(), "10.1.2.2");
        assert!(n.contains("10.1.2.77".parse().unwrap()));
        assert!(!n.contains("10.1.3.77".parse().unwrap()));
        assert!(Pool::parse("10.0.0.0/23").is_err());
        assert!(Pool::parse("10.0.0.1/16").is_err());
        assert!(Pool::parse("banana").is_err());
        assert_eq!(Pool::parse("10.0.0.0/22").unwrap().nets().count(), 4);
    }
}
