//! What a viewer of the event stream is told besides the live lines: on connect, the replica,
//! the tools the bot offers, each open session and its kept turns that the history does not
//! hold from their start, then the history ([`preamble`]); and which later lines that makes
//! redundant ([`Skip`], by each line's [`Tag`]). A session reopened from the store while
//! viewers watch has its earlier turns told the same way ([`retell_restored`]).

use std::collections::{HashMap, HashSet, VecDeque};

use bytes::Bytes;

use crate::observe::event::{Event, FrameEvent, ReplicaEvent, SessionEvent, TurnEndEvent, now_us};
use crate::observe::line::write_line;
use crate::sessions::{Session, Sessions};

use super::Line;

/// Which session and turn a line belongs to, and whether it opens one of them.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Tag {
    pub(super) session: u64,
    pub(super) turn: u64,
    pub(super) opens: Opens,
}

/// What a line opens, if anything.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Opens {
    #[default]
    Nothing,
    Session,
    Turn,
}

impl Tag {
    /// The tag of `event`'s line.
    pub(super) fn of(event: &Event) -> Tag {
        let (session, turn, opens) = match event {
            Event::Session(s) if s.closed.is_none() => (s.session, 0, Opens::Session),
            Event::Session(s) => (s.session, 0, Opens::Nothing),
            Event::TurnStarted { session, turn, .. } => (*session, *turn, Opens::Turn),
            // A line outside any turn (turn 0) is never skipped for one: its session is not
            // needed either.
            other => other
                .turn_of()
                .map_or((0, 0, Opens::Nothing), |(s, t)| (s, t, Opens::Nothing)),
        };
        Tag {
            session,
            turn,
            opens,
        }
    }
}

/// The lines a viewer gets before the live ones (the server that started at `started_us`,
/// with `history` kept), and which later lines they make redundant.
pub(super) fn preamble<'a>(
    sessions: &Sessions,
    started_us: u64,
    history: impl Iterator<Item = &'a Line> + Clone,
) -> (VecDeque<Bytes>, Skip) {
    fn push_to(first: &mut VecDeque<Bytes>, event: &Event) {
        let mut line = Vec::with_capacity(256);
        if write_line(&mut line, event) {
            first.push_back(Bytes::from(line));
        }
    }
    let mut first = VecDeque::new();
    let opened_in_history: HashSet<u64> = history
        .clone()
        .filter(|l| l.tag.opens == Opens::Session)
        .map(|l| l.tag.session)
        .collect();
    let started_in_history: HashSet<(u64, u64)> = history
        .clone()
        .filter(|l| l.tag.opens == Opens::Turn)
        .map(|l| (l.tag.session, l.tag.turn))
        .collect();
    let mut skip = Skip::default();
    let gone = state_now(
        sessions,
        started_us,
        &opened_in_history,
        &started_in_history,
        &mut skip,
        &mut |event| push_to(&mut first, event),
    );
    for line in history {
        if !skip.drops(&line.tag) {
            first.push_back(line.bytes.clone());
        }
    }
    for event in &gone {
        push_to(&mut first, event);
    }
    (first, skip)
}

/// The server as it is now, as events told to `push`: the replica, the tools the bot offers
/// its model, each open session (unless `opened` holds it: a kept line opens it) with its
/// kept turns (unless `started` holds them), each noted in `skip`. Returns the sessions'
/// clients gone, to be told last (a turn's start tells a viewer someone speaks into it again).
fn state_now(
    sessions: &Sessions,
    started_us: u64,
    opened: &HashSet<u64>,
    started: &HashSet<(u64, u64)>,
    skip: &mut Skip,
    push: &mut dyn FnMut(&Event),
) -> Vec<Event> {
    let replica = sessions.replica();
    let open = sessions.list();
    push(&Event::Replica(ReplicaEvent {
        id: replica.id().to_string(),
        tag: replica.tag().to_string(),
        state: if sessions.is_draining() {
            "draining"
        } else {
            "serving"
        }
        .into(),
        at_us: now_us(),
        open_sessions: Some(open.iter().map(|s| s.number).collect()),
        started_us: Some(started_us),
        handle_seconds: Some(sessions.limits().handle_seconds),
        console_holds: Some(sessions.console_holds()),
    }));
    // What the bot offers its model now, so a viewer of an idle server lists the bot's
    // tools before a request names them (the hub sends a set again before the first
    // request it sees naming it: a viewer keeps the one it has).
    let offered = sessions.bot().tools().specs();
    if !offered.is_empty() {
        push(&Event::ToolSet(crate::bot::wire::tool_set(&offered)));
    }
    let now = now_us();
    let mut gone = Vec::new();
    for session in open {
        if !opened.contains(&session.number) {
            skip.sessions.insert(session.number);
            push(&Event::Session(SessionEvent {
                session: session.number,
                handle_prefix: session.handle_prefix(),
                opener: session.opener.clone(),
                closed: None,
                at_us: now.saturating_sub(session.opened.elapsed().as_micros() as u64),
                restored: session.restored,
                began_us: session.began_before_opening_us(),
                taken_from: session.taken_from.clone(),
                greeting: session.bot().greeting().map(str::to_string),
            }));
        }
        // Its client let go of it meanwhile (that line may be gone from the history).
        if let Some((client, at_us)) = session.client_gone() {
            gone.push(Event::ClientGone {
                session: session.number,
                client,
                reason: crate::server::held::CLIENT_GONE.into(),
                at_us,
            });
        }
        for turn in session.turns() {
            if started.contains(&(session.number, turn.id)) {
                continue;
            }
            let finished = turn.is_done();
            skip.turns.insert((session.number, turn.id), finished);
            let started_us = now.saturating_sub(turn.started().elapsed().as_micros() as u64);
            turn.with_record(|r| {
                for event in turn_events(&session, r, started_us, finished) {
                    push(&event);
                }
            });
        }
    }
    gone
}

/// What opens a new piece of an `--events` recording (`observe::recorder::Opening`): the
/// server as a viewer connecting now would be told it, with no history, so `turnscope replay`
/// opens the piece with every open session and its kept turns.
pub(super) fn opening(sessions: &Sessions, started_us: u64, push: &mut dyn FnMut(&Event)) {
    let gone = state_now(
        sessions,
        started_us,
        &HashSet::new(),
        &HashSet::new(),
        &mut Skip::default(),
        push,
    );
    for event in &gone {
        push(event);
    }
}

/// A kept turn as events: its start, and when it finished its reply (as one `model → output`
/// piece with frame id 0, which tells a viewer it is the whole reply), its tool calls (with no
/// start time, which tells them from live ones) and its end. A reconnecting viewer recognises
/// what it had (`attach::retold`).
fn turn_events(
    session: &Session,
    r: &crate::bot::TurnRecord,
    started_us: u64,
    finished: bool,
) -> Vec<Event> {
    let number = session.number;
    let mut events = vec![Event::TurnStarted {
        session: number,
        turn: r.id,
        line: r.line.clone(),
        at_us: started_us,
    }];
    if !finished {
        return events;
    }
    if !r.reply.is_empty() {
        events.push(Event::Frame(FrameEvent::reply_piece(
            0,
            number,
            r.id,
            "model",
            started_us + r.first_piece.map_or(0, |d| d.as_micros() as u64),
            r.reply.clone(),
        )));
    }
    for call in &r.tool_calls {
        events.push(Event::ToolCall(call.event(number, r.id, 0, true)));
    }
    events.push(Event::TurnEnded(TurnEndEvent {
        retold: true,
        usage: r.usage,
        ..r.end_event(number)
    }));
    events
}

/// Which later lines the preamble made redundant: a session it opened, a finished turn it
/// gave whole (every line of it), a turn in flight it started (only its start).
#[derive(Default)]
pub(super) struct Skip {
    pub(super) sessions: HashSet<u64>,
    /// (session, turn) → whether the preamble gave it finished.
    pub(super) turns: HashMap<(u64, u64), bool>,
}

impl Skip {
    /// Whether a later line of this tag is one the preamble gave already.
    pub(super) fn drops(&self, tag: &Tag) -> bool {
        match tag.opens {
            Opens::Session => self.sessions.contains(&tag.session),
            Opens::Turn => self.turns.contains_key(&(tag.session, tag.turn)),
            Opens::Nothing => {
                tag.turn != 0
                    && self
                        .turns
                        .get(&(tag.session, tag.turn))
                        .copied()
                        .unwrap_or(false)
            }
        }
    }
}

/// The session `event` opens when it reopens one from the store (a client went on with a
/// conversation after a restart, or on another replica): rare, once per reopening.
pub(super) fn reopened(event: &Event) -> Option<u64> {
    match event {
        Event::Session(opened) if opened.restored && opened.closed.is_none() => {
            Some(opened.session)
        }
        _ => None,
    }
}

/// After the opening of the session `number` reopened from the store, its finished kept
/// turns, told to `push` as a connecting viewer's preamble tells them ([`turn_events`]): a
/// viewer watching when a client reopens a conversation sees its history, not only the turns
/// from then on.
pub(super) fn retell_restored(sessions: &Sessions, number: u64, mut push: impl FnMut(&Event)) {
    let Some(session) = sessions.by_number(number) else {
        return;
    };
    let now = now_us();
    let restored = session
        .turns()
        .into_iter()
        .filter(|t| t.id <= session.restored_turns && t.is_done());
    for turn in restored {
        let started_us = now.saturating_sub(turn.started().elapsed().as_micros() as u64);
        turn.with_record(|r| {
            for told in turn_events(&session, r, started_us, true) {
                push(&told);
            }
        });
    }
}
