//! The Lua scripts the Redis store runs: each is one round trip, atomic on the server (Redis
//! runs one script at a time), so a version check and the write it guards can never be split
//! by another replica's write. Sent by SHA1 (`EVALSHA`), loaded on a server that lacks them.
//!
//! The key names are those of the module's layout (`super`'s doc); `KEYS` carries the keys
//! of the one handle a script is about, and the scripts that walk the `used` index build
//! the head keys from the prefix they are given (so the store is one Redis, not a cluster).

use std::sync::LazyLock;

use redis::Script;

/// The check every write starts with: the store's handle key (`P meta`) is the writer's.
/// After Redis lost its data while replicas ran, the first write (or probe: [`PROBE`]) puts
/// their key back, so a replica started later reads it; a writer whose key differs (a
/// replica started first made a new one) is refused, nothing written, and given the key
/// Redis holds (`{-2, 0, key}`), which it uses from then on (`RedisStore::adopt`).
/// KEYS[3] is `P meta`, ARGV[1] the writer's key. One call when the key is there (every
/// write but the first); a script runs alone, so nobody writes the key between the two.
const SAME_KEY: &str = r"
local same = redis.call('HGET', KEYS[3], 'key')
if not same then
  redis.call('HSET', KEYS[3], 'key', ARGV[1])
  same = ARGV[1]
end
if same ~= ARGV[1] then return {-2, 0, same} end
";

/// Stores a new head unless one exists.
/// KEYS: head, used, meta. ARGV: key, head JSON, id, last used ms, ttl ms, turns, history
/// from, writer.
/// Returns `{1, 1}` when stored, `{0, version found}` when the id exists, `{-2, 0, key}`
/// ([`SAME_KEY`]).
pub(super) static CREATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{SAME_KEY}
local found = redis.call('HGET', KEYS[1], 'v')
if found then return {{0, tonumber(found)}} end
redis.call('HSET', KEYS[1], 'v', 1, 'head', ARGV[2], 't', ARGV[6], 'hf', ARGV[7], 'w', ARGV[8])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
return {{1, 1}}
"
    ))
});

/// Applies a commit if the head's version is the one expected, and takes or gives back the
/// handle's lease in the same step (the mark before a turn takes it, the record a reply
/// waits for gives it back: one round trip each instead of two).
/// KEYS: head, log, meta, used, lease, stop. ARGV: key, expected, head JSON, id, last used
/// ms, ttl ms, turns, history from, writer, drop before, lease step (`keep`, `take` or
/// `release`), holder, lease ms, then (turn id, turn JSON) pairs.
/// Returns `{1, new version}`, `{0, version found}` (`-1`: no head; nothing written, no lease
/// taken; `release` gives it back all the same), `{-3, ms left, holder}` for `take` while
/// another holds the lease (nothing written), or `{-2, 0, key}` ([`SAME_KEY`]).
pub(super) static COMMIT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        r"{SAME_KEY}
local step = ARGV[11]
local holder = false
if step ~= 'keep' then holder = redis.call('GET', KEYS[5]) end
if step == 'take' and holder and holder ~= ARGV[12] then
  return {{-3, redis.call('PTTL', KEYS[5]), holder}}
end
local function give_back()
  if step == 'release' and holder == ARGV[12] then redis.call('DEL', KEYS[5]) end
end
local found = redis.call('HGET', KEYS[1], 'v')
if not found then give_back() return {{0, -1}} end
if tonumber(found) ~= tonumber(ARGV[2]) then give_back() return {{0, tonumber(found)}} end
local version = tonumber(found) + 1
redis.call('HSET', KEYS[1], 'v', version, 'head', ARGV[3], 't', ARGV[7], 'hf', ARGV[8], 'w', ARGV[9])
for i = 14, #ARGV, 2 do
  redis.call('ZREMRANGEBYSCORE', KEYS[2], ARGV[i], ARGV[i])
  redis.call('ZADD', KEYS[2], ARGV[i], ARGV[i + 1])
end
if tonumber(ARGV[10]) > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[10])
end
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[4])
if step == 'take' then
  if holder then
    redis.call('PEXPIRE', KEYS[5], ARGV[13])
  else
    redis.call('SET', KEYS[5], ARGV[12], 'PX', ARGV[13])
    redis.call('DEL', KEYS[6])
  end
end
give_back()
return {{1, version}}
"
    ))
});

/// Writes a replica's probe key and returns what it held before: a name there that is not
/// this process's means another process wrote it, so serves with this replica's id. And
/// checks the handle key as a write does ([`SAME_KEY`]): after Redis lost its data, each
/// replica's next probe (every sweeper tick) puts its key back, or finds the one a replica
/// started meanwhile made, so no call meets the change.
/// KEYS: probe, meta. ARGV: holder (`REPLICA#NONCE`), ms it lasts, the replica's key, the
/// layout's version.
/// Returns `{what the probe key held or nil, the store's key when not the replica's, or nil}`.
pub(super) static PROBE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local before = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local same = redis.call('HGET', KEYS[2], 'key')
if not same then
  redis.call('HSET', KEYS[2], 'key', ARGV[3])
  same = ARGV[3]
end
redis.call('HSETNX', KEYS[2], 'schema', ARGV[4])
local other = false
if same ~= ARGV[3] then other = same end
return {before, other}
",
    )
});

/// A head and the log a reload needs, in one round trip: from the history window's first
/// turn or the last `kept` turns, whichever is older (`Head::load_from`).
/// KEYS: head, log. ARGV: kept.
/// Returns nil, or `{version, head JSON, {turn JSON...}}`.
pub(super) static LOAD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local h = redis.call('HMGET', KEYS[1], 'v', 'head', 't', 'hf')
if not h[1] then return false end
local turns = tonumber(h[3]) or 0
local window = tonumber(h[4]) or 1
local kept = math.max(tonumber(ARGV[1]) - 1, 0)
local from = math.max(math.min(window, math.max(turns - kept, 0)), 1)
return {tonumber(h[1]), h[2], redis.call('ZRANGEBYSCORE', KEYS[2], from, '+inf')}
",
    )
});

/// Heads from the `used` index, each with its version; ids whose head Redis already expired
/// are dropped from the index on the way.
/// KEYS: used. ARGV: prefix, mode (`newest` or `before`), limit, before ms.
/// Returns `{version, head JSON, version, head JSON, ...}`.
pub(super) static HEADS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local limit = tonumber(ARGV[3])
local out = {}
local offset = 0
while #out < 2 * limit do
  local ids
  if ARGV[2] == 'newest' then
    ids = redis.call('ZREVRANGE', KEYS[1], offset, offset + limit - 1)
  else
    ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4], 'LIMIT', offset, limit)
  end
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local h = redis.call('HMGET', ARGV[1] .. 'h:' .. id, 'v', 'head')
    if h[1] then
      if #out < 2 * limit then
        out[#out + 1] = tonumber(h[1])
        out[#out + 1] = h[2]
      end
      offset = offset + 1
    else
      redis.call('ZREM', KEYS[1], id)
    end
  end
end
return out
",
    )
});

/// Takes a handle's lease for a holder (again, when it holds it already), and says what
/// the store holds of the handle. A new holder drops an interrupt request left for the one
/// before (its turn ended first).
/// KEYS: lease, head, stop. ARGV: holder, lease ms.
/// Returns `{1, version or nil, writer or nil}` when taken, `{0, holder, ms left}` when
/// another holds it.
pub(super) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local holder = redis.call('GET', KEYS[1])
  if holder ~= ARGV[1] then
    return {0, holder, redis.call('PTTL', KEYS[1])}
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  redis.call('DEL', KEYS[3])
end
local h = redis.call('HMGET', KEYS[2], 'v', 'w')
return {1, h[1], h[2]}
",
    )
});

/// Keeps the leases a holder holds among the ids given (the others are left alone), and
/// takes the interrupt requests other replicas left on them.
/// ARGV: prefix, holder, lease ms, then ids. Returns the ids (of those renewed) asked to
/// interrupt their turn.
pub(super) static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local asked = {}
for i = 4, #ARGV do
  local lease = ARGV[1] .. 'lease:' .. ARGV[i]
  if redis.call('GET', lease) == ARGV[2] then
    redis.call('PEXPIRE', lease, ARGV[3])
    if redis.call('DEL', ARGV[1] .. 'stop:' .. ARGV[i]) == 1 then
      asked[#asked + 1] = ARGV[i]
    end
  end
end
return asked
",
    )
});

/// Keeps conversations from expiring for another idle lifetime, as a write does (a turn
/// longer than the lifetime, a task polled: no write refreshes them meanwhile): each head
/// and log's TTL, and its place in `used` (which the idle sweep reads); nothing for an id
/// whose head is gone. ARGV: prefix, ttl ms, now ms, then ids.
pub(super) static KEEP_ALIVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
for i = 4, #ARGV do
  local id = ARGV[i]
  if redis.call('PEXPIRE', ARGV[1] .. 'h:' .. id, ARGV[2]) == 1 then
    redis.call('PEXPIRE', ARGV[1] .. 'log:' .. id, ARGV[2])
    redis.call('ZADD', ARGV[1] .. 'used', ARGV[3], id)
  end
end
return 0
",
    )
});

/// Replaces a record only if it is there and contains a text (plain search): a
/// compare-and-set on another replica's record. KEYS: record. ARGV: needle, value, ms.
/// Returns 1 when replaced.
pub(super) static REPLACE_IF: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local now = redis.call('GET', KEYS[1])
if not now or not string.find(now, ARGV[1], 1, true) then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
",
    )
});

/// Asks the holder of a lease to interrupt its turn: a request it takes at its next
/// renewal, gone with the lease (nothing when nobody else holds it).
/// KEYS: lease, stop. ARGV: holder (the asker), lease ms. Returns 1 when asked.
pub(super) static ASK_INTERRUPT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local holder = redis.call('GET', KEYS[1])
if not holder or holder == ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return 1
",
    )
});

/// Gives a lease back if the holder still holds it.
/// KEYS: lease. ARGV: holder. Returns 1 when released.
pub(super) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
",
    )
});
