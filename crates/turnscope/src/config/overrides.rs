//! `Overrides`: values given on the command line, laid over the config file before the one
//! validation, so a flag obeys the same rules as the key it sets and an error names the flag.

use super::Config;

/// Command-line values for the main mode; `None` (or `false`, or empty) leaves the config's
/// value. The binary fills it from its flags.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--host`: `server.host`.
    pub host: Option<String>,
    /// `--port`: `server.port`.
    pub port: Option<u16>,
    /// `--model-url`: `model.url`.
    pub model_url: Option<String>,
    /// `--model`: `model.name`.
    pub model: Option<String>,
    /// `--sessions`: `server.sessions`.
    pub sessions: Option<usize>,
    /// `--handle-seconds`: `server.handle_seconds`.
    pub handle_seconds: Option<u64>,
    /// `--sweep-seconds`: `server.sweep_seconds`.
    pub sweep_seconds: Option<f64>,
    /// `--replica-id`: `server.replica_id`.
    pub replica_id: Option<String>,
    /// `--drain-seconds`: `server.drain_seconds`.
    pub drain_seconds: Option<f64>,
    /// `--pace`: `model.pace`.
    pub pace: Option<f64>,
    /// `--allowed-host`: added to `server.allowed_hosts`.
    pub allowed_hosts: Vec<String>,
    /// `--allowed-origin`: added to `server.allowed_origins`.
    pub allowed_origins: Vec<String>,
    /// `--no-host-check`: `server.host_check = false`.
    pub no_host_check: bool,
    /// `--auth-token` (or `TURNSCOPE_AUTH_TOKEN`): `server.auth_token`.
    pub auth_token: Option<String>,
    /// `--allow-open-bind`: `server.allow_open_bind = true`.
    pub allow_open_bind: bool,
    /// `--theme`: `console.theme`.
    pub theme: Option<String>,
    /// `--locked`: `policy.locked = true`.
    pub locked: bool,
    /// `--wire-kib`: `wire.max_kib`.
    pub wire_kib: Option<usize>,
    /// `--store`: `store.url`.
    pub store: Option<String>,
}

impl Overrides {
    /// Lays the given values over `config`.
    pub(super) fn apply(&self, config: &mut Config) {
        let s = &mut config.server;
        if let Some(h) = &self.host {
            s.host.clone_from(h);
        }
        if let Some(p) = self.port {
            s.port = p;
        }
        if let Some(n) = self.sessions {
            s.sessions = n;
        }
        if let Some(n) = self.handle_seconds {
            s.handle_seconds = n;
        }
        if let Some(n) = self.sweep_seconds {
            s.sweep_seconds = n;
        }
        if let Some(id) = &self.replica_id {
            s.replica_id = Some(id.clone());
        }
        if let Some(n) = self.drain_seconds {
            s.drain_seconds = n;
        }
        s.allowed_hosts.extend(self.allowed_hosts.iter().cloned());
        s.allowed_origins
            .extend(self.allowed_origins.iter().cloned());
        if self.no_host_check {
            s.host_check = false;
        }
        if let Some(t) = &self.auth_token {
            s.auth_token = Some(t.clone());
        }
        if self.allow_open_bind {
            s.allow_open_bind = true;
        }
        if let Some(u) = &self.model_url {
            config.model.url = Some(u.clone());
        }
        if let Some(m) = &self.model {
            config.model.name = Some(m.clone());
        }
        if let Some(p) = self.pace {
            config.model.pace = p;
        }
        if let Some(t) = &self.theme {
            config.console.theme = Some(t.clone());
        }
        if self.locked {
            config.policy.locked = true;
        }
        if let Some(n) = self.wire_kib {
            config.wire.max_kib = n;
        }
        if let Some(url) = &self.store {
            config.store.url = Some(url.clone());
        }
    }

    /// Rewrites a validation message that starts with a key this set (`server.sessions: …`)
    /// to start with the flag (`--sessions (server.sessions): …`).
    pub(super) fn name_flag(&self, message: String) -> String {
        let set: [(&str, &str, bool); 9] = [
            ("wire.max_kib", "--wire-kib", self.wire_kib.is_some()),
            ("model.url", "--model-url", self.model_url.is_some()),
            ("store.url", "--store", self.store.is_some()),
            ("server.sessions", "--sessions", self.sessions.is_some()),
            (
                "server.handle_seconds",
                "--handle-seconds",
                self.handle_seconds.is_some(),
            ),
            (
                "server.sweep_seconds",
                "--sweep-seconds",
                self.sweep_seconds.is_some(),
            ),
            ("model.pace", "--pace", self.pace.is_some()),
            (
                "server.replica_id",
                "--replica-id",
                self.replica_id.is_some(),
            ),
            (
                "server.drain_seconds",
                "--drain-seconds",
                self.drain_seconds.is_some(),
            ),
        ];
        for (key, flag, given) in set {
            if given && message.starts_with(&format!("{key}:")) {
                return format!("{flag} ({key}){}", &message[key.len()..]);
            }
        }
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(overrides: Overrides) -> Result<Config, String> {
        Config::load(None, &overrides)
            .map(|(c, _)| c)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn flags_obey_the_rules_of_their_keys_and_are_named() {
        for (overrides, flag) in [
            (
                Overrides {
                    pace: Some(f64::INFINITY),
                    ..Overrides::default()
                },
                "--pace (model.pace)",
            ),
            (
                Overrides {
                    pace: Some(1e300),
                    ..Overrides::default()
                },
                "--pace (model.pace)",
            ),
            (
                Overrides {
                    sessions: Some(0),
                    ..Overrides::default()
                },
                "--sessions (server.sessions)",
            ),
            (
                Overrides {
                    handle_seconds: Some(0),
                    ..Overrides::default()
                },
                "--handle-seconds (server.handle_seconds)",
            ),
            (
                Overrides {
                    sweep_seconds: Some(1e20),
                    ..Overrides::default()
                },
                "--sweep-seconds (server.sweep_seconds)",
            ),
            (
                Overrides {
                    model_url: Some("https://user:pass@llm.example/v1".into()),
                    ..Overrides::default()
                },
                "--model-url (model.url): https://***@llm.example",
            ),
        ] {
            let e = load(overrides).unwrap_err();
            assert!(e.starts_with(flag), "{e}");
        }
    }

    #[test]
    fn flags_win_over_the_defaults() {
        let c = load(Overrides {
            port: Some(0),
            pace: Some(0.0),
            locked: true,
            allowed_hosts: vec!["bot.example".into()],
            ..Overrides::default()
        })
        .unwrap();
        assert_eq!(
            (c.server.port, c.model.pace, c.policy.locked),
            (0, 0.0, true)
        );
        assert_eq!(c.server.allowed_hosts, ["bot.example"]);
    }
}
