//! What a config file changed against the running config, key by key, and which changes a
//! running server takes (from the next turn) and which wait for a restart. A reload
//! ([`crate::app`]) applies [`Config::adopt_live`]: the running config with the new values of
//! the [`LIVE_KEYS`] only, so every other key (the listening address, the token, the bridges,
//! a section added later and not yet made live) keeps its running value until a restart.

use serde_json::Value;

use super::{Config, ConfigError};

/// Keys (and whole sections) a running server applies from the next turn of every session.
/// Every other key needs a restart; a key added to the config is restart-only until it is
/// listed here and applied by the reload.
pub const LIVE_KEYS: &[&str] = &[
    "bot.system_prompt",
    "bot.greeting",
    "bot.round_cap",
    "bot.tool_timeout_seconds",
    "bot.builtin_tools",
    "bot.history_messages",
    "bot.at_round_cap",
    "model",
    "mcp_servers",
    "policy",
    "wire",
    "server.sessions",
    "server.handle_seconds",
    "server.sweep_seconds",
    "server.drain_seconds",
];

/// The keys one config changed against another, split by whether a running server can take
/// them. Keys name what changed, never a value (a token or a header may be secret).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigChanges {
    /// Changed keys that apply from the next turn (`bot.system_prompt`, `mcp_servers.files`).
    pub live: Vec<String>,
    /// Changed keys that keep their running value until a restart (`server.port`).
    pub restart: Vec<String>,
}

impl ConfigChanges {
    /// Whether nothing changed at all.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty() && self.restart.is_empty()
    }

    /// Whether `prefix` (a key or a section) is among the live changes.
    pub fn touches(&self, prefix: &str) -> bool {
        self.live.iter().any(|k| under(k, prefix))
    }
}

/// Whether `key` is `prefix` or a key inside it.
fn under(key: &str, prefix: &str) -> bool {
    key == prefix
        || key
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// Whether a running server applies `key` from the next turn.
pub fn is_live(key: &str) -> bool {
    LIVE_KEYS.iter().any(|p| under(key, p))
}

impl Config {
    /// The keys `self` changed against `running`: every leaf that differs, an entry of a
    /// named list (`mcp_servers`, `bridges.xiaozhi`) as `list.NAME`, whole other lists.
    pub fn changes_from(&self, running: &Config) -> ConfigChanges {
        let mut keys = Vec::new();
        diff(
            &mut keys,
            String::new(),
            &to_value(running),
            &to_value(self),
        );
        let (live, restart) = keys.into_iter().partition(|k| is_live(k));
        ConfigChanges { live, restart }
    }

    /// `self` (the running config) with the [`LIVE_KEYS`] of `new`: what a reload runs on.
    ///
    /// # Errors
    /// Never for a config that loaded (the round trip through its serde form is exact); an
    /// error here would name the key that could not be carried over.
    pub fn adopt_live(&self, new: &Config) -> Result<Config, ConfigError> {
        let mut merged = to_value(self);
        let from = to_value(new);
        for key in LIVE_KEYS {
            let path: Vec<&str> = key.split('.').collect();
            let value = lookup(&from, &path).cloned().unwrap_or(Value::Null);
            place(&mut merged, &path, value);
        }
        serde_json::from_value(merged).map_err(|e| ConfigError::Invalid {
            file: None,
            message: format!(
                "the reloaded config could not be carried over ({e}); restart to apply it"
            ),
            at: None,
        })
    }
}

fn to_value(config: &Config) -> Value {
    // Every field is plain data (strings, numbers, maps, lists): serializing cannot fail.
    serde_json::to_value(config).unwrap_or(Value::Null)
}

fn lookup<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, k| v.get(*k))
}

fn place(value: &mut Value, path: &[&str], new: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = value;
    for key in parents {
        match at.get_mut(*key) {
            Some(next) => at = next,
            None => return,
        }
    }
    if let Some(table) = at.as_object_mut() {
        table.insert((*last).to_string(), new);
    }
}

/// Appends the keys under `path` where `old` and `new` differ.
fn diff(keys: &mut Vec<String>, path: String, old: &Value, new: &Value) {
    if old == new {
        return;
    }
    let join = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
            names.sort();
            names.dedup();
            for name in names {
                let (x, y) = (a.get(name), b.get(name));
                diff(
                    keys,
                    join(name),
                    x.unwrap_or(&Value::Null),
                    y.unwrap_or(&Value::Null),
                );
            }
        }
        (Value::Array(a), Value::Array(b)) if named(a) && named(b) => {
            let name_of = |v: &Value| v["name"].as_str().unwrap_or_default().to_string();
            let mut names: Vec<String> = a.iter().chain(b).map(name_of).collect();
            names.sort();
            names.dedup();
            let before = keys.len();
            for name in names {
                let x = a.iter().find(|v| name_of(v) == name);
                let y = b.iter().find(|v| name_of(v) == name);
                if x != y {
                    keys.push(join(&name));
                }
            }
            // The same entries in another order: the order is precedence, so it is a change.
            let order = |list: &[Value]| list.iter().map(name_of).collect::<Vec<_>>();
            if keys.len() == before && order(a) != order(b) {
                keys.push(path);
            }
        }
        _ => keys.push(path),
    }
}

/// Whether every entry of a list is a table with a `name` (the entries are told apart by it).
fn named(list: &[Value]) -> bool {
    list.iter()
        .all(|v| v.get("name").is_some_and(Value::is_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Config {
        Config::parse(text).unwrap()
    }

    #[test]
    fn changed_keys_are_named_and_split_by_whether_they_apply_live() {
        let running = parse(
            "[server]\nport = 7870\n[bot]\nsystem_prompt = \"a\"\n\
             [[mcp_servers]]\nname = \"files\"\ncommand = \"x\"\n\
             [[mcp_servers]]\nname = \"web\"\nurl = \"http://h/mcp\"\n",
        );
        let new = parse(
            "[server]\nport = 7000\nauth_token = \"secret\"\n[bot]\nsystem_prompt = \"b\"\nname = \"n\"\n\
             [model]\ntemperature = 0.5\n\
             [[mcp_servers]]\nname = \"files\"\ncommand = \"y\"\n\
             [[mcp_servers]]\nname = \"db\"\ncommand = \"z\"\n",
        );
        let c = new.changes_from(&running);
        assert_eq!(
            c.live,
            [
                "bot.system_prompt",
                "mcp_servers.db",
                "mcp_servers.files",
                "mcp_servers.web",
                "model.temperature"
            ]
        );
        assert_eq!(c.restart, ["bot.name", "server.auth_token", "server.port"]);
        assert!(c.touches("mcp_servers") && c.touches("model") && !c.touches("policy"));
        assert!(running.changes_from(&running).is_empty());
    }

    #[test]
    fn the_order_of_tool_sources_is_a_change_of_precedence() {
        let a = parse(
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\n[[mcp_servers]]\nname = \"b\"\ncommand = \"x\"\n",
        );
        let b = parse(
            "[[mcp_servers]]\nname = \"b\"\ncommand = \"x\"\n[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\n",
        );
        assert_eq!(b.changes_from(&a).live, ["mcp_servers"]);
    }

    #[test]
    fn adopting_takes_the_live_keys_and_keeps_the_running_value_of_every_other() {
        let running = parse(
            "[server]\nport = 7870\nsessions = 4\n[bot]\nname = \"old\"\n\
             [[bridges.xiaozhi]]\nname = \"home\"\nservers = [\"@bot\"]\n",
        );
        let new = parse(
            "[server]\nport = 9000\nsessions = 9\nhost = \"0.0.0.0\"\nallow_open_bind = true\n\
             [bot]\nname = \"new\"\nsystem_prompt = \"p\"\nround_cap = 2\ngreeting = \"hi\"\n\
             [model]\nurl = \"http://m/v1\"\nstop = [\"x\"]\n[wire]\nmax_kib = 1\n\
             [policy]\nlocked = true\nallowed_url_patterns = [\"http://h/*\"]\n\
             [[mcp_servers]]\nname = \"f\"\ncommand = \"c\"\ntool_filter = [\"a\"]\n",
        );
        let merged = running.adopt_live(&new).unwrap();
        assert_eq!(
            (merged.server.port, merged.server.host.as_str()),
            (7870, "127.0.0.1")
        );
        assert_eq!(merged.server.sessions, 9);
        assert_eq!(merged.bot.name.as_deref(), Some("old"));
        assert_eq!(merged.bridges.xiaozhi.len(), 1);
        assert_eq!(merged.bot.system_prompt.as_deref(), Some("p"));
        assert_eq!(merged.bot.round_cap, 2);
        assert_eq!(merged.model.url.as_deref(), Some("http://m/v1"));
        assert_eq!(merged.mcp_servers, new.mcp_servers);
        assert_eq!(merged.policy, new.policy);
        // What is left different is exactly the restart-only part, and nothing live.
        let left = new.changes_from(&merged);
        assert!(left.live.is_empty(), "{left:?}");
        assert_eq!(
            left.restart,
            [
                "bot.name",
                "bridges.xiaozhi.home",
                "server.allow_open_bind",
                "server.host",
                "server.port"
            ]
        );
        assert!(merged.changes_from(&running).restart.is_empty());
    }

    #[test]
    fn every_live_key_names_a_key_of_the_config() {
        let value = to_value(&Config::default());
        for key in LIVE_KEYS {
            let path: Vec<&str> = key.split('.').collect();
            assert!(lookup(&value, &path).is_some(), "{key} is not a config key");
        }
    }
}
