-- Move due jobs from the scheduled and retry sets into their queues.
-- KEYS[1] namespace prefix
-- ARGV now_ms, limit (per set)
-- Returns {moved, next_due_ms}; next_due_ms is -1 when both sets are empty.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local moved = 0
local woken = {}
for _, z in ipairs({K_SCHEDULED, K_RETRY}) do
  local ids = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(ids) do
    redis.call('ZREM', z, id)
    local jk = key_job(id)
    local name = is_hash(jk) and redis.call('HGET', jk, 'name')
    if not name or name == '' then
      bury(id, name, 'bad_payload', 'scheduled job has no record or no name', now, false)
    else
      redis.call('HSET', jk, 'state', 'queued')
      redis.call('LPUSH', key_queue(name), id)
      redis.call('SADD', K_NAMES, name)
      woken[name] = true
      moved = moved + 1
    end
  end
end
for name in pairs(woken) do
  wake(name)
end
local next_due = -1
for _, z in ipairs({K_SCHEDULED, K_RETRY}) do
  local first = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
  if first[2] then
    local due = tonumber(first[2])
    if next_due < 0 or due < next_due then
      next_due = due
    end
  end
end
flush_counts(now)
return {moved, tostring(next_due)}
