-- include:
-- Pool, read only: whether any of the keys named holds something, for the idle shards
-- of a pool on one cluster node (rota.worker.idle), its fetchers' safety net
-- (rota.worker.nodewaits) and its rebalancer (rota.worker.rebalance). A multi-key
-- EXISTS cannot span the slots of a cluster; a function flagged `allow-cross-slot-keys`
-- may read keys of every slot its node serves, one command at a time. It writes nothing
-- (`no-writes`: FCALL_RO). A key of a slot the node does not serve (moved) is an error:
-- the caller then looks shard by shard.
-- KEYS[1] namespace prefix of one shard on the node (it routes the call there)
-- ARGV[1] the number n of keys of each shard, negative (-n) for an answer per shard;
--      ARGV[2] a set of that shard ('' for none) and ARGV[3] a member it must hold (a
--      job name of the pool in its names: gone, the node lost its data); then n keys of
--      each shard in turn: their leased and pools, or scheduled, retry and expiring, or
--      dead, or ready, or queues. One EXISTS a shard (a command of a script still spans
--      one slot).
-- Replies 2 when the set lacks the member, else 1 when one of the keys exists, else 0;
-- per shard (ARGV[1] negative): an array of 1 or 0, one a shard in turn.
if ARGV[2] ~= '' and redis.call('SISMEMBER', ARGV[2], ARGV[3]) == 0 then
  return 2
end
local n = tonumber(ARGV[1])
local each = n < 0 and {} or nil
if each then
  n = -n
end
for i = 4, #ARGV, n do
  local found = redis.call('EXISTS', unpack(ARGV, i, i + n - 1)) > 0
  if each then
    each[#each + 1] = found and 1 or 0
  elseif found then
    return 1
  end
end
return each or 0
