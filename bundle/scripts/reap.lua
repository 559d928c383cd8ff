local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local due = redis.call('ZRANGE', KEYS[1], '-inf', now, 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[3]))
local max = tonumber(ARGV[2])
for _, id in ipairs(due) do
  local jk = ARGV[1] .. id
  redis.call('ZREM', KEYS[1], id)
  if tonumber(redis.call('HGET', jk, 'attempts')) >= max then
    redis.call('HSET', jk, 'state', 'dead')
    redis.call('ZADD', KEYS[3], now, id)
  else
    redis.call('HSET', jk, 'state', 'pending')
    redis.call('ZADD', KEYS[2], 0, id)
  end
end
return #due
