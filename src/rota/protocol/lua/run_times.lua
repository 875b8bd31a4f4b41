-- include:
-- Admin, read only: the run-time histograms of job names in this shard over a window's
-- slots, each name's slots added up here, in one call whatever their number. A
-- pipeline sends and reads an HGETALL a name and slot (the day's 145 slots of 100 names
-- over 4 shards were 58,000 commands, most of them of no key) where this answers a
-- short row a name. It writes nothing (the `no-writes` flag): FCALL_RO runs it, on a
-- replica too, and the read-only `web` role may call it.
-- KEYS[1] namespace prefix
-- ARGV[1] the number n of slots, ARGV[2..n+1] the slots (YYYYMMDDHHM0), then the names.
-- Replies per name, in order, a flat row of its buckets that counted any: the bucket
-- index, then its attempts as two whole numbers, hi and lo (hi * 2^26 + lo: a sum of
-- counts up to 2^53 each is past what a Lua number holds exactly). A field that is no
-- bucket ('0'..'39'), a count that is no whole number from 0 to 2^53, or a key of another
-- type (written by others) counts nothing, as rota.protocol.run_times.read_counts reads
-- them.
local SPLIT = 67108864 -- 2^26
local COUNT_MAX = '9007199254740992' -- 2^53
local FIELDS = {}
for b = 0, 39 do
  FIELDS[tostring(b)] = b
end

-- A counter's value as a count: digits only, at most 2^53 (compared as text, exactly).
local function count(v)
  if type(v) ~= 'string' or not string.find(v, '^%d+$') then
    return 0
  end
  local digits = string.match(v, '^0*(%d*)$')
  if #digits > 16 or (#digits == 16 and digits > COUNT_MAX) then
    return 0
  end
  return tonumber(digits) or 0 -- '' (all zeros): 0
end

local n = tonumber(ARGV[1])
local out = {}
for i = n + 2, #ARGV do
  local name = ARGV[i]
  local keys, first = {}, key_run_times(name, '') -- the slot's name goes last
  for s = 1, n do
    keys[s] = first .. ARGV[s + 1]
  end
  local row = {}
  -- most names have no run in most slots: one EXISTS skips a name with none at all
  if n > 0 and redis.call('EXISTS', unpack(keys)) > 0 then
    local hi, lo = {}, {}
    for s = 1, n do
      local found = redis.pcall('HGETALL', keys[s]) -- another type: an error table
      if not found.err then
        for f = 1, #found, 2 do
          local b, c = FIELDS[found[f]], count(found[f + 1])
          if b and c > 0 then
            local low = c % SPLIT
            lo[b] = (lo[b] or 0) + low
            hi[b] = (hi[b] or 0) + (c - low) / SPLIT
          end
        end
      end
    end
    for b = 0, 39 do
      if lo[b] then
        row[#row + 1] = b
        row[#row + 1] = hi[b]
        row[#row + 1] = lo[b]
      end
    end
  end
  out[#out + 1] = row
end
return out
