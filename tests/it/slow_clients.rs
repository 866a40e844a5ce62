//! Slow-loris clients: a request head or body that trickles in is cut off at its deadline,
//! and neither it nor a crowd of such clients keeps others from being served.

use std::time::Duration;

use crate::support::mcp::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use turnscope::app::App;
use turnscope::config::Config;
use turnscope::observe::Bus;

/// Hang guard: far beyond the deadlines under test, only there so a regression fails
/// instead of hanging.
const GUARD: Duration = Duration::from_secs(30);

async fn app() -> App {
    let mut c = Config::default();
    c.server.port = 0;
    c.model.pace = 0.0;
    c.server.header_timeout_seconds = 0.5;
    c.server.body_timeout_seconds = 0.5;
    App::start(&c, Bus::default()).await.unwrap()
}

/// Reads until the server closes the connection; returns what it sent.
async fn read_to_close(tcp: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    tokio::time::timeout(GUARD, tcp.read_to_end(&mut seen))
        .await
        .expect("the server never closed the slow connection")
        .ok();
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test]
async fn a_head_that_never_finishes_is_closed_and_others_are_served() {
    let app = app().await;
    let mut slow = TcpStream::connect(app.server.addr).await.unwrap();
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .await
        .unwrap();
    // Served while the slow head is still open.
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    assert_eq!(client.chat(&h, "hello").await.text, "You said: hello");
    let answer = read_to_close(&mut slow).await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "unexpected answer to a timed-out head: {answer:?}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_trickled_body_gets_408_naming_the_setting() {
    let app = app().await;
    let mut slow = TcpStream::connect(app.server.addr).await.unwrap();
    slow.write_all(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
          Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"",
    )
    .await
    .unwrap();
    let answer = read_to_close(&mut slow).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("server.body_timeout_seconds"), "{answer}");
    let health = reqwest::get(format!("http://{}/healthz", app.server.addr))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    app.shutdown().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_but_a_busy_one_is_not() {
    let app = app().await;
    let mut idle = TcpStream::connect(app.server.addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    // The answer arrives, then the connection stays idle until the head deadline closes it.
    let answer = read_to_close(&mut idle).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // A chat that runs longer than the head deadline is not cut: the deadline is for heads.
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        client.chat(&h, "still here").await.text,
        "You said: still here"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_crowd_of_slow_heads_does_not_starve_real_clients() {
    let app = app().await;
    let mut crowd = Vec::new();
    for _ in 0..200 {
        let mut tcp = TcpStream::connect(app.server.addr).await.unwrap();
        tcp.write_all(b"GET /healthz HTTP/1.1\r\nHo").await.unwrap();
        crowd.push(tcp);
    }
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    for i in 0..5 {
        let line = format!("line {i}");
        assert_eq!(
            client.chat(&h, &line).await.text,
            format!("You said: {line}")
        );
    }
    for tcp in &mut crowd {
        read_to_close(tcp).await;
    }
    app.shutdown().await;
}
