-- include:
-- Shared helpers, part 1 of 6: base. Each file's first line names the helpers it uses;
-- a script is sent with those (and theirs), each after the helpers it includes, after
-- the key helpers (key_job, K_DEAD, ...) rendered from protocol/keys.py and before the
-- script's own file (protocol/includes.py, protocol/render.py).
-- Scripts never raise on bad data written by others: a Redis script that errors half-way
-- keeps its earlier writes. Loaded as a function library, these locals outlive a call:
-- whatever a call gathers is emptied by the next enter() (see _counts.lua).
--
-- Keys (each name is the namespace prefix, then what is shown):
--   job:<id>      hash    a job's record: read here only for 'unique_key' and 'expires'
--                         (release_holds)
--   unique:<key>  string  the id of the live job holding a unique key: deleted when that
--                         job lets it go
--   expiring      zset    job ids scored by their expiry (see _expiry.lua)
--   running:<name> zset   a running set (whatever key add_leases is given): lease deadline
--                         (ms) -> job id

-- A function that makes a text from a key once and hands out the same text again, for
-- texts that do not change from call to call: kept across calls (a library's locals
-- outlive a call), MEMO_MAX at most, then started afresh.
local MEMO_MAX = 4096
local function memo(make)
  local texts, n = {}, 0
  return function(k)
    local s = texts[k]
    if not s then
      s = make(k)
      if k == k then -- NaN cannot be a table key
        if n >= MEMO_MAX then
          texts, n = {}, 0
        end
        texts[k] = s
        n = n + 1
      end
    end
    return s
  end
end

-- A number handed to redis.call is printed (with '%.17g') each time, which costs more than
-- many a command: str() prints each number once.
local str = memo(function(x) return string.format('%.17g', x) end)

-- The latest time a record may name, 9999-12-31T23:59:59Z in ms (protocol.job.MAX_MS).
-- A score past it (+inf, 1e300, a time in µs, written by others) names no time rota can
-- wait for: the scripts that read scores as times take it as due now, or bury its job.
local MAX_MS = 253402300799000
local PAST_MAX = '(253402300799000'

-- A time (ms) as a reply's text: whole and within 0..MAX_MS, NaN as 0. Lua's tostring
-- prints a number of 15 digits and more in exponent form ('2.53402300799e+14'), which no
-- reader takes for an integer.
local function ms_text(x)
  if x ~= x or x < 0 then
    x = 0
  end
  return string.format('%.0f', math.min(x, MAX_MS))
end

-- The members of the sorted set k scored up to `upto` or past MAX_MS, `limit` at most:
-- the entries that are due, for a reader of scores as times (see MAX_MS).
local function due_members(k, upto, limit)
  local ids = redis.call('ZRANGEBYSCORE', k, '-inf', upto, 'LIMIT', 0, limit)
  if #ids < limit then
    local far = redis.call('ZRANGEBYSCORE', k, PAST_MAX, '+inf', 'LIMIT', 0, limit - #ids)
    for i = 1, #far do
      ids[#ids + 1] = far[i]
    end
  end
  return ids
end

-- HINCRBY that outlives a field others wrote as no integer (text, 1e300, 1.5) or a key of
-- another type: the field starts again at `by` (left as it is on a key that is no hash).
-- The new value.
local function incr(k, f, by)
  local ok, n = pcall(redis.call, 'HINCRBY', k, f, by)
  if ok then
    return n
  end
  pcall(redis.call, 'HSET', k, f, by)
  return tonumber(by)
end

-- Redis's own clock (ms), for what must not rest on the caller's: a call that a stopped or
-- paused Redis held back runs later than its caller read the time.
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- What a fetch reads of a job, by position: a job hash is read whole (HGETALL returns
-- only the fields it holds, one pass over a small hash, where an HMGET of these 14 looks
-- each up and returns every absent one: most are absent), then placed by this table.
local READ_AT = {name = 1, state = 2, token = 3, attempts = 4, failures = 5, lost = 6,
  enqueued_at = 7, max_fails = 8, timeout = 9, deps = 10, traceparent = 11, tracestate = 12,
  args = 13, expires = 14}

-- A count read from a job hash: a whole number from 0 to 2^53, else 0 (garbage).
local function whole(v)
  local x = tonumber(v)
  if not x or x ~= x or x < 0 or x >= 2 ^ 53 then
    return 0
  end
  return math.floor(x)
end

-- The texts a lease and a finish write, each made once per text read (memo): the new
-- token, attempts and failures from those read (absent reads as 0: a new job's record
-- leaves zero counters out), and the token retired ('-' and the token). Most jobs carry the
-- same few values, and reading and printing numbers costs more than a command.
local next_token = memo(function(v) return str(whole(math.abs(tonumber(v) or 0)) + 1) end)
local next_count = memo(function(v) return str(whole(v) + 1) end)
local same_count = memo(function(v) return str(whole(v)) end)
local retire = memo(function(token) return '-' .. token end)

-- Run `cmd key item...` over a list of items (its first n when given), at most 1000 per
-- call: unpack() has a limit on how many values it returns. Items of ZADD come in pairs,
-- and 1000 keeps them so.
local function call_chunked(cmd, key, items, n)
  n = n or #items
  for i = 1, n, 1000 do
    redis.call(cmd, key, unpack(items, i, math.min(i + 999, n)))
  end
end

-- Add leases (deadline, id, ...) to a running set, kept in Redis's skiplist encoding.
-- A small sorted set is a listpack, where each insert and each removal scans every entry
-- (and a lease, the latest deadline, is inserted at the far end): at a pool's usual 100-200
-- leases a name that cost more than the rest of the fetch. A member longer than
-- zset-max-listpack-value (64) makes Redis convert the set, which never converts back
-- while it holds entries: it goes first in the same ZADD, and is removed right after, so
-- no reader sees it. (Written out: a library has no string library while it loads.)
local LONG_MEMBER = '~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~' ..
  '~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~' -- 80 bytes
local function add_leases(k, entries)
  local all = {'+inf', LONG_MEMBER}
  for i = 1, #entries do
    all[i + 2] = entries[i]
  end
  call_chunked('ZADD', k, all)
  redis.call('ZREM', k, LONG_MEMBER)
end

local function is_hash(k)
  return redis.call('TYPE', k)['ok'] == 'hash'
end

-- A queue entry can be used as a job id when it is short and printable. (One anchored
-- match runs the whole entry in one go, at half the cost of searching for a bad byte.)
local function sane_id(id)
  return #id <= 200 and string.find(id, '^[%w%-%._:]+$') ~= nil
end

-- Free what a job holds while it may still start: its unique key (if it still holds it)
-- and its entry in the expiring set (see _expiry.lua), so that a job that ended or was
-- deleted leaves neither behind until their time. `u`, `e`: the job's unique_key and
-- expires fields when the caller read them already (false when absent), nil to read
-- them here.
local function release_holds(jk, id, u, e)
  if u == nil then
    local f = redis.call('HMGET', jk, 'unique_key', 'expires')
    u, e = f[1], f[2]
  end
  if u and u ~= '' then
    local uk = key_unique(u)
    if redis.call('GET', uk) == id then
      redis.call('DEL', uk)
    end
  end
  if e then
    redis.call('ZREM', K_EXPIRING, id)
  end
end

-- The table at t[k], made on first use (ids per job name, and such).
local function table_at(t, k)
  local v = t[k]
  if not v then
    v = {}
    t[k] = v
  end
  return v
end
