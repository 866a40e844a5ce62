//! `turnscope bench test`: cases per second of `turnscope test` on a file of 100 one-turn
//! cases with `--jobs 8`, the real binary in a child process against its in-process embedded
//! bot: at zero pace (turnscope's own cost) and paced like a stub model (7 words at 0.03 s),
//! where the model's time should bound the run.

use std::time::Instant;

use anyhow::Context as _;
use serde_json::{Value, json};

use super::{round, row, stats};

const CASES: usize = 100;
const JOBS: usize = 8;

/// One row per pace, `runs` runs each.
pub async fn run(runs: usize) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("turnscope-bench-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("cases.test.toml");
    let mut text = String::new();
    for i in 0..CASES {
        text.push_str(&format!(
            "[[case]]\nname = \"case {i}\"\n[[case.turn]]\nsay = \"question {i}\"\nreply_contains = \"question\"\nno_error = true\n\n"
        ));
    }
    std::fs::write(&file, text)?;
    let config = dir.join("turnscope.toml");
    std::fs::write(&config, "[model]\nwords = 7\n")?;
    let exe = std::env::current_exe()?;
    for pace in [0.0, 0.03] {
        let mut wall = Vec::with_capacity(runs);
        let mut inner = Vec::with_capacity(runs);
        for _ in 0..runs.max(1) {
            let started = Instant::now();
            let out = tokio::process::Command::new(&exe)
                .args(["test", "--json", "--jobs", &JOBS.to_string()])
                .args(["--pace", &pace.to_string(), "--config"])
                .arg(&config)
                .arg(&file)
                .env_remove("OPENAI_API_KEY")
                .env_remove("OPENAI_BASE_URL")
                .output()
                .await
                .context("run turnscope test")?;
            wall.push(started.elapsed().as_secs_f64());
            anyhow::ensure!(
                out.status.success(),
                "bench test: turnscope test failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let summary: Value = String::from_utf8_lossy(&out.stdout)
                .lines()
                .last()
                .and_then(|l| serde_json::from_str(l).ok())
                .context("bench test: no JSON summary line")?;
            anyhow::ensure!(summary["passed"] == CASES, "bench test: {summary}");
            inner.push(summary["seconds"].as_f64().unwrap_or(0.0));
        }
        let per_second = |secs: &[f64]| {
            let mut s = secs.to_vec();
            s.sort_by(f64::total_cmp);
            round(CASES as f64 / s[s.len() / 2], 1)
        };
        row(json!({
            "bench": "test",
            "cases": CASES,
            "turns_per_case": 1,
            "jobs": JOBS,
            "pace_seconds": pace,
            "words": 7,
            "runs": wall.len(),
            "cases_per_second": per_second(&inner),
            "cases_per_second_with_start": per_second(&wall),
            "run_seconds": stats(inner),
            "process_seconds": stats(wall),
        }));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
