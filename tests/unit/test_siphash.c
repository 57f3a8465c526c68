/* SipHash-2-4 gives the paper's test vector (appendix A: the key 00..0f,
 * the 15-byte message 00..0e), and the output moves with the key. */
#include "../../server/base/siphash.c"

#include "tests/tap.h"

int main(void)
{
    uint8_t key[SIPHASH_KEY_LEN], msg[15];
    for (unsigned i = 0; i < sizeof key; i++)
        key[i] = (uint8_t)i;
    for (unsigned i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)i;
    ok(siphash24(key, msg, sizeof msg) == 0xa129ca6149be45e5ull,
       "the paper's vector: key 00..0f, message 00..0e gives a129ca6149be45e5");
    ok(siphash24(key, msg, 8) != siphash24(key, msg, 9), "the length is part of the input");
    key[15] ^= 1;
    ok(siphash24(key, msg, sizeof msg) != 0xa129ca6149be45e5ull, "one bit of key changes it");
    return tap_done();
}
