//! JSON-RPC 2.0 frames as the endpoint sends them, and the replies the bridge writes back. Ids
//! are echoed byte for byte ([`RawId`]) and params are handed on untouched; this module only
//! parses and formats, it never decides what to answer.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// `-32600`: the frame is JSON but not a valid request.
pub const INVALID_REQUEST: i64 = -32600;
/// `-32601`: no such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// `-32602`: the params are wrong.
pub const INVALID_PARAMS: i64 = -32602;
/// `-32603`: the bridge or the MCP server failed.
pub(crate) const INTERNAL_ERROR: i64 = -32603;
/// `-32000`: the tool is blocked by the bridge's tool filter (the code Xiaozhi MCP bridges use for it).
pub const TOOL_BLOCKED: i64 = -32000;

/// A request id exactly as the endpoint wrote it (a JSON string, number or `null`).
///
/// Ids are kept as the exact JSON text the endpoint sent, so a reply echoes `0`, `-1`,
/// `9007199254740993` or `"3f2c…_n_7"` byte for byte, type included.
#[derive(Debug, Clone)]
pub struct RawId(Box<RawValue>);

impl RawId {
    /// The id's JSON text, e.g. `0` or `"abc_n_7"`.
    pub fn as_json(&self) -> &str {
        self.0.get()
    }

    /// An id from JSON text; `None` unless it is a string, a number or `null`.
    pub fn parse(json: &str) -> Option<Self> {
        let raw = RawValue::from_string(trim_json(json).to_string()).ok()?;
        Self::checked(raw)
    }

    fn checked(raw: Box<RawValue>) -> Option<Self> {
        match serde_json::from_str::<Value>(raw.get()).ok()? {
            Value::String(_) | Value::Number(_) | Value::Null => Some(Self(raw)),
            _ => None,
        }
    }

    /// The `null` id, for replies to frames whose id could not be read.
    pub fn null() -> Self {
        Self(RawValue::NULL.to_owned())
    }
}

impl PartialEq for RawId {
    fn eq(&self, other: &Self) -> bool {
        self.as_json() == other.as_json()
    }
}

impl std::fmt::Display for RawId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_json())
    }
}

/// One JSON-RPC message from the endpoint.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it must be answered with its id.
    Request {
        /// The id to echo.
        id: RawId,
        /// The method, e.g. `tools/call`.
        method: String,
        /// The params, untouched.
        params: Option<Value>,
    },
    /// A notification: never answered.
    Notification {
        /// The method, e.g. `notifications/initialized`.
        method: String,
        /// The params, untouched.
        params: Option<Value>,
    },
    /// A response to something: the bridge sends the endpoint no requests, so it is ignored.
    Response {
        /// Its id.
        id: RawId,
    },
    /// JSON with a readable id but not a valid message: answered with `-32600`.
    Invalid {
        /// The id to answer with.
        id: RawId,
        /// What is wrong, for the error message.
        reason: String,
    },
}

/// Why a frame was dropped without an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(default)]
    jsonrpc: Option<Value>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<Value>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// `Some` for a key that is present, even when its value is `null`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Parses one frame's text. A JSON array (a batch) is split into its messages, each
/// handled on its own; blank text (JSON white space only) is an empty list.
///
/// # Errors
///
/// [`Malformed`] when the text is not JSON, is an empty batch, or is a message whose id
/// cannot be read (nothing could be answered).
pub fn parse(text: &str) -> Result<Vec<Incoming>, Malformed> {
    let trimmed = trim_json(text);
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    if trimmed.starts_with('[') {
        let items: Vec<&RawValue> =
            serde_json::from_str(trimmed).map_err(|e| Malformed(format!("not JSON: {e}")))?;
        if items.is_empty() {
            return Err(Malformed("an empty batch".into()));
        }
        return items.into_iter().map(|raw| one(raw.get())).collect();
    }
    one(trimmed).map(|m| vec![m])
}

/// `text` without the white space JSON allows around a value (space, tab, CR, LF). Other
/// Unicode white space (a vertical tab, a no-break space) is not JSON, so it stays and the
/// frame is malformed.
fn trim_json(text: &str) -> &str {
    text.trim_matches([' ', '\t', '\n', '\r'])
}

fn one(text: &str) -> Result<Incoming, Malformed> {
    if !text.starts_with('{') {
        serde_json::from_str::<&RawValue>(text).map_err(|e| Malformed(format!("not JSON: {e}")))?;
        return Err(Malformed("not a JSON object".into()));
    }
    let wire: Wire<'_> = match serde_json::from_str(text) {
        Ok(w) => w,
        Err(e) => {
            serde_json::from_str::<&RawValue>(text)
                .map_err(|e| Malformed(format!("not JSON: {e}")))?;
            return Err(Malformed(format!("not a JSON-RPC message: {e}")));
        }
    };
    let id = match wire.id {
        Some(raw) => Some(
            RawId::checked(raw.to_owned())
                .ok_or_else(|| Malformed(format!("id {} is not a string or number", raw.get())))?,
        ),
        None => None,
    };
    let invalid = |id: Option<RawId>, reason: &str| match id {
        Some(id) => Ok(Incoming::Invalid {
            id,
            reason: reason.to_string(),
        }),
        None => Err(Malformed(reason.to_string())),
    };
    if wire.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return invalid(id, "\"jsonrpc\" must be \"2.0\"");
    }
    if let Some(params) = &wire.params
        && !(params.is_object() || params.is_array())
    {
        return invalid(id, "\"params\" must be an object or an array");
    }
    match (wire.method, id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request {
            id,
            method,
            params: wire.params,
        }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification {
            method,
            params: wire.params,
        }),
        (Some(_), id) => invalid(id, "\"method\" must be a string"),
        (None, Some(id)) if wire.result.is_some() || wire.error.is_some() => {
            Ok(Incoming::Response { id })
        }
        (None, id) => invalid(id, "no \"method\", and not a response"),
    }
}

#[derive(Serialize)]
struct Success<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    result: &'a Value,
}

#[derive(Serialize)]
struct Failure<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: i64,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a Value>,
}

/// The text of a success reply: `{"jsonrpc":"2.0","id":<id>,"result":<result>}`.
pub fn result_frame(id: &RawId, result: &Value) -> String {
    serde_json::to_string(&Success {
        jsonrpc: "2.0",
        id: &id.0,
        result,
    })
    .unwrap_or_else(|e| {
        error_frame(
            id,
            INTERNAL_ERROR,
            &format!("unserializable result: {e}"),
            None,
        )
    })
}

/// The text of an error reply: `{"jsonrpc":"2.0","id":<id>,"error":{"code","message","data"?}}`.
pub fn error_frame(id: &RawId, code: i64, message: &str, data: Option<&Value>) -> String {
    let body = Failure {
        jsonrpc: "2.0",
        id: &id.0,
        error: ErrorBody {
            code,
            message,
            data,
        },
    };
    serde_json::to_string(&body).unwrap_or_else(|_| {
        // Only `data` can fail to serialize (non-string map keys are impossible in a Value),
        // so this branch is defensive: answer without it.
        format!(
            r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":{code},"message":{}}}}}"#,
            id.as_json(),
            Value::String(message.to_string())
        )
    })
}

/// The text of a notification frame.
pub(crate) fn notification_frame(method: &str, params: Option<&Value>) -> String {
    let mut map = serde_json::Map::new();
    map.insert("jsonrpc".into(), Value::String("2.0".into()));
    map.insert("method".into(), Value::String(method.into()));
    if let Some(p) = params {
        map.insert("params".into(), p.clone());
    }
    Value::Object(map).to_string()
}

#[cfg(test)]
#[path = "jsonrpc_tests.rs"]
mod tests;
