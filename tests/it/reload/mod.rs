//! Live reload on the real binary: the config file edited under a running `--headless`
//! turnscope (as an editor saves it: a new file renamed over the old one), SIGHUP, a bad edit,
//! tool sources added, changed and removed; what the next model request carries (a scripted
//! upstream that records requests), the turn records' config versions, the `--events` file
//! and the stderr lines.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use crate::support::binary::{WAIT, ready_line, serving, signal, terminate, url_in};
use crate::support::mcp::Client;
use crate::support::upstream::{Reply, Upstream, content};

mod tool_sources;

/// `turnscope --headless` on a config file in a scratch folder, with `--events` and its stderr
/// kept line by line.
struct Served {
    child: Child,
    url: String,
    dir: PathBuf,
    config: PathBuf,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Served {
    async fn start(name: &str, config: &str) -> Served {
        let dir =
            std::env::temp_dir().join(format!("turnscope-reload-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("turnscope.toml");
        std::fs::write(&path, config).unwrap();
        Self::start_on(dir, path).await
    }

    async fn start_on(dir: PathBuf, config: PathBuf) -> Served {
        let mut command = serving(&["--headless", "--port", "0", "--pace", "0", "--config"]);
        let mut child = command
            .arg(&config)
            .arg("--events")
            .arg(dir.join("events.jsonl"))
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .stderr(Stdio::piped())
            .spawn()
            .expect("turnscope starts");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                sink.lock().unwrap().push(line);
            }
        });
        let url = url_in(&ready_line(&mut child).await, "/mcp");
        Served {
            child,
            url,
            dir,
            config,
            stderr,
        }
    }

    /// Saves `text` as an editor does: a new file in the folder, renamed over the config.
    fn save(&self, text: &str) {
        save_by_rename(&self.config, text);
    }

    fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("events.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn reloads(&self) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["type"] == "config_reload")
            .collect()
    }

    /// Waits for the `n`-th reload event (1-based) and returns it.
    async fn reload(&self, n: usize) -> Value {
        let started = Instant::now();
        loop {
            if let Some(e) = self.reloads().get(n - 1) {
                return e.clone();
            }
            assert!(
                started.elapsed() < WAIT,
                "no reload event #{n}; stderr:\n{}",
                self.stderr.lock().unwrap().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }

    /// Waits for a stderr line starting with `prefix`.
    async fn stderr_line(&self, prefix: &str) -> String {
        self.stderr_lines(prefix, 1).await.remove(0)
    }

    /// Waits for `n` stderr lines starting with `prefix` and returns them.
    async fn stderr_lines(&self, prefix: &str, n: usize) -> Vec<String> {
        let started = Instant::now();
        loop {
            let found: Vec<String> = self
                .stderr
                .lock()
                .unwrap()
                .iter()
                .filter(|l| l.starts_with(prefix))
                .cloned()
                .collect();
            if found.len() >= n {
                return found;
            }
            assert!(
                started.elapsed() < WAIT,
                "no stderr line starting {prefix:?}; stderr:\n{}",
                self.stderr.lock().unwrap().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }

    fn tool_source_events(&self, server: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["type"] == "tool_source" && e["server"] == server)
            .collect()
    }

    /// Waits until `server` has at least `n` tool-source events and returns them.
    async fn sources_at_least(&self, server: &str, n: usize) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let got = self.tool_source_events(server);
            if got.len() >= n {
                return got;
            }
            assert!(
                started.elapsed() < WAIT,
                "{server} has {} tool-source events: {got:?}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }

    async fn stop(mut self) {
        let status = terminate(&mut self.child).await;
        assert!(status.success(), "{status}");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn save_by_rename(path: &Path, text: &str) {
    let fresh = path.with_extension("toml.new");
    std::fs::write(&fresh, text).unwrap();
    std::fs::rename(&fresh, path).unwrap();
}

fn config_with(up: &Upstream, prompt: &str, rest: &str) -> String {
    format!(
        "[model]\nurl = \"{}\"\nname = \"m\"\n\n[bot]\nsystem_prompt = \"{prompt}\"\n{rest}",
        up.base_url()
    )
}

/// The system message of a recorded request.
fn system_of(request: &Value) -> &str {
    let first = &request["messages"][0];
    assert_eq!(first["role"], "system", "{request}");
    first["content"].as_str().unwrap()
}

/// The (role, content) of every message after the system prompt.
fn history_of(request: &Value) -> Vec<(String, String)> {
    request["messages"].as_array().unwrap()[1..]
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

async fn requests_at_least(up: &Upstream, n: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let got = up.requests();
        if got.len() >= n {
            return got;
        }
        assert!(
            started.elapsed() < WAIT,
            "the model got {} requests",
            got.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_saved_system_prompt_is_in_the_next_model_request_and_the_session_keeps_its_history() {
    let up = Upstream::start(vec![
        Reply::text(&["Hello ", "there."]),
        Reply::text(&["Still ", "here."]),
    ])
    .await;
    let s = Served::start("prompt", &config_with(&up, "You are version one.", "")).await;
    let client = Client::connect(&s.url).await;
    let handle = client.start().await;
    let first = client.chat(&handle, "hi").await;
    assert!(!first.is_error, "{first:?}");
    assert_eq!(first.record["config_version"], 1);

    s.save(&config_with(&up, "You are version two.", ""));
    let reload = s.reload(1).await;
    assert_eq!(reload["outcome"], "applied", "{reload}");
    assert_eq!(reload["cause"], "file");
    assert_eq!(reload["version"], 2);
    assert_eq!(reload["applied"], json!(["bot.system_prompt"]));
    let line = s.stderr_line("turnscope: config reloaded").await;
    assert_eq!(
        line,
        "turnscope: config reloaded (file): version 2 from the next turn: bot.system_prompt"
    );

    let second = client.chat(&handle, "and now?").await;
    assert!(!second.is_error, "{second:?}");
    assert_eq!(second.text, "Still here.");
    assert_eq!(second.record["config_version"], 2);
    let requests = up.requests();
    assert_eq!(system_of(&requests[0]), "You are version one.");
    assert_eq!(system_of(&requests[1]), "You are version two.");
    // The same session: its history went with the new prompt.
    let history: Vec<(String, String)> = history_of(&requests[1]);
    assert_eq!(
        history,
        [
            ("user".to_string(), "hi".to_string()),
            ("assistant".to_string(), "Hello there.".to_string()),
            ("user".to_string(), "and now?".to_string()),
        ]
    );
    // --events: each turn's end names the version it ran on (the file is written as the
    // events pass, so the second may land just after its reply).
    let started = Instant::now();
    let versions = loop {
        let versions: Vec<Value> = s
            .events()
            .into_iter()
            .filter(|e| e["type"] == "turn_ended")
            .map(|e| e["config_version"].clone())
            .collect();
        if versions.len() >= 2 || started.elapsed() > WAIT {
            break versions;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(versions, [json!(1), json!(2)]);
    // Put together again from the events, each request is what the model got, with its own
    // prompt (tour M: the first was rebuilt with the second's, the whole history told again).
    use turnscope::observe::Event;
    use turnscope::observe::rebuild::RequestBook;
    let events: Vec<Event> = s
        .events()
        .into_iter()
        .filter_map(|e| serde_json::from_value(e).ok())
        .collect();
    let mut book = RequestBook::default();
    events.iter().for_each(|e| book.apply(e));
    let rebuilt: Vec<Vec<(String, String)>> = events
        .iter()
        .filter_map(|e| match e {
            Event::ModelRequest {
                session,
                request: Some(q),
                ..
            } => Some(
                book.whole(*session, q)
                    .messages
                    .iter()
                    .map(|m| {
                        (
                            m["role"].as_str().unwrap_or_default().to_string(),
                            m["content"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    let sent: Vec<Vec<(String, String)>> = requests
        .iter()
        .map(|r| {
            let mut all = vec![("system".to_string(), system_of(r).to_string())];
            all.extend(history_of(r));
            all
        })
        .collect();
    assert_eq!(rebuilt, sent);
    client.service.cancel().await.unwrap();
    s.stop().await;
}

/// With a durable store (an SQLite file), every turn record the store keeps names the config
/// version it ran on, and a reload does not take the store for a changed setting.
#[tokio::test]
async fn stored_turn_records_name_the_config_version_they_ran_on() {
    use turnscope::store::SessionStore;
    use turnscope::store::sqlite::SqliteStore;

    let up = Upstream::start(vec![Reply::text(&["One."]), Reply::text(&["Two."])]).await;
    let file = std::env::temp_dir().join(format!(
        "turnscope-reload-stored-{}.sqlite",
        std::process::id()
    ));
    let store = format!("[store]\nurl = \"sqlite:{}\"\n", file.display());
    let s = Served::start("stored", &config_with(&up, "Prompt one.", &store)).await;
    let client = Client::connect(&s.url).await;
    let handle = client.start().await;
    assert_eq!(
        client.chat(&handle, "one").await.record["config_version"],
        1
    );

    s.save(&config_with(&up, "Prompt two.", &store));
    let reload = s.reload(1).await;
    assert_eq!(reload["applied"], json!(["bot.system_prompt"]), "{reload}");
    assert!(
        reload["restart"].as_array().is_none_or(Vec::is_empty),
        "{reload}"
    );
    assert_eq!(
        client.chat(&handle, "two").await.record["config_version"],
        2
    );

    // Read while the server holds the file: both turns are there before their replies were.
    let stored = SqliteStore::open_to_read(&file).unwrap();
    let heads = stored.list(10).await.unwrap();
    assert_eq!(heads.len(), 1, "{heads:?}");
    let turns = stored.turns(&heads[0].id, 1).await.unwrap();
    let versions: Vec<_> = turns
        .iter()
        .map(|t| (t.record.line.as_str(), t.record.config_version))
        .collect();
    assert_eq!(versions, [("one", Some(1)), ("two", Some(2))]);
    client.service.cancel().await.unwrap();
    s.stop().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
}

#[tokio::test]
async fn a_turn_in_flight_finishes_on_the_config_it_started_with() {
    // The first response (a clock call) streams slowly, so the reload lands mid-turn.
    let mut calls = match Reply::calls(&[("clock", "{}")]) {
        Reply::Events { data, .. } => data,
        _ => unreachable!(),
    };
    calls.insert(0, content(""));
    let up = Upstream::start(vec![
        Reply::Events {
            data: calls,
            done: true,
            gap: Duration::from_millis(700),
        },
        Reply::calls(&[("clock", "{}")]),
        Reply::text(&["It is late."]),
        Reply::text(&["Short now."]),
    ])
    .await;
    let s = Served::start(
        "inflight",
        &config_with(&up, "Prompt one.", "round_cap = 8\n"),
    )
    .await;
    let client = Arc::new(Client::connect(&s.url).await);
    let handle = client.start().await;
    let in_flight = {
        let (client, handle) = (client.clone(), handle.clone());
        tokio::spawn(async move { client.chat(&handle, "what time is it").await })
    };
    requests_at_least(&up, 1).await;
    s.save(&config_with(&up, "Prompt two.", "round_cap = 1\n"));
    let reload = s.reload(1).await;
    assert_eq!(
        reload["applied"],
        json!(["bot.round_cap", "bot.system_prompt"])
    );
    let turn = in_flight.await.unwrap();
    assert!(!turn.is_error, "{turn:?}");
    assert_eq!(turn.text, "It is late.");
    assert_eq!(turn.record["config_version"], 1);
    // Two rounds: the new round cap of 1 would have made its third request one without tools.
    assert_eq!(turn.record["rounds"], 2);
    let next = client.chat(&handle, "ok").await;
    assert_eq!(next.record["config_version"], 2);
    let requests = up.requests();
    assert_eq!(requests.len(), 4);
    // The in-flight turn's later requests still told the old prompt and offered its tools;
    // the next turn tells the new one.
    for request in &requests[1..3] {
        assert_eq!(system_of(request), "Prompt one.");
        assert!(
            !request["tools"].as_array().unwrap().is_empty(),
            "{request}"
        );
    }
    assert_eq!(system_of(&requests[3]), "Prompt two.");
    s.stop().await;
}

#[tokio::test]
async fn a_bad_edit_keeps_the_running_config_and_says_why_on_one_stderr_line() {
    let up = Upstream::start(vec![Reply::text(&["One."]), Reply::text(&["Two."])]).await;
    let good = config_with(&up, "Kept.", "");
    let s = Served::start("bad", &good).await;
    let client = Client::connect(&s.url).await;
    let handle = client.start().await;

    // Not TOML of the config's shape: the parser's error, with the file, line, column and key.
    s.save(&config_with(&up, "Kept.", "round_cap = \"many\"\n"));
    let refused = s.reload(1).await;
    assert_eq!(refused["outcome"], "refused");
    assert_eq!(refused["version"], 1);
    let line = s
        .stderr_line("turnscope: config not reloaded (file), still version 1: ")
        .await;
    let file = s.config.display().to_string();
    assert!(
        line.ends_with(&format!(
            "{file}:7:13: bot.round_cap: invalid type: string \"many\", expected a whole number, 0 or more"
        )),
        "{line}"
    );
    // A value that breaks a rule: the line of its key.
    s.save(&format!("{good}\n[server]\nsessions = 0\n"));
    s.reload(2).await;
    let refusals = s
        .stderr_lines(
            "turnscope: config not reloaded (file), still version 1: ",
            2,
        )
        .await;
    assert!(
        refusals[1].ends_with(&format!("{file}:9: server.sessions: must be at least 1")),
        "{refusals:?}"
    );
    let lines: Vec<String> = s.stderr.lock().unwrap().clone();
    // Each refusal is one line: nothing of the parser's quoted snippet follows it.
    assert!(
        !lines.iter().any(|l| l.trim_start().starts_with('|')),
        "{lines:?}"
    );

    let reply = client.chat(&handle, "still there?").await;
    assert_eq!(reply.text, "One.");
    assert_eq!(reply.record["config_version"], 1);
    assert_eq!(system_of(&up.requests()[0]), "Kept.");
    s.stop().await;
}

#[tokio::test]
async fn sighup_reloads_and_says_what_needs_a_restart() {
    let up = Upstream::start(vec![Reply::text(&["Fine."])]).await;
    // The config is a link to another file: editing that file is not an event on the config's
    // name, so the watcher does not reload; SIGHUP does.
    let dir = std::env::temp_dir().join(format!("turnscope-reload-hup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let target = dir.join("real.toml");
    std::fs::write(&target, config_with(&up, "Before.", "")).unwrap();
    let link = dir.join("turnscope.toml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let s = Served::start_on(dir, link).await;
    let client = Client::connect(&s.url).await;
    let handle = client.start().await;

    signal(&s.child, "HUP");
    let nothing = s.reload(1).await;
    assert_eq!(
        (&nothing["outcome"], &nothing["cause"]),
        (&json!("unchanged"), &json!("signal"))
    );
    std::fs::write(
        &target,
        config_with(
            &up,
            "After.",
            "[server]\nauth_token = \"new-secret\"\nmax_body_bytes = 1000\n",
        ),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        s.reloads().len(),
        1,
        "the watcher saw no change of the link"
    );
    signal(&s.child, "HUP");
    let applied = s.reload(2).await;
    assert_eq!(applied["cause"], "signal");
    assert_eq!(applied["version"], 2);
    assert_eq!(applied["applied"], json!(["bot.system_prompt"]));
    assert_eq!(
        applied["restart"],
        json!(["server.auth_token", "server.max_body_bytes"])
    );
    let line = s.stderr_line("turnscope: config reloaded (signal)").await;
    assert!(
        line.ends_with(
            "needs a restart, running value kept: server.auth_token, server.max_body_bytes"
        ),
        "{line}"
    );
    assert!(!line.contains("new-secret"), "{line}");
    assert!(
        !std::fs::read_to_string(s.dir.join("events.jsonl"))
            .unwrap()
            .contains("new-secret")
    );
    // Still serving, without the token it was not restarted with, and on the new prompt.
    let reply = client.chat(&handle, "hello").await;
    assert_eq!(reply.text, "Fine.");
    assert_eq!(reply.record["config_version"], 2);
    assert_eq!(system_of(&up.requests()[0]), "After.");
    s.stop().await;
}

#[tokio::test]
async fn a_model_parameter_and_a_new_model_url_apply_from_the_next_turn() {
    let old = Upstream::start(vec![Reply::text(&["Old."])]).await;
    let new = Upstream::start(vec![Reply::text(&["New."]), Reply::text(&["Bridged."])]).await;
    let s = Served::start("model", &config_with(&old, "P.", "")).await;
    let client = Client::connect(&s.url).await;
    let handle = client.start().await;
    assert_eq!(client.chat(&handle, "one").await.text, "Old.");
    s.save(&format!(
        "{}\n[model.extra]\ntop_k = 5\n",
        config_with(&new, "P.", "").replace("name = \"m\"", "name = \"m\"\ntemperature = 0.25")
    ));
    let reload = s.reload(1).await;
    assert_eq!(
        reload["applied"],
        json!(["model.extra.top_k", "model.temperature", "model.url"])
    );
    // The model and its parameters as the console's header shows them after it.
    assert_eq!(reload["model_short"], "m", "{reload}");
    assert!(
        reload["model_params"]
            .as_str()
            .unwrap()
            .contains("temperature=0.25"),
        "{reload}"
    );
    let reply = client.chat(&handle, "two").await;
    assert_eq!(reply.text, "New.");
    let request = &new.requests()[0];
    assert_eq!(request["temperature"], 0.25);
    assert_eq!(request["top_k"], 5);
    assert_eq!(history_of(request).len(), 3, "{request}");
    // The embedded OpenAI bridge follows the bot's model too.
    let answer: Value = reqwest::Client::new()
        .post(s.url.replace("/mcp", "/v1/chat/completions"))
        .json(&json!({"model": "any", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "Bridged.");
    assert_eq!(new.requests()[1]["temperature"], 0.25);
    assert_eq!(old.requests().len(), 1);
    s.stop().await;
}

#[tokio::test]
async fn limits_apply_from_the_next_turn_and_a_lower_session_cap_closes_no_session() {
    use tokio_util::sync::CancellationToken;
    use turnscope::app::App;
    use turnscope::config::Config;
    use turnscope::observe::{Bus, SessionOpener};
    use turnscope::sessions::ChatError;

    let up = Upstream::start(vec![
        Reply::text(&["A."]),
        Reply::text(&["B."]),
        Reply::text(&["C."]),
    ])
    .await;
    let config = |extra: &str| {
        Config::parse(&format!(
            "[server]\nport = 0\nsessions = 3\n{extra}\n[model]\nurl = \"{}\"\n",
            up.base_url()
        ))
        .unwrap()
    };
    let app = App::start(&config(""), Bus::default()).await.unwrap();
    let sessions = &app.sessions;
    let first = sessions.open(SessionOpener::Api).await.unwrap();
    let second = sessions.open(SessionOpener::Api).await.unwrap();
    let cancel = CancellationToken::new();
    for line in ["one", "two"] {
        let reply = sessions.chat_on(&first, line, None, &cancel).await.unwrap();
        assert_eq!(reply.config_version, Some(1));
    }

    let mut lower = config("handle_seconds = 7\n[bot]\nhistory_messages = 2\n");
    lower.server.sessions = 1;
    let event = app.reloader().apply(lower).await;
    assert_eq!(
        event.applied,
        [
            "bot.history_messages",
            "server.handle_seconds",
            "server.sessions"
        ]
    );
    assert_eq!(app.reloader().version(), 2);
    // Two sessions stay open over a cap of one; a third is refused, saying the new cap.
    assert_eq!(sessions.len(), 2);
    match sessions.open(SessionOpener::Api).await {
        Err(ChatError::Cap {
            cap,
            handle_seconds,
        }) => assert_eq!((cap, handle_seconds), (1, 7)),
        other => panic!("expected the cap, got {:?}", other.map(|s| s.number)),
    }
    assert!(sessions.by_number(second.number).is_some());
    // The next turn keeps at most two history messages: the older turns are forgotten.
    let reply = sessions
        .chat_on(&first, "three", None, &cancel)
        .await
        .unwrap();
    assert_eq!(reply.config_version, Some(2));
    let last = up.requests().pop().unwrap();
    assert_eq!(
        history_of(&last),
        [("user".to_string(), "three".to_string())]
    );
    app.shutdown().await;
}
