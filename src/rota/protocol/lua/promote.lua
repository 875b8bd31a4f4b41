-- Move due jobs from the scheduled and retry sets into their queues.
-- KEYS[1] namespace prefix
-- ARGV now_ms, limit (per set)
-- Returns {moved, next_due_ms}; next_due_ms is -1 when both sets are empty.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local moved = 0
local woken = {}
for _, z in ipairs({K_SCHEDULED, K_RETRY}) do
  local ids = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'LIMIT', 0, limit)
  call_chunked('ZREM', z, ids)
  for _, id in ipairs(ids) do
    local jk = key_job(id)
    -- HGET fails on a key that is not a hash: no record, as when the key is missing.
    local ok, name = pcall(redis.call, 'HGET', jk, 'name')
    if not ok or not name or name == '' then
      bury(id, ok and name, 'bad_payload', 'scheduled job has no record or no name', now, nil)
    else
      redis.call('HSET', jk, 'state', 'queued')
      redis.call('LPUSH', key_queue(name), id)
      woken[name] = true
      moved = moved + 1
    end
  end
end
local names = {}
for name in pairs(woken) do
  wake(name)
  names[#names + 1] = name
end
call_chunked('SADD', K_NAMES, names)
call_chunked('SADD', K_READY, names)
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
