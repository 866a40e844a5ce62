//! Whole requests again from the events that told them as deltas: a [`RequestBook`] folds
//! `ModelRequest` and `ToolSet` events (live or from an `--events` file) and gives back, for
//! any recorded request, every message it sent, which of them were new, and the tools it
//! offered; [`WholeRequest::curl`] and [`mcp_curl`] write a request out as a command that
//! sends it again (secrets as `$VARIABLES`, never their values).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::event::Event;
use super::wire::{JsonText, McpExchange, WireRequest, json_bytes};

/// Most messages kept per session; older ones are forgotten first (a request that needs one
/// says how many it misses).
pub const MESSAGES_KEPT: usize = 4096;
/// Most sessions whose messages are kept; the lowest-numbered one is forgotten first.
pub const SESSIONS_KEPT: usize = 256;
/// Most system prompt changes kept per session (each a reload that changed the prompt).
pub const SYSTEM_CHANGES_KEPT: usize = 16;
/// Most tool sets kept.
pub const TOOL_SETS_KEPT: usize = 64;
/// Most messages kept over all sessions; the oldest of the lowest-numbered session go first.
pub const BOOK_MESSAGES_KEPT: usize = 16_384;
/// Most bytes of messages kept over all sessions (as [`json_bytes`] counts them), unless
/// [`RequestBook::with_max_bytes`] says otherwise; the oldest of the lowest-numbered session
/// go first.
pub const BOOK_BYTES_KEPT: usize = 64 * 1024 * 1024;

/// The messages and tool sets events have carried so far.
#[derive(Debug, Clone)]
pub struct RequestBook {
    /// Per session, its messages by number, each with its size.
    sessions: BTreeMap<u64, BTreeMap<u64, (Arc<Value>, usize)>>,
    /// Per session, the system prompts a reload put in force, by the number of the first
    /// message of the request that carried each (the latest [`SYSTEM_CHANGES_KEPT`]).
    system_changes: BTreeMap<u64, BTreeMap<u64, Arc<Value>>>,
    /// Each tool set with its size as JSON, in bytes.
    tool_sets: HashMap<String, (Arc<[Value]>, usize)>,
    /// Messages kept over all sessions.
    kept: usize,
    /// Their bytes.
    bytes: usize,
    max_bytes: usize,
    /// Messages forgotten to stay within the bounds.
    pub forgotten: u64,
}

impl Default for RequestBook {
    fn default() -> Self {
        Self::with_max_bytes(BOOK_BYTES_KEPT)
    }
}

/// One request whole again.
#[derive(Debug, Clone, Default)]
pub struct WholeRequest {
    /// Every message, in the order sent.
    pub messages: Vec<Arc<Value>>,
    /// Index of the first message this request added (the ones before were in the
    /// session's previous request too).
    pub new_from: usize,
    /// Messages it sent that no kept event carries (recording started late, or forgotten).
    pub missing: u64,
    /// The tools offered, when their set was recorded.
    pub tools: Option<Arc<[Value]>>,
    /// Their size as JSON, in bytes (0 when not recorded).
    pub tools_bytes: usize,
}

impl RequestBook {
    /// A book keeping at most `max_bytes` of messages (and the count bounds).
    pub fn with_max_bytes(max_bytes: usize) -> Self {
        Self {
            sessions: BTreeMap::new(),
            system_changes: BTreeMap::new(),
            tool_sets: HashMap::new(),
            kept: 0,
            bytes: 0,
            max_bytes,
            forgotten: 0,
        }
    }

    /// Bytes of the messages kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Takes in the messages one request of `session` carried.
    pub fn fold(&mut self, session: u64, request: &WireRequest) {
        if !self.sessions.contains_key(&session)
            && self.sessions.len() >= SESSIONS_KEPT
            && let Some((number, gone)) = self.sessions.pop_first()
        {
            self.system_changes.remove(&number);
            self.kept -= gone.len();
            self.bytes -= gone.values().map(|(_, n)| n).sum::<usize>();
            self.forgotten += gone.len() as u64;
        }
        if let Some(prompt) = &request.system_prompt {
            let changes = self.system_changes.entry(session).or_default();
            // Keyed past this request by numbers a rollback gave back: no longer in force.
            changes.split_off(&request.from);
            changes.insert(request.from, Arc::new(prompt.clone()));
            while changes.len() > SYSTEM_CHANGES_KEPT {
                changes.pop_first();
            }
        }
        let kept = self.sessions.entry(session).or_default();
        for (i, message) in request.appended.iter().enumerate() {
            let Some(number) = request.from.checked_add(i as u64) else {
                break;
            };
            let size = json_bytes(message);
            self.bytes += size;
            match kept.insert(number, (Arc::new(message.clone()), size)) {
                Some((_, old)) => self.bytes -= old,
                None => self.kept += 1,
            }
        }
        while kept.len() > MESSAGES_KEPT {
            if let Some((_, (_, size))) = kept.pop_first() {
                self.kept -= 1;
                self.bytes -= size;
                self.forgotten += 1;
            }
        }
        self.trim();
    }

    /// Changes the byte bound, forgetting the oldest messages while over it.
    pub fn set_max_bytes(&mut self, max_bytes: usize) {
        self.max_bytes = max_bytes;
        self.trim();
    }

    fn trim(&mut self) {
        while self.kept > BOOK_MESSAGES_KEPT || self.bytes > self.max_bytes {
            let Some(mut oldest) = self.sessions.first_entry() else {
                break;
            };
            if let Some((_, (_, size))) = oldest.get_mut().pop_first() {
                self.kept -= 1;
                self.bytes -= size;
                self.forgotten += 1;
            }
            if oldest.get().is_empty() {
                let number = *oldest.key();
                oldest.remove();
                self.system_changes.remove(&number);
            }
        }
    }

    /// Forgets what is kept of `session` (its row was forgotten).
    pub fn forget_session(&mut self, session: u64) {
        self.system_changes.remove(&session);
        if let Some(gone) = self.sessions.remove(&session) {
            self.kept -= gone.len();
            self.bytes -= gone.values().map(|(_, n)| n).sum::<usize>();
        }
    }

    /// Takes in a `ModelRequest` (its messages) or a `ToolSet`; other events are ignored.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::ModelRequest {
                session,
                request: Some(request),
                ..
            } => self.fold(*session, request),
            Event::ToolSet(set) => {
                if self.tool_sets.len() >= TOOL_SETS_KEPT {
                    self.tool_sets.clear();
                }
                let bytes = set.tools.iter().map(|t| t.to_string().len()).sum();
                self.tool_sets
                    .insert(set.id.clone(), (Arc::from(set.tools.clone()), bytes));
            }
            _ => {}
        }
    }

    /// The tool set `id`, when recorded.
    pub fn tool_set(&self, id: &str) -> Option<Arc<[Value]>> {
        self.tool_sets.get(id).map(|(set, _)| set.clone())
    }

    /// `request` (of `session`) whole: the system prompt, the history it sent, the tools.
    ///
    /// Its numbers come from a file that may have been edited: the work is bounded by the
    /// messages kept, never by the range a request names.
    pub fn whole(&self, session: u64, request: &WireRequest) -> WholeRequest {
        let empty = BTreeMap::new();
        let kept = self.sessions.get(&session).unwrap_or(&empty);
        let mut out = WholeRequest {
            tools: request.tools.as_deref().and_then(|id| self.tool_set(id)),
            tools_bytes: request
                .tools
                .as_deref()
                .and_then(|id| self.tool_sets.get(id))
                .map_or(0, |(_, bytes)| *bytes),
            ..WholeRequest::default()
        };
        let (first, end) = (request.first, request.end());
        let system = request.system && first > 0;
        let mut sent: u64 = end.saturating_sub(first) + u64::from(system);
        out.new_from = usize::MAX;
        // The prompt in force: the one this request carried, else the latest a reload put in
        // force before it, else the session's first (message 0).
        let changed = self
            .system_changes
            .get(&session)
            .and_then(|changes| changes.range(..=request.from).next_back())
            .map(|(_, prompt)| prompt.clone())
            // Not folded (forgotten since): its own, copied.
            .or_else(|| request.system_prompt.clone().map(Arc::new));
        let head = system.then(|| match &changed {
            Some(prompt) => (0, Some(prompt)),
            None => (0, kept.get(&0).map(|(m, _)| m)),
        });
        let history = kept
            .range(first..end.max(first))
            .map(|(n, (m, _))| (*n, Some(m)));
        for (n, found) in head.into_iter().chain(history) {
            if n >= request.from && out.new_from == usize::MAX {
                out.new_from = out.messages.len();
            }
            if let Some(m) = found {
                out.messages.push(m.clone());
                sent -= 1;
            }
        }
        out.missing = sent;
        if out.new_from == usize::MAX {
            out.new_from = out.messages.len();
        }
        out
    }
}

impl WholeRequest {
    /// Whether a prompt of `prompt_tokens` (cached ones included) is too short to hold the
    /// tools offered: a chat template that does not take tools (llama.cpp without `--jinja`,
    /// or a model's template without a tools section) leaves them out without a word, and the
    /// model then never calls one. Told when the prompt is under a third of the tools' JSON
    /// at four bytes a token (a template renders them more tersely, never that much), unless
    /// the answer called a tool (`called_a_tool`: the model saw them, whatever the count).
    pub fn tools_left_out(&self, prompt_tokens: u64, called_a_tool: bool) -> bool {
        const TOOL_BYTES_NOTICED: usize = 400;
        !called_a_tool
            && self.tools_bytes >= TOOL_BYTES_NOTICED
            && prompt_tokens > 0
            && prompt_tokens < (self.tools_bytes / 12) as u64
    }

    /// The messages this request added, in a few words: `+1 user`, `+1 assistant, +2 tool
    /// results`.
    pub fn growth(&self) -> String {
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for m in &self.messages[self.new_from.min(self.messages.len())..] {
            let role = m.get("role").and_then(Value::as_str).unwrap_or("other");
            let role = match role {
                "tool" => "tool result",
                "assistant" if m.get("tool_calls").is_some() => "tool call round",
                other => other,
            };
            match counts.iter_mut().find(|(r, _)| *r == role) {
                Some((_, n)) => *n += 1,
                None => counts.push((role, 1)),
            }
        }
        if counts.is_empty() {
            return "nothing new".into();
        }
        counts
            .iter()
            .map(|(role, n)| {
                let plural = if *n == 1 { "" } else { "s" };
                format!("+{n} {role}{plural}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The request body as sent: model, messages, tools, and the other fields.
    pub fn body(&self, wire: &WireRequest) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(wire.model.clone()));
        body.insert(
            "messages".into(),
            Value::Array(self.messages.iter().map(|m| (**m).clone()).collect()),
        );
        if let Some(tools) = &self.tools {
            body.insert("tools".into(), Value::Array(tools.to_vec()));
        }
        for (k, v) in &wire.params {
            body.insert(k.clone(), v.clone());
        }
        Value::Object(body)
    }

    /// What this request lacks to be sent again as it was, in a sentence, when it lacks
    /// anything: the tool set it offered (not in this recording: it went out before the
    /// recording started, or was forgotten) or earlier messages.
    pub fn incomplete(&self, wire: &WireRequest) -> Option<String> {
        let mut lacks = Vec::new();
        if self.tools.is_none()
            && let Some(id) = &wire.tools
        {
            lacks.push(format!(
                "the {} tools it offered (tool set {id}) are not in this recording",
                wire.tool_count
            ));
        }
        if self.missing > 0 {
            lacks.push(format!(
                "{} of its messages are not in this recording",
                self.missing
            ));
        }
        (!lacks.is_empty()).then(|| {
            format!(
                "incomplete: {}; the copy sends less than the model got",
                lacks.join(", and ")
            )
        })
    }

    /// A `curl` command that sends this request again to the same server. The key is written
    /// as `$OPENAI_API_KEY` and every extra header's value as a variable named after it
    /// (`X-Org` → `$X_ORG`): their values are never recorded. A request that cannot be made
    /// whole again starts with a `#` comment saying what it lacks. Safe to paste from someone
    /// else's replay file: every recorded text is one quoted word (`shell-words`), and the
    /// body goes through a quoted here-document whose end line pretty-printed JSON cannot hold
    /// (its strings escape line breaks).
    pub fn curl(&self, wire: &WireRequest) -> String {
        let warning = self
            .incomplete(wire)
            .map(|why| format!("# {}\n", one_line(&why)))
            .unwrap_or_default();
        warning + &curl_of(wire, &wire.url, &self.body(wire))
    }
}

/// A curl command sending `body` to `url` with `wire`'s headers (its key and extra headers
/// from variables, never their values): a recorded request, or an edited one sent again.
pub fn curl_of(wire: &WireRequest, url: &str, body: &Value) -> String {
    let body = serde_json::to_string_pretty(body).unwrap_or_default();
    let mut out = format!(
        "curl -sN {} \\\n  -H 'Content-Type: application/json'",
        quote(url)
    );
    if wire.keyed {
        out.push_str(" \\\n  -H \"Authorization: Bearer $OPENAI_API_KEY\"");
    }
    for name in &wire.headers {
        let _ = write!(out, " \\\n  -H {}", header_from_variable(name));
    }
    let _ = write!(out, " \\\n  --data-binary @- <<'JSON'\n{body}\nJSON\n");
    out
}

/// `text` as one word of a POSIX shell command, whatever it holds: `shell-words`' quoting,
/// always in single quotes (it leaves words it deems plain bare, and counts neither `{` nor
/// `!` as special, which bash's brace and history expansion do).
fn quote(text: &str) -> String {
    let quoted = shell_words::quote(text);
    if quoted.starts_with('\'') {
        quoted.into_owned()
    } else {
        format!("'{quoted}'")
    }
}

/// A `-H` argument whose value is a variable named after the header (`X-Org` → `"$X_ORG"`):
/// the name quoted as a word of its own text, the variable expanded in double quotes.
fn header_from_variable(name: &str) -> String {
    let mut var = crate::config::env::env_var_name(name);
    if !var.starts_with(|c: char| c.is_ascii_alphabetic()) {
        // `$1…` would be a positional parameter.
        var.insert_str(0, "H_");
    }
    format!("{}\"${{{var}}}\"", quote(&format!("{name}: ")))
}

/// `text` for a `#` comment line: a recorded text with a line break in it would end the
/// comment and run its rest in the shell of whoever pastes the copy.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A `curl` command that sends an MCP exchange's request again. The session id is
/// `$MCP_SESSION_ID` and the bearer token `$TURNSCOPE_AUTH_TOKEN` (neither is recorded);
/// handles in the body were masked when recorded, so a `chat` needs the real one put back.
pub fn mcp_curl(exchange: &McpExchange) -> String {
    let host = exchange.host.as_deref().unwrap_or("127.0.0.1:7870");
    let url = format!("http://{host}{}", exchange.path);
    let mut out = String::new();
    let request = exchange.request.as_ref().map(JsonText::value);
    if let Some(cut) = request.as_ref().and_then(|b| b.get("turnscope/cut")) {
        let _ = writeln!(
            out,
            "# incomplete: the body was {} bytes and only its start was recorded ([wire] max_kib); the copy sends that start",
            cut["bytes"]
        );
    }
    let handle = &request
        .as_ref()
        .map(|b| &b["params"]["arguments"]["handle"]);
    if let Some(Value::String(h)) = handle
        && h.ends_with('…')
    {
        let _ = writeln!(
            out,
            "# the handle is recorded masked ({}): put the whole handle in its place",
            one_line(h)
        );
    }
    let _ = write!(
        out,
        "curl -sN -X {} {}",
        quote(&exchange.http_method),
        quote(&url)
    );
    out.push_str(" \\\n  -H 'Content-Type: application/json' \\\n  -H 'Accept: application/json, text/event-stream'");
    if let Some(v) = &exchange.protocol {
        let _ = write!(
            out,
            " \\\n  -H {}",
            quote(&format!("MCP-Protocol-Version: {v}"))
        );
    }
    if exchange.mcp_session.is_some() && exchange.method.as_deref() != Some("initialize") {
        out.push_str(" \\\n  -H \"Mcp-Session-Id: $MCP_SESSION_ID\"");
    }
    if let Some(v) = &exchange.mcp_method {
        let _ = write!(out, " \\\n  -H {}", quote(&format!("Mcp-Method: {v}")));
    }
    if let Some(v) = &exchange.mcp_name {
        let _ = write!(out, " \\\n  -H {}", quote(&format!("Mcp-Name: {v}")));
    }
    if exchange.authorized {
        out.push_str(" \\\n  -H \"Authorization: Bearer $TURNSCOPE_AUTH_TOKEN\"");
    }
    if let Some(body) = &exchange.request {
        let _ = write!(out, " \\\n  --data-binary {}", quote(body.as_str()));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(from: u64, first: u64, appended: Vec<Value>) -> WireRequest {
        WireRequest {
            model: "m".into(),
            url: "http://127.0.0.1:1/v1/chat/completions".into(),
            system: true,
            first,
            from,
            appended,
            keyed: true,
            headers: vec!["X-Org".into()],
            tools: Some("t1".into()),
            params: [("stream".to_string(), json!(true))].into_iter().collect(),
            ..WireRequest::default()
        }
    }

    #[test]
    fn deltas_rebuild_each_request_whole() {
        let system = json!({"role": "system", "content": "be brief"});
        let user = json!({"role": "user", "content": "what time is it?"});
        let calls = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "clock", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "echo", "arguments": "{}"}}]});
        let r1 = json!({"role": "tool", "tool_call_id": "a", "content": "12:00"});
        let r2 = json!({"role": "tool", "tool_call_id": "b", "content": "{}"});
        let mut book = RequestBook::default();
        book.apply(&Event::ToolSet(super::super::wire::ToolSetEvent {
            id: "t1".into(),
            tools: vec![json!({"type": "function", "function": {"name": "clock", "parameters": {"type": "object"}}})],
            at_us: 0,
        }));
        let first = request(0, 1, vec![system.clone(), user.clone()]);
        book.fold(7, &first);
        let second = request(2, 1, vec![calls.clone(), r1.clone(), r2.clone()]);
        book.fold(7, &second);
        let whole = book.whole(7, &second);
        let got: Vec<Value> = whole.messages.iter().map(|m| (**m).clone()).collect();
        assert_eq!(got, vec![system.clone(), user.clone(), calls, r1, r2]);
        assert_eq!(book.bytes(), got.iter().map(json_bytes).sum::<usize>());
        assert_eq!(whole.new_from, 2);
        assert_eq!(whole.missing, 0);
        assert_eq!(whole.growth(), "+1 tool call round, +2 tool results");
        assert_eq!(book.whole(7, &first).growth(), "+1 system, +1 user");
        assert_eq!(book.whole(7, &first).new_from, 0);
        let tools = whole.tools.clone().expect("the tool set was recorded");
        assert_eq!(tools[0]["function"]["parameters"]["type"], "object");
        let body = whole.body(&second);
        assert_eq!(body["messages"].as_array().unwrap().len(), 5);
        assert_eq!(body["stream"], true);
        let curl = whole.curl(&second);
        assert!(curl.contains("Bearer $OPENAI_API_KEY"), "{curl}");
        assert!(curl.contains(r#"'X-Org: '"${X_ORG}""#), "{curl}");
        assert!(curl.contains("\"what time is it?\""), "{curl}");
        assert_eq!(whole.incomplete(&second), None);
        // Another session knows none of these messages, nor a book that missed the tool set.
        assert_eq!(book.whole(8, &second).missing, 5);
        let mut late = RequestBook::default();
        late.fold(7, &first);
        late.fold(7, &second);
        let partial = late.whole(7, &second);
        let why = partial.incomplete(&second).expect("said");
        assert!(why.contains("tool set t1"), "{why}");
        assert!(
            partial.curl(&second).starts_with("# incomplete: "),
            "{}",
            partial.curl(&second)
        );
        assert_eq!(book.kept, 5);
    }

    /// Runs `command` under `sh` in a fresh directory with `curl` a shell function that
    /// prints its arguments, one per line: what curl would have been given, and whether the
    /// command did anything else (a file `pwned` in that directory).
    fn run_as_shell(command: &str) -> (Vec<String>, bool) {
        let dir = std::env::temp_dir().join(format!(
            "turnscope-curl-{}-{}",
            std::process::id(),
            crate::observe::event::now_us()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let script = format!(
            "curl() {{ for a in \"$@\"; do printf '%s\\n' \"$a\"; done; }}\nX_ORG=org-1\n{command}"
        );
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .current_dir(&dir)
            .output()
            .expect("sh runs");
        let pwned = dir.join("pwned").exists();
        let _ = std::fs::remove_dir_all(&dir);
        let args = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        (args, pwned)
    }

    /// A replay file is someone else's: nothing it recorded can run in the shell of whoever
    /// pastes a copied curl.
    #[test]
    fn copied_curls_quote_every_recorded_text() {
        let evil = "$(touch pwned)`touch pwned`;touch pwned {a,b} !!";
        let mut wire = request(0, 1, vec![json!({"role": "user", "content": evil})]);
        wire.url = format!("http://h/v1'{evil}");
        wire.headers = vec![format!("X-Org{evil}"), "X-Org".into()];
        // Named in the `# incomplete` comment: a line break must not end the comment.
        wire.tools = Some("t1\ntouch pwned\n".into());
        let whole = RequestBook::default().whole(7, &wire);
        let (args, pwned) = run_as_shell(&whole.curl(&wire));
        assert!(!pwned, "{args:?}");
        assert_eq!(args[1], wire.url, "{args:?}");
        assert!(args.contains(&format!("X-Org{evil}: ")), "{args:?}");
        assert!(args.contains(&"X-Org: org-1".to_string()), "{args:?}");

        let exchange = McpExchange {
            http_method: format!("POST {evil}"),
            path: format!("/mcp{evil}"),
            host: Some(format!("h:1{evil}")),
            protocol: Some(evil.into()),
            mcp_method: Some(evil.into()),
            mcp_name: Some(evil.into()),
            request: Some(JsonText::from_value(&json!({"method": evil,
                "params": {"arguments": {"handle": "abcd\ntouch pwned\n…"}}}))),
            ..McpExchange::default()
        };
        let (args, pwned) = run_as_shell(&mcp_curl(&exchange));
        assert!(!pwned, "{args:?}");
        assert_eq!(
            args[1..3],
            ["-X".to_string(), format!("POST {evil}")],
            "{args:?}"
        );
        assert_eq!(args[3], format!("http://h:1{evil}/mcp{evil}"), "{args:?}");
        assert!(args.contains(&format!("Mcp-Name: {evil}")), "{args:?}");
    }
}
