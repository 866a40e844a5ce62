//! The integration tests, as one test binary (each binary links the whole workspace, which on a
//! 2-core machine is most of a test build). One module per capability; `support` holds what
//! they share: starting the real binary, fixture and fake servers, MCP clients.
//! The fuzz targets are a test binary of their own (`tests/fuzz`).

mod support;

mod bench_stop;
mod bot_runtime;
mod client_naming;
mod config_reference;
mod console;
mod conversation_tests;
mod custom_bot;
mod dev_tools;
mod docs_links;
mod end_session;
mod faults_leaks;
mod faults_mcp_client;
mod faults_shutdown;
mod faults_tool_server;
mod faults_xiaozhi;
mod fixture_transports;
mod headless;
mod headless_tools;
mod interop_servers;
mod layers;
mod llama_server;
mod mcp_server;
mod mcp_tasks;
mod model_bounds;
mod model_servers;
mod openai_bridge;
mod protocol_client;
mod protocol_http;
mod protocol_slow_clients;
mod reload;
mod replicas;
mod security;
mod session_tools;
mod slow_clients;
mod sse_client;
mod store;
mod store_faults;
mod tool_rules;
mod tool_sources;
mod tools_cli;
mod viewers;
mod wire;
mod xiaozhi_bridge;
mod xiaozhi_cli;
