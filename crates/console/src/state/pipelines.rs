//! Each session's pipeline as its frames crossed it: the processors in order (learned from
//! the downstream crossings), and per link frames/s each way and the queue depth the frames
//! joined (sampled by the server at each crossing), for the diagram over the Frames list.
//! Folding a frame is a short scan of a handful of links; nothing is allocated per frame.

use std::collections::BTreeMap;

use turnscope::observe::FrameEvent;

/// The width of one rate bucket: rates are frames in the last whole second.
const SECOND_US: u64 = 1_000_000;
/// Sessions whose pipelines are kept; past it the lowest-numbered (oldest) one is forgotten
/// (closed sessions are forgotten with their rows, this bounds those never seen closing).
pub const PIPELINES_KEPT: usize = 1_024;

/// A per-second counter: frames in the current second and in the one before.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rate {
    second: u64,
    current: u32,
    previous: u32,
    max_depth: u32,
    previous_max_depth: u32,
}

impl Rate {
    fn count(&mut self, at_us: u64, depth: u32) {
        let second = at_us / SECOND_US;
        if second != self.second {
            let next = second == self.second + 1;
            self.previous = if next { self.current } else { 0 };
            self.previous_max_depth = if next { self.max_depth } else { 0 };
            self.current = 0;
            self.max_depth = 0;
            self.second = second;
        }
        self.current = self.current.saturating_add(1);
        self.max_depth = self.max_depth.max(depth);
    }

    /// Frames in the last whole second before `now_us` (0 once a second passed with none).
    pub fn per_second(&self, now_us: u64) -> u32 {
        match (now_us / SECOND_US).saturating_sub(self.second) {
            0 => self.previous.max(self.current),
            1 => self.current,
            _ => 0,
        }
    }

    /// The deepest queue a frame joined in the last two seconds before `now_us`.
    pub fn depth(&self, now_us: u64) -> u32 {
        match (now_us / SECOND_US).saturating_sub(self.second) {
            0 => self.max_depth.max(self.previous_max_depth),
            1 => self.max_depth,
            _ => 0,
        }
    }

    fn merge(&mut self, other: &Rate, now_us: u64) {
        let second = now_us / SECOND_US;
        if self.second != second {
            *self = Rate {
                second,
                ..Rate::default()
            };
        }
        self.previous = self.previous.saturating_add(other.per_second(now_us));
        self.max_depth = self.max_depth.max(other.depth(now_us));
    }
}

/// One link between neighbouring processors, `from → to` downstream.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkFigures {
    /// The upstream-side processor (`source` for the pipeline's entry).
    pub from: String,
    /// The downstream-side processor (`sink` past the end).
    pub to: String,
    /// Frames that crossed it downstream, and upstream, in all.
    pub down_total: u64,
    /// Frames that crossed it upstream in all.
    pub up_total: u64,
    /// Downstream frames per second and the queue depth at `to`.
    pub down: Rate,
    /// Upstream frames per second and the queue depth at `from`.
    pub up: Rate,
}

/// One session's links, in pipeline order once the chain is known.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionPipeline {
    links: Vec<LinkFigures>,
}

impl SessionPipeline {
    fn fold(&mut self, f: &FrameEvent) {
        let down = f.direction == "down";
        let (from, to) = if down {
            (&*f.from, &*f.to)
        } else {
            (&*f.to, &*f.from)
        };
        let link = match self
            .links
            .iter_mut()
            .position(|l| l.from == from && l.to == to)
        {
            Some(i) => &mut self.links[i],
            None => {
                self.links.push(LinkFigures {
                    from: from.to_string(),
                    to: to.to_string(),
                    ..LinkFigures::default()
                });
                order(&mut self.links);
                let i = self
                    .links
                    .iter()
                    .position(|l| l.from == from && l.to == to)
                    .unwrap_or(0);
                &mut self.links[i]
            }
        };
        if down {
            link.down_total += 1;
            link.down.count(f.at_us, f.depth);
        } else {
            link.up_total += 1;
            link.up.count(f.at_us, f.depth);
        }
    }

    /// The links in pipeline order (a link not on the chain from `source` comes last).
    pub fn links(&self) -> &[LinkFigures] {
        &self.links
    }
}

/// Puts the links in chain order: from `source` (else from a processor no link enters, as
/// pipecat's pipelines start), each link's `to` the next one's `from`.
fn order(links: &mut [LinkFigures]) {
    let mut at = "source".to_string();
    if !links.iter().any(|l| l.from == at)
        && let Some(root) = links.iter().find(|l| !links.iter().any(|o| o.to == l.from))
    {
        at = root.from.clone();
    }
    for i in 0..links.len() {
        match links[i..].iter().position(|l| l.from == at) {
            Some(j) => {
                links.swap(i, i + j);
                at = links[i].to.clone();
            }
            None => return,
        }
    }
}

/// Every session's pipeline.
#[derive(Debug, Clone, Default)]
pub struct Pipelines {
    by_session: BTreeMap<u64, SessionPipeline>,
}

impl Pipelines {
    /// Folds one frame crossing in.
    pub fn fold(&mut self, f: &FrameEvent) {
        if self.by_session.len() >= PIPELINES_KEPT && !self.by_session.contains_key(&f.session) {
            self.by_session.pop_first();
        }
        self.by_session.entry(f.session).or_default().fold(f);
    }

    /// Forgets a session.
    pub fn forget(&mut self, session: u64) {
        self.by_session.remove(&session);
    }

    /// One session's pipeline.
    pub fn of(&self, session: u64) -> Option<&SessionPipeline> {
        self.by_session.get(&session)
    }

    /// Every session's links summed by name (rates added, the deepest queue kept), as of
    /// `now_us`.
    pub fn all(&self, now_us: u64) -> SessionPipeline {
        let mut out = SessionPipeline::default();
        for p in self.by_session.values() {
            for l in &p.links {
                let i = match out
                    .links
                    .iter()
                    .position(|o| o.from == l.from && o.to == l.to)
                {
                    Some(i) => i,
                    None => {
                        out.links.push(LinkFigures {
                            from: l.from.clone(),
                            to: l.to.clone(),
                            ..LinkFigures::default()
                        });
                        out.links.len() - 1
                    }
                };
                let o = &mut out.links[i];
                o.down_total += l.down_total;
                o.up_total += l.up_total;
                o.down.merge(&l.down, now_us);
                o.up.merge(&l.up, now_us);
            }
        }
        order(&mut out.links);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn crossing(
        from: &'static str,
        to: &'static str,
        dir: &'static str,
        at_us: u64,
        depth: u32,
    ) -> FrameEvent {
        FrameEvent {
            id: 1,
            session: 1,
            turn: 1,
            kind: Cow::Borrowed("data"),
            name: Cow::Borrowed("TextPiece"),
            from: Cow::Borrowed(from),
            to: Cow::Borrowed(to),
            direction: Cow::Borrowed(dir),
            at_us,
            detail: String::new(),
            depth,
        }
    }

    #[test]
    fn links_come_in_chain_order_whatever_order_frames_cross() {
        let mut p = Pipelines::default();
        p.fold(&crossing("model", "output", "down", 1, 1));
        p.fold(&crossing("input", "model", "down", 2, 1));
        p.fold(&crossing("source", "input", "down", 3, 1));
        p.fold(&crossing("output", "sink", "down", 4, 0));
        let names: Vec<_> = p
            .of(1)
            .unwrap()
            .links()
            .iter()
            .map(|l| l.from.as_str())
            .collect();
        assert_eq!(names, ["source", "input", "model", "output"]);
    }

    #[test]
    fn rates_count_the_last_whole_second_and_fall_to_zero() {
        let mut p = Pipelines::default();
        for i in 0..30 {
            p.fold(&crossing(
                "model",
                "output",
                "down",
                5_000_000 + i * 10_000,
                (i % 4) as u32,
            ));
        }
        p.fold(&crossing("output", "model", "up", 5_500_000, 2));
        let link = &p.of(1).unwrap().links()[0];
        assert_eq!(link.down.per_second(6_200_000), 30);
        assert_eq!(link.down.depth(6_200_000), 3);
        assert_eq!(link.up_total, 1);
        assert_eq!(link.down.per_second(8_000_000), 0);
        let all = p.all(6_200_000);
        assert_eq!(all.links()[0].down.per_second(6_200_000), 30);
    }

    #[test]
    fn sessions_kept_are_bounded() {
        let mut p = Pipelines::default();
        for session in 0..(PIPELINES_KEPT as u64 + 10) {
            let mut f = crossing("model", "output", "down", 1, 1);
            f.session = session;
            p.fold(&f);
        }
        assert_eq!(p.by_session.len(), PIPELINES_KEPT);
        assert!(p.of(0).is_none(), "the oldest is forgotten first");
    }
}
