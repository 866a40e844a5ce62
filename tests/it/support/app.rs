//! An in-process `App` for tests: free port, zero pace, any config tweak; and `eventually`, a
//! bounded wait for a condition the server reaches on its own.

use std::time::Duration;

use turnscope::app::App;
use turnscope::config::Config;
use turnscope::observe::Bus;

/// Longest wait of [`eventually`].
const WAIT: Duration = Duration::from_secs(10);

/// The app `tweak` configures, on a free port with the embedded model at zero pace.
pub async fn app(tweak: impl FnOnce(&mut Config)) -> App {
    let mut c = Config::default();
    c.server.port = 0;
    c.model.pace = 0.0;
    tweak(&mut c);
    App::start(&c, Bus::default()).await.expect("app starts")
}

/// Waits until `check` holds, failing the test after 10 s with `what`.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
