//! Security of the HTTP surface: every route behind the guard, bearer token, open-bind
//! refusal, body limit, and handles compared whole.

use crate::support::mcp::Client;
use serde_json::json;
use turnscope::app::{App, AppError};
use turnscope::config::Config;
use turnscope::observe::Bus;

async fn app(tweak: impl FnOnce(&mut Config)) -> Result<App, AppError> {
    let mut c = Config::default();
    c.server.port = 0;
    c.model.pace = 0.0;
    tweak(&mut c);
    App::start(&c, Bus::default()).await
}

/// Every route the server has (its own and the OpenAI bridge's), plus one it has not: none
/// may skip the guard. The unknown one shows the guard wraps the router's fallback too, so a
/// route added later is guarded without being listed here.
const ROUTES: [(&str, &str); 9] = [
    ("GET", "/healthz"),
    ("POST", "/mcp"),
    ("GET", "/mcp"),
    ("GET", "/v1/tools"),
    ("POST", "/v1/execute"),
    ("POST", "/v1/chat/completions"),
    ("GET", "/v1/models"),
    ("GET", "/events"),
    ("GET", "/no-such-route"),
];

#[tokio::test]
async fn no_route_skips_the_host_and_origin_guard() {
    let app = app(|_| {}).await.unwrap();
    let http = reqwest::Client::new();
    for (method, path) in ROUTES {
        let url = format!("http://{}{path}", app.server.addr);
        let req = |h: &str, o: Option<&str>| {
            let mut r = http
                .request(method.parse().unwrap(), &url)
                .header("host", h);
            if let Some(o) = o {
                r = r.header("origin", o);
            }
            r.send()
        };
        assert_eq!(
            req("evil.example", None).await.unwrap().status(),
            421,
            "{method} {path}"
        );
        assert_eq!(
            req("127.0.0.1", Some("http://evil.example"))
                .await
                .unwrap()
                .status(),
            403,
            "{method} {path}"
        );
        // DNS rebinding: a loopback-looking name that is not loopback.
        assert_eq!(
            req("127.0.0.1.evil.example", None).await.unwrap().status(),
            421,
            "{method} {path}"
        );
    }
    app.shutdown().await;
}

/// A request without a Host header is told so (and that HTTP/1.1 requires one), not to allow
/// an empty host.
#[tokio::test]
async fn a_request_without_a_host_header_is_told_it_has_none() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = app(|_| {}).await.unwrap();
    let mut socket = tokio::net::TcpStream::connect(app.server.addr)
        .await
        .unwrap();
    socket
        .write_all(b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    socket.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains("no Host header") && answer.contains("HTTP/1.1 clients must send one"),
        "{answer}"
    );
    assert!(!answer.contains("--allowed-host ''"), "{answer}");
    app.shutdown().await;
}

#[tokio::test]
async fn a_configured_token_is_required_on_every_route() {
    let app = app(|c| c.server.auth_token = Some("s3cret".into()))
        .await
        .unwrap();
    let http = reqwest::Client::new();
    for (method, path) in ROUTES {
        let url = format!("http://{}{path}", app.server.addr);
        let none = http
            .request(method.parse().unwrap(), &url)
            .send()
            .await
            .unwrap();
        assert_eq!(none.status(), 401, "{method} {path}");
        assert!(none.text().await.unwrap().contains("Authorization: Bearer"));
        let wrong = http
            .request(method.parse().unwrap(), &url)
            .bearer_auth("s3cre")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 401, "{method} {path}");
    }
    let ok = http
        .get(format!("http://{}/healthz", app.server.addr))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    app.shutdown().await;
}

/// RFC 9110 §11.1: the auth scheme is case-insensitive. A wrong token is told it does not
/// match (not to send the header it sent), and the answer names neither token.
#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive_and_a_wrong_token_is_said_to_differ() {
    let app = app(|c| c.server.auth_token = Some("s3cret-t0ken".into()))
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let url = format!("http://{}/healthz", app.server.addr);
    let with = |value: &str| http.get(&url).header("authorization", value).send();
    for value in [
        "Bearer s3cret-t0ken",
        "bearer s3cret-t0ken",
        "BEARER s3cret-t0ken",
    ] {
        assert_eq!(with(value).await.unwrap().status(), 200, "{value}");
    }
    let wrong = with("bearer n0t-the-one").await.unwrap();
    assert_eq!(wrong.status(), 401);
    let text = wrong.text().await.unwrap();
    assert!(
        text.contains("does not match") && text.contains("--auth-token"),
        "{text}"
    );
    assert!(
        !text.contains("s3cret-t0ken") && !text.contains("n0t-the-one"),
        "{text}"
    );
    let basic = with("Basic czNjcmV0").await.unwrap();
    assert_eq!(basic.status(), 401);
    assert!(basic.text().await.unwrap().contains("not `Bearer <token>`"));
    app.shutdown().await;
}

#[tokio::test]
async fn an_open_bind_without_a_token_is_refused_unless_allowed() {
    let err = app(|c| c.server.host = "0.0.0.0".into())
        .await
        .err()
        .expect("refused");
    let text = format!("{err:#}");
    assert!(
        text.contains("--auth-token") && text.contains("--allow-open-bind"),
        "{text}"
    );
    let with_token = app(|c| {
        c.server.host = "0.0.0.0".into();
        c.server.auth_token = Some("t".into());
    })
    .await
    .unwrap();
    with_token.shutdown().await;
    let allowed = app(|c| {
        c.server.host = "0.0.0.0".into();
        c.server.allow_open_bind = true;
    })
    .await
    .unwrap();
    allowed.shutdown().await;
}

/// A host that does not resolve is said so, not refused for want of a token (it was sent off
/// to get one first, then told another turnscope held the port); an address that is not this
/// machine's is said so too (tour O F3).
#[tokio::test]
async fn a_host_that_does_not_resolve_or_is_not_this_machines_is_said_so() {
    let err = app(|c| c.server.host = "no-such-host.invalid".into())
        .await
        .err()
        .expect("refused");
    let text = format!("{err:#}");
    assert!(
        text.contains("does not resolve") && text.contains("give --host an IP address"),
        "{text}"
    );
    assert!(
        !text.contains("--auth-token") && !text.contains("another turnscope"),
        "{text}"
    );
    // TEST-NET-1 (RFC 5737): never an address of this machine.
    let err = app(|c| {
        c.server.host = "192.0.2.1".into();
        c.server.auth_token = Some("t".into());
    })
    .await
    .err()
    .expect("refused");
    let text = format!("{err:#}");
    assert!(text.contains("not this machine's"), "{text}");
    assert!(!text.contains("another turnscope"), "{text}");
}

#[tokio::test]
async fn a_huge_body_is_refused_and_the_server_stays_healthy() {
    let app = app(|c| c.server.max_body_bytes = 64 * 1024).await.unwrap();
    let url = app.server.mcp_url();
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "x".repeat(200_000)}});
    let resp = reqwest::Client::new()
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .json(&big)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    let client = Client::connect(&url).await;
    let h = client.start().await;
    assert_eq!(
        client.chat(&h, "still fine").await.text,
        "You said: still fine"
    );
    app.shutdown().await;
}

/// A client still sending a body over the limit reads the 413 and its words: the server
/// reads the rest and throws it away before answering. It answered at once and closed, and
/// the kernel reset the connection under the body still arriving: the MCP Python SDK read
/// `ReadError` and nothing of why (tour G). Both ways a body can be over: declared, and sent
/// in chunks with no length.
#[tokio::test]
async fn a_client_still_sending_a_body_over_the_limit_reads_the_413() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = app(|c| c.server.max_body_bytes = 64 * 1024).await.unwrap();
    let chunk = vec![b'x'; 64 * 1024];
    for chunked in [false, true] {
        let mut socket = tokio::net::TcpStream::connect(app.server.addr)
            .await
            .unwrap();
        let framing = if chunked {
            "transfer-encoding: chunked".to_string()
        } else {
            format!("content-length: {}", 64 * chunk.len())
        };
        let head = format!(
            "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\n{framing}\r\n\r\n",
            app.server.addr
        );
        socket.write_all(head.as_bytes()).await.unwrap();
        // 4 MiB, a piece at a time, as a client streaming its request does.
        for _ in 0..64 {
            if chunked {
                socket
                    .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                    .await
                    .unwrap();
            }
            socket
                .write_all(&chunk)
                .await
                .unwrap_or_else(|e| panic!("chunked: {chunked}: the body's sending failed: {e}"));
            if chunked {
                socket.write_all(b"\r\n").await.unwrap();
            }
            tokio::task::yield_now().await;
        }
        if chunked {
            socket.write_all(b"0\r\n\r\n").await.unwrap();
        }
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match socket.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
                Err(e) => panic!("chunked: {chunked}: reset before the answer was read: {e}"),
            }
            if answer.windows(15).any(|w| w == b"raise the limit") {
                break;
            }
        }
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.starts_with("HTTP/1.1 413") && answer.contains("server.max_body_bytes"),
            "chunked: {chunked}: {answer}"
        );
    }
    app.shutdown().await;
}

/// A client that waits for `100 Continue` before sending a body over the limit is told at
/// once, not invited to send it all (reading its body would have had the server say
/// `100 Continue`; review).
#[tokio::test]
async fn a_client_waiting_to_send_a_body_over_the_limit_is_told_before_it_sends() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = app(|c| c.server.max_body_bytes = 64 * 1024).await.unwrap();
    let mut socket = tokio::net::TcpStream::connect(app.server.addr)
        .await
        .unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nexpect: 100-continue\r\n\
         content-length: 8388608\r\n\r\n",
        app.server.addr
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(std::time::Duration::from_secs(5), socket.read(&mut answer))
        .await
        .expect("answered without a byte of the body")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_handle_sharing_the_first_half_of_a_real_one_is_refused() {
    let app = app(|_| {}).await.unwrap();
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    let last = h.chars().last().unwrap();
    let forged = format!("{}{}", &h[..35], if last == '0' { '1' } else { '0' });
    let e = client.chat(&forged, "hi").await;
    assert!(
        e.is_error && e.text.contains("no live session"),
        "{}",
        e.text
    );
    assert_eq!(client.chat(&h, "hi").await.text, "You said: hi");
    app.shutdown().await;
}

#[tokio::test]
async fn malformed_json_rpc_gets_an_error_and_the_server_stays_healthy() {
    let app = app(|_| {}).await.unwrap();
    let url = app.server.mcp_url();
    let http = reqwest::Client::new();
    for body in [
        "not json",
        "{\"jsonrpc\":\"2.0\"}",
        "[]",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"no/such\"}",
    ] {
        let resp = http
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(
            resp.status().is_client_error() || resp.status().is_success(),
            "{body}: {}",
            resp.status()
        );
    }
    let client = Client::connect(&url).await;
    let h = client.start().await;
    assert_eq!(client.chat(&h, "ok?").await.text, "You said: ok?");
    app.shutdown().await;
}
