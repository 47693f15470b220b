/*
 * The broker's reads: a pull's header fields (pull_fields, the fast path of
 * PullMessageRequestHeader.decode), and its ConsumeQueue entries -> the stored records it
 * answers with (collect_records, the fast path of store/reads.py StoreReader._collect).
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

/* ---- Records: the buffer a pull's records are copied into -------------------------------------
 *
 * A pull answers some 40 kB; a fresh malloc of that size per pull lands on pages the allocator
 * just gave back to the kernel (heap trimming), and the copy then faults every page in and the
 * kernel zeroes it first: more CPU than the copy itself.  So the buffers of the usual sizes are
 * kept for reuse, a few per size class.  Records exposes them read-only through the buffer
 * protocol; collect_records hands out a memoryview of one, like the CommitLog slices of the
 * Python path, and the memory goes back to the pool when the last view of it is dropped.  The
 * GIL guards the pool.  Under AddressSanitizer nothing is kept, so a use after free is seen. */

#define POOL_CLASSES 3      /* 64, 128, 256 KiB */
#define POOL_SMALLEST (64 * 1024)
#define POOL_SLOTS 64
/* Buffers kept per class, 4 MiB each at most: as many as pulls usually in flight on a broker. */
#if defined(__SANITIZE_ADDRESS__)
static const int pool_depth[POOL_CLASSES] = {0, 0, 0};
#else
static const int pool_depth[POOL_CLASSES] = {64, 32, 16};
#endif

static char *pool[POOL_CLASSES][POOL_SLOTS];
static int pool_count[POOL_CLASSES];

typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t len;
    int size_class; /* -1: allocated for this size alone */
} Records;

static int size_class(Py_ssize_t n) {
    for (int k = 0; k < POOL_CLASSES; k++)
        if (n <= ((Py_ssize_t)POOL_SMALLEST << k)) return k;
    return -1;
}

static void records_dealloc(PyObject *o) {
    Records *r = (Records *)o;
    int k = r->size_class;
    if (k >= 0 && pool_count[k] < pool_depth[k])
        pool[k][pool_count[k]++] = r->data;
    else
        PyMem_RawFree(r->data);
    Py_TYPE(o)->tp_free(o);
}

static int records_getbuffer(PyObject *o, Py_buffer *view, int flags) {
    Records *r = (Records *)o;
    return PyBuffer_FillInfo(view, o, r->data, r->len, 1, flags);
}

static Py_ssize_t records_length(PyObject *o) { return ((Records *)o)->len; }

static PyBufferProcs records_as_buffer = {records_getbuffer, NULL};
static PySequenceMethods records_as_sequence = {.sq_length = records_length};

static PyTypeObject RecordsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "apogee._native.Records",
    .tp_doc = "A pull's records, copied by collect_records (read-only buffer).",
    .tp_basicsize = sizeof(Records),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = records_dealloc,
    .tp_as_buffer = &records_as_buffer,
    .tp_as_sequence = &records_as_sequence,
};

/* A Records of n bytes (contents undefined), from the pool when one of its class is kept. */
static Records *records_new(Py_ssize_t n) {
    if (PyType_Ready(&RecordsType) < 0) return NULL;
    int k = size_class(n);
    char *data;
    if (k >= 0 && pool_count[k] > 0) {
        data = pool[k][--pool_count[k]];
    } else {
        data = PyMem_RawMalloc(k >= 0 ? ((size_t)POOL_SMALLEST << k) : (size_t)(n > 0 ? n : 1));
        if (!data) return (Records *)PyErr_NoMemory();
    }
    Records *r = PyObject_New(Records, &RecordsType);
    if (!r) {
        if (k >= 0 && pool_count[k] < pool_depth[k])
            pool[k][pool_count[k]++] = data;
        else
            PyMem_RawFree(data);
        return NULL;
    }
    r->data = data;
    r->len = n;
    r->size_class = k;
    return r;
}

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
"collect_records(entries, max_units: int, file, file_start: int, file_wrote: int,\n"
"                first_offset: int, max_msg_nums: int, max_total_bytes: int, max_bytes: int,\n"
"                max_count: int, low_phys: int, codes: set[int] | frozenset[int] | None)\n"
"    -> (body: memoryview, queue_offsets: list[int], consumed: int, last_phys: int) | None\n\n"
"StoreReader._collect for a pull whose records all lie in one mapped CommitLog file: walks the\n"
"whole ConsumeQueue units of `entries` (queue offset first_offset onwards; max_units of them\n"
"at most), stops where\n"
"_collect's batch limits stop it (max_msg_nums, max_total_bytes, and the in-memory limits\n"
"max_bytes and max_count; the first message always goes), skips entries whose tags code is\n"
"not in `codes` (None: every entry), and copies the records of the others, in order, into\n"
"one read-only buffer (body).  `file` holds CommitLog offsets file_start .. file_start +\n"
"file_wrote.\n"
"consumed = entries walked (the next begin offset is first_offset + consumed); last_phys =\n"
"the CommitLog offset of the last entry looked at.  None (the Python loop decides) when an\n"
"entry looked at has a size <= 0 or a CommitLog offset below low_phys (expired, or far\n"
"enough behind the head to be read from disk), a record to return lies outside the file's\n"
"written bytes, there are no whole units, or `codes` is not a set of at most 64 ints.");

static PyObject *collect_records(PyObject *self, PyObject *args) {
    Py_buffer entries, file;
    Py_ssize_t max_units;
    long long file_start, file_wrote, first_offset, max_msgs, max_total, max_bytes, max_count, low_phys;
    PyObject *codes_obj;
    if (!PyArg_ParseTuple(args, "y*ny*LLLLLLLLO", &entries, &max_units, &file, &file_start, &file_wrote,
                          &first_offset, &max_msgs, &max_total, &max_bytes, &max_count, &low_phys, &codes_obj))
        return NULL;
    PyObject *out = NULL, *offsets = NULL;
    Records *body = NULL;
    int64_t codes[MAX_TAG_CODES];
    Py_ssize_t ncodes;
    Py_ssize_t nunits = entries.len / CQ_UNIT;
    if (nunits > max_units) nunits = max_units;
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
    body = records_new((Py_ssize_t)total);
    offsets = body ? PyList_New((Py_ssize_t)count) : NULL;
    if (!offsets) goto done;
    /* Pass 2: copy the records chosen.  The allocations above may have run a finalizer, so
     * every entry is checked again rather than trusted from pass 1; a change declines. */
    unsigned char *w = (unsigned char *)body->data;
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
    PyObject *view = PyMemoryView_FromObject((PyObject *)body);
    if (!view) goto done;
    out = Py_BuildValue("(NOnL)", view, offsets, consumed, (long long)last_phys);
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

PyDoc_STRVAR(pull_fields_doc,
"pull_fields(ext: dict, keys: tuple[str, ...]) -> tuple | None\n\n"
"The fields of a PULL_MESSAGE header for PullProcessor's fast path (keys: the wire keys of\n"
"consumerGroup, topic, queueId, queueOffset, maxMsgNums, sysFlag, commitOffset,\n"
"suspendTimeoutMillis, subVersion, subscription and expressionType, in that order):\n"
"(consumer_group, topic, queue_id, queue_offset, max_msg_nums, sys_flag, commit_offset,\n"
"suspend_timeout_millis, sub_version, subscription, expression_type), as\n"
"PullMessageRequestHeader.decode reads them.  None when the full decoder must judge: a\n"
"required field missing, a text field that is not a str (the last two may also be absent or\n"
"null: None), a number that is not a JSON int or plain ASCII [-]digits, or one outside its\n"
"Java type.");

static PyObject *pull_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyDict_CheckExact(args[0]) || !PyTuple_CheckExact(args[1]) || PyTuple_GET_SIZE(args[1]) != 11) {
        PyErr_SetString(PyExc_TypeError, "pull_fields(ext: dict, keys: 11-tuple)");
        return NULL;
    }
    PyObject *ext = args[0], *keys = args[1], *v[11], *out = NULL;
    if (!field_values(ext, keys, v, 11)) return NULL;
    /* Java types: queueId, maxMsgNums, sysFlag are Integers; the rest Longs. */
    static const long long lo32 = -2147483648LL, hi32 = 2147483647LL;
    static const long long lo64 = INT64_MIN, hi64 = INT64_MAX;
    const long long lo[7] = {lo32, lo64, lo32, lo32, lo64, lo64, lo64};
    const long long hi[7] = {hi32, hi64, hi32, hi32, hi64, hi64, hi64};
    long long n[7];
    if (!v[0] || !PyUnicode_CheckExact(v[0]) || !v[1] || !PyUnicode_CheckExact(v[1])) goto decline;
    for (int i = 0; i < 7; i++)
        if (!v[2 + i] || !field_int(v[2 + i], lo[i], hi[i], &n[i])) goto decline;
    for (int i = 9; i < 11; i++) {
        if (!v[i] || v[i] == Py_None) {
            Py_INCREF(Py_None);
            Py_XSETREF(v[i], Py_None);
        } else if (!PyUnicode_CheckExact(v[i])) {
            goto decline;
        }
    }
    out = Py_BuildValue("OOLLLLLLLOO", v[0], v[1], n[0], n[1], n[2], n[3], n[4], n[5], n[6], v[9], v[10]);
    goto done;
decline:
    out = Py_None;
    Py_INCREF(out);
done:
    for (int k = 0; k < 11; k++) Py_XDECREF(v[k]);
    return out;
}

PyMethodDef apogee_reads_methods[] = {
    {"pull_fields", (PyCFunction)(void (*)(void))pull_fields, METH_FASTCALL, pull_fields_doc},
    {"collect_records", collect_records, METH_VARARGS, collect_records_doc},
    {NULL, NULL, 0, NULL},
};
