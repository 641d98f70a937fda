"""Rate limits shared by every dispatcher through Redis (``TIDINGS_REDIS_URL``).

The same semantics as ``LocalRateLimiter`` (dispatch/protection/ratelimit.py: one shared bucket per
account, a class bucket per share below 1, the headroom a grant must leave), kept in one
Redis hash per account and changed only by Lua scripts, which Redis runs one at a time:
two processes can never both take the last token. Time is Redis's own clock (``TIME``), so
the processes' clocks do not matter.

When Redis cannot be reached, the limiter does not send unlimited: it falls back to a local
limiter at this process's share of every rate (the rate divided by the live dispatchers,
``set_share``), says so loudly in the log and in ``health``, and tries Redis again every
``RETRY_SECONDS``; the first success switches back.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tidings.dispatch.protection.ratelimit import LocalRateLimiter, validate_shares
from tidings.dispatch.protection.redis_health import RedisHealth
from tidings.priorities import Priority

log = logging.getLogger(__name__)

KEY_PREFIX = "tidings:rate:"
# An idle account's state is forgotten after an hour (a full bucket, as at start).
STATE_TTL_MS = 3_600_000

# KEYS[1]: the account's hash. ARGV: rate, capacity, wanted, reserve, then one (name, share)
# pair per class bucket the grant takes from. Returns {granted, wait as text, available}.
_ACQUIRE = """
local key = KEYS[1]
local rate, capacity = tonumber(ARGV[1]), tonumber(ARGV[2])
local wanted, reserve = tonumber(ARGV[3]), tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local eps = 1e-9
local function level(prefix, r, cap)
  local l = tonumber(redis.call('HGET', key, prefix .. 'l'))
  if l == nil then return cap end
  local ts = tonumber(redis.call('HGET', key, prefix .. 't'))
  if now > ts then l = math.min(cap, l + (now - ts) * r) end
  return l
end
local shared = level('s', rate, capacity)
local granted = math.min(wanted, math.max(0, math.floor(shared - reserve + eps)))
local classes = {}
for i = 5, #ARGV, 2 do
  local r = tonumber(ARGV[i + 1]) * rate
  local cap = math.max(1, tonumber(ARGV[i + 1]) * capacity)
  local l = level(ARGV[i], r, cap)
  table.insert(classes, {ARGV[i], l, r})
  granted = math.min(granted, math.max(0, math.floor(l + eps)))
end
shared = shared - granted
redis.call('HSET', key, 'sl', tostring(shared), 'st', tostring(now))
local wait = math.max(0, (reserve + 1 - eps - shared) / rate)
local available = math.max(0, math.floor(shared - reserve + eps))
for _, c in ipairs(classes) do
  local l = c[2] - granted
  redis.call('HSET', key, c[1] .. 'l', tostring(l), c[1] .. 't', tostring(now))
  wait = math.max(wait, (1 - eps - l) / c[3])
  available = math.min(available, math.max(0, math.floor(l + eps)))
end
redis.call('PEXPIRE', key, %d)
return {granted, tostring(wait), available}
""".replace("%d", str(STATE_TTL_MS))

# KEYS[1..n]: the accounts' hashes. Every bucket empty now: after an outage, during which
# the processes sent at their local shares, the refilled state must not release a burst.
_EMPTY = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
for _, key in ipairs(KEYS) do
  local fields = redis.call('HKEYS', key)
  for _, f in ipairs(fields) do
    local kind = string.sub(f, -1)
    if kind == 'l' then redis.call('HSET', key, f, '0') end
    if kind == 't' then redis.call('HSET', key, f, tostring(now)) end
  end
  if #fields == 0 then redis.call('HSET', key, 'sl', '0', 'st', tostring(now)) end
  redis.call('PEXPIRE', key, %d)
end
return 1
""".replace("%d", str(STATE_TTL_MS))

# KEYS[1]: the account's hash. ARGV: rate, capacity, seconds. Debt that the refill pays
# back in exactly ``seconds``.
_PAUSE = """
local key = KEYS[1]
local rate, capacity, seconds = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local l = tonumber(redis.call('HGET', key, 'sl'))
if l == nil then l = capacity else
  local ts = tonumber(redis.call('HGET', key, 'st'))
  if now > ts then l = math.min(capacity, l + (now - ts) * rate) end
end
l = math.min(l, -seconds * rate)
redis.call('HSET', key, 'sl', tostring(l), 'st', tostring(now))
redis.call('PEXPIRE', key, %d)
return 1
""".replace("%d", str(STATE_TTL_MS))


@dataclass
class _Seen:
    """What the last acquire for (account, priority) learnt, for the sync questions."""

    available: int
    wait: float
    at: float


class RedisRateLimiter:
    """``RateLimiter`` over Redis, with a local fallback at this process's share."""

    def __init__(
        self,
        client: aioredis.Redis,
        health: RedisHealth,
        rates: Mapping[str, float],
        shares: Mapping[Priority, float] | None = None,
        burst_seconds: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.health = health
        self.rates = dict(rates)
        self.shares = validate_shares(shares or {})
        self.burst_seconds = burst_seconds
        self.clock = clock
        self.fallback = LocalRateLimiter(rates, self.shares, burst_seconds, clock)
        self._acquire = client.register_script(_ACQUIRE)
        self._pause = client.register_script(_PAUSE)
        self._empty = client.register_script(_EMPTY)
        self._seen: dict[tuple[str, Priority], _Seen] = {}
        self._shared = True  # False while granting from the local fallback

    def set_share(self, share: float) -> None:
        """This process's part of every rate while Redis is down (1 / live dispatchers)."""
        self.fallback.set_share(share)

    def drain(self) -> None:
        self.fallback.drain()

    def capacity(self, account: str) -> float | None:
        rate = self.rates.get(account)
        return None if rate is None else max(1.0, rate * self.burst_seconds)

    def _args(self, account: str, priority: Priority, wanted: int) -> list[Any]:
        rate = self.rates[account]
        capacity = max(1.0, rate * self.burst_seconds)
        reserve = (1 - self.shares[priority]) * (capacity - 1)
        classes: list[Any] = []
        for cap, share in self.shares.items():
            if share < 1 and priority.at_most(cap):
                classes += [cap.value, share]
        return [rate, capacity, wanted, reserve, *classes]

    async def acquire(self, account: str, priority: Priority, wanted: int) -> int:
        if account not in self.rates or wanted <= 0:
            return max(0, wanted)
        if not self.health.should_try() or not await self._resume():
            return self._local(account, priority, wanted)
        args = self._args(account, priority, wanted)
        try:
            granted, wait, available = await self._acquire(keys=[KEY_PREFIX + account], args=args)
        except (RedisError, OSError) as error:
            self.health.failed(error)
            return self._local(account, priority, wanted)
        self.health.succeeded()
        self._seen[(account, priority)] = _Seen(int(available), float(wait), self.clock())
        return int(granted)

    def _local(self, account: str, priority: Priority, wanted: int) -> int:
        """Grant from the fallback; it starts empty, for the fleet was sending at the full
        rate a moment ago."""
        if self._shared:
            self._shared = False
            self.fallback.drain()
        return self.fallback.try_acquire(account, priority, wanted)

    async def _resume(self) -> bool:
        """Back on Redis after the fallback: empty the shared buckets first (they refilled
        while every process sent at its local share). False while Redis is still down."""
        if self._shared:
            return True
        try:
            await self._empty(keys=[KEY_PREFIX + name for name in sorted(self.rates)])
        except (RedisError, OSError) as error:
            self.health.failed(error)
            return False
        self.health.succeeded()
        self._shared = True
        self._seen.clear()
        return True

    def forget(self, priority: Priority) -> None:
        """Drop what the acquires of ``priority`` learnt (a restarted lane's estimates);
        its next acquire asks Redis, or the fallback, afresh."""
        for key in [key for key in self._seen if key[1] is priority]:
            del self._seen[key]

    def available(self, account: str, priority: Priority) -> int | None:
        """From the last acquire, plus what the class rate refilled since (others take
        from it too: an estimate, which the acquire itself corrects)."""
        if account not in self.rates:
            return None
        if not self._shared:
            return self.fallback.available(account, priority)
        seen = self._seen.get((account, priority))
        capacity = self.capacity(account) or 1.0
        if seen is None:
            return math.floor(capacity * self.shares[priority])
        refill = (self.clock() - seen.at) * self.rates[account] * self._lowest_share(priority)
        return min(math.floor(capacity), seen.available + math.floor(refill))

    def next_token_in(self, account: str, priority: Priority) -> float:
        if account not in self.rates:
            return 0.0
        if not self._shared:
            return self.fallback.next_token_in(account, priority)
        seen = self._seen.get((account, priority))
        if seen is None:
            return 0.0
        return max(0.0, seen.wait - (self.clock() - seen.at))

    async def pause(self, account: str, seconds: float) -> None:
        if account not in self.rates or seconds <= 0:
            return
        await self.fallback.pause(account, seconds)
        if not self.health.should_try():
            return
        rate = self.rates[account]
        try:
            await self._pause(
                keys=[KEY_PREFIX + account],
                args=[rate, max(1.0, rate * self.burst_seconds), seconds],
            )
        except (RedisError, OSError) as error:
            self.health.failed(error)

    def _lowest_share(self, priority: Priority) -> float:
        return min(s for cap, s in self.shares.items() if priority.at_most(cap))
