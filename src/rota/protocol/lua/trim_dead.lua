-- include: _base
-- Forget dead jobs older than max_age_ms, and the oldest beyond max_count.
-- KEYS[1] namespace prefix
-- ARGV now_ms, max_age_ms, max_count, limit
-- Returns the number of jobs forgotten.
local now, max_age = tonumber(ARGV[1]), tonumber(ARGV[2])
local max_count, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local ids = redis.call('ZRANGEBYSCORE', K_DEAD, '-inf', now - max_age, 'LIMIT', 0, limit)
local extra = redis.call('ZCARD', K_DEAD) - #ids - max_count
if extra > 0 then
  local more = redis.call('ZRANGE', K_DEAD, #ids, #ids + math.min(extra, limit) - 1)
  for _, id in ipairs(more) do ids[#ids + 1] = id end
end
for _, id in ipairs(ids) do
  redis.call('ZREM', K_DEAD, id)
  if sane_id(id) then
    redis.call('DEL', key_job(id), key_joblog(id), key_children(id))
  end
end
return #ids
