//! A turn's pieces as a caller's progress notifications: one per piece, each the reply so far
//! as a person reads it (its last 200 characters), sent without ever making the bot wait (a
//! caller that lags gets its backlog in one).

use async_trait::async_trait;

use super::Sessions;
use crate::bot::Turn;
use crate::observe::{Event, event::now_us};

/// When a caller lags this many pieces behind, the backlog goes out as one notification.
const COALESCE_AT: usize = 16;

/// Where a call's progress notifications go (an MCP peer, or nowhere).
#[async_trait]
pub trait ProgressSink: Send {
    /// Sends one notification: `progress` pieces so far, `message` the reply so far as a
    /// person reads it ([`progress_text`]).
    /// Returns false when the caller is gone (no more are sent).
    async fn notify(&mut self, progress: u64, message: String) -> bool;
}

/// Most characters of a progress message: Claude Code shows at most this many under a
/// running call (whitespace collapsed), and the MCP spec means `message` for a person.
pub const PROGRESS_CHARS: usize = 200;

/// What a person watching a turn wants to read: the reply so far, trimmed; when longer than
/// [`PROGRESS_CHARS`], its last ones, starting on a word boundary after an ellipsis. Only
/// the returned message is allocated.
pub fn progress_text(so_far: &str) -> String {
    let text = so_far.trim();
    // Bytes bound characters, so most messages are decided without counting.
    if text.len() <= PROGRESS_CHARS {
        return text.to_string();
    }
    let Some((start, _)) = text.char_indices().rev().nth(PROGRESS_CHARS - 2) else {
        return text.to_string();
    };
    let mut tail = &text[start..];
    let mid_word = !text[..start].ends_with(char::is_whitespace);
    if mid_word && let Some(space) = tail.find(char::is_whitespace) {
        tail = tail[space..].trim_start();
    }
    let mut message = String::with_capacity(tail.len() + 3);
    message.push('…');
    message.push_str(tail);
    message
}

/// Sends one notification per piece until the turn ends, each carrying the reply so far
/// ([`progress_text`]). The bot never waits for this: the turn only bumps a counter, and a
/// caller that lags more than `COALESCE_AT` pieces gets one notification for its backlog.
pub(super) async fn forward_progress(
    turn: &Turn,
    sink: &mut dyn ProgressSink,
    sessions: &Sessions,
    session: u64,
) {
    let mut signal = turn.subscribe();
    let mut sent = 0usize;
    let mut alive = true;
    loop {
        let now = *signal.borrow_and_update();
        if alive && now.pieces > sent {
            // One notification per piece; the whole backlog in one when the caller lags.
            let step = if now.pieces - sent > COALESCE_AT {
                now.pieces - sent
            } else {
                1
            };
            while sent < now.pieces {
                let upto = sent + step;
                let message = turn.with_record(|r| progress_text(&r.reply[..r.end_of(upto)]));
                sent = upto;
                let progress = sent as u64;
                let bus = sessions.bus();
                if bus.is_listened() {
                    bus.publish(Event::Progress {
                        session,
                        progress,
                        message: message.clone(),
                        pieces: step as u32,
                        at_us: now_us(),
                    });
                }
                if !sink.notify(progress, message).await {
                    alive = false;
                    break;
                }
            }
        }
        if now.done && (!alive || sent >= now.pieces) {
            return;
        }
        if !now.done && signal.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use std::sync::Arc;

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::bot::Bot;
    use crate::model::{EmbeddedModel, ModelClient, ModelConfig, ScriptSettings};
    use crate::observe::{Bus, SessionOpener};
    use crate::sessions::{Session, SessionLimits};

    /// A caller that takes 20 ms to accept each notification, noting whether the bot had
    /// already finished its turn when each one arrived.
    struct SlowCaller {
        session: Arc<Session>,
        got: Vec<(u64, String, bool)>,
    }

    #[async_trait]
    impl ProgressSink for SlowCaller {
        async fn notify(&mut self, progress: u64, message: String) -> bool {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let bot_done = self.session.turns().last().is_some_and(|t| t.is_done());
            self.got.push((progress, message, bot_done));
            true
        }
    }

    #[tokio::test]
    async fn a_slow_caller_never_slows_the_bot_and_gets_every_piece_coalesced() {
        let model = EmbeddedModel::start(
            0,
            ScriptSettings {
                pace: 0.0,
                words: Some(200),
            },
        )
        .await
        .unwrap();
        let bot = Bot::builder(ModelClient::new(ModelConfig::new(model.base_url(), "m"))).build();
        let sessions = Sessions::new(bot, Bus::default(), SessionLimits::default());
        let session = sessions.open(SessionOpener::Api).await.unwrap();
        let mut caller = SlowCaller {
            session: session.clone(),
            got: Vec::new(),
        };
        let reply = sessions
            .chat_on(&session, "go", Some(&mut caller), &CancellationToken::new())
            .await
            .unwrap();
        // The bot finished its turn while the caller was still taking notifications (it did
        // not wait for them), and the backlog went out coalesced rather than one by one.
        assert!(
            caller.got.last().unwrap().2,
            "the turn ended before the caller caught up"
        );
        assert!(caller.got.len() < 200, "{} notifications", caller.got.len());
        let progress: Vec<u64> = caller.got.iter().map(|(p, _, _)| *p).collect();
        assert!(
            progress.windows(2).all(|w| w[0] < w[1]),
            "progress increases: {progress:?}"
        );
        assert_eq!(*progress.last().unwrap(), 200);
        // Each message is the reply so far as a person reads it; the last one, its end.
        assert_eq!(caller.got.last().unwrap().1, progress_text(&reply.reply));
        assert!(
            caller
                .got
                .iter()
                .all(|(_, m, _)| m.chars().count() <= PROGRESS_CHARS)
        );
    }

    #[test]
    fn progress_text_is_the_reply_so_far_cut_to_its_last_words() {
        assert_eq!(progress_text("  We open at nine "), "We open at nine");
        let long = "word ".repeat(100) + "the end";
        let tail = progress_text(&long);
        assert_eq!(tail.chars().count(), PROGRESS_CHARS - 2, "{tail}");
        assert!(
            tail.starts_with("…word word") && tail.ends_with("the end"),
            "{tail}"
        );
        // Cut inside a word: the partial word is dropped.
        let odd = "x".repeat(3) + &" abcdefg".repeat(40);
        let cut = progress_text(&odd);
        assert!(cut.starts_with("…abcdefg"), "{cut}");
        assert!(cut.chars().count() <= PROGRESS_CHARS);
        // Multi-byte characters count as one each; one long word is cut mid-word.
        let wide = "é".repeat(500);
        let cut = progress_text(&wide);
        assert_eq!(cut.chars().count(), PROGRESS_CHARS);
        assert!(cut.starts_with('…'));
    }
}
