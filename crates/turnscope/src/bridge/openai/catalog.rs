//! The bridge's view of a tool set: the OpenAI `tools` array, and the way back from an OpenAI
//! function name to the tool that runs it. A tool whose schema cannot be converted is left out
//! with one warning; the listing is rebuilt only when the tool set's specs change.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use bytes::Bytes;
use serde_json::{Value, json};

use crate::observe::event::now_us;
use crate::observe::{Bus, Event};
use crate::tools::builtin::RESERVED_NAMES;
use crate::tools::openai_shape::names::NameMap;
use crate::tools::openai_shape::{schema, strict};
use crate::tools::{ToolSpec, Tools};

/// One tool as the bridge offers it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The OpenAI function name (`^[a-zA-Z0-9_-]{1,64}$`).
    pub openai_name: String,
    /// The name the tool set knows it by (what [`Tools::call`] takes).
    pub tool: String,
    /// The `{"type":"function","function":{name, description, parameters}}` entry.
    pub function: Value,
}

/// The tools of one moment, converted.
#[derive(Debug)]
pub struct Listing {
    specs: Option<Arc<[ToolSpec]>>,
    entries: Vec<Entry>,
    by_openai: HashMap<String, usize>,
    by_tool: HashMap<String, usize>,
    body: Bytes,
    /// The same tools for `strict: true` clients (`/v1/tools?strict=true`), built when first
    /// asked for: the body, and the tools served with `strict: false` there.
    strict: OnceLock<(Bytes, Vec<String>)>,
    rejected: Vec<String>,
}

impl Listing {
    fn build(specs: Option<Arc<[ToolSpec]>>, limits: &schema::Limits) -> (Listing, Vec<String>) {
        let offered: Vec<&ToolSpec> = specs
            .iter()
            .flat_map(|s| s.iter())
            .filter(|s| !RESERVED_NAMES.contains(&s.name.as_str()))
            .collect();
        let names = NameMap::new(offered.iter().map(|s| s.name.as_str()));
        let mut entries = Vec::with_capacity(offered.len());
        let mut rejected = Vec::new();
        let mut warnings = Vec::new();
        for spec in offered {
            let openai_name = names.openai_name(&spec.name).unwrap_or(&spec.name);
            match schema::convert(Some(&spec.input_schema), limits) {
                Ok(conversion) => {
                    for pointer in &conversion.dropped {
                        warnings.push(format!(
                            "tool `{}`: the inputSchema fragment at #{pointer} is not a schema and was left out of its OpenAI parameters",
                            spec.name
                        ));
                    }
                    entries.push(Entry {
                        openai_name: openai_name.to_string(),
                        tool: spec.name.clone(),
                        function: json!({
                            "type": "function",
                            "function": {
                                "name": openai_name,
                                "description": spec.description,
                                "parameters": conversion.parameters,
                            }
                        }),
                    });
                }
                Err(e) => {
                    // The message names the JSON pointer (`at #/...`) and the fix.
                    warnings.push(format!(
                        "tool `{}` left out of the OpenAI tools: {e}",
                        spec.name
                    ));
                    rejected.push(spec.name.clone());
                }
            }
        }
        let array = Value::Array(entries.iter().map(|e| e.function.clone()).collect());
        let body = Bytes::from(serde_json::to_vec(&array).unwrap_or_else(|_| b"[]".to_vec()));
        let by_openai = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.openai_name.clone(), i))
            .collect();
        let by_tool = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.tool.clone(), i))
            .collect();
        (
            Listing {
                specs,
                entries,
                by_openai,
                by_tool,
                body,
                strict: OnceLock::new(),
                rejected,
            },
            warnings,
        )
    }

    /// The offered tools, in the tool set's order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The tool a call names: by its OpenAI name, or else by the tool set's own name.
    pub fn resolve(&self, name: &str) -> Option<&Entry> {
        self.by_openai
            .get(name)
            .or_else(|| self.by_tool.get(name))
            .map(|&i| &self.entries[i])
    }

    /// Whether an OpenAI function of this name is offered.
    pub fn offers(&self, openai_name: &str) -> bool {
        self.by_openai.contains_key(openai_name)
    }

    /// The OpenAI `tools` array, serialized.
    pub fn body(&self) -> Bytes {
        self.body.clone()
    }

    /// Tools left out because their schema was rejected.
    pub fn rejected(&self) -> &[String] {
        &self.rejected
    }

    /// The names offered, for error messages: `a, b, c` or `no tools`.
    pub fn names(&self) -> String {
        if self.entries.is_empty() {
            "no tools".into()
        } else {
            self.entries
                .iter()
                .map(|e| e.openai_name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

/// The strict listing: each entry's strict-mode version (`strict: true`), or its plain entry
/// with `strict: false` and a warning naming why there is none.
fn strict_listing(entries: &[Entry], warnings: &mut Vec<String>) -> (Bytes, Vec<String>) {
    let mut not_strict = Vec::new();
    let tools: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut function = e.function["function"].clone();
            match strict::to_strict(&function["parameters"]) {
                Ok(done) => {
                    function["parameters"] = done.parameters;
                    function["strict"] = Value::Bool(true);
                }
                Err(problems) => {
                    let why: Vec<String> = problems.iter().map(ToString::to_string).collect();
                    warnings.push(format!(
                        "tool `{}` has no OpenAI strict-mode version ({}); /v1/tools?strict=true serves it with strict: false",
                        e.tool,
                        why.join("; ")
                    ));
                    not_strict.push(e.openai_name.clone());
                    function["strict"] = Value::Bool(false);
                }
            }
            json!({"type": "function", "function": function})
        })
        .collect();
    let body = Bytes::from(serde_json::to_vec(&tools).unwrap_or_else(|_| b"[]".to_vec()));
    (body, not_strict)
}

/// A tool set seen through the bridge.
///
/// A [`Catalog`] wraps any [`Tools`] (the bot's registry, or one MCP server's). Each tool's
/// `input_schema` goes through [`schema::convert`] (every `$ref` inlined, always an object
/// schema) and its name through [`NameMap`] (valid for OpenAI, stable, collision-free). A tool
/// whose schema is rejected is left out of the listing with one warning naming the tool and
/// the JSON pointer; the others are still served.
///
/// The result is a [`Listing`], rebuilt only when the tool set's specs change (a new
/// `Arc<[ToolSpec]>` with different contents): `GET /v1/tools` hands out the serialized
/// array it keeps, so a listing costs one `Arc` clone and no MCP traffic.
pub struct Catalog {
    tools: Arc<dyn Tools>,
    bus: Bus,
    limits: schema::Limits,
    current: RwLock<Arc<Listing>>,
    /// Warnings already given, so a rebuild does not repeat them.
    warned: Mutex<HashSet<String>>,
}

impl Catalog {
    /// A catalog of `tools`; warnings go to the log and, as `Event::Log`, to `bus`.
    pub fn new(tools: Arc<dyn Tools>, bus: Bus) -> Self {
        let (empty, _) = Listing::build(None, &schema::Limits::default());
        Self {
            tools,
            bus,
            limits: schema::Limits::default(),
            current: RwLock::new(Arc::new(empty)),
            warned: Mutex::new(HashSet::new()),
        }
    }

    /// The tool set behind it.
    pub fn tools(&self) -> &Arc<dyn Tools> {
        &self.tools
    }

    /// The listing for the tool set as it is now (rebuilt first if its specs changed).
    pub fn listing(&self) -> Arc<Listing> {
        let specs = self.tools.specs();
        let current = self
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let same = current
            .specs
            .as_ref()
            .is_some_and(|old| Arc::ptr_eq(old, &specs) || **old == *specs);
        if same {
            return current;
        }
        let (listing, warnings) = Listing::build(Some(specs), &self.limits);
        self.warn_once(warnings);
        let listing = Arc::new(listing);
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = listing.clone();
        listing
    }

    /// The OpenAI `tools` array of `listing` for `strict: true` clients, serialized: each
    /// tool's strict-mode version with `"strict": true`, or, for a tool that has none, its
    /// plain entry with `"strict": false`; and the names of those. Built once per listing; why
    /// a tool has no strict version is warned once.
    pub fn strict(&self, listing: &Listing) -> (Bytes, Vec<String>) {
        listing
            .strict
            .get_or_init(|| {
                let mut warnings = Vec::new();
                let built = strict_listing(&listing.entries, &mut warnings);
                self.warn_once(warnings);
                built
            })
            .clone()
    }

    fn warn_once(&self, warnings: Vec<String>) {
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        for message in warnings {
            if warned.insert(message.clone()) {
                tracing::warn!("{message}");
                self.bus.publish_with(|| Event::Log {
                    at_ms: now_us() / 1000,
                    level: "warn".into(),
                    message,
                });
            }
        }
    }
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;
