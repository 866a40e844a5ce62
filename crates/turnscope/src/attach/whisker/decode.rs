//! Whisker's wire records (protocol "1"): each WebSocket message is several msgpack maps
//! concatenated, each with a `type` (`snapshot`, `worker_added`, `frame`, `frame:whisker`,
//! `frame:whisker-urgent`, `bus_message`). The feed is untrusted input: every record is
//! measured before it is decoded (at most [`MAX_NODES`] values, [`MAX_DEPTH`] deep), strings
//! kept are cut at [`MAX_TEXT`] bytes, and a record that breaks a rule is skipped and counted,
//! never a crash. The fields kept are the few the console shows.
//!
//! `rmpv` decodes the values (it never preallocates from a length it read); the measuring pass
//! is written here because rmpv has no budget on how many values one record may hold, and a
//! message of a few megabytes of tiny values would otherwise become gigabytes of them.

use rmp::Marker;
use rmpv::Value;

/// Most msgpack values one record may hold.
pub const MAX_NODES: usize = 200_000;
/// Deepest nesting one record may have.
pub const MAX_DEPTH: usize = 64;
/// Longest text kept from one field (longer ones are cut, with a `…`).
pub const MAX_TEXT: usize = 16 * 1024;

/// One decoded record.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// The first record on each connection: the protocol and the workers registered.
    Snapshot {
        /// `protocol` (`"1"` is the version this reader knows).
        protocol: String,
        /// pipecat's and whisker's versions, when given.
        versions: String,
        /// The workers.
        workers: Vec<Worker>,
        /// When whisker sent it, by the bot's clock (`timestamp`, µs since the epoch; 0 when
        /// not said): against this reader's clock it tells how far the bot's runs ahead.
        at_us: u64,
    },
    /// A worker (a pipeline) was registered.
    WorkerAdded(Worker),
    /// A frame was pushed or processed.
    Frame(FrameRecord),
    /// A message on pipecat's bus.
    Bus {
        /// Its class name.
        message_type: String,
        /// `lifecycle`, `frame`, `job` or `other`.
        category: String,
    },
    /// A type this version does not know (skipped and counted).
    Unknown(String),
}

/// A worker and its pipeline graph.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Worker {
    /// `worker_id` (e.g. `PipelineTask#0`).
    pub id: String,
    /// Processors, in the order whisker listed them.
    pub processors: Vec<String>,
    /// Links `from → to`, downstream.
    pub connections: Vec<(String, String)>,
    /// When the bot added it (`added_at`, µs since the epoch; 0 when not said).
    pub added_us: u64,
}

/// One frame event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FrameRecord {
    /// whisker's sequence number.
    pub seq: u64,
    /// The worker.
    pub worker: String,
    /// The frame's name, `Class#n`.
    pub name: String,
    /// For a push the source, for a process the processor.
    pub from: String,
    /// `push` (else process).
    pub push: bool,
    /// `downstream` (else upstream).
    pub downstream: bool,
    /// When the sink emitted it, µs since the epoch.
    pub at_us: u64,
    /// The payload fields the console uses.
    pub payload: Payload,
}

/// The fields of a frame's payload the console uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Payload {
    /// `text` (text frames).
    pub text: Option<String>,
    /// `function_name`.
    pub function_name: Option<String>,
    /// `tool_call_id`.
    pub tool_call_id: Option<String>,
    /// `arguments`, as JSON text.
    pub arguments: Option<String>,
    /// `result`, as text (a string as is, anything else as JSON).
    pub result: Option<String>,
    /// The last `user` message's content of `messages` (a line appended to the context).
    pub user_line: Option<String>,
    /// How many calls a `function_calls` list holds.
    pub calls: usize,
    /// `error`, when the frame carries one.
    pub error: Option<String>,
}

/// Why a record was skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// More values than [`MAX_NODES`], or deeper than [`MAX_DEPTH`].
    TooLarge,
    /// Not msgpack (or cut short); the rest of the message is skipped.
    Malformed(String),
    /// A map without a known shape (no `type`, a field of the wrong kind).
    NotARecord,
}

/// Decodes every record of one message, in order; a malformed tail ends the decoding.
pub fn records(mut bytes: &[u8]) -> Vec<Result<Record, Skip>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let len = match measure(bytes) {
            Ok(len) => len,
            Err(Measure::TooLarge(len)) => {
                out.push(Err(Skip::TooLarge));
                bytes = &bytes[len.min(bytes.len())..];
                continue;
            }
            Err(Measure::Malformed(why)) => {
                out.push(Err(Skip::Malformed(why)));
                break;
            }
        };
        let mut one = &bytes[..len];
        bytes = &bytes[len..];
        match rmpv::decode::read_value_with_max_depth(&mut one, MAX_DEPTH + 1) {
            Ok(value) => out.push(record(&value).ok_or(Skip::NotARecord)),
            Err(e) => {
                out.push(Err(Skip::Malformed(e.to_string())));
                break;
            }
        }
    }
    out
}

enum Measure {
    /// Too many values or too deep; the record's length when it could still be found.
    TooLarge(usize),
    Malformed(String),
}

/// The byte length of the first msgpack value of `bytes`, counting its values against
/// [`MAX_NODES`] and its depth against [`MAX_DEPTH`] (walked with a stack, never recursion).
fn measure(bytes: &[u8]) -> Result<usize, Measure> {
    let mut at = 0usize;
    let mut nodes = 0usize;
    let mut too_large = false;
    // Values still to read at each open level.
    let mut stack: Vec<u64> = vec![1];
    let short = || Measure::Malformed("the message ends inside a record".into());
    while let Some(left) = stack.last_mut() {
        if *left == 0 {
            stack.pop();
            continue;
        }
        *left -= 1;
        nodes += 1;
        if nodes > MAX_NODES || stack.len() > MAX_DEPTH {
            too_large = true;
        }
        let mut rd = &bytes[at.min(bytes.len())..];
        let before = rd.len();
        let marker = rmp::decode::read_marker(&mut rd).map_err(|_| short())?;
        at += before - rd.len();
        let be = |n: usize, at: &mut usize| -> Result<u64, Measure> {
            let end = at.checked_add(n).ok_or_else(short)?;
            let b = bytes.get(*at..end).ok_or_else(short)?;
            *at = end;
            Ok(b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x)))
        };
        let (skip, children): (u64, u64) = match marker {
            Marker::Null | Marker::True | Marker::False | Marker::FixPos(_) | Marker::FixNeg(_) => {
                (0, 0)
            }
            Marker::U8 | Marker::I8 => (1, 0),
            Marker::U16 | Marker::I16 => (2, 0),
            Marker::U32 | Marker::I32 | Marker::F32 => (4, 0),
            Marker::U64 | Marker::I64 | Marker::F64 => (8, 0),
            Marker::FixStr(n) => (u64::from(n), 0),
            Marker::Str8 | Marker::Bin8 => (be(1, &mut at)?, 0),
            Marker::Str16 | Marker::Bin16 => (be(2, &mut at)?, 0),
            Marker::Str32 | Marker::Bin32 => (be(4, &mut at)?, 0),
            Marker::FixArray(n) => (0, u64::from(n)),
            Marker::Array16 => (0, be(2, &mut at)?),
            Marker::Array32 => (0, be(4, &mut at)?),
            Marker::FixMap(n) => (0, 2 * u64::from(n)),
            Marker::Map16 => (0, 2 * be(2, &mut at)?),
            Marker::Map32 => (0, 2 * be(4, &mut at)?),
            Marker::FixExt1 => (2, 0),
            Marker::FixExt2 => (3, 0),
            Marker::FixExt4 => (5, 0),
            Marker::FixExt8 => (9, 0),
            Marker::FixExt16 => (17, 0),
            Marker::Ext8 => (be(1, &mut at)? + 1, 0),
            Marker::Ext16 => (be(2, &mut at)? + 1, 0),
            Marker::Ext32 => (be(4, &mut at)? + 1, 0),
            Marker::Reserved => {
                return Err(Measure::Malformed("reserved msgpack marker 0xc1".into()));
            }
        };
        let end = (at as u64).checked_add(skip).ok_or_else(short)?;
        if end > bytes.len() as u64 {
            return Err(short());
        }
        at = end as usize;
        // A container claiming more values than bytes left cannot be whole.
        if children > (bytes.len() - at) as u64 {
            return Err(short());
        }
        if children > 0 {
            stack.push(children);
        }
    }
    if too_large {
        Err(Measure::TooLarge(at))
    } else {
        Ok(at)
    }
}

fn get<'a>(map: &'a Value, key: &str) -> Option<&'a Value> {
    map.as_map()?
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

fn text(map: &Value, key: &str) -> Option<String> {
    get(map, key).and_then(Value::as_str).map(cut)
}

/// `s` within [`MAX_TEXT`] bytes, on a character boundary, with `…` when cut.
fn cut(s: &str) -> String {
    if s.len() <= MAX_TEXT {
        return s.to_string();
    }
    let mut end = MAX_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn seconds_us(v: Option<&Value>) -> u64 {
    let s = v.and_then(Value::as_f64).unwrap_or(0.0);
    if s.is_finite() && s > 0.0 && s < 1.0e11 {
        (s * 1.0e6) as u64
    } else {
        0
    }
}

fn record(value: &Value) -> Option<Record> {
    let kind = get(value, "type")?.as_str()?;
    Some(match kind {
        "snapshot" => Record::Snapshot {
            protocol: text(value, "protocol").unwrap_or_default(),
            versions: get(value, "server")
                .map(|s| {
                    format!(
                        "pipecat {} · whisker {}",
                        text(s, "pipecat").unwrap_or_else(|| "?".into()),
                        text(s, "whisker").unwrap_or_else(|| "?".into())
                    )
                })
                .unwrap_or_default(),
            workers: get(value, "workers")
                .and_then(Value::as_array)
                .map(|ws| ws.iter().filter_map(worker).collect())
                .unwrap_or_default(),
            at_us: seconds_us(get(value, "timestamp")),
        },
        "worker_added" => Record::WorkerAdded(worker(value)?),
        "frame" | "frame:whisker" | "frame:whisker-urgent" => Record::Frame(FrameRecord {
            seq: get(value, "id").and_then(Value::as_u64).unwrap_or(0),
            worker: text(value, "worker_id")?,
            name: text(value, "name")?,
            from: text(value, "from").unwrap_or_default(),
            push: get(value, "action").and_then(Value::as_str) == Some("push"),
            downstream: get(value, "direction").and_then(Value::as_str) != Some("upstream"),
            at_us: seconds_us(get(value, "timestamp")),
            payload: get(value, "payload").map(payload).unwrap_or_default(),
        }),
        "bus_message" => Record::Bus {
            message_type: text(value, "message_type").unwrap_or_default(),
            category: text(value, "category").unwrap_or_default(),
        },
        other => Record::Unknown(cut(other)),
    })
}

fn worker(value: &Value) -> Option<Worker> {
    let id = text(value, "worker_id")?;
    let topology = get(value, "topology");
    let processors = topology
        .and_then(|t| get(t, "processors"))
        .and_then(Value::as_array)
        .map(|ps| ps.iter().filter_map(|p| text(p, "name")).collect())
        .unwrap_or_default();
    let connections = topology
        .and_then(|t| get(t, "connections"))
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| Some((text(c, "from")?, text(c, "to")?)))
                .collect()
        })
        .unwrap_or_default();
    Some(Worker {
        id,
        processors,
        connections,
        added_us: seconds_us(get(value, "added_at")),
    })
}

fn payload(value: &Value) -> Payload {
    let user_line = get(value, "messages")
        .and_then(Value::as_array)
        .and_then(|ms| {
            ms.iter()
                .rev()
                .find(|m| get(m, "role").and_then(Value::as_str) == Some("user"))
        })
        .and_then(|m| get(m, "content"))
        .map(|c| match c.as_str() {
            Some(s) => cut(s),
            None => cut(&json_text(c)),
        });
    Payload {
        text: text(value, "text"),
        function_name: text(value, "function_name"),
        tool_call_id: text(value, "tool_call_id"),
        arguments: get(value, "arguments").map(|a| cut(&json_text(a))),
        result: get(value, "result").map(|r| match r.as_str() {
            Some(s) => cut(s),
            None => cut(&json_text(r)),
        }),
        user_line,
        calls: get(value, "function_calls")
            .and_then(Value::as_array)
            .map_or(0, Vec::len),
        error: text(value, "error"),
    }
}

/// A msgpack value as JSON text (maps with string keys as objects; others as their text).
pub fn json_text(value: &Value) -> String {
    to_json(value, 0).to_string()
}

fn to_json(value: &Value, depth: usize) -> serde_json::Value {
    use serde_json::Value as J;
    if depth > MAX_DEPTH {
        return J::Null;
    }
    match value {
        Value::Nil => J::Null,
        Value::Boolean(b) => J::Bool(*b),
        Value::Integer(i) => i
            .as_i64()
            .map(J::from)
            .or_else(|| i.as_u64().map(J::from))
            .unwrap_or(J::Null),
        Value::F32(f) => serde_json::Number::from_f64(f64::from(*f)).map_or(J::Null, J::Number),
        Value::F64(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        Value::String(s) => J::String(s.as_str().map(str::to_string).unwrap_or_default()),
        Value::Binary(b) => J::String(format!("<{} bytes>", b.len())),
        Value::Array(items) => J::Array(items.iter().map(|v| to_json(v, depth + 1)).collect()),
        Value::Map(entries) => J::Object(
            entries
                .iter()
                .map(|(k, v)| {
                    let key = match k.as_str() {
                        Some(s) => s.to_string(),
                        None => k.to_string(),
                    };
                    (key, to_json(v, depth + 1))
                })
                .collect(),
        ),
        Value::Ext(_, b) => J::String(format!("<ext, {} bytes>", b.len())),
    }
}
