//! `cpmlab agent relay ADDR`: a TCP connection to a lab address carried
//! over this process's stdin and stdout, for a cpmlab that cannot reach the
//! lab's networks itself (a Docker Desktop VM, a remote engine, cpmlab in a
//! container). The host runs it with `docker exec` in the lab's toolbox
//! (provider-docker `relay`): the exec's attached streams are the
//! connection.
//!
//! Once connected it writes one byte, `+`, so that the host can tell a
//! connection from a refusal (which it reports on stderr, exiting 1). It
//! exits when either side ends: stdin's end is the host closing.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Context, Result};

/// What the relay writes first once connected.
pub const CONNECTED: u8 = b'+';

pub fn run(to: SocketAddr, timeout: Duration) -> Result<()> {
    let sock = TcpStream::connect_timeout(&to, timeout).with_context(|| format!("connect {to}"))?;
    let _ = sock.set_nodelay(true);
    let mut out = std::io::stdout().lock();
    out.write_all(&[CONNECTED])?;
    out.flush()?;
    drop(out);
    let mut from_lab = sock.try_clone().context("clone the socket")?;
    // Lab to host: each read written and flushed at once (stdout is line
    // buffered, and the bytes are not lines).
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut out = std::io::stdout().lock();
        loop {
            match from_lab.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if out.write_all(&buf[..n]).and_then(|_| out.flush()).is_err() {
                        break;
                    }
                }
            }
        }
        std::process::exit(0);
    });
    // Host to lab, until the host closes.
    let mut to_lab = sock;
    let mut buf = vec![0u8; 64 * 1024];
    let mut stdin = std::io::stdin().lock();
    loop {
        match stdin.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to_lab.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to_lab.shutdown(Shutdown::Both);
    std::process::exit(0);
}
