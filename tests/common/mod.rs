//! Helpers shared by the integration tests.

#![allow(dead_code)]

pub mod bot_client;
pub mod fixture;
pub mod servers;
