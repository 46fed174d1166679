-- bench/bench.lua: wrk script for bench/run.
--   wrk ... -s bench/bench.lua URL -- REQUEST_FILE NTHREADS GROUP
-- REQUEST_FILE holds complete HTTP/1.1 requests as "<length>\n<bytes>"
-- records.  Thread t keeps the groups of GROUP consecutive records whose
-- group number modulo NTHREADS is t (GROUP 5 keeps the 5 copies of one
-- notification in one thread, where its connections send them at once).
-- Each thread sends its records in order and starts again at the end
-- (counted in "wraps": a wrapped request is a duplicate delivery).

local nthreads_seen = 0
local threads = {}

function setup(thread)
   thread:set("tid", nthreads_seen)
   nthreads_seen = nthreads_seen + 1
   table.insert(threads, thread)
end

reqs = {}
n = 0
i = 0
wraps = 0

function init(args)
   local f = assert(io.open(args[1], "rb"))
   local nt = tonumber(args[2])
   local group = tonumber(args[3] or "1")
   local k = 0
   while true do
      local l = f:read("*l")
      if not l then break end
      local r = f:read(tonumber(l))
      if math.floor(k / group) % nt == tid then
         n = n + 1
         reqs[n] = r
      end
      k = k + 1
   end
   f:close()
end

function request()
   i = i + 1
   if i > n then
      i = 1
      wraps = wraps + 1
   end
   return reqs[i]
end

function done(summary, latency, requests)
   local w = 0
   local sent = 0
   for _, t in ipairs(threads) do
      w = w + (t:get("wraps") or 0)
   end
   local e = summary.errors
   io.write(string.format(
      'BENCHJSON {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,' ..
      '"status":%d,"timeout":%d,"p50_us":%d,"p99_us":%d,"max_us":%d,"wraps":%d}\n',
      summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
      latency:percentile(50), latency:percentile(99), latency.max, w))
end
