//! The bot's tool rounds of a `chat/completions` request that ended by handing calls to the
//! client. The bridge runs bot calls itself and never shows them to the client, so the client's
//! next request, which carries only what it saw, would give the model a history without them:
//! the bot rounds the loop ran before that answer, and the bot calls of the answer itself
//! (tour M: those were dropped, never run). They are kept here, and every later request whose
//! history holds the client's calls (under ids the bridge makes, unique to that answer, after
//! the same last user line) gets them put back: the earlier rounds before the client's
//! assistant message, the same response's bot calls beside the client's and their results after
//! it. The endpoint is otherwise stateless: this is the one thing it keeps between requests,
//! bounded in entries, bytes and age (each use keeps an entry another [`HELD_FOR`]); a request
//! that comes back after its entry went is answered as before (the model asks again for what it
//! still needs).

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hash, Hasher};
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

/// A call by its id and the tool's name.
type CallName = (String, String);

/// A bot call and its result's text.
type Ran = (ToolCall, String);

/// What one request's loop did with the bot's tools before it handed calls to the client.
struct Held {
    /// The client calls handed back, by id and name: how the next request is recognised.
    client: Vec<CallName>,
    /// The last user line before them, hashed: a history that only reuses the ids (a copy
    /// with another question) is not this one (tour M2).
    asked: u64,
    /// The bot rounds the loop ran before that answer (assistant messages with their calls,
    /// and the calls' results), in order.
    earlier: Vec<Value>,
    /// The bot's calls of the answer itself, in its order, each with its result's text.
    own: Vec<Ran>,
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

/// What [`HeldRounds::hold`] keeps of one request.
pub(crate) struct Round<'a> {
    /// The client's messages, as its request sent them (restored and mended).
    pub(crate) asked: &'a [Value],
    /// What the loop added after them: its bot rounds before the answer.
    pub(crate) earlier: &'a [Value],
    /// The client's calls of the answer (under the bridge's ids).
    pub(crate) client: &'a [ToolCall],
    /// The bot's calls of the answer and their results' texts (none when it had none).
    pub(crate) own: Vec<Ran>,
}

impl HeldRounds {
    /// Keeps what `round`'s request did with the bot's tools, when it did anything.
    pub(crate) fn hold(&self, round: Round<'_>) {
        if round.earlier.is_empty() && round.own.is_empty() {
            return;
        }
        let bytes = round
            .earlier
            .iter()
            .map(|m| m.to_string().len())
            .sum::<usize>()
            + round
                .own
                .iter()
                .map(|(c, r)| c.arguments.len() + c.name.len() + c.id.len() + r.len())
                .sum::<usize>();
        if bytes > HELD_BYTES {
            return;
        }
        let asked = round
            .asked
            .iter()
            .rev()
            .find(|m| is_user(m))
            .map_or(0, line_hash);
        let held = Held {
            asked,
            client: round
                .client
                .iter()
                .map(|c| (c.id.clone(), c.name.clone()))
                .collect(),
            earlier: round.earlier.to_vec(),
            own: round.own,
            bytes,
            at: Instant::now(),
        };
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.trim(Some(bytes));
        kept.bytes += bytes;
        kept.rounds.push_back(held);
    }

    /// Puts the kept bot rounds back into the client's `messages` (see the module's doc). A
    /// round stays kept (the client sends its history again with each request, and may retry
    /// one), its age counted afresh. Returns how many rounds were put back.
    pub(crate) fn restore(&self, messages: &mut Vec<Value>) -> usize {
        // Outside the lock, in one pass: each assistant message with calls, and the last user
        // line before it, hashed once per user message.
        let mut last_user = 0;
        let mut asking: Vec<(usize, Vec<CallName>, u64)> = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            if is_user(m) {
                last_user = line_hash(m);
                continue;
            }
            let calls = calls_of(m);
            if !calls.is_empty() {
                asking.push((i, calls, last_user));
            }
        }
        if asking.is_empty() {
            return 0;
        }
        let mut found: Vec<(usize, Vec<Value>, Vec<Ran>)> = Vec::new();
        {
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            kept.trim(None);
            for (i, calls, asked) in &asking {
                let held = kept.rounds.iter_mut().find(|h| {
                    h.at.elapsed() <= HELD_FOR
                        && h.asked == *asked
                        && h.client.len() == calls.len()
                        && h.client.iter().all(|held| calls.contains(held))
                });
                if let Some(held) = held {
                    held.at = Instant::now();
                    found.push((*i, held.earlier.clone(), held.own.clone()));
                }
            }
        }
        // From the last, so the indices before stay true.
        for (i, earlier, own) in found.iter().rev() {
            if let Some(list) = messages[*i]
                .get_mut("tool_calls")
                .and_then(Value::as_array_mut)
            {
                list.extend(own.iter().map(|(call, _)| tool_call_json(call)));
            }
            let results = own.iter().map(|(call, result)| {
                json!({"role": "tool", "tool_call_id": call.id, "content": result})
            });
            messages.splice(i + 1..i + 1, results);
            messages.splice(*i..*i, earlier.iter().cloned());
        }
        found.len()
    }
}

/// Whether `message` is the user's.
fn is_user(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some("user")
}

/// A user message's content, hashed.
fn line_hash(message: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    match message.get("content") {
        Some(Value::String(text)) => text.hash(&mut h),
        Some(other) => other.to_string().hash(&mut h),
        None => 0u8.hash(&mut h),
    }
    h.finish()
}

/// The (id, name) of each call an assistant message makes.
fn calls_of(message: &Value) -> Vec<CallName> {
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

    /// A round of `client` calls answering `asked`, with `own` bot calls beside them.
    fn round<'a>(
        asked: &'a [Value],
        client: &'a [ToolCall],
        own: &[(&str, &str, &str)],
    ) -> Round<'a> {
        Round {
            asked,
            earlier: &[],
            client,
            own: own
                .iter()
                .map(|(id, name, result)| (call(id, name), (*result).to_string()))
                .collect(),
        }
    }

    #[test]
    fn a_held_round_goes_back_beside_the_client_calls_it_came_with() {
        let held = HeldRounds::default();
        let mine = call("c2", "lookup_city");
        let asked = [json!({"role": "user", "content": "clock and lookup_city Paris"})];
        let client = [mine.clone()];
        held.hold(round(&asked, &client, &[("c1", "clock", "12:00")]));
        // Another question that only reuses the ids gets nothing (tour M2).
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
        // round goes back again (review: it went back once only). Earlier lines trimmed away
        // by the client do not matter, only the last before the calls.
        let mut again = vec![
            json!({"role": "user", "content": "an older line, trimmed by some clients"}),
            asked[0].clone(),
            json!({"role": "assistant", "content": null, "tool_calls": [tool_call_json(&mine)]}),
            json!({"role": "tool", "tool_call_id": "c2", "content": "Paris is in France"}),
        ];
        assert_eq!(held.restore(&mut again), 1);
        assert_eq!(again.len(), 5);
    }

    /// The bot rounds the loop ran before the answer go back before the client's assistant
    /// message (review: the model lost their results too).
    #[test]
    fn the_bot_rounds_before_the_answer_go_back_before_it() {
        let held = HeldRounds::default();
        let mine = call("c9", "my_tool");
        let asked = [json!({"role": "user", "content": "clock, then my_tool"})];
        let earlier = [
            json!({"role": "assistant", "content": null, "tool_calls": [tool_call_json(&call("b1", "clock"))]}),
            json!({"role": "tool", "tool_call_id": "b1", "content": "12:00"}),
        ];
        let client = [mine.clone()];
        held.hold(Round {
            asked: &asked,
            earlier: &earlier,
            client: &client,
            own: Vec::new(),
        });
        let mut messages = vec![
            asked[0].clone(),
            json!({"role": "assistant", "content": null, "tool_calls": [tool_call_json(&mine)]}),
            json!({"role": "tool", "tool_call_id": "c9", "content": "MINE"}),
        ];
        assert_eq!(held.restore(&mut messages), 1);
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "tool", "assistant", "tool"]);
        assert_eq!(messages[1], earlier[0]);
        assert_eq!(messages[4]["content"], "MINE");
    }

    /// Results past the byte bound push the oldest rounds out; a round larger than the bound
    /// alone is not kept.
    #[test]
    fn the_byte_bound_holds() {
        let held = HeldRounds::default();
        let half = "x".repeat(HELD_BYTES / 2);
        for n in 0..3 {
            let client = [call(&format!("k{n}"), "x")];
            held.hold(round(&[], &client, &[("b", "clock", &half)]));
        }
        let kept = held.kept.lock().unwrap();
        assert!(
            kept.bytes <= HELD_BYTES && kept.rounds.len() == 1,
            "{}",
            kept.rounds.len()
        );
        drop(kept);
        let big = "y".repeat(HELD_BYTES + 1);
        let client = [call("big", "x")];
        held.hold(round(&[], &client, &[("b", "clock", &big)]));
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
        let client = [call("a", "x")];
        held.hold(round(&[], &client, &[("b", "clock", "1")]));
        let mut other = vec![json!({"role": "assistant", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "x", "arguments": "{}"}},
            {"id": "z", "type": "function", "function": {"name": "y", "arguments": "{}"}},
        ]})];
        assert_eq!(held.restore(&mut other), 0);
        for n in 0..HELD_KEPT + 10 {
            let client = [call(&format!("k{n}"), "x")];
            held.hold(round(&[], &client, &[("b", "clock", "1")]));
        }
        assert_eq!(held.kept.lock().unwrap().rounds.len(), HELD_KEPT);
    }
}
