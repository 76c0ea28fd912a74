--[[
Gives back tokens taken by acquire.lua.

Taking c tokens appends c tokens' refill time to the bucket's deficit, and
refill then consumes the deficit from the front. So of the tokens one take
added, only the part still ahead of now is outstanding: the time from now
to X, the key's full-at time right after that take, and at most c tokens'
time. Giving back that much leaves the bucket no fuller than it would be
had the take never happened, whatever was taken or given back since (later
takes only push the deficit further); and never above capacity.

Same units as acquire.lua: a token is P level units, a µs of refill T units.

KEYS[i]                  the bucket's key of request i
ARGV[5i-4]   capacity    tokens, integer >= 0
ARGV[5i-3]   T           tokens per period, reduced, integer >= 1
ARGV[5i-2]   P           period in µs, reduced, integer >= 1
ARGV[5i-1]   tokens      tokens to give back, integer >= 0
ARGV[5i]     X           the key's full-at time right after the take: `A` or `A+num/den` (µs)
ARGV[5n+1..]             for each request with capacity * P >= 2^53, in order: capacity and
                         tokens as times: qF rF qK rK (µs, 1/T µs)

Requests are applied in order. Returns {rem_1..n, X'_1..n}: the whole
tokens in request i's bucket after it, and X less the refill time it gave
back (now, at the earliest), so the caller never gives those back again.
--]]

local EXACT = 9007199254740992 -- 2^53
local n = #KEYS
if #ARGV < 5 * n then
  return redis.error_reply('ERR token bucket refund: expected 5 arguments per key, got ' .. #ARGV .. ' for ' .. n .. ' keys')
end
local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]
local out = {}
local tail = 5 * n + 1
local floordiv -- for huge buckets only; defined on first use

for i = 1, n do
  local key = KEYS[i]
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

  -- The bucket's deficit (q µs + r/T µs from now) and the receipt's outstanding time, the same way.
  local q, r, xq, xr
  for part = 1, 2 do
    local v
    if part == 1 then v = redis.call('GET', key) else v = ARGV[b + 4] end
    local dq, dr = -1, 0
    if v then
      local at = tonumber(v)
      if not at then
        local a, num, den = string.match(v, '^(%d+)%+(%d+)/(%d+)$')
        if not a then
          if part == 1 then return redis.error_reply('ERR token bucket: key ' .. key .. ' does not hold a token bucket state') end
          return redis.error_reply('ERR token bucket refund ' .. i .. ': the time after the take must be A or A+num/den µs')
        end
        at, num, den = tonumber(a), tonumber(num), tonumber(den)
        if den == T then dr = num else dr = math.ceil(num * T / den) end
        if dr >= T then at = at + math.ceil(dr / T); dr = 0 end
      elseif at % 1 ~= 0 then
        at = math.ceil(at)
      end
      dq = at - now
    end
    if dq < 0 then dq, dr = 0, 0 end
    if part == 1 then q, r = dq, dr else xq, xr = dq, dr end
  end
  if not (xq >= 0) then
    return redis.error_reply('ERR token bucket refund ' .. i .. ': the time after the take is not a number')
  end

  local rem
  local dq, dr -- the deficit after the refund
  local yq, yr -- the receipt's time from now, less what was given back
  local changed = false
  if huge then
    -- a deficit beyond a full refill (or NaN) reads as empty
    if not (q < qF or (q == qF and r <= rF)) then q, r, changed = qF, rF, true end
    -- given = min(receipt, tokens' time, deficit)
    local gq, gr = xq, xr
    if gq > qK or (gq == qK and gr > rK) then gq, gr = qK, rK end
    if gq > q or (gq == q and gr > r) then gq, gr = q, r end
    changed = changed or gq > 0 or gr > 0
    dq, dr = q - gq, r - gr
    if dr < 0 then dq, dr = dq - 1, dr + T end
    yq, yr = xq - gq, xr - gr
    if yr < 0 then yq, yr = yq - 1, yr + T end
    local lq, lr = qF - dq, rF - dr
    if lr < 0 then lq, lr = lq - 1, lr + T end
    if not floordiv then
      -- floor((a * b + c) / d), exactly, for whole 0 <= a < 2^52, 0 <= c < b < 2^52,
      -- 1 <= d < 2^50 and a result below 2^53 (beyond those it rounds down):
      -- a * b = p + e and p + c = s + f exactly (Dekker's product, Fast2Sum), and
      -- N - q * d is then exact near the answer.
      floordiv = function(a, b, c, d)
        local p = a * b
        if p + c < EXACT then return math.floor((p + c) / d) end
        if b >= 4503599627370496 or d >= 1125899906842624 then return math.floor((p + c) / d * (1 - 2 ^ -50)) end
        local t = 134217729 * a
        local ah = t - (t - a)
        local al = a - ah
        t = 134217729 * b
        local bh = t - (t - b)
        local bl = b - bh
        local e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
        local sum = p + c
        local f = c - (sum - p)
        local q = math.floor(sum / d)
        local qp = q * d
        t = 134217729 * q
        local qh = t - (t - q)
        local ql = q - qh
        t = 134217729 * d
        local dh = t - (t - d)
        local dl = d - dh
        local qe = ((qh * dh - qp) + qh * dl + ql * dh) + ql * dl
        local R = ((sum - qp) - qe) + (f + e)
        return q + math.floor(R / d)
      end
    end
    rem = floordiv(lq, T, lr, P)
    if rem > cap then rem = cap end
  else
    local D = q * T + r
    if not (D <= F) then D, changed = F, true end
    local X = xq * T + xr
    local O = tokens * P
    if X < O then O = X end
    if O > D then O = D end
    changed = changed or O > 0
    D = D - O
    rem = math.floor((F - D) / P)
    dq = math.floor(D / T)
    dr = D - dq * T
    X = X - O
    yq = math.floor(X / T)
    yr = X - yq * T
  end
  if yr == 0 then
    out[n + i] = now + yq
  else
    out[n + i] = string.format('%d+%d/%d', now + yq, yr, T)
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
