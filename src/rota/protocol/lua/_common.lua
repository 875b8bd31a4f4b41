-- Helpers shared by every rota script. The key helpers (key_job, K_DEAD, ...) come
-- before this file, rendered from protocol/keys.py. Scripts never raise on bad data
-- written by others: a Redis script that errors half-way keeps its earlier writes.
-- Every call starts with enter(KEYS[1]). Loaded as a function library, these locals
-- outlive a call: whatever a call gathers is emptied by the next enter().

local WAKE_CAP = 10

-- A function that makes a text from a key once and hands out the same text again, for
-- texts that do not change from call to call: kept across calls (a library's locals
-- outlive a call), MEMO_MAX at most, then started afresh.
local MEMO_MAX = 4096
local function memo(make)
  local texts, n = {}, 0
  return function(k)
    local s = texts[k]
    if not s then
      s = make(k)
      if k == k then -- NaN cannot be a table key
        if n >= MEMO_MAX then
          texts, n = {}, 0
        end
        texts[k] = s
        n = n + 1
      end
    end
    return s
  end
end

-- A number handed to redis.call is printed (with '%.17g') each time, which costs more than
-- many a command: str() prints each number once.
local str = memo(function(x) return string.format('%.17g', x) end)

-- What a fetch reads of a job, by position: a job hash is read whole (HGETALL returns
-- only the fields it holds, one pass over a small hash, where an HMGET of these 13 looks
-- each up and returns every absent one: most are absent), then placed by this table.
local READ_AT = {name = 1, state = 2, token = 3, attempts = 4, failures = 5, lost = 6,
  enqueued_at = 7, max_fails = 8, timeout = 9, deps = 10, traceparent = 11, tracestate = 12,
  args = 13}

-- A count read from a job hash: a whole number from 0 to 2^53, else 0 (garbage).
local function whole(v)
  local x = tonumber(v)
  if not x or x ~= x or x < 0 or x >= 2 ^ 53 then
    return 0
  end
  return math.floor(x)
end

-- The texts a lease and a finish write, each made once per text read (memo): the new
-- token, attempts and failures from those read (absent reads as 0: a new job's record
-- leaves zero counters out), and the token retired ('-' and the token). Most jobs carry the
-- same few values, and reading and printing numbers costs more than a command.
local next_token = memo(function(v) return str(whole(math.abs(tonumber(v) or 0)) + 1) end)
local next_count = memo(function(v) return str(whole(v) + 1) end)
local same_count = memo(function(v) return str(whole(v)) end)
local retire = memo(function(token) return '-' .. token end)

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

-- The ready set (K_READY) names the queues a fetch visits: it holds every name whose
-- queue holds jobs and is neither paused nor at its concurrency limit, and may hold a
-- few more (a fetch that finds one of those removes it). So every script that pushes
-- into a queue adds the name, unless the push found the queue holding jobs already
-- (its name is in the set then, or left it for being paused or at its limit, and
-- resume and a freed slot add it back).
local function mark_ready(name)
  redis.call('SADD', K_READY, name)
end

-- Whether a name's queue holds entries (false for a key that is not a list).
local function queue_holds(name)
  local ok, n = pcall(redis.call, 'LLEN', key_queue(name))
  return ok and n > 0
end

-- Run `cmd key item...` over a list of items, at most 1000 per call: unpack() has a limit
-- on how many values it returns. Items of ZADD come in pairs, and 1000 keeps them so.
local function call_chunked(cmd, key, items)
  for i = 1, #items, 1000 do
    redis.call(cmd, key, unpack(items, i, math.min(i + 999, #items)))
  end
end

-- Add leases (deadline, id, ...) to a running set, kept in Redis's skiplist encoding.
-- A small sorted set is a listpack, where each insert and each removal scans every entry
-- (and a lease, the latest deadline, is inserted at the far end): at a pool's usual 100-200
-- leases a name that cost more than the rest of the fetch. A member longer than
-- zset-max-listpack-value (64) makes Redis convert the set, which never converts back
-- while it holds entries: it goes first in the same ZADD, and is removed right after, so
-- no reader sees it. (Written out: a library has no string library while it loads.)
local LONG_MEMBER = '~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~' ..
  '~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~' -- 80 bytes
local function add_leases(k, entries)
  local all = {'+inf', LONG_MEMBER}
  for i = 1, #entries do
    all[i + 2] = entries[i]
  end
  call_chunked('ZADD', k, all)
  redis.call('ZREM', k, LONG_MEMBER)
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
-- Counters kept only per minute (the ms that complete jobs of a name ran): one more field
-- of the minute's hash per name and call, no write to the total and day hashes.
local minute_counts = {}
local function count_minute(field, n)
  minute_counts[field] = (minute_counts[field] or 0) + n
end
local joined = {} -- field -> memo of 'field:name'
local function count(field, name, n)
  counts[field] = (counts[field] or 0) + n
  if name then
    local join = joined[field]
    if not join then
      join = memo(function(x) return field .. ':' .. x end)
      joined[field] = join
    end
    local f = join(name)
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
  if next(counts) == nil and next(minute_counts) == nil then
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
  for f, n in pairs(minute_counts) do
    new_minute = redis.call('HINCRBY', mk, f, str(n)) == n or new_minute
  end
  if new_day then
    redis.call('EXPIRE', dk, '7776000')
  end
  if new_minute then
    redis.call('EXPIRE', mk, '7200')
  end
  counts = {}
  minute_counts = {}
end

-- Tell a client waiting on the job (client.wait) that it ended.
local function notify(jk, id, message)
  if redis.call('HEXISTS', jk, 'waiters') == 1 then
    redis.call('PUBLISH', key_done(id), message)
  end
end

-- Workflows. A job enqueued after others (its parents) waits in state 'waiting', out of
-- every queue, with 'pending' (parents not complete yet), 'after' (the parents' ids,
-- space-separated) and 'deps' = 1. A parent holds 'children' = 1 and the set
-- key_children(parent) of the jobs enqueued after it. When a parent completes, its
-- result is copied into each child ('r:<parent id>') and the child is counted down; the
-- last parent queues (or schedules) it, in the same call. A parent that ends dead or
-- aborted makes every waiting descendant dead with reason dependency_failed.
-- A group's members hold 'group'; its hash (key_group) holds the size its producer
-- declared (total), counts the members written (sent), done and failed, names its
-- callback ('then'), and key_group_results keeps the members' results. The callback
-- waits with 'waits_group'; the member that completes the group queues it.

local GROUP_KEEP = '604800000' -- a finished group's keys stay readable for 7 days

-- A waiting job whose last dependency completed: queue it, or schedule it.
local function release(kid, now)
  local kk = key_job(kid)
  redis.call('ZREM', K_WAITING, kid)
  local f = redis.call('HMGET', kk, 'name', 'run_at')
  local name, run_at = f[1] or '', tonumber(f[2]) or 0
  if run_at > now then
    redis.call('HSET', kk, 'state', 'scheduled')
    redis.call('ZADD', K_SCHEDULED, str(run_at), kid)
    wake_scheduler()
  else
    redis.call('HSET', kk, 'state', 'queued')
    if redis.call('LPUSH', key_queue(name), kid) == 1 then
      redis.call('SADD', K_NAMES, name)
      mark_ready(name)
    end
    wake(name)
  end
end

-- Make a waiting job dead because `parent` ended `why`; its own waiting descendants go
-- the same way (returned in `todo`, `whys` for the caller's loop).
local function fail_waiting(kid, parent, why, now, todo, whys)
  local kk = key_job(kid)
  local ok, f = pcall(redis.call, 'HMGET', kk, 'state', 'name', 'children', 'group')
  if not ok or f[1] ~= 'waiting' then
    return
  end
  redis.call('HSET', kk, 'state', 'dead', 'reason', 'dependency_failed',
    'error', 'parent ' .. parent .. ' ended ' .. why, 'finished_at', str(now))
  redis.call('ZREM', K_WAITING, kid)
  redis.call('ZADD', K_DEAD, str(now), kid)
  release_unique(kk, kid)
  notify(kk, kid, 'dead')
  count('failed', f[2], 1)
  count('dead', f[2], 1)
  if f[4] then
    todo.groups[#todo.groups + 1] = {f[4], kid}
  end
  if f[3] then
    todo[#todo + 1] = kid
    whys[#whys + 1] = 'dead (dependency_failed)'
  end
end

local group_ended

-- `id` ended dead or aborted (`why`): its waiting descendants, and the callbacks of the
-- groups they belong to, end dead with reason dependency_failed.
local function fail_dependents(id, why, group, now)
  local todo, whys = {id}, {why}
  todo.groups = {}
  if group then
    todo.groups[1] = {group, id}
  end
  local i, g = 1, 1
  while i <= #todo or g <= #todo.groups do
    if i <= #todo then
      local p, w = todo[i], whys[i]
      i = i + 1
      for _, kid in ipairs(redis.call('SMEMBERS', key_children(p))) do
        fail_waiting(kid, p, w, now, todo, whys)
      end
    else
      local gm = todo.groups[g]
      g = g + 1
      local cb = group_ended(gm[1], gm[2], false, '', now)
      if cb then
        fail_waiting(cb, gm[2], 'dead or aborted (a member of group ' .. gm[1] .. ')', now, todo, whys)
      end
    end
  end
end

-- A member of group `gid` ended (`ok`: complete, with `result`). Returns the callback
-- to fail when the member failed and the callback waits; queues the callback when this
-- member completed the group.
group_ended = function(gid, member, ok, result, now)
  local gk = key_group(gid)
  local n = redis.call('HINCRBY', gk, ok and 'done' or 'failed', 1)
  if ok then
    redis.call('HSET', key_group_results(gid), member, result ~= '' and result or 'null')
  end
  local f = redis.call('HMGET', gk, 'total', 'done', 'failed', 'then')
  local total, done, failed = tonumber(f[1]) or 0, tonumber(f[2]) or 0, tonumber(f[3]) or 0
  if done + failed >= total then
    for _, k in ipairs({gk, key_group_results(gid), key_group_members(gid)}) do
      redis.call('PEXPIRE', k, GROUP_KEEP)
    end
  end
  local cb = f[4]
  if not cb then
    return nil
  end
  if not ok then
    return cb
  end
  if done >= total and failed == 0 then
    local state = redis.call('HGET', key_job(cb), 'state')
    if state == 'waiting' then
      release(cb, now)
    end
  end
  return nil
end

-- `id` completed with `result`: count down the jobs that wait for it.
local function complete_dependents(id, result, children, group, now, keep)
  if group then
    group_ended(group, id, true, result, now)
  end
  if not children then
    return
  end
  local ck = key_children(id)
  for _, kid in ipairs(redis.call('SMEMBERS', ck)) do
    local kk = key_job(kid)
    local ok, f = pcall(redis.call, 'HMGET', kk, 'state', 'name')
    local state = ok and f[1]
    if ok and f[2] then -- a record (one that is queued holds no state: protocol v4)
      -- Kept by a child that failed for another parent too: a retry that re-arms it
      -- finds this parent done.
      redis.call('HSET', kk, 'r:' .. id, result ~= '' and result or 'null')
      if state == 'waiting' and redis.call('HINCRBY', kk, 'pending', -1) <= 0 then
        release(kid, now)
      end
    end
  end
  if keep > 0 then
    redis.call('PEXPIRE', ck, str(keep))
  else
    redis.call('DEL', ck)
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
  local d = redis.call('HMGET', jk, 'children', 'group')
  if d[1] or d[2] then
    fail_dependents(id, 'dead (' .. reason .. ')', d[2], now)
  end
  return id
end

-- Re-arm a job that ended dead with reason dependency_failed (an operator retries it,
-- or the parent that failed it): it waits again for what is not complete yet, or is
-- queued when nothing is left. Returns false, leaving it dead, while one of its
-- dependencies is still dead or aborted, or is gone.
local function rearm(kid, now)
  local kk = key_job(kid)
  local f = redis.call('HMGET', kk, 'after', 'waits_group')
  local pending = 0
  local wait_for = {}
  for p in string.gmatch(f[1] or '', '%S+') do
    if redis.call('HEXISTS', kk, 'r:' .. p) == 0 then
      local pk = key_job(p)
      local ok, pf = pcall(redis.call, 'HMGET', pk, 'state', 'result', 'name')
      local state = ok and pf[1] or nil
      if state == 'complete' then
        redis.call('HSET', kk, 'r:' .. p, pf[2] or 'null')
      elseif not (ok and pf[3]) or state == 'dead' or state == 'aborted' then
        return false
      else
        pending = pending + 1
        wait_for[#wait_for + 1] = p
      end
    end
  end
  if f[2] then
    local g = redis.call('HMGET', key_group(f[2]), 'total', 'done', 'failed')
    if not g[1] or (tonumber(g[3]) or 0) > 0 then
      return false
    end
    if (tonumber(g[2]) or 0) < (tonumber(g[1]) or 0) then
      pending = pending + 1
    end
  end
  for _, p in ipairs(wait_for) do
    redis.call('SADD', key_children(p), kid)
    redis.call('HSET', key_job(p), 'children', '1')
  end
  redis.call('ZREM', K_DEAD, kid)
  redis.call('HDEL', kk, 'reason', 'error', 'finished_at')
  redis.call('HSET', kk, 'failures', '0', 'lost', '0')
  if pending > 0 then
    redis.call('HSET', kk, 'state', 'waiting', 'pending', str(pending))
    redis.call('ZADD', K_WAITING, str(now), kid)
  else
    release(kid, now)
  end
  return true
end

-- A dead job was retried (or re-armed): re-arm its descendants, and its group's callback,
-- that had ended dead with reason dependency_failed because of it; the group counts it
-- failed no more. Returns how many jobs were re-armed.
local function rearm_dependents(id, now)
  local todo = {id}
  local n = 0
  local i = 1
  while i <= #todo do
    local p = todo[i]
    i = i + 1
    local kids = redis.call('SMEMBERS', key_children(p))
    local g = redis.call('HGET', key_job(p), 'group')
    if g then
      local gk = key_group(g)
      if (tonumber(redis.call('HGET', gk, 'failed')) or 0) > 0 then
        redis.call('HINCRBY', gk, 'failed', -1)
      end
      local cb = redis.call('HGET', gk, 'then')
      if cb then
        kids[#kids + 1] = cb
      end
    end
    for _, kid in ipairs(kids) do
      local ok, kf = pcall(redis.call, 'HMGET', key_job(kid), 'state', 'reason')
      if ok and kf[1] == 'dead' and kf[2] == 'dependency_failed' and rearm(kid, now) then
        n = n + 1
        todo[#todo + 1] = kid
      end
    end
  end
  return n
end

-- The first parent in `after` (space-separated ids) that has no record, and is not
-- among the ids `made` earlier in the same call; nil when every parent exists.
local function missing_parent(after, made)
  if not after or after == '' then
    return nil
  end
  for p in string.gmatch(after, '%S+') do
    if not (made and made[p]) and redis.call('EXISTS', key_job(p)) == 0 then
      return p
    end
  end
  return nil
end

-- The error reply for a job whose parent or group does not exist: nothing is written.
local function no_parent(id, parent)
  return redis.error_reply('NOPARENT parent ' .. parent .. ' of job ' .. id ..
    ' does not exist (never enqueued, or its record expired)')
end

-- Tie a new job to what it waits for (see Workflows above): `deps` = {after = ids,
-- group = the group it belongs to, group_size = that group's declared size,
-- waits_group = the group it is the callback of}, '' for none. Adds its fields to `fields`. Returns how many dependencies are not complete
-- yet, and what ended dead or aborted already (nil: nothing).
local function dependencies(id, deps, fields, now)
  local pending, failed = 0, nil
  local function add(k, v)
    fields[#fields + 1] = k
    fields[#fields + 1] = v
  end
  if (deps.after or '') ~= '' then
    add('after', deps.after)
    for p in string.gmatch(deps.after, '%S+') do
      local pk = key_job(p)
      local ok, f = pcall(redis.call, 'HMGET', pk, 'state', 'result')
      local state = ok and f[1] or nil
      if state == 'complete' then
        add('r:' .. p, f[2] or 'null')
      else
        redis.call('SADD', key_children(p), id)
        redis.call('HSET', pk, 'children', '1')
        if state == 'dead' or state == 'aborted' then
          failed = failed or ('parent ' .. p .. ' ended ' .. state)
        else
          pending = pending + 1
        end
      end
    end
  end
  local g = deps.group or ''
  if g ~= '' then
    add('group', g)
    local gk = key_group(g)
    -- `total` is the size its producer declared, set by the first member written;
    -- `sent` counts the members written. The group completes only when every one of
    -- `total` members ended, so a send cut short leaves it waiting for the rest (the
    -- same call again writes them) and never calls back with fewer results.
    redis.call('HSETNX', gk, 'total', deps.group_size)
    redis.call('HINCRBY', gk, 'sent', 1)
    redis.call('HSETNX', gk, 'created_at', str(now))
    redis.call('RPUSH', key_group_members(g), id)
  end
  g = deps.waits_group or ''
  if g ~= '' then
    add('waits_group', g)
    local gk = key_group(g)
    redis.call('HSET', gk, 'then', id)
    local f = redis.call('HMGET', gk, 'total', 'done', 'failed')
    if (tonumber(f[3]) or 0) > 0 then
      failed = failed or ('a member of group ' .. g .. ' ended dead or aborted')
    elseif (tonumber(f[2]) or 0) < (tonumber(f[1]) or 0) then
      pending = pending + 1 -- the group counts as one dependency
    end
  end
  if (deps.after or '') ~= '' or (deps.waits_group or '') ~= '' then
    add('deps', '1') -- its handler gets the results of what it waited for
  end
  if pending > 0 then
    add('pending', str(pending))
  end
  return pending, failed
end

-- Push the ids a batch queued, one LPUSH per name (and per thousand ids), in the order
-- they came, as one LPUSH each would have: the last at the head. A push that starts a
-- queue adds its name to the names and ready sets; every name pushed is woken once.
local function push_batch(batch)
  for name, ids in pairs(batch.push) do
    local qk = key_queue(name)
    local len = 0
    for i = 1, #ids, 1000 do
      len = redis.call('LPUSH', qk, unpack(ids, i, math.min(i + 999, #ids)))
    end
    if len == #ids then -- the queue was empty: this batch started it
      batch.names[name] = true
      batch.ready[#batch.ready + 1] = name
    end
    wake(name)
  end
end

-- Enqueue one job (the enqueue and enqueue_batch scripts). `batch` collects what to do
-- once at the end of a batch ({push = {}, names = {}, ready = {}, scheduler = false}:
-- push maps a name to the ids to push, names a name to whether it must be added, ready
-- lists the names whose queue it started; see push_batch); nil does it at once. `deps`: what it waits for
-- (see dependencies), nil for nothing. Returns id, created (two values: no table per job).
local function enqueue_one(id, name, args, now, run_at, ukey, uttl, max_fails, timeout, batch,
    deps, trace)
  run_at, uttl = tonumber(run_at) or 0, tonumber(uttl) or 0
  if uttl <= 0 then
    uttl = 86400000
  end
  local jk = key_job(id)
  if redis.call('EXISTS', jk) == 1 then
    return id, 0
  end
  if ukey ~= '' then
    local uk = key_unique(ukey)
    local holder = redis.call('GET', uk)
    if holder and redis.call('EXISTS', key_job(holder)) == 1 then
      return holder, 0
    end
    redis.call('SET', uk, id, 'PX', str(uttl))
  end
  -- Counters that are 0 (attempts, failures, lost) and the token 0 are left out: absent
  -- reads as 0 everywhere, and four fields less is an eighth of the record. So is the
  -- state of a queued job: a record with a name and no state is queued; every other
  -- state is written. The table is made at its usual size.
  local fields = {'name', name, 'args', args, 'enqueued_at', str(now)}
  if ukey ~= '' then
    fields[#fields + 1] = 'unique_key'; fields[#fields + 1] = ukey
  end
  if max_fails ~= '' then
    fields[#fields + 1] = 'max_fails'; fields[#fields + 1] = max_fails
  end
  if timeout ~= '' then
    fields[#fields + 1] = 'timeout'; fields[#fields + 1] = timeout
  end
  if trace then
    fields[#fields + 1] = 'traceparent'; fields[#fields + 1] = trace[1]
    if trace[2] ~= '' then
      fields[#fields + 1] = 'tracestate'; fields[#fields + 1] = trace[2]
    end
  end
  if deps then
    local pending, failed = dependencies(id, deps, fields, now)
    if failed then
      redis.call('HSET', jk, unpack(fields))
      bury(id, name, 'dependency_failed', failed, now, nil)
      return id, 1
    elseif pending > 0 then
      fields[#fields + 1] = 'state'; fields[#fields + 1] = 'waiting'
      if run_at > now then
        fields[#fields + 1] = 'run_at'; fields[#fields + 1] = str(run_at)
      end
      redis.call('HSET', jk, unpack(fields))
      redis.call('ZADD', K_WAITING, str(now), id)
      if batch then
        batch.names[name] = true
      else
        redis.call('SADD', K_NAMES, name)
      end
      return id, 1
    end
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
    redis.call('HSET', jk, unpack(fields))
    if batch then -- pushed with the rest of its name's jobs at the end (push_batch)
      local ids = table_at(batch.push, name)
      ids[#ids + 1] = id
    else
      -- The name joins the names set when its queue starts anew: while the queue holds
      -- jobs, the enqueue that started it (or a pool's start) added the name already.
      local started = redis.call('LPUSH', key_queue(name), id) == 1
      wake(name)
      if started then
        redis.call('SADD', K_NAMES, name)
        mark_ready(name)
      end
    end
  end
  return id, 1
end

-- Start a call: the namespace prefix, and no counters (a call that failed half-way may
-- have gathered some). Nothing is allocated when there is nothing to empty: a table made
-- per call costs an enqueue more than one of its commands.
local function enter(prefix)
  set_prefix(prefix)
  if next(counts) ~= nil then
    counts = {}
  end
end
