--[[
Several operations in one call, each taking every one of its requests'
tokens or none, decided one after the other at one Redis TIME: operation
j sees what operations 1..j-1 wrote, exactly as if each were a call of
lua/acquire.lua's common case of its own. One operation never fails
another: what this script cannot decide for an operation (a foreign value
or a key of another type, a stored value to repair, arguments outside the
common case) it leaves untouched and reports, and the caller runs that
operation alone through lua/acquire.lua.

Bucket state and arithmetic as in lua/acquire.lua: the key holds the time
the bucket is full again (µs, `A` or `A+num/den`), counted in level units.

KEYS                     every request's key, operation after operation; no key
                         twice within one operation (or, on a Cluster node, see -m)
ARGV[1]      m           distinct bucket terms in the call; -m: the call serves one node
                         of a Cluster, with keys of several hash slots, which follow the
                         requests in ARGV, in the same order (KEYS holds the first one
                         alone, so that the node checks it serves that slot)
ARGV[2..3m+1]            per terms j: capacity (tokens), T (tokens per period, reduced),
                         P (µs per period, reduced)
then per request, two:   j, cost (tokens): j > 0 starts an operation, -j continues
                         the one before (each argument costs Redis a string: terms are
                         sent once, however many operations share them)

On a Cluster node (-m) the script runs with `#!lua flags=allow-cross-slot-keys`
(src/stores/lua-script.ts adds the line; Redis 7 and later), on the node's
own connection, never redirected there by ASK: each key is read alone, and a
key the node does not serve now (its slot moved, or is moving and the key is
not here) is an error, which leaves the operations naming it undecided.
Nothing is written before every key of an operation has been read, so an
operation is decided here whole or not at all.

Reply: {t, then per operation one of}
  1, rem_1..k            every request taken (rem: whole tokens after)
  0, rem_1..k, w_1..k    nothing taken (rem: whole tokens now; w: -2 not short,
                         -1 never (more than the capacity), else ms until it would fit)
  3                      not decided here, nothing written: run it alone
t is Redis TIME in µs. Whole tokens within 64 of 2^53 are strings (see lua/acquire.lua).
--]]

local EXACT = 9007199254740992 -- 2^53
local WIDE = 9007199254740928
local KEYS, ARGV, call, tonumber = KEYS, ARGV, redis.call, tonumber
local floor, ceil, format, sub, find = math.floor, math.ceil, string.format, string.sub, string.find
local m = tonumber(ARGV[1])
local node = m < 0
if node then m = -m end
local clock = call('TIME')
local now = clock[1] * 1000000 + clock[2]
-- Per terms: capacity, T, P, full level (capacity * P); false where the cheap guard fails,
-- so that nothing a caller sends can mint (lua/acquire.lua names the bad argument).
local caps, Ts, Ps, Fs = {}, {}, {}, {}
for j = 1, m do
  local cap, T, P = ARGV[3 * j - 1] + 0, ARGV[3 * j] + 0, ARGV[3 * j + 1] + 0
  local F = cap * P
  if cap >= 0 and T >= 1 and P >= 1 and cap % 1 == 0 and T % 1 == 0 and P % 1 == 0 and F < EXACT then
    caps[j], Ts[j], Ps[j], Fs[j] = cap, T, P, F
  else
    caps[j] = false
  end
end

local keys, values
local n = #KEYS
-- Keys that hold something else than a string (or, on a node, that it does not serve now): an
-- operation naming one is not decided here.
local foreign = false
if node then
  n = (#ARGV - 1 - 3 * m) / 3
  if n % 1 ~= 0 or n < 1 then
    return redis.error_reply('ERR token bucket: expected 3 arguments per request on a node, got ' .. #ARGV)
  end
  keys, values, foreign = {}, {}, {}
  local base = 1 + 3 * m + 2 * n
  for i = 1, n do
    local key = ARGV[base + i]
    keys[i] = key
    local v = redis.pcall('GET', key)
    if type(v) == 'table' then
      foreign[key], values[i] = true, false
    else
      values[i] = v
    end
  end
else
  keys = KEYS
  -- Every key read at once. MGET reads a key of another type as nil, as it does a
  -- missing one (a full bucket): when EXISTS finds any of those, each is looked at.
  values = call('MGET', unpack(KEYS))
  local missing = {}
  for i = 1, n do
    if not values[i] then missing[#missing + 1] = KEYS[i] end
  end
  if #missing > 0 and call('EXISTS', unpack(missing)) > 0 then
    foreign = {}
    for i = 1, #missing do
      if call('EXISTS', missing[i]) == 1 then foreign[missing[i]] = true end
    end
  end
end
-- What this call wrote, per key: what a later operation on that key reads.
local written = {}

-- The level of a bucket (terms T and full level F) whose key `key` held `v` (false: nothing)
-- before this call, in level units; nil when this script cannot decide it (see the top).
local function levelOf(key, v, T, F)
  v = written[key] or v
  if not v then
    if foreign and foreign[key] then return nil end
    return F
  end
  local at, r
  --#include state.lua
  if not at then return nil end
  local q = at - now
  if q < 0 then return F end
  local D = q * T + r
  if D <= F then return F - D end
  return nil
end

-- Stores a deficit of D level units (T per µs) at `key`: the time the bucket is full again,
-- expiring through the millisecond it is full in (see lua/acquire.lua).
local function write(key, D, T)
  local q = D
  if T ~= 1 then q = floor(D / T) end
  local rest = D - q * T
  local value
  if rest == 0 then
    value = format('%d', now + q)
    call('SET', key, value, 'PXAT', sub(value, 1, -4))
  else
    value = format('%d+%d/%d', now + q, rest, T)
    call('SET', key, value, 'PXAT', sub(value, 1, find(value, '+', 1, true) - 4))
  end
  written[key] = value
end

-- The wait (ms) until C level units fit in a level L, for a cost of `cost` tokens: -2 when
-- they fit now, -1 when they never do (more than the capacity).
local function waitFor(cost, cap, C, L, T)
  if cost > cap then return -1 end
  if C <= L then return -2 end
  local w = C - L
  if T ~= 1 then w = ceil(w / T) end
  return ceil(w / 1000)
end

local out = {now}
local o = 1 -- last slot of out written
-- per request of an operation of several: level now, what it takes (level units), full level, T, P, wait
local levels, takes, fulls, rates, periods, waits = {}, {}, {}, {}, {}, {}
local a = 3 * m + 2 -- ARGV index of the next request's terms index
local i = 1 -- index of the next request's key
while i <= n do
  -- the operation: requests i..i+k-1 (a negative terms index continues it)
  local k = 1
  while i + k <= n and ARGV[a + 2 * k] + 0 < 0 do k = k + 1 end
  if k == 1 then
    local j, cost = ARGV[a] + 0, ARGV[a + 1] + 0
    local cap = caps[j]
    local L
    if cap and cost >= 0 and cost % 1 == 0 then L = levelOf(keys[i], values[i], Ts[j], Fs[j]) end
    if not L then
      out[o + 1] = 3
      o = o + 1
    else
      local T, P = Ts[j], Ps[j]
      local C = cost * P
      local w = waitFor(cost, cap, C, L, T)
      if w == -2 then
        if C > 0 then write(keys[i], Fs[j] - L + C, T) end
        L = L - C
      end
      local whole = floor(L / P)
      if whole >= WIDE then whole = format('%d', whole) end
      if w == -2 then
        out[o + 1], out[o + 2] = 1, whole
        o = o + 2
      else
        out[o + 1], out[o + 2], out[o + 3] = 0, whole, w
        o = o + 3
      end
    end
  else
    -- several: decide every request, then write them all or none
    local status = 1
    for r = 1, k do
      local j, cost = ARGV[a + 2 * r - 2] + 0, ARGV[a + 2 * r - 1] + 0
      if j < 0 then j = -j end
      local cap = caps[j]
      local L
      if cap and cost >= 0 and cost % 1 == 0 then L = levelOf(keys[i + r - 1], values[i + r - 1], Ts[j], Fs[j]) end
      if not L then
        status = 3
        break
      end
      local T, P = Ts[j], Ps[j]
      local C = cost * P
      local w = waitFor(cost, cap, C, L, T)
      if w ~= -2 then status = 0 end
      levels[r], takes[r], fulls[r], rates[r], periods[r], waits[r] = L, C, Fs[j], T, P, w
    end
    if status == 3 then
      out[o + 1] = 3
      o = o + 1
    else
      out[o + 1] = status
      for r = 1, k do
        local L = levels[r]
        if status == 1 then
          local C = takes[r]
          if C > 0 then write(keys[i + r - 1], fulls[r] - L + C, rates[r]) end
          L = L - C
        else
          out[o + 1 + k + r] = waits[r]
        end
        local whole = floor(L / periods[r])
        if whole >= WIDE then whole = format('%d', whole) end
        out[o + 1 + r] = whole -- taken: after; not: now, what a denial reports
      end
      o = o + 1 + k
      if status == 0 then o = o + k end
    end
  end
  i = i + k
  a = a + 2 * k
end
return out
