--[[
Resets a bucket: it is full again, and nothing taken from it before is
given back afterwards.

Invariant: a take is given back only when it was made after the latest
reset mark of its key, and a mark lives as long as the state it replaced
could still owe anything: through the microsecond that state's bucket
would have been full again.

A refund (refund.lua) may still be on its way for a take made before the
reset. So the reset leaves a mark: its Redis TIME, for refund.lua to give
nothing back for takes made at or before it. The mark lives exactly as long
as such a take could still have anything left to give back: until the
bucket would have been full again, read from the state's own µs (the key's
expiry is in ms, and a key in its last millisecond has a PTTL of 0 while
its bucket is still short). It expires through the millisecond that time
falls in, as the bucket's key does (lua/acquire.lua), and never sooner than
a mark already there.

A string at the key that is not a state (lua/state.lua) is deleted too:
what its takes left is unknown, so the mark lives a full refill from now.
No bucket refills for longer than 100 years (TokenBucket refuses it), so
no state, however far ahead, keeps a mark longer than that.

KEYS[1]   the bucket's key
KEYS[2]   its reset mark
ARGV[1]   T: the bucket's tokens per period, reduced
ARGV[2]   a full refill of the bucket, µs, rounded up

Returns {1 or 0, t}: 1 when the key held something (the bucket had been
used), and t, the reset's Redis TIME in µs (the mark's value when one is
written). A key of another type is an error naming the key, and nothing is
deleted.
--]]

local key, mark = KEYS[1], KEYS[2]
local T, refill = tonumber(ARGV[1]), tonumber(ARGV[2])
if not (T and refill and T >= 1 and refill >= 0 and T % 1 == 0 and refill % 1 == 0) then
  return redis.error_reply('ERR token bucket reset: expected T and a full refill in µs, whole numbers (>= 1, >= 0)')
end
local v = redis.pcall('GET', key)
if type(v) == 'table' then
  return redis.error_reply('ERR token bucket: key ' .. key .. ' does not hold a token bucket state (' .. tostring(v.err) .. ')')
end
local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]
if not v then return {0, now} end
local at, r
--#include state.lua
-- Until when takes made before now may still be owed anything (µs): when the bucket is full again.
local guard
if not at then
  guard = now + refill
elseif at > now or (at == now and r > 0) then
  guard = math.min(at, now + 3155760000000000) -- 100 Julian years of µs
end
if guard then
  -- PXAT: the guard's µs without its last three digits, as the key's own expiry
  local expiry = math.floor(guard / 1000)
  local kept = redis.call('PTTL', mark) -- ms; -1: no expiry, -2: no mark
  if kept >= 0 then
    local until_ = math.floor(now / 1000) + kept
    if until_ > expiry then expiry = until_ end
  end
  redis.call('SET', mark, string.format('%d', now), 'PXAT', string.format('%d', expiry))
end
redis.call('DEL', key)
return {1, now}
