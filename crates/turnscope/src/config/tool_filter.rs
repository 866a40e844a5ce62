//! `ToolFilter`: which of an MCP server's tools are offered (to the bot, to an OpenAI client,
//! to a Xiaozhi endpoint). Deny wins; a non-empty allow list admits only its tools; names match
//! exactly. A name in both lists is a configuration error: the intent is unclear, so nothing
//! guesses. Written `["a", "b"]` (allow only) or `{ allow = [...], deny = [...] }`.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// Which tools pass: deny beats allow; an empty allow list admits every tool not denied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolFilter {
    /// Only these tools (empty = all).
    pub allow: Vec<String>,
    /// Never these tools.
    pub deny: Vec<String>,
}

impl ToolFilter {
    /// Whether the tool called `name` (the server's own name for it) passes.
    pub fn admits(&self, name: &str) -> bool {
        !self.deny.iter().any(|d| d == name)
            && (self.allow.is_empty() || self.allow.iter().any(|a| a == name))
    }

    /// Whether every tool passes.
    pub fn is_open(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    /// Checks that no tool is both allowed and denied.
    ///
    /// # Errors
    /// [`FilterOverlap`], naming every such tool and the fix.
    pub fn check(&self) -> Result<(), FilterOverlap> {
        let both: Vec<String> = self
            .allow
            .iter()
            .filter(|a| self.deny.contains(a))
            .cloned()
            .collect();
        if both.is_empty() {
            return Ok(());
        }
        Err(FilterOverlap { tools: both })
    }
}

/// Why a [`ToolFilter`] is refused: tools both allowed and denied.
///
/// Occurs when a tool is in both lists; the filter would still work (deny wins), but the
/// entry says two things at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} listed in both allow and deny; remove each from one of the lists \
     (deny wins, a non-empty allow admits only its tools)",
    tools.join(", ")
)]
pub struct FilterOverlap {
    /// The tools in both lists, in `allow` order.
    pub tools: Vec<String>,
}

impl<'de> Deserialize<'de> for ToolFilter {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FilterVisitor;

        impl<'de> Visitor<'de> for FilterVisitor {
            type Value = ToolFilter;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a list of tool names (only these) or a table with `allow` and/or `deny` lists",
                )
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ToolFilter, A::Error> {
                let mut allow = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    allow.push(name);
                }
                Ok(ToolFilter {
                    allow,
                    deny: Vec::new(),
                })
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolFilter, A::Error> {
                let mut filter = ToolFilter::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "allow" => filter.allow = map.next_value()?,
                        "deny" => filter.deny = map.next_value()?,
                        other => {
                            return Err(de::Error::unknown_field(other, &["allow", "deny"]));
                        }
                    }
                }
                Ok(filter)
            }
        }

        deserializer.deserialize_any(FilterVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(allow: &[&str], deny: &[&str]) -> ToolFilter {
        ToolFilter {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn deny_removes_and_empty_allow_lets_the_rest_through() {
        let f = filter(&[], &["rm"]);
        assert!(!f.admits("rm"));
        assert!(f.admits("ls"));
        assert!(!f.is_open());
        assert!(ToolFilter::default().is_open());
    }

    #[test]
    fn non_empty_allow_admits_only_its_tools() {
        let f = filter(&["a"], &["c"]);
        assert!(f.admits("a"));
        assert!(!f.admits("b"));
        assert!(!f.admits("c"));
    }

    #[test]
    fn overlap_is_a_config_error_naming_the_tools() {
        let e = filter(&["a", "rm", "x"], &["rm", "x"]).check().unwrap_err();
        assert_eq!(e.tools, ["rm", "x"]);
        let e = e.to_string();
        assert!(e.contains("rm, x"), "{e}");
        assert!(filter(&["a"], &["b"]).check().is_ok());
    }

    #[test]
    fn a_list_or_a_table() {
        let list: ToolFilter = serde_json::from_str(r#"["a", "b"]"#).unwrap();
        assert_eq!(list, filter(&["a", "b"], &[]));
        let table: ToolFilter = serde_json::from_str(r#"{"deny": ["rm"]}"#).unwrap();
        assert_eq!(table, filter(&[], &["rm"]));
        let e = serde_json::from_str::<ToolFilter>(r#"{"only": ["a"]}"#).unwrap_err();
        assert!(e.to_string().contains("only"), "{e}");
    }
}
