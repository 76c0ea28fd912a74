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

Returns {1, remaining_1, ..., remaining_n} when every request took its
tokens, else {0, r_1, ..., r_n} where nothing was taken and r_i is -2 when
request i alone would have been admitted, -1 when it never can be (cost
above capacity), else the milliseconds until its bucket holds enough.
--]]

local MAX_SAFE = 9007199254740991
-- Refill time kept below half a microsecond is float noise, not tokens.
local SLACK_US = 0.5

local function integer_arg(name, i, value, min)
  local n = tonumber(value)
  if n == nil or n ~= n or n < min or n > MAX_SAFE or math.floor(n) ~= n then
    return nil, 'ERR token bucket request ' .. i .. ': ' .. name
      .. ' must be an integer >= ' .. min .. ', got ' .. tostring(value)
  end
  return n
end

-- Integers keep Redis's compact integer encoding; fractions keep all 17 digits.
local function format_time(us)
  if math.floor(us) == us then
    return string.format('%.0f', us)
  end
  return string.format('%.17g', us)
end

local n = #KEYS
if #ARGV ~= 4 * n then
  return redis.error_reply('ERR token bucket: expected 4 arguments per key, got '
    .. #ARGV .. ' for ' .. n .. ' keys')
end

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2]) -- microseconds

local full_at = {}   -- key -> fullAt within this call (a key may appear twice)
local changed = {}   -- keys to write, in first-seen order
local remaining = {} -- per request: tokens left, or -2 once the call is denied
local waits = {}     -- per request: -2 (not short), -1 (never) or milliseconds
local denied = false

for i = 1, n do
  local key = KEYS[i]
  local capacity, err = integer_arg('capacity', i, ARGV[4 * i - 3], 0)
  if err then return redis.error_reply(err) end
  local tokens
  tokens, err = integer_arg('tokens per period', i, ARGV[4 * i - 2], 1)
  if err then return redis.error_reply(err) end
  local period
  period, err = integer_arg('period', i, ARGV[4 * i - 1], 1)
  if err then return redis.error_reply(err) end
  local cost
  cost, err = integer_arg('cost', i, ARGV[4 * i], 0)
  if err then return redis.error_reply(err) end

  local interval = period / tokens -- microseconds per token
  local current = full_at[key]
  if current == nil then
    local stored = redis.call('GET', key)
    if stored then
      current = tonumber(stored)
      if current == nil then
        return redis.error_reply('ERR token bucket: key ' .. key .. ' does not hold a bucket')
      end
    else
      current = now
    end
  end
  if current < now then current = now end

  waits[i] = -2
  if cost > capacity then
    waits[i] = -1
    denied = true
  else
    local after = current + cost * interval
    local limit = capacity * interval
    local deficit = after - now
    if deficit <= limit + SLACK_US then
      if cost > 0 then
        if full_at[key] == nil then changed[#changed + 1] = key end
        full_at[key] = after
      end
      local left = math.floor((limit - deficit + SLACK_US) / interval)
      if left > capacity then left = capacity end
      remaining[i] = left
    else
      waits[i] = math.ceil((deficit - limit) / 1000)
      denied = true
    end
  end
end

if denied then
  return {0, unpack(waits)}
end

for _, key in ipairs(changed) do
  local at = full_at[key]
  if at > now then
    redis.call('SET', key, format_time(at), 'PXAT', math.ceil(at / 1000))
  end
end
return {1, unpack(remaining)}
