//! Fuzz targets for the files people write: the TOML config and console theme files.
//!
//! Properties: parsing never panics; a config that parses can be used (every duration in it
//! converts without a panic); an error names what is wrong: the theme file and its key, the
//! config key.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use turnscope::config::Config;
use turnscope_console::theme::{KEYS, Theme};

use super::corpus;

/// Fragments worth inserting into TOML.
const TOML_TOKENS: &[&str] = &[
    "\"",
    "'",
    "[",
    "]",
    "[[",
    "{",
    "}",
    "=",
    ",",
    "\n",
    "#",
    "\"\"\"",
    ".",
    "inf",
    "nan",
    "-1",
    "1e300",
    "true",
    "0x",
    "\\u",
    "\\",
    " = { fg = \"",
    "bold = ",
    "[server]\n",
    "[[mcp_servers]]\n",
];

/// Every seconds field of `config` becomes a [`Duration`] the way the app makes it, and moves
/// a clock reading; `Err` names the first one that would panic.
fn durations(config: &Config) -> Result<(), String> {
    let mut fields = vec![
        (
            "server.sweep_seconds",
            config.server.sweep_seconds.max(0.01),
        ),
        ("model.pace", config.model.pace.max(0.0)),
        (
            "model.first_byte_timeout_seconds",
            config.model.first_byte_timeout_seconds,
        ),
        (
            "model.idle_timeout_seconds",
            config.model.idle_timeout_seconds,
        ),
        ("bot.tool_timeout_seconds", config.bot.tool_timeout_seconds),
    ];
    for server in &config.mcp_servers {
        fields.push(("mcp_servers.timeout_seconds", server.timeout_seconds));
    }
    for (name, seconds) in fields {
        let duration =
            Duration::try_from_secs_f64(seconds).map_err(|e| format!("{name} = {seconds}: {e}"))?;
        Instant::now()
            .checked_add(duration)
            .ok_or_else(|| format!("{name} = {seconds}: beyond what a clock reading can reach"))?;
    }
    Ok(())
}

/// `(section, key)` pairs of the real config.
const CONFIG_KEYS: &[(&str, &str)] = &[
    ("server", "host"),
    ("server", "port"),
    ("server", "sessions"),
    ("server", "handle_seconds"),
    ("server", "sweep_seconds"),
    ("server", "allowed_hosts"),
    ("server", "host_check"),
    ("server", "auth_token"),
    ("server", "max_body_bytes"),
    ("model", "url"),
    ("model", "pace"),
    ("model", "words"),
    ("model", "headers"),
    ("model", "first_byte_timeout_seconds"),
    ("model", "idle_timeout_seconds"),
    ("bot", "greeting"),
    ("bot", "round_cap"),
    ("bot", "tool_timeout_seconds"),
    ("bot", "builtin_tools"),
    ("console", "theme"),
    ("console", "max_mib"),
];

/// A TOML value of any type, written as TOML: numbers at the edges (`inf`, `nan`, huge,
/// negative), strings, booleans, arrays and inline tables.
fn toml_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        super::one_of(&[
            "inf",
            "-inf",
            "nan",
            "1e300",
            "-1.0",
            "0",
            "0.0",
            "18446744073709551616"
        ]),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        any::<bool>().prop_map(|b| b.to_string()),
        "[ -~]{0,12}".prop_map(|s| toml::Value::String(s).to_string()),
        super::one_of(&["1979-05-27T07:32:00Z"]),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::vec(("[a-z]{1,5}", inner), 0..3).prop_map(|kv| {
                let fields: Vec<String> = kv.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                format!("{{ {} }}", fields.join(", "))
            }),
        ]
    })
}

/// Colours the theme files accept.
const COLOURS: &[&str] = &[
    "black",
    "red",
    "green",
    "yellow",
    "blue",
    "magenta",
    "cyan",
    "gray",
    "dark-gray",
    "light-red",
    "light-green",
    "light-cyan",
    "white",
    "#303a48",
    "#FF8800",
    "0",
    "250",
];

/// One style field written correctly (`fg = "cyan"`, `bold = true`).
fn good_field() -> impl Strategy<Value = String> {
    prop_oneof![
        (
            prop_oneof![Just("fg"), Just("bg")],
            prop::sample::select(COLOURS)
        )
            .prop_map(|(f, c)| format!("{f} = \"{c}\"")),
        (
            prop::sample::select(&["bold", "dim", "italic", "underline", "reversed"][..]),
            any::<bool>()
        )
            .prop_map(|(f, b)| format!("{f} = {b}")),
    ]
}

/// One style field with exactly one fault, and the field's name.
fn bad_field() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        (
            prop_oneof![Just("fg"), Just("bg")],
            prop::sample::select(&["cyna", "#12345g", "256", "", "blurple", "#ff88"][..])
        )
            .prop_map(|(f, c)| (f.to_string(), format!("{f} = \"{c}\""))),
        (prop_oneof![Just("fg"), Just("bg")], toml_value())
            .prop_filter("not a string", |(_, v)| !v.starts_with('"'))
            .prop_map(|(f, v)| (f.to_string(), format!("{f} = {v}"))),
        (prop::sample::select(&["bold", "italic"][..]), toml_value())
            .prop_filter("not a boolean", |(_, v)| v != "true" && v != "false")
            .prop_map(|(f, v)| (f.to_string(), format!("{f} = {v}"))),
        "(blink|colour|[a-z]{1,6})"
            .prop_filter("not a style field", |f| {
                !["fg", "bg", "bold", "dim", "italic", "underline", "reversed"]
                    .contains(&f.as_str())
            })
            .prop_map(|f| (f.clone(), format!("{f} = true"))),
    ]
}

proptest! {
    #[test]
    fn config_parsing_never_panics(text in "[ -~\n]{0,300}") {
        if let Ok(config) = Config::parse(&text) {
            prop_assert!(durations(&config).is_ok(), "{:?}", durations(&config));
        }
    }

    #[test]
    fn config_parsing_of_mutated_real_configs(bytes in corpus::mutated(corpus::load("tests/fuzz_corpus/config"), TOML_TOKENS, 6)) {
        match Config::parse(&corpus::text(&bytes)) {
            Ok(config) => prop_assert!(durations(&config).is_ok(), "{:?}", durations(&config)),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn config_errors_name_the_key(key in prop::sample::select(CONFIG_KEYS), value in toml_value()) {
        let (section, key) = key;
        let text = format!("[{section}]\n{key} = {value}\n");
        match Config::parse(&text) {
            Ok(config) => prop_assert!(durations(&config).is_ok(), "{text}: {:?}", durations(&config)),
            Err(e) => prop_assert!(e.to_string().contains(key), "{text}: the error does not name `{key}`: {e}"),
        }
    }

    #[test]
    fn theme_parsing_never_panics(text in "[ -~\n]{0,300}") {
        if let Err(e) = Theme::parse(&text, "fuzz.toml") {
            prop_assert!(e.0.starts_with("theme file fuzz.toml"), "{e}");
        }
    }

    #[test]
    fn theme_parsing_of_mutated_real_themes(bytes in corpus::mutated(
        [corpus::load("themes"), corpus::load("tests/fuzz_corpus/theme")].concat(), TOML_TOKENS, 6)) {
        if let Err(e) = Theme::parse(&corpus::text(&bytes), "mutated.toml") {
            prop_assert!(e.0.starts_with("theme file mutated.toml"), "{e}");
        }
    }

    #[test]
    fn near_valid_themes_are_taken_or_name_the_key(
        key in prop::sample::select(KEYS),
        fields in prop::collection::vec(good_field(), 0..4),
        fault in prop::option::of((bad_field(), 0usize..4)),
        as_string in any::<bool>(),
    ) {
        let mut fields = fields;
        if let Some(((_, line), at)) = &fault {
            fields.insert((*at).min(fields.len()), line.clone());
        }
        // A lone valid `fg` may also be written as a plain colour string.
        let text = match (fields.as_slice(), as_string, &fault) {
            ([only], true, None) if only.starts_with("fg = ") => format!("{key} = {}\n", &only[5..]),
            _ => format!("name = \"fuzzed\"\n{key} = {{ {} }}\n", fields.join(", ")),
        };
        let parsed = Theme::parse(&text, "near.toml");
        match &fault {
            // Later duplicate fields are a TOML error naming the line, which names the key.
            None if has_duplicates(&fields) => prop_assert!(parsed.is_err(), "{text}"),
            None => prop_assert!(parsed.is_ok(), "{text}: {:?}", parsed.err()),
            Some(((field, _), _)) => {
                let e = parsed.expect_err("a faulty field is refused");
                prop_assert!(e.0.starts_with("theme file near.toml"), "{e}");
                if !e.0.contains("not valid TOML") {
                    prop_assert!(e.0.contains(&format!("`{key}.{field}")) || e.0.contains(&format!("`{key}`")), "{text}: {e}");
                } else {
                    prop_assert!(e.0.contains(key), "{text}: {e}");
                }
            }
        }
    }

    #[test]
    fn unknown_theme_keys_are_named(key in "[a-z_]{1,12}", value in toml_value()) {
        let text = format!("{key} = {value}\n");
        let known = key == "name" || KEYS.contains(&key.as_str());
        if let Err(e) = Theme::parse(&text, "keys.toml") {
            prop_assert!(e.0.starts_with("theme file keys.toml") && e.0.contains(&key), "{text}: {e}");
        } else {
            prop_assert!(known, "{text}: an unknown key was accepted");
        }
    }
}

fn has_duplicates(fields: &[String]) -> bool {
    let names: Vec<&str> = fields
        .iter()
        .filter_map(|f| f.split(" = ").next())
        .collect();
    names
        .iter()
        .enumerate()
        .any(|(i, n)| names[..i].contains(n))
}

#[test]
fn every_seed_is_a_valid_file() {
    for seed in corpus::load("tests/fuzz_corpus/config") {
        let text = corpus::text(&seed);
        Config::parse(&text).unwrap_or_else(|e| panic!("config seed {text:?}: {e}"));
    }
    for seed in [
        corpus::load("themes"),
        corpus::load("tests/fuzz_corpus/theme"),
    ]
    .concat()
    {
        let text = corpus::text(&seed);
        Theme::parse(&text, "seed.toml").unwrap_or_else(|e| panic!("theme seed {text:?}: {e}"));
    }
}
