//! The view layer: the person's view of the state. Identifiers ([`ids`]) at the bottom, each
//! pane's own view state ([`frames`], [`sessions`]), the filter and line editor they use, the
//! key table ([`keys`]), where the input line's text goes ([`input_target`]), the layout, and [`console::Console`] holding them with the state. It
//! reads the state layer and nothing above it.

pub mod console;
pub mod filter;
pub mod form;
pub mod frames;
pub mod hand_calls;
pub mod ids;
pub mod input_target;
pub mod keys;
pub mod layout;
pub mod line_edit;
pub mod mcp;
pub mod nav;
pub mod panes;
pub mod resend;
pub mod sessions;
pub mod task_polls;
