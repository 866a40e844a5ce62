//! Tests of the queueing rules, with real tasks and channels.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::observe::{Bus, Event};
use crate::tools::ToolCallRecord;

/// Records the names (and piece texts) of frames it sees, then forwards them. Sleeps on
/// `RunModel` to hold its ordered queue up.
struct Recorder {
    name: &'static str,
    seen: Arc<Mutex<Vec<String>>>,
    stall: Duration,
}

#[async_trait]
impl Processor for Recorder {
    fn name(&self) -> &'static str {
        self.name
    }
    async fn process(&mut self, frame: Frame, link: &Link) {
        let label = match &frame.body {
            FrameBody::TextPiece(p) => format!("TextPiece:{p}"),
            other => other.name().to_string(),
        };
        self.seen.lock().unwrap().push(label);
        if matches!(frame.body, FrameBody::RunModel) {
            tokio::time::sleep(self.stall).await;
        }
        link.push(frame);
    }
}

fn recorder(name: &'static str, stall_ms: u64) -> (Box<dyn Processor>, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let p = Recorder {
        name,
        seen: seen.clone(),
        stall: Duration::from_millis(stall_ms),
    };
    (Box::new(p), seen)
}

fn piece(turn: TurnId, text: &str) -> Frame {
    Frame::new(turn, FrameBody::TextPiece(text.into()))
}

#[tokio::test]
async fn data_keeps_order_and_flush_waits_for_it() {
    let (a, _) = recorder("a", 0);
    let (b, seen_b) = recorder("b", 0);
    let pipeline = Pipeline::start(vec![a, b], Observer::new(Bus::default(), 1));
    for i in 0..100 {
        pipeline.push(piece(1, &i.to_string()));
    }
    assert!(pipeline.drain(Duration::from_secs(5)).await);
    let seen = seen_b.lock().unwrap().clone();
    let pieces: Vec<_> = seen
        .iter()
        .filter(|s| s.starts_with("TextPiece"))
        .cloned()
        .collect();
    let expected: Vec<_> = (0..100).map(|i| format!("TextPiece:{i}")).collect();
    assert_eq!(pieces, expected);
    assert_eq!(seen.first().map(String::as_str), Some("Start"));
}

#[tokio::test]
async fn system_frames_overtake_and_interruption_drops_interruptible_data() {
    // `a` stalls on RunModel, so frames queue behind it.
    let (a, seen_a) = recorder("a", 200);
    let (b, seen_b) = recorder("b", 0);
    let pipeline = Pipeline::start(vec![a, b], Observer::new(Bus::default(), 1));
    pipeline.push(Frame::new(1, FrameBody::RunModel));
    tokio::time::sleep(Duration::from_millis(50)).await;
    pipeline.push(piece(1, "dropped"));
    pipeline.push(Frame::new(
        1,
        FrameBody::FunctionCallResult(Arc::new(ToolCallRecord::for_test("kept"))),
    ));
    pipeline.push(piece(1, "also dropped"));
    pipeline.push(Frame::new(1, FrameBody::Interruption));
    // Everything queued when the interruption is handled goes, so a new turn waits for the
    // drain before it sends its frames.
    assert!(pipeline.drain(Duration::from_secs(5)).await);
    pipeline.push(piece(2, "after"));
    assert!(pipeline.drain(Duration::from_secs(5)).await);

    let a = seen_a.lock().unwrap().clone();
    assert_eq!(
        a,
        [
            "Start",
            "RunModel",
            "Interruption",
            "FunctionCallResult",
            "Flush",
            "TextPiece:after",
            "Flush"
        ]
    );
    let b = seen_b.lock().unwrap().clone();
    assert!(!b.iter().any(|s| s.contains("dropped")), "{b:?}");
}

#[tokio::test]
async fn every_crossing_is_observed_with_from_and_to() {
    let bus = Bus::default();
    let mut sub = bus.subscribe();
    let (a, _) = recorder("a", 0);
    let (b, _) = recorder("b", 0);
    let pipeline = Pipeline::start(vec![a, b], Observer::new(bus.clone(), 7));
    pipeline.push(piece(3, "hi"));
    assert!(pipeline.drain(Duration::from_secs(5)).await);
    let mut hops = Vec::new();
    while let Some(event) = sub.try_recv() {
        if let Event::Frame(f) = &*event
            && f.name == "TextPiece"
        {
            assert_eq!(f.session, 7);
            assert_eq!(f.turn, 3);
            assert_eq!(f.detail, "hi");
            hops.push(format!("{}>{}", f.from, f.to));
        }
    }
    assert_eq!(hops, ["source>a", "a>b", "b>sink"]);
}

#[tokio::test]
async fn end_passes_queued_frames_then_stops() {
    let (a, seen_a) = recorder("a", 0);
    let pipeline = Pipeline::start(vec![a], Observer::new(Bus::default(), 1));
    pipeline.push(piece(1, "x"));
    let seen = seen_a.clone();
    pipeline.end(Duration::from_secs(5)).await;
    assert_eq!(*seen.lock().unwrap(), ["Start", "TextPiece:x", "End"]);
}

#[tokio::test]
async fn each_crossing_carries_the_queue_depth_it_joined() {
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let (a, _) = recorder("a", 0);
    let (b, _) = recorder("b", 0);
    // On this single-threaded runtime no processor runs before the first await: the Start
    // frame and five pieces all wait in a's queue.
    let pipeline = Pipeline::start(vec![a, b], Observer::new(bus.clone(), 1));
    for i in 0..5 {
        pipeline.push(piece(1, &i.to_string()));
    }
    assert!(pipeline.drain(Duration::from_secs(5)).await);
    // Once drained, the queues are empty again: the next frame joins an empty queue.
    pipeline.push(piece(1, "after"));
    assert!(pipeline.drain(Duration::from_secs(5)).await);
    let mut into_a = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::Frame(f) = &*event
            && f.to == "a"
            && f.direction == "down"
        {
            into_a.push((f.name.to_string(), f.depth));
        }
    }
    let depths: Vec<u32> = into_a.iter().map(|(_, d)| *d).collect();
    assert_eq!(&depths[..6], [1, 2, 3, 4, 5, 6], "{into_a:?}");
    // The drain's flush joined behind the pieces; the frame pushed after it, an empty queue.
    assert_eq!(into_a[6], ("Flush".to_string(), 7), "{into_a:?}");
    assert_eq!(into_a[7], ("TextPiece".to_string(), 1), "{into_a:?}");
}

/// Lets go of the pieces whose text is "gone" (as a processor that consumes a frame does);
/// forwards the rest.
struct Dropper;

#[async_trait]
impl Processor for Dropper {
    fn name(&self) -> &'static str {
        "dropper"
    }
    async fn process(&mut self, frame: Frame, link: &Link) {
        if !matches!(&frame.body, FrameBody::TextPiece(p) if &**p == "gone") {
            link.push(frame);
        }
    }
}

/// On the bus a frame's crossings are one journey, published when it leaves the pipeline, or
/// where a processor let it go; a whole listener gets the journey, any other its crossings.
#[tokio::test]
async fn a_frame_is_one_journey_on_the_bus_published_where_its_way_ends() {
    let bus = Bus::default();
    let mut whole = bus.subscribe_whole();
    let mut each = bus.subscribe();
    let (b, _) = recorder("b", 0);
    let pipeline = Pipeline::start(vec![Box::new(Dropper), b], Observer::new(bus.clone(), 1));
    pipeline.push(piece(1, "kept"));
    pipeline.push(piece(1, "gone"));
    assert!(pipeline.drain(Duration::from_secs(5)).await);
    let mut journeys = Vec::new();
    while let Some(event) = whole.try_recv() {
        match &*event {
            Event::Journey(j) if j.name == "TextPiece" => {
                let hops: Vec<String> = j
                    .hops
                    .iter()
                    .map(|h| format!("{}>{}", h.from, h.to))
                    .collect();
                journeys.push(format!("{}: {}", j.detail, hops.join(" ")));
            }
            Event::Frame(f) => panic!("a crossing went out on its own: {f:?}"),
            _ => {}
        }
    }
    // Each is published when its way ends: "gone" by the dropper, most likely while "kept"
    // still waited for `b`, so the order is not asserted.
    journeys.sort();
    assert_eq!(
        journeys,
        [
            "gone: source>dropper",
            "kept: source>dropper dropper>b b>sink"
        ]
    );
    let mut crossings = Vec::new();
    while let Some(event) = each.try_recv() {
        match &*event {
            Event::Frame(f) if f.name == "TextPiece" => {
                crossings.push(format!("{} {}>{}", f.detail, f.from, f.to));
            }
            Event::Journey(_) => panic!("a journey was handed out whole"),
            _ => {}
        }
    }
    // A journey's crossings come together, in order.
    crossings.sort_by_key(|c| c.starts_with("kept"));
    assert_eq!(
        crossings,
        [
            "gone source>dropper",
            "kept source>dropper",
            "kept dropper>b",
            "kept b>sink",
        ]
    );
}
