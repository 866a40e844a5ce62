//! The console crate's unit tests, without a terminal: keys and mouse ([`keys`]), the Sessions
//! pane's sort and filter ([`sessions`]), folding ([`state`]), the `e` report ([`export`]), and insta snapshots of each pane
//! and whole screens ([`snapshot`], files in `snapshots/`) from the fixed state of [`fixture`];
//! the first screens at 80×24 and 160×48 ([`screens`]).

mod export;
pub(crate) mod fixture;
mod keys;
mod screens;
mod sessions;
mod snapshot;
mod state;
