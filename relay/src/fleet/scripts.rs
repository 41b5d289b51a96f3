//! The fleet's Redis scripts: each check-and-change of a room is one atomic
//! script, run on the Redis server's clock (relays' clocks may differ).
//!
//! Keys (`R` a room id, `IP` a client address):
//!
//! | key | type | what | TTL |
//! | --- | --- | --- | --- |
//! | `linkfs:room:R` | string | the host's place: `"<relay id> <connection>"` | [`ROOM_TTL`], renewed by its relay |
//! | `linkfs:room:R:guests` | sorted set | `"<peer> <relay id>"`, score = expiry (ms) | the same, per member |
//! | `linkfs:room:R:next` | counter | the last guest number given | the room's |
//! | `linkfs:room:R:joins` | hash | the join rate's token bucket | 10 s |
//! | `linkfs:addr:IP:rooms` | sorted set | rooms opened from IP, score = expiry | per member |
//! | `linkfs:addr:IP:guests:R` | sorted set | guests of R from IP, score = expiry | per member |
//! | `linkfs:proof:SIG` | string | a host proof already used | twice the proof window |
//!
//! A member's expiry is pushed forward by its relay every [`REFRESH_EVERY`]; a
//! dead relay's members lapse within [`ROOM_TTL`] and stop counting against
//! any limit.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

/// How long a room, a guest or an address claim lives without being renewed: 30 s.
pub const ROOM_TTL: Duration = Duration::from_secs(30);
/// How often a relay renews what it holds: 10 s (three chances per TTL).
pub const REFRESH_EVERY: Duration = Duration::from_secs(10);

pub fn room_key(room: &str) -> String {
    format!("linkfs:room:{room}")
}
pub fn guests_key(room: &str) -> String {
    format!("linkfs:room:{room}:guests")
}
pub fn next_key(room: &str) -> String {
    format!("linkfs:room:{room}:next")
}
pub fn joins_key(room: &str) -> String {
    format!("linkfs:room:{room}:joins")
}
pub fn addr_rooms_key(ip: &str) -> String {
    format!("linkfs:addr:{ip}:rooms")
}
pub fn addr_guests_key(ip: &str, room: &str) -> String {
    format!("linkfs:addr:{ip}:guests:{room}")
}
pub fn proof_key(sig: &str) -> String {
    format!("linkfs:proof:{sig}")
}
/// The pub/sub channel of one relay process.
pub fn relay_channel(relay: &str) -> String {
    format!("linkfs:relay:{relay}")
}

const NOW: &str = "local t = redis.call('TIME'); local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n";

/// OPEN: KEYS room, guests, next, addr_rooms; ARGV owner, ttl_ms, max_rooms_per_addr, room.
/// Returns `{"too-many"}` or `{"ok", previous owner or "", guests of the previous owner...}`.
pub static OPEN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{NOW}
        redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
        if not redis.call('ZSCORE', KEYS[4], ARGV[4]) and redis.call('ZCARD', KEYS[4]) >= tonumber(ARGV[3]) then
          return {{'too-many'}}
        end
        local prev = redis.call('GET', KEYS[1]) or ''
        redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
        redis.call('ZADD', KEYS[4], now + tonumber(ARGV[2]), ARGV[4])
        redis.call('PEXPIRE', KEYS[4], ARGV[2])
        redis.call('PEXPIRE', KEYS[3], ARGV[2])
        local out = {{'ok', prev}}
        if prev ~= '' and prev ~= ARGV[1] then
          for _, g in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do table.insert(out, g) end
          redis.call('DEL', KEYS[2])
        end
        return out"
    ))
});

/// CLOSE: KEYS room, guests, addr_rooms; ARGV owner, room. Only the owner
/// closes; returns the guests (`"<peer> <relay>"`) to tell, or nothing.
pub static CLOSE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {} end
        redis.call('DEL', KEYS[1])
        local guests = redis.call('ZRANGE', KEYS[2], 0, -1)
        redis.call('DEL', KEYS[2])
        redis.call('ZREM', KEYS[3], ARGV[2])
        return guests",
    )
});

/// JOIN: KEYS room, guests, next, joins, addr_guests; ARGV relay, max_guests,
/// max_guests_per_addr, ttl_ms, joins_per_sec, join_burst.
/// Returns `{"ok", owner, peer}` or `{refusal}`.
pub static JOIN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{NOW}
        local owner = redis.call('GET', KEYS[1])
        if not owner then return {{'no-such-room'}} end
        redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
        if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[2]) then return {{'room-full'}} end
        redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
        if redis.call('ZCARD', KEYS[5]) >= tonumber(ARGV[3]) then return {{'too-many'}} end
        local rate, burst = tonumber(ARGV[5]), tonumber(ARGV[6])
        local b = redis.call('HMGET', KEYS[4], 'tokens', 'at')
        local tokens, at = tonumber(b[1]) or burst, tonumber(b[2]) or now
        tokens = math.min(burst, tokens + (now - at) * rate / 1000)
        if tokens < 1 then return {{'too-fast'}} end
        redis.call('HSET', KEYS[4], 'tokens', tostring(tokens - 1), 'at', now)
        redis.call('PEXPIRE', KEYS[4], 10000)
        local peer = redis.call('INCR', KEYS[3])
        redis.call('PEXPIRE', KEYS[3], ARGV[4])
        local member = peer .. ' ' .. ARGV[1]
        redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), member)
        redis.call('PEXPIRE', KEYS[2], ARGV[4])
        redis.call('ZADD', KEYS[5], now + tonumber(ARGV[4]), member)
        redis.call('PEXPIRE', KEYS[5], ARGV[4])
        return {{'ok', owner, tostring(peer)}}"
    ))
});

/// LEAVE: KEYS guests, addr_guests; ARGV member.
pub static LEAVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "redis.call('ZREM', KEYS[1], ARGV[1])
        redis.call('ZREM', KEYS[2], ARGV[1])
        return 1",
    )
});

/// RENEW_ROOM: KEYS room, next, addr_rooms; ARGV owner, ttl_ms, room, highest
/// guest number given. Renews a room this relay hosts: 1 if still (or again,
/// after Redis lost it) its own, 0 if another connection holds it now. A lost
/// guest counter starts again above the highest number this relay has seen.
pub static RENEW_ROOM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{NOW}
        local cur = redis.call('GET', KEYS[1])
        if cur and cur ~= ARGV[1] then return 0 end
        redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
        redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[2], 'NX')
        redis.call('PEXPIRE', KEYS[2], ARGV[2])
        redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), ARGV[3])
        redis.call('PEXPIRE', KEYS[3], ARGV[2])
        return 1"
    ))
});

/// RENEW_GUEST: KEYS room, guests, addr_guests; ARGV member, ttl_ms.
/// Renews a guest here; returns the room's owner now ("" if none), so the
/// relay can tell its guests when their host is gone.
pub static RENEW_GUEST: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{NOW}
        local owner = redis.call('GET', KEYS[1])
        if not owner then return '' end
        redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
        redis.call('PEXPIRE', KEYS[2], ARGV[2])
        redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), ARGV[1])
        redis.call('PEXPIRE', KEYS[3], ARGV[2])
        return owner"
    ))
});
