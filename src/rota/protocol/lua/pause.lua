-- include: _wake
-- Pause or resume a job name. A script (not MULTI) so that it runs when Redis is out of
-- memory: resuming frees a little, pausing adds a set member.
-- KEYS[1] namespace prefix
-- ARGV 'pause' or 'resume', name
-- Returns 1 when the paused set changed.
local op, name = ARGV[1], ARGV[2]
if op == 'pause' then
  redis.call('SREM', K_READY, name) -- fetches visit it no more
  return redis.call('SADD', K_PAUSED, name)
end
local changed = redis.call('SREM', K_PAUSED, name)
if queue_holds(name) then
  mark_ready(name)
end
wake(name) -- a pool waiting on the name's wake list fetches again
return changed
