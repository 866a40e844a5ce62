//! What `turnscope attach` accepts as addresses, read before anything connects: the bot's MCP
//! URL and pipecat whisker's feed, each completed the way a person types them (`7870`,
//! `localhost:7870`, `http://host:7870` with no path) or refused with what was expected.

use reqwest::Url;

/// The port alone (with a path or not: `7870/mcp`), or an address with no scheme: completed
/// to `scheme://…`.
fn with_scheme(given: &str, scheme: &str) -> String {
    let port = given.split('/').next().unwrap_or_default();
    if given.contains("://") {
        given.to_string()
    } else if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
        // Not `http://7870/mcp`, which a URL parser reads as the IPv4 address 0.0.30.190.
        format!("{scheme}://127.0.0.1:{given}")
    } else {
        format!("{scheme}://{given}")
    }
}

/// Who asks for a bot's MCP URL, for the words of a refusal: `turnscope attach URL` (which
/// also takes whisker's feed), or `turnscope test --url URL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asker {
    /// `turnscope attach`.
    Attach,
    /// `turnscope test --url`.
    TestUrl,
}

impl Asker {
    /// What a refusal starts with.
    fn prefix(self) -> &'static str {
        match self {
            Asker::Attach => "attach: ",
            Asker::TestUrl => "--url ",
        }
    }

    /// The port form, as this command takes it.
    fn port_form(self) -> &'static str {
        match self {
            Asker::Attach => "turnscope attach 7870",
            Asker::TestUrl => "--url 7870",
        }
    }
}

/// The bot's MCP URL from what was given: `7870` is `http://127.0.0.1:7870/mcp`, a missing
/// scheme is `http://`, a missing path is `/mcp` (where turnscope and pipecat-mcp-transport
/// serve it).
///
/// # Errors
/// Not an `http(s)` URL with a host; a WebSocket URL is named as whisker's.
pub fn mcp_url(given: &str) -> Result<String, String> {
    mcp_url_for(given, Asker::Attach)
}

/// [`mcp_url`], its refusals worded for `asker`.
///
/// # Errors
/// Not an `http(s)` URL with a host.
pub fn mcp_url_for(given: &str, asker: Asker) -> Result<String, String> {
    let given = given.trim();
    let (prefix, port_form) = (asker.prefix(), asker.port_form());
    let written = with_scheme(given, "http");
    let mut url = Url::parse(&written).map_err(|e| {
        format!(
            "{prefix}{given:?} is not a URL ({e}); give the bot's MCP URL, e.g. \
             http://127.0.0.1:7870/mcp (or just its port: {port_form})"
        )
    })?;
    match url.scheme() {
        "http" | "https" => {}
        "ws" | "wss" => {
            // Only attach also reads whisker's feed.
            let then = match asker {
                Asker::Attach => {
                    format!("if it is pipecat whisker's feed, give it as --whisker {given}")
                }
                Asker::TestUrl => "give the bot's MCP URL, e.g. http://127.0.0.1:7870/mcp".into(),
            };
            return Err(format!(
                "{prefix}{given} is a WebSocket URL, and the bot's MCP URL is http(s); {then}"
            ));
        }
        other => {
            return Err(format!(
                "{prefix}{given} is a {other}: URL, and the bot's MCP URL is http:// or https:// \
                 (e.g. http://127.0.0.1:7870/mcp)"
            ));
        }
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!(
            "{prefix}{given} names no host; give the bot's MCP URL, e.g. http://127.0.0.1:7870/mcp"
        ));
    }
    if url.path() == "/" && url.query().is_none() {
        url.set_path("/mcp");
    }
    Ok(url.to_string())
}

/// Pipecat whisker's feed from what was given: `9090` is `ws://127.0.0.1:9090`, a missing
/// scheme is `ws://`.
///
/// # Errors
/// Not a `ws(s)` URL with a host; an `http(s)` URL is named as the bot's MCP URL.
pub fn whisker_url(given: &str) -> Result<String, String> {
    let given = given.trim();
    let written = with_scheme(given, "ws");
    let url = Url::parse(&written).map_err(|e| {
        format!(
            "attach: --whisker {given:?} is not a URL ({e}); give pipecat whisker's feed, e.g. \
             ws://localhost:9090"
        )
    })?;
    match url.scheme() {
        "ws" | "wss" => {}
        "http" | "https" => {
            return Err(format!(
                "attach: --whisker {given} is an http(s) URL, and whisker's feed is a WebSocket \
                 (ws://HOST:PORT, e.g. ws://localhost:9090); if it is the bot's MCP URL, give it \
                 as the first argument: turnscope attach {given}"
            ));
        }
        other => {
            return Err(format!(
                "attach: --whisker {given} is a {other}: URL, and whisker's feed is ws:// or \
                 wss:// (e.g. ws://localhost:9090)"
            ));
        }
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!(
            "attach: --whisker {given} names no host; give whisker's feed, e.g. ws://localhost:9090"
        ));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mcp_url_is_completed_as_people_type_it() {
        let ok = |given: &str| mcp_url(given).unwrap();
        assert_eq!(ok("7870"), "http://127.0.0.1:7870/mcp");
        // A port with its path, as copied from a ready line's URL (it read as IPv4 0.0.x.x).
        assert_eq!(ok("54807/mcp"), "http://127.0.0.1:54807/mcp");
        assert_eq!(ok("localhost:7870"), "http://localhost:7870/mcp");
        assert_eq!(ok(" http://10.0.0.2:7870 "), "http://10.0.0.2:7870/mcp");
        assert_eq!(ok("https://bots.example/"), "https://bots.example/mcp");
        // A path given is kept as it is: the server decides where MCP lives.
        assert_eq!(ok("http://h:1/bots/a/mcp"), "http://h:1/bots/a/mcp");
        assert_eq!(ok("http://h:1/?k=v"), "http://h:1/?k=v");
    }

    #[test]
    fn an_mcp_url_of_the_wrong_kind_says_what_was_expected() {
        let err = |given: &str| mcp_url(given).unwrap_err();
        assert!(err("ws://localhost:9090").contains("--whisker ws://localhost:9090"));
        assert!(err("ftp://h/x").contains("http:// or https://"));
        assert!(err("http://").contains("not a URL"), "{}", err("http://"));
        assert!(err("http://h:99999/mcp").contains("not a URL"));
        assert!(err("not a url").contains("e.g. http://127.0.0.1:7870/mcp"));
        // Asked by `turnscope test --url`: its own flag, and no whisker there.
        let test = |given: &str| mcp_url_for(given, Asker::TestUrl).unwrap_err();
        let ws = test("ws://localhost:9090");
        assert!(
            ws.starts_with("--url ws://localhost:9090 is a WebSocket URL"),
            "{ws}"
        );
        assert!(!ws.contains("--whisker"), "{ws}");
        assert!(test("http://").contains("(or just its port: --url 7870)"));
    }

    #[test]
    fn a_whisker_url_is_completed_and_an_http_one_is_named_as_the_bots() {
        assert_eq!(whisker_url("9090").unwrap(), "ws://127.0.0.1:9090");
        assert_eq!(
            whisker_url("localhost:9090").unwrap(),
            "ws://localhost:9090"
        );
        assert_eq!(whisker_url("wss://h/feed").unwrap(), "wss://h/feed");
        let err = whisker_url("http://127.0.0.1:7870/mcp").unwrap_err();
        assert!(
            err.contains("turnscope attach http://127.0.0.1:7870/mcp"),
            "{err}"
        );
        assert!(whisker_url("ws://").unwrap_err().contains("not a URL"));
    }
}
