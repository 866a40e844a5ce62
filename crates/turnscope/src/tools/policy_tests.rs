//! Policy cases from the acceptance list (bridges.md cases 71 and 72).

use super::*;

fn with_env(section: &PolicySection, vars: &[(&str, &str)]) -> Result<Policy, PolicyError> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    Policy::resolve(section, &move |name| {
        vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    })
}

fn allowlist(patterns: &[&str]) -> Policy {
    with_env(
        &PolicySection {
            allowed_url_patterns: Some(patterns.iter().map(|p| (*p).to_string()).collect()),
            ..PolicySection::default()
        },
        &[],
    )
    .unwrap()
}

#[test]
fn the_default_policy_allows_everything() {
    let policy = with_env(&PolicySection::default(), &[]).unwrap();
    assert!(policy.check_url("http://10.0.0.1:9000/mcp").is_ok());
    assert!(policy.check_url("https://user:pw@example.com/").is_ok());
    assert!(
        policy
            .check_stdio("bash", &["-c".into(), "rm -rf /".into()])
            .is_ok()
    );
    assert_eq!(policy.describe(), "urls: any; stdio: on; commands: any");
}

#[test]
fn subdomain_wildcard_checks_scheme_host_and_userinfo() {
    let policy = allowlist(&["https://*.example.com/*"]);
    assert!(policy.check_url("https://mcp.example.com/mcp").is_ok());
    assert!(policy.check_url("https://a.b.example.com/x/y").is_ok());
    assert!(policy.check_url("https://MCP.Example.COM./mcp").is_ok());
    let denied = [
        "http://mcp.example.com/mcp",       // scheme
        "https://example.com/mcp",          // the bare domain is not a subdomain
        "https://example.com.evil.io/",     // suffix trick
        "https://evilexample.com/",         // no dot boundary
        "https://mcp.example.com@evil.io/", // userinfo trick: the host is evil.io
        "https://169.254.169.254/",         // metadata address
        "https://mcp.example.com:8443/mcp", // not the default port
    ];
    for url in denied {
        assert!(policy.check_url(url).is_err(), "{url} must be refused");
    }
    let e = policy
        .check_url("https://mcp.example.com@evil.io/")
        .unwrap_err();
    assert!(e.contains("user info"), "{e}");
    assert!(
        !e.contains("mcp.example.com@"),
        "the message hides the user info: {e}"
    );
    let e = policy.check_url("https://169.254.169.254/").unwrap_err();
    assert!(
        e.contains("allowed_url_patterns") && e.contains(ENV_URL_PATTERNS),
        "{e}"
    );
}

#[test]
fn ports_and_paths_are_matched() {
    let policy = allowlist(&["http://activepieces:80/*", "http://127.0.0.1:*/mcp"]);
    assert!(policy.check_url("http://activepieces/any/path").is_ok());
    assert!(policy.check_url("http://127.0.0.1:9000/mcp").is_ok());
    assert!(policy.check_url("http://127.0.0.1:9000/mcp/extra").is_err());
    assert!(policy.check_url("http://127.0.0.1:9000/other").is_err());
    // The URL parser normalises dot segments and numeric hosts before matching.
    assert!(policy.check_url("http://127.0.0.1:9000/x/../mcp").is_ok());
    assert!(policy.check_url("http://2130706433:9000/mcp").is_ok());
}

#[test]
fn environment_wins_over_the_section_and_accepts_json_or_commas() {
    let section = PolicySection {
        allowed_url_patterns: Some(vec!["https://file.example/*".into()]),
        stdio_enabled: Some(true),
        ..PolicySection::default()
    };
    let policy = with_env(
        &section,
        &[
            (
                ENV_URL_PATTERNS,
                r#"["https://mcp.example.com/*", "http://activepieces:80/*"]"#,
            ),
            (ENV_STDIO_ENABLED, "false"),
        ],
    )
    .unwrap();
    assert!(policy.check_url("https://mcp.example.com/mcp").is_ok());
    assert!(policy.check_url("https://file.example/mcp").is_err());
    assert!(policy.check_stdio("python", &[]).is_err());

    let policy = with_env(&section, &[(ENV_STDIO_COMMANDS, "python, node")]).unwrap();
    assert!(policy.check_stdio("node", &[]).is_ok());
    assert!(policy.check_stdio("bash", &[]).is_err());

    let e = with_env(&section, &[(ENV_STDIO_ENABLED, "maybe")])
        .unwrap_err()
        .to_string();
    assert!(e.contains(ENV_STDIO_ENABLED), "{e}");
    let e = with_env(&section, &[(ENV_URL_PATTERNS, "ftp://x/*")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("allowed_url_patterns") && e.contains("ftp://x/*"),
        "{e}"
    );
    let e = with_env(&section, &[(ENV_URL_PATTERNS, "[\"unclosed")])
        .unwrap_err()
        .to_string();
    assert!(e.contains(ENV_URL_PATTERNS), "{e}");
}

#[test]
fn stdio_gate_and_command_allowlist() {
    let locked = with_env(
        &PolicySection {
            locked: true,
            ..PolicySection::default()
        },
        &[],
    )
    .unwrap();
    let e = locked.check_stdio("python", &[]).unwrap_err();
    assert!(
        e.contains("turned off") && e.contains(ENV_STDIO_ENABLED),
        "{e}"
    );

    let enabled_no_list = with_env(
        &PolicySection {
            locked: true,
            ..PolicySection::default()
        },
        &[(ENV_STDIO_ENABLED, "true")],
    )
    .unwrap();
    let e = enabled_no_list.check_stdio("python", &[]).unwrap_err();
    assert!(e.contains("stdio_allowed_commands"), "{e}");

    let python = with_env(
        &PolicySection {
            locked: true,
            ..PolicySection::default()
        },
        &[(ENV_STDIO_ENABLED, "1"), (ENV_STDIO_COMMANDS, "python")],
    )
    .unwrap();
    assert!(
        python
            .check_stdio("python", &["server.py".into(), "--stdio".into()])
            .is_ok()
    );
    assert!(
        python
            .check_stdio("python", &["-m".into(), "server".into()])
            .is_ok()
    );
    // Exact match: a path ending in /python is another program.
    assert!(python.check_stdio("/tmp/evil/python", &[]).is_err());
    assert!(python.check_stdio("bash", &[]).is_err());
    let e = python
        .check_stdio("python", &["-c".into(), "print(1)".into()])
        .unwrap_err();
    assert!(e.contains("runs code given on the command line"), "{e}");

    let node = with_env(
        &PolicySection::default(),
        &[(ENV_STDIO_COMMANDS, "node,npx")],
    )
    .unwrap();
    assert!(
        node.check_stdio("node", &["-e".into(), "x".into()])
            .is_err()
    );
    assert!(node.check_stdio("node", &["--eval=x".into()]).is_err());
    // npx is not an interpreter: its own flags are left alone.
    assert!(
        node.check_stdio("npx", &["-y".into(), "pkg".into()])
            .is_ok()
    );

    // Inline code in a cluster of short flags, or behind a versioned interpreter's name, is
    // inline code too (tour I: each of these ran); an interpreter's other flags are not.
    let listed = with_env(
        &PolicySection::default(),
        &[(
            ENV_STDIO_COMMANDS,
            "python3,python3.11,node,bash,perl,/usr/bin/python3.12",
        )],
    )
    .unwrap();
    for (command, flag) in [
        ("python3", "-Ic"),
        ("bash", "-lc"),
        ("node", "-pe"),
        ("perl", "-E"),
        ("perl", "-we"),
        ("python3.11", "-c"),
        ("/usr/bin/python3.12", "-c"),
    ] {
        let e = listed
            .check_stdio(command, &[flag.into(), "code".into()])
            .unwrap_err();
        assert!(
            e.contains("runs code given on the command line"),
            "{command} {flag}: {e}"
        );
    }
    for (command, flag) in [("python3", "-u"), ("python3.11", "-m"), ("bash", "-l")] {
        assert!(
            listed
                .check_stdio(command, &[flag.into(), "server".into()])
                .is_ok(),
            "{command} {flag}"
        );
    }
    // A long lower-case cluster is a cluster too; a flag's value (even one that looks like a
    // script) or a shell's `-m` does not hide what follows.
    for (command, args) in [
        ("bash", &["-euxoc", "code"][..]),
        ("python3", &["-W", "ignore", "-c", "code"][..]),
        ("python3", &["-X", "a.py", "-c", "code"][..]),
        ("node", &["--title", "x.js", "-e", "code"][..]),
        ("bash", &["--rcfile", "x.sh", "-c", "code"][..]),
        ("bash", &["-m", "-c", "code"][..]),
    ] {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        assert!(
            listed.check_stdio(command, &args).is_err(),
            "{command} {args:?}"
        );
    }
    // What follows the script (or `-m MODULE`) is the script's own, not the interpreter's.
    for (command, args) in [
        ("python3", &["server.py", "-dev"][..]),
        ("node", &["srv.js", "-ep", "x"][..]),
        ("python3", &["-m", "server", "-c", "conf.toml"][..]),
    ] {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        assert!(
            listed.check_stdio(command, &args).is_ok(),
            "{command} {args:?}"
        );
    }
}

#[test]
fn locked_mode_requires_an_allowlist() {
    let locked = with_env(
        &PolicySection {
            locked: true,
            ..PolicySection::default()
        },
        &[],
    )
    .unwrap();
    let e = locked.check_url("https://mcp.example.com/mcp").unwrap_err();
    assert!(e.contains("locked") && e.contains(ENV_URL_PATTERNS), "{e}");
    assert_eq!(
        locked.describe(),
        "locked; urls: none; stdio: off; commands: none"
    );
}

#[test]
fn bad_patterns_are_explained() {
    for bad in [
        "example.com/*",
        "https://user@example.com/*",
        "https://ex*ample.com/*",
        "https://*./*",
        "https://h:port/*",
    ] {
        let e = UrlPattern::parse(bad).unwrap_err();
        assert!(e.contains("expected scheme://host"), "{bad}: {e}");
    }
}

#[test]
fn glob_matches_stars_anywhere() {
    assert!(glob("/*", "/"));
    assert!(glob("/*", "/a/b"));
    assert!(glob("/a/*/c", "/a/b/x/c"));
    assert!(!glob("/a/*/c", "/a/b/x/d"));
    assert!(glob("/mcp", "/mcp"));
    assert!(!glob("/mcp", "/mcp/"));
    assert!(glob("*", ""));
}
