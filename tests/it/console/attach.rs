//! `turnscope attach` in a pseudo-terminal: over a `--headless` turnscope (its whole instrument
//! from the event stream, chatting in its own session, `--events` replayed, its tools called by
//! hand from the Tools pane; the client's hand call checked before it is sent), and over a pipecat
//! 1.14 bot on pipecat-mcp-transport with its whisker feed (ignored unless the interop suite
//! gives `TURNSCOPE_PIPECAT_PYTHON`).

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};

use super::Screen;
use crate::support::binary::{ready_line, serving, terminate, url_in};
use crate::support::mcp::Client;
use crate::support::scratch::Scratch;

#[tokio::test]
async fn attached_to_a_headless_turnscope_it_shows_every_session_and_chats_in_its_own() {
    let mut server = serving(&["--headless", "--port", "0", "--pace", "0"])
        .spawn()
        .expect("the headless server starts");
    let url = url_in(&ready_line(&mut server).await, "/mcp");
    // Someone else's conversation, before the console attaches.
    let other = Client::connect(&url).await;
    let handle = other.start().await;
    other.chat(&handle, "a line from another client").await;

    // Given as people type it (`127.0.0.1:PORT`): the console completes it to the MCP URL.
    let short = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let mut s = Screen::start(&["attach", &short, "--events", "seen.jsonl"]).await;
    s.wait_text(&format!("attached {url}")).await;
    s.wait_text("watching").await;
    // Watching starts nothing on the server: its one session is the other client's, until
    // the person's first line opens theirs.
    s.wait_text("a line starts your session").await;
    s.wait_text("1 open").await;
    let health = health_of(&url).await;
    assert_eq!(health["sessions"], 1, "{health}");
    s.send(b"use the clock\r").await;
    s.wait_text("2 open").await;
    s.wait_text("n: new session").await;
    let screen = s.wait_text("clock(").await;
    assert!(screen.contains("attach (you)"), "{screen}");
    s.wait_text("1 round · 1 tool call").await;
    // Each session's idle time left, from the server's handle lifetime (its stream's first
    // line) and the activity seen: at least this long (it said "-").
    s.send(b"\x1b").await;
    s.send(b"1").await;
    s.send(b"z").await;
    s.wait_text("≥4m").await;
    s.send(b"z").await;
    // The other client's session is listed, read-only: a line into it is refused.
    s.send(b"\x1b").await;
    s.send(b"1").await;
    s.send(b"k").await;
    let screen = s.wait_text("a line from another client").await;
    assert!(screen.contains("mcp: rmcp"), "{screen}");
    s.send(b"3").await;
    s.send(b"hello?\r").await;
    // Refused at once, the line kept in the input (before: asked "Enter again sends…", then
    // refused with the line gone).
    let screen = s.wait_text("was started by another client").await;
    assert!(screen.contains("your line is kept"), "{screen}");
    assert!(
        screen.contains("┃hello?"),
        "the line stays in the input: {screen}"
    );
    // d on it says at once it is not this console's to close (it asked "d again closes",
    // then refused).
    s.send(b"\x1b").await;
    s.send(b"1").await;
    s.send(b"d").await;
    let screen = s.wait_text("closes only sessions it started").await;
    assert!(!screen.contains("d again closes"), "{screen}");
    s.send(b"\x03").await;
    assert!(s.wait_exit().await.success());
    terminate(&mut server).await;

    // What it saw replays.
    let events = s._dir.join("seen.jsonl");
    // Each progress notification of the person's session is told once: by the server's
    // stream, not again by the console's own MCP client (it showed every row twice).
    let text = std::fs::read_to_string(&events).expect("the events file");
    let mut seen = std::collections::HashSet::new();
    let mut progress = 0;
    for line in text.lines() {
        let event: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        if event["type"] == "progress" {
            progress += 1;
            let key = (event["session"].clone(), event["progress"].clone());
            assert!(seen.insert(key.clone()), "progress {key:?} told twice");
        }
    }
    assert!(progress > 0, "the turns sent progress");
    let mut r = Screen::start(&["replay", events.to_str().unwrap()]).await;
    r.wait_text("read-only").await;
    r.wait_text("2 sessions").await;
    r.send(b"q").await;
}

/// The person's first line into an attached console with no session of theirs yet (said once
/// the console asks for one); the screen once the scripted reply to it shows.
async fn first_line(s: &mut Screen, line: &str) -> String {
    s.wait_text("a line starts your session").await;
    s.send(format!("{line}\r").as_bytes()).await;
    s.wait_text(&format!("You said: {line}")).await
}

/// The lines the person typed in an attached console are theirs in its recording too: the
/// live console says `you` (its own session, `attach (you)`), and so does `turnscope replay` of
/// its `--events` file (it said `user`: the watched server's stream tells the session as any
/// MCP client's, and only the console knew it started it).
#[tokio::test]
async fn an_attached_consoles_lines_replay_as_the_persons() {
    let mut server = serving(&["--headless", "--port", "0", "--pace", "0"])
        .spawn()
        .expect("the headless server starts");
    let url = url_in(&ready_line(&mut server).await, "/mcp");
    let mut s = Screen::start(&["attach", &url, "--events", "seen.jsonl"]).await;
    let screen = first_line(&mut s, "remember the word teal").await;
    assert!(screen.contains("you  remember the word teal"), "{screen}");
    assert!(screen.contains("attach (you)"), "{screen}");
    quit(&mut s).await;
    terminate(&mut server).await;

    let events = s._dir.join("seen.jsonl");
    let mut r = Screen::start(&["replay", events.to_str().unwrap()]).await;
    let screen = r.wait_text("You said: remember the word teal").await;
    assert!(
        screen.contains("you  remember the word teal") && !screen.contains("user remember"),
        "{screen}"
    );
    assert!(screen.contains("attach (you)"), "{screen}");
    r.send(b"q").await;
    assert!(r.wait_exit().await.success());
}

/// A port free now, for a server restarted on the same address.
fn free_port() -> String {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
        .to_string()
}

/// A headless server at zero pace on `port`, keeping conversations in `store`.
fn server_on(port: &str, store: &str) -> tokio::process::Child {
    serving(&[
        "--headless",
        "--port",
        port,
        "--pace",
        "0",
        "--store",
        store,
    ])
    .spawn()
    .expect("the headless server starts")
}

/// How many handles the console's handles file keeps, after it quit.
fn kept_handles(s: &Screen) -> usize {
    let kept = std::fs::read_to_string(s._dir.join("turnscope/console-handles.json"))
        .expect("the handles file");
    let kept: serde_json::Value = serde_json::from_str(&kept).expect("JSON");
    kept["handles"].as_array().map_or(0, Vec::len)
}

/// Ctrl+C, and a clean exit.
async fn quit(s: &mut Screen) {
    s.send(b"\x03").await;
    assert!(s.wait_exit().await.success());
}

/// Attached again to the same server, the console takes up the session it started there
/// the time before (its handle kept in the state directory, mode 0600): the person's next line
/// goes on in that conversation, no new session is opened; closing it lets go of it for good.
#[tokio::test]
async fn attached_again_the_console_goes_on_in_the_session_it_started_before() {
    let mut server = serving(&["--headless", "--port", "0", "--pace", "0"])
        .spawn()
        .expect("the headless server starts");
    let url = url_in(&ready_line(&mut server).await, "/mcp");
    let mut s = Screen::start(&["attach", &url, "--events", "seen.jsonl"]).await;
    // The reply's last pieces come after the turn's end on the stream: all are shown.
    first_line(&mut s, "remember the word teal").await;
    quit(&mut s).await;
    // And in what it recorded, replayed.
    let events = s._dir.join("seen.jsonl");
    let mut r = Screen::start(&["replay", events.to_str().unwrap()]).await;
    r.wait_text("You said: remember the word teal").await;
    r.send(b"q").await;
    assert!(r.wait_exit().await.success());
    let kept = s._dir.join("turnscope/console-handles.json");
    let text = std::fs::read_to_string(&kept).expect("the handle is kept");
    assert!(text.contains(&url), "kept with its target: {text}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "only its owner reads a handle");
    }

    let mut s = s.restart(&["attach", &url]).await;
    s.wait_text("is the session you started here last time")
        .await;
    s.send(b"and the colour again\r").await;
    let screen = s.wait_text("You said: and the colour again").await;
    assert!(screen.contains("remember the word teal"), "{screen}");
    let health = health_of(&url).await;
    assert_eq!(health["sessions"], 1, "no new session: {health}");
    // Closed here (d, d again): its handle is let go, and the next attach starts afresh.
    s.send(b"\x1b").await;
    s.send(b"1").await;
    s.send(b"d").await;
    s.send(b"d").await;
    s.wait_text("forgotten here").await;
    quit(&mut s).await;
    let text = std::fs::read_to_string(&kept).expect("the file stays");
    assert!(!text.contains(&url), "let go: {text}");
    let mut s = s.restart(&["attach", &url]).await;
    s.wait_text("a line starts your session").await;
    quit(&mut s).await;
    terminate(&mut server).await;
}

/// Two consoles attached at once with one state directory (two terminals of one person): the
/// second does not take up the session the first holds (both would type into one
/// conversation); its first line starts a session of its own. Once both quit, their claims
/// are gone and a console attached again takes up the newest of their sessions.
#[tokio::test]
async fn a_second_console_attached_with_the_same_state_leaves_the_firsts_session_to_it() {
    let mut server = serving(&["--headless", "--port", "0", "--pace", "0"])
        .spawn()
        .expect("the headless server starts");
    let url = url_in(&ready_line(&mut server).await, "/mcp");
    let mut first = Screen::start(&["attach", &url]).await;
    first_line(&mut first, "remember the word teal").await;
    let state = first._dir.to_str().unwrap().to_string();
    let mut second = Screen::start_env(&["attach", &url], &[], &[("XDG_STATE_HOME", &state)]).await;
    let screen = first_line(&mut second, "my own line").await;
    assert!(!screen.contains("remember the word teal"), "{screen}");
    assert!(!screen.contains("you started here last time"), "{screen}");
    let health = health_of(&url).await;
    assert_eq!(health["sessions"], 2, "a session of its own: {health}");
    quit(&mut second).await;
    quit(&mut first).await;
    let claims = first._dir.join("turnscope/console-claims");
    let left: Vec<_> = std::fs::read_dir(&claims)
        .map(|files| files.flatten().map(|f| f.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "claims removed at exit: {left:?}");
    let mut again = first.restart(&["attach", &url]).await;
    again
        .wait_text("is the session you started here last time")
        .await;
    quit(&mut again).await;
    terminate(&mut server).await;
}

/// Attached again after the server restarted (its conversations kept in its store file), the
/// person's first line reopens the session this console started there before and goes on in it
/// (its earlier turn shown, no second session); once the server no longer knows the handle
/// (another store), the line starts a new session, the handle is let go, and the Log says
/// what the server's refusal was.
#[tokio::test]
async fn after_the_server_restarted_the_first_line_reopens_the_session_started_before() {
    let scratch = Scratch::new("attach-reopen");
    let store = format!("sqlite:{}", scratch.join("s.sqlite3").display());
    let port = free_port();
    let mut server = server_on(&port, &store);
    let url = url_in(&ready_line(&mut server).await, "/mcp");
    let mut s = Screen::start(&["attach", &url]).await;
    first_line(&mut s, "remember the word teal").await;
    quit(&mut s).await;
    terminate(&mut server).await;

    let mut server = server_on(&port, &store);
    ready_line(&mut server).await;
    let mut s = s.restart(&["attach", &url]).await;
    // Not shown by the restarted server: nothing is taken up until the person speaks.
    // Its earlier turn is told again as the server reopens it.
    let screen = first_line(&mut s, "and the colour again").await;
    assert!(screen.contains("remember the word teal"), "{screen}");
    let health = health_of(&url).await;
    assert_eq!(health["sessions"], 1, "no new session: {health}");
    quit(&mut s).await;
    terminate(&mut server).await;

    // A server that never kept it refuses the handle: a new session, the handle let go.
    let other = format!("sqlite:{}", scratch.join("other.sqlite3").display());
    let mut server = server_on(&port, &other);
    ready_line(&mut server).await;
    let mut s = s.restart(&["attach", &url]).await;
    let screen = first_line(&mut s, "hello again").await;
    assert!(!screen.contains("remember the word teal"), "{screen}");
    // The server logged the refused call as an error; the Log says it was this console's.
    s.send(b"\x1b").await;
    s.send(b"8").await;
    let screen = s.wait_text("is gone from the bot").await;
    // Expected and handled: the server's refusal of that probe is news here, not an error,
    // and the Log keeps its rows in time order (the server's line before the console's).
    let screen = if screen.contains("chat refused") {
        screen
    } else {
        s.wait_text("chat refused").await
    };
    assert!(!screen.contains(" (8 Log)"), "no error counted: {screen}");
    let refused = screen.find("chat refused").expect("the server's line");
    let gone = screen
        .find("is gone from the bot")
        .expect("the console's line");
    assert!(refused < gone, "in time order: {screen}");
    quit(&mut s).await;
    assert_eq!(
        kept_handles(&s),
        1,
        "the refused handle let go, the new one kept"
    );
    terminate(&mut server).await;
}

/// A console that stays attached while the server restarts (on its store): once its stream
/// shows the new server, the person's next line reopens the session this console started
/// before, as a console attached anew would, rather than opening another; a line sent
/// before the stream came back goes on in it as well.
#[tokio::test]
async fn staying_attached_across_a_restart_the_next_line_reopens_the_session() {
    let scratch = Scratch::new("attach-stay");
    let store = format!("sqlite:{}", scratch.join("s.sqlite3").display());
    let port = free_port();
    let mut first = server_on(&port, &store);
    let url = url_in(&ready_line(&mut first).await, "/mcp");
    let mut s = Screen::start(&["attach", &url]).await;
    first_line(&mut s, "remember the word teal").await;
    terminate(&mut first).await;
    // Away long enough for attempts to connect again to fail.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let mut again = server_on(&port, &store);
    ready_line(&mut again).await;
    s.wait_text("the watched server restarted: your next line reopens")
        .await;
    s.send(b"and the colour again\r").await;
    let screen = s.wait_text("You said: and the colour again").await;
    assert!(screen.contains("remember the word teal"), "{screen}");
    let health = health_of(&url).await;
    assert_eq!(health["sessions"], 1, "reopened, no new session: {health}");
    // The stream's loss is said once (one warning), however many attempts failed while the
    // server was away, and so is its end.
    s.send(b"\x1b").await;
    s.send(b"8").await;
    let log = s.wait_text("attempts").await;
    assert!(log.contains(" 1 warning "), "{log}");
    // The restart's notice goes in seconds; the Log keeps it.
    s.wait_text("log: the watched server restarted").await;
    s.send(b"3").await;

    // Restarted again, and a line sent before the stream shows the new server: it goes on in
    // the same session (the chat names its handle, the server reopens it).
    terminate(&mut again).await;
    let mut third = server_on(&port, &store);
    ready_line(&mut third).await;
    s.send(b"third time\r").await;
    let screen = s.wait_text("You said: third time").await;
    // The same conversation: one session on the server is also what a new one would leave.
    assert!(screen.contains("remember the word teal"), "{screen}");
    let health = health_of(&url).await;
    assert_eq!(health["sessions"], 1, "the same session again: {health}");
    quit(&mut s).await;
    assert_eq!(kept_handles(&s), 1, "one conversation, one handle");
    terminate(&mut third).await;
}

/// Staying attached across a restart when the person's session was not the server's first
/// (another client's came before it): a line sent before the stream shows the new server
/// reopens the conversation there under another number (the new server numbers from 1), and
/// the console follows it by its handle: the person's, selected, its earlier turn and the
/// reply shown, and the next line goes on in it (tour O F1: the console stayed on the old
/// number, "No turns yet", its lines never shown, and the new number was refused as another
/// client's).
#[tokio::test]
async fn a_session_reopened_under_another_number_after_a_restart_stays_the_persons() {
    let scratch = Scratch::new("attach-renumber");
    let store = format!("sqlite:{}", scratch.join("s.sqlite3").display());
    let port = free_port();
    let mut first = server_on(&port, &store);
    let url = url_in(&ready_line(&mut first).await, "/mcp");
    let other = Client::connect(&url).await;
    other.start().await;
    let mut s = Screen::start(&["attach", &url]).await;
    s.wait_text("1 open").await;
    first_line(&mut s, "remember the word kiwi").await;
    s.wait_text("to #2").await;
    terminate(&mut first).await;
    // Away long enough for the stream's attempts to be seconds apart (0.5 s, doubling to
    // 5 s): the line below goes before the stream connects again.
    tokio::time::sleep(std::time::Duration::from_secs(8)).await;
    let mut again = server_on(&port, &store);
    ready_line(&mut again).await;
    s.send(b"what did I say\r").await;
    // The scripted model recalls the line before: the same conversation, its turns shown.
    let screen = s
        .wait_all(&["Earlier you said: remember the word kiwi", "to #1"])
        .await;
    assert!(screen.contains("you  what did I say"), "{screen}");
    let listed_yours = |l: &str| {
        let row = l.trim_start_matches('│').trim_start_matches('▶');
        row.starts_with("1 ") && row.contains("attach (you)")
    };
    assert!(
        screen.lines().any(listed_yours),
        "#1 is listed as the person's: {screen}"
    );
    s.send(b"and on\r").await;
    s.wait_text("You said: and on").await;
    // What the notice said is in the Log.
    s.send(b"\x1b").await;
    s.send(b"8").await;
    s.wait_text("#2 (#1 now) is open again").await;
    let health = health_of(&url).await;
    assert_eq!(health["sessions"], 1, "reopened, no new session: {health}");
    quit(&mut s).await;
    assert_eq!(kept_handles(&s), 1, "one conversation, one handle");
    terminate(&mut again).await;
}

/// A watched server restarted with another token refuses the console's (401), and later again
/// with the console's: the console asks for the stream again and watches once it is taken
/// (before, one 401 ended its asking for good: a client view until `attach` restarted).
#[tokio::test]
async fn a_stream_refused_by_a_server_restarted_with_another_token_comes_back_with_the_token() {
    let port = free_port();
    let on = |token: &str| {
        serving(&[
            "--headless",
            "--port",
            &port,
            "--pace",
            "0",
            "--auth-token",
            token,
        ])
        .spawn()
        .expect("the headless server starts")
    };
    let mut server = on("sekret");
    let url = url_in(&ready_line(&mut server).await, "/mcp");
    let mut s = Screen::start(&["attach", &url, "--auth-token", "sekret"]).await;
    s.wait_text("watching ").await;
    terminate(&mut server).await;
    let mut server = on("another");
    ready_line(&mut server).await;
    let screen = s.wait_text("the event stream refused the token").await;
    // The old process was seen draining; the stream lost, that is said as past.
    assert!(
        !screen.replace("was draining", "").contains("draining"),
        "{screen}"
    );
    // A line then: the call is refused for the token, said as such (it said "Transport send
    // error … is the bot still running there?").
    s.send(b"hello\r").await;
    let screen = s.wait_text("was refused").await;
    assert!(!screen.contains("still running"), "{screen}");
    terminate(&mut server).await;
    let mut server = on("sekret");
    ready_line(&mut server).await;
    s.wait_text("watching ").await;
    s.send(b"\x1b").await;
    s.send(b"8").await;
    s.wait_all(&["refused", "connected", "again after"]).await;
    quit(&mut s).await;
    terminate(&mut server).await;
}

/// The Tools pane of an attached console lists the target's `tools/list` and, watching a
/// turnscope, the tools its bot offers its model from the connect on (no turn ran there); its
/// form calls the target's tools over the console's MCP client: `start` by hand opens a
/// session on the server (the result shows its handle, masked) and needs no line typed; that
/// session is the person's, and a line chats in it.
#[tokio::test]
async fn attached_the_tools_pane_calls_the_targets_tools_by_hand() {
    let mut server = serving(&["--headless", "--port", "0", "--pace", "0"])
        .spawn()
        .expect("the headless server starts");
    let url = url_in(&ready_line(&mut server).await, "/mcp");
    let mut s = Screen::start(&["attach", &url]).await;
    s.wait_text("watching").await;
    s.send(b"\x1b").await;
    s.send(b"6").await;
    s.send(b"z").await;
    // Watched from its connect on: the tools the bot offers its model are listed after the
    // target's own, though no turn ran there yet.
    s.wait_text("then the tools its model is offered").await;
    s.wait_text("clock the watched bot (offe…").await;
    // The list is the server's: `start` is first.
    s.send(b"\r").await;
    s.wait_text("call start").await;
    s.send(b"\r").await;
    s.wait_text("result of start · isError false").await;
    // The session it opened is the person's own (it was disowned: tour F3), and its handle
    // is shown as every handle is, by its first 8 characters.
    let screen = s.wait_text("your call of start opened #1").await;
    let at = screen
        .find("Handle: ")
        .expect("the result shows the handle")
        + "Handle: ".len();
    assert!(
        screen[at..].chars().nth(8) == Some('…'),
        "masked: {}",
        &screen[at..at + 40]
    );
    let health = health_of(&url).await;
    assert_eq!(health["sessions"], 1, "the hand call opened it: {health}");
    // A line chats in it, no second session.
    s.send(b"\x1b").await;
    s.send(b"\x1b").await;
    s.send(b"3").await;
    s.send(b"a line by hand\r").await;
    s.wait_text("You said: a line by hand").await;
    let health = health_of(&url).await;
    assert_eq!(health["sessions"], 1, "the same session: {health}");
    s.send(b"\x03").await;
    assert!(s.wait_exit().await.success());
    terminate(&mut server).await;
}

/// `attach` without a terminal (a script, CI) says what to do instead: a headless server, or
/// the event stream read with curl (it said only "run turnscope --headless", which does not
/// watch anything).
#[tokio::test]
async fn attach_without_a_terminal_says_how_to_read_the_stream_instead() {
    let out = serving(&["attach", "9"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .await
        .expect("turnscope runs");
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("needs a terminal") && said.contains("curl -N http://HOST:PORT/events"),
        "{said}"
    );
}

/// `--events -` would write over the attached console's screen: refused, as the local
/// console refuses it, before anything connects (tour L: JSON lines across the panes).
#[tokio::test]
async fn attach_refuses_events_on_stdout() {
    let out = serving(&["attach", "9", "--events", "-"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .await
        .expect("turnscope runs");
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("--events - writes the events to stdout, where the attached console draws"),
        "{said}"
    );
}

/// Attaching where no MCP server answers says why, where the cause can be told: a host name
/// that does not resolve, https to a server that speaks plain http (both said "error sending
/// request for url", the cause dropped).
#[tokio::test]
async fn attaching_to_an_unknown_host_or_with_https_to_plain_http_says_which() {
    let bus = turnscope::observe::Bus::default();
    let connect = |url: String| {
        let bus = bus.clone();
        async move {
            turnscope::attach::target::Target::connect(&url, None, &bus)
                .await
                .err()
                .expect("no MCP answer")
        }
    };
    let said = connect("http://nosuchhost.invalid:7950/mcp".into()).await;
    assert!(
        said.contains("its host name could not be resolved"),
        "{said}"
    );
    let app = crate::support::app::app(|_| {}).await;
    let https = app.server.mcp_url().replace("http://", "https://");
    let said = connect(https).await;
    assert!(
        said.contains("TLS handshake or certificate problem"),
        "{said}"
    );
    // A server there, the path not its MCP one: its status said plainly (it was rmcp's "Send
    // message error Transport error: unexpected server response: HTTP 404 Not Found: , when
    // send initialize request"; tour H).
    let wrong_path = app.server.mcp_url().replace("/mcp", "/v1");
    let said = connect(wrong_path).await;
    assert!(
        said.contains("it answered `initialize` with HTTP 404 Not Found; check")
            && !said.contains("Transport error"),
        "{said}"
    );
    app.shutdown().await;
}

/// `--whisker` at a port that answers HTTP and is not whisker's (an easy typo: the bot's own
/// or its model's port) says so in the header and the Log, instead of "waiting for its port"
/// for ever.
#[tokio::test]
async fn whisker_at_a_port_that_is_not_whisker_says_so() {
    let port = free_port();
    let mut server = server_on(&port, "memory");
    ready_line(&mut server).await;
    let ws = format!("ws://127.0.0.1:{port}");
    let mut s = Screen::start(&["attach", "--whisker", &ws]).await;
    s.wait_text("not a whisker port (it answers HTTP 404").await;
    s.send(b"\x1b").await;
    s.send(b"8").await;
    s.wait_text("is not pipecat's").await;
    s.send(b"\x03").await;
    assert!(s.wait_exit().await.success());
    terminate(&mut server).await;
}

/// A chat whose server died mid-reply is recorded as cut off, not "written to its end": its
/// stream ended with progress and no answer (the MCP pane said the exchange was whole); the
/// call fails after a few tries to resume the stream, the server still gone.
#[tokio::test]
async fn a_chat_cut_off_by_the_servers_death_is_recorded_as_cut_off() {
    let mut server = serving(&["--headless", "--port", "0", "--pace", "0.05"])
        .spawn()
        .expect("the headless server starts");
    let url = url_in(&ready_line(&mut server).await, "/mcp");
    let bus = turnscope::observe::Bus::default();
    let mut seen = bus.subscribe();
    let target = turnscope::attach::target::Target::connect(&url, None, &bus)
        .await
        .expect("the client connects");
    let started = target.start().await.expect("start answers");
    target.adopt(1, &started, turnscope::attach::target::Shown::ByClient);
    let line = "tell me about the weather ".repeat(12);
    let chat = {
        let target = target.clone();
        tokio::spawn(async move { target.chat(1, &line).await })
    };
    // Its reply takes 3 s: the server is killed 1 s in.
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    server.start_kill().expect("the server is killed");
    let _ = server.wait().await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let event = tokio::time::timeout_at(deadline, seen.recv())
            .await
            .expect("the chat's exchange is published")
            .expect("the bus is open");
        if let turnscope::observe::Event::Mcp(x) = &*event
            && x.tool.as_deref() == Some("chat")
        {
            assert!(!x.messages.is_empty(), "progress came first: {x:?}");
            assert!(!x.complete, "recorded as whole: {x:?}");
            break;
        }
    }
    // The client dials the dead server again to resume the stream a few times, then the call
    // fails: it does not wait for the server to come back (tour L: the whole outage).
    let answered = tokio::time::timeout(std::time::Duration::from_secs(30), chat)
        .await
        .expect("the chat ends without the server coming back")
        .unwrap();
    assert!(answered.is_err(), "{answered:?}");
}

/// An idle attached client pings its target (`attach::Target::keep_alive`), each ping answered,
/// so the server does not end its MCP session after five minutes without a request (the
/// console's own sessions were then said to have lost their client while it still ran).
#[tokio::test]
async fn an_idle_attached_client_keeps_its_mcp_session_alive_with_pings() {
    let app = crate::support::app::app(|_| {}).await;
    let url = app.server.mcp_url();
    let bus = turnscope::observe::Bus::default();
    let mut seen = bus.subscribe();
    let target = turnscope::attach::target::Target::connect(&url, None, &bus)
        .await
        .expect("the client connects");
    target.keep_alive(std::time::Duration::from_millis(200));
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut pings = 0;
    while pings < 2 {
        let event = tokio::time::timeout_at(deadline, seen.recv())
            .await
            .expect("two pings within 10 s")
            .expect("the bus is open");
        if let turnscope::observe::Event::Mcp(x) = &*event
            && x.method.as_deref() == Some("ping")
        {
            assert_eq!(x.status, 200, "{x:?}");
            pings += 1;
        }
    }
    app.shutdown().await;
}

/// The attached client's hand calls (`attach::Target::call_by_hand`) against a real server:
/// what the tool's schema refuses, and a tool the target does not list, are never sent (the
/// server opens no session and logs no call); a call that passes goes out and its result comes
/// back whole.
#[tokio::test]
async fn a_hand_call_of_an_attached_tool_is_checked_before_it_is_sent() {
    let app = crate::support::app::app(|_| {}).await;
    let url = app.server.mcp_url();
    let bus = turnscope::observe::Bus::default();
    let target = turnscope::attach::target::Target::connect(&url, None, &bus)
        .await
        .expect("the client connects");
    let specs: Vec<turnscope::tools::ToolSpec> = target
        .tools()
        .await
        .expect("tools/list answers")
        .iter()
        .map(|t| turnscope::tools::ToolSpec {
            name: t.name.to_string(),
            description: String::new(),
            input_schema: serde_json::Value::Object((*t.input_schema).clone()),
            source: "the attached bot (tools/list)".into(),
        })
        .collect();
    let refused = target
        .call_by_hand(&specs, "chat", serde_json::json!({"line": "hi"}))
        .await
        .expect_err("chat without its handle breaks the schema");
    assert!(refused.contains("handle"), "{refused}");
    let unknown = target
        .call_by_hand(&specs, "nope", serde_json::json!({}))
        .await
        .expect_err("a tool the target does not list");
    assert!(
        unknown.contains("nope") && unknown.contains("start"),
        "{unknown}"
    );
    assert_eq!(app.sessions.len(), 0, "nothing reached the server");
    let (started, opened) = target
        .call_by_hand(&specs, "start", serde_json::json!({}))
        .await
        .expect("start passes its schema");
    assert!(
        opened.is_some_and(|o| o.handle.len() == 36),
        "the session it opened comes back"
    );
    assert!(!started.outcome.is_error, "{:?}", started.outcome);
    assert!(
        started.outcome.text.contains("Handle: "),
        "{:?}",
        started.outcome
    );
    assert_eq!(app.sessions.len(), 1, "the call went out");
}

/// The attached client's probe of a kept handle (`Target::reopen`) is marked as one
/// (`_meta["turnscope/probe"]`): a server that no longer knows the handle refuses it, and its
/// event says `probe`, so neither its Stats nor any console watching it counts an error.
#[tokio::test]
async fn a_reopen_probe_the_server_refuses_is_marked_a_probe_not_an_error() {
    let app = crate::support::app::app(|_| {}).await;
    let url = app.server.mcp_url();
    let mut events = app.bus.subscribe();
    let bus = turnscope::observe::Bus::default();
    let target = turnscope::attach::target::Target::connect(&url, None, &bus)
        .await
        .expect("the client connects");
    let unknown = "0b7a1c7e-5f1e-4c39-9a55-1a2b3c4d5e6f";
    let refused = target.reopen(unknown).await;
    assert!(
        matches!(refused, Err(turnscope::attach::target::Reopen::Refused(_))),
        "an unknown handle is refused"
    );
    let served = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let event = events.recv().await.expect("the bus goes on");
            if matches!(*event, turnscope::observe::Event::Served { .. }) {
                return event;
            }
        }
    })
    .await
    .expect("the call is told");
    let turnscope::observe::Event::Served { ok, probe, .. } = &*served else {
        unreachable!()
    };
    assert!(!ok && *probe, "{served:?}");
    let mut stats = turnscope::observe::stats::Stats::default();
    stats.observe(&served);
    assert_eq!(stats.errors, 0, "a probe's refusal is not an error");
    app.shutdown().await;
}

/// The server's `/healthz`, given its MCP URL./// The server's `/healthz`, given its MCP URL.
async fn health_of(url: &str) -> serde_json::Value {
    reqwest::get(url.replace("/mcp", "/healthz"))
        .await
        .expect("/healthz answers")
        .json()
        .await
        .expect("/healthz is JSON")
}

/// A line of a child's stdout containing `needle`.
async fn line_with(child: &mut tokio::process::Child, needle: &str) -> String {
    let stdout = child.stdout.take().expect("stdout piped");
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(std::time::Duration::from_secs(120), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains(needle) {
                return line;
            }
        }
        panic!("the child exited before printing {needle:?}");
    })
    .await
    .expect("the child printed its ready line");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    line
}

#[tokio::test]
#[ignore = "needs TURNSCOPE_PIPECAT_PYTHON (pipecat 1.14, pipecat-mcp-transport, pipecat-ai-whisker; interop/run)"]
async fn attached_to_a_pipecat_bot_it_chats_and_shows_whisker_frames_pipeline_tool_call_and_latency()
 {
    let python = std::env::var("TURNSCOPE_PIPECAT_PYTHON")
        .expect("TURNSCOPE_PIPECAT_PYTHON: interop/run installs pipecat and sets it");
    let mut model = serving(&["model", "serve", "--port", "0", "--pace", "0.01"])
        .spawn()
        .expect("the model server starts");
    let model_url = url_in(&ready_line(&mut model).await, "/v1");
    let bot_script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/interop/servers/pipecat_bot.py"
    );
    let mut bot = tokio::process::Command::new(python)
        .args([bot_script, "--model-url", &model_url, "--whisker-port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the pipecat bot starts");
    let ready = line_with(&mut bot, "pipecat bot ready").await;
    let url = url_in(&ready, "/mcp");
    // The bot prints its line as its server starts; attach once its port takes connections
    // (a race the CI machine lost once: "cannot reach the MCP server", as it then said).
    let port: u16 = url
        .rsplit(':')
        .next()
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .expect("the bot's URL has a port");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the pipecat bot did not listen on {port} within 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let whisker = ready
        .split_whitespace()
        .find(|w| w.starts_with("ws://"))
        .expect("the bot serves whisker")
        .to_string();
    let mut s = Screen::start(&[
        "attach",
        &url,
        "--whisker",
        &whisker,
        "--events",
        "pipecat.jsonl",
    ])
    .await;
    // No event stream from pipecat: the header says what the client sees.
    s.wait_text("client view").await;
    // The first line starts the session (and with it pipecat's whisker port).
    s.send(b"hello there\r").await;
    s.wait_text("You said: hello there").await;
    s.wait_text("whisker pipecat 1.14.0").await;
    // Whisker's port (up while a pipeline runs) given as the bot's MCP URL is said to be a
    // WebSocket one, with the flag that takes it (tour L: rmcp's nested transport error).
    let mixed_up = format!("{}/mcp", whisker.replacen("ws://", "http://", 1));
    let said = turnscope::attach::target::Target::connect(
        &mixed_up,
        None,
        &turnscope::observe::Bus::default(),
    )
    .await
    .err()
    .expect("whisker speaks no MCP");
    assert!(
        said.contains("a WebSocket server listens there")
            && said.contains(&format!("--whisker {}", whisker.trim_end_matches('/'))),
        "{said}"
    );
    s.send(b"echo hi\r").await;
    s.wait_text("echo({\"text\":\"hi\"})").await;
    s.wait_text("The echo tool says").await;
    s.wait_text("1 round · 1 tool call").await;
    // The Frames pane: pipecat's frames, the LLM's text reaching the output transport, and
    // its processors in the pipeline diagram.
    s.send(b"\x1b").await;
    s.send(b"4").await;
    let screen = s.wait_text("LLMTextFrame").await;
    assert!(screen.contains("OpenAILLMService#0"), "{screen}");
    // A pipecat frame is one row with its hops (its crossings share its id), as a local
    // frame is; zoomed, x shows a row per link: the LLM's text reaching the output transport.
    s.send(b"z").await;
    s.wait_text(" hop").await;
    s.send(b"x").await;
    let screen = s
        .wait_for(
            "the LLM's text frame at the output transport, per link",
            |text| {
                text.lines()
                    .any(|l| l.contains("LLMTextFrame") && l.contains("McpOutputTransport#0"))
            },
        )
        .await;
    assert!(!screen.contains(" hop"), "per link: {screen}");
    s.send(b"x").await;
    s.send(b"z").await;
    // Stats: the turns' latency.
    s.send(b"7").await;
    s.wait_text("turn total").await;
    // A second console while this one holds whisker (it takes one client): refused, so no
    // worker pairs with its session, and its turns are shown as its client saw them (before,
    // its first turn was shown by nobody, ever).
    let mut second = Screen::start(&[
        "attach",
        &url,
        "--whisker",
        &whisker,
        "--events",
        "second.jsonl",
    ])
    .await;
    second.wait_text("client view").await;
    second.send(b"from the second console\r").await;
    second.wait_text("You said: from the second console").await;
    second.wait_text("whisker refused").await;
    second.send(b"\x03").await;
    assert!(second.wait_exit().await.success());
    // Its turn was timed by the client's call (pipecat-mcp-transport gives no turn record),
    // the first console's by whisker's frames: each turn's end says whose clock.
    let ends = |text: &str, clock: &str| {
        text.lines()
            .any(|l| l.contains("\"type\":\"turn_ended\"") && l.contains(clock))
    };
    let second_recorded =
        std::fs::read_to_string(second._dir.join("second.jsonl")).expect("--events wrote");
    assert!(
        ends(&second_recorded, "\"clock\":\"client\""),
        "{second_recorded}"
    );
    // The bot gone, a line fails: the Log keeps the failure after its notice goes (a
    // pipecat bot has no Log of its own to show). Before, only the notice said it.
    // Stopped mid-reply (SIGTERM: its server closes the reply's stream cleanly, with no
    // answer in it), the chat is recorded as cut off, not as written to its end.
    s.send(b"\x1b").await;
    s.send(b"3").await;
    let long = "tell me about the weather ".repeat(40);
    s.send(format!("{long}\r").as_bytes()).await;
    s.wait_text("You said: tell me").await;
    let pid = bot.id().expect("the bot runs").to_string();
    let _ = std::process::Command::new("kill").arg(&pid).status();
    let _ = bot.wait().await;
    s.send(b"\x1b").await;
    s.send(b"8").await;
    s.wait_text("this console's chat in #1 failed").await;
    // The bot back on its port (without whisker): #1 closed as its pipeline ended, so the
    // person's line starts a new session instead of going to a dead handle.
    let restart = || {
        tokio::process::Command::new(std::env::var("TURNSCOPE_PIPECAT_PYTHON").unwrap())
            .args([bot_script, "--model-url", &model_url])
            .args(["--port", &port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the pipecat bot starts again")
    };
    let listening = || async {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the bot never came back"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    let mut bot = restart();
    line_with(&mut bot, "pipecat bot ready").await;
    listening().await;
    s.send(b"\x1b").await;
    s.send(b"3").await;
    s.send(b"after the restart\r").await;
    // (Should the bot's SIGTERM close its socket before whisker tells of the pipeline's
    // end, #1 is still open: the line is refused, given back, and #1 let go; Enter sends it.)
    let screen = s
        .wait_for("the line answered, or given back", |text| {
            text.contains("You said: after the restart") || text.contains("your line is back")
        })
        .await;
    if !screen.contains("You said: after the restart") {
        s.send(b"\r").await;
        s.wait_text("You said: after the restart").await;
    }
    // Killed outright and back: nothing but the bot's refusal tells that the new session is
    // gone. The refused line ("no live session") closes it as unknown to the bot (it stayed
    // listed idle), and the line, given back, starts another with Enter.
    let _ = bot.start_kill();
    let _ = bot.wait().await;
    let mut bot = restart();
    line_with(&mut bot, "pipecat bot ready").await;
    listening().await;
    s.send(b"once more\r").await;
    s.wait_text("closed: the bot no lon").await;
    s.wait_for("the line given back, the session let go", |text| {
        text.contains("your line is back") || text.contains("is unknown to the bot now")
    })
    .await;
    s.send(b"\r").await;
    s.wait_text("You said: once more").await;
    s.send(b"\x03").await;
    assert!(s.wait_exit().await.success());
    let recorded = std::fs::read_to_string(s._dir.join("pipecat.jsonl")).expect("--events wrote");
    assert!(recorded.contains("\"name\":\"LLMTextFrame\""));
    assert!(
        recorded
            .lines()
            .any(|l| l.contains("\"name\":\"LLMTextFrame\"")
                && l.contains("\"from\":\"OpenAILLMService#0\"")
                && l.contains("\"to\":\"McpOutputTransport#0\"")),
        "the LLM's text frames reach the output transport"
    );
    assert!(recorded.contains("\"type\":\"tool_call\""));
    assert!(ends(&recorded, "\"clock\":\"whisker\""), "{recorded}");
    let cut_off = recorded.lines().any(|l| {
        l.contains("\"type\":\"mcp\"")
            && l.contains("\"tool\":\"chat\"")
            && l.contains("tell me about the weather")
            && l.contains("\"complete\":false")
    });
    assert!(cut_off, "the chat cut off mid-reply is recorded as such");
    // A chat's run of progress notifications (one per piece from pipecat) is kept as its
    // first and latest and a tally, as the server's own record keeps it (a long reply was
    // hundreds of rows in the MCP pane).
    let folded = recorded.lines().any(|l| {
        l.contains("\"type\":\"mcp\"")
            && l.contains("\"tool\":\"chat\"")
            && l.contains("\"left_out\":")
            && !l.contains("\"left_out\":0")
    });
    assert!(folded, "a chat's progress is folded");
    // The client's progress of a turn whisker shows (whisker tells none): before, dropped as
    // if the feed that shows the session told it.
    assert!(
        recorded
            .lines()
            .any(|l| l.contains("\"type\":\"progress\"") && l.contains("echo")),
        "the tool turn's progress is recorded"
    );
    let _ = bot.start_kill();
    terminate(&mut model).await;
}

/// A line a bot that is not a turnscope refuses (its handle unknown: it restarted) is one
/// failure: the turn this client showed ends `not answered`, counted once in the Log (it was
/// counted again as "this console's chat … failed": tour T, `8 Log 3` for one line), the
/// line comes back, and the notice saying so leaves the input line in view.
#[tokio::test]
async fn a_refused_line_is_one_error_and_its_notice_leaves_the_line_in_view() {
    let bot = crate::support::servers::named("forgetful", &["start", "chat"]).await;
    let mut s = Screen::start(&["attach", &bot.url]).await;
    s.wait_text("a line starts your session").await;
    s.send(b"hello there\r").await;
    let screen = s.wait_text("your line is back").await;
    let input = screen
        .lines()
        .skip_while(|l| !l.contains("3 Input"))
        .nth(1)
        .unwrap_or_default();
    assert!(input.contains("hello there"), "{screen}");
    s.send(b"\x1b").await;
    s.send(b"8").await;
    let log = s.wait_text("no live session").await;
    assert!(log.contains("8 Log 1 "), "one error: {log}");
    assert!(!log.contains("this console's chat in"), "{log}");
    quit(&mut s).await;
}

/// Attached to a bot that is not a turnscope, `i` on your idle session says no turn runs
/// there (it said the turn "runs to its end, and a new line of yours waits for it": tour T),
/// and the header says nothing of bridges, which such a bot has none of (`bridges: not
/// visible from here`).
#[tokio::test]
async fn on_a_bot_that_is_not_a_turnscope_i_says_no_turn_runs_and_no_bridges_are_named() {
    let bot = crate::support::servers::named("plain", &["start", "chat"]).await;
    let mut s = Screen::start(&["attach", &bot.url]).await;
    s.wait_text("a line starts your session").await;
    s.send(b"\x1b").await;
    s.send(b"1").await;
    s.send(b"n").await;
    let screen = s.wait_text("console (you)").await;
    assert!(!screen.contains("bridges"), "{screen}");
    // (`n` leaves the keys with the input line.)
    s.send(b"\x1b").await;
    s.send(b"1").await;
    s.send(b"i").await;
    s.wait_text("no turn runs in #1").await;
    quit(&mut s).await;
}

/// Attached to an MCP server that is no bot (no `start` or `chat`: the fixture server), the
/// header says nothing chats there and a line is kept with why, naming the tools it has,
/// instead of inviting a line that `start` then refuses as an unknown tool (tour O).
#[tokio::test]
async fn attached_to_a_server_without_start_and_chat_it_says_nothing_chats_there() {
    use crate::support::fixture::{Kind, RunningFixture};
    let fixture = RunningFixture::start(Kind::Http).await;
    let mut s = Screen::start(&["attach", &fixture.url("/mcp")]).await;
    let first = s
        .wait_all(&["no start/chat here", "This server is no bot"])
        .await;
    assert!(!first.contains("a line below starts yours"), "{first}");
    s.send(b"hello\r").await;
    let refused = s.wait_text("offers no start and chat tools").await;
    assert!(refused.contains("echo"), "its tools named: {refused}");
    assert!(!refused.contains("Unknown tool"), "{refused}");
    // The notice goes with the next key; the line is still there.
    s.send(b"\x1b[D").await;
    s.wait_text("hello").await;
    quit(&mut s).await;
}
