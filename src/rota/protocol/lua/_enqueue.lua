-- include: _base _wake _graph _fair
-- Shared helpers, part 5 of 6: enqueue one job (the enqueue and enqueue_batch scripts).
--
-- Keys:
--   job:<id>      hash    the new record: name, args (JSON text), enqueued_at, and when set
--                         unique_key, max_fails, timeout, traceparent, tracestate, state
--                         (absent: queued), run_at, expires, and the workflow fields of
--                         _graph.lua
--   unique:<key>  string  the id of the job holding a unique key, with its TTL (ms)
--   queue:<name>  list    the queued ids of a name: LPUSH at the head, fetched from the tail
--   names         set     every job name known
--   ready         set     as in _wake.lua
--   scheduled     zset    job ids scored by run_at (ms)
--   waiting       zset    as in _graph.lua
--   expiring      zset    job ids scored by their expiry (ms), for the promote script

-- The refusal of a call sent by a producer that routes by another generation of the
-- namespace's shard record than this shard's copy holds (see rota.protocol.reshard): an
-- error reply 'RESHARDED <record>', nil when the call may go on. The generation comes
-- after the time of the call, `now` (ARGV[4] of enqueue, ARGV[1] of enqueue_batch), as
-- '<now ms>@<generation>': `argv[at]` is left holding the time alone. A time without
-- one (a producer that passes none) is not checked.
local function resharded(argv, at)
  local now, g = string.match(argv[at] or '', '^(%d+)@(%d+)$')
  if not g then
    return nil
  end
  argv[at] = now
  local stored = redis.pcall('GET', K_SHARDS)
  if type(stored) ~= 'string' then -- absent (false), or a key of another type: unchecked
    stored = ''
  end
  -- Only a record of the documented form has a generation (as rota.protocol.reshard
  -- reads it): anything else is generation 0.
  local have = string.match(stored, '^%d+>%d+@(%d+)$') or string.match(stored, '^%d+@(%d+)$')
  if tonumber(have or '0') ~= tonumber(g) then
    return redis.error_reply('RESHARDED ' .. (stored == '' and '1' or stored))
  end
  return nil
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
-- (see dependencies), nil for nothing. `expires`: when it expires (ms), nil or '' for
-- never (so is anything that is no time: see _expiry.lua). `fkey`: its fair key (nil or
-- '' for none; stored as 'fair', see _fair.lua). Returns id, created (two values: no
-- table per job).
local function enqueue_one(id, name, args, now, run_at, ukey, uttl, max_fails, timeout, batch,
    deps, trace, expires, fkey)
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
  expires = tonumber(expires or '')
  if expires and expires > 0 and expires <= MAX_MS then
    -- Indexed, and the schedulers told, so that it ends when it expires even if its
    -- queue is long (the promote script); a fetch checks the field too.
    expires = str(math.floor(expires))
    fields[#fields + 1] = 'expires'; fields[#fields + 1] = expires
    redis.call('ZADD', K_EXPIRING, expires, id)
    if batch then
      batch.scheduler = true
    else
      wake_scheduler()
    end
  end
  if fkey and fkey ~= '' then
    fields[#fields + 1] = 'fair'; fields[#fields + 1] = fkey
  else
    fkey = nil
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
    if fkey then -- into its key's list (names, ready set and wake-up included)
      fair_push(name, fkey, id, false)
    elseif batch then -- pushed with the rest of its name's jobs at the end (push_batch)
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
