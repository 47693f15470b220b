/*
 * apogee._native: optional C speed-ups for the byte-level hot paths.
 *
 * Every function here has a pure-Python reference in apogee (named in its docstring) that
 * gives the same bytes and the same answers; tests compare the two.  Python code reaches
 * these only through apogee.common.accel, which falls back to the reference when this module
 * is missing or APOGEE_NO_EXTENSIONS=1.
 *
 * Why C at all: a broker in pure Python spends ~10 us of interpreter time per message of a
 * client batch (decode the item, re-encode it as a record, CRC, tag hash, ConsumeQueue entry,
 * index hashes).  These functions do that work for a whole batch in one call.
 *
 * Rule for the batch functions: anything unusual (malformed input, a limit reached, a
 * property the fast path does not handle, invalid UTF-8) makes scan_batch answer None, and
 * the caller takes the pure-Python path, which produces the exact error response.  The fast
 * path never decides a rejection on its own.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#define RECORD_FIXED 88 /* TOTALSIZE .. BODYLENGTH of an IPv4 record */
#define MAGIC_CODE 0xDAA320A7u
#define MAX_PROPERTIES 32767
#define BATCH_HEAD 20
#define CQ_UNIT 20
#define INDEX_ENTRY_OUT 16 /* {uint32 hash; uint32 unused; int64 phys} native order */
#define INDEX_HEADER 40
#define INDEX_SLOT 4
#define INDEX_ENTRY 20
#define INT_MAX32 0x7FFFFFFF

/* ---- byte helpers ------------------------------------------------------------------------ */

static inline void be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}
static inline void be64(unsigned char *p, uint64_t v) {
    be32(p, (uint32_t)(v >> 32)); be32(p + 4, (uint32_t)v);
}
static inline void be16(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)(v >> 8); p[1] = (unsigned char)v;
}
static inline uint32_t rd32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline int16_t rd16(const unsigned char *p) {
    return (int16_t)(((uint16_t)p[0] << 8) | p[1]);
}

/* ---- UTF-8 and Java's String.hashCode ------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if invalid (overlong, surrogate, >U+10FFFF). */
static inline Py_ssize_t utf8_seq(const unsigned char *s, Py_ssize_t n, uint32_t *cp) {
    unsigned char c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    if (c < 0xC2) return 0;
    if (c < 0xE0) {
        if (n < 2 || (s[1] & 0xC0) != 0x80) return 0;
        *cp = ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (c < 0xF0) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        uint32_t v = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        if (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF)) return 0;
        *cp = v;
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        uint32_t v = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                     ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        if (v < 0x10000 || v > 0x10FFFF) return 0;
        *cp = v;
        return 4;
    }
    return 0;
}

/* 1 if s[0..n) is valid UTF-8 without NUL bytes. */
static int valid_text(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    uint32_t cp;
    while (i < n) {
        unsigned char c = s[i];
        if (c == 0) return 0;
        if (c < 0x80) { i++; continue; }
        Py_ssize_t k = utf8_seq(s + i, n - i, &cp);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

static inline uint32_t hash_unit(uint32_t h, uint32_t cp) {
    if (cp < 0x10000) return h * 31u + cp;
    cp -= 0x10000;
    h = h * 31u + (0xD800u + (cp >> 10));
    return h * 31u + (0xDC00u + (cp & 0x3FF));
}

/* Continue the unsigned hash h over valid UTF-8 text (UTF-16 code units, as Java). */
static uint32_t hash_utf8(uint32_t h, const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    uint32_t cp;
    while (i < n) {
        if (s[i] < 0x80) { h = h * 31u + s[i]; i++; continue; }
        Py_ssize_t k = utf8_seq(s + i, n - i, &cp);
        if (!k) { cp = 0xFFFD; k = 1; } /* not reached for validated text */
        h = hash_unit(h, cp);
        i += k;
    }
    return h;
}

static uint32_t hash_str(uint32_t h, PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++) h = hash_unit(h, PyUnicode_READ(kind, data, i));
    return h;
}

/* Java Math.abs((int) h) with Integer.MIN_VALUE mapped to 0 (RocketMQ IndexService). */
static inline uint32_t abs_hash(uint32_t h) {
    if (h & 0x80000000u) return h == 0x80000000u ? 0 : (uint32_t)(0x100000000ull - h);
    return h;
}

PyDoc_STRVAR(java_hash_doc,
"java_hash(s: str, prefix: int = 0) -> int\n\n"
"Unsigned String.hashCode of s, continuing from the unsigned hash of a prefix\n"
"(reference: apogee.common.java_hash.java_hash_unsigned / java_hash_concat).");

static PyObject *java_hash(PyObject *self, PyObject *args) {
    PyObject *s;
    unsigned long prefix = 0;
    if (!PyArg_ParseTuple(args, "U|k", &s, &prefix)) return NULL;
    return PyLong_FromUnsignedLong(hash_str((uint32_t)prefix, s));
}

PyDoc_STRVAR(index_hashes_doc,
"index_hashes(prefix: int, keys: list[str]) -> list[int]\n\n"
"IndexFile key hashes of prefix + key (reference: apogee.common.java_hash.index_hashes).");

static PyObject *index_hashes(PyObject *self, PyObject *args) {
    unsigned long prefix;
    PyObject *keys;
    if (!PyArg_ParseTuple(args, "kO", &prefix, &keys)) return NULL;
    PyObject *seq = PySequence_Fast(keys, "keys must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyList_New(n);
    if (!out) { Py_DECREF(seq); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyUnicode_Check(k)) {
            Py_DECREF(seq); Py_DECREF(out);
            PyErr_SetString(PyExc_TypeError, "keys must be str");
            return NULL;
        }
        PyObject *v = PyLong_FromUnsignedLong(abs_hash(hash_str((uint32_t)prefix, k)));
        if (!v) { Py_DECREF(seq); Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, i, v);
    }
    Py_DECREF(seq);
    return out;
}

/* ---- properties strings -------------------------------------------------------------------- */

/* Mirror of message_codec.get_property on raw bytes: -1 if the name is absent, else the value's
 * start; *vlen gets its length (0 = empty, which get_property reports as None). */
static Py_ssize_t find_property(const unsigned char *s, Py_ssize_t n, const char *name,
                                Py_ssize_t name_len, Py_ssize_t *vlen) {
    Py_ssize_t begin = -1;
    if (n >= name_len + 1 && memcmp(s, name, name_len) == 0 && s[name_len] == 0x01) {
        begin = name_len + 1;
    } else {
        const unsigned char *p = s, *end = s + n;
        while (p < end) {
            const unsigned char *sep = memchr(p, 0x02, end - p);
            if (!sep) break;
            if (end - (sep + 1) >= name_len + 1 && memcmp(sep + 1, name, name_len) == 0 &&
                sep[1 + name_len] == 0x01) {
                begin = (sep - s) + 1 + name_len + 1;
                break;
            }
            p = sep + 1;
        }
    }
    if (begin < 0) return -1;
    const unsigned char *stop = memchr(s + begin, 0x02, n - begin);
    *vlen = (stop ? (stop - s) : n) - begin;
    return begin;
}

/* A property of the joined string item + sep + batch, as get_property would see it. */
static const unsigned char *joined_property(const unsigned char *item, Py_ssize_t item_len,
                                            const unsigned char *batch, Py_ssize_t batch_len,
                                            const char *name, Py_ssize_t *vlen) {
    Py_ssize_t name_len = (Py_ssize_t)strlen(name);
    Py_ssize_t at = find_property(item, item_len, name, name_len, vlen);
    if (at >= 0) return *vlen ? item + at : NULL;
    at = find_property(batch, batch_len, name, name_len, vlen);
    if (at >= 0) return *vlen ? batch + at : NULL;
    *vlen = 0;
    return NULL;
}

/* Length of join_properties(item, batch). */
static inline Py_ssize_t joined_len(const unsigned char *item, Py_ssize_t item_len, Py_ssize_t batch_len) {
    if (!item_len) return batch_len;
    if (!batch_len) return item_len;
    if (item[item_len - 1] == 0x02) return item_len + batch_len;
    return item_len + 1 + batch_len;
}

/* ---- client batch body -> CommitLog records -------------------------------------------------- */

PyDoc_STRVAR(scan_batch_doc,
"scan_batch(body, batch_props: bytes, max_body: int) -> (count, size) | None\n\n"
"Check a client batch body for the fast path: well formed, every body 1..max_body bytes,\n"
"joined properties valid UTF-8 without NUL and at most 32767 bytes, no DELAY property.\n"
"size = sum of 88 + body + 2 + joined properties per item (the topic field not included).\n"
"None: take the pure-Python path (decode_batch and the broker's checks), which answers.");

static PyObject *scan_batch(PyObject *self, PyObject *args) {
    Py_buffer body, bprops;
    Py_ssize_t max_body;
    if (!PyArg_ParseTuple(args, "y*y*n", &body, &bprops, &max_body)) return NULL;
    const unsigned char *b = body.buf;
    Py_ssize_t end = body.len, pos = 0, count = 0, size = 0;
    int ok = end > 0;
    while (ok && pos < end) {
        if (end - pos < BATCH_HEAD + 2) { ok = 0; break; }
        int32_t item_size = (int32_t)rd32(b + pos);
        int32_t body_len = (int32_t)rd32(b + pos + 16);
        if (body_len <= 0 || body_len > max_body || body_len > end - pos - BATCH_HEAD - 2) { ok = 0; break; }
        Py_ssize_t p = pos + BATCH_HEAD + body_len;
        int16_t plen = rd16(b + p);
        p += 2;
        if (plen < 0 || plen > end - p || item_size != p + plen - pos) { ok = 0; break; }
        const unsigned char *props = b + p;
        Py_ssize_t vlen;
        if (!valid_text(props, plen)) { ok = 0; break; }
        if (find_property(props, plen, "DELAY", 5, &vlen) >= 0) { ok = 0; break; }
        Py_ssize_t jl = joined_len(props, plen, bprops.len);
        if (jl > MAX_PROPERTIES) { ok = 0; break; }
        size += RECORD_FIXED + body_len + 2 + jl;
        count++;
        pos = p + plen;
    }
    if (ok && (!valid_text(bprops.buf, bprops.len) ||
               find_property(bprops.buf, bprops.len, "DELAY", 5, &(Py_ssize_t){0}) >= 0))
        ok = 0;
    PyBuffer_Release(&body);
    PyBuffer_Release(&bprops);
    if (!ok) Py_RETURN_NONE;
    return Py_BuildValue("nn", count, size);
}

static const char HEX[] = "0123456789ABCDEF";

/* The fields every record of one append shares (a batch's records, or a single message). */
typedef struct {
    const unsigned char *topic;   /* the record's topic field: length byte + name */
    Py_ssize_t topic_len;
    int queue_id, sysflag, born_port, store_port, reconsume;
    long long born_ts, store_ts;
    const unsigned char *born_ip, *store_ip;  /* 4 bytes each */
} record_common;

/* Body, topic and properties (properties = a + [0x02 when a does not end with one] + b) at
 * out, then the fixed part last, so that a torn write never looks like a valid record. */
static void put_record(unsigned char *out, Py_ssize_t total, const record_common *rc,
                       const unsigned char *body, int32_t body_len, int32_t flag,
                       const unsigned char *a, Py_ssize_t alen, const unsigned char *b,
                       Py_ssize_t blen, int64_t qoff, int64_t phys) {
    unsigned char *w = out + RECORD_FIXED;
    memcpy(w, body, body_len); w += body_len;
    memcpy(w, rc->topic, rc->topic_len); w += rc->topic_len;
    be16(w, (uint16_t)joined_len(a, alen, blen)); w += 2;
    if (alen) { memcpy(w, a, alen); w += alen; }
    if (alen && blen && a[alen - 1] != 0x02) *w++ = 0x02;
    if (blen) memcpy(w, b, blen);
    uint32_t crc = (uint32_t)crc32(0L, body, (uInt)body_len) & 0x7FFFFFFFu;
    be32(out + 8, crc);
    be32(out + 12, (uint32_t)rc->queue_id);
    be32(out + 16, (uint32_t)flag);
    be64(out + 20, (uint64_t)qoff);
    be64(out + 28, (uint64_t)phys);
    be32(out + 36, (uint32_t)rc->sysflag);
    be64(out + 40, (uint64_t)rc->born_ts);
    memcpy(out + 48, rc->born_ip, 4);
    be32(out + 52, (uint32_t)rc->born_port);
    be64(out + 56, (uint64_t)rc->store_ts);
    memcpy(out + 64, rc->store_ip, 4);
    be32(out + 68, (uint32_t)rc->store_port);
    be32(out + 72, (uint32_t)rc->reconsume);
    be64(out + 76, 0);
    be32(out + 84, (uint32_t)body_len);
    be32(out + 4, MAGIC_CODE);
    be32(out, (uint32_t)total);
}

/* What the records of one append give the dispatcher and the producer: ConsumeQueue entries,
 * offset msg ids, index entries and the distinct tag codes. */
typedef struct {
    unsigned char *cqp;           /* next ConsumeQueue entry */
    unsigned char *idp;           /* next msg id character */
    unsigned char store_id[8];    /* store ip + port, the first half of an offset msg id */
    long long index_prefix;       /* < 0: no index entries */
    unsigned char *idx;
    Py_ssize_t idx_len, idx_cap;
    int64_t tag_seen[8];
    int ntags, many_tags, count;
} run_notes;

/* Note one written record whose properties text is props[0..plen).  -1 on memory error. */
static int note_record(run_notes *r, const unsigned char *props, Py_ssize_t plen, int64_t phys,
                       Py_ssize_t total) {
    /* tags code: Java hashCode of TAGS (signed, widened), 0 when absent or empty */
    Py_ssize_t vlen;
    const unsigned char *tv = joined_property(props, plen, NULL, 0, "TAGS", &vlen);
    int64_t tcode = tv ? (int64_t)(int32_t)hash_utf8(0, tv, vlen) : 0;
    be64(r->cqp, (uint64_t)phys); be32(r->cqp + 8, (uint32_t)total); be64(r->cqp + 12, (uint64_t)tcode);
    r->cqp += CQ_UNIT;
    if (!r->many_tags) {
        int k = 0;
        while (k < r->ntags && r->tag_seen[k] != tcode) k++;
        if (k == r->ntags) { if (r->ntags < 8) r->tag_seen[r->ntags++] = tcode; else r->many_tags = 1; }
    }
    /* offset msg id: store ip, port, phys in hex */
    if (r->count++) *r->idp++ = ',';
    unsigned char raw[16];
    memcpy(raw, r->store_id, 8);
    be64(raw + 8, (uint64_t)phys);
    for (int k = 0; k < 16; k++) { *r->idp++ = HEX[raw[k] >> 4]; *r->idp++ = HEX[raw[k] & 15]; }
    if (r->index_prefix < 0) return 0;
    /* index entries: UNIQ_KEY, then each non-empty space-separated KEYS token */
    const unsigned char *spans[2];
    Py_ssize_t lens[2];
    spans[0] = joined_property(props, plen, NULL, 0, "UNIQ_KEY", &lens[0]);
    spans[1] = joined_property(props, plen, NULL, 0, "KEYS", &lens[1]);
    for (int which = 0; which < 2; which++) {
        const unsigned char *s = spans[which];
        if (!s) continue;
        Py_ssize_t sl = lens[which], a = 0;
        while (a < sl) {
            Py_ssize_t z = a;
            if (which == 1) { while (z < sl && s[z] != ' ') z++; } else { z = sl; }
            if (z > a) {
                if (r->idx_len + INDEX_ENTRY_OUT > r->idx_cap) {
                    Py_ssize_t cap = r->idx_cap ? r->idx_cap * 2 : 64 * INDEX_ENTRY_OUT;
                    unsigned char *nb = PyMem_Realloc(r->idx, cap);
                    if (!nb) { PyErr_NoMemory(); return -1; }
                    r->idx = nb; r->idx_cap = cap;
                }
                uint32_t h = abs_hash(hash_utf8((uint32_t)r->index_prefix, s + a, z - a));
                uint32_t zero = 0;
                memcpy(r->idx + r->idx_len, &h, 4);
                memcpy(r->idx + r->idx_len + 4, &zero, 4);
                memcpy(r->idx + r->idx_len + 8, &phys, 8);
                r->idx_len += INDEX_ENTRY_OUT;
            }
            a = z + 1;
        }
    }
    return 0;
}

/* Start notes for n records: cq and ids are new objects the caller owns (NULL on error). */
static int notes_begin(run_notes *r, Py_ssize_t n, const record_common *rc, long long index_prefix,
                       PyObject **cq, PyObject **ids) {
    memset(r, 0, sizeof(*r));
    *cq = PyBytes_FromStringAndSize(NULL, n * CQ_UNIT);
    *ids = PyUnicode_New(n ? n * 33 - 1 : 0, 127);
    if (!*cq || !*ids) return -1;
    r->cqp = (unsigned char *)PyBytes_AS_STRING(*cq);
    r->idp = PyUnicode_1BYTE_DATA(*ids);
    memcpy(r->store_id, rc->store_ip, 4);
    be32(r->store_id + 4, (uint32_t)rc->store_port);
    r->index_prefix = index_prefix;
    return 0;
}

/* (cq, index, msg_ids, tags) of a finished run; consumes cq and ids, frees the notes. */
static PyObject *notes_end(run_notes *r, PyObject *cq, PyObject *ids) {
    PyObject *result = NULL, *idx = NULL, *tags = NULL;
    if (!cq || !ids) goto done;
    idx = PyBytes_FromStringAndSize((const char *)r->idx, r->idx_len);
    if (!idx) goto done;
    if (r->many_tags) {
        tags = Py_None; Py_INCREF(tags);
    } else {
        tags = PyTuple_New(r->ntags);
        if (!tags) goto done;
        for (int k = 0; k < r->ntags; k++) {
            PyObject *v = PyLong_FromLongLong(r->tag_seen[k]);
            if (!v) goto done;
            PyTuple_SET_ITEM(tags, k, v);
        }
    }
    result = PyTuple_Pack(4, cq, idx, ids, tags);
done:
    Py_XDECREF(cq); Py_XDECREF(idx); Py_XDECREF(ids); Py_XDECREF(tags);
    PyMem_Free(r->idx);
    r->idx = NULL;
    return result;
}

PyDoc_STRVAR(write_batch_doc,
"write_batch(buf, pos, body, batch_props, topic_field, queue_id, first_queue_offset,\n"
"            first_phys, sysflag, born_ts, born_ip, born_port, store_ts, store_ip, store_port,\n"
"            reconsume_times, index_prefix) -> (cq, index, msg_ids, tags)\n\n"
"Write the records of a batch that scan_batch accepted at buf[pos:], each exactly as\n"
"message_codec.write_record would (fixed part last).  Returns the ConsumeQueue entries\n"
"(20 bytes each, big-endian), the index entries (16 bytes each: native uint32 hash, 4 unused,\n"
"native int64 phys; UNIQ_KEY then each KEYS token, as IndexService.build; empty when\n"
"index_prefix < 0), the comma-joined offset msg ids, and the distinct tag codes (a tuple, or\n"
"None when there are more than 8).");

static PyObject *write_batch(PyObject *self, PyObject *args) {
    Py_buffer buf, body, bprops, topic, born_ip, store_ip;
    Py_ssize_t pos;
    int queue_id, sysflag, born_port, store_port, reconsume;
    long long first_qoff, first_phys, born_ts, store_ts, index_prefix;
    if (!PyArg_ParseTuple(args, "w*ny*y*y*iLLiLy*iLy*iiL", &buf, &pos, &body, &bprops, &topic,
                          &queue_id, &first_qoff, &first_phys, &sysflag, &born_ts, &born_ip,
                          &born_port, &store_ts, &store_ip, &store_port, &reconsume, &index_prefix))
        return NULL;
    PyObject *result = NULL, *cq = NULL, *ids = NULL;
    run_notes notes;
    memset(&notes, 0, sizeof(notes));
    record_common rc = {topic.buf, topic.len, queue_id, sysflag, born_port, store_port, reconsume,
                        born_ts, store_ts, born_ip.buf, store_ip.buf};
    if (born_ip.len != 4 || store_ip.len != 4) {
        PyErr_SetString(PyExc_ValueError, "born_ip and store_ip must be 4 bytes");
        goto done;
    }
    const unsigned char *b = body.buf;
    const unsigned char *bp = bprops.buf;
    Py_ssize_t bplen = bprops.len, end = body.len;
    /* Count items first (scan_batch has validated the body). */
    Py_ssize_t n = 0;
    for (Py_ssize_t p = 0; p < end; p += (int32_t)rd32(b + p)) n++;
    if (notes_begin(&notes, n, &rc, index_prefix, &cq, &ids) < 0) goto fail;
    unsigned char *out = (unsigned char *)buf.buf + pos;
    Py_ssize_t room = buf.len - pos;
    int64_t phys = first_phys, qoff = first_qoff;
    Py_ssize_t src = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t flag = (int32_t)rd32(b + src + 12);
        int32_t body_len = (int32_t)rd32(b + src + 16);
        const unsigned char *mbody = b + src + BATCH_HEAD;
        const unsigned char *props = mbody + body_len + 2;
        int16_t plen = rd16(mbody + body_len);
        Py_ssize_t jl = joined_len(props, plen, bplen);
        Py_ssize_t total = RECORD_FIXED + body_len + topic.len + 2 + jl;
        if (total > room) {
            PyErr_SetString(PyExc_ValueError, "the batch does not fit in the buffer");
            goto fail;
        }
        put_record(out, total, &rc, mbody, body_len, flag, props, plen, bp, bplen, qoff, phys);
        if (note_record(&notes, out + total - jl, jl, phys, total) < 0) goto fail;
        out += total;
        room -= total;
        phys += total;
        qoff++;
        src += (int32_t)rd32(b + src);
    }
    result = notes_end(&notes, cq, ids);
    cq = ids = NULL;
fail:
    Py_XDECREF(cq); Py_XDECREF(ids);
    PyMem_Free(notes.idx);
done:
    PyBuffer_Release(&buf); PyBuffer_Release(&body); PyBuffer_Release(&bprops);
    PyBuffer_Release(&topic); PyBuffer_Release(&born_ip); PyBuffer_Release(&store_ip);
    return result;
}

/* ---- a single SEND_MESSAGE(_V2) -> one CommitLog record -------------------------------------- */

#define MAX_PAIRS 64

/* The pairs of a properties text the broker would store unchanged, minus WAIT: -1 when the
 * text needs the pure path (malformed, empty name or value, duplicate, or a property the
 * broker rewrites), else the number of spans written to starts/lens. */
static int plain_pairs(const unsigned char *s, Py_ssize_t n, const unsigned char **starts,
                       Py_ssize_t *lens) {
    int count = 0, seen = 0;
    const unsigned char *names[MAX_PAIRS];
    Py_ssize_t name_lens[MAX_PAIRS];
    Py_ssize_t at = 0;
    if (!valid_text(s, n)) return -1;
    while (at < n) {
        const unsigned char *sep = memchr(s + at, 0x02, n - at);
        Py_ssize_t stop = sep ? sep - s : n;
        const unsigned char *pair = s + at;
        Py_ssize_t plen = stop - at;
        const unsigned char *eq = memchr(pair, 0x01, plen);
        if (!eq || eq == pair || eq == pair + plen - 1) return -1;  /* no name or no value */
        Py_ssize_t nl = eq - pair;
        if (seen == MAX_PAIRS) return -1;
        for (int k = 0; k < seen; k++)
            if (name_lens[k] == nl && memcmp(names[k], pair, nl) == 0) return -1;
        names[seen] = pair; name_lens[seen++] = nl;
#define IS(lit) (nl == (Py_ssize_t)sizeof(lit) - 1 && memcmp(pair, lit, nl) == 0)
        if (IS("DELAY") || IS("TRAN_MSG") || IS("CLUSTER")) return -1;
        if (!IS("WAIT")) { starts[count] = pair; lens[count++] = plen; }
#undef IS
        if (!sep) break;
        at = stop + 1;
        if (at == n) break;  /* one trailing separator is allowed (Java writes it) */
    }
    return count;
}

PyDoc_STRVAR(scan_single_doc,
"scan_single(props: str | bytes, extra: bytes) -> int | None\n\n"
"Length of the properties a single send is stored with: props without WAIT, then extra (the\n"
"broker's CLUSTER), joined as properties_to_string joins the broker's rewritten dict.  None\n"
"when the pure path must decide (SendProcessor.send): malformed or non-UTF-8 text, an empty\n"
"name or value, a duplicate name, DELAY, TRAN_MSG or CLUSTER, or over 32767 bytes.");

/* The stored length of props (text) joined with extra, or -1 to decline. */
static Py_ssize_t single_props_len(const unsigned char *props, Py_ssize_t n, Py_ssize_t extra_len) {
    const unsigned char *starts[MAX_PAIRS];
    Py_ssize_t lens[MAX_PAIRS];
    int k = plain_pairs(props, n, starts, lens);
    if (k < 0) return -1;
    Py_ssize_t size = extra_len;
    for (int i = 0; i < k; i++) size += lens[i] + 1;  /* each pair and the separator after it */
    if (k && !extra_len) size--;  /* no separator after the last pair */
    return size > MAX_PROPERTIES ? -1 : size;
}

/* UTF-8 of a str (NULL on surrogates, error cleared) or the bytes of a bytes object. */
static const char *text_bytes(PyObject *o, Py_ssize_t *n) {
    if (PyBytes_Check(o)) { *n = PyBytes_GET_SIZE(o); return PyBytes_AS_STRING(o); }
    if (PyUnicode_Check(o)) {
        const char *s = PyUnicode_AsUTF8AndSize(o, n);
        if (!s) PyErr_Clear();
        return s;
    }
    return NULL;
}

static PyObject *scan_single(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "scan_single(props: str | bytes, extra: bytes)");
        return NULL;
    }
    Py_ssize_t n;
    const char *props = text_bytes(args[0], &n);
    if (!props) Py_RETURN_NONE;
    Py_ssize_t size = single_props_len((const unsigned char *)props, n, PyBytes_GET_SIZE(args[1]));
    if (size < 0) Py_RETURN_NONE;
    return PyLong_FromSsize_t(size);
}

/* An int header field as Header.decode reads it, when it is plainly one: a JSON number or
 * ASCII [-]digits within [lo, hi].  0: decline (the full path judges it). */
static int field_int(PyObject *v, long long lo, long long hi, long long *out) {
    long long x;
    if (PyLong_CheckExact(v)) {
        int overflow;
        x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
    } else if (PyUnicode_Check(v) && PyUnicode_IS_ASCII(v)) {
        const unsigned char *s = PyUnicode_1BYTE_DATA(v);
        Py_ssize_t n = PyUnicode_GET_LENGTH(v), i = 0;
        int neg = n > 0 && s[0] == '-';
        i = neg;
        if (n - i < 1 || n - i > 18) return 0;
        x = 0;
        for (; i < n; i++) {
            if (s[i] < '0' || s[i] > '9') return 0;
            x = x * 10 + (s[i] - '0');
        }
        if (neg) x = -x;
    } else {
        return 0;
    }
    if (x < lo || x > hi) return 0;
    *out = x;
    return 1;
}

PyDoc_STRVAR(send_v2_fields_doc,
"send_v2_fields(ext: dict, extra: bytes, keys: tuple[str, ...]) -> tuple | None\n\n"
"The fields of a SEND_MESSAGE_V2 header (keys: the wire keys of topic, queueId, sysFlag,\n"
"bornTimestamp, flag, properties, reconsumeTimes and batch) for SendProcessor._send_plain:\n"
"(topic, queue_id, sys_flag, born_timestamp, flag, properties, reconsume_times, stored\n"
"properties length), read as SendMessageRequestHeaderV2.decode reads them and the\n"
"properties checked as scan_single checks them.  None when the full path must judge: a\n"
"missing, non-text or out-of-range field, a number that is not plain digits, a batch flag,\n"
"or properties scan_single declines.");

static PyObject *send_v2_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyDict_CheckExact(args[0]) || !PyBytes_Check(args[1]) || !PyTuple_CheckExact(args[2]) ||
        PyTuple_GET_SIZE(args[2]) != 8) {
        PyErr_SetString(PyExc_TypeError, "send_v2_fields(ext: dict, extra: bytes, keys: 8-tuple)");
        return NULL;
    }
    PyObject *ext = args[0], *keys = args[2], *v[8];
    for (int i = 0; i < 8; i++) {
        v[i] = PyDict_GetItemWithError(ext, PyTuple_GET_ITEM(keys, i));  /* borrowed */
        if (!v[i] && PyErr_Occurred()) return NULL;
    }
    if (v[7] || !v[0] || !PyUnicode_CheckExact(v[0]) || !v[1] || !v[2] || !v[3] || !v[4]) Py_RETURN_NONE;
    long long queue_id, sysflag, born, flag, reconsume = 0;
    if (!field_int(v[1], -2147483648LL, 2147483647LL, &queue_id) ||
        !field_int(v[2], -2147483648LL, 2147483647LL, &sysflag) ||
        !field_int(v[3], -(1LL << 62), 1LL << 62, &born) ||
        !field_int(v[4], -2147483648LL, 2147483647LL, &flag) ||
        (v[6] && !field_int(v[6], -2147483648LL, 2147483647LL, &reconsume)))
        Py_RETURN_NONE;
    PyObject *props = v[5];
    if (!props || props == Py_None) props = PyUnicode_New(0, 0); else Py_INCREF(props);
    if (!props) return NULL;
    if (!PyUnicode_CheckExact(props)) { Py_DECREF(props); Py_RETURN_NONE; }
    Py_ssize_t n;
    const char *text = text_bytes(props, &n);
    Py_ssize_t size = text ? single_props_len((const unsigned char *)text, n, PyBytes_GET_SIZE(args[1])) : -1;
    if (size < 0) { Py_DECREF(props); Py_RETURN_NONE; }
    PyObject *out = Py_BuildValue("OLLLLNLn", v[0], queue_id, sysflag, born, flag, props, reconsume, size);
    return out;
}

PyDoc_STRVAR(write_single_doc,
"write_single(buf, pos, body, props, extra, topic_field, queue_id, queue_offset, phys, sysflag,\n"
"             flag, born_ts, born_ip, born_port, store_ts, store_ip, store_port,\n"
"             reconsume_times, index_prefix) -> (cq, index, msg_id, tags)\n\n"
"Write one message that scan_single accepted at buf[pos:], exactly as CommitLog.put_message\n"
"writes the broker's rewritten message (properties: props without WAIT, then extra).  Returns\n"
"what write_batch returns for a batch of one.");

static PyObject *write_single(PyObject *self, PyObject *args) {
    Py_buffer buf, body, props, extra, topic, born_ip, store_ip;
    Py_ssize_t pos;
    int queue_id, sysflag, flag, born_port, store_port, reconsume;
    long long qoff, phys, born_ts, store_ts, index_prefix;
    if (!PyArg_ParseTuple(args, "w*ny*s*y*y*iLLiiLy*iLy*iiL", &buf, &pos, &body, &props, &extra,
                          &topic, &queue_id, &qoff, &phys, &sysflag, &flag, &born_ts, &born_ip,
                          &born_port, &store_ts, &store_ip, &store_port, &reconsume, &index_prefix))
        return NULL;
    PyObject *result = NULL, *cq = NULL, *ids = NULL;
    unsigned char *joined = NULL;
    run_notes notes;
    memset(&notes, 0, sizeof(notes));
    record_common rc = {topic.buf, topic.len, queue_id, sysflag, born_port, store_port, reconsume,
                        born_ts, store_ts, born_ip.buf, store_ip.buf};
    const unsigned char *starts[MAX_PAIRS];
    Py_ssize_t lens[MAX_PAIRS];
    int k = plain_pairs(props.buf, props.len, starts, lens);
    if (born_ip.len != 4 || store_ip.len != 4 || k < 0 || body.len <= 0 || body.len > INT_MAX32) {
        PyErr_SetString(PyExc_ValueError, "write_single needs what scan_single accepted and 4-byte ips");
        goto done;
    }
    /* the kept pairs, each followed by a separator: put_record then adds extra after them */
    Py_ssize_t kept = 0;
    for (int i = 0; i < k; i++) kept += lens[i] + 1;
    joined = PyMem_Malloc(kept ? kept : 1);
    if (!joined) { PyErr_NoMemory(); goto done; }
    Py_ssize_t w = 0;
    for (int i = 0; i < k; i++) { memcpy(joined + w, starts[i], lens[i]); w += lens[i]; joined[w++] = 0x02; }
    if (kept && !extra.len) kept--;  /* no trailing separator without extra */
    Py_ssize_t jl = joined_len(joined, kept, extra.len);
    Py_ssize_t total = RECORD_FIXED + body.len + topic.len + 2 + jl;
    if (jl > MAX_PROPERTIES || total > buf.len - pos) {
        PyErr_SetString(PyExc_ValueError, "the message does not fit in the buffer");
        goto done;
    }
    unsigned char *out = (unsigned char *)buf.buf + pos;
    put_record(out, total, &rc, body.buf, (int32_t)body.len, flag, joined, kept, extra.buf,
               extra.len, qoff, phys);
    if (notes_begin(&notes, 1, &rc, index_prefix, &cq, &ids) < 0) goto done;
    if (note_record(&notes, out + total - jl, jl, phys, total) < 0) goto done;
    result = notes_end(&notes, cq, ids);
    cq = ids = NULL;
done:
    Py_XDECREF(cq); Py_XDECREF(ids);
    PyMem_Free(notes.idx);
    PyMem_Free(joined);
    PyBuffer_Release(&buf); PyBuffer_Release(&body); PyBuffer_Release(&props); PyBuffer_Release(&extra);
    PyBuffer_Release(&topic); PyBuffer_Release(&born_ip); PyBuffer_Release(&store_ip);
    return result;
}

/* ---- IndexFile ----------------------------------------------------------------------------------- */

PyDoc_STRVAR(index_put_doc,
"index_put(buf, slots, index_num, header, store_ts, entries, start) -> (header, next)\n\n"
"Add index entries (write_batch's 16-byte layout) from entries[start:] to an IndexFile\n"
"mapping, message by message (consecutive entries with the same phys), exactly as\n"
"IndexFile.put_keys does for each, skipping messages IndexService.build would skip.\n"
"header = (begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count).  Stops before a\n"
"message that does not fit (IndexService.build's rule); next is where to resume.");

static PyObject *index_put(PyObject *self, PyObject *args) {
    Py_buffer buf, entries;
    long long slots, index_num, store_ts, begin_ts, end_ts, begin_phy, end_phy, slot_count, count;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "w*LL(LLLLLL)Ly*n", &buf, &slots, &index_num, &begin_ts, &end_ts,
                          &begin_phy, &end_phy, &slot_count, &count, &store_ts, &entries, &start))
        return NULL;
    unsigned char *mm = buf.buf;
    const unsigned char *e = entries.buf;
    Py_ssize_t n = entries.len / INDEX_ENTRY_OUT;
    Py_ssize_t i = start;
    long long base = INDEX_HEADER + slots * INDEX_SLOT;
    if (slots <= 0 || base + index_num * INDEX_ENTRY > buf.len) {
        PyBuffer_Release(&buf); PyBuffer_Release(&entries);
        PyErr_SetString(PyExc_ValueError, "index buffer too small for its slots and entries");
        return NULL;
    }
    while (i < n) {
        int64_t phys;
        memcpy(&phys, e + i * INDEX_ENTRY_OUT + 8, 8);
        Py_ssize_t j = i + 1;
        while (j < n) {
            int64_t other;
            memcpy(&other, e + j * INDEX_ENTRY_OUT + 8, 8);
            if (other != phys) break;
            j++;
        }
        Py_ssize_t keys = j - i;
        if (phys < end_phy || (phys == end_phy && (end_phy > 0 || count > 1))) { i = j; continue; }
        long long need = keys < index_num - 1 ? keys : index_num - 1;
        if (index_num - count < need) break; /* a new file first */
        long long fit = index_num - count;
        if (fit > keys) fit = keys;
        long long diff = 0;
        if (begin_ts > 0) {
            diff = (store_ts - begin_ts) / 1000;
            if (store_ts - begin_ts < 0 && (store_ts - begin_ts) % 1000) diff -= 1; /* floor */
            if (diff < 0) diff = 0;
            if (diff > INT_MAX32) diff = INT_MAX32;
        }
        if (count <= 1) { begin_phy = phys; begin_ts = store_ts; }
        long long first = count;
        /* Crash order (IndexFile.put_keys): header first, then each entry before its slot. */
        long long new_slots = slot_count;
        for (long long k = 0; k < fit; k++) { /* count new slots, as put_keys does */
            uint32_t h;
            memcpy(&h, e + (i + k) * INDEX_ENTRY_OUT, 4);
            long long abs_slot = INDEX_HEADER + (long long)(h % (uint64_t)slots) * INDEX_SLOT;
            int dup = 0;
            for (long long q = 0; q < k; q++) {
                uint32_t h2;
                memcpy(&h2, e + (i + q) * INDEX_ENTRY_OUT, 4);
                if (h2 % (uint64_t)slots == h % (uint64_t)slots) { dup = 1; break; }
            }
            if (dup) continue;
            int32_t prev = (int32_t)rd32(mm + abs_slot);
            if (prev <= 0 || prev > first) new_slots++;
        }
        count = first + fit;
        slot_count = new_slots;
        end_phy = phys;
        end_ts = store_ts;
        be64(mm, (uint64_t)begin_ts); be64(mm + 8, (uint64_t)end_ts);
        be64(mm + 16, (uint64_t)begin_phy); be64(mm + 24, (uint64_t)end_phy);
        be32(mm + 32, (uint32_t)slot_count); be32(mm + 36, (uint32_t)count);
        for (long long k = 0; k < fit; k++) {
            uint32_t h;
            memcpy(&h, e + (i + k) * INDEX_ENTRY_OUT, 4);
            long long abs_slot = INDEX_HEADER + (long long)(h % (uint64_t)slots) * INDEX_SLOT;
            int32_t prev = (int32_t)rd32(mm + abs_slot);
            int touched = 0; /* the slot already points at an earlier key of this message */
            for (long long q = 0; q < k; q++) {
                uint32_t h2;
                memcpy(&h2, e + (i + q) * INDEX_ENTRY_OUT, 4);
                if (h2 % (uint64_t)slots == h % (uint64_t)slots) { touched = 1; break; }
            }
            if (!touched && (prev <= 0 || prev > first)) prev = 0;
            unsigned char *ent = mm + base + (first + k) * INDEX_ENTRY;
            be32(ent, h);
            be64(ent + 4, (uint64_t)phys);
            be32(ent + 12, (uint32_t)diff);
            be32(ent + 16, (uint32_t)prev);
            be32(mm + abs_slot, (uint32_t)(first + k));
        }
        i = j;
    }
    PyBuffer_Release(&buf);
    PyBuffer_Release(&entries);
    return Py_BuildValue("(LLLLLL)n", begin_ts, end_ts, begin_phy, end_phy, slot_count, count, i);
}

/* ---- client side: batch body ------------------------------------------------------------------ */

/* One client batch item up to its properties: TOTALSIZE, MAGIC 0, BODYCRC 0, FLAG, BODYLEN, body,
 * PROPLEN.  Returns where the properties go. */
static unsigned char *put_batch_item_head(unsigned char *w, uint32_t flag, const char *body, Py_ssize_t blen,
                                          Py_ssize_t plen) {
    be32(w, (uint32_t)(BATCH_HEAD + blen + 2 + plen));
    be32(w + 4, 0); be32(w + 8, 0);
    be32(w + 12, flag);
    be32(w + 16, (uint32_t)blen);
    memcpy(w + BATCH_HEAD, body, blen);
    be16(w + BATCH_HEAD + blen, (uint16_t)plen);
    return w + BATCH_HEAD + blen + 2;
}

PyDoc_STRVAR(encode_batch_doc,
"encode_batch(items: list[tuple[int, bytes, str]]) -> bytes\n\n"
"The client batch body (reference: apogee.common.message_codec.encode_batch, for items whose\n"
"properties are already strings).  ValueError past 32767 property bytes.");

static PyObject *encode_batch(PyObject *self, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "items must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), total = 0;
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 3 || !PyBytes_Check(PyTuple_GET_ITEM(it, 1)) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(it, 2))) {
            PyErr_SetString(PyExc_TypeError, "items must be (flag: int, body: bytes, properties: str)");
            goto done;
        }
        Py_ssize_t plen;
        if (!PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(it, 2), &plen)) goto done;
        if (plen > MAX_PROPERTIES) {
            PyErr_SetString(PyExc_ValueError, "batch item properties longer than 32767 bytes");
            goto done;
        }
        total += BATCH_HEAD + PyBytes_GET_SIZE(PyTuple_GET_ITEM(it, 1)) + 2 + plen;
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (!result) goto done;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        long flag = PyLong_AsLong(PyTuple_GET_ITEM(it, 0));
        if (flag == -1 && PyErr_Occurred()) { Py_CLEAR(result); goto done; }
        PyObject *bo = PyTuple_GET_ITEM(it, 1);
        Py_ssize_t blen = PyBytes_GET_SIZE(bo), plen;
        const char *pu = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(it, 2), &plen);
        w = put_batch_item_head(w, (uint32_t)flag, PyBytes_AS_STRING(bo), blen, plen);
        memcpy(w, pu, plen);
        w += plen;
    }
done:
    Py_DECREF(seq);
    return result;
}

/* ---- client side: PULL body -> MessageExt ------------------------------------------------------ */

/* MessageExt is a slotted dataclass; its fields are written straight into the slots (the
 * dataclass __init__ only assigns them), in the order of its positional __init__. */
static const char *EXT_FIELDS[] = {
    "topic", "body", "flag", "properties", "queue_id", "store_size", "queue_offset", "sys_flag",
    "born_timestamp", "born_host", "store_timestamp", "store_host", "msg_id", "offset_msg_id",
    "commit_log_offset", "body_crc", "reconsume_times", "prepared_transaction_offset",
};
#define N_EXT_FIELDS 18
static PyTypeObject *ext_type = NULL;
static Py_ssize_t ext_offsets[N_EXT_FIELDS];

static int bind_ext_type(PyObject *cls) {
    if ((PyObject *)ext_type == cls) return 0;
    if (!PyType_Check(cls)) { PyErr_SetString(PyExc_TypeError, "cls must be a type"); return -1; }
    for (int i = 0; i < N_EXT_FIELDS; i++) {
        PyObject *d = PyObject_GetAttrString(cls, EXT_FIELDS[i]);
        if (!d) return -1;
        if (Py_TYPE(d) != &PyMemberDescr_Type || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            Py_DECREF(d);
            PyErr_Format(PyExc_TypeError, "%s is not a slot", EXT_FIELDS[i]);
            return -1;
        }
        ext_offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
    }
    Py_XDECREF(ext_type);
    Py_INCREF(cls);
    ext_type = (PyTypeObject *)cls;
    return 0;
}

static PyObject *ip_text(const unsigned char *ip) {
    return PyUnicode_FromFormat("%u.%u.%u.%u", ip[0], ip[1], ip[2], ip[3]);
}

#define NAME_CACHE 16

PyDoc_STRVAR(decode_records_doc,
"decode_records(buf: bytes, pos: int, cls: type) -> (list, stop)\n\n"
"Decode the records of a PULL body from pos into cls (MessageExt) objects, exactly as\n"
"message_codec.decode_records_fast does, until the end, a blank or malformed record, or a\n"
"record the C path leaves to Python (IPv6 hosts, a compressed body, text that is not valid\n"
"UTF-8); stop is that record's position.");

static PyObject *decode_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    PyObject *cls;
    if (!PyArg_ParseTuple(args, "y*nO", &view, &pos, &cls)) return NULL;
    if (bind_ext_type(cls) < 0) { PyBuffer_Release(&view); return NULL; }
    const unsigned char *b = view.buf;
    Py_ssize_t end = view.len;
    PyObject *out = PyList_New(0);
    PyObject *topic = NULL, *born = NULL, *store = NULL, *uniq_name = NULL;
    unsigned char last_topic[256], last_born[8], last_store[8];
    Py_ssize_t last_topic_len = -1;
    int have_born = 0, have_store = 0;
    PyObject *names[NAME_CACHE];
    Py_ssize_t nnames = 0;
    PyObject *vals[N_EXT_FIELDS];
    if (!out) goto fail;
    uniq_name = PyUnicode_FromString("UNIQ_KEY");
    if (!uniq_name) goto fail;
    while (pos + 8 <= end) {
        const unsigned char *r = b + pos;
        int32_t total = (int32_t)rd32(r);
        uint32_t magic = rd32(r + 4);
        if (magic != MAGIC_CODE || total < RECORD_FIXED + 3 || total > end - pos) break;
        int32_t sysflag = (int32_t)rd32(r + 36);
        if (sysflag & (0x10 | 0x20 | 0x1)) break; /* IPv6 hosts or compressed: Python */
        int32_t body_len = (int32_t)rd32(r + 84);
        if (body_len < 0 || body_len > total - RECORD_FIXED - 3) break;
        const unsigned char *t = r + RECORD_FIXED + body_len;
        int tlen = t[0];
        if (tlen > 127 || RECORD_FIXED + body_len + 1 + tlen + 2 > total) break;
        const unsigned char *pp = t + 1 + tlen;
        int plen = (pp[0] << 8) | pp[1];
        if (RECORD_FIXED + body_len + 1 + tlen + 2 + plen != total) break;
        const unsigned char *props = pp + 2;
        if (!valid_text(props, plen) || !valid_text(t + 1, tlen)) break;
        /* topic, hosts: reused while they repeat */
        if (tlen != last_topic_len || memcmp(last_topic, t + 1, tlen) != 0) {
            PyObject *nt = PyUnicode_DecodeUTF8((const char *)t + 1, tlen, NULL);
            if (!nt) goto fail;
            Py_XSETREF(topic, nt);
            memcpy(last_topic, t + 1, tlen);
            last_topic_len = tlen;
        }
        if (!have_born || memcmp(last_born, r + 48, 8) != 0) {
            PyObject *ip = ip_text(r + 48);
            if (!ip) goto fail;
            PyObject *nb = Py_BuildValue("(Ni)", ip, (int32_t)rd32(r + 52));
            if (!nb) goto fail;
            Py_XSETREF(born, nb);
            memcpy(last_born, r + 48, 8);
            have_born = 1;
        }
        if (!have_store || memcmp(last_store, r + 64, 8) != 0) {
            PyObject *ip = ip_text(r + 64);
            if (!ip) goto fail;
            PyObject *ns = Py_BuildValue("(Ni)", ip, (int32_t)rd32(r + 68));
            if (!ns) goto fail;
            Py_XSETREF(store, ns);
            memcpy(last_store, r + 64, 8);
            have_store = 1;
        }
        /* properties: split at 0x02, name/value at the first 0x01, empty ones dropped */
        PyObject *pd = PyDict_New();
        if (!pd) goto fail;
        Py_ssize_t a = 0;
        while (a <= plen && plen) {
            const unsigned char *sep = memchr(props + a, 0x02, plen - a);
            Py_ssize_t z = sep ? sep - props : plen;
            const unsigned char *one = memchr(props + a, 0x01, z - a);
            if (one) {
                Py_ssize_t nl = one - (props + a), vl = z - (one - props) - 1;
                if (nl > 0 && vl > 0) {
                    PyObject *name = NULL;
                    for (Py_ssize_t k = 0; k < nnames; k++) {
                        if (PyUnicode_GET_LENGTH(names[k]) == nl && PyUnicode_KIND(names[k]) == PyUnicode_1BYTE_KIND &&
                            memcmp(PyUnicode_DATA(names[k]), props + a, nl) == 0) { name = names[k]; Py_INCREF(name); break; }
                    }
                    if (!name) {
                        name = PyUnicode_DecodeUTF8((const char *)props + a, nl, NULL);
                        if (!name) { Py_DECREF(pd); goto fail; }
                        if (nnames < NAME_CACHE && PyUnicode_IS_ASCII(name)) {
                            PyUnicode_InternInPlace(&name);
                            Py_INCREF(name);
                            names[nnames++] = name;
                        }
                    }
                    PyObject *value = PyUnicode_DecodeUTF8((const char *)one + 1, vl, NULL);
                    if (!value || PyDict_SetItem(pd, name, value) < 0) {
                        Py_XDECREF(value); Py_DECREF(name); Py_DECREF(pd); goto fail;
                    }
                    Py_DECREF(value);
                    Py_DECREF(name);
                }
            }
            if (!sep) break;
            a = z + 1;
        }
        /* Only str keys and values: the collector need not track this dict (CPython untracks
         * such dicts itself at the next collection, and a dict re-tracks itself when a
         * container is stored in it).  Halves the tracked allocations per message. */
        PyObject_GC_UnTrack(pd);
        /* offset msg id: store host (8 bytes) + physical offset, hex */
        PyObject *oid = PyUnicode_New(32, 127);
        if (!oid) { Py_DECREF(pd); goto fail; }
        unsigned char *o = PyUnicode_1BYTE_DATA(oid);
        for (int k = 0; k < 8; k++) { *o++ = HEX[r[64 + k] >> 4]; *o++ = HEX[r[64 + k] & 15]; }
        for (int k = 0; k < 8; k++) { *o++ = HEX[r[28 + k] >> 4]; *o++ = HEX[r[28 + k] & 15]; }
        PyObject *mid = PyDict_GetItemWithError(pd, uniq_name);
        if (!mid && PyErr_Occurred()) { Py_DECREF(pd); Py_DECREF(oid); goto fail; }
        if (!mid || PyUnicode_GET_LENGTH(mid) == 0) mid = oid;
        Py_INCREF(mid);
        vals[0] = topic; Py_INCREF(topic);
        vals[1] = PyBytes_FromStringAndSize((const char *)r + RECORD_FIXED, body_len);
        vals[2] = PyLong_FromLong((int32_t)rd32(r + 16));
        vals[3] = pd;
        vals[4] = PyLong_FromLong((int32_t)rd32(r + 12));
        vals[5] = PyLong_FromLong(total);
        vals[6] = PyLong_FromLongLong((int64_t)(((uint64_t)rd32(r + 20) << 32) | rd32(r + 24)));
        vals[7] = PyLong_FromLong(sysflag);
        vals[8] = PyLong_FromLongLong((int64_t)(((uint64_t)rd32(r + 40) << 32) | rd32(r + 44)));
        vals[9] = born; Py_INCREF(born);
        vals[10] = PyLong_FromLongLong((int64_t)(((uint64_t)rd32(r + 56) << 32) | rd32(r + 60)));
        vals[11] = store; Py_INCREF(store);
        vals[12] = mid;
        vals[13] = oid;
        vals[14] = PyLong_FromLongLong((int64_t)(((uint64_t)rd32(r + 28) << 32) | rd32(r + 32)));
        vals[15] = PyLong_FromLong((int32_t)rd32(r + 8));
        vals[16] = PyLong_FromLong((int32_t)rd32(r + 72));
        vals[17] = PyLong_FromLongLong((int64_t)(((uint64_t)rd32(r + 76) << 32) | rd32(r + 80)));
        int bad = 0;
        for (int k = 0; k < N_EXT_FIELDS; k++) if (!vals[k]) bad = 1;
        PyObject *obj = bad ? NULL : ext_type->tp_alloc(ext_type, 0);
        if (!obj) {
            for (int k = 0; k < N_EXT_FIELDS; k++) Py_XDECREF(vals[k]);
            goto fail;
        }
        for (int k = 0; k < N_EXT_FIELDS; k++) *(PyObject **)((char *)obj + ext_offsets[k]) = vals[k];
        int rc = PyList_Append(out, obj);
        Py_DECREF(obj);
        if (rc < 0) goto fail;
        pos += total;
    }
    for (Py_ssize_t k = 0; k < nnames; k++) Py_DECREF(names[k]);
    Py_XDECREF(topic); Py_XDECREF(born); Py_XDECREF(store); Py_XDECREF(uniq_name);
    PyBuffer_Release(&view);
    return Py_BuildValue("Nn", out, pos);
fail:
    for (Py_ssize_t k = 0; k < nnames; k++) Py_DECREF(names[k]);
    Py_XDECREF(topic); Py_XDECREF(born); Py_XDECREF(store); Py_XDECREF(uniq_name);
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

/* ---- client side: properties string and UNIQ_KEY ---------------------------------------------- */

PyDoc_STRVAR(properties_to_string_doc,
"properties_to_string(props: dict[str, str], strict: bool = False) -> str | None\n\n"
"name\\x01value joined by \\x02, None values skipped (reference:\n"
"message_codec.properties_to_string).  TypeError for a key or value that is not str; with\n"
"strict, None instead for any of that, an empty name or a \\x01/\\x02 inside (what\n"
"producer.validate_message refuses).");

static int has_separator(PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_KIND(s) == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = PyUnicode_1BYTE_DATA(s);
        for (Py_ssize_t i = 0; i < n; i++) if (p[i] == 1 || p[i] == 2) return 1;
        return 0;
    }
    return PyUnicode_FindChar(s, 1, 0, n, 1) >= 0 || PyUnicode_FindChar(s, 2, 0, n, 1) >= 0;
}

static PyObject *properties_to_string(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    /* METH_FASTCALL: called once per message sent. */
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "properties_to_string(props, strict=False)");
        return NULL;
    }
    PyObject *d = args[0];
    int strict = nargs == 2 ? PyObject_IsTrue(args[1]) : 0;
    if (strict < 0) return NULL;
    if (!PyDict_CheckExact(d)) { PyErr_SetString(PyExc_TypeError, "a dict is required"); return NULL; }
    PyObject *k, *v;
    Py_ssize_t it = 0, len = 0, n = 0;
    Py_UCS4 maxchar = 127;
    while (PyDict_Next(d, &it, &k, &v)) {
        if (v == Py_None && !strict) continue;
        if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v)) {
            if (strict) Py_RETURN_NONE;
            PyErr_SetString(PyExc_TypeError, "property names and values must be str");
            return NULL;
        }
        if (strict && (PyUnicode_GET_LENGTH(k) == 0 || has_separator(k) || has_separator(v))) Py_RETURN_NONE;
        len += PyUnicode_GET_LENGTH(k) + 1 + PyUnicode_GET_LENGTH(v);
        Py_UCS4 mk = PyUnicode_MAX_CHAR_VALUE(k), mv = PyUnicode_MAX_CHAR_VALUE(v);
        if (mk > maxchar) maxchar = mk;
        if (mv > maxchar) maxchar = mv;
        n++;
    }
    if (n) len += n - 1;
    PyObject *out = PyUnicode_New(len, maxchar);
    if (!out) return NULL;
    Py_ssize_t at = 0, i = 0;
    it = 0;
    while (PyDict_Next(d, &it, &k, &v)) {
        if (v == Py_None) continue;
        if (i++) PyUnicode_WRITE(PyUnicode_KIND(out), PyUnicode_DATA(out), at++, 0x02);
        if (PyUnicode_CopyCharacters(out, at, k, 0, PyUnicode_GET_LENGTH(k)) < 0) { Py_DECREF(out); return NULL; }
        at += PyUnicode_GET_LENGTH(k);
        PyUnicode_WRITE(PyUnicode_KIND(out), PyUnicode_DATA(out), at++, 0x01);
        if (PyUnicode_CopyCharacters(out, at, v, 0, PyUnicode_GET_LENGTH(v)) < 0) { Py_DECREF(out); return NULL; }
        at += PyUnicode_GET_LENGTH(v);
    }
    return out;
}

/* prefix + %08X (now - start) + %04X (seq & 0xFFFF); NULL without an error once now >= next_start. */
static PyObject *make_uniq(PyObject *prefix, long long start, long long next_start, unsigned long long seq) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    if (now >= next_start) return NULL;
    Py_ssize_t pl = PyUnicode_GET_LENGTH(prefix);
    PyObject *out = PyUnicode_New(pl + 12, 127);
    if (!out) return NULL;
    unsigned char *w = PyUnicode_1BYTE_DATA(out);
    memcpy(w, PyUnicode_1BYTE_DATA(prefix), pl);
    w += pl;
    uint32_t m = (uint32_t)(now - start);
    for (int k = 7; k >= 0; k--) { w[k] = HEX[m & 15]; m >>= 4; }
    uint32_t q = (uint32_t)seq & 0xFFFF;
    for (int k = 11; k >= 8; k--) { w[k] = HEX[q & 15]; q >>= 4; }
    return out;
}

PyDoc_STRVAR(uniq_id_now_doc,
"uniq_id_now(prefix: str, start_ms: int, next_start_ms: int, seq: int) -> str | None\n\n"
"prefix + %08X of (now_ms - start_ms) + %04X of seq (low 16 bits), now_ms read from the wall\n"
"clock here (reference: message_id.UniqIdGenerator.next_id); None once\n"
"now_ms >= next_start_ms (the month rolled over: the caller recomputes its start).");

static PyObject *uniq_id_now(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    /* METH_FASTCALL: called once per message sent. */
    if (nargs != 4 || !PyUnicode_Check(args[0]) || !PyUnicode_IS_ASCII(args[0])) {
        PyErr_SetString(PyExc_TypeError, "uniq_id_now(prefix: str (ASCII), start_ms, next_start_ms, seq)");
        return NULL;
    }
    long long start = PyLong_AsLongLong(args[1]);
    long long next_start = PyLong_AsLongLong(args[2]);
    unsigned long long seq = PyLong_AsUnsignedLongLongMask(args[3]);
    if (PyErr_Occurred()) return NULL;
    PyObject *out = make_uniq(args[0], start, next_start, seq);
    if (!out && !PyErr_Occurred()) Py_RETURN_NONE;
    return out;
}

/* ---- client side: the auto-batching producer's per-message work ------------------------------ */

PyDoc_STRVAR(batch_append_doc,
"batch_append(buf: bytearray, flag: int, body: bytes, props: dict, prefix: str, start_ms: int,\n"
"             next_start_ms: int, seq: int) -> str | None\n\n"
"Give the message a UNIQ_KEY when props has none (a new id as uniq_id_now makes it, stored in\n"
"props), then append its batch item (encode_batch's layout) to buf; returns the UNIQ_KEY.\n"
"None, with buf unchanged, for anything the producer's checked path must decide: a property\n"
"strict properties_to_string refuses, properties over 32767 UTF-8 bytes, or the month rolled\n"
"over (reference: Producer._append_py).");

static PyObject *UNIQ_KEY_NAME = NULL;

static PyObject *batch_append(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    /* METH_FASTCALL: called once per message given to send_async. */
    if (nargs != 8 || !PyByteArray_CheckExact(args[0]) || !PyBytes_CheckExact(args[2]) ||
        !PyDict_CheckExact(args[3]) || !PyUnicode_Check(args[4]) || !PyUnicode_IS_ASCII(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "batch_append(buf: bytearray, flag: int, body: bytes, props: dict, prefix: str (ASCII), "
                        "start_ms, next_start_ms, seq)");
        return NULL;
    }
    PyObject *buf = args[0], *body = args[2], *props = args[3];
    long flag = PyLong_AsLong(args[1]);
    long long start = PyLong_AsLongLong(args[5]);
    long long next_start = PyLong_AsLongLong(args[6]);
    unsigned long long seq = PyLong_AsUnsignedLongLongMask(args[7]);
    if (PyErr_Occurred()) return NULL;
    if (!UNIQ_KEY_NAME && !(UNIQ_KEY_NAME = PyUnicode_InternFromString("UNIQ_KEY"))) return NULL;

    PyObject *uniq = PyDict_GetItemWithError(props, UNIQ_KEY_NAME); /* borrowed */
    if (!uniq && PyErr_Occurred()) return NULL;
    if (uniq && PyUnicode_CheckExact(uniq) && PyUnicode_GET_LENGTH(uniq) > 0) {
        Py_INCREF(uniq);
    } else if (uniq && uniq != Py_None && !(PyUnicode_CheckExact(uniq) && PyUnicode_GET_LENGTH(uniq) == 0)) {
        Py_RETURN_NONE; /* a UNIQ_KEY that is not a str: the checked path explains */
    } else {
        uniq = make_uniq(args[4], start, next_start, seq);
        if (!uniq) {
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE;
        }
        if (PyDict_SetItem(props, UNIQ_KEY_NAME, uniq) < 0) { Py_DECREF(uniq); return NULL; }
    }

    /* properties, strictly: str names and values, no empty name, no separator inside */
    PyObject *k, *v;
    Py_ssize_t it = 0, plen = 0, n = 0;
    while (PyDict_Next(props, &it, &k, &v)) {
        if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v) || PyUnicode_GET_LENGTH(k) == 0 ||
            has_separator(k) || has_separator(v)) goto refuse;
        Py_ssize_t kl, vl;
        if (!PyUnicode_AsUTF8AndSize(k, &kl) || !PyUnicode_AsUTF8AndSize(v, &vl)) {
            PyErr_Clear(); /* a lone surrogate: the checked path explains */
            goto refuse;
        }
        plen += kl + 1 + vl;
        n++;
    }
    if (n) plen += n - 1;
    if (plen > MAX_PROPERTIES) goto refuse;

    Py_ssize_t blen = PyBytes_GET_SIZE(body), old = PyByteArray_GET_SIZE(buf);
    Py_ssize_t size = BATCH_HEAD + blen + 2 + plen;
    if (PyByteArray_Resize(buf, old + size) < 0) { Py_DECREF(uniq); return NULL; }
    unsigned char *w = put_batch_item_head((unsigned char *)PyByteArray_AS_STRING(buf) + old, (uint32_t)flag,
                                           PyBytes_AS_STRING(body), blen, plen);
    Py_ssize_t i = 0;
    it = 0;
    while (PyDict_Next(props, &it, &k, &v)) {
        Py_ssize_t kl, vl;
        const char *ks = PyUnicode_AsUTF8AndSize(k, &kl), *vs = PyUnicode_AsUTF8AndSize(v, &vl);
        if (i++) *w++ = 0x02;
        memcpy(w, ks, kl); w += kl;
        *w++ = 0x01;
        memcpy(w, vs, vl); w += vl;
    }
    return uniq;
refuse:
    Py_DECREF(uniq);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(complete_sends_doc,
"complete_sends(futures: list, result_type: type, status, uniqs: list[str], offset_ids: list[str],\n"
"               mq, first_offset: int, region: str, trace: bool) -> None\n\n"
"For each i: result_type(status, uniqs[i] or offset_ids[i], offset_ids[i], mq, first_offset + i,\n"
"region, trace), built as a tuple subclass without result_type.__new__'s checks, set as the\n"
"result of futures[i] unless that future is done (reference: api.parse_send_response + the\n"
"loop in Producer._batch_done).  The three lists must have the same length.");

static PyObject *complete_sends(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9 || !PyList_CheckExact(args[0]) || !PyType_Check(args[1]) ||
        !PyType_IsSubtype((PyTypeObject *)args[1], &PyTuple_Type) || !PyList_CheckExact(args[3]) ||
        !PyList_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "complete_sends(futures: list, result_type: tuple subclass, status, uniqs: list, "
                        "offset_ids: list, mq, first_offset, region, trace)");
        return NULL;
    }
    PyObject *futures = args[0], *uniqs = args[3], *ids = args[4];
    PyTypeObject *rt = (PyTypeObject *)args[1];
    Py_ssize_t n = PyList_GET_SIZE(futures);
    if (PyList_GET_SIZE(uniqs) != n || PyList_GET_SIZE(ids) != n) {
        PyErr_SetString(PyExc_ValueError, "futures, uniqs and offset_ids differ in length");
        return NULL;
    }
    long long first = PyLong_AsLongLong(args[6]);
    if (first == -1 && PyErr_Occurred()) return NULL;
    static PyObject *done_name = NULL, *set_result_name = NULL;
    if (!done_name && !(done_name = PyUnicode_InternFromString("done"))) return NULL;
    if (!set_result_name && !(set_result_name = PyUnicode_InternFromString("set_result"))) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *fut = PyList_GET_ITEM(futures, i);
        PyObject *d = PyObject_CallMethodNoArgs(fut, done_name);
        if (!d) return NULL;
        int is_done = PyObject_IsTrue(d);
        Py_DECREF(d);
        if (is_done < 0) return NULL;
        if (is_done) continue;
        PyObject *uniq = PyList_GET_ITEM(uniqs, i), *oid = PyList_GET_ITEM(ids, i);
        int has_uniq = PyObject_IsTrue(uniq);
        if (has_uniq < 0) return NULL;
        PyObject *r = rt->tp_alloc(rt, 7);
        if (!r) return NULL;
        PyObject *off = PyLong_FromLongLong(first + i);
        if (!off) { Py_DECREF(r); return NULL; }
        PyObject *vals[7] = {args[2], has_uniq ? uniq : oid, oid, args[5], off, args[7], args[8]};
        for (int j = 0; j < 7; j++) {
            if (j != 4) Py_INCREF(vals[j]);
            PyTuple_SET_ITEM(r, j, vals[j]);
        }
        PyObject *ok = PyObject_CallMethodOneArg(fut, set_result_name, r);
        Py_DECREF(r);
        if (!ok) return NULL;
        Py_DECREF(ok);
    }
    Py_RETURN_NONE;
}

/* ---- remoting frames with JSON headers --------------------------------------------------------- */

/* The JSON header of a RemotingCommand has a fixed shape: a flat object of int and string
 * fields plus the extFields object of strings.  The reader below accepts exactly that shape
 * without escapes; anything else (an escape, a float, a nested value, a binary header, a bad
 * length) makes decode_frames decline so that codec.FrameDecoder's pure path decodes it or
 * raises the precise RemoteProtocolError. */

typedef struct { const unsigned char *p, *end; } jcur;

static inline void jws(jcur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static inline int jeat(jcur *c, unsigned char ch) {
    jws(c);
    if (c->p < c->end && *c->p == ch) { c->p++; return 1; }
    return 0;
}

/* Raw bytes of a string without escapes or control characters; 0 to decline. */
static int jraw(jcur *c, const unsigned char **s, Py_ssize_t *n) {
    jws(c);
    if (c->p >= c->end || *c->p != '"') return 0;
    const unsigned char *start = ++c->p;
    while (c->p < c->end && *c->p != '"') {
        if (*c->p == '\\' || *c->p < 0x20) return 0;
        c->p++;
    }
    if (c->p >= c->end) return 0;
    *s = start;
    *n = c->p - start;
    c->p++;
    return 1;
}

static int hex4(const unsigned char *p, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char ch = p[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9') v |= ch - '0';
        else if (ch >= 'a' && ch <= 'f') v |= ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F') v |= ch - 'A' + 10;
        else return 0;
    }
    *out = v;
    return 1;
}

/* The body of a string with escapes, c->p just past the opening quote, as a new str; NULL
 * (no error left set) to decline: an unknown escape, a lone surrogate, invalid UTF-8. */
static PyObject *jstr_escaped(jcur *c) {
    const unsigned char *p = c->p;
    char *buf = PyMem_Malloc(c->end - p + 1), *w = buf; /* an escape never gets longer in UTF-8 */
    if (!buf) { PyErr_Clear(); return NULL; }
    while (p < c->end && *p != '"') {
        unsigned char ch = *p++;
        if (ch < 0x20) goto fail;
        if (ch != '\\') { *w++ = (char)ch; continue; }
        if (p >= c->end) goto fail;
        ch = *p++;
        switch (ch) {
        case '"': case '\\': case '/': *w++ = (char)ch; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (c->end - p < 4 || !hex4(p, &cp)) goto fail;
            p += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF) goto fail;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (c->end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    goto fail;
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp < 0x80) {
                *w++ = (char)cp;
            } else if (cp < 0x800) {
                *w++ = (char)(0xC0 | (cp >> 6)); *w++ = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                *w++ = (char)(0xE0 | (cp >> 12)); *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *w++ = (char)(0x80 | (cp & 0x3F));
            } else {
                *w++ = (char)(0xF0 | (cp >> 18)); *w++ = (char)(0x80 | ((cp >> 12) & 0x3F));
                *w++ = (char)(0x80 | ((cp >> 6) & 0x3F)); *w++ = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: goto fail;
        }
    }
    if (p >= c->end) goto fail;
    c->p = p + 1;
    PyObject *o = PyUnicode_DecodeUTF8(buf, w - buf, NULL);
    PyMem_Free(buf);
    if (!o) PyErr_Clear();
    return o;
fail:
    PyMem_Free(buf);
    return NULL;
}

/* A string value as a new str; NULL (no error left set) to decline. */
static PyObject *jstr(jcur *c) {
    jws(c);
    if (c->p >= c->end || *c->p != '"') return NULL;
    const unsigned char *s = c->p + 1, *q = s;
    while (q < c->end && *q != '"' && *q != '\\' && *q >= 0x20) q++;
    if (q < c->end && *q == '\\') {
        c->p = s;
        return jstr_escaped(c);
    }
    if (q >= c->end || *q != '"') return NULL;
    c->p = q + 1;
    PyObject *o = PyUnicode_DecodeUTF8((const char *)s, q - s, NULL);
    if (!o) PyErr_Clear();
    return o;
}

/* An integer literal of at most 18 digits (no fraction or exponent); 0 to decline. */
static int jint(jcur *c, long long *out, const unsigned char **text, Py_ssize_t *tlen) {
    jws(c);
    const unsigned char *s = c->p;
    int neg = 0;
    if (c->p < c->end && *c->p == '-') { neg = 1; c->p++; }
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return 0;
    if (*c->p == '0' && c->p + 1 < c->end && c->p[1] >= '0' && c->p[1] <= '9') return 0;
    long long v = 0;
    int digits = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (++digits > 18) return 0;
        v = v * 10 + (*c->p++ - '0');
    }
    if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E')) return 0;
    *out = neg ? -v : v;
    if (text) { *text = s; *tlen = c->p - s; }
    return 1;
}

static int jword(jcur *c, const char *w) {
    jws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return 0;
    c->p += n;
    return 1;
}

static int jint32(jcur *c, long *out) {
    long long v;
    if (!jint(c, &v, NULL, NULL) || v < -2147483648LL || v > 2147483647LL) return 0;
    *out = (long)v;
    return 1;
}

/* Skip a scalar of a field nobody reads; 0 to decline (objects, arrays, escapes, floats). */
static int jskip(jcur *c) {
    jws(c);
    if (c->p >= c->end) return 0;
    if (*c->p == '"') {
        const unsigned char *s;
        Py_ssize_t n;
        if (!jraw(c, &s, &n)) return 0;
        for (Py_ssize_t i = 0; i < n; i++) if (s[i] >= 0x80) return 0; /* UTF-8 left to orjson */
        return 1;
    }
    long long v;
    return jword(c, "true") || jword(c, "false") || jword(c, "null") || jint(c, &v, NULL, NULL);
}

/* extFields: string values kept, ints as their text, booleans as true/false, null dropped. */
/* extFields names repeat on every frame of a kind ("msgId", "queueId", ...): the first 64 short
 * plain ones are kept, so later frames reuse the same str (its hash already computed) instead
 * of decoding and hashing a new one per field. */
#define KEY_CACHE 64
static PyObject *key_cache[KEY_CACHE];
static int key_count;

static PyObject *jkey(jcur *c) {
    jws(c);
    if (c->p >= c->end || *c->p != '"') return NULL;
    const unsigned char *s = c->p + 1, *q = s;
    while (q < c->end && *q != '"' && *q != '\\' && *q >= 0x20 && *q < 0x80) q++;
    Py_ssize_t n = q - s;
    if (q >= c->end || *q != '"' || n > 32) return jstr(c);  /* escapes, non-ASCII, long: as values */
    for (int i = 0; i < key_count; i++) {
        PyObject *k = key_cache[i];
        if (PyUnicode_GET_LENGTH(k) == n && memcmp(PyUnicode_1BYTE_DATA(k), s, n) == 0) {
            c->p = q + 1;
            Py_INCREF(k);
            return k;
        }
    }
    PyObject *k = PyUnicode_FromStringAndSize((const char *)s, n);
    if (!k) { PyErr_Clear(); return NULL; }
    c->p = q + 1;
    if (key_count < KEY_CACHE) {
        PyUnicode_InternInPlace(&k);
        Py_INCREF(k);
        key_cache[key_count++] = k;
    }
    return k;
}

static PyObject *jext(jcur *c) {
    if (!jeat(c, '{')) return NULL;
    PyObject *d = PyDict_New();
    if (!d) { PyErr_Clear(); return NULL; }
    if (jeat(c, '}')) return d;
    for (;;) {
        PyObject *k = jkey(c);
        if (!k || !jeat(c, ':')) { Py_XDECREF(k); goto fail; }
        jws(c);
        PyObject *v = NULL;
        const unsigned char *t;
        Py_ssize_t tl;
        long long num;
        if (c->p < c->end && *c->p == '"') {
            v = jstr(c);
        } else if (jword(c, "true")) {
            v = PyUnicode_FromString("true");
        } else if (jword(c, "false")) {
            v = PyUnicode_FromString("false");
        } else if (jword(c, "null")) {
            if (PyDict_DelItem(d, k) < 0) PyErr_Clear();
            Py_DECREF(k);
            goto next;
        } else if (jint(c, &num, &t, &tl)) {
            v = num == 0 ? PyUnicode_FromString("0") : PyUnicode_FromStringAndSize((const char *)t, tl);
        }
        if (!v || PyDict_SetItem(d, k, v) < 0) { PyErr_Clear(); Py_XDECREF(v); Py_DECREF(k); goto fail; }
        Py_DECREF(v);
        Py_DECREF(k);
    next:
        if (jeat(c, ',')) continue;
        if (jeat(c, '}')) return d;
        goto fail;
    }
fail:
    Py_DECREF(d);
    return NULL;
}

static PyObject *CMD_NAMES[9];

static int cmd_names_ready(void) {
    static const char *names[9] = {"code", "language", "version", "opaque", "flag",
                                   "remark", "ext_fields", "body", "serialize_type"};
    if (CMD_NAMES[8]) return 1;
    for (int i = 0; i < 9; i++)
        if (!CMD_NAMES[i] && !(CMD_NAMES[i] = PyUnicode_InternFromString(names[i]))) return 0;
    return 1;
}

/* Where the command type keeps each field: the offsets of its __slots__ members, found once
 * per type, so a decoded frame fills its command without an attribute lookup per field.
 * 0: the type is not a plain slotted class; set the fields through setattr instead. */
static PyTypeObject *slots_type;
static Py_ssize_t slot_offsets[9];

static int cmd_slots_ready(PyTypeObject *cls) {
    if (slots_type == cls) return 1;
    slots_type = NULL;
    for (int i = 0; i < 9; i++) {
        PyObject *d = PyObject_GetAttr((PyObject *)cls, CMD_NAMES[i]);
        if (!d) { PyErr_Clear(); return 0; }
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX &&
                 !(((PyMemberDescrObject *)d)->d_member->flags & READONLY);
        if (ok) slot_offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok) return 0;
    }
    slots_type = cls;
    return 1;
}

/* One JSON-header frame (after its length word) as a new command; NULL to decline (no error
 * left set) or on a real error (set). */
static PyObject *json_command(const unsigned char *frame, Py_ssize_t len, PyTypeObject *cls,
                              PyObject *lang_by_name, PyObject *other_lang) {
    uint32_t word = rd32(frame);
    Py_ssize_t hlen = word & 0xFFFFFF;
    if ((word >> 24) != 0 || hlen > len - 4) return NULL;
    jcur c = {frame + 4, frame + 4 + hlen};
    long code = 0, version = 0, opaque = 0, flag = 0;
    int has_code = 0;
    PyObject *language = NULL, *remark = NULL, *ext = NULL;
    if (!jeat(&c, '{')) return NULL;
    if (!jeat(&c, '}')) {
        for (;;) {
            const unsigned char *k;
            Py_ssize_t kn;
            if (!jraw(&c, &k, &kn) || !jeat(&c, ':')) goto decline;
#define KEY(lit) (kn == (Py_ssize_t)sizeof(lit) - 1 && memcmp(k, lit, kn) == 0)
            if (KEY("code")) {
                if (!jint32(&c, &code)) goto decline;
                has_code = 1;
            } else if (KEY("version")) {
                if (!jint32(&c, &version)) goto decline;
            } else if (KEY("opaque")) {
                if (!jint32(&c, &opaque)) goto decline;
            } else if (KEY("flag")) {
                if (!jint32(&c, &flag)) goto decline;
            } else if (KEY("language")) {
                PyObject *name = jstr(&c);
                if (!name) goto decline;
                PyObject *v = PyDict_GetItemWithError(lang_by_name, name);
                Py_DECREF(name);
                if (!v) { PyErr_Clear(); v = other_lang; }
                Py_INCREF(v);
                Py_XSETREF(language, v);
            } else if (KEY("remark")) {
                if (jword(&c, "null")) {
                    Py_CLEAR(remark);
                } else {
                    PyObject *r = jstr(&c);
                    if (!r) goto decline;
                    Py_XSETREF(remark, r);
                }
            } else if (KEY("extFields")) {
                if (jword(&c, "null")) {
                    Py_CLEAR(ext);
                } else {
                    PyObject *e = jext(&c);
                    if (!e) goto decline;
                    Py_XSETREF(ext, e);
                }
            } else {
                for (Py_ssize_t i = 0; i < kn; i++) if (k[i] >= 0x80) goto decline;
                if (!jskip(&c)) goto decline;
            }
#undef KEY
            if (jeat(&c, ',')) continue;
            if (jeat(&c, '}')) break;
            goto decline;
        }
    }
    jws(&c);
    if (c.p != c.end || !has_code) goto decline;
    if (!language) { language = other_lang; Py_INCREF(language); }

    PyObject *cmd = cls->tp_alloc(cls, 0);
    if (!cmd) goto error;
    Py_ssize_t blen = len - 4 - hlen;
    PyObject *vals[9] = {
        PyLong_FromLong(code), language, PyLong_FromLong(version), PyLong_FromLong(opaque),
        PyLong_FromLong(flag), remark ? remark : Py_None, ext ? ext : Py_None,
        blen > 0 ? PyBytes_FromStringAndSize((const char *)frame + 4 + hlen, blen) : Py_None,
        PyLong_FromLong(0),
    };
    int ok = 1;
    int direct = cmd_slots_ready(cls);
    for (int i = 0; i < 9; i++) {
        if (!vals[i]) { ok = 0; continue; }
        if (!ok) continue;
        if (direct) {
            PyObject **slot = (PyObject **)((char *)cmd + slot_offsets[i]);
            Py_INCREF(vals[i]);
            Py_XSETREF(*slot, vals[i]);
        } else if (PyObject_SetAttr(cmd, CMD_NAMES[i], vals[i]) < 0) {
            ok = 0;
        }
    }
    /* the new references: ints, the body */
    Py_XDECREF(vals[0]); Py_XDECREF(vals[2]); Py_XDECREF(vals[3]); Py_XDECREF(vals[4]); Py_XDECREF(vals[8]);
    if (blen > 0) Py_XDECREF(vals[7]);
    Py_DECREF(language);
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    if (!ok) { Py_DECREF(cmd); return NULL; }
    return cmd;
decline:
    PyErr_Clear();
error:
    Py_XDECREF(language);
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    return NULL;
}

PyDoc_STRVAR(decode_frames_doc,
"decode_frames(data: bytes | bytearray, max_frame_size: int, command_type: type,\n"
"              language_by_name: dict[str, int], other_language: int)\n"
"    -> tuple[list[RemotingCommand], int] | None\n\n"
"The complete frames at the start of data and where the rest begins, as\n"
"codec.FrameDecoder._decode_all returns them (reference).  None when any frame is one the\n"
"pure path must judge: a length out of bounds, a binary (ROCKETMQ) header, or a JSON header\n"
"outside the usual shape (escapes in strings, floats, nested values, a missing code, ints\n"
"beyond int32).");

static PyObject *decode_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyType_Check(args[2]) || !PyDict_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "decode_frames(data, max_frame_size, command_type, language_by_name: dict, other_language)");
        return NULL;
    }
    long long max_frame = PyLong_AsLongLong(args[1]);
    if (max_frame == -1 && PyErr_Occurred()) return NULL;
    if (!cmd_names_ready()) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = view.buf;
    Py_ssize_t end = view.len, pos = 0;
    PyObject *out = PyList_New(0);
    if (!out) { PyBuffer_Release(&view); return NULL; }
    while (end - pos >= 4) {
        int32_t length = (int32_t)rd32(b + pos);
        if (length < 4 || length > max_frame) goto decline;
        if (end - pos - 4 < length) break;
        PyObject *cmd = json_command(b + pos + 4, length, (PyTypeObject *)args[2], args[3], args[4]);
        if (!cmd) {
            if (PyErr_Occurred()) goto error;
            goto decline;
        }
        int r = PyList_Append(out, cmd);
        Py_DECREF(cmd);
        if (r < 0) goto error;
        pos += 4 + (Py_ssize_t)length;
    }
    PyBuffer_Release(&view);
    PyObject *res = Py_BuildValue("(Nn)", out, pos);
    return res;
decline:
    PyBuffer_Release(&view);
    Py_DECREF(out);
    Py_RETURN_NONE;
error:
    PyBuffer_Release(&view);
    Py_DECREF(out);
    return NULL;
}

/* Bytes s[0..n) takes inside a JSON string, escaped as orjson escapes it. */
static Py_ssize_t json_len(const char *s, Py_ssize_t n) {
    Py_ssize_t out = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\' || ch == '\b' || ch == '\t' || ch == '\n' || ch == '\f' || ch == '\r') out += 1;
        else if (ch < 0x20) out += 5;
    }
    return out;
}

static const char HEX_LOWER[] = "0123456789abcdef";

static char *put_text(char *w, const char *s, Py_ssize_t n) {
    memcpy(w, s, n);
    return w + n;
}

static char *put_quoted(char *w, const char *s, Py_ssize_t n) {
    *w++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') { *w++ = (char)ch; continue; }
        *w++ = '\\';
        switch (ch) {
        case '"': case '\\': *w++ = (char)ch; break;
        case '\b': *w++ = 'b'; break;
        case '\t': *w++ = 't'; break;
        case '\n': *w++ = 'n'; break;
        case '\f': *w++ = 'f'; break;
        case '\r': *w++ = 'r'; break;
        default:
            *w++ = 'u'; *w++ = '0'; *w++ = '0';
            *w++ = HEX_LOWER[ch >> 4]; *w++ = HEX_LOWER[ch & 15];
        }
    }
    *w++ = '"';
    return w;
}

/* The header after its extFields, as header_json writes it: flag, language, opaque, serialize
 * type, version and the remark when there is one, then the closing brace. */
static char *put_header_end(char *w, long long flag, const char *ls, Py_ssize_t ln, long long opaque,
                            long long version, const char *rs, Py_ssize_t rn) {
    w += sprintf(w, "},\"flag\":%lld,\"language\":", flag);
    w = put_quoted(w, ls, ln);
    w += sprintf(w, ",\"opaque\":%lld,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":%lld", opaque, version);
    if (rs) {
        w = put_text(w, ",\"remark\":", 10);
        w = put_quoted(w, rs, rn);
    }
    *w++ = '}';
    return w;
}

/* length word, serialize type and header length, header; then the body when `body` is given
 * (else only its length counts).  None past the protocol's limits. */
static PyObject *frame_bytes(const char *header, Py_ssize_t hlen, PyObject *body, long long body_len) {
    if (hlen > 0xFFFFFF || 4 + hlen + body_len > 0x7FFFFFFFLL) Py_RETURN_NONE;
    PyObject *out = PyBytes_FromStringAndSize(NULL, 8 + hlen + (body ? body_len : 0));
    if (!out) return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    be32(o, (uint32_t)(4 + hlen + body_len));
    be32(o + 4, (uint32_t)hlen);
    memcpy(o + 8, header, hlen);
    if (body) memcpy(o + 8 + hlen, PyBytes_AS_STRING(body), body_len);
    return out;
}

PyDoc_STRVAR(json_frame_head_doc,
"json_frame_head(code, language, version, opaque, flag, remark, ext_fields, body_length,\n"
"                language_names: dict[int, str]) -> bytes | None\n\n"
"The length prefix and JSON header of a frame whose body has body_length bytes: the first\n"
"buffer codec.encode returns for a JSON command (reference: header_json.encode_header and\n"
"codec.encode; the same bytes orjson writes).  None when the pure path must build it:\n"
"extFields holding anything but str keys and values, a string that needs a JSON escape or\n"
"is not encodable, a number beyond 64 bits.");

static PyObject *json_frame_head(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9 || !PyDict_CheckExact(args[8])) {
        PyErr_SetString(PyExc_TypeError,
                        "json_frame_head(code, language, version, opaque, flag, remark, ext_fields, body_length, "
                        "language_names: dict)");
        return NULL;
    }
    long long nums[4]; /* code, flag, opaque, version */
    PyObject *num_args[4] = {args[0], args[4], args[3], args[2]};
    for (int i = 0; i < 4; i++) {
        if (!PyLong_Check(num_args[i]) || PyBool_Check(num_args[i])) Py_RETURN_NONE; /* IntEnum codes are ints; orjson writes bools as true/false */
        int overflow = 0;
        nums[i] = PyLong_AsLongLongAndOverflow(num_args[i], &overflow);
        if (overflow || (nums[i] == -1 && PyErr_Occurred())) { PyErr_Clear(); Py_RETURN_NONE; }
    }
    long long body_len = PyLong_AsLongLong(args[7]);
    if (body_len == -1 && PyErr_Occurred()) return NULL;
    PyObject *lang = PyDict_GetItemWithError(args[8], args[1]);
    if (!lang && PyErr_Occurred()) { PyErr_Clear(); Py_RETURN_NONE; }
    const char *ls = "OTHER";
    Py_ssize_t ln = 5;
    if (lang) {
        if (!PyUnicode_CheckExact(lang) || !(ls = PyUnicode_AsUTF8AndSize(lang, &ln))) { PyErr_Clear(); Py_RETURN_NONE; }
    }
    const char *rs = NULL;
    Py_ssize_t rn = 0;
    PyObject *remark = args[5];
    if (remark != Py_None) {
        if (!PyUnicode_CheckExact(remark) || !(rs = PyUnicode_AsUTF8AndSize(remark, &rn))) { PyErr_Clear(); Py_RETURN_NONE; }
    }
    PyObject *ext = args[6];
    int has_ext = ext != Py_None && PyObject_IsTrue(ext) == 1;
    if (PyErr_Occurred()) { PyErr_Clear(); Py_RETURN_NONE; }
    if (has_ext && !PyDict_CheckExact(ext)) Py_RETURN_NONE;

    /* size: every fixed part, then the strings */
    Py_ssize_t size = 256 + json_len(ls, ln) + (rs ? json_len(rs, rn) + 12 : 0); /* fixed text, four 20-digit numbers: < 200 */
    PyObject *k, *v;
    Py_ssize_t it = 0;
    if (has_ext) {
        while (PyDict_Next(ext, &it, &k, &v)) {
            Py_ssize_t kn, vn;
            const char *ks, *vs;
            if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v) || !(ks = PyUnicode_AsUTF8AndSize(k, &kn)) ||
                !(vs = PyUnicode_AsUTF8AndSize(v, &vn))) { PyErr_Clear(); Py_RETURN_NONE; }
            size += json_len(ks, kn) + json_len(vs, vn) + 6;
        }
    }
    char *tmp = PyMem_Malloc(size);
    if (!tmp) return PyErr_NoMemory();
    char *w = tmp;
    w += sprintf(w, "{\"code\":%lld,\"extFields\":{", nums[0]);
    if (has_ext) {
        it = 0;
        int first = 1;
        while (PyDict_Next(ext, &it, &k, &v)) {
            Py_ssize_t kn, vn;
            const char *ks = PyUnicode_AsUTF8AndSize(k, &kn), *vs = PyUnicode_AsUTF8AndSize(v, &vn);
            if (!first) *w++ = ',';
            first = 0;
            w = put_quoted(w, ks, kn);
            *w++ = ':';
            w = put_quoted(w, vs, vn);
        }
    }
    w = put_header_end(w, nums[1], ls, ln, nums[2], nums[3], rs, rn);
    PyObject *out = frame_bytes(tmp, w - tmp, NULL, body_len);
    PyMem_Free(tmp);
    return out;
}

PyDoc_STRVAR(fields_frame_doc,
"fields_frame(code, opaque, flag, language_name, version, keys: tuple[str, ...],\n"
"              values: tuple[str | int | None, ...], body: bytes | None) -> bytes | None\n\n"
"A whole JSON frame (a request, or with flag RPC_RESPONSE an answer), body included, whose\n"
"extFields are keys[i] -> str(values[i]) for every value that is not None, in order\n"
"(reference: codec.fields_frame_py, which builds the RemotingCommand and encodes it).  A frame\n"
"built this way needs no dict, no str() per number and no RemotingCommand.  None when the\n"
"reference must build it: a value that is neither str\n"
"nor int (bool included), a number beyond 64 bits, a string that is not encodable, a\n"
"body that is not bytes, a frame beyond the protocol's limits.");

static PyObject *fields_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8 || !PyTuple_CheckExact(args[5]) || !PyTuple_CheckExact(args[6]) ||
        PyTuple_GET_SIZE(args[5]) != PyTuple_GET_SIZE(args[6]) || !PyUnicode_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "fields_frame(code, opaque, flag, language_name: str, version, keys: tuple, values: tuple "
                        "of the same length, body)");
        return NULL;
    }
    PyObject *body = args[7] == Py_None ? NULL : args[7];
    if (body && !PyBytes_CheckExact(body)) Py_RETURN_NONE;
    long long nums[4]; /* code, opaque, flag, version */
    PyObject *num_args[4] = {args[0], args[1], args[2], args[4]};
    for (int i = 0; i < 4; i++) {
        if (!PyLong_Check(num_args[i]) || PyBool_Check(num_args[i])) Py_RETURN_NONE;
        int overflow = 0;
        nums[i] = PyLong_AsLongLongAndOverflow(num_args[i], &overflow);
        if (overflow || (nums[i] == -1 && PyErr_Occurred())) { PyErr_Clear(); Py_RETURN_NONE; }
    }
    Py_ssize_t ln;
    const char *ls = PyUnicode_AsUTF8AndSize(args[3], &ln);
    if (!ls) { PyErr_Clear(); Py_RETURN_NONE; }
    PyObject *keys = args[5], *values = args[6];
    Py_ssize_t count = PyTuple_GET_SIZE(keys);
    Py_ssize_t size = 256 + json_len(ls, ln);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *k = PyTuple_GET_ITEM(keys, i), *v = PyTuple_GET_ITEM(values, i);
        if (v == Py_None) continue;
        Py_ssize_t kn, vn = 20;
        const char *ks, *vs;
        if (!PyUnicode_CheckExact(k) || !(ks = PyUnicode_AsUTF8AndSize(k, &kn))) { PyErr_Clear(); Py_RETURN_NONE; }
        if (PyUnicode_CheckExact(v)) {
            if (!(vs = PyUnicode_AsUTF8AndSize(v, &vn))) { PyErr_Clear(); Py_RETURN_NONE; }
            vn = json_len(vs, vn);
        } else if (!PyLong_CheckExact(v)) {
            Py_RETURN_NONE;
        }
        size += json_len(ks, kn) + vn + 6;
    }
    char *tmp = PyMem_Malloc(size);
    if (!tmp) return PyErr_NoMemory();
    char *w = tmp;
    w += sprintf(w, "{\"code\":%lld,\"extFields\":{", nums[0]);
    int first = 1;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *v = PyTuple_GET_ITEM(values, i);
        if (v == Py_None) continue;
        Py_ssize_t kn, vn;
        const char *ks = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(keys, i), &kn);
        if (!first) *w++ = ',';
        first = 0;
        w = put_quoted(w, ks, kn);
        *w++ = ':';
        if (PyUnicode_CheckExact(v)) {
            const char *vs = PyUnicode_AsUTF8AndSize(v, &vn);
            w = put_quoted(w, vs, vn);
        } else {
            int overflow = 0;
            long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (overflow || (n == -1 && PyErr_Occurred())) { PyErr_Clear(); PyMem_Free(tmp); Py_RETURN_NONE; }
            w += sprintf(w, "\"%lld\"", n);
        }
    }
    w = put_header_end(w, nums[2], ls, ln, nums[1], nums[3], NULL, 0);
    PyObject *out = frame_bytes(tmp, w - tmp, body, body ? PyBytes_GET_SIZE(body) : 0);
    PyMem_Free(tmp);
    return out;
}

static PyMethodDef methods[] = {
    {"java_hash", java_hash, METH_VARARGS, java_hash_doc},
    {"index_hashes", index_hashes, METH_VARARGS, index_hashes_doc},
    {"scan_batch", scan_batch, METH_VARARGS, scan_batch_doc},
    {"write_batch", write_batch, METH_VARARGS, write_batch_doc},
    {"scan_single", (PyCFunction)(void (*)(void))scan_single, METH_FASTCALL, scan_single_doc},
    {"send_v2_fields", (PyCFunction)(void (*)(void))send_v2_fields, METH_FASTCALL, send_v2_fields_doc},
    {"write_single", write_single, METH_VARARGS, write_single_doc},
    {"index_put", index_put, METH_VARARGS, index_put_doc},
    {"encode_batch", encode_batch, METH_O, encode_batch_doc},
    {"decode_records", decode_records, METH_VARARGS, decode_records_doc},
    {"properties_to_string", (PyCFunction)(void (*)(void))properties_to_string, METH_FASTCALL,
     properties_to_string_doc},
    {"uniq_id_now", (PyCFunction)(void (*)(void))uniq_id_now, METH_FASTCALL, uniq_id_now_doc},
    {"batch_append", (PyCFunction)(void (*)(void))batch_append, METH_FASTCALL, batch_append_doc},
    {"complete_sends", (PyCFunction)(void (*)(void))complete_sends, METH_FASTCALL, complete_sends_doc},
    {"decode_frames", (PyCFunction)(void (*)(void))decode_frames, METH_FASTCALL, decode_frames_doc},
    {"json_frame_head", (PyCFunction)(void (*)(void))json_frame_head, METH_FASTCALL, json_frame_head_doc},
    {"fields_frame", (PyCFunction)(void (*)(void))fields_frame, METH_FASTCALL, fields_frame_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "apogee._native",
    "Optional C speed-ups of apogee's byte-level hot paths (see apogee.common.accel).", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
