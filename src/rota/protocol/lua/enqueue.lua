-- Enqueue one job.
-- KEYS[1] namespace prefix
-- ARGV id, name, args (JSON text, stored as is), now_ms, run_at_ms (0 = now),
--      unique_key ('' = none), unique_ttl_ms, max_fails ('' = handler's), timeout ('' = handler's)
-- Returns {id, created}: created is 0 when the id exists already or the unique key is held
-- by a live job, whose id is returned instead.
local id, name, args = ARGV[1], ARGV[2], ARGV[3]
local now, run_at = tonumber(ARGV[4]), tonumber(ARGV[5]) or 0
local ukey, uttl = ARGV[6], tonumber(ARGV[7]) or 0
if uttl <= 0 then
  uttl = 86400000
end
local max_fails, timeout = ARGV[8], ARGV[9]

local jk = key_job(id)
if redis.call('EXISTS', jk) == 1 then
  return {id, 0}
end
if ukey ~= '' then
  local uk = key_unique(ukey)
  local holder = redis.call('GET', uk)
  if holder and redis.call('EXISTS', key_job(holder)) == 1 then
    return {holder, 0}
  end
  redis.call('SET', uk, id, 'PX', uttl)
end

local fields = {'name', name, 'args', args, 'enqueued_at', now, 'attempts', 0,
  'failures', 0, 'lost', 0, 'token', 0}
if ukey ~= '' then
  table.insert(fields, 'unique_key'); table.insert(fields, ukey)
end
if max_fails ~= '' then
  table.insert(fields, 'max_fails'); table.insert(fields, max_fails)
end
if timeout ~= '' then
  table.insert(fields, 'timeout'); table.insert(fields, timeout)
end
if run_at > now then
  table.insert(fields, 'state'); table.insert(fields, 'scheduled')
  table.insert(fields, 'run_at'); table.insert(fields, run_at)
  redis.call('HSET', jk, unpack(fields))
  redis.call('ZADD', K_SCHEDULED, run_at, id)
  wake_scheduler()
else
  table.insert(fields, 'state'); table.insert(fields, 'queued')
  redis.call('HSET', jk, unpack(fields))
  redis.call('LPUSH', key_queue(name), id)
  wake(name)
end
redis.call('SADD', K_NAMES, name)
return {id, 1}
