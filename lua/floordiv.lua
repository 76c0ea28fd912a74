-- Included by lua/acquire.lua and lua/refund.lua where they first need it
-- (`--#include floordiv.lua`, expanded by src/stores/lua-script.ts): only
-- huge buckets use it, so the common path never builds the closure.
-- Expects EXACT (2^53) in scope.
-- floor((a * b + c) / d), exactly, for whole 0 <= a < 2^52, 0 <= c < b < 2^52,
-- 1 <= d < 2^50 and a result below 2^53:
-- a * b = p + e and p + c = s + f exactly (Dekker's product, Fast2Sum), and
-- N - q * d is then exact near the answer.
floordiv = function(a, b, c, d)
  local p = a * b
  if p + c < EXACT then return math.floor((p + c) / d) end
  if b >= 4503599627370496 or d >= 1125899906842624 then
    -- Beyond those: long division over the bits of a * b + c, kept as 24-bit
    -- limbs (every product below 2^48); the remainder stays below d, and
    -- 2 * rem + bit is compared with d as rem >= d - rem - bit. Every step exact.
    local B, BB = 16777216, 281474976710656
    local a2 = math.floor(a / BB)
    local a1 = math.floor((a - a2 * BB) / B)
    local a0 = a - a2 * BB - a1 * B
    local b2 = math.floor(b / BB)
    local b1 = math.floor((b - b2 * BB) / B)
    local b0 = b - b2 * BB - b1 * B
    local c2 = math.floor(c / BB)
    local c1 = math.floor((c - c2 * BB) / B)
    local c0 = c - c2 * BB - c1 * B
    local l = {a0 * b0 + c0, a0 * b1 + a1 * b0 + c1, a0 * b2 + a1 * b1 + a2 * b0 + c2, a1 * b2 + a2 * b1, a2 * b2, 0}
    for i = 1, 5 do
      local carry = math.floor(l[i] / B)
      l[i], l[i + 1] = l[i] - carry * B, l[i + 1] + carry
    end
    local top = 6
    while top > 1 and l[top] == 0 do top = top - 1 end
    local rem, quo = 0, 0
    for i = top, 1, -1 do
      local limb, bit = l[i], 8388608
      while bit >= 1 do
        local one = 0
        if limb >= bit then limb, one = limb - bit, 1 end
        local gap = d - rem - one
        if rem >= gap then rem, quo = rem - gap, 2 * quo + 1 else rem, quo = 2 * rem + one, 2 * quo end
        bit = bit / 2
      end
    end
    return quo
  end
  local t = 134217729 * a
  local ah = t - (t - a)
  local al = a - ah
  t = 134217729 * b
  local bh = t - (t - b)
  local bl = b - bh
  local e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
  local sum = p + c
  local f = c - (sum - p)
  local q = math.floor(sum / d)
  local qp = q * d
  t = 134217729 * q
  local qh = t - (t - q)
  local ql = q - qh
  t = 134217729 * d
  local dh = t - (t - d)
  local dl = d - dh
  local qe = ((qh * dh - qp) + qh * dl + ql * dh) + ql * dl
  local R = ((sum - qp) - qe) + (f + e)
  return q + math.floor(R / d)
end
