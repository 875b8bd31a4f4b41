-- include: _counts _graph _enqueue
-- Enqueue one job.
-- KEYS[1] namespace prefix
-- ARGV id, name, args (JSON text, stored as is), now_ms, then optionally (absent = none, so
--      a plain job sends four) run_at_ms (0 = now), unique_key ('' = none), unique_ttl_ms,
--      max_fails ('' = handler's), timeout ('' = handler's), after (the ids of the jobs it
--      waits for, space-separated; '' = none), traceparent and tracestate (the W3C trace
--      context of the enqueue; '' = none), expires (when it expires, ms since the epoch;
--      '' = never, as is anything that is no time from 1 to MAX_MS), fair key ('' = none)
-- Returns {id, created}: created is 0 when the id exists already or the unique key is held
-- by a live job, whose id is returned instead. A parent that does not exist is an error
-- reply starting with NOPARENT, and nothing is written.
local after = ARGV[10] or ''
local trace = nil
if (ARGV[11] or '') ~= '' then
  trace = {ARGV[11], ARGV[12] or ''}
end
local deps = nil
if after ~= '' then
  local missing = missing_parent(after, nil)
  if missing then
    return no_parent(ARGV[1], missing)
  end
  deps = {after = after}
end
local r = {enqueue_one(ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6] or '',
  ARGV[7], ARGV[8] or '', ARGV[9] or '', nil, deps, trace, ARGV[13], ARGV[14])}
if deps then
  flush_counts(tonumber(ARGV[4])) -- a child whose parent is dead is counted as failed and dead
end
return r
