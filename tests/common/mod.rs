//! Helpers shared by the integration tests.

#![allow(dead_code)]

pub mod fixture;
pub mod mcp;
pub mod upstream;
