//! The Frames pane's filter: a line of terms, all of which a frame must match.
//!
//! A term is free text (matched, ignoring case, against the frame's name, processors and
//! detail) or `field:value` with field `kind`, `name`, `dir`, `from`, `to`, `turn` or
//! `session`. `!term` (or `-term`) keeps the frames that do NOT match. Example:
//! `kind:system !Interruption` or `name:text dir:down hello`.

use turnscope::observe::FrameEvent;

/// One field a term can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Kind,
    Name,
    Dir,
    From,
    To,
    Turn,
    Session,
    Any,
}

/// One term of a typed filter line: the field it names (`F::Any`-like when free text), the
/// value in lower case, and whether it keeps what does NOT match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term<F> {
    /// The field named, or the caller's "anywhere".
    pub field: F,
    /// The value, lower case.
    pub value: String,
    /// `!term` or `-term`.
    pub negate: bool,
}

/// A parsed filter; the empty filter keeps everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrameFilter {
    text: String,
    terms: Vec<Term<Field>>,
}

/// A filter line's terms, the grammar every typed filter shares: terms split at spaces, `!`
/// (or `-`) before one negates it, `field:value` names a field that `field_of` knows (by its
/// lower-case name), anything else is free text (`any`); values compare in lower case.
pub fn parse_terms<F: Copy>(
    text: &str,
    any: F,
    field_of: impl Fn(&str) -> Option<F>,
) -> Vec<Term<F>> {
    text.split_whitespace()
        .filter_map(|raw| {
            let (negate, rest) = match raw.strip_prefix(['!', '-']) {
                Some(rest) => (true, rest),
                None => (false, raw),
            };
            if rest.is_empty() {
                return None;
            }
            let (field, value) = match rest.split_once(':') {
                Some((f, v)) => match field_of(&f.to_ascii_lowercase()) {
                    Some(field) => (field, v),
                    None => (any, rest),
                },
                None => (any, rest),
            };
            Some(Term {
                field,
                value: value.to_lowercase(),
                negate,
            })
        })
        .collect()
}

impl FrameFilter {
    /// Parses a filter line. Unknown `field:` prefixes are taken as free text.
    pub fn parse(text: &str) -> FrameFilter {
        let terms = parse_terms(text, Field::Any, |f| {
            Some(match f {
                "kind" | "k" => Field::Kind,
                "name" | "n" => Field::Name,
                "dir" | "d" => Field::Dir,
                "from" => Field::From,
                "to" => Field::To,
                "turn" | "t" => Field::Turn,
                "session" | "s" => Field::Session,
                _ => return None,
            })
        });
        FrameFilter {
            text: text.to_string(),
            terms,
        }
    }

    /// The filter line as typed.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether it keeps everything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// What is wrong with a term no frame could ever match (`kind:bogus`, `turn:abc`), said
    /// with what the field takes: such a filter showed "no frame matches" and nothing of why.
    pub fn problem(&self) -> Option<String> {
        // A negated term keeps what it cannot match: every frame.
        self.terms.iter().filter(|t| !t.negate).find_map(|t| {
            let v = t.value.as_str();
            match t.field {
                Field::Kind
                    if !["system", "data", "control"]
                        .iter()
                        .any(|k| k.starts_with(v)) =>
                {
                    Some(format!("kind:{v}: kind is one of system, data, control"))
                }
                // As `matches` takes it: a part of up or down, or an arrow.
                Field::Dir if !["up", "down", "↑", "↓"].iter().any(|d| d.contains(v)) => {
                    Some(format!("dir:{v}: dir is up or down"))
                }
                Field::Turn if v.parse::<u64>().is_err() => {
                    Some(format!("turn:{v}: turn takes a turn's number (turn:3)"))
                }
                Field::Session if v.trim_start_matches('#').parse::<u64>().is_err() => Some(
                    format!("session:{v}: session takes a session's number (session:2)"),
                ),
                _ => None,
            }
        })
    }

    /// Whether `frame` passes every term.
    pub fn matches(&self, frame: &FrameEvent) -> bool {
        self.terms.iter().all(|t| t.matches(frame) != t.negate)
    }
}

fn contains(haystack: &str, needle: &str) -> bool {
    if haystack.is_ascii() && needle.is_ascii() {
        haystack
            .as_bytes()
            .windows(needle.len().max(1))
            .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
            || needle.is_empty()
    } else {
        haystack.to_lowercase().contains(needle)
    }
}

impl Term<Field> {
    fn matches(&self, f: &FrameEvent) -> bool {
        let v = self.value.as_str();
        match self.field {
            Field::Kind => f.kind.starts_with(v),
            Field::Name => contains(&f.name, v),
            Field::Dir => match v {
                "up" | "u" | "↑" => f.direction == "up",
                "down" | "d" | "↓" => f.direction == "down",
                _ => contains(&f.direction, v),
            },
            Field::From => contains(&f.from, v),
            Field::To => contains(&f.to, v),
            Field::Turn => v.parse::<u64>().is_ok_and(|n| n == f.turn),
            Field::Session => v
                .trim_start_matches('#')
                .parse::<u64>()
                .is_ok_and(|n| n == f.session),
            Field::Any => {
                contains(&f.name, v)
                    || contains(&f.from, v)
                    || contains(&f.to, v)
                    || contains(&f.detail, v)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(
        kind: &'static str,
        name: &'static str,
        dir: &'static str,
        detail: &str,
    ) -> FrameEvent {
        FrameEvent {
            id: 1,
            session: 2,
            turn: 3,
            kind: kind.into(),
            name: name.into(),
            from: "model".into(),
            to: "output".into(),
            direction: dir.into(),
            at_us: 0,
            detail: detail.into(),
            depth: 0,
        }
    }

    #[test]
    fn fields_free_text_and_negation() {
        let piece = frame("data", "TextPiece", "down", "Hello there");
        let stop = frame("system", "Interruption", "down", "");
        let up = frame("system", "Error", "up", "boom");
        assert!(FrameFilter::parse("").matches(&piece));
        assert!(FrameFilter::parse("kind:sys").matches(&stop));
        assert!(!FrameFilter::parse("kind:sys").matches(&piece));
        assert!(FrameFilter::parse("HELLO").matches(&piece));
        assert!(FrameFilter::parse("name:text dir:down").matches(&piece));
        assert!(!FrameFilter::parse("!TextPiece").matches(&piece));
        assert!(FrameFilter::parse("-text kind:system").matches(&stop));
        assert!(FrameFilter::parse("dir:up").matches(&up));
        assert!(!FrameFilter::parse("dir:up").matches(&stop));
        assert!(FrameFilter::parse("turn:3 session:#2").matches(&piece));
        assert!(!FrameFilter::parse("turn:4").matches(&piece));
        assert!(FrameFilter::parse("to:output from:mod").matches(&piece));
        assert!(FrameFilter::parse("weird:thing").matches(&frame(
            "data",
            "X",
            "down",
            "a weird:thing"
        )));
        assert!(FrameFilter::parse("   ").is_empty());
        // A term no frame could match says what its field takes.
        assert_eq!(
            FrameFilter::parse("kind:bogus").problem().as_deref(),
            Some("kind:bogus: kind is one of system, data, control")
        );
        assert!(
            FrameFilter::parse("turn:abc")
                .problem()
                .unwrap()
                .contains("turn:3")
        );
        assert!(FrameFilter::parse("dir:sideways").problem().is_some());
        for fine in [
            "kind:sys",
            "turn:3 session:#2",
            "dir:↑",
            "dir:ow",
            "!kind:bogus",
            "name:x weird:thing",
        ] {
            assert_eq!(FrameFilter::parse(fine).problem(), None, "{fine}");
        }
    }
}
