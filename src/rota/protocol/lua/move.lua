-- include: _base _counts _wake _graph _fair
-- Admin: move jobs out of a sorted set (scheduled, retry or dead) into their queues now.
-- KEYS[1] namespace prefix
-- ARGV set ('scheduled' | 'retry' | 'dead'), now_ms, id_1 .. id_n
-- A job revived from dead starts again with no failures and no lost attempts, and the
-- jobs that had ended dead because of it (reason dependency_failed) wait for it again.
-- A dead job with reason dependency_failed is not queued: it waits again for what it
-- depends on, and stays dead while one of those is still dead. A dead record that
-- cannot run (a buried garbage entry) stays where it is. The jobs of other reasons are
-- moved first, so a parent and its failed children retried together all wait again.
-- Returns the number of jobs moved.
local set, now = ARGV[1], tonumber(ARGV[2])
local z = ({scheduled = K_SCHEDULED, retry = K_RETRY, dead = K_DEAD})[set]
local moved = 0
local woken = {}
local dependents = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local jk = key_job(id)
  if redis.call('ZSCORE', z, id) then
    local f = is_hash(jk)
      and redis.call('HMGET', jk, 'name', 'reason', 'children', 'group', 'fair') or {}
    local name = f[1]
    if set == 'dead' and f[2] == 'dependency_failed' then
      dependents[#dependents + 1] = id
    elseif name and name ~= '' and redis.call('HEXISTS', jk, 'args') == 1 then
      redis.call('ZREM', z, id)
      redis.call('HSET', jk, 'state', 'queued')
      if set == 'dead' then
        redis.call('HSET', jk, 'failures', 0, 'lost', 0)
        redis.call('HDEL', jk, 'finished_at')
        if f[3] or f[4] then
          moved = moved + rearm_dependents(id, now)
        end
      end
      if not push_job(name, f[5], id, false) then -- its key's list, or the queue
        redis.call('SADD', K_NAMES, name)
      end
      mark_ready(name)
      woken[name] = true
      moved = moved + 1
    elseif set ~= 'dead' then
      redis.call('ZREM', z, id)
      bury(id, name, 'bad_payload', 'job has no record, name or args', now, nil)
    end
  end
end
for _, id in ipairs(dependents) do
  -- Not re-armed already by a parent retried above, and able to wait again.
  if redis.call('ZSCORE', K_DEAD, id) and rearm(id, now) then
    moved = moved + 1 + rearm_dependents(id, now)
  end
end
for name in pairs(woken) do
  wake(name)
end
flush_counts(now)
return moved
