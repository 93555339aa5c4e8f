"""Threefry-2x32 random streams in plain Python, written from the published
algorithm (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011,
20 rounds, as JAX uses it) and JAX's key conventions, for checking fedvm's
shuffles and client samples independently of its C code.
"""

M32 = 0xFFFFFFFF
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


def threefry2x32(key, ctr):
    ks = (key[0], key[1], key[0] ^ key[1] ^ 0x1BD11BDA)
    x0, x1 = (ctr[0] + ks[0]) & M32, (ctr[1] + ks[1]) & M32
    for i in range(5):
        for r in ROTATIONS[i % 2]:
            x0 = (x0 + x1) & M32
            x1 = _rotl(x1, r) ^ x0
        x0 = (x0 + ks[(i + 1) % 3]) & M32
        x1 = (x1 + ks[(i + 2) % 3] + i + 1) & M32
    return [x0, x1]


# Known answer from the Random123 distribution (kat_vectors, threefry2x32_20).
assert threefry2x32([0x13198A2E, 0x03707344], [0x243F6A88, 0x85A308D3]) == [0xC4923A9C, 0x483DF7A0]


def key(seed):
    """JAX's PRNGKey(seed) for a 64-bit seed: [seed >> 32, seed & 0xffffffff]."""
    seed &= (1 << 64) - 1
    return [seed >> 32, seed & M32]


def fold_in(k, data):
    return threefry2x32(k, [0, data & M32])


class Stream:
    """Block i of a stream is threefry2x32(key, [i mod 2^32, i div 2^32]);
    its words are used first word first."""

    def __init__(self, k):
        self.key, self.block, self.words = list(k), 0, []

    def u32(self):
        if not self.words:
            self.words = threefry2x32(self.key, [self.block & M32, self.block >> 32])
            self.block += 1
        return self.words.pop(0)

    def u64(self):
        hi = self.u32()
        return hi << 32 | self.u32()

    def below(self, n):
        """Uniform in [0, n): 64-bit words below the largest multiple of n, mod n."""
        top = (1 << 64) - 1
        limit = top - top % n
        while True:
            x = self.u64()
            if x < limit:
                return x % n


def permutation(k, n):
    """Fisher-Yates from the last position down."""
    s, p = Stream(k), list(range(n))
    for i in range(n - 1, 0, -1):
        j = s.below(i + 1)
        p[i], p[j] = p[j], p[i]
    return p


def round_key(seed, r):
    return fold_in(key(seed), r)


def client_key(seed, r, c):
    return fold_in(round_key(seed, r), c)


def sample_clients(seed, r, n, k):
    """k of n clients for round r: a partial Fisher-Yates shuffle of [0, n)
    over the stream of fold_in(fold_in(key(seed), 0xffffffff), r), sorted."""
    s, moved = Stream(fold_in(fold_in(key(seed), M32), r)), {}
    for i in range(k):
        j = i + s.below(n - i)
        moved[i], moved[j] = moved.get(j, j), moved.get(i, i)
    return sorted(moved[i] for i in range(k))


if __name__ == "__main__":
    # Values quoted by tests/test_sample.c.
    print("sample(seed=0, round=1, n=100, k=10):", sample_clients(0, 1, 100, 10))
    print("sample(seed=7, round=3, n=1000000, k=5):", sample_clients(7, 3, 1000000, 5))
    print("sample(seed=-1, round=2, n=5, k=5):", sample_clients(-1, 2, 5, 5))
    print("client_key(seed=0, round=1, client=42):", ["0x%08x" % w for w in client_key(0, 1, 42)])
