//! The bot's tool list as the Tools pane shows it: each schema pretty-printed, its OpenAI
//! conversion done, collisions and renames explained, what other providers would refuse
//! (`tools::portability`), skipped tools with why.

use turnscope::tools::ToolSpec;
use turnscope::tools::merge::Skip;
use turnscope::tools::openai_shape::names::{NameMap, is_valid_openai_name};
use turnscope::tools::openai_shape::schema::{Limits, convert};
use turnscope::tools::portability::{self, StrictServed};

use serde_json::Value;
use turnscope::observe::wire::ToolSetEvent;

use super::{ConsoleState, Source, ToolView, pretty};

/// The source a watched turnscope's own tools are listed under.
pub const WATCHED_SOURCE: &str = "the watched bot (offered to its model)";

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
            elsewhere: false,
            over_mcp: false,
        }));
    }

    /// Sets the tool list from the bot's specs: schemas pretty-printed, the OpenAI conversion
    /// done, collisions and renames explained.
    pub fn set_tools(&mut self, specs: &[ToolSpec]) {
        self.fill_tools(specs, StrictServed::Here);
    }

    /// Sets the tool list from an attached bot's `tools/list`: tools its MCP clients see,
    /// which no OpenAI bridge of ours offers (so none has a strict version served).
    pub fn set_attached_tools(&mut self, specs: &[ToolSpec]) {
        self.fill_tools(specs, StrictServed::Nowhere);
    }

    /// A watched turnscope's tool set (`Event::ToolSet` on its stream: the tools its model is
    /// offered), listed after the target's `tools/list` as the watched bot's own: shown, not
    /// called from here (they run where that bot runs). The latest set replaces the one
    /// before. Nothing for a console that runs its bot (its list comes from the registry).
    pub fn fold_watched_tool_set(&mut self, set: &ToolSetEvent) {
        if !matches!(self.header.source, Source::Attached { .. }) {
            return;
        }
        let watched: Vec<ToolSpec> = set
            .tools
            .iter()
            .filter_map(|entry| {
                let function = entry.get("function")?;
                Some(ToolSpec {
                    name: function.get("name")?.as_str()?.to_string(),
                    description: function
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    input_schema: function.get("parameters").cloned().unwrap_or(Value::Null),
                    source: WATCHED_SOURCE.into(),
                })
            })
            .collect();
        // The target's own stay as they are; the set before is replaced.
        self.tools_generation += 1;
        self.tools.retain(|t| !t.elsewhere);
        self.tools.extend(
            tool_views(&watched, StrictServed::Watched)
                .into_iter()
                .map(|view| ToolView {
                    elsewhere: true,
                    ..view
                }),
        );
    }

    /// The list from `specs`, their strict versions served as `served` says.
    fn fill_tools(&mut self, specs: &[ToolSpec], served: StrictServed) {
        self.tools_generation += 1;
        self.tools = tool_views(specs, served);
    }

    /// Counts the tool lists set: a drawing kept for one list is stale under another.
    pub fn tools_generation(&self) -> u64 {
        self.tools_generation
    }
}

/// The views of `specs`: schemas pretty-printed, the OpenAI conversion done, collisions and
/// renames explained, portability found (their strict versions served as `served` says).
fn tool_views(specs: &[ToolSpec], served: StrictServed) -> Vec<ToolView> {
    let names = NameMap::new(specs.iter().map(|s| s.name.as_str()));
    let mut seen = std::collections::BTreeMap::<&str, &str>::new();
    specs
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
                        notes.push(format!("dropped for OpenAI: #{pointer} is not a schema"));
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
                portability: findings.iter().map(|f| f.text(served)).collect(),
                // Refused somewhere as it is, with no mended version served. An attached
                // bot's own tool goes to no model from here, only over MCP, which takes it
                // as it is: the mark made a working `start` look broken (tour T).
                unserved: served != StrictServed::Nowhere && findings.iter().any(|f| !f.mended),
                elsewhere: false,
                over_mcp: served == StrictServed::Nowhere,
            }
        })
        .collect()
}
