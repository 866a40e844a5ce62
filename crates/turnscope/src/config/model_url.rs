//! The model server's URL (`[model] url`, `--model-url`, `OPENAI_BASE_URL`) is an `http(s)`
//! URL and carries no user info: a `user:password@` before the host would be shown wherever
//! the URL is (the console's header, the ready line, logs, recorded requests, a copied curl)
//! and can disguise the real host, as the tool sources' policy says of MCP server URLs.

/// Checks that `url` (the value of `key`) is `http://` or `https://` and has no user info
/// before its host.
///
/// # Errors
/// No scheme, or another one (every turn would fail: said at start, not at the first turn);
/// or the URL names a user (with or without a password), and the message says where
/// credentials go instead. User info is never echoed.
pub fn check_model_url(key: &str, url: &str) -> Result<(), String> {
    const EXAMPLES: &str = "e.g. http://localhost:11434/v1 for Ollama, http://127.0.0.1:8080/v1 \
                            for llama-server, https://api.openai.com/v1";
    if url.trim().is_empty() {
        return Err(format!(
            "{key} is empty; give the model server's URL ({EXAMPLES}), or leave it out for the \
             embedded scripted model"
        ));
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!(
            "{key}: {} has no scheme; the model server's URL starts with http:// or https:// \
             and usually ends in /v1 ({EXAMPLES})",
            without_user_info(url)
        ));
    };
    if !matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") {
        return Err(format!(
            "{key}: {scheme}://{} is not an http(s) URL; the model server's URL starts with \
             http:// or https:// ({EXAMPLES})",
            without_user_info(rest)
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if !authority.contains('@') {
        return Ok(());
    }
    let host = authority.rsplit('@').next().unwrap_or_default();
    Err(format!(
        "{key}: {scheme}://***@{host}… carries a user name or password before the host, which would be shown \
         wherever the URL is (console, logs, recorded requests) and can disguise the real host; give the \
         URL without it and the credentials as a key (OPENAI_API_KEY) or a header ([model] headers = \
         {{ Authorization = \"Basic ${{MODEL_AUTH}}\" }})"
    ))
}

/// `text` (a URL without its scheme) with a `user:password@` before the host masked.
fn without_user_info(text: &str) -> String {
    let authority = text.split(['/', '?', '#']).next().unwrap_or_default();
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}…"),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_is_refused_and_never_echoed() {
        assert!(check_model_url("model.url", "https://llm.example/v1").is_ok());
        assert!(check_model_url("model.url", "http://127.0.0.1:8080/v1?x=a@b").is_ok());
        let e = check_model_url("model.url", "https://alice:pa55@llm.example/v1").unwrap_err();
        assert!(e.starts_with("model.url: https://***@llm.example"), "{e}");
        assert!(!e.contains("pa55") && !e.contains("alice"), "{e}");
        assert!(check_model_url("OPENAI_BASE_URL", "https://sk-1@h/v1").is_err());
    }

    #[test]
    fn a_url_without_http_or_https_is_refused_with_examples() {
        let e = check_model_url("--model-url", "localhost:11434").unwrap_err();
        assert!(
            e.starts_with("--model-url: localhost:11434 has no scheme")
                && e.contains("http://localhost:11434/v1"),
            "{e}"
        );
        let e = check_model_url("model.url", "ws://h:1/v1").unwrap_err();
        assert!(e.contains("ws://h:1/v1 is not an http(s) URL"), "{e}");
        let e = check_model_url("model.url", "alice:pa55@h:1/v1").unwrap_err();
        assert!(e.contains("***@h:1") && !e.contains("pa55"), "{e}");
        assert!(check_model_url("model.url", "HTTPS://h/v1").is_ok());
        let e = check_model_url("model.url", "").unwrap_err();
        assert!(
            e.starts_with("model.url is empty;") && e.contains("leave it out"),
            "{e}"
        );
    }
}
