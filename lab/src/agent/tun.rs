//! A TUN device (IPv4 packets, no packet-info header), non-blocking, with
//! a virtio-net header before each packet so the kernel can hand over and
//! take back segmentation offload packets (see `vnet_hdr`).

use std::ffi::{c_int, c_short};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{open, OFlag};
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::ioctl::ioctl_num_type;
use nix::sys::stat::Mode;
use nix::sys::time::TimeSpec;

/// `_IOW('T', 202, int)` from <linux/if_tun.h>: 0x400454ca.
const TUNSETIFF: ioctl_num_type = nix::request_code_write!(b'T', 202, size_of::<c_int>());
const IFF_TUN: c_short = 0x0001;
const IFF_NO_PI: c_short = 0x1000;
const IFF_VNET_HDR: c_short = 0x4000;
/// `_IOW('T', 208, unsigned int)`: the offloads this end takes; the value is
/// passed as the argument itself.
const TUNSETOFFLOAD: ioctl_num_type = nix::request_code_write!(b'T', 208, size_of::<c_int>());
/// `TUN_F_*`: checksums left to the kernel, TCP segmentation (v4, v6, ECN).
const TUN_F_CSUM: c_int = 0x01;
const TUN_F_TSO4: c_int = 0x02;
const TUN_F_TSO6: c_int = 0x04;
const TUN_F_TSO_ECN: c_int = 0x08;
const IFNAMSIZ: usize = 16;

#[repr(C)]
struct IfReq {
    name: [u8; IFNAMSIZ],
    flags: c_short,
    _pad: [u8; 22],
}

// The kernel reads a whole `struct ifreq`, though the request code encodes
// the size of an int, so the "bad" variant takes the code as it is.
nix::ioctl_write_ptr_bad!(tun_set_iff, TUNSETIFF, IfReq);
nix::ioctl_write_int_bad!(tun_set_offload, TUNSETOFFLOAD);

pub struct Tun {
    fd: OwnedFd,
    pub name: String,
}

impl Tun {
    /// Creates (or attaches to) TUN device `name`, every packet read and
    /// written behind a `vnet_hdr::LEN`-byte virtio-net header. Offloads
    /// start off (`set_offloads`). Needs CAP_NET_ADMIN and /dev/net/tun.
    pub fn open(name: &str) -> io::Result<Tun> {
        if name.len() >= IFNAMSIZ {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "name too long"));
        }
        let fd = open(
            "/dev/net/tun",
            OFlag::O_RDWR | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let mut req = IfReq {
            name: [0; IFNAMSIZ],
            flags: IFF_TUN | IFF_NO_PI | IFF_VNET_HDR,
            _pad: [0; 22],
        };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: `fd` is open and `req` is a valid `struct ifreq` that
        // outlives the call.
        unsafe { tun_set_iff(fd.as_raw_fd(), &req) }?;
        Ok(Tun {
            fd,
            name: name.to_string(),
        })
    }

    /// Whether the kernel may hand this device superpackets (TCP
    /// segmentation offload, checksums left partial) instead of cutting
    /// them to the MTU first. Takes effect for packets routed from now on.
    pub fn set_offloads(&self, on: bool) -> io::Result<()> {
        let flags = if on {
            TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN
        } else {
            0
        };
        // SAFETY: `fd` is an open TUN device; the request takes an integer.
        unsafe { tun_set_offload(self.fd.as_raw_fd(), flags) }?;
        Ok(())
    }

    /// One packet (virtio-net header first), or `Ok(None)` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match nix::unistd::read(&self.fd, buf) {
            Ok(n) => Ok(Some(n)),
            Err(Errno::EAGAIN) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    pub fn send(&self, pkt: &[u8]) -> io::Result<()> {
        nix::unistd::write(&self.fd, pkt)?;
        Ok(())
    }

    /// Waits until a packet can be read or `timeout` passes (ns precision).
    pub fn wait(&self, timeout: std::time::Duration) -> io::Result<bool> {
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        match ppoll(&mut fds, Some(TimeSpec::from_duration(timeout)), None) {
            Ok(n) => Ok(n > 0),
            Err(Errno::EINTR) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

/// Asks the kernel for timer precision instead of the default 50 µs slack.
pub fn tight_timers() {
    let _ = nix::sys::prctl::set_timerslack(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_codes_are_the_kernels() {
        assert_eq!(TUNSETIFF, 0x4004_54ca);
        assert_eq!(TUNSETOFFLOAD, 0x4004_54d0);
    }

    #[test]
    fn ifreq_has_the_kernels_size() {
        assert_eq!(size_of::<IfReq>(), 40);
    }
}
