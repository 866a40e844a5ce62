//! Opens one MCP client *session* (transport + `initialize` handshake) to a server entry: a
//! stdio child ([`StdioChild`]) in its own process group and folder (`cwd`), its stderr copied
//! to the log and its last lines kept for the error when it fails to start, rmcp's streamable
//! HTTP client with capped stream resumption, or the legacy [`SseClientTransport`]. It never
//! retries (the `supervisor` does) and never lists or calls tools.
//! `client_info` is the one place the client's `initialize` parameters are built.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::sse_client::{SseClientTransport, SseConnectError};
use super::stdio_child::StdioChild;
use crate::config::{McpServerConfig, TransportKind};
use crate::observe::redact::redact;

/// The variable holding turnscope's own bearer token (`--auth-token`), kept from stdio servers.
const AUTH_TOKEN_VAR: &str = "TURNSCOPE_AUTH_TOKEN";

/// Longest stderr line of a stdio server copied to the log.
const STDERR_LINE_CHARS: usize = 500;

/// Stderr lines of a stdio server kept for the error when it fails to start.
const STDERR_TAIL_LINES: usize = 5;

/// How long a failed start waits for the child's last stderr lines (it usually exits at once).
pub(crate) const STDERR_GRACE: Duration = Duration::from_millis(500);

/// What the client says about itself in `initialize`, under the implementation name `name`:
/// the newest revision that has the handshake (2025-11-25). rmcp's default, 2026-07-28, has
/// none, and a server that only knows the handshake revisions cannot answer it properly.
pub(crate) fn client_info(name: &str) -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(name, env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

/// How a broken streamable HTTP response stream is resumed before the call fails: at once,
/// then after 0.5 and 1 s, each wait stretched to the server's SSE `retry:` hint if it gave
/// one (rmcp servers say 3 s, so about 6 s in all). rmcp's default retries forever, so a call
/// in flight to a server that died would wait for its whole timeout (or forever).
pub fn stream_resume_policy() -> Arc<ExponentialBackoff> {
    let mut policy = ExponentialBackoff::default();
    policy.max_times = Some(3);
    policy.base_duration = Duration::from_millis(250);
    policy.max_delay = Some(Duration::from_secs(1));
    Arc::new(policy)
}

/// Where a stdio child's stderr lines go (ANSI colours stripped, cut at 500 characters).
pub(crate) type StderrLog = Arc<dyn Fn(&str) + Send + Sync>;

/// How to open sessions to one server.
#[derive(Clone)]
pub(crate) struct Dial {
    /// The HTTP client for HTTP and SSE servers; `None`: a plain one.
    pub(crate) http: Option<reqwest::Client>,
    /// How long the legacy SSE transport waits for the server's `endpoint` event.
    pub(crate) sse_timeout: Duration,
    /// Where a stdio child's stderr goes.
    pub(crate) stderr: StderrLog,
    /// The last stderr lines of the latest attempt's child (a new tail at each), for a
    /// report of an attempt that timed out: the open is dropped then, its own tail with it.
    pub(crate) stderr_tail: LatestStderr,
}

/// An open session.
pub struct Session<C: ClientHandler> {
    /// The running rmcp client.
    pub service: RunningService<RoleClient, C>,
    /// The child's process id (stdio).
    pub pid: Option<u32>,
    /// The child's last stderr lines as it writes them (stdio), for the report of its end.
    pub stderr: Option<StderrTail>,
}

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Occurs when a stdio server's command cannot be started.
    #[error("cannot start `{command}` in {folder}: {source}; check `command`, its PATH and `cwd`")]
    Spawn {
        /// The command.
        command: String,
        /// The folder it was to run in.
        folder: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// Occurs when a configured header name or value is not valid HTTP.
    #[error("header {name:?}: {reason}")]
    Header {
        /// The header's name as configured.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Occurs when a legacy SSE server's stream cannot be opened or names no endpoint in time.
    #[error(transparent)]
    Sse(#[from] SseConnectError),
    /// Occurs when a stdio server started but did not complete the MCP handshake; the last
    /// lines it wrote to stderr usually say why.
    #[error(
        "`{command}` (in {folder}) started but the MCP handshake failed: {reason}{}",
        stderr_said(stderr)
    )]
    StdioHandshake {
        /// The command.
        command: String,
        /// The folder it ran in.
        folder: String,
        /// The handshake error and its causes.
        reason: String,
        /// Its last stderr lines, joined with ` | ` (empty: it wrote none).
        stderr: String,
    },
    /// Occurs when an HTTP or SSE server did not complete the MCP handshake.
    #[error("MCP handshake with {url} failed: {reason}")]
    Handshake {
        /// The server's URL.
        url: String,
        /// The handshake error and its causes.
        reason: String,
    },
    /// Occurs when the connection failed because the caller's policy refused a redirect.
    #[error("{refusal} ({source})")]
    Refused {
        /// The policy's reason.
        refusal: String,
        /// The error the refusal caused.
        source: Box<ConnectError>,
    },
    /// Occurs when a session opened by other means (a test's in-process server) fails.
    #[error("{0}")]
    Other(String),
}

impl From<String> for ConnectError {
    fn from(reason: String) -> Self {
        Self::Other(reason)
    }
}

/// Opens a session to `config` (placeholders already expanded) with client handler `client`.
/// Cancelling `ct` ends the session.
///
/// # Errors
/// See [`ConnectError`].
pub(crate) async fn open<C: ClientHandler>(
    config: &McpServerConfig,
    client: C,
    dial: &Dial,
    ct: CancellationToken,
) -> Result<Session<C>, ConnectError> {
    let url = config.url.as_deref().unwrap_or_default();
    let handshake = |e: &dyn std::error::Error| ConnectError::Handshake {
        url: url.to_string(),
        reason: chain(e),
    };
    // A 401/403 to `initialize`: the server was reached and wants credentials (or refused
    // those given); rmcp's words for it are only "Auth required".
    let refused_or = |e: rmcp::service::ClientInitializeError| {
        if !e.is_authorization_required() {
            return handshake(&e);
        }
        let given = config
            .headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("authorization"));
        ConnectError::Handshake {
            url: url.to_string(),
            reason: if given {
                "it refused the Authorization header given (HTTP 401/403): check the token in \
                 this server's `headers`"
                    .into()
            } else {
                "it asks for credentials (HTTP 401/403): add them to this server's entry, e.g. \
                 headers = { Authorization = \"Bearer ${TOKEN}\" }"
                    .into()
            },
        }
    };
    match config.transport_kind() {
        TransportKind::Stdio => {
            let command = config.command.as_deref().unwrap_or_default();
            let cwd = config.cwd.as_deref();
            let mut cmd = tokio::process::Command::new(program(command, cwd));
            // turnscope's own bearer token guards its endpoints: no tool server needs it
            // (one that does gets it through its `env`).
            cmd.env_remove(AUTH_TOKEN_VAR)
                .args(&config.args)
                .envs(&config.env)
                .kill_on_drop(true);
            if let Some(cwd) = cwd {
                cmd.current_dir(cwd);
            }
            // Its own process group: a Ctrl-C at the terminal reaches turnscope, which then
            // closes the server, instead of killing the server first (and causing a respawn).
            #[cfg(unix)]
            cmd.process_group(0);
            // A folder that is not there fails the spawn with the same "not found" as a
            // missing command: said apart.
            let folder_missing = match cwd {
                Some(cwd) => !tokio::fs::metadata(cwd).await.is_ok_and(|m| m.is_dir()),
                None => false,
            };
            if let Some(cwd) = cwd.filter(|_| folder_missing) {
                return Err(ConnectError::Other(format!(
                    "cannot start `{command}`: its folder {} (`cwd`) does not exist or is not a \
                     folder; fix `cwd` in its entry",
                    cwd.display()
                )));
            }
            let (transport, stderr) =
                StdioChild::spawn(cmd).map_err(|source| ConnectError::Spawn {
                    command: command.into(),
                    folder: shown_folder(cwd),
                    source,
                })?;
            let pid = transport.id();
            // A tail of this attempt's own: a child of an earlier one (or a helper it left
            // holding the pipe) cannot add its lines to this one's report.
            let tail = StderrTail::default();
            dial.stderr_tail.set(tail.clone());
            let copying = stderr
                .map(|stderr| tokio::spawn(copy_stderr(stderr, dial.stderr.clone(), tail.clone())));
            match client.serve_with_ct(transport, ct).await {
                Ok(service) => Ok(Session {
                    service,
                    pid,
                    stderr: Some(tail),
                }),
                Err(e) => {
                    // A server that fails at start usually says why on stderr and exits: wait
                    // (briefly) for its last words to arrive.
                    let mut closed = false;
                    if let Some(copying) = copying {
                        closed = tokio::time::timeout(STDERR_GRACE, copying).await.is_ok();
                    }
                    // Its stderr closed: it exited, and rmcp's words (a broken pipe, a closed
                    // connection) only say so less plainly.
                    let reason = if closed {
                        "it exited before answering `initialize`".to_string()
                    } else {
                        chain(&e)
                    };
                    Err(ConnectError::StdioHandshake {
                        command: command.into(),
                        folder: shown_folder(cwd),
                        reason,
                        stderr: tail.text(),
                    })
                }
            }
        }
        TransportKind::Http => {
            let mut headers = HashMap::new();
            for (name, value) in &config.headers {
                let header = |reason: String| ConnectError::Header {
                    name: name.clone(),
                    reason,
                };
                let key =
                    HeaderName::from_bytes(name.as_bytes()).map_err(|e| header(e.to_string()))?;
                let value = HeaderValue::from_str(value)
                    .map_err(|e| header(format!("invalid value ({e})")))?;
                headers.insert(key, value);
            }
            let mut transport_config =
                StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
            transport_config.retry_config = stream_resume_policy();
            let transport = match &dial.http {
                Some(http) => {
                    StreamableHttpClientTransport::with_client(http.clone(), transport_config)
                }
                None => StreamableHttpClientTransport::from_config(transport_config),
            };
            let service = match client.serve_with_ct(transport, ct).await {
                Ok(service) => service,
                Err(e) => return Err(unreached(url, refused_or(e)).await),
            };
            Ok(Session {
                service,
                pid: None,
                stderr: None,
            })
        }
        TransportKind::Sse => {
            let headers: Vec<(String, String)> = config
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let transport = match &dial.http {
                Some(http) => {
                    SseClientTransport::connect_with(http.clone(), url, &headers, dial.sse_timeout)
                        .await?
                }
                None => SseClientTransport::connect(url, &headers, dial.sse_timeout).await?,
            };
            let service = client
                .serve_with_ct(transport, ct)
                .await
                .map_err(refused_or)?;
            Ok(Session {
                service,
                pid: None,
                stderr: None,
            })
        }
    }
}

/// A handshake whose request could not be sent (rmcp's words drop reqwest's cause) said
/// plainly: the host and port dialed again to tell a refused connection from an unknown name.
async fn unreached(url: &str, error: ConnectError) -> ConnectError {
    let ConnectError::Handshake { reason, .. } = &error else {
        return error;
    };
    if !reason.contains("error sending request") {
        return error;
    }
    match unreached_reason(url).await {
        Some(reason) => ConnectError::Handshake {
            url: url.to_string(),
            reason,
        },
        None => error,
    }
}

/// Why a request to `url` could not be sent, asked of the network (rmcp's words drop
/// reqwest's cause): nothing listens there, or the name does not resolve; `None` when the
/// host answers or the dial says nothing plain.
pub(crate) async fn unreached_reason(url: &str) -> Option<String> {
    match dial(url).await {
        Dialed::Refused(_) => Some(
            "nothing listens there (the connection was refused): start the server, or check \
             the host and port in its url"
                .to_string(),
        ),
        Dialed::Unresolved(why) => Some(format!(
            "its host name could not be resolved ({why}): check the url's host"
        )),
        _ => None,
    }
}

/// What a client given `--auth-token` (`turnscope attach`, `turnscope test --url`) says when
/// its `initialize` with the MCP server at `url` failed: a 401/403 means the server was
/// reached and wants a bearer token (none was given) or refused the one given; a refused TCP
/// connection (asked again here: rmcp's error does not carry its cause) means nothing listens
/// there; anything else means it could not be reached or does not speak MCP there (its path,
/// most often). (A tool source, configured by `headers`, is told so in `open`.)
pub async fn initialize_failed(
    url: &str,
    token_given: bool,
    e: &rmcp::service::ClientInitializeError,
) -> String {
    if let Some(said) = token_refused(url, token_given, e) {
        return said;
    }
    let said = chain(e);
    match dial(url).await {
        Dialed::Unresolved(why) => {
            return format!(
                "no MCP answer from {url}: its host name could not be resolved ({why}); check \
                 the name, and the network or resolver"
            );
        }
        Dialed::Refused(port) => {
            return format!(
                "nothing listens at {url} (the connection was refused): start the server first (a \
                 turnscope: `turnscope --headless --port {port}`), or check the host and port"
            );
        }
        // rmcp's errors drop reqwest's causes: a connection that opened and a request that
        // could not be sent over https is most likely a server that speaks plain http.
        Dialed::Connected
            if url.starts_with("https://") && said.contains("error sending request") =>
        {
            return format!(
                "no MCP answer from {url}: the connection opened but the https request failed: a \
                 TLS handshake or certificate problem, or a server that speaks plain http there \
                 (a turnscope serves plain http unless a proxy before it speaks TLS)"
            );
        }
        // A WebSocket server (pipecat's whisker) closes a POST without an answer, and answers
        // a plain GET with 426 Upgrade Required.
        Dialed::Connected
            if said.contains("error sending request") && websocket_only(url).await =>
        {
            return format!(
                "no MCP answer from {url}: a WebSocket server listens there (it asked for an \
                 upgrade), not an MCP one; if it is pipecat's whisker, give it as `--whisker \
                 ws://{}`",
                reqwest::Url::parse(url)
                    .ok()
                    .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
                    .unwrap_or_else(|| "HOST:PORT".into())
            );
        }
        _ => {}
    }
    // The server said what to do (a Host it does not allow: 421 names --allowed-host).
    if said.contains("421") {
        return format!("no MCP answer from {url}: {said}");
    }
    // A path that is not the server's MCP one is said plainly; rmcp's own words ("Send message
    // error Transport error: unexpected server response: HTTP 404 Not Found: , when send
    // initialize request") otherwise, which carry what the server said with another status.
    let said = match http_status_in(&said) {
        Some(status) if status.starts_with("404") || status.starts_with("405") => {
            format!("it answered `initialize` with HTTP {status}")
        }
        _ => said,
    };
    format!(
        "no MCP answer from {url}: {said}; check that an MCP server runs there and that the URL \
         ends in its MCP path (usually /mcp)"
    )
}

/// Whether `url` answers a plain GET with 426 Upgrade Required to a WebSocket (2 s at most).
async fn websocket_only(url: &str) -> bool {
    let asked = reqwest::Client::new()
        .get(url)
        .timeout(std::time::Duration::from_secs(2))
        .send()
        .await;
    asked.is_ok_and(|answer| {
        answer.status() == reqwest::StatusCode::UPGRADE_REQUIRED
            && answer
                .headers()
                .get(reqwest::header::UPGRADE)
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"))
    })
}

/// The HTTP status an rmcp error names (`HTTP 404 Not Found`), as `404 Not Found`.
fn http_status_in(said: &str) -> Option<String> {
    let at = said.find("HTTP ")? + "HTTP ".len();
    let rest = &said[at..];
    let code = rest
        .get(..3)
        .filter(|c| c.bytes().all(|b| b.is_ascii_digit()))?;
    let reason: String = rest[3..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == ' ' || *c == '-')
        .collect();
    Some(format!("{code}{}", reason.trim_end()))
}

/// What dialing a URL's host and port found.
enum Dialed {
    /// The host name does not resolve.
    Unresolved(String),
    /// Nothing listens on the port (the connection was refused).
    Refused(u16),
    /// A TCP connection opened.
    Connected,
    /// It timed out, failed otherwise, or the URL names no host.
    Unknown,
}

/// Dials `url`'s host and port (2 s at most) to tell why an MCP request failed.
async fn dial(url: &str) -> Dialed {
    let Ok(url) = reqwest::Url::parse(url) else {
        return Dialed::Unknown;
    };
    let (Some(port), Some(host)) = (url.port_or_known_default(), url.host_str()) else {
        return Dialed::Unknown;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let dial = async {
        let addresses = match tokio::net::lookup_host((host, port)).await {
            Ok(addresses) => addresses.collect::<Vec<_>>(),
            Err(e) => return Dialed::Unresolved(e.to_string()),
        };
        match tokio::net::TcpStream::connect(addresses.as_slice()).await {
            Ok(_) => Dialed::Connected,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Dialed::Refused(port),
            Err(_) => Dialed::Unknown,
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(2), dial)
        .await
        .unwrap_or(Dialed::Unknown)
}

/// The 401/403 half of [`initialize_failed`]; `None` for other failures.
fn token_refused(
    url: &str,
    token_given: bool,
    e: &rmcp::service::ClientInitializeError,
) -> Option<String> {
    if !e.is_authorization_required() {
        return None;
    }
    Some(if token_given {
        format!(
            "the MCP server at {url} refused the bearer token given (HTTP 401/403): check \
             --auth-token against the server's own (its --auth-token, or [server] auth_token)"
        )
    } else {
        format!(
            "the MCP server at {url} asks for a bearer token (HTTP 401): give it with \
             --auth-token TOKEN (the server's --auth-token, or [server] auth_token in its config)"
        )
    })
}

/// An error and its causes in one line, without the Rust type names rmcp puts in its
/// transport errors (`Transport [rmcp::...<...>] error:`).
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![tidy(&error.to_string())];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = tidy(&cause.to_string());
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

fn tidy(text: &str) -> String {
    let mut out = text.to_string();
    while let Some(start) = out.find(" [rmcp::") {
        let Some(len) = out[start..].find("] ") else {
            break;
        };
        out.replace_range(start..start + len + 1, "");
    }
    out
}

/// Bytes of one stderr line kept for the log (the rest of a longer line is read and dropped).
const STDERR_LINE_BYTES: usize = 4 * STDERR_LINE_CHARS;

/// Copies a stdio server's stderr to `log`, line by line, keeping the last lines in `tail`,
/// until it closes. Read as bytes: a line that is not UTF-8 is logged lossily (the reader
/// stopped at one, closing the pipe, and the server's next write to stderr failed or killed
/// it), and a line is kept to [`STDERR_LINE_BYTES`], the rest dropped as it is read (a
/// progress bar's `\r` updates or a binary dump with no newline grew turnscope without
/// bound). A lone `\r` starts the line over, as on a terminal: of a progress bar's updates
/// only the last is logged (one line per update flooded the log).
async fn copy_stderr(stderr: tokio::process::ChildStderr, log: StderrLog, tail: StderrTail) {
    let mut reader = BufReader::new(stderr);
    let mut line: Vec<u8> = Vec::with_capacity(256);
    // A `\r` was the last byte: a `\n` after it ends the line, anything else writes over it.
    let mut after_cr = false;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(chunk) => chunk,
        };
        for &byte in chunk {
            // (`\r\r\n` ends a line as `\r\n` does.)
            if byte != b'\r' && std::mem::take(&mut after_cr) && byte != b'\n' {
                line.clear();
            }
            match byte {
                b'\n' => {
                    emit_stderr_line(&line, &log, &tail);
                    line.clear();
                }
                b'\r' => after_cr = true,
                _ if line.len() < STDERR_LINE_BYTES => line.push(byte),
                _ => {}
            }
        }
        let used = chunk.len();
        reader.consume(used);
    }
    if !line.is_empty() {
        emit_stderr_line(&line, &log, &tail);
    }
    tail.close();
}

fn emit_stderr_line(bytes: &[u8], log: &StderrLog, tail: &StderrTail) {
    if bytes.is_empty() {
        return;
    }
    let text = String::from_utf8_lossy(bytes);
    let line: String = strip_ansi(&text).chars().take(STDERR_LINE_CHARS).collect();
    log(&line);
    tail.push(line);
}

/// The last [`STDERR_TAIL_LINES`] non-blank lines one stdio child wrote to stderr (each at
/// most [`STDERR_LINE_CHARS`]), for the error when it fails to start or ends, and whether its
/// stderr has closed (all it wrote was read).
#[derive(Clone, Default)]
pub struct StderrTail(Arc<TailLines>);

/// What [`StderrTail`] shares: the lines, and whether the child's stderr closed.
#[derive(Default)]
struct TailLines {
    lines: std::sync::Mutex<std::collections::VecDeque<String>>,
    closed: tokio::sync::watch::Sender<bool>,
}

impl StderrTail {
    fn push(&self, line: String) {
        if line.trim().is_empty() {
            return;
        }
        let mut lines = self.0.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == STDERR_TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// Its stderr closed: every line is in.
    fn close(&self) {
        self.0.closed.send_replace(true);
    }

    /// Waits until every line the child wrote is in (its stderr closed), at most `grace`: a
    /// server that writes why it ends and exits at once may still have that line in the pipe
    /// when its end is seen.
    pub(crate) async fn settled(&self, grace: Duration) {
        let mut closed = self.0.closed.subscribe();
        let _ = tokio::time::timeout(grace, closed.wait_for(|closed| *closed)).await;
    }

    /// The lines, joined with ` | `, secrets masked; empty when it wrote none.
    pub fn text(&self) -> String {
        let lines = self.0.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines
            .iter()
            .map(|l| redact(l.trim()).into_owned())
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

/// The tail of the latest attempt's child, swapped for a new one at each attempt.
#[derive(Clone, Default)]
pub(crate) struct LatestStderr(Arc<std::sync::Mutex<StderrTail>>);

impl LatestStderr {
    fn set(&self, tail: StderrTail) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = tail;
    }

    /// The latest attempt's lines ([`StderrTail::text`]).
    pub(crate) fn text(&self) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).text()
    }
}

/// `. Its stderr ended with: …`, or nothing when it wrote none.
fn stderr_said(stderr: &str) -> String {
    if stderr.is_empty() {
        ". It wrote nothing to stderr; check `command` and `args`".into()
    } else {
        format!(". Its stderr ended with: {stderr}")
    }
}

/// The program to run: a relative path with a `/` (`./server.sh`, `bin/server`) is looked for
/// in the server's folder, as its arguments are; a bare name is looked up on `PATH`.
fn program(command: &str, cwd: Option<&std::path::Path>) -> std::path::PathBuf {
    let path = std::path::Path::new(command);
    match cwd {
        Some(cwd) if command.contains('/') && path.is_relative() => cwd.join(path),
        _ => path.to_path_buf(),
    }
}

/// The folder a stdio server runs in, as errors name it.
fn shown_folder(cwd: Option<&std::path::Path>) -> String {
    match cwd {
        Some(cwd) => cwd.display().to_string(),
        None => std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|_| "the current folder".into()),
    }
}

/// `line` without ANSI escape sequences (`ESC [ … letter`): children often colour their logs
/// even into a pipe, and the log line should read as text.
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server's stderr is read to its end whatever its bytes: a line that is not UTF-8
    /// (it stopped the reader and closed the pipe, so the server's next write to stderr killed
    /// it with SIGPIPE), and 3 MB with no newline (kept whole before) cut to one line of 500
    /// characters; a lone `\r` writes over the line, so a progress bar logs its last update
    /// only, and `\r\n` ends one.
    #[tokio::test]
    async fn stderr_is_read_to_its_end_whatever_its_bytes() {
        let script = r"printf 'caf\351 ok\n' >&2
head -c 3000000 /dev/zero | tr '\0' z >&2
echo >&2
printf '\rprogress 1\rprogress 2\n' >&2
printf 'crlf\r\n' >&2
printf 'crcrlf\r\r\n' >&2
echo after >&2
echo done";
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("sh runs");
        let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let sink = seen.clone();
        let log: StderrLog = Arc::new(move |line: &str| sink.lock().unwrap().push(line.into()));
        let stderr = child.stderr.take().unwrap();
        copy_stderr(stderr, log, StderrTail::default()).await;
        let status = child.wait().await.unwrap();
        assert!(status.success(), "the server was not cut off: {status:?}");
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0], "caf\u{fffd} ok");
        assert_eq!(seen[1], "z".repeat(STDERR_LINE_CHARS));
        assert_eq!(seen[2..], ["progress 2", "crlf", "crcrlf", "after"]);
    }

    #[test]
    fn ansi_sequences_are_stripped() {
        assert_eq!(
            strip_ansi("\u{1b}[2mtime\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m text [x]"),
            "time  WARN text [x]"
        );
    }

    #[test]
    fn errors_lose_type_names_and_keep_their_causes() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("Send message error Transport [rmcp::transport::worker::WorkerTransport<X<Y>>] error: request failed")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        ));
        assert_eq!(
            chain(&e),
            "Send message error Transport error: request failed: connection refused"
        );
    }
}
