//! `cpmlab agent echo`: echoes UDP datagrams and TCP bytes back, the far end
//! of `cpmlab agent rtt`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};

use anyhow::{Context, Result};

pub fn run(listen: SocketAddr) -> Result<()> {
    let udp = UdpSocket::bind(listen).with_context(|| format!("bind udp {listen}"))?;
    let tcp = TcpListener::bind(listen).with_context(|| format!("bind tcp {listen}"))?;
    eprintln!("echo on udp+tcp {listen}");
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok((n, from)) = udp.recv_from(&mut buf) {
            let _ = udp.send_to(&buf[..n], from);
        }
    });
    for conn in tcp.incoming() {
        let Ok(mut conn) = conn else { continue };
        let _ = conn.set_nodelay(true);
        std::thread::spawn(move || {
            let mut buf = [0u8; 16384];
            while let Ok(n) = conn.read(&mut buf) {
                if n == 0 || conn.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        });
    }
    Ok(())
}
