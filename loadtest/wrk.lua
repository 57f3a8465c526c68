-- wrk script for unclog's load tests (loadtest/run.py).
--
-- UNCLOG_PATHS="/a,/b,..." makes every request take the next path in turn,
-- so the flood spreads over distinct 16 MiB files; without it wrk sends its
-- URL's path with its fast pre-built request.
-- done() prints one JSON line, prefixed WRKJSON, that run.py parses.

local paths = {}
local list = os.getenv("UNCLOG_PATHS")
if list then
  for p in string.gmatch(list, "[^,]+") do
    paths[#paths + 1] = p
  end
end

if #paths > 0 then
  local i = 0
  request = function()
    i = i % #paths + 1
    return wrk.format("GET", paths[i])
  end
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"bytes":%d,"duration_us":%d,"connect_errors":%d,' ..
    '"read_errors":%d,"write_errors":%d,"status_errors":%d,"timeouts":%d,' ..
    '"lat_p50_us":%d,"lat_p99_us":%d,"lat_max_us":%d}\n',
    summary.requests, summary.bytes, summary.duration, e.connect, e.read, e.write,
    e.status, e.timeout, latency:percentile(50), latency:percentile(99), latency.max))
end
