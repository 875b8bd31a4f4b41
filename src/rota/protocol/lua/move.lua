-- include: _base _counts _wake _graph
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
      moved = moved + 1 + requeue(id, name, f[5], set == 'dead', f[3] or f[4], now)
      woken[name] = true
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
