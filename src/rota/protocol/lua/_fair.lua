-- include: _base _wake
-- Shared helpers: fair keys. Within a job name, jobs may carry a key (a tenant); the
-- name's keys take turns by stride scheduling (smooth weighted round robin): taking a
-- job of key k adds 1 / weight(k) to k's virtual time, and the key of the lowest time
-- goes next, FIFO within a key. The name's plain list (jobs without a key) takes part as
-- one more participant of weight 1, its virtual time kept in fair:<name> 'vt'; plain
-- jobs pay nothing for it at enqueue. Nothing here scans keys: every step is O(log n).
--
-- Keys (per job name; '<name>/<key>' for a key's own):
--   fqueue:<name>/<key>  list  the key's queued ids, the next at the tail
--   frun:<name>/<key>    zset  lease deadline (ms) -> id: the key's running jobs, kept
--                              beside the name's running set (fetch, finish, reap,
--                              heartbeat), so that its count cannot drift, while a
--                              limit reaches the key (the jobs marked `flease`; none
--                              for a key without one: fair_leased, fair_keys.lua)
--   fkeys:<name>   zset  key -> virtual time: the keys with jobs to take, neither paused
--                        nor at their limit nor resting (a fetch finding one so removes it)
--   frest:<name>   zset  key -> when (ms) a key out of rate-limit slots is due again
--   fbacklog:<name> zset key -> its queued jobs (the top keys' read, fair.py)
--   fair:<name>    hash  'n' the name's keyed queued jobs, 'vt' the plain list's
--                        virtual time, 't/<key>' when a rate-limited key may start next
--   fset:<name>    hash  settings: 'w/<key>' weight (1..1000), 'l/<key>' and 'l*' (every
--                        key's default) concurrency limit (1..1e6), 'r/<key>' rate
--                        '<count>/<period ms>', 'p/<key>' paused
--   ready          set   beside the name, FAIR_MARK .. name while fkeys or frest may hold
--                        keys, so that a fetch learns it from the set it reads anyway
-- Whatever a hand wrote there that reads as no setting (NaN, 1e300, text, a key of
-- another type) reads as the default: no key, and no name, ever stops for it.

-- A score as a finite number (a hand-written -inf or text reads as 0).
local function finite_score(v)
  local x = tonumber(v)
  if not x or x ~= x or x == math.huge or x == -math.huge then
    return 0
  end
  return x
end

-- The lowest virtual time of the name's ready keys, and its key; nil when none.
local function fair_min(name)
  local ok, top = pcall(redis.call, 'ZRANGE', key_fair_keys(name), 0, 0, 'WITHSCORES')
  if not ok or not top[1] then
    return nil, nil
  end
  return finite_score(top[2]), top[1]
end

-- A key's settings: weight, concurrency limit (nil: none), rate spec (nil: none), paused.
local function fair_settings(name, key)
  local ok, v = pcall(redis.call, 'HMGET', key_fair_set(name), 'w/' .. key, 'l/' .. key,
    'l*', 'r/' .. key, 'p/' .. key)
  if not ok then
    return 1, nil, nil, false
  end
  local w = tonumber(v[1])
  if not w or not (w >= 1 and w <= 1000) then
    w = 1
  end
  local l = tonumber(v[2])
  if not l or not (l >= 1 and l <= 1000000) then
    l = tonumber(v[3])
    if not l or not (l >= 1 and l <= 1000000) then
      l = nil
    end
  end
  return w, l and math.floor(l), v[4], v[5] ~= false and v[5] ~= nil
end

-- Add one member to a sorted set that is made in Redis's skiplist encoding (see
-- add_leases): the ready keys and the backlogs are written by every fetch, several keys
-- at a time, and in a listpack (up to 128 keys) each write scans every entry. Paid once,
-- when the set is made: it stays a skiplist while it holds entries.
local function zadd_skiplist(k, score, member)
  pcall(redis.call, 'ZADD', k, '+inf', LONG_MEMBER, score, member)
  pcall(redis.call, 'ZREM', k, LONG_MEMBER)
end

-- The key joins the ready keys (unless it is a member, or paused), at the lowest virtual
-- time there (the plain list's when there is none): a key back from idle claims no
-- burst for the time it was away. The ready set learns of it. Whether the set of ready
-- keys was empty (it is then made a skiplist).
local function fair_join(name, key)
  local okp, paused = pcall(redis.call, 'HEXISTS', key_fair_set(name), 'p/' .. key)
  if okp and paused == 1 then
    return false
  end
  local low = fair_min(name)
  local fresh = not low
  if fresh then
    local okv, vt = pcall(redis.call, 'HGET', key_fair(name), 'vt')
    zadd_skiplist(key_fair_keys(name), str(finite_score(okv and vt)), key)
  else
    pcall(redis.call, 'ZADD', key_fair_keys(name), 'NX', str(low), key)
  end
  redis.call('SADD', K_READY, FAIR_MARK .. name)
  redis.call('SADD', K_NAMES, name)
  mark_ready(name)
  return fresh
end

-- Push a keyed job's id into its key's list: at the head (enqueue, promote: FIFO), or
-- at the tail (`front`: a reclaimed or requeued job runs next). The name is woken.
local function fair_push(name, key, id, front)
  local cmd = front and 'RPUSH' or 'LPUSH'
  local ok, len = pcall(redis.call, cmd, key_fair_queue(name, key), id)
  if not ok then -- the key's list written by hand with another type: the plain queue
    redis.call(cmd, key_queue(name), id)
    mark_ready(name)
    wake(name)
    return
  end
  incr(key_fair(name), 'n', 1)
  -- (the first key of the name's ready keys: its backlogs start afresh too, a skiplist)
  if len == 1 and fair_join(name, key) then
    zadd_skiplist(key_fair_backlog(name), len, key)
  else
    pcall(redis.call, 'ZADD', key_fair_backlog(name), len, key)
  end
  wake(name)
end

-- Push a job into its queue: its key's when it has one, else the plain list. Whether
-- the plain list was started (the name must join the ready set).
local function push_job(name, fkey, id, front)
  if fkey and fkey ~= '' then
    fair_push(name, fkey, id, front)
    return false
  end
  return redis.call(front and 'RPUSH' or 'LPUSH', key_queue(name), id) == 1
end

-- Which of `keys` (of one name) are among its ready keys: key -> true, read by one
-- ZMSCORE for them all (a finish of many keys pays one read per name, not one per key).
-- nil when the set cannot be read (another type): each key is then asked alone.
local function fair_held(name, keys)
  local held = {}
  for i = 1, #keys, 1000 do
    local last = math.min(i + 999, #keys)
    local ok, scores = pcall(redis.call, 'ZMSCORE', key_fair_keys(name), unpack(keys, i, last))
    if not ok then
      return nil
    end
    for j = i, last do
      if scores[j - i + 1] then
        held[keys[j]] = true
      end
    end
  end
  return held
end

-- Keyed jobs' leases ended (finish, reap, abort of a running job; `ids`: those of one
-- key, so that a finish of many pays once per key): its running set lets them go, and
-- a key with jobs left that is among neither the ready nor the resting keys (it left at
-- its limit) joins the ready keys again. Whether it joined (a pool is then woken for it).
-- `known`: fair_held's answer for the key's name when the caller read it (else nil).
local function fair_release(name, key, ids, known)
  pcall(call_chunked, 'ZREM', key_fair_running(name, key), ids)
  local ok, held = true, known and known[key]
  if not known then
    ok, held = pcall(redis.call, 'ZSCORE', key_fair_keys(name), key)
  end
  if not ok or held then -- (the usual case of a busy key: nothing more to read)
    return false
  end
  local okl, len = pcall(redis.call, 'LLEN', key_fair_queue(name, key))
  if not okl or len == 0 then -- (the usual case of a key with no job left: two reads)
    return false
  end
  local okr, resting = pcall(redis.call, 'ZSCORE', key_fair_rest(name), key)
  if not (okr and resting) then
    fair_join(name, key)
    wake(name)
    return true
  end
  return false
end

-- Jobs left a key's list other than by a fetch (delete, abort, clear): its backlog
-- follows its length, and a key left with none leaves every set of keys.
local function fair_settle(name, key)
  local ok, len = pcall(redis.call, 'LLEN', key_fair_queue(name, key))
  if ok and len > 0 then
    pcall(redis.call, 'ZADD', key_fair_backlog(name), len, key)
  else
    pcall(redis.call, 'ZREM', key_fair_backlog(name), key)
    pcall(redis.call, 'ZREM', key_fair_keys(name), key)
    pcall(redis.call, 'ZREM', key_fair_rest(name), key)
  end
end

-- A queued keyed job leaves its key's list (delete, abort): the counts follow. How many
-- entries it had there.
local function fair_unqueue(name, key, id)
  local ok, gone = pcall(redis.call, 'LREM', key_fair_queue(name, key), 0, id)
  if not ok then
    return 0
  end
  if gone > 0 then
    incr(key_fair(name), 'n', -gone)
    fair_settle(name, key)
  end
  return gone
end
