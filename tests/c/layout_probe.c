/* Does a vectorised float sum depend on where its arrays lie?  (tests/test_reproducible.py)
 *
 * kept_dot is what Futhark's c backend emits for a map whose results are kept
 * and also summed (a redomap): a store and a reassociated reduction in one
 * loop.  The vectoriser guards it with an alias check between the store and the
 * loads; the program sums the same n products with the output placed d floats
 * after the input, for every d from n (adjacent) to 160, and prints, for each
 * n, how many different sums it got (1: the result does not depend on the
 * layout).  Compiled with the kernels' flags, it must print 1 for every n.
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) float kept_dot(long n, const float *x, const float *y, float *out) {
  float s = 0;
  for (long i = 0; i < n; i++) {
    float p = x[i] * y[i];
    out[i] = p;
    s += p;
  }
  return s;
}

int main(void) {
  float *buf = aligned_alloc(64, 1 << 16);
  float *x = buf, *y = buf + 8192;
  for (long i = 0; i < 96; i++) {
    x[i] = 1.0f / (float)(i + 1) + 1e-3f * (float)i;
    y[i] = ((float)(i * 37 % 11) - 5.3f) * (1.0f + 0.137f * (float)i);
  }
  for (long n = 1; n <= 96; n++) {
    float sums[256];
    int distinct = 0;
    for (long d = n; d <= 160; d++) {
      float s = kept_dot(n, x, y, x + d);
      int seen = 0;
      for (int k = 0; k < distinct; k++) seen |= sums[k] == s;
      if (!seen) sums[distinct++] = s;
    }
    printf("%ld %d\n", n, distinct);
  }
  free(buf);
  return 0;
}
