-- include: _base _counts _wake _fair
-- Shared helpers, part 4 of 6: the workflow graph (jobs that wait for others, groups
-- and their callbacks), and bury, which makes a job dead and fails what waits for it.
--
-- Keys:
--   job:<id>           hash  a job's record; here its workflow fields: 'after' (the
--                            parents' ids, space-separated), 'pending' (dependencies not
--                            complete yet), 'deps' = 1, 'children' = 1 (it has some),
--                            'r:<parent id>' (a parent's result JSON), 'group',
--                            'waits_group', 'run_at', and state, reason, error, finished_at
--   children:<id>      set   the ids of the jobs enqueued after it
--   group:<gid>        hash  total (declared size), sent, done, failed, then (the
--                            callback's id), created_at
--   gresults:<gid>     hash  member id -> its result JSON ('null' for none)
--   gmembers:<gid>     list  the members' ids, in the order written
--   waiting            zset  waiting job ids, scored by when they started waiting (ms)
--   scheduled          zset  job ids scored by run_at (ms)
--   dead               zset  dead job ids scored by when they ended (ms)
--   queue:<name>, names, unique:<key>: as in _wake.lua, _enqueue.lua and _base.lua

-- Workflows. A job enqueued after others (its parents) waits in state 'waiting', out of
-- every queue, with 'pending' (parents not complete yet), 'after' (the parents' ids,
-- space-separated) and 'deps' = 1. A parent holds 'children' = 1 and the set
-- key_children(parent) of the jobs enqueued after it. When a parent completes, its
-- result is copied into each child ('r:<parent id>') and the child is counted down; the
-- last parent queues (or schedules) it, in the same call. A parent that ends dead or
-- aborted makes every waiting descendant dead with reason dependency_failed.
-- A group's members hold 'group'; its hash (key_group) holds the size its producer
-- declared (total), counts the members written (sent), done and failed, names its
-- callback ('then'), and key_group_results keeps the members' results. The callback
-- waits with 'waits_group'; the member that completes the group queues it.

local GROUP_KEEP = '604800000' -- a finished group's keys stay readable for 7 days

-- A waiting job whose last dependency completed: queue it, or schedule it.
local function release(kid, now)
  local kk = key_job(kid)
  redis.call('ZREM', K_WAITING, kid)
  local f = redis.call('HMGET', kk, 'name', 'run_at', 'fair')
  local name, run_at = f[1] or '', tonumber(f[2]) or 0
  if run_at > now then
    redis.call('HSET', kk, 'state', 'scheduled')
    redis.call('ZADD', K_SCHEDULED, str(run_at), kid)
    wake_scheduler()
  else
    redis.call('HSET', kk, 'state', 'queued')
    if push_job(name, f[3], kid, false) then -- its key's list (_fair.lua), or the queue
      redis.call('SADD', K_NAMES, name)
      mark_ready(name)
    end
    wake(name)
  end
end

-- Make a waiting job dead because `parent` ended `why`; its own waiting descendants go
-- the same way (returned in `todo`, `whys` for the caller's loop).
local function fail_waiting(kid, parent, why, now, todo, whys)
  local kk = key_job(kid)
  local ok, f = pcall(redis.call, 'HMGET', kk, 'state', 'name', 'children', 'group')
  if not ok or f[1] ~= 'waiting' then
    return
  end
  redis.call('HSET', kk, 'state', 'dead', 'reason', 'dependency_failed',
    'error', 'parent ' .. parent .. ' ended ' .. why, 'finished_at', str(now))
  redis.call('ZREM', K_WAITING, kid)
  redis.call('ZADD', K_DEAD, str(now), kid)
  release_holds(kk, kid)
  notify(kk, kid, 'dead')
  count('failed', f[2], 1)
  count('dead', f[2], 1)
  if f[4] then
    todo.groups[#todo.groups + 1] = {f[4], kid}
  end
  if f[3] then
    todo[#todo + 1] = kid
    whys[#whys + 1] = 'dead (dependency_failed)'
  end
end

local group_ended

-- `id` ended dead or aborted (`why`): its waiting descendants, and the callbacks of the
-- groups they belong to, end dead with reason dependency_failed.
local function fail_dependents(id, why, group, now)
  local todo, whys = {id}, {why}
  todo.groups = {}
  if group then
    todo.groups[1] = {group, id}
  end
  local i, g = 1, 1
  while i <= #todo or g <= #todo.groups do
    if i <= #todo then
      local p, w = todo[i], whys[i]
      i = i + 1
      for _, kid in ipairs(redis.call('SMEMBERS', key_children(p))) do
        fail_waiting(kid, p, w, now, todo, whys)
      end
    else
      local gm = todo.groups[g]
      g = g + 1
      local cb = group_ended(gm[1], gm[2], false, '', now)
      if cb then
        fail_waiting(cb, gm[2], 'dead or aborted (a member of group ' .. gm[1] .. ')', now, todo, whys)
      end
    end
  end
end

-- `id` ended for good (aborted, or dropped: it is never retried): when it has children
-- or a group, they fail as fail_dependents says, and its set of children goes.
local function end_dependents(id, why, children, group, now)
  if children or group then
    fail_dependents(id, why, group, now)
    redis.call('DEL', key_children(id))
  end
end

-- A member of group `gid` ended (`ok`: complete, with `result`). Returns the callback
-- to fail when the member failed and the callback waits; queues the callback when this
-- member completed the group.
group_ended = function(gid, member, ok, result, now)
  local gk = key_group(gid)
  local n = incr(gk, ok and 'done' or 'failed', 1)
  if ok then
    redis.call('HSET', key_group_results(gid), member, result ~= '' and result or 'null')
  end
  local f = redis.call('HMGET', gk, 'total', 'done', 'failed', 'then')
  local total, done, failed = tonumber(f[1]) or 0, tonumber(f[2]) or 0, tonumber(f[3]) or 0
  if done + failed >= total then
    for _, k in ipairs({gk, key_group_results(gid), key_group_members(gid)}) do
      redis.call('PEXPIRE', k, GROUP_KEEP)
    end
  end
  local cb = f[4]
  if not cb then
    return nil
  end
  if not ok then
    return cb
  end
  if done >= total and failed == 0 then
    local state = redis.call('HGET', key_job(cb), 'state')
    if state == 'waiting' then
      release(cb, now)
    end
  end
  return nil
end

-- `id` completed with `result`: count down the jobs that wait for it.
local function complete_dependents(id, result, children, group, now, keep)
  if group then
    group_ended(group, id, true, result, now)
  end
  if not children then
    return
  end
  local ck = key_children(id)
  for _, kid in ipairs(redis.call('SMEMBERS', ck)) do
    local kk = key_job(kid)
    local ok, f = pcall(redis.call, 'HMGET', kk, 'state', 'name')
    local state = ok and f[1]
    if ok and f[2] then -- a record (one that is queued holds no state: protocol v4)
      -- Kept by a child that failed for another parent too: a retry that re-arms it
      -- finds this parent done.
      redis.call('HSET', kk, 'r:' .. id, result ~= '' and result or 'null')
      if state == 'waiting' and incr(kk, 'pending', -1) <= 0 then
        release(kid, now)
      end
    end
  end
  if keep > 0 then
    redis.call('PEXPIRE', ck, str(keep))
  else
    redis.call('DEL', ck)
  end
end

-- Make a job dead with a reason. For entries that cannot be a job id, or a key that is
-- not a hash, a fresh record named after the entry's digest holds what was found.
-- `extra`: more field/value pairs to write with the rest (nil for none).
local function bury(id, name, reason, err, now, extra)
  local jk = key_job(id)
  if not sane_id(id) or redis.call('EXISTS', jk) == 1 and not is_hash(jk) then
    local raw = id
    id = 'bad-' .. redis.sha1hex(id)
    jk = key_job(id)
    redis.call('DEL', jk)
    redis.call('HSET', jk, 'raw', string.sub(raw, 1, 1024))
  end
  local fields = {'name', name or '', 'state', 'dead', 'reason', reason, 'error', err,
    'finished_at', str(now)}
  for _, v in ipairs(extra or {}) do
    fields[#fields + 1] = v
  end
  redis.call('HSET', jk, unpack(fields))
  redis.call('ZADD', K_DEAD, str(now), id)
  release_holds(jk, id)
  notify(jk, id, 'dead')
  count('failed', name, 1)
  count('dead', name, 1)
  local d = redis.call('HMGET', jk, 'children', 'group')
  if d[1] or d[2] then
    fail_dependents(id, 'dead (' .. reason .. ')', d[2], now)
  end
  return id
end

-- Re-arm a job that ended dead with reason dependency_failed (an operator retries it,
-- or the parent that failed it): it waits again for what is not complete yet, or is
-- queued when nothing is left. Returns false, leaving it dead, while one of its
-- dependencies is still dead or aborted, or is gone.
local function rearm(kid, now)
  local kk = key_job(kid)
  local f = redis.call('HMGET', kk, 'after', 'waits_group')
  local pending = 0
  local wait_for = {}
  for p in string.gmatch(f[1] or '', '%S+') do
    if redis.call('HEXISTS', kk, 'r:' .. p) == 0 then
      local pk = key_job(p)
      local ok, pf = pcall(redis.call, 'HMGET', pk, 'state', 'result', 'name')
      local state = ok and pf[1] or nil
      if state == 'complete' then
        redis.call('HSET', kk, 'r:' .. p, pf[2] or 'null')
      elseif not (ok and pf[3]) or state == 'dead' or state == 'aborted' then
        return false
      else
        pending = pending + 1
        wait_for[#wait_for + 1] = p
      end
    end
  end
  if f[2] then
    local g = redis.call('HMGET', key_group(f[2]), 'total', 'done', 'failed')
    if not g[1] or (tonumber(g[3]) or 0) > 0 then
      return false
    end
    if (tonumber(g[2]) or 0) < (tonumber(g[1]) or 0) then
      pending = pending + 1
    end
  end
  for _, p in ipairs(wait_for) do
    redis.call('SADD', key_children(p), kid)
    redis.call('HSET', key_job(p), 'children', '1')
  end
  redis.call('ZREM', K_DEAD, kid)
  redis.call('HDEL', kk, 'reason', 'error', 'finished_at')
  redis.call('HSET', kk, 'failures', '0', 'lost', '0')
  if pending > 0 then
    redis.call('HSET', kk, 'state', 'waiting', 'pending', str(pending))
    redis.call('ZADD', K_WAITING, str(now), kid)
  else
    release(kid, now)
  end
  return true
end

-- A dead job was retried (or re-armed): re-arm its descendants, and its group's callback,
-- that had ended dead with reason dependency_failed because of it; the group counts it
-- failed no more. Returns how many jobs were re-armed.
local function rearm_dependents(id, now)
  local todo = {id}
  local n = 0
  local i = 1
  while i <= #todo do
    local p = todo[i]
    i = i + 1
    local kids = redis.call('SMEMBERS', key_children(p))
    local g = redis.call('HGET', key_job(p), 'group')
    if g then
      local gk = key_group(g)
      if (tonumber(redis.call('HGET', gk, 'failed')) or 0) > 0 then
        incr(gk, 'failed', -1)
      end
      local cb = redis.call('HGET', gk, 'then')
      if cb then
        kids[#kids + 1] = cb
      end
    end
    for _, kid in ipairs(kids) do
      local ok, kf = pcall(redis.call, 'HMGET', key_job(kid), 'state', 'reason')
      if ok and kf[1] == 'dead' and kf[2] == 'dependency_failed' and rearm(kid, now) then
        n = n + 1
        todo[#todo + 1] = kid
      end
    end
  end
  return n
end

-- An operator sends a job of the scheduled, retry or dead set back to its queue (its
-- key's list, or the plain one; the caller took it out of the set) and its name is
-- ready. A job revived from dead starts again with no failures and no lost attempts,
-- and, when it has ties (`tied`: children or a group), what ended dead because of it
-- waits for it again. Returns how many of those were re-armed.
local function requeue(id, name, fkey, revived, tied, now)
  local jk = key_job(id)
  redis.call('HSET', jk, 'state', 'queued')
  local rearmed = 0
  if revived then
    redis.call('HSET', jk, 'failures', 0, 'lost', 0)
    redis.call('HDEL', jk, 'finished_at')
    if tied then
      rearmed = rearm_dependents(id, now)
    end
  end
  if not push_job(name, fkey, id, false) then -- its key's list, or the queue
    redis.call('SADD', K_NAMES, name)
  end
  mark_ready(name)
  return rearmed
end

-- The first parent in `after` (space-separated ids) that has no record, and is not
-- among the ids `made` earlier in the same call; nil when every parent exists.
local function missing_parent(after, made)
  if not after or after == '' then
    return nil
  end
  for p in string.gmatch(after, '%S+') do
    if not (made and made[p]) and redis.call('EXISTS', key_job(p)) == 0 then
      return p
    end
  end
  return nil
end

-- The error reply for a job whose parent or group does not exist: nothing is written.
local function no_parent(id, parent)
  return redis.error_reply('NOPARENT parent ' .. parent .. ' of job ' .. id ..
    ' does not exist (never enqueued, or its record expired)')
end

-- Tie a new job to what it waits for (see Workflows above): `deps` = {after = ids,
-- group = the group it belongs to, group_size = that group's declared size,
-- waits_group = the group it is the callback of}, '' for none. Adds its fields to `fields`. Returns how many dependencies are not complete
-- yet, and what ended dead or aborted already (nil: nothing).
local function dependencies(id, deps, fields, now)
  local pending, failed = 0, nil
  local function add(k, v)
    fields[#fields + 1] = k
    fields[#fields + 1] = v
  end
  if (deps.after or '') ~= '' then
    add('after', deps.after)
    for p in string.gmatch(deps.after, '%S+') do
      local pk = key_job(p)
      local ok, f = pcall(redis.call, 'HMGET', pk, 'state', 'result')
      local state = ok and f[1] or nil
      if state == 'complete' then
        add('r:' .. p, f[2] or 'null')
      else
        redis.call('SADD', key_children(p), id)
        redis.call('HSET', pk, 'children', '1')
        if state == 'dead' or state == 'aborted' then
          failed = failed or ('parent ' .. p .. ' ended ' .. state)
        else
          pending = pending + 1
        end
      end
    end
  end
  local g = deps.group or ''
  if g ~= '' then
    add('group', g)
    local gk = key_group(g)
    -- `total` is the size its producer declared, set by the first member written;
    -- `sent` counts the members written. The group completes only when every one of
    -- `total` members ended, so a send cut short leaves it waiting for the rest (the
    -- same call again writes them) and never calls back with fewer results.
    redis.call('HSETNX', gk, 'total', deps.group_size)
    incr(gk, 'sent', 1)
    redis.call('HSETNX', gk, 'created_at', str(now))
    redis.call('RPUSH', key_group_members(g), id)
  end
  g = deps.waits_group or ''
  if g ~= '' then
    add('waits_group', g)
    local gk = key_group(g)
    redis.call('HSET', gk, 'then', id)
    local f = redis.call('HMGET', gk, 'total', 'done', 'failed')
    if (tonumber(f[3]) or 0) > 0 then
      failed = failed or ('a member of group ' .. g .. ' ended dead or aborted')
    elseif (tonumber(f[2]) or 0) < (tonumber(f[1]) or 0) then
      pending = pending + 1 -- the group counts as one dependency
    end
  end
  if (deps.after or '') ~= '' or (deps.waits_group or '') ~= '' then
    add('deps', '1') -- its handler gets the results of what it waited for
  end
  if pending > 0 then
    add('pending', str(pending))
  end
  return pending, failed
end
