--[[
Token buckets: take every request's tokens or none (or only check).

A bucket's whole state is the time at which it is full again (Redis TIME,
microseconds), the value of its key: a whole number `A`, or `A+num/den`
for A + num/den µs. A missing key is a full bucket; a key expires when its
bucket is full again: PXAT is A without its last three digits, and Redis
keeps a key through its expiry millisecond.

The arithmetic is exact. For a rate of T tokens per P µs (the fraction
reduced by the caller), a bucket's content is counted in level units: a
token is P units and a microsecond of refill T units, so

  level now   = capacity * P - (fullAt - now) * T
  take cost   : level -= cost * P          (admitted while level >= 0)
  remaining   = floor(level / P)
  wait        = ceil(ceil(-level / T) / 1000) ms

Below 2^53 every one of these is an exact double. A request whose
capacity * P reaches 2^53 (a huge capacity at an odd rate) brings its
capacity and cost as times instead, whole µs plus units of 1/T µs,
computed exactly by the caller, and the script adds and compares those.

KEYS[i]                  the bucket's key of request i

The common case, every request enforced, no key twice and no huge bucket,
takes no mode argument (each argument costs Redis a string and a table slot):
ARGV[3i-2..3i]           when every token is a whole number of µs (T = 1), per
                         request: capacity (tokens), period (µs per token), cost
ARGV[4i-3..4i]           else, per request: capacity, T, P, cost as below
Every other call:
ARGV[1]      mode        'check': decide, write nothing; else e: requests 1..e are
                         enforced and e+1..n measured (taken only if all would be)
ARGV[4i-2]   capacity    tokens, integer >= 0
ARGV[4i-1]   T           tokens per period, reduced, integer >= 1
ARGV[4i]     P           period in µs, reduced, integer >= 1
ARGV[4i+1]   cost        tokens, integer >= 0
ARGV[4n+2..]             for each request with capacity * P >= 2^53, in order:
                         capacity and cost as times: qF rF qC rC (µs, 1/T µs)

Replies (rem: whole tokens, a string when within 64 of 2^53; t: Redis TIME in µs,
when the tokens were taken; X: only for a call with a mode argument, the key's
full-at time after the call, a number or an `A+num/den` string, 0 where
nothing is stored; w: -2 not short, -1 never (more than the capacity), else ms
until it would fit):
  {1, rem after_1..n, t}                  every request taken (no mode argument)
  {1, rem after_1..n, X_1..n, t}          every request taken (a mode argument)
  {2, rem after_1..n, X_1..n, t, w_1..n}  enforced taken; measured not (w for them)
  {0, rem now_1..n, w_1..n}               nothing taken (an enforced request was short)
  {1 or 0, rem now_1..n, w_1..n}          'check'
Every request counts what the requests before it in the call asked of the
same key. A state (lua/state.lua) beyond a full refill from now (a capacity
lowered since) reads as an empty bucket and is rewritten as one; any value
that is not a state, and a key of another type, is an error naming the key,
and nothing is written.
--]]

local EXACT = 9007199254740992 -- 2^53
-- ioredis reads integer replies within 64 of 2^53 wrongly (number * 10 + digit
-- overflows first): whole tokens that large are sent as strings.
local WIDE = 9007199254740928
local n = #KEYS
local argc = #ARGV
local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]

-- The common case: enforced requests on distinct keys below 2^53. Anything
-- else (a short request, a value to repair, bad arguments) falls through to
-- the general path below, which decides again from scratch.
if n == 1 and (argc == 3 or argc == 4) then
  local cap, T, P, cost
  if argc == 3 then
    cap, T, P, cost = ARGV[1] + 0, 1, ARGV[2] + 0, ARGV[3] + 0
  else
    cap, T, P, cost = ARGV[1] + 0, ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
  end
  local F = cap * P
  local C = cost * P
  -- Nothing a caller sends can mint: whole numbers, none negative (else the general path names the bad one).
  if cap >= 0 and cost >= 0 and T >= 1 and P >= 1 and cap % 1 == 0 and cost % 1 == 0 and T % 1 == 0 and P % 1 == 0 and F < EXACT then
    local key = KEYS[1]
    -- pcall: a key of another type is an error naming the key, not Redis's bare WRONGTYPE
    local v = redis.pcall('GET', key)
    local L = F -- level now
    local clean = true
    if type(v) == 'table' then
      clean = false -- the general path names the key
    elseif v then
      local at, r
      --#include state.lua
      if not at then
        return redis.error_reply('ERR token bucket: key ' .. key .. ' does not hold a token bucket state')
      end
      local q = at - now
      if q >= 0 then
        local D = q * T + r
        if D <= F then L = F - D else clean = false end
      end
    end
    if clean then
      if cost > cap or C > L or C == 0 then
        local whole = math.floor(L / P)
        if whole >= WIDE then whole = string.format('%d', whole) end
        if C == 0 then return {1, whole, now} end
        if cost > cap then return {0, whole, -1} end
        local w = C - L
        if T ~= 1 then w = math.ceil(w / T) end
        return {0, whole, math.ceil(w / 1000)}
      end
      L = L - C
      local whole = math.floor(L / P)
      if whole >= WIDE then whole = string.format('%d', whole) end
      local D = F - L
      -- The key expires through the millisecond the bucket is full again in:
      -- PXAT is the full-at µs without its last three digits.
      local q = D
      if T ~= 1 then q = math.floor(D / T) end
      local at = now + q
      local r = D - q * T
      if r == 0 then
        local value = string.format('%d', at)
        redis.call('SET', key, value, 'PXAT', string.sub(value, 1, -4))
        return {1, whole, now}
      end
      local value = string.format('%d+%d/%d', at, r, T)
      redis.call('SET', key, value, 'PXAT', string.sub(value, 1, string.find(value, '+', 1, true) - 4))
      return {1, whole, now}
    end
    -- A value to repair: the general path below does it.
  end
elseif (argc == 3 * n or argc == 4 * n) and n > 1 and n <= 1000 then
  -- Several: decide every one first (whole tokens left in `out`, the deficit
  -- to store in place of the value read), then write.
  -- GET each rather than MGET: MGET reads a key of another type as nil, a full bucket
  local values = {}
  local out = {1}
  local ok = true
  local stride = argc / n
  for i = 1, n do
    local cap, T, P, cost
    if stride == 3 then
      local b = 3 * i - 2
      cap, T, P, cost = ARGV[b] + 0, 1, ARGV[b + 1] + 0, ARGV[b + 2] + 0
    else
      local b = 4 * i - 3
      cap, T, P, cost = ARGV[b] + 0, ARGV[b + 1] + 0, ARGV[b + 2] + 0, ARGV[b + 3] + 0
    end
    local F = cap * P
    if not (cap >= 0 and cost >= 0 and T >= 1 and P >= 1 and cap % 1 == 0 and cost % 1 == 0 and T % 1 == 0 and P % 1 == 0
        and F < EXACT and cost <= cap) then
      ok = false
      break
    end
    local L = F
    local v = redis.pcall('GET', KEYS[i])
    values[i] = false
    if type(v) == 'table' then
      ok = false -- another type: the general path names the key
      break
    elseif v then
      local at, r
      --#include state.lua
      if not at then ok = false break end -- the general path names the key
      local q = at - now
      if q >= 0 then
        local D = q * T + r
        if D <= F then L = F - D else ok = false break end
      end
    end
    local C = cost * P
    if C > L then ok = false break end
    L = L - C
    local whole = math.floor(L / P)
    if whole >= WIDE then whole = string.format('%d', whole) end
    out[1 + i] = whole
    if C == 0 then values[i] = false else values[i] = F - L end
  end
  if ok then
    for i = 1, n do
      local D = values[i]
      if D then
        local key = KEYS[i]
        local T = 1
        if stride == 4 then T = ARGV[4 * i - 2] + 0 end
        local q = D
        if T ~= 1 then q = math.floor(D / T) end
        local r = D - q * T
        if r == 0 then
          local value = string.format('%d', now + q)
          redis.call('SET', key, value, 'PXAT', string.sub(value, 1, -4))
        else
          local value = string.format('%d+%d/%d', now + q, r, T)
          redis.call('SET', key, value, 'PXAT', string.sub(value, 1, string.find(value, '+', 1, true) - 4))
        end
      end
    end
    out[2 + n] = now
    return out
  end
end

-- Everything else: several requests, measured ones, a check, a huge
-- bucket, a stored value to repair, or bad arguments.
-- `shift` is where request 1's arguments start, less one: 1 after a mode
-- argument, 0 for the common case's layouts (`three`: capacity, period, cost
-- per request).
local three = n > 0 and argc == 3 * n
local shift = 1
local check = false
local enforced = n
if three or (argc == 4 * n and n > 0) then
  shift = 0
else
  check = ARGV[1] == 'check'
  if not check then enforced = tonumber(ARGV[1]) end
  if not (enforced and enforced >= 0 and enforced <= n and enforced % 1 == 0) or argc < 4 * n + 1 then
    return redis.error_reply('ERR token bucket: expected a mode and 4 arguments per key, got ' .. argc .. ' arguments for ' .. n .. ' keys')
  end
end

-- GET each key (MGET would read a key of another type as nil, a full bucket): another type is an
-- error naming the key, before anything is written.
local values = {}
for i = 1, n do
  local v = redis.pcall('GET', KEYS[i])
  if type(v) == 'table' then
    return redis.error_reply('ERR token bucket: key ' .. KEYS[i] .. ' does not hold a token bucket state (' .. tostring(v.err) .. ')')
  end
  values[i] = v
end

-- Per key, at the index j of the first request naming it, s[k+1..k+14] with k = 14(j-1):
--   1 level (level units; huge: whole µs of refill time)   2 huge: its 1/T µs part, else false
--   3 whole tokens now        4 tokens asked so far         5 true: the stored value needs rewriting
--   6 X after the call        7, 8, 9, 10 level, 1/T part, whole tokens and tokens asked once the
--   enforced requests are done   11 whole tokens after the latest request   12 T
--   13 exact: capacity * P; huge: full refill, whole µs   14 huge: its 1/T µs part
local floordiv -- for huge buckets only; defined on first use
local first = {}
local s = {}
local ws = {}
local out = {0}
local tail = 4 * n + 1 + shift
local shortE, shortM = false, false

for i = 1, n do
  local key = KEYS[i]
  local b = 4 * i - 3 + shift
  local cap, T, P, cost
  if three then
    b = 3 * i - 2
    cap, T, P, cost = tonumber(ARGV[b]), 1, tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
  else
    cap, T, P, cost = tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
  end
  if not (cap and T and P and cost and cap >= 0 and T >= 1 and P >= 1 and cost >= 0
      and cap % 1 == 0 and T % 1 == 0 and P % 1 == 0 and cost % 1 == 0) then
    return redis.error_reply('ERR token bucket request ' .. i .. ': capacity, tokens, period and cost must be whole numbers'
      .. ' (>= 0, >= 1, >= 1, >= 0), got ' .. tostring(cap) .. ', ' .. tostring(T) .. ', ' .. tostring(P) .. ', ' .. tostring(cost))
  end
  local F = cap * P
  local huge = not (F < EXACT)
  local qF, rF, qC, rC
  if huge then
    qF, rF, qC, rC = tonumber(ARGV[tail]), tonumber(ARGV[tail + 1]), tonumber(ARGV[tail + 2]), tonumber(ARGV[tail + 3])
    tail = tail + 4
    if not (qF and rF and qC and rC and qF >= 0 and qC >= 0 and rF >= 0 and rC >= 0 and rF < T and rC < T
        and qF % 1 == 0 and rF % 1 == 0 and qC % 1 == 0 and rC % 1 == 0) then
      return redis.error_reply('ERR token bucket request ' .. i .. ': capacity * period reaches 2^53, so its capacity and cost must follow as times')
    end
  end

  if i == enforced + 1 then
    -- The measured requests start: keep each key as the enforced ones left it.
    for i2 = 1, enforced do
      if first[KEYS[i2]] == i2 then
        local k2 = 14 * i2 - 14
        s[k2 + 7], s[k2 + 8], s[k2 + 9], s[k2 + 10] = s[k2 + 1], s[k2 + 2], s[k2 + 11], s[k2 + 4]
      end
    end
  end

  local j = first[key]
  local k
  if j then
    k = 14 * j - 14
  else
    first[key] = i
    k = 14 * i - 14
    -- The stored state as a deficit of q µs + r/T µs from now.
    local v = values[i]
    local q, r = -1, 0
    if v then
      local at
      --#include state.lua
      if not at then
        return redis.error_reply('ERR token bucket: key ' .. key .. ' does not hold a token bucket state')
      end
      q = at - now
    end
    if q < 0 then q, r = 0, 0 end
    -- level = full - deficit; a deficit beyond a full refill reads as empty
    local lv, lr, whole
    local repair = false
    if huge then
      if q < qF or (q == qF and r <= rF) then
        lv, lr = qF - q, rF - r
        if lr < 0 then lv, lr = lv - 1, lr + T end
      else
        lv, lr, repair = 0, 0, true
      end
      if not floordiv then
        --#include floordiv.lua
      end
      whole = floordiv(lv, T, lr, P)
      if whole > cap then whole = cap end
      s[k + 13], s[k + 14] = qF, rF
    else
      local D = q * T + r
      if D <= F then lv = F - D else lv, repair = 0, true end
      lr = false
      whole = math.floor(lv / P)
      s[k + 13] = F
    end
    if whole >= WIDE then whole = string.format('%d', whole) end
    s[k + 1], s[k + 2], s[k + 3], s[k + 4], s[k + 5], s[k + 11], s[k + 12] = lv, lr, whole, 0, repair, whole, T
  end

  local asked = s[k + 4] + cost
  s[k + 4] = asked
  local w = -2
  local rem = 0
  if asked > cap then
    w = -1
  elseif huge then
    local lv, lr = s[k + 1] - qC, s[k + 2] - rC
    if lr < 0 then lv, lr = lv - 1, lr + T end
    s[k + 1], s[k + 2] = lv, lr
    if lv < 0 then
      local wq, wr = -lv, -lr
      if wr < 0 then wq, wr = wq - 1, wr + T end
      if wr > 0 then wq = wq + 1 end
      w = math.ceil(wq / 1000)
    else
      rem = floordiv(lv, T, lr, P)
      if rem > cap then rem = cap end
    end
  else
    local lv = s[k + 1] - cost * P
    s[k + 1] = lv
    if lv < 0 then
      w = -lv
      if T ~= 1 then w = math.ceil(w / T) end
      w = math.ceil(w / 1000)
    else
      rem = math.floor(lv / P)
    end
  end
  if w == -2 then
    s[k + 11] = rem
  elseif i <= enforced then
    shortE = true
  else
    shortM = true
  end
  if rem >= WIDE then rem = string.format('%d', rem) end
  out[1 + i] = rem
  ws[i] = w
end

if check or shortE then
  if not check then
    -- Nothing is taken; a value that was not a bucket state is rewritten as an empty bucket.
    for j = 1, n do
      local k = 14 * j - 14
      if first[KEYS[j]] == j and s[k + 5] then
        local key, T = KEYS[j], s[k + 12]
        local q, r
        if s[k + 2] then q, r = s[k + 13], s[k + 14] else q = math.floor(s[k + 13] / T); r = s[k + 13] - q * T end
        if q == 0 and r == 0 then
          redis.call('DEL', key)
        elseif r == 0 then
          local value = string.format('%d', now + q)
          redis.call('SET', key, value, 'PXAT', string.sub(value, 1, -4))
        else
          local value = string.format('%d+%d/%d', now + q, r, T)
          redis.call('SET', key, value, 'PXAT', string.sub(value, 1, string.find(value, '+', 1, true) - 4))
        end
      end
    end
  end
  out[1] = (check and not shortE) and 1 or 0
  for i = 1, n do
    out[1 + i] = s[14 * first[KEYS[i]] - 11]
    if i > enforced then out[1 + n + i] = -2 else out[1 + n + i] = ws[i] end
  end
  return out
end

-- Admitted: write each key once, as every request left it, or as the enforced
-- ones left it when a measured one was short.
for j = 1, n do
  if first[KEYS[j]] == j then
    local k = 14 * j - 14
    local lv, lr, asked = s[k + 1], s[k + 2], s[k + 4]
    if shortM then
      if j > enforced then
        lv, lr, asked = 0, (lr and 0), 0
        if not s[k + 5] then lv = nil end
      else
        lv, lr, asked = s[k + 7], s[k + 8], s[k + 10]
      end
    end
    local x = 0
    if lv and (asked > 0 or s[k + 5]) then
      local key, T = KEYS[j], s[k + 12]
      local q, r
      if lr then
        q, r = s[k + 13] - lv, s[k + 14] - lr
        if r < 0 then q, r = q - 1, r + T end
      else
        local D = s[k + 13] - lv
        q = math.floor(D / T)
        r = D - q * T
      end
      if q == 0 and r == 0 then
        if s[k + 5] then redis.call('DEL', key) end
      elseif r == 0 then
        x = now + q
        local value = string.format('%d', x)
        redis.call('SET', key, value, 'PXAT', string.sub(value, 1, -4))
      else
        x = string.format('%d+%d/%d', now + q, r, T)
        redis.call('SET', key, x, 'PXAT', string.sub(x, 1, string.find(x, '+', 1, true) - 4))
      end
    end
    s[k + 6] = x
  end
end

out[1] = shortM and 2 or 1
-- with a mode argument, X per request, then t
local m = n * shift
for i = 1, m do out[1 + n + i] = s[14 * first[KEYS[i]] - 8] end
out[2 + n + m] = now
if shortM then
  for i = 1, n do
    if i > enforced then
      -- not taken: what its bucket holds after the enforced requests
      local k = 14 * first[KEYS[i]] - 14
      if first[KEYS[i]] > enforced then out[1 + i] = s[k + 3] else out[1 + i] = s[k + 9] end
      if type(out[1 + i]) == 'number' and out[1 + i] >= WIDE then out[1 + i] = string.format('%d', out[1 + i]) end
      out[1 + n + i] = 0
    end
    out[2 + n + m + i] = ws[i]
  end
end
return out
