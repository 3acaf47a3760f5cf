/* Private to tensor/cuda: open addressing over fixed-size byte keys, for
 * the per-instance caches of per-shape choices (algo_cache.h for cuDNN,
 * lt_cache.h for cuBLASLt). A table is three parallel arrays of `slots`
 * entries the cache owns: used flags, keys of `size` bytes each (always
 * built with every padding byte zeroed, so bytewise equality is equality of
 * every input), and the cache's values. It fills to three quarters at most;
 * a key that finds it full is not stored, and its callers ask the library
 * again each time (correct, only slower). Pure C, no CUDA. */
#ifndef CTRAINER_TENSOR_CUDA_KEY_TABLE_H
#define CTRAINER_TENSOR_CUDA_KEY_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* FNV-1a over the key's 8-byte words (then its last bytes), with a final
 * mix that brings the high bits down: a word's high bits only reach the
 * product's high bits, and the slot is taken from the low ones. Every
 * product looks its key up, so this runs per call: by words it took 34 ns
 * against 422 ns by bytes for the 272-byte cuBLASLt key. */
static inline uint64_t ct_key_hash(const void *key, size_t size)
{
    const unsigned char *p = (const unsigned char *)key;
    uint64_t h = 0xcbf29ce484222325u, w;
    size_t i = 0;
    for (; i + sizeof w <= size; i += sizeof w) {
        memcpy(&w, p + i, sizeof w);
        h = (h ^ w) * 0x100000001b3u;
    }
    for (; i < size; i++) h = (h ^ p[i]) * 0x100000001b3u;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdu;
    return h ^ (h >> 33);
}

/* The slot holding key, or the empty slot where it would go; -1 when the
 * table has neither (it never fills past three quarters, so only a
 * corrupted table). */
static inline int ct_key_slot(const bool *used, const void *keys, size_t size, int slots,
                              const void *key)
{
    int i = (int)(ct_key_hash(key, size) % (uint64_t)slots);
    for (int probe = 0; probe < slots; probe++) {
        if (!used[i] || !memcmp((const char *)keys + (size_t)i * size, key, size))
            return i;
        i = (i + 1) % slots;
    }
    return -1;
}

/* The slot of a stored key, or -1. */
static inline int ct_key_find(const bool *used, const void *keys, size_t size, int slots,
                              const void *key)
{
    int i = ct_key_slot(used, keys, size, slots, key);
    return i >= 0 && used[i] ? i : -1;
}

/* The slot of key, claimed (its key written, *count raised) when it was
 * not stored; -1 when the table is already three quarters full. */
static inline int ct_key_claim(bool *used, void *keys, size_t size, int slots, int *count,
                               const void *key)
{
    int i = ct_key_slot(used, keys, size, slots, key);
    if (i < 0 || used[i]) return i;
    if (*count >= slots / 4 * 3) return -1;
    used[i] = true;
    memcpy((char *)keys + (size_t)i * size, key, size);
    (*count)++;
    return i;
}

#endif
