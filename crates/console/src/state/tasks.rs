//! Turns that became MCP tasks, as the console keeps them: each task's status (working →
//! completed or cancelled), its polls, when its turn ended and when a poll collected the
//! result, keyed by the turn it reads and findable by the first 8 characters of its id (all
//! an event or a recorded exchange shows of it).
//!
//! Folded from `task` events alone, so a replay shows the same. Bounded: [`TASKS_KEPT`].

use std::collections::{BTreeMap, HashMap, VecDeque};

use turnscope::observe::{TaskChange, TaskEvent};

/// Tasks kept (the oldest is forgotten first).
pub const TASKS_KEPT: usize = 500;

/// One task as the panes draw it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskView {
    /// The first 8 characters of its id.
    pub id: String,
    /// The client that called `chat`.
    pub client: String,
    /// `working`, `completed` or `cancelled`.
    pub status: String,
    /// How its turn ended (`completed`, `interrupted`, `handed_over`, ...), once it has.
    pub end_reason: Option<String>,
    /// `tasks/get` requests answered.
    pub polls: u32,
    /// When the `chat` call answered with it, µs since the epoch.
    pub created_us: u64,
    /// When its result was ready (or it was cancelled), µs since the epoch.
    pub ended_us: Option<u64>,
    /// When a poll first handed the result over, µs since the epoch.
    pub collected_us: Option<u64>,
    /// The latest poll, µs since the epoch.
    pub last_poll_us: Option<u64>,
    /// Its conversation ended (or it was pushed out): its id is unknown to the server now.
    pub removed: bool,
}

impl TaskView {
    /// From the end of the task to the poll that collected its result.
    pub fn collection_gap_us(&self) -> Option<u64> {
        Some(self.collected_us?.saturating_sub(self.ended_us?))
    }

    /// `task 0f1e2d3c completed · 17 polls · collected 0.4 s after its end`, for a turn's line.
    pub fn summary(&self) -> String {
        let mut s = format!("task {} {}", self.id, self.status);
        if self.end_reason.as_deref() == Some("handed_over") {
            s.push_str(" (read by an empty line)");
        }
        s.push_str(&format!(
            " · {}",
            crate::text::plural(u64::from(self.polls), "poll")
        ));
        match (self.collection_gap_us(), self.ended_us) {
            (Some(gap), _) => s.push_str(&format!(
                " · collected {} after its end",
                crate::text::micros(gap)
            )),
            (None, Some(_)) if self.status == "completed" && !self.removed => {
                s.push_str(" · not collected yet")
            }
            _ => {}
        }
        s
    }
}

/// Every kept task, by (session, turn).
#[derive(Debug, Clone, Default)]
pub struct Tasks {
    by_turn: BTreeMap<(u64, u64), TaskView>,
    by_id: HashMap<String, (u64, u64)>,
    order: VecDeque<(u64, u64)>,
}

impl Tasks {
    /// Folds one task event in.
    pub fn on_task(&mut self, e: &TaskEvent) {
        let key = (e.session, e.turn);
        if e.change == TaskChange::Created || !self.by_turn.contains_key(&key) {
            if self.order.len() == TASKS_KEPT
                && let Some(old) = self.order.pop_front()
                && let Some(view) = self.by_turn.remove(&old)
            {
                self.by_id.remove(&view.id);
            }
            // A turn read by a second task (an empty line that waited past the grace period
            // again) shows its latest.
            if let Some(old) = self.by_turn.get(&key) {
                self.by_id.remove(&old.id);
            } else {
                self.order.push_back(key);
            }
            self.by_turn.insert(
                key,
                TaskView {
                    id: e.task.clone(),
                    client: e.client.clone(),
                    created_us: e.at_us,
                    ..TaskView::default()
                },
            );
            self.by_id.insert(e.task.clone(), key);
        }
        let Some(view) = self.by_turn.get_mut(&key) else {
            return;
        };
        if view.id != e.task {
            return; // an older task of the same turn
        }
        view.status = e.status.to_string();
        view.polls = e.polls;
        if e.end_reason.is_some() {
            view.end_reason = e.end_reason.clone();
        }
        match e.change {
            TaskChange::Created => {}
            TaskChange::Polled => view.last_poll_us = Some(e.at_us),
            TaskChange::Ended | TaskChange::HandedOver | TaskChange::Cancelled => {
                view.ended_us.get_or_insert(e.at_us);
            }
            TaskChange::Collected => {
                view.collected_us.get_or_insert(e.at_us);
            }
            TaskChange::Removed => view.removed = true,
        }
    }

    /// The task reading a turn, if one did.
    pub fn of_turn(&self, session: u64, turn: u64) -> Option<&TaskView> {
        self.by_turn.get(&(session, turn))
    }

    /// The task reading the session's latest turn that has one, while it is still working
    /// (the Sessions pane says `● task` of a turn running as one).
    pub fn working_in(&self, session: u64) -> Option<&TaskView> {
        self.by_turn
            .range((session, 0)..=(session, u64::MAX))
            .next_back()
            .map(|(_, view)| view)
            .filter(|view| view.status == "working" && !view.removed)
    }

    /// The task whose id starts with `prefix` (8 characters), and its (session, turn).
    pub fn by_prefix(&self, prefix: &str) -> Option<((u64, u64), &TaskView)> {
        let key = *self.by_id.get(prefix)?;
        Some((key, self.by_turn.get(&key)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(change: TaskChange, status: &'static str, polls: u32, at_us: u64) -> TaskEvent {
        TaskEvent {
            session: 2,
            turn: 1,
            task: "0f1e2d3c".into(),
            client: "claude-code".into(),
            change,
            status: status.into(),
            end_reason: (status != "working").then(|| "completed".into()),
            polls,
            at_us,
        }
    }

    #[test]
    fn a_task_is_folded_from_created_to_collected() {
        let mut tasks = Tasks::default();
        tasks.on_task(&event(TaskChange::Created, "working", 0, 1_000_000));
        tasks.on_task(&event(TaskChange::Polled, "working", 1, 2_000_000));
        tasks.on_task(&event(TaskChange::Ended, "completed", 1, 2_500_000));
        tasks.on_task(&event(TaskChange::Collected, "completed", 2, 2_900_000));
        tasks.on_task(&event(TaskChange::Polled, "completed", 2, 2_900_001));
        let view = tasks.of_turn(2, 1).unwrap();
        assert_eq!(view.polls, 2);
        assert_eq!(view.collection_gap_us(), Some(400_000));
        assert_eq!(
            view.summary(),
            "task 0f1e2d3c completed · 2 polls · collected 400 ms after its end"
        );
        assert_eq!(tasks.by_prefix("0f1e2d3c").unwrap().0, (2, 1));
    }

    #[test]
    fn tasks_kept_are_bounded() {
        let mut tasks = Tasks::default();
        for turn in 0..(TASKS_KEPT as u64 + 10) {
            let mut e = event(TaskChange::Created, "working", 0, 1);
            e.turn = turn;
            e.task = format!("{turn:08x}");
            tasks.on_task(&e);
        }
        assert_eq!(tasks.by_turn.len(), TASKS_KEPT);
        assert_eq!(tasks.by_id.len(), TASKS_KEPT);
        assert!(tasks.of_turn(2, 0).is_none());
    }
}
