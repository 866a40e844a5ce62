//! The listening sockets every server of ours opens (the MCP server, the OpenAI bridge, the
//! embedded model): bound with a deep accept queue, so a burst of clients that each open a
//! connection is queued at once instead of waiting for the kernel to send a SYN again.

use tokio::net::TcpListener;

/// Connections the kernel may queue for the accept loop. Tokio's `TcpListener::bind` asks for
/// 128 (`ss -ltn` shows it); clients that open a connection per request (the Python SDK's,
/// rmcp's default) in their hundreds overflow that in a burst, and a dropped SYN is sent
/// again only after a second: `bench load` with 1,000 sessions had p99s of 1–2 s. The kernel
/// caps the queue at `net.core.somaxconn` (4,096 by default since Linux 5.4).
const LISTEN_BACKLOG: u32 = 4096;

/// Binds `host:port` for a server, with [`LISTEN_BACKLOG`] (and `SO_REUSEADDR` on Unix,
/// as `TcpListener::bind` sets it); each address `host` resolves to is tried in turn.
pub async fn listen(host: &str, port: u16) -> std::io::Result<TcpListener> {
    let mut last = None;
    let addrs = tokio::net::lookup_host((host, port)).await.map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("the name {host} does not resolve ({e})"),
        )
    })?;
    for addr in addrs {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        #[cfg(unix)]
        socket.set_reuseaddr(true)?;
        match socket
            .bind(addr)
            .and_then(|()| socket.listen(LISTEN_BACKLOG))
        {
            Ok(listener) => return Ok(listener),
            Err(err) => last = Some(err),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{host} resolves to no address"),
        )
    }))
}

/// What to do about a failed [`listen`], by what the system said: only a port in use is
/// another process's doing (`who`: another turnscope, another bridge), and only then does
/// another port help.
pub fn bind_advice(source: &std::io::Error, who: &str) -> String {
    match source.kind() {
        std::io::ErrorKind::AddrInUse => {
            format!("is another {who} running there? Pick another --port (0 = any free port)")
        }
        std::io::ErrorKind::AddrNotAvailable => "that address is not this machine's: give \
             --host one of its addresses (127.0.0.1, or 0.0.0.0 for all, with --auth-token)"
            .into(),
        std::io::ErrorKind::InvalidInput => {
            "give --host an IP address or a name this machine resolves (127.0.0.1, localhost)"
                .into()
        }
        std::io::ErrorKind::PermissionDenied => {
            "ports below 1024 need privileges: pick another --port (0 = any free port)".into()
        }
        _ => "pick another --host or --port (0 = any free port)".into(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::net::TcpStream;

    use super::*;

    #[tokio::test]
    async fn a_burst_of_connections_beyond_tokios_backlog_is_queued_at_once() {
        // Tokio's own `bind` queues 128: the connections past that would wait a second for
        // their SYN to be sent again, past the deadline below.
        const BURST: usize = 1500;
        let somaxconn = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok());
        if somaxconn.is_some_and(|max| max < BURST) {
            eprintln!(
                "net.core.somaxconn is {somaxconn:?}: the kernel caps the backlog below {BURST}"
            );
            return;
        }
        let listener = listen("127.0.0.1", 0).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connects = (0..BURST)
            .map(|_| tokio::time::timeout(Duration::from_millis(800), TcpStream::connect(addr)));
        let streams = futures::future::join_all(connects).await;
        let queued = streams.iter().filter(|s| matches!(s, Ok(Ok(_)))).count();
        assert_eq!(
            queued, BURST,
            "connections queued before anything was accepted"
        );
    }

    #[tokio::test]
    async fn listen_says_why_when_the_port_is_taken() {
        let taken = listen("127.0.0.1", 0).await.unwrap();
        let port = taken.local_addr().unwrap().port();
        let err = listen("127.0.0.1", port).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse, "{err}");
    }
}
