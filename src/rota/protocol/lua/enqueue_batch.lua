-- include: _base _counts _wake _graph _enqueue _debounce
-- Enqueue many jobs in one call, each on its own terms (as the enqueue script would).
-- KEYS[1] namespace prefix
-- ARGV now_ms, then one MessagePack array of jobs, each an array of
--      [id, name, args, run_at_ms, unique_key, unique_ttl_ms, max_fails, timeout]
--      (strings; '' where the enqueue script takes ''), optionally followed by
--      after (parents' ids, space-separated), group (the group it is a member of) and
--      waits_group (the group it is the callback of), traceparent and tracestate (the W3C
--      trace context of the enqueue), and group_size (the number of members of its
--      group, the same for each of them), and expires (ms since the epoch, as the
--      enqueue script takes it), its fair key (item 16; '' = none), then debounce_key,
--      debounce_ms, debounce_mode and debounce_move (as the enqueue script takes them;
--      items 17 to 20: a debounced entry gives items 9 to 16 too, '' where unused); a parent may be a job earlier
--      in the same call, and a debounced entry is absorbed by the pending job an earlier
--      entry of its key made.
-- now_ms may be '<now>@<generation>', as the enqueue script's (another generation than
--      this shard's copy: RESHARDED, nothing written).
-- Returns a flat list: id, created, id, created, ... in the order given. The ids of one
-- name go into its queue in one LPUSH, and wake tokens are pushed once per name. A
-- parent or group that does not exist is an error reply starting with NOPARENT, and
-- nothing of the call is written. So is one starting with GROUPMISMATCH: a member
-- without a size, a size other than the one its group was made with, a member id that
-- exists outside its group, or a callback for a group that has another one. (The same
-- call again, after a send cut short, is none of these: its members and callback
-- exist in their group already and are skipped.)
local stale = resharded(ARGV, 1)
if stale then
  return stale
end
local now = tonumber(ARGV[1])
local jobs = cmsgpack.unpack(ARGV[2])
-- Checked before anything is written: a script that fails half-way keeps its writes.
-- A queue key that is not a list would fail the LPUSH of push_batch after every record
-- is written, leaving records in no queue: refuse the call first (one TYPE per name).
local made, groups, typed, sizes = {}, {}, {}, {}

-- Why entry `j` cannot join (or wait for) its group as it says; nil when it can.
-- `sizes` maps a group to its size, as Redis or an earlier entry of the call has it;
-- `made` the ids of the entries before it.
local function group_mismatch(j, sizes, made)
  local g, cb = j[10] or '', j[11] or ''
  if g ~= '' then
    if made[j[1]] then
      return 'job ' .. j[1] .. ' is given twice' -- the group would wait for it forever
    end
    local size = tonumber(j[14] or '')
    if not size or size < 1 or size ~= math.floor(size) then
      return 'member ' .. j[1] .. ' of group ' .. g .. ' has no size (array item 14)'
    end
    local known = sizes[g]
    if not known then
      known = tonumber(redis.call('HGET', key_group(g), 'total') or '') or size
      sizes[g] = known
    end
    if known ~= size then
      return 'group ' .. g .. ' was made with ' .. known .. ' members, not ' .. size
    end
    local was = redis.call('HMGET', key_job(j[1]), 'name', 'group')
    if was[1] and was[2] ~= g then
      return 'job ' .. j[1] .. ' exists outside group ' .. g
    end
  end
  if cb ~= '' then
    local was = redis.call('HGET', key_group(cb), 'then')
    if was and was ~= j[1] then
      return 'group ' .. cb .. ' has callback ' .. was .. ' already, not ' .. j[1]
    end
  end
  return nil
end
for _, j in ipairs(jobs) do
  local name = j[2]
  if not typed[name] then
    local t = redis.call('TYPE', key_queue(name))['ok']
    if t ~= 'none' and t ~= 'list' then
      return redis.error_reply('WRONGTYPE queue ' .. name .. ' is a ' .. t .. ', not a list')
    end
    typed[name] = true
  end
  local missing = missing_parent(j[9], made)
  if not missing and (j[11] or '') ~= '' and not groups[j[11]]
      and redis.call('EXISTS', key_group(j[11])) == 0 then
    missing = 'group ' .. j[11]
  end
  if missing then
    return no_parent(j[1], missing)
  end
  if #j > 8 then -- a plain job's entry has no tail: no group to check
    local mismatch = group_mismatch(j, sizes, made)
    if mismatch then
      return redis.error_reply('GROUPMISMATCH ' .. mismatch)
    end
  end
  made[j[1]] = true
  if (j[10] or '') ~= '' then
    groups[j[10]] = true -- the group exists once a member is enqueued
  end
end
local out = {}
local batch = {push = {}, names = {}, ready = {}, scheduler = false}
for _, j in ipairs(jobs) do
  local deps = nil
  if (j[9] or '') ~= '' or (j[10] or '') ~= '' or (j[11] or '') ~= '' then
    deps = {after = j[9], group = j[10], group_size = j[14], waits_group = j[11]}
  end
  local trace = nil
  if (j[12] or '') ~= '' then
    trace = {j[12], j[13] or ''}
  end
  local k = #out
  local db = debounce_of(j[17], j[18], j[19], j[20], now)
  local held = db and debounce_absorb(db, j[2], j[3])
  if held then
    out[k + 1], out[k + 2] = held, 0
  else
    out[k + 1], out[k + 2] = enqueue_one(j[1], j[2], j[3], now, db and db.due or j[4], j[5], j[6],
      j[7], j[8], batch, deps, trace, j[15], j[16])
    if db and out[k + 2] == 1 then
      debounce_hold(db, out[k + 1])
    end
  end
end
push_batch(batch)
local names = {}
for name, add in pairs(batch.names) do
  if add then
    names[#names + 1] = name
  end
end
call_chunked('SADD', K_NAMES, names)
call_chunked('SADD', K_READY, batch.ready)
if batch.scheduler then
  wake_scheduler()
end
flush_counts(now) -- children made dead at enqueue (a dead parent) are counted
return out
