-- include: _base _fair _fairkey
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
    -- the window (fair_window): the lowest keys read, in order (wk, their times ws;
    -- wi: the first not taken; wb: their backlogs as ZMSCORE replied, false: not read),
    -- bk and bs: the first key not read and its time (nil: none), wr: key -> its time
    -- to write, or false to remove it
    wk = {}, ws = {}, wi = 1, wb = false, known = false, bk = nil, bs = nil, wr = {},
    -- the held key's (st.cur): the next participant's time, what its RPOP brought and
    -- the first of it not used, whether that was all its list held; one: the array that
    -- holds what an RPOP of one brought
    next = 0, buf = false, at = 1, drained = false, one = {false},
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


-- The arguments of a write of several keys: [1] a ZADD's score, key, ..., [2] a ZREM's
-- keys, in two arrays that every call reuses (a library's locals outlive a call), filled
-- from the first entry: a fresh array per write grew, and was rebuilt, at 1, 2, 4, 8, ...
-- entries, and was collected. What lies past the count is left from an earlier write.
-- (One local: a script's main function holds at most 200.)
local fair_args = {{}, {}}

-- The window's changes to the set of ready keys, written: one ZADD of every new time
-- and one ZREM of the keys that left, instead of two commands per key taken.
local function fair_flush(name, st)
  if next(st.wr) == nil then
    return
  end
  local add, gone, na, ng = fair_args[1], fair_args[2], 0, 0
  for key, score in pairs(st.wr) do
    if score then
      add[na + 1], add[na + 2] = str(score), key
      na = na + 2
    else
      ng = ng + 1
      gone[ng] = key
    end
  end
  st.wr = {}
  if na > 0 then
    call_chunked('ZADD', key_fair_keys(name), add, na)
  end
  if ng > 0 then
    call_chunked('ZREM', key_fair_keys(name), gone, ng)
  end
end

-- The window: the `want` lowest keys of the set (at most 32) with their times, read by
-- one ZRANGE (and their backlogs by one ZMSCORE), and apart the next one, which bounds
-- what the call knows: a key whose new time comes before it goes back into the window,
-- in order; one whose time does not is written, and the window read again when it runs
-- out. So the call takes the keys in the set's own order (time, then key) with two
-- reads per window rather than a read and a write per key.
local function fair_window(name, st, want)
  fair_flush(name, st)
  local w = math.min(math.max(1, math.floor(tonumber(want) or 1)), 32)
  -- (Not by pcall: a set of keys of another type fails the fetch, whose pool then
  -- moves it away, repair.lua, and the keys it listed join again.)
  local top = redis.call('ZRANGE', key_fair_keys(name), 0, w, 'WITHSCORES')
  local wk, ws = {}, {} -- (two arrays and an index: no table per key, no shift per turn)
  for i = 1, math.min(#top, 2 * w), 2 do
    local j = (i + 1) / 2
    wk[j], ws[j] = top[i], finite_score(top[i + 1])
  end
  st.wk, st.ws, st.wi, st.known, st.bk, st.bs = wk, ws, 1, true, nil, nil
  if #top > 2 * w then
    st.bk, st.bs = top[2 * w + 1], finite_score(top[2 * w + 2])
  end
  st.wb = false
  if #wk > 1 then -- (one key learns it at its drop, by the write it needs anyway)
    local ok, b = pcall(redis.call, 'ZMSCORE', key_fair_backlog(name), unpack(wk))
    st.wb = ok and b -- (the reply itself, read as each key is taken)
  end
end

-- The next participant after the held key: the window's first, else its bound (its
-- time and key; nil: none).
local function fair_head(st)
  local i = st.wi
  if i <= #st.wk then
    return st.ws[i], st.wk[i]
  end
  return st.bs, st.bk
end

-- The key a fetch holds (st.cur, its state) goes back among the ready keys with its new time (the
-- window's when it comes before the bound, a write either way), or leaves them with no
-- jobs left. Held, a key takes its turns while it comes before the window's next key,
-- its entries popped several at a time (fair_pop).
local function fair_drop(name, st)
  local c = st.cur
  if not c then
    return
  end
  fair_give_back(name, st, c)
  fair_left(name, c.key, c)
  if c.left > 0 then
    st.wr[c.key] = c.score
    if not st.bk or entry_less(c.score, c.key, st.bs, st.bk) then
      local wk, ws = st.wk, st.ws
      local at = #wk + 1
      while at > st.wi and entry_less(c.score, c.key, ws[at - 1], wk[at - 1]) do
        at = at - 1
      end
      table.insert(wk, at, c.key)
      table.insert(ws, at, c.score)
      if st.wb then -- (its backlog is known: its state holds it)
        table.insert(st.wb, at, false)
      end
    end
  else
    st.wr[c.key] = false
  end
  st.cur = nil
end

-- A key leaves the ready keys (at its limit, paused, resting, or found empty).
local function fair_out(st, key)
  st.wr[key] = false
end

-- The next entry of a name with fair keys: the plain list's (via `plain`, nil when it
-- is empty) or its lowest key's; `want`: how many entries the call may still take of
-- the name. Returns the id and its key (nil: plain), or nil.
local function fair_next(ctx, name, plain, want)
  local st = fair_state(ctx, name)
  while true do
    local cur = st.cur -- (the held key's state)
    if cur then
      local hs, hk = fair_head(st)
      if not ((not hk or entry_less(cur.score, cur.key, hs, hk))
        and cur.left ~= 0 and fair_room(ctx, cur)) then
        fair_drop(name, st)
        cur = nil
      end
    end
    if not cur and st.wi > #st.wk and (st.bk or not st.known) then
      fair_window(name, st, want)
    end
    local low, key
    if cur then
      low, key = cur.score, cur.key
    elseif st.wi <= #st.wk then
      low, key = st.ws[st.wi], st.wk[st.wi]
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
      st.wi = st.wi + 1
      local c = fair_key_state(ctx, name, st, key)
      st.touched = true
      if c.tat and c.tat > ctx.now and not c.paused then
        fair_out(st, key)
        redis.call('ZADD', key_fair_rest(name), str(c.tat), key)
        ctx.later(c.tat)
        st.resting = true
      elseif not fair_room(ctx, c) then
        fair_out(st, key) -- a resume, or the finish that frees a slot, adds it back
      else
        if not c.left then -- its backlog less this call's pops, when it reads sane
          local r = st.wb and tonumber(st.wb[st.wi - 1]) -- (its place in the window)
          if r and r >= 1 and r < 1e15 and r == math.floor(r) then
            c.left, c.synced = math.max(0, r - (c.popped or 0)), false
          end
        end
        c.score, st.next = low, fair_head(st) or math.huge
        st.cur, cur = c, c
      end
    end
    if cur then
      local c = cur
      local id = fair_pop(ctx, name, st, c, want)
      c.touched = true
      if id then
        c.popped = (c.popped or 0) + 1
        if c.left then -- counted down; at none, a fuller list than counted says so
          c.left, c.synced = c.left - 1, false
          local b = st.buf
          if c.left <= 0 and not (st.drained and st.at > #b) then
            c.left = redis.call('LLEN', key_fair_queue(name, key)) + #b - st.at + 1
          end
        end
        c.score = c.score + 1 / c.w
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
  return st and st.known and (st.cur ~= nil or st.wi <= #st.wk or st.bk ~= nil) or nil
end

-- Leases of one key in one call from which its running set is made a skiplist (a
-- command more, once while it holds entries): a listpack scans every entry per lease
-- added and removed, which for a busy key's tens of leases cost more than the rest of
-- its jobs' fetch. A key of a lease or two keeps the listpack, cheaper at that size.
local RUN_SKIPLIST = 4

-- A keyed job leased by this call (fkey_of: id -> key); its lease is added to its key's
-- running set at fair_end, and its record marked `flease` (what tells the finish and
-- the heartbeat that there is a lease to end or extend), only when a limit
-- reaches the key: no running set is made and deleted per job, and the finish has
-- nothing to do, for a key that no limit counts (a limit set later counts the key's
-- running jobs from the name's running set, fair_keys.lua).
local function fair_leased(name, key, deadline, id, fkey_of)
  fkey_of[id] = key
  local st = fair_st[name]
  if st.keys[key].slots == true then
    return
  end
  redis.call('HSET', key_job(id), 'flease', '1')
  local l = table_at(st.leased, key)
  l[#l + 1] = deadline
  l[#l + 1] = id
end

-- The end of a fetch: the leases of keys (unless `leases` is false: the call leased
-- nothing after all), the window's changes, the backlogs of the keys taken from (one
-- ZADD and one ZREM), the virtual time and counts written back; a name with no key
-- ready or resting leaves the ready set's marks.
local function fair_end(ctx, leases)
  for name, st in pairs(fair_st) do
    fair_drop(name, st)
    fair_flush(name, st)
    for key, entries in pairs(leases and st.leased or {}) do
      if #entries >= 2 * RUN_SKIPLIST then -- a busy key's: see add_leases
        pcall(add_leases, key_fair_running(name, key), entries)
      else
        pcall(call_chunked, 'ZADD', key_fair_running(name, key), entries)
      end
    end
    local add, gone, na, ng = fair_args[1], fair_args[2], 0, 0
    for key, c in pairs(st.keys) do
      if c.moved then
        pcall(redis.call, 'HSET', key_fair(name), 't/' .. key, string.format('%.3f', c.tat))
      end
      if c.touched and not c.synced then -- (known: every key popped from was dropped)
        if c.left > 0 then
          add[na + 1], add[na + 2] = str(c.left), key
          na = na + 2
        else
          ng = ng + 1
          gone[ng] = key
        end
      end
    end
    if na > 0 then
      pcall(call_chunked, 'ZADD', key_fair_backlog(name), add, na)
    end
    if ng > 0 then
      pcall(call_chunked, 'ZREM', key_fair_backlog(name), gone, ng)
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
    elseif st.known and not fair_has(name)
      and redis.call('EXISTS', key_fair_keys(name)) == 0 then
      redis.call('SREM', K_READY, FAIR_MARK .. name) -- no key left to take from
    end
  end
  fair_st = {}
end
