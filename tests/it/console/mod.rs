//! The console end to end: the real binary in a pseudo-terminal, its screen read back through
//! a terminal emulator (vt100), driven by keys as a person would, and by a real MCP client
//! (rmcp, streamable HTTP) chatting on its own handle at the same time.

use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod attach;
mod instruments;
mod mcp_pane;
mod reload;
mod stored;
mod test_case_export;
mod wire;
mod workbench;

use crate::support::binary::{ready_line, serving, terminate, url_in};
use crate::support::mcp::Client;
use crate::support::scratch::Scratch;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Child;

/// How long any one wait for the screen may take before the test fails.
const WAIT: Duration = Duration::from_secs(30);
const ROWS: u16 = 40;
const COLS: u16 = 130;

/// The binary running in a pseudo-terminal, and what its screen shows.
struct Screen {
    child: Child,
    writer: pty_process::OwnedWritePty,
    parser: Arc<Mutex<vt100::Parser>>,
    /// Every byte the binary wrote, for what the emulator does not keep (OSC 52).
    raw: Arc<Mutex<Vec<u8>>>,
    /// The task reading the terminal's output (it holds the master's read half).
    reader: tokio::task::JoinHandle<()>,
    /// A directory of its own, so no `turnscope.toml` or `themes/` of the repository is
    /// picked up.
    _dir: Scratch,
}

/// `turnscope replay FILE` with session #2 selected: a console run's two sessions (the
/// person's #1 and a client's #2) closed at shutdown in either order, so the row under the
/// cursor after one step down is either; step back up when it is not #2.
async fn replay_on_session_2(events_arg: &str) -> Screen {
    let mut r = Screen::start(&["replay", events_arg]).await;
    r.wait_text("read-only").await;
    r.send(b"j").await;
    if !r.text().contains("Transcript · #2") {
        r.send(b"k").await;
    }
    r
}

impl Screen {
    async fn start(args: &[&str]) -> Screen {
        Self::start_with(args, &[]).await
    }

    /// Starts the binary in a fresh directory holding `files` (name, content).
    async fn start_with(args: &[&str], files: &[(&str, &str)]) -> Screen {
        Self::start_env(args, files, &[]).await
    }

    /// Like [`Screen::start_with`], with these environment variables set for the binary.
    async fn start_env(args: &[&str], files: &[(&str, &str)], env: &[(&str, &str)]) -> Screen {
        let dir = Scratch::new("console");
        for (name, content) in files {
            dir.file(name, content);
        }
        Self::start_in(dir, args, env)
    }

    /// The binary again in the same directory, once this one has exited: what it wrote there
    /// (saved calls, exports) is there for the new run.
    async fn restart(self, args: &[&str]) -> Screen {
        let Screen { _dir, .. } = self;
        Self::start_in(_dir, args, &[])
    }

    fn start_in(dir: Scratch, args: &[&str], env: &[(&str, &str)]) -> Screen {
        let (pty, pts) = pty_process::open().expect("a pseudo-terminal opens");
        pty.resize(pty_process::Size::new(ROWS, COLS))
            .expect("resize");
        // What the console saves for the person (a copied curl command, an export) goes into
        // the temp dir, and what it keeps between runs (its handles, a default store file)
        // into the state directory: both this run's scratch, removed with it.
        let mut command = pty_process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
            .env("TMPDIR", &*dir)
            .env("XDG_STATE_HOME", &*dir);
        for (k, v) in env {
            command = command.env(k, v);
        }
        let child = command
            .args(args)
            .current_dir(&*dir)
            .env("TERM", "xterm-256color")
            .env_remove("NO_COLOR")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .kill_on_drop(true)
            .spawn(pts)
            .expect("turnscope starts in the pseudo-terminal");
        let (mut reader, writer) = pty.into_split();
        let parser = Arc::new(Mutex::new(vt100::Parser::new(
            std::num::NonZeroU16::new(ROWS).expect("rows"),
            std::num::NonZeroU16::new(COLS).expect("cols"),
            0,
        )));
        let sink = parser.clone();
        let raw = Arc::new(Mutex::new(Vec::new()));
        let raw_sink = raw.clone();
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match reader.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        raw_sink.lock().unwrap().extend_from_slice(&buf[..n]);
                        sink.lock().unwrap().process(&buf[..n]);
                    }
                }
            }
        });
        Screen {
            child,
            writer,
            parser,
            raw,
            reader,
            _dir: dir,
        }
    }

    /// Closes the terminal as a closed window or a dropped SSH connection does: the
    /// pseudo-terminal's master goes away, so the kernel hangs up the console's terminal and
    /// sends it SIGHUP. Returns how the binary exited.
    async fn hang_up(self) -> ExitStatus {
        let Screen {
            mut child,
            writer,
            reader,
            ..
        } = self;
        reader.abort();
        let _ = reader.await;
        drop(writer);
        tokio::time::timeout(WAIT, child.wait())
            .await
            .expect("turnscope exits when its terminal hangs up")
            .expect("exit status")
    }

    fn text(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }

    /// Waits until the screen satisfies `test`; fails with the screen when it never does.
    async fn wait_for(&self, what: &str, test: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let text = self.text();
            if test(&text) {
                return text;
            }
            if started.elapsed() > WAIT {
                panic!("the screen never showed {what}; it shows:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the screen shows every one of `needles` at once (a screen being redrawn
    /// can show some before the others).
    async fn wait_all(&self, needles: &[&str]) -> String {
        self.wait_for(&format!("all of {needles:?}"), |t| {
            needles.iter().all(|n| t.contains(n))
        })
        .await
    }

    async fn wait_text(&self, needle: &str) -> String {
        self.wait_for(&format!("{needle:?}"), |t| t.contains(needle))
            .await
    }

    /// After `e`: waits for the notice naming session #1's report and reads that file from
    /// the console's working directory.
    async fn exported_report(&self) -> String {
        let screen = self.wait_text("exported to turnscope-session-1-").await;
        let name = screen
            .split("exported to ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .expect("the file's name")
            .to_string();
        let path = self._dir.join(&name);
        #[cfg(unix)]
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(
                &std::fs::metadata(&path).unwrap().permissions()
            ) & 0o777,
            0o600,
            "an exported conversation is its owner's alone"
        );
        std::fs::read_to_string(path).expect("the report is written")
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.writer
            .write_all(bytes)
            .await
            .expect("write to the pty");
        self.writer.flush().await.expect("flush the pty");
        // A lone Esc must not merge with the next key into Alt+key.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }

    async fn wait_exit(&mut self) -> ExitStatus {
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("turnscope exits after quitting")
            .expect("exit status")
    }

    /// Whether the terminal was given back: main screen, cursor shown.
    fn restored(&self) -> bool {
        let parser = self.parser.lock().unwrap();
        let screen = parser.screen();
        !screen.alternate_screen() && !screen.hide_cursor()
    }
}

/// The MCP URL of the header's `claude mcp add` line (shown whole at any width; the first
/// line leaves its copy out when the screen is narrow).
fn mcp_url(screen: &str) -> String {
    let at = screen
        .find("--transport http turnscope http://")
        .expect("the header shows the claude mcp add line")
        + "--transport http turnscope ".len();
    let rest = &screen[at..];
    let end = rest.find("/mcp").expect("the URL ends in /mcp") + 4;
    rest[..end].to_string()
}

#[tokio::test]
async fn person_types_a_line_sees_the_reply_and_quits_cleanly() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0.005"]).await;
    let first = s.wait_text("Type a line; Enter sends").await;
    assert!(
        first.contains("console (you)"),
        "the person's own session is listed:\n{first}"
    );
    assert!(first.contains("claude mcp add --transport http turnscope http://127.0.0.1:"));
    assert!(first.contains("embedded scripted model"));
    // A server running alone (no replica id configured) shows no replica in the header.
    assert!(!first.contains("replica"), "{first}");

    s.send(b"hello from the terminal").await;
    s.send(b"\r").await;
    let screen = s.wait_text("turn 1 · completed").await;
    assert!(screen.contains("you  hello from the terminal"), "{screen}");
    assert!(
        screen.contains("bot  You said: hello from the terminal"),
        "{screen}"
    );

    // The help lists the keys, Esc closes it; Ctrl-C quits from the input line.
    s.send(b"\x1bOP").await; // F1
    s.wait_text("Everywhere").await;
    s.send(b"\x1b").await;
    s.wait_for("the help closed", |t| !t.contains("Esc or ? closes"))
        .await;
    s.send(b"\x03").await;
    let status = s.wait_exit().await;
    assert!(status.success(), "{status:?}");
    assert!(
        s.restored(),
        "the terminal is back to the main screen with a cursor"
    );
}

/// Quitting while a turn runs cuts it (a quit does not drain), and the shell is told so once
/// the terminal is back: the headless server's `turnscope: cut N turn…` line, then where the
/// conversations went (before, only the second line).
#[tokio::test]
async fn a_quit_mid_turn_says_on_the_shell_that_the_turn_was_cut() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0.5"]).await;
    s.wait_text("Type a line; Enter sends").await;
    s.send(b"a line long enough to take a while to answer")
        .await;
    s.send(b"\r").await;
    s.wait_text("bot  You said").await;
    s.send(b"\x03").await;
    let status = s.wait_exit().await;
    assert!(status.success(), "{status:?}");
    let shell = s
        .wait_text("turnscope: nothing was kept: the store is memory")
        .await;
    let flat = shell.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(
            "turnscope: cut 1 turn in flight at the console's quit: its conversation ends with \
             this process"
        ),
        "{shell}"
    );
    assert!(s.restored());
}

#[tokio::test]
async fn an_mcp_client_chatting_on_its_own_handle_shows_live() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0.005"]).await;
    let first = s.wait_text("Type a line; Enter sends").await;
    let url = mcp_url(&first);
    let client = Client::connect(&url).await;
    let handle = client.start().await;
    let reply = client.chat(&handle, "hello from the mcp client").await.text;
    assert!(reply.contains("hello from the mcp client"), "{reply}");

    // The client's session is listed, marked by who opened it.
    let listed = s.wait_text("mcp: ").await;
    assert!(listed.contains("2 open"), "{listed}");
    // Select it (leave the input line, move down): its transcript shows the client's turn.
    s.send(b"\x1b").await;
    s.send(b"j").await;
    let screen = s.wait_text("user hello from the mcp client").await;
    assert!(screen.contains("turn 1 · completed"), "{screen}");

    // A second line while the console watches: it streams into the same transcript.
    let second = {
        let handle = handle.clone();
        tokio::spawn(async move {
            client.chat(&handle, "and a second line").await;
            client
        })
    };
    s.wait_text("user and a second line").await;
    let client = second.await.expect("the second chat answers");
    s.wait_text("turn 2 · completed").await;

    // The client still holds its session: q asks once, a second q quits.
    s.send(b"q").await;
    s.wait_text("q again quits").await;
    s.send(b"q").await;
    let status = s.wait_exit().await;
    assert!(status.success(), "{status:?}");
    assert!(s.restored());
    drop(client);
}

#[tokio::test]
async fn replay_opens_an_events_file_read_only() {
    // Record a run headless, then open its events file.
    let dir = std::env::temp_dir().join(format!("turnscope-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let events = dir.join("run.jsonl");
    let mut server = serving(&["--headless", "--port", "0", "--pace", "0", "--events"])
        .arg(&events)
        .current_dir(&dir)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("headless server starts");
    let url = url_in(&ready_line(&mut server).await, "/mcp");
    let client = Client::connect(&url).await;
    let handle = client.start().await;
    client.chat(&handle, "a recorded line").await;
    drop(client);
    // SIGTERM ends the headless server cleanly, which flushes the events file.
    terminate(&mut server).await;

    let file = events.to_str().unwrap();
    let mut s = Screen::start(&["replay", file]).await;
    let screen = s.wait_text("read-only").await;
    assert!(screen.contains("replay"), "{screen}");
    assert!(screen.contains("user a recorded line"), "{screen}");
    assert!(screen.contains("turn 1 · completed"), "{screen}");
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
    assert!(s.restored());
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn without_a_terminal_the_console_says_to_use_headless() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .args(["--port", "0"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--headless"), "{err}");
}

/// A folder of its own under `what` holding `broken.toml`, a theme whose `accent.fg` is not
/// a colour; its path.
fn broken_theme(what: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("turnscope-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let theme = dir.join("broken.toml");
    std::fs::write(&theme, "accent = { fg = \"not-a-colour\" }\n").unwrap();
    (dir, theme)
}

/// Runs the binary with `command`, which must fail naming `broken.toml`'s bad key.
async fn refused_naming_the_theme_key(command: &mut tokio::process::Command) {
    let out = command.output().await.expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("broken.toml") && err.contains("`accent.fg`"),
        "{err}"
    );
}

#[tokio::test]
async fn a_bad_theme_is_refused_naming_the_key() {
    let (dir, theme) = broken_theme("theme-e2e");
    refused_naming_the_theme_key(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
            .args(["--port", "0", "--theme"])
            .arg(&theme),
    )
    .await;
    std::fs::remove_dir_all(&dir).ok();
}

/// The main `--theme`, written before `replay`, is a flag: its refusal said it was "named by
/// `[console] theme`" at the config file's line when the config named a theme too (review).
#[tokio::test]
async fn a_bad_theme_flag_before_replay_is_said_as_the_flag() {
    let (dir, theme) = broken_theme("theme-replay");
    let config = dir.join("turnscope.toml");
    std::fs::write(&config, "[console]\ntheme = \"dark\"\n").unwrap();
    let events = dir.join("events.jsonl");
    std::fs::write(&events, "").unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .arg("--config")
        .arg(&config)
        .arg("--theme")
        .arg(&theme)
        .arg("replay")
        .arg(&events)
        .output()
        .await
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`accent.fg`") && !err.contains("[console] theme"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Waits until the screen shows `needle`, then a little longer, and fails if `unwanted` ever
/// showed meanwhile.
async fn settle_without(s: &Screen, unwanted: &str, for_ms: u64) {
    let until = Instant::now() + Duration::from_millis(for_ms);
    while Instant::now() < until {
        let text = s.text();
        assert!(
            !text.contains(unwanted),
            "the screen showed {unwanted:?}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
}

#[tokio::test]
async fn esc_is_back_only_and_speaking_into_a_clients_session_asks_once() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0.002"]).await;
    let first = s.wait_text("Type a line; Enter sends").await;
    let client = Client::connect(&mcp_url(&first)).await;
    let handle = client.start().await;
    client.chat(&handle, "hello").await;
    s.wait_text("mcp: ").await;

    // Esc leaves the input line; a second Esc stays out of it, so `/turn:1` edits the
    // frame filter and `q`-like keys are commands, never text sent to a session.
    s.send(b"\x1b").await;
    s.send(b"\x1b").await;
    s.send(b"/turn:1").await;
    s.wait_text("filter: turn:1").await;
    s.send(b"\r").await;
    s.send(b"\x1b").await;
    settle_without(&s, "you  /turn:1", 300).await;

    // Select the client's session and speak into it: the first Enter only asks.
    s.send(b"1").await;
    s.send(b"j").await;
    s.wait_text("#2 mcp: ").await;
    s.send(b"\r").await; // to the input line
    s.send(b"from the console").await;
    s.send(b"\r").await;
    s.wait_text("Enter again").await;
    settle_without(&s, "you  from the console", 300).await;
    s.send(b"\r").await;
    // The person's line is theirs in the client's transcript, the client's its own.
    s.wait_all(&["you  from the console", "user hello"]).await;
    s.wait_text("turn 2 · completed").await;
    // Asked once: the next line goes straight in.
    s.send(b"and again").await;
    s.send(b"\r").await;
    s.wait_text("turn 3 · completed").await;
    drop(client);
    s.send(b"\x03").await;
    assert!(s.wait_exit().await.success());
}

#[tokio::test]
async fn tool_calls_show_arguments_and_results_and_failures_reach_the_log() {
    // One slot for the console, one for the client: further starts are refused.
    let mut s = Screen::start(&["--port", "0", "--pace", "0.002", "--sessions", "2"]).await;
    let first = s.wait_text("Type a line; Enter sends").await;
    let client = Client::connect(&mcp_url(&first)).await;
    let handle = client.start().await;
    let reply = client.chat(&handle, "echo good morning").await;
    assert_eq!(reply.text, "The echo tool says: good morning.");
    for _ in 0..2 {
        let refused = client.call("start", serde_json::json!({})).await.is_error;
        assert!(refused, "the session cap refuses a third start");
    }
    let failed = client
        .call("chat", serde_json::json!({"handle": handle, "line": 5}))
        .await
        .is_error;
    assert!(failed, "a line that is not a string fails");

    // The header counts the failures (its "(8 Log)" hint gives way on a narrow header), the
    // Log's tab too; the session row carries its own.
    let screen = s.wait_text("3 errors").await;
    assert!(screen.contains("8 Log 3"), "{screen}");
    s.send(b"\x1b").await;
    s.send(b"j").await;
    let screen = s.wait_text("result good morning").await;
    assert!(
        screen.contains(r#"tool echo({"text":"good morning"}) → 12 B"#),
        "{screen}"
    );
    let row = screen
        .lines()
        .find(|l| l.contains("▶2"))
        .expect("the client's row");
    assert!(
        row.contains(" 1 "),
        "one error on the client's session: {row}"
    );

    // The Log pane lists each with its time and session.
    s.send(b"8").await;
    let log = s.wait_text("start refused").await;
    assert_eq!(
        log.matches("start refused").count(),
        1,
        "a repeated refusal is one entry:\n{log}"
    );
    assert!(log.contains("(×2)"), "counted twice:\n{log}");
    assert!(log.contains("chat refused"), "{log}");
    assert!(log.contains(" #2 "), "{log}");
    s.send(b"q").await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
}

#[tokio::test]
async fn the_transcript_settles_when_the_bot_ends_the_session() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0.05"]).await;
    let first = s.wait_text("Type a line; Enter sends").await;
    let client = Client::connect(&mcp_url(&first)).await;
    let handle = client.start().await;
    s.wait_text("mcp: ").await;
    s.send(b"\x1b").await;
    s.send(b"j").await;
    s.wait_text("#2 mcp: ").await;
    let reply = client.chat(&handle, "thanks, please end_session now").await;
    assert_eq!(reply.text, "Goodbye.", "the scripted model says goodbye");
    let screen = s.wait_text("closed").await;
    let screen = if screen.contains("bot  Goodbye.") {
        screen
    } else {
        s.wait_text("bot  Goodbye.").await
    };
    assert!(screen.contains("tool end_session({}) →"), "{screen}");
    s.wait_text("turn 1 · completed").await;
    settle_without(&s, "streaming", 1_500).await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
}

#[tokio::test]
async fn readline_keys_edit_the_input_line_and_the_footer_names_them() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0.002"]).await;
    let first = s.wait_text("Type a line; Enter sends").await;
    assert!(first.contains("Ctrl+U/K/W delete"), "{first}");
    s.send(b"throw this away").await;
    s.send(b"\x17").await; // Ctrl+W: the last word
    s.send(b"\x15").await; // Ctrl+U: to the start
    s.send(b"kept").await;
    s.send(b"\x01").await; // Ctrl+A: to the start
    s.send(b"all ").await;
    s.send(b"\x05").await; // Ctrl+E: to the end
    s.send(b" words").await;
    s.send(b"\r").await;
    let screen = s.wait_text("turn 1 · completed").await;
    assert!(screen.contains("you  all kept words"), "{screen}");
    // The filter takes the same keys, and the footer says so while it is edited.
    s.send(b"\x1b").await;
    s.send(b"/kind:data name:x").await;
    s.send(b"\x17").await;
    let screen = s.wait_text("filter: kind:data name:▏").await;
    assert!(screen.contains("Ctrl+W delete word"), "{screen}");
    s.send(b"\x15").await;
    s.wait_for("the filter emptied", |t| !t.contains("filter: kind"))
        .await;
    s.send(b"\r").await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
}

#[tokio::test]
async fn the_turn_view_draws_the_waterfall_live_and_in_replay() {
    let dir = std::env::temp_dir().join(format!("turnscope-waterfall-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let events = dir.join("run.jsonl");
    let events_arg = events.to_str().unwrap().to_string();
    let mut s = Screen::start(&["--port", "0", "--pace", "0.002", "--events", &events_arg]).await;
    let first = s.wait_text("Type a line; Enter sends").await;
    let client = Client::connect(&mcp_url(&first)).await;
    let handle = client.start().await;
    client
        .chat(&handle, "what does the clock say and echo hi")
        .await;
    s.send(b"\x1b").await;
    s.send(b"j").await;
    s.wait_text("turn 1 · completed").await;
    s.send(b"w").await;
    let view = s.wait_text("waterfall").await;
    for row in [
        "model 1",
        "tool clock",
        "tool echo",
        "model 2",
        "pieces",
        "progress",
        "end",
    ] {
        assert!(view.contains(row), "{row} missing:\n{view}");
    }
    assert!(view.contains("completed after"), "{view}");
    assert!(view.contains("result hi"), "{view}");
    s.send(b"\x1b").await;
    s.wait_for("the turn view closed", |t| !t.contains("waterfall"))
        .await;
    s.send(b"q").await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
    drop(client);

    let mut r = replay_on_session_2(&events_arg).await;
    r.wait_text("turn 1 · completed").await;
    r.send(b"w").await;
    let replayed = r.wait_text("waterfall").await;
    for row in [
        "model 1",
        "tool clock",
        "tool echo",
        "model 2",
        "result hi",
        "args",
    ] {
        assert!(
            replayed.contains(row),
            "{row} missing in replay:\n{replayed}"
        );
    }
    r.send(b"\x1b").await;
    // [ steps the whole console back to the turn's end, ] on to the end of the file.
    r.send(b"[").await;
    r.wait_text("turn end 1 of 1").await;
    r.send(b"]").await;
    r.wait_text("the end ([ or , steps back)").await;
    r.send(b"q").await;
    assert!(r.wait_exit().await.success());
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn bridge_warnings_from_start_up_reach_the_log() {
    let config = "[[bridges.xiaozhi]]\nname = \"kitchen\"\nendpoint = \"wss://example.invalid/mcp/?token=abc\"\nservers = [\"no-such-server\"]\n";
    let mut s = Screen::start_with(
        &["--port", "0", "--pace", "0.002"],
        &[("turnscope.toml", config)],
    )
    .await;
    s.wait_text("Type a line; Enter sends").await;
    s.send(b"\x1b").await;
    s.send(b"8").await;
    let log = s.wait_text("xiaozhi bridge kitchen").await;
    assert!(log.contains("warn"), "{log}");
    assert!(!log.contains("token=abc"), "the token stays masked:\n{log}");
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
}

#[tokio::test]
async fn zoom_search_and_export_from_the_keyboard() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0.002"]).await;
    s.wait_text("Type a line; Enter sends").await;
    for line in ["the first line", "echo a needle here", "the last line"] {
        s.send(line.as_bytes()).await;
        s.send(b"\r").await;
    }
    s.wait_text("turn 3 · completed").await;

    // z: the Frames pane fills the screen; Esc gives the others back.
    s.send(b"\x1b").await;
    s.send(b"4").await;
    s.send(b"z").await;
    let zoomed = s
        .wait_for("the zoomed Frames pane", |t| !t.contains("Transcript"))
        .await;
    assert!(zoomed.contains("4 Frames"), "{zoomed}");
    s.send(b"\x1b").await;
    s.wait_text("Transcript").await;

    // / in the Transcript searches it, not the frames.
    s.send(b"2").await;
    s.send(b"/needle").await;
    let found = s.wait_text("search: needle").await;
    assert!(!found.contains("filter: needle"), "{found}");
    s.send(b"\r").await;
    s.send(b"\x1b").await;
    s.wait_for("the search cleared", |t| !t.contains("search: needle"))
        .await;

    // e writes the selected session's report next to where the console runs.
    s.send(b"e").await;
    let report = s.exported_report().await;
    assert!(report.contains("result a needle here"), "{report}");
    assert!(report.contains("waterfall"), "{report}");
    assert!(report.contains("Frames of #1"), "{report}");
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
}

#[tokio::test]
async fn sessions_open_close_and_copy_their_handle_from_the_keyboard() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0.002"]).await;
    s.wait_text("Type a line; Enter sends").await;
    s.send(b"\x1b").await;
    s.send(b"n").await;
    let opened = s.wait_text("opened #2 for you").await;
    assert!(opened.contains("2 open"), "{opened}");
    // Both are the person's: `n` opened the second for them (it was listed `console`).
    assert_eq!(
        opened
            .lines()
            .filter(|l| l.contains("console (you)") && l.contains(" idle"))
            .count(),
        2,
        "both sessions marked the person's: {opened}"
    );
    // A line into the session opened for the person goes in unasked (before, it was asked
    // about as if another client had opened it); `n` left the person in the input line.
    s.send(b"yours-too\r").await;
    let answered = s.wait_text("You said: yours-too").await;
    assert!(!answered.contains("Enter again sends"), "{answered}");
    s.send(b"\x1b").await;
    s.send(b"y").await;
    s.wait_text("#2's handle copied (OSC 52").await;
    s.send(b"d").await;
    s.wait_text("d again closes #2").await;
    s.send(b"\x1b").await;
    settle_without(&s, "closed from the console", 300).await;
    s.send(b"d").await;
    s.send(b"d").await;
    let closed = s.wait_text("1 open").await;
    assert!(closed.contains("closed"), "{closed}");
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
}

/// SIGTERM to a console drains its server as `--headless` does (a replica behind a balancer
/// is stopped so): `/healthz` says draining at once, the turn in flight finishes and its
/// caller reads it whole, then the console exits and gives the terminal back.
#[tokio::test]
async fn sigterm_drains_the_server_then_the_console_exits() {
    // 40 words at 50 ms a word: 2 s of turn when the signal comes.
    let mut s = Screen::start_with(
        &["--port", "0"],
        &[("turnscope.toml", "[model]\npace = 0.05\nwords = 40\n")],
    )
    .await;
    let first = s.wait_text("Type a line; Enter sends").await;
    let url = mcp_url(&first);
    let client = Client::connect(&url).await;
    let handle = client.start().await;
    let in_flight = client.chat_cancellable(&handle, "a long story").await;
    s.wait_text("mcp: ").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    crate::support::binary::signal(&s.child, "TERM");
    let health = url.replace("/mcp", "/healthz");
    let deadline = Instant::now() + WAIT;
    loop {
        let response = reqwest::get(&health).await.expect("/healthz answers");
        if response.status() != 200 {
            let body: serde_json::Value = response.json().await.expect("JSON");
            assert_eq!(body["status"], "draining", "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "/healthz never said draining");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let reply = crate::support::mcp::outcome_of(
        tokio::time::timeout(WAIT, in_flight.await_response())
            .await
            .expect("the turn in flight is answered")
            .expect("a JSON-RPC answer"),
    );
    assert!(!reply.is_error, "{}", reply.text);
    assert_eq!(reply.record["end_reason"], "completed");
    assert_eq!(reply.text.split_whitespace().count(), 40);
    let status = s.wait_exit().await;
    assert!(status.success(), "{status:?}");
    assert!(s.restored());
}

/// Ctrl+Z gives the terminal back and stops the console (SIGTSTP, which raw mode keeps the
/// terminal from sending); continued, it takes the terminal again and draws. Here the
/// console leads its own session, whose stop signals the kernel discards (an orphaned
/// process group), so it comes back at once: what this checks is the way out and back in.
#[tokio::test]
async fn ctrl_z_hands_the_terminal_over_and_takes_it_back() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0"]).await;
    s.wait_text("Type a line; Enter sends").await;
    let before = s.raw.lock().unwrap().len();
    s.send(b"\x1a").await;
    // Out of the alternate screen, then into it again.
    let deadline = Instant::now() + WAIT;
    loop {
        let raw = s.raw.lock().unwrap()[before..].to_vec();
        let text = String::from_utf8_lossy(&raw);
        if text.contains("\x1b[?1049l") && text.contains("\x1b[?1049h") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the terminal was not handed over and back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s.send(b"still here\r").await;
    s.wait_text("turn 1 · completed").await;
    s.send(b"\x03").await;
    assert!(s.wait_exit().await.success());
}

/// `attach` reads the config's `[console]` as the local console and replay do: a viewer kept
/// 16 MiB and the dark theme whatever `max_mib` and `theme` said (tour G). A theme file that
/// does not parse, named by the config, shows the file was read.
#[tokio::test]
async fn attach_reads_the_consoles_settings_from_the_config() {
    let (dir, theme) = broken_theme("attach-config");
    let config = dir.join("viewer.toml");
    std::fs::write(
        &config,
        format!(
            "[console]\nmax_mib = 1\ntheme = {:?}\n",
            theme.display().to_string()
        ),
    )
    .unwrap();
    refused_naming_the_theme_key(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
            .arg("--config")
            .arg(&config)
            .args(["attach", "http://127.0.0.1:9/mcp"])
            .current_dir(&dir),
    )
    .await;
    // The error says where the theme was named: the key, the config file and its line.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .arg("--config")
        .arg(&config)
        .args(["attach", "http://127.0.0.1:9/mcp"])
        .current_dir(&dir)
        .output()
        .await
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`[console] theme` at") && err.contains("viewer.toml:3"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
