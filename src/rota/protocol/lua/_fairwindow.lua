-- include: _base _fair
-- Shared helpers: fair keys, the window a fetch reads of a name's ready keys (its
-- lowest, a few at a time) and the writes it gathers for them, shared by the turns of
-- a name with settings (_fairfetch.lua) and without (_fairfast.lua).

-- A write of several keys of one sorted set `k`: one ZADD of every key of `map` whose
-- value is a number (above `floor` when given) and one ZREM of the others (false, or
-- at most `floor`), instead of two commands per key; by pcall when `guarded`. The
-- arguments are two arrays that every call reuses (a library's locals outlive a call),
-- filled from the first entry: a fresh array per write grew, and was rebuilt, at 1, 2,
-- 4, 8, ... entries, and was collected. What lies past the count is left from an
-- earlier write.
local zset_write
do
  local add, gone = {}, {}
  zset_write = function(k, map, floor, guarded)
    local na, ng = 0, 0
    for key, v in pairs(map) do
      if v and not (floor and v <= floor) then
        add[na + 1], add[na + 2] = str(v), key
        na = na + 2
      else
        ng = ng + 1
        gone[ng] = key
      end
    end
    if na > 0 then
      if guarded then pcall(call_chunked, 'ZADD', k, add, na) else call_chunked('ZADD', k, add, na) end
    end
    if ng > 0 then
      if guarded then pcall(call_chunked, 'ZREM', k, gone, ng) else call_chunked('ZREM', k, gone, ng) end
    end
  end
end

-- The window's changes to the set of ready keys (st.wr: key -> its new time, or false
-- when it left them), written at once. A name without settings (_fairfast.lua) keeps
-- them as the ZADD's arguments (st.wa, the first st.wn: a time and a key per turn, a
-- key's last the one that counts) and the keys found empty (st.wg, the first st.gn),
-- removed, and not written, while they are (st.fl: 0; one given back is not).
local function fair_flush(name, st)
  local wa = st.wa
  if wa then
    local n, ng = st.wn, st.gn
    if ng > 0 then -- (a key found empty is removed, not written first)
      local fl, wg, m = st.fl, st.wg, 0
      for i = 1, n, 2 do
        if fl[wa[i + 1]] ~= 0 then
          wa[m + 1], wa[m + 2] = wa[i], wa[i + 1]
          m = m + 2
        end
      end
      n, m = m, 0
      for i = 1, ng do
        if fl[wg[i]] == 0 then
          m = m + 1
          wg[m] = wg[i]
        end
      end
      ng = m
    end
    if n > 0 then
      call_chunked('ZADD', key_fair_keys(name), wa, n)
    end
    if ng > 0 then
      call_chunked('ZREM', key_fair_keys(name), st.wg, ng)
    end
    st.wn, st.gn = 0, 0
  elseif next(st.wr) ~= nil then
    local wr = st.wr
    st.wr = {}
    zset_write(key_fair_keys(name), wr, nil, false)
  end
end

-- The window: the `want` lowest keys of the set (at most 32) with their times, read by
-- one ZRANGE (and their backlogs by one ZMSCORE), and apart the next one, which bounds
-- what the call knows: a key whose new time comes before it goes back into the window,
-- in order; one whose time does not is written, and the window read again when it runs
-- out. So the call takes the keys in the set's own order (time, then key) with two
-- reads per window rather than a read and a write per key. A name without settings
-- reads the keys without their times, then the times of the first and the last (one
-- ZMSCORE), which are every one's between when they are equal, the usual case (keys
-- move by whole turns), else those between by one more: Redis prints every time it
-- replies (snprintf), which cost more than the command, and a window of 3 keys or more
-- pays a command less than it saves. (A window of 1 or 2: one ZRANGE WITHSCORES.)
local function fair_window(name, st, want)
  fair_flush(name, st)
  local w = math.min(math.max(1, math.floor(tonumber(want) or 1)), 32)
  local fk = key_fair_keys(name)
  local wk, ws = {}, {} -- (two arrays and an index: no table per key, no shift per turn)
  local n
  -- (Not by pcall: a set of keys of another type fails the fetch, whose pool then moves
  -- it away, repair.lua, and the keys it listed join again.)
  if st.settings or w < 3 then
    local top = redis.call('ZRANGE', fk, '0', str(w), 'WITHSCORES')
    n = #top / 2
    for j = 1, n do
      local x = tonumber(top[2 * j]) -- (finite_score, without a call per key)
      if not x or x ~= x or x == math.huge or x == -math.huge then
        x = 0
      end
      wk[j], ws[j] = top[2 * j - 1], x
    end
  else
    wk = redis.call('ZRANGE', fk, '0', str(w))
    n = #wk
    if n > 0 then
      local two = redis.call('ZMSCORE', fk, wk[1], wk[n])
      if two[1] == two[2] then -- (the same text: every time between is that one)
        local a = finite_score(two[1])
        for j = 1, n do
          ws[j] = a
        end
      else
        ws[1], ws[n] = finite_score(two[1]), finite_score(two[2])
        if n > 2 then
          local mid = redis.call('ZMSCORE', fk, unpack(wk, 2, n - 1))
          for j = 2, n - 1 do
            ws[j] = finite_score(mid[j - 1])
          end
        end
      end
    end
  end
  st.known, st.bk, st.bs = true, nil, nil
  if n > w then
    st.bk, st.bs = wk[n], ws[n]
    wk[n], ws[n] = nil, nil
  end
  st.wk, st.ws, st.wi = wk, ws, 1
  st.wb = false
  if #wk > 1 and st.settings then -- (one key learns it at its drop; see _fairfast.lua)
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
