/*
 * The client's per-message work: a producer's batch body (encode_batch, batch_append),
 * properties strings, UNIQ_KEY, the results of a batch send (complete_sends), and a PULL
 * body decoded into MessageExt objects (decode_records).
 */
#include "native.h"
#include <time.h>

/* ---- client side: batch body ------------------------------------------------------------------ */

/* One client batch item up to its properties: TOTALSIZE, MAGIC 0, BODYCRC 0, FLAG, BODYLEN, body,
 * PROPLEN.  The caller has checked that BATCH_HEAD + blen + 2 bytes fit at w.  Returns where
 * the properties go. */
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

/* The size of a batch item, or -1 when its TOTALSIZE would not be a 32-bit int. */
static inline Py_ssize_t batch_item_size(Py_ssize_t blen, Py_ssize_t plen) {
    return blen > INT_MAX32 - BATCH_HEAD - 2 - plen ? -1 : BATCH_HEAD + blen + 2 + plen;
}

/* An int32 flag from an int (no __index__: converting it runs no Python code); 0 otherwise. */
static int int32_flag(PyObject *o, int32_t *out) {
    if (!PyLong_Check(o)) return 0;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || v < -2147483648LL || v > 2147483647LL) return 0;
    *out = (int32_t)v;
    return 1;
}

PyDoc_STRVAR(encode_batch_doc,
"encode_batch(items: list[tuple[int, bytes, str]]) -> bytes\n\n"
"The client batch body (reference: apogee.common.message_codec.encode_batch, for items whose\n"
"properties are already strings).  ValueError past 32767 property bytes.  TypeError for\n"
"anything else the reference must judge: an item that is not (int, bytes, str), a flag that\n"
"is not an int within int32 (an object with __index__ included), an item over 2 GiB.");

#define ITEMS_TYPE_ERROR "items must be (flag: int32, body: bytes, properties: str), at most 2 GiB each"

static PyObject *encode_batch(PyObject *self, PyObject *arg) {
    /* Iterating a non-list may run Python code; from here on nothing does (every check below
     * only reads ints, bytes and str), so the items sized are the items written. */
    PyObject *seq = PySequence_Fast(arg, "items must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), total = 0;
    PyObject *result = NULL;
    int32_t stack_flags[64], *flags = stack_flags; /* the flags read by the sizing pass */
    if (n > 64 && !(flags = PyMem_Malloc(n * sizeof(int32_t)))) { Py_DECREF(seq); return PyErr_NoMemory(); }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 3 || !int32_flag(PyTuple_GET_ITEM(it, 0), &flags[i]) ||
            !PyBytes_Check(PyTuple_GET_ITEM(it, 1)) || !PyUnicode_Check(PyTuple_GET_ITEM(it, 2))) {
            PyErr_SetString(PyExc_TypeError, ITEMS_TYPE_ERROR);
            goto done;
        }
        Py_ssize_t plen;
        if (!PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(it, 2), &plen)) goto done;
        if (plen > MAX_PROPERTIES) {
            PyErr_SetString(PyExc_ValueError, "batch item properties longer than 32767 bytes");
            goto done;
        }
        Py_ssize_t size = batch_item_size(PyBytes_GET_SIZE(PyTuple_GET_ITEM(it, 1)), plen);
        if (size < 0) {
            PyErr_SetString(PyExc_TypeError, ITEMS_TYPE_ERROR);
            goto done;
        }
        if (size > PY_SSIZE_T_MAX - total) { PyErr_NoMemory(); goto done; }
        total += size;
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (!result) goto done;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(result), *end = w + total;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = i < PySequence_Fast_GET_SIZE(seq) ? PySequence_Fast_GET_ITEM(seq, i) : NULL;
        Py_ssize_t plen;
        const char *pu;
        if (!it || !PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 3 || !PyBytes_Check(PyTuple_GET_ITEM(it, 1)) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(it, 2)) || !(pu = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(it, 2), &plen))) {
            PyErr_SetString(PyExc_RuntimeError, "the items changed while being encoded");
            Py_CLEAR(result);
            goto done;
        }
        PyObject *bo = PyTuple_GET_ITEM(it, 1);
        Py_ssize_t blen = PyBytes_GET_SIZE(bo), size = batch_item_size(blen, plen);
        if (size < 0 || end - w < size) {
            PyErr_SetString(PyExc_RuntimeError, "the items changed while being encoded");
            Py_CLEAR(result);
            goto done;
        }
        w = put_batch_item_head(w, (uint32_t)flags[i], PyBytes_AS_STRING(bo), blen, plen);
        memcpy(w, pu, plen);
        w += plen;
    }
    if (w != end) {
        PyErr_SetString(PyExc_RuntimeError, "the items changed while being encoded");
        Py_CLEAR(result);
    }
done:
    if (flags != stack_flags) PyMem_Free(flags);
    Py_DECREF(seq);
    return result;
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
    int strict = nargs == 2 ? PyObject_IsTrue(args[1]) : 0;  /* may run Python code: first */
    if (strict < 0) return NULL;
    if (!PyDict_CheckExact(d)) { PyErr_SetString(PyExc_TypeError, "a dict is required"); return NULL; }
    /* Both passes only read exact str keys and values: no Python code runs between them. */
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
    int kind = PyUnicode_KIND(out);
    void *data = PyUnicode_DATA(out);
    Py_ssize_t at = 0, i = 0;
    it = 0;
    while (PyDict_Next(d, &it, &k, &v)) {
        if (v == Py_None) continue;
        Py_ssize_t kl = PyUnicode_GET_LENGTH(k), vl = PyUnicode_GET_LENGTH(v);
        if (len - at < (i ? 1 : 0) + kl + 1 + vl) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_RuntimeError, "the properties changed while being joined");
            return NULL;
        }
        if (i++) PyUnicode_WRITE(kind, data, at++, 0x02);
        if (PyUnicode_CopyCharacters(out, at, k, 0, kl) < 0) { Py_DECREF(out); return NULL; }
        at += kl;
        PyUnicode_WRITE(kind, data, at++, 0x01);
        if (PyUnicode_CopyCharacters(out, at, v, 0, vl) < 0) { Py_DECREF(out); return NULL; }
        at += vl;
    }
    if (at != len) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_RuntimeError, "the properties changed while being joined");
        return NULL;
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
    uint32_t m = (uint32_t)((unsigned long long)now - (unsigned long long)start); /* & 0xFFFFFFFF */
    for (int k = 7; k >= 0; k--) { w[k] = HEX[m & 15]; m >>= 4; }
    uint32_t q = (uint32_t)seq & 0xFFFF;
    for (int k = 11; k >= 8; k--) { w[k] = HEX[q & 15]; q >>= 4; }
    return out;
}

PyDoc_STRVAR(uniq_id_now_doc,
"uniq_id_now(prefix: str, start_ms: int, next_start_ms: int, seq: int) -> str | None\n\n"
"prefix + %08X of (now_ms - start_ms) + %04X of seq (low 16 bits), now_ms read from the wall\n"
"clock here (reference: uniq_id.UniqIdGenerator.next_id); None once\n"
"now_ms >= next_start_ms (the month rolled over: the caller recomputes its start).");

static PyObject *uniq_id_now(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    /* METH_FASTCALL: called once per message sent. */
    if (nargs != 4 || !PyUnicode_Check(args[0]) || !PyUnicode_IS_ASCII(args[0])) {
        PyErr_SetString(PyExc_TypeError, "uniq_id_now(prefix: str (ASCII), start_ms, next_start_ms, seq)");
        return NULL;
    }
    long long start = PyLong_AsLongLong(args[1]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    long long next_start = PyLong_AsLongLong(args[2]);
    if (next_start == -1 && PyErr_Occurred()) return NULL;
    unsigned long long seq = PyLong_AsUnsignedLongLongMask(args[3]);
    if (seq == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
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
"None, with buf unchanged, for anything the producer's checked path must decide: a flag\n"
"beyond int32, a property strict properties_to_string refuses, properties over 32767 UTF-8\n"
"bytes, an item over 2 GiB, or the month rolled over (reference: Producer._append_py).");

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
    /* The conversions may run Python code (__index__): all of them before anything is read. */
    int overflow;
    long long flag = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (flag == -1 && PyErr_Occurred()) return NULL;
    long long start = PyLong_AsLongLong(args[5]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    long long next_start = PyLong_AsLongLong(args[6]);
    if (next_start == -1 && PyErr_Occurred()) return NULL;
    unsigned long long seq = PyLong_AsUnsignedLongLongMask(args[7]);
    if (seq == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (overflow || flag < -2147483648LL || flag > 2147483647LL) Py_RETURN_NONE;
    if (!UNIQ_KEY_NAME && !(UNIQ_KEY_NAME = PyUnicode_InternFromString("UNIQ_KEY"))) return NULL;

    /* The lookup and the store may run Python code (a key's __eq__): uniq is held throughout. */
    PyObject *uniq = PyDict_GetItemWithError(props, UNIQ_KEY_NAME);
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

    /* properties, strictly: str names and values, no empty name, no separator inside.  From
     * here on no Python code runs: the second pass writes what the first one measured. */
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
    Py_ssize_t size = batch_item_size(blen, plen);
    if (size < 0) goto refuse;
    if (size > PY_SSIZE_T_MAX - old) { Py_DECREF(uniq); return PyErr_NoMemory(); }
    if (PyByteArray_Resize(buf, old + size) < 0) { Py_DECREF(uniq); return NULL; }
    unsigned char *start_w = (unsigned char *)PyByteArray_AS_STRING(buf) + old, *end = start_w + size;
    unsigned char *w = put_batch_item_head(start_w, (uint32_t)flag, PyBytes_AS_STRING(body), blen, plen);
    Py_ssize_t i = 0;
    it = 0;
    while (PyDict_Next(props, &it, &k, &v)) {
        Py_ssize_t kl, vl;
        const char *ks = PyUnicode_AsUTF8AndSize(k, &kl), *vs = PyUnicode_AsUTF8AndSize(v, &vl);
        if (!ks || !vs || end - w < (i ? 1 : 0) + kl + 1 + vl) {
            PyErr_Clear();
            PyByteArray_Resize(buf, old);
            Py_DECREF(uniq);
            PyErr_SetString(PyExc_RuntimeError, "the properties changed while being appended");
            return NULL;
        }
        if (i++) *w++ = 0x02;
        memcpy(w, ks, kl); w += kl;
        *w++ = 0x01;
        memcpy(w, vs, vl); w += vl;
    }
    if (w != end) {
        PyByteArray_Resize(buf, old);
        Py_DECREF(uniq);
        PyErr_SetString(PyExc_RuntimeError, "the properties changed while being appended");
        return NULL;
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
"region, trace), built as a tuple (a NamedTuple) without result_type.__new__'s checks, set as the\n"
"result of futures[i] unless that future is done (reference: api.parse_send_response + the\n"
"loop in Producer._batch_done).  The three lists must have the same length (ValueError, and\n"
"RuntimeError if a future's done() or set_result changes them).  The results are not tracked\n"
"by the cyclic garbage collector, so no value given (status, mq, the ids, region, trace) may\n"
"ever refer to a result.");

/* 1 when instances of t are plain tuples, so that one built by tp_alloc and filled item by
 * item is whole: tuple itself, or classes declaring __slots__ = () down to it (a NamedTuple).
 * Not a C subclass of tuple (a struct sequence keeps fields past its visible items). */
static int plain_tuple_type(PyTypeObject *t) {
    for (; t && t != &PyTuple_Type; t = t->tp_base) {
        if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE)) return 0;
        PyObject *declared = ((PyHeapTypeObject *)t)->ht_slots;
        if (!declared || !PyTuple_Check(declared) || PyTuple_GET_SIZE(declared) != 0) return 0;
    }
    return t == &PyTuple_Type;
}

static PyObject *complete_sends(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9 || !PyList_CheckExact(args[0]) || !PyType_Check(args[1]) ||
        !plain_tuple_type((PyTypeObject *)args[1]) || !PyList_CheckExact(args[3]) || !PyList_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "complete_sends(futures: list, result_type: tuple or a NamedTuple, status, uniqs: list, "
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
    /* done(), bool(uniq) and set_result run Python code that may change the lists: each item
     * is held while it is used, and the lengths are checked again before each read. */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_GET_SIZE(futures) != n) goto changed;
        PyObject *fut = PyList_GET_ITEM(futures, i);
        Py_INCREF(fut);
        PyObject *d = PyObject_CallMethodNoArgs(fut, done_name);
        if (!d) { Py_DECREF(fut); return NULL; }
        int is_done = PyObject_IsTrue(d);
        Py_DECREF(d);
        if (is_done) { Py_DECREF(fut); if (is_done < 0) return NULL; continue; }
        if (PyList_GET_SIZE(uniqs) != n || PyList_GET_SIZE(ids) != n) { Py_DECREF(fut); goto changed; }
        PyObject *uniq = PyList_GET_ITEM(uniqs, i), *oid = PyList_GET_ITEM(ids, i);
        Py_INCREF(uniq);
        Py_INCREF(oid);
        int has_uniq = PyObject_IsTrue(uniq);
        PyObject *off = has_uniq < 0 ? NULL : PyLong_FromLongLong((long long)((unsigned long long)first + (unsigned long long)i));
        PyObject *r = off ? rt->tp_alloc(rt, 7) : NULL;
        if (!r) {
            Py_XDECREF(off); Py_DECREF(uniq); Py_DECREF(oid); Py_DECREF(fut);
            return NULL;
        }
        PyObject *vals[7] = {args[2], has_uniq ? uniq : oid, oid, args[5], off, args[7], args[8]};
        for (int j = 0; j < 7; j++) {
            if (j != 4) Py_INCREF(vals[j]);
            PyTuple_SET_ITEM(r, j, vals[j]);
        }
        Py_DECREF(uniq);
        Py_DECREF(oid);
        /* No reference cycle can run through r: it is immutable and its items were made
         * before it -- the ids, offset, region and trace (str, int, bool), the caller's status
         * and mq, which refer to no result (an enum member, a MessageQueue of str and int).  So the cyclic collector
         * need not track it, as CPython untracks tuples of atoms itself (but not instances of
         * a tuple subclass).  An application that keeps many futures alive keeps their
         * results: every full collection walked each of them (docs/client.md). */
        PyObject_GC_UnTrack(r);
        PyObject *ok = PyObject_CallMethodOneArg(fut, set_result_name, r);
        Py_DECREF(r);
        Py_DECREF(fut);
        if (!ok) return NULL;
        Py_DECREF(ok);
    }
    Py_RETURN_NONE;
changed:
    PyErr_SetString(PyExc_RuntimeError, "futures, uniqs or offset_ids changed while completing the sends");
    return NULL;
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
static PyTypeObject *ext_type = NULL; /* held: its offsets stay valid while it is cached */
static Py_ssize_t ext_offsets[N_EXT_FIELDS];

static int bind_ext_type(PyObject *cls) {
    if ((PyObject *)ext_type == cls) return 0;
    if (!PyType_Check(cls)) { PyErr_SetString(PyExc_TypeError, "cls must be a type"); return -1; }
    Py_ssize_t offsets[N_EXT_FIELDS];
    for (int i = 0; i < N_EXT_FIELDS; i++) {
        PyObject *name = PyUnicode_InternFromString(EXT_FIELDS[i]);
        if (!name) return -1;
        int ok = python_slot_offset((PyTypeObject *)cls, name, &offsets[i]);
        Py_DECREF(name);
        if (!ok) return -1;
    }
    memcpy(ext_offsets, offsets, sizeof(offsets));
    Py_INCREF(cls);
    Py_XSETREF(ext_type, (PyTypeObject *)cls);
    return 0;
}

/* A record's host (4 address bytes, then the port) as MessageExt keeps it: ("a.b.c.d", port).
 * The few hosts a client sees (its producers, its brokers) come back on every pull, and a pull
 * of one message would otherwise format two addresses (PyUnicode_FromFormat and
 * Py_BuildValue: ~9,000 instructions, a tenth of a one-message pull), so the last HOSTS_KEPT
 * pairs are kept across calls.  A pair is an immutable tuple of a str and an int. */
#define HOSTS_KEPT 8
static unsigned char host_keys[HOSTS_KEPT][8];
static PyObject *host_pairs[HOSTS_KEPT];
static int host_next;

static PyObject *host_pair(const unsigned char *h) {
    for (int i = 0; i < HOSTS_KEPT; i++) {
        if (host_pairs[i] && memcmp(host_keys[i], h, 8) == 0) {
            Py_INCREF(host_pairs[i]);
            return host_pairs[i];
        }
    }
    char text[16]; /* "255.255.255.255" */
    char *w = text;
    for (int k = 0; k < 4; k++) {
        unsigned v = h[k];
        if (k) *w++ = '.';
        if (v >= 100) *w++ = (char)('0' + v / 100);
        if (v >= 10) *w++ = (char)('0' + v / 10 % 10);
        *w++ = (char)('0' + v % 10);
    }
    PyObject *ip = PyUnicode_FromStringAndSize(text, w - text);
    if (!ip) return NULL;
    PyObject *port = PyLong_FromLong((int32_t)rd32(h + 4));
    if (!port) { Py_DECREF(ip); return NULL; }
    PyObject *pair = PyTuple_New(2);
    if (!pair) { Py_DECREF(ip); Py_DECREF(port); return NULL; }
    PyTuple_SET_ITEM(pair, 0, ip);
    PyTuple_SET_ITEM(pair, 1, port);
    Py_INCREF(pair);
    PyObject *old = host_pairs[host_next]; /* a tuple of a str and an int: its release runs no Python code */
    host_pairs[host_next] = pair;
    memcpy(host_keys[host_next], h, 8);
    host_next = (host_next + 1) % HOSTS_KEPT;
    Py_XDECREF(old);
    return pair;
}

#define NAME_CACHE 16

PyDoc_STRVAR(decode_records_doc,
"decode_records(buf: bytes, pos: int, cls: type) -> (list, stop)\n\n"
"Decode the records of a PULL body from pos into cls (MessageExt) objects, exactly as\n"
"message_codec.decode_records_fast does, until the end, a blank or malformed record, or a\n"
"record the C path leaves to Python (IPv6 hosts, a compressed body, text that is not valid\n"
"UTF-8); stop is that record's position (pos itself at or past the end).  ValueError for a\n"
"negative pos; TypeError for a cls without MessageExt's slots.");

static PyObject *decode_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    PyObject *cls;
    if (!PyArg_ParseTuple(args, "y*nO", &view, &pos, &cls)) return NULL;
    if (pos < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "pos must not be negative");
        return NULL;
    }
    if (bind_ext_type(cls) < 0) { PyBuffer_Release(&view); return NULL; }
    PyTypeObject *type = ext_type;
    Py_INCREF(type); /* a finalizer run by an allocation below may bind another class */
    Py_ssize_t offsets[N_EXT_FIELDS];
    memcpy(offsets, ext_offsets, sizeof(offsets));
    const unsigned char *b = view.buf;
    Py_ssize_t end = view.len;
    PyObject *out = PyList_New(0);
    PyObject *topic = NULL, *born = NULL, *store = NULL, *uniq_name = NULL;
    unsigned char last_topic[256];
    Py_ssize_t last_topic_len = -1;
    PyObject *names[NAME_CACHE];
    Py_ssize_t nnames = 0;
    PyObject *vals[N_EXT_FIELDS];
    if (!out) goto fail;
    uniq_name = PyUnicode_FromString("UNIQ_KEY");
    if (!uniq_name) goto fail;
    while (pos <= end - 8) {
        const unsigned char *r = b + pos;
        Py_ssize_t total = (int32_t)rd32(r);
        uint32_t magic = rd32(r + 4);
        if (magic != MAGIC_CODE || total < RECORD_FIXED + 3 || total > end - pos) break;
        int32_t sysflag = (int32_t)rd32(r + 36);
        if (sysflag & (0x10 | 0x20 | 0x1)) break; /* IPv6 hosts or compressed: Python */
        Py_ssize_t body_len = (int32_t)rd32(r + 84);
        if (body_len < 0 || body_len > total - RECORD_FIXED - 3) break;
        const unsigned char *t = r + RECORD_FIXED + body_len;
        Py_ssize_t tlen = t[0];
        if (tlen > MAX_TOPIC || RECORD_FIXED + body_len + 1 + tlen + 2 > total) break;
        const unsigned char *pp = t + 1 + tlen;
        Py_ssize_t plen = (pp[0] << 8) | pp[1];
        if (RECORD_FIXED + body_len + 1 + tlen + 2 + plen != total) break;
        const unsigned char *props = pp + 2;
        if (!valid_text(props, plen) || !valid_text(t + 1, tlen)) break;
        /* topic: reused while it repeats */
        if (tlen != last_topic_len || memcmp(last_topic, t + 1, tlen) != 0) {
            PyObject *nt = PyUnicode_DecodeUTF8((const char *)t + 1, tlen, NULL);
            if (!nt) goto fail;
            Py_XSETREF(topic, nt);
            memcpy(last_topic, t + 1, tlen);
            last_topic_len = tlen;
        }
        /* hosts: host_pair keeps the recent ones */
        PyObject *nb = host_pair(r + 48);
        if (!nb) goto fail;
        Py_XSETREF(born, nb);
        PyObject *ns = host_pair(r + 64);
        if (!ns) goto fail;
        Py_XSETREF(store, ns);
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
        vals[5] = PyLong_FromSsize_t(total);
        vals[6] = PyLong_FromLongLong(rd64(r + 20));
        vals[7] = PyLong_FromLong(sysflag);
        vals[8] = PyLong_FromLongLong(rd64(r + 40));
        vals[9] = born; Py_INCREF(born);
        vals[10] = PyLong_FromLongLong(rd64(r + 56));
        vals[11] = store; Py_INCREF(store);
        vals[12] = mid;
        vals[13] = oid;
        vals[14] = PyLong_FromLongLong(rd64(r + 28));
        vals[15] = PyLong_FromLong((int32_t)rd32(r + 8));
        vals[16] = PyLong_FromLong((int32_t)rd32(r + 72));
        vals[17] = PyLong_FromLongLong(rd64(r + 76));
        int bad = 0;
        for (int k = 0; k < N_EXT_FIELDS; k++) if (!vals[k]) bad = 1;
        PyObject *obj = bad ? NULL : type->tp_alloc(type, 0);
        if (!obj) {
            for (int k = 0; k < N_EXT_FIELDS; k++) Py_XDECREF(vals[k]);
            goto fail;
        }
        for (int k = 0; k < N_EXT_FIELDS; k++) *(PyObject **)((char *)obj + offsets[k]) = vals[k];
        int rc = PyList_Append(out, obj);
        Py_DECREF(obj);
        if (rc < 0) goto fail;
        pos += total;
    }
    for (Py_ssize_t k = 0; k < nnames; k++) Py_DECREF(names[k]);
    Py_XDECREF(topic); Py_XDECREF(born); Py_XDECREF(store); Py_XDECREF(uniq_name);
    Py_DECREF(type);
    PyBuffer_Release(&view);
    return Py_BuildValue("Nn", out, pos);
fail:
    for (Py_ssize_t k = 0; k < nnames; k++) Py_DECREF(names[k]);
    Py_XDECREF(topic); Py_XDECREF(born); Py_XDECREF(store); Py_XDECREF(uniq_name);
    Py_XDECREF(out);
    Py_DECREF(type);
    PyBuffer_Release(&view);
    return NULL;
}

PyMethodDef apogee_client_methods[] = {
    {"encode_batch", encode_batch, METH_O, encode_batch_doc},
    {"decode_records", decode_records, METH_VARARGS, decode_records_doc},
    {"properties_to_string", (PyCFunction)(void (*)(void))properties_to_string, METH_FASTCALL,
     properties_to_string_doc},
    {"uniq_id_now", (PyCFunction)(void (*)(void))uniq_id_now, METH_FASTCALL, uniq_id_now_doc},
    {"batch_append", (PyCFunction)(void (*)(void))batch_append, METH_FASTCALL, batch_append_doc},
    {"complete_sends", (PyCFunction)(void (*)(void))complete_sends, METH_FASTCALL, complete_sends_doc},
    {NULL, NULL, 0, NULL},
};
