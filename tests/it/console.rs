//! The console end to end: the real binary in a pseudo-terminal, its screen read back through
//! a terminal emulator (vt100), driven by keys as a person would, and by a real MCP client
//! (rmcp, streamable HTTP) chatting on its own handle at the same time.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::binary::{ready_line, serving, terminate, url_in};
use crate::support::mcp::Client;
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
    _dir: TempDir,
}

/// A directory of its own, so no `turnscope.toml` or `themes/` of the repository is picked up.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Screen {
    async fn start(args: &[&str]) -> Screen {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "turnscope-console-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let (pty, pts) = pty_process::open().expect("a pseudo-terminal opens");
        pty.resize(pty_process::Size::new(ROWS, COLS))
            .expect("resize");
        let child = pty_process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
            .args(args)
            .current_dir(&dir)
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
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match reader.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().process(&buf[..n]),
                }
            }
        });
        Screen {
            child,
            writer,
            parser,
            _dir: TempDir(dir),
        }
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

    async fn wait_text(&self, needle: &str) -> String {
        self.wait_for(&format!("{needle:?}"), |t| t.contains(needle))
            .await
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

/// The MCP URL the header shows.
fn mcp_url(screen: &str) -> String {
    let at = screen
        .find("MCP http://")
        .expect("the header shows the MCP URL")
        + 4;
    let rest = &screen[at..];
    let end = rest.find("/mcp").expect("the URL ends in /mcp") + 4;
    rest[..end].to_string()
}

#[tokio::test]
async fn person_types_a_line_sees_the_reply_and_quits_cleanly() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0.005"]).await;
    let first = s.wait_text("Type a line for the selected session").await;
    assert!(
        first.contains("console (you)"),
        "the person's own session is listed:\n{first}"
    );
    assert!(first.contains("claude mcp add --transport http turnscope http://127.0.0.1:"));
    assert!(first.contains("embedded scripted model"));

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
    s.wait_text("Frames, Progress, Stats").await;
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

#[tokio::test]
async fn an_mcp_client_chatting_on_its_own_handle_shows_live() {
    let mut s = Screen::start(&["--port", "0", "--pace", "0.005"]).await;
    let first = s.wait_text("Type a line for the selected session").await;
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
    let screen = s.wait_text("you  hello from the mcp client").await;
    assert!(screen.contains("turn 1 · completed"), "{screen}");

    // A second line while the console watches: it streams into the same transcript.
    let second = {
        let handle = handle.clone();
        tokio::spawn(async move {
            client.chat(&handle, "and a second line").await;
            client
        })
    };
    s.wait_text("you  and a second line").await;
    let client = second.await.expect("the second chat answers");
    s.wait_text("turn 2 · completed").await;
    drop(client);

    s.send(b"q").await;
    let status = s.wait_exit().await;
    assert!(status.success(), "{status:?}");
    assert!(s.restored());
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
    assert!(screen.contains("you  a recorded line"), "{screen}");
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

#[tokio::test]
async fn a_bad_theme_is_refused_naming_the_key() {
    let dir = std::env::temp_dir().join(format!("turnscope-theme-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let theme = dir.join("broken.toml");
    std::fs::write(&theme, "accent = { fg = \"not-a-colour\" }\n").unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .args(["--port", "0", "--theme"])
        .arg(&theme)
        .output()
        .await
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("broken.toml") && err.contains("`accent.fg`"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
