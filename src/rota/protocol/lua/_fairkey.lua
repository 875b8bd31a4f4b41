-- include: _base _fair
-- Shared helpers: fair keys, one key as a fetch takes its turns (_fairfetch.lua): its
-- state in the call, how many entries one RPOP takes, and the entries not used.

-- Whether key a sorts before key b as Redis orders members of equal score (byte by
-- byte): Lua's `<` follows the server's locale, which need not be bytes.
local function bytes_less(a, b)
  if a == b then
    return false
  end
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- Whether (score s, key k) comes before (t, l) in a sorted set's order.
local function entry_less(s, k, t, l)
  return s < t or (s == t and bytes_less(k, l))
end

-- A key's state in this call: weight, slots under its limit (true: none), rate; while
-- the fetch holds it (st.cur is this state), its key and time. (What only the held key
-- needs, the next one's time and what its RPOP brought, is kept in the name's state.)
local function fair_key_state(ctx, name, st, key)
  local c = st.keys[key]
  if c then
    return c
  end
  local w, limit, rate, paused = 1, nil, nil, false
  if st.settings then
    w, limit, rate, paused = fair_settings(name, key)
  end
  -- Every field a turn sets, made at once (false: none yet): eight, the most a table's
  -- hash part holds without the next size up (one is made per key taken). A key with a
  -- setting adds its own (paused, interval, tat, moved).
  c = {key = key, w = w, slots = true, score = 0, left = false, synced = false, popped = 0,
    touched = false}
  if paused then
    c.paused = true
  end
  if limit then
    local ok, running = pcall(redis.call, 'ZCARD', key_fair_running(name, key))
    c.slots = limit - (ok and running or 0)
  end
  local cnt, per -- (a key without a rate, the usual case, parses none)
  if rate then
    cnt, per = string.match(rate, '^([%d%.]+)/(%d+)$')
    cnt, per = tonumber(cnt), tonumber(per)
  end
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

-- What an RPOP that found nothing brought (never written to).
local EMPTY = {}

-- Whether a key may start a job now (not paused, under its limit, not resting).
local function fair_room(ctx, c)
  return not c.paused and (c.slots == true or c.slots >= 1) and not (c.tat and c.tat > ctx.now)
end

-- How many jobs a key this call popped from has left (c.left), when the window's read
-- of the backlogs (fair_window) did not say: its backlog, which every push sets to its
-- list's length, less this call's pops (c.popped), by one ZINCRBY that also writes the
-- backlog (c.synced). A backlog reading less than one job (or none, or no number) is
-- not trusted: the list's length says, so that no key with jobs ever leaves the set of
-- ready keys for a backlog written by hand. One that reads too many costs a later fetch
-- one empty RPOP, which drops the key.
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
-- time under the next key's and the plain list's), within its slots, its rate, its jobs
-- left when known and the call's `want`: what one RPOP takes (this turn included).
local function fair_turns(ctx, st, c, want)
  local k = math.max(1, math.floor(tonumber(want) or 1))
  if c.slots ~= true then
    k = math.min(k, math.max(1, math.floor(c.slots)))
  end
  if c.left then
    k = math.min(k, math.max(1, c.left))
  end
  local n, s, tat = 1, c.score + 1 / c.w, c.tat and c.tat + c.interval
  while n < k and s < st.next and not (st.plain and st.vt <= s)
    and not (tat and tat > ctx.now) do
    n, s = n + 1, s + 1 / c.w
    tat = tat and tat + c.interval
  end
  return n
end

-- The held key's next entry: from what an earlier RPOP of this call brought (st.buf),
-- else by one RPOP of as many as its turns (fair_turns), as the fetch pops a plain
-- queue; those not used go back to the tail in their order when it is dropped
-- (fair_give_back), so no other client ever sees them gone. nil: its list is empty.
-- An RPOP that may take the last of its jobs as its backlog counts them asks for one
-- more: fewer coming back says the list is empty without a read of its length.
local function fair_pop(ctx, name, st, c, want)
  local b = st.buf
  if b and st.at <= #b then
    st.at = st.at + 1
    return b[st.at - 1]
  end
  if b and st.drained then -- (the RPOP brought fewer than asked: none is left)
    return nil
  end
  local k = fair_turns(ctx, st, c, want)
  if c.left and k >= c.left then
    k = k + 1
  end
  local ok, got
  if k == 1 then -- (a reply of one id, not an array: no table made per turn)
    ok, got = pcall(redis.call, 'RPOP', key_fair_queue(name, c.key))
    if ok and got then
      st.one[1] = got
      got = st.one
    end
  else
    ok, got = pcall(redis.call, 'RPOP', key_fair_queue(name, c.key), str(k))
  end
  if not ok or not got then
    st.buf, st.at, st.drained = EMPTY, 1, true
    return nil
  end
  st.buf, st.at, st.drained = got, 2, #got < k
  return got[1]
end

-- The entries of the held key's RPOP not used go back to the tail of its list.
local function fair_give_back(name, st, c)
  local b = st.buf
  if b and st.at <= #b then
    local rest = {}
    for i = #b, st.at, -1 do
      rest[#rest + 1] = b[i]
    end
    call_chunked('RPUSH', key_fair_queue(name, c.key), rest)
  end
  st.buf = false
end
