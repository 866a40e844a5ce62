//! Slow clients on every protocol, on real sockets: a socket that sends nothing,
//! a first byte and then nothing, the HTTP/2 preface and then nothing, an HTTP/2 peer that
//! never answers pings, and more connections than `server.max_connections`.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use turnscope::app::App;
use turnscope::config::Config;

/// Hang guard: far beyond the deadlines under test, only there so a regression fails
/// instead of hanging.
const GUARD: Duration = Duration::from_secs(30);
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS frame (length 0, type 4, no flags, stream 0).
const EMPTY_SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];

/// An app whose connections get half a second for their first bytes and heads.
async fn app(tweak: impl FnOnce(&mut Config)) -> App {
    crate::support::app::app(|c| {
        c.server.header_timeout_seconds = 0.5;
        tweak(c)
    })
    .await
}

/// Reads until the server closes the connection; returns what it sent.
async fn read_to_close(tcp: &mut TcpStream) -> Vec<u8> {
    let mut seen = Vec::new();
    tokio::time::timeout(GUARD, tcp.read_to_end(&mut seen))
        .await
        .expect("the server never closed the slow connection")
        .ok();
    seen
}

async fn healthz_ok(app: &App) {
    let url = format!("http://{}/healthz", app.server.addr);
    let status = reqwest::get(&url).await.unwrap().status();
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_socket_that_sends_nothing_is_closed() {
    let app = app(|_| {}).await;
    let mut silent = TcpStream::connect(app.server.addr).await.unwrap();
    healthz_ok(&app).await;
    let answer = read_to_close(&mut silent).await;
    assert!(answer.is_empty(), "{:?}", String::from_utf8_lossy(&answer));
    app.shutdown().await;
}

#[tokio::test]
async fn a_first_byte_and_then_nothing_is_closed() {
    let app = app(|_| {}).await;
    let mut slow = TcpStream::connect(app.server.addr).await.unwrap();
    slow.write_all(b"P").await.unwrap();
    read_to_close(&mut slow).await;
    app.shutdown().await;
}

#[tokio::test]
async fn the_http2_preface_and_then_nothing_is_closed() {
    let app = app(|_| {}).await;
    let mut slow = TcpStream::connect(app.server.addr).await.unwrap();
    slow.write_all(PREFACE).await.unwrap();
    read_to_close(&mut slow).await;
    healthz_ok(&app).await;
    app.shutdown().await;
}

#[tokio::test]
async fn an_http2_peer_that_never_answers_pings_is_closed() {
    let app = app(|_| {}).await;
    let mut mute = TcpStream::connect(app.server.addr).await.unwrap();
    mute.write_all(PREFACE).await.unwrap();
    mute.write_all(EMPTY_SETTINGS).await.unwrap();
    // It never acknowledges the server's SETTINGS nor its keep-alive PING.
    let sent = read_to_close(&mut mute).await;
    // What the server sent before giving up includes a PING frame (type 6).
    let mut frames = Vec::new();
    let mut at = 0;
    while at + 9 <= sent.len() {
        let len = u32::from_be_bytes([0, sent[at], sent[at + 1], sent[at + 2]]) as usize;
        frames.push(sent[at + 3]);
        at += 9 + len;
    }
    assert!(
        frames.contains(&6),
        "expected a keep-alive PING before the close; frame types sent: {frames:?}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn http2_with_prior_knowledge_is_served() {
    let app = app(|_| {}).await;
    let client = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let response = client
        .get(format!("http://{}/healthz", app.server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    assert_eq!(response.status(), 200);
    app.shutdown().await;
}

#[tokio::test]
async fn connections_beyond_max_connections_get_503_and_a_freed_slot_is_used_again() {
    let app = app(|c| {
        c.server.header_timeout_seconds = 20.0;
        c.server.max_connections = 2;
    })
    .await;
    // Two connections hold both slots (an HTTP/1 head in progress).
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut tcp = TcpStream::connect(app.server.addr).await.unwrap();
        tcp.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        held.push(tcp);
    }
    // The listener takes connections in order; give it a moment to take both.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = TcpStream::connect(app.server.addr).await.unwrap();
    let answer = String::from_utf8(read_to_close(&mut third).await).unwrap();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("server.max_connections"), "{answer}");
    // One held connection finishes its request: its slot serves the next client.
    let mut first = held.remove(0);
    first
        .write_all(b"Host: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let served = String::from_utf8(read_to_close(&mut first).await).unwrap();
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let mut next = TcpStream::connect(app.server.addr).await.unwrap();
        next.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let answer = String::from_utf8(read_to_close(&mut next).await).unwrap();
        if answer.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the freed slot was never reused: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(held);
    app.shutdown().await;
}

#[test]
fn max_connections_zero_is_refused_naming_the_key() {
    let error = Config::parse("[server]\nmax_connections = 0\n").unwrap_err();
    assert!(
        error.to_string().contains("server.max_connections"),
        "{error}"
    );
}

/// The refusal is logged in words an operator can act on (the real binary, its stderr).
#[tokio::test]
async fn a_refused_connection_is_logged_naming_the_setting() {
    let dir = std::env::temp_dir().join(format!("turnscope-maxconn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("turnscope.toml");
    std::fs::write(
        &config,
        "[server]\nmax_connections = 1\nheader_timeout_seconds = 20\n",
    )
    .unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .args(["--headless", "--port", "0", "--config"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(GUARD, stdout.next_line())
        .await
        .unwrap()
        .unwrap()
        .expect("a ready line");
    let url = ready
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("a URL")
        .to_string();
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let mut held = TcpStream::connect(&addr).await.unwrap();
    held.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut refused = TcpStream::connect(&addr).await.unwrap();
    read_to_close(&mut refused).await;
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(GUARD, async {
        while let Some(line) = stderr.next_line().await.unwrap() {
            if line.contains("refused a connection") {
                return line;
            }
        }
        panic!("turnscope ended without logging the refusal");
    })
    .await
    .expect("the refusal is logged");
    assert!(line.contains("server.max_connections = 1"), "{line}");
    drop(held);
    child.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
