//! `docs/commands.md` kept true: every command the binary has (hidden ones aside) has a heading
//! there, and every flag of it a row under that heading; every documented flag exists. A flag
//! added without its row fails here, naming the flag and the heading to add it under.

use std::collections::BTreeMap;

use clap::CommandFactory;

use crate::cli::Cli;

/// The reference, relative to the repository's root.
const REFERENCE: &str = "docs/commands.md";

/// Every visible command as `turnscope a b`, with its visible long flags.
fn commands() -> BTreeMap<String, Vec<String>> {
    fn walk(command: &clap::Command, name: String, out: &mut BTreeMap<String, Vec<String>>) {
        let flags = command
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long())
            .map(|l| format!("--{l}"))
            .collect();
        out.insert(name.clone(), flags);
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, format!("{name} {}", sub.get_name()), out);
        }
    }
    let mut out = BTreeMap::new();
    walk(&Cli::command(), "turnscope".into(), &mut out);
    out
}

/// Each heading naming a command (`## `turnscope bench``) and the text under it, up to the
/// next heading.
fn sections(reference: &str) -> BTreeMap<String, (usize, String)> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for (n, line) in reference.lines().enumerate() {
        if line.starts_with('#') {
            current = line
                .split('`')
                .nth(1)
                .filter(|h| *h == "turnscope" || h.starts_with("turnscope "))
                .map(str::to_string);
            if let Some(name) = &current {
                out.insert(name.clone(), (n + 1, String::new()));
            }
        } else if let Some(name) = &current {
            let text = &mut out.get_mut(name).expect("inserted at its heading").1;
            text.push_str(line);
            text.push('\n');
        }
    }
    out
}

/// The flags of a section's table rows: the first cell's first word (`` `--port PORT` ``).
fn documented_flags(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("| `--"))
        .map(|rest| {
            let flag: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            format!("--{flag}")
        })
        .collect()
}

#[test]
fn every_command_and_flag_is_in_the_reference() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(REFERENCE);
    let reference = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let sections = sections(&reference);
    let commands = commands();
    let main_flags = &commands["turnscope"];
    let mut problems = Vec::new();
    for (name, flags) in &commands {
        if name.ends_with(" help") {
            continue;
        }
        let Some((_, text)) = sections.get(name) else {
            problems.push(format!(
                "command `{name}` is not documented: add a heading `## `{name}`` to {REFERENCE}, \
                 what it does, and a table `| flag | meaning |` with a row per flag"
            ));
            continue;
        };
        let rows = documented_flags(text);
        // The global --config is documented once, under the main mode; a subcommand that takes
        // the main mode's flags (`test`) may say so instead of repeating them.
        let takes_main = text.contains("main mode's flags");
        for flag in flags {
            let covered = rows.contains(flag)
                || flag == "--config" && name != "turnscope"
                || takes_main && main_flags.contains(flag);
            if !covered {
                problems.push(format!(
                    "flag `{flag}` of `{name}` is not documented: add a row `| `{flag} VALUE` | \
                     <what it does, its default> |` under the heading `{name}` in {REFERENCE}"
                ));
            }
        }
        for row in rows {
            if !flags.contains(&row) {
                problems.push(format!(
                    "{REFERENCE}: `{row}` under `{name}` is not a flag of that command; fix or remove the row"
                ));
            }
        }
    }
    for (name, (line, _)) in &sections {
        if !commands.contains_key(name) {
            problems.push(format!(
                "{REFERENCE}:{line}: `{name}` is not a command of the binary"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "the command reference and the binary disagree:\n{}",
        problems.join("\n")
    );
}

/// `turnscope bench --help` (here, beside the other readings of the clap definitions: `bench`
/// itself never imports `cli`).
mod bench_help {
    use clap::CommandFactory;
    use clap::ValueEnum;

    use crate::bench::{DEFAULT_SHAPES, Shape};

    /// `turnscope bench --help` as a person reads it: each shape's line says whether it runs by
    /// default, and the ones that run only when named say about how long they take.
    #[test]
    fn bench_help_says_which_shapes_run_by_default_and_how_long_the_others_take() {
        let mut cli = crate::cli::Cli::command();
        let bench = cli
            .find_subcommand_mut("bench")
            .expect("turnscope has a bench command");
        let help = bench.render_long_help().to_string();
        assert!(
            !help.contains("default: all"),
            "the help must not claim every shape runs by default:\n{help}"
        );
        for shape in Shape::value_variants() {
            let name = shape.to_possible_value().expect("every shape is visible");
            let line = help
                .lines()
                .find(|l| {
                    l.trim_start()
                        .starts_with(&format!("- {}:", name.get_name()))
                })
                .unwrap_or_else(|| panic!("no line for {} in:\n{help}", name.get_name()));
            if DEFAULT_SHAPES.contains(shape) {
                assert!(line.contains("Default."), "{line}");
            } else {
                assert!(line.contains("Only when named"), "{line}");
                assert!(
                    line.contains(" min") || line.contains(" s."),
                    "a named-only shape says how long it takes: {line}"
                );
            }
        }
        let summary = help
            .lines()
            .skip_while(|l| !l.contains("Which benchmarks"))
            .take(3)
            .collect::<String>();
        for shape in Shape::value_variants() {
            let name = shape.to_possible_value().expect("visible");
            assert!(
                summary.contains(name.get_name()),
                "the [SHAPES] help names {}: {summary}",
                name.get_name()
            );
        }
    }
}
