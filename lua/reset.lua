--[[
Resets a bucket: it is full again, and nothing taken from it before is
given back afterwards.

A refund (refund.lua) may still be on its way for a take made before the
reset. So the reset leaves a mark: the Redis TIME of the reset, which
refund.lua reads to give nothing back for takes made at or before it. The
mark lives as long as such a take could have anything left, that is, until
the bucket would have been full again: the key's own expiry.

KEYS[1]   the bucket's key
KEYS[2]   its reset mark
Returns 1 when the bucket had been used (its key existed), else 0. A key
of another type, or a string that is not a bucket state, is an error naming
the key, and nothing is deleted.
--]]

local key, mark = KEYS[1], KEYS[2]
local v = redis.pcall('GET', key)
if type(v) == 'table' or (v and not tonumber(v) and not string.match(v, '^%d+%+%d+/%d+$')) then
  return redis.error_reply('ERR token bucket: key ' .. key .. ' does not hold a token bucket state')
end
if not v then return 0 end
local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]
local ttl = redis.call('PTTL', key) -- ms; -1: no expiry (not written by acquire.lua), -2: gone
local kept = redis.call('PTTL', mark)
if ttl > 0 or kept > 0 then
  if kept > ttl then ttl = kept end
  redis.call('SET', mark, string.format('%d', now), 'PX', ttl + 1)
end
redis.call('DEL', key)
return 1
