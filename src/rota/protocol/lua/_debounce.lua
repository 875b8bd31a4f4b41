-- include: _base
-- Shared helpers, beside part 5 (_enqueue.lua): debounce by key, for the enqueue and
-- enqueue_batch scripts.
-- A debounced enqueue either makes a new job, scheduled at now + window (the pending
-- job), or is absorbed by the pending job of its key: kept as it is (mode 'first'), its
-- run time moved to now + window ('extend'), or its args replaced ('replace', the run
-- time moved too unless asked to keep it). Only a job still scheduled is pending: once
-- due (queued), running or finished, the next enqueue makes a new pending job, so a job
-- that runs is never changed under its handler.
--
-- Keys:
--   debounce:<key> string  the id of the pending job of a debounce key, with a TTL (ms) of
--                          its time to run and a day: a key naming no pending job
--                          (garbage, a job deleted, run or of another key) is ignored and
--                          taken over, so that nothing written there stops an enqueue
--   job:<id>      hash     the pending job: debounce_key (its key), absorbed (how many
--                          enqueues it took in; absent: none), args, run_at
--   scheduled     zset     job ids scored by run_at (ms)

-- How long a debounce key outlives its job's run time: a scheduler away for a while
-- finds the key still there when it promotes the job.
local DEBOUNCE_GRACE = 86400000

-- The debounce of an enqueue, from its arguments (strings, as the scripts take them):
-- nil when it has no key. `window`: ms, at least 1; mode: 'first', 'extend' or
-- 'replace' (anything else reads as 'first'); move: '0' keeps a replaced job's run time.
local function debounce_of(key, window, mode, move, now)
  if not key or key == '' then
    return nil
  end
  local w = tonumber(window) or 1
  if w ~= w or w < 1 then
    w = 1
  end
  w = math.min(math.floor(w), MAX_MS)
  return {key = key, due = math.min(now + w, MAX_MS), now = now, mode = mode or 'first',
    move = move ~= '0'}
end

-- The pending job of the debounce `db` for a job of `name` (its id and record key), or
-- nil: none, or the key holds anything else (see the header). A key of another type is
-- taken over too: the SET of debounce_hold replaces it.
local function debounce_pending(db, name)
  local ok, id = pcall(redis.call, 'GET', key_debounce(db.key))
  if not ok or not id or not sane_id(id) then
    return nil
  end
  local jk = key_job(id)
  local read, f = pcall(redis.call, 'HMGET', jk, 'name', 'state', 'debounce_key')
  if not read or f[1] ~= name or f[2] ~= 'scheduled' or f[3] ~= db.key then
    return nil
  end
  local at = redis.call('ZSCORE', K_SCHEDULED, id)
  if not at then -- in no scheduled set, it would never run: not one to add to
    return nil
  end
  return id, jk, tonumber(at) or 0
end

-- Absorb an enqueue of `name` with `args` into the pending job of `db`: its id, or nil
-- when there is none (the caller then makes one, and calls debounce_hold).
local function debounce_absorb(db, name, args)
  local id, jk, at = debounce_pending(db, name)
  if not id then
    return nil
  end
  local mode = db.mode
  if mode == 'replace' then
    redis.call('HSET', jk, 'args', args)
  end
  if mode == 'extend' or (mode == 'replace' and db.move) then
    -- Never earlier than it was: a producer whose clock is behind moves nothing back.
    if db.due > at then
      local due = str(db.due)
      redis.call('ZADD', K_SCHEDULED, due, id)
      redis.call('HSET', jk, 'run_at', due)
      redis.call('PEXPIRE', key_debounce(db.key), str(db.due - db.now + DEBOUNCE_GRACE))
    end
  end
  incr(jk, 'absorbed', 1)
  return id
end

-- Make job `id` (just enqueued, scheduled at db.due) the pending job of `db`.
local function debounce_hold(db, id)
  redis.call('HSET', key_job(id), 'debounce_key', db.key)
  redis.call('SET', key_debounce(db.key), id, 'PX', str(db.due - db.now + DEBOUNCE_GRACE))
end
