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

KEYS                     every request's key, operation after operation
ARGV[1]      m           distinct bucket terms in the call
ARGV[2..3m+1]            per terms j: capacity (tokens), T (tokens per period, reduced),
                         P (µs per period, reduced)
then per request, two:   j, cost (tokens): j > 0 starts an operation, -j continues
                         the one before (each argument costs Redis a string: terms are
                         sent once, however many operations share them)

Reply: {t, then per operation one of}
  1, rem_1..k            every request taken (rem: whole tokens after)
  0, rem_1..k, w_1..k    nothing taken (rem: whole tokens now; w: -2 not short,
                         -1 never (more than the capacity), else ms until it would fit)
  3                      not decided here, nothing written: run it alone
t is Redis TIME in µs. Whole tokens within 64 of 2^53 are strings (see lua/acquire.lua).
--]]

local EXACT = 9007199254740992 -- 2^53
local WIDE = 9007199254740928
local m = tonumber(ARGV[1])
local clock = redis.call('TIME')
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
local out = {now}
local o = 1 -- last slot of out written
-- per request of the operation being decided: the deficit to store (level units), T, whole tokens after
local deficits, rates, afters = {}, {}, {}

local a = 3 * m + 2 -- next ARGV
local argc = #ARGV
local key = 1 -- KEYS index of the next request
while a <= argc do
  -- the operation's requests: from `a` while the term index after it is negative
  local k = 1
  while a + 2 * k <= argc and ARGV[a + 2 * k] + 0 < 0 do k = k + 1 end
  local status = 1
  local head = o + 1
  out[head] = 1
  for i = 1, k do
    local j, cost = ARGV[a] + 0, ARGV[a + 1] + 0
    a = a + 2
    if j < 0 then j = -j end
    local cap = caps[j]
    if status ~= 3 and not (cap and cost >= 0 and cost % 1 == 0) then status = 3 end
    if status ~= 3 then
      local T, P, F = Ts[j], Ps[j], Fs[j]
      local L = F -- level now
      -- pcall: a key of another type is that operation's to fail, alone
      local v = redis.pcall('GET', KEYS[key + i - 1])
      if type(v) == 'table' then
        status = 3
      elseif v then
        local at = tonumber(v)
        local r = 0
        if not at then
          local A, num, den = string.match(v, '^(%d+)%+(%d+)/(%d+)$')
          if A then
            at, num, den = tonumber(A), tonumber(num), tonumber(den)
            if den == T then r = num else r = math.ceil(num * T / den) end
            if r >= T then at = at + math.ceil(r / T); r = 0 end
          else
            status = 3
          end
        elseif at % 1 ~= 0 then
          status = 3
        end
        if status ~= 3 then
          local q = at - now
          if q >= 0 then
            local D = q * T + r
            if D <= F then L = F - D else status = 3 end
          elseif not (q < 0) then
            status = 3 -- NaN
          end
        end
      end
      if status ~= 3 then
        local C = cost * P
        local w = -2
        if cost > cap then
          w = -1
        elseif C > L then
          w = C - L
          if T ~= 1 then w = math.ceil(w / T) end
          w = math.ceil(w / 1000)
        end
        local whole = math.floor(L / P)
        if whole >= WIDE then whole = string.format('%d', whole) end
        out[head + i] = whole -- now: what a denial reports
        out[head + k + i] = w
        if w ~= -2 then
          status = 0
        elseif C == 0 then
          deficits[i] = false
          afters[i] = whole
        else
          L = L - C
          whole = math.floor(L / P)
          if whole >= WIDE then whole = string.format('%d', whole) end
          deficits[i] = F - L
          afters[i] = whole
          rates[i] = T
        end
      end
    end
  end
  if status == 1 then
    for i = 1, k do
      out[head + i] = afters[i]
      local D = deficits[i]
      if D then
        local T = rates[i]
        -- The key expires through the millisecond the bucket is full again in (see lua/acquire.lua).
        local q = D
        if T ~= 1 then q = math.floor(D / T) end
        local r = D - q * T
        if r == 0 then
          local value = string.format('%d', now + q)
          redis.call('SET', KEYS[key + i - 1], value, 'PXAT', string.sub(value, 1, -4))
        else
          local value = string.format('%d+%d/%d', now + q, r, T)
          redis.call('SET', KEYS[key + i - 1], value, 'PXAT', string.sub(value, 1, string.find(value, '+', 1, true) - 4))
        end
      end
    end
    o = head + k
  elseif status == 0 then
    out[head] = 0
    o = head + 2 * k
  else
    out[head] = 3
    o = head
  end
  key = key + k
end
-- slots past `o` hold what an operation reported as 3 or taken left behind
for i = #out, o + 1, -1 do out[i] = nil end
return out
