/* Untrusted text made safe for one terminal line (llm_escape, model.h). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model.h"

/* Length of the valid UTF-8 sequence at s[0..n) and its code point, or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
    size_t len = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3
               : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    uint32_t v = s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)))
        return 0; /* overlong or out of range */
    *cp = v;
    return len;
}

/* Code points a terminal acts on rather than shows: C1 controls, line/paragraph separators and the
 * bidirectional overrides (which can make text read differently from what it is). */
static bool cp_is_control(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 || (cp >= 0x202A && cp <= 0x202E) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

static size_t put(char *buf, size_t cap, size_t o, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++, o++)
        if (o + 1 < cap)
            buf[o] = s[i];
    return o;
}

size_t llm_escape(char *buf, size_t cap, const char *s, size_t len, size_t max, unsigned flags)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0, i = 0, n = len < max ? len : max;
    while (i < n) {
        char esc[16];
        uint32_t cp = p[i];
        size_t sl = p[i] < 0x80 ? 1 : utf8_seq(p + i, len - i, &cp);
        if (sl == 0) { /* not UTF-8: the byte itself, escaped */
            snprintf(esc, sizeof esc, "\\x%02x", p[i]);
            o = put(buf, cap, o, esc, strlen(esc));
            i++;
        } else if (cp < 0x20 || cp == 0x7F || cp_is_control(cp)) {
            const char *named = cp == '\n' ? "\\n" : cp == '\r' ? "\\r" : cp == '\t' ? "\\t" : NULL;
            if (named)
                snprintf(esc, sizeof esc, "%s", named);
            else
                snprintf(esc, sizeof esc, cp < 0x100 ? "\\x%02x" : "\\u%04x", (unsigned)cp);
            o = put(buf, cap, o, esc, strlen(esc));
            i += sl;
        } else if ((flags & LLM_ESC_QUOTES) && (cp == '\\' || cp == '\'' || cp == '"')) {
            esc[0] = '\\';
            esc[1] = (char)cp;
            o = put(buf, cap, o, esc, 2);
            i++;
        } else {
            o = put(buf, cap, o, s + i, sl);
            i += sl;
        }
    }
    if (n < len)
        o = put(buf, cap, o, "...", 3);
    if (cap)
        buf[o < cap ? o : cap - 1] = '\0';
    return o;
}
