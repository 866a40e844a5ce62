//! Which store a server uses: `--store URL` / `[store] url` ([`StoreUrl`], parsed with the
//! config), and the default file's place ([`default_path`]): `$XDG_STATE_HOME/turnscope/` (else
//! `~/.local/state/turnscope/`), one file per listening address, so two servers on two
//! ports never share one by accident.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

pub use crate::config::store::{SCHEMES, StoreUrl};

/// turnscope's own directory for what it keeps between runs: `STATE/turnscope`, where STATE
/// is `$XDG_STATE_HOME`, else `$HOME/.local/state` (the XDG base directory rule). `env` reads
/// the environment. `None` when neither is set (or `$XDG_STATE_HOME` is not absolute, which
/// the rule says to ignore, and `$HOME` is unset).
pub fn state_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env("XDG_STATE_HOME")
        .filter(|d| Path::new(d).is_absolute())
        .map(PathBuf::from)
        .or_else(|| {
            env("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| Path::new(&h).join(".local/state"))
        })
        .map(|state| state.join("turnscope"))
}

/// The default store file of a server listening on `addr`:
/// `STATE/turnscope/sessions-HOST-PORT.sqlite3` ([`state_dir`]).
///
/// # Errors
/// [`state_dir`] finds no place: the message says to give `--store`.
pub fn default_path(
    addr: SocketAddr,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, String> {
    let dir = state_dir(env).ok_or_else(|| {
        "store: no place for the default session file: neither XDG_STATE_HOME nor HOME is set. \
         Give --store sqlite:PATH (or --store memory to keep nothing)"
            .to_string()
    })?;
    let host = match addr.ip() {
        std::net::IpAddr::V6(ip) => ip.to_string().replace(':', "_"),
        ip => ip.to_string(),
    };
    Ok(dir.join(format!("sessions-{host}-{}.sqlite3", addr.port())))
}

/// The listening address a default store file's name stands for, [`default_path`]'s inverse:
/// `sessions-127.0.0.1-7870.sqlite3` is (`127.0.0.1`, 7870), `sessions-__1-7870.sqlite3`
/// (`::1`, 7870). `None` for a name that is not a default file's.
pub fn address_of(file_name: &str) -> Option<(IpAddr, u16)> {
    let middle = file_name
        .strip_prefix("sessions-")?
        .strip_suffix(".sqlite3")?;
    let (host, port) = middle.rsplit_once('-')?;
    Some((host.replace('_', ":").parse().ok()?, port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_file_is_per_address_under_the_state_directory() {
        let addr: SocketAddr = "127.0.0.1:7870".parse().unwrap();
        let xdg = |name: &str| match name {
            "XDG_STATE_HOME" => Some("/tmp/state".to_string()),
            "HOME" => Some("/home/u".to_string()),
            _ => None,
        };
        assert_eq!(
            default_path(addr, &xdg).unwrap(),
            PathBuf::from("/tmp/state/turnscope/sessions-127.0.0.1-7870.sqlite3")
        );
        let other: SocketAddr = "127.0.0.1:7871".parse().unwrap();
        assert_ne!(
            default_path(addr, &xdg).unwrap(),
            default_path(other, &xdg).unwrap()
        );
        // A relative XDG_STATE_HOME is ignored, as the XDG rule says.
        let home = |name: &str| match name {
            "XDG_STATE_HOME" => Some("relative".to_string()),
            "HOME" => Some("/home/u".to_string()),
            _ => None,
        };
        assert_eq!(
            default_path(addr, &home).unwrap(),
            PathBuf::from("/home/u/.local/state/turnscope/sessions-127.0.0.1-7870.sqlite3")
        );
        let v6: SocketAddr = "[::1]:7870".parse().unwrap();
        assert!(
            default_path(v6, &xdg)
                .unwrap()
                .ends_with("sessions-__1-7870.sqlite3")
        );
        let e = default_path(addr, &|_| None).unwrap_err();
        assert!(e.contains("--store"), "{e}");
    }

    #[test]
    fn a_default_files_name_gives_back_its_address() {
        let xdg = |name: &str| (name == "XDG_STATE_HOME").then(|| "/tmp/state".to_string());
        for addr in [
            "127.0.0.1:7870",
            "0.0.0.0:27831",
            "[::1]:7870",
            "[fe80::1:2]:1",
        ] {
            let addr: SocketAddr = addr.parse().unwrap();
            let path = default_path(addr, &xdg).unwrap();
            let name = path.file_name().unwrap().to_str().unwrap();
            assert_eq!(address_of(name), Some((addr.ip(), addr.port())), "{name}");
        }
        for other in [
            "sessions.sqlite3",
            "sessions-127.0.0.1.sqlite3",
            "sessions-127.0.0.1-x.sqlite3",
            "sessions-127.0.0.1-7870.sqlite3-wal",
            "sessions-host-7870.sqlite3",
            "console-handles.json",
        ] {
            assert_eq!(address_of(other), None, "{other}");
        }
    }
}
