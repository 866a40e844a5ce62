//! `turnscope-dev pty`: a program in a pseudo-terminal whose output is read and thrown away,
//! as a person's terminal would take it. The benches start a server with its console this
//! way (`bench soak --console`, `bench memory --console`, `bench console-memory`), so the
//! console draws for real while the bench measures the server from outside; what this process
//! reads on stdin is typed into the terminal.

use std::ffi::OsString;

use anyhow::Context as _;
use clap::Args;
use tokio::io::AsyncReadExt;

/// `turnscope-dev pty` flags.
#[derive(Debug, Args)]
pub struct PtyArgs {
    /// Rows of the pseudo-terminal.
    #[arg(long, default_value_t = 48)]
    rows: u16,
    /// Columns of the pseudo-terminal.
    #[arg(long, default_value_t = 160)]
    cols: u16,
    /// The program and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

/// Runs the program until it exits (its status is returned) or this process is asked to
/// stop (the program is killed, then waited for).
pub async fn run(args: PtyArgs) -> anyhow::Result<u8> {
    let (program, rest) = args
        .command
        .split_first()
        .context("pty: name the program to run after --")?;
    let (pty, pts) = pty_process::open().context("opening a pseudo-terminal")?;
    pty.resize(pty_process::Size::new(args.rows, args.cols))
        .context("sizing the pseudo-terminal")?;
    let mut child = pty_process::Command::new(program)
        .args(rest)
        .kill_on_drop(true)
        .spawn(pts)
        .with_context(|| {
            format!(
                "starting {} in a pseudo-terminal",
                program.to_string_lossy()
            )
        })?;
    let (mut reader, mut writer) = pty.into_split();
    let drain = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        while matches!(reader.read(&mut buf).await, Ok(n) if n > 0) {}
    });
    // What this process reads on stdin is typed into the terminal (a bench's keys).
    let keys = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut writer).await;
    });
    let status = tokio::select! {
        status = child.wait() => status.context("waiting for the program")?,
        () = super::wait_for_signal() => {
            let _ = child.kill().await;
            drain.abort();
            keys.abort();
            return Ok(0);
        }
    };
    drain.abort();
    keys.abort();
    Ok(status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .unwrap_or(1))
}
