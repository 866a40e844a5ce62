//! The real binary as a child process: its ready line, the URLs in it, and signals.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long a test waits for the binary to get ready or to exit.
pub const WAIT: Duration = Duration::from_secs(30);

/// The binary with `args`, its stdout piped for [`ready_line`], killed if the test drops it.
pub fn serving(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_turnscope"));
    command.args(args).stdout(Stdio::piped()).kill_on_drop(true);
    command
}

/// Reads `child`'s stdout up to its ready line (the first containing ` ready: `, which every
/// mode prints once it serves) and returns that line. The rest of stdout is read and
/// dropped in the background, so the child never blocks on a full pipe.
pub async fn ready_line(child: &mut Child) -> String {
    let stdout = child
        .stdout
        .take()
        .expect("the child's stdout is piped and not taken yet");
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(WAIT, async {
        while let Some(line) = lines.next_line().await.expect("read the child's stdout") {
            if line.contains(" ready: ") {
                return line;
            }
        }
        panic!("turnscope exited before it printed its ready line");
    })
    .await
    .expect("turnscope did not print its ready line in time");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    ready
}

/// The `http://` URL in `line` that ends with `suffix` (e.g. `/mcp`, `/v1/tools`).
pub fn url_in(line: &str, suffix: &str) -> String {
    line.split_whitespace()
        .find(|w| w.starts_with("http://") && w.ends_with(suffix))
        .unwrap_or_else(|| panic!("no http:// URL ending in {suffix} in {line:?}"))
        .to_string()
}

/// Sends signal `name` (`TERM`, `INT`, …) to `child`.
pub fn signal(child: &Child, name: &str) {
    let pid = child.id().expect("the child is running").to_string();
    let sent = std::process::Command::new("kill")
        .args(["-s", name, &pid])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -s {name} {pid} failed");
}

/// SIGTERM, then the exit status (the child must exit within [`WAIT`]).
pub async fn terminate(child: &mut Child) -> ExitStatus {
    signal(child, "TERM");
    tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("turnscope did not exit after SIGTERM")
        .expect("wait for turnscope")
}
