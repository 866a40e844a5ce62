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
    let path = std::env::temp_dir().join(format!("turnscope-copy-{}.{ext}", file_stamp()));
    let saved = std::fs::write(&path, text);
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
    match std::fs::write(&name, text) {
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

    #[test]
    fn file_names_carry_a_readable_time() {
        let stamp = super::file_stamp();
        assert_eq!(stamp.len(), 15, "{stamp}");
        assert_eq!(&stamp[8..9], "-", "{stamp}");
        assert!(stamp.starts_with("20"), "{stamp}");
    }
}
