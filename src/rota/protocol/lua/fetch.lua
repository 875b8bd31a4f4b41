-- include: _base _counts _wake _graph _expiry _fairfetch
-- Lease up to n jobs in one call, visiting job names in the order given (the pool's
-- weighted round robin); names that are empty, paused or at their concurrency limit are
-- skipped and the batch is filled from the remaining names: those given, then the
-- optional fill names (the pool's other names, so that a batch of one whose name is
-- empty still finds work elsewhere). Only the names of the ready set are visited (read
-- once per call), so a call costs the same whatever the number of names with nothing
-- to run; a name found empty, paused or at its limit leaves the set.
-- KEYS[1] namespace prefix
-- ARGV now_ms (0: the server's time), lease_ms, pool_id, max_args_bytes, n, name_1 .. name_n,
--      [m, fill_1 .. fill_m, [tell, [rules]]]
--      tell: '1' to have the ready set's names in the reply (a pool then sends as fill
--      only the names it knows to be ready)
--      rules: name, default expiry (ms after enqueued_at; '' for none), drop ('1': its
--      handler keeps no dead jobs) per name whose handler says either
-- A job whose expiry has passed (see _expiry.lua) is not leased: it ends with reason
-- expired, and the call goes on to the next entry.
-- Returns {jobs, buried, due} ({jobs, buried, due, ready} with tell): jobs is flat: per job
-- the id, then FETCH_FIELDS of protocol/job.py, the last of them 'extra': '' for a job
-- with none of max_fails, timeout, deps, traceparent, tracestate and an expiry (most
-- jobs), else '1' and those six follow (EXTRA_FIELDS; the expiry in ms, its record's or
-- its handler's default, so that a pool does not start a job that expires while it waits
-- in the pool): each entry of a reply costs Redis about what a small command's argument
-- does, so six empty ones per job are left out; buried lists
-- the ids of entries made dead as bad payloads; due is the earliest time (ms) a rate-limited name
-- that still has jobs may start one, '0' for none; ready, the names of the ready set at
-- the end of the call.
local now, lease, pool = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
if now == 0 then
  -- Sent ahead, queued behind the pool's BLPOP: the caller's clock was read before the
  -- wait, so the server's is the one that knows when the leases start.
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local max_args = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local m = tonumber(ARGV[6 + n]) or 0
-- fairs: the names whose fair keys may have jobs (see _fair.lua, _fairfetch.lua)
local ready, fairs = ready_sets(redis.call('SMEMBERS', K_READY))
local tell = ARGV[7 + n + m] == '1'
local rules = {} -- name -> {default expiry (ms) or nil, drop}
for i = 8 + n + m, #ARGV - 2, 3 do
  rules[ARGV[i]] = {tonumber(ARGV[i + 1]), ARGV[i + 2] == '1'}
end
-- The fill: the names given, then the fill names, those of the ready set only.
local fill = {}
for i = 1, n do
  local name = ARGV[5 + i]
  if ready[name] then
    fill[#fill + 1] = name
  end
end
for i = 1, m do
  local name = ARGV[6 + n + i]
  if ready[name] then
    fill[#fill + 1] = name
  end
end
local deadline = str(now + lease)
local now_text = str(now)
local MAX_BURY = 100 -- entries made dead (bad payloads, expired jobs) per call at most
-- Each job hash is read whole (one HGETALL, see READ_AT): the args with the rest, their
-- size checked here (an HSTRLEN first would cost a command per job to spare the copy of
-- a value over the limit, which only a producer that skipped every check can write).

local leased = {} -- name -> deadline, id, ... of this call's leases (ZADD at the end)
local status = {} -- name -> false (unavailable), true (no limit) or slots left under it
local out, buried = {}, {}
local nburied = 0
local cut = {} -- names whose entries were still being buried when MAX_BURY was reached

-- Rate limits, by the generic cell rate algorithm: K_RATES holds name -> '<count>/<period
-- ms>', K_RATE_TAT name -> the time (ms) its next job may start. A job starts while that
-- time is not ahead of now, and each start moves it on by one interval. It may lag now by
-- one interval or 100 ms, whichever is longer: a fetch that comes a little late keeps its
-- slots, and a queue that was idle starts at most 100 ms worth of jobs (or two) at once.
local rates = {} -- name -> {interval, tat} of the rate-limited names visited
local SKEW_MS = 60000 -- how far apart the clocks of the pools of a namespace may be
local conc = {} -- name -> slots under its concurrency limit when first visited (true: none)
local due = 0 -- the earliest time a rate-limited name with jobs may start one (0: none)
local function later(t)
  if due == 0 or t < due then
    due = t
  end
end
local ctx = {now = now, later = later}
local fkey_of = {} -- id -> the fair key of a job this call leased
local function rate_slots(name)
  local spec = redis.call('HGET', K_RATES, name)
  if not spec then
    return nil
  end
  local c, p = string.match(spec, '^([%d%.]+)/(%d+)$')
  c, p = tonumber(c), tonumber(p)
  if c == 0 and p and p > 0 then
    return 0 -- a shard's part of 0 (rota.client.balance): none here until a pass moves one
  end
  if not c or not p or not (c > 0) or not (p > 0) then
    return nil -- garbage: no limit
  end
  local interval = p / c
  local lag = math.max(interval, 100)
  local tat = tonumber(redis.call('HGET', K_RATE_TAT, name)) or 0
  -- A start moves it at most one interval past its pool's now, and pools' clocks may be
  -- apart: one later than a minute past that (1e300, a time in µs) or NaN is garbage.
  -- (Within it, it is a start to wait for: a reset would hand out slots taken already.)
  if not (tat >= now - lag and tat <= now + lag + SKEW_MS) then
    tat = now - lag
  end
  rates[name] = {interval, tat}
  if tat > now then
    later(tat)
    return 0
  end
  return math.floor((now - tat) / interval) + 1
end

-- Whether a status leaves room for a job (a garbage limit, NaN, never fills up).
local function room(s)
  return s == true or (s ~= false and not (s <= 0))
end

-- A name leaves the ready set: its queue is empty, or it is paused or at its limit.
-- (resume, and a finish that frees a slot, add it back.)
local function unready(name)
  if ready[name] then
    redis.call('SREM', K_READY, name)
    ready[name] = false
  end
end

local function available(name)
  local s = status[name]
  if s == nil then
    if not ready[name] then
      s = false
    elseif redis.call('SISMEMBER', K_PAUSED, name) == 1 then
      s = false
      unready(name)
    else
      local limit = tonumber(redis.call('HGET', K_LIMITS, name))
      -- The running set is read once: this call counts its own leases as it makes them,
      -- and adds them to the set at the end.
      s = limit and limit - redis.call('ZCARD', key_running(name)) or true
      if not room(s) then
        unready(name)
      end
      conc[name] = s
      -- A name out of rate-limit slots stays ready: its next start is only later.
      local r = rate_slots(name)
      if r and (s == true or not (s <= r)) then
        s = r
      end
    end
    status[name] = s
  end
  if not room(s) then
    status[name] = false
    return false
  end
  return true
end

local function reject(id, name, err)
  buried[#buried + 1] = bury(id, name, 'bad_payload', err, now, nil)
  nburied = nburied + 1
end

-- Whether the job (its fields f) expired before this start: then it is ended so; else
-- its expiry is f.at (nil: none). Read only for a job with an expiry field or of a name
-- with rules: the others cost nothing.
local function expired(id, name, f)
  local r = rules[name]
  local at = expiry_of(f[14], f[7], r and r[1])
  if not at or at > now then
    f.at = at
    return false
  end
  expire_job(id, name, at, now, r and r[2])
  nburied = nburied + 1
  return true
end

-- Queue entries are popped several at a time (RPOP with a count, Redis 6.2): as many
-- as this call may still lease from the name, at most its slots. Entries popped and not
-- used go back to the tail in their order before the call ends (give_back), so no other
-- client ever sees them gone.
local popped = {} -- name -> the entries popped and not used yet, from index .at on
local visits = {} -- name -> visits left in the given order (the robin's), this one included
for i = 1, n do
  local name = ARGV[5 + i]
  visits[name] = (visits[name] or 0) + 1
end
local filling = false -- past the given order: the fill wants whatever is missing
local missing = 0

local function wanted(name) -- how many entries this call may still lease from the name
  local k, s = filling and missing or visits[name], status[name]
  return math.max(math.floor((s ~= true and s < k) and s or k), 1)
end

local function next_entry(name, qk)
  local b = popped[name]
  if b and b.at <= #b then
    b.at = b.at + 1
    return b[b.at - 1]
  end
  local k = wanted(name)
  local ok, got = pcall(redis.call, 'RPOP', qk, str(k))
  if not ok then
    error(got) -- a queue of another type: the call leases nothing (see lease_all below)
  end
  if not got then
    return nil
  end
  got.at = 2
  popped[name] = got
  return got[1]
end

local function give_back()
  for name, b in pairs(popped) do
    if b.at <= #b then
      local rest = {}
      for i = #b, b.at, -1 do
        rest[#rest + 1] = b[i]
      end
      call_chunked('RPUSH', key_queue(name), rest)
    end
  end
end

-- The plain list's entries of a name with fair keys, as fair_next takes them: one
-- function per name and call, not a closure made (and collected) per job.
local plains = {}
local function plain_of(name)
  local f = plains[name]
  if not f then
    local qk = key_queue(name)
    f = function() return next_entry(name, qk) end
    plains[name] = f
  end
  return f
end

-- Pop entries of one queue until one job is leased; false when none could be.
local function take(name)
  local qk = key_queue(name)
  local plain = fairs[name] and (plains[name] or plain_of(name))
  while nburied < MAX_BURY do
    local id, fkey
    if plain then id, fkey = fair_next(ctx, name, plain, wanted) else id = next_entry(name, qk) end
    if not id then
      status[name] = false
      if not (plain and fair_resting(name)) then unready(name) end -- (resting: see due)
      return false
    end
    local jk = key_job(id)
    -- Read by redis.pcall: a key that is not a hash comes back as a table with err, a
    -- missing one as no fields (Redis keeps no empty hash).
    local all = sane_id(id) and redis.pcall('HGETALL', jk)
    if not all then
      reject(id, name, 'queue entry is not a job id')
    elseif all.err then
      reject(id, name, 'job record is not a hash')
    elseif #all == 0 then
      reject(id, name, 'job record missing')
    else
      local f = {}
      for i = 1, #all, 2 do
        local at = READ_AT[all[i]]
        if at then
          f[at] = all[i + 1]
        end
      end
      local size = f[13] and #f[13] or 0
      local state = f[2]
      if state == 'running' or state == 'complete' or state == 'dead' or state == 'aborted'
        or (state == 'waiting' and redis.call('ZSCORE', K_WAITING, id))
        or (state == 'scheduled' and redis.call('ZSCORE', K_SCHEDULED, id))
        or (state == 'retry' and redis.call('ZSCORE', K_RETRY, id)) then
        -- A second entry for a job that is taken, finished, waiting for others or due
        -- later: nothing to run.
        count('stale_entries', name, 1)
      elseif f[1] ~= name then
        reject(id, name, 'job name ' .. tostring(f[1] or '(none)') .. ' does not match queue ' .. name)
      elseif (f[14] or rules[name]) and expired(id, name, f) then
        -- Ended, not leased: the loop takes the next entry for this slot.
      elseif size > max_args then
        reject(id, name, 'args of ' .. size .. ' bytes exceed the limit of ' .. max_args .. ' bytes')
      elseif not f[13] then
        reject(id, name, 'job has no args')
      else
        -- Token and counters are made text once and stored as they are returned: Redis
        -- and Lua print big numbers differently (a token that compares unequal makes
        -- every finish stale), and Python and Lua read garbage differently (failures
        -- that never add up retry forever). Garbage reads as 0.
        local token = next_token(f[3] or '0')
        local attempts = next_count(f[4] or '0')
        local failures = same_count(f[5] or '0')
        if failures == (f[5] or '0') then -- stored as it reads already (the usual case)
          redis.call('HSET', jk, 'state', 'running', 'token', token, 'attempts', attempts,
            'started_at', now_text, 'pool', pool)
        else
          redis.call('HSET', jk, 'state', 'running', 'token', token, 'attempts', attempts,
            'failures', failures, 'started_at', now_text, 'pool', pool)
        end
        local ids = table_at(leased, name)
        ids[#ids + 1] = deadline
        ids[#ids + 1] = id
        if fkey then
          fkey_of[id] = fkey
          if fair_st[name].settings then fair_leased(name, fkey, deadline, id) end
        end
        if status[name] ~= true then
          status[name] = status[name] - 1
        end
        local k = #out
        out[k + 1] = id
        out[k + 2] = name
        out[k + 3] = token
        out[k + 4] = attempts
        out[k + 5] = failures
        out[k + 6] = f[6] or '0'
        out[k + 7] = f[13]
        out[k + 8] = f[7] or '0'
        if f[8] or f[9] or f[10] or f[11] or f[12] or f.at then
          out[k + 9] = '1'
          out[k + 10] = f[8] or ''
          out[k + 11] = f[9] or ''
          out[k + 12] = f[10] or ''
          out[k + 13] = f[11] or ''
          out[k + 14] = f[12] or ''
          out[k + 15] = f.at and ms_text(f.at) or ''
        else
          out[k + 9] = ''
        end
        return true
      end
    end
  end
  cut[name] = true
  return false
end

local function lease_all()
  for i = 1, n do
    local name = ARGV[5 + i]
    if not (available(name) and take(name)) then
      missing = missing + 1
    end
    visits[name] = visits[name] - 1
  end
  filling = true
  while missing > 0 and nburied < MAX_BURY do
    local progressed = false
    for _, name in ipairs(fill) do
      if missing == 0 then
        break
      end
      if available(name) and take(name) then
        missing = missing - 1
        progressed = true
      end
    end
    if not progressed then
      break
    end
  end
end

-- A key written by hand with another type fails a command part-way: a running set or a
-- next start read when the call visits a name, after it leased the names before, or a
-- running set refusing the leases. The call then leases nothing: its jobs go back to the
-- tail of their queues as they were (next to run; an attempt counted), and it answers
-- the error once that is written, so that the pool moves the key away (repair.lua) and
-- fetches again. (By pcall: the error would leave those jobs' records running with no
-- lease, in no queue.)
local ok, failed = pcall(lease_all)
give_back()
local added = {}
if ok then
  for name, entries in pairs(leased) do
    ok, failed = pcall(add_leases, key_running(name), entries)
    if not ok then
      break
    end
    added[name] = true
  end
end
if not ok then
  fair_end(ctx, false) -- (first: the keys it held go back before their jobs do)
  for name, entries in pairs(leased) do
    local ids, all = fair_requeue(name, entries, fkey_of) -- (keyed ones into their key)
    if added[name] then
      call_chunked('ZREM', key_running(name), all)
    end
    call_chunked('RPUSH', key_queue(name), ids)
    mark_ready(name)
  end
  flush_counts(now)
  return redis.error_reply(type(failed) == 'table' and failed.err or tostring(failed))
end
for name, entries in pairs(leased) do
  -- The reaper's usual passes visit these names. (By pcall: a leased set written by hand
  -- with another type must not fail the call after its leases, which would lose its
  -- reply; the reaper's next pass meets it, and the repair puts the name back.)
  pcall(redis.call, 'SADD', K_LEASED, name)
  local rate = rates[name]
  local left = conc[name] -- slots left under the concurrency limit (true: no limit)
  if left ~= true then
    left = left - #entries / 2
  end
  local holds = fair_has(name) or queue_holds(name)
  if rate then
    local tat = rate[2] + rate[1] * (#entries / 2)
    redis.call('HSET', K_RATE_TAT, name, string.format('%.3f', tat))
    if tat > now and room(left) and holds then
      later(tat)
    end
  end
  -- Pass the wake on: a queue that still holds jobs after this batch wakes one more
  -- waiting pool, so a burst reaches every idle pool, not only the few the enqueue woke.
  -- (A name with no room left under its limit is woken by the finish that frees a slot.)
  if not holds then
    unready(name)
  elseif room(status[name]) then
    wake(name)
  elseif not room(left) then
    unready(name) -- at its limit: the finish that frees a slot adds it back
  end -- else out of rate-limit slots: it stays ready, and due says when to come back
end
-- A queue whose bad entries this call stopped burying still holds entries: wake a pool
-- for them now rather than when its wait times out.
for name in pairs(cut) do
  wake(name)
end
fair_end(ctx, true)
flush_counts(now)
local due_text = ms_text(math.ceil(due))
if tell then
  local names = {}
  for name, yes in pairs(ready) do
    if yes then
      names[#names + 1] = name
    end
  end
  return {out, buried, due_text, names}
end
return {out, buried, due_text}
