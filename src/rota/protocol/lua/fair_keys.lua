-- include: _base _fair
-- Admin: change one fair key's settings (see _fair.lua), or the default limit of every
-- key of a name, and put a key that may run again back among the ready keys at once.
-- A script (not MULTI) so that it runs when Redis is out of memory, as pause does.
-- KEYS[1] namespace prefix
-- ARGV op, name, key ('' for the name's default limit), value ('' to clear a setting)
--   op: 'weight' (1..1000), 'limit' (1..1000000), 'rate' ('<count>/<period ms>'),
--       'pause', 'resume'; 'recount' (no value): the running sets of the key (every key
--       of the name: key '') made again from the name's running set, for a limit
--       written by other means (a change of the shard count copies settings)
-- Returns 1 when the setting changed.
local op, name, key, value = ARGV[1], ARGV[2], ARGV[3], ARGV[4] or ''
local sk = key_fair_set(name)

-- A key's running set holds its leases only while a limit reaches it (a fetch adds none
-- for a key without one, nor marks the job `flease`: _fairfetch.lua, fair_leased). A
-- limit that starts to reach a key must count the jobs of the key running already:
-- their leases are read from the name's running set and the `fair` field of each job
-- (`key` '': every key), bounded by what runs, added to the key's running set and the
-- jobs marked, so that their finish ends them there. Leases in a key's running set are
-- always among these, so adding them all makes it exact.
local function fair_recount(key)
  local ok, entries = pcall(redis.call, 'ZRANGE', key_running(name), 0, -1, 'WITHSCORES')
  if not ok then
    return
  end
  local of_key = {}
  for i = 1, #entries, 2 do
    local okf, fkey = pcall(redis.call, 'HGET', key_job(entries[i]), 'fair')
    if okf and fkey and (key == '' or fkey == key) then
      redis.call('HSET', key_job(entries[i]), 'flease', '1')
      local l = table_at(of_key, fkey)
      l[#l + 1] = entries[i + 1]
      l[#l + 1] = entries[i]
    end
  end
  for k, l in pairs(of_key) do
    pcall(call_chunked, 'ZADD', key_fair_running(name, k), l)
  end
end

-- Whether a limit reaches the key (key '': the name's default), as a fetch reads it.
local function limited(field_name)
  local ok, raw = pcall(redis.call, 'HGET', sk, field_name)
  local l = ok and tonumber(raw)
  return l and l >= 1 and l <= 1000000 or false
end

if op == 'recount' then
  fair_recount(key)
  return 0
end
local field = ({weight = 'w/', limit = 'l/', rate = 'r/', pause = 'p/', resume = 'p/'})[op]
if not field then
  return redis.error_reply('ERR fair_keys: unknown op ' .. string.sub(tostring(op), 1, 40))
end
if op == 'limit' and key == '' then
  field, key = 'l*', ''
else
  field = field .. key
end
if op == 'limit' and value ~= '' and not limited('l*') and (key == '' or not limited(field)) then
  fair_recount(key) -- (no limit reached the key, or any key: their leases were not kept)
end
local changed
if op == 'pause' then
  changed = redis.call('HSET', sk, field, '1')
  pcall(redis.call, 'ZREM', key_fair_keys(name), key) -- fetches take none of its jobs
  return changed
end
if op == 'resume' or value == '' then
  changed = redis.call('HDEL', sk, field)
else
  changed = redis.call('HSET', sk, field, value)
end
if op == 'rate' then -- a key resting for its old rate may start at once
  redis.call('HDEL', key_fair(name), 't/' .. key)
  if redis.call('ZREM', key_fair_rest(name), key) == 1 then
    changed = 1
  end
end
-- A key with jobs that is among neither the ready nor the resting keys (paused, or at
-- its limit) joins the ready keys: a fetch puts it out again if it still has no room.
-- (A new default limit reaches the keys at their limit as their running jobs finish.)
if key ~= '' then
  local ok, len = pcall(redis.call, 'LLEN', key_fair_queue(name, key))
  if ok and len > 0 and not redis.call('ZSCORE', key_fair_rest(name), key) then
    fair_join(name, key)
  end
end
return changed
