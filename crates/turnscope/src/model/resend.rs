//! A recorded model request sent again, edited or not, outside any session: the console's
//! edit-and-resend. The body goes out as given (to the session's model or another URL, see
//! [`ModelClient::with_url`]) and the answer comes back with everything needed to set it beside
//! the recorded one: text, reasoning, tool calls, usage, finish reason, status and times.
//! Nothing is published and no session's history changes.

use std::time::Instant;

use serde_json::Value;

use super::ModelClient;
use crate::json::json_kind;
use crate::observe::ModelResponseInfo;
use crate::tools::ToolCall;

/// The answer to a resent request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResendAnswer {
    /// The chat-completions URL it went to (`token=` masked).
    pub url: String,
    /// The reply text.
    pub text: String,
    /// Reasoning streamed apart.
    pub reasoning: String,
    /// The function calls asked for.
    pub tool_calls: Vec<ToolCall>,
    /// Status, usage, finish reason, model, response id, time to the response headers.
    pub info: ModelResponseInfo,
    /// Time to the first piece of text, µs.
    pub first_piece_us: Option<u64>,
    /// The whole exchange, µs.
    pub total_us: u64,
    /// What went wrong, when it did (the request was refused or broke off).
    pub error: Option<String>,
}

/// Sends `body` (a chat-completions request object) with `client`, or a client for `url` when
/// one is given, and reads the whole answer.
pub async fn resend(client: &ModelClient, body: Value, url: Option<&str>) -> ResendAnswer {
    let other;
    let edited_url = url.filter(|u| u.trim() != client.completions_url());
    let client = match edited_url {
        Some(url) => {
            if let Err(why) = check_url(url.trim()) {
                return ResendAnswer {
                    url: url.trim().to_string(),
                    error: Some(why),
                    ..ResendAnswer::default()
                };
            }
            other = client.with_url(url);
            &other
        }
        None => client,
    };
    let mut answer = ResendAnswer {
        url: client.completions_url(),
        ..ResendAnswer::default()
    };
    let Value::Object(body) = body else {
        answer.error = Some(format!(
            "the request is {}, not a JSON object with model and messages; fix it and send again",
            json_kind(&body)
        ));
        return answer;
    };
    let started = Instant::now();
    let mut first_piece = None;
    let mut on_piece = |_piece: String| {
        first_piece.get_or_insert_with(|| started.elapsed().as_micros() as u64);
    };
    let mut info = ModelResponseInfo::default();
    let result = client.send_body(body, &mut on_piece, &mut info).await;
    answer.total_us = started.elapsed().as_micros() as u64;
    answer.first_piece_us = first_piece;
    answer.info = info;
    match result {
        Ok(done) => {
            answer.text = done.text;
            answer.reasoning = done.reasoning;
            answer.tool_calls = done.tool_calls;
        }
        // The advice names the flag that set the session's URL; this one was typed here.
        Err(e) if edited_url.is_some() => {
            answer.error = Some(e.to_string().replace(
                "check the model's URL (--model-url, OPENAI_BASE_URL or [model] url in the config, whichever set it)",
                "check the URL you edited",
            ))
        }
        Err(e) => answer.error = Some(e.to_string()),
    }
    answer
}

/// Whether `url`, typed in the request editor, can be sent to: an http or https URL.
fn check_url(url: &str) -> Result<(), String> {
    match reqwest::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(()),
        Ok(u) => Err(format!(
            "the URL you edited, {url}, is not http or https (its scheme is `{}`); nothing was \
             sent: fix it and send again",
            u.scheme()
        )),
        Err(e) => Err(format!(
            "the URL you edited, {url}, is not a URL ({e}); nothing was sent: fix it and send again"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EmbeddedModel, ModelConfig, ScriptSettings};
    use serde_json::json;

    fn quick() -> ScriptSettings {
        ScriptSettings {
            pace: 0.0,
            words: None,
        }
    }

    #[tokio::test]
    async fn an_edited_body_goes_to_the_sessions_model_or_another_url() {
        let ours = EmbeddedModel::start(0, quick()).await.unwrap();
        let other = EmbeddedModel::start(0, quick()).await.unwrap();
        let client = ModelClient::new(ModelConfig::new(ours.base_url(), "m"));
        let body = json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "Answer in capital letters."},
                {"role": "user", "content": "hello"}
            ],
            "max_tokens": 2
        });
        let here = resend(&client, body.clone(), None).await;
        assert_eq!(here.error, None);
        assert_eq!(here.url, format!("{}/chat/completions", ours.base_url()));
        // The edited parameters and prompt hold: capitals, cut at two tokens.
        assert_eq!(here.text, "YOU SAID:");
        assert_eq!(here.info.finish_reason.as_deref(), Some("length"));
        assert!(here.info.usage.is_some() && here.total_us > 0);
        let url = format!("{}/chat/completions", other.base_url());
        let there = resend(&client, body, Some(&url)).await;
        assert_eq!(there.url, url);
        assert_eq!(there.text, "YOU SAID:");
        let not_an_object = resend(&client, json!([1]), None).await;
        assert!(not_an_object.error.unwrap().contains("not a JSON object"));
    }

    #[tokio::test]
    async fn an_edited_url_that_is_not_http_is_refused_before_sending_and_advice_names_it() {
        let client = ModelClient::new(ModelConfig::new("http://127.0.0.1:9/v1", "m"));
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let bad = resend(
            &client,
            body.clone(),
            Some("hthttp://127.0.0.1:7938/v1/chat/completions"),
        )
        .await;
        let why = bad.error.unwrap();
        assert!(
            why.contains("its scheme is `hthttp`") && why.contains("nothing was sent"),
            "{why}"
        );
        assert_eq!(bad.total_us, 0, "nothing was sent");
        // A closed port: the advice names the edited URL, not the session's flag.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let closed = format!("http://127.0.0.1:{port}/v1/chat/completions");
        let down = resend(&client, body, Some(&closed)).await;
        let why = down.error.unwrap();
        assert!(why.contains("check the URL you edited"), "{why}");
        assert!(!why.contains("--model-url"), "{why}");
    }
}
