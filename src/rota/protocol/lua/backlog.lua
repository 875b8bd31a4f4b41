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
  if not ok or n == false then -- an error, or no such field
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

-- Counts of `names`, added to `queued` and `running` at their index (a table of names
-- per 100: an EXISTS of their keyed counts skips the HGET of each where none has any,
-- as most names have no keyed jobs). redis.pcall answers an error reply (a key of
-- another type) as a table, which count() reads as 0.
local function backlog(names, queued, running)
  local fair = {}
  for i, name in ipairs(names) do
    queued[i] = count(true, redis.pcall('LLEN', key_queue(name)))
    fair[i] = key_fair(name)
    if leased[name] then
      running[i] = count(true, redis.pcall('ZCARD', key_running(name)))
    else
      running[i] = 0
    end
  end
  for first = 1, #names, 100 do
    local last = math.min(first + 99, #names)
    if redis.call('EXISTS', unpack(fair, first, last)) > 0 then
      for i = first, last do
        queued[i] = queued[i] + count(true, redis.pcall('HGET', fair[i], 'n'))
      end
    end
  end
end

local names = {}
if ARGV[1] == 'sum' then
  names = redis.call('SMEMBERS', K_NAMES)
else
  for i = 2, #ARGV do -- (not unpack: it takes at most about 8,000)
    names[i - 1] = ARGV[i]
  end
end
local queued, running = {}, {}
backlog(names, queued, running)
if ARGV[1] == 'sum' then
  local q, r = 0, 0
  for i = 1, #names do
    q, r = q + queued[i], r + running[i]
  end
  return {q, r}
end
local out = {}
for i = 1, #names do
  out[2 * i - 1] = queued[i]
  out[2 * i] = running[i]
end
return out
