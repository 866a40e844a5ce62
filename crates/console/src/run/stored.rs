//! Sessions the store keeps that are not open in this process (a restart left them there, and
//! no client has chatted on them since): listed in the Sessions pane as `stored`, and the
//! selected one's turns read from the store so its transcript and turn views open.
//!
//! Cheap with many stored sessions: the listing asks the store for the most recently used
//! [`STORED_LISTED`] heads and a count, at most every [`STORED_EVERY`], in a task of its own
//! (the loop never waits on the store); the rest are counted, not listed. Turns are read only
//! for the selected session, once, the last [`TURNS_KEPT`] of them; a read that fails is said
//! in its transcript (the store's error), and selecting the session again reads it again.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use turnscope::store::{HandleId, Head, SessionStore, now_ms};

use crate::state::{Activity, ConsoleState, SessionRow, TURNS_KEPT, TurnView};

/// Most stored sessions the pane lists (the most recently used); the title counts the rest.
pub const STORED_LISTED: usize = 200;

/// Most open sessions the listing asks for beyond [`STORED_LISTED`] (open sessions are
/// stored too, and come first among the most recently used): with more open than this, the
/// stored ones may go unlisted, and are counted.
pub const OPEN_SKIPPED: usize = 1000;

/// How often the listing is asked for again.
pub const STORED_EVERY: Duration = Duration::from_secs(2);

/// Stored rows are numbered from here (a stable number from the handle's hash), far above
/// any number this process gives an open session; the pane shows `-` for them.
pub const STORED_NUMBER_BASE: u64 = 1 << 62;

/// The latest listing the task brought back.
#[derive(Default)]
struct Listing {
    heads: Vec<Head>,
    total: u64,
    /// When it was asked for.
    asked: Option<Instant>,
}

/// The selected stored session's turns, as the task read them, or why it could not.
struct Loaded {
    number: u64,
    turns: Result<Vec<TurnView>, String>,
}

/// The console's reader of the store.
pub struct StoredSessions {
    store: Arc<dyn SessionStore>,
    listing: Arc<Mutex<Option<Listing>>>,
    /// The listing the rows were made from, and how many sessions were open then.
    current: Listing,
    rows_for_open: Option<usize>,
    /// The sessions open at the last refresh.
    open_then: HashSet<HandleId>,
    /// Sessions that closed since, and when that was seen: a listing asked before may still
    /// hold one the close deleted, which is then not listed (it was shown twice, closed and
    /// stored, until the next listing).
    closed_since: HashMap<HandleId, Instant>,
    listing_asked: Option<Instant>,
    listing_running: Arc<Mutex<bool>>,
    ids: HashMap<u64, HandleId>,
    loaded: Arc<Mutex<Option<Loaded>>>,
    /// The stored session whose turns were asked for last: a read that ends after another
    /// was asked for is dropped.
    wanted: Arc<AtomicU64>,
    loading: Option<u64>,
    shown: Option<u64>,
    /// Whether the console holds a stored session's handle (`run::kept_handles`): its row is
    /// the person's.
    kept: Option<HoldsHandle>,
}

/// Whether the console holds the handle of the stored session with this id.
pub type HoldsHandle = Arc<dyn Fn(&HandleId) -> bool + Send + Sync>;

/// The row number a stored session is shown under.
pub fn stored_number(id: &HandleId) -> u64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&id.as_bytes()[..8]);
    STORED_NUMBER_BASE | (u64::from_be_bytes(first) >> 2)
}

impl StoredSessions {
    /// A reader of `store`.
    pub fn new(store: Arc<dyn SessionStore>) -> Self {
        Self {
            store,
            listing: Arc::default(),
            current: Listing::default(),
            rows_for_open: None,
            open_then: HashSet::new(),
            closed_since: HashMap::new(),
            listing_asked: None,
            listing_running: Arc::default(),
            ids: HashMap::new(),
            loaded: Arc::default(),
            wanted: Arc::default(),
            loading: None,
            shown: None,
            kept: None,
        }
    }

    /// Marks the rows of stored sessions whose handles the console holds (`kept` says which)
    /// as the person's.
    pub fn set_kept(&mut self, kept: HoldsHandle) {
        self.kept = Some(kept);
        // Rows made before are made again with the marks.
        self.rows_for_open = None;
    }

    /// Whether `number` is a stored row's.
    pub fn holds(&self, number: u64) -> bool {
        self.ids.contains_key(&number)
    }

    /// Asks for a new listing when one is due, and lays the latest over `state`: the stored
    /// sessions not in `open`, with the idle time `handle_seconds` leaves them. One idle past
    /// `handle_seconds` is left out: no line can reopen it, and the next sweep deletes it
    /// (listed, it was offered as a conversation to go on with until a line failed). Whether it
    /// laid the rows anew (a listing came back, at most every [`STORED_EVERY`], or a session
    /// opened or closed): the screen is drawn again then.
    pub fn refresh(
        &mut self,
        state: &mut ConsoleState,
        open: &HashSet<HandleId>,
        handle_seconds: u64,
    ) -> bool {
        self.ask_listing(open.len());
        // Compared when the count changed (as the rows are made again below): a close and an
        // open within one tick are caught by the next listing.
        if self.open_then.len() != open.len() {
            let now_at = Instant::now();
            for id in self.open_then.difference(open) {
                self.closed_since.insert(*id, now_at);
            }
            self.open_then.clone_from(open);
            // Bounded while listings fail: a close older than a few listings is let go.
            self.closed_since
                .retain(|_, seen| now_at.duration_since(*seen) < 10 * STORED_EVERY);
        }
        let fresh = self.listing.lock().expect("stored listing").take();
        if let Some(fresh) = fresh {
            // What closed before this listing was asked for, it tells rightly.
            if let Some(asked) = fresh.asked {
                self.closed_since.retain(|_, seen| *seen > asked);
            }
            self.current = fresh;
        } else if self.rows_for_open == Some(open.len()) {
            return false;
        }
        // A new listing, or a session opened or closed (a client's chat reopened one).
        self.rows_for_open = Some(open.len());
        let listing = &self.current;
        let now = now_ms();
        let lifetime_ms = handle_seconds.saturating_mul(1000);
        let mut rows = Vec::new();
        let mut expired = 0u64;
        self.ids.clear();
        for head in &listing.heads {
            if open.contains(&head.id) || self.closed_since.contains_key(&head.id) {
                continue;
            }
            if now.saturating_sub(head.idle_since_ms()) > lifetime_ms {
                expired += 1;
                continue;
            }
            // Past the most listed, the rest are only counted (the expired ones above too).
            if rows.len() == STORED_LISTED {
                continue;
            }
            let number = stored_number(&head.id);
            self.ids.insert(number, head.id);
            let idle_s = now.saturating_sub(head.idle_since_ms()) / 1000;
            rows.push(SessionRow {
                number,
                handle_prefix: head.prefix.clone(),
                opener: head.opener.clone(),
                mine: self.kept.as_ref().is_some_and(|holds| holds(&head.id)),
                // A turn in flight when its server stopped is one of its turns too.
                turns: head
                    .turns
                    .max(head.in_flight.as_ref().map_or(0, |f| f.turn)),
                activity: Activity::Stored {
                    idle_s,
                    used_us: head.idle_since_ms().saturating_mul(1000),
                    errors: head.errors,
                },
                opened_us: head.created_ms * 1000,
                began_us: None,
                age_s: now.saturating_sub(head.created_ms) / 1000,
                idle_left_s: Some(handle_seconds.saturating_sub(idle_s)),
                taken_from: None,
                greeting: crate::state::Greeting::known(head.greeting.as_deref()),
            });
        }
        // Open sessions are stored too: what is neither open, listed nor expired is counted.
        let unlisted = listing
            .total
            .saturating_sub(open.len() as u64 + rows.len() as u64 + expired);
        state.sync_stored(rows, unlisted);
        true
    }

    /// Starts a listing task when the last one is older than [`STORED_EVERY`] and done.
    fn ask_listing(&mut self, open: usize) {
        if self
            .listing_asked
            .is_some_and(|at| at.elapsed() < STORED_EVERY)
        {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        {
            let mut running = self.listing_running.lock().expect("stored listing");
            if *running {
                return;
            }
            *running = true;
        }
        self.listing_asked = Some(Instant::now());
        let store = self.store.clone();
        let slot = self.listing.clone();
        let running = self.listing_running.clone();
        let asked = Instant::now();
        runtime.spawn(async move {
            // Open sessions come first among the most recently used, so ask for them too.
            let heads = store.list(STORED_LISTED + open.min(OPEN_SKIPPED)).await;
            let total = store.count().await;
            if let (Ok(heads), Ok(total)) = (heads, total) {
                *slot.lock().expect("stored listing") = Some(Listing {
                    heads,
                    total,
                    asked: Some(asked),
                });
            }
            // A store that fails is said by the server (degraded, in the header and the Log);
            // the pane keeps its last listing.
            *running.lock().expect("stored listing") = false;
        });
    }

    /// Lays the turns of the stored session `number` over `state` (selected now): read from
    /// the store the first time, in a task; shown from the next tick on. A read that fails is
    /// laid over `state` as the store's error (the transcript says it); selecting the session
    /// again reads it again. Whether it laid the read's result now (the screen is drawn again
    /// then, not at its next once-a-second redraw).
    pub fn show_turns(&mut self, state: &mut ConsoleState, number: u64) -> bool {
        if self.shown == Some(number) {
            return false;
        }
        let ready = {
            let mut loaded = self.loaded.lock().expect("stored turns");
            match loaded.take() {
                Some(l) if l.number == number => Some(l.turns),
                _ => None,
            }
        };
        if let Some(turns) = ready {
            match turns {
                Ok(turns) => state.sync_turns(number, turns),
                Err(error) => state.fail_stored_read(number, error),
            }
            self.shown = Some(number);
            self.loading = None;
            return true;
        }
        if self.loading == Some(number) {
            return false;
        }
        let (Some(id), Ok(runtime)) = (
            self.ids.get(&number).copied(),
            tokio::runtime::Handle::try_current(),
        ) else {
            return false;
        };
        // A read again after a failed one says "Reading…" until it ends.
        state.clear_stored_failure();
        self.loading = Some(number);
        self.wanted.store(number, Ordering::Relaxed);
        let store = self.store.clone();
        let slot = self.loaded.clone();
        let wanted = self.wanted.clone();
        runtime.spawn(async move {
            let turns = read_turns(store.as_ref(), &id).await;
            if wanted.load(Ordering::Relaxed) == number {
                *slot.lock().expect("stored turns") = Some(Loaded { number, turns });
            }
        });
        // "Reading…" is said at once.
        true
    }

    /// Forgets which stored session's turns are shown (the selection moved off it).
    pub fn unshow(&mut self) {
        self.shown = None;
        self.loading = None;
        self.wanted.store(0, Ordering::Relaxed);
    }
}

/// The last [`TURNS_KEPT`] turns of the stored session `id`, or what went wrong reading them
/// (the store's own words, which name the store and what to do about it).
async fn read_turns(store: &dyn SessionStore, id: &HandleId) -> Result<Vec<TurnView>, String> {
    let head = match store.head(id).await {
        Ok(Some(head)) => head,
        Ok(None) => {
            return Err(format!(
                "{} no longer holds this session (deleted or expired since it was listed); \
                 it leaves the list at the next listing",
                store.describe()
            ));
        }
        Err(e) => return Err(e.to_string()),
    };
    let from = head
        .turns
        .saturating_sub(TURNS_KEPT as u64)
        .saturating_add(1);
    let stored = store.turns(id, from).await.map_err(|e| e.to_string())?;
    if stored.is_empty() && head.turns > 0 {
        // The log keeps at least a session's last turns: none means it lost them.
        return Err(format!(
            "{} says this session has {} turns but gave none of them: its turn log is \
             missing or damaged",
            store.describe(),
            head.turns
        ));
    }
    let mut turns: Vec<TurnView> = stored
        .iter()
        .map(|t| TurnView::of_record(&t.record))
        .collect();
    // The turn running when its server stopped (or died): its line, cut off, as the client
    // will be told at its next call (`sessions list` says it too).
    if let Some(flight) = head.in_flight.as_ref().filter(|f| f.turn > head.turns) {
        turns.push(TurnView {
            id: flight.turn,
            line: flight.line.clone(),
            // On a store the replicas share, another replica may be running it now.
            end: Some(if store.shared() { IN_FLIGHT } else { CUT_OFF }.into()),
            ..TurnView::default()
        });
    }
    Ok(turns)
}

/// How a stored session's turn that was in flight when its server stopped ends in the
/// console.
pub(crate) const CUT_OFF: &str =
    "cut off: in flight when its server stopped; its client is told at its next call";

/// The same on a store the replicas share, where another replica may be running it.
pub(crate) const IN_FLIGHT: &str =
    "in flight when listed: running on another replica, or cut off by a stop (its client is told)";
