/*
 * apogee._native: optional C speed-ups for the byte-level hot paths.
 *
 * Every function here has a pure-Python reference in apogee (named in its docstring) that
 * gives the same bytes and the same answers; tests compare the two.  Python code reaches
 * these only through apogee.common.accel, which falls back to the reference when this module
 * is missing or APOGEE_NO_EXTENSIONS=1.  Their signatures, for mypy, are in ../_native.pyi.
 *
 * Why C at all: a broker in pure Python spends ~10 us of interpreter time per message of a
 * client batch (decode the item, re-encode it as a record, CRC, tag hash, ConsumeQueue entry,
 * index hashes).  These functions do that work for a whole batch in one call.
 *
 * The files, by domain:
 *   hashes.c   UTF-8 checks, Java's String.hashCode, the IndexFile (java_hash, index_hashes,
 *              index_put)
 *   records.c  the broker's appends: batch bodies and single sends -> CommitLog records
 *              (scan_batch, write_batch, send_v2_fields, scan_single, write_single)
 *   client.c   the client's batch bodies, properties, UNIQ_KEY, send results and PULL bodies
 *              (encode_batch, batch_append, properties_to_string, uniq_id_now,
 *              complete_sends, decode_records)
 *   frames.c   remoting frames with JSON headers (decode_frames, json_frame_head, fields_frame)
 *   reads.c    the broker's pulls: ConsumeQueue entries -> the records answered (collect_records)
 *   dispatch.c the dispatcher's reading of unhinted CommitLog records (a slave's, after recovery):
 *              ConsumeQueue runs and index entries of a span (scan_dispatch, record_ends)
 *   crc32.c    BODYCRC (zlib's CRC-32) by carry-less multiplication (crc32; its reference is
 *              zlib.crc32, which computes short inputs and the rest on other CPUs)
 *   flusher.c  SYNC_FLUSH's fdatasync on a thread outside the GIL (Flusher; its reference is
 *              store/flush.py's flush on the I/O thread, which GroupCommit falls back to)
 *   native.h   what they share, and the rules every function keeps (any Python argument is
 *              safe: a wrong one is an exception, never a crash)
 *
 * `make check-native` builds them with AddressSanitizer and UndefinedBehaviorSanitizer and
 * runs the native tests and a fuzz of every function that reads network bytes.
 */
#include "native.h"

int python_slot_offset(PyTypeObject *cls, PyObject *name, Py_ssize_t *offset) {
    /* _PyType_Lookup reads the MRO's dicts: no metaclass __getattr__ runs. */
    PyObject *d = _PyType_Lookup(cls, name);
    if (!d || !Py_IS_TYPE(d, &PyMemberDescr_Type)) goto refuse;
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    PyTypeObject *owner = ((PyMemberDescrObject *)d)->d_common.d_type;
    if (m->type != T_OBJECT_EX || (m->flags & READONLY) || !PyType_IsSubtype(cls, owner) ||
        !(owner->tp_flags & Py_TPFLAGS_HEAPTYPE) || m->offset < (Py_ssize_t)sizeof(PyObject) ||
        m->offset > cls->tp_basicsize - (Py_ssize_t)sizeof(PyObject *))
        goto refuse;
    /* declared by a class statement's __slots__ (not a C type's member) */
    PyObject *declared = ((PyHeapTypeObject *)owner)->ht_slots;
    if (!declared || !PyTuple_Check(declared)) goto refuse;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(declared); i++) {
        PyObject *s = PyTuple_GET_ITEM(declared, i);
        if (PyUnicode_Check(s) && PyUnicode_Compare(s, name) == 0) {
            *offset = m->offset;
            return 1;
        }
    }
refuse:
    PyErr_Format(PyExc_TypeError, "%.200s has no __slots__ field %U", cls->tp_name, name);
    return 0;
}

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "apogee._native",
    "Optional C speed-ups of apogee's byte-level hot paths (see apogee.common.accel).", -1, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyMethodDef *tables[] = {apogee_hashes_methods, apogee_records_methods, apogee_client_methods,
                             apogee_frames_methods, apogee_reads_methods, apogee_dispatch_methods,
                             apogee_crc32_methods};
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        if (PyModule_AddFunctions(m, tables[i]) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    if (PyType_Ready(&apogee_FlusherType) < 0 ||
        PyModule_AddObjectRef(m, "Flusher", (PyObject *)&apogee_FlusherType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
