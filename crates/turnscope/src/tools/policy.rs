//! Which MCP servers may be reached: the URL allowlist for http/sse servers and the stdio gate.
//! Defaults allow everything (a local console); `locked` (`--locked`) turns stdio off and
//! allows no URL or command until allowlisted. The environment (`BYOM_ALLOWED_URL_PATTERNS`, `MCP_STDIO_*`) wins
//! over `[policy]`. [`Policy`] states the URL pattern syntax.

use std::sync::{Arc, Mutex};

use reqwest::Url;

use crate::config::PolicySection;

/// Environment variable holding the URL allowlist (JSON array or comma-separated).
pub(crate) const ENV_URL_PATTERNS: &str = "BYOM_ALLOWED_URL_PATTERNS";
/// Environment variable turning stdio servers on or off (`true`/`false`, `1`/`0`).
pub(crate) const ENV_STDIO_ENABLED: &str = "MCP_STDIO_ENABLED";
/// Environment variable holding the stdio command allowlist (JSON array or comma-separated).
pub(crate) const ENV_STDIO_COMMANDS: &str = "MCP_STDIO_ALLOWED_COMMANDS";

/// Most redirect hops followed for one request.
const MAX_REDIRECTS: usize = 10;

/// Interpreters whose inline-code flags are refused under a command allowlist: allowing
/// `python` must not allow `python -c '<anything>'`.
const INTERPRETERS: [&str; 13] = [
    "python",
    "python3",
    "node",
    "deno",
    "bun",
    "ruby",
    "perl",
    "php",
    "bash",
    "sh",
    "zsh",
    "pwsh",
    "powershell",
];

/// Flags that make an interpreter run code given on the command line.
const INLINE_CODE_FLAGS: [&str; 8] = [
    "-c", "-e", "--eval", "-p", "--print", "-r", "eval", "-Command",
];

/// The file name of `command`, without its directory (`/usr/bin/python3` → `python3`).
fn program_name(command: &str) -> &str {
    command.rsplit(['/', '\\']).next().unwrap_or(command)
}

/// Whether `command` names an interpreter: its file name without `.exe` and without a version
/// (`python3.11`, `node20`), or `pythonw`.
fn is_interpreter(command: &str) -> bool {
    let base = program_name(command);
    let base = base.strip_suffix(".exe").unwrap_or(base);
    let bare = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INTERPRETERS.contains(&base) || INTERPRETERS.contains(&bare) || bare == "pythonw"
}

/// Whether `arg` makes an interpreter run code given on the command line: one of
/// [`INLINE_CODE_FLAGS`], `--eval=…`, or a cluster of short flags holding one of them
/// (`-Ic`, `-lc`, `-pe`, `-we`, perl's `-E`, `bash -euxoc`; a cluster of any length in lower
/// case, of up to four letters otherwise: pwsh's `-NoProfile` is one word).
fn runs_inline_code(arg: &str) -> bool {
    if INLINE_CODE_FLAGS.contains(&arg) || arg.starts_with("--eval=") {
        return true;
    }
    let Some(cluster) = arg.strip_prefix('-') else {
        return false;
    };
    let short =
        (1..=4).contains(&cluster.len()) && cluster.chars().all(|c| c.is_ascii_alphabetic());
    let lower = !cluster.is_empty() && cluster.chars().all(|c| c.is_ascii_lowercase());
    (short || lower) && cluster.contains(['c', 'e', 'E', 'p'])
}

/// The flag among `args` of the interpreter `command` that runs inline code, if any. Only
/// when the script comes first (`python3 server.py -dev`, `node srv.js -ep x`), or Python's
/// `-m MODULE` does, is the rest the script's own; otherwise every argument is checked: a
/// flag's value can look like a script (`python3 -X a.py -c …`, `bash --rcfile x.sh -c …`),
/// and `-m` is another switch to a shell (`bash -m -c …`).
fn inline_code_flag<'a>(command: &str, args: &'a [String]) -> Option<&'a str> {
    /// Extensions of the scripts an interpreter runs from a file.
    const SCRIPTS: [&str; 12] = [
        "py", "pyw", "js", "mjs", "cjs", "ts", "mts", "rb", "pl", "php", "sh", "ps1",
    ];
    let script_first = args.first().is_some_and(|first| {
        !first.starts_with('-')
            && first
                .rsplit_once('.')
                .is_some_and(|(_, extension)| SCRIPTS.contains(&extension))
    });
    let module_first =
        program_name(command).starts_with("python") && args.first().is_some_and(|a| a == "-m");
    if script_first || module_first {
        return None;
    }
    args.iter()
        .map(String::as_str)
        .find(|a| runs_inline_code(a))
}

/// The rules in force for reaching MCP servers.
///
/// URL patterns are `scheme://host[:port]/path`: the host may start with `*.` (any
/// subdomain, never the bare domain) or be `*`; the port may be `*` (absent = the scheme's
/// default port); `*` in the path matches anything. A URL carrying user info (`user@host`)
/// is refused under an allowlist, and so is every redirect hop that leaves it.
#[derive(Debug, Clone)]
pub struct Policy {
    urls: Vec<UrlPattern>,
    stdio_enabled: bool,
    commands: Vec<String>,
    locked: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Self::open()
    }
}

impl Policy {
    /// Everything allowed (the local console's default).
    pub fn open() -> Self {
        Self {
            urls: Vec::new(),
            stdio_enabled: true,
            commands: Vec::new(),
            locked: false,
        }
    }

    /// The defaults for shared deployments: stdio off, and nothing reachable until allowlisted.
    pub fn locked() -> Self {
        Self {
            urls: Vec::new(),
            stdio_enabled: false,
            commands: Vec::new(),
            locked: true,
        }
    }

    /// The policy of a `[policy]` section overlaid by the process environment.
    ///
    /// # Errors
    /// A pattern or value that does not parse; the message names the setting.
    pub(crate) fn from_config(section: &PolicySection) -> Result<Self, PolicyError> {
        Self::resolve(section, &|name| std::env::var(name).ok())
    }

    /// The policy of a `[policy]` section overlaid by the variables `env` returns.
    ///
    /// # Errors
    /// A pattern or value that does not parse; the message names the setting.
    pub fn resolve(
        section: &PolicySection,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, PolicyError> {
        let mut policy = if section.locked {
            Self::locked()
        } else {
            Self::open()
        };
        let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let patterns = match env(ENV_URL_PATTERNS) {
            Some(text) => parse_list(&text).map_err(PolicyError::env(ENV_URL_PATTERNS))?,
            None => section.allowed_url_patterns.clone().unwrap_or_default(),
        };
        policy.urls = patterns
            .iter()
            .map(|p| UrlPattern::parse(p))
            .collect::<Result<_, _>>()
            .map_err(PolicyError::Pattern)?;
        if let Some(text) = env(ENV_STDIO_ENABLED) {
            policy.stdio_enabled =
                parse_bool(&text).map_err(PolicyError::env(ENV_STDIO_ENABLED))?;
        } else if let Some(enabled) = section.stdio_enabled {
            policy.stdio_enabled = enabled;
        }
        policy.commands = match env(ENV_STDIO_COMMANDS) {
            Some(text) => parse_list(&text).map_err(PolicyError::env(ENV_STDIO_COMMANDS))?,
            None => section.stdio_allowed_commands.clone().unwrap_or_default(),
        };
        Ok(policy)
    }

    /// Whether URLs are checked against an allowlist at all.
    fn urls_guarded(&self) -> bool {
        self.locked || !self.urls.is_empty()
    }

    /// Whether stdio commands are checked against an allowlist.
    fn commands_guarded(&self) -> bool {
        self.locked || !self.commands.is_empty()
    }

    /// Whether the policy is locked.
    pub fn is_locked(&self) -> bool {
        self.locked
    }

    /// Checks an http/sse server URL.
    ///
    /// # Errors
    /// Why the URL is refused and what setting would allow it.
    pub(crate) fn check_url(&self, url: &str) -> Result<(), String> {
        let parsed = Url::parse(url).map_err(|e| format!("{url:?} is not a URL ({e})"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "{url:?}: only http and https servers can be reached"
            ));
        }
        if !self.urls_guarded() {
            return Ok(());
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(format!(
                "{} carries user info before the host, which can disguise the real host; \
                 put credentials in headers instead",
                redact(&parsed)
            ));
        }
        if self.urls.is_empty() {
            return Err(format!(
                "{url} refused: locked mode allows no URL until {ENV_URL_PATTERNS} \
                 (or [policy] allowed_url_patterns) lists it"
            ));
        }
        if self.urls.iter().any(|p| p.matches(&parsed)) {
            Ok(())
        } else {
            let list: Vec<&str> = self.urls.iter().map(|p| p.text.as_str()).collect();
            Err(format!(
                "{url} is not in allowed_url_patterns [{}]; add a pattern for it \
                 ({ENV_URL_PATTERNS} or [policy] allowed_url_patterns)",
                list.join(", ")
            ))
        }
    }

    /// Checks a stdio server's command line.
    ///
    /// # Errors
    /// Why the command is refused and what setting would allow it.
    pub(crate) fn check_stdio(&self, command: &str, args: &[String]) -> Result<(), String> {
        if !self.stdio_enabled {
            return Err(format!(
                "stdio servers are turned off{}; set {ENV_STDIO_ENABLED}=true \
                 (or [policy] stdio_enabled = true) to run `{command}`",
                if self.locked { " (locked mode)" } else { "" }
            ));
        }
        if !self.commands_guarded() {
            return Ok(());
        }
        if !self.commands.iter().any(|c| c == command) {
            return Err(format!(
                "command `{command}` is not in stdio_allowed_commands [{}]; add it exactly as the \
                 config writes it ({ENV_STDIO_COMMANDS} or [policy] stdio_allowed_commands)",
                self.commands.join(", ")
            ));
        }
        if is_interpreter(command)
            && let Some(flag) = inline_code_flag(command, args)
        {
            return Err(format!(
                "`{command} {flag} ...` runs code given on the command line, which an allowlist of \
                 commands cannot vet; run a script file instead"
            ));
        }
        Ok(())
    }

    /// An HTTP client for MCP servers under this policy: every redirect hop is checked
    /// against the allowlist (and at most 10 are followed). A refused hop fails the request;
    /// [`GuardedClient::take_refusal`] says why, since the HTTP error itself does not.
    pub(crate) fn http_client(self: &Arc<Self>) -> GuardedClient {
        let refused: Arc<Mutex<Option<String>>> = Arc::default();
        let redirect = if self.urls_guarded() {
            let policy = self.clone();
            let refused = refused.clone();
            reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= MAX_REDIRECTS {
                    return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
                }
                match policy.check_url(attempt.url().as_str()) {
                    Ok(()) => attempt.follow(),
                    Err(reason) => {
                        let reason = format!("redirect refused: {reason}");
                        *refused.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason.clone());
                        attempt.error(reason)
                    }
                }
            })
        } else {
            reqwest::redirect::Policy::limited(MAX_REDIRECTS)
        };
        // No idle connections kept (as rmcp's own default client): a streamable HTTP answer
        // is headers, then an event, written separately; on a reused connection a server
        // without TCP_NODELAY (hyper's default) holds the event until the headers are acked,
        // and the delayed ACK makes every call ~40 ms slower. A fresh connection is acked
        // at once.
        let client = reqwest::Client::builder()
            .redirect(redirect)
            .pool_max_idle_per_host(0)
            .build()
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "cannot build the MCP HTTP client; using the default");
                reqwest::Client::new()
            });
        GuardedClient { client, refused }
    }

    /// One line for logs and the console.
    pub fn describe(&self) -> String {
        let urls = if self.urls.is_empty() {
            if self.locked { "none" } else { "any" }.to_string()
        } else {
            self.urls
                .iter()
                .map(|p| p.text.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let commands = if self.commands.is_empty() {
            if self.locked { "none" } else { "any" }.to_string()
        } else {
            self.commands.join(", ")
        };
        format!(
            "{}urls: {urls}; stdio: {}; commands: {commands}",
            if self.locked { "locked; " } else { "" },
            if self.stdio_enabled { "on" } else { "off" }
        )
    }
}

/// An HTTP client whose redirects follow a [`Policy`].
#[derive(Clone)]
pub(crate) struct GuardedClient {
    /// The client.
    pub client: reqwest::Client,
    refused: Arc<Mutex<Option<String>>>,
}

impl GuardedClient {
    /// Why the last redirect was refused, if one was since the last call.
    pub(crate) fn take_refusal(&self) -> Option<String> {
        self.refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

/// A URL without its user info, for messages.
fn redact(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    format!("{shown} (user info removed)")
}

/// A list from the environment: a JSON array of strings, or comma-separated.
/// Why a `[policy]` section, with the environment laid over it, is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// Occurs when a `BYOM_*`/`MCP_STDIO_*` variable is set to a value that does not parse.
    #[error("{variable}: {message}")]
    Env {
        /// The variable.
        variable: &'static str,
        /// What is wrong and what is expected.
        message: String,
    },
    /// Occurs when a URL pattern (from the section or the environment) does not parse.
    #[error("allowed_url_patterns: {0}")]
    Pattern(String),
}

impl PolicyError {
    /// A constructor of [`PolicyError::Env`] for `variable`, for `map_err`.
    fn env(variable: &'static str) -> impl Fn(String) -> Self {
        move |message| Self::Env { variable, message }
    }
}

fn parse_list(text: &str) -> Result<Vec<String>, String> {
    let text = text.trim();
    if text.starts_with('[') {
        return serde_json::from_str::<Vec<String>>(text)
            .map_err(|e| format!("expected a JSON array of strings ({e})"));
    }
    Ok(text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect())
}

fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        other => Err(format!("expected true or false, got {other:?}")),
    }
}

/// One allowlist entry.
#[derive(Debug, Clone, PartialEq)]
struct UrlPattern {
    text: String,
    scheme: String,
    host: HostPattern,
    port: PortPattern,
    path: String,
}

#[derive(Debug, Clone, PartialEq)]
enum HostPattern {
    Any,
    Exact(String),
    /// `*.example.com` → `.example.com`: one or more labels in front, never the bare domain.
    Subdomain(String),
}

#[derive(Debug, Clone, PartialEq)]
enum PortPattern {
    SchemeDefault,
    Any,
    Exact(u16),
}

impl UrlPattern {
    fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "{text:?}: {why}; expected scheme://host[:port]/path, e.g. https://*.example.com/*"
            )
        };
        let (scheme, rest) = text.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let scheme = scheme.to_ascii_lowercase();
        if !matches!(scheme.as_str(), "http" | "https" | "*") {
            return Err(bad("the scheme must be http, https or *"));
        }
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], rest[at..].to_string()),
            None => (rest, "/*".to_string()),
        };
        if authority.contains('@') {
            return Err(bad("user info (user@) is not allowed in a pattern"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6.find(']').ok_or_else(|| bad("unclosed [ in the host"))?;
            let port = v6[end + 1..].strip_prefix(':');
            (format!("[{}]", &v6[..end].to_ascii_lowercase()), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_ascii_lowercase(), Some(p)),
                None => (authority.to_ascii_lowercase(), None),
            }
        };
        let host = if host == "*" {
            HostPattern::Any
        } else if let Some(domain) = host.strip_prefix("*.") {
            let domain = domain.trim_end_matches('.');
            if domain.is_empty() || domain.contains('*') {
                return Err(bad("`*.` must be followed by a domain"));
            }
            HostPattern::Subdomain(format!(".{domain}"))
        } else if host.is_empty() || host.contains('*') {
            return Err(bad("the host must be a name, `*.domain` or `*`"));
        } else {
            HostPattern::Exact(host.trim_end_matches('.').to_string())
        };
        let port = match port {
            None => PortPattern::SchemeDefault,
            Some("*") => PortPattern::Any,
            Some(p) => PortPattern::Exact(
                p.parse()
                    .map_err(|_| bad("the port must be a number or *"))?,
            ),
        };
        Ok(Self {
            text: text.to_string(),
            scheme,
            host,
            port,
            path,
        })
    }

    fn matches(&self, url: &Url) -> bool {
        if self.scheme != "*" && self.scheme != url.scheme() {
            return false;
        }
        let Some(host) = url.host_str() else {
            return false;
        };
        let host = host.to_ascii_lowercase();
        let host = host.trim_end_matches('.');
        let host_ok = match &self.host {
            HostPattern::Any => true,
            HostPattern::Exact(h) => h == host,
            HostPattern::Subdomain(suffix) => {
                host.len() > suffix.len() && host.ends_with(suffix.as_str())
            }
        };
        if !host_ok {
            return false;
        }
        let port = url.port_or_known_default();
        let port_ok = match self.port {
            PortPattern::Any => true,
            PortPattern::Exact(p) => port == Some(p),
            PortPattern::SchemeDefault => match self.scheme.as_str() {
                "http" => port == Some(80),
                "https" => port == Some(443),
                _ => url.port().is_none(),
            },
        };
        port_ok && glob(&self.path, url.path())
    }
}

/// `*` matches any run of characters (slashes included); everything else matches itself.
fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
