/*
 * UTF-8 checks, Java's String.hashCode and the IndexFile: java_hash, index_hashes, index_put.
 */
#include "native.h"

/* 1 if s[0..n) is valid UTF-8 without NUL bytes. */
int valid_text(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    uint32_t cp;
    while (i < n) {
        if (n - i >= 8) { /* eight ASCII bytes without NUL at a time: most properties text */
            uint64_t x;
            memcpy(&x, s + i, 8);
            if (!(x & 0x8080808080808080ull) && !((x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
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
uint32_t hash_utf8(uint32_t h, const unsigned char *s, Py_ssize_t n) {
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
"index_hashes(prefix: int, keys: Sequence[str]) -> list[int]\n\n"
"IndexFile key hashes of prefix + key (reference: apogee.common.java_hash.index_hashes).");

static PyObject *index_hashes(PyObject *self, PyObject *args) {
    unsigned long prefix;
    PyObject *keys;
    if (!PyArg_ParseTuple(args, "kO", &prefix, &keys)) return NULL;
    /* Iterating a non-list may run Python code; from here on nothing does. */
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

/* ---- IndexFile ----------------------------------------------------------------------------- */

#define INDEX_HEADER 40
#define INDEX_SLOT 4
#define INDEX_ENTRY 20
#define PLAN_STACK 32 /* keys of one message planned without an allocation */

/* The keys of one message: for each, the entry it chains to (prev) and its slot's offset. */
typedef struct {
    long long *prev;
    long long *slot_at;
    /* open addressing from a slot number to the newest entry of this message in it */
    uint64_t *keys;     /* slot number + 1; 0 = empty */
    long long *latest;
    Py_ssize_t mask;
    long long stack_prev[PLAN_STACK], stack_slot_at[PLAN_STACK], stack_latest[2 * PLAN_STACK];
    uint64_t stack_keys[2 * PLAN_STACK];
    void *heap;
} key_plan;

static int plan_begin(key_plan *p, long long fit) {
    Py_ssize_t cap = 8; /* a power of two at least twice the keys: a short probe, little to clear */
    while (cap < 2 * fit) cap *= 2;
    p->heap = NULL;
    p->mask = cap - 1;
    if (fit <= PLAN_STACK) {
        p->prev = p->stack_prev; p->slot_at = p->stack_slot_at;
        p->keys = p->stack_keys; p->latest = p->stack_latest;
    } else {
        char *h = PyMem_Malloc((size_t)fit * 2 * sizeof(long long) + (size_t)cap * (sizeof(uint64_t) + sizeof(long long)));
        if (!h) { PyErr_NoMemory(); return -1; }
        p->heap = h;
        p->prev = (long long *)h;
        p->slot_at = p->prev + fit;
        p->latest = p->slot_at + fit;
        p->keys = (uint64_t *)(p->latest + cap);
    }
    memset(p->keys, 0, (size_t)cap * sizeof(uint64_t));
    return 0;
}

/* The newest entry of this message in `slot` (-1: none yet), then `entry` becomes it. */
static long long plan_swap(key_plan *p, uint64_t slot, long long entry) {
    Py_ssize_t i = (Py_ssize_t)((slot * 0x9E3779B97F4A7C15ull) >> 32) & p->mask;
    while (p->keys[i]) {
        if (p->keys[i] == slot + 1) {
            long long old = p->latest[i];
            p->latest[i] = entry;
            return old;
        }
        i = (i + 1) & p->mask;
    }
    p->keys[i] = slot + 1;
    p->latest[i] = entry;
    return -1;
}

PyDoc_STRVAR(index_put_doc,
"index_put(buf, slots, index_num, header, store_ts, entries, start) -> (header, next)\n\n"
"Add index entries (write_batch's 16-byte layout) from entries[start:] to an IndexFile\n"
"mapping, message by message (consecutive entries with the same phys), exactly as\n"
"IndexFile.put_keys does for each, skipping messages IndexService.build would skip.\n"
"A message's store time is store_ts plus its first entry's second word (unsigned ms, at most\n"
"2**63-1; write_batch leaves 0, scan_dispatch the ms after its first record's).\n"
"header = (begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count).  Stops before a\n"
"message that does not fit (IndexService.build's rule); next is where to resume.\n"
"ValueError when the buffer cannot hold slots and index_num entries, or index_count or start\n"
"is out of range.");

static PyObject *index_put(PyObject *self, PyObject *args) {
    Py_buffer buf, entries;
    long long slots, index_num, store_ts, begin_ts, end_ts, begin_phy, end_phy, slot_count, count;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "w*LL(LLLLLL)Ly*n", &buf, &slots, &index_num, &begin_ts, &end_ts,
                          &begin_phy, &end_phy, &slot_count, &count, &store_ts, &entries, &start))
        return NULL;
    PyObject *result = NULL;
    unsigned char *mm = buf.buf;
    const unsigned char *e = entries.buf;
    Py_ssize_t n = entries.len / INDEX_ENTRY_OUT;
    Py_ssize_t i = start;
    if (buf.len < INDEX_HEADER || slots <= 0 || slots > (buf.len - INDEX_HEADER) / INDEX_SLOT) {
        PyErr_SetString(PyExc_ValueError, "index buffer too small for its slots and entries");
        goto done;
    }
    long long base = INDEX_HEADER + slots * INDEX_SLOT;
    if (index_num <= 0 || index_num > (buf.len - base) / INDEX_ENTRY) {
        PyErr_SetString(PyExc_ValueError, "index buffer too small for its slots and entries");
        goto done;
    }
    if (count < 0 || count > index_num || slot_count < -INT_MAX32 - 1 || slot_count > INT_MAX32 || start < 0 ||
        start > n || buffers_overlap(&buf, &entries)) {
        PyErr_SetString(PyExc_ValueError, "index_count, slot_count or start out of range, or entries inside the index");
        goto done;
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
        /* this message's store time: store_ts + the entry's unsigned ms delta (0 from write_batch) */
        uint32_t ts_delta;
        memcpy(&ts_delta, e + i * INDEX_ENTRY_OUT + 4, 4);
        long long msg_ts;
        if (__builtin_add_overflow(store_ts, (long long)ts_delta, &msg_ts)) msg_ts = LLONG_MAX;
        if (phys < end_phy || (phys == end_phy && (end_phy > 0 || count > 1))) { i = j; continue; }
        long long need = keys < index_num - 1 ? keys : index_num - 1;
        if (index_num - count < need) break; /* a new file first */
        long long fit = index_num - count;
        if (fit > keys) fit = keys;
        /* the seconds since begin_ts (floor, within 0..INT_MAX), as IndexFile.put_keys */
        long long diff = 0, delta;
        if (begin_ts <= 0) {
            diff = 0;
        } else if (__builtin_sub_overflow(msg_ts, begin_ts, &delta)) {
            diff = msg_ts > begin_ts ? INT_MAX32 : 0;
        } else {
            diff = delta / 1000;
            if (delta < 0 && delta % 1000) diff -= 1;
            if (diff < 0) diff = 0;
            if (diff > INT_MAX32) diff = INT_MAX32;
        }
        if (count <= 1) { begin_phy = phys; begin_ts = msg_ts; }
        long long first = count;
        /* Plan every key as put_keys does: the entry it chains to is the newest key of this
         * message in the same slot, else the slot's valid value, else 0 (a new slot). */
        key_plan plan;
        if (plan_begin(&plan, fit) < 0) goto done;
        long long new_slots = slot_count;
        for (long long k = 0; k < fit; k++) {
            uint32_t h;
            memcpy(&h, e + (i + k) * INDEX_ENTRY_OUT, 4);
            uint64_t slot = h % (uint64_t)slots;
            long long abs_slot = INDEX_HEADER + (long long)slot * INDEX_SLOT;
            long long prev = plan_swap(&plan, slot, first + k);
            if (prev < 0) {
                prev = (int32_t)rd32(mm + abs_slot);
                if (prev <= 0 || prev > first) { prev = 0; new_slots++; }
            }
            plan.prev[k] = prev;
            plan.slot_at[k] = abs_slot;
        }
        count = first + fit;
        slot_count = new_slots;
        end_phy = phys;
        end_ts = msg_ts;
        /* Crash order (IndexFile.put_keys): header first, then each entry before its slot. */
        be64(mm, (uint64_t)begin_ts); be64(mm + 8, (uint64_t)end_ts);
        be64(mm + 16, (uint64_t)begin_phy); be64(mm + 24, (uint64_t)end_phy);
        be32(mm + 32, (uint32_t)slot_count); be32(mm + 36, (uint32_t)count);
        for (long long k = 0; k < fit; k++) {
            uint32_t h;
            memcpy(&h, e + (i + k) * INDEX_ENTRY_OUT, 4);
            unsigned char *ent = mm + base + (first + k) * INDEX_ENTRY;
            be32(ent, h);
            be64(ent + 4, (uint64_t)phys);
            be32(ent + 12, (uint32_t)diff);
            be32(ent + 16, (uint32_t)plan.prev[k]);
            be32(mm + plan.slot_at[k], (uint32_t)(first + k));
        }
        PyMem_Free(plan.heap);
        i = j;
    }
    result = Py_BuildValue("(LLLLLL)n", begin_ts, end_ts, begin_phy, end_phy, slot_count, count, i);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&entries);
    return result;
}

PyMethodDef apogee_hashes_methods[] = {
    {"java_hash", java_hash, METH_VARARGS, java_hash_doc},
    {"index_hashes", index_hashes, METH_VARARGS, index_hashes_doc},
    {"index_put", index_put, METH_VARARGS, index_put_doc},
    {NULL, NULL, 0, NULL},
};
