local id = ARGV[2]
local jk = ARGV[1] .. id
if not redis.call('ZSCORE', KEYS[1], id) then return 'stale' end
local att = tonumber(redis.call('HGET', jk, 'attempts'))
if att ~= tonumber(ARGV[3]) then return 'stale' end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREM', KEYS[1], id)
if att >= tonumber(ARGV[5]) then
  redis.call('HSET', jk, 'state', 'dead')
  redis.call('ZADD', KEYS[3], now, id)
  return 'dead'
end
redis.call('HSET', jk, 'state', 'delayed')
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), id)
return 'delayed'
