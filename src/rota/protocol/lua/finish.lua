-- Record the outcome of many attempts in one call. An outcome whose token is not the
-- job's current token is stale (the job was reclaimed and handed out again, or aborted):
-- it changes nothing and its id is returned.
-- KEYS[1] namespace prefix
-- ARGV now_ms, then the attempts: one MessagePack array of [id, name, token, outcome, a, b, c]
--      arrays (what pools send: one argument instead of seven per job), or 7 arguments each
--   complete: a = result JSON ('' = none), b = keep_ms (0 = delete now)
--   retry:    a = due_ms, b = error, c = reason
--   dead:     b = error, c = reason
--   drop:     b = error, c = reason           (a dead job of a skip_dead handler)
--   aborted:  a = keep_ms, b = message
--   requeue:  back to the front of its queue, no failure counted (shutdown)
-- Returns the ids of stale outcomes.
local now = tonumber(ARGV[1])
local stale = {}
local woken = {}

local function keep_or_delete(jk, id, keep)
  if keep <= 0 then
    redis.call('DEL', jk, key_joblog(id))
  else
    redis.call('PEXPIRE', jk, keep)
    redis.call('PEXPIRE', key_joblog(id), keep)
  end
end

local function failures(jk)
  return (tonumber(redis.call('HGET', jk, 'failures')) or 0) + 1
end

local function finish_one(id, name, token, outcome, a, b, c)
  local jk = key_job(id)
  if not is_hash(jk) or redis.call('HGET', jk, 'token') ~= token then
    stale[#stale + 1] = id
    count('stale', name, 1)
    return
  end
  redis.call('ZREM', key_running(name), id)
  -- Retire the token, so that this outcome sent again (its reply was lost) is stale.
  local f = redis.call('HMGET', jk, 'abort', 'waiters')
  redis.call('HSET', jk, 'token', '-' .. token)
  if f[1] and (outcome == 'retry' or outcome == 'requeue') then
    -- An abort was requested: it wins over another run.
    outcome, b = 'aborted', 'abort requested'
  end
  if f[1] and outcome == 'aborted' then
    a = f[1] -- the keep time the abort asked for
  end
  if f[2] and outcome ~= 'retry' and outcome ~= 'requeue' then
    local state = ({complete = 'complete', dead = 'dead', drop = 'dead', aborted = 'aborted'})[outcome]
    if outcome == 'complete' and a ~= '' then
      redis.call('PUBLISH', key_done(id), state .. '\n' .. a)
    elseif outcome ~= 'dead' then -- bury() tells the waiters of dead jobs
      redis.call('PUBLISH', key_done(id), state)
    end
  end
  if outcome == 'complete' then
    redis.call('HSET', jk, 'state', 'complete', 'finished_at', now)
    if a ~= '' then
      redis.call('HSET', jk, 'result', a)
    end
    release_unique(jk, id)
    keep_or_delete(jk, id, tonumber(b) or 0)
    count('processed', name, 1)
  elseif outcome == 'retry' then
    local due = tonumber(a) or now
    redis.call('HSET', jk, 'state', 'retry', 'error', b, 'reason', c, 'run_at', due,
      'failures', failures(jk))
    redis.call('ZADD', K_RETRY, due, id)
    wake_scheduler()
    count('failed', name, 1)
  elseif outcome == 'dead' then
    bury(id, name, c, b, now, true)
  elseif outcome == 'drop' then
    release_unique(jk, id)
    redis.call('DEL', jk, key_joblog(id))
    count('failed', name, 1)
  elseif outcome == 'aborted' then
    redis.call('HSET', jk, 'state', 'aborted', 'reason', 'aborted', 'error', b,
      'finished_at', now)
    release_unique(jk, id)
    keep_or_delete(jk, id, tonumber(a) or 0)
    count('aborted', name, 1)
  elseif outcome == 'requeue' then
    redis.call('HSET', jk, 'state', 'queued')
    redis.call('RPUSH', key_queue(name), id)
    woken[name] = true
  end
  if not woken[name] and redis.call('HEXISTS', K_LIMITS, name) == 1 then
    woken[name] = true
  end
end

if #ARGV == 2 then
  for _, o in ipairs(cmsgpack.unpack(ARGV[2])) do
    finish_one(o[1], o[2], o[3], o[4], o[5], o[6], o[7])
  end
else
  local i = 2
  while i + 6 <= #ARGV do
    finish_one(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5],
      ARGV[i + 6])
    i = i + 7
  end
end
for name in pairs(woken) do
  wake(name)
end
flush_counts(now)
return stale
