//! A session as a conversation test case (`turnscope test`'s `*.test.toml`): its finished
//! turns' lines, with their replies, tool calls and end reasons as the expectations, for the
//! person to edit. Pure: writing the file is the event loop's job.

use turnscope::attach::target::NOT_ANSWERED;
use turnscope::conversation_test::write::{RecordedTurn, case_from_turns, render_against};
use turnscope::conversation_test::{END_REASONS, TestFile};
use turnscope::observe::TurnClock;

use super::ConsoleState;

impl ConsoleState {
    /// `session` as a test file's text.
    ///
    /// # Errors
    /// The session has no finished turn, or a tool's arguments cannot be written as TOML.
    pub fn test_case(&self, session: u64) -> Result<String, String> {
        // A call an attached console made that the bot never answered is no turn of the bot's.
        let finished: Vec<&super::TurnView> = self
            .transcript(session)
            .iter()
            .filter(|t| {
                t.end
                    .as_deref()
                    .is_some_and(|end| !end.starts_with(NOT_ANSWERED))
            })
            .collect();
        let turns: Vec<RecordedTurn> = finished
            .iter()
            .map(|t| RecordedTurn {
                line: t.line.clone(),
                reply: t.reply.clone(),
                tool_calls: t
                    .tools
                    .iter()
                    .map(|c| (c.name.clone(), c.arguments.clone()))
                    .collect(),
                end_reason: t.end.as_deref().and_then(end_reason),
            })
            .collect();
        if turns.is_empty() {
            return Err(format!(
                "#{session} has no finished turn to export as a test case; say a line first"
            ));
        }
        let mut case = case_from_turns(&format!("session {session}"), &turns);
        // A turn timed by the attached console or by the bot's whisker frames came from a
        // bot whose chat gives no turn record: `turnscope test --url` cannot check its tool
        // calls or end reason there, so nothing is expected of them.
        for (turn, seen) in case.turns.iter_mut().zip(&finished) {
            if matches!(seen.clock, Some(TurnClock::Client | TurnClock::Whisker)) {
                turn.tools = None;
                turn.tools_match = None;
                turn.end_reason = None;
            }
        }
        let file = TestFile {
            cases: vec![case],
            ..TestFile::default()
        };
        let url = match &self.header.source {
            super::Source::Attached { .. } => self.header.bot_url.as_deref(),
            _ => None,
        };
        render_against(
            &file,
            &format!("turnscope: session #{session} exported as a test case"),
            url,
        )
    }
}

/// The end reason a test file names for a turn that ended with `reason` (`completed`,
/// `interrupted`, `error: …`, `session ended`, …).
fn end_reason(reason: &str) -> Option<String> {
    let word = reason.replace("session ended", "session_ended");
    END_REASONS
        .iter()
        .find(|r| word.starts_with(**r))
        .map(|r| (*r).to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn end_reasons_map_to_the_files_names() {
        assert_eq!(super::end_reason("completed").as_deref(), Some("completed"));
        assert_eq!(super::end_reason("error: boom").as_deref(), Some("error"));
        assert_eq!(
            super::end_reason("session ended").as_deref(),
            Some("session_ended")
        );
        assert_eq!(
            super::end_reason("interrupted by a new line").as_deref(),
            Some("interrupted")
        );
        assert_eq!(super::end_reason("something else"), None);
    }
}
