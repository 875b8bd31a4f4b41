-- include: _base _counts _wake _graph _fair
-- Reclaim expired leases and forget dead pools. Idempotent: every pool runs it.
-- A job whose lease expired goes back to the front of its queue with reason 'lost'
-- (not a failure); after max_lost lost attempts it is a poison pill and goes dead.
-- A pass visits the names of the leased set (those whose running set may hold leases:
-- every fetch adds the names it leases), so an idle namespace costs it nothing per name.
-- KEYS[1] namespace prefix
-- ARGV now_ms, max_lost (default for jobs without a max_lost field), pool_expiry_ms, limit
-- Returns {reclaimed ids, buried ids, forgotten pools}.
local now, max_lost_default = tonumber(ARGV[1]), tonumber(ARGV[2])
local pool_expiry, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local reclaimed, buried, forgotten = {}, {}, {}
-- A reaper waits for calm, by Redis's own clock: while no beat has landed for one and a
-- half heartbeat intervals (a third of pool_expiry each), and for two intervals after
-- beats land again. A Redis stopped or paused that long held every pool's beat back: the
-- beats land after it runs again, and each live pool beats afresh (extending its
-- leases) before this pass may take it for a pool that stopped beating.
local beat = redis.call('HMGET', K_BEATS, 'at', 'since')
local last, since = tonumber(beat[1]), tonumber(beat[2])
if last and since then
  local at = server_ms()
  if at - last > pool_expiry / 2 or at - since < pool_expiry * 2 / 3 then
    return {reclaimed, buried, forgotten}
  end
end
for _, name in ipairs(redis.call('SMEMBERS', K_LEASED)) do
  local rk = key_running(name)
  local ok, ids = pcall(due_members, rk, now, limit)
  if ok then
    local woken = false
    for _, id in ipairs(ids) do
      redis.call('ZREM', rk, id)
      local jk = key_job(id)
      if not is_hash(jk) then
        buried[#buried + 1] = bury(id, name, 'bad_payload', 'running job has no record', now, nil)
      else
        local f = redis.call('HMGET', jk, 'lost', 'max_lost', 'token', 'abort', 'fair')
        if f[5] then -- a keyed job: its key's running set lets it go too
          fair_release(name, f[5], {id})
        end
        -- NaN compares false with everything: such garbage would requeue a poison pill forever
        local lost, max_lost = tonumber(f[1]) or 0, tonumber(f[2]) or max_lost_default
        if lost ~= lost then
          lost = 0
        end
        if max_lost ~= max_lost then
          max_lost = max_lost_default
        end
        lost = lost + 1
        local token = math.abs(tonumber(f[3]) or 0)
        -- Retire the token: the worker that lost the lease can no longer finish the job.
        redis.call('HSET', jk, 'lost', lost, 'token', -token)
        count('lost', name, 1)
        if f[4] then
          redis.call('HSET', jk, 'state', 'aborted', 'reason', 'aborted',
            'error', 'aborted while its lease was lost', 'finished_at', now)
          release_holds(jk, id)
          notify(jk, id, 'aborted')
          count('aborted', name, 1)
          local d = redis.call('HMGET', jk, 'children', 'group')
          end_dependents(id, 'aborted', d[1], d[2], now)
          local keep = tonumber(f[4])
          redis.call('PEXPIRE', jk, str(keep and keep >= 1 and keep <= MAX_MS and math.floor(keep) or 3600000))
        elseif lost >= max_lost then
          buried[#buried + 1] = bury(id, name, 'lost',
            'lease expired ' .. lost .. ' times: the process running it died or was cut off',
            now, nil)
        else
          redis.call('HSET', jk, 'state', 'queued', 'reason', 'lost')
          push_job(name, f[5], id, true) -- the front of its key's list, or of the queue
          reclaimed[#reclaimed + 1] = id
          woken = true
        end
      end
    end
    if woken then
      mark_ready(name)
      wake(name)
    end
  end
  -- A name with no lease left leaves the leased set.
  local ok_n, held = pcall(redis.call, 'ZCARD', rk)
  if not (ok_n and held > 0) then
    redis.call('SREM', K_LEASED, name)
  end
  -- A queue holding jobs that the ready set does not name (a name at its limit whose
  -- slot a lease that ended dead or aborted freed) joins it, and a pool is woken for it.
  if ok and queue_holds(name) and redis.call('SISMEMBER', K_READY, name) == 0
      and redis.call('SISMEMBER', K_PAUSED, name) == 0 then
    mark_ready(name)
    wake(name)
  end
end
local pools = due_members(K_POOLS, now - pool_expiry, limit)
for _, pool in ipairs(pools) do
  redis.call('ZREM', K_POOLS, pool)
  redis.call('DEL', key_pool(pool))
  forgotten[#forgotten + 1] = pool
end
flush_counts(now)
return {reclaimed, buried, forgotten}
