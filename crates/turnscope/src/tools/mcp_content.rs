//! Turns an MCP `tools/call` result into what the model reads: text blocks joined, every other
//! block described in brackets (a block is never dropped without a trace), `structuredContent`
//! when there are no blocks, `isError` → an error. [`outcome_of`] states the rules.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

use super::ToolOutcome;

/// The outcome the model reads for `result`.
///
/// Text blocks are joined with newlines. The chat-completions API takes only text in a tool
/// message, so every other block becomes a short bracketed description the model can act on
/// (an image's type and size, a resource's URI) — a block is never dropped without a trace.
/// Embedded text resources keep their text. `structuredContent` is used when the result has
/// no content blocks. `isError: true` makes the outcome an error.
///
/// Callers that can take typed content (the OpenAI bridge's `/v1/execute`) also get the blocks
/// themselves, as MCP JSON, in [`ToolOutcome::parts`], and `structuredContent` in
/// [`ToolOutcome::structured`]; a result that is one plain text block needs no parts.
pub fn outcome_of(result: &CallToolResult) -> ToolOutcome {
    let mut parts: Vec<String> = result.content.iter().map(describe).collect();
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    let outcome = if result.is_error == Some(true) {
        ToolOutcome::error(if text.is_empty() {
            "the tool reported an error and gave no message".to_string()
        } else {
            text
        })
    } else {
        ToolOutcome::ok(text)
    };
    outcome.with_content(
        typed_parts(&result.content),
        result.structured_content.clone(),
    )
}

/// The blocks as MCP JSON, or none when the text says it all (no blocks, or one text block
/// with no annotations and no `_meta`).
fn typed_parts(content: &[ContentBlock]) -> Vec<Value> {
    match content {
        [] => Vec::new(),
        [ContentBlock::Text(t)] if t.annotations.is_none() && t.meta.is_none() => Vec::new(),
        blocks => blocks
            .iter()
            .filter_map(|b| serde_json::to_value(b).ok())
            .collect(),
    }
}

/// The text of one content block, or a description of it.
fn describe(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => format!(
            "[image: {}, {} bytes; not shown to the model]",
            i.mime_type,
            decoded_len(&i.data)
        ),
        ContentBlock::Audio(a) => format!(
            "[audio: {}, {} bytes; not played to the model]",
            a.mime_type,
            decoded_len(&a.data)
        ),
        ContentBlock::Resource(r) => match &r.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource {uri}: {}, {} bytes; binary, not shown to the model]",
                mime_type.as_deref().unwrap_or("application/octet-stream"),
                decoded_len(blob)
            ),
            _ => "[resource of a kind this client does not know]".to_string(),
        },
        ContentBlock::ResourceLink(link) => format!(
            "[resource link: {} <{}>{}]",
            link.name,
            link.uri,
            link.mime_type
                .as_deref()
                .map(|m| format!(", {m}"))
                .unwrap_or_default()
        ),
        other => format!(
            "[content block of a kind this client does not know: {}]",
            serde_json::to_value(other)
                .ok()
                .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
                .unwrap_or_else(|| "unknown".into())
        ),
    }
}

/// Bytes a base64 text decodes to (without decoding it).
fn decoded_len(base64: &str) -> usize {
    let trimmed = base64.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{EmbeddedResource, Resource};
    use serde_json::json;

    #[test]
    fn text_is_joined_and_other_blocks_are_described() {
        let result = CallToolResult::success(vec![
            ContentBlock::text("first"),
            ContentBlock::image(turnscope_fixture::TINY_PNG_BASE64, "image/png"),
            ContentBlock::text("last"),
        ]);
        let outcome = outcome_of(&result);
        assert!(!outcome.is_error);
        let lines: Vec<&str> = outcome.text.lines().collect();
        assert_eq!(lines[0], "first");
        assert!(
            lines[1].starts_with("[image: image/png, ") && lines[1].contains("bytes"),
            "{}",
            lines[1]
        );
        assert_eq!(lines[2], "last");
    }

    #[test]
    fn resources_keep_text_and_describe_blobs_and_links() {
        let text = ContentBlock::Resource(EmbeddedResource::new(ResourceContents::text(
            "hello",
            "file:///a.txt",
        )));
        let blob = ContentBlock::Resource(EmbeddedResource::new(
            ResourceContents::BlobResourceContents {
                uri: "file:///b.bin".into(),
                mime_type: Some("application/zip".into()),
                blob: "AAAA".into(),
                meta: None,
            },
        ));
        let link = ContentBlock::ResourceLink(Resource::new("file:///c.md", "notes"));
        let outcome = outcome_of(&CallToolResult::success(vec![text, blob, link]));
        assert_eq!(
            outcome.text,
            "[resource file:///a.txt]\nhello\n\
             [resource file:///b.bin: application/zip, 3 bytes; binary, not shown to the model]\n\
             [resource link: notes <file:///c.md>]"
        );
    }

    #[test]
    fn is_error_and_structured_content() {
        let failed = outcome_of(&CallToolResult::error(vec![ContentBlock::text("boom")]));
        assert_eq!(
            failed,
            ToolOutcome::error("boom"),
            "one text block needs no parts"
        );
        let silent = outcome_of(&CallToolResult::error(vec![]));
        assert!(silent.is_error && silent.text.contains("no message"));
        let mut only_structured = CallToolResult::structured(json!({"sum": 3}));
        only_structured.content.clear();
        let structured = outcome_of(&only_structured);
        assert!(!structured.is_error);
        assert!(structured.text.contains("\"sum\":3"), "{}", structured.text);
        assert_eq!(structured.structured, Some(json!({"sum": 3})));
        assert!(structured.parts.is_empty());
    }

    #[test]
    fn typed_parts_keep_every_block_as_mcp_json() {
        let result = CallToolResult::success(vec![
            ContentBlock::image(turnscope_fixture::TINY_PNG_BASE64, "image/png"),
            ContentBlock::text("caption"),
        ]);
        let outcome = outcome_of(&result);
        assert_eq!(
            outcome.parts,
            [
                json!({"type": "image", "mimeType": "image/png", "data": turnscope_fixture::TINY_PNG_BASE64}),
                json!({"type": "text", "text": "caption"}),
            ]
        );
        let two_texts = outcome_of(&CallToolResult::success(vec![
            ContentBlock::text("a"),
            ContentBlock::text("b"),
        ]));
        assert_eq!(two_texts.text, "a\nb");
        assert_eq!(two_texts.parts.len(), 2, "block boundaries are kept");
    }
}
