//! `${NAME}` placeholders: the one rule every configured string follows (MCP server URLs,
//! headers and environment, Xiaozhi endpoints). `$$` is a literal `$`; a `$` followed by
//! anything else stays as written. A variable that is unset or empty is an error naming it, so
//! a missing token never becomes an empty credential.

/// `text` as an environment variable's name: ASCII letters and digits upper-cased, anything
/// else `_` (a Xiaozhi bridge's `MCP_ENDPOINT_<NAME>`, a header's `$NAME` in a copied curl).
pub(crate) fn env_var_name(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Replaces each `${NAME}` in `text` with `lookup(NAME)`.
///
/// # Errors
/// A placeholder that is not closed or names no valid variable, or a variable `lookup` does
/// not know or knows as empty; the message says which and what to do.
pub(crate) fn expand_env(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        if let Some(after) = tail.strip_prefix('$') {
            out.push('$');
            rest = after;
        } else if let Some(body) = tail.strip_prefix('{') {
            let Some(end) = body.find('}') else {
                return Err(format!(
                    "a `${{` placeholder is not closed in {text:?}; write ${{NAME}} (or $$ for a literal $)"
                ));
            };
            let name = &body[..end];
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid {
                return Err(format!(
                    "`${{{name}}}` is not a variable name; use letters, digits and _ (not first)"
                ));
            }
            match lookup(name) {
                Some(value) if !value.is_empty() => out.push_str(&value),
                // Empty is refused as unset is, so a missing token never becomes an empty
                // credential; said as what it is.
                Some(_) => {
                    return Err(format!(
                        "the environment variable {name} is set but empty; give it a value or remove ${{{name}}}"
                    ));
                }
                None => {
                    return Err(format!(
                        "the environment variable {name} is not set; export it or remove ${{{name}}}"
                    ));
                }
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = tail;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// `text` written so that [`expand_env`] gives it back as it is: every `$` doubled, so a
/// `${NAME}` someone typed stays that text and never reads the environment (an exported test
/// case holds what a client typed, and is run where secrets live, in CI).
pub(crate) fn escape_placeholders(text: &str) -> String {
    text.replace('$', "$$")
}

/// Checks that every `$` in `text` starts a well-formed `${NAME}` placeholder or is `$$`,
/// without reading the environment (config files are checked when they are read, expanded
/// when a server starts).
///
/// # Errors
/// As [`expand_env`], for the syntax only.
pub(crate) fn check_placeholders(text: &str) -> Result<(), String> {
    expand_env(text, &|_| Some("set".into())).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_expand_from_the_environment() {
        let env = |name: &str| (name == "TOKEN").then(|| "s3cret".to_string());
        assert_eq!(
            expand_env("Bearer ${TOKEN}", &env).unwrap(),
            "Bearer s3cret"
        );
        assert_eq!(
            expand_env("cost: $$5 and $x", &env).unwrap(),
            "cost: $5 and $x"
        );
        let e = expand_env("${MISSING}", &env).unwrap_err();
        assert!(e.contains("MISSING is not set"), "{e}");
        assert!(
            expand_env("${1X}", &env)
                .unwrap_err()
                .contains("not a variable name")
        );
        assert!(check_placeholders("${OK_1} $$ $").is_ok());
    }

    #[test]
    fn escaped_text_expands_back_to_itself() {
        let env = |_: &str| Some("s3cret".to_string());
        for text in [
            "${GITHUB_TOKEN}",
            "$$ and $x and ${",
            "cost: $5",
            "plain",
            "$",
        ] {
            let escaped = escape_placeholders(text);
            assert_eq!(expand_env(&escaped, &env).unwrap(), text, "{escaped}");
        }
    }

    /// Refused as an unset one is (no empty credential), and said as empty (tour M: "not
    /// set" of a variable that was set).
    #[test]
    fn an_empty_variable_is_refused_as_empty() {
        let env = |_: &str| Some(String::new());
        let e = expand_env("wss://h/?token=${TOKEN}", &env).unwrap_err();
        assert!(e.contains("TOKEN is set but empty"), "{e}");
    }
}
