//! `--events` as the main mode and the bridges read it: whether it takes stdout (then the lines
//! a person reads at start go to stderr, [`Announce`]), and `--events-max-mib`.

use turnscope::observe::recorder::Recording;

use crate::cli::{Cli, Command};

/// Where the lines a person or a script reads at start (the ready line, the bridges) go:
/// stdout, unless `--events -` made stdout the event stream. Then every line on stdout is one
/// JSON event (so `| jq` works) and these lines go to stderr. Every reader of the ready line
/// (tests, the interop suite, scripts) reads stdout without `--events -`, so none changes; a
/// `ready` event instead would have added a type every events reader must know, for what the
/// `replica` event and `/healthz` already carry.
pub(crate) struct Announce {
    to_stderr: bool,
}

impl Announce {
    /// Where the lines go, given `--events`.
    pub(crate) fn new(events: Option<&std::path::Path>) -> Self {
        Self {
            to_stderr: events_on_stdout(events),
        }
    }

    /// Writes one line where they go.
    pub(crate) fn line(&self, text: &str) {
        if self.to_stderr {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    }
}

/// `--events-max-mib` (the main mode's, or `attach`'s): every recording this process starts
/// is cut into pieces of that size. It needs `--events` with a file.
pub(crate) fn cut_events_into_pieces(cli: &Cli) -> Result<(), String> {
    let (events, mib) = match &cli.command {
        Some(Command::Attach {
            events,
            events_max_mib,
            ..
        }) => (events.as_deref(), *events_max_mib),
        _ => (cli.serve.events.as_deref(), cli.serve.events_max_mib),
    };
    let Some(mib) = mib else {
        return Ok(());
    };
    match events {
        None => Err(format!(
            "--events-max-mib {mib} cuts the --events file into pieces, and no --events FILE \
             was given: add one, or drop --events-max-mib"
        )),
        Some(path) if events_on_stdout(Some(path)) => Err(format!(
            "--events-max-mib {mib} cuts a file into pieces, and --events - writes to stdout: \
             cut it where it goes (| split -C {mib}M), or give --events a file"
        )),
        Some(_) => {
            Recording::cut_into_pieces_of(mib << 20);
            Ok(())
        }
    }
}

/// Whether `--events` names stdout.
pub(crate) fn events_on_stdout(events: Option<&std::path::Path>) -> bool {
    events == Some(std::path::Path::new("-"))
}
