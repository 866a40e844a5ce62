//! The model server's URL (`[model] url`, `--model-url`, `OPENAI_BASE_URL`) carries no user
//! info: a `user:password@` before the host would be shown wherever the URL is (the console's
//! header, the ready line, logs, recorded requests, a copied curl) and can disguise the real
//! host, as the tool sources' policy says of MCP server URLs.

/// Checks that `url` (the value of `key`) has no user info before its host.
///
/// # Errors
/// The URL names a user (with or without a password); the message says where credentials go
/// instead.
pub fn check_model_url(key: &str, url: &str) -> Result<(), String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok(());
    };
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
}
