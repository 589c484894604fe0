-- | Element-wise maps and sums over whole tensors, for the optimisers and the
-- activations of the backwards by hand (layers.fut).
--
-- Each runs as one flat loop: Adam's three results (params, m, v) then go
-- straight to their arrays, where nested maps made the c backend write each row
-- to a buffer and copy it (measured: 7% fewer instructions per step of
-- microgpt's job).

def map_2d [n][m] (f: f32 -> f32) (a: [n][m]f32) : [n][m]f32 = unflatten (map f (flatten a))
def map2_2d [n][m] (f: f32 -> f32 -> f32) (a: [n][m]f32) (b: [n][m]f32) : [n][m]f32 =
  unflatten (map2 f (flatten a) (flatten b))
def map2_3d [l][n][m] (f: f32 -> f32 -> f32) (a: [l][n][m]f32) (b: [l][n][m]f32) : [l][n][m]f32 =
  unflatten_3d (map2 f (flatten_3d a) (flatten_3d b))
def map2_4d [k][l][n][m] (f: f32 -> f32 -> f32) (a: [k][l][n][m]f32) (b: [k][l][n][m]f32)
            : [k][l][n][m]f32 =
  unflatten_4d (map2 f (flatten_4d a) (flatten_4d b))
def map3_2d [n][m] (f: f32 -> f32 -> f32 -> f32) (a: [n][m]f32) (b: [n][m]f32) (c: [n][m]f32)
            : [n][m]f32 =
  unflatten (map3 f (flatten a) (flatten b) (flatten c))
def map3_3d [l][n][m] (f: f32 -> f32 -> f32 -> f32)
            (a: [l][n][m]f32) (b: [l][n][m]f32) (c: [l][n][m]f32) : [l][n][m]f32 =
  unflatten_3d (map3 f (flatten_3d a) (flatten_3d b) (flatten_3d c))
def map3_4d [k][l][n][m] (f: f32 -> f32 -> f32 -> f32)
            (a: [k][l][n][m]f32) (b: [k][l][n][m]f32) (c: [k][l][n][m]f32) : [k][l][n][m]f32 =
  unflatten_4d (map3 f (flatten_4d a) (flatten_4d b) (flatten_4d c))

-- | Sums of squares (a squared L2 norm), for clipping by the global gradient norm.
def sum_sq_1d [n] (a: [n]f32) : f32 = f32.sum (map (\x -> x * x) a)
def sum_sq_2d [n][m] (a: [n][m]f32) : f32 = sum_sq_1d (flatten a)
def sum_sq_3d [l][n][m] (a: [l][n][m]f32) : f32 = sum_sq_1d (flatten_3d a)
def sum_sq_4d [k][l][n][m] (a: [k][l][n][m]f32) : f32 = sum_sq_1d (flatten_4d a)

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
