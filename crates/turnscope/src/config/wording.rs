//! A config error in words a person reads: serde names the Rust type it wanted (`expected
//! u16`, `expected struct ServerSection`), which says nothing to someone editing a TOML file.

/// `message` with serde's Rust type names after "expected" said plainly: `expected u16` →
/// `expected a whole number from 0 to 65535`. Other text is left as it is.
pub(super) fn plain(message: &str) -> String {
    const NAMES: [(&str, &str); 11] = [
        ("u8", "a whole number from 0 to 255"),
        ("u16", "a whole number from 0 to 65535"),
        ("u32", "a whole number, 0 or more"),
        ("u64", "a whole number, 0 or more"),
        ("usize", "a whole number, 0 or more"),
        ("i32", "a whole number"),
        ("i64", "a whole number"),
        ("f32", "a number"),
        ("f64", "a number"),
        ("a sequence", "a list ([...])"),
        ("a map", "a table"),
    ];
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("expected ") {
        let (before, after) = rest.split_at(at + "expected ".len());
        out.push_str(before);
        rest = after;
        let plain = NAMES.iter().find(|(name, _)| {
            rest.strip_prefix(name)
                .is_some_and(|tail| !tail.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
        });
        if let Some((name, words)) = plain {
            out.push_str(words);
            rest = &rest[name.len()..];
        } else if let Some(tail) = rest.strip_prefix("struct ") {
            // `expected struct ServerSection`: a section, whose Rust name means nothing here.
            out.push_str("a table");
            rest = tail.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_');
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::plain;

    #[test]
    fn rust_type_names_after_expected_are_said_plainly() {
        assert_eq!(
            plain("invalid value: integer `70000`, expected u16"),
            "invalid value: integer `70000`, expected a whole number from 0 to 65535"
        );
        assert_eq!(
            plain("invalid type: string \"big\", expected usize\n"),
            "invalid type: string \"big\", expected a whole number, 0 or more\n"
        );
        assert_eq!(
            plain("invalid type: integer `1`, expected struct ServerSection"),
            "invalid type: integer `1`, expected a table"
        );
        assert_eq!(
            plain("invalid type: integer `3`, expected a sequence"),
            "invalid type: integer `3`, expected a list ([...])"
        );
    }

    #[test]
    fn other_text_is_left_alone() {
        for text in [
            "unknown field `bott`, expected one of `server`, `model`",
            "expected u16s or more",
            "invalid type: string \"x\", expected a boolean",
            "no expectation here",
        ] {
            assert_eq!(plain(text), text);
        }
    }
}
