-- include: _base _counts _graph
-- Shared helpers, part 6 of 6: a job's expiry (the fetch and promote scripts). A job
-- enqueued with an expiry (its record's 'expires', ms), or of a handler with a default
-- one (the fetch's rules: enqueued_at plus the default), never starts once that time
-- has passed: it ends with reason 'expired'.
--
-- Keys:
--   job:<id>   hash  the record; here its 'expires' (ms since the epoch)
--   expiring   zset  the ids of jobs enqueued with an expiry, scored by it (the promote
--                    script ends those still queued, scheduled or retrying at that time)

-- When a job expires (ms), nil for never: `raw`, its record's field, else `default` ms
-- (its handler's) after `enqueued` (its record's enqueued_at). A field that is no time
-- (text, NaN, infinity, 0 or less, past the year 9999) is no expiry: a record written by
-- hand never fails a fetch, and never ends a job early.
local function expiry_of(raw, enqueued, default)
  local at
  if raw then
    at = tonumber(raw)
  elseif default then
    at = tonumber(enqueued or '')
    at = at and at + default
  end
  if at and at > 0 and at <= MAX_MS then
    return at
  end
  return nil
end

-- End job `id` of `name`, which expired at `at` (ms) before it started: dead with reason
-- expired as bury makes a job (its dependents fail as dependency_failed), or, with
-- `drop` (a handler that keeps no dead jobs, skip_dead), deleted and counted failed as
-- the finish script's drop does. Returns the id it was kept under.
local function expire_job(id, name, at, now, drop)
  local err = 'expired at ' .. ms_text(at) .. ' ms, before it started'
  if not drop then
    return bury(id, name, 'expired', err, now, nil)
  end
  local jk = key_job(id)
  local d = redis.call('HMGET', jk, 'children', 'group', 'waiters')
  release_holds(jk, id)
  if d[3] then
    redis.call('PUBLISH', key_done(id), 'dead')
  end
  redis.call('DEL', jk, key_joblog(id))
  count('failed', name, 1)
  end_dependents(id, 'dead (expired)', d[1], d[2], now)
  return id
end
