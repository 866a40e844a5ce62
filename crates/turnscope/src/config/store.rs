//! `[store]`: where sessions are kept (`--store URL` overrides `url`). The URL is checked
//! here, with the rest of the config; opening the store is `store`'s job.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `[store]`
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSection {
    /// `memory`, `sqlite:PATH`, `redis://[USER:PASS@]HOST:PORT/DB` (`rediss://` for TLS;
    /// `?prefix=` for the key prefix), or `default` (a file per listening address in the state
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
    /// `redis://…` or `rediss://…`: a Redis server several replicas share.
    Redis(RedisUrl),
}

/// A Redis URL: the whole of it (credentials included, only ever handed to the client), the
/// same with its credentials masked (for everything a person sees), and the key prefix.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl {
    secret: String,
    masked: String,
    prefix: String,
}

impl std::fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RedisUrl").field(&self.masked).finish()
    }
}

/// The key prefix when the URL names none.
pub const REDIS_PREFIX: &str = "turnscope:";

impl RedisUrl {
    /// Parses `redis://[USER:PASS@]HOST[:PORT][/DB][?prefix=P]` (or `rediss://`).
    ///
    /// # Errors
    /// No host, a database that is not a number, or another query parameter.
    pub fn parse(text: &str) -> Result<Self, String> {
        let masked = mask_credentials(text);
        let rest = text
            .strip_prefix("redis://")
            .or_else(|| text.strip_prefix("rediss://"))
            .ok_or_else(|| format!("store URL {masked:?} is not a redis:// or rediss:// URL"))?;
        let (address, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut prefix = REDIS_PREFIX.to_string();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("prefix", value)) if !value.is_empty() => prefix = value.to_string(),
                Some(("prefix", _)) => {
                    return Err(format!(
                        "store URL {masked:?}: ?prefix= is empty; give the keys a prefix (e.g. \
                         ?prefix=bots:), or leave it out for the default {REDIS_PREFIX:?}"
                    ));
                }
                _ => {
                    // The name only: the value may be a secret (`?password=`).
                    let name = pair.split_once('=').map_or(pair, |(name, _)| name);
                    return Err(format!(
                        "store URL {masked:?}: ?{name}= is not a setting turnscope knows; the only one is \
                         ?prefix=KEYPREFIX (default {REDIS_PREFIX:?}); a password goes before the host \
                         (redis://:PASSWORD@HOST:PORT/DB)"
                    ));
                }
            }
        }
        let hostpart = address.rsplit_once('@').map_or(address, |(_, h)| h);
        let (host, db) = hostpart.split_once('/').unwrap_or((hostpart, ""));
        if host.is_empty() || host.starts_with(':') {
            return Err(format!(
                "store URL {masked:?} names no host; expected redis://[USER:PASSWORD@]HOST:PORT/DB, \
                 e.g. redis://127.0.0.1:6379/0"
            ));
        }
        if !db.is_empty() && db.parse::<u32>().is_err() {
            return Err(format!(
                "store URL {masked:?}: the database {db:?} is not a number (redis://HOST:PORT/0)"
            ));
        }
        let secret = text
            .split_once('?')
            .map_or(text, |(url, _)| url)
            .to_string();
        // The prefix is part of the store's name where it is shown: deployments sharing one
        // Redis under different prefixes are told apart.
        let mut masked = mask_credentials(&secret);
        if prefix != REDIS_PREFIX {
            masked.push_str("?prefix=");
            masked.push_str(&prefix);
        }
        Ok(Self {
            secret,
            masked,
            prefix,
        })
    }

    /// The URL to connect with (credentials included: never show it).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The URL with its credentials masked (`redis://***@host:port/db`), and its prefix when it
    /// is not the default.
    pub fn masked(&self) -> &str {
        &self.masked
    }

    /// The prefix of every key.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

/// `text` with the credentials of any `scheme://user:pass@` in it replaced by `***`, and the
/// values of its query's parameters too, but `prefix` (`?password=` may hold a secret).
pub fn mask_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '"')
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(i) => {
                out.push_str("***");
                out.push_str(&authority[i..]);
            }
            None => out.push_str(authority),
        }
        let after = &tail[end..];
        let url_end = after
            .find(|c: char| c.is_whitespace() || c == '"')
            .unwrap_or(after.len());
        let (path, query) = after[..url_end]
            .split_once('?')
            .unwrap_or((&after[..url_end], ""));
        out.push_str(path);
        if after[..url_end].contains('?') {
            out.push('?');
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, value)) if name == "prefix" => format!("{name}={value}"),
                    Some((name, _)) => format!("{name}=***"),
                    None => pair.to_string(),
                })
                .collect();
            out.push_str(&pairs.join("&"));
        }
        rest = &after[url_end..];
    }
    out.push_str(rest);
    out
}

/// The schemes a store URL may have, for error messages.
pub const SCHEMES: &str =
    "memory, sqlite:PATH, redis://HOST:PORT/DB, rediss://HOST:PORT/DB, default";

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
        if text.starts_with("redis://") || text.starts_with("rediss://") {
            return RedisUrl::parse(text).map(StoreUrl::Redis);
        }
        // A path with no scheme (`stores/x.sqlite3`) most likely means a file.
        if !text.contains(':') {
            return Err(format!(
                "store URL {text:?} names no kind of store; a file is given as sqlite:PATH: did \
                 you mean sqlite:{text}? (expected one of: {SCHEMES})"
            ));
        }
        let text = mask_credentials(text);
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
            StoreUrl::Redis(url) => url.masked().to_string(),
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
        let e = StoreUrl::parse("postgres://bob:pw@x").unwrap_err();
        assert!(!e.contains("pw"), "{e}");
        assert!(e.contains("memory, sqlite:PATH"), "{e}");
        assert!(!e.contains("did you mean"), "{e}");
        // A path without its scheme: the URL it most likely meant is offered (tour U #11).
        let e = StoreUrl::parse("stores/x.sqlite3").unwrap_err();
        assert!(e.contains("did you mean sqlite:stores/x.sqlite3?"), "{e}");
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

    #[test]
    fn redis_urls_keep_their_credentials_out_of_sight() {
        let Ok(StoreUrl::Redis(url)) =
            StoreUrl::parse("redis://alice:s3cret@db.internal:6380/2?prefix=bots:")
        else {
            panic!("a redis URL");
        };
        assert_eq!(url.secret(), "redis://alice:s3cret@db.internal:6380/2");
        assert_eq!(url.masked(), "redis://***@db.internal:6380/2?prefix=bots:");
        assert_eq!(url.prefix(), "bots:");
        assert!(!format!("{url:?}").contains("s3cret"));
        assert_eq!(
            StoreUrl::Redis(url).describe(),
            "redis://***@db.internal:6380/2?prefix=bots:"
        );
        let Ok(StoreUrl::Redis(tls)) = StoreUrl::parse("rediss://cache:6379") else {
            panic!("a rediss URL");
        };
        assert_eq!(
            (tls.masked(), tls.prefix()),
            ("rediss://cache:6379", REDIS_PREFIX)
        );
        let e = StoreUrl::parse("redis://u:pw@h:1/x").unwrap_err();
        assert!(e.contains("not a number") && !e.contains("pw"), "{e}");
        let e = StoreUrl::parse("redis://:pw@/0").unwrap_err();
        assert!(e.contains("names no host") && !e.contains("pw"), "{e}");
        let e = StoreUrl::parse("redis://h:1/0?db=2").unwrap_err();
        assert!(e.contains("prefix"), "{e}");
        let e = StoreUrl::parse("redis://h:1/0?prefix=").unwrap_err();
        assert!(e.contains("?prefix= is empty"), "{e}");
        assert_eq!(
            mask_credentials("failed: redis://a:b@h:1/0 and rediss://h2/1"),
            "failed: redis://***@h:1/0 and rediss://h2/1"
        );
        // A value in the query may be a secret too: never echoed.
        let e = StoreUrl::parse("redis://h:1/0?password=QSECRET").unwrap_err();
        assert!(
            e.contains("?password= is not a setting") && !e.contains("QSECRET"),
            "{e}"
        );
        assert_eq!(
            mask_credentials("at redis://h:1/0?prefix=bots:&password=pw then"),
            "at redis://h:1/0?prefix=bots:&password=*** then"
        );
    }
}
