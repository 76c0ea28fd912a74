--[[
Gives back tokens taken by acquire.lua: used only when one operation's
buckets live in several Redis Cluster hash slots and a later slot denied.

KEYS[i]                 the bucket's Redis key of request i
ARGV[4i-3]  capacity    tokens (unused, kept for the same layout as acquire)
ARGV[4i-2]  tokens      tokens refilled per period, integer >= 1
ARGV[4i-1]  period      microseconds, integer >= 1
ARGV[4i]    cost        tokens to give back, non-negative integer

Returns the number of keys changed.
--]]

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2]) -- microseconds
local changed = 0

for i = 1, #KEYS do
  local key = KEYS[i]
  local tokens = tonumber(ARGV[4 * i - 2])
  local period = tonumber(ARGV[4 * i - 1])
  local cost = tonumber(ARGV[4 * i])
  if tokens == nil or period == nil or cost == nil or tokens < 1 or period < 1 or cost < 0 then
    return redis.error_reply('ERR token bucket refund ' .. i .. ': bad arguments')
  end
  local stored = tonumber(redis.call('GET', key) or '')
  if stored and cost > 0 then
    local at = stored - cost * (period / tokens)
    if at <= now then
      redis.call('DEL', key)
    else
      -- as in acquire.lua: %.17g keeps every digit, and a whole number stays one
      redis.call('SET', key, string.format('%.17g', at), 'PXAT', math.ceil(at / 1000))
    end
    changed = changed + 1
  end
end
return changed
