/*
 * apogee._native: what the files of the extension share (see module.c for the whole picture).
 *
 * Every function of the module must be safe for ANY Python argument, not only for what its
 * caller passes today: types are checked before sizes are computed, a buffer is written only
 * after the bytes it receives were counted against its room, input that a function trusted
 * from an earlier call (a body scan_batch accepted) is checked again, and nothing borrowed is
 * used after a call that can run Python code (__index__, __eq__, __bool__, a finalizer).
 */
#ifndef APOGEE_NATIVE_H
#define APOGEE_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#define RECORD_FIXED 88 /* TOTALSIZE .. BODYLENGTH of an IPv4 record */
#define MAGIC_CODE 0xDAA320A7u
#define MAX_PROPERTIES 32767
#define MAX_TOPIC 127    /* a record's topic length byte */
#define BATCH_HEAD 20    /* a client batch item: TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN */
#define CQ_UNIT 20
#define INDEX_ENTRY_OUT 16 /* {uint32 hash; uint32 store_ts - the call's store_ts; int64 phys} native order */
#define BLANK_MAGIC 0xCBD43194u
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
static inline int64_t rd64(const unsigned char *p) {
    return (int64_t)(((uint64_t)rd32(p) << 32) | rd32(p + 4));
}
static inline int16_t rd16(const unsigned char *p) {
    return (int16_t)(((uint16_t)p[0] << 8) | p[1]);
}

static const char HEX[] = "0123456789ABCDEF";

/* 1 when the memory of two buffers overlaps: a function that reads one and writes the other
 * refuses that (the reads would see its own writes). */
static inline int buffers_overlap(const Py_buffer *a, const Py_buffer *b) {
    uintptr_t a0 = (uintptr_t)a->buf, b0 = (uintptr_t)b->buf;
    return a->len > 0 && b->len > 0 && a0 < b0 + (uintptr_t)b->len && b0 < a0 + (uintptr_t)a->len;
}

/* ---- text (hashes.c) ----------------------------------------------------------------------- */

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

/* Java Math.abs((int) h) with Integer.MIN_VALUE mapped to 0 (RocketMQ IndexService). */
static inline uint32_t abs_hash(uint32_t h) {
    if (h & 0x80000000u) return h == 0x80000000u ? 0 : (uint32_t)(0x100000000ull - h);
    return h;
}

int valid_text(const unsigned char *s, Py_ssize_t n);                  /* UTF-8 without NUL */
uint32_t hash_utf8(uint32_t h, const unsigned char *s, Py_ssize_t n);  /* String.hashCode, continued */

/* ---- properties and index keys (records.c) ------------------------------------------------ */

/* A growing byte buffer (PyMem); the owner frees buf. */
typedef struct {
    unsigned char *buf;
    Py_ssize_t len, cap;
} byte_sink;

/* Mirror of message_codec.get_property on raw bytes: -1 if the name is absent, else the value's
 * start; *vlen gets its length (0 = empty, which get_property reports as None). */
Py_ssize_t find_property(const unsigned char *s, Py_ssize_t n, const char *name, Py_ssize_t name_len,
                         Py_ssize_t *vlen);
/* A property as get_property would see it (NULL: absent or empty). */
const unsigned char *text_property(const unsigned char *s, Py_ssize_t n, const char *name, Py_ssize_t *vlen);
/* Append the index entries of one message (IndexService.build's keys, index_put's layout) whose
 * properties text is props[0..plen), with its topic's prefix hash and its store time as
 * ts_delta ms after the store_ts index_put will be given.  -1 (MemoryError) on failure. */
int index_keys(byte_sink *out, const unsigned char *props, Py_ssize_t plen, uint32_t prefix, int64_t phys,
               uint32_t ts_delta);

/* ---- header fields (records.c) ------------------------------------------------------------ */

/* out[i] = ext[keys[i]] for the first n keys of the tuple keys, each held (a new reference, or
 * NULL when absent): a lookup can run Python code that changes the dict.  0 with an error set,
 * and nothing held, when a lookup raised. */
int field_values(PyObject *ext, PyObject *keys, PyObject **out, int n);

/* An int extFields value as Header.decode reads it, when it is plainly one: a JSON number or
 * ASCII [-]digits (at most 18) within [lo, hi].  0 to decline: the full decoder judges it. */
int field_int(PyObject *v, long long lo, long long hi, long long *out);

/* ---- slotted classes (module.c) ------------------------------------------------------------ */

/* Where instances of cls keep the __slots__ member `name`, for functions that build objects
 * without calling the class: 0 and an error unless `name` is a writable slot that a Python
 * class statement declared on cls or one of its bases. */
int python_slot_offset(PyTypeObject *cls, PyObject *name, Py_ssize_t *offset);

/* ---- each file's functions, added to the module by module.c -------------------------------- */

extern PyMethodDef apogee_hashes_methods[];
extern PyMethodDef apogee_records_methods[];
extern PyMethodDef apogee_client_methods[];
extern PyMethodDef apogee_frames_methods[];
extern PyMethodDef apogee_reads_methods[];
extern PyMethodDef apogee_dispatch_methods[];
extern PyMethodDef apogee_crc32_methods[];

/* zlib's crc32(crc, buf, len) for any length, by carry-less multiplication where the CPU has it
 * (crc32.c). */
uint32_t apogee_crc32(uint32_t crc, const unsigned char *buf, size_t len);
extern PyTypeObject apogee_FlusherType; /* flusher.c */

#endif
