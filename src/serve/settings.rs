//! What the main mode starts with unless told otherwise: the default store file, and the theme
//! a console (live, replay or attached) draws with.

use turnscope::config::Config;
use turnscope_console::Theme;

/// The theme a console runs with: `--theme` (`flag`) when given, else `[console] theme` of
/// `config`, read from the file `file` (a theme it names that does not load says so, and where).
pub(crate) fn chosen_theme(
    flag: Option<&str>,
    config: &Config,
    file: Option<&std::path::Path>,
) -> Result<Theme, turnscope_console::theme::ThemeError> {
    Theme::resolve_chosen(
        flag,
        config.console.theme.as_deref(),
        || file.map(|p| Config::place_of(p, "console.theme")),
        turnscope_console::no_color(),
    )
}

/// The `[store] url` of the file per listening address (see `turnscope::store::url`).
pub(crate) const DEFAULT_STORE: &str = "default";

/// The console and `--headless` keep conversations in the default file unless `--store` or
/// `[store] url` says otherwise.
pub(crate) fn with_default_store(config: &Config) -> Config {
    let mut config = config.clone();
    if config.store.url.is_none() {
        config.store.url = Some(DEFAULT_STORE.into());
    }
    config
}
