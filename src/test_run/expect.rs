//! Checking one turn's record against the expectations of its `[[case.turn]]`: each failed
//! one as expected vs got, or "not checkable" when the target does not report what an
//! expectation needs (never a silent pass).

use regex::Regex;
use serde::Serialize;
use serde_json::Value;
use turnscope::conversation_test::{ToolExpect, ToolsMatch, Turn};

use super::target::{Call, Reported, TurnRecord};

/// One expectation that did not hold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    /// The key in the file.
    pub key: &'static str,
    /// What the file asked for.
    pub expected: String,
    /// What the turn gave.
    pub got: String,
}

/// A turn's expectations compiled once per case (the regexes).
pub struct Compiled {
    /// `reply_matches`, in order.
    pub regexes: Vec<Regex>,
}

impl Compiled {
    /// Compiles `turn`'s patterns (the file's check already proved they compile).
    pub fn of(turn: &Turn) -> Self {
        Self {
            regexes: turn
                .reply_matches
                .iter()
                .filter_map(|p| Regex::new(p).ok())
                .collect(),
        }
    }
}

/// Checks `rec` against `turn`.
///
/// # Errors
/// An expectation needs a fact this target does not report; the message names the key and
/// why.
pub fn check(turn: &Turn, compiled: &Compiled, rec: &TurnRecord) -> Result<Vec<Failure>, String> {
    let text_only = rec.reported == Reported::TextOnly;
    if turn.tools.is_some() && rec.tool_calls.is_none() {
        return Err(not_checkable("tools", "tool calls", text_only));
    }
    if turn.end_reason.is_some() && text_only {
        return Err(not_checkable("end_reason", "end reasons", text_only));
    }
    if turn.first_piece_ms.is_some() && text_only && rec.first_piece_ms.is_none() {
        return Err(
            "`first_piece_ms` is not checkable against this target: it reports no time to the first piece and \
             sent no progress notification during the call; remove `first_piece_ms` or use `total_ms`"
                .into(),
        );
    }
    let mut out = Vec::new();
    let reply = || format!("{:?}", rec.reply);
    for want in &turn.reply_contains {
        if !rec.reply.contains(want.as_str()) {
            out.push(Failure {
                key: "reply_contains",
                expected: format!("a reply containing {want:?}"),
                got: reply(),
            });
        }
    }
    for unwanted in &turn.reply_not_contains {
        if rec.reply.contains(unwanted.as_str()) {
            out.push(Failure {
                key: "reply_not_contains",
                expected: format!("a reply without {unwanted:?}"),
                got: reply(),
            });
        }
    }
    for re in &compiled.regexes {
        if !re.is_match(&rec.reply) {
            out.push(Failure {
                key: "reply_matches",
                expected: format!("a reply matching /{}/", re.as_str()),
                got: reply(),
            });
        }
    }
    if let (Some(expected), Some(made)) = (&turn.tools, &rec.tool_calls) {
        let mode = turn.tools_match.unwrap_or_default();
        if !tools_match(mode, expected, made) {
            out.push(Failure {
                key: "tools",
                expected: format!("{} ({})", show_expected(expected), mode.label()),
                got: show_made(made),
            });
        }
    }
    if let Some(want) = &turn.end_reason
        && rec.end_reason.as_deref() != Some(want.as_str())
    {
        out.push(Failure {
            key: "end_reason",
            expected: want.clone(),
            got: rec
                .end_reason
                .clone()
                .unwrap_or_else(|| "none (no turn)".into()),
        });
    }
    if let Some(budget) = turn.first_piece_ms {
        match rec.first_piece_ms {
            Some((ms, _)) if ms <= budget => {}
            Some((ms, clock)) => out.push(Failure {
                key: "first_piece_ms",
                expected: format!("at most {budget} ms to the first piece"),
                got: format!("{ms:.1} ms ({})", clock.label()),
            }),
            None => out.push(Failure {
                key: "first_piece_ms",
                expected: format!("at most {budget} ms to the first piece"),
                got: "no piece came".into(),
            }),
        }
    }
    if let Some(budget) = turn.total_ms {
        let (ms, clock) = rec.total_ms;
        if ms > budget {
            out.push(Failure {
                key: "total_ms",
                expected: format!("at most {budget} ms for the whole turn"),
                got: format!("{ms:.1} ms ({})", clock.label()),
            });
        }
    }
    if turn.no_error == Some(true) && (rec.call_failed || rec.error.is_some()) {
        out.push(Failure {
            key: "no_error",
            expected: "no error".into(),
            got: format!(
                "error: {}",
                rec.error
                    .as_deref()
                    .unwrap_or("the call returned a tool error")
            ),
        });
    }
    Ok(out)
}

fn not_checkable(key: &str, what: &str, text_only: bool) -> String {
    format!(
        "`{key}` is not checkable against this target: it reports no {what}{}; remove `{key}` from the \
         case or test a target that reports them (turnscope does)",
        if text_only {
            " (its chat results are text only: no _meta[\"turnscope/turn\"] nor structuredContent)"
        } else {
            ""
        }
    )
}

/// Whether the calls `made` agree with `expected` under `mode`.
pub fn tools_match(mode: ToolsMatch, expected: &[ToolExpect], made: &[Call]) -> bool {
    let fits = |e: &ToolExpect, c: &Call| {
        e.name == c.name
            && e.args.as_ref().is_none_or(|want| {
                want.iter()
                    .all(|(k, v)| c.args.get(k).is_some_and(|got| subset(v, got)))
            })
    };
    match mode {
        ToolsMatch::Strict => {
            expected.len() == made.len() && expected.iter().zip(made).all(|(e, c)| fits(e, c))
        }
        ToolsMatch::Unordered => {
            expected.len() == made.len()
                && assign(expected, made, &mut vec![false; made.len()], &fits)
        }
        ToolsMatch::Subset => assign(made, expected, &mut vec![false; expected.len()], &|c, e| {
            fits(e, c)
        }),
        ToolsMatch::Superset => assign(expected, made, &mut vec![false; made.len()], &fits),
    }
}

/// Whether each of `from` can take a distinct one of `to` that `fits` (backtracking; lists
/// of tool calls are short).
fn assign<A, B>(from: &[A], to: &[B], used: &mut Vec<bool>, fits: &dyn Fn(&A, &B) -> bool) -> bool {
    let Some((first, rest)) = from.split_first() else {
        return true;
    };
    for (i, b) in to.iter().enumerate() {
        if !used[i] && fits(first, b) {
            used[i] = true;
            if assign(rest, to, used, fits) {
                return true;
            }
            used[i] = false;
        }
    }
    false
}

/// Whether `want` appears in `got`: objects key by key (extra keys allowed), lists item by
/// item, numbers by value (1 = 1.0), the rest equal.
pub fn subset(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| subset(v, gv))),
        (Value::Array(w), Value::Array(g)) => {
            w.len() == g.len() && w.iter().zip(g).all(|(a, b)| subset(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => want == got,
    }
}

fn show_expected(tools: &[ToolExpect]) -> String {
    if tools.is_empty() {
        return "no tool calls".into();
    }
    tools
        .iter()
        .map(|t| match &t.args {
            Some(a) => format!("{}({})", t.name, Value::Object(a.clone())),
            None => format!("{}(…)", t.name),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The calls a turn made, as a summary line shows them.
pub fn show_made(calls: &[Call]) -> String {
    if calls.is_empty() {
        return "no tool calls".into();
    }
    calls
        .iter()
        .map(|c| format!("{}({})", c.name, c.args))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: Value) -> Call {
        Call {
            name: name.into(),
            args,
            ..Call::default()
        }
    }

    fn want(name: &str, args: Option<Value>) -> ToolExpect {
        ToolExpect {
            name: name.into(),
            args: args.and_then(|a| a.as_object().cloned()),
        }
    }

    #[test]
    fn the_four_match_modes() {
        let made = [
            call("clock", json!({})),
            call("echo", json!({"text": "hi", "n": 2})),
        ];
        let both = [
            want("echo", Some(json!({"text": "hi"}))),
            want("clock", None),
        ];
        assert!(
            !tools_match(ToolsMatch::Strict, &both, &made),
            "order matters"
        );
        assert!(tools_match(ToolsMatch::Unordered, &both, &made));
        let rev: Vec<ToolExpect> = both.iter().rev().cloned().collect();
        assert!(tools_match(ToolsMatch::Strict, &rev, &made));
        let one = [want("echo", None)];
        assert!(tools_match(ToolsMatch::Superset, &one, &made));
        assert!(
            !tools_match(ToolsMatch::Subset, &one, &made),
            "clock is not allowed"
        );
        let three = [
            want("echo", None),
            want("clock", None),
            want("end_session", None),
        ];
        assert!(tools_match(ToolsMatch::Subset, &three, &made));
        assert!(!tools_match(ToolsMatch::Superset, &three, &made));
        let wrong_args = [want("echo", Some(json!({"text": "bye"})))];
        assert!(!tools_match(ToolsMatch::Superset, &wrong_args, &made));
        assert!(tools_match(ToolsMatch::Strict, &[], &[]));
        assert!(!tools_match(ToolsMatch::Strict, &[], &made));
    }

    #[test]
    fn arguments_match_as_a_subset() {
        assert!(subset(
            &json!({"a": {"b": 1}}),
            &json!({"a": {"b": 1.0, "c": 2}, "d": 3})
        ));
        assert!(!subset(&json!({"a": [1, 2]}), &json!({"a": [1]})));
        assert!(!subset(&json!({"a": "1"}), &json!({"a": 1})));
    }
}
