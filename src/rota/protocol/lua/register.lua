-- include: _wake
-- Make a pool's job names, priorities, concurrency and rate limits known to every process: at
-- the pool's start, and again when its heartbeat finds that Redis forgot them (restarted
-- without persistence, or flushed); names whose queue holds jobs join the ready set.
-- A few bytes: allowed when Redis is out of memory.
-- KEYS[1] namespace prefix
-- ARGV 4 per job name: name, priority, max concurrency ('' = no limit; ending in '?': a
--      shard's part, written only where the shard has none), rate limit (the same)
--      ('<count>/<period ms>', '' = none); then optionally 'keep': write the values of a
--      name only when Redis did not know the name (it lost its data), and keep what is
--      there (an operator's limit, rate or priority) when it did: a heartbeat's
--      registration after a reaper forgot a late pool must not undo an operator's change.
-- Returns the number of names written (with 'keep': the names Redis did not know).
-- A name's limit or rate in hash `h`: '' removes it, a value ending in '?' (a shard's
-- part) is written only where there is none, any other is written.
local function write_setting(h, name, value)
  if value == '' then
    redis.call('HDEL', h, name)
  elseif string.sub(value, -1) == '?' then
    redis.call('HSETNX', h, name, string.sub(value, 1, -2))
  else
    redis.call('HSET', h, name, value)
  end
end

local keep = #ARGV % 4 == 1 and ARGV[#ARGV] == 'keep'
local n = 0
local i = 1
while i + 3 <= #ARGV do
  local name, priority, limit, rate = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local known = redis.call('SADD', K_NAMES, name) == 0
  -- A queue that holds jobs joins the ready set: the limit written here may leave room
  -- where the last one left none. A paused name leaves the set again at the first fetch
  -- that sees it.
  if queue_holds(name) then
    mark_ready(name)
  end
  if not (keep and known) then
    redis.call('HSET', K_PRIORITIES, name, priority)
    write_setting(K_LIMITS, name, limit)
    write_setting(K_RATES, name, rate)
    n = n + 1
  end
  i = i + 4
end
return n
