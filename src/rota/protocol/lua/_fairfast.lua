-- include: _base _fairwindow
-- Shared helpers: fair keys, the turns of a name without settings (no fset hash: every
-- key of weight 1, none limited, rate-limited nor paused), the usual case. The turns
-- are the same as _fairfetch.lua's (the lowest key goes next, one job a turn, its time
-- one on; the plain list one participant more), but planned several at a time over the
-- window's arrays, with no state per key but whether it was found empty (st.fl: 0) and
-- its time after its last turn (st.sc), and popped with one RPOP per key for all its
-- turns: the general path's steps per job (a key's state made, held, dropped, its
-- settings read) cost a keyed job more Lua than the rest of its fetch.
--
-- Nor does a plan read or write the keys' backlogs (fbacklog: the length of a key's
-- list at its last push; docs/protocol.md): a key is known to have no job left when an
-- RPOP brings fewer than asked, and only then leaves the ready keys and the backlogs. A
-- key whose last job a call took stays among the ready keys until its next turn finds
-- it empty (one RPOP more a key, once). Keeping every backlog exact cost a read and a
-- write of each key taken per call, as much as the rest of a keyed job's turn.
--
-- What a plan popped is handed out one job a call (st.q, their keys st.qk, st.qi the
-- next, st.qn the count); what the call does not use goes back to the tail of its key's
-- list at the end (fast.back), as the general path gives back what an RPOP brought.

-- (The steps in one table: a script's main function holds at most 200 locals.)
local fast = {}

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
-- Stops where the plain list's turn comes.
function fast.plan(name, st, want)
  local fl, sc, wr, qk = st.fl, st.sc, st.wr, st.qk
  local count, planned = {}, 0
  while planned < want do
    if st.wi > #st.wk then
      if not st.bk then
        break
      end
      fair_window(name, st, want - planned)
      wr = st.wr -- (the window's read wrote the changes so far: a new table)
      if st.wi > #st.wk then
        break
      end
    end
    local wk, ws, i = st.wk, st.ws, st.wi
    local key, s = wk[i], ws[i]
    if st.plain and st.vt <= s then
      break
    end
    st.wi = i + 1
    if fl[key] ~= 0 then
      count[key] = (count[key] or 0) + 1
      planned = planned + 1
      qk[planned] = key
      s = s + 1
      sc[key], wr[key] = s, s
      if not st.bk or s < st.bs then
        local at = #wk + 1
        while at > st.wi and ws[at - 1] > s do
          at = at - 1
        end
        table.insert(wk, at, key)
        table.insert(ws, at, s)
      end
    end
  end
  return count, planned
end

-- A key found with no job left (an RPOP that brought fewer than asked): it leaves the
-- ready keys and its backlog (st.fl: 0), and its time is that of the turns it gave
-- (`short` of them had no job).
function fast.empty(st, key, short)
  st.fl[key], st.wr[key] = 0, false
  st.sc[key] = st.sc[key] - short
end

-- Pop what a plan takes, in the order of its turns (st.q), so that what the call does
-- not use is its last turns: a key of one turn by one RPOP of one (no table made), one
-- of more by one RPOP of them all at its first turn.
function fast.pop(name, st, count, planned)
  local q, qk, m, got = st.q, st.qk, 0, nil
  for i = 1, planned do
    local key = qk[i]
    local k, id = count[key], nil
    if k == 1 then
      local ok, one = pcall(redis.call, 'RPOP', key_fair_queue(name, key))
      id = ok and one
      if not id then
        fast.empty(st, key, 1)
      end
    else
      got = got or {}
      local g = got[key]
      if not g then
        local ok, ids = pcall(redis.call, 'RPOP', key_fair_queue(name, key), str(k))
        g = ok and ids or {}
        if #g < k then
          fast.empty(st, key, k - #g)
        end
        g.at = 0
        got[key] = g
      end
      g.at = g.at + 1
      id = g[g.at]
    end
    if id then
      m = m + 1
      q[m], qk[m] = id, key
    end
  end
  st.qi, st.qn = 1, m
  st.taken = st.taken + m
end

-- The jobs a plan popped that the call did not use go back to the tail of their keys'
-- lists, next again, and their keys get back the turns (st.fl, st.wr).
function fast.back(name, st)
  if st.qi > st.qn then
    return
  end
  local back = {}
  for i = st.qn, st.qi, -1 do
    local ids = table_at(back, st.qk[i])
    ids[#ids + 1] = st.q[i]
  end
  for key, ids in pairs(back) do
    call_chunked('RPUSH', key_fair_queue(name, key), ids)
    st.fl[key] = nil -- (not empty, whatever an RPOP found)
    st.wr[key] = st.sc[key] - #ids
  end
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
    local count, planned = fast.plan(name, st, want)
    fast.pop(name, st, count, planned)
  end
end
