local id = ARGV[2]
local jk = ARGV[1] .. id
if not redis.call('ZSCORE', KEYS[1], id) then return 0 end
if tonumber(redis.call('HGET', jk, 'attempts')) ~= tonumber(ARGV[3]) then return 0 end
redis.call('ZREM', KEYS[1], id)
redis.call('DEL', jk)
return 1
