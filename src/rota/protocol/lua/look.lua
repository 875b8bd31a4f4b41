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
-- ARGV[1] '0': what each shard holds, by kind (the pool's one look a node an interval,
--      rota.worker.idle): after ARGV[2] and ARGV[3], each shard in turn as c (its
--      kinds), the number of keys of each kind, then those keys. One EXISTS over every
--      key of the shard; only when it counts some, one EXISTS a kind until the count is
--      accounted for (the last kind that can hold them is not asked: it holds the
--      rest). Replies an array, one a shard: the kinds found as bits (1 the first).
if ARGV[2] ~= '' and redis.call('SISMEMBER', ARGV[2], ARGV[3]) == 0 then
  return 2
end
if ARGV[1] == '0' then
  local out = {}
  local i = 4
  while i <= #ARGV do
    local c = tonumber(ARGV[i])
    local sizes, total, last = {}, 0, 0
    for j = 1, c do
      sizes[j] = tonumber(ARGV[i + j])
      total = total + sizes[j]
      if sizes[j] > 0 then
        last = j
      end
    end
    local at = i + c + 1
    local mask = 0
    local left = total > 0 and redis.call('EXISTS', unpack(ARGV, at, at + total - 1)) or 0
    local bit = 1
    for j = 1, c do
      local n = sizes[j]
      if left > 0 and n > 0 then
        local found = j == last and left or redis.call('EXISTS', unpack(ARGV, at, at + n - 1))
        if found > 0 then
          mask = mask + bit
          left = left - found
        end
      end
      at = at + n
      bit = bit * 2
    end
    out[#out + 1] = mask
    i = i + c + 1 + total
  end
  return out
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
