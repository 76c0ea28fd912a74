-- A bucket's stored state, read the one way every script reads it. Included
-- inline (`--#include state.lua`, expanded by src/stores/lua-script.ts) where
-- a script holds the key's string value in `v` and the bucket's reduced
-- tokens per period in `T`, and has declared `at` and `r` as locals; it sets
-- them to the time the bucket is full again, `at` whole µs plus `r` units of
-- 1/T µs, or at = nil when `v` is not a state the store writes.
--
-- The store writes exactly two forms: `A` and `A+num/den` (A + num/den µs,
-- 0 < num < den), every number in plain digits without a leading zero. Only
-- those are states: anything Lua's `tonumber` would also read (`-5`, `0x10`,
-- ` 7`, `1e3`, `nan`, `12.5`) is not, and never reads as tokens.
-- A state written at another rate (den ~= T) is rounded toward empty.
at, r = nil, 0
if string.find(v, '^[1-9]%d*$') then
  at = tonumber(v)
else
  local a, num, den = string.match(v, '^([1-9]%d*)%+([1-9]%d*)/([1-9]%d*)$')
  if a then
    num, den = tonumber(num), tonumber(den)
    if num < den then
      at = tonumber(a)
      if den == T then r = num else r = math.ceil(num * T / den) end
      if r >= T then at, r = at + 1, 0 end
    end
  end
end
