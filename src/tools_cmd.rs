//! `turnscope tools list` and `turnscope tools call NAME --args JSON`: the config's tool sources
//! (built-ins, `[[mcp_servers]]` under `[policy]` and the limits) from the command line, for
//! scripts, with JSON on stdout. A call takes the bot's path (`tools::hand`: the registry, the
//! bot's tool timeout), after the checks a person's call gets (the tool exists, its server is
//! up, the arguments pass its schema). Exit 0: done; 1: the tool answered with an error; 2: the
//! call could not be made (unknown tool, arguments that break the schema, an unreachable
//! server, a config that does not load); 3: the tool did not answer (a timeout, an answer over
//! the response cap, its server lost mid-call or refusing the request with a JSON-RPC error). A
//! server that is down is said once on stderr.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use turnscope::app::App;
use turnscope::config::Config;
use turnscope::observe::{Bus, Event, ToolSourceEvent, ToolSourceState};
use turnscope::tools::hand::{self, Refusal};
use turnscope::tools::mcp_source::SourceStatus;
use turnscope::tools::portability;
use turnscope::tools::registry::ToolRegistry;
use turnscope::tools::registry::down_after;
use turnscope::tools::{ToolSpec, Tools};

use crate::cli::{ServeArgs, ToolsAction};

/// Runs a `tools` subcommand; what it prints on stdout is JSON, what went wrong also goes to
/// stderr in words. Ctrl-C or SIGTERM ends it with 130 or 143, the MCP servers it started
/// closed with it (each server runs in a process group of its own, so the terminal's Ctrl-C
/// does not reach them, and one that ignores its stdin's end ran on, orphaned).
pub async fn main(action: ToolsAction, config: Option<PathBuf>, serve: &ServeArgs) -> ExitCode {
    // `--args -` is read before the signals are taken over and the servers start: a blocking
    // read of stdin would otherwise keep Ctrl-C from stopping the command until EOF.
    let action = match action {
        ToolsAction::Call { name, args } if args == "-" => {
            match std::io::read_to_string(std::io::stdin()) {
                // Not `-` again, nor a file: what was read is the arguments.
                Ok(text) if text.trim() == "-" || text.starts_with('@') => {
                    return could_not("--args - read no JSON object from stdin", Vec::new());
                }
                Ok(text) => ToolsAction::Call { name, args: text },
                Err(e) => {
                    return could_not(
                        &format!("cannot read the arguments from stdin: {e}"),
                        Vec::new(),
                    );
                }
            }
        }
        other => other,
    };
    tokio::select! {
        code = run(action, config, serve) => code,
        // The run is dropped here: its registry and sources with it, and each stdio server
        // with its process group as the runtime shuts down.
        (name, code) = interrupted() => {
            eprintln!("turnscope tools: {name}: stopped, and the MCP servers it started with it");
            ExitCode::from(code)
        }
    }
}

/// The signal that interrupts a `tools` command, and the exit code it gives (128 + its number).
async fn interrupted() -> (&'static str, u8) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            return tokio::select! {
                _ = int.recv() => ("interrupted (Ctrl-C)", 130),
                _ = term.recv() => ("terminated (SIGTERM)", 143),
            };
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    ("interrupted (Ctrl-C)", 130)
}

async fn run(action: ToolsAction, config: Option<PathBuf>, serve: &ServeArgs) -> ExitCode {
    let config = match Config::load(config.as_deref(), &serve.overrides()) {
        Ok((config, _)) => config,
        Err(e) => return could_not(&format!("the config does not load: {e}"), Vec::new()),
    };
    let bus = Bus::default();
    // Servers not started (the policy refused them, or a placeholder names an unset
    // variable) are not sources: only their `skipped` events say so.
    let mut events = bus.subscribe();
    let builder = match App::tool_registry_builder(&config, &bus, Vec::new()) {
        Ok(builder) => builder,
        Err(e) => return could_not(&e.to_string(), Vec::new()),
    };
    // A call waits only for the server of its tool, not for an unrelated slow one.
    let registry = match &action {
        ToolsAction::Call { name, .. } => builder.needing(name),
        ToolsAction::List => builder,
    }
    .start()
    .await;
    let mut refused = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::ToolSource(source) = &*event
            && source.state == ToolSourceState::Skipped
        {
            refused.push(source.clone());
        }
    }
    let timeout = Duration::from_secs_f64(config.bot.tool_timeout_seconds);
    let code = match action {
        ToolsAction::List => list(&registry, &refused),
        ToolsAction::Call { name, args } => {
            call(&registry, &refused, &name, &args, timeout, &bus).await
        }
    };
    registry.shutdown().await;
    code
}

/// Each MCP source's state: `{name, transport, state, tools?, error?}`.
fn sources(registry: &ToolRegistry) -> (Vec<Value>, Vec<String>) {
    let mut down = Vec::new();
    let listed = registry
        .sources()
        .iter()
        .map(|s| {
            let mut row = json!({"name": s.name(), "transport": s.transport().as_str()});
            match s.status() {
                SourceStatus::Up { tools, .. } => {
                    row["state"] = json!("up");
                    row["tools"] = json!(tools);
                }
                SourceStatus::Connecting => {
                    row["state"] = json!("connecting");
                    down.push(format!("{}: {STILL_CONNECTING}", s.name()));
                }
                SourceStatus::Down { error, attempts } => {
                    row["state"] = json!("down");
                    row["error"] = json!(error);
                    down.push(format!("{}: {}", s.name(), down_after(attempts, &error)));
                }
                SourceStatus::Closed => row["state"] = json!("closed"),
            }
            row
        })
        .collect();
    (listed, down)
}

fn tool_json(spec: &ToolSpec) -> Value {
    let findings: Vec<String> = portability::check(&spec.input_schema)
        .iter()
        .map(ToString::to_string)
        .collect();
    json!({
        "name": spec.name,
        "source": spec.source,
        "description": spec.description,
        "inputSchema": spec.input_schema,
        "portability": findings,
    })
}

fn list(registry: &ToolRegistry, refused: &[ToolSourceEvent]) -> ExitCode {
    let specs = registry.specs();
    let (mut sources, mut down) = sources(registry);
    for r in refused {
        sources.push(json!({
            "name": r.server,
            "transport": r.transport.as_ref(),
            "state": "refused",
            "error": r.detail,
        }));
        down.push(not_started(r));
    }
    let skipped: Vec<String> = registry.skipped().iter().map(ToString::to_string).collect();
    print_json(&json!({
        "tools": specs.iter().map(tool_json).collect::<Vec<_>>(),
        "sources": sources,
        "skipped": skipped,
    }));
    if down.is_empty() {
        ExitCode::SUCCESS
    } else {
        for d in &down {
            eprintln!("turnscope tools: MCP server {d}; its tools are not listed");
        }
        ExitCode::from(2)
    }
}

/// `NAME: not started (WHY)`: a server the policy refused, or whose entry names an unset
/// variable.
fn not_started(r: &ToolSourceEvent) -> String {
    format!("{}: not started ({})", r.server, r.detail)
}

async fn call(
    registry: &Arc<ToolRegistry>,
    refused: &[ToolSourceEvent],
    name: &str,
    args: &str,
    timeout: Duration,
    bus: &Bus,
) -> ExitCode {
    let arguments = match read_args(args) {
        Ok(v) => v,
        Err(e) => return could_not(&e, Vec::new()),
    };
    let specs = registry.specs();
    let (_, down) = sources(registry);
    // A tool of a server that is down is still listed (its last list) or not at all (never
    // up): either way the call cannot be made, and the reason is the server.
    if let Some(spec) = specs.iter().find(|s| s.name == name)
        && let Some(source) = registry.source(&spec.source)
        && !matches!(source.status(), SourceStatus::Up { .. })
    {
        return could_not(
            &format!(
                "MCP server `{}` is unreachable ({}); check that it runs and its [[mcp_servers]] entry",
                spec.source,
                describe(&source.status())
            ),
            Vec::new(),
        );
    }
    let tools: &dyn Tools = &**registry;
    match hand::call(tools, name, arguments, timeout, bus).await {
        Ok(done) => {
            // Another server down is no reason not to call this one, but worth a line (once:
            // the server's own retry warnings are off in this one-shot command; a refusal
            // names them itself). One still connecting was not waited for: nothing to say.
            for d in down.iter().filter(|d| !d.ends_with(STILL_CONNECTING)) {
                eprintln!("turnscope tools: MCP server {d}; its tools are not offered");
            }
            print_json(&done.to_json());
            if let Some(why) = &done.outcome.unanswered {
                eprintln!("turnscope tools: `{name}` did not answer: {why}");
                ExitCode::from(3)
            } else if done.outcome.is_error {
                eprintln!("turnscope tools: `{name}` answered with an error");
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(refusal) => {
            let mut message = refusal.to_string();
            if matches!(refusal, Refusal::UnknownTool { .. }) && !down.is_empty() {
                message.push_str(&format!(
                    "; unreachable, so their tools are unknown: {}",
                    down.join("; ")
                ));
            }
            if matches!(refusal, Refusal::UnknownTool { .. }) && !refused.is_empty() {
                let said: Vec<String> = refused.iter().map(not_started).collect();
                message.push_str(&format!(
                    "; not started, so their tools are unknown: {}",
                    said.join("; ")
                ));
            }
            let errors = match &refusal {
                Refusal::Schema { errors, .. } => errors
                    .iter()
                    .map(|e| {
                        json!({"field": e.field(), "pointer": e.pointer, "rule": e.rule, "message": e.message})
                    })
                    .collect(),
                _ => Vec::new(),
            };
            could_not(&message, errors)
        }
    }
}

/// What a server still connecting when the command stopped waiting is, and what to do.
const STILL_CONNECTING: &str = "still connecting when the connect budget ran out \
     (MCP_CONNECT_TIMEOUT_SECONDS, 10 s unless set, gives a slow server longer)";

fn describe(status: &SourceStatus) -> String {
    match status {
        SourceStatus::Connecting => STILL_CONNECTING.into(),
        SourceStatus::Down { error, attempts } => down_after(*attempts, error),
        SourceStatus::Closed => "closed".into(),
        SourceStatus::Up { .. } => "up".into(),
    }
}

/// `--args`: JSON text, `@FILE`, or `-` for stdin.
fn read_args(args: &str) -> Result<Value, String> {
    // (`-`, stdin, was read before the command started: `main`.)
    let text = if let Some(path) = args.strip_prefix('@') {
        std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the arguments from {path}: {e}"))?
    } else {
        args.to_string()
    };
    serde_json::from_str(&text).map_err(|e| {
        format!("--args is not JSON ({e}); give one object such as '{{\"text\": \"hi\"}}'")
    })
}

/// Exit 2: the reason as JSON on stdout (`{"error": …, "errors": [{field, rule, …}]}`) and in
/// words on stderr.
fn could_not(message: &str, errors: Vec<Value>) -> ExitCode {
    let mut out = json!({"error": message});
    if !errors.is_empty() {
        out["errors"] = Value::Array(errors);
    }
    print_json(&out);
    eprintln!("turnscope tools: {message}");
    ExitCode::from(2)
}

/// Prints `value` on stdout. A reader that closed the pipe early (`turnscope tools list | head`)
/// took what it wanted: that is not a panic, and the exit code still says how the call went.
fn print_json(value: &Value) {
    use std::io::Write;
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    let written = writeln!(std::io::stdout().lock(), "{text}");
    if let Err(e) = written
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("turnscope tools: cannot write to stdout: {e}");
    }
}
