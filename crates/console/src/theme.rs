//! Console themes: named styles read from `themes/*.toml`. Built in: `dark` (default), `light`,
//! `mono` (no colour); a theme file may set any subset of the keys, the rest keep `dark`'s. A bad
//! file is an error naming the file and the key. With no theme chosen, `NO_COLOR` picks `mono`.

use std::path::Path;
use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};

/// The built-in themes, by name, as shipped in the repository's top-level `themes/`.
// Embedded from outside this crate's folder: fine because the console crate is not published
// (`publish = false`; `cargo package` of it would leave the files behind). The binary that
// embeds it is built from the workspace, where `themes/` always sits.
pub const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../../../themes/dark.toml")),
    ("light", include_str!("../../../themes/light.toml")),
    ("mono", include_str!("../../../themes/mono.toml")),
];

/// Whether `NO_COLOR` asks for no colour (set and not empty).
pub fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

macro_rules! theme_styles {
    ($($(#[$doc:meta])* $key:ident),* $(,)?) => {
        /// Every style the console draws with.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Theme {
            /// The theme's name.
            pub name: String,
            $($(#[$doc])* pub $key: Style,)*
        }

        /// The style keys a theme file may set.
        pub const KEYS: &[&str] = &[$(stringify!($key)),*];

        impl Theme {
            fn slot(&mut self, key: &str) -> Option<&mut Style> {
                match key {
                    $(stringify!($key) => Some(&mut self.$key),)*
                    _ => None,
                }
            }

            fn styles_mut(&mut self) -> Vec<&mut Style> {
                vec![$(&mut self.$key),*]
            }

            fn blank(name: &str) -> Self {
                Self { name: name.to_string(), $($key: Style::new(),)* }
            }
        }
    };
}

theme_styles! {
    /// Ordinary text.
    text,
    /// Secondary text: times, counts, placeholders.
    dim,
    /// Highlights: the MCP URL, live markers.
    accent,
    /// Pane titles.
    title,
    /// Pane borders.
    border,
    /// The focused pane's border.
    border_focused,
    /// The selected row.
    selected,
    /// The header bar.
    header,
    /// The product name in the header.
    brand,
    /// The footer bar.
    footer,
    /// Key names in hints and help.
    key,
    /// What the person (or an MCP caller) said.
    user,
    /// What the bot replied.
    bot,
    /// Tool calls.
    tool,
    /// Turn boundaries.
    boundary,
    /// Errors.
    error,
    /// Warnings (missed events, interruptions).
    warn,
    /// Good news (completed turns).
    ok,
    /// System frames.
    system,
    /// Data frames.
    data,
    /// Control frames.
    control,
    /// Sparklines.
    spark,
    /// An inactive tab.
    tab,
    /// The active tab.
    tab_active,
    /// Popups: help, frame detail.
    overlay,
}

/// A theme file that could not be used; the message names the file and the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThemeError(pub String);

impl std::fmt::Display for ThemeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ThemeError {}

impl Default for Theme {
    fn default() -> Self {
        Self::builtin("dark").expect("the dark theme is built in")
    }
}

impl Theme {
    /// A built-in theme by name (`dark`, `light`, `mono`).
    pub fn builtin(name: &str) -> Option<Theme> {
        let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name)?;
        let base = Theme::blank(name);
        Some(
            Theme::parse_over(base, text, &format!("built-in theme {name}"))
                .expect("built-in themes parse"),
        )
    }

    /// Parses a theme file's text; keys it leaves out keep the dark theme's values.
    /// `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Theme, ThemeError> {
        Theme::parse_over(Theme::default(), text, origin)
    }

    fn parse_over(mut theme: Theme, text: &str, origin: &str) -> Result<Theme, ThemeError> {
        let table: toml::Table = toml::from_str(text)
            .map_err(|e| ThemeError(format!("theme file {origin}: not valid TOML: {e}")))?;
        for (key, value) in &table {
            if key == "name" {
                match value.as_str() {
                    Some(n) => theme.name = n.to_string(),
                    None => {
                        return Err(ThemeError(format!(
                            "theme file {origin}: key `name`: expected a string, got {}",
                            value.type_str()
                        )));
                    }
                }
                continue;
            }
            let Some(slot) = theme.slot(key) else {
                return Err(ThemeError(format!(
                    "theme file {origin}: key `{key}` is not a theme style; the keys are name, {}",
                    KEYS.join(", ")
                )));
            };
            *slot = parse_style(key, value, origin)?;
        }
        Ok(theme)
    }

    /// Resolves a `--theme` / `[console] theme` choice: a path (contains `/` or ends in
    /// `.toml`), else `./themes/NAME.toml` when that file exists, else a built-in name. With no
    /// choice: `mono` when `no_color`, else `dark`.
    pub fn resolve(choice: Option<&str>, no_color: bool) -> Result<Theme, ThemeError> {
        let Some(choice) = choice.filter(|c| !c.is_empty()) else {
            let name = if no_color { "mono" } else { "dark" };
            return Ok(Theme::builtin(name).expect("built in"));
        };
        let as_path = Path::new(choice);
        let local = Path::new("themes").join(format!("{choice}.toml"));
        let file = if choice.contains('/') || choice.ends_with(".toml") {
            Some(as_path.to_path_buf())
        } else if local.is_file() {
            Some(local)
        } else {
            None
        };
        match file {
            Some(path) => {
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    ThemeError(format!(
                        "cannot read theme file {}: {e}; give --theme a built-in name ({}) or a path to a .toml theme",
                        path.display(),
                        builtin_names()
                    ))
                })?;
                Theme::parse(&text, &path.display().to_string())
            }
            None => Theme::builtin(choice).ok_or_else(|| {
                ThemeError(format!(
                    "theme `{choice}`: no such theme; the built-in themes are {}, or give a path to a .toml theme file",
                    builtin_names()
                ))
            }),
        }
    }

    /// Resolves the theme a command runs with, as [`Theme::resolve`]: `flag` (`--theme`) when
    /// given, else `from_config` (`[console] theme`). An error in a theme the config file
    /// named says where it was set (`place`: `FILE:LINE`, as [`turnscope::config::Config::place_of`]
    /// gives it), so the person knows which file to fix.
    pub fn resolve_chosen(
        flag: Option<&str>,
        from_config: Option<&str>,
        place: impl FnOnce() -> Option<String>,
        no_color: bool,
    ) -> Result<Theme, ThemeError> {
        if flag.is_some() {
            return Theme::resolve(flag, no_color);
        }
        Theme::resolve(from_config, no_color).map_err(|ThemeError(e)| match place() {
            Some(place) => ThemeError(format!(
                "{e} (the theme named by `[console] theme` at {place}: fix it there, or give \
                 --theme)"
            )),
            None => ThemeError(e),
        })
    }

    /// The same theme with every colour removed (modifiers kept).
    pub fn without_colors(mut self) -> Theme {
        for style in self.styles_mut() {
            style.fg = None;
            style.bg = None;
            style.underline_color = None;
        }
        self
    }
}

fn builtin_names() -> String {
    BUILTIN
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

const FLAGS: &[(&str, Modifier)] = &[
    ("bold", Modifier::BOLD),
    ("dim", Modifier::DIM),
    ("italic", Modifier::ITALIC),
    ("underline", Modifier::UNDERLINED),
    ("reversed", Modifier::REVERSED),
];

fn parse_style(key: &str, value: &toml::Value, origin: &str) -> Result<Style, ThemeError> {
    let err = |what: String| ThemeError(format!("theme file {origin}: key `{key}{what}"));
    let table = match value {
        toml::Value::String(colour) => {
            return Ok(Style::new().fg(parse_color(colour).map_err(|e| err(format!("`: {e}")))?));
        }
        toml::Value::Table(t) => t,
        other => {
            return Err(err(format!(
                "`: expected a style table such as {{ fg = \"cyan\", bold = true }} or a colour string, got {}",
                other.type_str()
            )));
        }
    };
    let mut style = Style::new();
    for (field, v) in table {
        match field.as_str() {
            "fg" | "bg" => {
                let Some(text) = v.as_str() else {
                    return Err(err(format!(
                        ".{field}`: expected a colour string, got {}",
                        v.type_str()
                    )));
                };
                let colour = parse_color(text).map_err(|e| err(format!(".{field}`: {e}")))?;
                style = if field == "fg" {
                    style.fg(colour)
                } else {
                    style.bg(colour)
                };
            }
            flag => {
                let Some((_, modifier)) = FLAGS.iter().find(|(n, _)| *n == flag) else {
                    return Err(err(format!(
                        ".{flag}` is not a style field; the fields are fg, bg, {}",
                        FLAGS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                    )));
                };
                match v.as_bool() {
                    Some(true) => style = style.add_modifier(*modifier),
                    Some(false) => {}
                    None => {
                        return Err(err(format!(
                            ".{flag}`: expected true or false, got {}",
                            v.type_str()
                        )));
                    }
                }
            }
        }
    }
    Ok(style)
}

fn parse_color(text: &str) -> Result<Color, String> {
    Color::from_str(text).map_err(|_| {
        format!(
            "unknown colour {text:?}; expected a colour name (black, red, green, yellow, blue, magenta, cyan, gray, \
             dark-gray, light-red, ..., white), \"#rrggbb\" or an index 0-255"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A theme the config file named that does not load says where it was named; one given
    /// by `--theme` is the person's own typing, and says nothing of the config (tour F3).
    #[test]
    fn a_bad_theme_from_the_config_names_where_it_was_set() {
        let place = || Some("viewer.toml:3".to_string());
        let e = Theme::resolve_chosen(None, Some("purple"), place, false).unwrap_err();
        assert!(
            e.0.starts_with("theme `purple`: no such theme")
                && e.0.contains("`[console] theme` at viewer.toml:3"),
            "{e}"
        );
        let e = Theme::resolve_chosen(Some("purple"), Some("dark"), place, false).unwrap_err();
        assert!(!e.0.contains("[console]"), "{e}");
        assert!(Theme::resolve_chosen(None, Some("mono"), place, false).is_ok());
    }

    #[test]
    fn builtins_parse_and_differ() {
        let dark = Theme::builtin("dark").unwrap();
        let light = Theme::builtin("light").unwrap();
        let mono = Theme::builtin("mono").unwrap();
        assert_eq!(dark.accent.fg, Some(Color::Cyan));
        assert_ne!(dark, light);
        for style in mono.clone().styles_mut() {
            assert_eq!((style.fg, style.bg), (None, None), "mono has no colour");
        }
        assert!(mono.selected.add_modifier.contains(Modifier::REVERSED));
    }

    #[test]
    fn partial_theme_keeps_the_rest_of_dark() {
        let t = Theme::parse("name = \"mine\"\naccent = \"#ff8800\"\n", "mine.toml").unwrap();
        assert_eq!(t.name, "mine");
        assert_eq!(t.accent.fg, Some(Color::Rgb(0xff, 0x88, 0)));
        assert_eq!(t.error, Theme::default().error);
    }

    #[test]
    fn bad_files_name_the_key() {
        let e = Theme::parse("acent = { fg = \"red\" }", "x.toml").unwrap_err();
        assert!(e.0.contains("x.toml") && e.0.contains("`acent`"), "{e}");
        let e = Theme::parse("accent = { fg = \"cyna\" }", "x.toml").unwrap_err();
        assert!(
            e.0.contains("`accent.fg`") && e.0.contains("\"cyna\""),
            "{e}"
        );
        let e = Theme::parse("accent = { bold = \"yes\" }", "x.toml").unwrap_err();
        assert!(e.0.contains("`accent.bold`: expected true or false"), "{e}");
        let e = Theme::parse("accent = { blink = true }", "x.toml").unwrap_err();
        assert!(e.0.contains("`accent.blink` is not a style field"), "{e}");
        let e = Theme::parse("accent = 3", "x.toml").unwrap_err();
        assert!(e.0.contains("`accent`: expected a style table"), "{e}");
        let e = Theme::parse("accent = {", "x.toml").unwrap_err();
        assert!(e.0.contains("x.toml: not valid TOML"), "{e}");
    }

    #[test]
    fn resolve_picks_builtin_file_or_mono_for_no_color() {
        assert_eq!(Theme::resolve(None, false).unwrap().name, "dark");
        assert_eq!(Theme::resolve(None, true).unwrap().name, "mono");
        assert_eq!(Theme::resolve(Some("light"), true).unwrap().name, "light");
        let e = Theme::resolve(Some("neon"), false).unwrap_err();
        assert!(
            e.0.contains("`neon`") && e.0.contains("dark, light, mono"),
            "{e}"
        );
        let dir = std::env::temp_dir().join(format!("turnscope-theme-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("bad.toml");
        std::fs::write(&file, "border = { fg = \"nope\" }\n").unwrap();
        let e = Theme::resolve(Some(file.to_str().unwrap()), false).unwrap_err();
        assert!(
            e.0.contains("bad.toml") && e.0.contains("`border.fg`"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn without_colors_keeps_modifiers() {
        let t = Theme::default().without_colors();
        assert_eq!(t.accent.fg, None);
        assert!(t.accent.add_modifier.contains(Modifier::BOLD));
    }
}
