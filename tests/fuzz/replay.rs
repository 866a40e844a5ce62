//! Fuzz target for replay files, which are untrusted input (anyone's `--events` file, edited by
//! hand or cut short): `turnscope replay`'s loader and the console over what it loads.
//!
//! Properties: loading never panics, and what loads can be stepped through (turn ends and
//! inside turns, both ways) and drawn — every pane, a turn view with its model requests opened
//! and unfolded, an MCP exchange opened whole — at 80×24 and 160×48 without a panic, an
//! overflow or a hang, whatever the numbers in the file say (offsets, lengths, times, counts).
//! Inputs are the real recording in `tests/fuzz_corpus/replay/` mutated byte by byte, and the
//! same with its numbers set to the edges (0, 2^63, u64::MAX).

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use proptest::prelude::*;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::Value;
use turnscope_console::Theme;
use turnscope_console::run::replay::console_of;
use turnscope_console::view::console::Console;

use super::corpus;

pub const CORPUS: &str = "tests/fuzz_corpus/replay";

/// Fragments worth inserting into an events file.
const EVENT_TOKENS: &[&str] = &[
    "\"",
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\n",
    "null",
    "18446744073709551615",
    "9223372036854775808",
    "-1",
    "1e308",
    "\"from\":",
    "\"first\":",
    "\"at_us\":",
    "\"total_us\":",
    "\"after_us\":",
    "\"turn\":",
    "\"session\":",
    "\"tools\":",
    "{\"type\":\"turn_started\",\"session\":1,\"turn\":1,\"line\":\"x\",\"at_us\":1}\n",
    "{\"type\":\"turn_ended\",\"session\":1,\"turn\":1,\"reason\":\"completed\",\"reply_bytes\":1,\"rounds\":0,\"tool_calls\":0,\"first_piece_us\":null,\"total_us\":18446744073709551615}\n",
];

/// The keys a person presses through a replay.
const KEYS: &[KeyCode] = &[
    KeyCode::Char('['),
    KeyCode::Char(','),
    KeyCode::Char(']'),
    KeyCode::Char('.'),
    KeyCode::Char('1'),
    KeyCode::Char('j'),
    KeyCode::Char('w'),
    KeyCode::Char('m'),
    KeyCode::Char('f'),
    KeyCode::Tab,
    KeyCode::Esc,
    KeyCode::Char('4'),
    KeyCode::Enter,
    KeyCode::Esc,
    KeyCode::Char('9'),
    KeyCode::Up,
    KeyCode::Enter,
    KeyCode::Char('f'),
    KeyCode::PageDown,
    KeyCode::Right,
    KeyCode::Esc,
];

fn draw(console: &mut Console, w: u16, h: u16) {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("a test terminal");
    console.before_draw();
    terminal
        .draw(|f| turnscope_console::draw::draw(f, console))
        .expect("drawn");
}

/// Loads `text` as `turnscope replay` does, then steps, presses keys and draws every pane.
fn replay(text: &str) {
    let Ok(mut console) = console_of(text, "fuzz.jsonl", Theme::default()) else {
        return;
    };
    for pane in ['1', '2', '4', '5', '6', '7', '8', '9'] {
        press(&mut console, KeyCode::Char(pane));
        draw(&mut console, 80, 24);
        draw(&mut console, 160, 48);
    }
    for (i, key) in KEYS.iter().enumerate() {
        press(&mut console, *key);
        if i % 2 == 0 {
            draw(&mut console, 80, 24);
        } else {
            draw(&mut console, 160, 48);
        }
    }
    for _ in 0..8 {
        press(&mut console, KeyCode::Char(','));
    }
    draw(&mut console, 160, 48);
}

fn press(console: &mut Console, code: KeyCode) {
    let _ = console.handle(&TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

/// Every number in `value` replaced by one of the edges, chosen by `pick` in turn.
fn edges(value: &mut Value, pick: &mut impl FnMut() -> u64) {
    match value {
        Value::Number(_) => *value = Value::from(pick()),
        Value::Array(items) => items.iter_mut().for_each(|v| edges(v, pick)),
        Value::Object(map) => map.values_mut().for_each(|v| edges(v, pick)),
        _ => {}
    }
}

/// The seed with its numbers set to edge values: each line's numbers from `choices`, cycling
/// from `offset`.
fn with_edges(seed: &str, choices: &[u64], offset: usize) -> String {
    let mut n = offset;
    let mut pick = || {
        n += 1;
        choices[n % choices.len()]
    };
    seed.lines()
        .map(|line| match serde_json::from_str::<Value>(line) {
            Ok(mut v) => {
                edges(&mut v, &mut pick);
                v.to_string()
            }
            Err(_) => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

const EDGES: &[u64] = &[
    0,
    1,
    7,
    u32::MAX as u64,
    1 << 53,
    1 << 63,
    u64::MAX - 1,
    u64::MAX,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(super::scaled_cases(16)))]

    #[test]
    fn a_mutated_replay_file_loads_steps_and_draws_without_a_panic(
        bytes in corpus::mutated(corpus::load(CORPUS), EVENT_TOKENS, 8)
    ) {
        replay(&corpus::text(&bytes));
    }

    #[test]
    fn a_replay_file_with_numbers_at_the_edges_loads_steps_and_draws(
        seed in 0usize..64,
        choices in prop::collection::vec(prop::sample::select(EDGES), 1..5),
    ) {
        for file in corpus::load(CORPUS) {
            replay(&with_edges(&corpus::text(&file), &choices, seed));
        }
    }
}
