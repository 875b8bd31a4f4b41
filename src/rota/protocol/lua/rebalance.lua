-- include: _wake
-- Move the parts of a job name's concurrency limit between the shards of a namespace
-- (see rota.client.balance): each shard keeps its part in K_LIMITS, which its fetches
-- check as on one shard; these calls read the parts and move them, one shard per call.
-- The sum of the parts never exceeds the name's whole limit because a pass lowers
-- first and raises only by what its lowers freed, under a lease held in shard 0 whose
-- number fences off an older holder's raises in every shard (K_REBALANCE_FENCE).
-- KEYS[1] namespace prefix
-- ARGV, by operation:
--   'lead', holder, ms      (shard 0) take or renew the lease: its number, 0 when
--                           another holds it
--   'leave', holder         (shard 0) give the lease up: 1 if it was held
--   'floor', holder, number (shard 0) the count at least number; holder's lease ends
--   'read', number, name..  the lease number (refused when older than a number that
--                           read the shard: 'fenced <number>'), then per name: its part as
--                           stored (false: none), its running and waiting jobs
--   'lower', name, target.. per name: part = min(part, max(target, running now)); a part
--                           that is no whole number in 0..1e9 (written by hand) counts
--                           as 0 and is written clean; a name with no part is left so.
--                           Returns per name the part after, and 1 when it was garbage
--   'raise', number, name, by..  per name: part + by, unless a newer lease read the
--                           shard since ('fenced'); a name with no part, or garbage, is left
--                           (-1 for it). Returns per name the part after
--   'rlower', name, period, target..  the same for a rate's part (K_RATES, '<count>/<period
--                           ms>'), in starts per the whole's period: part = min(part,
--                           target), written in that period; garbage counts as 0.
--                           Returns per name the part after (text), and the garbage flag
--   'rraise', number, name, period, by..  the same as 'raise', for a rate's part
-- A rate's part of 0 starts nothing in its shard (fetch.lua) until a raise.
local op = ARGV[1]
local MAX_PART = 1000000000

-- A part as stored: its number, or nil when it is no whole number in 0..MAX_PART.
local function clean(raw)
  if type(raw) ~= 'string' or #raw > 10 or not string.match(raw, '^%d+$') then
    return nil
  end
  local v = tonumber(raw)
  if v > MAX_PART then
    return nil
  end
  return v
end

-- Whether a newer lease than the raise's (ARGV[2]) read this shard since: its raise is
-- refused, the newer holder's pass decides.
local function fenced()
  return tonumber(redis.call('GET', K_REBALANCE_FENCE)) ~= tonumber(ARGV[2])
end

-- A rate's part in starts per ``period`` ms: nil when there is none, false for garbage.
local function rate_part(name, period)
  local ok, raw = pcall(redis.call, 'HGET', K_RATES, name)
  if not ok or not raw then
    return nil
  end
  local c, p = string.match(raw, '^([%d%.]+)/(%d+)$')
  c, p = tonumber(c), tonumber(p)
  if not c or not p or not (p > 0) or not (c >= 0 and c <= 1e9) then
    return false
  end
  return c * period / p
end

-- A count of starts as the rates hash holds it: down to a millionth, never up (so that
-- parts written never add up to more than the whole), without an exponent.
local function rate_text(c, period)
  local s = string.format('%.6f', math.floor(c * 1e6) / 1e6)
  s = string.gsub((string.gsub(s, '0+$', '')), '%.$', '')
  return s .. '/' .. period, tonumber(s)
end

local function count(cmd, key)
  local ok, n = pcall(redis.call, cmd, key)
  return ok and n or 0
end

if op == 'lead' then
  local holder, ms = ARGV[2], tonumber(ARGV[3])
  local held = redis.call('GET', K_REBALANCER)
  if held then
    local who, number = string.match(held, '^(.*) (%d+)$')
    if who ~= holder then
      return 0
    end
    redis.call('PEXPIRE', K_REBALANCER, ms)
    return tonumber(number)
  end
  local number = redis.call('INCR', K_REBALANCE_COUNT)
  redis.call('SET', K_REBALANCER, holder .. ' ' .. number, 'PX', ms)
  return number
end

if op == 'floor' then
  -- A pass fenced off by a number above the count (shard 0 lost its count, restarted
  -- without persistence): the count goes past it, and the holder's lease ends, so that
  -- the next lease takes a number no shard refuses.
  local floor = tonumber(ARGV[3]) or 0
  if (tonumber(redis.call('GET', K_REBALANCE_COUNT)) or 0) < floor then
    redis.call('SET', K_REBALANCE_COUNT, floor)
  end
  local held = redis.call('GET', K_REBALANCER)
  if held and string.match(held, '^(.*) %d+$') == ARGV[2] then
    redis.call('DEL', K_REBALANCER)
  end
  return 1
end

if op == 'leave' then
  local held = redis.call('GET', K_REBALANCER)
  if held and string.match(held, '^(.*) %d+$') == ARGV[2] then
    redis.call('DEL', K_REBALANCER)
    return 1
  end
  return 0
end

if op == 'read' then
  local number = tonumber(ARGV[2])
  local fence = tonumber(redis.call('GET', K_REBALANCE_FENCE)) or 0
  if not number or number < fence then
    return 'fenced ' .. fence
  end
  if number ~= fence then -- written once per lease, read at each pass
    redis.call('SET', K_REBALANCE_FENCE, ARGV[2])
  end
  local out = {}
  for i = 3, #ARGV do
    local name = ARGV[i]
    local ok, part = pcall(redis.call, 'HGET', K_LIMITS, name)
    out[#out + 1] = ok and part or false
    out[#out + 1] = count('ZCARD', key_running(name))
    local keyed = 0
    local okf, n = pcall(redis.call, 'HGET', key_fair(name), 'n')
    if okf then
      keyed = tonumber(n) or 0
    end
    if not (keyed >= 0 and keyed < 1e12) then
      keyed = 0
    end
    out[#out + 1] = count('LLEN', key_queue(name)) + math.floor(keyed)
    local okr, rate = pcall(redis.call, 'HGET', K_RATES, name)
    out[#out + 1] = okr and rate or false
  end
  return out
end

if op == 'rlower' then
  local out = {}
  for i = 2, #ARGV - 2, 3 do
    local name, period, target = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]) or 0
    local part = rate_part(name, period)
    if part == nil then
      out[#out + 1] = '-1'
      out[#out + 1] = 0
    else
      local new = math.min(part or 0, target)
      local text, value = rate_text(new, period)
      redis.call('HSET', K_RATES, name, text)
      out[#out + 1] = tostring(value)
      out[#out + 1] = part == false and 1 or 0
    end
  end
  return out
end

if op == 'rraise' then
  if fenced() then
    return 'fenced'
  end
  for i = 3, #ARGV - 2, 3 do
    local name, period, by = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]) or 0
    local part = rate_part(name, period)
    if part and by > 0 then
      redis.call('HSET', K_RATES, name, (rate_text(part + by, period)))
      if queue_holds(name) then
        wake(name)
      end
    end
  end
  return {}
end

if op == 'lower' then
  local out = {}
  for i = 2, #ARGV - 1, 2 do
    local name, target = ARGV[i], tonumber(ARGV[i + 1]) or 0
    local okr, raw = pcall(redis.call, 'HGET', K_LIMITS, name)
    if not okr or not raw then
      out[#out + 1] = -1
      out[#out + 1] = 0
    else
      local part = clean(raw)
      local garbage = part == nil
      part = part or 0
      local new = math.min(part, math.max(target, count('ZCARD', key_running(name))))
      if garbage or new ~= part then
        redis.call('HSET', K_LIMITS, name, new)
      end
      out[#out + 1] = new
      out[#out + 1] = garbage and 1 or 0
    end
  end
  return out
end

if op == 'raise' then
  if fenced() then
    return 'fenced'
  end
  local out = {}
  for i = 3, #ARGV - 1, 2 do
    local name, by = ARGV[i], tonumber(ARGV[i + 1]) or 0
    local okr, raw = pcall(redis.call, 'HGET', K_LIMITS, name)
    local part = okr and clean(raw) or nil
    if part == nil or not (by > 0) then
      out[#out + 1] = part or -1
    else
      part = part + math.floor(by)
      redis.call('HSET', K_LIMITS, name, part)
      -- A name at its old part left the ready set: fetches look at it again.
      if queue_holds(name) then
        mark_ready(name)
        wake(name)
      end
      out[#out + 1] = part
    end
  end
  return out
end

return redis.error_reply('rebalance: unknown operation ' .. tostring(op))
