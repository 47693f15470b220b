/*
 * The broker's reads: a pull's ConsumeQueue entries -> the stored records it answers with
 * (collect_records, the fast path of store/reads.py StoreReader._collect).
 *
 * Rule, as everywhere in the extension: the pure-Python loop stays the specification.  This
 * function only takes the common case -- every record it returns in one mapped CommitLog file,
 * every entry it looks at well formed and in memory, a tag filter given as a few hash codes --
 * and answers None for anything else (a bad entry, a record in another file or not yet
 * written, an expired file, data far behind the head, an unusual filter), so the Python loop
 * decides, logs and answers exactly as before.
 */
#include "native.h"

#define MAX_TAG_CODES 64

/* A ConsumeQueue unit: phys int64, size int32, tags code int64 (big-endian, layout/cq_unit). */
static inline void read_unit(const unsigned char *u, int64_t *phys, int32_t *size, int64_t *tags) {
    *phys = rd64(u);
    *size = (int32_t)rd32(u + 8);
    *tags = rd64(u + 12);
}

/* The tag codes of a TagCodeFilter (None: every message) as a C array; 0 to decline (not a
 * set of at most MAX_TAG_CODES exact ints in the int64 range).  Reads the set only: no Python
 * code runs. */
static int tag_codes(PyObject *codes, int64_t *out, Py_ssize_t *n) {
    *n = -1;
    if (codes == Py_None) return 1;
    if (!PyAnySet_CheckExact(codes) || PySet_GET_SIZE(codes) > MAX_TAG_CODES) return 0;
    Py_ssize_t pos = 0, k = 0;
    PyObject *key;
    Py_hash_t hash;
    while (_PySet_NextEntry(codes, &pos, &key, &hash)) {
        if (!PyLong_CheckExact(key) || k >= MAX_TAG_CODES) return 0;
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(key, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        out[k++] = v;
    }
    *n = k;
    return 1;
}

static inline int tag_matches(int64_t tags, const int64_t *codes, Py_ssize_t n) {
    if (n < 0) return 1;
    for (Py_ssize_t i = 0; i < n; i++)
        if (codes[i] == tags) return 1;
    return 0;
}

PyDoc_STRVAR(collect_records_doc,
"collect_records(entries, file, file_start: int, file_wrote: int, first_offset: int,\n"
"                max_msg_nums: int, max_total_bytes: int, max_bytes: int, max_count: int,\n"
"                low_phys: int, codes: set[int] | frozenset[int] | None)\n"
"    -> (body: bytes, queue_offsets: list[int], consumed: int, last_phys: int) | None\n\n"
"StoreReader._collect for a pull whose records all lie in one mapped CommitLog file: walks the\n"
"whole ConsumeQueue units of `entries` (queue offset first_offset onwards), stops where\n"
"_collect's batch limits stop it (max_msg_nums, max_total_bytes, and the in-memory limits\n"
"max_bytes and max_count; the first message always goes), skips entries whose tags code is\n"
"not in `codes` (None: every entry), and copies the records of the others, in order, into\n"
"one bytes object.  `file` holds CommitLog offsets file_start .. file_start + file_wrote.\n"
"consumed = entries walked (the next begin offset is first_offset + consumed); last_phys =\n"
"the CommitLog offset of the last entry looked at.  None (the Python loop decides) when an\n"
"entry looked at has a size <= 0 or a CommitLog offset below low_phys (expired, or far\n"
"enough behind the head to be read from disk), a record to return lies outside the file's\n"
"written bytes, there are no whole units, or `codes` is not a set of at most 64 ints.");

static PyObject *collect_records(PyObject *self, PyObject *args) {
    Py_buffer entries, file;
    long long file_start, file_wrote, first_offset, max_msgs, max_total, max_bytes, max_count, low_phys;
    PyObject *codes_obj;
    if (!PyArg_ParseTuple(args, "y*y*LLLLLLLLO", &entries, &file, &file_start, &file_wrote, &first_offset,
                          &max_msgs, &max_total, &max_bytes, &max_count, &low_phys, &codes_obj))
        return NULL;
    PyObject *out = NULL, *body = NULL, *offsets = NULL;
    int64_t codes[MAX_TAG_CODES];
    Py_ssize_t ncodes;
    Py_ssize_t nunits = entries.len / CQ_UNIT;
    if (!tag_codes(codes_obj, codes, &ncodes) || nunits <= 0 || file_start < 0 || file_wrote < 0 ||
        file_wrote > file.len || first_offset < 0 || first_offset > INT64_MAX - nunits) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    const unsigned char *units = entries.buf;
    const int64_t file_end = file_start + file_wrote; /* both below 2^63: no overflow */
    /* Pass 1: _collect's loop, deciding only: which entries, how many bytes, where it stops. */
    int64_t total = 0, count = 0, last_phys = 0, phys, tags;
    int32_t size;
    Py_ssize_t consumed = nunits;
    for (Py_ssize_t i = 0; i < nunits; i++) {
        read_unit(units + i * CQ_UNIT, &phys, &size, &tags);
        last_phys = phys;
        if (size <= 0 || phys < low_phys) goto decline;
        if (count) { /* RocketMQ isTheBatchFull; the first message always goes */
            if (count >= max_msgs || total + size > max_total || total + size > max_bytes || count >= max_count) {
                consumed = i;
                break;
            }
        }
        if (!tag_matches(tags, codes, ncodes)) continue;
        if (phys < file_start || phys > file_end - size) goto decline;
        total += size;
        count++;
    }
    if (total > PY_SSIZE_T_MAX) goto decline;
    body = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    offsets = body ? PyList_New((Py_ssize_t)count) : NULL;
    if (!offsets) goto done;
    /* Pass 2: copy the records chosen.  The allocations above may have run a finalizer, so
     * every entry is checked again rather than trusted from pass 1; a change declines. */
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(body);
    const unsigned char *w_end = w + total, *f = file.buf;
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < consumed; i++) {
        read_unit(units + i * CQ_UNIT, &phys, &size, &tags);
        if (!tag_matches(tags, codes, ncodes)) continue;
        if (size <= 0 || phys < file_start || phys > file_end - size || k >= (Py_ssize_t)count ||
            w_end - w < size)
            goto decline;
        memcpy(w, f + (phys - file_start), (size_t)size);
        w += size;
        PyObject *qo = PyLong_FromLongLong(first_offset + i);
        if (!qo) goto done;
        PyList_SET_ITEM(offsets, k++, qo);
    }
    if (k != (Py_ssize_t)count || w != w_end) goto decline;
    out = Py_BuildValue("(OOnL)", body, offsets, consumed, (long long)last_phys);
    goto done;
decline:
    out = Py_None;
    Py_INCREF(out);
done:
    Py_XDECREF(body);
    Py_XDECREF(offsets);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&file);
    return out;
}

PyMethodDef apogee_reads_methods[] = {
    {"collect_records", collect_records, METH_VARARGS, collect_records_doc},
    {NULL, NULL, 0, NULL},
};
