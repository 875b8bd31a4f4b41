-- include: _base _graph _fair
-- Admin: delete jobs held in a sorted set (scheduled, retry or dead), or queued jobs.
-- KEYS[1] namespace prefix
-- ARGV where ('scheduled' | 'retry' | 'dead' | 'waiting' | 'queue' | 'key'), name (for
--      'queue' and 'key'), limit, id_1 .. id_n (for a queue, none = its `limit` oldest
--      entries, then those of its fair keys, the largest backlog first; for 'key', the
--      fair key: its `limit` oldest entries)
-- Returns the number of jobs deleted.
local where, qname, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local deleted = 0
local now = tonumber(redis.call('TIME')[1]) * 1000
local function forget(id)
  if sane_id(id) then
    local jk = key_job(id)
    if is_hash(jk) then
      release_holds(jk, id)
      -- A job deleted before it completed never will: what waits for it ends dead.
      local f = redis.call('HMGET', jk, 'state', 'children', 'group')
      if (f[2] or f[3]) and f[1] ~= 'complete' and f[1] ~= 'dead' and f[1] ~= 'aborted' then
        fail_dependents(id, 'deleted', f[3], now)
      end
    end
    redis.call('DEL', jk, key_joblog(id), key_children(id))
  end
  deleted = deleted + 1
end
if where == 'queue' then
  local qk = key_queue(qname)
  if #ARGV > 3 then
    for i = 4, #ARGV do
      local id = ARGV[i]
      local ok, fkey = pcall(redis.call, 'HGET', key_job(id), 'fair')
      local gone = redis.call('LREM', qk, 0, id)
      if ok and fkey then -- a keyed job: out of its key's list
        gone = gone + fair_unqueue(qname, fkey, id)
      end
      if gone > 0 then
        forget(id)
      end
    end
  else
    for _ = 1, limit do
      local id = redis.call('RPOP', qk)
      if not id then break end
      forget(id)
    end
    -- Then the keys' lists, the largest backlog first (as many keys as the limit left).
    local left = limit - deleted
    while left > 0 do
      local ok, top = pcall(redis.call, 'ZREVRANGE', key_fair_backlog(qname), 0, 0)
      if not ok or not top[1] then break end
      local key = top[1]
      local fq = key_fair_queue(qname, key)
      local okp, ids = pcall(redis.call, 'RPOP', fq, left)
      for _, id in ipairs(okp and ids or {}) do
        forget(id)
      end
      local n = okp and ids and #ids or 0
      incr(key_fair(qname), 'n', -n)
      left = left - n
      if n == 0 then -- no list (garbage): the key is forgotten, so that the loop ends
        pcall(redis.call, 'ZREM', key_fair_backlog(qname), key)
      end
      fair_settle(qname, key)
    end
  end
elseif where == 'key' then -- one fair key's queued jobs (ARGV[4]: the key), oldest first
  local key = ARGV[4] or ''
  local fq = key_fair_queue(qname, key)
  local ok, ids = pcall(redis.call, 'RPOP', fq, limit)
  for _, id in ipairs(ok and ids or {}) do
    forget(id)
  end
  incr(key_fair(qname), 'n', -deleted)
  fair_settle(qname, key)
else
  local z = ({scheduled = K_SCHEDULED, retry = K_RETRY, dead = K_DEAD, waiting = K_WAITING})[where]
  for i = 4, #ARGV do
    if redis.call('ZREM', z, ARGV[i]) == 1 then forget(ARGV[i]) end
  end
end
return deleted
