//! The rules for a bot's MCP servers, against real servers: the connect budget, late
//! joiners, the URL allowlist (redirects included), the stdio gate, tool_filter, name
//! precedence, reserved names, both caps and per-session connections.

use std::sync::Arc;
use std::time::Duration;

use crate::support::fixture::{Kind, RunningFixture, WAIT};
use crate::support::servers::{named, redirector, silent, wait_until};
use serde_json::json;
use turnscope::config::{McpServerConfig, PolicySection, Scope, ToolFilter};
use turnscope::observe::{Bus, Event, Subscription, ToolSourceEvent, ToolSourceState};
use turnscope::tools::limits::McpLimits;
use turnscope::tools::mcp_source::SourceStatus;
use turnscope::tools::policy::Policy;
use turnscope::tools::registry::{RegistryBuilder, ToolRegistry};
use turnscope::tools::{FnTool, Tools, ToolsFactory};
use turnscope_fixture as fixture;

async fn start(builder: RegistryBuilder) -> Arc<ToolRegistry> {
    tokio::time::timeout(WAIT, builder.start())
        .await
        .expect("the registry starts within the wait")
}

fn spec_list(tools: &dyn Tools) -> Vec<(String, String)> {
    tools
        .specs()
        .iter()
        .map(|s| (s.name.clone(), s.source.clone()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).to_string(), (*b).to_string()))
        .collect()
}

fn source_events(events: &mut Subscription) -> Vec<ToolSourceEvent> {
    let mut out = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::ToolSource(e) = &*event {
            out.push(e.clone());
        }
    }
    out
}

fn logs(events: &mut Subscription) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::Log { message, .. } = &*event {
            out.push(message.clone());
        }
    }
    out
}

fn policy(section: PolicySection) -> Policy {
    Policy::resolve(&section, &|_| None).unwrap()
}

/// Bridges.md case 69 (per server, as the issue asks): a server that never answers costs its
/// own tools, not the others', and is reported by name.
#[tokio::test]
async fn the_connect_budget_leaves_out_only_the_server_that_never_answers() {
    let http = RunningFixture::start(Kind::Http).await;
    let quick = named("quick", &["lookup"]).await;
    let silent = silent().await;
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let limits = McpLimits {
        connect_budget: Duration::from_millis(700),
        ..McpLimits::default()
    };
    let registry = start(ToolRegistry::builder(bus.clone()).limits(limits).servers(&[
        McpServerConfig::http("fixture", &http.url("/mcp")),
        McpServerConfig::http("mute", &format!("http://{}/mcp", silent.addr)),
        McpServerConfig::http("quick", &quick.url),
    ]))
    .await;
    let specs = spec_list(&*registry);
    assert_eq!(specs.len(), 9, "{specs:?}");
    assert!(specs.iter().all(|(_, source)| source != "mute"));
    assert_eq!(
        registry.source("mute").unwrap().status(),
        SourceStatus::Connecting
    );
    let missed: Vec<ToolSourceEvent> = source_events(&mut events)
        .into_iter()
        .filter(|e| e.state == ToolSourceState::MissedBudget)
        .collect();
    assert_eq!(missed.len(), 1, "{missed:?}");
    assert_eq!(missed[0].server, "mute");
    assert!(missed[0].detail.contains("MCP_CONNECT_TIMEOUT_SECONDS"));
    registry.shutdown().await;
    http.stop().await;
}

/// A server that is down at start joins when its background retry succeeds.
#[tokio::test]
async fn a_late_server_joins_when_it_comes_up() {
    let reserved = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = reserved.local_addr().unwrap();
    drop(reserved);
    let bus = Bus::default();
    let limits = McpLimits {
        connect_budget: Duration::from_millis(300),
        ..McpLimits::default()
    };
    let registry = start(
        ToolRegistry::builder(bus.clone())
            .limits(limits)
            .servers(&[McpServerConfig::http("late", &format!("http://{addr}/mcp"))]),
    )
    .await;
    assert!(registry.specs().is_empty());
    assert!(matches!(
        registry.source("late").unwrap().status(),
        SourceStatus::Down { .. }
    ));
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(fixture::serve_http(listener, stop.clone()));
    wait_until("the late server's tools", || {
        let registry = registry.clone();
        async move { registry.specs().len() == 8 }
    })
    .await;
    assert_eq!(
        registry.call("echo", json!({"text": "joined"})).await.text,
        "joined"
    );
    registry.shutdown().await;
    stop.cancel();
}

/// Bridges.md case 71 against real servers: a refused URL is skipped with a reason, the rest
/// load; a redirect from an allowed URL to one that is not is refused.
#[tokio::test]
async fn the_url_allowlist_skips_refused_servers_and_redirects() {
    let allowed = named("allowed", &["a"]).await;
    let other = named("other", &["b"]).await;
    let allowed_pattern = allowed.url.replace("/mcp", "/*");
    let (redirect_base, redirect_stop) = redirector(other.url.clone()).await;
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let section = PolicySection {
        allowed_url_patterns: Some(vec![allowed_pattern.clone(), format!("{redirect_base}/*")]),
        ..PolicySection::default()
    };
    let registry = start(
        ToolRegistry::builder(bus.clone())
            .policy(policy(section))
            .limits(McpLimits {
                connect_budget: Duration::from_secs(5),
                ..McpLimits::default()
            })
            .servers(&[
                McpServerConfig::http("allowed", &allowed.url),
                McpServerConfig::http("other", &other.url),
                McpServerConfig::http("bounced", &format!("{redirect_base}/mcp")),
            ]),
    )
    .await;
    assert_eq!(spec_list(&*registry), pairs(&[("a", "allowed")]));
    assert!(registry.source("other").is_none());
    let events = source_events(&mut events);
    let skipped = events
        .iter()
        .find(|e| e.server == "other" && e.state == ToolSourceState::Skipped)
        .expect("a skipped event for the refused server");
    assert!(
        skipped.detail.contains("allowed_url_patterns"),
        "{}",
        skipped.detail
    );
    let SourceStatus::Down { error, .. } = registry.source("bounced").unwrap().status() else {
        panic!("the redirected server must not connect")
    };
    assert!(
        error.contains("redirect refused") && error.contains("allowed_url_patterns"),
        "{error}"
    );
    registry.shutdown().await;

    // The same redirect is followed when its target is allowed too.
    let section = PolicySection {
        allowed_url_patterns: Some(vec![
            format!("{redirect_base}/*"),
            other.url.replace("/mcp", "/*"),
        ]),
        ..PolicySection::default()
    };
    let registry = start(
        ToolRegistry::builder(bus.clone())
            .policy(policy(section))
            .servers(&[McpServerConfig::http(
                "bounced",
                &format!("{redirect_base}/mcp"),
            )]),
    )
    .await;
    assert_eq!(spec_list(&*registry), pairs(&[("b", "bounced")]));
    registry.shutdown().await;
    redirect_stop.cancel();
}

/// Bridges.md case 72: stdio off → skipped with a reason; on with an allowlist → only
/// listed commands.
#[tokio::test]
async fn the_stdio_gate() {
    let web = named("web", &["w"]).await;
    let exe = env!("CARGO_BIN_EXE_turnscope-dev");
    let stdio = McpServerConfig::stdio("local", exe, &["fixture-server", "--stdio"]);
    let servers = [stdio, McpServerConfig::http("web", &web.url)];
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let off = policy(PolicySection {
        stdio_enabled: Some(false),
        ..PolicySection::default()
    });
    let registry = start(
        ToolRegistry::builder(bus.clone())
            .policy(off)
            .servers(&servers),
    )
    .await;
    assert_eq!(spec_list(&*registry), pairs(&[("w", "web")]));
    let skipped = source_events(&mut events)
        .into_iter()
        .find(|e| e.server == "local")
        .expect("an event for the stdio server");
    assert_eq!(skipped.state, ToolSourceState::Skipped);
    assert!(
        skipped.detail.contains("MCP_STDIO_ENABLED"),
        "{}",
        skipped.detail
    );
    registry.shutdown().await;

    let others_only = policy(PolicySection {
        stdio_allowed_commands: Some(vec!["python".into()]),
        ..PolicySection::default()
    });
    let registry = start(
        ToolRegistry::builder(bus.clone())
            .policy(others_only)
            .servers(&servers),
    )
    .await;
    assert!(registry.source("local").is_none());
    registry.shutdown().await;

    let listed = policy(PolicySection {
        stdio_allowed_commands: Some(vec![exe.to_string()]),
        ..PolicySection::default()
    });
    let registry = start(
        ToolRegistry::builder(bus.clone())
            .policy(listed)
            .servers(&servers),
    )
    .await;
    assert_eq!(registry.specs().len(), 9);
    registry.shutdown().await;
}

/// Bridges.md case 73: allow hides the rest from discovery and from direct calls; deny beats
/// allow.
#[tokio::test]
async fn tool_filter_hides_and_refuses() {
    let http = RunningFixture::start(Kind::Http).await;
    let mut only_echo = McpServerConfig::http("fx", &http.url("/mcp"));
    only_echo.tool_filter = Some(ToolFilter {
        allow: vec!["echo".into()],
        deny: vec![],
    });
    let bus = Bus::default();
    let registry = start(ToolRegistry::builder(bus.clone()).servers(&[only_echo])).await;
    assert_eq!(spec_list(&*registry), pairs(&[("echo", "fx")]));
    let refused = registry.call("add", json!({"a": 1, "b": 2})).await;
    assert!(refused.is_error && refused.text.contains("unknown tool `add`"));
    registry.shutdown().await;

    let mut deny_wins = McpServerConfig::http("fx", &http.url("/mcp"));
    deny_wins.tool_filter = Some(ToolFilter {
        allow: vec!["echo".into(), "add".into()],
        deny: vec!["add".into()],
    });
    let registry = start(ToolRegistry::builder(bus).servers(&[deny_wins])).await;
    assert_eq!(spec_list(&*registry), pairs(&[("echo", "fx")]));
    registry.shutdown().await;
    http.stop().await;
}

/// Bridges.md cases 65 and 66 against real servers.
#[tokio::test]
async fn precedence_collisions_and_reserved_names() {
    let one = named("server1", &["lookup", "ticket", "end_session", "broken"]).await;
    let two = named("server2", &["ticket", "x", "clock"]).await;
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let lookup = FnTool::new(
        "lookup",
        "Looks things up.",
        json!({"type": "object"}),
        |_| async { Ok("from rust".to_string()) },
    );
    let registry = start(
        ToolRegistry::builder(bus.clone())
            .builtins()
            .tool(lookup)
            .servers(&[
                McpServerConfig::http("server1", &one.url),
                McpServerConfig::http("server2", &two.url),
            ]),
    )
    .await;
    assert_eq!(
        spec_list(&*registry),
        pairs(&[
            ("clock", "builtin"),
            ("echo", "builtin"),
            ("end_session", "builtin"),
            ("lookup", "rust"),
            ("ticket", "server1"),
            ("broken", "server1"),
            ("x", "server2"),
        ])
    );
    assert_eq!(registry.call("lookup", json!({})).await.text, "from rust");
    assert_eq!(
        registry.call("ticket", json!({})).await.text,
        "server1:ticket"
    );
    assert_eq!(registry.call("x", json!({})).await.text, "server2:x");
    let broken = registry.call("broken", json!({})).await;
    assert!(
        broken.is_error && broken.text.contains("JSON-RPC error -32602"),
        "{}",
        broken.text
    );
    let lines = logs(&mut events);
    let expect = [
        ("`lookup` of server1", "taken by rust"),
        ("`end_session` of server1", "reserved"),
        ("`ticket` of server2", "taken by server1"),
        (
            "`clock` of server2",
            "taken by the built-in `clock`; [bot] builtin_tools = false",
        ),
    ];
    for (tool, why) in expect {
        assert!(
            lines.iter().any(|l| l.contains(tool) && l.contains(why)),
            "no log line for {tool} ({why}): {lines:#?}"
        );
    }
    assert_eq!(lines.len(), 4, "{lines:#?}");
    registry.shutdown().await;

    // With the built-ins off, `end_session` is still reserved.
    let registry =
        start(ToolRegistry::builder(bus).servers(&[McpServerConfig::http("server1", &one.url)]))
            .await;
    let names: Vec<String> = spec_list(&*registry).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["lookup", "ticket", "broken"]);
    registry.shutdown().await;
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Bridges.md case 67: 50 tools per server, 100 in all, servers consumed in order.
#[tokio::test]
async fn both_caps() {
    let names = |prefix: &str, n: usize| -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{i:02}")).collect()
    };
    let sixty = names("s", 60);
    let a = names("a", 50);
    let b = names("b", 50);
    let c = names("c", 30);
    let s = named("s", &refs(&sixty)).await;
    let sa = named("a", &refs(&a)).await;
    let sb = named("b", &refs(&b)).await;
    let sc = named("c", &refs(&c)).await;
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let registry =
        start(ToolRegistry::builder(bus.clone()).servers(&[McpServerConfig::http("s", &s.url)]))
            .await;
    let got: Vec<String> = spec_list(&*registry).into_iter().map(|(n, _)| n).collect();
    assert_eq!(got, sixty[..50]);
    let lines = logs(&mut events);
    assert_eq!(lines.len(), 1, "one warning for the cap: {lines:#?}");
    assert!(lines[0].contains("10 tools of s") && lines[0].contains("MCP_MAX_TOOLS_PER_SERVER"));
    registry.shutdown().await;

    let registry = start(ToolRegistry::builder(bus).servers(&[
        McpServerConfig::http("a", &sa.url),
        McpServerConfig::http("b", &sb.url),
        McpServerConfig::http("c", &sc.url),
    ]))
    .await;
    let got: Vec<String> = spec_list(&*registry).into_iter().map(|(n, _)| n).collect();
    let expected: Vec<String> = a.iter().chain(&b).cloned().collect();
    assert_eq!(got, expected);
    let lines = logs(&mut events);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("30 tools of c") && l.contains("MCP_MAX_TOOLS_TOTAL")),
        "{lines:#?}"
    );
    registry.shutdown().await;
}

/// `scope = "session"`: each session gets its own connection, closed when it ends; shared
/// servers keep one connection for all.
#[tokio::test]
async fn session_scope_opens_one_connection_per_session() {
    let shared = named("shared", &["common"]).await;
    let own = named("own", &["private"]).await;
    let mut per_session = McpServerConfig::http("own", &own.url);
    per_session.scope = Scope::Session;
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let registry = start(
        ToolRegistry::builder(bus.clone())
            .servers(&[McpServerConfig::http("shared", &shared.url), per_session]),
    )
    .await;
    assert_eq!(spec_list(&*registry), pairs(&[("common", "shared")]));
    let first = registry.open(1).expect("per-session tools");
    let second = registry.open(2).expect("per-session tools");
    first.ready().await;
    second.ready().await;
    assert_eq!(
        spec_list(&*first),
        pairs(&[("common", "shared"), ("private", "own")])
    );
    assert_eq!(first.call("private", json!({})).await.text, "own:private");
    assert_eq!(second.call("common", json!({})).await.text, "shared:common");
    first.close().await;
    assert!(first.call("private", json!({})).await.is_error);
    assert_eq!(second.call("private", json!({})).await.text, "own:private");
    assert_eq!(first.call("common", json!({})).await.text, "shared:common");
    second.close().await;
    let events = source_events(&mut events);
    let sessions: Vec<(Option<u64>, ToolSourceState)> = events
        .iter()
        .filter(|e| e.server == "own")
        .map(|e| (e.session, e.state))
        .collect();
    assert!(
        sessions.contains(&(Some(1), ToolSourceState::Connected)),
        "{sessions:?}"
    );
    assert!(
        sessions.contains(&(Some(2), ToolSourceState::Connected)),
        "{sessions:?}"
    );
    assert!(
        sessions.contains(&(Some(1), ToolSourceState::Closed)),
        "{sessions:?}"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e.server == "shared" && e.state == ToolSourceState::Connected)
            .count(),
        1
    );
    registry.shutdown().await;
}

/// `--locked`: the shared-deployment defaults refuse stdio and unlisted URLs, and the bot still starts
/// with its built-ins.
#[tokio::test]
async fn locked_mode_starts_the_bot_without_the_refused_servers() {
    use turnscope::app::App;
    use turnscope::config::Config;

    let web = named("web", &["w"]).await;
    let mut config = Config {
        mcp_servers: vec![
            McpServerConfig::stdio(
                "local",
                env!("CARGO_BIN_EXE_turnscope-dev"),
                &["fixture-server", "--stdio"],
            ),
            McpServerConfig::http("web", &web.url),
        ],
        ..Config::default()
    };
    // What `--locked --port 0 --pace 0` sets.
    config.policy.locked = true;
    config.server.port = 0;
    config.model.pace = 0.0;
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let app = App::start(&config, bus).await.unwrap();
    let tools = app.sessions.bot().tools().clone();
    let names: Vec<String> = spec_list(&*tools).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["clock", "echo", "end_session"]);
    let skipped: Vec<(String, String)> = source_events(&mut events)
        .into_iter()
        .filter(|e| e.state == ToolSourceState::Skipped)
        .map(|e| (e.server, e.detail))
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(
        skipped[0].0 == "local" && skipped[0].1.contains("locked mode"),
        "{skipped:?}"
    );
    assert!(
        skipped[1].0 == "web" && skipped[1].1.contains("locked mode"),
        "{skipped:?}"
    );
    app.shutdown().await;
}

/// A placeholder naming an unset variable skips that server with the reason; the rest load.
#[tokio::test]
async fn an_unset_placeholder_skips_only_its_server() {
    let good = named("good", &["g"]).await;
    let mut bad = McpServerConfig::http("bad", &good.url);
    bad.headers.insert(
        "Authorization".into(),
        "Bearer ${TURNSCOPE_TEST_SURELY_UNSET_VARIABLE}".into(),
    );
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let registry = start(
        ToolRegistry::builder(bus.clone())
            .servers(&[bad, McpServerConfig::http("good", &good.url)]),
    )
    .await;
    assert_eq!(spec_list(&*registry), pairs(&[("g", "good")]));
    let skipped = source_events(&mut events)
        .into_iter()
        .find(|e| e.server == "bad")
        .expect("an event for the bad server");
    assert_eq!(skipped.state, ToolSourceState::Skipped);
    assert!(
        skipped.detail.contains("headers.Authorization")
            && skipped
                .detail
                .contains("TURNSCOPE_TEST_SURELY_UNSET_VARIABLE is not set"),
        "{}",
        skipped.detail
    );
    registry.shutdown().await;
}
