-- One call of a sliding-window ratio budget, atomic in the server.
-- KEYS[1]: the budget's hash; KEYS[2], if given, a test clock (ns). ARGV: op ("request", "retry",
-- or "peek", which writes nothing and returns how many retries the window
-- would grant now), slot width
-- (ns), slots, ratio (parts per million), floor, reserve, now (ns, or "" to
-- read the server's TIME), idle TTL (ms), the configuration's fingerprint.
-- A retry is granted while the retries in the window, this one included,
-- are at most max(floor, fdiv(requests * ppm, 1e6) + reserve), budget.Ratio's
-- rule.
-- Fields: l latest instant seen (ns since the origin), o origin (server
-- seconds), h head slot number, a offset of l into the head slot (ns), q and
-- r requests and retries in the window, c the fingerprint of the
-- configuration that made the key, and per ring index i: ni the slot number
-- it holds, qi and ri its counts.
-- A key made with another configuration is refused (MISMATCH), and so is
-- one whose fields are not what this script writes (CORRUPT): neither is
-- ever read as a new, empty window.
-- Slots are counted from the head slot and the offset into it, never from
-- an absolute instant, so the origin can move (as the token bucket's does)
-- and slot numbers can be rebased: every value stays below 2^53, and Lua's
-- doubles hold it exactly, however long a key is in use.
local key = KEYS[1]
local op = ARGV[1]
local peek = op == 'peek'
local width, size, ppm, floor, reserve, ttl, fp = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[8]), ARGV[9]
local E9 = 1000000000
local function fdiv(a, b) -- floor(a / b), exactly, for integers below 2^53
  local q = math.floor(a / b)
  while q * b > a do q = q - 1 end
  while (q + 1) * b <= a do q = q + 1 end
  return q
end
-- parse reads raw, the value of field f, which must be missing (nil) or
-- hold a non-negative integer (any integer, if signed); anything else ends
-- the script with a CORRUPT error. int does so for a field it reads.
local function parse(f, raw, signed)
  if not raw then return nil end
  local v = tonumber(raw)
  if not v or v ~= math.floor(v) or math.abs(v) == math.huge or (v < 0 and not signed) then
    error({err = 'CORRUPT retrybudget: field ' .. f .. ' of ' .. key .. ' holds "' .. raw .. '", not ' .. (signed and 'an integer' or 'a count')})
  end
  return v
end
local function int(f, signed) return parse(f, redis.call('HGET', key, f), signed) end
local st = redis.call('HMGET', key, 'l', 'o', 'h', 'q', 'r', 'a', 'c')
if st[7] and st[7] ~= fp then
  return redis.error_reply('MISMATCH retrybudget: ' .. key .. ' was made by the configuration "' .. st[7] .. '", and this process has "' .. fp .. '"')
end
local last, origin, head, reqs, rets, off
if st[1] or st[2] or st[3] or st[4] or st[5] then
  local names = {'l', 'o', 'h', 'q', 'r'}
  for i = 1, 5 do
    if not st[i] then
      return redis.error_reply('CORRUPT retrybudget: field ' .. names[i] .. ' of ' .. key .. ' is missing')
    end
  end
  last, origin, head = parse('l', st[1], true), parse('o', st[2], true), parse('h', st[3], true)
  reqs, rets, off = parse('q', st[4]), parse('r', st[5]), parse('a', st[6])
end
-- The fields as read, to write back only those that change.
local l0, o0, h0, q0, r0, a0 = last, origin, head, reqs, rets, off
-- tagged: the head's slot is known to be numbered head. Every call ends
-- with it so; a call that does not move the head need not read it again.
local tagged = last ~= nil
local now
local callerOff -- for a new key on the caller's clock: the reading modulo the slot width
local server = KEYS[2] == nil and ARGV[7] == ''
if not server then
  -- A test clock: KEYS[2] is kept in the server and read inside this
  -- script; ARGV[7] is the caller's.
  if KEYS[2] then
    local c = redis.call('GET', KEYS[2])
    if not c then return redis.error_reply('CORRUPT retrybudget: the clock key ' .. KEYS[2] .. ' does not exist') end
    now = tonumber(c)
    if not now then return redis.error_reply('CORRUPT retrybudget: the clock key ' .. KEYS[2] .. ' holds ' .. c .. ', not a number of nanoseconds') end
    origin = 0
  else
    -- The caller's clock, as "sec nsec mod" (see Config.now): kept in
    -- seconds from an origin, as the server's TIME is, so that the
    -- numbers stay below 2^53 wherever in int64 the clock reads.
    local sec, nsec, mod = string.match(ARGV[7], '^(%-?%d+) (%d+) (%d+)$')
    sec, nsec, mod = tonumber(sec), tonumber(nsec), tonumber(mod)
    if origin == nil then origin = sec end
    local rel = sec - origin
    if last ~= nil and (rel - fdiv(last, E9)) * E9 > 2^52 then
      -- A step too far to count in nanoseconds: everything counted has
      -- left the window (a window is shorter than 2^52 ns), so the
      -- counts go, the origin moves to this reading, and the offset in
      -- the slot is the caller's, exact.
      reqs, rets, head, tagged = 0, 0, head + size, false
      origin, last, off, rel = sec, nsec, mod, 0
    elseif last ~= nil and (rel - fdiv(last, E9)) * E9 < -2^52 then
      rel, nsec = fdiv(last, E9), last - fdiv(last, E9) * E9 -- far earlier: the latest instant seen
    elseif last == nil then
      callerOff = mod
    end
    now = rel * E9 + nsec
  end
else
  local tm = redis.call('TIME')
  local sec, usec = tonumber(tm[1]), tonumber(tm[2])
  if origin == nil then origin = sec end
  now = (sec - origin) * E9 + usec * 1000
end
if last == nil then
  tagged = false
  head = fdiv(now, width)
  last, off, reqs, rets = now, now - head * width, 0, 0
  if callerOff then off = callerOff end -- the slot boundaries of the caller's clock, not of its origin
elseif off == nil then
  off = last - head * width -- a key written before offsets were kept
end
if now > last then
  off = off + (now - last)
  last = now
  local crossed = fdiv(off, width)
  off = off - crossed * width
  if crossed >= size then
    -- Everything counted has left the window. Any head at least size
    -- slots on makes every slot stale, so the head moves by size only.
    reqs, rets, head = 0, 0, head + size
    tagged = false
  else
    for _ = 1, crossed do
      head = head + 1
      local i = head - fdiv(head, size) * size
      local ni, qi, ri = 'n' .. i, 'q' .. i, 'r' .. i
      local slot = redis.call('HMGET', key, ni, qi, ri)
      local tag = parse(ni, slot[1], true)
      if tag ~= nil and tag <= head - 1 and (head - 1) - tag < size then
        reqs = reqs - (parse(qi, slot[2]) or 0)
        rets = rets - (parse(ri, slot[3]) or 0)
      end
      if not peek then redis.call('HSET', key, ni, head, qi, 0, ri, 0) end
    end
  end
end
if peek then
  -- The window as of now, computed above without a write.
  local limit = math.max(floor, fdiv((reqs or 0) * ppm, 1000000) + reserve)
  return math.max(limit - (rets or 0), 0)
end
if head > 2^50 then
  -- Renumber the slots by a multiple of size, which keeps every slot at
  -- its ring index and every difference between slot numbers.
  local shift = (fdiv(head, size) - 1) * size
  head = head - shift
  for i = 0, size - 1 do
    local tag = int('n' .. i, true)
    if tag ~= nil then
      redis.call('HSET', key, 'n' .. i, tag - shift)
    end
  end
  tagged = false
end
if KEYS[2] == nil and last > 2^52 then
  -- Move the origin up by whole seconds; the offset is unchanged.
  local shift = fdiv(last, E9)
  origin, last = origin + shift, last - shift * E9
end
local i = head - fdiv(head, size) * size
if not tagged and int('n' .. i, true) ~= head then
  redis.call('HSET', key, 'n' .. i, head, 'q' .. i, 0, 'r' .. i, 0)
end
local granted = 0
if op == 'request' then
  redis.call('HINCRBY', key, 'q' .. i, 1)
  reqs = reqs + 1
elseif op == 'retry' then
  local allowance = fdiv(reqs * ppm, 1000000) + reserve
  if not (rets >= floor and rets >= allowance) then
    redis.call('HINCRBY', key, 'r' .. i, 1)
    rets, granted = rets + 1, 1
  end
end
-- Write only the fields that changed (all of them, and c, on a new key).
-- A number goes to Redis as %.17g: exact for an integer below 2^53.
local w, n = {}, 0
if last ~= l0 then w[n + 1], w[n + 2], n = 'l', last, n + 2 end
if origin ~= o0 then w[n + 1], w[n + 2], n = 'o', origin, n + 2 end
if head ~= h0 then w[n + 1], w[n + 2], n = 'h', head, n + 2 end
if off ~= a0 then w[n + 1], w[n + 2], n = 'a', off, n + 2 end
if reqs ~= q0 then w[n + 1], w[n + 2], n = 'q', reqs, n + 2 end
if rets ~= r0 then w[n + 1], w[n + 2], n = 'r', rets, n + 2 end
if not st[7] then w[n + 1], w[n + 2], n = 'c', fp, n + 2 end
if n > 0 then redis.call('HSET', key, unpack(w, 1, n)) end
redis.call('PEXPIRE', key, ttl)
return granted
