//! Helpers shared by the integration tests.

#![allow(dead_code)]

pub mod endpoint;
pub mod fixture;
pub mod mcp;
pub mod upstream;
