-- include: _base _counts _wake _graph
-- Admin: edit then retry. Replace the args of one job of the retry or dead set and move
-- it to its queue now, in one step: the same job (its id, attempts history, options,
-- ties), with new args.
-- KEYS[1] namespace prefix
-- ARGV set ('retry' | 'dead'), now_ms, id, args (the new args, JSON text as stored)
-- Refuses, writing nothing, when the job is no longer in the set (a pool promoted the
-- retry, someone retried or deleted it: the operator edited what is gone), when its
-- record cannot run (no name), and when it is a dead job that ended because a job it
-- waits for failed (dependency_failed: retry that one; its args are not the cause).
-- Returns 1 when moved, -1 not in the set, -2 no record or name, -3 dependency_failed.
local set, now, id, args = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local z = ({retry = K_RETRY, dead = K_DEAD})[set]
if not z or not redis.call('ZSCORE', z, id) then
  return -1
end
local jk = key_job(id)
if not is_hash(jk) then
  return -2
end
local f = redis.call('HMGET', jk, 'name', 'reason', 'fair', 'children', 'group')
local name = f[1]
if not name or name == '' then
  return -2
end
if set == 'dead' and f[2] == 'dependency_failed' then
  return -3
end
redis.call('ZREM', z, id)
redis.call('HSET', jk, 'args', args)
requeue(id, name, f[3], set == 'dead', f[4] or f[5], now) -- as move
wake(name)
flush_counts(now)
return 1
