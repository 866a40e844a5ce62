//! What the console writes out of itself, and the notice that says where: a copy (to the
//! clipboard through OSC 52, and always to a file beside it) and the `e`/`t` exports, named
//! with a time a person reads.

use crate::view::console::Notice;

/// Copies `text` twice over: to the clipboard through the terminal (OSC 52, which a terminal or
/// tmux may silently refuse), and to a file in the temporary folder, which always works. The
/// notice says both ([`copied`]).
pub fn copy(what: &str, text: &str) -> Notice {
    let sent = send_osc52(text);
    let ext = if what.ends_with("JSON") { "json" } else { "sh" };
    let saved = save_copy(&file_stamp(), ext, text);
    copied(what, sent, Some(saved), in_tmux())
}

/// Copies a session's handle to the clipboard (OSC 52) only: a handle is a secret, never
/// written to a file. The notice is said as every copy's ([`copied`]).
pub fn copy_handle(what: &str, handle: &str) -> Notice {
    copied(what, send_osc52(handle), None, in_tmux())
}

fn send_osc52(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout();
    out.write_all(crate::run::clipboard::osc52(text).as_bytes())
        .and_then(|()| out.flush())
}

fn in_tmux() -> bool {
    std::env::var_os("TMUX").is_some()
}

/// The notice of every copy the console makes: whether it reached the terminal (`sent`) and,
/// for a copy also saved to a file, where (`saved`). OSC 52 is said one way everywhere: a
/// terminal may refuse it, and tmux (`tmux`: the console runs under it) passes it on only
/// with `set -g set-clipboard on`.
pub fn copied(
    what: &str,
    sent: std::io::Result<()>,
    saved: Option<(std::path::PathBuf, std::io::Result<()>)>,
    tmux: bool,
) -> Notice {
    let osc52 = if tmux {
        "OSC 52; under tmux it needs `set -g set-clipboard on`"
    } else {
        "OSC 52; a terminal may refuse it"
    };
    let (text, error) = match (sent, saved) {
        (Ok(()), Some((path, Ok(())))) => (
            format!("{what} saved to {} and copied ({osc52})", path.display()),
            false,
        ),
        (Ok(()), None) => (format!("{what} copied ({osc52})"), false),
        (Err(_), Some((path, Ok(())))) => (format!("{what} saved to {}", path.display()), false),
        (Ok(()), Some((path, Err(e)))) => (
            format!(
                "{what} copied ({osc52}); cannot save it to {}: {e}",
                path.display()
            ),
            true,
        ),
        (Err(e), Some((_, Err(_)))) => (
            format!("{what}: cannot write to the terminal ({e}) nor to a file"),
            true,
        ),
        (Err(e), None) => (
            format!("{what} not copied: cannot write to the terminal ({e})"),
            true,
        ),
    };
    Notice { text, error }
}

/// The line the console leaves on stderr when it quits: where the conversations were kept
/// (its store, and the command that lists them), or that nothing was (a memory store, or one
/// whose writes stopped while it ran).
pub fn kept_note(store: &turnscope::sessions::StoreStatus) -> String {
    let url = &store.url;
    match (&store.degraded, store.durable) {
        // A URL shown with its credentials masked cannot be pasted: the person puts theirs back.
        (_, true) if url.contains("***") => format!(
            "turnscope: the conversations are kept in {url} (`turnscope sessions list --store \
             URL`, its password put back, lists them)"
        ),
        (_, true) => format!(
            "turnscope: the conversations are kept in {url} (`turnscope sessions list --store \
             {url}` lists them)"
        ),
        (Some(why), false) => format!(
            "turnscope: writes to {url} stopped while the console ran ({why}): the latest \
             conversations were not kept"
        ),
        (None, false) => format!(
            "turnscope: nothing was kept: the store is {url}, so the conversations ended with \
             the console"
        ),
    }
}

/// The time now as a file name part a person reads: `20261201-151513` (UTC).
/// Saves a copy into the temporary folder as `turnscope-copy-STAMP.EXT` (`-2`, `-3`… after
/// the stamp when copies of one second meet): a new file, its user's alone (it may hold a
/// whole conversation, in a folder others share). Where, and whether it was saved.
fn save_copy(stamp: &str, ext: &str, text: &str) -> (std::path::PathBuf, std::io::Result<()>) {
    let dir = std::env::temp_dir();
    let mut n = 1;
    loop {
        let name = match n {
            1 => format!("turnscope-copy-{stamp}.{ext}"),
            n => format!("turnscope-copy-{stamp}-{n}.{ext}"),
        };
        let path = dir.join(name);
        match turnscope::private_files::write_new(&path, text.as_bytes()) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
            saved => return (path, saved),
        }
    }
}

fn file_stamp() -> String {
    let secs = turnscope::observe::event::now_us() / 1_000_000;
    let digits: String = turnscope::tools::builtin::format_utc(secs)
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    format!(
        "{}-{}",
        &digits[..8.min(digits.len())],
        &digits[8.min(digits.len())..]
    )
}

/// Writes an export (`e`: the report, `t`: a test case) to the working folder, named after the
/// session and the time, and says where.
pub fn export_to_file(session: u64, text: &str, ext: &str) -> Notice {
    let name = format!("turnscope-session-{session}-{}.{ext}", file_stamp());
    // Owner-only, as the store: an export is a conversation.
    let written = turnscope::private_files::create(std::path::Path::new(&name))
        .and_then(|mut file| std::io::Write::write_all(&mut file, text.as_bytes()));
    match written {
        Ok(()) => Notice {
            text: if ext == "test.toml" {
                // Short enough for the input pane: `turnscope test FILE` runs it.
                format!("#{session} test case: {name}")
            } else {
                format!("#{session} exported to {name}")
            },
            error: false,
        },
        Err(e) => Notice {
            text: format!("cannot write {name}: {e}"),
            error: true,
        },
    }
}

#[cfg(test)]
mod tests {
    /// Quitting leaves one line on stderr: where the conversations are, or that nothing was
    /// kept (it left nothing: tour F3).
    #[test]
    fn the_note_left_at_quit_says_where_the_conversations_are() {
        use turnscope::sessions::StoreStatus;
        let file = StoreStatus {
            url: "sqlite:/tmp/s.sqlite3".into(),
            durable: true,
            degraded: None,
            warning: None,
        };
        let said = super::kept_note(&file);
        assert_eq!(
            said,
            "turnscope: the conversations are kept in sqlite:/tmp/s.sqlite3 (`turnscope sessions \
             list --store sqlite:/tmp/s.sqlite3` lists them)"
        );
        // A Redis URL shown masked is not pasted as it is.
        let redis = StoreStatus {
            url: "redis://***@127.0.0.1:6379/0".into(),
            ..file.clone()
        };
        let said = super::kept_note(&redis);
        assert!(
            said.contains("`turnscope sessions list --store URL`, its password put back"),
            "{said}"
        );
        let memory = StoreStatus {
            url: "memory".into(),
            durable: false,
            ..file
        };
        let said = super::kept_note(&memory);
        assert!(said.starts_with("turnscope: nothing was kept"), "{said}");
        assert!(!said.contains("sessions list"), "{said}");
        assert!(!said.contains('\n'), "one line: {said}");
    }

    #[test]
    fn a_copy_is_saved_to_a_file_the_notice_names() {
        let notice = super::copy("model request 1 of turn 2 as JSON", "{\"model\": \"m\"}");
        assert!(!notice.error, "{}", notice.text);
        let path = notice
            .text
            .split("saved to ")
            .nth(1)
            .and_then(|rest| rest.split(" and copied").next())
            .expect("the notice names the file");
        assert!(path.ends_with(".json"), "{path}");
        assert_eq!(
            std::fs::read_to_string(path).expect("the file is there"),
            "{\"model\": \"m\"}"
        );
        let _ = std::fs::remove_file(path);
    }

    /// Every copy says OSC 52 the same way, whatever it copied (a handle `y`, a request `c`
    /// said it two ways before: tour F3).
    #[test]
    fn every_copy_notice_says_osc52_one_way() {
        use std::path::PathBuf;
        for tmux in [false, true] {
            let handle = super::copied("#3's handle", Ok(()), None, tmux);
            let request = super::copied(
                "model request 1 of turn 2 as curl",
                Ok(()),
                Some((PathBuf::from("/tmp/c.sh"), Ok(()))),
                tmux,
            );
            let said = |n: &crate::view::console::Notice| {
                n.text
                    .split_once("(OSC 52")
                    .map(|(_, rest)| rest.to_string())
                    .expect("says OSC 52")
            };
            assert_eq!(said(&handle), said(&request), "tmux {tmux}");
            assert_eq!(
                said(&handle).contains("set-clipboard on"),
                tmux,
                "{}",
                handle.text
            );
            assert_eq!(handle.text.split(" (").next(), Some("#3's handle copied"));
        }
    }

    /// Copies of one second each get a file of their own, never one over another (nor over
    /// a file someone else put at the name), its user's alone.
    #[test]
    fn copies_of_one_second_are_kept_apart_and_private() {
        let stamp = format!("test-{}", std::process::id());
        let (first, saved) = super::save_copy(&stamp, "sh", "one");
        saved.expect("saved");
        let (second, saved) = super::save_copy(&stamp, "sh", "two");
        saved.expect("saved");
        assert_ne!(first, second);
        assert!(second.to_string_lossy().ends_with("-2.sh"), "{second:?}");
        assert_eq!(std::fs::read_to_string(&first).unwrap(), "one");
        assert_eq!(std::fs::read_to_string(&second).unwrap(), "two");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&second).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let _ = std::fs::remove_file(first);
        let _ = std::fs::remove_file(second);
    }

    #[test]
    fn file_names_carry_a_readable_time() {
        let stamp = super::file_stamp();
        assert_eq!(stamp.len(), 15, "{stamp}");
        assert_eq!(&stamp[8..9], "-", "{stamp}");
        assert!(stamp.starts_with("20"), "{stamp}");
    }
}
