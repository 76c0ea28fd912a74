--[[
Gives back tokens taken by acquire.lua.

Taking c tokens appends c tokens' refill time to the bucket's deficit, and
refill then consumes the deficit from the front. A store may give back only
what of its takes is still ahead of now. The caller bounds that with X: for
each take it draws from, a time E by which that take has refilled however
the bucket is shared (whatever anyone took or gave back since), and the
refill time S it draws from that take; a take made before the bucket's
latest reset gives nothing back (the reset gave it back). What is given back is at most the
sum over them of min(S, E - now), at most the tokens asked, and at most the
deficit: the bucket ends no fuller than it would be had those tokens never
been taken. A deficit beyond a full refill (a capacity lowered since, or a
value that is not a time) is what is given back from, and is capped at a
full refill afterwards: never above capacity, never fuller than had the
tokens not been taken.

Same units as acquire.lua: a token is P level units, a µs of refill T units.

KEYS[2i-1]               the bucket's key of request i
KEYS[2i]                 its reset mark (reset.lua): when it was last reset, µs, while takes
                         from before then could still be given back
ARGV[5i-4]   capacity    tokens, integer >= 0
ARGV[5i-3]   T           tokens per period, reduced, integer >= 1
ARGV[5i-2]   P           period in µs, reduced, integer >= 1
ARGV[5i-1]   tokens      tokens to give back, integer >= 0
ARGV[5i]     X           `E;S;t,E;S;t,...` per take drawn from (E: `A` or `A+num/den` µs; S: the
                         same, a duration; t: the take's Redis TIME, µs), or 0: nothing to give back
ARGV[5n+1..]             for each request with capacity * P >= 2^53, in order: capacity and
                         tokens as times: qF rF qK rK (µs, 1/T µs)

Requests are applied in order. Returns {rem_1..n, G_1..n}: the whole tokens
in request i's bucket after it, and the refill time it gave back (`Q` or
`Q+num/den` µs).
--]]

local EXACT = 9007199254740992 -- 2^53
local n = #KEYS / 2
if n % 1 ~= 0 or #ARGV < 5 * n then
  return redis.error_reply('ERR token bucket refund: expected 5 arguments per key, got ' .. #ARGV .. ' for ' .. n .. ' keys')
end
local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]
local out = {}
local tail = 5 * n + 1
local floordiv -- for huge buckets only; defined on first use

-- `A` or `A+num/den` µs as whole µs and 1/T µs, rounded down; nil when it is neither.
local function time(text, T)
  if not text then return nil end
  local at, r = tonumber(text), 0
  if not at then
    local a, num, den = string.match(text, '^(%d+)%+(%d+)/(%d+)$')
    if not a then return nil end
    at, num, den = tonumber(a), tonumber(num), tonumber(den)
    if den == T then r = num else r = math.floor(num * T / den) end
    if not (r == r and r < 1 / 0) then return nil end
    if r >= T then at, r = at + math.floor(r / T), r % T end
  end
  if not (at >= 0 and at % 1 == 0) then return nil end
  return at, r
end

-- Every key read before anything is written: a key of another type, or a string that is not a
-- bucket state (lua/state.lua), is an error naming the key, and no refund of the call is applied.
-- Per request, the state as when it is full again: whole µs and units of 1/T µs (nil: no key).
local ats, rs = {}, {}
for i = 1, n do
  local key = KEYS[2 * i - 1]
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then
    return redis.error_reply('ERR token bucket: key ' .. key .. ' does not hold a token bucket state')
  end
  if v then
    local T = tonumber(ARGV[5 * i - 3]) or 1
    local at, r
    --#include state.lua
    if not at then
      return redis.error_reply('ERR token bucket: key ' .. key .. ' does not hold a token bucket state')
    end
    ats[i], rs[i] = at, r
  end
end

for i = 1, n do
  local key = KEYS[2 * i - 1]
  -- a mark that is not a time in plain digits (another type, a foreign string): as if reset now,
  -- nothing given back
  local mark = redis.pcall('GET', KEYS[2 * i])
  local reset = mark and (type(mark) == 'string' and string.find(mark, '^[1-9]%d*$') and tonumber(mark) or now)
  local b = 5 * i - 4
  local cap, T, P, tokens = tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
  if not (cap and T and P and tokens and cap >= 0 and T >= 1 and P >= 1 and tokens >= 0
      and cap % 1 == 0 and T % 1 == 0 and P % 1 == 0 and tokens % 1 == 0) then
    return redis.error_reply('ERR token bucket refund ' .. i .. ': capacity, tokens, period and tokens to give back must be whole numbers'
      .. ' (>= 0, >= 1, >= 1, >= 0)')
  end
  local F = cap * P
  local huge = not (F < EXACT)
  local qF, rF, qK, rK
  if huge then
    qF, rF, qK, rK = tonumber(ARGV[tail]), tonumber(ARGV[tail + 1]), tonumber(ARGV[tail + 2]), tonumber(ARGV[tail + 3])
    tail = tail + 4
    if not (qF and rF and qK and rK and qF >= 0 and qK >= 0 and rF >= 0 and rK >= 0 and rF < T and rK < T
        and qF % 1 == 0 and rF % 1 == 0 and qK % 1 == 0 and rK % 1 == 0) then
      return redis.error_reply('ERR token bucket refund ' .. i .. ': capacity * period reaches 2^53, so its capacity and tokens must follow as times')
    end
  end

  -- The bucket's deficit: q µs + r/T µs from now.
  local q, r = -1, 0
  if ats[i] then q, r = ats[i] - now, rs[i] end
  if q < 0 then q, r = 0, 0 end

  -- The bound: xq µs + xr/T µs, the sum over X's takes of min(S, E - now); parts of a unit rounded
  -- down. A take at or before the latest reset (its mark R, µs) has nothing left to give back.
  local xq, xr = 0, 0
  local x = ARGV[b + 4]
  if x ~= '0' then
    local from = 1
    repeat
      local e, s, t
      e, s, t, from = string.match(x, '^([^,;]+);([^,;]+);(%d+),?()', from)
      local eq, er = time(e, T)
      local sq, sr
      if s then sq, sr = time(s, T) end
      if not (eq and sq) then
        return redis.error_reply('ERR token bucket refund ' .. i .. ': each take must be E;S;t (E, S: A or A+num/den µs, t: µs)')
      end
      -- E - now, while it is ahead, and at most S
      eq = eq - now
      if eq >= 0 and (eq > 0 or er > 0) and not (reset and tonumber(t) <= reset) then
        if eq > sq or (eq == sq and er > sr) then eq, er = sq, sr end
        -- xr + er can pass 2^53 when T does 2^52: carry without forming it
        if xr >= T - er then xq, xr = xq + eq + 1, xr - (T - er) else xq, xr = xq + eq, xr + er end
      end
    until from > #x
  end

  local rem
  local dq, dr -- the deficit after the refund
  local gq, gr -- the refill time given back
  local changed
  if huge then
    -- a deficit beyond a full refill is given back from, then capped
    changed = not (q < qF or (q == qF and r <= rF))
    -- given = min(bound, tokens' time, deficit)
    gq, gr = xq, xr
    if gq > qK or (gq == qK and gr > rK) then gq, gr = qK, rK end
    if gq > q or (gq == q and gr > r) then gq, gr = q, r end
    changed = changed or gq > 0 or gr > 0
    dq, dr = q - gq, r - gr
    if dr < 0 then dq, dr = dq - 1, dr + T end
    if dq > qF or (dq == qF and dr > rF) then dq, dr = qF, rF end
    local lq, lr = qF - dq, rF - dr
    if lr < 0 then lq, lr = lq - 1, lr + T end
    if not floordiv then
      --#include floordiv.lua
    end
    rem = floordiv(lq, T, lr, P)
    if rem > cap then rem = cap end
  else
    -- a deficit beyond a full refill is given back from, then capped
    local D = q * T + r
    changed = not (D <= F)
    local O = tokens * P
    local X = xq * T + xr
    if X < O then O = X end
    if O > D then O = D end
    changed = changed or O > 0
    D = D - O
    if D > F then D = F end
    rem = math.floor((F - D) / P)
    dq = math.floor(D / T)
    dr = D - dq * T
    gq = math.floor(O / T)
    gr = O - gq * T
  end
  if gr == 0 then
    out[n + i] = gq
  else
    out[n + i] = string.format('%d+%d/%d', gq, gr, T)
  end

  if not changed then
    -- nothing given back: the key stays as it is
  elseif dq == 0 and dr == 0 then
    redis.call('DEL', key)
  elseif dr == 0 then
    local value = string.format('%d', now + dq)
    redis.call('SET', key, value, 'PXAT', string.sub(value, 1, -4)) -- as in acquire.lua
  else
    local value = string.format('%d+%d/%d', now + dq, dr, T)
    redis.call('SET', key, value, 'PXAT', string.sub(value, 1, string.find(value, '+', 1, true) - 4))
  end
  if rem >= 9007199254740928 then rem = string.format('%d', rem) end -- ioredis misreads integers this close to 2^53
  out[i] = rem
end
return out
