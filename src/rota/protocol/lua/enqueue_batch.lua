-- Enqueue many jobs in one call, each on its own terms (as the enqueue script would).
-- KEYS[1] namespace prefix
-- ARGV now_ms, then one MessagePack array of jobs, each an array of
--      [id, name, args, run_at_ms, unique_key, unique_ttl_ms, max_fails, timeout]
--      (strings; '' where the enqueue script takes '')
-- Returns a flat list: id, created, id, created, ... in the order given. Wake tokens are
-- pushed once per job name, not once per job.
local now = tonumber(ARGV[1])
local out = {}
local batch = {wake = {}, names = {}, scheduler = false}
for _, j in ipairs(cmsgpack.unpack(ARGV[2])) do
  local r = enqueue_one(j[1], j[2], j[3], now, j[4], j[5], j[6], j[7], j[8], batch)
  out[#out + 1] = r[1]
  out[#out + 1] = r[2]
end
for name in pairs(batch.wake) do
  wake(name)
end
local names = {}
for name, add in pairs(batch.names) do
  if add then
    names[#names + 1] = name
  end
end
call_chunked('SADD', K_NAMES, names)
if batch.scheduler then
  wake_scheduler()
end
return out
