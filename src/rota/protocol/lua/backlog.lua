-- include:
-- Admin, read only: the jobs queued (plain and keyed) and running of job names in this
-- shard, in one call whatever their number, where a pipeline costs the reader a command
-- a name to send and to read (the web's /shards and /metrics at 5,000 names). It writes
-- nothing (the `no-writes` flag): FCALL_RO runs it, on a replica too, and the read-only
-- `web` role may call it.
-- KEYS[1] namespace prefix
-- ARGV 'sum': over the names this shard knows (K_NAMES); replies {queued, running}.
--      'each', then names: replies queued and running of each name, in order, flat.
-- Queued: the length of the name's queue and its keyed count (field 'n' of fair:<name>);
-- running: the size of its running set, for the names in K_LEASED only (a fetch adds the
-- name it leases, the reaper removes those left with none). A key of another type, or a
-- count that is no whole number from 0 (written by others), reads as 0, as
-- rota.protocol.job.count_of reads it.
local function count(ok, n)
  if not ok then
    return 0
  end
  if type(n) ~= 'number' then
    if type(n) ~= 'string' or string.find(n, '[xXnN]') then -- hex, inf, nan
      return 0
    end
    n = tonumber(n)
    if not n or n ~= n or n == math.huge then
      return 0
    end
  end
  if n < 0 or n >= 9223372036854775808 then -- past 64 bits: no count
    return 0
  end
  return math.floor(n)
end

local leased = {}
for _, n in ipairs(redis.call('SMEMBERS', K_LEASED)) do
  leased[n] = true
end

local function backlog(name)
  local queued = count(pcall(redis.call, 'LLEN', key_queue(name)))
    + count(pcall(redis.call, 'HGET', key_fair(name), 'n'))
  local running = 0
  if leased[name] then
    running = count(pcall(redis.call, 'ZCARD', key_running(name)))
  end
  return queued, running
end

if ARGV[1] == 'sum' then
  local queued, running = 0, 0
  for _, name in ipairs(redis.call('SMEMBERS', K_NAMES)) do
    local q, r = backlog(name)
    queued, running = queued + q, running + r
  end
  return {queued, running}
end
local out = {}
for i = 2, #ARGV do
  local q, r = backlog(ARGV[i])
  out[#out + 1] = q
  out[#out + 1] = r
end
return out
