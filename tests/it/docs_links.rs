//! The README and the guide in `docs/` link to each other, to files of the repository and to
//! headings; every such link must lead somewhere. A page renamed or a heading reworded without
//! its links fails here, naming the page, the line and the link.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown pages checked: the README, ARCHITECTURE.md and every page of `docs/`.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

/// A heading's anchor as GitHub makes it: lower case, punctuation but `-` and `_` dropped,
/// spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// Every `](target)` of a page outside code blocks, with its line number.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((n + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_link_of_the_readme_and_the_guide_leads_somewhere() {
    let mut problems = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", page.display()));
        let shown = page.strip_prefix(root()).unwrap_or(&page).display();
        for (line, link) in links(&text) {
            if link.starts_with("http://") || link.starts_with("https://") {
                continue;
            }
            let (file, heading) = link.split_once('#').unwrap_or((&link, ""));
            let target: PathBuf = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap_or(Path::new(".")).join(file)
            };
            if !target.exists() {
                problems.push(format!("{shown}:{line}: `{link}`: no file {file}"));
                continue;
            }
            if !heading.is_empty() {
                let target_text = std::fs::read_to_string(&target).unwrap_or_default();
                if !anchors(&target_text).contains(heading) {
                    problems.push(format!(
                        "{shown}:{line}: `{link}`: {file} has no heading whose anchor is #{heading}"
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    assert_eq!(anchor(" `[[bridges.xiaozhi]]`"), "bridgesxiaozhi");
    assert_eq!(anchor(" The console's cost"), "the-consoles-cost");
    assert_eq!(anchor(" `turnscope bench`"), "turnscope-bench");
}
