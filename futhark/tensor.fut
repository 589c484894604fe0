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
