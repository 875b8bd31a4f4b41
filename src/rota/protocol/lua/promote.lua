-- include: _base _counts _wake _graph _expiry _fair
-- Move due jobs from the scheduled and retry sets into their queues, and end the jobs
-- whose expiry has passed before they started (reason expired, see _expiry.lua): those
-- of the expiring set that are queued, scheduled or retrying, and due ones that expired.
-- KEYS[1] namespace prefix
-- ARGV now_ms, limit (per set), then optionally the names whose handler keeps no dead
--      jobs (an expired job of theirs is deleted, not kept dead)
-- Returns {moved, next_due_ms, buried}; next_due_ms is -1 when both sets are empty, an
-- integer without exponent otherwise. A job whose due time is past MAX_MS (+inf, 1e300, a
-- time in µs: no time rota waits for) is made dead as a bad payload; buried: their ids.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local moved = 0
local drop = {}
for i = 3, #ARGV do
  drop[ARGV[i]] = true
end
-- The expiring set's entries whose time has come leave it; a job that has not started
-- (queued: its queue entry is stale from now on, scheduled or retrying) ends expired.
-- A running, finished or waiting one is left to its finish or to the fetch.
local gone = redis.call('ZRANGEBYSCORE', K_EXPIRING, '-inf', now, 'LIMIT', 0, limit)
call_chunked('ZREM', K_EXPIRING, gone)
for _, id in ipairs(gone) do
  local ok, f = pcall(redis.call, 'HMGET', key_job(id), 'name', 'state', 'expires')
  local at = ok and f[1] and expiry_of(f[3], nil, nil)
  local state = ok and f[2]
  -- (A queued job of a dropping handler is left to the fetch: deleted here, its queue
  -- entry would read as a bad payload.)
  local queued = not state or state == 'queued'
  if at and at <= now and (queued and not drop[f[1]] or state == 'scheduled'
      or state == 'retry') then
    if state == 'scheduled' then
      redis.call('ZREM', K_SCHEDULED, id)
    elseif state == 'retry' then
      redis.call('ZREM', K_RETRY, id)
    end
    expire_job(id, f[1], at, now, drop[f[1]])
  end
end
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
    local ok, f = pcall(redis.call, 'HMGET', jk, 'name', 'expires', 'fair')
    local name = ok and f[1]
    local at = name and f[2] and expiry_of(f[2], nil, nil)
    if not name or name == '' then
      bury(id, name, 'bad_payload', 'scheduled job has no record or no name', now, nil)
    elseif at and at <= now then
      expire_job(id, name, at, now, drop[name])
    else
      redis.call('HSET', jk, 'state', 'queued')
      push_job(name, f[3], id, false) -- its key's list (_fair.lua), or the queue
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
for _, z in ipairs({K_SCHEDULED, K_RETRY, K_EXPIRING}) do
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
