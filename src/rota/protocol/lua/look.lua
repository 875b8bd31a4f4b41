-- include:
-- Pool, read only: whether any of the keys named holds something, for the idle shards
-- of a pool on one cluster node (rota.worker.idle). A multi-key EXISTS cannot span the
-- slots of a cluster; a function flagged `allow-cross-slot-keys` may read keys of every
-- slot its node serves, one command at a time. It writes nothing (`no-writes`:
-- FCALL_RO). A key of a slot the node does not serve (moved) is an error: the caller
-- then looks shard by shard.
-- KEYS[1] namespace prefix of one shard on the node (it routes the call there)
-- ARGV[1] the number n of keys of each shard; ARGV[2] a set of that shard ('' for none)
--      and ARGV[3] a member it must hold (a job name of the pool in its names: gone,
--      the node lost its data); then n keys of each shard in turn: their leased and
--      pools, or scheduled, retry and expiring, or dead. One EXISTS a shard (a command
--      of a script still spans one slot).
-- Replies 2 when the set lacks the member, else 1 when one of the keys exists, else 0.
if ARGV[2] ~= '' and redis.call('SISMEMBER', ARGV[2], ARGV[3]) == 0 then
  return 2
end
local n = tonumber(ARGV[1])
for i = 4, #ARGV, n do
  if redis.call('EXISTS', unpack(ARGV, i, i + n - 1)) > 0 then
    return 1
  end
end
return 0
