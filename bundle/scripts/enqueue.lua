local n = redis.call('INCR', KEYS[3])
local id = 'j' .. string.format('%016d', n)
local jk = ARGV[1] .. id
local delay = tonumber(ARGV[3])
if delay > 0 then
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  redis.call('HSET', jk, 'payload', ARGV[2], 'attempts', 0, 'state', 'delayed')
  redis.call('ZADD', KEYS[2], now + delay, id)
else
  redis.call('HSET', jk, 'payload', ARGV[2], 'attempts', 0, 'state', 'pending')
  redis.call('ZADD', KEYS[1], 0, id)
end
return id
