/* UTF-8 helpers and category lookup by binary search over the generated range table. */
#include "unicode.h"

unsigned unicode_flags(uint32_t cp)
{
    size_t lo = 0, hi = unicode_n_ranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < unicode_ranges[mid].first)
            hi = mid;
        else if (cp > unicode_ranges[mid].last)
            lo = mid + 1;
        else
            return unicode_ranges[mid].flags;
    }
    return 0;
}

size_t unicode_len_utf8(unsigned char lead)
{
    static const unsigned char len[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return len[lead >> 4];
}

size_t unicode_decode(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    unsigned char b = u[0];
    size_t len = 0;
    uint32_t v = 0;
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    /* 10xxxxxx (stray continuation) and 11111xxx leave len = 0 */
    if ((b & 0xE0) == 0xC0) {
        len = 2;
        v = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
        len = 3;
        v = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
        len = 4;
        v = b & 0x07;
    }
    if (len == 0 || len > n)
        goto bad;
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80)
            goto bad;
        v = (v << 6) | (u[i] & 0x3F);
    }
    if (v > 0x10FFFF)
        goto bad;
    *cp = v;
    return len;
bad:
    *cp = UNICODE_REPLACEMENT;
    return 1;
}

size_t unicode_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}
