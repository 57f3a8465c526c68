#ifndef UNCLOG_SIPHASH_H
#define UNCLOG_SIPHASH_H

/* SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
 * 2012): a hash keyed by a secret, so that whoever does not know the key
 * cannot choose inputs that collide. */

#include <stddef.h>
#include <stdint.h>

#define SIPHASH_KEY_LEN 16

/* The SipHash-2-4 of the LEN bytes at DATA under KEY: the paper's 64-bit
 * output as an integer (its bytes, little-endian, are the paper's bytes). */
uint64_t siphash24(const uint8_t key[SIPHASH_KEY_LEN], const void *data, size_t len);

#endif
