-- include: _base
-- Register a waiter on a job and read its state, atomically, so that a finish after
-- this call is announced on the job's done channel.
-- KEYS[1] namespace prefix
-- ARGV id
-- Returns {state, result, error, reason}, or an empty list when there is no such job.
local jk = key_job(ARGV[1])
if not is_hash(jk) then
  return {}
end
redis.call('HSET', jk, 'waiters', 1)
return redis.call('HMGET', jk, 'state', 'result', 'error', 'reason')
