//! A frame's journey: the links it crossed, gathered while someone watches and published as
//! one event ([`Event::Journey`]) when the frame's way ends: past either end of the pipeline,
//! or where a processor let go of it.
//!
//! One event per crossing (a reply piece crosses three links, a flush six) made each
//! crossing pay for an event of its own, an allocation, a broadcast to every listener and a
//! free on another thread; with three viewers watching a zero-pace load that was most of what watching cost
//! the server (`docs/benchmarks.md`). A journey is one of each per frame. Listeners still
//! read crossings: [`Subscription::recv`](crate::observe::Subscription::recv) hands a
//! journey's out one by one, and lines are written one per crossing, as before.

use crate::observe::event::{FrameJourney, Hop};
use crate::observe::{Bus, Event};

/// Crossings most frames make (a downstream frame from the input crosses every link): room
/// for them is taken at the first.
pub(crate) const HOPS_EXPECTED: usize = 8;

/// The crossings a frame made so far (nothing while nobody watches); published when it is
/// finished or dropped.
#[derive(Default)]
pub struct Journey(Option<Box<Travel>>);

struct Travel {
    bus: Bus,
    journey: FrameJourney,
}

impl Journey {
    /// Records one crossing. `same` says whether the journey so far is of the frame as it is
    /// now: a frame a processor changed on the way (made it another frame by its name, or
    /// turned its direction or turn), which the crossings so far do not describe, has those
    /// published and starts anew from `begin`. A payload changed in place under the same
    /// name keeps the detail its first crossing read.
    #[inline]
    pub(crate) fn hop(
        &mut self,
        bus: &Bus,
        same: impl FnOnce(&FrameJourney) -> bool,
        begin: impl FnOnce() -> FrameJourney,
        hop: Hop,
    ) {
        if self.0.as_ref().is_some_and(|t| !same(&t.journey)) {
            self.finish();
        }
        let travel = self.0.get_or_insert_with(|| {
            Box::new(Travel {
                bus: bus.clone(),
                journey: begin(),
            })
        });
        travel.journey.hops.push(hop);
    }

    /// Publishes the crossings recorded so far, if any.
    pub(crate) fn finish(&mut self) {
        if let Some(travel) = self.0.take() {
            let Travel { bus, journey } = *travel;
            bus.publish(Event::Journey(journey));
        }
    }
}

impl std::fmt::Debug for Journey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hops = self.0.as_ref().map_or(0, |t| t.journey.hops.len());
        write!(f, "Journey({hops} crossings)")
    }
}

impl Drop for Journey {
    fn drop(&mut self) {
        self.finish();
    }
}
