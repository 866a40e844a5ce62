//! The start-up check of a model server: one `GET /models` with a short timeout, so a server
//! that is down, refuses the key or does not list the configured model is named at start
//! instead of at the first `chat`. It only warns: a model server may start after turnscope, and
//! nothing waits for the check (the ready line comes first).

use std::time::Duration;

use serde_json::Value;

use super::ModelClient;

/// How long the check waits for the whole answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Checks the server behind `client`; `Some(warning)` names what is wrong and what to do.
/// A server without `/models` (HTTP 404 or 405) cannot be checked and passes, unless it
/// answers under `/v1` and the base lacks it.
pub async fn probe(client: &ModelClient, timeout: Duration) -> Option<String> {
    let config = client.config();
    let url = format!("{}/models", config.base_url.trim_end_matches('/'));
    let model = &config.model;
    let answer = tokio::time::timeout(timeout, async {
        let response = client.models_request(&url).send().await?;
        let status = response.status();
        let body = response.bytes().await?;
        Ok::<_, reqwest::Error>((status, body))
    })
    .await;
    let (status, body) = match answer {
        Err(_) => {
            return Some(format!(
                "the model server at {} did not answer GET /models within {} s; turns will fail \
                 until it answers. Check that it runs and --model-url / [model] url (it may still \
                 be loading a model)",
                config.base_url,
                timeout.as_secs_f64()
            ));
        }
        Ok(Err(e)) => {
            return Some(format!(
                "the model server at {} cannot be reached ({}); turns will fail until it is up. \
                 Start it, or fix --model-url / [model] url",
                config.base_url,
                super::client::error_chain(&e)
            ));
        }
        Ok(Ok(answer)) => answer,
    };
    match status.as_u16() {
        200..=299 => listed(&body, model).map(|listed| {
            format!(
                "the model server at {} does not list the model `{model}` (it lists {listed}); \
                 requests name it, and a server may refuse it. Pass --model with a listed name, \
                 or set [model] name",
                config.base_url
            )
        }),
        404 | 405 => under_v1(client, timeout).await,
        401 | 403 => Some(format!(
            "the model server at {} refused GET /models with HTTP {status}: the key or headers \
             are not accepted. Check OPENAI_API_KEY and [model] headers",
            config.base_url
        )),
        _ => Some(format!(
            "the model server at {} answered GET /models with HTTP {status}; turns may fail. \
             Check the server's log",
            config.base_url
        )),
    }
}

/// For a server without `/models` at the configured base: whether it answers under `/v1`
/// (where OpenAI-compatible servers serve; a base given without it, e.g.
/// `http://localhost:11434`, makes every turn a 404), and then the warning saying so. A base
/// that already ends in `/v1`, or a server that has no `/v1/models` either, passes.
async fn under_v1(client: &ModelClient, timeout: Duration) -> Option<String> {
    let base = client.config().base_url.trim_end_matches('/');
    if base.ends_with("/v1") {
        return None;
    }
    let url = format!("{base}/v1/models");
    let answer = tokio::time::timeout(timeout, client.models_request(&url).send()).await;
    let found = matches!(answer, Ok(Ok(response)) if response.status().is_success());
    found.then(|| {
        format!(
            "the model server at {base} has no /models, but {base}/v1/models answers: \
             OpenAI-compatible servers serve under /v1, so every turn would get HTTP 404. \
             Use --model-url {base}/v1 (or [model] url)"
        )
    })
}

/// `None` when `body` lists `model` (or lists nothing this check can read); else the names it
/// lists, the first few.
fn listed(body: &[u8], model: &str) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let ids: Vec<&str> = value
        .get("data")
        .and_then(Value::as_array)?
        .iter()
        .filter_map(|m| m.get("id").and_then(Value::as_str))
        .collect();
    if ids.is_empty() || ids.contains(&model) {
        return None;
    }
    const SHOWN: usize = 5;
    let mut names: Vec<String> = ids.iter().take(SHOWN).map(|id| format!("`{id}`")).collect();
    if ids.len() > SHOWN {
        names.push(format!("{} more", ids.len() - SHOWN));
    }
    Some(names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelConfig;

    #[test]
    fn a_list_without_the_model_names_what_it_lists() {
        let body = br#"{"data":[{"id":"a"},{"id":"b"}]}"#;
        assert_eq!(listed(body, "a"), None);
        assert_eq!(listed(body, "c").as_deref(), Some("`a`, `b`"));
        assert_eq!(listed(br#"{"data":[]}"#, "c"), None, "nothing to check");
        assert_eq!(listed(b"not json", "c"), None);
        let many = br#"{"data":[{"id":"1"},{"id":"2"},{"id":"3"},{"id":"4"},{"id":"5"},{"id":"6"},{"id":"7"}]}"#;
        assert_eq!(
            listed(many, "x").as_deref(),
            Some("`1`, `2`, `3`, `4`, `5`, 2 more")
        );
    }

    /// Real sockets: a port nobody listens on, a server that never answers, the embedded
    /// model (which lists `turnscope-scripted`).
    #[tokio::test]
    async fn down_silent_and_listing_servers() {
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let client = ModelClient::new(ModelConfig::new(format!("http://{closed}/v1"), "m"));
        let warning = probe(&client, PROBE_TIMEOUT).await.unwrap();
        assert!(warning.contains("cannot be reached"), "{warning}");

        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap();
        let client = ModelClient::new(ModelConfig::new(format!("http://{addr}/v1"), "m"));
        let warning = probe(&client, Duration::from_millis(300)).await.unwrap();
        assert!(
            warning.contains("did not answer GET /models within 0.3 s"),
            "{warning}"
        );
        drop(silent);

        let embedded = crate::model::EmbeddedModel::start(0, Default::default())
            .await
            .unwrap();
        let right = ModelClient::new(ModelConfig::new(embedded.base_url(), "turnscope-scripted"));
        assert_eq!(probe(&right, PROBE_TIMEOUT).await, None);
        // Given without /v1 (as people type Ollama's or llama-server's address): named.
        let root = embedded.base_url().trim_end_matches("/v1").to_string();
        let bare = ModelClient::new(ModelConfig::new(root.clone(), "turnscope-scripted"));
        let warning = probe(&bare, PROBE_TIMEOUT).await.unwrap();
        assert!(
            warning.contains(&format!("answers: OpenAI-compatible servers serve under /v1, so every turn would get HTTP 404. Use --model-url {root}/v1")),
            "{warning}"
        );
        let wrong = ModelClient::new(ModelConfig::new(embedded.base_url(), "llama3.2"));
        let warning = probe(&wrong, PROBE_TIMEOUT).await.unwrap();
        assert!(
            warning.contains("does not list the model `llama3.2` (it lists `turnscope-scripted`)"),
            "{warning}"
        );
    }
}
