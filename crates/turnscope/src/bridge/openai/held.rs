//! Bot-tool calls of a `chat/completions` response that also called client tools. The bridge
//! runs them when the model asks, hands the client only its own calls (under ids it makes, unique
//! to that answer, so no other client's history can name them), and keeps the bot's calls and
//! results here; every later request whose history holds those calls gets the bot's put back
//! beside them, so the model sees its whole round. Without it the bot's calls of such a response
//! were never run and the model never had their results (tour M). The endpoint is otherwise
//! stateless: this is the one thing it keeps between requests, bounded in entries, bytes and
//! age (each use keeps an entry another [`HELD_FOR`]); a request that comes back after its entry
//! went is answered as before (the model asks again for what it still needs).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::wire::tool_call_json;
use crate::tools::ToolCall;

/// Most rounds kept waiting for their clients.
pub(crate) const HELD_KEPT: usize = 256;
/// Most bytes of results kept over all of them.
pub(crate) const HELD_BYTES: usize = 8 * 1024 * 1024;
/// How long a round waits for its client's next request.
pub(crate) const HELD_FOR: Duration = Duration::from_secs(30 * 60);

/// One response's bot calls and their results, waiting for the client's calls to come back.
struct Held {
    /// The client calls handed back, by id and name: how the next request is recognised.
    client: Vec<(String, String)>,
    /// The conversation's user lines before them, hashed: a history that only reuses the ids
    /// is not this one (tour M2).
    asked: u64,
    /// The bot's calls of the same response, in its order, each with its result's text.
    own: Vec<(ToolCall, String)>,
    bytes: usize,
    at: Instant,
}

/// The rounds kept (see the module's doc).
#[derive(Default)]
pub(crate) struct HeldRounds {
    kept: Mutex<Kept>,
}

/// The rounds, oldest first, and their bytes.
#[derive(Default)]
struct Kept {
    rounds: VecDeque<Held>,
    bytes: usize,
}

impl Kept {
    /// Drops rounds past their age from the front, and the oldest while a round of `adding`
    /// bytes (one about to be kept) would pass a bound.
    fn trim(&mut self, adding: Option<usize>) {
        loop {
            let over = adding.is_some_and(|bytes| {
                self.rounds.len() >= HELD_KEPT || self.bytes + bytes > HELD_BYTES
            });
            let old = self
                .rounds
                .front()
                .is_some_and(|h| h.at.elapsed() > HELD_FOR);
            if !(over || old) {
                break;
            }
            let Some(gone) = self.rounds.pop_front() else {
                break;
            };
            self.bytes -= gone.bytes;
        }
    }
}

/// A call id no model made: unique to the answer that hands it to the client.
pub(crate) fn bridge_call_id() -> String {
    format!("call_ts_{}", uuid::Uuid::new_v4().simple())
}

impl HeldRounds {
    /// Keeps the bot's calls `own`, run with `results`, of a response to `messages` that also
    /// called the client's `client` (handed back to it).
    pub(crate) fn hold(
        &self,
        messages: &[Value],
        client: &[ToolCall],
        own: &[ToolCall],
        results: Vec<String>,
    ) {
        let own: Vec<(ToolCall, String)> = own.iter().cloned().zip(results).collect();
        let bytes = own
            .iter()
            .map(|(c, r)| c.arguments.len() + c.name.len() + c.id.len() + r.len())
            .sum();
        if bytes > HELD_BYTES {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.trim(Some(bytes));
        kept.bytes += bytes;
        kept.rounds.push_back(Held {
            asked: user_lines(messages),
            client: client
                .iter()
                .map(|c| (c.id.clone(), c.name.clone()))
                .collect(),
            own,
            bytes,
            at: Instant::now(),
        });
    }

    /// Puts the kept bot calls back into the client's `messages`: each assistant message whose
    /// calls are exactly a kept round's client calls gets the bot's calls after its own, and
    /// their results right after it. The round stays kept (the client sends its history again
    /// with each request, and may retry one), its age counted afresh. Returns how many rounds
    /// were put back.
    pub(crate) fn restore(&self, messages: &mut Vec<Value>) -> usize {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.trim(None);
        if kept.rounds.is_empty() {
            return 0;
        }
        let mut restored = 0;
        let mut i = 0;
        while i < messages.len() {
            let calls = calls_of(&messages[i]);
            let asked = if calls.is_empty() {
                0
            } else {
                user_lines(&messages[..i])
            };
            let found = (!calls.is_empty())
                .then(|| {
                    kept.rounds.iter_mut().find(|h| {
                        h.at.elapsed() <= HELD_FOR
                            && h.asked == asked
                            && h.client.len() == calls.len()
                            && h.client.iter().all(|held| calls.contains(held))
                    })
                })
                .flatten();
            let Some(held) = found else {
                i += 1;
                continue;
            };
            held.at = Instant::now();
            if let Some(list) = messages[i]
                .get_mut("tool_calls")
                .and_then(Value::as_array_mut)
            {
                list.extend(held.own.iter().map(|(call, _)| tool_call_json(call)));
            }
            let results = held.own.iter().map(|(call, result)| {
                json!({"role": "tool", "tool_call_id": call.id, "content": result})
            });
            let after = i + 1;
            let n = held.own.len();
            messages.splice(after..after, results);
            restored += 1;
            i = after + n;
        }
        restored
    }
}

/// A hash of the user messages of `messages`, in order: the conversation's lines, which a
/// client sends again unchanged (the bot's rounds put back between them are not user lines).
fn user_lines(messages: &[Value]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for m in messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
    {
        match m.get("content") {
            Some(Value::String(text)) => text.hash(&mut h),
            Some(other) => other.to_string().hash(&mut h),
            None => 0u8.hash(&mut h),
        }
    }
    h.finish()
}

/// The (id, name) of each call an assistant message makes.
fn calls_of(message: &Value) -> Vec<(String, String)> {
    if message.get("role").and_then(Value::as_str) != Some("assistant") {
        return Vec::new();
    }
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .filter_map(|c| {
                    Some((
                        c.get("id")?.as_str()?.to_string(),
                        c.pointer("/function/name")?.as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall::bare(id, name)
    }

    #[test]
    fn a_held_round_goes_back_beside_the_client_calls_it_came_with() {
        let held = HeldRounds::default();
        let mine = call("c2", "lookup_city");
        let asked = [json!({"role": "user", "content": "clock and lookup_city Paris"})];
        held.hold(
            &asked,
            std::slice::from_ref(&mine),
            &[call("c1", "clock")],
            vec!["12:00".into()],
        );
        // Another conversation that only reuses the ids gets nothing (tour M2).
        let mut other = vec![
            json!({"role": "user", "content": "please use lookup_city for me"}),
            json!({"role": "assistant", "content": null, "tool_calls": [tool_call_json(&mine)]}),
        ];
        assert_eq!(held.restore(&mut other), 0);
        let mut messages = vec![
            asked[0].clone(),
            json!({"role": "assistant", "content": null, "tool_calls": [tool_call_json(&mine)]}),
            json!({"role": "tool", "tool_call_id": "c2", "content": "Paris is in France"}),
        ];
        assert_eq!(held.restore(&mut messages), 1);
        let names: Vec<&str> = messages[1]["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["lookup_city", "clock"]);
        assert_eq!(messages[2]["tool_call_id"], "c1");
        assert_eq!(messages[2]["content"], "12:00");
        assert_eq!(messages[3]["tool_call_id"], "c2");
        // Put back, the message holds the bot's calls too: not matched again.
        assert_eq!(held.restore(&mut messages), 0);
        // The client sends its history again with its next request (or retries): kept, the
        // round goes back again (review: it went back once only).
        let mut again = vec![
            asked[0].clone(),
            json!({"role": "assistant", "content": null, "tool_calls": [tool_call_json(&mine)]}),
            json!({"role": "tool", "tool_call_id": "c2", "content": "Paris is in France"}),
        ];
        assert_eq!(held.restore(&mut again), 1);
        assert_eq!(again.len(), 4);
    }

    /// Results past the byte bound push the oldest rounds out; a round larger than the bound
    /// alone is not kept.
    #[test]
    fn the_byte_bound_holds() {
        let held = HeldRounds::default();
        let half = "x".repeat(HELD_BYTES / 2);
        for n in 0..3 {
            held.hold(
                &[],
                &[call(&format!("k{n}"), "x")],
                &[call("b", "clock")],
                vec![half.clone()],
            );
        }
        let kept = held.kept.lock().unwrap();
        assert!(
            kept.bytes <= HELD_BYTES && kept.rounds.len() == 1,
            "{}",
            kept.rounds.len()
        );
        drop(kept);
        held.hold(
            &[],
            &[call("big", "x")],
            &[call("b", "clock")],
            vec!["y".repeat(HELD_BYTES + 1)],
        );
        assert!(
            held.kept
                .lock()
                .unwrap()
                .rounds
                .iter()
                .all(|h| h.client[0].0 != "big")
        );
    }

    #[test]
    fn a_different_set_of_calls_is_left_alone_and_the_bound_holds() {
        let held = HeldRounds::default();
        held.hold(
            &[],
            &[call("a", "x")],
            &[call("b", "clock")],
            vec!["1".into()],
        );
        let mut other = vec![json!({"role": "assistant", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "x", "arguments": "{}"}},
            {"id": "z", "type": "function", "function": {"name": "y", "arguments": "{}"}},
        ]})];
        assert_eq!(held.restore(&mut other), 0);
        for n in 0..HELD_KEPT + 10 {
            held.hold(
                &[],
                &[call(&format!("k{n}"), "x")],
                &[call("b", "clock")],
                vec!["1".into()],
            );
        }
        assert_eq!(held.kept.lock().unwrap().rounds.len(), HELD_KEPT);
    }
}
