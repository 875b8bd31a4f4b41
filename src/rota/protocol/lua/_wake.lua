-- include:
-- Shared helpers, part 3 of 6: queues and wake-ups: what makes a job runnable known to
-- the pools that wait for it, and a finished job known to the clients that wait on it.
--
-- Keys:
--   wake:<name>   list    wake tokens ('1') for the pools blocked on a job name; at most
--                         WAKE_CAP
--   schedwake     list    the same for the schedulers (a job scheduled or retrying)
--   ready         set     job names a fetch visits (see mark_ready)
--   queue:<name>  list    a name's queued job ids, the next at the tail; only read here
--   fkeys:<name>, frest:<name>  zset  a name's fair keys ready and resting (_fair.lua)
--   job:<id>      hash    read for 'waiters' (notify)
--   done:<id>     channel (pub/sub) the job's end: its state, and its result when
--                         complete; published only while someone waits

local WAKE_CAP = 10

-- Push a wake token unless the list holds WAKE_CAP tokens already. The list ends exactly
-- as an LPUSH and LTRIM to WAKE_CAP would leave it, for one read instead of two writes
-- once it is full (no pool waiting). Every push counts: a token can be taken by a pool
-- that then leases other work, or is stopping, and the next push still wakes another.
--
-- A push into an empty list also rings the list's shard channel of the same name
-- (SPUBLISH, in the script's own slot): in a cluster, a pool waits on all the shards of
-- a node with one SSUBSCRIBE instead of a BLPOP per shard, and takes the token with an
-- LMPOP when the channel rings (docs/protocol.md, "Wake lists"). Only the push that
-- made the list non-empty rings: such a pool waits only once its lists are empty, and
-- takes the tokens one by one as a BLPOP would. Redis 6.2 has no shard channels
-- (REDIS_VERSION_NUM is 7's), and pcall: a user whose ACL refuses SPUBLISH still
-- enqueues, and its pools find the token at their wait's timeout.
local function push_token(k)
  local n = redis.call('LLEN', k)
  if n < WAKE_CAP then
    redis.call('LPUSH', k, '1')
    if n == 0 and redis.REDIS_VERSION_NUM then
      redis.pcall('SPUBLISH', k, '1')
    end
  end
end

local function wake(name)
  push_token(key_wake(name))
end

local function wake_scheduler()
  push_token(K_SCHED_WAKE)
end

-- The ready set (K_READY) names the queues a fetch visits: it holds every name whose
-- queue holds jobs and is neither paused nor at its concurrency limit, and may hold a
-- few more (a fetch that finds one of those removes it). So every script that pushes
-- into a queue adds the name, unless the push found the queue holding jobs already
-- (its name is in the set then, or left it for being paused or at its limit, and
-- resume and a freed slot add it back).
local function mark_ready(name)
  redis.call('SADD', K_READY, name)
end

-- Whether a name's queue holds entries (false for a key that is not a list), or its fair
-- keys (_fair.lua) have jobs ready or resting: read only when the plain list is empty.
local function queue_holds(name)
  local ok, n = pcall(redis.call, 'LLEN', key_queue(name))
  if ok and n > 0 then
    return true
  end
  return redis.call('EXISTS', key_fair_keys(name), key_fair_rest(name)) > 0
end

-- Tell a client waiting on the job (client.wait) that it ended.
local function notify(jk, id, message)
  if redis.call('HEXISTS', jk, 'waiters') == 1 then
    redis.call('PUBLISH', key_done(id), message)
  end
end
