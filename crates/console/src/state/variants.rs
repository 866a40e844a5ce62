//! Variants of recorded model requests: each time the person edits a request from the turn
//! view and sends it again, the body sent and the answer are kept here, by request, to set
//! beside the recorded answer. They live apart from the session: nothing here reaches its
//! history or its events.
//!
//! Bounded: [`PER_REQUEST`] variants per request (the oldest goes first), and
//! [`VARIANT_BYTES`] of bodies and answers in all (the oldest variant of any request goes
//! first).

use std::collections::{BTreeMap, VecDeque};

use serde_json::Value;
use turnscope::model::resend::ResendAnswer;
use turnscope::tools::openai_shape::schema::pointer_token;

/// Variants kept per request.
pub const PER_REQUEST: usize = 8;
/// Bytes of variant bodies and answers kept in all.
pub const VARIANT_BYTES: usize = 8 * 1024 * 1024;

/// Which recorded request: session, turn, and its place among the turn's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestKey {
    /// Session number.
    pub session: u64,
    /// Turn id.
    pub turn: u64,
    /// Index among the turn's model requests.
    pub index: usize,
}

/// One edited request sent again, and its answer.
#[derive(Debug, Clone)]
pub struct Variant {
    /// The body sent.
    pub body: Value,
    /// What came back.
    pub answer: ResendAnswer,
    /// Its cost in bytes (body and answer texts).
    pub bytes: usize,
    /// Where it came in, counting every variant kept (oldest first).
    seq: u64,
}

/// Every variant kept.
#[derive(Debug, Default)]
pub struct Variants {
    by_request: BTreeMap<RequestKey, VecDeque<Variant>>,
    bytes: usize,
    seq: u64,
}

impl Variants {
    /// Keeps a variant of `key`; returns its number among the request's variants (from 0).
    pub fn add(&mut self, key: RequestKey, body: Value, answer: ResendAnswer) -> usize {
        let bytes = body.to_string().len() + answer.text.len() + answer.reasoning.len();
        self.seq += 1;
        let list = self.by_request.entry(key).or_default();
        list.push_back(Variant {
            body,
            answer,
            bytes,
            seq: self.seq,
        });
        self.bytes += bytes;
        if list.len() > PER_REQUEST
            && let Some(gone) = list.pop_front()
        {
            self.bytes -= gone.bytes;
        }
        // Over the byte bound: the oldest variant anywhere goes, never the one just added.
        while self.bytes > VARIANT_BYTES {
            let oldest = self
                .by_request
                .iter()
                .filter_map(|(k, l)| l.front().map(|v| (v.seq, *k)))
                .filter(|(seq, _)| *seq != self.seq)
                .min();
            let Some((_, k)) = oldest else { break };
            if let Some(list) = self.by_request.get_mut(&k)
                && let Some(gone) = list.pop_front()
            {
                self.bytes -= gone.bytes;
                if list.is_empty() {
                    self.by_request.remove(&k);
                }
            }
        }
        self.count(key).saturating_sub(1)
    }

    /// How many variants `key` has.
    pub fn count(&self, key: RequestKey) -> usize {
        self.by_request.get(&key).map_or(0, VecDeque::len)
    }

    /// Variant `i` of `key`.
    pub fn get(&self, key: RequestKey, i: usize) -> Option<&Variant> {
        self.by_request.get(&key).and_then(|l| l.get(i))
    }

    /// Bytes kept in all.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Where two JSON values differ, as JSON pointers (`/messages/0/content`), at most `max`.
pub fn changed_paths(before: &Value, after: &Value, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    walk(before, after, String::new(), &mut out, max);
    out
}

fn walk(a: &Value, b: &Value, at: String, out: &mut Vec<String>, max: usize) {
    if out.len() >= max || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let here = format!("{at}/{}", pointer_token(k));
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => walk(p, q, here, out, max),
                    _ => {
                        if out.len() < max {
                            out.push(here)
                        }
                    }
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                walk(p, q, format!("{at}/{i}"), out, max);
            }
        }
        _ => out.push(if at.is_empty() { "/".into() } else { at }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(text: &str) -> ResendAnswer {
        ResendAnswer {
            text: text.into(),
            ..ResendAnswer::default()
        }
    }

    #[test]
    fn variants_are_kept_per_request_and_bounded() {
        let mut v = Variants::default();
        let key = RequestKey {
            session: 1,
            turn: 2,
            index: 0,
        };
        for i in 0..PER_REQUEST + 3 {
            assert_eq!(
                v.add(key, json!({"n": i}), answer("x")),
                i.min(PER_REQUEST - 1)
            );
        }
        assert_eq!(v.count(key), PER_REQUEST);
        assert_eq!(v.get(key, 0).unwrap().body["n"], 3);
        let big = "y".repeat(VARIANT_BYTES / 2 + 1);
        let other = RequestKey { index: 1, ..key };
        v.add(other, json!({}), answer(&big));
        v.add(other, json!({}), answer(&big));
        assert!(v.bytes() <= VARIANT_BYTES, "{}", v.bytes());
        assert_eq!(v.count(other), 1, "the older big one went");
    }

    #[test]
    fn changed_paths_name_what_was_edited() {
        let a = json!({"model": "m", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], "temperature": 0.2});
        let b = json!({"model": "m", "messages": [{"role": "system", "content": "be loud"}, {"role": "user", "content": "hi"}], "max_tokens": 9});
        assert_eq!(
            changed_paths(&a, &b, 5),
            ["/max_tokens", "/messages/0/content", "/temperature"]
        );
        assert!(changed_paths(&a, &a, 5).is_empty());
    }
}
