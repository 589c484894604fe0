-- | A counter-based random number generator of our own.
--
-- Every number is a pure function of (key, counter), where a key names one
-- independent stream under a seed.  Parallel samples and parameter tensors
-- each draw from their own stream with no state to thread through loops.
-- The mixer is SplitMix64's finaliser (Steele, Lea & Flood, OOPSLA 2014)
-- applied to a Weyl sequence, as in SplitMix64 itself.

def golden : u64 = 0x9E3779B97F4A7C15

-- | 2^-24: one unit in the last place of a 24-bit fraction.
def two_m24 : f32 = 1 / 16777216

-- | SplitMix64's 64-bit finaliser: a bijection with full avalanche.
def mix64 (z: u64) : u64 =
  let z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
  let z = (z ^ (z >> 27)) * 0x94D049BB133111EB
  in z ^ (z >> 31)

-- | The key of stream `stream` under `seed`.
def key (seed: i64) (stream: i64) : u64 =
  mix64 (mix64 (u64.i64 seed ^ 0x5DEECE66D) + (u64.i64 stream + 1) * golden)

-- | 64 random bits: number `ctr` of the stream `k`.
def bits (k: u64) (ctr: i64) : u64 = mix64 (k + (u64.i64 ctr + 1) * golden)

-- | Uniform on [0, 1), 24 bits of resolution (every value is an exact f32).
def uniform (k: u64) (ctr: i64) : f32 = f32.u64 (bits k ctr >> 40) * two_m24

-- | Standard normal by the Box-Muller transform; uses counters 2*ctr and 2*ctr+1.
def normal (k: u64) (ctr: i64) : f32 =
  let u1 = (f32.u64 (bits k (2 * ctr) >> 40) + 1) * two_m24 -- in (0, 1]: log is finite
  let u2 = uniform k (2 * ctr + 1)
  in f32.sqrt (-2 * f32.log u1) * f32.cos (2 * f32.pi * u2)

-- Tests: `futhark test futhark/rng.fut`.

-- | Range: n uniforms from stream 0 lie in [0, 1), and their mean is near 1/2
-- (|mean - 0.5| < 0.01 for n = 100000: 11 standard errors).
-- ==
-- entry: test_uniform_range
-- input { 100000i64 } output { true }
entry test_uniform_range (n: i64) : bool =
  let us = map (uniform (key 42 0)) (iota n)
  in all (\u -> u >= 0 && u < 1) us && f32.abs (f32.sum us / f32.i64 n - 0.5) < 0.01

-- | Independence of streams: the correlation of streams 0 and 1 under one seed,
-- and of seeds 1 and 2 on one stream, is below 0.01 (n = 100000; 3 standard errors).
-- ==
-- entry: test_stream_independence
-- input { 100000i64 } output { true true }
entry test_stream_independence (n: i64) : (bool, bool) =
  let corr (a: []f32) (b: []f32) =
    let m = f32.i64 n
    let ma = f32.sum a / m
    let mb = f32.sum b / m
    let cov = f32.sum (map2 (\x y -> (x - ma) * (y - mb)) a b)
    let va = f32.sum (map (\x -> (x - ma) * (x - ma)) a)
    let vb = f32.sum (map (\y -> (y - mb) * (y - mb)) b)
    in cov / f32.sqrt (va * vb)
  let s0 = map (uniform (key 7 0)) (iota n)
  let s1 = map (uniform (key 7 1)) (iota n)
  let t1 = map (uniform (key 1 5)) (iota n)
  let t2 = map (uniform (key 2 5)) (iota n)
  in (f32.abs (corr s0 s1) < 0.01, f32.abs (corr t1 t2) < 0.01)

-- | Normals: mean near 0 and variance near 1 (n = 100000).
-- ==
-- entry: test_normal_moments
-- input { 100000i64 } output { true }
entry test_normal_moments (n: i64) : bool =
  let xs = map (normal (key 3 0)) (iota n)
  let mean = f32.sum xs / f32.i64 n
  let var = f32.sum (map (\x -> (x - mean) * (x - mean)) xs) / f32.i64 n
  in f32.abs mean < 0.02 && f32.abs (var - 1) < 0.03
