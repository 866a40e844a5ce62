//! The per-bridge tool filter: which of the MCP server's tools the endpoint may see and call.
//!
//! Deny wins; a non-empty allow list is a whitelist; a name in both lists is a configuration
//! error (the intent is unclear, so the bridge refuses to guess). Names match exactly.

use std::collections::BTreeSet;

use serde::Deserialize;

/// `tools = { allow = [...], deny = [...] }` as written in the config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolRules {
    /// When non-empty, only these tools are offered.
    pub allow: Vec<String>,
    /// These tools are never offered nor called.
    pub deny: Vec<String>,
}

/// A checked tool filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    allow: BTreeSet<String>,
    deny: BTreeSet<String>,
}

impl ToolFilter {
    /// Checks `rules`.
    ///
    /// # Errors
    ///
    /// A message naming every tool that is both allowed and denied.
    pub fn new(rules: &ToolRules) -> Result<Self, String> {
        let allow: BTreeSet<String> = rules.allow.iter().cloned().collect();
        let deny: BTreeSet<String> = rules.deny.iter().cloned().collect();
        let both: Vec<&str> = allow.intersection(&deny).map(String::as_str).collect();
        if !both.is_empty() {
            return Err(format!(
                "tools: {} listed in both allow and deny; remove each from one of the lists \
                 (deny wins, a non-empty allow is a whitelist)",
                both.join(", ")
            ));
        }
        Ok(Self { allow, deny })
    }

    /// Whether the endpoint may see and call `tool`.
    pub fn permits(&self, tool: &str) -> bool {
        !self.deny.contains(tool) && (self.allow.is_empty() || self.allow.contains(tool))
    }

    /// Whether the filter lets everything through.
    pub fn is_open(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], deny: &[&str]) -> ToolRules {
        ToolRules {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn deny_removes_and_empty_allow_lets_the_rest_through() {
        let f = ToolFilter::new(&rules(&[], &["rm"])).unwrap();
        assert!(!f.permits("rm"));
        assert!(f.permits("ls"));
        assert!(!f.is_open());
        assert!(ToolFilter::new(&ToolRules::default()).unwrap().is_open());
    }

    #[test]
    fn non_empty_allow_is_a_whitelist() {
        let f = ToolFilter::new(&rules(&["a"], &["c"])).unwrap();
        assert!(f.permits("a"));
        assert!(!f.permits("b"));
        assert!(!f.permits("c"));
    }

    #[test]
    fn overlap_is_a_config_error_naming_the_tools() {
        let e = ToolFilter::new(&rules(&["a", "rm", "x"], &["rm", "x"])).unwrap_err();
        assert!(e.contains("rm, x"), "{e}");
    }
}
