-- include: _base _counts _wake _graph _fair
-- Abort a job. A queued, scheduled, retrying or waiting job is removed at once; a
-- running one is flagged and announced on the abort channel, and its pool cancels it.
-- KEYS[1] namespace prefix
-- ARGV id, now_ms, keep_ms
-- Returns the job's state before: 'missing', 'running' (cancel requested), a finished
-- state (nothing done), or the state it was aborted from.
local id, now, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local jk = key_job(id)
if not is_hash(jk) then
  return 'missing'
end
local f = redis.call('HMGET', jk, 'state', 'name', 'children', 'group', 'fair')
-- A record with a name and no state is queued (protocol v4).
local state, name = f[1] or (f[2] and 'queued') or '', f[2] or ''
if state == 'running' then
  -- The flag holds how long the aborted record is kept (ms).
  redis.call('HSET', jk, 'abort', keep)
  redis.call('PUBLISH', K_ABORT, id)
  return state
end
if state == 'complete' or state == 'dead' or state == 'aborted' then
  return state
end
if f[5] then
  fair_unqueue(name, f[5], id) -- out of its key's list (_fair.lua)
else
  redis.call('LREM', key_queue(name), 0, id)
end
redis.call('ZREM', K_SCHEDULED, id)
redis.call('ZREM', K_RETRY, id)
redis.call('ZREM', K_WAITING, id)
redis.call('HSET', jk, 'state', 'aborted', 'reason', 'aborted', 'error', 'aborted before it ran',
  'finished_at', now)
release_holds(jk, id)
notify(jk, id, 'aborted')
if keep > 0 then
  redis.call('PEXPIRE', jk, keep)
else
  redis.call('DEL', jk)
end
count('aborted', name, 1)
end_dependents(id, 'aborted', f[3], f[4], now)
flush_counts(now)
return state
