-- Helpers shared by every rota script. The key helpers (key_job, K_DEAD, ...) come
-- before this file, rendered from protocol/keys.py. Scripts never raise on bad data
-- written by others: a Redis script that errors half-way keeps its earlier writes.

local WAKE_CAP = 9

local function wake(name)
  local k = key_wake(name)
  redis.call('LPUSH', k, '1')
  redis.call('LTRIM', k, 0, WAKE_CAP)
end

local function wake_scheduler()
  redis.call('LPUSH', K_SCHED_WAKE, '1')
  redis.call('LTRIM', K_SCHED_WAKE, 0, WAKE_CAP)
end

local function is_hash(k)
  return redis.call('TYPE', k)['ok'] == 'hash'
end

-- A queue entry can be used as a job id when it is short and printable.
local function sane_id(id)
  return #id > 0 and #id <= 200 and not string.find(id, '[^%w%-%._:]')
end

local function release_unique(jk, id)
  local u = redis.call('HGET', jk, 'unique_key')
  if u and u ~= '' then
    local uk = key_unique(u)
    if redis.call('GET', uk) == id then
      redis.call('DEL', uk)
    end
  end
end

-- Counters: collect per script call, write once (total, per day, per minute).
local counts = {}
local function count(field, name, n)
  counts[field] = (counts[field] or 0) + n
  if name then
    local f = field .. ':' .. name
    counts[f] = (counts[f] or 0) + n
  end
end

-- The UTC day (YYYYMMDD) and minute (YYYYMMDDHHMM) of a time in ms: the stats buckets.
-- (Redis scripts have no os.date; this is the days-to-civil-date algorithm.)
local function buckets(ms)
  local secs = math.floor(ms / 1000)
  local z = math.floor(secs / 86400)
  local rem = secs - z * 86400
  local hh, mi = math.floor(rem / 3600), math.floor((rem % 3600) / 60)
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400 + (m <= 2 and 1 or 0)
  local day = string.format('%04d%02d%02d', y, m, d)
  return day, day .. string.format('%02d%02d', hh, mi)
end

-- Write the counters gathered by this call: totals, and the buckets of `now`.
local function flush_counts(now)
  if next(counts) == nil then
    return
  end
  local day, minute = buckets(now)
  local dk, mk = key_stats_bucket(day), key_stats_bucket(minute)
  for f, n in pairs(counts) do
    redis.call('HINCRBY', K_STATS, f, n)
    redis.call('HINCRBY', dk, f, n)
    redis.call('HINCRBY', mk, f, n)
  end
  redis.call('EXPIRE', dk, 7776000)
  redis.call('EXPIRE', mk, 7200)
end

-- Tell a client waiting on the job (client.wait) that it ended.
local function notify(jk, id, message)
  if redis.call('HEXISTS', jk, 'waiters') == 1 then
    redis.call('PUBLISH', key_done(id), message)
  end
end

-- Make a job dead with a reason. For entries that cannot be a job id, or a key that is
-- not a hash, a fresh record named after the entry's digest holds what was found.
local function bury(id, name, reason, err, now, failed)
  local jk = key_job(id)
  if not sane_id(id) or redis.call('EXISTS', jk) == 1 and not is_hash(jk) then
    local raw = id
    id = 'bad-' .. redis.sha1hex(id)
    jk = key_job(id)
    redis.call('DEL', jk)
    redis.call('HSET', jk, 'raw', string.sub(raw, 1, 1024))
  end
  redis.call('HSET', jk, 'name', name or '', 'state', 'dead', 'reason', reason,
    'error', err, 'finished_at', now)
  if failed then
    redis.call('HSET', jk, 'failures', (tonumber(redis.call('HGET', jk, 'failures')) or 0) + 1)
  end
  redis.call('ZADD', K_DEAD, now, id)
  release_unique(jk, id)
  notify(jk, id, 'dead')
  count('failed', name, 1)
  count('dead', name, 1)
  return id
end

-- Enqueue one job (the enqueue and enqueue_batch scripts). `batch` collects what to do
-- once at the end of a batch ({wake = {}, names = {}, scheduler = false}); nil does it
-- at once. Returns {id, created}.
local function enqueue_one(id, name, args, now, run_at, ukey, uttl, max_fails, timeout, batch)
  run_at, uttl = tonumber(run_at) or 0, tonumber(uttl) or 0
  if uttl <= 0 then
    uttl = 86400000
  end
  local jk = key_job(id)
  if redis.call('EXISTS', jk) == 1 then
    return {id, 0}
  end
  if ukey ~= '' then
    local uk = key_unique(ukey)
    local holder = redis.call('GET', uk)
    if holder and redis.call('EXISTS', key_job(holder)) == 1 then
      return {holder, 0}
    end
    redis.call('SET', uk, id, 'PX', uttl)
  end
  local fields = {'name', name, 'args', args, 'enqueued_at', now, 'attempts', 0,
    'failures', 0, 'lost', 0, 'token', 0}
  if ukey ~= '' then
    fields[#fields + 1] = 'unique_key'; fields[#fields + 1] = ukey
  end
  if max_fails ~= '' then
    fields[#fields + 1] = 'max_fails'; fields[#fields + 1] = max_fails
  end
  if timeout ~= '' then
    fields[#fields + 1] = 'timeout'; fields[#fields + 1] = timeout
  end
  if run_at > now then
    fields[#fields + 1] = 'state'; fields[#fields + 1] = 'scheduled'
    fields[#fields + 1] = 'run_at'; fields[#fields + 1] = run_at
    redis.call('HSET', jk, unpack(fields))
    redis.call('ZADD', K_SCHEDULED, run_at, id)
    if batch then
      batch.scheduler = true
    else
      wake_scheduler()
    end
  else
    fields[#fields + 1] = 'state'; fields[#fields + 1] = 'queued'
    redis.call('HSET', jk, unpack(fields))
    redis.call('LPUSH', key_queue(name), id)
    if batch then
      batch.wake[name] = true
    else
      wake(name)
    end
  end
  if batch then
    batch.names[name] = true
  else
    redis.call('SADD', K_NAMES, name)
  end
  return {id, 1}
end
