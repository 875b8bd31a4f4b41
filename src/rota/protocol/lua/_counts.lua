-- include: _base
-- Shared helpers, part 2 of 6: counters, the calendar of their buckets, and the start of
-- a call (enter). Counters are gathered per call and written once, at its end.
--
-- Keys:
--   stats            hash  counter -> total since the namespace began; counters are
--                          'processed', 'failed', 'dead', ... and '<counter>:<job name>'
--   stats:<YYYYMMDD> hash  the same counters for one UTC day; expires after 90 days
--   stats:<YYYYMMDDHHMM> hash  the same for one UTC minute, and 'ms:<job name>' (the ms
--                          its complete jobs ran); expires after 2 hours

-- Counters: collect per script call, write once (total, per day, per minute).
local counts = {}
-- Counters kept only per minute (the ms that complete jobs of a name ran): one more field
-- of the minute's hash per name and call, no write to the total and day hashes.
local minute_counts = {}
local function count_minute(field, n)
  minute_counts[field] = (minute_counts[field] or 0) + n
end
local joined = {} -- field -> memo of 'field:name'
local function count(field, name, n)
  counts[field] = (counts[field] or 0) + n
  if name then
    local join = joined[field]
    if not join then
      join = memo(function(x) return field .. ':' .. x end)
      joined[field] = join
    end
    local f = join(name)
    counts[f] = (counts[f] or 0) + n
  end
end

-- The UTC day (YYYYMMDD) and minute (YYYYMMDDHHMM) of a time in ms: the stats buckets.
-- (Redis scripts have no os.date; this is the days-to-civil-date algorithm.)
local function buckets(ms)
  local secs = math.floor(ms / 1000)
  local z = math.floor(secs / 86400)
  local rem = secs - z * 86400
  local hh, mi = math.floor(rem / 3600), math.floor((rem % 3600) / 60)
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400 + (m <= 2 and 1 or 0)
  local day = string.format('%04d%02d%02d', y, m, d)
  return day, day .. string.format('%02d%02d', hh, mi)
end

-- Write the counters gathered by this call: totals, and the buckets of `now`. A bucket's
-- expiry is set when one of its counters starts (HINCRBY answers the amount added), which
-- the first write of a new bucket always does; later writes leave it as it is.
local function flush_counts(now)
  if next(counts) == nil and next(minute_counts) == nil then
    return
  end
  local day, minute = buckets(now)
  local dk, mk = key_stats_bucket(day), key_stats_bucket(minute)
  local new_day, new_minute = false, false
  for f, n in pairs(counts) do
    local by = str(n)
    incr(K_STATS, f, by)
    new_day = incr(dk, f, by) == n or new_day
    new_minute = incr(mk, f, by) == n or new_minute
  end
  for f, n in pairs(minute_counts) do
    new_minute = incr(mk, f, str(n)) == n or new_minute
  end
  if new_day then
    redis.call('EXPIRE', dk, '7776000')
  end
  if new_minute then
    redis.call('EXPIRE', mk, '7200')
  end
  counts = {}
  minute_counts = {}
end

-- Start a call: the namespace prefix, and no counters (a call that failed half-way may
-- have gathered some). Nothing is allocated when there is nothing to empty: a table made
-- per call costs an enqueue more than one of its commands.
local function enter(prefix)
  set_prefix(prefix)
  if next(counts) ~= nil then
    counts = {}
  end
end
