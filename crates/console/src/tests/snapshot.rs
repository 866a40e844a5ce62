//! Each pane drawn to ratatui's `TestBackend` from the fixed fixture state and compared with
//! its committed snapshot (`src/tests/snapshots/`). Text only: styles are not compared.

use insta::assert_snapshot;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;
use turnscope::observe::wire::{JsonText, McpExchange, McpMessage};

use crate::view::console::Console;

use crate::draw::panes;
use crate::tests::fixture::console;
use crate::view::filter::FrameFilter;
use crate::view::ids::PaneId;

fn render(
    w: u16,
    h: u16,
    c: &Console,
    draw: impl Fn(&mut ratatui::Frame, Rect, &Console),
) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    terminal
        .draw(|f| {
            let area = f.area();
            draw(f, area, c)
        })
        .expect("draw");
    terminal
}

#[test]
fn sessions_pane_three_sessions() {
    let mut c = console();
    c.focus = PaneId::Sessions;
    let t = render(80, 7, &c, panes::sessions::draw);
    assert_snapshot!(t.backend());
}

#[test]
fn sessions_pane_narrow_drops_age_columns() {
    let c = console();
    let t = render(50, 7, &c, panes::sessions::draw);
    assert_snapshot!(t.backend());
}

/// A conversation this replica took over from replica r1 (its event says so, live, replayed
/// or attached): `↷r1` before who opened it in the Sessions pane at both widths, and the
/// transcript's header says "taken over from r1"; the others are unmarked.
#[test]
fn sessions_pane_and_transcript_mark_a_session_taken_over_from_another_replica() {
    let mut c = console();
    c.state.apply(&turnscope::observe::Event::Session(
        turnscope::observe::SessionEvent {
            session: 4,
            handle_prefix: "4d5e6f70".into(),
            opener: turnscope::observe::SessionOpener::Mcp("claude-code".into()),
            closed: None,
            at_us: crate::tests::fixture::T0,
            restored: true,
            began_us: None,
            taken_from: Some("r1".into()),
            greeting: None,
        },
    ));
    assert_eq!(
        c.state
            .session(4)
            .and_then(|r| r.takeover_label())
            .as_deref(),
        Some("taken over from r1")
    );
    c.focus = PaneId::Sessions;
    c.selected = Some(4);
    let wide = render(80, 7, &c, panes::sessions::draw);
    let narrow = render(50, 7, &c, panes::sessions::draw);
    let header = render(72, 3, &c, panes::transcript::draw);
    assert_snapshot!(format!(
        "{}\n{}\n{}",
        wide.backend(),
        narrow.backend(),
        header.backend()
    ));
}

#[test]
fn transcript_pane_finished_turns_with_tool_call() {
    let c = console();
    let t = render(72, 12, &c, panes::transcript::draw);
    assert_snapshot!(t.backend());
}

#[test]
fn transcript_pane_narrow_wraps_and_splits_boundaries() {
    let c = console();
    let t = render(40, 20, &c, panes::transcript::draw);
    assert_snapshot!(t.backend());
}

#[test]
fn transcript_pane_gives_a_long_error_whole_under_its_rule() {
    use turnscope::observe::Event;
    use turnscope::observe::event::TurnEndEvent;
    let mut c = console();
    c.state.apply(&Event::TurnStarted {
        session: 1,
        turn: 9,
        line: "what time is it".into(),
        at_us: 1,
    });
    c.state.apply(&Event::TurnEnded(TurnEndEvent {
        session: 1,
        turn: 9,
        reason: "error: model HTTP 404 from http://127.0.0.1:11434/chat/completions: check \
                 the URL's path (does it end in /v1?) and the model name"
            .into(),
        total_us: 2_000,
        ..TurnEndEvent::default()
    }));
    c.settle();
    let t = render(60, 30, &c, panes::transcript::draw);
    let screen = format!("{:?}", t.backend());
    // Every word of the error is on the screen, none cut at the pane's edge.
    assert!(screen.contains("── turn 9 · error ─"), "{screen}");
    assert!(screen.contains("and the model name"), "{screen}");
    assert_snapshot!(t.backend());
}

#[test]
fn transcript_pane_streaming_mcp_session() {
    let mut c = console();
    c.selected = Some(2);
    c.focus = PaneId::Transcript;
    let t = render(72, 6, &c, panes::transcript::draw);
    assert_snapshot!(t.backend());
}

#[test]
fn input_pane_with_text_and_error_notice() {
    let mut c = console();
    c.input.insert_str("first line");
    c.input.insert_newline();
    c.input.insert_str("second line");
    c.chat_done(
        1,
        "x",
        Err("sessions: no free session. This server holds 32 open sessions, its cap.".into()),
    );
    c.chat_started(1);
    // The notice is drawn over the screen's bottom right, not on the pane's border.
    c.before_draw();
    let t = render(72, 12, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!(t.backend());
}

#[test]
fn frames_pane_selected_session_with_boundaries() {
    let mut c = console();
    c.focus_pane(PaneId::Frames);
    let t = render(100, 24, &c, panes::inspector::draw);
    assert_snapshot!(t.backend());
}

#[test]
fn frames_pane_all_sessions_filtered_and_paused() {
    let mut c = console();
    c.focus_pane(PaneId::Frames);
    c.frames.all = true;
    c.frames.filter = FrameFilter::parse("kind:system");
    c.frames.paused = Some(c.state.frames().iter().cloned().collect());
    let t = render(100, 8, &c, panes::inspector::draw);
    assert_snapshot!(t.backend());
}

#[test]
fn frames_pane_detail_popup() {
    let mut c = console();
    c.focus_pane(PaneId::Frames);
    c.frames.filter = FrameFilter::parse("name:FunctionCallResult");
    c.frames.detail = true;
    let t = render(80, 24, &c, panes::inspector::draw);
    assert_snapshot!(t.backend());
}

#[test]
fn progress_pane_marks_coalesced_notifications() {
    let mut c = console();
    c.focus_pane(PaneId::Progress);
    let t = render(90, 8, &c, panes::inspector::draw);
    assert_snapshot!(t.backend());
}

#[test]
fn tools_pane_ref_schema_and_openai_rename() {
    let mut c = console();
    c.focus_pane(PaneId::Tools);
    c.tools.nav.cursor = 2;
    let t = render(96, 30, &c, panes::inspector::draw);
    assert_snapshot!(t.backend());
}

#[test]
fn tools_pane_unconvertible_schema_and_collision() {
    let mut c = console();
    c.focus_pane(PaneId::Tools);
    c.tools.nav.cursor = 3;
    let t = render(96, 18, &c, panes::inspector::draw);
    assert_snapshot!("tools_pane_unconvertible_schema", t.backend());
    c.tools.nav.cursor = 4;
    let t = render(96, 12, &c, panes::inspector::draw);
    assert_snapshot!("tools_pane_collision", t.backend());
}

#[test]
fn stats_pane_overall() {
    let mut c = console();
    c.focus_pane(PaneId::Stats);
    let t = render(96, 18, &c, panes::inspector::draw);
    assert_snapshot!(t.backend());
}

/// A viewer whose stream the watched server dropped says its figures have gaps (they read
/// as whole, and undercounted the server's turns).
#[test]
fn stats_pane_of_a_viewer_that_was_dropped_says_its_figures_have_gaps() {
    let mut c = console();
    c.focus_pane(PaneId::Stats);
    c.state.stream_drops = 2;
    let t = render(96, 18, &c, panes::inspector::draw);
    let text = t.backend().to_string();
    assert!(
        text.contains("dropped this viewer's stream 2 times: the figures miss"),
        "{text}"
    );
}

#[test]
fn stats_pane_selected_session() {
    let mut c = console();
    c.focus_pane(PaneId::Stats);
    c.stats.all = false;
    let t = render(96, 12, &c, panes::inspector::draw);
    assert_snapshot!(t.backend());
}

#[test]
fn whole_screen_wide() {
    let c = console();
    let t = render(140, 36, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!(t.backend());
}

#[test]
fn whole_screen_narrow() {
    let mut c = console();
    c.focus = PaneId::Sessions;
    let t = render(80, 44, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!(t.backend());
}

#[test]
fn help_overlay_lists_every_key() {
    let mut c = console();
    c.help.open = true;
    let t = render(140, 40, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!(t.backend());
}

#[test]
fn replay_screen_is_read_only() {
    let text: String = crate::tests::fixture::events()
        .iter()
        .map(|e| serde_json::to_string(e).expect("event serialises") + "\n")
        .chain(["this is not json\n".to_string()])
        .collect();
    let c = crate::run::replay::console_of(&text, "run.jsonl", crate::theme::Theme::default())
        .expect("replay state");
    let t = render(140, 30, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!(t.backend());
}
#[test]
fn tools_pane_skipped_tool_says_why() {
    let mut c = console();
    c.focus_pane(PaneId::Tools);
    c.tools.nav.cursor = 5;
    let t = render(96, 10, &c, panes::inspector::draw);
    assert_snapshot!(t.backend());
}

#[test]
fn turn_view_waterfall_wide() {
    let mut c = console();
    c.selected = Some(1);
    c.open_turn_view();
    let t = render(160, 48, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!(t.backend());
}

#[test]
fn turn_view_waterfall_narrow() {
    let mut c = console();
    c.selected = Some(1);
    c.open_turn_view();
    let t = render(80, 24, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!(t.backend());
}

#[test]
fn turn_view_model_requests_opened_wide_and_narrow() {
    let mut c = console();
    c.selected = Some(1);
    c.open_turn_view();
    if let Some(pick) = c.turn_view.as_mut() {
        pick.requests_open = true;
        pick.request = 1;
        pick.scroll.set(16);
    }
    let t = render(160, 48, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!("turn_view_model_requests_160x48", t.backend());
    if let Some(pick) = c.turn_view.as_mut() {
        pick.scroll.set(33);
    }
    let t = render(80, 24, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!("turn_view_model_requests_80x24", t.backend());
}

#[test]
fn mcp_pane_wide_and_narrow() {
    let mut c = console();
    c.focus_pane(PaneId::Mcp);
    let t = render(160, 48, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!("mcp_pane_160x48", t.backend());
    let t = render(80, 24, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!("mcp_pane_80x24", t.backend());
}

#[test]
fn log_pane_wide_and_narrow() {
    let mut c = console();
    c.focus_pane(PaneId::Log);
    let t = render(160, 48, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!("log_pane_wide", t.backend());
    let t = render(80, 24, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!("log_pane_narrow", t.backend());
}

#[test]
fn turn_view_in_replay_matches_live() {
    let text: String = crate::tests::fixture::events()
        .iter()
        .map(|e| serde_json::to_string(e).expect("event serialises") + "\n")
        .collect();
    let mut replay =
        crate::run::replay::console_of(&text, "run.jsonl", crate::theme::Theme::default())
            .expect("replay state");
    replay.selected = Some(1);
    replay.open_turn_view();
    let mut live = console();
    live.selected = Some(1);
    live.open_turn_view();
    let body = |c: &Console| {
        let pick = c.turn_view.as_ref().expect("turn view open");
        let turn = c.state.transcript(1).last().expect("a turn").clone();
        let tl = c.state.timelines.get(pick.session, pick.turn).cloned();
        panes::turn_view::lines(c, pick.session, &turn, tl.as_ref(), 120)
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(body(&replay), body(&live));
    assert!(
        body(&replay)
            .iter()
            .any(|l| l.contains("2026-01-01 12:00:00 UTC")),
        "the tool's result shows in replay"
    );
}

#[test]
fn frames_pane_one_row_per_link_crossing_with_x() {
    let mut c = console();
    c.focus_pane(PaneId::Frames);
    c.handle(&crossterm::event::Event::Key(
        crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char('x'),
            crossterm::event::KeyModifiers::NONE,
        ),
    ));
    assert!(c.frames.per_link);
    let t = render(96, 12, &c, panes::inspector::draw);
    assert_snapshot!(t.backend());
}

#[test]
fn whole_screen_80x24() {
    let mut c = console();
    c.focus = PaneId::Frames;
    let t = render(80, 24, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!(t.backend());
}

#[test]
fn whole_screen_160x48() {
    let mut c = console();
    c.focus = PaneId::Frames;
    let t = render(160, 48, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!(t.backend());
}

/// Half a second of a streaming reply on #1: 40 pieces crossing model → output with a queue
/// building at output (depths 1 to 9), then output → assistant-aggregator.
fn streaming(c: &mut Console) {
    use turnscope::observe::{Event, FrameEvent};
    let start = c.state.now_us + 2_000_000;
    for i in 0..40u64 {
        for (from, to, depth) in [
            ("model", "output", (i % 9) as u32 + 1),
            ("output", "assistant-aggregator", 1),
        ] {
            c.state.apply(&Event::Frame(FrameEvent {
                id: 1_000 + i,
                session: 1,
                turn: 3,
                kind: "data".into(),
                name: "TextPiece".into(),
                from: from.into(),
                to: to.into(),
                direction: "down".into(),
                at_us: start + i * 12_000,
                detail: "word".into(),
                depth,
            }));
        }
    }
}

#[test]
fn frames_pane_zoomed_pipeline_diagram_while_frames_flow() {
    let mut c = console();
    streaming(&mut c);
    c.focus_pane(PaneId::Frames);
    c.zoom = true;
    let t = render(80, 24, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!(t.backend());
}

#[test]
fn frame_detail_names_the_queue_each_hop_joined() {
    let mut c = console();
    streaming(&mut c);
    c.focus_pane(PaneId::Frames);
    c.frames.detail = true;
    // Following: the detail is the newest frame's, piece 39, which joined 3 others at output.
    let t = render(100, 30, &c, panes::inspector::draw);
    let text = t.backend().to_string();
    assert!(text.contains("model → output  queued behind 3"), "{text}");
    assert!(!text.contains("assistant-aggregator  queued"), "{text}");
}

#[test]
fn sessions_pane_sorted_filtered_and_a_client_gone() {
    use turnscope::observe::Event;
    let mut c = console();
    let rows: Vec<_> = c
        .state
        .session_rows()
        .into_iter()
        .filter(|r| !r.is_closed())
        .cloned()
        .map(|mut r| {
            r.activity = crate::state::Activity::Idle;
            r
        })
        .collect();
    c.state.sync_sessions(rows);
    let at_us = c.state.now_us;
    c.state.apply(&Event::ClientGone {
        session: 2,
        client: "claude-code".into(),
        reason: "its MCP session ended (deleted, or closed after its idle timeout)".into(),
        at_us,
    });
    c.focus = PaneId::Sessions;
    c.sessions_list.sort = crate::view::sessions::SessionSort::Activity;
    let t = render(80, 8, &c, panes::sessions::draw);
    let unfiltered = t.backend().to_string();
    c.sessions_list.filter = "mcp".into();
    let t = render(80, 8, &c, panes::sessions::draw);
    assert_snapshot!(format!("{unfiltered}\n{}", t.backend()));
}

#[test]
fn a_turn_that_became_a_task_in_the_transcript_turn_view_and_mcp_pane() {
    let mut c = crate::tests::fixture::console_with_a_task();
    assert_eq!(c.selected, Some(4), "the task's session is selectable");
    let t = render(72, 12, &c, panes::transcript::draw);
    assert_snapshot!("task_transcript", t.backend());
    c.open_turn_view();
    let t = render(160, 48, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!("task_turn_view_160x48", t.backend());
    let t = render(80, 24, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!("task_turn_view_80x24", t.backend());
    c.turn_view = None;
    c.focus_pane(PaneId::Mcp);
    let t = render(160, 48, &c, |f, _, c| crate::draw::draw(f, c));
    assert_snapshot!("task_mcp_pane_160x48", t.backend());
}

/// The store is the first thing a narrow header leaves out (the ready line and `/healthz` name
/// it too), so this header is wide enough for everything.
#[test]
fn the_header_names_the_store_by_its_file() {
    let mut c = console();
    c.state.header.store =
        Some("sqlite:/home/ada/.local/state/turnscope/sessions-127.0.0.1-7870.sqlite3".into());
    let t = render(220, 2, &c, panes::bars::header);
    let first: String = (0..220)
        .map(|x| t.backend().buffer()[(x, 0)].symbol().to_string())
        .collect();
    assert!(
        first.contains("store sessions-127.0.0.1-7870.sqlite3  model "),
        "{first}"
    );
    c.state.header.store = Some("memory".into());
    let t = render(220, 2, &c, panes::bars::header);
    let first: String = (0..220)
        .map(|x| t.backend().buffer()[(x, 0)].symbol().to_string())
        .collect();
    assert!(first.contains("store memory  model "), "{first}");
}

/// An attached console watching one of several replicas keeps which one at 80 columns: the
/// model's name goes first (the replicas share it).
#[test]
fn a_narrow_attached_header_keeps_the_replica_over_the_model() {
    let mut c = console();
    c.state.header.source = crate::state::Source::Attached {
        target: "http://127.0.0.1:47102/mcp".into(),
        view: "watching r2 read-only".into(),
    };
    c.state.header.replica = Some(("r2".into(), "serving".into()));
    c.state.header.model = "turnscope-scripted".into();
    let t = render(80, 2, &c, panes::bars::header);
    let first: String = (0..80)
        .map(|x| t.backend().buffer()[(x, 0)].symbol().to_string())
        .collect();
    assert!(first.contains("replica r2"), "{first}");
}

/// A task's polls stay under the `chat` that created it when only the end of the list fits:
/// the pane places the exchanges by their rows, the polls' lines counted with their call's.
#[test]
fn a_tasks_polls_sit_under_its_chat_at_the_bottom_of_a_short_pane() {
    let mut c = crate::tests::fixture::console_with_a_task();
    c.focus_pane(PaneId::Mcp);
    let t = render(120, 8, &c, panes::mcp::draw);
    let lines: Vec<String> = t
        .backend()
        .to_string()
        .lines()
        .map(|l| l.trim_matches('"').trim_end().to_string())
        .collect();
    assert!(lines[0].starts_with("9 of 9 exchanges"), "{lines:#?}");
    assert!(
        !lines.iter().any(|l| l.contains("POST tasks/")),
        "no poll listed on its own: {lines:#?}"
    );
    let chat = lines
        .iter()
        .position(|l| l.contains("22:13:31.000 claude-code POST tools/call chat"))
        .unwrap_or_else(|| panic!("the task's chat is on screen: {lines:#?}"));
    assert!(
        lines[chat + 2].contains(r#""resultType":"task""#),
        "{lines:#?}"
    );
    assert!(
        lines[chat + 3].contains("↻ task 4f1e2d3c · tasks/get ×3 working"),
        "{lines:#?}"
    );
    assert!(
        lines[chat + 4].contains("↻ task 4f1e2d3c · 22:13:37.000 tasks/get completed"),
        "{lines:#?}"
    );
    assert_eq!(
        chat + 6,
        lines.len(),
        "the poll's answer is the last line: {lines:#?}"
    );
    assert!(lines[chat + 5].contains(r#"{"id":8"#), "{lines:#?}");
    // Picked while the pane shows the top, the chat comes into view with all its polls.
    c.mcp.cursor = Some(0);
    let _ = render(120, 8, &c, panes::mcp::draw);
    let newest = c.mcp.listed(c.state.wire.exchanges()).back().copied();
    c.mcp.cursor = newest;
    let t = render(120, 8, &c, panes::mcp::draw);
    let screen: Vec<String> = t
        .backend()
        .to_string()
        .lines()
        .map(|l| l.trim_matches('"').trim_end().to_string())
        .collect();
    assert!(
        screen[1].contains("22:13:31.000 claude-code POST tools/call chat"),
        "{screen:#?}"
    );
    assert!(screen[6].contains(r#"{"id":8"#), "{screen:#?}");
}

/// A `tasks/*` exchange answered with `answer`.
fn task_exchange(
    method: &str,
    request: serde_json::Value,
    answer: serde_json::Value,
) -> McpExchange {
    McpExchange {
        http_method: "POST".into(),
        path: "/mcp".into(),
        method: Some(method.into()),
        request: Some(JsonText::from_value(&request)),
        status: 200,
        messages: vec![McpMessage {
            after_us: 10,
            message: JsonText::from_value(&answer),
        }],
        complete: true,
        ..Default::default()
    }
}

/// The lines the listing counts for a task's polls as they arrive are the lines drawn.
#[test]
fn the_lines_counted_as_polls_arrive_are_the_lines_drawn() {
    let poll = |method: &str, status: &str| {
        task_exchange(
            method,
            serde_json::json!({"params": {"taskId": "0f1e2d3c…"}}),
            serde_json::json!({"result": {"status": status}}),
        )
    };
    let polls = [
        poll("tasks/get", "working"),
        poll("tasks/get", "working"),
        poll("tasks/get", "input_required"),
        poll("tasks/get", "completed"),
        poll("tasks/get", "completed"),
        poll("tasks/result", "completed"),
        poll("tasks/cancel", "cancelled"),
    ];
    let c = console();
    let mut folded = crate::view::task_polls::TaskPolls::default();
    for (i, x) in polls.iter().enumerate() {
        folded.push(i as u64, x);
        let so_far: Vec<&McpExchange> = polls[..=i].iter().collect();
        assert_eq!(
            folded.rows(),
            panes::mcp_tasks::lines(&c, "0f1e2d3c", &so_far, 160).len(),
            "after {} polls",
            i + 1
        );
    }
}

/// A tool with a long description and long schema lines, in the Tools pane of a 160-column
/// screen (not zoomed): every line wraps within the detail, none is cut.
fn long_tool() -> turnscope::tools::ToolSpec {
    turnscope::tools::ToolSpec {
        name: "search_issues".into(),
        description: "Searches the issues of a repository by free text, label and state, \
                      newest first; each result gives the number, the title, the labels and the \
                      first two hundred characters of the body, so a caller can pick one to read whole."
            .into(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Free text matched against the title and the body of each issue, case-insensitive; quote a phrase to match it whole."},
                "state": {"type": "string", "enum": ["open", "closed", "all"], "description": "Which issues to search: the open ones, the closed ones, or all of them."}
            },
            "required": ["query"]
        }),
        source: "mcp:tracker".into(),
    }
}

#[test]
fn tools_pane_wraps_long_lines_at_160_columns() {
    let mut c = console();
    let mut specs = crate::tests::fixture::tools();
    specs.push(long_tool());
    c.state.set_tools(&specs);
    c.focus_pane(PaneId::Tools);
    c.tools.nav.cursor = specs.len() - 1;
    // The detail's rows: right of the tool list's border, left of the inspector's.
    let detail = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.split_once('┃').map(|(_, r)| r))
            .filter_map(|r| r.split_once('│').map(|(_, d)| d))
            .map(|d| d.trim_end_matches(['"', '┃']).trim_end().to_string())
            .collect()
    };
    let t = render(160, 40, &c, |f, _, c| crate::draw::draw(f, c));
    let text = t.backend().to_string();
    // Before, schema lines were cut at the detail's right edge with `…`.
    assert!(text.contains("case-insensitive; quote a phrase"), "{text}");
    assert!(
        detail(&text).iter().all(|row| !row.ends_with('…')),
        "no row of the detail is cut: {text}"
    );
    assert_snapshot!(t.backend());
    // Drawn again as it is, the wrapped lines are kept, not built anew.
    let built = c.tools.detail.borrow().as_ref().map(|(_, l)| l.as_ptr());
    render(160, 40, &c, |f, _, c| crate::draw::draw(f, c));
    assert_eq!(
        c.tools.detail.borrow().as_ref().map(|(_, l)| l.as_ptr()),
        built
    );
    // PgDn as far as it goes reaches the last wrapped row, and not past it.
    for _ in 0..20 {
        c.page_by(1);
    }
    let t = render(160, 40, &c, |f, _, c| crate::draw::draw(f, c));
    let text = t.backend().to_string();
    assert_eq!(
        detail(&text).last().map(String::as_str),
        Some(" same as the input schema"),
        "{text}"
    );
    assert!(text.contains("quote a phrase to match it"), "{text}");
}

/// A frame name longer than its column (pipecat's `OutputTransportMessageUrgentFrame#4`) is
/// cut short with its gap kept before the route (it ran into it: `…Messa…McpInputTransport`).
#[test]
fn a_long_frame_name_cut_short_keeps_its_gap_before_the_route() {
    let mut c = console();
    let mut frame = turnscope::observe::event::FrameEvent::reply_piece(
        9_001,
        1,
        1,
        "McpInputTransport#0",
        1_000_500,
        "OutputTransportMessageUrgentFrame".into(),
    );
    frame.name = "OutputTransportMessageUrgentFrame#4".into();
    frame.kind = "system".into();
    frame.to = "LLMUserAggregator#0".into();
    c.state.apply(&turnscope::observe::Event::Frame(frame));
    c.focus_pane(PaneId::Frames);
    let t = render(96, 30, &c, panes::inspector::draw);
    let text = t.backend().to_string();
    let row = text
        .lines()
        .find(|l| l.contains("OutputTransportMes"))
        .unwrap_or_else(|| panic!("the frame is listed: {text}"));
    assert!(row.contains("… McpInputTransport#0→"), "{row}");
}
