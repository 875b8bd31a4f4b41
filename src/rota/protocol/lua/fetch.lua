-- Lease up to n jobs in one call, visiting job names in the order given (the pool's
-- weighted round robin); names that are empty, paused or at their concurrency limit are
-- skipped and the batch is filled from the remaining names: those given, then the
-- optional fill names (the pool's other names, so that a batch of one whose name is
-- empty still finds work elsewhere).
-- KEYS[1] namespace prefix
-- ARGV now_ms, lease_ms, pool_id, max_args_bytes, n, name_1 .. name_n,
--      [m, fill_1 .. fill_m]
-- Returns {jobs, buried}: jobs is flat, 10 entries per job (id, then FETCH_FIELDS of
-- protocol/job.py); buried lists the ids of entries made dead as bad payloads.
local now, lease, pool = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local max_args = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local fill = {}
for i = 1, n do
  fill[#fill + 1] = ARGV[5 + i]
end
for i = 1, tonumber(ARGV[6 + n]) or 0 do
  fill[#fill + 1] = ARGV[6 + n + i]
end
local deadline = now + lease
local MAX_BURY = 100

local taken = {} -- names this call leased jobs of
local status = {} -- name -> false (unavailable), true (no limit) or the limit
local out, buried = {}, {}
local nburied = 0

local function available(name)
  local s = status[name]
  if s == nil then
    if redis.call('SISMEMBER', K_PAUSED, name) == 1 then
      s = false
    else
      s = tonumber(redis.call('HGET', K_LIMITS, name)) or true
    end
    status[name] = s
  end
  if s == false then
    return false
  end
  if s ~= true and redis.call('ZCARD', key_running(name)) >= s then
    status[name] = false
    return false
  end
  return true
end

-- A count read from a job hash: a whole number from 0 to 2^53, else 0 (garbage).
local function whole(v)
  local x = tonumber(v)
  if not x or x ~= x or x < 0 or x >= 2 ^ 53 then
    return 0
  end
  return math.floor(x)
end

local function reject(id, name, err)
  buried[#buried + 1] = bury(id, name, 'bad_payload', err, now, false)
  nburied = nburied + 1
end

-- Pop entries of one queue until one job is leased; false when none could be.
local function take(name)
  while nburied < MAX_BURY do
    local ok, id = pcall(redis.call, 'RPOP', key_queue(name))
    if not ok or not id then
      status[name] = false
      return false
    end
    local jk = key_job(id)
    local kind = sane_id(id) and redis.call('TYPE', jk)['ok']
    if not kind then
      reject(id, name, 'queue entry is not a job id')
    elseif kind == 'none' then
      reject(id, name, 'job record missing')
    elseif kind ~= 'hash' then
      reject(id, name, 'job record is not a hash')
    else
      local f = redis.call('HMGET', jk, 'name', 'state', 'token', 'attempts', 'failures',
        'lost', 'enqueued_at', 'max_fails', 'timeout')
      local state = f[2]
      if state == 'running' or state == 'complete' or state == 'dead' or state == 'aborted'
        or (state == 'scheduled' and redis.call('ZSCORE', K_SCHEDULED, id))
        or (state == 'retry' and redis.call('ZSCORE', K_RETRY, id)) then
        -- A second entry for a job that is taken, finished or due later: nothing to run.
        count('stale_entries', name, 1)
      elseif f[1] ~= name then
        reject(id, name, 'job name ' .. tostring(f[1] or '(none)') .. ' does not match queue ' .. name)
      elseif redis.call('HEXISTS', jk, 'args') == 0 then
        reject(id, name, 'job has no args')
      elseif redis.call('HSTRLEN', jk, 'args') > max_args then
        reject(id, name, 'args of ' .. redis.call('HSTRLEN', jk, 'args') ..
          ' bytes exceed the limit of ' .. max_args .. ' bytes')
      else
        -- Token and counters are made text once and stored as they are returned: Redis
        -- and Lua print big numbers differently (a token that compares unequal makes
        -- every finish stale), and Python and Lua read garbage differently (failures
        -- that never add up retry forever). Garbage reads as 0.
        local token = string.format('%d', whole(math.abs(tonumber(f[3]) or 0)) + 1)
        local attempts = string.format('%d', whole(f[4]) + 1)
        local failures = string.format('%d', whole(f[5]))
        redis.call('HSET', jk, 'state', 'running', 'token', token, 'attempts', attempts,
          'failures', failures, 'started_at', now, 'pool', pool)
        redis.call('ZADD', key_running(name), deadline, id)
        local args = redis.call('HGET', jk, 'args')
        local k = #out
        out[k + 1] = id
        out[k + 2] = name
        out[k + 3] = token
        out[k + 4] = attempts
        out[k + 5] = failures
        out[k + 6] = f[6] or '0'
        out[k + 7] = args
        out[k + 8] = f[7] or '0'
        out[k + 9] = f[8] or ''
        out[k + 10] = f[9] or ''
        taken[name] = true
        return true
      end
    end
  end
  return false
end

local missing = 0
for i = 1, n do
  local name = ARGV[5 + i]
  if not (available(name) and take(name)) then
    missing = missing + 1
  end
end
while missing > 0 and nburied < MAX_BURY do
  local progressed = false
  for _, name in ipairs(fill) do
    if missing == 0 then
      break
    end
    if available(name) and take(name) then
      missing = missing - 1
      progressed = true
    end
  end
  if not progressed then
    break
  end
end
-- Pass the wake on: a queue that still holds jobs after this batch wakes one more
-- waiting pool, so a burst reaches every idle pool, not only the few the enqueue woke.
for name in pairs(taken) do
  if status[name] ~= false and redis.call('LLEN', key_queue(name)) > 0 then
    wake(name)
  end
end
flush_counts(now)
return {out, buried}
