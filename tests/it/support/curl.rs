//! Running a copied `curl` command the way a person pastes it into a shell.

use std::process::Command;

/// Runs `curl` (a whole command line, as the console copies it) with `sh -c` and returns the
/// reply text of the streamed chat completion it printed. Panics with curl's stderr when the
/// command fails.
pub async fn streamed_reply_of(curl: String) -> String {
    let out = tokio::task::spawn_blocking(move || {
        Command::new("sh").arg("-c").arg(&curl).output().unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    turnscope::model::client::parse_sse_body(vec![out.stdout], &mut |_| {})
        .unwrap()
        .text
}
