-- include: _fair
-- Admin: change one fair key's settings (see _fair.lua), or the default limit of every
-- key of a name, and put a key that may run again back among the ready keys at once.
-- A script (not MULTI) so that it runs when Redis is out of memory, as pause does.
-- KEYS[1] namespace prefix
-- ARGV op, name, key ('' for the name's default limit), value ('' to clear a setting)
--   op: 'weight' (1..1000), 'limit' (1..1000000), 'rate' ('<count>/<period ms>'),
--       'pause', 'resume'
-- Returns 1 when the setting changed.
local op, name, key, value = ARGV[1], ARGV[2], ARGV[3], ARGV[4] or ''
local sk = key_fair_set(name)
local field = ({weight = 'w/', limit = 'l/', rate = 'r/', pause = 'p/', resume = 'p/'})[op]
if not field then
  return redis.error_reply('ERR fair_keys: unknown op ' .. string.sub(tostring(op), 1, 40))
end
if op == 'limit' and key == '' then
  field, key = 'l*', ''
else
  field = field .. key
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
