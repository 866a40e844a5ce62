//! The command line: flags of the main mode and the subcommands (clap), and how they become the
//! library's inputs (config overrides and option structs); nothing here starts anything.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use turnscope::bridge::openai::standalone::StandaloneOptions;
use turnscope::bridge::xiaozhi::command::RelayOptions;
use turnscope::config::Overrides;

/// turnscope: run a bot, serve it over MCP, and watch it live.
#[derive(Debug, Parser)]
#[command(name = "turnscope", version, about)]
pub struct Cli {
    /// Config file (TOML, or a Claude-Desktop `.json` whose `mcpServers` become tool sources);
    /// default ./turnscope.toml when present.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Main-mode flags.
    #[command(flatten)]
    pub serve: ServeArgs,
    /// A subcommand instead of the console.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Flags of the console / headless server.
#[derive(Debug, Clone, Args, Default, PartialEq)]
pub struct ServeArgs {
    /// Address to bind (default 127.0.0.1).
    #[arg(long)]
    pub host: Option<String>,
    /// Port (default 7870; 0 picks a free one).
    #[arg(long)]
    pub port: Option<u16>,
    /// An OpenAI-compatible base URL (ending in /v1); default: the embedded scripted model.
    #[arg(long)]
    pub model_url: Option<String>,
    /// Model name sent to that server.
    #[arg(long)]
    pub model: Option<String>,
    /// Most open sessions (default 32).
    #[arg(long, allow_negative_numbers = true)]
    pub sessions: Option<usize>,
    /// Seconds a session lives with no chat call (default 300).
    #[arg(long, allow_negative_numbers = true)]
    pub handle_seconds: Option<u64>,
    /// Seconds between idle sweeps (default 30).
    #[arg(long, hide = true, allow_negative_numbers = true)]
    pub sweep_seconds: Option<f64>,
    /// This replica's name behind a load balancer (default: host:port as bound).
    #[arg(long)]
    pub replica_id: Option<String>,
    /// Seconds SIGTERM waits for turns in flight before exiting (default 30).
    #[arg(long, allow_negative_numbers = true)]
    pub drain_seconds: Option<f64>,
    /// Seconds between words of the embedded model (default 0.03).
    #[arg(long, allow_negative_numbers = true)]
    pub pace: Option<f64>,
    /// Serve with no console (for CI and scripts).
    #[arg(long)]
    pub headless: bool,
    /// Write every event as one JSON line to FILE (`-` = stdout).
    #[arg(long)]
    pub events: Option<PathBuf>,
    /// Cut the --events file into pieces of at most MIB: past it the file is moved aside
    /// (dated), the piece before deleted, and a new one begun with the sessions open then;
    /// 1 to 1048576 (default: one file, uncut).
    #[arg(
        long,
        value_name = "MIB",
        allow_negative_numbers = true,
        value_parser = clap::builder::RangedI64ValueParser::<u64>::new().range(1..=1_048_576)
    )]
    pub events_max_mib: Option<u64>,
    /// Also allow this Host (repeatable; `name:*` = any port).
    #[arg(long = "allowed-host")]
    pub allowed_hosts: Vec<String>,
    /// Also allow this Origin (repeatable; `scheme://name:*` = any port).
    #[arg(long = "allowed-origin")]
    pub allowed_origins: Vec<String>,
    /// Turn the Host/Origin check off (only behind a trusted proxy).
    #[arg(long)]
    pub no_host_check: bool,
    /// Require `Authorization: Bearer TOKEN` on every request this server takes (`turnscope
    /// test --url` sends it to the server it tests instead).
    #[arg(long, env = "TURNSCOPE_AUTH_TOKEN", hide_env_values = true)]
    pub auth_token: Option<String>,
    /// Allow --host beyond loopback without --auth-token (an authenticating proxy is in front).
    #[arg(long)]
    pub allow_open_bind: bool,
    /// Console theme: dark, light, mono, or a path to a theme file.
    #[arg(long)]
    pub theme: Option<String>,
    /// Tool-source rules for shared deployments: stdio MCP servers off
    /// and server URLs refused unless allowlisted (BYOM_ALLOWED_URL_PATTERNS, MCP_STDIO_ENABLED,
    /// MCP_STDIO_ALLOWED_COMMANDS or [policy]).
    #[arg(long)]
    pub locked: bool,
    /// Most KiB of one model or MCP message kept in events, the console and --events (longer
    /// ones cut with a marker; 0 = timings only, no bodies; 0 to 1048576; default 64).
    #[arg(
        long,
        value_name = "KIB",
        allow_negative_numbers = true,
        value_parser = clap::builder::RangedI64ValueParser::<usize>::new()
            .range(0..=turnscope::config::WIRE_KIB_MAX as i64)
    )]
    pub wire_kib: Option<usize>,
    /// Where conversations are kept: sqlite:PATH, redis://[USER:PASS@]HOST:PORT/DB[?prefix=P]
    /// (rediss:// for TLS; shared by replicas), memory (nothing survives a restart), or
    /// default (a file per listening address under $XDG_STATE_HOME/turnscope; what the console
    /// and --headless use, memory with --port 0).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

impl ServeArgs {
    /// The flags as values laid over the config file (validated there, under the flags' names).
    pub fn overrides(&self) -> Overrides {
        Overrides {
            host: self.host.clone(),
            port: self.port,
            model_url: self.model_url.clone(),
            model: self.model.clone(),
            sessions: self.sessions,
            handle_seconds: self.handle_seconds,
            sweep_seconds: self.sweep_seconds,
            replica_id: self.replica_id.clone(),
            drain_seconds: self.drain_seconds,
            pace: self.pace,
            allowed_hosts: self.allowed_hosts.clone(),
            allowed_origins: self.allowed_origins.clone(),
            no_host_check: self.no_host_check,
            auth_token: self.auth_token.clone(),
            allow_open_bind: self.allow_open_bind,
            theme: self.theme.clone(),
            locked: self.locked,
            wire_kib: self.wire_kib,
            store: self.store.clone(),
        }
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The embedded scripted model on its own (a mock model for your CI).
    Model {
        /// What to do with it.
        #[command(subcommand)]
        action: ModelAction,
    },
    /// Benchmarks; each prints JSON rows.
    Bench(crate::bench::BenchArgs),
    /// Run conversation test files (`*.test.toml`) against the bot, or `--url` any MCP bot
    /// server; exit 0 all passed, 1 a case failed, 2 could not run.
    // The main mode's flags that mean nothing here (no console, no drain) are taken, so a
    // command line copied from the main mode still runs, but left out of `test --help`.
    #[command(
        mut_arg("headless", |a| a.hide(true)),
        mut_arg("theme", |a| a.hide(true)),
        mut_arg("drain_seconds", |a| a.hide(true))
    )]
    Test(TestArgs),
    /// The config's tool sources from the command line: list them, or call one as the bot
    /// would; JSON on stdout; exit 0 ok, 1 the tool returned an error, 2 could not call, 3
    /// the tool did not answer (timed out, too large, its server lost).
    Tools {
        /// What to do.
        #[command(subcommand)]
        action: ToolsAction,
    },
    /// The conversations a store keeps: list them, export one (as an --events file for
    /// `turnscope replay`, or a `turnscope test` case), delete one or every expired one.
    Sessions(SessionsArgs),
    /// Open the console over a file written by `--events`, read-only.
    Replay {
        /// The events file (JSON lines).
        file: PathBuf,
        /// Console theme: dark, light, mono, or a path to a theme file.
        #[arg(long)]
        theme: Option<String>,
    },
    /// Open the console over a bot this process does not run: URL is its MCP endpoint
    /// (pipecat-mcp-transport, another turnscope, replicas behind a balancer); a turnscope's
    /// whole instrument is shown from its live event stream, read-only, and you chat in sessions
    /// you start. `--whisker ws://HOST:PORT` adds (or alone, watches) pipecat's whisker feed.
    Attach {
        /// The bot's MCP URL (e.g. http://127.0.0.1:7870/mcp; `7870` or `localhost:7870` for
        /// short: http:// and /mcp are added).
        url: Option<String>,
        /// Pipecat whisker's WebSocket URL (e.g. ws://localhost:9090; `9090` for short).
        #[arg(long)]
        whisker: Option<String>,
        /// Bearer token for the URL and its event stream.
        #[arg(long, env = "TURNSCOPE_AUTH_TOKEN", hide_env_values = true)]
        auth_token: Option<String>,
        /// Record what the console sees (JSON lines) for `turnscope replay`.
        #[arg(long)]
        events: Option<PathBuf>,
        /// Cut the --events file into pieces of at most MIB (1 to 1048576), as the main
        /// mode's flag does.
        #[arg(
            long,
            value_name = "MIB",
            allow_negative_numbers = true,
            value_parser = clap::builder::RangedI64ValueParser::<u64>::new().range(1..=1_048_576)
        )]
        events_max_mib: Option<u64>,
        /// Console theme: dark, light, mono, or a path to a theme file.
        #[arg(long)]
        theme: Option<String>,
    },
    /// Bridges on their own, without the console.
    Bridge {
        /// Which bridge.
        #[command(subcommand)]
        kind: BridgeCommand,
    },
    /// The config file: print an annotated example (`turnscope config example >
    /// turnscope.toml`); every key is in docs/config.md.
    Config {
        /// What to do.
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Helpers for running replicas behind a load balancer.
    Replicas {
        /// What to print.
        #[command(subcommand)]
        action: ReplicasAction,
    },
    /// Development helpers.
    #[command(hide = true)]
    Dev {
        /// Which helper.
        #[command(subcommand)]
        action: DevAction,
    },
}

/// `turnscope test` flags.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Test files (`*.test.toml`).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Test this MCP server (it must offer `start` and `chat`) instead of starting the config's bot.
    #[arg(long)]
    pub url: Option<String>,
    /// Runs at once, each on a session (and MCP connection) of its own.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Write a JUnit XML report to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Print results as JSON lines on stdout (one per case, then a summary); the human lines go
    /// to stderr.
    #[arg(long)]
    pub json: bool,
    /// Seconds one `start` or `chat` call may take.
    #[arg(long, default_value_t = 120.0, allow_negative_numbers = true)]
    pub timeout: f64,
    /// The bot's flags, as in the main mode (`--events FILE` records the in-process server's
    /// events; with --url the conversations as this client saw them; `--auth-token` is sent to
    /// --url).
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// `turnscope model ...`
#[derive(Debug, Subcommand)]
pub enum ModelAction {
    /// Serve `/v1/models` and `/v1/chat/completions` on 127.0.0.1.
    Serve {
        /// Port (0 = any free port).
        #[arg(long, default_value_t = 7861)]
        port: u16,
        /// Seconds between streamed words.
        #[arg(long, default_value_t = 0.03, allow_negative_numbers = true)]
        pace: f64,
        /// Exact words per text answer (the one after a tool round too).
        #[arg(long)]
        words: Option<usize>,
    },
}

/// `turnscope config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Print an annotated example config to stdout.
    Example,
}

/// `turnscope replicas ...`
#[derive(Debug, Subcommand)]
pub enum ReplicasAction {
    /// Print the HAProxy backend lines for these replicas: a `server` line each and the
    /// `use-server` line that routes every handle ending in its tag to it (paste them into the
    /// backend of examples/haproxy.cfg), or with --whole the recipe itself with them in it.
    Haproxy {
        /// Each replica as ID=HOST:PORT: its --replica-id and the address HAProxy reaches it at.
        #[arg(required = true, value_name = "ID=HOST:PORT")]
        replicas: Vec<turnscope::sessions::haproxy::ReplicaAddr>,
        /// Print the whole recipe (examples/haproxy.cfg, which the binary carries) with these
        /// replicas in place of its example ones: `haproxy -f` runs it as it is.
        #[arg(long)]
        whole: bool,
    },
}

/// `turnscope dev ...` (the fixture MCP server is `turnscope-dev fixture-server`, a binary of
/// its own).
#[derive(Debug, Subcommand)]
pub enum DevAction {
    /// Connect to a streamable HTTP MCP server as turnscope's tool sources do (same client
    /// code), list its tools, optionally call one, print what came back, and exit. The MCP
    /// conformance suite's client scenarios run it (the URL comes last).
    McpClient {
        /// Call this tool after listing.
        #[arg(long)]
        call: Option<String>,
        /// The call's arguments (a JSON object).
        #[arg(long, default_value = "{}")]
        args: String,
        /// The server's MCP endpoint.
        url: String,
    },
}

/// `turnscope bridge ...`
#[derive(Debug, Subcommand)]
pub enum BridgeCommand {
    /// Relay an MCP server (or the bot) to a Xiaozhi MCP endpoint.
    ///
    /// With --stdio/--http/--sse/--bot: one bridge. Without: the bridges of the config file
    /// (--config FILE, else $MCP_CONFIG, else ./mcp_config.json, else ./turnscope.toml):
    /// an mcp_config.json (`mcpServers`, one endpoint per server) or turnscope TOML
    /// (`[[bridges.xiaozhi]]`).
    Xiaozhi(XiaozhiArgs),
    /// Serve one MCP server's tools as OpenAI function calling: `GET /v1/tools` (the OpenAI
    /// `tools` array) and `POST /v1/execute` (`{name, arguments}` → `{content, is_error}`).
    ///
    /// Command-line compatible with mcp-openai-bridge's `serve`.
    Openai(OpenaiArgs),
}

/// `turnscope bridge openai ...`
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("upstream").required(true).args(["stdio", "http", "sse"])))]
pub struct OpenaiArgs {
    /// Bridge the stdio MCP server started by this command line (split like a shell would,
    /// without one).
    #[arg(long)]
    pub stdio: Option<String>,
    /// Bridge the streamable HTTP MCP server at this URL.
    #[arg(long)]
    pub http: Option<String>,
    /// Bridge the legacy SSE MCP server at this URL.
    #[arg(long)]
    pub sse: Option<String>,
    /// Port to serve on (0 = any free port).
    #[arg(long, default_value_t = 8800)]
    pub port: u16,
    /// Interface to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Seconds one tool call may take before it is abandoned (and cancelled upstream).
    #[arg(long, default_value_t = 60.0, allow_negative_numbers = true)]
    pub timeout_seconds: f64,
    /// Extra request header for --http/--sse, as `Name: value` (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Offer only these tools (repeatable; empty = all).
    #[arg(long = "allow", value_name = "TOOL")]
    pub allow: Vec<String>,
    /// Never offer nor call these tools (repeatable; deny wins).
    #[arg(long = "deny", value_name = "TOOL")]
    pub deny: Vec<String>,
    /// Require `Authorization: Bearer TOKEN` on every request.
    #[arg(long, env = "TURNSCOPE_AUTH_TOKEN", hide_env_values = true)]
    pub auth_token: Option<String>,
    /// Also allow this Host (repeatable; `name:*` = any port).
    #[arg(long = "allowed-host")]
    pub allowed_hosts: Vec<String>,
    /// Also allow this Origin (repeatable; `scheme://name:*` = any port).
    #[arg(long = "allowed-origin")]
    pub allowed_origins: Vec<String>,
    /// Allow --host beyond loopback without --auth-token (an authenticating proxy is in front).
    #[arg(long)]
    pub allow_open_bind: bool,
}

/// `turnscope bridge xiaozhi ...`
#[derive(Debug, Args)]
pub struct XiaozhiArgs {
    /// The endpoint URL, wss://…/mcp/?token=… (default: $MCP_ENDPOINT_<NAME>, then
    /// $MCP_ENDPOINT). Applies to a single bridge only.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Relay the stdio MCP server started by this command line.
    #[arg(long, group = "server")]
    pub stdio: Option<String>,
    /// Relay the streamable HTTP MCP server at this URL.
    #[arg(long, group = "server")]
    pub http: Option<String>,
    /// Relay the legacy SSE MCP server at this URL.
    #[arg(long, group = "server")]
    pub sse: Option<String>,
    /// Relay the bot itself (its start/chat tools); also serves MCP over HTTP as the main
    /// mode does, on the config's [server] host and port (7870 unless set there).
    #[arg(long, group = "server")]
    pub bot: bool,
    /// The bridge's name (in logs, and for $MCP_ENDPOINT_<NAME>).
    #[arg(long, default_value = "xiaozhi")]
    pub name: String,
    /// Offer only these tools (repeatable; empty = all).
    #[arg(long = "allow", value_name = "TOOL")]
    pub allow: Vec<String>,
    /// Never offer nor call these tools (repeatable; deny wins).
    #[arg(long = "deny", value_name = "TOOL")]
    pub deny: Vec<String>,
    /// Extra request header for --http/--sse, as `Name: value` (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
}

impl From<OpenaiArgs> for StandaloneOptions {
    fn from(a: OpenaiArgs) -> Self {
        Self {
            stdio: a.stdio,
            http: a.http,
            sse: a.sse,
            port: a.port,
            host: a.host,
            timeout_seconds: a.timeout_seconds,
            headers: a.headers,
            allow: a.allow,
            deny: a.deny,
            auth_token: a.auth_token,
            allowed_hosts: a.allowed_hosts,
            allowed_origins: a.allowed_origins,
            allow_open_bind: a.allow_open_bind,
        }
    }
}

impl From<XiaozhiArgs> for RelayOptions {
    fn from(a: XiaozhiArgs) -> Self {
        Self {
            endpoint: a.endpoint,
            stdio: a.stdio,
            http: a.http,
            sse: a.sse,
            bot: a.bot,
            name: a.name,
            allow: a.allow,
            deny: a.deny,
            headers: a.headers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bridge(line: &[&str]) -> Result<BridgeCommand, clap::Error> {
        let mut full = vec!["turnscope", "bridge"];
        full.extend_from_slice(line);
        match Cli::try_parse_from(full)?.command {
            Some(Command::Bridge { kind }) => Ok(kind),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_openai_bridge_takes_the_baselines_command_line() {
        let Ok(BridgeCommand::Openai(a)) = bridge(&[
            "openai",
            "--stdio",
            "npx -y @modelcontextprotocol/server-filesystem /tmp",
            "--port",
            "8801",
        ]) else {
            panic!("parsed");
        };
        let options = StandaloneOptions::from(a);
        assert_eq!((options.port, options.host.as_str()), (8801, "127.0.0.1"));
        assert_eq!(options.timeout_seconds, 60.0);
        let Ok(BridgeCommand::Openai(a)) = bridge(&["openai", "--http", "http://h/mcp"]) else {
            panic!("parsed");
        };
        assert_eq!(a.port, 8800, "mcp-openai-bridge's default port");
    }

    #[test]
    fn main_mode_flags_become_overrides() {
        let cli =
            Cli::try_parse_from(["turnscope", "--locked", "--port", "0", "--pace", "0"]).unwrap();
        let o = cli.serve.overrides();
        assert!(o.locked);
        assert_eq!((o.port, o.pace), (Some(0), Some(0.0)));
    }

    /// A negative number reaches the check that says what is expected (clap took `-1` for a
    /// flag: "unexpected argument '-1' found"; tour O).
    #[test]
    fn a_negative_number_is_a_value_not_a_flag() {
        let cli = Cli::try_parse_from(["turnscope", "--pace", "-1"]).unwrap();
        assert_eq!(cli.serve.overrides().pace, Some(-1.0));
        // A whole number's parser says what it expected of `-1`, not that it is a flag.
        let e = Cli::try_parse_from(["turnscope", "--handle-seconds", "-1"]).unwrap_err();
        assert!(e.to_string().contains("invalid value '-1'"), "{e}");
        // --wire-kib says its range (it said "unexpected argument '-1' found").
        for given in ["-1", "1048577"] {
            let e = Cli::try_parse_from(["turnscope", "--wire-kib", given]).unwrap_err();
            assert!(e.to_string().contains("is not in 0..=1048576"), "{e}");
        }
        let cli = Cli::try_parse_from(["turnscope", "--wire-kib", "1048576"]).unwrap();
        assert_eq!(cli.serve.overrides().wire_kib, Some(1_048_576));
    }

    #[test]
    fn replicas_haproxy_takes_id_equals_address_and_says_what_it_expected() {
        let cli =
            Cli::try_parse_from(["turnscope", "replicas", "haproxy", "r1=127.0.0.1:7871"]).unwrap();
        let Some(Command::Replicas {
            action: ReplicasAction::Haproxy { replicas, .. },
        }) = cli.command
        else {
            panic!("parsed");
        };
        assert_eq!(
            (replicas[0].id.as_str(), replicas[0].addr.as_str()),
            ("r1", "127.0.0.1:7871")
        );
        let e = Cli::try_parse_from(["turnscope", "replicas", "haproxy", "r1"]).unwrap_err();
        assert!(e.to_string().contains("expected ID=HOST:PORT"), "{e}");
        assert!(
            Cli::try_parse_from(["turnscope", "replicas", "haproxy"]).is_err(),
            "at least one replica"
        );
    }

    #[test]
    fn bridge_upstreams_exclude_each_other() {
        assert!(
            bridge(&["openai", "--port", "1"]).is_err(),
            "one upstream is required"
        );
        assert!(bridge(&["openai", "--stdio", "x", "--http", "http://h/mcp"]).is_err());
        assert!(bridge(&["xiaozhi", "--stdio", "a", "--http", "http://h/mcp"]).is_err());
        let Ok(BridgeCommand::Xiaozhi(a)) = bridge(&["xiaozhi", "--bot"]) else {
            panic!("parsed");
        };
        assert_eq!(RelayOptions::from(a).name, "xiaozhi");
    }
}

/// `turnscope tools ...` (run by `tools_cmd`)
#[derive(Debug, Subcommand)]
pub enum ToolsAction {
    /// Print every tool of the config's sources as JSON (name, source, description,
    /// inputSchema, portability), with each source's state. Exit 2 when a server could not be
    /// reached (the others' tools are still listed).
    List,
    /// Call one tool as the bot would and print the result as JSON (content, structuredContent,
    /// isError, bytes, ms). Exit 0 ok, 1 the tool returned an error, 2 the call could not be
    /// made, 3 the tool did not answer (a timeout, an answer over the response cap, its server
    /// lost mid-call or refusing the request: `unanswered` says which).
    Call {
        /// The tool's name, as `turnscope tools list` gives it.
        name: String,
        /// The arguments: a JSON object, `@FILE` to read one from a file, or `-` for stdin.
        #[arg(long, default_value = "{}")]
        args: String,
    },
}

/// `turnscope sessions` flags (run by `sessions_cmd`).
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: SessionsAction,
    /// The store: sqlite:PATH, redis://HOST:PORT/DB (list, show and export), or default (the file of --host/--port).
    #[arg(long, global = true, value_name = "URL")]
    pub store: Option<String>,
    /// The address the server listened on, for its default file (default 127.0.0.1).
    #[arg(long, global = true)]
    pub host: Option<String>,
    /// The port the server listened on, for its default file (default 7870).
    #[arg(long, global = true)]
    pub port: Option<u16>,
}

/// `turnscope sessions ...`
#[derive(Debug, Subcommand)]
pub enum SessionsAction {
    /// The stored sessions, most recently used first.
    List {
        /// One JSON object per session (one per line) instead of the table.
        #[arg(long)]
        json: bool,
        /// Most sessions shown.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// One session as plain text on stdout, as the console's `e` exports it: each turn's
    /// line, tool calls and reply, its timings and end.
    Show {
        /// The session's handle prefix (its first characters, as `list` shows them), or its
        /// whole handle.
        prefix: String,
    },
    /// One session as a file: an --events file `turnscope replay` opens, or a test case.
    Export {
        /// The session's handle prefix (its first characters, as `list` shows them), or its
        /// whole handle.
        prefix: String,
        /// What to write.
        #[arg(long = "as", value_enum, default_value_t = ExportAs::Events)]
        format: ExportAs,
        /// The file (- = stdout). Without it: stdout when that is redirected (`> file`, a
        /// pipe), else turnscope-session-PREFIX.events.jsonl or .test.toml.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Write over a file that is there already (a test case you edited, say).
        #[arg(long)]
        force: bool,
    },
    /// Delete one session, or every expired one.
    Delete {
        /// The session's handle prefix, or its whole handle.
        #[arg(required_unless_present = "expired", conflicts_with = "expired")]
        prefix: Option<String>,
        /// Every session unused for longer than the handle lifetime (--handle-seconds, else
        /// server.handle_seconds).
        #[arg(long)]
        expired: bool,
        /// The handle lifetime, seconds.
        #[arg(long, allow_negative_numbers = true)]
        handle_seconds: Option<u64>,
    },
}

/// What `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportAs {
    /// An --events JSONL file (`turnscope replay FILE` opens it).
    Events,
    /// A conversation test case (`turnscope test FILE` runs it).
    Test,
}
