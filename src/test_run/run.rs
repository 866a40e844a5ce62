//! Running cases: `--jobs` workers, each with its own MCP connection, take runs (a case ×
//! its repeat) off one queue; each run opens a session, says its turns in order and stops at
//! the first turn that fails. Results go to the reporter as they come; a case is decided once
//! all its runs are in.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::mpsc;
use turnscope::conversation_test::{Case, TestFile};
use turnscope::observe::{Bus, Event};
use turnscope::sessions::Sessions;

use super::client_events::ClientEvents;
use super::expect::{self, Compiled, Failure};
use super::target::{Client, Reported, TurnRecord};

/// The files to run, checked and compiled.
pub struct Plan {
    /// Each file: its name as given, its cases, and each case's compiled turns.
    pub files: Vec<PlannedFile>,
    /// How long one call may take.
    pub timeout: Duration,
}

/// One file of the plan.
pub struct PlannedFile {
    /// The path as given.
    pub name: String,
    /// Its content.
    pub file: TestFile,
    /// Per case, per turn.
    pub compiled: Vec<Vec<Compiled>>,
}

impl PlannedFile {
    /// Plans `file`, named `name`.
    pub fn new(name: String, file: TestFile) -> Self {
        let compiled = file
            .cases
            .iter()
            .map(|c| c.turns.iter().map(Compiled::of).collect())
            .collect();
        Self {
            name,
            file,
            compiled,
        }
    }
}

/// How a run (or a case) came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every expectation held (for a case: enough runs passed).
    Passed,
    /// An expectation failed (for a case: too few runs passed).
    Failed,
    /// Could not be run or checked: the target refused or failed, or an expectation is not
    /// checkable against it.
    Error,
}

/// One run of a case.
#[derive(Debug, Clone, Serialize)]
pub struct RunOutcome {
    /// How it came out.
    pub status: Status,
    /// The turn that failed or errored (from 1), when one did.
    pub turn: Option<usize>,
    /// What that turn said.
    pub said: Option<String>,
    /// The expectations that did not hold.
    pub failures: Vec<Failure>,
    /// Why the run could not go on, for [`Status::Error`].
    pub error: Option<String>,
    /// The failed turn's record.
    pub record: Option<TurnRecord>,
    /// The session's number in the in-process server's events, when known.
    pub session: Option<u64>,
    /// The turn's number within the session, when reported.
    pub session_turn: Option<u64>,
    /// Milliseconds the run took.
    pub ms: f64,
}

/// One run to do: file, case, run index.
#[derive(Debug, Clone, Copy)]
pub struct Work {
    /// File index in the plan.
    pub file: usize,
    /// Case index in the file.
    pub case: usize,
    /// Run index, from 0.
    pub run: u32,
}

/// Where the runs go.
pub struct Env {
    /// The target's MCP URL.
    pub url: String,
    /// Bearer token for it.
    pub token: Option<String>,
    /// The in-process server's sessions (closed after each run; numbers for the events file).
    pub sessions: Option<Sessions>,
    /// Where failures are logged as events (recorded with `--events`).
    pub bus: Bus,
    /// With `--url` and `--events`: the conversations as this client saw them.
    pub client_events: Option<ClientEvents>,
}

/// Every run of the plan, in case order.
pub fn work_of(plan: &Plan) -> Vec<Work> {
    let mut out = Vec::new();
    for (f, file) in plan.files.iter().enumerate() {
        for (c, case) in file.file.cases.iter().enumerate() {
            for run in 0..case.repeat {
                out.push(Work {
                    file: f,
                    case: c,
                    run,
                });
            }
        }
    }
    out
}

/// The running workers: their outcomes, and their tasks (which end once the queue is empty and
/// their MCP sessions are closed).
pub struct Workers {
    /// Each run's outcome as it comes.
    pub outcomes: mpsc::UnboundedReceiver<(Work, RunOutcome)>,
    /// The workers' tasks.
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Starts `jobs` workers over `work`; each outcome is sent on [`Workers::outcomes`].
///
/// # Errors
/// A worker's connection failed (the first one's error).
pub async fn start(
    plan: Arc<Plan>,
    env: Arc<Env>,
    work: Arc<Vec<Work>>,
    jobs: usize,
) -> anyhow::Result<Workers> {
    let (tx, rx) = mpsc::unbounded_channel();
    let next = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::with_capacity(jobs);
    for _ in 0..jobs.min(work.len()).max(1) {
        clients.push(Client::connect(&env.url, env.token.as_deref()).await?);
    }
    let mut tasks = Vec::with_capacity(clients.len());
    for client in clients {
        let (plan, env, work, next, tx) = (
            plan.clone(),
            env.clone(),
            work.clone(),
            next.clone(),
            tx.clone(),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(w) = work.get(i).copied() else { break };
                let outcome = run_once(&client, &plan, &env, w).await;
                if tx.send((w, outcome)).is_err() {
                    break;
                }
            }
            client.close().await;
        }));
    }
    Ok(Workers {
        outcomes: rx,
        tasks,
    })
}

async fn run_once(client: &Client, plan: &Plan, env: &Env, w: Work) -> RunOutcome {
    let file = &plan.files[w.file];
    let case = &file.file.cases[w.case];
    let started = Instant::now();
    let mut out = RunOutcome {
        status: Status::Passed,
        turn: None,
        said: None,
        failures: Vec::new(),
        error: None,
        record: None,
        session: None,
        session_turn: None,
        ms: 0.0,
    };
    let (handle, greeting) = match client.start(plan.timeout).await {
        Ok(h) => h,
        Err(e) => {
            out.status = Status::Error;
            out.error = Some(e);
            out.ms = started.elapsed().as_secs_f64() * 1000.0;
            return out;
        }
    };
    out.session = match &env.client_events {
        Some(events) => Some(events.opened(&env.bus, &handle, greeting)),
        None => env.sessions.as_ref().and_then(|s| s.number_of(&handle)),
    };
    run_turns(client, plan, env, (file, case, w), &handle, &mut out).await;
    out.ms = started.elapsed().as_secs_f64() * 1000.0;
    if out.status != Status::Passed {
        log_failure(env, file, case, w, &out);
    }
    if let (Some(events), Some(n)) = (&env.client_events, out.session) {
        events.closed(&env.bus, n, "its test case finished");
    }
    if let (Some(sessions), Some(n)) = (&env.sessions, out.session)
        && let Some(session) = sessions.by_number(n)
    {
        sessions.close(&session, "its test case finished").await;
    }
    out
}

async fn run_turns(
    client: &Client,
    plan: &Plan,
    env: &Env,
    (file, case, w): (&PlannedFile, &Case, Work),
    handle: &str,
    out: &mut RunOutcome,
) {
    let mut said = 0;
    // The turn (from 1) that ended the session, and how (the bot's `end_session`, or its end
    // reason), when one did: a line after it is refused, and that is the case's failure.
    let mut ended_at: Option<(usize, String)> = None;
    for (t, turn) in case.turns.iter().enumerate() {
        let Some(line) = &turn.say else {
            if let Some(p) = turn.pause {
                tokio::time::sleep(Duration::from_secs_f64(p)).await;
            }
            continue;
        };
        let at_us = turnscope::observe::event::now_us();
        let record = match client.chat(handle, line, plan.timeout).await {
            Ok(r) => r,
            Err(e) => {
                out.status = Status::Error;
                out.turn = Some(t + 1);
                out.said = Some(line.clone());
                out.error = Some(e);
                return;
            }
        };
        said += 1;
        if record.call_failed
            && record.reported == Reported::TextOnly
            && let Some((ended, how)) = &ended_at
        {
            out.status = Status::Failed;
            out.turn = Some(t + 1);
            out.said = Some(line.clone());
            // The target's words guess at causes (idle, restart) when the bot's own call is
            // the known one: given only when the end was not that call.
            let (expect, told) = if how.contains("end_session") {
                ("tools = [{ name = \"end_session\" }]", String::new())
            } else {
                (
                    "end_reason = \"session_ended\"",
                    format!(
                        " ({})",
                        record.error.as_deref().unwrap_or("no reason given")
                    ),
                )
            };
            out.failures = vec![expect::Failure {
                key: "say",
                expected: "the session still open for this line".into(),
                got: format!(
                    "turn {ended} ended it ({how}), so this line was refused{told}; if the \
                     session is right to end there, expect it in turn {ended} ({expect}) and end \
                     the case with that turn"
                ),
            }];
            return;
        }
        if record.call_failed && record.reported == Reported::TextOnly {
            // A refusal (unknown or ended handle, a draining server), not a turn: nothing to check.
            out.status = Status::Error;
            out.turn = Some(t + 1);
            out.said = Some(line.clone());
            out.error = Some(format!(
                "the chat call was refused: {}",
                record
                    .error
                    .as_deref()
                    .unwrap_or("a tool error with no text")
            ));
            return;
        }
        if let (Some(events), Some(session)) = (&env.client_events, out.session) {
            events.turn(&env.bus, session, said, line, at_us, &record);
        }
        let called_end = record
            .tool_calls
            .iter()
            .flatten()
            .any(|c| c.name == "end_session");
        let ended = record
            .end_reason
            .as_deref()
            .filter(|r| r.starts_with("session"));
        if called_end {
            ended_at = Some((t + 1, "the bot called end_session".into()));
        } else if let Some(reason) = ended {
            ended_at = Some((t + 1, format!("it ended `{reason}`")));
        }
        let verdict = expect::check(turn, &file.compiled[w.case][t], &record);
        let failed = !matches!(&verdict, Ok(f) if f.is_empty());
        if failed {
            out.turn = Some(t + 1);
            out.said = Some(line.clone());
            out.session_turn = if env.client_events.is_some() {
                Some(said)
            } else {
                record.turn
            };
            match verdict {
                Ok(failures) => {
                    out.status = Status::Failed;
                    out.failures = failures;
                }
                Err(e) => {
                    out.status = Status::Error;
                    out.error = Some(e);
                }
            }
            out.record = Some(record);
            return;
        }
    }
}

/// Puts the failure in the events (the replay's Log pane shows it by the session).
fn log_failure(env: &Env, file: &PlannedFile, case: &Case, w: Work, out: &RunOutcome) {
    env.bus.publish({
        let mut message = format!(
            "test {} {} \"{}\" run {}: turn {}",
            if out.status == Status::Error {
                "ERROR"
            } else {
                "FAILED"
            },
            file.name,
            case.name,
            w.run + 1,
            out.turn.map_or("-".into(), |t| t.to_string()),
        );
        if let Some(n) = out.session {
            message.push_str(&format!(" (session {n}"));
            if let Some(t) = out.session_turn {
                message.push_str(&format!(", turn {t}"));
            }
            message.push(')');
        }
        for f in &out.failures {
            message.push_str(&format!(
                "; {}: expected {}, got {}",
                f.key, f.expected, f.got
            ));
        }
        if let Some(e) = &out.error {
            message.push_str(&format!("; {e}"));
        }
        Event::Log {
            at_ms: turnscope::observe::event::now_us() / 1000,
            level: "error".into(),
            message,
        }
    });
}

/// A case decided from its runs.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    /// The file as given.
    pub file: String,
    /// The case's name.
    pub case: String,
    /// How it came out.
    pub status: Status,
    /// Runs made.
    pub runs: u32,
    /// Runs that passed.
    pub passed_runs: u32,
    /// `passed_runs / runs`.
    pub pass_rate: f64,
    /// The share required.
    pub required_pass_rate: f64,
    /// Milliseconds, all runs added.
    pub ms: f64,
    /// The runs that did not pass (run index from 1, outcome).
    pub not_passed: Vec<(u32, RunOutcome)>,
}

/// Decides a case from its outcomes (in run order).
pub fn decide(file: &str, case: &Case, outcomes: Vec<(u32, RunOutcome)>) -> CaseResult {
    let runs = outcomes.len() as u32;
    let passed_runs = outcomes
        .iter()
        .filter(|(_, o)| o.status == Status::Passed)
        .count() as u32;
    let ms = outcomes.iter().map(|(_, o)| o.ms).sum();
    let pass_rate = if runs == 0 {
        0.0
    } else {
        f64::from(passed_runs) / f64::from(runs)
    };
    let errored = outcomes.iter().any(|(_, o)| o.status == Status::Error);
    let status = if errored {
        Status::Error
    } else if pass_rate + 1e-9 >= case.pass_rate {
        Status::Passed
    } else {
        Status::Failed
    };
    CaseResult {
        file: file.to_string(),
        case: case.name.clone(),
        status,
        runs,
        passed_runs,
        pass_rate,
        required_pass_rate: case.pass_rate,
        ms,
        not_passed: outcomes
            .into_iter()
            .filter(|(_, o)| o.status != Status::Passed)
            .map(|(i, o)| (i + 1, o))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(status: Status) -> RunOutcome {
        RunOutcome {
            status,
            turn: None,
            said: None,
            failures: Vec::new(),
            error: None,
            record: None,
            session: None,
            session_turn: None,
            ms: 1.0,
        }
    }

    fn case(pass_rate: f64) -> Case {
        Case {
            name: "c".into(),
            repeat: 3,
            pass_rate,
            turns: Vec::new(),
        }
    }

    #[test]
    fn a_case_passes_when_enough_runs_pass_and_errors_when_one_could_not_run() {
        let runs = |s: [Status; 3]| {
            s.into_iter()
                .enumerate()
                .map(|(i, s)| (i as u32, outcome(s)))
                .collect()
        };
        let two_of_three = [Status::Passed, Status::Failed, Status::Passed];
        let r = decide("f", &case(0.66), runs(two_of_three));
        assert_eq!((r.status, r.passed_runs, r.runs), (Status::Passed, 2, 3));
        assert_eq!(r.not_passed[0].0, 2, "run numbers count from 1");
        assert_eq!(
            decide("f", &case(0.7), runs(two_of_three)).status,
            Status::Failed
        );
        let errored = [Status::Passed, Status::Error, Status::Passed];
        assert_eq!(decide("f", &case(0.5), runs(errored)).status, Status::Error);
    }
}
