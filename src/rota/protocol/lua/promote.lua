-- include: _base _counts _wake _graph
-- Move due jobs from the scheduled and retry sets into their queues.
-- KEYS[1] namespace prefix
-- ARGV now_ms, limit (per set)
-- Returns {moved, next_due_ms, buried}; next_due_ms is -1 when both sets are empty, an
-- integer without exponent otherwise. A job whose due time is past MAX_MS (+inf, 1e300, a
-- time in µs: no time rota waits for) is made dead as a bad payload; buried: their ids.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local moved = 0
local woken = {}
local buried = {}
for _, z in ipairs({K_SCHEDULED, K_RETRY}) do
  local far = redis.call('ZRANGEBYSCORE', z, PAST_MAX, '+inf', 'WITHSCORES', 'LIMIT', 0, limit)
  for i = 1, #far, 2 do
    local id = far[i]
    redis.call('ZREM', z, id)
    local ok, name = pcall(redis.call, 'HGET', key_job(id), 'name')
    buried[#buried + 1] = bury(id, ok and name, 'bad_payload',
      'due time ' .. string.sub(far[i + 1], 1, 32) .. ' ms is past the year 9999', now, nil)
  end
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
    local due = tonumber(first[2]) or 0
    if next_due < 0 or due < next_due then
      next_due = due
    end
  end
end
flush_counts(now)
return {moved, next_due < 0 and '-1' or ms_text(next_due), buried}
