-- | Element-wise maps and sums over whole tensors, for the optimisers and the
-- activations of the backwards by hand (layers.fut).
--
-- Each runs as one flat loop: results then go straight to their arrays, where
-- nested maps made the c backend write each row to a buffer and copy it
-- (measured: 7% fewer instructions per step of microgpt's job).

import "layout"

def map_2d [n][m] (f: f32 -> f32) (a: [n][m]f32) : [n][m]f32 = unflatten (map f (flatten a))
def map2_2d [n][m] (f: f32 -> f32 -> f32) (a: [n][m]f32) (b: [n][m]f32) : [n][m]f32 =
  unflatten (map2 f (flatten a) (flatten b))
def map2_3d [l][n][m] (f: f32 -> f32 -> f32) (a: [l][n][m]f32) (b: [l][n][m]f32) : [l][n][m]f32 =
  unflatten_3d (map2 f (flatten_3d a) (flatten_3d b))
def map2_4d [k][l][n][m] (f: f32 -> f32 -> f32) (a: [k][l][n][m]f32) (b: [k][l][n][m]f32)
            : [k][l][n][m]f32 =
  unflatten_4d (map2 f (flatten_4d a) (flatten_4d b))

-- | An optimiser's new weights of one tensor a, as one flat loop into a new
-- array: `f a m v g` element by element, m and v read at offset o of the flat
-- moments (the tensor's place in them).
def map4_at_1d [n][P] (f: f32 -> f32 -> f32 -> f32 -> f32) (a: [n]f32) (m: [P]f32) (v: [P]f32)
               (o: i64) (g: [n]f32) : *[n]f32 =
  map4 f a (m[o:o + n] :> [n]f32) (v[o:o + n] :> [n]f32) g
def map4_at_2d [n][k][P] (f: f32 -> f32 -> f32 -> f32 -> f32) (a: [n][k]f32) (m: [P]f32)
               (v: [P]f32) (o: i64) (g: [n][k]f32) : *[n][k]f32 =
  unflatten (map4_at_1d f (flatten a) m v o (flatten g))
def map4_at_3d [l][n][k][P] (f: f32 -> f32 -> f32 -> f32 -> f32) (a: [l][n][k]f32) (m: [P]f32)
               (v: [P]f32) (o: i64) (g: [l][n][k]f32) : *[l][n][k]f32 =
  unflatten_3d (map4_at_1d f (flatten_3d a) m v o (flatten_3d g))
def map4_at_4d [j][l][n][k][P] (f: f32 -> f32 -> f32 -> f32 -> f32) (a: [j][l][n][k]f32)
               (m: [P]f32) (v: [P]f32) (o: i64) (g: [j][l][n][k]f32) : *[j][l][n][k]f32 =
  unflatten_4d (map4_at_1d f (flatten_4d a) m v o (flatten_4d g))

-- | Zeros for L layers' stores, made by a map over the layers: Futhark makes
-- `replicate L (replicate n 0)` one sequential fill on the calling thread, which
-- on multicore ran while the other cores waited (the activations' and
-- gradients' stores, about 25 MB a step at the recipe).  Each zero is computed
-- from the layer's index l and the store's number k among the step's stores
-- (0 * (l + k), exactly 0): from l, so that the map is not turned back into a
-- replicate, and from k, so that stores of one size are not made once and
-- copied.
def zero_at (k: i64) (l: i64) : f32 = f32.i64 (l + k) * 0
def zeros_2d (k: i64) (L: i64) (m: i64) : *[L][m]f32 = tabulate L (\l -> replicate m (zero_at k l))
def zeros_3d (k: i64) (L: i64) (r: i64) (c: i64) : *[L][r][c]f32 =
  tabulate L (\l -> replicate r (replicate c (zero_at k l)))

-- | Sums of `f` over a tensor's elements: with `f x = x * x` a squared L2 norm,
-- for clipping by the global gradient norm.
def sum_1d [n] (f: f32 -> f32) (a: [n]f32) : f32 = f32.sum (map f a)
def sum_2d [n][m] (f: f32 -> f32) (a: [n][m]f32) : f32 = sum_1d f (flatten a)
def sum_3d [l][n][m] (f: f32 -> f32) (a: [l][n][m]f32) : f32 = sum_1d f (flatten_3d a)
def sum_4d [k][l][n][m] (f: f32 -> f32) (a: [k][l][n][m]f32) : f32 = sum_1d f (flatten_4d a)

-- | Tensors as slices of one flat vector (the driver's flat state: the tensors one
-- after another, `o` the offset of the first element), and back.
def take_1d (xs: []f32) (o: i64) (n: i64) : [n]f32 = xs[o:o + n] :> [n]f32
def take_2d (xs: []f32) (o: i64) (n: i64) (m: i64) : [n][m]f32 = unflatten (take_1d xs o (n * m))
def take_3d (xs: []f32) (o: i64) (l: i64) (n: i64) (m: i64) : [l][n][m]f32 =
  unflatten_3d (take_1d xs o (l * n * m))
def take_4d (xs: []f32) (o: i64) (k: i64) (l: i64) (n: i64) (m: i64) : [k][l][n][m]f32 =
  unflatten_4d (take_1d xs o (k * l * n * m))

-- | The offset of each of a flat vector's tensors, from their sizes (an exclusive scan),
-- after checking that the sizes add up to the vector's length.
def offsets [k] (n: i64) (sizes: [k]i64) : [k]i64 =
  let ends = scan (+) 0 sizes
  in assert (k > 0 && ends[k - 1] == n) (map2 (-) ends sizes)

-- | Adam's moments of one tensor updated in place: m[o:o+n] and v[o:o+n] (the
-- tensor's place in the flat moments) take the results of `f m v g`, element by
-- element, g the tensor's gradient.  They are made a chunk of `update_chunk`
-- elements at a time and written over the chunk, so that a step holds one chunk
-- beside the moments, not two more moments (GPT-2 124M: 1 GB).  The moments are
-- flat vectors because a consumed tensor of rank 3 or 4 carried through the
-- training loop got copied whole before its chunks were written (multicore).
def moments_at [P][n] (f: f32 -> f32 -> f32 -> (f32, f32)) (m: *[P]f32) (v: *[P]f32) (o: i64)
               (g: [n]f32) : (*[P]f32, *[P]f32) =
  let r = update_chunk
  in loop (m, v) for c < (n + r - 1) / r do
       let (a, b) = (c * r, i64.min n (c * r + r))
       let w = b - a
       let (m', v') = unzip (map3 f (m[o + a:o + b] :> [w]f32) (v[o + a:o + b] :> [w]f32)
                                       (g[a:b] :> [w]f32))
       in (m with [o + a:o + b] = m', v with [o + a:o + b] = v')
