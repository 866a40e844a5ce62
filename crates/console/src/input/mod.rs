//! The input layer: terminal keys, paste and mouse into changes of the view state or an
//! [`actions::Action`] for the event loop. It reads the view and state layers and, for the mouse's
//! hit tests and the export's text, the draw layer; never the loop.

pub mod actions;
pub mod commands;
pub mod input_line;
pub mod mcp;
pub mod mouse;
pub mod overlays;
pub mod workbench;
