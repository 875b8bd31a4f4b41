-- include: _counts _graph _enqueue _debounce
-- Enqueue one job.
-- KEYS[1] namespace prefix
-- ARGV id, name, args (JSON text, stored as is), now_ms, then optionally (absent = none, so
--      a plain job sends four) run_at_ms (0 = now), unique_key ('' = none), unique_ttl_ms,
--      max_fails ('' = handler's), timeout ('' = handler's), after (the ids of the jobs it
--      waits for, space-separated; '' = none), traceparent and tracestate (the W3C trace
--      context of the enqueue; '' = none), expires (when it expires, ms since the epoch;
--      '' = never, as is anything that is no time from 1 to MAX_MS), fair key ('' = none),
--      then the debounce:
--      debounce_key ('' = none), debounce_ms (the window, at least 1), debounce_mode
--      ('first' | 'extend' | 'replace'), debounce_move ('0' = a replace keeps the run
--      time; anything else moves it): a debounced job is scheduled at now_ms + window,
--      run_at_ms is not read (see _debounce.lua). now_ms may be followed by '@' and the
--      generation of the shard record the producer routes by ('<now>@<generation>'; see
--      _enqueue.lua's resharded): another than this shard's copy is an error reply
--      starting with RESHARDED, and nothing is written; a time alone is not checked
-- Returns {id, created}: created is 0 when the id exists already, the unique key is held
-- by a live job, or the debounce key by a pending job (which took this enqueue in), whose
-- id is returned instead. A parent that does not exist is an error
-- reply starting with NOPARENT, and nothing is written.
local stale = resharded(ARGV, 4)
if stale then
  return stale
end
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
local run_at = ARGV[5]
local db = debounce_of(ARGV[15], ARGV[16], ARGV[17], ARGV[18], tonumber(ARGV[4]))
if db then
  local held = debounce_absorb(db, ARGV[2], ARGV[3])
  if held then
    return {held, 0}
  end
  run_at = db.due
end
local r = {enqueue_one(ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), run_at, ARGV[6] or '',
  ARGV[7], ARGV[8] or '', ARGV[9] or '', nil, deps, trace, ARGV[13], ARGV[14])}
if db and r[2] == 1 then
  debounce_hold(db, r[1])
end
if deps then
  flush_counts(tonumber(ARGV[4])) -- a child whose parent is dead is counted as failed and dead
end
return r
