-- include: _base _fairwindow
-- Shared helpers: fair keys, the turns of a name without settings (no fset hash: every
-- key of weight 1, none limited, rate-limited nor paused), the usual case. The turns
-- are the same as _fairfetch.lua's (the lowest key goes next, one job a turn, its time
-- one on; the plain list one participant more), but planned several at a time over the
-- window's arrays, with no state per key but whether it was found empty (st.fl: 0),
-- each turn's key and its time after it (st.qk, st.qs) and the writes that follow
-- (st.wa, st.wg: fair_flush), and popped with one RPOP per key for all its turns (or
-- an LMPOP for several keys, fast.pop_many): the general path's steps per job (a key's
-- state made, held, dropped, its settings read) cost a keyed job more Lua than the
-- rest of its fetch.
--
-- Nor does a plan read or write the keys' backlogs (fbacklog: the length of a key's
-- list at its last push; docs/protocol.md): a key is known to have no job left when an
-- RPOP (or LMPOP) brings fewer than asked, and only then leaves the ready keys and the
-- backlogs. A key whose last job a call took stays among the ready keys until its next
-- turn finds it empty (one RPOP more a key, once, or its share of an LMPOP). Keeping
-- every backlog exact cost a read and a write of each key taken per call, as much as
-- the rest of a keyed job's turn.
--
-- What a plan popped is handed out one job a call (st.q, their keys st.qk, st.qi the
-- next, st.qn the count); what the call does not use goes back to the tail of its key's
-- list at the end (fast.back), as the general path gives back what an RPOP brought.

-- (The steps in one table: a script's main function holds at most 200 locals.)
local fast = {}

-- The arrays a name's plans fill (st.q, qk, qs, wa, wg), reused by every call (a
-- library's locals outlive a call; 64 names at most, then started afresh): what lies
-- past their counts (st.qn, wn, gn) is left from an earlier call. Arrays made per call
-- grew, and were rebuilt, at 1, 2, 4, 8, ... entries, and were collected.
fast.pools, fast.npools = {}, 0
function fast.pool(name)
  local p = fast.pools[name]
  if not p then
    if fast.npools >= 64 then
      fast.pools, fast.npools = {}, 0
    end
    p = {{}, {}, {}, {}, {}}
    fast.pools[name], fast.npools = p, fast.npools + 1
  end
  return p[1], p[2], p[3], p[4], p[5]
end

-- The plain list's turn (a name's jobs without a key) when it comes before the lowest
-- key's time `low` (nil: no key ready): its next id, or nil, and then it takes no more
-- turns in this call. (Shared with the turns of _fairfetch.lua.)
function fast.plain(st, plain, low)
  if st.plain and (not low or st.vt <= low) then
    local id = plain()
    if id then
      st.vt = math.max(st.vt, low or st.vt) + 1 -- back from idle: no burst credit
      return id
    end
    st.plain = false
  end
  return nil
end

-- Plan up to `want` turns from the window: the key of each turn in order (st.qk), and
-- key -> its turns, and how many. A key found empty in this call takes none; one whose
-- new time comes before the window's bound goes back into the window (ties after the
-- keys of the same time), others are written and read again when the window runs out.
-- Stops where the plain list's turn comes. Returns how many, and whether a key may have
-- more than one (`multi`: only a key put back into the window, or one read again in a
-- window read during the plan, can: the keys of one read are distinct; fast.pop counts
-- them then, else each has one).
fast.count, fast.got, fast.at, fast.busy, fast.lk, fast.args = {}, {}, {}, false, {}, {}
function fast.plan(name, st, want)
  local fl, qk, qs, wa = st.fl, st.qk, st.qs, st.wa
  local wk, ws, wi, bk, bs = st.wk, st.ws, st.wi, st.bk, st.bs
  local n, pl, vt, planned, wn, multi = #wk, st.plain, st.vt, 0, st.wn, false
  local ls, lt -- (the last time written, and its text: the keys of a window share a few)
  while planned < want do
    if wi > n then
      if not bk then
        break
      end
      st.wn, multi = wn, multi or planned > 0
      fair_window(name, st, want - planned) -- (which writes the changes so far)
      wk, ws, wi, bk, bs = st.wk, st.ws, st.wi, st.bk, st.bs
      n, wn = #wk, st.wn
      if wi > n then
        break
      end
    end
    local key, s = wk[wi], ws[wi]
    if pl and vt <= s then
      break
    end
    wi = wi + 1
    if fl[key] ~= 0 then
      planned = planned + 1
      s = s + 1
      qk[planned], qs[planned] = key, s
      if s ~= ls then
        ls, lt = s, str(s)
      end
      wa[wn + 1], wa[wn + 2] = lt, key
      wn = wn + 2
      if not bk or s < bs then -- (back into the window, after the keys of its time)
        local at = n + 1
        while at > wi and ws[at - 1] > s do
          wk[at], ws[at] = wk[at - 1], ws[at - 1]
          at = at - 1
        end
        wk[at], ws[at] = key, s
        n, multi = n + 1, true
      end
    end
  end
  st.wi, st.wn = wi, wn
  return planned, multi
end

-- A key found with no job left (an RPOP that brought fewer than asked): it leaves the
-- ready keys (st.wg, removed after the writes) and its backlog (st.fl: 0).
function fast.empty(st, key)
  st.fl[key] = 0
  local n = st.gn + 1
  st.wg[n], st.gn = key, n
end

-- Pop the turns of a plan of one turn a key of which the name's count of keyed jobs
-- (st.n, less those this call took: `left`) says that most keys have none left: by
-- LMPOP over the next keys to pop, in the order of their turns, which pops the next job
-- of the first of them that has one and names it (those before it are empty). A key
-- whose last job a call took is found empty at its next turn, and when the jobs run
-- out (a queue that keeps up with its producers) most keys of a plan are: an RPOP each
-- cost a command per key, an LMPOP costs one and a little per key it names. It names
-- as many as one job is expected in (the plan's keys over `left`; all of them when the
-- count says none is left), half as many after one whose first key had a job. (Redis
-- 7: LMPOP. A count that reads wrong costs commands, never a job nor a turn: Redis
-- says which keys are empty. An error, a key of another type: one RPOP a key from
-- there on.) Returns the first turn not popped (planned + 1: all were), and the count
-- of jobs popped.
function fast.pop_many(name, st, planned, left)
  local q, qk, qs, lk, args = st.q, st.qk, st.qs, fast.lk, fast.args
  for i = 1, planned do
    lk[i] = key_fair_queue(name, qk[i])
  end
  local m, i, span = 0, 1, math.floor(planned / math.max(1, left))
  while i <= planned do
    local na, first = 0, i
    for j = i, math.min(i + span - 1, planned) do
      na = na + 1
      args[na] = lk[j]
    end
    args[na + 1] = 'RIGHT'
    local r = redis.pcall('LMPOP', str(na), unpack(args, 1, na + 1))
    if type(r) == 'table' and r.err then
      break
    end
    local from, id = r and r[1], r and r[2] and r[2][1]
    local last = first + na - 1
    while i <= last and lk[i] ~= from do
      fast.empty(st, qk[i])
      i = i + 1
    end
    if i <= last then -- (else none had a job: LMPOP pops from the keys named only)
      if i == first then -- (the first key named had a job: name fewer)
        span = math.max(1, math.floor(span / 2))
      end
      m = m + 1
      q[m], qk[m], qs[m] = id, qk[i], qs[i]
      i = i + 1
    end
  end
  return i, m
end

-- Pop what a plan takes, in the order of its turns (st.q), so that what the call does
-- not use is its last turns: a key of one turn by one RPOP of one (no table made), one
-- of more by one RPOP of them all at its first turn (kept in fast.got, the next at
-- fast.at, its turns left as a negative count; the turns of each key counted first
-- in fast.count, a table every plan reuses, when a key may have several). Empties the
-- tables it used.
function fast.pop(name, st, planned, multi)
  local q, qk, qs, m, got, at = st.q, st.qk, st.qs, 0, fast.got, fast.at
  local first, count = 1, fast.count
  local left = st.n - st.taken
  if multi then
    if fast.busy then -- (a call that failed between a count and its pops left it)
      count, got, at = {}, {}, {}
      fast.count, fast.got, fast.at = count, got, at
    end
    fast.busy = true
    multi = false
    for i = 1, planned do
      local key = qk[i]
      local c = count[key]
      count[key], multi = (c or 0) + 1, multi or c ~= nil
    end
    if not multi then -- (none had several after all)
      for i = 1, planned do
        count[qk[i]] = nil
      end
    end
  end
  if not multi and left * 2 < planned and planned <= 1000 and redis.REDIS_VERSION_NUM then
    first, m = fast.pop_many(name, st, planned, left)
  end
  for i = first, planned do
    local key = qk[i]
    local k, id = 1, nil
    if multi then
      k = count[key]
    end
    if k == 1 then
      if multi then
        count[key] = nil
      end
      local ok, one = pcall(redis.call, 'RPOP', key_fair_queue(name, key))
      id = ok and one
      if not id then
        fast.empty(st, key)
      end
    elseif k > 1 then
      local ok, ids = pcall(redis.call, 'RPOP', key_fair_queue(name, key), str(k))
      local g = ok and ids or false
      local n = g and #g or 0
      if n < k then
        fast.empty(st, key)
      end
      id = g and g[1]
      got[key], at[key], count[key] = g, 2, 1 - k
    else
      local j, g = at[key], got[key]
      id = g and g[j]
      if k == -1 then
        got[key], at[key], count[key] = nil, nil, nil
      else
        at[key], count[key] = j + 1, k + 1
      end
    end
    if id then
      m = m + 1
      if m == i then -- (the usual case: no turn before it was found empty)
        q[m] = id
      else
        q[m], qk[m], qs[m] = id, key, qs[i]
      end
    end
  end
  fast.busy = false
  st.qi, st.qn = 1, m
  st.taken = st.taken + m
end

-- The jobs a plan popped that the call did not use go back to the tail of their keys'
-- lists, next again, and their keys get back the turns (st.fl, and the time of each
-- before its first turn not used: that after its last one, st.qs, less those).
function fast.back(name, st)
  if st.qi > st.qn then
    return
  end
  local back, last = {}, {}
  for i = st.qn, st.qi, -1 do
    local key = st.qk[i]
    local ids = back[key]
    if not ids then
      ids = {}
      back[key], last[key] = ids, st.qs[i]
    end
    ids[#ids + 1] = st.q[i]
  end
  local wa, wn = st.wa, st.wn
  for key, ids in pairs(back) do
    call_chunked('RPUSH', key_fair_queue(name, key), ids)
    st.fl[key] = nil -- (not empty, whatever an RPOP found)
    wa[wn + 1], wa[wn + 2] = str(last[key] - #ids), key
    wn = wn + 2
  end
  st.wn = wn
  st.taken = st.taken - (st.qn - st.qi + 1)
  st.qi, st.qn = 1, 0
end

-- The next entry of a name without settings (see fair_next): a planned job, the plain
-- list's when its turn comes, or a new plan. Returns the id and its key (nil: plain),
-- or nil.
local function fair_fast(name, st, plain, want)
  while true do
    local i = st.qi
    if i <= st.qn then
      st.qi = i + 1
      return st.q[i], st.qk[i]
    end
    if st.wi > #st.wk and (st.bk or not st.known) then
      fair_window(name, st, want)
    end
    local low = st.ws[st.wi]
    local id = fast.plain(st, plain, low)
    if id then
      return id, nil
    end
    if not low then
      return nil, nil
    end
    local planned, multi = fast.plan(name, st, want)
    fast.pop(name, st, planned, multi)
  end
end
