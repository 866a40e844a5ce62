//! `[store]`: where sessions are kept (`--store URL` overrides `url`). The URL is checked
//! here, with the rest of the config; opening the store is `store`'s job.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// `[store]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSection {
    /// `memory`, `sqlite:PATH`, or `default` (a file per listening address in the state
    /// directory). Unset: `default` for the console and `--headless`, `memory` for
    /// `turnscope test`, `turnscope bench` and the library.
    pub url: Option<String>,
}

impl StoreSection {
    /// The URL in force: `url`, else `fallback` (what the mode uses by default).
    ///
    /// # Errors
    /// A URL turnscope does not know (the message names `store.url` and what is accepted).
    pub fn resolve(&self, fallback: StoreUrl) -> Result<StoreUrl, String> {
        match &self.url {
            Some(url) => StoreUrl::parse(url).map_err(|e| format!("store.url: {e}")),
            None => Ok(fallback),
        }
    }
}

/// A parsed store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// `memory`: nothing survives the process.
    Memory,
    /// `default`: an embedded file in the platform's state directory, one per listening
    /// address (see `store::default_path`).
    Default,
    /// `sqlite:PATH`: an embedded SQLite file.
    Sqlite(PathBuf),
}

/// The schemes a store URL may have, for error messages.
pub const SCHEMES: &str = "memory, sqlite:PATH, default";

impl StoreUrl {
    /// Parses `memory` or `sqlite:PATH` (`sqlite://PATH` too; a relative path is taken from
    /// the working directory, `~/` from the home directory).
    ///
    /// # Errors
    /// Any other text, with what is accepted.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text == "memory" || text == "memory:" {
            return Ok(StoreUrl::Memory);
        }
        if text == "default" {
            return Ok(StoreUrl::Default);
        }
        if let Some(rest) = text.strip_prefix("sqlite:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(format!(
                    "store URL {text:?} names no file; expected sqlite:PATH, e.g. sqlite:./sessions.sqlite3"
                ));
            }
            return Ok(StoreUrl::Sqlite(expand_home(path)));
        }
        Err(format!(
            "store URL {text:?} is not one turnscope knows; expected one of: {SCHEMES} (e.g. sqlite:./sessions.sqlite3)"
        ))
    }

    /// The URL as the header, `/healthz` and the ready line show it.
    pub fn describe(&self) -> String {
        match self {
            StoreUrl::Memory => "memory".into(),
            StoreUrl::Default => "default".into(),
            StoreUrl::Sqlite(path) => format!("sqlite:{}", path.display()),
        }
    }
}

fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_others_are_refused_with_what_is_accepted() {
        assert_eq!(StoreUrl::parse("memory"), Ok(StoreUrl::Memory));
        assert_eq!(StoreUrl::parse("default"), Ok(StoreUrl::Default));
        assert_eq!(
            StoreUrl::parse("sqlite:/var/x.db"),
            Ok(StoreUrl::Sqlite("/var/x.db".into()))
        );
        assert_eq!(
            StoreUrl::parse("sqlite:///var/x.db"),
            Ok(StoreUrl::Sqlite("/var/x.db".into()))
        );
        assert_eq!(
            StoreUrl::parse("sqlite:rel.db"),
            Ok(StoreUrl::Sqlite("rel.db".into()))
        );
        let e = StoreUrl::parse("postgres://x").unwrap_err();
        assert!(e.contains("memory, sqlite:PATH"), "{e}");
        assert!(
            StoreUrl::parse("sqlite:")
                .unwrap_err()
                .contains("names no file")
        );
        assert_eq!(
            StoreUrl::Sqlite("/a b".into()).describe(),
            "sqlite:/a b".to_string()
        );
        let section = StoreSection {
            url: Some("redis:".into()),
        };
        assert!(
            section
                .resolve(StoreUrl::Memory)
                .unwrap_err()
                .starts_with("store.url: ")
        );
        assert_eq!(
            StoreSection::default().resolve(StoreUrl::Default),
            Ok(StoreUrl::Default)
        );
    }
}
