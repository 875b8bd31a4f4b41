-- include: _base
-- A pool's heartbeat: score it in the pools set, store its snapshot, and extend the
-- leases of the jobs it runs (only those it still holds: same token). An empty snapshot
-- writes none: a pool over several shards writes it in shard 0 only, where readers take
-- it, and only scores itself elsewhere (one command fewer in each other shard). An empty
-- pool id scores no pool: over several shards a pool is scored in shard 0
-- alone, and beats in another shard only to note the clock and extend its leases there
-- (see docs/protocol.md, "Idle shards").
-- KEYS[1] namespace prefix
-- ARGV now_ms, pool_id (or '' for none), snapshot (JSON, or '' for none), snapshot_ttl_ms,
--      lease_deadline_ms, then 3 per running job: name, id, token
-- Returns {lost, abort, fresh}: ids whose lease this pool no longer holds, ids whose abort
-- was requested (a fallback for a missed pub/sub message), and 1 when the pool was not in
-- the pools set (its first beat, or Redis forgot it: the pool registers itself again).
local now, pool, snapshot = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local ttl, deadline = tonumber(ARGV[4]), ARGV[5]
-- Redis's own clock at this beat, and since when beats land without a gap of more than
-- half the snapshot's TTL (one and a half intervals): a longer one means Redis was
-- stopped or paused and held every pool's beat back (see reap.lua).
local at = server_ms()
local last = tonumber(redis.call('HGET', K_BEATS, 'at'))
local at_text = string.format('%d', at)
if not last then -- the namespace's first beat (or Redis lost its data): no gap known
  redis.call('HSET', K_BEATS, 'at', at_text, 'since', '0')
elseif at - last > ttl / 2 then
  redis.call('HSET', K_BEATS, 'at', at_text, 'since', at_text)
else
  redis.call('HSET', K_BEATS, 'at', at_text)
end
local fresh = 0
if pool ~= '' then
  fresh = redis.call('ZADD', K_POOLS, now, pool)
end
if snapshot ~= '' then
  redis.call('SET', key_pool(pool), snapshot, 'PX', ttl)
end
local lost, abort = {}, {}
local i = 6
while i + 2 <= #ARGV do
  local name, id, token = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local jk = key_job(id)
  -- HMGET fails on a key that is not a hash: no job of this pool's any more.
  local ok, f = pcall(redis.call, 'HMGET', jk, 'token', 'abort', 'fair', 'flease')
  if ok and f[1] == token then
    redis.call('ZADD', key_running(name), 'XX', deadline, id)
    if f[3] and f[4] then -- a lease in its key's running set too (_fairfetch.lua)
      pcall(redis.call, 'ZADD', key_fair_running(name, f[3]), 'XX', deadline, id)
    end
    if f[2] then
      abort[#abort + 1] = id
    end
  else
    lost[#lost + 1] = id
  end
  i = i + 3
end
return {lost, abort, fresh}
