-- Make a pool's job names, priorities, concurrency and rate limits known to every process: at
-- the pool's start, and again when its heartbeat finds that Redis forgot them (restarted
-- without persistence, or flushed); names whose queue holds jobs join the ready set.
-- A few bytes: allowed when Redis is out of memory.
-- KEYS[1] namespace prefix
-- ARGV 4 per job name: name, priority, max concurrency ('' = no limit), rate limit
--      ('<count>/<period ms>', '' = none)
-- Returns the number of names.
local n = 0
local i = 1
while i + 3 <= #ARGV do
  local name, priority, limit, rate = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  redis.call('SADD', K_NAMES, name)
  -- A backlog that no fetch knows of (written by plain commands, or by an older rota
  -- that kept no ready set) is visited from now on; a paused name leaves the set again
  -- at the first fetch that sees it.
  if queue_holds(name) then
    mark_ready(name)
  end
  redis.call('HSET', K_PRIORITIES, name, priority)
  if limit == '' then
    redis.call('HDEL', K_LIMITS, name)
  else
    redis.call('HSET', K_LIMITS, name, limit)
  end
  if rate == '' then
    redis.call('HDEL', K_RATES, name)
  else
    redis.call('HSET', K_RATES, name, rate)
  end
  n = n + 1
  i = i + 4
end
return n
