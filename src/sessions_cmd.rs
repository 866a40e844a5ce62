//! `turnscope sessions`: the conversations a store keeps. `list` them (handle prefix, bot,
//! turns, last used), `show` one as plain text (the console's `e` report of it), `export` one
//! as an `--events` file (`turnscope replay` opens it) or a `turnscope test` case, `delete`
//! one or every expired one.
//!
//! Which store: `--store URL`, else `[store] url`, else the default file of the address the
//! server listened on (`--host`/`--port`, else the config's, else 127.0.0.1:7870); when that
//! file is not there, the error lists the default files the state directory holds. Listing and
//! exporting read the file while a server uses it; deleting takes the file's lock, so the
//! server using it must stop first (a running server deletes expired sessions itself). A
//! Redis store (`redis://`) is listed and exported while its replicas run; deleting from it
//! is left to them (their sweep, and Redis's TTL). A store that cannot be opened exits 2, as
//! in the main mode (`AppError::Store`).

use std::io::IsTerminal;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use turnscope::app::AppError;
use turnscope::config::{Config, StoreUrl};
use turnscope::store::redis::{RedisSettings, RedisStore};
use turnscope::store::sqlite::SqliteStore;
use turnscope::store::{Head, SessionStore, default_path, export, now_ms};
use turnscope_console::text::{bytes, plural};

use crate::cli::{ExportAs, ServeArgs, SessionsAction, SessionsArgs};

/// Runs `turnscope sessions`.
pub async fn run(
    args: SessionsArgs,
    config_file: Option<&Path>,
    serve: &ServeArgs,
) -> anyhow::Result<()> {
    let mut overrides = serve.overrides();
    overrides.store = args.store.clone().or(overrides.store);
    overrides.host = args.host.clone().or(overrides.host);
    overrides.port = args.port.or(overrides.port);
    let (config, _) = Config::load(config_file, &overrides)?;
    let source = store_source(&config)?;
    match args.action {
        SessionsAction::List { json, limit } => {
            let store = open_to_read(&source, &config).await?;
            let read = limit.saturating_add(KEPT_ALIVE_SLACK);
            let heads = most_recently_used(store.list(read).await?, limit);
            let total = store.count().await?;
            let runs = running(store.as_ref(), &heads).await;
            if json {
                for (head, run) in heads.iter().zip(&runs) {
                    println!("{}", serde_json::to_string(&summary(head, run))?);
                }
            } else {
                print!("{}", table(&heads, &runs, total, &store_name(&source)));
            }
            store.close().await;
        }
        SessionsAction::Show { prefix } => {
            let store = open_to_read(&source, &config).await?;
            let head = find(store.as_ref(), &prefix).await?;
            let report = turnscope_console::run::replay::stored_report(store.as_ref(), &head).await;
            store.close().await;
            print!("{}", report.map_err(anyhow::Error::msg)?);
        }
        SessionsAction::Export {
            prefix,
            format,
            output,
            force,
        } => {
            let store = open_to_read(&source, &config).await?;
            let head = find(store.as_ref(), &prefix).await?;
            let turns = store.turns(&head.id, 0).await?;
            let origin = store.describe();
            // What the file holds, as said once it is written: every turn for the events, the
            // answered ones for a test (one a restart cut off has no reply to expect).
            let mut left_out = Vec::new();
            let (text, ext, holds) = match format {
                ExportAs::Events => {
                    let mut text = String::new();
                    for event in export::events(&head, &turns, &origin) {
                        text.push_str(&serde_json::to_string(&event)?);
                        text.push('\n');
                    }
                    (text, "events.jsonl", plural(turns.len() as u64, "turn"))
                }
                ExportAs::Test => {
                    let case =
                        export::test_case(&head, &turns, &origin).map_err(anyhow::Error::msg)?;
                    let holds = case.summary();
                    left_out = case.left_out;
                    (case.text, "test.toml", holds)
                }
            };
            store.close().await;
            // With no --output, `sessions export PREFIX > file` (or `| jq`) means stdout, as
            // the shell line says; only a terminal gets the default file instead of the JSON.
            let output = output.unwrap_or_else(|| {
                if std::io::stdout().is_terminal() {
                    PathBuf::from(format!("turnscope-session-{}.{ext}", head.prefix))
                } else {
                    PathBuf::from("-")
                }
            });
            if output == Path::new("-") {
                print!("{text}");
            } else {
                anyhow::ensure!(
                    force || !output.exists(),
                    "{} is there already (an earlier export, perhaps edited since): nothing was \
                     written. Give another --output, or --force to write over it",
                    output.display()
                );
                // Owner-only, as the store it comes from.
                turnscope::private_files::create(&output)
                    .and_then(|mut file| std::io::Write::write_all(&mut file, text.as_bytes()))
                    .with_context(|| format!("cannot write {}", output.display()))?;
                let next = match format {
                    ExportAs::Events => "turnscope replay",
                    ExportAs::Test => "turnscope test",
                };
                let left_out: String = left_out
                    .iter()
                    .map(|why| format!("; left out: {why}"))
                    .collect();
                eprintln!(
                    "session {} ({holds}) written to {}{left_out}; open it with: {next} {}",
                    head.prefix,
                    output.display(),
                    output.display()
                );
            }
        }
        SessionsAction::Delete {
            prefix,
            expired,
            handle_seconds,
        } => {
            let Source::File(path) = &source else {
                anyhow::bail!(
                    "store {}: `turnscope sessions delete` deletes from a store file; the replicas \
                     sharing a Redis delete what expired themselves, and Redis forgets an idle \
                     conversation after its TTL (server.handle_seconds)",
                    store_name(&source)
                );
            };
            let store = open_to_write(path)?;
            let outcome = delete(&store, prefix, expired, handle_seconds, &config).await;
            store.close().await;
            println!("{}", outcome?);
        }
    }
    Ok(())
}

/// Where the config's sessions are kept: a store file or a Redis the replicas share.
enum Source {
    File(PathBuf),
    Redis(turnscope::config::store::RedisUrl),
}

fn store_name(source: &Source) -> String {
    match source {
        Source::File(path) => path.display().to_string(),
        Source::Redis(url) => url.masked().to_string(),
    }
}

/// Opens the store to read: a file while its server runs, a Redis while its replicas do
/// (as one more client of it; this command never takes a lease or writes a session).
async fn open_to_read(source: &Source, config: &Config) -> anyhow::Result<Box<dyn SessionStore>> {
    Ok(match source {
        Source::File(path) => Box::new(SqliteStore::open_to_read(path).map_err(unusable)?),
        Source::Redis(url) => Box::new(
            RedisStore::open(
                url,
                RedisSettings {
                    replica: "turnscope-sessions".into(),
                    idle: std::time::Duration::from_secs(config.server.handle_seconds),
                },
            )
            .await
            .map_err(unusable)?,
        ),
    })
}

/// A store that could not be opened (Redis unreachable, no such file, a file another version
/// wrote), as the main mode says it: the binary exits 2 for it.
fn unusable(e: impl std::fmt::Display) -> anyhow::Error {
    AppError::Store(e.to_string()).into()
}

/// The store the config names.
fn store_source(config: &Config) -> anyhow::Result<Source> {
    match config
        .store
        .resolve(StoreUrl::Default)
        .map_err(anyhow::Error::msg)?
    {
        StoreUrl::Memory => anyhow::bail!(
            "store memory: a memory store keeps nothing once its server stops, so there is nothing to list, export or delete. \
             Give the --store sqlite:PATH a server used"
        ),
        StoreUrl::Sqlite(path) => Ok(Source::File(path)),
        StoreUrl::Redis(url) => Ok(Source::Redis(url)),
        StoreUrl::Default => {
            let s = &config.server;
            let addr = (s.host.as_str(), s.port)
                .to_socket_addrs()
                .with_context(|| format!("cannot resolve --host {}", s.host))?
                .next()
                .with_context(|| format!("--host {} names no address", s.host))?;
            let path =
                default_path(addr, &|name| std::env::var(name).ok()).map_err(anyhow::Error::msg)?;
            if s.port == 0 {
                let dir = path.parent().unwrap_or(Path::new("."));
                anyhow::bail!(
                    "--port 0: a server on a random port keeps no default file (its store is memory \
                     unless it was given --store); give the --store sqlite:PATH it was given{}",
                    store_files_text(dir, addr.ip())
                );
            }
            if !path.exists() {
                return Err(unusable(no_default_file(&path, addr)));
            }
            Ok(Source::File(path))
        }
    }
}

/// What is said when the default file of `addr` is not there: the store files the state
/// directory holds instead (a server that ran on another port, or with `--host`), and how to
/// pick one; or that it holds none, and where they would be.
fn no_default_file(path: &Path, addr: SocketAddr) -> String {
    let dir = path.parent().unwrap_or(Path::new("."));
    format!(
        "no store file for {addr}: {} is not there{}",
        path.display(),
        store_files_text(dir, addr.ip())
    )
}

/// The default store files in `dir` as the error lists them, each with the flags that pick it
/// (`--host` only where it is not `host`, the one asked for); or that there is none.
fn store_files_text(dir: &Path, host: IpAddr) -> String {
    let files = store_files(dir);
    if files.is_empty() {
        return format!(
            ", nor any other: {} (where a server with the default store keeps one file per \
             address it listens on, sessions-HOST-PORT.sqlite3) holds none. A server given \
             --store sqlite:PATH keeps its sessions in PATH: give that --store (one on --port 0 \
             with no --store kept them in memory only)",
            dir.display()
        );
    }
    let now = now_ms();
    let mut out = format!(
        ". {} holds {} of other addresses:",
        dir.display(),
        plural(files.len() as u64, "store file")
    );
    for file in &files {
        let address = SocketAddr::new(file.host, file.port).to_string();
        let sessions = match &file.sessions {
            Ok(n) => plural(*n, "session"),
            Err(why) => format!("sessions unknown ({why})"),
        };
        let flags = if file.host == host {
            format!("--port {}", file.port)
        } else {
            format!("--host {} --port {}", file.host, file.port)
        };
        out.push_str(&format!(
            "\n  {address:<21}  {:>10}  modified {} UTC ({} ago)  {sessions:<12}  {flags}",
            bytes(file.size),
            utc(file.modified_ms),
            age(now.saturating_sub(file.modified_ms)),
        ));
    }
    out.push_str(
        "\nPick one with the flags its line ends with (the --host/--port its server listened \
         on: `turnscope sessions list --port PORT`), or give a file with --store sqlite:PATH",
    );
    out
}

/// A default store file found in the state directory.
struct StoreFile {
    host: IpAddr,
    port: u16,
    /// Its size with its write-ahead log's (what a running server wrote lately is there).
    size: u64,
    /// When it or its write-ahead log was last written, ms since the epoch.
    modified_ms: u64,
    /// How many sessions it keeps, read without its lock (a server may hold it), or why not.
    sessions: Result<u64, String>,
}

/// The default store files (`sessions-HOST-PORT.sqlite3`) in `dir`, most recently written
/// first.
fn store_files(dir: &Path) -> Vec<StoreFile> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<StoreFile> = entries
        .flatten()
        .filter_map(|entry| {
            let (host, port) = turnscope::store::address_of(entry.file_name().to_str()?)?;
            let path = entry.path();
            let meta = std::fs::metadata(&path).ok().filter(|m| m.is_file())?;
            let mut wal = path.as_os_str().to_owned();
            wal.push("-wal");
            let wal = std::fs::metadata(PathBuf::from(wal)).ok();
            let modified_ms = [Some(&meta), wal.as_ref()]
                .into_iter()
                .flatten()
                .filter_map(|m| m.modified().ok())
                .filter_map(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as u64)
                .max()
                .unwrap_or(0);
            Some(StoreFile {
                host,
                port,
                size: meta.len() + wal.map_or(0, |m| m.len()),
                modified_ms,
                sessions: SqliteStore::count_in(&path).map_err(|e| first_words(&e.to_string())),
            })
        })
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.modified_ms));
    files
}

/// A store error's reason without the file's name it starts with (the line names the file).
fn first_words(error: &str) -> String {
    let why = error.split_once(": ").map_or(error, |(_, why)| why);
    cut(why, 60)
}

/// Opens the file to delete from: its lock says whether a server still uses it.
fn open_to_write(path: &Path) -> anyhow::Result<SqliteStore> {
    if !path.exists() {
        return Err(unusable(format_args!(
            "store file {}: no such file. Give the file a server used (--store sqlite:PATH), or the \
             --port it listened on for its default file",
            path.display()
        )));
    }
    SqliteStore::open(path).map_err(|e| {
        let text = e.to_string();
        if text.contains("another turnscope process is using it") {
            unusable(format_args!(
                "store file {}: a running turnscope server uses it. Stop it first (it deletes expired \
                 sessions itself, every sweep), then delete",
                path.display()
            ))
        } else {
            unusable(e)
        }
    })
}

/// The command that lists `store`'s sessions, to paste: a file store's path, or a Redis URL
/// with no credentials, as it is; a Redis URL with credentials is shown masked, so the person
/// puts theirs back.
fn list_command(store: &dyn SessionStore) -> String {
    list_command_for(&store.describe())
}

/// [`list_command`] for a store described as `url` (credentials masked as `***`).
fn list_command_for(url: &str) -> String {
    if url.starts_with("sqlite:") || !url.contains("***") {
        format!("`turnscope sessions list --store {url}`")
    } else {
        format!("`turnscope sessions list --store URL` (this store: {url}, its password put back)")
    }
}

/// The one session whose handle starts with `prefix`, or whose handle `prefix` is whole (what
/// an MCP client prints, or the console's `y` copies).
async fn find(store: &dyn SessionStore, prefix: &str) -> anyhow::Result<Head> {
    if prefix.len() > 8
        && let Ok(handle) = uuid::Uuid::parse_str(prefix.trim())
    {
        return store
            .head(&store.key().id_of(&handle))
            .await?
            .with_context(|| {
                format!(
                    "{} holds no session with the handle {}…: it ended (idle past its lifetime, or \
                     deleted), or was kept in another store; {} \
                     shows those it holds",
                    store.describe(),
                    &prefix[..8],
                    list_command(store)
                )
            });
    }
    anyhow::ensure!(
        !prefix.is_empty() && prefix.len() <= 8,
        "prefix {prefix:?}: expected the first 1 to 8 characters of a handle, as {} shows them",
        list_command(store)
    );
    let prefix = prefix.to_ascii_lowercase();
    let mut found: Vec<Head> = store
        .list(usize::MAX)
        .await?
        .into_iter()
        .filter(|h| h.prefix.starts_with(&prefix))
        .collect();
    match found.len() {
        0 => anyhow::bail!(
            "no stored session's handle starts with {prefix} in {}; {} \
             shows those it holds",
            store.describe(),
            list_command(store)
        ),
        1 => Ok(found.remove(0)),
        n => anyhow::bail!(
            "{n} stored sessions' handles start with {prefix} ({}); give more characters",
            found
                .iter()
                .map(|h| h.prefix.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

async fn delete(
    store: &SqliteStore,
    prefix: Option<String>,
    expired: bool,
    handle_seconds: Option<u64>,
    config: &Config,
) -> anyhow::Result<String> {
    if expired {
        let seconds = handle_seconds.unwrap_or(config.server.handle_seconds);
        let before = now_ms().saturating_sub(seconds.saturating_mul(1000));
        let heads = store.expired(before, usize::MAX).await?;
        for head in &heads {
            store.delete(&head.id).await?;
        }
        return Ok(format!(
            "deleted {} unused for more than {seconds} s from {}",
            plural(heads.len() as u64, "session"),
            store.describe()
        ));
    }
    let prefix = prefix.unwrap_or_default();
    let head = find(store, &prefix).await?;
    store.delete(&head.id).await?;
    Ok(format!(
        "deleted session {} ({}) from {}",
        head.prefix,
        plural(head.turns, "turn"),
        store.describe()
    ))
}

/// Of a head with a turn in flight in a store the replicas share: the replica whose lease
/// runs that turn now (`Some(Some(id))`), or none (`Some(None)`: its replica stopped, so its
/// next chat reports it cut off). `None` where no lease tells (a file, or no turn in flight).
type Run = Option<Option<String>>;

/// [`Run`] of each of `heads`: one lease read per head with a turn in flight.
async fn running(store: &dyn SessionStore, heads: &[Head]) -> Vec<Run> {
    let mut runs = Vec::with_capacity(heads.len());
    for head in heads {
        let run = if store.shared() && head.in_flight.is_some() {
            store.lease_holder(&head.id).await.ok().map(|holder| {
                holder.map(|h| h.rsplit_once('#').map_or(h.clone(), |(r, _)| r.to_string()))
            })
        } else {
            None
        };
        runs.push(run);
    }
    runs
}

/// How many heads `list` reads past its `--limit`, to order them by last use: a store lists by
/// idleness, where a running console's keep-alives count, and only sessions a console holds
/// are kept alive (a few dozen per replica), so the `limit` last used are among the first
/// `limit` + this many. Reading every head instead blocked Redis for one script over all of
/// them.
const KEPT_ALIVE_SLACK: usize = 1024;

/// The `limit` heads last used most recently, newest first: by `last_used_ms` (a call's last
/// write), which LAST USED shows. A store lists by idleness instead (Redis's `used` index, the
/// file's row), where a running console's keep-alives of the sessions it holds count: a
/// session used minutes ago sorted first. So a few more heads are read, then ordered here.
fn most_recently_used(mut heads: Vec<Head>, limit: usize) -> Vec<Head> {
    heads.sort_by_key(|h| std::cmp::Reverse(h.last_used_ms));
    heads.truncate(limit);
    heads
}

/// One session as `list --json` prints it.
fn summary(head: &Head, run: &Run) -> serde_json::Value {
    serde_json::json!({
        "running_on": run.clone().flatten(),
        "prefix": head.prefix,
        "bot": head.bot,
        "turns": head.turns,
        "errors": head.errors,
        "opener": head.opener,
        "created_ms": head.created_ms,
        "last_used_ms": head.last_used_ms,
        "in_flight": head.in_flight.as_ref().map(|f| f.turn),
        "unread": head.unread,
    })
}

/// The table `list` prints.
fn table(heads: &[Head], runs: &[Run], total: u64, origin: &str) -> String {
    let mut out = format!(
        "{} in {origin}{}\n",
        plural(total, "stored session"),
        if (heads.len() as u64) < total {
            format!(" (the {} most recently used)", heads.len())
        } else {
            String::new()
        }
    );
    if heads.is_empty() {
        return out;
    }
    out.push_str(&format!(
        "{:<8}  {:<16}  {:>5}  {:>6}  {:<28}  {:<20}  {}\n",
        "PREFIX", "BOT", "TURNS", "ERRORS", "LAST USED (UTC)", "OPENED BY", "STATE"
    ));
    let now = now_ms();
    for (h, run) in heads
        .iter()
        .zip(runs.iter().chain(std::iter::repeat(&None)))
    {
        let opener = match &h.opener {
            turnscope::observe::SessionOpener::Console => "console".to_string(),
            turnscope::observe::SessionOpener::Mcp(name) => format!("mcp: {name}"),
            turnscope::observe::SessionOpener::Api => "api".to_string(),
        };
        let state = match (&h.in_flight, h.unread) {
            // A shared store's lease tells a running turn from one its replica's stop cut off.
            (Some(f), _) if run.is_some() => match run.clone().flatten() {
                Some(replica) => format!("turn {} running on replica {replica}", f.turn),
                None => format!(
                    "turn {} cut off (its replica stopped: its next chat reports it)",
                    f.turn
                ),
            },
            // The file cannot tell a turn running now from one its server's stop cut off.
            (Some(f), _) => format!(
                "turn {} in flight (running, or cut off by a stop: its client is told)",
                f.turn
            ),
            (None, Some(t)) => format!("turn {t} unread"),
            // Said, not left blank: an empty column read as "unknown".
            (None, None) => "idle (every reply read)".to_string(),
        };
        out.push_str(&format!(
            "{:<8}  {:<16}  {:>5}  {:>6}  {:<28}  {:<20}  {}\n",
            h.prefix,
            cut(&h.bot, 16),
            h.turns,
            h.errors,
            format!(
                "{} ({} ago)",
                utc(h.last_used_ms),
                age(now.saturating_sub(h.last_used_ms))
            ),
            cut(&opener, 20),
            state
        ));
    }
    out
}

fn cut(text: &str, most: usize) -> String {
    if text.chars().count() <= most {
        text.to_string()
    } else {
        let mut t: String = text.chars().take(most - 1).collect();
        t.push('…');
        t
    }
}

/// `2026-12-03 10:04` for ms since the Unix epoch (UTC; the civil-from-days rule).
fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let (h, m) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}")
}

/// `42 s`, `5 min`, `3 h`, `2 d`.
fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86_400 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_people_read_them() {
        assert_eq!(utc(0), "1970-01-01 00:00");
        assert_eq!(utc(1_796_294_640_000), "2026-12-03 10:44");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00");
        assert_eq!(age(42_000), "42 s");
        assert_eq!(age(300_000), "5 min");
        assert_eq!(age(7_200_000), "2 h");
        assert_eq!(age(3 * 86_400_000), "3 d");
        assert_eq!(cut("abcdef", 4), "abc…");
    }

    #[test]
    fn sessions_are_listed_by_their_last_use_not_by_a_keep_alive() {
        let head = |n: u8, last_used_ms: u64, kept_alive_ms: u64| Head {
            id: turnscope::store::HandleId::from_bytes([n; 32]),
            prefix: format!("{n:08}"),
            bot: "bot".into(),
            opener: turnscope::observe::SessionOpener::Api,
            greeting: None,
            created_ms: 1,
            last_used_ms,
            kept_alive_ms,
            turns: 1,
            messages: 1,
            forgotten: 0,
            history_from_turn: 1,
            in_flight: None,
            unread: None,
            errors: 0,
            version: 1,
        };
        // As a store lists them: the console's session, kept alive a moment ago, first.
        let listed = vec![head(1, 1_000, 9_000), head(2, 5_000, 0), head(3, 3_000, 0)];
        let order = |heads: Vec<Head>| heads.iter().map(|h| h.prefix.clone()).collect::<Vec<_>>();
        assert_eq!(
            order(most_recently_used(listed.clone(), 10)),
            ["00000002", "00000003", "00000001"]
        );
        assert_eq!(
            order(most_recently_used(listed, 2)),
            ["00000002", "00000003"]
        );
    }

    #[test]
    fn the_list_command_asks_for_a_password_only_of_a_url_that_had_one() {
        assert_eq!(
            list_command_for("redis://127.0.0.1:6379/0"),
            "`turnscope sessions list --store redis://127.0.0.1:6379/0`"
        );
        assert_eq!(
            list_command_for("redis://***@127.0.0.1:6379/0"),
            "`turnscope sessions list --store URL` (this store: redis://***@127.0.0.1:6379/0, its \
             password put back)"
        );
        assert_eq!(
            list_command_for("sqlite:/tmp/s.db"),
            "`turnscope sessions list --store sqlite:/tmp/s.db`"
        );
    }
}
