-- include: _base _fair
-- Shared helpers: fair keys, the fetch's side (fetch.lua; the rest in _fair.lua). A
-- fetch reads what it needs of each name with keys once per call (fair_state), takes
-- turns (fair_next), holding a busy key while it stays the lowest, and writes back at
-- its end (fair_end).

-- What a fetch learned of each name with keys (fair_state), written back by fair_end.
-- (A library's locals outlive a call: a fetch starts it afresh, in ready_sets.)
local fair_st = {} -- name -> {vt, plain (may hold), taken, keys = {key -> state}}

-- The ready set's names, and apart those marked (FAIR_MARK .. name): the names whose
-- keys may have jobs. Two sets (name -> true). The start of a fetch.
local function ready_sets(members)
  fair_st = {}
  local ready, fairs = {}, {}
  for _, name in ipairs(members) do
    if string.sub(name, 1, 1) == FAIR_MARK then
      fairs[string.sub(name, 2)] = true
    else
      ready[name] = true
    end
  end
  return ready, fairs
end

-- Whether keys of the name rest for their rate (the name then stays ready).
local function fair_resting(name)
  local ok, n = pcall(redis.call, 'ZCARD', key_fair_rest(name))
  return ok and n > 0
end

-- The leases of a fetch that fails are given back, each job queued again: those with a
-- key (fkey_of: id -> key) at the front of their key's list. The ids of the others (for
-- the plain queue's front), and every id (entries: deadline, id, ...).
local function fair_requeue(name, entries, fkey_of)
  local ids, all = {}, {}
  for i = #entries, 2, -2 do
    all[#all + 1] = entries[i]
    redis.call('HSET', key_job(entries[i]), 'state', 'queued')
    if fkey_of[entries[i]] then -- (fair_end adds no lease for it)
      fair_push(name, fkey_of[entries[i]], entries[i], true)
    else
      ids[#ids + 1] = entries[i]
    end
  end
  return ids, all
end

-- The fetch's side (fetch.lua). `ctx`: {now =, later = function(t)} of the call; state
-- per name read once per call and written back by fair_end.

local function fair_state(ctx, name)
  local st = fair_st[name]
  if st then
    return st
  end
  local ok, f = pcall(redis.call, 'HMGET', key_fair(name), 'vt', 'n')
  f = ok and f or {}
  st = {vt = finite_score(f[1]), vt0 = finite_score(f[1]), n = math.max(0, math.floor(finite_score(f[2]))), plain = true,
    taken = 0, keys = {}, leased = {}, touched = false,
    -- a name without settings (the usual case) reads none per key
    settings = redis.call('EXISTS', key_fair_set(name)) == 1}
  fair_st[name] = st
  -- Keys resting for their rate whose time has come are ready again; the first of the
  -- others says when the pools come back (read again at the end when one rests). Only
  -- a key with a rate (a setting) rests: a name without settings has none.
  local okr, first = false, nil
  if st.settings then
    okr, first = pcall(redis.call, 'ZRANGE', key_fair_rest(name), 0, 0, 'WITHSCORES')
  end
  if okr and first[1] then
    st.resting = true
    if finite_score(first[2]) <= ctx.now then
      local back = redis.call('ZRANGEBYSCORE', key_fair_rest(name), '-inf', ctx.now,
        'LIMIT', 0, 100)
      for _, key in ipairs(back) do
        redis.call('ZREM', key_fair_rest(name), key)
        fair_join(name, key)
      end
    end
  end
  return st
end

-- A key's state in this call: weight, slots under its limit (true: none), rate.
local function fair_key_state(ctx, name, st, key)
  local c = st.keys[key]
  if c then
    return c
  end
  local w, limit, rate, paused = 1, nil, nil, false
  if st.settings then
    w, limit, rate, paused = fair_settings(name, key)
  end
  c = {w = w, paused = paused, slots = true}
  if limit then
    local ok, running = pcall(redis.call, 'ZCARD', key_fair_running(name, key))
    c.slots = limit - (ok and running or 0)
  end
  local cnt, per = string.match(rate or '', '^([%d%.]+)/(%d+)$')
  cnt, per = tonumber(cnt), tonumber(per)
  if cnt and per and cnt > 0 and per > 0 and cnt == cnt then
    c.interval = per / cnt
    local lag = math.max(c.interval, 100)
    local okt, raw = pcall(redis.call, 'HGET', key_fair(name), 't/' .. key)
    local tat = tonumber(okt and raw) or 0
    if not (tat >= ctx.now - lag and tat <= ctx.now + lag + 60000) then
      tat = ctx.now - lag
    end
    c.tat = tat
  end
  st.keys[key] = c
  return c
end

-- Whether a key may start a job now (not paused, under its limit, not resting).
local function fair_room(ctx, c)
  return not c.paused and (c.slots == true or c.slots >= 1) and not (c.tat and c.tat > ctx.now)
end

-- How many jobs a key this call popped from has left (c.left), learned when first needed
-- (its drop) rather than by an LLEN before its first pop: its backlog, which every push
-- sets to its list's length, less this call's pops (c.popped), by one ZINCRBY that also
-- writes the backlog (c.synced). A backlog reading less than one job (or none, or no
-- number) is not trusted: the list's length says, so that no key with jobs ever leaves
-- the set of ready keys for a backlog written by hand. One that reads too many costs a
-- later fetch one empty RPOP, which drops the key.
local function fair_left(name, key, c)
  if c.left then
    return
  end
  local ok, r = pcall(redis.call, 'ZINCRBY', key_fair_backlog(name), str(-(c.popped or 0)),
    key)
  r = ok and tonumber(r)
  if r and r >= 1 and r < 1e15 and r == math.floor(r) then
    c.left, c.synced = r, true
    return
  end
  local okl, len = pcall(redis.call, 'LLEN', key_fair_queue(name, key))
  c.left, c.synced = okl and len or 0, false
end

-- How many entries the held key may give before another participant's turn comes (its
-- time under the runner-up's and the plain list's), within its slots, its rate, its jobs
-- left when known and the call's `want`: what one RPOP takes (this turn included).
local function fair_turns(ctx, st, cur, want)
  local c = cur.c
  local k = math.max(1, math.floor(tonumber(want) or 1))
  if c.slots ~= true then
    k = math.min(k, math.max(1, math.floor(c.slots)))
  end
  if c.left then
    k = math.min(k, math.max(1, c.left))
  end
  local n, s, tat = 1, cur.score + 1 / c.w, c.tat and c.tat + c.interval
  while n < k and s < cur.next and not (st.plain and st.vt <= s)
    and not (tat and tat > ctx.now) do
    n, s = n + 1, s + 1 / c.w
    tat = tat and tat + c.interval
  end
  return n
end

-- The held key's next entry: from what an earlier RPOP of this call brought (c.buf),
-- else by one RPOP of as many as its turns (fair_turns), as the fetch pops a plain
-- queue; those not used go back to the tail in their order when it is dropped
-- (fair_give_back), so no other client ever sees them gone. nil: its list is empty.
local function fair_pop(ctx, name, st, cur, want)
  local c = cur.c
  local b = c.buf
  if b and b.at <= #b then
    b.at = b.at + 1
    return b[b.at - 1]
  end
  if b and b.drained then -- (the RPOP brought fewer than asked: none is left)
    return nil
  end
  local k = fair_turns(ctx, st, cur, want)
  local ok, got = pcall(redis.call, 'RPOP', key_fair_queue(name, cur.key), str(k))
  if not ok or not got then
    c.buf = nil
    return nil
  end
  got.at, got.drained = 2, #got < k
  c.buf = got
  return got[1]
end

-- The entries of the held key's RPOP not used go back to the tail of its list.
local function fair_give_back(name, cur)
  local b = cur.c.buf
  if b and b.at <= #b then
    local rest = {}
    for i = #b, b.at, -1 do
      rest[#rest + 1] = b[i]
    end
    call_chunked('RPUSH', key_fair_queue(name, cur.key), rest)
  end
  cur.c.buf = nil
end

-- The key a fetch holds (st.cur: its key, state c, virtual time and the runner-up's)
-- goes back into the set of ready keys with its time, or leaves it with no jobs left.
-- Held, a key takes its turns while its time stays below the runner-up's without a read
-- of the set per job, its entries popped several at a time (fair_pop).
-- st.nonempty: whether the set is known to hold a key (the runner-up of the last read
-- stays in it when the key read first leaves), so that the end of the call need not ask.
local function fair_drop(name, st)
  local cur = st.cur
  if cur then
    fair_give_back(name, cur)
    fair_left(name, cur.key, cur.c)
    if cur.c.left > 0 then
      redis.call('ZADD', key_fair_keys(name), str(cur.score), cur.key)
      st.nonempty = true
    else
      redis.call('ZREM', key_fair_keys(name), cur.key)
      st.left_set, st.nonempty = true, st.other
    end
    st.cur = nil
  end
end

-- The next entry of a name with fair keys: the plain list's (via `plain`, nil when it
-- is empty) or its lowest key's; `want`: how many entries the call may still take of
-- the name. Returns the id and its key (nil: plain), or nil.
local function fair_next(ctx, name, plain, want)
  local st = fair_state(ctx, name)
  local fk = key_fair_keys(name)
  while true do
    local cur = st.cur
    if cur and not (cur.score < cur.next and cur.c.left ~= 0 and fair_room(ctx, cur.c)) then
      fair_drop(name, st)
      cur = nil
    end
    local low, key, runner_up = nil, nil, math.huge
    if cur then
      low, key = cur.score, cur.key
    else
      -- (Not by pcall: a set of keys of another type fails the fetch, whose pool then
      -- moves it away, repair.lua, and the keys it listed join again.)
      local top = redis.call('ZRANGE', fk, 0, 1, 'WITHSCORES')
      if top[1] then
        low, key = finite_score(top[2]), top[1]
        runner_up = top[4] and finite_score(top[4]) or math.huge
        st.nonempty, st.other = true, top[3] ~= nil
      else
        st.left_set, st.nonempty = true, false -- (none: the ready set's mark may go)
      end
    end
    if st.plain and (not key or st.vt <= low) then
      local id = plain()
      if id then
        st.vt = math.max(st.vt, low or st.vt) + 1 -- back from idle: no burst credit
        return id, nil
      end
      st.plain = false
    end
    if not key then
      return nil, nil
    end
    if not cur then
      local c = fair_key_state(ctx, name, st, key)
      st.touched = true
      if c.tat and c.tat > ctx.now and not c.paused then
        redis.call('ZREM', fk, key)
        redis.call('ZADD', key_fair_rest(name), str(c.tat), key)
        ctx.later(c.tat)
        st.resting, st.left_set, st.nonempty = true, true, st.other
      elseif not fair_room(ctx, c) then
        redis.call('ZREM', fk, key) -- a resume, or the finish that frees a slot, adds it back
        st.left_set, st.nonempty = true, st.other
      else
        -- (its jobs left, c.left, are learned at its drop: fair_left)
        cur = {key = key, c = c, score = low, next = runner_up}
        st.cur = cur
      end
    end
    if cur then
      local c = cur.c
      local id = fair_pop(ctx, name, st, cur, want)
      c.touched = true
      if id then
        c.popped = (c.popped or 0) + 1
        if c.left then -- known from an earlier drop in this call: counted down
          c.left, c.synced = c.left - 1, false
          if c.left <= 0 then -- counted down to none: the list says
            c.left = redis.call('LLEN', key_fair_queue(name, key))
          end
        end
        cur.score = cur.score + 1 / c.w
        st.taken = st.taken + 1
        if c.slots ~= true then
          c.slots = c.slots - 1
        end
        if c.tat then
          c.tat = c.tat + c.interval
          c.moved = true
        end
        return id, key
      end
      c.left, c.synced = 0, false -- (fair_drop removes it)
    end
  end
end

-- Whether this call knows the name's keys to have jobs ready (else nil: ask Redis).
local function fair_has(name)
  local st = fair_st[name]
  return st and (st.cur ~= nil or not st.left_set or st.nonempty) or nil
end

-- A keyed job leased by this call (its lease added at fair_end; fkey_of: id -> key).
local function fair_leased(name, key, deadline, id, fkey_of)
  fkey_of[id] = key
  local l = table_at(fair_st[name].leased, key)
  l[#l + 1] = deadline
  l[#l + 1] = id
end

-- The end of a fetch: the leases of keys (unless `leases` is false: the call leased
-- nothing after all), the virtual time and counts written back; a name with no key
-- ready or resting leaves the ready set's marks.
local function fair_end(ctx, leases)
  for name, st in pairs(fair_st) do
    fair_drop(name, st)
    for key, entries in pairs(leases and st.leased or {}) do
      pcall(call_chunked, 'ZADD', key_fair_running(name, key), entries)
    end
    for key, c in pairs(st.keys) do
      if c.moved then
        pcall(redis.call, 'HSET', key_fair(name), 't/' .. key, string.format('%.3f', c.tat))
      end
      if c.touched then
        fair_left(name, key, c) -- (known already: every key popped from was dropped)
      end
      if c.touched and not c.synced then -- its backlog, once per call (or by fair_left)
        if c.left > 0 then
          pcall(redis.call, 'ZADD', key_fair_backlog(name), c.left, key)
        else
          pcall(redis.call, 'ZREM', key_fair_backlog(name), key)
        end
      end
    end
    if st.taken > 0 or st.touched or st.vt ~= st.vt0 then -- (else: nothing changed)
      pcall(redis.call, 'HSET', key_fair(name), 'vt', str(st.vt),
        'n', str(math.max(0, st.n - st.taken)))
    end
    local ok, rest = true, {}
    if st.resting then
      ok, rest = pcall(redis.call, 'ZRANGE', key_fair_rest(name), 0, 0, 'WITHSCORES')
    end
    if ok and rest[2] then
      ctx.later(finite_score(rest[2]))
    elseif st.left_set and not st.nonempty
      and redis.call('EXISTS', key_fair_keys(name)) == 0 then
      redis.call('SREM', K_READY, FAIR_MARK .. name) -- no key left to take from
    end
  end
  fair_st = {}
end
