-- Helpers shared by every rota script. The key helpers (key_job, K_DEAD, ...) come
-- before this file, rendered from protocol/keys.py. Scripts never raise on bad data
-- written by others: a Redis script that errors half-way keeps its earlier writes.
-- Every call starts with enter(KEYS[1]). Loaded as a function library, these locals
-- outlive a call: whatever a call gathers is emptied by the next enter().

local WAKE_CAP = 10

-- A number handed to redis.call is printed (with '%.17g') each time, which costs more than
-- many a command. str() prints a value once per call and hands out the same text again.
local printed = {}
local function str(x)
  local s = printed[x]
  if not s then
    s = string.format('%.17g', x)
    if x == x then -- NaN cannot be a table key
      printed[x] = s
    end
  end
  return s
end

-- Push a wake token unless the list holds WAKE_CAP tokens already. The list ends exactly
-- as an LPUSH and LTRIM to WAKE_CAP would leave it, for one read instead of two writes
-- once it is full (no pool waiting). Every push counts: a token can be taken by a pool
-- that then leases other work, or is stopping, and the next push still wakes another.
local function push_token(k)
  if redis.call('LLEN', k) < WAKE_CAP then
    redis.call('LPUSH', k, '1')
  end
end

local function wake(name)
  push_token(key_wake(name))
end

local function wake_scheduler()
  push_token(K_SCHED_WAKE)
end

-- Run `cmd key item...` over a list of items, at most 1000 per call: unpack() has a limit
-- on how many values it returns. Items of ZADD come in pairs, and 1000 keeps them so.
local function call_chunked(cmd, key, items)
  for i = 1, #items, 1000 do
    redis.call(cmd, key, unpack(items, i, math.min(i + 999, #items)))
  end
end

local function is_hash(k)
  return redis.call('TYPE', k)['ok'] == 'hash'
end

-- A queue entry can be used as a job id when it is short and printable. (One anchored
-- match runs the whole entry in one go, at half the cost of searching for a bad byte.)
local function sane_id(id)
  return #id <= 200 and string.find(id, '^[%w%-%._:]+$') ~= nil
end

-- Free the job's unique key if the job still holds it. `u`: the job's unique_key field
-- when the caller read it already (false when absent), nil to read it here.
local function release_unique(jk, id, u)
  if u == nil then
    u = redis.call('HGET', jk, 'unique_key')
  end
  if u and u ~= '' then
    local uk = key_unique(u)
    if redis.call('GET', uk) == id then
      redis.call('DEL', uk)
    end
  end
end

-- The table at t[k], made on first use (ids per job name, and such).
local function table_at(t, k)
  local v = t[k]
  if not v then
    v = {}
    t[k] = v
  end
  return v
end

-- Counters: collect per script call, write once (total, per day, per minute).
local counts = {}
local per_name = {} -- field -> name -> 'field:name', joined once per call
local function count(field, name, n)
  counts[field] = (counts[field] or 0) + n
  if name then
    local of = table_at(per_name, field)
    local f = of[name]
    if not f then
      f = field .. ':' .. name
      of[name] = f
    end
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

-- Write the counters gathered by this call: totals, and the buckets of `now`. A bucket's
-- expiry is set when one of its counters starts (HINCRBY answers the amount added), which
-- the first write of a new bucket always does; later writes leave it as it is.
local function flush_counts(now)
  if next(counts) == nil then
    return
  end
  local day, minute = buckets(now)
  local dk, mk = key_stats_bucket(day), key_stats_bucket(minute)
  local new_day, new_minute = false, false
  for f, n in pairs(counts) do
    local by = str(n)
    redis.call('HINCRBY', K_STATS, f, by)
    new_day = redis.call('HINCRBY', dk, f, by) == n or new_day
    new_minute = redis.call('HINCRBY', mk, f, by) == n or new_minute
  end
  if new_day then
    redis.call('EXPIRE', dk, '7776000')
  end
  if new_minute then
    redis.call('EXPIRE', mk, '7200')
  end
end

-- Tell a client waiting on the job (client.wait) that it ended.
local function notify(jk, id, message)
  if redis.call('HEXISTS', jk, 'waiters') == 1 then
    redis.call('PUBLISH', key_done(id), message)
  end
end

-- Make a job dead with a reason. For entries that cannot be a job id, or a key that is
-- not a hash, a fresh record named after the entry's digest holds what was found.
-- `extra`: more field/value pairs to write with the rest (nil for none).
local function bury(id, name, reason, err, now, extra)
  local jk = key_job(id)
  if not sane_id(id) or redis.call('EXISTS', jk) == 1 and not is_hash(jk) then
    local raw = id
    id = 'bad-' .. redis.sha1hex(id)
    jk = key_job(id)
    redis.call('DEL', jk)
    redis.call('HSET', jk, 'raw', string.sub(raw, 1, 1024))
  end
  local fields = {'name', name or '', 'state', 'dead', 'reason', reason, 'error', err,
    'finished_at', str(now)}
  for _, v in ipairs(extra or {}) do
    fields[#fields + 1] = v
  end
  redis.call('HSET', jk, unpack(fields))
  redis.call('ZADD', K_DEAD, str(now), id)
  release_unique(jk, id)
  notify(jk, id, 'dead')
  count('failed', name, 1)
  count('dead', name, 1)
  return id
end

-- Enqueue one job (the enqueue and enqueue_batch scripts). `batch` collects what to do
-- once at the end of a batch ({wake = {}, names = {}, scheduler = false}; names maps a
-- name to whether it must be added); nil does it at once. Returns {id, created}.
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
    redis.call('SET', uk, id, 'PX', str(uttl))
  end
  local fields = {'name', name, 'args', args, 'enqueued_at', str(now), 'attempts', '0',
    'failures', '0', 'lost', '0', 'token', '0'}
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
    fields[#fields + 1] = 'run_at'; fields[#fields + 1] = str(run_at)
    redis.call('HSET', jk, unpack(fields))
    redis.call('ZADD', K_SCHEDULED, str(run_at), id)
    if batch then
      batch.scheduler = true
      batch.names[name] = true
    else
      wake_scheduler()
      redis.call('SADD', K_NAMES, name)
    end
  else
    fields[#fields + 1] = 'state'; fields[#fields + 1] = 'queued'
    redis.call('HSET', jk, unpack(fields))
    -- The name joins the names set when its queue starts anew: while the queue holds
    -- jobs, the enqueue that started it (or a pool's start) added the name already.
    local started = redis.call('LPUSH', key_queue(name), id) == 1
    if batch then
      batch.wake[name] = true
      batch.names[name] = batch.names[name] or started
    else
      wake(name)
      if started then
        redis.call('SADD', K_NAMES, name)
      end
    end
  end
  return {id, 1}
end

-- Start a call: the namespace prefix, no counters, no numbers printed yet.
local function enter(prefix)
  set_prefix(prefix)
  counts, per_name, printed = {}, {}, {}
end
