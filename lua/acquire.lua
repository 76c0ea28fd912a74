--[[
Token bucket acquire, all or nothing.

A bucket's whole state is one number: the time (Redis TIME, microseconds)
at which it will be full again. A missing key is a full bucket. With
interval = period / tokens (microseconds per token):

  tokens now    = capacity - (fullAt - now) / interval
  take cost     : fullAt' = max(fullAt, now) + cost * interval
  allowed when  : fullAt' - now <= capacity * interval

The key expires at fullAt', when the bucket would be full again.

KEYS[i]                 the bucket's Redis key of request i
ARGV[4i-3]  capacity    tokens, non-negative integer
ARGV[4i-2]  tokens      tokens refilled per period, integer >= 1
ARGV[4i-1]  period      microseconds, integer >= 1
ARGV[4i]    cost        tokens to take, non-negative integer
ARGV[4n+1]  'check'     optional: decide, but write nothing

Returns {1, remaining_1, ..., remaining_n} when every request took its
tokens (whole tokens left in its bucket), else {0, wait_1, ..., wait_n}
where nothing was taken and wait_i is -2 when request i was not short,
-1 when it never can be (the call asks more of its bucket than the
capacity), else the milliseconds until its bucket holds enough for this
request and the ones before it in the call.
--]]

local MAX_SAFE = 9007199254740991
-- Refill time below half a microsecond is float noise, not tokens; at rates
-- faster than 2 tokens per microsecond, below a thousandth of a token.
local SLACK_US = 0.5

local tonumber, floor, ceil, format = tonumber, math.floor, math.ceil, string.format

local n = #KEYS
local argc = #ARGV
local write = true
if argc == 4 * n + 1 and ARGV[argc] == 'check' then
  write = false
elseif argc ~= 4 * n then
  return redis.error_reply('ERR token bucket: expected 4 arguments per key, got ' .. argc .. ' for ' .. n .. ' keys')
end

-- Only reached when a request is malformed: names the first bad argument.
local function bad_request(i)
  local names = {'capacity', 'tokens per period', 'period', 'cost'}
  local mins = {0, 1, 1, 0}
  for j = 1, 4 do
    local value = ARGV[4 * i - 4 + j]
    local x = tonumber(value)
    if not (x and x >= mins[j] and x <= MAX_SAFE and x % 1 == 0) then
      return redis.error_reply('ERR token bucket request ' .. i .. ': ' .. names[j]
        .. ' must be an integer >= ' .. mins[j] .. ', got ' .. tostring(value))
    end
  end
end

local time = redis.call('TIME')
local now = time[1] * 1000000 + time[2] -- microseconds
-- One request (the common case) needs no tables beyond the reply.
local single = n == 1
local stored -- the value of KEYS[1], or of every key (false where missing)
if single then
  stored = redis.call('GET', KEYS[1])
else
  stored = redis.call('MGET', unpack(KEYS))
end

local out = {1}
local short = nil -- i -> true when request i is short, once one is
local state = not single and {} or nil -- key -> fullAt so far in this call, counting every request before
local asked = not single and {} or nil -- key -> tokens asked of the bucket so far in this call

for i = 1, n do
  local key = KEYS[i]
  local b = 4 * i
  local capacity, tokens, period, cost = tonumber(ARGV[b - 3]), tonumber(ARGV[b - 2]), tonumber(ARGV[b - 1]), tonumber(ARGV[b])
  -- nil, NaN, infinities and fractions all fail one of these
  if not (capacity and tokens and period and cost
      and capacity >= 0 and tokens >= 1 and period >= 1 and cost >= 0
      and capacity <= MAX_SAFE and tokens <= MAX_SAFE and period <= MAX_SAFE and cost <= MAX_SAFE
      and capacity % 1 == 0 and tokens % 1 == 0 and period % 1 == 0 and cost % 1 == 0) then
    return bad_request(i)
  end

  local current = state and state[key]
  if current == nil then
    local value = stored
    if not single then value = stored[i] end
    if value then
      current = tonumber(value)
      if current == nil then
        return redis.error_reply('ERR token bucket: key ' .. key .. ' does not hold a bucket')
      end
      if current < now then current = now end
    else
      current = now
    end
  end
  local interval = period / tokens -- microseconds per token
  local total = cost
  if asked then
    total = (asked[key] or 0) + cost
    asked[key] = total
  end
  local need = cost * interval
  local after = current + need
  if after - current < need then
    -- Microsecond times near 2^51 keep quarter-microsecond steps: a cost
    -- below that would round away and take nothing. Round up instead.
    local _, e = math.frexp(current)
    after = after + 2 ^ (e - 53)
  end
  if single then state = after else state[key] = after end

  local deficit = after - now
  local limit = capacity * interval
  local slack = SLACK_US
  if interval < 1000 * SLACK_US then slack = interval / 1000 end
  if total > capacity then
    out[i + 1] = -1
    short = short or {}
    short[i] = true
  elseif deficit <= limit + slack then
    out[i + 1] = floor((limit - deficit + slack) / interval)
  else
    out[i + 1] = ceil((deficit - limit - slack) / 1000) -- when the slack above admits it
    short = short or {}
    short[i] = true
  end
end

if short then
  out[1] = 0
  for i = 1, n do
    if not short[i] then out[i + 1] = -2 end
  end
  return out
end

-- %.17g keeps every digit (tostring keeps 14); a whole number stays one,
-- which Redis stores in its compact integer encoding.
local function save(key, at)
  if at > now then redis.call('SET', key, format('%.17g', at), 'PXAT', ceil(at / 1000)) end
end

if write then
  if single then
    save(KEYS[1], state)
  else
    for key, at in pairs(state) do save(key, at) end
  end
end
return out
