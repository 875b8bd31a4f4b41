-- include: _base _fair _fairkey _fairwindow _fairfast
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
  local ok, f = pcall(redis.call, 'HMGET', key_fair(name), 'vt', 'n')
  f = ok and f or {}
  local vt = finite_score(f[1])
  local st = {vt = vt, vt0 = vt, n = math.max(0, math.floor(finite_score(f[2]))), plain = true,
    taken = 0, touched = false,
    -- a name without settings (the usual case) reads none per key, and takes its turns
    -- in _fairfast.lua
    settings = redis.call('EXISTS', key_fair_set(name)) == 1,
    -- the window (fair_window): the lowest keys read, in order (wk, their times ws;
    -- wi: the first not taken; wb: their backlogs as ZMSCORE replied, false: not read),
    -- bk and bs: the first key not read and its time (nil: none), wr (a name with
    -- settings): key -> its time to write, or false to remove it
    wk = {}, ws = {}, wi = 1, wb = false, known = false,
    -- the jobs a plan of _fairfast.lua popped (q, their keys qk, the next qi, the count qn)
    qi = 1, qn = 0}
  if st.settings then
    -- each key's state (fair_key_state), the leases of keys a limit reaches, the
    -- backlogs to write (fl: key -> its jobs left); the held key's (st.cur): the next
    -- participant's time, what its RPOP brought and the first of it not used, whether
    -- that was all its list held; one: the array that holds what an RPOP of one brought
    st.keys, st.leased, st.fl, st.next, st.buf, st.at, st.drained, st.one, st.wr =
      {}, {}, {}, 0, false, 1, false, {false}, {}
  else
    -- the keys found empty (fl: key -> 0, their backlogs removed at the end), each
    -- planned turn's key's time after it (qs), the writes to the ready keys (wa, wn, wg,
    -- gn: see fair_flush), _fairfast.lua; (EMPTY: no key state, no lease, never written
    -- to)
    st.keys, st.leased, st.fl, st.wn, st.gn = EMPTY, EMPTY, {}, 0, 0
    st.q, st.qk, st.qs, st.wa, st.wg = fast.pool(name)
  end
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

-- The next entry of a name with fair keys: the plain list's (via `plain`, nil when it
-- is empty) or its lowest key's; `want(name)`: how many entries the call may still take
-- of the name. Returns the id and its key (nil: plain), or nil.
local function fair_next(ctx, name, plain, want)
  local st = fair_st[name] or fair_state(ctx, name)
  local i = st.qi -- (a job a plan of _fairfast.lua popped: the usual case, first)
  if i <= st.qn then
    st.qi = i + 1
    return st.q[i], st.qk[i]
  end
  want = want(name) -- (asked only here: a planned job needs it not)
  if not st.settings then
    return fair_fast(name, st, plain, want)
  end
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
    local id = fast.plain(st, plain, key and low)
    if id then
      return id, nil
    end
    if not key then
      return nil, nil
    end
    if not cur then
      st.wi = st.wi + 1
      local c = fair_key_state(ctx, name, st, key)
      st.touched = true
      if c.tat and c.tat > ctx.now and not c.paused then
        st.wr[key] = false -- (leaves the ready keys)
        redis.call('ZADD', key_fair_rest(name), str(c.tat), key)
        ctx.later(c.tat)
        st.resting = true
      elseif not fair_room(ctx, c) then
        st.wr[key] = false -- a resume, or the finish that frees a slot, adds it back
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
  return st and (st.qi <= st.qn
    or st.known and (st.cur ~= nil or st.wi <= #st.wk or st.bk ~= nil)) or nil
end

-- Leases of one key in one call from which its running set is made a skiplist (a
-- command more, once while it holds entries): a listpack scans every entry per lease
-- added and removed, which for a busy key's tens of leases cost more than the rest of
-- its jobs' fetch. A key of a lease or two keeps the listpack, cheaper at that size.
local RUN_SKIPLIST = 4

-- A keyed job of a name with settings leased by this call (the fetch notes every keyed
-- one's key, in fkey_of); its lease is added to its key's running set at fair_end, and
-- its record marked `flease` (what tells the finish and the heartbeat that there is a
-- lease to end or extend), only when a limit reaches the key: no running set is made
-- and deleted per job, and the finish has nothing to do, for a key that no limit
-- counts (a limit set later counts the key's running jobs from the name's running set,
-- fair_keys.lua). A name without settings has no limit: the fetch calls none.
local function fair_leased(name, key, deadline, id)
  local st = fair_st[name]
  local c = st.keys[key]
  if c.slots == true then
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
    fast.back(name, st)
    fair_flush(name, st)
    for key, entries in pairs(leases and st.leased or {}) do
      if #entries >= 2 * RUN_SKIPLIST then -- a busy key's: see add_leases
        pcall(add_leases, key_fair_running(name, key), entries)
      else
        pcall(call_chunked, 'ZADD', key_fair_running(name, key), entries)
      end
    end
    local fl = st.fl -- (a name without settings: _fairfast.lua keeps it as it goes)
    for key, c in pairs(st.keys) do
      if c.moved then
        pcall(redis.call, 'HSET', key_fair(name), 't/' .. key, string.format('%.3f', c.tat))
      end
      if c.touched and not c.synced then -- (known: every key popped from was dropped)
        fl[key] = c.left
      end
    end
    zset_write(key_fair_backlog(name), fl, 0, true)
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
