//! The virtio-net header a TUN device with IFF_VNET_HDR puts before each
//! packet (`struct virtio_net_hdr` of <linux/virtio_net.h>, 10 bytes, in the
//! host's byte order for a legacy header, little-endian on every machine
//! the lab runs on). With offloads on, one read carries a segmentation
//! offload packet ("superpacket") of up to 64 KiB that the kernel cuts into
//! MTU-sized segments only when it leaves the router; the delay line hands
//! it back with the same header, so the kernel does that cutting, and the
//! delay line charges the link for the segments as they will be on the wire.

/// Bytes of the header before each packet.
pub const LEN: usize = 10;

/// `VIRTIO_NET_HDR_GSO_*`: what kind of superpacket, if any.
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_UDP: u8 = 3;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    /// The header at the start of `buf`, if `buf` is long enough.
    pub fn parse(buf: &[u8]) -> Option<VnetHdr> {
        let b = buf.get(..LEN)?;
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    pub fn to_bytes(self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// Whether this is a superpacket the kernel will cut into segments.
    pub fn is_gso(&self) -> bool {
        self.gso_type & !GSO_ECN != GSO_NONE && self.gso_size > 0
    }
}

/// What one read puts on the wire once cut: (packets, bytes at the IP layer).
/// A plain packet is itself; a superpacket is its payload in `gso_size`
/// pieces, each with a copy of the IP and transport headers. The header
/// lengths are read from the packet itself, not from the virtio header's
/// `hdr_len`, which the kernel only fills as a hint.
pub fn wire_size(hdr: &VnetHdr, ip_packet: &[u8]) -> (u32, usize) {
    let len = ip_packet.len();
    if !hdr.is_gso() {
        return (1, len);
    }
    let Some(headers) = header_len(hdr.gso_type & !GSO_ECN, ip_packet) else {
        return (1, len);
    };
    let payload = len.saturating_sub(headers);
    let mss = usize::from(hdr.gso_size);
    let segments = payload.div_ceil(mss).max(1);
    (segments as u32, payload + segments * headers)
}

/// IP plus transport header bytes of a packet of `gso_type`.
fn header_len(gso_type: u8, p: &[u8]) -> Option<usize> {
    let (ip_len, proto) = match p.first()? >> 4 {
        4 => (usize::from(p[0] & 0x0f) * 4, *p.get(9)?),
        6 => (40, *p.get(6)?),
        _ => return None,
    };
    let l4 = match (gso_type, proto) {
        (GSO_TCPV4 | GSO_TCPV6, 6) => usize::from(p.get(ip_len + 12)? >> 4) * 4,
        (GSO_UDP | GSO_UDP_L4, 17) => 8,
        _ => return None,
    };
    (ip_len >= 20 && l4 >= 8).then_some(ip_len + l4)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4/TCP packet with `options` bytes of TCP options and `payload`.
    fn tcp4(options: usize, payload: usize) -> Vec<u8> {
        let mut p = vec![0u8; 20 + 20 + options + payload];
        p[0] = 0x45;
        p[9] = 6;
        p[20 + 12] = (((20 + options) / 4) as u8) << 4;
        p
    }

    #[test]
    fn the_header_reads_back_what_was_written() {
        let h = VnetHdr {
            flags: 1,
            gso_type: GSO_TCPV4 | GSO_ECN,
            hdr_len: 66,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        };
        assert_eq!(VnetHdr::parse(&h.to_bytes()), Some(h));
        assert!(h.is_gso());
        assert_eq!(VnetHdr::parse(&[0; 9]), None);
        assert!(!VnetHdr::default().is_gso());
    }

    #[test]
    fn a_plain_packet_is_one_packet_of_its_length() {
        let p = tcp4(12, 100);
        assert_eq!(wire_size(&VnetHdr::default(), &p), (1, p.len()));
    }

    #[test]
    fn a_superpacket_is_charged_as_its_segments_on_the_wire() {
        // 45 full segments of 1448 bytes and one of 100, each with 20 + 32
        // bytes of headers (TCP with timestamps), as on a 1500-byte MTU.
        let p = tcp4(12, 45 * 1448 + 100);
        let h = VnetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 1448,
            ..Default::default()
        };
        assert_eq!(wire_size(&h, &p), (46, 45 * 1500 + 152));
        // Exactly full segments: no empty one at the end.
        let p = tcp4(12, 10 * 1448);
        assert_eq!(wire_size(&h, &p), (10, 10 * 1500));
    }

    #[test]
    fn a_superpacket_that_cannot_be_read_counts_as_one() {
        let h = VnetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 1448,
            ..Default::default()
        };
        assert_eq!(wire_size(&h, &[0x45, 0, 0]), (1, 3));
        let mut udp = tcp4(0, 3000);
        udp[9] = 17;
        assert_eq!(wire_size(&h, &udp), (1, udp.len()));
        let h = VnetHdr {
            gso_type: GSO_UDP_L4,
            gso_size: 1000,
            ..Default::default()
        };
        assert_eq!(wire_size(&h, &udp), (4, udp.len() - 28 + 4 * 28));
    }
}
