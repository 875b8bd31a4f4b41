-- include: _base _counts _wake _graph _fair
-- Admin: an operator's action on one job, or a clean of a set by age. Each is decided
-- here from what Redis holds at the moment of the call, so a job that a pool fetches,
-- finishes or retries meanwhile is never lost nor run twice: a job no longer where the
-- operator saw it is left alone, and the reply says so.
-- KEYS[1] namespace prefix
-- ARGV op, then per op:
--   'front', id: a queued job goes to the front of its queue (its fair key's list for a
--      keyed job), so that it is fetched next among its name's jobs: the name's plain
--      list, or its key, is given the next turn among the name's fair keys (a key that
--      is paused, at its limit or resting keeps its jobs until it may start one). A wake
--      token lets an idle pool fetch it at once. Returns 1, or 0 when the job is in no
--      queue (fetched, finished, deleted).
--   'unqueue', id: a queued job is deleted (its record, log and holds; what waits for it
--      ends dead). Returns 1, or 0 when the job is in no queue.
--   'kill', reason, error, id_1 .. id_n: jobs of the retry set go to the dead set now,
--      with that reason and error, without another try (what waits for them fails, as
--      for any dead job). An id no longer in the retry set is left alone. Returns how
--      many were killed.
--   'clean', set ('dead' | 'retry' | 'scheduled' | 'complete'), age_ms, name ('' for any),
--      start, limit: delete the jobs older than age_ms (by Redis's clock) among at most
--      `limit` entries of the set from position `start`: the dead and complete sets by
--      when the job ended (their score, oldest first), the retry and scheduled sets by
--      when the job was enqueued (entries in the set's order). A complete entry whose
--      id was enqueued again since keeps its new record. Returns {deleted, read}: the
--      caller goes on from start + read - deleted while read is `limit`.
local op = ARGV[1]
local now = server_ms()

-- What forget reads of a record, in one HMGET (by pcall: a key of another type reads
-- as no record).
local FIELDS = {'state', 'children', 'group', 'unique_key', 'expires', 'name', 'enqueued_at'}

local function fields_of(id)
  if not sane_id(id) then
    return {}
  end
  local ok, f = pcall(redis.call, 'HMGET', key_job(id), unpack(FIELDS))
  return ok and f or {}
end

-- A job deleted from a set (as delete.lua's): its holds freed; what waits for a job
-- that had not completed ends dead. Its keys (record, log, children's set) are added
-- to `keys` for the caller's DEL, unless `complete_only` and the record is no longer
-- that complete job (its id was enqueued again). `f`: its fields_of.
local function forget(id, f, keys, complete_only)
  if not sane_id(id) or (complete_only and f[1] ~= 'complete') then
    return
  end
  local jk = key_job(id)
  if f[4] or f[5] then
    release_holds(jk, id, f[4] or false, f[5] or false)
  end
  if (f[2] or f[3]) and f[1] ~= 'complete' and f[1] ~= 'dead' and f[1] ~= 'aborted' then
    fail_dependents(id, 'deleted', f[3], now)
  end
  keys[#keys + 1] = jk
  keys[#keys + 1] = key_joblog(id)
  keys[#keys + 1] = key_children(id)
end

-- DEL of many keys, 999 a command.
local function delete_keys(keys)
  for i = 1, #keys, 999 do
    redis.call('DEL', unpack(keys, i, math.min(i + 998, #keys)))
  end
end

-- A queued job's name and fair key (nil when it has none); nil when the record is not
-- that of a queued job: an entry left in a queue for a job that runs, finished or
-- waits elsewhere is not the job's place, and is left to the fetch that skips it.
local function queued(id)
  local jk = key_job(id)
  if not (sane_id(id) and is_hash(jk)) then
    return nil
  end
  local f = redis.call('HMGET', jk, 'name', 'fair', 'state')
  if not f[1] or f[1] == '' or (f[3] and f[3] ~= 'queued') then
    return nil
  end
  return f[1], f[2] ~= '' and f[2] or nil
end

-- The turn of a name's plain list among its keys' (its 'vt'; garbage: none, infinite).
local function plain_turn(name)
  local ok, vt = pcall(redis.call, 'HGET', key_fair(name), 'vt')
  return finite_score(ok and vt)
end

-- 'front': the queued job `id` of `name` (its fair key `fkey`) to the front of its queue.
local function front(id, name, fkey)
  local low = fair_min(name) -- the lowest turn among the name's ready keys (nil: none)
  local fq = fkey and key_fair_queue(name, fkey)
  local ok, gone = false, 0
  if fq then
    ok, gone = pcall(redis.call, 'LREM', fq, 0, id)
  end
  if ok and gone > 0 then
    redis.call('RPUSH', fq, id) -- the tail: the key's next
    if gone > 1 then -- (duplicate entries written by hand: one is kept)
      incr(key_fair(name), 'n', 1 - gone)
      fair_settle(name, fkey)
    end
    local okh, held = pcall(redis.call, 'ZSCORE', key_fair_keys(name), fkey)
    if okh and held then -- its key takes the next turn, before the plain list's
      local first = math.min(low, plain_turn(name))
      if tonumber(held) >= first then
        redis.call('ZADD', key_fair_keys(name), str(first - 1e-6), fkey)
      end
    end
  else -- a plain job (or a keyed one that its key's garbage list sent to the plain list)
    local qk = key_queue(name)
    ok, gone = pcall(redis.call, 'LREM', qk, 0, id)
    if not ok or gone == 0 then
      return 0
    end
    redis.call('RPUSH', qk, id) -- the tail, which a fetch pops first
    mark_ready(name)
    if low then -- the plain list takes the next turn, before every key
      if plain_turn(name) >= low then
        pcall(redis.call, 'HSET', key_fair(name), 'vt', str(low - 1e-6))
      end
    end
  end
  wake(name)
  return 1
end

-- 'unqueue': the queued job `id` of `name` deleted.
local function unqueue(id, name, fkey)
  local ok, gone = pcall(redis.call, 'LREM', key_queue(name), 0, id)
  gone = ok and gone or 0
  if fkey then -- (a keyed job sits in the plain list only when its key's list was garbage)
    gone = gone + fair_unqueue(name, fkey, id)
  end
  if gone == 0 then
    return 0
  end
  local keys = {}
  forget(id, fields_of(id), keys, false)
  delete_keys(keys)
  return 1
end

-- The actions on one queued job: on none (0) when it is no longer queued.
local on_queued = {front = front, unqueue = unqueue}

if on_queued[op] then
  local id = ARGV[2]
  local name, fkey = queued(id)
  if not name then
    return 0
  end
  return on_queued[op](id, name, fkey)
elseif op == 'kill' then
  local reason, err = ARGV[2], ARGV[3]
  local killed = 0
  for i = 4, #ARGV do
    local id = ARGV[i]
    if redis.call('ZREM', K_RETRY, id) == 1 then
      local jk = key_job(id)
      local name = is_hash(jk) and redis.call('HGET', jk, 'name') or ''
      bury(id, name or '', reason, err, now, nil)
      killed = killed + 1
    end
  end
  flush_counts(now)
  return killed
elseif op == 'clean' then
  local set, age, name = ARGV[2], tonumber(ARGV[3]), ARGV[4]
  local start, limit = tonumber(ARGV[5]), tonumber(ARGV[6])
  local z = ({dead = K_DEAD, complete = K_COMPLETE, retry = K_RETRY,
    scheduled = K_SCHEDULED})[set]
  if not z or not age or not start or not limit then
    return redis.error_reply('clean: set dead, retry, scheduled or complete, age, name, start, limit')
  end
  local cutoff = now - age
  local by_end = set == 'dead' or set == 'complete'
  local ids
  if by_end then
    ids = redis.call('ZRANGEBYSCORE', z, '-inf', str(cutoff), 'LIMIT', start, limit)
  else
    ids = redis.call('ZRANGE', z, start, start + limit - 1)
  end
  local gone, keys = {}, {}
  for _, id in ipairs(ids) do
    local f = fields_of(id)
    local old = by_end or (tonumber(f[7]) or math.huge) <= cutoff
    if old and (name == '' or f[6] == name) then
      gone[#gone + 1] = id
      forget(id, f, keys, set == 'complete')
    end
  end
  if #gone > 0 then
    call_chunked('ZREM', z, gone)
    delete_keys(keys)
  end
  local deleted = #gone
  return {deleted, #ids}
end
return redis.error_reply('operate: unknown op ' .. tostring(op))
