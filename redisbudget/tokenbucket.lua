-- One call of a token-bucket retry budget, atomic in the server.
-- KEYS[1]: the budget's hash; KEYS[2], if given, a test clock (ns). ARGV: op ("retry", "credit", or
-- "peek", which writes nothing and returns the balance as of now),
-- amount (milli-tokens), capacity, refill (milli-tokens per second), now
-- (ns, or "" to read the server's TIME), idle TTL (ms), the configuration's
-- fingerprint.
-- Fields: t tokens, f fraction of a milli-token in 1e-9, s latest instant
-- seen (ns since the origin), o origin (server seconds), c the fingerprint
-- of the configuration that made the key.
-- Every value stays below 2^53, so Lua's doubles hold it exactly.
-- A key made with another configuration is refused (MISMATCH), and so is
-- one whose fields are not what this script writes (CORRUPT): neither is
-- ever read as a new, full bucket.
local key = KEYS[1]
local op, amount = ARGV[1], tonumber(ARGV[2])
local cap, rate, ttl, fp = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6]), ARGV[7]
local E9 = 1000000000
local st = redis.call('HMGET', key, 't', 'f', 's', 'o', 'c')
if st[5] and st[5] ~= fp then
  return redis.error_reply('MISMATCH retrybudget: ' .. key .. ' was made by the configuration "' .. st[5] .. '", and this process has "' .. fp .. '"')
end
local tokens, frac, seen, origin
-- The fields as read, to write back only those that change.
local t0, f0, s0, o0
local function whole(x) return x and x == math.floor(x) and math.abs(x) ~= math.huge end
if st[1] or st[2] or st[3] or st[4] then
  t0, f0, s0, o0 = tonumber(st[1]), tonumber(st[2]), tonumber(st[3]), tonumber(st[4])
  if not (whole(t0) and whole(f0) and whole(s0) and whole(o0)) then
    local names, v = {'t', 'f', 's', 'o'}, {t0, f0, s0, o0}
    for i = 1, 4 do
      if not whole(v[i]) then
        local what = st[i] and ('holds "' .. st[i] .. '", not an integer') or 'is missing'
        return redis.error_reply('CORRUPT retrybudget: field ' .. names[i] .. ' of ' .. key .. ' ' .. what)
      end
    end
  end
  tokens, frac, seen, origin = t0, f0, s0, o0
  if tokens < 0 or tokens > cap then
    return redis.error_reply('CORRUPT retrybudget: field t of ' .. key .. ' holds ' .. st[1] .. ' milli-tokens, outside [0, ' .. string.format('%.0f', cap) .. ']')
  end
  if frac < 0 or frac >= E9 then
    return redis.error_reply('CORRUPT retrybudget: field f of ' .. key .. ' holds ' .. st[2] .. ', outside [0, 1e9)')
  end
end
local now
if KEYS[2] then
  -- A clock kept in the server for tests, read inside this script.
  local c = redis.call('GET', KEYS[2])
  if not c then return redis.error_reply('CORRUPT retrybudget: the clock key ' .. KEYS[2] .. ' does not exist') end
  now, origin = tonumber(c), 0
  if not now then return redis.error_reply('CORRUPT retrybudget: the clock key ' .. KEYS[2] .. ' holds ' .. c .. ', not a number of nanoseconds') end
elseif ARGV[5] ~= '' then
  -- The caller's clock, as "sec nsec mod" (see Config.now): kept in
  -- seconds from an origin, as the server's TIME is, so that the numbers
  -- stay below 2^53 wherever in int64 the clock reads.
  local sec, nsec = string.match(ARGV[5], '^(%-?%d+) (%d+) %d+$')
  sec, nsec = tonumber(sec), tonumber(nsec)
  if origin == nil then origin = sec end
  local rel = sec - origin
  if seen ~= nil then
    local ss = math.floor(seen / E9)
    local ds = rel - ss
    if ds * E9 > 2^52 then
      -- A step too far to count in nanoseconds: the refill in whole
      -- seconds and the rest, exactly, and the origin moves to this
      -- reading.
      if rate > 0 and tokens < cap then
        local acc = frac + (nsec - (seen - ss * E9)) * rate -- may be negative
        local whole = math.floor(acc / E9)
        while whole * E9 > acc do whole = whole - 1 end
        while (whole + 1) * E9 <= acc do whole = whole + 1 end
        whole = whole + ds * rate
        if whole >= cap - tokens then
          tokens, frac = cap, 0
        else
          tokens, frac = tokens + whole, acc - math.floor(acc / E9) * E9
          while frac < 0 do frac = frac + E9 end
          while frac >= E9 do frac = frac - E9 end
        end
      elseif rate > 0 then
        tokens, frac = cap, 0
      end
      origin, seen, rel, nsec = sec, nsec, 0, nsec
    elseif ds * E9 < -2^52 then
      rel, nsec = ss, seen - ss * E9 -- far earlier: the latest instant seen
    end
  end
  now = rel * E9 + nsec
else
  local tm = redis.call('TIME')
  local sec, usec = tonumber(tm[1]), tonumber(tm[2])
  if origin == nil then origin = sec end
  now = (sec - origin) * E9 + usec * 1000
end
if tokens == nil then
  tokens, frac, seen = cap, 0, now
end
if rate > 0 and now > seen then
  -- Refill for the time since the latest instant seen; an earlier
  -- instant counts as that one, so nothing is refilled twice.
  local elapsed = now - seen
  seen = now
  if tokens >= cap then
    tokens, frac = cap, 0
  else
    local need = (cap - tokens) * E9 - frac
    local q = math.floor(need / rate) -- the least q with q*rate >= need, exactly:
    while q * rate < need do q = q + 1 end
    while q > 0 and (q - 1) * rate >= need do q = q - 1 end
    if elapsed >= q then
      tokens, frac = cap, 0
    else
      local acc = frac + elapsed * rate
      local whole = math.floor(acc / E9)
      while whole * E9 > acc do whole = whole - 1 end
      while (whole + 1) * E9 <= acc do whole = whole + 1 end
      tokens, frac = tokens + whole, acc - whole * E9
    end
  end
end
if op == 'peek' then return tokens end
local granted = 0
if op == 'retry' then
  if tokens >= amount then
    tokens, granted = tokens - amount, 1
  end
elseif op == 'credit' then
  tokens = tokens + amount
  if tokens >= cap then tokens, frac = cap, 0 end
end
if KEYS[2] == nil and seen > 2^52 then
  -- Move the origin up before the instants outgrow a double.
  local shift = math.floor(seen / E9)
  origin, seen = origin + shift, seen - shift * E9
end
-- Write only the fields that changed (all of them, and c, on a new key).
-- A number goes to Redis as %.17g: exact for an integer below 2^53.
local w, n = {}, 0
if tokens ~= t0 then w[n + 1], w[n + 2], n = 't', tokens, n + 2 end
if frac ~= f0 then w[n + 1], w[n + 2], n = 'f', frac, n + 2 end
if seen ~= s0 then w[n + 1], w[n + 2], n = 's', seen, n + 2 end
if origin ~= o0 then w[n + 1], w[n + 2], n = 'o', origin, n + 2 end
if not st[5] then w[n + 1], w[n + 2], n = 'c', fp, n + 2 end
if n > 0 then redis.call('HSET', key, unpack(w, 1, n)) end
redis.call('PEXPIRE', key, ttl)
return granted
