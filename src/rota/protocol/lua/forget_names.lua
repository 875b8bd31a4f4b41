-- include:
-- Forget job names that have had nothing for a while, so that pages, /metrics and the
-- queue figures do not grow with every name ever used: a name with no queued or running
-- job (plain or keyed), not paused, without a concurrency or rate limit or fair key
-- setting (and, the caller sees to it, not served by a live pool) is noted in K_IDLE with the time it was first seen so; one
-- idle since before the cutoff leaves the names, the ready set, the priorities and
-- K_IDLE, and its wake list goes. A name with anything again leaves K_IDLE. Enqueueing
-- to a forgotten name makes it known again, as for any new name.
-- Removes and marks only: allowed when Redis is out of memory.
-- KEYS[1] namespace prefix
-- ARGV now_ms, cutoff_ms (idle since this time or before: forgotten), then the names
-- Returns the names forgotten.
local now, cutoff = ARGV[1], tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV do
  local name = ARGV[i]
  local busy = redis.call('LLEN', key_queue(name)) > 0
    or redis.call('ZCARD', key_running(name)) > 0
    or redis.call('SISMEMBER', K_PAUSED, name) == 1
    or redis.call('HEXISTS', K_LIMITS, name) == 1
    or redis.call('HEXISTS', K_RATES, name) == 1
    or redis.call('EXISTS', key_fair_backlog(name), key_fair_set(name)) > 0 -- keyed jobs, settings
  if busy then
    redis.call('HDEL', K_IDLE, name)
  else
    local since = tonumber(redis.call('HGET', K_IDLE, name) or '')
    if not since then
      redis.call('HSET', K_IDLE, name, now)
    elseif since <= cutoff then
      redis.call('SREM', K_NAMES, name)
      redis.call('SREM', K_READY, name)
      redis.call('HDEL', K_PRIORITIES, name)
      redis.call('HDEL', K_IDLE, name)
      redis.call('DEL', key_wake(name), key_fair(name)) -- (and its fair keys' state)
      redis.call('SREM', K_READY, FAIR_MARK .. name)
      out[#out + 1] = name
    end
  end
end
return out
