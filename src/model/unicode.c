/* UTF-8 and Unicode property lookups over the generated range tables. */
#include "model/unicode.h"
#include "model/unicode_data.h"

int ak_utf8_lead_len(unsigned char b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

uint32_t ak_utf8_next(const char *s, size_t len, size_t *adv) {
    const unsigned char *u = (const unsigned char *)s;
    int n = ak_utf8_lead_len(u[0]);
    *adv = 1;
    if (n == 1) return u[0];
    if (n == 0 || (size_t)n > len) return AK_UTF8_INVALID;
    uint32_t cp = u[0] & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        if ((u[i] & 0xC0) != 0x80) return AK_UTF8_INVALID;
        cp = (cp << 6) | (u[i] & 0x3F);
    }
    /* overlongs of 3/4-byte forms, surrogates, beyond U+10FFFF */
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return AK_UTF8_INVALID;
    *adv = (size_t)n;
    return cp;
}

int ak_utf8_put(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | (cp >> 6)); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12)); o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF) return 0;
    o[0] = (unsigned char)(0xF0 | (cp >> 18)); o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

int ak_uc_class(uint32_t cp) {
    if (cp > 0x10FFFF) return AK_UC_OTHER;
    if (cp < 0x80) { /* fast path for ASCII */
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return AK_UC_L;
        if (cp >= '0' && cp <= '9') return AK_UC_N;
    }
    /* last entry whose start <= cp */
    size_t lo = 0, hi = sizeof ak_uc_ranges / sizeof ak_uc_ranges[0];
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if ((ak_uc_ranges[mid] >> 8) <= cp) lo = mid; else hi = mid;
    }
    return (int)(ak_uc_ranges[lo] & 0xFF);
}

bool ak_uc_is_space(uint32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
    return cp == 0x85 || ak_uc_class(cp) == AK_UC_Z;
}

uint32_t ak_uc_lower(uint32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    size_t lo = 0, hi = sizeof ak_uc_lower_runs / sizeof ak_uc_lower_runs[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const int32_t *r = ak_uc_lower_runs[mid];
        if ((int32_t)cp < r[0]) hi = mid;
        else if ((int32_t)cp > r[1]) lo = mid + 1;
        else return ((int32_t)cp - r[0]) % r[3] == 0 ? (uint32_t)((int32_t)cp + r[2]) : cp;
    }
    return cp;
}

/* Hangul syllables decompose by arithmetic (Unicode ch. 3.12); jamo are not marks. */
static int hangul_decompose(uint32_t cp, uint32_t out[3]) {
    uint32_t s = cp - 0xAC00, l = s / (21 * 28), v = (s % (21 * 28)) / 28, t = s % 28;
    out[0] = 0x1100 + l;
    out[1] = 0x1161 + v;
    if (t == 0) return 2;
    out[2] = 0x11A7 + t;
    return 3;
}

int ak_uc_strip_accents(uint32_t cp, uint32_t out[3]) {
    if (cp < 0xC0) { out[0] = cp; return 1; }
    if (cp >= 0xAC00 && cp <= 0xD7A3) return hangul_decompose(cp, out);
    size_t lo = 0, hi = sizeof ak_uc_strip1 / sizeof ak_uc_strip1[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ak_uc_strip1[mid][0] < cp) lo = mid + 1; else hi = mid;
    }
    if (lo < sizeof ak_uc_strip1 / sizeof ak_uc_strip1[0] && ak_uc_strip1[lo][0] == cp) {
        out[0] = ak_uc_strip1[lo][1];
        return 1;
    }
    for (size_t i = 0; i < sizeof ak_uc_stripn / sizeof ak_uc_stripn[0]; i++) {
        if (ak_uc_stripn[i][0] != cp) continue;
        int n = 0;
        for (int k = 1; k < 4 && ak_uc_stripn[i][k]; k++) out[n++] = ak_uc_stripn[i][k];
        return n;
    }
    if (ak_uc_class(cp) == AK_UC_MN) return 0;
    out[0] = cp;
    return 1;
}

bool ak_uc_is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}
