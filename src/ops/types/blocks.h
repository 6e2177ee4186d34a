/* Block layouts of the quantized types, byte for byte as stored in GGUF files (src/ops/README.md).
 * Structs are packed (alignment 1) so a block may sit at any address of a mapped file; the size
 * asserts pin the on-disk sizes. Half-precision fields hold IEEE binary16 bits. */
#ifndef LLM_BLOCKS_H
#define LLM_BLOCKS_H

#include <stdint.h>

#define QK 32       /* elements per block of the legacy types           */
#define QK_K 256    /* elements per super-block of the K-quants         */
#define K_SCALE_SIZE 12

#define PACKED __attribute__((packed))

struct PACKED block_q4_0 {
    uint16_t d;
    uint8_t qs[QK / 2];        /* low nibbles: elements 0..15, high nibbles: 16..31 */
};

struct PACKED block_q4_1 {
    uint16_t d, m;
    uint8_t qs[QK / 2];
};

struct PACKED block_q5_0 {
    uint16_t d;
    uint8_t qh[4];             /* bit j (little-endian u32) = 5th bit of element j   */
    uint8_t qs[QK / 2];
};

struct PACKED block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[QK / 2];
};

struct PACKED block_q8_0 {
    uint16_t d;
    int8_t qs[QK];
};

struct PACKED block_q8_1 {
    uint16_t d;
    uint16_t s;                /* d * sum(qs), so dot products can fold in a min     */
    int8_t qs[QK];
};

struct PACKED block_iq4_nl {
    uint16_t d;
    uint8_t qs[QK / 2];        /* codebook indices, nibbles as in block_q4_0          */
};

/* IQ4_NL's 16-entry non-linear codebook (the GGUF spec's): x = d * value[index]. */
static const int8_t iq4_nl_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113 };

struct PACKED block_q2_K {
    uint8_t scales[QK_K / 16]; /* per 16 elements: low nibble scale, high nibble min */
    uint8_t qs[QK_K / 4];
    uint16_t d, dmin;
};

struct PACKED block_q3_K {
    uint8_t hmask[QK_K / 8];   /* 3rd bit; set means the value is not offset by -4   */
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];        /* 16 6-bit scales, biased by 32                      */
    uint16_t d;
};

struct PACKED block_q4_K {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE]; /* 8 6-bit scales and 8 6-bit mins               */
    uint8_t qs[QK_K / 2];
};

struct PACKED block_q5_K {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};

struct PACKED block_q6_K {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
};

struct PACKED block_q8_K {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];  /* sum of each 16 qs, for the min terms of dot products */
};

/* Scale and min (6 bits each) of sub-block j (0..7) of a Q4_K/Q5_K block. */
static inline void k4_scale_min(const uint8_t *s, int j, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xf) | (s[j - 4] >> 6) << 4;
        *mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* The 16 signed scales (6-bit value - 32) of a Q3_K block: low 4 bits are the nibbles of
 * s[0..7] (low nibbles for scales 0..7, high for 8..15), the top 2 bits come from s[8..11]. */
static inline void q3_K_scales(const uint8_t *s, int sc[16])
{
    for (int i = 0; i < 16; i++) {
        int lo = (i < 8 ? s[i] : s[i - 8] >> 4) & 0xf;
        int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        sc[i] = (lo | hi << 4) - 32;
    }
}

_Static_assert(sizeof(struct block_q4_0) == 18, "block_q4_0 size");
_Static_assert(sizeof(struct block_q4_1) == 20, "block_q4_1 size");
_Static_assert(sizeof(struct block_q5_0) == 22, "block_q5_0 size");
_Static_assert(sizeof(struct block_q5_1) == 24, "block_q5_1 size");
_Static_assert(sizeof(struct block_q8_0) == 34, "block_q8_0 size");
_Static_assert(sizeof(struct block_q8_1) == 36, "block_q8_1 size");
_Static_assert(sizeof(struct block_iq4_nl) == 18, "block_iq4_nl size");
_Static_assert(sizeof(struct block_q2_K) == 84, "block_q2_K size");
_Static_assert(sizeof(struct block_q3_K) == 110, "block_q3_K size");
_Static_assert(sizeof(struct block_q4_K) == 144, "block_q4_K size");
_Static_assert(sizeof(struct block_q5_K) == 176, "block_q5_K size");
_Static_assert(sizeof(struct block_q6_K) == 210, "block_q6_K size");
_Static_assert(sizeof(struct block_q8_K) == 292, "block_q8_K size");

#endif
