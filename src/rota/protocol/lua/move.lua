-- Admin: move jobs out of a sorted set (scheduled, retry or dead) into their queues now.
-- KEYS[1] namespace prefix
-- ARGV set ('scheduled' | 'retry' | 'dead'), now_ms, id_1 .. id_n
-- A job revived from dead starts again with no failures and no lost attempts. A dead
-- record that cannot run (a buried garbage entry) stays where it is.
-- Returns the number of jobs moved.
local set, now = ARGV[1], tonumber(ARGV[2])
local z = ({scheduled = K_SCHEDULED, retry = K_RETRY, dead = K_DEAD})[set]
local moved = 0
local woken = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local jk = key_job(id)
  if redis.call('ZSCORE', z, id) then
    local name = is_hash(jk) and redis.call('HGET', jk, 'name')
    if name and name ~= '' and redis.call('HEXISTS', jk, 'args') == 1 then
      redis.call('ZREM', z, id)
      redis.call('HSET', jk, 'state', 'queued')
      if set == 'dead' then
        redis.call('HSET', jk, 'failures', 0, 'lost', 0)
        redis.call('HDEL', jk, 'finished_at')
      end
      redis.call('LPUSH', key_queue(name), id)
      redis.call('SADD', K_NAMES, name)
      woken[name] = true
      moved = moved + 1
    elseif set ~= 'dead' then
      redis.call('ZREM', z, id)
      bury(id, name, 'bad_payload', 'job has no record, name or args', now, nil)
    end
  end
end
for name in pairs(woken) do
  wake(name)
end
flush_counts(now)
return moved
