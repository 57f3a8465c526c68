/* SipHash-2-4, written from the paper's description (section 2): four
 * 64-bit words of state from the key, two rounds per 8-byte word of the
 * message, the last word carrying the length, four rounds to finish. */
#include "server/base/siphash.h"

static uint64_t rotl(uint64_t x, unsigned b)
{
    return (x << b) | (x >> (64 - b));
}

/* The 8 bytes at P as a little-endian word. */
static uint64_t le64(const uint8_t *p)
{
    uint64_t w = 0;
    for (unsigned i = 0; i < 8; i++)
        w |= (uint64_t)p[i] << (8 * i);
    return w;
}

/* SipRound: its additions, rotations and exclusive ors on V[0..3]. */
static void sip_round(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = rotl(v[1], 13) ^ v[0];
    v[0] = rotl(v[0], 32);
    v[2] += v[3];
    v[3] = rotl(v[3], 16) ^ v[2];
    v[0] += v[3];
    v[3] = rotl(v[3], 21) ^ v[0];
    v[2] += v[1];
    v[1] = rotl(v[1], 17) ^ v[2];
    v[2] = rotl(v[2], 32);
}

static void compress(uint64_t v[4], uint64_t m)
{
    v[3] ^= m;
    sip_round(v);
    sip_round(v);
    v[0] ^= m;
}

uint64_t siphash24(const uint8_t key[SIPHASH_KEY_LEN], const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t k0 = le64(key), k1 = le64(key + 8);
    /* The paper's constants: "somepseudorandomlygeneratedbytes". */
    uint64_t v[4] = {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
                     k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull};
    size_t whole = len - len % 8;
    for (size_t i = 0; i < whole; i += 8)
        compress(v, le64(p + i));
    /* The last word: the bytes left over, and the length modulo 256 in its
     * most significant byte. */
    uint64_t last = (uint64_t)(len & 0xff) << 56;
    for (size_t i = whole; i < len; i++)
        last |= (uint64_t)p[i] << (8 * (i - whole));
    compress(v, last);
    v[2] ^= 0xff;
    for (int i = 0; i < 4; i++)
        sip_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}
