//! A stdio MCP server's child process as an rmcp transport whose incoming lines are bounded,
//! and where a line over the bound still answers its request.
//!
//! rmcp's `TokioChildProcess` reads the child's stdout with a 16 MiB line limit and drops a
//! longer line with only a log line: the request it answered (a tool result of 20 MB, say) then
//! waits for its whole timeout and is blamed on slowness. It offers no way to see the dropped
//! line or to change that, so this module spawns the child itself and reads its stdout through
//! [`BoundedLines`], which passes lines up to [`MAX_LINE_BYTES`] through untouched and turns a
//! longer one into a JSON-RPC error for the request it answered (its `id`, found in the line's
//! first or last bytes), so the call ends at once and says why. Its shutdown is the MCP
//! specification's, as rmcp's is: stdin closed (bounded), a wait, `SIGTERM`, a wait, a kill;
//! the signals go to its whole process group, so what it started goes with it.

use std::pin::Pin;
use std::process::Stdio;
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

/// The longest line (one JSON-RPC message) read from a stdio server, as rmcp's own limit.
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Bytes at the start of each line kept to find its `id` should the line be too long.
const HEAD_BYTES: usize = 4096;

/// Bytes at the end of a too-long line kept to find its `id` there (the TypeScript SDK writes
/// `id` last).
const TAIL_BYTES: usize = 4096;

/// The key of the error's `data` that marks an error [`BoundedLines`] made for a reply over
/// the bound (its value: the reply's size in bytes), read by [`reply_too_large`].
const TOO_LARGE_MARK: &str = "turnscope_dropped_reply_bytes";

/// The size in bytes of a reply dropped for being over [`MAX_LINE_BYTES`], when `error` is the
/// one [`BoundedLines`] gave in its place (not the server's own).
pub(crate) fn reply_too_large(error: &rmcp::ErrorData) -> Option<usize> {
    let bytes = error.data.as_ref()?.get(TOO_LARGE_MARK)?.as_u64()?;
    usize::try_from(bytes).ok()
}

/// How long a closed server is given to exit, after its stdin closes and again after `SIGTERM`.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// A running stdio server: its process and the transport over its stdin and stdout.
pub(crate) struct StdioChild {
    /// `None` once it has exited or been killed. Spawned with `kill_on_drop`, so dropping
    /// this kills a child still running.
    child: Option<Child>,
    transport: AsyncRwTransport<RoleClient, BoundedLines<ChildStdout>, ChildStdin>,
}

impl StdioChild {
    /// Spawns `cmd` with piped stdin, stdout and stderr; returns the transport and the stderr.
    ///
    /// # Errors
    /// Returns the system's error when the command cannot be started.
    pub(crate) fn spawn(mut cmd: Command) -> std::io::Result<(Self, Option<ChildStderr>)> {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other(
                "the child's stdin or stdout was not piped",
            ));
        };
        let stderr = child.stderr.take();
        // rmcp's own limit is never reached: `BoundedLines` passes at most MAX_LINE_BYTES of a
        // line and its newline.
        let transport = AsyncRwTransport::new_client(BoundedLines::new(stdout), stdin)
            .with_max_line_length(MAX_LINE_BYTES + 1);
        Ok((
            Self {
                child: Some(child),
                transport,
            },
            stderr,
        ))
    }

    /// The child's process id, while it runs.
    pub(crate) fn id(&self) -> Option<u32> {
        self.child.as_ref()?.id()
    }

    /// The stdio shutdown of the MCP specification: close its stdin, wait for it to exit; then
    /// `SIGTERM` and wait again; then kill it.
    async fn shut_down(&mut self) -> std::io::Result<()> {
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        #[cfg(unix)]
        let group = child.id();
        // Closing stdin waits for a write in progress, which never ends when the server stopped
        // reading with its pipe full: bounded, the signals follow either way.
        let _ = tokio::time::timeout(EXIT_GRACE, self.transport.close()).await;
        let mut exited = matches!(
            tokio::time::timeout(EXIT_GRACE, child.wait()).await,
            Ok(Ok(_))
        );
        #[cfg(unix)]
        if !exited && let Some(pid) = group {
            signal_group(pid, nix::sys::signal::Signal::SIGTERM);
            exited = matches!(
                tokio::time::timeout(EXIT_GRACE, child.wait()).await,
                Ok(Ok(_))
            );
        }
        let result = if exited {
            Ok(())
        } else {
            self.kill_all();
            match self.child.as_mut() {
                Some(child) => child.wait().await.map(drop),
                None => Ok(()),
            }
        };
        // What it started in its group may outlive it (a helper it did not wait for): the
        // group is asked to end too. Only the group: its leader's pid is reaped now.
        #[cfg(unix)]
        if let Some(pid) = group.and_then(|pid| i32::try_from(pid).ok()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        self.child = None;
        result
    }

    /// Kills the server and whatever it started in its process group (a wrapper that does not
    /// `exec`, `sh -c`, `npx`, `uv run`, or a helper the server runs); killing its pid alone
    /// left those running, orphaned, after every shutdown, respawn and reload.
    fn kill_all(&mut self) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        #[cfg(unix)]
        if let Some(pid) = child.id() {
            signal_group(pid, nix::sys::signal::Signal::SIGKILL);
        }
        let _ = child.start_kill();
    }
}

impl Drop for StdioChild {
    /// A server not shut down (its connection dropped, turnscope ending) is killed with its
    /// process group; tokio reaps it.
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Sends `signal` to the process group `pid` leads (`connect` starts each stdio server as
/// the leader of a group of its own), or to `pid` alone when it leads none.
#[cfg(unix)]
fn signal_group(pid: u32, signal: nix::sys::signal::Signal) {
    let Ok(pid) = i32::try_from(pid) else {
        return;
    };
    // Our own child, not yet reaped (its `wait` has not returned), so the id is its own.
    let pid = nix::unistd::Pid::from_raw(pid);
    if nix::sys::signal::killpg(pid, signal).is_err() {
        let _ = nix::sys::signal::kill(pid, signal);
    }
}

impl Transport<RoleClient> for StdioChild {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shut_down()
    }
}

/// A reader of newline-delimited JSON-RPC messages that passes each line of at most
/// [`MAX_LINE_BYTES`] through unchanged. Of a longer line it passes the first part, then a
/// newline (the reader above sees a cut line, not JSON, and skips it), reads the rest without
/// keeping it, and then yields a JSON-RPC error line for the request the line answered.
pub(crate) struct BoundedLines<R> {
    inner: R,
    /// Bytes read from `inner` not yet handled (`buf[at..filled]`).
    buf: Box<[u8]>,
    at: usize,
    filled: usize,
    /// Bytes of the current line seen so far (passed through, or dropped once over the bound).
    line_bytes: usize,
    /// The current line's first bytes.
    head: Vec<u8>,
    /// The last bytes of a line being dropped (at most twice [`TAIL_BYTES`]).
    tail: Vec<u8>,
    /// Whether the current line is over the bound and being dropped.
    dropping: bool,
    /// What to yield before anything else: the newline that ends a cut line and the error.
    owed: Vec<u8>,
    owed_at: usize,
}

impl<R> BoundedLines<R> {
    /// Reads lines from `inner`.
    pub(crate) fn new(inner: R) -> Self {
        Self {
            inner,
            buf: vec![0; 64 * 1024].into_boxed_slice(),
            at: 0,
            filled: 0,
            line_bytes: 0,
            head: Vec::with_capacity(HEAD_BYTES),
            tail: Vec::new(),
            dropping: false,
            owed: Vec::new(),
            owed_at: 0,
        }
    }

    /// Handles `self.buf[self.at..self.filled]` into `out` as far as it goes.
    fn pass(&mut self, out: &mut ReadBuf<'_>) {
        while self.at < self.filled && out.remaining() > 0 && self.owed.is_empty() {
            let ready = &self.buf[self.at..self.filled];
            let newline = ready.iter().position(|b| *b == b'\n');
            let line_part = newline.unwrap_or(ready.len());
            if self.dropping {
                let end = newline.map_or(ready.len(), |i| i + 1);
                keep_tail(&mut self.tail, &ready[..line_part]);
                self.line_bytes += line_part;
                self.at += end;
                if newline.is_some() {
                    self.owed = self.too_long_answer();
                    self.owed_at = 0;
                    self.end_line();
                }
                continue;
            }
            if self.line_bytes + line_part > MAX_LINE_BYTES {
                // Over the bound: end what was passed so far, drop the rest of the line.
                self.dropping = true;
                self.owed = b"\n".to_vec();
                self.owed_at = 0;
                continue;
            }
            let end = newline.map_or(ready.len(), |i| i + 1);
            let n = end.min(out.remaining());
            let passed = &ready[..n];
            let ends_here = newline.is_some() && n == end;
            // Near the bound, the last bytes passed are kept too: should the line pass it just
            // after, its `id` may lie in them (the TypeScript SDK writes it last).
            if !ends_here && self.line_bytes + n > MAX_LINE_BYTES - TAIL_BYTES {
                let from = (MAX_LINE_BYTES - TAIL_BYTES).saturating_sub(self.line_bytes);
                keep_tail(&mut self.tail, &passed[from.min(n)..]);
            }
            if self.head.len() < HEAD_BYTES {
                let room = HEAD_BYTES - self.head.len();
                self.head
                    .extend_from_slice(&passed[..passed.len().min(room)]);
            }
            out.put_slice(passed);
            self.at += n;
            if ends_here {
                self.end_line();
            } else {
                self.line_bytes += n;
            }
        }
    }

    /// A JSON-RPC error line for the request the dropped line answered, when it was a response
    /// whose `id` was found; else nothing (the newline ending its cut first part was owed
    /// when the dropping began).
    fn too_long_answer(&self) -> Vec<u8> {
        let (head, tail) = (seen_in_head(&self.head), seen_in_tail(&self.tail));
        // A request or notification of the server's (its `id`, if any, counts in the
        // server's own numbering, not the client's) is dropped; only a response answers: one
        // whose `result` or `error` was seen (a request may hide its `method` in the middle,
        // after a large `params`, and show only `id` last).
        let keys = || head.keys.iter().chain(&tail.keys);
        let method = keys().any(|k| k == "method");
        let response = keys().any(|k| k == "result" || k == "error");
        let id = head.id.or(tail.id);
        let Some(id) = id.filter(|_| response && !method) else {
            tracing::error!(
                bytes = self.line_bytes,
                "a stdio MCP server wrote a message over the {} MiB limit ({}); it was dropped",
                MAX_LINE_BYTES >> 20,
                if method || !response {
                    "not a response: a request or notification of its own"
                } else {
                    "no request id found at its start or end"
                }
            );
            return Vec::new();
        };
        let error = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": -32603,
                "message": format!(
                    "its reply was {}, over the {} MiB turnscope reads in one message from a \
                     stdio server, and was dropped",
                    over_size(self.line_bytes),
                    MAX_LINE_BYTES >> 20
                ),
                "data": { TOO_LARGE_MARK: self.line_bytes },
            },
        });
        let mut line = error.to_string().into_bytes();
        line.push(b'\n');
        line
    }

    /// Forgets the line that just ended.
    fn end_line(&mut self) {
        self.line_bytes = 0;
        self.head.clear();
        self.tail = Vec::new();
        self.dropping = false;
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.owed_at < this.owed.len() {
                let n = (this.owed.len() - this.owed_at).min(out.remaining());
                out.put_slice(&this.owed[this.owed_at..this.owed_at + n]);
                this.owed_at += n;
                if this.owed_at == this.owed.len() {
                    this.owed.clear();
                    this.owed_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.at == this.filled {
                let mut read = ReadBuf::new(&mut this.buf);
                match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                    Poll::Ready(Ok(())) => {}
                    other => return other,
                }
                this.at = 0;
                this.filled = read.filled().len();
                if this.filled == 0 {
                    // The end came in the middle of a line being dropped: its answer first
                    // (the request it answered is told why), then the end.
                    if this.dropping {
                        this.owed = this.too_long_answer();
                        this.owed_at = 0;
                        this.end_line();
                        if !this.owed.is_empty() {
                            continue;
                        }
                    }
                    return Poll::Ready(Ok(()));
                }
            }
            let before = out.filled().len();
            this.pass(out);
            // Something was yielded, or an error line is owed: return it. Otherwise the whole
            // read went to a line being dropped: read on.
            if out.filled().len() > before {
                return Poll::Ready(Ok(()));
            }
        }
    }
}

/// Appends `bytes` to `tail`, keeping its last [`TAIL_BYTES`] (it may hold up to twice that
/// between trims, so each byte is moved at most once).
fn keep_tail(tail: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.len() >= TAIL_BYTES {
        tail.clear();
        tail.extend_from_slice(&bytes[bytes.len() - TAIL_BYTES..]);
        return;
    }
    tail.extend_from_slice(bytes);
    if tail.len() > 2 * TAIL_BYTES {
        tail.drain(..tail.len() - TAIL_BYTES);
    }
}

/// What the start or the end of a JSON-RPC message shows of it: its top-level `id`, when
/// whole there, and the top-level keys seen.
#[derive(Default)]
struct Seen {
    id: Option<Value>,
    keys: Vec<String>,
}

/// The top-level members the JSON object that `head` begins shows before `head` ends or a
/// value runs past it (rmcp and the Python SDK write `id` first or second, then `result` or
/// `method`).
fn seen_in_head(head: &[u8]) -> Seen {
    let mut seen = Seen::default();
    let Some(mut rest) = skip_space(head).strip_prefix(b"{") else {
        return seen;
    };
    while let Some((key, after)) = one_value::<String>(skip_space(rest)) {
        let Some(after) = skip_space(after).strip_prefix(b":") else {
            break;
        };
        seen.keys.push(key.clone());
        let Some((value, after)) = one_value::<Value>(skip_space(after)) else {
            break;
        };
        let after = skip_space(after);
        // A number cut by the end of `head` is not the whole id.
        if key == "id" && matches!(after.first(), Some(b',' | b'}')) {
            seen.id = Some(value);
        }
        let Some(next) = after.strip_prefix(b",") else {
            break;
        };
        rest = next;
    }
    seen
}

/// The members after the last large one of the JSON object that `tail` ends, from a
/// candidate `"id"` on (the TypeScript SDK writes `id` last). A candidate counts only when
/// every member from it to the final `}` parses whole, so an `id` nested deeper never does.
fn seen_in_tail(tail: &[u8]) -> Seen {
    let at_ends = |bytes: &[u8], at: usize| {
        let before = bytes[..at].iter().rev().find(|b| !b.is_ascii_whitespace());
        matches!(before, Some(b',' | b'{'))
    };
    let candidates = tail
        .windows(4)
        .enumerate()
        .filter(|(at, w)| *w == b"\"id\"" && at_ends(tail, *at))
        .map(|(at, _)| at)
        .collect::<Vec<_>>();
    candidates
        .into_iter()
        .rev()
        .find_map(|at| members_to_end(&tail[at..]))
        .unwrap_or_default()
}

/// Parses `"id": value` and the members after it up to a final `}`, if all parse.
fn members_to_end(mut rest: &[u8]) -> Option<Seen> {
    let mut seen = Seen::default();
    loop {
        let (key, after) = one_value::<String>(skip_space(rest))?;
        let after = skip_space(after).strip_prefix(b":")?;
        let (value, after) = one_value::<Value>(skip_space(after))?;
        if key == "id" && seen.id.is_none() {
            seen.id = Some(value);
        }
        seen.keys.push(key);
        let after = skip_space(after);
        match after.first() {
            Some(b',') => rest = &after[1..],
            Some(b'}') if skip_space(&after[1..]).is_empty() => return Some(seen),
            _ => return None,
        }
    }
}

/// One JSON value at the start of `bytes` and what follows it.
fn one_value<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Option<(T, &[u8])> {
    let mut values = serde_json::Deserializer::from_slice(bytes).into_iter::<T>();
    let value = values.next()?.ok()?;
    Some((value, &bytes[values.byte_offset()..]))
}

/// A size over [`MAX_LINE_BYTES`] for a person: in MiB, or in bytes when so near the bound
/// that MiB would read the same ("16.0 MiB, over the 16 MiB").
fn over_size(bytes: usize) -> String {
    if bytes < MAX_LINE_BYTES + (MAX_LINE_BYTES >> 7) {
        format!("{bytes} bytes")
    } else {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    }
}

fn skip_space(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    &bytes[start..]
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    async fn read_all(input: Vec<u8>, chunk: usize) -> Vec<u8> {
        let (mut writer, reader) = tokio::io::duplex(chunk);
        let feeding = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            writer.write_all(&input).await.unwrap();
        });
        let mut lines = BoundedLines::new(reader);
        let mut out = Vec::new();
        let mut piece = vec![0; 8192];
        loop {
            let n = lines.read(&mut piece).await.unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&piece[..n]);
        }
        feeding.await.unwrap();
        out
    }

    fn text_of(bytes: usize) -> String {
        "x".repeat(bytes)
    }

    #[tokio::test]
    async fn lines_within_the_bound_pass_unchanged() {
        let mut input = Vec::new();
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
        input.extend_from_slice(
            format!("{{\"id\":2,\"result\":\"{}\"}}\n", text_of(200_000)).as_bytes(),
        );
        input.extend_from_slice(b"\n{\"partial\":");
        let out = read_all(input.clone(), 1000).await;
        assert_eq!(out, input);
    }

    #[tokio::test]
    async fn a_line_over_the_bound_becomes_an_error_for_its_id_first_or_last() {
        let big = text_of(MAX_LINE_BYTES + 10);
        let mut input = Vec::new();
        // rmcp and Python write the id first; TypeScript writes it last.
        input.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{{\"text\":\"{big}\"}}}}\n")
                .as_bytes(),
        );
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}\n");
        input.extend_from_slice(
            format!(
                "{{\"result\": {{\"content\": [{{\"id\": 3, \"text\": \"{big}\"}}]}}, \
                 \"jsonrpc\": \"2.0\", \"id\": \"req-9\"}}\r\n"
            )
            .as_bytes(),
        );
        let out = read_all(input, 64 * 1024).await;
        assert!(
            out.len() < MAX_LINE_BYTES * 2 + 4096,
            "the rest was dropped"
        );
        let lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
        // cut part, error, untouched line, cut part, error, end.
        assert_eq!(
            lines.len(),
            6,
            "{:?}",
            lines.iter().map(|l| l.len()).collect::<Vec<_>>()
        );
        assert!(serde_json::from_slice::<Value>(lines[0]).is_err());
        let first: Value = serde_json::from_slice(lines[1]).unwrap();
        assert_eq!(first["id"], 7);
        let message = first["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("{} bytes, over the 16 MiB", MAX_LINE_BYTES + 55)),
            "{message}"
        );
        assert_eq!(lines[2], b"{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}");
        let last: Value = serde_json::from_slice(lines[4]).unwrap();
        assert_eq!(last["id"], "req-9", "not the nested id 3");
        assert_eq!(last["error"]["code"], -32603);
        let error: rmcp::ErrorData = serde_json::from_value(last["error"].clone()).unwrap();
        assert!(reply_too_large(&error).unwrap() > MAX_LINE_BYTES);
        assert!(lines[5].is_empty());
    }

    /// A line over the bound cut by the server's end (no newline) still answers its request.
    #[tokio::test]
    async fn a_line_over_the_bound_cut_by_the_end_is_answered() {
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{{\"text\":\"{}",
            text_of(MAX_LINE_BYTES)
        );
        let out = read_all(line.into_bytes(), 64 * 1024).await;
        let lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
        let answer: Value = serde_json::from_slice(lines[1]).unwrap();
        assert_eq!(answer["id"], 4);
    }

    #[test]
    fn the_id_is_found_only_at_the_top_level() {
        let head = |bytes: &[u8]| seen_in_head(bytes).id;
        let tail = |bytes: &[u8]| seen_in_tail(bytes).id;
        assert_eq!(
            head(br#"{"jsonrpc":"2.0","id":12,"result":{"#),
            Some(12.into())
        );
        assert_eq!(head(br#"{"result":{"id":1},"id":"a","#), Some("a".into()));
        assert_eq!(head(br#"{"jsonrpc":"2.0","id":12"#), None, "maybe cut");
        assert_eq!(head(br#"{"result":{"text":"xxxx"#), None);
        assert_eq!(tail(br#"xx"}]},"jsonrpc":"2.0","id":4}"#), Some(4.into()));
        assert_eq!(tail(br#"xx"}], "id": 4}}"#), None, "nested");
        assert_eq!(tail(br#"x \"id\":4}"#), None, "inside a string");
        assert_eq!(tail(br#"xx","id":5,"jsonrpc":"2.0"}"#), Some(5.into()));
        // The keys seen tell a request of the server's from a response.
        let request = seen_in_head(
            br#"{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"x":"#,
        );
        assert_eq!(request.keys, ["jsonrpc", "id", "method", "params"]);
    }

    /// A line just over the bound with its `id` last (its tail mostly passed before the
    /// dropping began) is still answered; a request of the server's over the bound is dropped,
    /// not taken for the answer to the client's request of the same number (tour I).
    #[tokio::test]
    async fn just_over_the_bound_id_last_is_answered_and_a_servers_request_is_not() {
        let shell = r#"{"result":{"text":""}},"jsonrpc":"2.0","id":3}"#;
        for over in [1, 2, 12, 30] {
            let text = text_of(MAX_LINE_BYTES + over - shell.len());
            let line = format!(r#"{{"result":{{"text":"{text}"}}}},"jsonrpc":"2.0","id":3}}"#);
            assert_eq!(line.len(), MAX_LINE_BYTES + over);
            let out = read_all(format!("{line}\n").into_bytes(), 64 * 1024).await;
            let lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
            let answer: Value = serde_json::from_slice(lines[1]).unwrap();
            assert_eq!(answer["id"], 3, "{over} over");
        }
        let request = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"sampling/createMessage\",\"params\":{{\"x\":\"{}\"}}}}\n{}\n",
            text_of(MAX_LINE_BYTES),
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#
        );
        let out = read_all(request.into_bytes(), 64 * 1024).await;
        let lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
        assert_eq!(
            lines.len(),
            3,
            "the cut part, the client's own answer, the end"
        );
        assert_eq!(lines[1], br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        // Its `method` in the middle, after a large `params`, its `id` last: still not a
        // response.
        let request = format!(
            "{{\"params\":{{\"x\":\"{}\"}},\"method\":\"sampling/createMessage\",\"jsonrpc\":\"2.0\",\"id\":1}}\n",
            text_of(MAX_LINE_BYTES),
        );
        let out = read_all(request.into_bytes(), 64 * 1024).await;
        let lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
        assert_eq!(lines.len(), 2, "the cut part, the end: no answer made up");
        assert_eq!(over_size(MAX_LINE_BYTES * 2), "32.0 MiB");
    }
}
