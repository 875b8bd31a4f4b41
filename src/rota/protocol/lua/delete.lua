-- include: _base _graph
-- Admin: delete jobs held in a sorted set (scheduled, retry or dead), or queued jobs.
-- KEYS[1] namespace prefix
-- ARGV where ('scheduled' | 'retry' | 'dead' | 'waiting' | 'queue'), name (for 'queue'), limit,
--      id_1 .. id_n (for a queue, none = its `limit` oldest entries)
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
      if redis.call('LREM', qk, 0, ARGV[i]) > 0 then forget(ARGV[i]) end
    end
  else
    for _ = 1, limit do
      local id = redis.call('RPOP', qk)
      if not id then break end
      forget(id)
    end
  end
else
  local z = ({scheduled = K_SCHEDULED, retry = K_RETRY, dead = K_DEAD, waiting = K_WAITING})[where]
  for i = 4, #ARGV do
    if redis.call('ZREM', z, ARGV[i]) == 1 then forget(ARGV[i]) end
  end
end
return deleted
