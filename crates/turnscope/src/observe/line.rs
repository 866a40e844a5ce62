//! An event as one JSON line, the form `--events` files and the `/events` stream carry.
//!
//! A turn is ~40 frame crossings and a handful of other events, and whoever watches (a viewer
//! of `/events`, `--events`) has each written once. serde's derived writer spends most of
//! that time putting keys and punctuation into the buffer piece by piece; a frame event is
//! written here in a few copies instead (written by hand because it cut the hub's share of a
//! watched server's CPU, measured in `docs/benchmarks.md`; the other events are too few a turn
//! to be worth it).
//! Every other event goes through serde. The bytes are exactly serde's (a test compares
//! them), so readers cannot tell which way a line was written.

use serde::Serialize;

use super::event::{Event, FrameEvent, FrameJourney, Hop};

/// Appends `event` as JSON and a newline to `out` (a frame's journey as one line per
/// crossing); on a serialization error (which no event of ours has) `out` is left as it was
/// and `false` returned.
pub fn write_line(out: &mut Vec<u8>, event: &Event) -> bool {
    let start = out.len();
    let written = match event {
        Event::Frame(frame) => {
            write_frame(out, &Crossing::of(frame));
            true
        }
        // One line per crossing, as if each had been an event of its own.
        Event::Journey(journey) => {
            for (i, hop) in journey.hops.iter().enumerate() {
                if i > 0 {
                    out.push(b'\n');
                }
                write_frame(out, &Crossing::on(journey, hop));
            }
            !journey.hops.is_empty()
        }
        other => serde_json::to_writer(&mut *out, other).is_ok(),
    };
    if written {
        out.push(b'\n');
    } else {
        out.truncate(start);
    }
    written
}

/// A frame crossing's fields, from a [`FrameEvent`] or from one hop of a [`FrameJourney`].
struct Crossing<'a> {
    id: u64,
    session: u64,
    turn: u64,
    kind: &'a str,
    name: &'a str,
    from: &'a str,
    to: &'a str,
    direction: &'a str,
    at_us: u64,
    detail: &'a str,
    depth: u32,
}

impl<'a> Crossing<'a> {
    fn of(f: &'a FrameEvent) -> Self {
        Crossing {
            id: f.id,
            session: f.session,
            turn: f.turn,
            kind: &f.kind,
            name: &f.name,
            from: &f.from,
            to: &f.to,
            direction: &f.direction,
            at_us: f.at_us,
            detail: &f.detail,
            depth: f.depth,
        }
    }

    fn on(j: &'a FrameJourney, hop: &Hop) -> Self {
        Crossing {
            id: j.id,
            session: j.session,
            turn: j.turn,
            kind: j.kind,
            name: j.name,
            from: hop.from,
            to: hop.to,
            direction: j.direction,
            at_us: hop.at_us,
            detail: &j.detail,
            depth: hop.depth,
        }
    }
}

/// `{"type":"frame",…}` with the fields in the order serde writes them.
fn write_frame(out: &mut Vec<u8>, f: &Crossing<'_>) {
    out.extend_from_slice(br#"{"type":"frame","id":"#);
    number(out, f.id);
    out.extend_from_slice(br#","session":"#);
    number(out, f.session);
    out.extend_from_slice(br#","turn":"#);
    number(out, f.turn);
    out.extend_from_slice(br#","kind":"#);
    string(out, f.kind);
    out.extend_from_slice(br#","name":"#);
    string(out, f.name);
    out.extend_from_slice(br#","from":"#);
    string(out, f.from);
    out.extend_from_slice(br#","to":"#);
    string(out, f.to);
    out.extend_from_slice(br#","direction":"#);
    string(out, f.direction);
    out.extend_from_slice(br#","at_us":"#);
    number(out, f.at_us);
    out.extend_from_slice(br#","detail":"#);
    string(out, f.detail);
    if f.depth != 0 {
        out.extend_from_slice(br#","depth":"#);
        number(out, f.depth as u64);
    }
    out.push(b'}');
}

fn number(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// A JSON string: copied whole when nothing in it needs escaping (names and most text),
/// else written by serde, so escapes are serde's to the byte.
fn string(out: &mut Vec<u8>, s: &str) {
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        // Writing a `str` into a `Vec` cannot fail.
        let _ = s.serialize(&mut serde_json::Serializer::new(&mut *out));
        return;
    }
    out.reserve(s.len() + 2);
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use proptest::prelude::*;

    use super::*;

    fn frame(name: &str, detail: &str, depth: u32, id: u64) -> Event {
        Event::Frame(FrameEvent {
            id,
            session: 7,
            turn: u64::MAX,
            kind: Cow::Borrowed("data"),
            name: Cow::Owned(name.to_string()),
            from: Cow::Borrowed("model"),
            to: Cow::Borrowed("output"),
            direction: Cow::Borrowed("down"),
            at_us: 1_796_351_233_613_305,
            detail: detail.to_string(),
            depth,
        })
    }

    fn serde_line(event: &Event) -> Vec<u8> {
        let mut line = serde_json::to_vec(event).unwrap();
        line.push(b'\n');
        line
    }

    #[test]
    fn a_frame_line_is_serdes_to_the_byte() {
        let cases = [
            frame("TextPiece", " number", 0, 36),
            frame("TextPiece", "", 3, 0),
            frame(
                "Odd\"Name\\",
                "line\nbreak\ttab\r\u{8}\u{c}\u{1}\u{1f}\u{7f}",
                1,
                1,
            ),
            frame(
                "Ünïcode",
                "日本語 and emoji 🦀 and \u{2028}",
                u32::MAX,
                u64::MAX,
            ),
        ];
        for event in &cases {
            let mut out = Vec::new();
            assert!(write_line(&mut out, event));
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&serde_line(event))
            );
        }
    }

    /// A journey is written as its crossings would be, each a line of its own, in order.
    #[test]
    fn a_journey_is_one_line_per_crossing() {
        let hop = |from, to, at_us, depth| Hop {
            from,
            to,
            at_us,
            depth,
        };
        let journey = FrameJourney {
            id: 9,
            session: 2,
            turn: 4,
            kind: "data",
            name: "TextPiece",
            direction: "down",
            detail: "a \"piece\"\n".into(),
            hops: vec![hop("model", "output", 10, 1), hop("output", "sink", 12, 0)],
        };
        let mut out = Vec::new();
        assert!(write_line(&mut out, &Event::Journey(journey.clone())));
        let mut expected = Vec::new();
        for i in 0..2 {
            expected.extend(serde_line(&Event::Frame(journey.crossing(i).unwrap())));
        }
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&expected)
        );
        assert!(journey.crossing(2).is_none());
    }

    #[test]
    fn other_events_are_written_by_serde_after_what_the_buffer_held() {
        let event = Event::Log {
            at_ms: 1,
            level: "warn".into(),
            message: "a \"quoted\" line".into(),
        };
        let mut out = b"kept".to_vec();
        assert!(write_line(&mut out, &event));
        assert_eq!(&out[..4], b"kept");
        assert_eq!(out[4..], serde_line(&event));
    }

    proptest! {
        #[test]
        fn any_frame_line_is_serdes_to_the_byte(
            name in any::<String>(),
            detail in any::<String>(),
            depth in any::<u32>(),
            id in any::<u64>(),
        ) {
            let event = frame(&name, &detail, depth, id);
            let mut out = Vec::new();
            prop_assert!(write_line(&mut out, &event));
            prop_assert_eq!(out, serde_line(&event));
        }
    }
}
