//! The console crate's unit tests, without a terminal: keys and mouse ([`keys`]), the Sessions
//! pane's sort and filter ([`sessions`]), folding ([`state`]), the bounds over a long session
//! ([`bounds`], from [`long`]), replay stepping ([`tape`]), stored sessions ([`stored`]), the `e` report ([`export`]), screens too small for the panes ([`narrow`]), the
//! first screens at 80×24 and 160×48 ([`screens`]), and insta snapshots of each pane and whole
//! screens ([`snapshot`], files in `snapshots/`) from the fixed state of [`fixture`], and the
//! workbench's hand calls ([`workbench`]).

mod bounds;
mod export;
pub(crate) mod fixture;
mod keys;
mod long;
mod narrow;
mod screens;
mod sessions;
mod snapshot;
mod state;
mod stored;
mod tape;
mod workbench;
