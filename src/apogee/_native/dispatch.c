/*
 * The dispatcher's reading of CommitLog records it has no hint for (a slave's replicated
 * bytes, the log after recovery, a master whose hints overflowed) or reads in one go (single
 * sends queued together): scan_dispatch, record_ends.
 *
 * The bytes are untrusted (a slave's come from the master's HA stream): every field is
 * checked against the span before it is used.  The rule is records.c's: anything unusual (a
 * blank, a size or field that does not add up, text that is not valid UTF-8, SCHEDULE_TOPIC, a
 * transaction type without a plain ConsumeQueue entry, IPv6 hosts) stops the scan before that
 * record, and the caller takes the pure-Python path (store/dispatch.py) for it.
 */
#include "native.h"

#define MAX_GROUPS 32 /* distinct (topic, queue) of one span */
#define MAX_SPAN 4096 /* records of one span: a bounded allocation */
#define MIN_RECORD (RECORD_FIXED + 1 + 1 + 2) /* fixed part, a topic of one byte, properties length */
#define MAX_QUEUE_OFFSET (1LL << 48)
#define V6_FLAGS 0x30
#define TRAN_MASK 0xC
#define TRAN_COMMIT 0x8

static const char SCHEDULE_TOPIC[] = "SCHEDULE_TOPIC_XXXX";

typedef struct {
    const unsigned char *topic;
    Py_ssize_t topic_len;
    int32_t queue_id;
    int64_t first_qoff, next_qoff;
    uint32_t prefix;   /* hash of "topic#" (index keys) */
    Py_ssize_t count;
    int64_t tags[8];
    int ntags, many_tags;
    unsigned char *cqp; /* next entry in its bytes object (second pass) */
} span_group;

typedef struct {
    Py_ssize_t rel, total;
    int64_t tags;
    int group;
} span_record;

/* The group of (topic, queue_id) among g[0..n), or -1. */
static int find_group(const span_group *g, int n, int hint, const unsigned char *topic, Py_ssize_t tl, int32_t qid) {
    if (hint >= 0 && g[hint].queue_id == qid && g[hint].topic_len == tl && memcmp(g[hint].topic, topic, tl) == 0)
        return hint;
    for (int k = 0; k < n; k++)
        if (g[k].queue_id == qid && g[k].topic_len == tl && memcmp(g[k].topic, topic, tl) == 0) return k;
    return -1;
}

PyDoc_STRVAR(scan_dispatch_doc,
"scan_dispatch(buf, start, end, phys, max_records, index) ->\n"
"    (next, count, first_ts, last_ts, groups, index_entries)\n\n"
"What Dispatcher.dispatch's decoding path (store/dispatch.py, the reference) makes of the\n"
"whole records in buf[start:end] (phys: the CommitLog offset of buf[start]), at most\n"
"max_records and 4096, taken as one run per (topic, queue): groups is a list of (topic, queue_id,\n"
"first_queue_offset, count, cq_entries, tag_codes), tag_codes a tuple of the distinct tag codes\n"
"or None for more than 8; index_entries the index entries (index_put's layout, store times as\n"
"ms after first_ts; empty unless index) of every record in order.  It stops before a record\n"
"it does not take (see the file's comment), one that is not whole, one whose queue offset does\n"
"not follow its queue's previous record here, a 33rd queue, or a store time beyond +-2**62,\n"
"before first_ts or more than 2**31-1 ms after it; next is where it stopped, count how many it took (0: the\n"
"caller decodes the record at start itself).  ValueError when 0 <= start <= end <= len(buf)\n"
"does not hold.");

static PyObject *scan_dispatch(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, end, max_records;
    long long phys0;
    int with_index;
    if (!PyArg_ParseTuple(args, "y*nnLnp", &buf, &start, &end, &phys0, &max_records, &with_index)) return NULL;
    PyObject *result = NULL, *groups = NULL;
    span_record *recs = NULL;
    byte_sink idx = {NULL, 0, 0};
    span_group g[MAX_GROUPS];
    int ngroups = 0, last_group = -1;
    Py_ssize_t count = 0, rel = start;
    long long first_ts = 0, last_ts = 0;
    if (start < 0 || start > end || end > buf.len) {
        PyErr_SetString(PyExc_ValueError, "scan_dispatch needs 0 <= start <= end <= len(buf)");
        goto done;
    }
    if (phys0 < 0 || phys0 > (1LL << 62)) {
        PyErr_SetString(PyExc_ValueError, "phys out of range");
        goto done;
    }
    Py_ssize_t cap = (end - start) / MIN_RECORD + 1;
    if (cap > MAX_SPAN) cap = MAX_SPAN;
    if (max_records < cap) cap = max_records > 0 ? max_records : 0;
    recs = PyMem_Malloc((size_t)(cap ? cap : 1) * sizeof(span_record));
    if (!recs) { PyErr_NoMemory(); goto done; }
    const unsigned char *b = buf.buf;
    while (count < cap && end - rel >= MIN_RECORD) {
        const unsigned char *r = b + rel;
        int64_t total = (int32_t)rd32(r);
        if (total < MIN_RECORD || total > end - rel || rd32(r + 4) != MAGIC_CODE) break;
        int32_t qid = (int32_t)rd32(r + 12);
        int64_t qoff = rd64(r + 20);
        int32_t sysflag = (int32_t)rd32(r + 36);
        int64_t ts = rd64(r + 56);
        int32_t body_len = (int32_t)rd32(r + 84);
        if (qid < 0 || qoff < 0 || qoff > MAX_QUEUE_OFFSET || rd64(r + 28) != phys0 + (rel - start) ||
            (sysflag & V6_FLAGS) || ((sysflag & TRAN_MASK) != 0 && (sysflag & TRAN_MASK) != TRAN_COMMIT) ||
            body_len < 0 || body_len > total - MIN_RECORD)
            break;
        Py_ssize_t p = RECORD_FIXED + body_len;
        Py_ssize_t tl = r[p];
        if (tl == 0 || p + 1 + tl + 2 > total) break;
        const unsigned char *topic = r + p + 1;
        Py_ssize_t pl = rd16(r + p + 1 + tl);
        const unsigned char *props = r + p + 1 + tl + 2;
        if (pl < 0 || p + 1 + tl + 2 + pl != total || !valid_text(topic, tl) || !valid_text(props, pl)) break;
        if (tl == (Py_ssize_t)sizeof(SCHEDULE_TOPIC) - 1 && memcmp(topic, SCHEDULE_TOPIC, tl) == 0) break;
        if (ts > (1LL << 62) || ts < -(1LL << 62)) break; /* index_put's range; no overflow below */
        if (count == 0) {
            first_ts = ts;
        } else if (ts < first_ts || ts - first_ts > INT_MAX32) {
            break;
        }
        int k = find_group(g, ngroups, last_group, topic, tl, qid);
        if (k >= 0 && g[k].next_qoff != qoff) break;
        if (k < 0) {
            if (ngroups == MAX_GROUPS) break;
            k = ngroups++;
            span_group *n = &g[k];
            memset(n, 0, sizeof(*n));
            n->topic = topic; n->topic_len = tl; n->queue_id = qid; n->first_qoff = qoff;
            n->prefix = hash_utf8(hash_utf8(0, topic, tl), (const unsigned char *)"#", 1);
        }
        span_group *grp = &g[k];
        /* the ConsumeQueue tags code: hashCode of TAGS, 0 when absent or empty */
        Py_ssize_t vlen;
        const unsigned char *tv = pl ? text_property(props, pl, "TAGS", &vlen) : NULL;
        int64_t tags = tv ? (int64_t)(int32_t)hash_utf8(0, tv, vlen) : 0;
        if (with_index && pl &&
            index_keys(&idx, props, pl, grp->prefix, phys0 + (rel - start), (uint32_t)(ts - first_ts)) < 0)
            goto done;
        grp->next_qoff = qoff + 1;
        grp->count++;
        if (!grp->many_tags) {
            int t = 0;
            while (t < grp->ntags && grp->tags[t] != tags) t++;
            if (t == grp->ntags) { if (grp->ntags < 8) grp->tags[grp->ntags++] = tags; else grp->many_tags = 1; }
        }
        recs[count].rel = rel; recs[count].total = total; recs[count].tags = tags; recs[count].group = k;
        count++;
        last_group = k;
        last_ts = ts;
        rel += total;
    }
    groups = PyList_New(ngroups);
    if (!groups) goto done;
    for (int k = 0; k < ngroups; k++) {
        span_group *grp = &g[k];
        PyObject *topic = PyUnicode_DecodeUTF8((const char *)grp->topic, grp->topic_len, NULL);
        PyObject *cq = PyBytes_FromStringAndSize(NULL, grp->count * CQ_UNIT);
        PyObject *tags = NULL;
        if (topic && cq) {
            if (grp->many_tags) {
                tags = Py_None; Py_INCREF(tags);
            } else if ((tags = PyTuple_New(grp->ntags))) {
                for (int t = 0; t < grp->ntags; t++) {
                    PyObject *v = PyLong_FromLongLong(grp->tags[t]);
                    if (!v) { Py_CLEAR(tags); break; }
                    PyTuple_SET_ITEM(tags, t, v);
                }
            }
        }
        PyObject *item = tags ? Py_BuildValue("OiLnOO", topic, grp->queue_id, (long long)grp->first_qoff,
                                              grp->count, cq, tags) : NULL;
        if (item) grp->cqp = (unsigned char *)PyBytes_AS_STRING(cq);
        Py_XDECREF(topic); Py_XDECREF(cq); Py_XDECREF(tags);
        if (!item) goto done;
        PyList_SET_ITEM(groups, k, item);
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        unsigned char *e = g[recs[i].group].cqp;
        be64(e, (uint64_t)(phys0 + (recs[i].rel - start)));
        be32(e + 8, (uint32_t)recs[i].total);
        be64(e + 12, (uint64_t)recs[i].tags);
        g[recs[i].group].cqp = e + CQ_UNIT;
    }
    result = Py_BuildValue("nnLLOy#", rel, count, first_ts, last_ts, groups, idx.buf ? (const char *)idx.buf : "", idx.len);
done:
    Py_XDECREF(groups);
    PyMem_Free(recs);
    PyMem_Free(idx.buf);
    PyBuffer_Release(&buf);
    return result;
}

PyDoc_STRVAR(record_ends_doc,
"record_ends(buf, start, end) -> int\n\n"
"The end of the last whole message record in buf[start:end] reached from start, record by\n"
"record (CommitLog.complete_end's walk inside one file, the reference): it stops at the first\n"
"that is not whole, has a size below 8 or a magic code other than a message's (a blank: the\n"
"caller decides).  ValueError when 0 <= start <= end <= len(buf) does not hold.");

static PyObject *record_ends(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nn", &buf, &start, &end)) return NULL;
    if (start < 0 || start > end || end > buf.len) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "record_ends needs 0 <= start <= end <= len(buf)");
        return NULL;
    }
    const unsigned char *b = buf.buf;
    Py_ssize_t rel = start;
    while (end - rel >= 8) {
        int64_t total = (int32_t)rd32(b + rel);
        if (total < 8 || total > end - rel || rd32(b + rel + 4) != MAGIC_CODE) break;
        rel += total;
    }
    PyBuffer_Release(&buf);
    return PyLong_FromSsize_t(rel);
}

PyMethodDef apogee_dispatch_methods[] = {
    {"scan_dispatch", scan_dispatch, METH_VARARGS, scan_dispatch_doc},
    {"record_ends", record_ends, METH_VARARGS, record_ends_doc},
    {NULL, NULL, 0, NULL},
};
