//! The store when things go wrong, on the real binary: `kill -9` in the middle of a load (50
//! sessions × 20 turns: every reply a caller received is in the store, each turn in flight
//! is reported once on its handle's next call and never answered), and bad files at start
//! (damaged, not a store, from a newer turnscope, read-only: exit 2 with the file named and
//! what to do) and while running (the file stops taking writes, or runs out of room: the
//! server goes on from memory and says so on stderr and in `/healthz`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use turnscope::store::SessionStore;
use turnscope::store::sqlite::SqliteStore;

use crate::store::{scratch, start, store_url, turnscope};
use crate::support::binary::{WAIT, terminate, url_in};
use crate::support::mcp::{Client, Outcome, params};

const SESSIONS: usize = 50;
const TURNS: usize = 20;

/// What the load's callers saw: per handle, the replies received (turn, text) and the line
/// whose call was still out.
#[derive(Default)]
struct Seen {
    received: HashMap<String, Vec<(u64, String)>>,
    outstanding: HashMap<String, String>,
}

/// The first line of a child's stderr holding `needle` (empty when stderr ends first).
async fn stderr_line_with(
    stderr: &mut tokio::io::Lines<BufReader<tokio::process::ChildStderr>>,
    needle: &str,
) -> String {
    tokio::time::timeout(WAIT, async {
        while let Ok(Some(line)) = stderr.next_line().await {
            if line.contains(needle) {
                return line;
            }
        }
        String::new()
    })
    .await
    .unwrap()
}

async fn call(client: &Client, p: CallToolRequestParams) -> Option<Outcome> {
    client.service.call_tool(p).await.ok().map(Outcome::from)
}

#[tokio::test]
async fn kill_9_mid_load_loses_no_received_turn_and_reports_each_turn_in_flight_once() {
    let dir = scratch("crash");
    let store = store_url(&dir);
    let path = dir.join("sessions.sqlite3");
    let flags = ["--pace", "0.004", "--sessions", "64"];
    let (mut server, ready) = start(&store, &flags).await;
    let url = url_in(&ready, "/mcp");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut load = Vec::new();
    for s in 0..SESSIONS {
        let url = url.clone();
        let seen = seen.clone();
        load.push(tokio::spawn(async move {
            let client = Client::connect(&url).await;
            let handle = client.start().await;
            for t in 0..TURNS {
                let line = format!("session {s} line {t}");
                seen.lock()
                    .unwrap()
                    .outstanding
                    .insert(handle.clone(), line.clone());
                let args = json!({"handle": handle, "line": line});
                let Some(out) = call(&client, params("chat", args)).await else {
                    return; // the server is gone
                };
                assert!(!out.is_error, "{}", out.text);
                let turn = out.record["turn"].as_u64().unwrap();
                let mut seen = seen.lock().unwrap();
                seen.outstanding.remove(&handle);
                seen.received
                    .entry(handle.clone())
                    .or_default()
                    .push((turn, out.text));
            }
        }));
    }
    // Half-way through the load, the process dies with no chance to write anything more.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let received: usize = seen.lock().unwrap().received.values().map(Vec::len).sum();
        if received >= SESSIONS * TURNS / 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the load stalled at {received}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Then, as soon as the file holds a line marked in flight (read as the running server
    // writes it): on a busy machine every turn out at the kill could still be waiting for its
    // mark to be written, and the kill would test no report of a turn lost in flight.
    let reader = SqliteStore::open_to_read(&path).unwrap();
    'marked: loop {
        let handles: Vec<String> = seen.lock().unwrap().received.keys().cloned().collect();
        for handle in handles {
            let id = reader.key().id_of(&uuid::Uuid::parse_str(&handle).unwrap());
            if let Ok(Some(head)) = reader.head(&id).await
                && head.in_flight.is_some()
            {
                break 'marked;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no line was ever marked in flight"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    server.start_kill().unwrap();
    reader.close().await;
    server.wait().await.unwrap();
    // A call cut off by the kill may never hear back (the client's transport retries): what
    // counts is what each caller had received, recorded above. Callers get a moment to see
    // the end, then stop.
    tokio::time::sleep(Duration::from_secs(1)).await;
    for task in &load {
        task.abort();
    }
    for task in load {
        let _ = task.await;
    }
    let seen = Arc::try_unwrap(seen).ok().unwrap().into_inner().unwrap();
    let received: usize = seen.received.values().map(Vec::len).sum();
    assert!(
        received < SESSIONS * TURNS,
        "the kill came before the load's end"
    );

    // What the file holds, read as a later process would.
    let file = SqliteStore::open_to_read(&path).unwrap();
    let mut marks = HashMap::new();
    for (handle, replies) in &seen.received {
        let id = file.key().id_of(&uuid::Uuid::parse_str(handle).unwrap());
        let head = file
            .head(&id)
            .await
            .unwrap()
            .expect("the session is stored");
        let log = file.turns(&id, 0).await.unwrap();
        for (turn, text) in replies {
            let stored = log.iter().find(|t| t.record.id == *turn);
            let stored = stored.unwrap_or_else(|| panic!("received turn {turn} of {handle} lost"));
            assert_eq!(stored.record.reply.trim(), text, "turn {turn} of {handle}");
        }
        if let Some(mark) = head.in_flight {
            marks.insert(handle.clone(), mark);
        }
    }
    file.close().await;
    // Every mark is a line whose caller got no reply.
    for (handle, mark) in &marks {
        assert_eq!(seen.outstanding.get(handle), Some(&mark.line), "{handle}");
    }
    assert!(!marks.is_empty(), "some turns were in flight at the kill");

    // After the restart each of them is reported on its handle's next call, once.
    let (mut again, ready) = start(&store, &flags).await;
    let client = Client::connect(&url_in(&ready, "/mcp")).await;
    for handle in seen.received.keys() {
        let first = client.chat(handle, "").await;
        let second = client.chat(handle, "").await;
        assert!(!first.is_error && !second.is_error, "{}", first.text);
        assert_eq!(
            second.record["end_reason"],
            Value::Null,
            "reported once: {handle}"
        );
        match marks.get(handle) {
            Some(mark) => {
                assert_eq!(first.record["end_reason"], "restarted", "{handle}");
                assert_eq!(first.record["line"], mark.line.as_str());
                assert_eq!(first.record["reply"], "", "never answered");
                assert!(
                    first
                        .text
                        .contains(&format!("\"{}\": it got no reply", mark.line)),
                    "{}",
                    first.text
                );
            }
            None => assert_eq!(first.record["end_reason"], Value::Null, "{handle}"),
        }
    }
    assert!(terminate(&mut again).await.success());
    let _ = std::fs::remove_dir_all(dir);
}

/// Starts the binary on `store`; it must exit with code 2 and a message naming `file` and
/// containing `advice`.
async fn refused(store: &str, file: &std::path::Path, advice: &str) {
    let (code, out, err) = turnscope(&["--headless", "--port", "0", "--store", store], &[]).await;
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains(&file.display().to_string()) && err.contains(advice),
        "{err}"
    );
    assert!(!out.contains(" ready: "), "{out}");
}

#[tokio::test]
async fn bad_store_files_stop_the_start_with_exit_2_and_say_what_to_do() {
    let dir = scratch("bad");
    // Damaged: not a database at all.
    let damaged = dir.join("damaged.sqlite3");
    std::fs::write(&damaged, vec![b'x'; 8192]).unwrap();
    refused(
        &format!("sqlite:{}", damaged.display()),
        &damaged,
        "Move it aside",
    )
    .await;
    assert_eq!(
        std::fs::read(&damaged).unwrap(),
        vec![b'x'; 8192],
        "left as it was"
    );
    // Someone else's database.
    let foreign = dir.join("foreign.sqlite3");
    {
        let conn = rusqlite::Connection::open(&foreign).unwrap();
        conn.execute_batch("CREATE TABLE invoices (id INTEGER)")
            .unwrap();
    }
    let before = std::fs::read(&foreign).unwrap();
    refused(
        &format!("sqlite:{}", foreign.display()),
        &foreign,
        "not a turnscope session store",
    )
    .await;
    // Byte for byte, its journal mode included (it was switched to WAL before the check).
    assert!(std::fs::read(&foreign).unwrap() == before, "left as it was");
    assert!(!dir.join("foreign.sqlite3-wal").exists());
    // From a newer turnscope.
    let newer = dir.join("newer.sqlite3");
    {
        let store = SqliteStore::open(&newer).unwrap();
        store.close().await;
        let conn = rusqlite::Connection::open(&newer).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    refused(
        &format!("sqlite:{}", newer.display()),
        &newer,
        "written by a newer turnscope (schema version 99",
    )
    .await;
    let _ = std::fs::remove_dir_all(dir);
}

/// Makes `path` refuse writes: `chmod` for a normal user, the immutable flag for root (whom
/// permissions do not stop). Returns a guard that undoes it, or `None` when neither works.
fn read_only(path: &std::path::Path) -> Option<impl Drop> {
    struct Undo(std::path::PathBuf, bool);
    impl Drop for Undo {
        fn drop(&mut self) {
            if self.1 {
                let _ = std::process::Command::new("chattr")
                    .arg("-i")
                    .arg(&self.0)
                    .status();
            }
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o644));
        }
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444)).ok()?;
    if std::fs::OpenOptions::new().append(true).open(path).is_err() {
        return Some(Undo(path.to_path_buf(), false));
    }
    let immutable = std::process::Command::new("chattr")
        .arg("+i")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    let undo = Undo(path.to_path_buf(), immutable);
    (immutable && std::fs::OpenOptions::new().append(true).open(path).is_err()).then_some(undo)
}

#[tokio::test]
async fn a_read_only_store_file_stops_the_start_with_exit_2() {
    let dir = scratch("readonly");
    let file = dir.join("sessions.sqlite3");
    let store = SqliteStore::open(&file).unwrap();
    store.close().await;
    let Some(_undo) = read_only(&file) else {
        panic!(
            "cannot make {} read-only here (neither chmod nor chattr +i stops writes)",
            file.display()
        );
    };
    refused(
        &format!("sqlite:{}", file.display()),
        &file,
        "cannot be written",
    )
    .await;
    drop(_undo);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_store_that_stops_taking_writes_while_running_degrades_to_memory_loudly() {
    let dir = scratch("degrade");
    let store = store_url(&dir);
    let (mut server, ready) = start(&store, &["--pace", "0"]).await;
    let mut stderr = BufReader::new(server.stderr.take().unwrap()).lines();
    let url = url_in(&ready, "/mcp");
    let client = Client::connect(&url).await;
    let handle = client.start().await;
    client.chat(&handle, "one").await;
    // The WAL is where every commit goes first: it stops taking writes.
    let wal = dir.join("sessions.sqlite3-wal");
    let Some(undo) = read_only(&wal) else {
        panic!("cannot make {} refuse writes here", wal.display());
    };
    let answer = client.chat(&handle, "what did I say").await;
    assert!(!answer.is_error, "{}", answer.text);
    assert_eq!(
        answer.text, "Earlier you said: one",
        "the session goes on from memory"
    );
    let health: Value = reqwest::get(url.replace("/mcp", "/healthz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["store"]["status"], "degraded");
    // What is said now lives in memory only (it said durable: true).
    assert_eq!(health["store"]["durable"], false, "{health}");
    assert!(
        health["store"]["error"]
            .as_str()
            .unwrap()
            .contains("sessions.sqlite3"),
        "{health}"
    );
    let said = stderr_line_with(&mut stderr, "Serving from memory").await;
    assert!(said.contains(&store), "{said}");
    // New conversations still work.
    let other = client.start().await;
    assert_eq!(client.chat(&other, "two").await.text, "You said: two");
    drop(undo);
    server.start_kill().unwrap();
    let _ = server.wait().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// The file store runs out of room while the server runs: a real limit on the size of the
/// files the server may write (`ulimit -f`, SIGXFSZ ignored, so a write past it fails with
/// EFBIG; SQLite reports that as a disk I/O error, where a full disk's ENOSPC is "full"), long
/// lines until the WAL reaches it. Every chat is answered, the server goes on from memory,
/// says so on stderr and in `/healthz` naming the file, and never exits.
#[tokio::test]
async fn a_store_whose_disk_fills_while_running_serves_from_memory_loudly() {
    let dir = scratch("full");
    let store = store_url(&dir);
    // 1 MiB: enough for the file and the first turns, not for many 16 KB lines.
    let script = r#"trap "" XFSZ; ulimit -f 2048; exec "$0" "$@""#;
    let mut server = tokio::process::Command::new("sh")
        .args(["-c", script, env!("CARGO_BIN_EXE_turnscope")])
        .args([
            "--headless",
            "--port",
            "0",
            "--pace",
            "0",
            "--store",
            &store,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let ready = crate::support::binary::ready_line(&mut server).await;
    let mut stderr = BufReader::new(server.stderr.take().unwrap()).lines();
    let url = url_in(&ready, "/mcp");
    let health_url = url.replace("/mcp", "/healthz");
    let client = Client::connect(&url).await;
    let handle = client.start().await;
    let long = "x".repeat(16 * 1024);
    let mut degraded_after = None;
    for turn in 1..=200u32 {
        let line = format!("line {turn} {long}");
        let answer = client.chat(&handle, &line).await;
        assert!(!answer.is_error, "turn {turn}: {}", answer.text);
        assert!(
            answer.text.contains(&format!("line {turn} ")),
            "turn {turn}"
        );
        let health: Value = reqwest::get(&health_url)
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if health["store"]["status"] == "degraded" {
            assert_eq!(health["status"], "degraded", "{health}");
            let error = health["store"]["error"].as_str().unwrap_or_default();
            assert!(error.contains("sessions.sqlite3"), "{health}");
            degraded_after = Some(turn);
            break;
        }
    }
    let turn = degraded_after.expect("the file reached its 1 MiB limit within 200 turns of 16 KB");
    assert!(turn > 1, "the store took writes before it filled");
    let said = stderr_line_with(&mut stderr, "Serving from memory").await;
    assert!(said.contains(&store), "{said}");
    // The conversation goes on from memory, and new ones open.
    let recall = client.chat(&handle, "what did I say").await;
    assert!(
        recall.text.starts_with("Earlier you said: line "),
        "{}",
        recall.text
    );
    let other = client.start().await;
    assert_eq!(client.chat(&other, "two").await.text, "You said: two");
    assert!(
        server.try_wait().unwrap().is_none(),
        "the server never exits"
    );
    server.start_kill().unwrap();
    let _ = server.wait().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// `sessions list` and `export` only read: they work on a store where SQLite cannot make the
/// shared-memory index WAL mode reads through (a read-only mount, a backup; here its name is
/// a link into a folder that does not exist, which needs no root), by reading the file as
/// immutable (before: "unable to open database file", told to make the folder writable).
#[cfg(unix)]
#[tokio::test]
async fn a_store_that_cannot_be_written_beside_is_still_listed_and_exported() {
    let dir = scratch("read-only-beside");
    let file = dir.join("sessions.sqlite3");
    let store = format!("sqlite:{}", file.display());
    let (mut server, ready) = start(&store, &["--pace", "0"]).await;
    let client = Client::connect(&url_in(&ready, "/mcp")).await;
    let handle = client.start().await;
    client.chat(&handle, "kept on a backup").await;
    assert!(terminate(&mut server).await.success());
    let shm = dir.join("sessions.sqlite3-shm");
    let _ = std::fs::remove_file(&shm);
    std::os::unix::fs::symlink(dir.join("no-such-folder").join("shm"), &shm).unwrap();
    let (code, out, err) = turnscope(&["sessions", "list", "--store", &store], &[]).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains(&handle[..8]), "{out}");
    let (code, out, err) = turnscope(
        &["sessions", "export", &handle[..8], "--store", &store],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("kept on a backup"), "{out}");
    let _ = std::fs::remove_dir_all(dir);
}

/// One turn record damaged in the file (edited by hand, a bad page): the conversation's next
/// chat tells its client only that it cannot be read back and to call start (not the server's
/// file path, nor advice to move the store aside, which a client cannot act on), and the
/// server's stderr names the conversation and the damaged turn for whoever runs it (tour K:
/// the client got the start-up advice and the operator was told nothing). The advice, there
/// and from `sessions export`, is to delete that one conversation, which keeps the others: it
/// was to move the whole file aside, losing every healthy conversation too (tour U #5).
#[tokio::test]
async fn a_damaged_turn_record_is_said_to_the_operator_and_the_client_is_told_to_start() {
    let dir = scratch("damaged-turn");
    let file = dir.join("sessions.sqlite3");
    let store = format!("sqlite:{}", file.display());
    let (mut server, ready) = start(&store, &["--pace", "0"]).await;
    let client = Client::connect(&url_in(&ready, "/mcp")).await;
    let handle = client.start().await;
    for line in ["one", "two", "three"] {
        client.chat(&handle, line).await;
    }
    let healthy = client.start().await;
    client.chat(&healthy, "keep me").await;
    assert!(terminate(&mut server).await.success());
    {
        let conn = rusqlite::Connection::open(&file).unwrap();
        let changed = conn
            .execute(
                "UPDATE turns SET record = substr(record, 1, 100) WHERE turn = 2",
                [],
            )
            .unwrap();
        assert_eq!(changed, 1);
    }
    let (mut server, ready) = start(&store, &["--pace", "0"]).await;
    let client = Client::connect(&url_in(&ready, "/mcp")).await;
    let answer = client.chat(&handle, "are you there").await;
    assert!(answer.is_error, "{}", answer.text);
    assert!(
        answer.text.contains("could not be read back")
            && answer
                .text
                .contains("Call chat again in a while; if it still fails, call start")
            && !answer.text.contains("sqlite3")
            && !answer.text.contains("--store"),
        "{}",
        answer.text
    );
    let prefix = &handle[..8];
    let delete = format!("turnscope sessions delete {prefix} --store {store}");
    let mut stderr = BufReader::new(server.stderr.take().unwrap()).lines();
    let said = stderr_line_with(&mut stderr, "could not be read back").await;
    assert!(
        said.contains(&format!("the stored conversation {prefix}"))
            && said.contains("the record of its turn 2 does not parse")
            && said.contains(&format!("the record of conversation {prefix} is damaged"))
            && said.contains(&delete)
            && said.contains("the others are kept"),
        "{said}"
    );
    // The healthy conversation goes on.
    let answer = client.chat(&healthy, "still there?").await;
    assert!(!answer.is_error, "{}", answer.text);
    assert!(terminate(&mut server).await.success());

    // `sessions export` of it says the same; the advice, followed, keeps the other.
    let (code, _, err) = turnscope(
        &["sessions", "export", prefix, "--store", &store, "-o", "-"],
        &[],
    )
    .await;
    assert_ne!(code, 0, "{err}");
    assert!(err.contains(&delete), "{err}");
    let (code, out, err) = turnscope(&["sessions", "delete", prefix, "--store", &store], &[]).await;
    assert_eq!(code, 0, "{out}\n{err}");
    let (code, out, err) = turnscope(&["sessions", "list", "--store", &store], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&healthy[..8]) && !out.contains(prefix),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
