-- include: _base _counts _wake _graph _fair _runtimes
-- Record the outcome of many attempts in one call. An outcome whose token is not the
-- job's current token is stale (the job was reclaimed and handed out again, or aborted):
-- it changes nothing and its id is returned. An outcome whose attempt already finished
-- (`finished_token`: it is sent again because the reply to it was lost) changes nothing
-- either, and is no stale one.
-- KEYS[1] namespace prefix
-- ARGV now_ms, the attempts: one flat MessagePack array of id, name, token, outcome,
--      a, b, c per attempt (one argument instead of seven per job), and optionally the
--      most complete jobs to keep (default 100000; '' for the default), then optionally
--      the lines to add to the logs of jobs that failed (a handler's traceback): one flat
--      MessagePack array of id, line per job, written with a retry or dead outcome of
--      that id only (see keep_log)
--   complete: a = result JSON ('' = none), b = keep_ms (0 = delete now), c = keep_ms of a
--             job with no result that nobody waits for and that has no children and no
--             group ('' = b)
--   retry:    a = due_ms, b = error, c = reason
--   dead:     b = error, c = reason
--   drop:     b = error, c = reason           (a dead job of a skip_dead handler)
--   aborted:  a = keep_ms, b = message
--   requeue:  back to the front of its queue, no failure counted (shutdown)
--   anything else: the job is dead, reason error ("finish: unknown outcome ...")
-- Returns the ids of stale outcomes.
local now = tonumber(ARGV[1])
local now_text = str(now)
local stale = {}
local woken = {}
local ended = {} -- name -> ids whose lease ended (removed from its running set at the end)
local fended = {} -- {name, fair key, ids} per key of the keyed jobs among them
local fkeyed = {} -- name -> fair key -> its entry of fended
local limited = {} -- name -> whether it has a concurrency limit (read once per call)
local kept = {} -- time, id, ... of the complete jobs kept (added to K_COMPLETE at the end)
local processed = {} -- name -> jobs complete in this call (counted at the end)
local ran_ms = {} -- name -> ms its complete jobs ran, from their lease's start (ditto)
-- name -> bucket -> attempts that ran to an outcome (complete, retry, dead, drop), from
-- their lease's start: the run-time histograms (_runtimes.lua), written at the end
local runs = {}
local RAN = {complete = true, retry = true, dead = true, drop = true}
local COMPLETE_MAX = 100000
-- A job's log: its last lines, each cut to this many bytes (2000 characters of UTF-8 at
-- most: the sender cuts the text, this only bounds what a faulty sender writes).
local LOG_LINES, LOG_LINE = 100, 8000
local logs = {} -- id -> the line to add to its log (ARGV[4])
local TRIM_MORE = 100 -- a call deletes at most this many more kept jobs than it adds

-- `logged`: whether the job has log lines (key_joblog) to expire with it: a worker that
-- writes one sets the field 'logged'. A job without lines costs one command less.
local function keep_or_delete(jk, id, keep, logged)
  if keep <= 0 then
    redis.call('DEL', jk, key_joblog(id))
  else
    redis.call('PEXPIRE', jk, str(keep))
    if logged then
      redis.call('PEXPIRE', key_joblog(id), str(keep))
    end
  end
end

-- The job's failures counted once more, as text (read only for outcomes that fail).
local function failed_once_more(jk)
  return str((tonumber(redis.call('HGET', jk, 'failures')) or 0) + 1)
end

-- A failed attempt's line (its traceback) in the job's log, as ctx.job_log writes one,
-- and the job's `logged` field set when it was not (`logged`: what the finish read).
local function keep_log(jk, id, line, logged)
  if not sane_id(id) then -- its record is buried under another id: no log to keep
    return
  end
  local lk = key_joblog(id)
  if redis.call('RPUSH', lk, string.sub(line, 1, LOG_LINE)) > LOG_LINES then
    redis.call('LTRIM', lk, -LOG_LINES, -1)
  end
  if not logged then
    redis.call('HSET', jk, 'logged', '1')
  end
end

local function finish_one(id, name, token, outcome, a, b, c)
  local jk = key_job(id)
  -- One read fences the outcome and holds all it needs. It fails on a key that is not a
  -- hash and finds no token for a missing job: either way the outcome is stale.
  local ok, f = pcall(redis.call, 'HMGET', jk, 'token', 'abort', 'waiters', 'unique_key',
    'children', 'group', 'logged', 'started_at', 'finished_token', 'expires', 'fair', 'flease')
  if not ok or f[1] ~= token then
    if ok and f[9] == token then
      return -- this attempt's outcome, recorded already: the reply to it was lost
    end
    stale[#stale + 1] = id
    count('stale', name, 1)
    return
  end
  local ids = table_at(ended, name)
  ids[#ids + 1] = id
  if f[11] and f[12] then -- its key's lease ends too (at the end, fair_release): a key
    -- without a limit has none (_fairfetch.lua, fair_leased), nor ever leaves the ready
    -- keys for one
    local of_name = table_at(fkeyed, name)
    local e = of_name[f[11]]
    if not e then
      e = {name, f[11], {}}
      of_name[f[11]] = e
      fended[#fended + 1] = e
    end
    e[3][#e[3] + 1] = id
  end
  local logged = f[7]
  -- Retire the token (written with the outcome) and name the attempt that finished, so
  -- that this outcome sent again (its reply was lost) changes nothing and is no stale one.
  local retired = retire(token)
  if f[2] and (outcome == 'retry' or outcome == 'requeue') then
    -- An abort was requested: it wins over another run.
    outcome, b = 'aborted', 'abort requested'
  end
  if f[2] and outcome == 'aborted' then
    a = f[2] -- the keep time the abort asked for
  end
  -- An attempt that ran to an outcome of its handler's (not one an abort or a shutdown
  -- cut short) is counted in its name's run-time histogram.
  if RAN[outcome] and f[8] then
    local started = tonumber(f[8])
    if started then
      count_run(runs, name, math.max(0, now - started))
    end
  end
  if f[3] and outcome ~= 'retry' and outcome ~= 'requeue' then
    local state = ({complete = 'complete', dead = 'dead', drop = 'dead', aborted = 'aborted'})[outcome]
    if outcome == 'complete' and a ~= '' then
      redis.call('PUBLISH', key_done(id), state .. '\n' .. a)
    elseif state and outcome ~= 'dead' then -- bury() tells the waiters of dead jobs
      redis.call('PUBLISH', key_done(id), state)
    end
  end
  if outcome == 'complete' then
    local keep = tonumber(b) or 0
    if a == '' and not (f[3] or f[5] or f[6]) then
      keep = tonumber(c) or keep -- nothing to read but that it ran: kept only when asked
    end
    release_holds(jk, id, f[4], f[10])
    if keep > 0 then -- a record deleted now is not written first
      if a ~= '' then
        redis.call('HSET', jk, 'token', retired, 'finished_token', token, 'state', 'complete',
          'finished_at', now_text, 'result', a)
      else
        redis.call('HSET', jk, 'token', retired, 'finished_token', token, 'state', 'complete',
          'finished_at', now_text)
      end
      local k = #kept
      kept[k + 1] = now_text
      kept[k + 2] = id
    end
    if f[5] or f[6] then
      complete_dependents(id, a, f[5], f[6], now, keep)
    end
    keep_or_delete(jk, id, keep, logged)
    processed[name] = (processed[name] or 0) + 1
    local started = tonumber(f[8])
    if started then
      ran_ms[name] = (ran_ms[name] or 0) + math.max(0, now - started)
    end
  elseif outcome == 'retry' then
    local due = tonumber(a) or now
    redis.call('HSET', jk, 'token', retired, 'finished_token', token, 'state', 'retry',
      'error', b, 'reason', c, 'run_at', str(due), 'failures', failed_once_more(jk))
    redis.call('ZADD', K_RETRY, str(due), id)
    wake_scheduler()
    count('failed', name, 1)
  elseif outcome == 'dead' then
    bury(id, name, c, b, now, {'token', retired, 'finished_token', token, 'failures',
      failed_once_more(jk)})
  elseif outcome == 'drop' then
    release_holds(jk, id, f[4], f[10])
    redis.call('DEL', jk, key_joblog(id))
    count('failed', name, 1)
    end_dependents(id, 'dead (dropped)', f[5], f[6], now)
  elseif outcome == 'aborted' then
    local keep = tonumber(a) or 0
    if keep > 0 then
      redis.call('HSET', jk, 'token', retired, 'finished_token', token, 'state', 'aborted',
        'reason', 'aborted', 'error', b, 'finished_at', str(now))
    end
    release_holds(jk, id, f[4], f[10])
    keep_or_delete(jk, id, keep, logged)
    count('aborted', name, 1)
    end_dependents(id, 'aborted', f[5], f[6], now)
  elseif outcome == 'requeue' then
    redis.call('HSET', jk, 'token', retired, 'finished_token', token, 'state', 'queued')
    push_job(name, f[11], id, true)
    woken[name] = true
  else -- a client's mistake: the job must not stay 'running' outside every set
    bury(id, name, 'error', 'finish: unknown outcome ' .. string.sub(tostring(outcome), 1, 64),
      now, {'token', retired, 'finished_token', token})
  end
  local line = logs[id]
  if line and (outcome == 'retry' or outcome == 'dead') then -- not one an abort ended
    keep_log(jk, id, line, logged)
  end
  -- A finish frees a slot of a limited name: wake a pool that may wait for it.
  local l = limited[name]
  if l == nil then
    l = redis.call('HEXISTS', K_LIMITS, name) == 1
    limited[name] = l
  end
  if l then
    woken[name] = true
  end
end

-- A sender's mistake is refused whole, before any write: the leases stay.
if #ARGV < 2 or #ARGV > 4 then
  return redis.error_reply('ERR finish: takes now, one MessagePack array of attempts,'
    .. ' optionally complete_max and the logs\' lines, not ' .. #ARGV .. ' arguments')
end
if ARGV[4] then
  local flat = cmsgpack.unpack(ARGV[4])
  if type(flat) ~= 'table' or #flat % 2 ~= 0 then
    return redis.error_reply('ERR finish: the logs\' lines are not id, line pairs')
  end
  for i = 1, #flat, 2 do
    if type(flat[i]) ~= 'string' or type(flat[i + 1]) ~= 'string' then
      return redis.error_reply('ERR finish: the logs\' line ' .. (i + 1) / 2
        .. ' is not an id and a text')
    end
    logs[flat[i]] = flat[i + 1]
  end
end
-- Flat: seven entries per attempt, no table per attempt to make and collect.
local rows = cmsgpack.unpack(ARGV[2])
if type(rows) ~= 'table' or #rows % 7 ~= 0 then
  return redis.error_reply('ERR finish: the attempts are not seven entries each')
end
for i = 1, #rows, 7 do
  finish_one(rows[i], rows[i + 1], rows[i + 2], rows[i + 3], rows[i + 4], rows[i + 5],
    rows[i + 6])
end
local complete_max = tonumber(ARGV[3]) or COMPLETE_MAX
for name, ids in pairs(ended) do
  call_chunked('ZREM', key_running(name), ids)
end
-- Whether each key is still among its name's ready keys: one read per name.
local held = {} -- name -> fair_held's answer
for name, of_name in pairs(fkeyed) do
  local keys = {}
  for key in pairs(of_name) do
    keys[#keys + 1] = key
  end
  held[name] = #keys > 1 and fair_held(name, keys) or nil -- (one key: its ZSCORE)
end
for _, e in ipairs(fended) do
  if fair_release(e[1], e[2], e[3], held[e[1]]) then -- back from its limit: the name too
    woken[e[1]] = true
  end
end
for name, n in pairs(processed) do
  count('processed', name, n)
end
for name, n in pairs(ran_ms) do
  count_minute('ms:' .. name, math.floor(n))
end
-- Kept complete jobs are counted in K_COMPLETE; beyond complete_max the oldest go, a
-- few more per call than it keeps, so that the set shrinks back to its cap in steps
-- that keep each call short. (A record that expired first leaves its entry behind,
-- removed in its turn; an id enqueued again since is not complete and is left alone.)
if #kept > 0 then
  call_chunked('ZADD', K_COMPLETE, kept)
  local excess = redis.call('ZCARD', K_COMPLETE) - math.max(complete_max, 0)
  if excess > 0 then
    local n = math.min(excess, #kept / 2 + TRIM_MORE)
    local ids = redis.call('ZRANGE', K_COMPLETE, 0, n - 1)
    redis.call('ZREMRANGEBYRANK', K_COMPLETE, 0, n - 1)
    local gone = {} -- the keys of the trimmed jobs, deleted by one DEL per thousand
    for _, id in ipairs(ids) do
      if sane_id(id) then
        local jk = key_job(id)
        local ok, state = pcall(redis.call, 'HGET', jk, 'state')
        if ok and state == 'complete' then
          gone[#gone + 1] = jk
          gone[#gone + 1] = key_joblog(id)
          gone[#gone + 1] = key_children(id)
        end
      end
    end
    for i = 1, #gone, 999 do
      redis.call('DEL', unpack(gone, i, math.min(i + 998, #gone)))
    end
  end
end
for name in pairs(woken) do
  -- A requeued job, or a slot freed under a limit: the queue is ready again (a fetch
  -- took a name at its limit out of the ready set).
  if queue_holds(name) then
    mark_ready(name)
  end
  wake(name)
end
flush_counts(now)
flush_runs(runs, now)
return stale
