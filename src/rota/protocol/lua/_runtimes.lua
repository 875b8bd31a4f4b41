-- include: _base _counts
-- Shared helpers of the finish script: run-time histograms of finished attempts.
-- Counted per call and written once at its end: one HINCRBY per job name and bucket the
-- call's attempts fell in, into that name's hash of the current UTC ten-minute slot.
--
-- Keys:
--   runtimes:<name>/<YYYYMMDDHHM0>  hash  bucket index ('0'..'39') -> attempts that ran
--                          in it; expires 25 hours after its last new field
--
-- Bucket i (0-38) holds run times (ms) up to RT_BOUNDS[i + 1] and over the bound before
-- it; bucket 39 those over the last bound. The bounds are ceil(1.5^i), the list of
-- protocol/run_times.py BOUNDS (a test compares them).
local RT_BOUNDS = {1, 2, 3, 4, 6, 8, 12, 18, 26, 39, 58, 87, 130, 195, 292, 438, 657, 986,
  1478, 2217, 3326, 4988, 7482, 11223, 16835, 25252, 37877, 56816, 85223, 127835, 191752,
  287627, 431440, 647160, 970740, 1456110, 2184165, 3276247, 4914370}
local RT_TTL = '90000'

-- The bucket of a run time in ms: a binary search over the bounds.
local function rt_bucket(ms)
  local lo, hi = 1, #RT_BOUNDS + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if ms <= RT_BOUNDS[mid] then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo - 1
end

-- Count one attempt of `name` that ran `ms` in `runs` (name -> bucket -> attempts).
local function count_run(runs, name, ms)
  local by = runs[name]
  if not by then
    by = {}
    runs[name] = by
  end
  local b = rt_bucket(ms)
  by[b] = (by[b] or 0) + 1
end

-- Write what count_run gathered into the slot of `now`. A hash's expiry is set when one
-- of its fields starts (as flush_counts does), at most once per bucket and slot.
local function flush_runs(runs, now)
  if next(runs) == nil then
    return
  end
  local _, minute = buckets(now)
  local slot = string.sub(minute, 1, 11) .. '0'
  for name, by in pairs(runs) do
    local k = key_run_times(name, slot)
    local new = false
    for b, n in pairs(by) do
      new = incr(k, str(b), str(n)) == n or new
    end
    if new then
      redis.call('EXPIRE', k, RT_TTL)
    end
  end
end
