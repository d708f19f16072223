# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled novelty path: what fingerprints._shingled_plain and _cut_plain
do with numpy, in one pass of C each. Quarantined speed-up; the definitions
stay in fingerprints.py (span_hash_plain, mix64_plain, is_anchor_plain,
window_cuts) and tests/core/novelty/test_novelty_compiled.py compares the two
paths. Written against the buffer protocol only: the build needs no numpy
headers.

- shingled(units, width): the units' canonical lines (a line's words as
  str.split() gives them, joined by single spaces; empty lines and units left
  out), their words' bounds, the `width`-word shingles of every line and each
  shingle's span hash and mix64.
- cut(...): the windows of spans, the long ones cut at their anchors.
"""
from libc.stdint cimport uint64_t, int64_t, uint8_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset, strlen

import numpy as np

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t* size) except NULL
    bint Py_UNICODE_ISSPACE(Py_UCS4 ch) nogil

cdef uint64_t _P = 0x9E3779B97F4A7C15ULL
cdef uint64_t _MIX = 0xBF58476D1CE4E5B9ULL
cdef int WINDOW_MIN = 100
cdef int WINDOW_MAX = 400
cdef int ANCHOR_EVERY = 100


cdef inline uint64_t _inverse(uint64_t a) nogil:
    # Newton's iteration for the inverse of an odd number mod 2**64.
    cdef uint64_t x = a
    cdef int i
    for i in range(6):
        x *= 2 - a * x
    return x


cdef uint64_t _P2 = _P * _P
DEF _GAPS = 64
cdef uint64_t _P_INV_POW[_GAPS]      # P**-g for the gaps g between words' starts (a longer gap in steps)
_P_INV_POW[0] = 1
for _g in range(1, _GAPS):
    _P_INV_POW[_g] = _P_INV_POW[_g - 1] * _inverse(_P)


cdef inline bint _ascii_space(uint8_t c) nogil:
    # What str.split() splits on below U+0080, but the newline (a line break here).
    return c == 32 or c == 9 or c == 11 or c == 12 or c == 13 or (28 <= c <= 31)


cdef bint _ASCII_IN_WORD[256]    # an ASCII character that is no whitespace (str.split) and no newline
for _c in range(256):
    _ASCII_IN_WORD[_c] = _c < 0x80 and _c != 10 and not _ascii_space(_c)


cdef inline int _utf8_space(const uint8_t* s, Py_ssize_t i, Py_ssize_t n, int* length) nogil:
    """Whether the UTF-8 character at s[i] (a lead byte >= 0x80) is whitespace; its length in `length`."""
    cdef uint8_t c = s[i]
    cdef Py_UCS4 cp
    if c < 0xE0:
        length[0] = 2
        cp = ((c & 0x1F) << 6) | (s[i + 1] & 0x3F)
    elif c < 0xF0:
        length[0] = 3
        cp = ((c & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F)
    else:
        length[0] = 4
        return 0                      # nothing above U+FFFF is whitespace
    return Py_UNICODE_ISSPACE(cp)


def shingled(list units, int width):
    """(data, bounds, first, size, unit, kept, counts, offsets, sh_first,
    sh_last, sh_line, h, mixed) as fingerprints._shingled_plain builds them
    (kept: (unit, start, end) byte ranges of the units with a word), or None
    when no unit has a word."""
    cdef Py_ssize_t n_units = len(units), total = 0, n, i, ui
    for ui in range(n_units):
        PyUnicode_AsUTF8AndSize(units[ui], &n)
        total += n
    cdef Py_ssize_t cap = total + n_units + 1
    cdef uint8_t* out = <uint8_t*> malloc(cap)
    cdef int64_t* bounds = <int64_t*> malloc((cap + 2) * sizeof(int64_t))
    cdef int64_t* first = <int64_t*> malloc((cap + 1) * sizeof(int64_t))
    cdef int64_t* line_unit = <int64_t*> malloc((cap + 1) * sizeof(int64_t))
    if out == NULL or bounds == NULL or first == NULL or line_unit == NULL:
        free(out); free(bounds); free(first); free(line_unit)
        raise MemoryError()
    cdef Py_ssize_t olen = 0, nw = 0, nl = 0, line_words, unit_start, j
    cdef bint in_word, unit_words, any_words = False
    cdef const uint8_t* s
    cdef uint8_t c
    cdef int length
    cdef list kept = []
    try:
        for ui in range(n_units):
            s = <const uint8_t*> PyUnicode_AsUTF8AndSize(units[ui], &n)
            in_word = unit_words = False
            line_words = 0
            unit_start = 0
            i = 0
            while i < n:
                c = s[i]
                if c < 0x80:
                    if c == 10:
                        in_word = False
                        line_words = 0
                        i += 1
                        continue
                    if _ascii_space(c):
                        in_word = False
                        i += 1
                        continue
                    length = 1
                elif _utf8_space(s, i, n, &length):
                    in_word = False
                    i += length
                    continue
                if not in_word:           # a word starts: its separator first
                    if line_words == 0:
                        if any_words:
                            out[olen] = 10
                            olen += 1
                        first[nl] = nw
                        line_unit[nl] = ui
                        nl += 1
                        if not unit_words:
                            unit_start = olen
                            unit_words = True
                    else:
                        out[olen] = 32
                        olen += 1
                    bounds[nw] = olen - 1
                    nw += 1
                    line_words += 1
                    in_word = any_words = True
                if length == 1:              # the rest of a run of ASCII word characters, copied at once
                    j = i + 1
                    while j < n and _ASCII_IN_WORD[s[j]]:
                        j += 1
                    length = j - i
                memcpy(out + olen, s + i, length)
                olen += length
                i += length
            if unit_words:
                kept.append((ui, unit_start, olen))
        if nw == 0:
            return None
        bounds[nw] = olen
        return _finish(out, olen, bounds, nw, first, line_unit, nl, width, kept)
    finally:
        free(out); free(bounds); free(first); free(line_unit)


cdef object _finish(uint8_t* out, Py_ssize_t olen, int64_t* bounds, Py_ssize_t nw, int64_t* first,
                    int64_t* line_unit, Py_ssize_t nl, int width, list kept):
    cdef Py_ssize_t k = width - 1, li, j, ns = 0, c, sz, f, pos, w
    data = out[:olen]
    b_arr = np.empty(nw + 1, np.int64)
    f_arr = np.empty(nl, np.int64)
    s_arr = np.empty(nl, np.int64)
    u_arr = np.empty(nl, np.int64)
    cnt_arr = np.empty(nl, np.int64)
    off_arr = np.empty(nl, np.int64)
    cdef int64_t[::1] bv = b_arr, fv = f_arr, sv = s_arr, uv = u_arr, cv = cnt_arr, ov = off_arr
    memcpy(&bv[0], bounds, (nw + 1) * sizeof(int64_t))
    memcpy(&fv[0], first, nl * sizeof(int64_t))
    memcpy(&uv[0], line_unit, nl * sizeof(int64_t))
    for li in range(nl):
        sz = (first[li + 1] if li + 1 < nl else nw) - first[li]
        sv[li] = sz
        c = sz - k
        if c < 1:
            c = 1
        cv[li] = c
        ov[li] = ns
        ns += c
    shf_arr = np.empty(ns, np.int64)
    shl_arr = np.empty(ns, np.int64)
    line_arr = np.empty(ns, np.int64)
    h_arr = np.empty(ns, np.uint64)
    mix_arr = np.empty(ns, np.uint64)
    cdef int64_t[::1] shf = shf_arr, shl = shl_arr, shline = line_arr
    cdef uint64_t[::1] hv = h_arr, mv = mix_arr
    # prefix[i] = sum((b[t] + 1) * P**t, t < i); a span's hash is its
    # difference times P**-start (fingerprints._span_hashes).
    cdef uint64_t* prefix = <uint64_t*> malloc((olen + 1) * sizeof(uint64_t))
    cdef uint64_t* inv_at = <uint64_t*> malloc((nw + 1) * sizeof(uint64_t))  # P**-start of each word
    if prefix == NULL or inv_at == NULL:
        free(prefix); free(inv_at)
        raise MemoryError()
    cdef uint64_t p = 1, p1 = _P, acc = 0, ip = 1, x, hh
    cdef Py_ssize_t t, at = 0, gap
    try:
        prefix[0] = 0
        t = 0
        while t + 1 < olen:          # two bytes a step: the powers in two chains that do not wait on each other
            acc += (<uint64_t> out[t] + 1) * p
            prefix[t + 1] = acc
            acc += (<uint64_t> out[t + 1] + 1) * p1
            prefix[t + 2] = acc
            p *= _P2
            p1 *= _P2
            t += 2
        if t < olen:
            acc += (<uint64_t> out[t] + 1) * p
            prefix[t + 1] = acc
        for w in range(nw):           # P**-start, from the last word's by the gap between them
            gap = bounds[w] + 1 - at
            at += gap
            while gap >= _GAPS:
                ip *= _P_INV_POW[_GAPS - 1]
                gap -= _GAPS - 1
            inv_at[w] = ip = ip * _P_INV_POW[gap]
        pos = 0
        for li in range(nl):
            f = fv[li]
            sz = sv[li]
            for j in range(cv[li]):
                shf[pos] = f + j
                shl[pos] = f + j + k if f + j + k <= f + sz - 1 else f + sz - 1
                shline[pos] = li
                hh = (prefix[bounds[shl[pos] + 1]] - prefix[bounds[f + j] + 1]) * inv_at[f + j]
                if hh == 0:
                    hh = 1
                hv[pos] = hh
                x = hh ^ (hh >> 32)
                mv[pos] = x * _MIX
                pos += 1
    finally:
        free(prefix); free(inv_at)
    return (data, b_arr, f_arr, s_arr, u_arr, kept, cnt_arr, off_arr, shf_arr, shl_arr, line_arr, h_arr, mix_arr)


cdef Py_ssize_t _window_cuts(Py_ssize_t n, int64_t* anchors, Py_ssize_t na, int64_t* cuts) nogil:
    """fingerprints.window_cuts, into cuts; how many."""
    cdef Py_ssize_t last = 0, nc = 0, i
    cdef int64_t a
    for i in range(na + 1):
        a = anchors[i] if i < na else n
        while a - last > WINDOW_MAX and n - (last + WINDOW_MAX) >= WINDOW_MIN:
            last += WINDOW_MAX
            cuts[nc] = last
            nc += 1
        if a < n and a - last >= WINDOW_MIN and n - a >= WINDOW_MIN:
            cuts[nc] = a
            nc += 1
            last = a
    return nc


def cut(span_first, span_size, win_unit, win_counts, win_open, sh_first, mixed):
    """fingerprints._cut_plain over every span: (win_unit, counts, opens) of
    the windows, a span longer than 2 * WINDOW_MIN words cut at its anchors;
    None when no span is cut."""
    cdef const int64_t[::1] sf = np.ascontiguousarray(span_first, np.int64)
    cdef const int64_t[::1] ss = np.ascontiguousarray(span_size, np.int64)
    cdef const int64_t[::1] wc = np.ascontiguousarray(win_counts, np.int64)
    cdef const int64_t[::1] wo = np.ascontiguousarray(win_open, np.int64)
    cdef const int64_t[::1] shf = np.ascontiguousarray(sh_first, np.int64)
    cdef const uint64_t[::1] mx = np.ascontiguousarray(mixed, np.uint64)
    cdef Py_ssize_t n_spans = sf.shape[0], s, lo, hi, q, na, nc, piece, at, b
    cdef Py_ssize_t longest = 0
    for s in range(n_spans):
        if wc[s] > longest:
            longest = wc[s]
    cdef int64_t* anchors = <int64_t*> malloc((longest + 1) * sizeof(int64_t))
    cdef int64_t* cuts = <int64_t*> malloc((longest + 2) * sizeof(int64_t))
    pieces_arr = np.ones(n_spans, np.int64)
    cdef int64_t[::1] pieces = pieces_arr
    counts_out = []                   # per span: its pieces' shingle counts (cut spans only)
    cdef bint any_cut = False
    cdef int64_t rel, n_words
    try:
        for s in range(n_spans):
            if ss[s] <= 2 * WINDOW_MIN:
                continue
            lo, hi = wo[s], wo[s] + wc[s]
            na = 0
            for q in range(lo, hi):
                if (mx[q] >> 40) % ANCHOR_EVERY == 0:      # is_anchor_plain
                    anchors[na] = shf[q] - sf[s]
                    na += 1
            n_words = ss[s]
            nc = _window_cuts(n_words, anchors, na, cuts)
            if nc == 0:
                continue
            any_cut = True
            pieces[s] = nc + 1
            pc = np.empty(nc + 1, np.int64)
            cuts[nc] = n_words
            # shingles in each piece: those whose first word falls in [cut_i, cut_i+1)
            at = lo
            for piece in range(nc + 1):
                b = at
                while at < hi and shf[at] - sf[s] < cuts[piece]:
                    at += 1
                pc[piece] = at - b
            counts_out.append((s, pc))
    finally:
        free(anchors); free(cuts)
    if not any_cut:
        return None
    base = pieces_arr.cumsum() - pieces_arr
    counts = np.asarray(win_counts).repeat(pieces_arr)
    for s, pc in counts_out:
        counts[base[s]:base[s] + pc.size] = pc
    opens = counts.cumsum()
    opens -= counts
    return np.asarray(win_unit).repeat(pieces_arr), counts, opens


# ------------------------------------------------------------------ masks ---
# The finders of the `default` profile's masks (_fast/mask_finders.py) written again
# in C over the text's code points, for _fast/masks.FastMasks to apply them.
# A finder here gives a superset of its Python twin's positions (so of where
# the pattern can match); the pattern itself (`re`) then decides at each, left
# to right, as `sub` would. Only ASCII characters are looked for, and the
# caller has already sent a text with a non-ASCII digit to the plain sub.

cdef extern from "Python.h":
    int PyUnicode_KIND(object o)
    void* PyUnicode_DATA(object o)
    Py_UCS4 PyUnicode_READ(int kind, void* data, Py_ssize_t index) nogil

from libc.stdlib cimport realloc, qsort

cdef extern from *:
    """
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    /* A bit for each of the 16 places from b on where a letter a-z stands and no ASCII word character
       ([0-9A-Za-z_]) before it: where a listed word can start (compiled.pyx's _word_starts); b[-1] is read. */
    static inline unsigned imprint_lower_starts16(const unsigned char* b) {
    #if defined(__SSE2__)
    #define IMPRINT_IN(v, lo, hi) _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8((lo) - 1)), \
                                                _mm_cmplt_epi8(v, _mm_set1_epi8((hi) + 1)))
        __m128i x = _mm_loadu_si128((const __m128i*) b);
        __m128i p = _mm_loadu_si128((const __m128i*) (b - 1));
        __m128i word = _mm_or_si128(_mm_or_si128(IMPRINT_IN(p, '0', '9'), IMPRINT_IN(p, 'A', 'Z')),
                                    _mm_or_si128(IMPRINT_IN(p, 'a', 'z'), _mm_cmpeq_epi8(p, _mm_set1_epi8('_'))));
        return (unsigned) _mm_movemask_epi8(_mm_andnot_si128(word, IMPRINT_IN(x, 'a', 'z')));
    #undef IMPRINT_IN
    #else
        unsigned m = 0;
        int k;
        for (k = 0; k < 16; k++) {
            unsigned char c = b[k], q = b[k - 1];
            int word = (q >= '0' && q <= '9') || (q >= 'A' && q <= 'Z') || (q >= 'a' && q <= 'z') || q == '_';
            m |= (unsigned) (c >= 'a' && c <= 'z' && !word) << k;
        }
        return m;
    #endif
    }
    /* A bit for each of the 16 places from b on that holds c. */
    static inline unsigned imprint_eq16(const unsigned char* b, unsigned char c) {
    #if defined(__SSE2__)
        return (unsigned) _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i*) b),
                                                           _mm_set1_epi8((char) c)));
    #else
        unsigned m = 0;
        int k;
        for (k = 0; k < 16; k++)
            m |= (unsigned) (b[k] == c) << k;
        return m;
    #endif
    }
    /* A bit for each of the 16 places from b on that holds an ASCII digit. */
    static inline unsigned imprint_digit16(const unsigned char* b) {
    #if defined(__SSE2__)
        __m128i x = _mm_loadu_si128((const __m128i*) b);
        return (unsigned) _mm_movemask_epi8(_mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('0' - 1)),
                                                          _mm_cmplt_epi8(x, _mm_set1_epi8('9' + 1))));
    #else
        unsigned m = 0;
        int k;
        for (k = 0; k < 16; k++)
            m |= (unsigned) (b[k] >= '0' && b[k] <= '9') << k;
        return m;
    #endif
    }
    static inline int imprint_ctz(unsigned m) {
    #if defined(__GNUC__)
        return __builtin_ctz(m);
    #else
        int k = 0;
        while (!(m & 1u)) { m >>= 1; k++; }
        return k;
    #endif
    }
    """
    unsigned imprint_lower_starts16(const uint8_t* b) nogil
    int imprint_ctz(unsigned m) nogil
    unsigned imprint_eq16(const uint8_t* b, uint8_t c) nogil
    unsigned imprint_digit16(const uint8_t* b) nogil


cdef struct Text:
    const uint8_t* b      # one byte a character: ASCII as itself, any other as a byte >= 0x80 (which nothing
                          # looks for), PAD zero bytes before and after
    Py_ssize_t n
    uint8_t* owned        # the allocation b lies in (room for owned_cap characters and the PADs)
    Py_ssize_t owned_cap
    int64_t* words        # where a listed word starts, shifted left 4, with the bits of its lists (_word_starts),
                          # once asked for
    Py_ssize_t n_words
    Py_ssize_t words_cap
    int64_t* places       # scratch: the places a finder looks at (_places), room for places_cap
    Py_ssize_t places_cap


cdef uint8_t _CLASS[256]      # 1: an ASCII digit, 2: [0-9a-f]
for _c in range(256):
    _CLASS[_c] = (1 | 2 if 48 <= _c <= 57 else 0) | (2 if 97 <= _c <= 102 else 0)


cdef struct Vec:
    int64_t* at
    Py_ssize_t n
    Py_ssize_t cap
    bint unsorted


DEF PAD = 64    # zero bytes before and after a Text's characters: every look of a finder lands inside


cdef inline uint8_t C(Text* t, Py_ssize_t i) noexcept nogil:
    # Past either end (at most PAD away): 0, as for a NUL, which nothing looks for.
    return t.b[i]


cdef int _open(Text* t, str text) except -1:
    t.words = NULL
    t.n_words = -1
    t.words_cap = 0
    t.places = NULL
    t.places_cap = 0
    t.owned = NULL
    t.owned_cap = -1
    return _load(t, text)


cdef int _load(Text* t, str text) except -1:
    """t.b: text's characters (into the allocation t already has, where they fit: a table's masks mostly
    shorten a text, and a new allocation per mask costs more than the copy)."""
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef Py_ssize_t i, n = len(text)
    cdef Py_UCS4 c
    cdef uint8_t* b
    t.n = n
    if n > t.owned_cap:
        free(t.owned)
        t.owned = <uint8_t*> malloc(n + 2 * PAD)
        if t.owned == NULL:
            t.owned_cap = -1
            raise MemoryError()
        t.owned_cap = n
        memset(t.owned, 0, PAD)
    memset(t.owned + PAD + n, 0, PAD)
    b = t.owned + PAD
    if kind == 1:
        memcpy(b, data, n)          # a character above U+007F stays itself: nothing looks for one either
    else:
        for i in range(n):
            c = PyUnicode_READ(kind, data, i)
            b[i] = <uint8_t> c if c < 128 else 0x80
    t.b = b
    return 0


cdef inline bint D(Text* t, Py_ssize_t i) noexcept nogil:
    cdef uint8_t c = C(t, i)
    return 48 <= c <= 57


cdef inline bint _az(Py_UCS4 c) noexcept nogil:
    return 97 <= c <= 122


cdef inline bint _hex(Py_UCS4 c) noexcept nogil:
    return 48 <= c <= 57 or 97 <= c <= 102


cdef inline bint LOW(Text* t, Py_ssize_t i) noexcept nogil:
    return _az(C(t, i))


cdef inline bint HEX(Text* t, Py_ssize_t i) noexcept nogil:
    return _hex(C(t, i))


cdef inline bint AT(Text* t, Py_ssize_t i, const char* lit) noexcept nogil:
    """Whether the text at i starts with the ASCII literal."""
    cdef Py_ssize_t j = 0
    while lit[j]:
        if C(t, i + j) != <uint8_t> lit[j]:
            return 0
        j += 1
    return 1


cdef int _room(Vec* v, Py_ssize_t more) except -1:
    """Room in v for `more` entries after its v.n."""
    cdef int64_t* grown
    if v.n + more > v.cap:
        v.cap = 2 * v.cap + 16 * more
        grown = <int64_t*> realloc(v.at, v.cap * sizeof(int64_t))
        if grown == NULL:
            raise MemoryError()
        v.at = grown
    return 0


cdef int _push(Vec* v, int64_t p) except -1:
    if p < 0:
        return 0
    if v.n and p <= v.at[v.n - 1]:
        if p == v.at[v.n - 1]:
            return 0
        v.unsorted = 1
    _room(v, 1)
    v.at[v.n] = p
    v.n += 1
    return 0


cdef int _cmp(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<int64_t*> a)[0], y = (<int64_t*> b)[0]
    return (x > y) - (x < y)


cdef void _sort(Vec* v) noexcept nogil:
    cdef Py_ssize_t i, k = 0
    if not v.unsorted or v.n < 2:
        return
    qsort(v.at, v.n, sizeof(int64_t), _cmp)
    for i in range(v.n):
        if k == 0 or v.at[i] != v.at[k - 1]:
            v.at[k] = v.at[i]
            k += 1
    v.n = k


cdef inline Py_ssize_t _next(Text* t, Py_ssize_t i, const char* lit, Py_ssize_t at=0) noexcept nogil:
    """Where the ASCII literal next occurs from i on (-1: nowhere), looking for its character at `at` (the
    rarest: each is looked at)."""
    cdef Py_ssize_t j
    cdef unsigned m
    i += at
    while i < t.n:                      # 16 places at a time; past the end lie the PAD's zeros, no literal's
        m = imprint_eq16(t.b + i, <uint8_t> lit[at])
        while m:
            j = i + imprint_ctz(m)
            m &= m - 1
            if AT(t, j - at, lit):
                return j - at
        i += 16
    return -1


cdef uint8_t _ASCII_WORD[256]   # re's \w below U+0080: a place after one is no word boundary
for _c in range(256):
    _ASCII_WORD[_c] = 48 <= _c <= 57 or 65 <= _c <= 90 or 97 <= _c <= 122 or _c == 95


cdef int _word_starts(Text* t) except -1:
    """t.words: every i where one of the listed words (months, weekdays, scores, relative days) starts
    and no ASCII word character stands before it, as i << 4 | the bits of the lists that hold such a word
    (_word_bits). (Each of those patterns opens with \b before a letter; a character above U+007F before
    it may or may not be a word character, so that place is kept.) Found once for all the finders that ask."""
    cdef Py_ssize_t i = 0, j, n = t.n
    cdef unsigned m
    cdef uint8_t bits
    if t.n_words >= 0:
        return 0
    t.n_words = 0
    while i < n:                            # (the 16 read from i lie in the PAD past the end)
        m = imprint_lower_starts16(t.b + i)
        while m:
            j = i + imprint_ctz(m)
            m &= m - 1
            bits = _word_bits(t.b, j)
            if bits:
                _word_add(t, j << 4 | bits)
        i += 16
    return 0


cdef int _word_add(Text* t, int64_t w) except -1:
    cdef int64_t* grown
    if t.n_words == t.words_cap:
        t.words_cap = 2 * t.words_cap + 64
        grown = <int64_t*> realloc(t.words, t.words_cap * sizeof(int64_t))
        if grown == NULL:
            raise MemoryError()
        t.words = grown
    t.words[t.n_words] = w
    t.n_words += 1
    return 0


cdef Py_ssize_t _places(Text* t, uint8_t ch, Py_ssize_t off, Py_ssize_t end) except -1:
    """Each i in [0, end) with ch at i + off, ascending, into t.places (how many): the only places a finder
    that looks for ch there need look (found 16 places at a time instead of a look at every place)."""
    cdef Py_ssize_t j = off, i, k = 0, x
    cdef unsigned m
    if t.places_cap < t.n + 2:
        free(t.places)
        t.places = <int64_t*> malloc((t.n + 2) * sizeof(int64_t))
        if t.places == NULL:
            t.places_cap = 0
            raise MemoryError()
        t.places_cap = t.n + 2
    while j < t.n:                      # 16 places at a time, as _next
        m = imprint_eq16(t.b + j, ch)
        while m:
            x = j + imprint_ctz(m)
            m &= m - 1
            i = x - off
            if i >= end:
                return k
            if i >= 0:
                t.places[k] = i
                k += 1
        j += 16
    return k


cdef bint _has(Text* t, const char* lit):
    return _next(t, 0, lit) >= 0


cdef bint _has_digit(Text* t):
    cdef Py_ssize_t i = 0
    while i < t.n:
        if imprint_digit16(t.b + i):
            return 1
        i += 16
    return 0


cdef bint _digits_at(Text* t, Py_ssize_t i, int k):
    cdef int j
    for j in range(k):
        if not D(t, i + j):
            return 0
    return 1


cdef const char* _MONTHS[12]
_MONTHS[:] = [b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov", b"dec"]
cdef const char* _WEEKDAYS[7]
_WEEKDAYS[:] = [b"mon", b"tue", b"wed", b"thu", b"fri", b"sat", b"sun"]
cdef const char* _SCORES[7]
_SCORES[:] = [b"score", b"similarity", b"relevance", b"rank", b"distance", b"confidence", b"cosine"]
cdef const char* _RELATIVE[4]
_RELATIVE[:] = [b"yesterday", b"today", b"tomorrow", b"just now"]


# Per three letters a-z: which lists hold a word that starts with them (a bit per list), so that
# most positions are passed over after one look; a list with a word longer than three letters (_LONG) is
# then read in full.
cdef uint8_t _TRIPLES[26 * 26 * 26]
cdef uint8_t _LONG = 0
cdef enum:
    B_MONTH = 1
    B_WEEKDAY = 2
    B_SCORE = 4
    B_RELATIVE = 8


cdef inline Py_ssize_t _triple(const uint8_t* b) noexcept nogil:
    """The index in _TRIPLES of the three letters from b on, or -1 where one is no letter a-z."""
    cdef unsigned c0 = b[0] - 97u, c1 = b[1] - 97u, c2 = b[2] - 97u
    if c0 >= 26 or c1 >= 26 or c2 >= 26:
        return -1
    return (c0 * 26 + c1) * 26 + c2


cdef void _mark(const char** words, int k, uint8_t bit) noexcept:
    global _LONG
    cdef int j
    for j in range(k):
        _TRIPLES[_triple(<const uint8_t*> words[j])] |= bit      # (every listed word opens with three letters)
        if strlen(words[j]) > 3:
            _LONG |= bit


cdef inline bint _lit(const uint8_t* b, const char* lit) noexcept nogil:
    """Whether b starts with the ASCII literal (b lies in a Text: a zero byte ends its characters)."""
    cdef Py_ssize_t j = 0
    while lit[j]:
        if b[j] != <uint8_t> lit[j]:
            return 0
        j += 1
    return 1


cdef inline bint _one_of(const uint8_t* b, const char** words, int k) noexcept nogil:
    cdef int j
    for j in range(k):
        if _lit(b, words[j]):
            return 1
    return 0


cdef inline uint8_t _word_bits(const uint8_t* b, Py_ssize_t i) noexcept nogil:
    """The bits of the lists that hold a word starting at i, where no ASCII word character stands before i
    (0 elsewhere). It reads b[i - 1] to b[i + _LONGEST - 1]: _reopen looks again where an edit touches those."""
    cdef Py_ssize_t x = _triple(b + i)
    cdef uint8_t bits
    if x < 0:
        return 0
    bits = _TRIPLES[x]
    if bits == 0 or _ASCII_WORD[b[i - 1]]:
        return 0
    if bits & _LONG:
        if bits & _LONG & B_MONTH and not _one_of(b + i, _MONTHS, 12):
            bits &= ~B_MONTH
        if bits & _LONG & B_WEEKDAY and not _one_of(b + i, _WEEKDAYS, 7):
            bits &= ~B_WEEKDAY
        if bits & _LONG & B_SCORE and not _one_of(b + i, _SCORES, 7):
            bits &= ~B_SCORE
        if bits & _LONG & B_RELATIVE and not _one_of(b + i, _RELATIVE, 4):
            bits &= ~B_RELATIVE
    return bits


cdef bint _month_then(Text* t, Py_ssize_t q, int max_spaces):
    """After a month prefix at q, the rest of its letters, ".", one to max_spaces spaces and a digit: how a
    date with a month name goes on (the name ends where its run of letters does, or a space could not follow)."""
    cdef Py_ssize_t r = q + 3
    cdef int sp = 0
    while LOW(t, r):
        r += 1
    if C(t, r) == 46:
        r += 1
    while C(t, r) == 32 and sp < max_spaces:
        r += 1
        sp += 1
    return sp >= 1 and D(t, r)


_mark(_MONTHS, 12, B_MONTH)
_mark(_WEEKDAYS, 7, B_WEEKDAY)
_mark(_SCORES, 7, B_SCORE)
_mark(_RELATIVE, 4, B_RELATIVE)


cdef Py_ssize_t _longest(const char** words, int k, Py_ssize_t longest) noexcept:
    cdef int j
    for j in range(k):
        if <Py_ssize_t> strlen(words[j]) > longest:
            longest = strlen(words[j])
    return longest


cdef Py_ssize_t _LONGEST = _longest(_RELATIVE, 4, _longest(_SCORES, 7, _longest(_WEEKDAYS, 7, _longest(_MONTHS, 12, 0))))


cdef enum:
    F_URL, F_UUID, F_HEX, F_WEEKDAY, F_ISO, F_ISO_BASIC, F_EPOCH, F_YMD, F_SLASH, F_DOTTED, F_MDY, F_DMY, \
        F_SYSLOG, F_TIME, F_AGO, F_RELATIVE, F_SCORE, F_LINE_NUMBER

FINDERS = {"find_url": F_URL, "find_uuid": F_UUID, "find_hex": F_HEX, "find_weekday_date": F_WEEKDAY,
           "find_iso_date": F_ISO, "find_iso_basic": F_ISO_BASIC, "find_epoch": F_EPOCH, "find_ymd_slash": F_YMD,
           "find_slash_date": F_SLASH, "find_dotted_date": F_DOTTED, "find_month_day_year": F_MDY,
           "find_day_month_year": F_DMY, "find_syslog_date": F_SYSLOG, "find_time": F_TIME, "find_ago": F_AGO,
           "find_relative_day": F_RELATIVE, "find_score": F_SCORE, "find_line_number": F_LINE_NUMBER}
"""The finders of _fast/mask_finders.py written here, by name."""


cdef int _find(int fid, Text* t, Py_ssize_t back, Vec* v) except -1:
    cdef Py_ssize_t n = t.n, i, j, u, e, k, q
    cdef uint8_t c, cls
    cdef const uint8_t* b = t.b
    if fid == F_URL:
        if not _has(t, b"://") or not (_has(t, b"?") or _has(t, b"#")):
            return 0
        i = _next(t, 0, b"://")                # (rarer than "http"): the "http" or "https" before it
        while i >= 0:
            if AT(t, i - 5, b"https"):
                _push(v, i - 5)
            if AT(t, i - 4, b"http"):
                _push(v, i - 4)
            i = _next(t, i + 1, b"://")
    elif fid == F_UUID:                    # from each "-": the one at i + 8
        for q in range(_places(t, 45, 8, n - 35)):
            i = t.places[q]
            if C(t, i + 8) == 45 and C(t, i + 13) == 45 and C(t, i + 18) == 45 and C(t, i + 23) == 45:
                for j in range(36):
                    if j != 8 and j != 13 and j != 18 and j != 23 and not HEX(t, i + j):
                        break
                else:
                    _push(v, i)
    elif fid == F_HEX or fid == F_EPOCH:      # runs of 16 hex characters, of 10 digits starting with "1"
        cls = 2 if fid == F_HEX else 1
        k = 16 if fid == F_HEX else 10
        # A run of k or more holds one of every k-th character: look there only, then take its whole run.
        i = k - 1
        j = 0                                  # where the last run taken ended
        while i < n:
            if not (_CLASS[b[i]] & cls):
                i += k
                continue
            u = i
            while u > j and _CLASS[b[u - 1]] & cls:
                u -= 1
            e = i + 1
            while e < n and _CLASS[b[e]] & cls:
                e += 1
            if fid == F_HEX and e - u >= 16 or fid == F_EPOCH and e - u >= 10 and b[u] == 49:
                _push(v, u)
            j = e
            i = e + k
    elif fid == F_WEEKDAY:
        if not _has_digit(t):
            return 0
        _word_starts(t)
        for j in range(t.n_words):
            i = t.words[j] >> 4
            if t.words[j] & B_WEEKDAY:
                # The name ends where its letters do; then \.?,?[ \t]+ must follow.
                u = i + 3
                while LOW(t, u):
                    u += 1
                if C(t, u) == 46:
                    u += 1
                if C(t, u) == 44:
                    u += 1
                if C(t, u) == 32 or C(t, u) == 9:
                    _push(v, i)
    elif fid == F_ISO:
        for q in range(_places(t, 45, 4, n - 9)):
            i = t.places[q]
            if C(t, i + 4) == 45 and C(t, i + 7) == 45 and _digits_at(t, i, 4) and _digits_at(t, i + 5, 2) \
                    and _digits_at(t, i + 8, 2):
                _push(v, i)
    elif fid == F_ISO_BASIC:                 # a run of digits whose last 8 a "t" and 4 digits follow
        i = 7                                  # (a run of 8 or more holds one of every 8th character, as above)
        j = 0
        while i < n:
            if not D(t, i):
                i += 8
                continue
            u = i
            while u > j and D(t, u - 1):
                u -= 1
            e = i + 1
            while D(t, e):
                e += 1
            if e - u >= 8 and C(t, e) == 116 and _digits_at(t, e + 1, 4):
                _push(v, e - 8)
            j = e
            i = e + 8
    elif fid == F_YMD:
        for q in range(_places(t, 47, 4, n - 5)):
            i = t.places[q]
            if C(t, i + 4) == 47 and _digits_at(t, i, 4) and D(t, i + 5):
                _push(v, i)
    elif fid == F_SLASH or fid == F_TIME:   # "D/D" and "D:DD": a match starts at the digit or one before,
        for q in range(_places(t, 47 if fid == F_SLASH else 58, 1, n)):    # after a \b (no ASCII word character)
            i = t.places[q]
            if fid == F_SLASH and C(t, i + 1) == 47 and D(t, i) and D(t, i + 2) \
                    or fid == F_TIME and C(t, i + 1) == 58 and D(t, i) and D(t, i + 2) and D(t, i + 3):
                if D(t, i - 1) and not _ASCII_WORD[C(t, i - 2)]:
                    _push(v, i - 1)
                if not _ASCII_WORD[C(t, i - 1)]:
                    _push(v, i)
    elif fid == F_DOTTED:
        for q in range(_places(t, 46, 0, n)):
            i = t.places[q]
            if i < 3:
                continue
            if C(t, i) == 46 and _digits_at(t, i + 1, 4) and D(t, i - 1) and (C(t, i - 2) == 46 or C(t, i - 3) == 46):
                _push(v, i - 5)
                _push(v, i - 4)
                _push(v, i - 3)
    elif fid == F_MDY or fid == F_SYSLOG:
        if fid == F_MDY and not _has_year(t) or fid == F_SYSLOG and not _has_clock(t):
            return 0
        _word_starts(t)
        for j in range(t.n_words):
            i = t.words[j] >> 4
            if t.words[j] & B_MONTH and i < n - 3 and _month_then(t, i, 1 if fid == F_MDY else 2):
                _push(v, i)
    elif fid == F_DMY:
        if not _has_year(t):
            return 0
        _word_starts(t)
        for j in range(t.n_words):
            u = (t.words[j] >> 4) - 1      # from each month's name after a space: the one or two digits before it
            if t.words[j] & B_MONTH and C(t, u) == 32 and D(t, u - 1):
                if D(t, u - 2):
                    _push(v, u - 2)
                _push(v, u - 1)
    elif fid == F_AGO:
        i = -1
        while True:
            i = _next(t, i + 1, b" ago", 2)      # the "g": a space is every few characters
            if i < 0:
                break
            u = i
            while u and LOW(t, u - 1):
                u -= 1
            j = u - 1 if u and C(t, u - 1) == 32 else u
            if j and D(t, j - 1):
                j -= 1
                while j and D(t, j - 1):
                    j -= 1
                _push(v, j)
            for j in range(back, -1, -1):      # a quantity word (and its space) of up to `back` characters,
                if u - j >= 0 and not _ASCII_WORD[C(t, u - j - 1)]:    # where \b can hold before it
                    _push(v, u - j)
    elif fid == F_RELATIVE or fid == F_SCORE:
        if fid == F_SCORE and not (_has(t, b":") or _has(t, b"=")):
            return 0
        _word_starts(t)
        k = B_SCORE if fid == F_SCORE else B_RELATIVE
        for j in range(t.n_words):
            if t.words[j] & k:
                _push(v, t.words[j] >> 4)
    elif fid == F_LINE_NUMBER:
        if not (_has(t, b":") or _has(t, b"|")):
            return 0
        for q in range(_places(t, 10, 0, n) + 1):      # at the start and after each newline
            i = 0 if q == 0 else t.places[q - 1] + 1
            c = C(t, i)
            if i < n and (48 <= c <= 57 or c == 32 or c == 9):
                _push(v, i)
    else:
        raise ValueError(f"no compiled finder {fid}")
    _sort(v)
    return 0


cdef bint _has_year(Text* t):
    """A space and four digits."""
    cdef Py_ssize_t i = 0
    cdef const uint8_t* b = t.b
    while i < t.n:
        if imprint_eq16(b + i, 32) & imprint_digit16(b + i + 1) & imprint_digit16(b + i + 2) \
                & imprint_digit16(b + i + 3) & imprint_digit16(b + i + 4):
            return 1
        i += 16
    return 0


cdef bint _has_clock(Text* t):
    """D:DD."""
    cdef Py_ssize_t i = 0
    cdef const uint8_t* b = t.b
    while i < t.n:
        if imprint_digit16(b + i) & imprint_eq16(b + i + 1, 58) & imprint_digit16(b + i + 2) \
                & imprint_digit16(b + i + 3):
            return 1
        i += 16
    return 0


cdef enum:
    H_DIGIT = 1
    H_DASH = 2
    H_SLASH = 4
    H_DOT = 8
    H_COLON = 16
    H_EQUALS = 32
    H_PIPE = 64
    H_T = 128

# What a text must hold for each finder to find anything (its pattern to match).
cdef int _NEEDS[18]
_NEEDS[:] = [0, H_DASH, H_DIGIT, H_DIGIT, H_DASH | H_DIGIT, H_T | H_DIGIT, H_DIGIT, H_SLASH | H_DIGIT,
             H_SLASH | H_DIGIT, H_DOT | H_DIGIT, H_DIGIT, H_DIGIT, H_COLON | H_DIGIT, H_COLON | H_DIGIT, 0, 0, 0, 0]


cdef int _ALL_NEEDS = H_DIGIT | H_DASH | H_SLASH | H_DOT | H_COLON | H_T   # _NEEDS together
cdef uint8_t _HOLDS[256]     # per character: the bit of what finders need (_NEEDS) that it gives
for _c, _bit in ((45, H_DASH), (47, H_SLASH), (46, H_DOT), (58, H_COLON), (61, H_EQUALS), (124, H_PIPE),
                 (116, H_T), *((_d, H_DIGIT) for _d in range(48, 58))):
    _HOLDS[_c] = _bit


def find(str name, str text, Py_ssize_t back=12):
    """The positions the compiled twin of a finder of mask_finders.py gives, by name."""
    return next_starts([FINDERS[name]], 0, text, back)[1] or []


cdef int _held(Text* t):
    """What the text holds of what the finders need (_HOLDS), until it holds all that any needs."""
    cdef Py_ssize_t k
    cdef int held = 0
    for k in range(t.n):
        held |= _HOLDS[t.b[k]]
        if held & _ALL_NEEDS == _ALL_NEEDS:
            break
    return held


cdef int _holds(str s) except -1:
    """What s holds of what the finders need (_HOLDS)."""
    cdef int kind = PyUnicode_KIND(s), held = 0
    cdef void* data = PyUnicode_DATA(s)
    cdef Py_ssize_t k
    cdef Py_UCS4 c
    for k in range(len(s)):
        c = PyUnicode_READ(kind, data, k)
        if c < 128:
            held |= _HOLDS[c]
    return held


cdef Py_ssize_t _first_hit(list finders, Py_ssize_t step, Text* t, int held, Py_ssize_t back, Vec* v) except -1:
    """The index of the first finder of `finders` from `step` on that finds a place in t (its places in v,
    ascending), or len(finders)."""
    cdef Py_ssize_t i, n_f = len(finders)
    cdef int fid
    for i in range(step, n_f):
        fid = finders[i]
        if _NEEDS[fid] & held != _NEEDS[fid]:
            continue
        v.n, v.unsorted = 0, 0
        _find(fid, t, back, v)
        if v.n:
            return i
    return n_f


cdef void _close(Text* t) noexcept:
    free(t.words)
    free(t.places)
    free(t.owned)
    t.words = t.places = NULL
    t.owned = NULL
    t.n_words = -1
    t.words_cap = t.places_cap = 0
    t.owned_cap = -1


def next_starts(list finders, Py_ssize_t step, str text, Py_ssize_t back):
    """(i, starts) for the first finder of `finders` from index `step` on
    that finds a place in text: where its mask could match, ascending (a
    superset of where its pattern matches; `back`: find_ago's longest quantity
    word and its space); (len(finders), None) when none does. One call walks
    the whole table: a Python call per mask and text cost more than most scans."""
    cdef Text t
    cdef Vec v
    cdef Py_ssize_t i, k
    _open(&t, text)
    v.at, v.n, v.cap, v.unsorted = NULL, 0, 0, 0
    try:
        i = _first_hit(finders, step, &t, _held(&t), back, &v)
        if i == len(finders):
            return i, None
        return i, [v.at[k] for k in range(v.n)]
    finally:
        free(v.at)
        _close(&t)


# ------------------------------------------------------ masks, applied ---
# The whole of _fast/masks.FastMasks._apply_compiled in one call: the finders
# (above) say where each mask could match, and the match itself is decided
# at each place, left to right, as `sub` does. For the masks with the most
# matches, that decision is a C matcher written for exactly its pattern (the
# same end as `pattern.match(text, p)`, and the end of its kept groups, or
# no match; match_at shows it, tests/core/novelty/test_novelty_compiled.py
# holds it to `re` at every position of drawn text); the others still ask
# `re`. Each matcher below repeats its pattern from normalization.MASKS and
# says why its greedy choices need no backtracking where they need none.

cdef extern from "Python.h":
    object PyUnicode_FromKindAndData(int kind, const void* buffer, Py_ssize_t size)
    bint Py_UNICODE_ISALNUM(Py_UCS4 ch) nogil
    bint Py_UNICODE_ISDECIMAL(Py_UCS4 ch) nogil
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

cdef enum:
    X_RE, X_URL, X_UUID, X_HEX, X_ISO, X_MDY, X_DMY, X_SCORE, X_LINE

EXACT = {"find_url": X_URL, "find_uuid": X_UUID, "find_hex": X_HEX, "find_iso_date": X_ISO,
         "find_month_day_year": X_MDY, "find_day_month_year": X_DMY, "find_score": X_SCORE,
         "find_line_number": X_LINE}
"""The finders whose mask has a C matcher here, by name (the rest ask `re`)."""

cdef Py_UCS4 NOCH = 0x110000     # past either end of the text: no character


cdef struct U:
    int kind
    void* data
    Py_ssize_t n


cdef inline Py_UCS4 CH(U* u, Py_ssize_t i) noexcept nogil:
    if i < 0 or i >= u.n:
        return NOCH
    return PyUnicode_READ(u.kind, u.data, i)


cdef inline bint W(U* u, Py_ssize_t i) noexcept nogil:
    """re's \\w (str patterns): alphanumeric or "_"; nothing past the ends."""
    cdef Py_UCS4 c = CH(u, i)
    if c < 128:
        return 48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c == 95
    return c != NOCH and Py_UNICODE_ISALNUM(c)


cdef inline bint DD(U* u, Py_ssize_t i) noexcept nogil:
    """re's \\d (str patterns): a decimal digit."""
    cdef Py_UCS4 c = CH(u, i)
    if c < 128:
        return 48 <= c <= 57
    return c != NOCH and Py_UNICODE_ISDECIMAL(c)


cdef inline bint SP(U* u, Py_ssize_t i) noexcept nogil:
    """re's \\s (str patterns)."""
    cdef Py_UCS4 c = CH(u, i)
    return c != NOCH and Py_UNICODE_ISSPACE(c)


cdef inline bint LIT(U* u, Py_ssize_t i, const char* lit) noexcept nogil:
    cdef Py_ssize_t j = 0
    while lit[j]:
        if CH(u, i + j) != <Py_UCS4> (<uint8_t> lit[j]):
            return 0
        j += 1
    return 1


cdef inline bint AZ(U* u, Py_ssize_t i) noexcept nogil:
    return _az(CH(u, i))


cdef inline bint HX(U* u, Py_ssize_t i) noexcept nogil:
    return _hex(CH(u, i))


cdef inline bint DIGITS(U* u, Py_ssize_t i, int k) noexcept nogil:
    cdef int j
    for j in range(k):
        if not DD(u, i + j):
            return 0
    return 1


cdef inline Py_ssize_t _month3(U* u, Py_ssize_t i) noexcept nogil:
    """(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]* at i: where it ends (greedy), or -1.
    ("sept" is "sep" and [a-z]*.)"""
    cdef int j
    for j in range(12):
        if LIT(u, i, _MONTHS[j]):
            i += 3
            while AZ(u, i):
                i += 1
            return i
    return -1


cdef inline Py_ssize_t _year_end(U* u, Py_ssize_t q) noexcept nogil:
    """,? \\d{4}\\b at q: its end, or -1. (The comma taken first; without it a comma cannot be the space.)"""
    if CH(u, q) == 44:
        q += 1
    if CH(u, q) == 32 and DIGITS(u, q + 1, 4) and not W(u, q + 5):
        return q + 5
    return -1


cdef inline bint _iso_end_ok(U* u, Py_ssize_t e) noexcept nogil:
    # \b at e: what comes before e is a digit or "z" (a word character) in every branch.
    return not W(u, e)


cdef Py_ssize_t _iso_zone_then(U* u, Py_ssize_t x) noexcept nogil:
    """(?:z|[+-]\\d{2}:?\\d{2})?\\b at x, in re's order (the zone first, then none): the end, or -1."""
    cdef Py_UCS4 c = CH(u, x)
    cdef Py_ssize_t z = -1
    if c == 122:
        z = x + 1
    elif (c == 43 or c == 45) and DIGITS(u, x + 1, 2):
        if CH(u, x + 3) == 58 and DIGITS(u, x + 4, 2):       # the colon taken first
            z = x + 6
        elif DIGITS(u, x + 3, 2):                             # (taken or not, only one of these fits)
            z = x + 5
    if z >= 0 and _iso_end_ok(u, z):
        return z
    if _iso_end_ok(u, x):
        return x
    return -1


cdef Py_ssize_t _exact(int xid, U* u, Py_ssize_t p, Py_ssize_t* kept) noexcept nogil:
    """Where pattern.match(text, p) ends for the mask of matcher xid, or -1
    (no match); kept: where its kept groups end (url, score)."""
    cdef Py_ssize_t q, r, s, e, L, k
    cdef Py_UCS4 c
    cdef int j, d
    if xid == X_URL:
        # (https?://[^\s?#\"'<>]+)[?#][^\s\"'<>]*  -- the class of group 1 holds neither "?" nor "#", so a
        # shorter group 1 would leave one of its own characters where [?#] must be.
        if not LIT(u, p, b"http"):
            return -1
        q = p + 4
        if CH(u, q) == 115:
            q += 1
        if not LIT(u, q, b"://"):
            return -1
        r = q = q + 3
        while True:
            c = CH(u, r)
            if c == NOCH or c == 63 or c == 35 or c == 34 or c == 39 or c == 60 or c == 62 or SP(u, r):
                break
            r += 1
        if r == q or not (c == 63 or c == 35):
            return -1
        kept[0] = r
        r += 1
        while True:
            c = CH(u, r)
            if c == NOCH or c == 34 or c == 39 or c == 60 or c == 62 or SP(u, r):
                break
            r += 1
        return r
    if xid == X_UUID:
        # \b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b
        if W(u, p - 1):
            return -1
        for j in range(36):
            if j == 8 or j == 13 or j == 18 or j == 23:
                if CH(u, p + j) != 45:
                    return -1
            elif not HX(u, p + j):
                return -1
        return -1 if W(u, p + 36) else p + 36
    if xid == X_HEX:
        # (?<!\d\.)\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{16,}\b  -- a shorter run than the longest
        # ends before a hex character, a word character, so \b holds only after the longest.
        if p >= 2 and DD(u, p - 2) and CH(u, p - 1) == 46:
            return -1
        if W(u, p - 1) or not HX(u, p):
            return -1
        r = p
        d = 0
        while HX(u, r):
            d |= 1 if CH(u, r) >= 97 else 2
            r += 1
        if d != 3 or r - p < 16 or W(u, r):
            return -1
        return r
    if xid == X_ISO:
        # \b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?\b  -- the
        # optional parts tried as re tries them (taken before left out, \d+ longest first) until \b holds.
        if W(u, p - 1) or not (DIGITS(u, p, 4) and CH(u, p + 4) == 45 and DIGITS(u, p + 5, 2)
                               and CH(u, p + 7) == 45 and DIGITS(u, p + 8, 2)):
            return -1
        q = p + 10
        c = CH(u, q)
        if (c == 116 or c == 32) and DIGITS(u, q + 1, 2) and CH(u, q + 3) == 58 and DIGITS(u, q + 4, 2):
            r = q + 6
            if CH(u, r) == 58 and DIGITS(u, r + 1, 2):
                s = r + 3
                c = CH(u, s)
                if (c == 46 or c == 44) and DD(u, s + 1):
                    k = 0
                    while DD(u, s + 1 + k):
                        k += 1
                    L = k
                    while L >= 1:
                        e = _iso_zone_then(u, s + 1 + L)
                        if e >= 0:
                            return e
                        L -= 1
                e = _iso_zone_then(u, s)
                if e >= 0:
                    return e
            e = _iso_zone_then(u, r)
            if e >= 0:
                return e
        return q if _iso_end_ok(u, q) else -1
    if xid == X_MDY:
        # \b MONTH[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?,? \d{4}\b  -- a shorter [a-z]* leaves a letter where
        # "." or " " must be; a "." left out is no space. \d{1,2} and the ordinal tried as re does.
        if W(u, p - 1):
            return -1
        q = _month3(u, p)
        if q < 0:
            return -1
        if CH(u, q) == 46:
            q += 1
        if CH(u, q) != 32:
            return -1
        q += 1
        d = 2 if DIGITS(u, q, 2) else 1 if DD(u, q) else 0
        while d >= 1:
            r = q + d
            if LIT(u, r, b"st") or LIT(u, r, b"nd") or LIT(u, r, b"rd") or LIT(u, r, b"th"):
                e = _year_end(u, r + 2)
                if e >= 0:
                    return e
            e = _year_end(u, r)
            if e >= 0:
                return e
            d -= 1
        return -1
    if xid == X_DMY:
        # \b\d{1,2} MONTH[a-z]*\.?,? \d{4}\b  -- as above; after one digit of two comes a digit, no space.
        if W(u, p - 1):
            return -1
        d = 2 if DIGITS(u, p, 2) else 1 if DD(u, p) else 0
        while d >= 1:
            r = p + d
            if CH(u, r) == 32:
                q = _month3(u, r + 1)
                if q >= 0:
                    if CH(u, q) == 46:
                        e = _year_end(u, q + 1)
                        if e >= 0:
                            return e
                    e = _year_end(u, q)
                    if e >= 0:
                        return e
            d -= 1
        return -1
    if xid == X_SCORE:
        # \b(score|similarity|relevance|rank|ranking|distance|confidence|cosine)(\"?\s*[:=]\s*)-?\d+
        # (?:\.\d+)?(?:e[-+]?\d+)?  -- the names tried in order (rank before ranking); every optional part
        # is taken where it fits (no anchor follows), and where a part is left out what stands there cannot
        # be what comes next.
        if W(u, p - 1):
            return -1
        for j in range(8):
            if not LIT(u, p, _SCORE_NAMES[j]):
                continue
            q = p + _SCORE_LENGTHS[j]
            if CH(u, q) == 34:
                q += 1
            while SP(u, q):
                q += 1
            c = CH(u, q)
            if not (c == 58 or c == 61):
                continue
            q += 1
            while SP(u, q):
                q += 1
            kept[0] = q
            r = q
            if CH(u, r) == 45:
                r += 1
            if not DD(u, r):
                continue
            while DD(u, r):
                r += 1
            if CH(u, r) == 46 and DD(u, r + 1):
                r += 1
                while DD(u, r):
                    r += 1
            if CH(u, r) == 101:
                s = r + 1
                c = CH(u, s)
                if (c == 45 or c == 43) and DD(u, s + 1):
                    s += 1
                if DD(u, s):
                    while DD(u, s):
                        s += 1
                    r = s
            return r
        return -1
    if xid == X_LINE:
        # (?m)^[ \t]*\d+[ \t]*[:|][ \t]?  -- no class gives back a character the next could take.
        if p > 0 and CH(u, p - 1) != 10:
            return -1
        r = p
        while CH(u, r) == 32 or CH(u, r) == 9:
            r += 1
        if not DD(u, r):
            return -1
        while DD(u, r):
            r += 1
        while CH(u, r) == 32 or CH(u, r) == 9:
            r += 1
        c = CH(u, r)
        if not (c == 58 or c == 124):
            return -1
        r += 1
        if CH(u, r) == 32 or CH(u, r) == 9:
            r += 1
        return r
    return -1


cdef const char* _SCORE_NAMES[8]
_SCORE_NAMES[:] = [b"score", b"similarity", b"relevance", b"rank", b"ranking", b"distance", b"confidence", b"cosine"]
cdef int _SCORE_LENGTHS[8]
_SCORE_LENGTHS[:] = [5, 10, 9, 4, 7, 8, 10, 6]


cdef inline void _open_u(U* u, str text):
    u.kind = PyUnicode_KIND(text)
    u.data = PyUnicode_DATA(text)
    u.n = PyUnicode_GET_LENGTH(text)


def match_at(str name, str text, Py_ssize_t p):
    """(end, kept end) of the C matcher of a finder's mask at p (kept end -1
    where the mask keeps no group), or None: pattern.match(text, p)'s answer."""
    cdef U u
    cdef Py_ssize_t kept = -1, e
    _open_u(&u, text)
    e = _exact(EXACT[name], &u, p, &kept)
    return None if e < 0 else (e, kept)


cdef int _reopen(Text* t, str text, Vec* edits) except -1:
    """t opened again on `text`, the old text with `edits` made (start, end, length of what replaced it: three
    entries each, in the old text's order). The word starts, where they were found, are carried over: each
    depends on the character before it and the _LONGEST from it on (_word_bits), so only the places whose
    characters an edit touches are looked at again; the others move by what the edits before them added or took."""
    cdef int64_t* old_words = t.words
    cdef Py_ssize_t n_old = t.n_words
    if text is not None:           # (None: t holds the edited characters already, _spliced)
        _load(t, text)
    if n_old < 0:
        return 0
    t.words = NULL
    t.n_words = t.words_cap = 0
    try:
        _reword(t, old_words, n_old, edits)
    finally:
        free(old_words)
    return 0


cdef str _spliced(Text* t, Vec* edits, list reps, str same, uint8_t** spare, Py_ssize_t* spare_cap):
    """The text of t (one byte a character: PyUnicode_1BYTE_KIND, so t.b is the text itself) with the edits
    made, each edit's replacement `same` or, where that is None, the next of reps (each of the same kind).
    Written straight into a Text's allocation (the spare one, which then swaps with t's), not sliced and
    joined; t is left holding the new characters for _reopen."""
    cdef Py_ssize_t x, n = t.n, last = 0, o = 0, s, e, r, k = 0
    cdef uint8_t* dst
    cdef uint8_t* old
    cdef object piece
    for x in range(0, edits.n, 3):
        n += edits.at[x + 2] - (edits.at[x + 1] - edits.at[x])
    if n > spare_cap[0]:
        free(spare[0])
        spare[0] = <uint8_t*> malloc(n + 2 * PAD)
        if spare[0] == NULL:
            spare_cap[0] = -1
            raise MemoryError()
        spare_cap[0] = n
        memset(spare[0], 0, PAD)
    dst = spare[0] + PAD
    for x in range(0, edits.n, 3):
        s, e, r = edits.at[x], edits.at[x + 1], edits.at[x + 2]
        memcpy(dst + o, t.b + last, s - last)
        o += s - last
        if same is None:
            piece = reps[k]
            k += 1
        else:
            piece = same
        memcpy(dst + o, PyUnicode_DATA(piece), r)
        o += r
        last = e
    memcpy(dst + o, t.b + last, t.n - last)
    memset(dst + n, 0, PAD)
    old, x = t.owned, t.owned_cap
    t.owned, t.owned_cap = spare[0], spare_cap[0]
    spare[0], spare_cap[0] = old, x
    t.b = dst
    t.n = n
    return PyUnicode_FromKindAndData(1, dst, n)       # (its kind found again: the edits may leave only ASCII)


cdef int _reword(Text* t, int64_t* old_words, Py_ssize_t n_old, Vec* edits) except -1:
    """_reopen's word starts: old_words carried across the edits."""
    cdef Py_ssize_t j = 0, x, s, e, r, p, lo, hi, delta = 0, done = 0
    cdef uint8_t bits
    for x in range(0, edits.n, 3):
        s, e, r = edits.at[x], edits.at[x + 1], edits.at[x + 2]
        while j < n_old and (old_words[j] >> 4) <= s - _LONGEST:     # what it reads all before the edit: moved
            _word_add(t, old_words[j] + (delta << 4))
            j += 1
        lo = s - _LONGEST + 1 + delta
        if lo < done:
            lo = done
        if lo < 0:
            lo = 0
        hi = s + delta + r + 1                         # up to the edit's text and the place after it
        p = lo
        while p < hi and p < t.n - 1:
            bits = _word_bits(t.b, p)
            if bits:
                _word_add(t, p << 4 | bits)
            p += 1
        done = hi
        while j < n_old and (old_words[j] >> 4) <= e:   # what it reads meets the edit: looked at again above
            j += 1
        delta += r - (e - s)
    while j < n_old:
        _word_add(t, old_words[j] + (delta << 4))
        j += 1
    return 0


def apply_table(list finders, list steps, str text, Py_ssize_t back):
    """_fast/masks.FastMasks.apply on the compiled path: every mask of the
    table in order, each tried where its finder says it could match. steps:
    per mask (pattern, repl, kept, expand, exact): kept (k, tail) when the
    match keeps its groups up to k, expand a function of the match for repl,
    exact its C matcher (EXACT; 0: ask `re`). One Text serves every finder
    until a mask changes the text (_reopen). What the text holds for the
    finders (_held) is not read again after an edit: an edit only takes
    characters away but for those of its replacement, so what the old text
    held and the replacements hold is enough to pass over no finder that could
    find a place (it may run a few that find none)."""
    cdef Py_ssize_t i = 0, n_f = len(finders), last, pos, p, e, start, kept_end, q, x
    cdef int xid, held
    cdef U u
    cdef list pieces, reps
    cdef bint plain, one_byte
    cdef Text t
    cdef Vec v, edits
    cdef uint8_t* spare = NULL        # _spliced's other allocation
    cdef Py_ssize_t spare_cap = -1
    v.at, v.n, v.cap, v.unsorted = NULL, 0, 0, 0
    edits.at, edits.n, edits.cap, edits.unsorted = NULL, 0, 0, 0
    _open(&t, text)
    try:
        held = _held(&t)
        while True:
            i = _first_hit(finders, i, &t, held, back, &v)
            if i == n_f:
                return text
            pattern, repl, kept, expand, xid = steps[i]
            match = pattern.match
            same = kept[1] if kept is not None else repl if expand is None else None   # every match's replacement
            reps = []                   # where it varies: each match's
            one_byte = PyUnicode_KIND(text) == 1 and (same is None or PyUnicode_KIND(same) == 1)
            pos = 0
            plain = False
            edits.n = 0
            _open_u(&u, text)
            for q in range(v.n):
                p = v.at[q]
                if p < pos:
                    continue
                if xid:
                    kept_end = -1
                    e = _exact(xid, &u, p, &kept_end)
                    if e < 0:
                        continue
                    if kept is not None:
                        start, r = kept_end, kept[1]
                    else:
                        start, r = p, repl
                else:
                    m = match(text, p)
                    if m is None:
                        continue
                    e = m.end()
                    if e == p:          # an empty match: leave the subtleties to re
                        plain = True
                        break
                    if kept is not None:
                        start, r = m.end(kept[0]), kept[1]
                    else:
                        start, r = p, (repl if expand is None else expand(m))
                pos = e
                _edit(&edits, start, e, len(r))
                if same is None:
                    reps.append(r)
                    held |= _holds(r)
                    one_byte = one_byte and PyUnicode_KIND(r) == 1
            if plain:
                text = pattern.sub(repl, text)
                _close(&t)
                _open(&t, text)
                held = _held(&t)
            elif edits.n:
                if same is not None:
                    held |= _holds(same)
                if one_byte:
                    text = _spliced(&t, &edits, reps, same, &spare, &spare_cap)
                    _reopen(&t, None, &edits)
                else:
                    pieces = []
                    last = 0
                    for x in range(0, edits.n, 3):
                        pieces.append(text[last:edits.at[x]])
                        pieces.append(same if same is not None else reps[x // 3])
                        last = edits.at[x + 1]
                    pieces.append(text[last:])
                    text = "".join(pieces)
                    _reopen(&t, text, &edits)
            i += 1
    finally:
        free(v.at)
        free(edits.at)
        free(spare)
        _close(&t)


cdef int _edit(Vec* edits, int64_t start, int64_t end, int64_t length) except -1:
    """An edit recorded for _reopen (not through _push, which keeps a sorted set)."""
    _room(edits, 3)
    edits.at[edits.n] = start
    edits.at[edits.n + 1] = end
    edits.at[edits.n + 2] = length
    edits.n += 3
    return 0


# ------------------------------------------------------- a round tallied ---
# What _fast/tally.tally_round counts with a dozen numpy calls and
# the store's lookup (store.FingerprintStore), in one pass of C: the round's
# shingles sorted once, each distinct one looked up in the store's tables
# where it lies, the windows' and results' counts and the new passages taken
# on the way. tally_round stays the definition (the pure path runs it);
# tests/core/novelty/test_novelty_compiled.py holds the two to each other.

from libc.stdlib cimport calloc

cdef uint64_t _FIB = 0x9E3779B97F4A7C15ULL


cdef struct Tab:
    const uint64_t* keys      # buckets of 8 slots, flat; 0: empty
    int shift
    const uint64_t* over      # sorted: the keys whose bucket was full
    Py_ssize_t n_over


cdef inline bint _tab_has(Tab* t, uint64_t q) noexcept nogil:
    """store._Table.contains for one key."""
    cdef const uint64_t* row = t.keys + <Py_ssize_t> ((q * _FIB) >> t.shift) * 8
    cdef int j
    for j in range(8):
        if row[j] == q:
            return 1
    return t.n_over and row[7] != 0 and _over_has(t, q)


cdef bint _over_has(Tab* t, uint64_t q) noexcept nogil:
    """Whether the keys of full buckets hold q (rare: out of _tab_has's inlined path)."""
    cdef Py_ssize_t lo = 0, hi = t.n_over, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if t.over[mid] < q:
            lo = mid + 1
        else:
            hi = mid
    return lo < t.n_over and t.over[lo] == q


cdef int _tab_open(Tab* t, object keys, object over, int shift) except -1:
    cdef const uint64_t[:, ::1] k = keys
    cdef const uint64_t[::1] o = over
    t.keys = &k[0, 0]
    t.shift = shift
    t.n_over = o.shape[0]
    t.over = &o[0] if t.n_over else NULL
    return 0


cdef const int64_t[::1] _ints(a):
    return np.ascontiguousarray(a, np.int64)


cdef struct HI:
    uint64_t h
    int64_t i


cdef extern from *:
    """
    #define IMPRINT_PREFETCH(p) __builtin_prefetch((const void*) (p))
    """
    void IMPRINT_PREFETCH(const void* p) nogil


cdef inline const uint64_t* _tab_row(Tab* t, uint64_t q) noexcept nogil:
    return t.keys + <Py_ssize_t> ((q * _FIB) >> t.shift) * 8


cdef int _radix_sort(HI* a, HI* tmp, Py_ssize_t m) except -1 nogil:
    """a sorted by h, stably (so equal h keep their order of i): LSD radix, a byte a pass. The eight
    bytes' counts are taken in one read of a (they do not depend on the order a pass leaves)."""
    cdef Py_ssize_t counts[8][256]
    cdef Py_ssize_t* count
    cdef Py_ssize_t i, c, total
    cdef int shift, byte
    cdef uint64_t h
    cdef HI* src = a
    cdef HI* dst = tmp
    cdef HI* sw
    memset(counts, 0, sizeof(counts))
    for i in range(m):
        h = a[i].h
        for byte in range(8):
            counts[byte][(h >> (8 * byte)) & 255] += 1
    for byte in range(8):
        shift = 8 * byte
        count = counts[byte]
        if count[(src[0].h >> shift) & 255] == m:      # every key has this byte alike: nothing to move
            continue
        total = 0
        for c in range(256):
            total, count[c] = total + count[c], total
        for i in range(m):
            c = (src[i].h >> shift) & 255
            dst[count[c]] = src[i]
            count[c] += 1
        sw = src
        src = dst
        dst = sw
    if src != a:
        memcpy(a, src, m * sizeof(HI))
    return 0


cdef int _sort_by_hash(HI* a, HI* tmp, Py_ssize_t m) except -1:
    """a sorted by h, stably, as _radix_sort sorts it, in about two passes: the keys spread into
    buckets by their top bits (hashes: about one a bucket), each bucket then sorted by insertion, or
    by _radix_sort where many keys share their top bits (small values: short shingles' hashes)."""
    cdef int bits = 1
    while bits < 16 and (<Py_ssize_t> 1 << (bits + 1)) <= m:
        bits += 1
    cdef Py_ssize_t nb = <Py_ssize_t> 1 << bits, i, j, b, lo, hi
    cdef int shift = 64 - bits
    cdef Py_ssize_t* start = <Py_ssize_t*> calloc(2 * nb + 1, sizeof(Py_ssize_t))
    cdef Py_ssize_t* at = start + nb + 1
    cdef HI x
    if start == NULL:
        raise MemoryError()
    for i in range(m):
        start[(a[i].h >> shift) + 1] += 1
    for b in range(nb):
        start[b + 1] += start[b]
        at[b] = start[b]
    for i in range(m):
        b = a[i].h >> shift
        tmp[at[b]] = a[i]
        at[b] += 1
    for b in range(nb):
        lo, hi = start[b], start[b + 1]
        if hi - lo > 32:
            _radix_sort(tmp + lo, a + lo, hi - lo)
            continue
        for i in range(lo + 1, hi):
            x = tmp[i]
            j = i
            while j > lo and tmp[j - 1].h > x.h:
                tmp[j] = tmp[j - 1]
                j -= 1
            tmp[j] = x
    memcpy(a, tmp, m * sizeof(HI))
    free(start)
    return 0


def lookup(q, tables):
    """FingerprintStore.lookup: (in_young, known) of the nonzero keys q.
    tables: (young keys, young overflow, young shift, old keys, old overflow, old shift, old count)."""
    cdef const uint64_t[::1] qs = q
    cdef Py_ssize_t n = qs.shape[0], i
    cdef Tab young, old
    _tab_open(&young, tables[0], tables[1], tables[2])
    _tab_open(&old, tables[3], tables[4], tables[5])
    cdef bint use_old = tables[6] > 0
    iy_arr = np.empty(n, np.bool_)
    kn_arr = np.empty(n, np.bool_)
    cdef uint8_t[::1] iy = iy_arr.view(np.uint8), kn = kn_arr.view(np.uint8)
    for i in range(n):
        iy[i] = _tab_has(&young, qs[i])
        kn[i] = iy[i] or (use_old and _tab_has(&old, qs[i]))
    return iy_arr, kn_arr


def insert(keys, fill, q):
    """store._Table.insert's placing (its growing is done before): each key
    into a free slot of its bucket; the keys whose bucket is full, returned."""
    cdef uint64_t[:, ::1] k = keys
    cdef int64_t[::1] f = fill
    cdef const uint64_t[::1] qs = q
    cdef Py_ssize_t n = qs.shape[0], i, b, n_full = 0
    cdef int shift = 64
    cdef Py_ssize_t nb = k.shape[0]
    while nb > 1:
        nb >>= 1
        shift -= 1
    full_arr = np.empty(n, np.uint64)
    cdef uint64_t[::1] full = full_arr
    for i in range(n):
        if i + 8 < n:                    # the bucket a few keys ahead fetched early: the tables outgrow the cache
            b = <Py_ssize_t> ((qs[i + 8] * _FIB) >> shift)
            IMPRINT_PREFETCH(&k[b, 0])
            IMPRINT_PREFETCH(&f[b])
        b = <Py_ssize_t> ((qs[i] * _FIB) >> shift)
        if f[b] < 8:
            k[b, f[b]] = qs[i]
            f[b] += 1
        else:
            full[n_full] = qs[i]
            n_full += 1
    return full_arr[:n_full]


def tally(shingles, counts, seen, owner, Py_ssize_t nv, tables, double threshold, lines, Py_ssize_t width):
    """_fast/tally.tally_round with the store's tables: (distinct,
    in_young, known, new, sizes, results) as its Tally holds them."""
    cdef const uint64_t[::1] sh = shingles
    cdef const int64_t[::1] cn = _ints(counts), ow = _ints(owner)
    cdef const uint8_t[::1] sn = np.ascontiguousarray(seen, np.bool_).view(np.uint8)
    cdef const int64_t[::1] ln
    cdef bint has_lines = lines is not None
    if has_lines:
        ln = _ints(lines)
    cdef Py_ssize_t n = cn.shape[0], w, i, j, m = 0, k, g, nd = 0, at
    cdef Tab young, old
    _tab_open(&young, tables[0], tables[1], tables[2])
    _tab_open(&old, tables[3], tables[4], tables[5])
    cdef bint use_old = tables[6] > 0
    cdef Py_ssize_t total = sh.shape[0]
    cdef HI* order = <HI*> malloc((total + 1) * sizeof(HI))
    cdef HI* tmp = <HI*> malloc((total + 1) * sizeof(HI))
    cdef int64_t* grp = <int64_t*> malloc((total + 1) * sizeof(int64_t))
    cdef int64_t* win = <int64_t*> malloc((total + 1) * sizeof(int64_t))     # the window of each kept shingle
    cdef int64_t* line = <int64_t*> malloc((total + 1) * sizeof(int64_t))
    cdef uint8_t* known_at = <uint8_t*> malloc(total + 1)
    cdef int64_t* last_w = <int64_t*> malloc((n + 1) * sizeof(int64_t))
    cdef int64_t* known_w = <int64_t*> malloc((n + 1) * sizeof(int64_t))
    cdef int64_t* last_r = <int64_t*> malloc((nv + 1) * sizeof(int64_t))
    cdef int64_t* per_r = <int64_t*> calloc(5 * (nv + 1), sizeof(int64_t))   # per result: Tally.results
    if order == NULL or win == NULL or line == NULL or known_at == NULL or last_w == NULL or known_w == NULL \
            or last_r == NULL or tmp == NULL or grp == NULL or per_r == NULL:
        free(order); free(win); free(line); free(known_at); free(last_w); free(known_w); free(last_r)
        free(tmp); free(grp); free(per_r)
        raise MemoryError()
    sizes_arr = np.zeros(n, np.intp)
    new_arr = np.zeros(n, np.bool_)
    cdef int64_t[::1] sizes = sizes_arr
    cdef uint8_t[::1] new = new_arr.view(np.uint8)
    cdef uint64_t h
    cdef bint kn, iy
    cdef Py_ssize_t seg_start, seg_unknown, run
    cdef uint64_t[::1] dv
    cdef uint8_t[::1] iyv, knv
    try:
        # The kept shingles (of windows not seen before), in the windows' order.
        at = 0
        for w in range(n):
            if sn[w]:
                at += cn[w]
                continue
            for j in range(cn[w]):
                order[m].h = sh[at]
                order[m].i = m
                win[m] = w
                if has_lines:
                    line[m] = ln[at]
                m += 1
                at += 1
        if m:
            _sort_by_hash(order, tmp, m)
        for w in range(n):
            last_w[w] = -1
            known_w[w] = 0
        for j in range(nv):
            last_r[j] = -1
        distinct_arr = np.empty(m, np.uint64)
        iy_arr = np.empty(m, np.bool_)
        kn_arr = np.empty(m, np.bool_)
        dv = distinct_arr
        iyv = iy_arr.view(np.uint8)
        knv = kn_arr.view(np.uint8)
        for k in range(m):                   # the distinct shingles, and the group of each
            if k == 0 or order[k].h != order[k - 1].h:
                dv[nd] = order[k].h
                nd += 1
            grp[k] = nd - 1
        for g in range(nd):                  # looked up, the tables' rows a few keys ahead fetched early
            if g + 8 < nd:
                IMPRINT_PREFETCH(_tab_row(&young, dv[g + 8]))
                if use_old:
                    IMPRINT_PREFETCH(_tab_row(&old, dv[g + 8]))
            iy = _tab_has(&young, dv[g])
            iyv[g] = iy
            knv[g] = iy or (use_old and _tab_has(&old, dv[g]))
        for k in range(m):
            g = grp[k]
            kn = knv[g]
            i = order[k].i
            known_at[i] = kn
            w = win[i]
            if last_w[w] != g:               # the shingle's first time in this window
                last_w[w] = g
                sizes[w] += 1
                if kn:
                    known_w[w] += 1
            j = ow[w]
            if last_r[j] != g:               # ... and in this result
                last_r[j] = g
                if not kn:
                    per_r[5 * j + 3] += 1
        for w in range(n):
            new[w] = known_w[w] < threshold * sizes[w]
        if has_lines and m:
            # New passages (_fast/tally.new_passages): a segment (one line's shingles in one
            # window) of two or more, none known; or 2 * width unknown shingles in a row in one.
            seg_start = 0
            seg_unknown = 0
            run = 0
            for i in range(m):
                if i == 0 or win[i] != win[i - 1] or line[i] != line[i - 1]:
                    seg_start = i
                    seg_unknown = 0
                    run = 0
                if not known_at[i]:
                    seg_unknown += 1
                    run += 1
                    if run >= 2 * width:
                        new[win[i]] = 1
                else:
                    run = 0
                if (i + 1 == m or win[i + 1] != win[i] or line[i + 1] != line[i]) \
                        and i - seg_start + 1 >= 2 and seg_unknown == i - seg_start + 1:
                    new[win[i]] = 1
        for w in range(n):                   # each result's windows, judged shingles, new windows, largest new
            j = 5 * ow[w]
            per_r[j] += 1
            per_r[j + 1] += cn[w]
            if new[w] and not sn[w]:
                per_r[j + 2] += 1
                if sizes[w] > per_r[j + 4]:
                    per_r[j + 4] = sizes[w]
        results = [(per_r[j], per_r[j + 1], per_r[j + 2], per_r[j + 3], per_r[j + 4]) for j in range(0, 5 * nv, 5)]
    finally:
        free(order); free(win); free(line); free(known_at); free(last_w); free(known_w); free(last_r)
        free(tmp); free(grp); free(per_r)
    return distinct_arr[:nd], iy_arr[:nd], kn_arr[:nd], new_arr, sizes_arr, results


def windows(first, size, unit, counts, offsets, sh_first, mixed, bint per_line):
    """What fingerprints.windows_of makes of _shingled's lines, nothing excluded, in one call:
    (win_unit, win_counts, win_open, fps) of the windows. Spans are the lines (per_line) or each
    unit's lines together; a long span is cut by `cut`; a window's fingerprint is its shingles'
    mixed sum (as np.add.reduceat sums it), 0 read as 1."""
    cdef const int64_t[::1] fl = _ints(first), sz = _ints(size), un = _ints(unit), cn = _ints(counts), of = _ints(offsets)
    cdef const uint64_t[::1] mx = np.ascontiguousarray(mixed, np.uint64)
    cdef Py_ssize_t n = fl.shape[0], total = mx.shape[0], k, s = -1, w, nw, end
    cdef bint long_span = False
    cdef uint64_t h
    sf_arr, ss_arr, wu_arr, wc_arr, wo_arr = (np.empty(n, np.int64) for _ in range(5))
    cdef int64_t[::1] sf = sf_arr, ss = ss_arr, wu = wu_arr, wc = wc_arr, wo = wo_arr
    for k in range(n):                       # the spans
        if per_line or k == 0 or un[k] != un[k - 1]:
            s += 1
            sf[s], ss[s], wu[s], wc[s], wo[s] = fl[k], sz[k], un[k], cn[k], of[k]
        else:
            ss[s] += sz[k]
            wc[s] += cn[k]
        long_span |= ss[s] > 2 * WINDOW_MIN
    s += 1
    win_unit, win_counts, win_open = wu_arr[:s], wc_arr[:s], wo_arr[:s]
    if long_span:
        got = cut(sf_arr[:s], ss_arr[:s], win_unit, win_counts, win_open, sh_first, mixed)
        if got is not None:
            win_unit, win_counts, win_open = got
    cdef const int64_t[::1] opens = np.ascontiguousarray(win_open, np.int64)
    nw = opens.shape[0]
    fps_arr = np.empty(nw, np.uint64)
    cdef uint64_t[::1] fps = fps_arr
    for w in range(nw):
        end = opens[w + 1] if w + 1 < nw else total
        h = mx[opens[w]]
        for k in range(opens[w] + 1, end):
            h += mx[k]
        fps[w] = h if h else 1
    return win_unit, win_counts, win_open, fps_arr


# -------------------------------------------------------------- ocr noise ---
OCR_NOISE_PATTERN = r"(?<![^\s\x00])(?:[^\w\s\x00<>]+|[^\W\d_ai])(?![^\s\x00])"
"""The pattern ocr_noise() is written for (normalization.MASKS' ocr_noise); a
table whose mask reads otherwise does not use it."""


cdef inline bint _gap(Py_UCS4 c) noexcept nogil:
    # What bounds a token: whitespace (re's \s) or a NUL.
    return c == 0 or Py_UNICODE_ISSPACE(c)


def ocr_noise(str text):
    """re.sub(OCR_NOISE_PATTERN, "", text) in one pass: the pattern matches
    only where a token (a run of characters bounded by whitespace, NULs or the
    ends; the lookbehind holds nowhere else) starts, and only the whole
    token (a shorter match would leave a token character where the lookahead
    needs a gap): a token of symbols only (no word character, no < or >), or
    one word character that is no decimal digit, "_", "a" or "i"."""
    cdef U u
    _open_u(&u, text)
    cdef Py_ssize_t p = 0, e, last = 0, n = u.n
    cdef Py_UCS4 c
    cdef bint symbols
    cdef list pieces = []
    while p < n:
        if _gap(CH(&u, p)):
            p += 1
            continue
        e = p
        symbols = True
        while e < n:
            c = CH(&u, e)
            if _gap(c):
                break
            if symbols and (c == 60 or c == 62 or W(&u, e)):
                symbols = False
            e += 1
        c = CH(&u, p)
        if symbols or (e == p + 1 and W(&u, p) and not DD(&u, p) and c != 95 and c != 97 and c != 105):
            pieces.append(text[last:p])
            last = e
        p = e
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def canonical_unit(str unit):
    """fingerprints._canonical_unit: the unit's lines (split at "\\n"), each
    its words (as str.split() gives them) joined by single spaces, the empty
    lines left out, joined by "\\n"; one pass over its UTF-8, as shingled()
    reads units."""
    cdef Py_ssize_t n, i = 0, olen = 0
    cdef const uint8_t* s = <const uint8_t*> PyUnicode_AsUTF8AndSize(unit, &n)
    cdef uint8_t* out = <uint8_t*> malloc(n + 1)
    cdef bint in_word = False, line_words = False, any_words = False
    cdef uint8_t c
    cdef int length
    if out == NULL:
        raise MemoryError()
    try:
        while i < n:
            c = s[i]
            if c < 0x80:
                if c == 10:
                    in_word = line_words = False
                    i += 1
                    continue
                if _ascii_space(c):
                    in_word = False
                    i += 1
                    continue
                length = 1
            elif _utf8_space(s, i, n, &length):
                in_word = False
                i += length
                continue
            if not in_word:               # a word starts: its separator first
                if line_words:
                    out[olen] = 32
                    olen += 1
                elif any_words:
                    out[olen] = 10
                    olen += 1
                line_words = in_word = any_words = True
            memcpy(out + olen, s + i, length)
            olen += length
            i += length
        return out[:olen].decode("utf-8")
    finally:
        free(out)


# ---------------------------------------------------------- a result's units ---
# segmentation.segment's units: a text's paragraphs (paragraphs, at the end), and
# the units of a text that is a JSON array (json_units), in one pass of C
# over its UTF-8: each str item decoded, each other item written as
# json.dumps(item, ensure_ascii=False, sort_keys=True) writes it, without
# building the parse. Where it could differ from json.loads and json.dumps it
# answers None and the Python path decides: text that is not JSON (json.loads
# fails), NaN, Infinity, a float too large for a double, an int of more than
# 640 digits (the least limit sys.set_int_max_str_digits allows), a lone
# surrogate, a duplicate key, nesting past JSON_MAX_DEPTH.

cdef extern from "Python.h":
    double PyOS_string_to_double(const char* s, char** endptr, void* overflow_exception) except? -1.0
    char* PyOS_double_to_string(double val, char format_code, int precision, int flags, int* ptype) except NULL
    void PyMem_Free(void* p)
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    object PyLong_FromString(const char* s, char** pend, int base)
    bint PyUnicode_IS_ASCII(object o)
    int Py_DTSF_ADD_DOT_0

from libc.math cimport isfinite
from libc.stdint cimport uint32_t
from libc.string cimport memchr, memcmp, strlen

cdef enum:
    JSON_MAX_DEPTH = 100   # far inside the recursion limit at which json.loads would raise
    JSON_INT_DIGITS = 640
    J_NONE, J_STR, J_INT, J_FLOAT, J_TRUE, J_FALSE   # the kind of the first leaf


cdef const char* _JHEX = b"0123456789abcdef"    # json's \u00xx is lower case


cdef uint8_t _JPLAIN[256]    # a byte a JSON string holds as itself: no quote, backslash or control
for _c in range(256):
    _JPLAIN[_c] = _c >= 32 and _c != 34 and _c != 92


cdef struct JBuf:
    char* b
    Py_ssize_t n
    Py_ssize_t cap


cdef int _jgrow(JBuf* v, Py_ssize_t more) except -1:
    cdef Py_ssize_t cap = max(2 * v.cap, v.n + more, 256)
    cdef char* b = <char*> realloc(v.b, cap)
    if b == NULL:
        raise MemoryError()
    v.b = b
    v.cap = cap
    return 0


cdef inline int _jput(JBuf* v, const char* s, Py_ssize_t k) except -1:
    if v.n + k > v.cap:
        _jgrow(v, k)
    memcpy(v.b + v.n, s, k)
    v.n += k
    return 0


cdef struct JMember:
    Py_ssize_t key          # its decoded key in JScan.keys
    Py_ssize_t key_len
    const char* key_at      # the same, once the object's keys are all read (keys no longer moves)
    Py_ssize_t start, end   # its `"key": value` in the output


cdef struct JScan:
    const uint8_t* s
    Py_ssize_t n, i
    int depth
    JBuf keys               # the decoded keys of the objects open
    JBuf tmp                # members reordered; a str item decoded; a number's text
    JBuf leaf               # the first leaf's decoded text (a str) or its text (a number)
    JMember* mem            # the members of the objects open
    Py_ssize_t nmem, capmem
    int leaf_kind           # the first leaf that is not null or "": J_NONE if none yet
    double leaf_float
    bint plain              # no leaf is a non-empty str
    bint hollow             # some array or object is empty


cdef inline void _jws(JScan* p) noexcept nogil:
    # JSON's whitespace only, as json.loads reads it.
    cdef uint8_t c
    while p.i < p.n:
        c = p.s[p.i]
        if c == 32 or c == 10 or c == 13 or c == 9:
            p.i += 1
        else:
            return


cdef inline uint32_t _jhex4(const uint8_t* s, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    # The four hex digits at s[i]; 0x110000 if they are not.
    cdef uint32_t v = 0
    cdef uint8_t c
    cdef Py_ssize_t k
    if i + 4 > n:
        return 0x110000
    for k in range(i, i + 4):
        c = s[k]
        if 48 <= c <= 57:
            v = v * 16 + (c - 48)
        elif 97 <= c <= 102:
            v = v * 16 + (c - 87)
        elif 65 <= c <= 70:
            v = v * 16 + (c - 55)
        else:
            return 0x110000
    return v


cdef int _jchar(JBuf* enc, JBuf* dec, uint32_t cp) except -1:
    # One decoded code point: its UTF-8 into dec, and into enc as json's encode_basestring
    # (ensure_ascii=False) writes it: \" \\ \n \r \t \b \f, another control as \u00xx, the rest raw.
    cdef char u[6]
    cdef int k
    if cp < 0x80:
        u[0] = <char> cp
        k = 1
    elif cp < 0x800:
        u[0] = <char> (0xC0 | (cp >> 6))
        u[1] = <char> (0x80 | (cp & 0x3F))
        k = 2
    elif cp < 0x10000:
        u[0] = <char> (0xE0 | (cp >> 12))
        u[1] = <char> (0x80 | ((cp >> 6) & 0x3F))
        u[2] = <char> (0x80 | (cp & 0x3F))
        k = 3
    else:
        u[0] = <char> (0xF0 | (cp >> 18))
        u[1] = <char> (0x80 | ((cp >> 12) & 0x3F))
        u[2] = <char> (0x80 | ((cp >> 6) & 0x3F))
        u[3] = <char> (0x80 | (cp & 0x3F))
        k = 4
    if dec != NULL:
        _jput(dec, u, k)
    if enc == NULL:
        return 0
    if cp == 34 or cp == 92:
        u[0] = 92
        u[1] = <char> cp
        return _jput(enc, u, 2)
    if cp >= 32:
        return _jput(enc, u, k)
    u[0] = 92
    if cp == 10 or cp == 13 or cp == 9 or cp == 8 or cp == 12:
        u[1] = <char> (110 if cp == 10 else 114 if cp == 13 else 116 if cp == 9 else 98 if cp == 8 else 102)
        return _jput(enc, u, 2)
    u[1] = 117
    u[2] = 48
    u[3] = 48
    u[4] = _JHEX[cp >> 4]
    u[5] = _JHEX[cp & 15]
    return _jput(enc, u, 6)


cdef int _jstr(JScan* p, JBuf* enc, JBuf* dec) except -1:
    # The string at p.i (its opening quote): quoted and escaped into enc, decoded into dec (either may
    # be NULL). 1: not a string json.loads reads, or one holding a lone surrogate.
    cdef const uint8_t* s = p.s
    cdef Py_ssize_t n = p.n, i = p.i + 1, run
    cdef uint8_t c
    cdef uint32_t cp, lo
    if enc != NULL:
        _jput(enc, b'"', 1)
    while True:
        run = i
        while i < n and _JPLAIN[s[i]]:     # itself, decoded and encoded
            i += 1
        if i >= n:
            return 1
        if i > run:
            if enc != NULL:
                _jput(enc, <const char*> s + run, i - run)
            if dec != NULL:
                _jput(dec, <const char*> s + run, i - run)
        c = s[i]
        if c == 34:
            break
        if c < 32 or i + 1 >= n:     # json.loads (strict) refuses a raw control character
            return 1
        c = s[i + 1]
        i += 2
        if c == 117:                 # \uXXXX, a surrogate pair as two
            cp = _jhex4(s, i, n)
            i += 4
            if 0xDC00 <= cp <= 0xDFFF or cp > 0xFFFF:
                return 1
            if 0xD800 <= cp <= 0xDBFF:
                if not (i + 1 < n and s[i] == 92 and s[i + 1] == 117):
                    return 1
                lo = _jhex4(s, i + 2, n)
                if not 0xDC00 <= lo <= 0xDFFF:
                    return 1
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                i += 6
        elif c == 34 or c == 92 or c == 47:
            cp = c
        elif c == 110:
            cp = 10
        elif c == 114:
            cp = 13
        elif c == 116:
            cp = 9
        elif c == 98:
            cp = 8
        elif c == 102:
            cp = 12
        else:
            return 1
        _jchar(enc, dec, cp)
    p.i = i + 1
    if enc != NULL:
        _jput(enc, b'"', 1)
    return 0


cdef inline bint _jdigit(JScan* p, Py_ssize_t i) noexcept nogil:
    return i < p.n and 48 <= p.s[i] <= 57


cdef Py_ssize_t _jshort_float(JScan* p, Py_ssize_t start, Py_ssize_t dot, Py_ssize_t end) noexcept nogil:
    # Where repr(float(text)) of a float written without an exponent is its text with the fraction's
    # trailing zeros dropped (one kept after the point), how much of the text that keeps; 0 where it
    # is not (float.__repr__ decides). It is where the text holds at most 15 significant digits and
    # repr writes no exponent (the value's decimal point, 0.DIGITS x 10**decpt, at -4 < decpt <= 16):
    # doubles keep 15 digits of such a number (DBL_DIG), so no other 15-digit decimal, and none
    # shorter, reads back as the same double, and repr gives the shortest that does.
    cdef Py_ssize_t last = end - 1, lead = 0, digits = dot - start - (p.s[start] == 45)
    while last > dot + 1 and p.s[last] == 48:
        last -= 1
    if digits == 1 and p.s[dot - 1] == 48:           # 0.xxx: the significant digits after the zeros
        while dot + 1 + lead <= last and p.s[dot + 1 + lead] == 48:
            lead += 1
        if dot + 1 + lead > last:
            return last + 1 - start                   # zero: "0.0" or "-0.0"
        if lead > 3 or last - dot - lead > 15:
            return 0
    elif digits + last - dot > 15:
        return 0
    return last + 1 - start


cdef int _jnumber(JScan* p, JBuf* out) except -1:
    # The number at p.i, as json.loads reads it (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?) and
    # json.dumps writes it: an int as its digits ("-0" as "0"), a float as repr(float(text)).
    cdef Py_ssize_t start = p.i, i = p.i, k, dot = -1, kept = 0
    cdef bint exp = False
    cdef char* end
    cdef char* r
    cdef double x
    if i < p.n and p.s[i] == 45:
        i += 1
    if not _jdigit(p, i):
        return 1                  # -Infinity, or no value
    i += 1
    if p.s[i - 1] != 48:
        while _jdigit(p, i):
            i += 1
    if i < p.n and p.s[i] == 46:
        if not _jdigit(p, i + 1):
            return 1
        dot = i
        i += 2
        while _jdigit(p, i):
            i += 1
    if i < p.n and (p.s[i] == 101 or p.s[i] == 69):
        k = i + 1
        if k < p.n and (p.s[k] == 43 or p.s[k] == 45):
            k += 1
        if not _jdigit(p, k):
            return 1
        exp = True
        i = k + 1
        while _jdigit(p, i):
            i += 1
    p.i = i
    if dot < 0 and not exp:
        if i - start - (p.s[start] == 45) > JSON_INT_DIGITS:
            return 1
        if i - start == 2 and p.s[start] == 45 and p.s[start + 1] == 48:
            _jput(out, b"0", 1)
        else:
            _jput(out, <const char*> p.s + start, i - start)
        if p.leaf_kind == J_NONE:
            p.leaf_kind = J_INT
            p.leaf.n = 0
            _jput(&p.leaf, <const char*> p.s + start, i - start)
            _jput(&p.leaf, b"\0", 1)
        return 0
    if not exp:
        kept = _jshort_float(p, start, dot, i)
    if kept and p.leaf_kind != J_NONE:
        return _jput(out, <const char*> p.s + start, kept)
    p.tmp.n = 0
    _jput(&p.tmp, <const char*> p.s + start, i - start)
    _jput(&p.tmp, b"\0", 1)
    x = PyOS_string_to_double(p.tmp.b, &end, NULL)
    if end != p.tmp.b + (i - start) or not isfinite(x):
        return 1                  # json.dumps writes an overflow as Infinity
    if p.leaf_kind == J_NONE:
        p.leaf_kind = J_FLOAT
        p.leaf_float = x
    if kept:
        return _jput(out, <const char*> p.s + start, kept)
    r = PyOS_double_to_string(x, 114, 0, Py_DTSF_ADD_DOT_0, NULL)   # float.__repr__
    try:
        _jput(out, r, strlen(r))
    finally:
        PyMem_Free(r)
    return 0


cdef inline bint _jlit(JScan* p, const char* word, Py_ssize_t k) noexcept nogil:
    return p.i + k <= p.n and memcmp(p.s + p.i, word, k) == 0


cdef int _jvalue(JScan* p, JBuf* out) except -1:
    cdef uint8_t c
    if p.i >= p.n:
        return 1
    c = p.s[p.i]
    if c == 34:
        if p.i + 1 < p.n and p.s[p.i + 1] == 34:
            _jput(out, b'""', 2)
            p.i += 2
            return 0
        p.plain = False
        if p.leaf_kind != J_NONE:
            return _jstr(p, out, NULL)
        p.leaf_kind = J_STR
        p.leaf.n = 0
        return _jstr(p, out, &p.leaf)
    if c == 91 or c == 123:
        return _jcontainer(p, out)
    if _jlit(p, b"null", 4):
        p.i += 4
        return _jput(out, b"null", 4)
    if _jlit(p, b"true", 4):
        p.i += 4
        if p.leaf_kind == J_NONE:
            p.leaf_kind = J_TRUE
        return _jput(out, b"true", 4)
    if _jlit(p, b"false", 5):
        p.i += 5
        if p.leaf_kind == J_NONE:
            p.leaf_kind = J_FALSE
        return _jput(out, b"false", 5)
    return _jnumber(p, out)


cdef int _jmember_cmp(const void* a, const void* b) noexcept nogil:
    # By key, code point by code point: UTF-8's byte order is the code points' order.
    cdef const JMember* x = <const JMember*> a
    cdef const JMember* y = <const JMember*> b
    cdef Py_ssize_t k = x.key_len if x.key_len < y.key_len else y.key_len
    cdef int c = memcmp(x.key_at, y.key_at, k)
    if c != 0:
        return c
    return (x.key_len > y.key_len) - (x.key_len < y.key_len)


cdef int _jsort_members(JScan* p, JBuf* out, Py_ssize_t base) except -1:
    # The object's members (mem[base:]) in key order, as sort_keys writes them; 1 on a duplicate key
    # (json.loads keeps the last value of one).
    cdef Py_ssize_t m, j, k = p.nmem - base, lo, hi
    cdef JMember* ms = p.mem + base
    cdef JMember held
    cdef bint ordered = True
    for m in range(k):
        ms[m].key_at = p.keys.b + ms[m].key
    for m in range(1, k):
        if _jmember_cmp(&ms[m - 1], &ms[m]) >= 0:
            ordered = False
            break
    if ordered:
        return 0
    lo, hi = ms[0].start, ms[k - 1].end
    if k > 16:
        qsort(ms, k, sizeof(JMember), _jmember_cmp)
    else:                        # an object of a few keys: insertion sort, without qsort's allocation
        for m in range(1, k):
            held = ms[m]
            j = m
            while j > 0 and _jmember_cmp(&ms[j - 1], &held) > 0:
                ms[j] = ms[j - 1]
                j -= 1
            ms[j] = held
    p.tmp.n = 0
    for m in range(k):
        if m:
            if _jmember_cmp(&ms[m - 1], &ms[m]) == 0:
                return 1
            _jput(&p.tmp, b", ", 2)
        _jput(&p.tmp, out.b + ms[m].start, ms[m].end - ms[m].start)
    memcpy(out.b + lo, p.tmp.b, hi - lo)
    return 0


cdef int _jcontainer(JScan* p, JBuf* out) except -1:
    # The array or object at p.i, written with ", " and ": " between, an object's keys sorted.
    cdef bint obj = p.s[p.i] == 123
    cdef uint8_t close = 125 if obj else 93
    cdef Py_ssize_t base = p.nmem, keys_base = p.keys.n, start, key = 0
    cdef int r
    cdef uint8_t c
    p.depth += 1
    if p.depth > JSON_MAX_DEPTH:
        return 1
    _jput(out, <const char*> p.s + p.i, 1)
    p.i += 1
    _jws(p)
    if p.i < p.n and p.s[p.i] == close:
        p.hollow = True
    else:
        while True:
            start = out.n
            if obj:
                if p.i >= p.n or p.s[p.i] != 34:
                    return 1
                key = p.keys.n
                r = _jstr(p, out, &p.keys)
                if r:
                    return r
                _jws(p)
                if p.i >= p.n or p.s[p.i] != 58:
                    return 1
                p.i += 1
                _jput(out, b": ", 2)
                _jws(p)
            r = _jvalue(p, out)
            if r:
                return r
            if obj:
                if p.nmem == p.capmem:
                    p.capmem = max(2 * p.capmem, 64)
                    p.mem = <JMember*> realloc(p.mem, p.capmem * sizeof(JMember))
                    if p.mem == NULL:
                        raise MemoryError()
                p.mem[p.nmem].key = key
                p.mem[p.nmem].key_len = p.keys.n - key
                p.mem[p.nmem].start = start
                p.mem[p.nmem].end = out.n
                p.nmem += 1
            _jws(p)
            if p.i >= p.n:
                return 1
            c = p.s[p.i]
            if c == close:
                break
            if c != 44:
                return 1
            p.i += 1
            _jput(out, b", ", 2)
            _jws(p)
        if obj:
            r = _jsort_members(p, out, base)
            if r:
                return r
            p.nmem = base
            p.keys.n = keys_base
    p.i += 1
    p.depth -= 1
    return _jput(out, <const char*> &close, 1)


cdef object _jleaf(JScan* p):
    if p.leaf_kind == J_STR:
        return PyUnicode_DecodeUTF8(p.leaf.b, p.leaf.n, NULL)
    if p.leaf_kind == J_INT:
        return PyLong_FromString(p.leaf.b, NULL, 10)
    if p.leaf_kind == J_FLOAT:
        return p.leaf_float
    if p.leaf_kind == J_NONE:
        return None
    return p.leaf_kind == J_TRUE


def json_units(str text):
    """segmentation.segment's units of `text` (stripped) read as a JSON array:
    each str item as it is, each other item as json.dumps(item,
    ensure_ascii=False, sort_keys=True) writes it; with what echo.evidence_free
    reads of the parse: (units, first, plain, hollow). first: the first leaf,
    in the text's order, that is not null or "" (a str, int, float or bool;
    None if there is none); plain: no leaf is a non-empty str; hollow: some
    array or object in it is empty. None where the Python path must decide
    (the section's comment says where)."""
    cdef bytes encoded
    cdef JScan p
    cdef JBuf out
    cdef list units = []
    cdef int r = 0
    cdef bint empty_str
    if PyUnicode_IS_ASCII(text):
        p.s = <const uint8_t*> PyUnicode_DATA(text)
        p.n = len(text)
    else:
        try:
            encoded = text.encode("utf-8")
        except UnicodeEncodeError:    # a lone surrogate
            return None
        p.s = <const uint8_t*> encoded
        p.n = len(encoded)
    if p.n < 2 or p.s[0] != 91:
        return None
    memset(&out, 0, sizeof(JBuf))
    memset(&p.keys, 0, sizeof(JBuf))
    memset(&p.tmp, 0, sizeof(JBuf))
    memset(&p.leaf, 0, sizeof(JBuf))
    p.mem = NULL
    p.nmem = p.capmem = 0
    p.depth = 1
    p.leaf_kind = J_NONE
    p.plain = True
    p.hollow = False
    p.i = 1
    try:
        _jws(&p)
        if p.i < p.n and p.s[p.i] == 93:
            p.hollow = True
        else:
            while True:
                if p.i < p.n and p.s[p.i] == 34:       # a str item: itself
                    empty_str = p.i + 1 < p.n and p.s[p.i + 1] == 34
                    out.n = 0
                    r = _jstr(&p, NULL, &out)
                    if r:
                        return None
                    units.append(PyUnicode_DecodeUTF8(out.b, out.n, NULL))
                    if not empty_str:
                        p.plain = False
                        if p.leaf_kind == J_NONE:
                            p.leaf_kind = J_STR
                            p.leaf.n = 0
                            _jput(&p.leaf, out.b, out.n)
                else:
                    out.n = 0
                    r = _jvalue(&p, &out)
                    if r:
                        return None
                    units.append(PyUnicode_DecodeUTF8(out.b, out.n, NULL))
                _jws(&p)
                if p.i >= p.n or (p.s[p.i] != 44 and p.s[p.i] != 93):
                    return None
                if p.s[p.i] == 93:
                    break
                p.i += 1
                _jws(&p)
        p.i += 1
        _jws(&p)
        if p.i != p.n:                 # more after the array: json.loads fails ("Extra data")
            return None
        return units, _jleaf(&p), p.plain, p.hollow
    finally:
        free(out.b)
        free(p.keys.b)
        free(p.tmp.b)
        free(p.leaf.b)
        free(p.mem)


def paragraphs(str text):
    """[p for p in re.split(r"\\n[ \\t]*\\n", text) if p.strip()] (segmentation's
    _PARAGRAPH_BREAK) in one pass: a break is a newline, spaces and tabs, a
    newline, the first such from where the last ended (the [ \\t]* can only
    run to its end: neither holds a newline)."""
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0, j, start = 0
    cdef const uint8_t* at
    cdef list out = []
    while True:
        if kind == 1:          # memchr finds the next newline in a one-byte text
            at = <const uint8_t*> memchr(<const uint8_t*> data + i, 10, n - i) if i < n else NULL
            i = at - <const uint8_t*> data if at != NULL else n
        else:
            while i < n and PyUnicode_READ(kind, data, i) != 10:
                i += 1
        if i >= n:
            break
        j = i + 1
        while j < n and (PyUnicode_READ(kind, data, j) == 32 or PyUnicode_READ(kind, data, j) == 9):
            j += 1
        if j < n and PyUnicode_READ(kind, data, j) == 10:
            _paragraph(out, text, kind, data, start, i)
            start = i = j + 1
        else:
            i += 1
    _paragraph(out, text, kind, data, start, n)
    return out


cdef int _paragraph(list out, str text, int kind, void* data, Py_ssize_t a, Py_ssize_t b) except -1:
    # text[a:b] onto out unless str.strip() leaves nothing of it.
    cdef Py_ssize_t k
    for k in range(a, b):
        if not Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, k)):
            out.append(text[a:b])
            return 0
    return 0
