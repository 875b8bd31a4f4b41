-- include: _wake _fair
-- Move away the keys of the namespace that hold another type than the scripts read and
-- write (a key written by hand: a string where a set belongs): every command of a script
-- on such a key answers WRONGTYPE, so one of them would stop every call of the script,
-- and a namespace no pool can serve must not be. Each such key is renamed to
-- quarantine:<what followed the prefix> (quarantine:<that>:<server time> when that is
-- taken), its data kept for inspection; nothing is deleted. Pools call this only after a
-- script answered WRONGTYPE, and once at their start: no other script checks types. The
-- names checked join the ready and leased sets when their queue or running set holds
-- entries (those sets index what fetches and reaper passes visit).
-- Bounded: the fixed keys (19) and 3 keys per name, for `count` names of K_NAMES per call
-- (SSCAN: a set small enough for Redis's compact encoding, 128 names, comes whole) and the
-- names given. Renames, and a few bytes: allowed when Redis is out of memory.
-- KEYS[1] namespace prefix
-- ARGV cursor (of SSCAN over K_NAMES; '0' starts, and checks the fixed keys), count,
--      then job names to check as well (the caller's own)
-- Returns {next cursor ('0': done), key, type, quarantine key, ...}: the keys moved.
local cursor, count = ARGV[1], ARGV[2]
local out = {'0'}
local stamp

local function check(k, want)
  local t = redis.call('TYPE', k)['ok']
  if t == 'none' or t == want then
    return
  end
  local to = key_quarantine(string.sub(k, #KEYS[1] + 1))
  if redis.call('EXISTS', to) == 1 then
    if not stamp then
      local now = redis.call('TIME')
      stamp = now[1] .. string.format('%06d', tonumber(now[2]))
    end
    to = to .. ':' .. stamp
  end
  redis.call('RENAME', k, to)
  out[#out + 1] = k
  out[#out + 1] = t
  out[#out + 1] = to
end

-- A name's keys, and its place in the two sets that index them (either may have been
-- moved away, or a call that failed half-way may have left a name out): a queue that
-- holds jobs is ready, a running set that holds leases is leased.
local function check_name(name)
  check(key_queue(name), 'list')
  check(key_running(name), 'zset')
  check(key_wake(name), 'list')
  for _, k in ipairs({key_fair_keys(name), key_fair_rest(name), key_fair_backlog(name)}) do
    check(k, 'zset')
  end
  check(key_fair(name), 'hash')
  check(key_fair_set(name), 'hash')
  -- Keys with jobs that no set of keys names any more (those moved away) join again:
  -- those of the largest backlogs, a bounded number per call.
  for _, key in ipairs(redis.call('ZREVRANGE', key_fair_backlog(name), 0, 99)) do
    local ok, len = pcall(redis.call, 'LLEN', key_fair_queue(name, key))
    if ok and len > 0 and not redis.call('ZSCORE', key_fair_keys(name), key)
        and not redis.call('ZSCORE', key_fair_rest(name), key) then
      fair_join(name, key)
    end
  end
  if queue_holds(name) then
    mark_ready(name)
  end
  if redis.call('ZCARD', key_running(name)) > 0 then
    redis.call('SADD', K_LEASED, name)
  end
end

if cursor == '0' then
  local fixed = {
    {K_SCHEDULED, 'zset'}, {K_RETRY, 'zset'}, {K_DEAD, 'zset'}, {K_COMPLETE, 'zset'},
    {K_WAITING, 'zset'}, {K_POOLS, 'zset'}, {K_NAMES, 'set'}, {K_PAUSED, 'set'},
    {K_READY, 'set'}, {K_LEASED, 'set'}, {K_LIMITS, 'hash'}, {K_RATES, 'hash'},
    {K_RATE_TAT, 'hash'}, {K_PRIORITIES, 'hash'}, {K_BEATS, 'hash'}, {K_STATS, 'hash'},
    {K_IDLE, 'hash'}, {K_SCHED_WAKE, 'list'}, {K_NEVER, 'none'}, {K_EXPIRING, 'zset'},
  }
  for _, entry in ipairs(fixed) do
    check(entry[1], entry[2])
  end
  for i = 3, #ARGV do
    check_name(ARGV[i])
  end
end
if redis.call('TYPE', K_NAMES)['ok'] == 'set' then
  local page = redis.call('SSCAN', K_NAMES, cursor, 'COUNT', count)
  out[1] = page[1]
  for _, name in ipairs(page[2]) do
    check_name(name)
  end
end
return out
