//! Placing bridges on endpoints, per bridge: its own `endpoint` → `$MCP_ENDPOINT_<NAME>` (name
//! upper-cased, every character but `A-Z0-9` turned into `_`) → `$MCP_ENDPOINT`. A bridge with
//! none is skipped with a warning; several on the global one get a warning, because an
//! endpoint keeps one connection per agent and they would keep replacing each other.
//! Environment lookups go through a function so tests need not touch the process environment.

use super::endpoint::Endpoint;
use crate::config::env::expand_env;

/// The environment variable naming the endpoint of bridge `name`: `MCP_ENDPOINT_<NAME>`.
pub(crate) fn env_var_for(name: &str) -> String {
    format!("MCP_ENDPOINT_{}", crate::config::env::env_var_name(name))
}

/// Where a bridge's endpoint came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EndpointSource {
    /// Its own `endpoint` (config or `--endpoint`).
    Own,
    /// `MCP_ENDPOINT_<NAME>`.
    Named(String),
    /// `MCP_ENDPOINT`, possibly shared.
    Global,
}

/// A bridge whose endpoint is known.
#[derive(Debug, Clone)]
pub(crate) struct Placed<T> {
    /// The bridge's name.
    pub name: String,
    /// Its endpoint.
    pub endpoint: Endpoint,
    /// Where the endpoint came from.
    pub source: EndpointSource,
    /// Whatever else the caller attached.
    pub(crate) item: T,
}

/// Resolves the endpoint of each `(name, own endpoint, item)`. Bridges without a usable
/// endpoint are left out; every such case, and bridges sharing `MCP_ENDPOINT`, produce a
/// warning (tokens masked).
pub(crate) fn place<T>(
    bridges: Vec<(String, Option<String>, T)>,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Vec<Placed<T>>, Vec<String>) {
    let mut placed = Vec::new();
    let mut warnings = Vec::new();
    for (name, own, item) in bridges {
        let named = env_var_for(&name);
        let (raw, source) = if let Some(own) = own.filter(|s| !s.trim().is_empty()) {
            (own, EndpointSource::Own)
        } else if let Some(v) = env(&named).filter(|s| !s.trim().is_empty()) {
            (v, EndpointSource::Named(named.clone()))
        } else if let Some(v) = env("MCP_ENDPOINT").filter(|s| !s.trim().is_empty()) {
            (v, EndpointSource::Global)
        } else {
            warnings.push(format!(
                "xiaozhi bridge {name}: no endpoint (set `endpoint`, {named} or MCP_ENDPOINT); skipped"
            ));
            continue;
        };
        let url = match expand_env(&raw, env) {
            Ok(url) => url,
            Err(e) => {
                warnings.push(format!("xiaozhi bridge {name}: endpoint: {e}; skipped"));
                continue;
            }
        };
        match Endpoint::parse(&url) {
            Ok(endpoint) => placed.push(Placed {
                name,
                endpoint,
                source,
                item,
            }),
            Err(e) => warnings.push(format!("xiaozhi bridge {name}: {e}; skipped")),
        }
    }
    let global: Vec<&str> = placed
        .iter()
        .filter(|p| p.source == EndpointSource::Global)
        .map(|p| p.name.as_str())
        .collect();
    if global.len() > 1 {
        warnings.push(format!(
            "xiaozhi bridges {} all use MCP_ENDPOINT; an endpoint keeps one connection per agent, so they \
             will keep replacing each other. Give each its own endpoint (`endpoint` or MCP_ENDPOINT_<NAME>)",
            global.join(", ")
        ));
    }
    (placed, warnings)
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
