//! The MCP pane of the real binary with a real MCP client chatting, in a console kept to a
//! 1 MiB budget (`[console] max_mib = 1`): the oldest exchanges are dropped and the pane says
//! how many; a typed filter finds one exchange and says "1 of N"; Enter opens it whole, the
//! text the client's model reads first and `_meta` after the content.

use super::{Screen, mcp_url};
use crate::support::mcp::Client;

#[tokio::test]
async fn the_mcp_pane_keeps_to_the_budget_filters_by_text_and_opens_an_exchange_whole() {
    let config = "[console]\nmax_mib = 1\n[model]\nwords = 300\n";
    // Paced (0.5 ms a word), so each chat sends many progress notifications: at zero pace the
    // whole reply comes in one body and a loaded machine coalesces it into one or two, which
    // leaves the pane no "more progress notifications" line to show.
    let mut s = Screen::start_with(
        &["--port", "0", "--pace", "0.0005"],
        &[("turnscope.toml", config)],
    )
    .await;
    let first = s.wait_text("Type a line; Enter sends").await;
    let client = Client::connect(&mcp_url(&first)).await;
    let handle = client.start().await;
    // 120 chats of ~4 KB each (kept as the text written: the request, the first and latest
    // progress, the result with its turn record) pass the exchanges' share of the budget
    // (30 % of 1 MiB) by about half.
    for i in 0..120 {
        let reply = client.chat(&handle, &format!("say zq{i}zq please")).await;
        assert!(!reply.is_error, "{}", reply.text);
    }
    assert!(
        client.progress_messages().len() > 120,
        "the chats asked for progress"
    );
    s.send(b"\x1b").await;
    s.send(b"9").await;
    s.send(b"z").await;
    let pane = s.wait_text("older dropped (console.max_mib)").await;
    assert!(pane.contains(" exchanges"), "{pane}");
    assert!(pane.contains("more progress notifications"), "{pane}");
    // A typed filter: one exchange of all those kept.
    s.send(b"/zq79zq\r").await;
    let filtered = s.wait_text("1 of ").await;
    assert!(filtered.contains("filter: zq79zq"), "{filtered}");
    // Enter opens it whole: the text first, the message pretty with _meta after the content.
    s.send(b"\r").await;
    let opened = s.wait_text("MCP exchange 1 of 1").await;
    assert!(opened.contains("zq79zq"), "{opened}");
    let mut seen = opened.clone();
    for _ in 0..6 {
        s.send(b"\x1b[6~").await;
        seen.push_str(&s.text());
    }
    assert!(
        seen.contains("text content (what the client's model reads)"),
        "{seen}"
    );
    let content = seen.find("\"content\": [").expect("the content, pretty");
    let meta = seen.rfind("\"_meta\": {").expect("the _meta");
    assert!(content < meta, "content comes before _meta:\n{seen}");
    s.send(b"\x1b").await;
    s.send(b"q").await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
}
