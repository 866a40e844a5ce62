//! The bot's tool list as the Tools pane shows it: each schema pretty-printed, its OpenAI
//! conversion done, collisions and renames explained, what other providers would refuse
//! (`tools::portability`), skipped tools with why.

use turnscope::tools::ToolSpec;
use turnscope::tools::merge::Skip;
use turnscope::tools::openai_shape::names::{NameMap, is_valid_openai_name};
use turnscope::tools::openai_shape::schema::{Limits, convert};
use turnscope::tools::portability;

use super::{ConsoleState, ToolView, pretty};

impl ConsoleState {
    /// Sets the tool list from the bot's specs: schemas pretty-printed, the OpenAI conversion
    /// done, collisions and renames explained; then the tools that were skipped, with why.
    pub fn set_tools_and_skips(&mut self, specs: &[ToolSpec], skips: &[Skip]) {
        self.set_tools(specs);
        self.tools.extend(skips.iter().map(|skip| ToolView {
            name: skip.tool.clone(),
            source: skip.source.clone(),
            description: String::new(),
            schema: String::new(),
            openai: Ok(String::new()),
            notes: Vec::new(),
            skipped: Some(skip.to_string()),
            input: serde_json::Value::Null,
            portability: Vec::new(),
            unserved: false,
        }));
    }

    /// Sets the tool list from the bot's specs: schemas pretty-printed, the OpenAI conversion
    /// done, collisions and renames explained.
    pub fn set_tools(&mut self, specs: &[ToolSpec]) {
        self.fill_tools(specs, true);
    }

    /// Sets the tool list from an attached bot's `tools/list`: tools its MCP clients see,
    /// which no OpenAI bridge of ours offers (so none has a strict version served).
    pub fn set_attached_tools(&mut self, specs: &[ToolSpec]) {
        self.fill_tools(specs, false);
    }

    /// The list from `specs`; `bridged`: turnscope's OpenAI bridge offers them.
    fn fill_tools(&mut self, specs: &[ToolSpec], bridged: bool) {
        self.tools_generation += 1;
        let names = NameMap::new(specs.iter().map(|s| s.name.as_str()));
        let mut seen = std::collections::BTreeMap::<&str, &str>::new();
        self.tools = specs
            .iter()
            .map(|spec| {
                let mut notes = Vec::new();
                if let Some(first) = seen.insert(&spec.name, &spec.source) {
                    notes.push(format!(
                        "collision: `{}` from {first} is listed first; this one is never called",
                        spec.name
                    ));
                }
                if !is_valid_openai_name(&spec.name)
                    && let Some(renamed) = names.openai_name(&spec.name)
                {
                    notes.push(format!(
                        "OpenAI name: `{renamed}` (OpenAI names allow only A-Z a-z 0-9 _ -, at most 64)"
                    ));
                }
                let findings = portability::check(&spec.input_schema);
                let openai = match convert(Some(&spec.input_schema), &Limits::default()) {
                    Ok(done) => {
                        for pointer in &done.dropped {
                            notes.push(format!(
                                "dropped for OpenAI: #{pointer} is not a schema"
                            ));
                        }
                        Ok(pretty(&done.parameters))
                    }
                    Err(e) => Err(e.to_string()),
                };
                ToolView {
                    name: spec.name.clone(),
                    source: spec.source.clone(),
                    description: spec.description.clone(),
                    schema: pretty(&spec.input_schema),
                    openai,
                    notes,
                    skipped: None,
                    input: spec.input_schema.clone(),
                    portability: findings.iter().map(|f| f.text(bridged)).collect(),
                    // Refused somewhere as it is, with no mended version served.
                    unserved: findings.iter().any(|f| !(f.mended && bridged)),
                }
            })
            .collect();
    }

    /// Counts the tool lists set: a drawing kept for one list is stale under another.
    pub fn tools_generation(&self) -> u64 {
        self.tools_generation
    }
}
