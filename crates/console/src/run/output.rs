//! What the console writes out of itself, and the notice that says where: a copy (to the
//! clipboard through OSC 52, and always to a file beside it) and the `e`/`t` exports, named
//! with a time a person reads.

use crate::view::console::Notice;

/// Copies `text` twice over: to the clipboard through the terminal (OSC 52, which a terminal or
/// tmux may silently refuse), and to a file in the temporary folder, which always works. The
/// notice says both, and what tmux needs.
pub fn copy(what: &str, text: &str) -> Notice {
    use std::io::Write;
    let mut out = std::io::stdout();
    let sent = out
        .write_all(crate::run::clipboard::osc52(text).as_bytes())
        .and_then(|()| out.flush());
    let ext = if what.ends_with("JSON") { "json" } else { "sh" };
    let (path, saved) = save_copy(&file_stamp(), ext, text);
    let tmux = if std::env::var_os("TMUX").is_some() {
        "; under tmux it needs `set -g set-clipboard on`"
    } else {
        ""
    };
    match (sent, saved) {
        (Ok(()), Ok(())) => Notice {
            text: format!(
                "{what} saved to {} and copied (OSC 52{tmux})",
                path.display()
            ),
            error: false,
        },
        (Err(_), Ok(())) => Notice {
            text: format!("{what} saved to {}", path.display()),
            error: false,
        },
        (Ok(()), Err(e)) => Notice {
            text: format!(
                "{what} copied (OSC 52{tmux}); cannot save it to {}: {e}",
                path.display()
            ),
            error: true,
        },
        (Err(e), Err(_)) => Notice {
            text: format!("{what}: cannot write to the terminal ({e}) nor to a file"),
            error: true,
        },
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
