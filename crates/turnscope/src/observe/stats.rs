//! Latency statistics: HDR histograms per metric, fed from bus events. A metric is a name such
//! as `turn total` or `mcp tools/call`; its [`Summary`] gives percentiles in microseconds.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::event::Event;

/// Percentiles of one metric, in microseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50_us: u64,
    /// 95th percentile.
    pub p95_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Largest sample.
    pub max_us: u64,
}

/// One histogram per metric name (`turn total`, `tool clock`, `mcp tools/call`, ...).
#[derive(Clone, Default)]
pub struct Stats {
    histograms: BTreeMap<String, Histogram<u64>>,
    /// Recent samples per metric (µs) for sparklines, newest last, at most 120.
    recent: BTreeMap<String, Vec<u64>>,
    /// Turns ended, by reason label.
    pub turns: BTreeMap<String, u64>,
    /// Errors seen (failed turns, failed tool calls, failed model requests).
    pub errors: u64,
}

const RECENT: usize = 120;

/// Most metrics (and turn-end labels) kept apart; samples of further names go to [`OTHERS`].
/// A histogram costs tens of KiB and names come from events (tool names, routes, a replayed
/// file), so their number is bounded.
pub const METRICS_KEPT: usize = 64;

/// The metric samples of names beyond [`METRICS_KEPT`] are counted under.
pub const OTHERS: &str = "(other names)";

impl Stats {
    /// Records one sample of `metric`.
    pub fn record(&mut self, metric: &str, micros: u64) {
        let metric =
            if self.histograms.contains_key(metric) || self.histograms.len() < METRICS_KEPT - 1 {
                metric
            } else {
                OTHERS
            };
        if !self.histograms.contains_key(metric) {
            let h = Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .expect("static histogram bounds are valid");
            self.histograms.insert(metric.to_string(), h);
            self.recent.insert(metric.to_string(), Vec::new());
        }
        if let Some(h) = self.histograms.get_mut(metric) {
            let _ = h.record(micros.clamp(1, 3_600_000_000));
        }
        if let Some(recent) = self.recent.get_mut(metric) {
            if recent.len() == RECENT {
                recent.remove(0);
            }
            recent.push(micros);
        }
    }

    /// Feeds one bus event (a turn or tool call told again, `retold`, is not counted).
    pub fn observe(&mut self, event: &Event) {
        match event {
            Event::TurnEnded(t) if t.retold => {}
            // Told again, or a person's experiment: not the bot's figures.
            Event::ToolCall(c) if c.retold || c.by_hand => {}
            Event::TurnEnded(t) => {
                self.record("turn total", t.total_us);
                if let Some(first) = t.first_piece_us {
                    self.record("turn first piece", first);
                }
                let label = t.reason.split(':').next().unwrap_or("");
                if label == "error" {
                    self.errors += 1;
                }
                let label = if self.turns.contains_key(label) || self.turns.len() < METRICS_KEPT - 1
                {
                    label
                } else {
                    OTHERS
                };
                match self.turns.get_mut(label) {
                    Some(n) => *n += 1,
                    None => {
                        self.turns.insert(label.to_string(), 1);
                    }
                }
            }
            // One its turn was stopped under did not run its course: not a latency.
            Event::ModelRequest { response, .. } if response.stopped => {}
            Event::ModelRequest {
                total_us, error, ..
            } => {
                self.record("model request", *total_us);
                if error.is_some() {
                    self.errors += 1;
                }
            }
            Event::ToolCall(c) => {
                self.record(&format!("tool {}", c.name), c.duration_us);
                if c.error.is_some() {
                    self.errors += 1;
                }
            }
            Event::Served {
                route,
                duration_us,
                ok,
                probe,
                ..
            } => {
                self.record(route, *duration_us);
                // A probe's refusal is the answer it asked for.
                if !ok && !probe {
                    self.errors += 1;
                }
            }
            _ => {}
        }
    }

    /// The summary of each metric, by name.
    pub fn summaries(&self) -> Vec<(String, Summary)> {
        self.histograms
            .iter()
            .map(|(name, h)| {
                (
                    name.clone(),
                    Summary {
                        count: h.len(),
                        p50_us: h.value_at_quantile(0.5),
                        p95_us: h.value_at_quantile(0.95),
                        p99_us: h.value_at_quantile(0.99),
                        max_us: h.max(),
                    },
                )
            })
            .collect()
    }

    /// Recent samples of `metric`, newest last.
    pub fn recent(&self, metric: &str) -> &[u64] {
        self.recent.get(metric).map(Vec::as_slice).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_samples() {
        let mut s = Stats::default();
        for v in 1..=100 {
            s.record("x", v * 1000);
        }
        let (_, sum) = &s.summaries()[0];
        assert_eq!(sum.count, 100);
        assert!((49_000..=51_000).contains(&sum.p50_us), "{sum:?}");
        assert!((98_000..=100_100).contains(&sum.p99_us), "{sum:?}");
        assert_eq!(s.recent("x").len(), 100);
    }

    /// A turn and its tool call told again (a viewer's preamble, a reopened session) are not
    /// counted: a viewer that saw them run before a restart would count them twice.
    #[test]
    fn retold_turns_and_calls_are_not_counted() {
        use crate::observe::event::{ToolCallEvent, TurnEndEvent};
        let mut s = Stats::default();
        let end = |retold| {
            Event::TurnEnded(TurnEndEvent {
                session: 1,
                turn: 1,
                reason: "error: model down".into(),
                reply_bytes: 0,
                rounds: 1,
                tool_calls: 1,
                first_piece_us: Some(10),
                total_us: 100,
                retold,
                ..TurnEndEvent::default()
            })
        };
        let call = |retold| {
            Event::ToolCall(ToolCallEvent {
                session: 1,
                turn: 1,
                name: "clock".into(),
                duration_us: 5,
                error: Some("down".into()),
                retold,
                ..ToolCallEvent::default()
            })
        };
        for retold in [false, true, true] {
            s.observe(&call(retold));
            s.observe(&end(retold));
        }
        let count = |name: &str| {
            s.summaries()
                .into_iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, sum)| sum.count)
        };
        assert_eq!(count("turn total"), 1);
        assert_eq!(count("tool clock"), 1);
        assert_eq!(s.errors, 2, "the turn's and the call's, once");
    }

    #[test]
    fn names_beyond_the_bound_share_one_metric() {
        let mut s = Stats::default();
        for n in 0..1000 {
            s.record(&format!("tool t{n}"), 5);
        }
        let all = s.summaries();
        assert_eq!(all.len(), METRICS_KEPT);
        let others = all.iter().find(|(name, _)| name == OTHERS).unwrap();
        assert_eq!(others.1.count, 1000 - (METRICS_KEPT as u64 - 1));
        assert_eq!(s.recent(OTHERS).len(), 120);
    }
}
