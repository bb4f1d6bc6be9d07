-- One call of a sliding-window ratio budget, atomic in the server.
-- KEYS[1]: the budget's hash; KEYS[2], if given, a test clock (ns). ARGV: op ("request" or "retry"), slot width
-- (ns), slots, ratio (parts per million), floor, now (ns, or "" to read the
-- server's TIME), idle TTL (ms).
-- Fields: l latest instant seen (ns since the origin), o origin (server
-- seconds), h head slot number, q and r requests and retries in the window,
-- and per ring index i: ni the slot number it holds, qi and ri its counts.
-- Instants count from the key's creation; unlike the token bucket's, they
-- are not rebased, so a key in continuous use for 104 days (2^53 ns) would
-- lose precision. An idle key expires after IdleTTL and starts afresh.
local key = KEYS[1]
local op = ARGV[1]
local width, size, ppm, floor, ttl = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[7])
local E9 = 1000000000
local function fdiv(a, b) -- floor(a / b), exactly, for integers below 2^53
  local q = math.floor(a / b)
  while q * b > a do q = q - 1 end
  while (q + 1) * b <= a do q = q + 1 end
  return q
end
local st = redis.call('HMGET', key, 'l', 'o', 'h', 'q', 'r')
local last, origin, head, reqs, rets = tonumber(st[1]), tonumber(st[2]), tonumber(st[3]), tonumber(st[4]), tonumber(st[5])
local now
if KEYS[2] then
  -- A clock kept in the server for tests, read inside this script.
  now, origin = tonumber(redis.call('GET', KEYS[2]) or '0'), 0
elseif ARGV[6] ~= '' then
  now, origin = tonumber(ARGV[6]), 0
else
  local tm = redis.call('TIME')
  local sec, usec = tonumber(tm[1]), tonumber(tm[2])
  if origin == nil then origin = sec end
  now = (sec - origin) * E9 + usec * 1000
end
if last == nil then
  last, head, reqs, rets = now, fdiv(now, width), 0, 0
end
if now > last then
  last = now
  local n = fdiv(now, width)
  if n - head >= size then
    -- Everything counted has left the window; stale slots read as empty.
    reqs, rets, head = 0, 0, n
  else
    while head < n do
      head = head + 1
      local i = head - fdiv(head, size) * size
      local tag = tonumber(redis.call('HGET', key, 'n' .. i))
      if tag ~= nil and tag <= head - 1 and (head - 1) - tag < size then
        reqs = reqs - (tonumber(redis.call('HGET', key, 'q' .. i)) or 0)
        rets = rets - (tonumber(redis.call('HGET', key, 'r' .. i)) or 0)
      end
      redis.call('HSET', key, 'n' .. i, string.format('%.0f', head), 'q' .. i, 0, 'r' .. i, 0)
    end
  end
end
local i = head - fdiv(head, size) * size
if tonumber(redis.call('HGET', key, 'n' .. i)) ~= head then
  redis.call('HSET', key, 'n' .. i, string.format('%.0f', head), 'q' .. i, 0, 'r' .. i, 0)
end
local granted = 0
if op == 'request' then
  redis.call('HINCRBY', key, 'q' .. i, 1)
  reqs = reqs + 1
elseif op == 'retry' then
  local allowance = fdiv(reqs * ppm, 1000000)
  if not (rets >= floor and rets >= allowance) then
    redis.call('HINCRBY', key, 'r' .. i, 1)
    rets, granted = rets + 1, 1
  end
end
redis.call('HSET', key, 'l', string.format('%.0f', last), 'o', string.format('%.0f', origin),
  'h', string.format('%.0f', head), 'q', string.format('%.0f', reqs), 'r', string.format('%.0f', rets))
redis.call('PEXPIRE', key, ttl)
return granted
