//! The HAProxy lines that send every handle to the replica that issued it: a `server` line per
//! replica and a `use-server` line matching its tag (from [`Replica::tag`], the one place tags
//! are computed), printed by `turnscope replicas haproxy` and pasted into the backend of
//! `examples/haproxy.cfg`, which reads the tag of each request's handle into `txn.tag`.

use std::fmt::Write as _;
use std::str::FromStr;

use super::Replica;

/// The variable the recipe's backend stores a request's handle tag in (its last 4 hex digits).
pub const TAG_VARIABLE: &str = "txn.tag";

/// One replica as the balancer sees it: its id (`--replica-id`) and the address HAProxy
/// connects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaAddr {
    /// The replica id, as given to `--replica-id` (also the HAProxy server name).
    pub id: String,
    /// `host:port` of the replica's HTTP server.
    pub addr: String,
}

impl FromStr for ReplicaAddr {
    type Err = String;

    /// Parses `ID=HOST:PORT`, e.g. `r1=127.0.0.1:7871`.
    fn from_str(s: &str) -> Result<Self, String> {
        let Some((id, addr)) = s.split_once('=') else {
            return Err(format!(
                "replica {s:?}: expected ID=HOST:PORT (the replica's --replica-id, then the address \
                 HAProxy reaches it at), e.g. r1=127.0.0.1:7871"
            ));
        };
        // HAProxy server names: letters, digits, '-', '_', '.' and ':'.
        let name_ok = |c: char| c.is_ascii_alphanumeric() || "-_.:".contains(c);
        if id.is_empty() || !id.chars().all(name_ok) {
            return Err(format!(
                "replica {s:?}: the id {id:?} cannot name an HAProxy server; use letters, digits and \
                 - _ . : only, and give the replica the same --replica-id"
            ));
        }
        if let Some((scheme, _)) = addr.split_once("://") {
            return Err(format!(
                "replica {s:?}: the address {addr:?} is a URL; give HOST:PORT without {scheme}:// \
                 (HAProxy connects to it as a server address), e.g. 127.0.0.1:7871"
            ));
        }
        let port_ok = addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok || addr.contains(char::is_whitespace) {
            return Err(format!(
                "replica {s:?}: the address {addr:?} is not HOST:PORT; write it as HAProxy connects to \
                 the replica, e.g. 127.0.0.1:7871"
            ));
        }
        Ok(Self {
            id: id.to_string(),
            addr: addr.to_string(),
        })
    }
}

/// The backend's lines for `replicas`: a comment naming the command that printed them, one
/// `server` line each (health-checked, with the cookie that keeps cookie-keeping clients'
/// stream resumption on it), then one `use-server` line each, matching its handles' tag.
/// Fails when the list is empty, an id repeats, or two ids share a tag.
pub fn backend_lines(replicas: &[ReplicaAddr]) -> Result<String, String> {
    if replicas.is_empty() {
        return Err(
            "replicas: none given; name each as ID=HOST:PORT, e.g. r1=127.0.0.1:7871".to_string(),
        );
    }
    let tagged: Vec<(&ReplicaAddr, String)> = replicas
        .iter()
        .map(|r| (r, Replica::new(r.id.as_str()).tag()))
        .collect();
    for (i, (a, a_tag)) in tagged.iter().enumerate() {
        for (b, b_tag) in &tagged[..i] {
            if a.id == b.id {
                return Err(format!(
                    "replica {}: named twice; every replica needs its own id",
                    a.id
                ));
            }
            if a_tag == b_tag {
                return Err(format!(
                    "replicas {} and {} share the handle tag {a_tag}, so the balancer cannot tell \
                     their handles apart; rename one of them (and its --replica-id)",
                    b.id, a.id
                ));
            }
        }
    }
    let mut out = String::from("    # Printed by `turnscope replicas haproxy");
    for r in replicas {
        let _ = write!(out, " {}={}", r.id, r.addr);
    }
    out.push_str("`:\n    # a server per replica, and a use-server sending the handles ending in its tag to it.\n");
    for (r, _) in &tagged {
        let _ = writeln!(out, "    server {} {} check cookie {}", r.id, r.addr, r.id);
    }
    for (r, tag) in &tagged {
        let _ = writeln!(
            out,
            "    use-server {} if {{ var({TAG_VARIABLE}) -m str {tag} }}",
            r.id
        );
    }
    Ok(out)
}

/// The recipe, `examples/haproxy.cfg`, as shipped (embedded, so the binary alone prints it).
const RECIPE: &str = include_str!("../../../../examples/haproxy.cfg");

/// Where the recipe's own backend lines begin: everything from this comment on is what
/// [`backend_lines`] prints for its three example replicas.
const RECIPE_LINES_FROM: &str = "    # Printed by `turnscope replicas haproxy";

/// The whole recipe with its example replicas replaced by `replicas` ([`backend_lines`]): a
/// config HAProxy runs as it is, for a person who has the binary and not the repository.
/// Fails as [`backend_lines`] does.
pub fn whole_config(replicas: &[ReplicaAddr]) -> Result<String, String> {
    let lines = backend_lines(replicas)?;
    let head = RECIPE
        .find(RECIPE_LINES_FROM)
        .map_or(RECIPE, |at| &RECIPE[..at]);
    Ok(format!("{head}{lines}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_config_is_the_recipe_with_these_replicas() {
        let text = whole_config(&parsed(&["a=10.0.0.1:80", "b=10.0.0.2:80"])).unwrap();
        assert!(
            text.starts_with("# turnscope replicas behind HAProxy"),
            "{text}"
        );
        assert!(
            text.contains("backend turnscope") && text.contains("retry-on"),
            "{text}"
        );
        assert!(
            text.contains("    server a 10.0.0.1:80 check cookie a\n"),
            "{text}"
        );
        // The recipe's own example replicas are gone, its routing lines kept.
        assert!(!text.contains("server r1 127.0.0.1:7871"), "{text}");
        let routes = text
            .lines()
            .filter(|l| l.trim_start().starts_with("use-server "))
            .count();
        assert_eq!(routes, 2, "{text}");
        assert!(
            text.ends_with(&backend_lines(&parsed(&["a=10.0.0.1:80", "b=10.0.0.2:80"])).unwrap())
        );
    }

    fn parsed(list: &[&str]) -> Vec<ReplicaAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn each_replica_gets_a_server_and_a_use_server_on_its_own_tag() {
        let text = backend_lines(&parsed(&["r1=127.0.0.1:7871", "r2=10.0.0.2:80"])).unwrap();
        let (t1, t2) = (Replica::new("r1").tag(), Replica::new("r2").tag());
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        assert_eq!(
            lines[2..],
            [
                "server r1 127.0.0.1:7871 check cookie r1",
                "server r2 10.0.0.2:80 check cookie r2",
                &format!("use-server r1 if {{ var(txn.tag) -m str {t1} }}"),
                &format!("use-server r2 if {{ var(txn.tag) -m str {t2} }}"),
            ]
        );
        assert!(
            lines[0].contains("turnscope replicas haproxy r1=127.0.0.1:7871 r2=10.0.0.2:80"),
            "{text}"
        );
    }

    #[test]
    fn bad_input_says_what_was_expected() {
        for (input, says) in [
            ("r1", "expected ID=HOST:PORT"),
            ("=127.0.0.1:1", "cannot name an HAProxy server"),
            ("r1=http://127.0.0.1:7870", "without http://"),
            ("r 1=127.0.0.1:1", "cannot name an HAProxy server"),
            ("r1=127.0.0.1", "is not HOST:PORT"),
            ("r1=127.0.0.1:99999", "is not HOST:PORT"),
            ("r1=:80", "is not HOST:PORT"),
        ] {
            let e = input.parse::<ReplicaAddr>().unwrap_err();
            assert!(e.contains(says), "{input}: {e}");
        }
        let twice = backend_lines(&parsed(&["r1=h:1", "r1=h:2"])).unwrap_err();
        assert!(twice.contains("named twice"), "{twice}");
        assert!(backend_lines(&[]).unwrap_err().contains("none given"));
    }

    #[test]
    fn two_ids_with_one_tag_are_refused() {
        // Find two ids whose 16-bit tags collide (there are many among a few hundred).
        let mut seen = std::collections::HashMap::new();
        let (a, b) = (0..2000)
            .map(|i| format!("n{i}"))
            .find_map(|id| {
                let tag = Replica::new(id.as_str()).tag();
                seen.insert(tag, id.clone()).map(|other| (other, id))
            })
            .expect("a collision among 2000 ids");
        let e = backend_lines(&parsed(&[&format!("{a}=h:1"), &format!("{b}=h:2")])).unwrap_err();
        assert!(
            e.contains("share the handle tag") && e.contains("rename"),
            "{e}"
        );
    }
}
