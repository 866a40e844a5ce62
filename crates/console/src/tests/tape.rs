//! Replay stepping: a step costs the events between the two places, not a fold from the
//! file's start, and lands on the same state a fold from the start would give.

use super::long;
use crate::state::tape::{CHECKPOINT_GAP, NEAR_KEPT, SEGMENTS, Tape};
use crate::state::{ConsoleState, Header};

fn blank() -> ConsoleState {
    ConsoleState::new(Header::default())
}

/// What the panes show of a state, to compare two of them.
fn seen(s: &ConsoleState) -> (u64, usize, Option<u64>, usize, usize, u64) {
    (
        s.events_seen,
        s.transcript(1).len(),
        s.transcript(1).last().map(|t| t.id),
        s.wire.exchanges().len(),
        s.frames().len(),
        s.wire.total.prompt_tokens,
    )
}

/// Stepping back through every turn end of a 200-turn file (about 60,000 events): each step
/// folds the events it steps over and at most one checkpoint gap more, but for the few that
/// enter another segment of the file (which fold that segment once), however far into the
/// file it stands; and it lands where a fold from the start would.
#[test]
fn each_step_costs_its_own_events_not_a_fold_from_the_start() {
    let events = long::session(1, 200, 60);
    let total = events.len();
    assert!(total > 40 * CHECKPOINT_GAP, "{total} events");
    let segment = total.div_ceil(SEGMENTS).max(NEAR_KEPT * CHECKPOINT_GAP);
    let (mut tape, mut state) = Tape::new(events.clone(), blank());
    assert_eq!(tape.folded, total as u64);
    let mut steps = 0;
    let mut entries = 0;
    let mut swept = 0;
    loop {
        let places = tape.checkpoint_places();
        let before = (tape.folded, tape.pos);
        if !tape.step(-1, &mut state) {
            break;
        }
        steps += 1;
        let distance = before.1 - tape.pos;
        let cost = (tape.folded - before.0) as usize;
        swept += cost;
        if before.1 / segment != tape.pos / segment {
            entries += 1;
            assert!(cost <= segment, "entering a segment folded {cost}");
        } else {
            assert!(
                cost <= distance + CHECKPOINT_GAP,
                "a step back of {distance} events to {} folded {cost}; near checkpoints were at {places:?}",
                tape.pos
            );
        }
        assert!(
            tape.checkpoints() <= SEGMENTS + NEAR_KEPT,
            "{} checkpoints",
            tape.checkpoints()
        );
        if steps % 37 == 0 {
            let mut fresh = blank();
            for e in &events[..tape.pos] {
                fresh.apply(e);
            }
            assert_eq!(seen(&state), seen(&fresh), "at event {}", tape.pos);
        }
    }
    assert_eq!(steps, 200, "every turn end, then the start of the file");
    assert!(entries <= total / segment + 1);
    // Before, each step folded from the file's start: about 200 × 30,000 events here.
    assert!(
        swept <= steps * (CHECKPOINT_GAP + 400) + entries * segment,
        "stepping back through the file folded {swept} events, the file has {total}"
    );
    // On again, one step at a time: each folds at most the events it passes.
    let before = tape.folded;
    let mut passed = 0;
    while tape.step(1, &mut state) {
        passed += 1;
    }
    assert_eq!(passed, 200);
    assert!(tape.folded - before <= (total - tape_start(&events)) as u64);
    let mut fresh = blank();
    for e in &events {
        fresh.apply(e);
    }
    assert_eq!(seen(&state), seen(&fresh));
}

/// Where stepping back through every turn end stops: the first turn's end.
fn tape_start(events: &[turnscope::observe::Event]) -> usize {
    events
        .iter()
        .position(|e| matches!(e, turnscope::observe::Event::TurnEnded(_)))
        .map_or(0, |i| i + 1)
}

/// A replay of a file does not hold its events: it reads them again as a step needs them, and
/// lands where the held tape does at every turn end, back and on; a line that is not JSON, or
/// not even UTF-8, is one unreadable line among good ones.
#[test]
fn a_file_is_stepped_through_without_holding_its_events() {
    use std::io::Write;
    let events = long::session(1, 40, 30);
    let path = std::env::temp_dir().join(format!("turnscope-tape-{}.jsonl", std::process::id()));
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for (i, e) in events.iter().enumerate() {
            writeln!(out, "{}", serde_json::to_string(e).unwrap()).unwrap();
            if i == 7 {
                out.write_all(b"{not json\n\n\xff\xfe binary\n").unwrap();
            }
        }
        // The last line without its newline.
        write!(out, "{}", serde_json::to_string(&events[0]).unwrap()).unwrap();
    }
    let mut held_events = events.clone();
    held_events.push(events[0].clone());
    let (mut held, mut held_state) = Tape::new(held_events, blank());
    let replay_blank = || {
        ConsoleState::new(Header {
            source: crate::state::Source::Replay {
                file: "f".into(),
                unreadable: Default::default(),
            },
            ..Header::default()
        })
    };
    let (mut read, mut read_state, unreadable) = Tape::of_file(&path, replay_blank()).unwrap();
    assert_eq!(unreadable.count, 2, "{unreadable:?}");
    assert!(
        unreadable.first.as_deref().unwrap().starts_with("line 9:"),
        "{unreadable:?}"
    );
    let same = |held: &Tape, held_state: &ConsoleState, read: &Tape, read_state: &ConsoleState| {
        assert_eq!(seen(read_state), seen(held_state), "at event {}", held.pos);
        assert_eq!(read.label, held.label);
    };
    same(&held, &held_state, &read, &read_state);
    let mut steps = 0;
    while held.step(-1, &mut held_state) {
        assert!(read.step(-1, &mut read_state));
        same(&held, &held_state, &read, &read_state);
        steps += 1;
    }
    assert_eq!(steps, 40);
    // The unreadable lines are still told after stepping back (every state knows them).
    let crate::state::Source::Replay {
        unreadable: told, ..
    } = &read_state.header.source
    else {
        panic!("a replay's state")
    };
    assert_eq!(told.count, 2);
    for _ in 0..5 {
        held.scrub(1, &mut held_state);
        read.scrub(1, &mut read_state);
        same(&held, &held_state, &read, &read_state);
    }
    let _ = std::fs::remove_file(&path);
}
