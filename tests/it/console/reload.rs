//! Live reload in the console: a saved config file, a bad one, the `R` key and SIGHUP, each
//! told in a notice and in the header's config mark; a turn's version in the turn view; and a
//! terminal that hangs up still ends the console.

use super::Screen;
use crate::support::binary::signal;

/// Saves `text` over the console's `turnscope.toml` as an editor does (a new file renamed over
/// the old one).
fn save(s: &Screen, text: &str) {
    let path = s._dir.join("turnscope.toml");
    let fresh = s._dir.join(".turnscope.toml.swp");
    std::fs::write(&fresh, text).unwrap();
    std::fs::rename(&fresh, &path).unwrap();
}

#[tokio::test]
async fn reloads_are_told_in_a_notice_and_marked_in_the_header_and_a_hang_up_still_quits() {
    let events = std::env::temp_dir().join(format!(
        "turnscope-console-reload-{}.jsonl",
        std::process::id()
    ));
    let events_arg = events.to_str().unwrap();
    let mut s = Screen::start_with(
        &[
            "--port",
            "0",
            "--pace",
            "0",
            "--config",
            "turnscope.toml",
            "--events",
            events_arg,
        ],
        &[("turnscope.toml", "[bot]\nsystem_prompt = \"one\"\n")],
    )
    .await;
    s.wait_text("config v1").await;

    save(&s, "[bot]\nsystem_prompt = \"two\"\n");
    let screen = s.wait_text("config v2: bot.system_prompt").await;
    assert!(screen.contains("config v2 ↻"), "{screen}");

    // A bad file: the notice names the file, the line and the key; the header marks it.
    save(&s, "[bot]\nsystem_prompt = \"three\"\nround_cap = -1\n");
    let screen = s
        .wait_text("config refused: turnscope.toml:3:13: bot.round_cap")
        .await;
    assert!(screen.contains("v2 ✗ reload refused"), "{screen}");

    // R, from the panes (Esc leaves the input line): the same file is refused again.
    s.send(b"\x1b").await;
    s.send(b"R").await;
    let log = s.wait_text("2 errors").await;
    assert!(
        log.contains("8 Log 2"),
        "both refusals count as errors in the Log: {log}"
    );

    // A key that cannot change while running: named, its running value kept.
    save(
        &s,
        "[bot]\nsystem_prompt = \"two\"\n[server]\nmax_connections = 5\n",
    );
    let screen = s
        .wait_text("config v2: nothing to apply; restart for server.")
        .await;
    assert!(
        screen.contains("config v2 · 1 key for a restart"),
        "{screen}"
    );

    // SIGHUP with the terminal there reloads; the console stays.
    signal(&s.child, "HUP");
    // (the notice is the same text again: the Log tells the causes apart)

    // The Log keeps every reload with what asked for it.
    s.send(b"8").await;
    let log = s.wait_text("config reread (signal)").await;
    assert!(log.contains("config reloaded (file): version 2"), "{log}");
    assert!(log.contains("config not reloaded (console)"), "{log}");

    // A turn says the version it ran on in the turn view.
    s.send(b"3").await;
    s.send(b"hello").await;
    s.send(b"\r").await;
    s.wait_text("turn 1 · completed").await;
    s.send(b"\x1b").await;
    s.send(b"w").await;
    s.wait_text("config v2 · 1 of 1").await;

    // The terminal hangs up: the console ends (and ends every session) as on SIGTERM.
    let status = s.hang_up().await;
    assert!(status.success(), "{status:?}");
    let recorded = std::fs::read_to_string(&events).unwrap();
    assert!(
        recorded.contains(r#""closed":"server shut down""#),
        "every session was ended"
    );
    assert_eq!(recorded.matches(r#""type":"config_reload""#).count(), 5);

    // The replay of that file shows the reloads: the Log's entries (the refusals counted as
    // errors), the turn's version.
    let mut r = Screen::start(&["replay", events_arg]).await;
    let screen = r.wait_text("read-only").await;
    assert!(screen.contains("2 errors"), "{screen}");
    r.send(b"8").await;
    let log = r.wait_text("config reread (signal)").await;
    assert!(log.contains("config not reloaded (console)"), "{log}");
    r.send(b"w").await;
    r.wait_text("config v2 · 1 of 1").await;
    r.send(b"\x1b").await;
    r.send(b"q").await;
    assert!(r.wait_exit().await.success());
    let _ = std::fs::remove_file(&events);
}
