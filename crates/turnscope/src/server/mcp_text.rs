//! What a `start` or `chat` result says, to a model and to a program.
//!
//! The result's text `content` is the calling model's interface: `chat`'s is the bot's reply,
//! plus a bracketed note worded for a model when it must know more (an interrupted or failed
//! turn, a cut-off reply, an unread reply a new line replaced, nothing to read); `start`'s
//! names the bot, the handle and how to use it, and the greeting. No timing, no server
//! address. The machine-readable record goes in the result's `_meta`, which clients keep
//! from their model (Claude Code hands its model `structuredContent` instead of the text
//! when there is any, so there is none): [`TURN_META`] for `chat` (the [`ChatReply`] fields)
//! and [`START_META`] for `start` (`handle`, `greeting`, `replica`); `initialize`'s result
//! names the replica in [`REPLICA_META`].

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, MetaObject};
use serde_json::{Value, json};

use crate::sessions::ChatReply;

/// The `_meta` key of `chat`'s turn record: `turn`, `reply`, `end_reason`, `error`, `rounds`,
/// `tool_calls`, `first_piece_ms`, `total_ms`, `unread`, `usage`, `finish_reason`,
/// `config_version`.
pub const TURN_META: &str = "turnscope/turn";

/// The request `_meta` key (`true`) by which a client marks a call as a probe: an attached
/// console's empty `chat` on a handle it kept from an earlier run, asking whether the server
/// still knows it. A refusal is its expected answer: `Event::Served` says `probe`, and it is
/// not counted or shown as an error.
pub const PROBE_META: &str = "turnscope/probe";

/// Longest reply the turn record repeats under `reply`. A longer one is the result's text
/// alone, and the record says its length under `reply_bytes` instead, so the result carries
/// it once: a client SDK may refuse a message over 1 MiB (the Python SDK's SSE events), and
/// a 600 KB reply sent twice never reached it.
pub const REPLY_IN_RECORD_MAX: usize = 64 * 1024;

/// The `_meta` key of `start`'s record: `handle`, `greeting`, `replica`.
pub const START_META: &str = "turnscope/start";

/// The `_meta` key of `initialize`'s result naming the replica that answered (`id`, `tag`):
/// behind a balancer, the one the client's MCP session lives on.
pub const REPLICA_META: &str = "turnscope/replica";

/// A tool result's text blocks put together, as a client's model reads them.
pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect()
}

/// A `_meta` object holding `record` under `key`.
fn meta_of(key: &str, record: Value) -> MetaObject {
    let mut meta = JsonObject::new();
    meta.insert(key.to_string(), record);
    MetaObject::from(meta)
}

fn with_meta(mut result: CallToolResult, key: &str, record: Value) -> CallToolResult {
    result.meta = Some(meta_of(key, record));
    result
}

/// `initialize`'s `_meta`: the replica that answered, under [`REPLICA_META`].
pub(crate) fn replica_meta(id: &str, tag: &str) -> MetaObject {
    meta_of(REPLICA_META, json!({"id": id, "tag": tag}))
}

/// `start`'s result: text naming the bot (`who`, see `mcp_tools::who`), the handle and
/// how to use it, and the greeting; the record in `_meta["turnscope/start"]`.
pub(crate) fn start_result(
    who: &str,
    handle: &str,
    greeting: Option<&str>,
    replica: &str,
) -> CallToolResult {
    let mut text = format!(
        "Conversation started with {who}.\nHandle: {handle}\nPass this handle to chat with each line you \
         say. It is a secret: do not show it to anyone."
    );
    if let Some(greeting) = greeting {
        text.push_str("\nThe bot greets you: ");
        text.push_str(greeting);
    }
    with_meta(
        CallToolResult::success(vec![ContentBlock::text(text)]),
        START_META,
        json!({"handle": handle, "greeting": greeting, "replica": replica}),
    )
}

/// `chat`'s result: [`turn_text`] (an error result when the turn failed), the record in
/// `_meta["turnscope/turn"]`.
pub(crate) fn chat_result(reply: &ChatReply) -> CallToolResult {
    let TurnText {
        text,
        reply_at,
        unread_at,
    } = turn_text_and_offsets(reply);
    let result = if reply.is_error() {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    let mut record = serde_json::to_value(reply).unwrap_or(Value::Null);
    if reply.reply.len() > REPLY_IN_RECORD_MAX
        && let Some(fields) = record.as_object_mut()
    {
        fields.remove("reply");
        fields.insert("reply_bytes".into(), json!(reply.reply.len()));
        fields.insert("reply_at".into(), json!(reply_at));
    }
    // An unread reply as long is the text's alone too (in its note).
    if let Some(unread) = &reply.unread
        && unread.reply.len() > REPLY_IN_RECORD_MAX
        && let Some(fields) = record.get_mut("unread").and_then(Value::as_object_mut)
    {
        fields.remove("reply");
        fields.insert("reply_bytes".into(), json!(unread.reply.len()));
        fields.insert("reply_at".into(), json!(unread_at));
    }
    with_meta(result, TURN_META, record)
}

/// What the model reads for a `chat` call: the reply, preceded by a note on an unread reply
/// this line replaced and followed by a note on how the turn ended, when either is needed.
pub fn turn_text(reply: &ChatReply) -> String {
    turn_text_and_offsets(reply).text
}

/// [`turn_text`], and where in it the replies start, for a record that leaves them to the text.
struct TurnText {
    text: String,
    /// The byte offset of the reply (after a note on an unread reply).
    reply_at: usize,
    /// The byte offset of the unread reply's text within its note, when there is one.
    unread_at: Option<usize>,
}

fn turn_text_and_offsets(reply: &ChatReply) -> TurnText {
    let unread_len = reply.unread.as_ref().map_or(0, |u| u.reply.len());
    let mut text = String::with_capacity(reply.reply.len() + unread_len + 160);
    let mut unread_at = None;
    if let Some(unread) = &reply.unread
        && unread.end_reason == "restarted"
    {
        text.push_str("[turnscope stopped (a restart, a crash, or a replica that went down) while the bot answered your previous line");
        if let Some(line) = &unread.line {
            text.push_str(" \"");
            text.push_str(line);
            text.push('"');
        }
        text.push_str(": that line got no reply");
        if !unread.reply.is_empty() {
            text.push_str(" but this part: \"");
            unread_at = Some(text.len());
            text.push_str(&unread.reply);
            text.push('"');
        }
        text.push_str(". Send it again if it still matters.]\n\n");
    } else if let Some(unread) = &reply.unread {
        text.push_str(
            "[Your previous line's reply was never read: this line replaced it. The bot had said: ",
        );
        if unread.reply.is_empty() {
            text.push_str("nothing yet");
        } else {
            text.push('"');
            unread_at = Some(text.len());
            text.push_str(&unread.reply);
            text.push('"');
        }
        // Interrupted by this line, or by a cancel before it: the text cannot tell which.
        text.push_str(if unread.end_reason == "interrupted" {
            " (interrupted before it finished).]\n\n"
        } else {
            ".]\n\n"
        });
    }
    let reply_at = text.len();
    text.push_str(&reply.reply);
    if let Some(note) = end_note(reply) {
        if !reply.reply.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&note);
    }
    TurnText {
        text,
        reply_at,
        unread_at,
    }
}

/// The reply of a `chat` result whose turn record (`record`, its [`TURN_META`]) left it to
/// the text (`reply_bytes` and `reply_at`: a reply over [`REPLY_IN_RECORD_MAX`]); `None`
/// when the record holds it under `reply`, or says nothing of it.
pub fn reply_left_to_text(record: &Value, text: &str) -> Option<String> {
    let bytes = usize::try_from(record.get("reply_bytes")?.as_u64()?).ok()?;
    let at = record
        .get("reply_at")
        .and_then(Value::as_u64)
        .and_then(|at| usize::try_from(at).ok())
        .unwrap_or(0);
    Some(
        text.get(at..at.saturating_add(bytes))
            .unwrap_or(text)
            .to_string(),
    )
}

/// The note after the reply, by how the turn ended: one arm per end reason (`None` when the
/// reply says it all).
fn end_note(reply: &ChatReply) -> Option<String> {
    let partial = |what: &str| {
        if reply.reply.is_empty() {
            format!("{what} before it said anything")
        } else {
            format!("{what}; the reply above is all it said")
        }
    };
    match reply.end_reason.as_deref() {
        Some("completed") => None,
        None => Some(
            "[Nothing to read: no turn is running and every reply has been read. Send a line to say \
             something.]"
                .into(),
        ),
        Some("interrupted") => Some(format!(
            "[{}.]",
            partial(
                "The bot was interrupted (by a newer line, the person at its console, or a \
                 cancel of the call or its task)"
            )
        )),
        Some("error") => {
            let error = reply.error.as_deref().unwrap_or("no reason given");
            let why = if error.starts_with("round cap reached") {
                // The bot's own message speaks to its operator (raise `round_cap`).
                "it called its tools in more rounds than one turn allows".to_string()
            } else {
                error.to_string()
            };
            Some(format!(
                "[{}. It failed: {why}. The conversation still works: send the line again, or another one.]",
                partial("The bot's turn failed")
            ))
        }
        Some("session_ended") => Some(format!(
            "[{}. Call start for a new conversation.]",
            partial("The conversation ended while the bot answered")
        )),
        // turnscope stopped while this turn ran; the conversation itself was kept.
        Some("restarted") => Some(format!(
            "[turnscope stopped (a restart, a crash, or a replica that went down) while the bot answered {}: {}. \
             The conversation is kept: send the line again.]",
            reply
                .line
                .as_deref()
                .map_or("your line".to_string(), |l| format!("your line \"{l}\"")),
            if reply.reply.is_empty() {
                "it got no reply".to_string()
            } else {
                "the reply above is all it said".to_string()
            }
        )),
        // A reply cut by the model's token limit (the `length` end reason).
        Some("length") => Some(
            "[The reply was cut off: the bot reached its token limit before it finished.]".into(),
        ),
        Some(other) => Some(format!("[The turn ended: {other}.]")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::UnreadTurn;

    fn reply(text: &str, end: Option<&str>, error: Option<&str>) -> ChatReply {
        ChatReply {
            reply: text.into(),
            turn: end.map(|_| 3),
            end_reason: end.map(str::to_string),
            error: error.map(str::to_string),
            rounds: 0,
            tool_calls: Vec::new(),
            first_piece_ms: Some(12.5),
            total_ms: Some(40.25),
            unread: None,
            usage: None,
            finish_reason: None,
            config_version: None,
            line: None,
            turns: None,
            kept_unread: false,
        }
    }

    #[test]
    fn a_completed_turn_is_the_reply_alone_and_the_record_is_in_meta() {
        let r = reply("We open at nine.", Some("completed"), None);
        assert_eq!(turn_text(&r), "We open at nine.");
        let result = chat_result(&r);
        assert_eq!(result.is_error, Some(false));
        assert!(result.structured_content.is_none());
        let meta = result.meta.as_ref().unwrap();
        assert_eq!(meta[TURN_META]["total_ms"], 40.25);
        assert_eq!(meta[TURN_META]["end_reason"], "completed");
    }

    /// A reply past 64 KiB is carried once, as the text: the record gives its length
    /// instead. A 420 KB reply made an 840 KB SSE event, and a 600 KB one went past the
    /// Python SDK's 1 MiB limit and never reached it (tour G).
    #[test]
    fn a_long_reply_is_carried_once() {
        let short = chat_result(&reply("We open at nine.", Some("completed"), None));
        assert_eq!(
            short.meta.as_ref().unwrap()[TURN_META]["reply"],
            "We open at nine."
        );
        let long = "nine ".repeat(REPLY_IN_RECORD_MAX / 5 + 1);
        let result = chat_result(&reply(&long, Some("completed"), None));
        let record = &result.meta.as_ref().unwrap()[TURN_META];
        assert!(record.get("reply").is_none(), "the reply twice");
        assert_eq!(record["reply_bytes"], long.len());
        assert_eq!(
            reply_left_to_text(record, &text_of(&result)).as_deref(),
            Some(long.as_str())
        );
        assert_eq!(record["end_reason"], "completed");
        assert_eq!(text_of(&result), long);
        let bytes = serde_json::to_vec(&result).unwrap().len();
        assert!(bytes < long.len() + 1_000, "{bytes}");
        // With notes around it (an unread reply before, an end after), the reply alone.
        let mut noted = reply(&long, Some("length"), None);
        noted.unread = Some(UnreadTurn {
            reply: "We".into(),
            end_reason: "interrupted".into(),
            line: None,
        });
        let result = chat_result(&noted);
        let text = text_of(&result);
        assert!(
            text.starts_with("[Your previous") && text.ends_with("finished.]"),
            "{}",
            &text[..80]
        );
        let record = &result.meta.as_ref().unwrap()[TURN_META];
        assert_eq!(
            reply_left_to_text(record, &text).as_deref(),
            Some(long.as_str())
        );
        assert_eq!(
            record["unread"]["reply"], "We",
            "a short unread reply stays"
        );
        // A long unread reply (a new line replaced it), after a restart too: once, in its note.
        for end in ["interrupted", "restarted"] {
            let unread = "ten ".repeat(REPLY_IN_RECORD_MAX / 4 + 1);
            let mut noted = reply("You said: next", Some("completed"), None);
            noted.unread = Some(UnreadTurn {
                reply: unread.clone(),
                end_reason: end.into(),
                line: Some("tell me".into()),
            });
            let result = chat_result(&noted);
            let text = text_of(&result);
            let record = &result.meta.as_ref().unwrap()[TURN_META];
            assert!(record["unread"].get("reply").is_none(), "{end}: twice");
            assert_eq!(record["unread"]["end_reason"], end);
            assert_eq!(
                reply_left_to_text(&record["unread"], &text).as_deref(),
                Some(unread.as_str()),
                "{end}"
            );
            let bytes = serde_json::to_vec(&result).unwrap().len();
            assert!(bytes < unread.len() + 1_000, "{end}: {bytes}");
        }
    }

    #[test]
    fn every_other_end_is_said_in_words_for_a_model() {
        let cut = turn_text(&reply("We open", Some("interrupted"), None));
        assert!(
            cut.starts_with("We open\n\n[The bot was interrupted"),
            "{cut}"
        );
        let failed = reply("We", Some("error"), Some("model: HTTP 500 from the server"));
        let text = turn_text(&failed);
        assert!(text.contains("the reply above is all it said") && text.contains("HTTP 500"));
        assert_eq!(chat_result(&failed).is_error, Some(true));
        let capped = turn_text(&reply(
            "",
            Some("error"),
            Some("round cap reached: the model asked for round 9"),
        ));
        assert!(
            capped.starts_with("[The bot's turn failed before it said anything")
                && capped.contains("more rounds than one turn allows")
                && !capped.contains("round_cap"),
            "{capped}"
        );
        let nothing = turn_text(&reply("", None, None));
        assert!(nothing.starts_with("[Nothing to read"), "{nothing}");
        let long = turn_text(&reply("We open at", Some("length"), None));
        assert!(long.ends_with("token limit before it finished.]"), "{long}");
        for text in [cut, text, capped, nothing, long] {
            assert!(
                !text.contains("_ms") && !text.contains("127.0.0.1"),
                "{text}"
            );
        }
    }

    #[test]
    fn an_unread_reply_comes_first() {
        let mut r = reply("You said: second", Some("completed"), None);
        r.unread = Some(UnreadTurn {
            reply: "You said: first".into(),
            end_reason: "interrupted".into(),
            line: None,
        });
        assert_eq!(
            turn_text(&r),
            "[Your previous line's reply was never read: this line replaced it. The bot had said: \
             \"You said: first\" (interrupted before it finished).]\n\nYou said: second"
        );
    }

    #[test]
    fn a_turn_lost_to_a_restart_names_its_line_in_words_for_a_model() {
        let mut lost = reply("", Some("restarted"), None);
        lost.line = Some("book a table".into());
        let text = turn_text(&lost);
        assert_eq!(
            text,
            "[turnscope stopped (a restart, a crash, or a replica that went down) while the bot answered your \
             line \"book a table\": it got no reply. The conversation is kept: send the line again.]"
        );
        assert_eq!(chat_result(&lost).is_error, Some(false));
        let mut next = reply("Sure.", Some("completed"), None);
        next.unread = Some(UnreadTurn {
            reply: String::new(),
            end_reason: "restarted".into(),
            line: Some("book a table".into()),
        });
        assert_eq!(
            turn_text(&next),
            "[turnscope stopped (a restart, a crash, or a replica that went down) while the bot answered your \
             previous line \"book a table\": that line got no reply. Send it again if it still matters.]\n\nSure."
        );
    }

    #[test]
    fn start_names_the_bot_the_handle_and_the_greeting() {
        let handle = "0b6f3c52-9a3e-4d0e-8f65-6c1d2e3fa1b2";
        let result = start_result(
            "the bot \"Hours\"",
            handle,
            Some("Hello!"),
            "127.0.0.1:7870",
        );
        let text = &result.content[0].as_text().unwrap().text;
        assert!(text.starts_with("Conversation started with the bot \"Hours\".\nHandle: 0b6f3c52"));
        assert!(text.ends_with("The bot greets you: Hello!") && !text.contains("127.0.0.1"));
        let meta = &result.meta.as_ref().unwrap()[START_META];
        assert_eq!(meta["handle"], handle);
        assert_eq!(meta["replica"], "127.0.0.1:7870");
        assert!(result.structured_content.is_none());
    }
}
