//! What one model request gives: a [`Completion`] when it finished, a [`ModelError`] saying
//! what went wrong and what to check when it did not. Below both the client (which sends the
//! request) and the chunk assembler (which builds the completion), so neither imports the other.

use std::fmt;
use std::time::Duration;

use crate::observe::TokenUsage;
use crate::tools::ToolCall;

/// One finished model response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    /// All reply text the response streamed.
    pub text: String,
    /// Function calls it asked for, in index order.
    pub tool_calls: Vec<ToolCall>,
    /// The finish reason the server gave, if any (tool calls present = a round, whatever it
    /// says; `length` = the reply was cut by the token limit).
    pub finish_reason: Option<String>,
    /// Reasoning text (`reasoning_content` / `reasoning` deltas): never part of `text`, never
    /// sent back to the model.
    pub reasoning: String,
    /// Token counts, when the server sent them.
    pub usage: Option<TokenUsage>,
    /// The model the server named in its chunks.
    pub model: Option<String>,
    /// The response id the server gave.
    pub response_id: Option<String>,
}

/// Why a model request failed. Each message says what happened and what to check.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelError {
    /// Could not connect at all.
    Connect(String),
    /// A connection was made (or reused) and closed before any byte of the answer came, and
    /// the same again on a fresh connection.
    Dropped(String),
    /// The server answered with an error status.
    Status {
        /// HTTP status code.
        code: u16,
        /// The server's message (from its JSON error body when it had one).
        message: String,
    },
    /// No response headers or first event within the first-byte timeout.
    FirstByteTimeout(Duration),
    /// The stream went silent for longer than the idle timeout.
    IdleTimeout(Duration),
    /// A chunk was not the JSON expected.
    Malformed(String),
    /// The stream ended before `[DONE]` or a finish reason.
    Cut(String),
    /// The server sent an error object inside the stream.
    Server(String),
    /// The server is rate limiting (429) or overloaded (503): nothing was generated, and
    /// nothing about the request, the key or the parameters is wrong.
    Busy {
        /// 429 or 503.
        code: u16,
        /// The server's message.
        message: String,
        /// The wait its `Retry-After` (or `retry-after-ms`) asked for, when it gave one.
        retry_after: Option<Duration>,
        /// Whether the request was sent again after that wait (and refused again).
        retried: bool,
        /// The response's time bound the wait had to fit in (`[model] max_response_seconds`).
        budget: Duration,
    },
    /// The response passed a bound of `[model]` (`max_response_kib`, `max_response_seconds`)
    /// before it ended: a model repeating itself without end, or a server gone wrong.
    TooLong(ResponseBound),
}

/// Which bound a response passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseBound {
    /// `[model] max_response_kib`: this many bytes of body were read.
    Bytes(usize),
    /// `[model] max_response_seconds`: the response had not ended after this long.
    Time(Duration),
}

impl ModelError {
    /// Whether the server refused the request as a whole (an HTTP error status other than
    /// rate limiting or overload): nothing of it was generated, and sending it again would fail
    /// the same way.
    pub fn is_refusal(&self) -> bool {
        matches!(self, ModelError::Status { .. })
    }

    /// Whether the turn's line and rounds are left out of the history: every failure but a
    /// busy server's. A refused request would fail every later line too; a response that
    /// passed a bound would be carried by every later request; a server that could not be
    /// reached or broke off mid-answer left a line with no reply (two user lines in a row
    /// next, which some chat templates refuse) or a cut reply that later requests would hand
    /// the model as its own words, while the caller is told to send the line again. A busy
    /// server (429, 503) keeps the line: the caller is told it stays.
    pub fn rolls_back(&self) -> bool {
        !matches!(self, ModelError::Busy { .. })
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Connect(e) => write!(
                f,
                "model server unreachable: {e}; check the model's URL (--model-url, OPENAI_BASE_URL or [model] url in the config, whichever set it) and that the server runs"
            ),
            ModelError::Dropped(detail) => write!(
                f,
                "model server closed the connection before answering, twice (the second time on a fresh \
                 connection): {detail}; the server may be restarting or crashing on this request: check its log"
            ),
            ModelError::Status { code, message } => {
                write!(f, "model server answered HTTP {code}: {message}")
            }
            ModelError::FirstByteTimeout(t) => write!(
                f,
                "model server sent nothing within {:.1} s of the request; it may be overloaded or hung",
                t.as_secs_f64()
            ),
            ModelError::IdleTimeout(t) => write!(
                f,
                "model stream went silent for {:.1} s mid-response and was abandoned",
                t.as_secs_f64()
            ),
            ModelError::Malformed(e) => write!(
                f,
                "model stream sent a chunk that is not an OpenAI chat.completion.chunk: {e}"
            ),
            ModelError::Cut(e) => write!(
                f,
                "model stream broke before its end ([DONE] or a finish reason): {e}"
            ),
            ModelError::Server(e) => write!(f, "model server reported an error mid-stream: {e}"),
            ModelError::Busy {
                code,
                message,
                retry_after,
                retried,
                budget,
            } => {
                let what = if *code == 429 {
                    "is rate limiting requests"
                } else {
                    "is overloaded or unavailable"
                };
                write!(f, "model server {what} (HTTP {code}: {message}); ")?;
                match retry_after {
                    Some(wait) if *retried => write!(
                        f,
                        "turnscope waited the {:.1} s its Retry-After asked and sent the request again, which it \
                         refused too; ",
                        wait.as_secs_f64()
                    )?,
                    Some(wait) => write!(
                        f,
                        "it asked to wait {:.1} s, more than this response may take ([model] \
                         max_response_seconds, {:.0} s); ",
                        wait.as_secs_f64(),
                        budget.as_secs_f64()
                    )?,
                    None => f.write_str("it said no Retry-After to wait for; ")?,
                }
                f.write_str(
                    "nothing is wrong with the line, the key or the [model] parameters. The line stays in the \
                     history: send a line again in a while, or lower the load on the server (fewer sessions \
                     at once, a higher rate limit, a larger server)",
                )
            }
            ModelError::TooLong(ResponseBound::Bytes(bytes)) => write!(
                f,
                "model response passed [model] max_response_kib ({} KiB) before it ended: the model may be \
                 repeating itself without end. The turn was ended and left out of the history with its line \
                 (the reply so far is in this turn's record); have the server stop long answers with [model] \
                 max_tokens, or raise max_response_kib if answers this long are expected",
                bytes / 1024
            ),
            ModelError::TooLong(ResponseBound::Time(limit)) => write!(
                f,
                "model response passed [model] max_response_seconds ({:.0} s) before it ended: the model may \
                 be repeating itself without end. The turn was ended and left out of the history with its line \
                 (the reply so far is in this turn's record); have the server stop long answers with [model] \
                 max_tokens, or raise max_response_seconds if answers this long are expected",
                limit.as_secs_f64()
            ),
        }
    }
}

impl std::error::Error for ModelError {}

/// At most `max` bytes of `text`, cut on a character boundary.
pub fn preview(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
