/*
 * The broker's appends: a client batch body or a plain single send -> CommitLog records,
 * ConsumeQueue entries, offset msg ids and index entries (scan_batch/write_batch,
 * send_v2_fields/scan_single/write_single).
 *
 * Rule: anything unusual (malformed input, a limit reached, a property the fast path does not
 * handle, invalid UTF-8) makes a scan answer None, and the caller takes the pure-Python path,
 * which produces the exact error response.  The fast path never decides a rejection on its
 * own.  The write functions check their input again (a body the scan would decline is a
 * ValueError, never a stray write), so that no caller can make them write out of bounds.
 */
#include "native.h"
#include <limits.h>

/* The largest body whose record still has a 32-bit TOTALSIZE, whatever its topic and properties. */
#define MAX_RECORD_BODY (INT_MAX32 - RECORD_FIXED - (MAX_TOPIC + 1) - 2 - MAX_PROPERTIES)

/* ---- properties strings -------------------------------------------------------------------- */

/* Mirror of message_codec.get_property on raw bytes: -1 if the name is absent, else the value's
 * start; *vlen gets its length (0 = empty, which get_property reports as None). */
Py_ssize_t find_property(const unsigned char *s, Py_ssize_t n, const char *name, Py_ssize_t name_len,
                         Py_ssize_t *vlen) {
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

/* A property of a properties text as get_property would see it (NULL: absent or empty). */
const unsigned char *text_property(const unsigned char *s, Py_ssize_t n, const char *name, Py_ssize_t *vlen) {
    Py_ssize_t at = find_property(s, n, name, (Py_ssize_t)strlen(name), vlen);
    if (at >= 0 && *vlen) return s + at;
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

/* One item of a client batch body, every part inside the body. */
typedef struct {
    int32_t flag, body_len;
    const unsigned char *body, *props;
    Py_ssize_t props_len, next; /* next: where the following item starts */
} batch_item;

/* The item at b[pos..end): 1, or 0 when it is not well formed (sizes that disagree or leave
 * the body, an empty body). */
static int read_batch_item(const unsigned char *b, Py_ssize_t end, Py_ssize_t pos, batch_item *it) {
    if (pos < 0 || end - pos < BATCH_HEAD + 2) return 0;
    int32_t item_size = (int32_t)rd32(b + pos);
    int32_t body_len = (int32_t)rd32(b + pos + 16);
    if (body_len <= 0 || body_len > end - pos - BATCH_HEAD - 2) return 0;
    Py_ssize_t p = pos + BATCH_HEAD + body_len;
    int16_t plen = rd16(b + p);
    p += 2;
    if (plen < 0 || plen > end - p || item_size != p + plen - pos) return 0;
    it->flag = (int32_t)rd32(b + pos + 12);
    it->body_len = body_len;
    it->body = b + pos + BATCH_HEAD;
    it->props = b + p;
    it->props_len = plen;
    it->next = p + plen;
    return 1;
}

/* The fast path's acceptance of a batch body (scan_batch's rules): 1 with the item count and
 * the records' size without their topic fields, or 0 to decline. */
static int scan_body(const unsigned char *b, Py_ssize_t end, const unsigned char *bp, Py_ssize_t bplen,
                     Py_ssize_t max_body, Py_ssize_t *count_out, Py_ssize_t *size_out) {
    Py_ssize_t pos = 0, count = 0, size = 0, vlen;
    batch_item it;
    if (end <= 0 || !valid_text(bp, bplen) || find_property(bp, bplen, "DELAY", 5, &vlen) >= 0) return 0;
    while (pos < end) {
        if (!read_batch_item(b, end, pos, &it) || it.body_len > max_body) return 0;
        if (!valid_text(it.props, it.props_len)) return 0;
        if (find_property(it.props, it.props_len, "DELAY", 5, &vlen) >= 0) return 0;
        Py_ssize_t jl = joined_len(it.props, it.props_len, bplen);
        if (jl > MAX_PROPERTIES) return 0;
        size += RECORD_FIXED + it.body_len + 2 + jl; /* < 4 kB per body byte: no overflow */
        count++;
        pos = it.next;
    }
    *count_out = count;
    *size_out = size;
    return 1;
}

PyDoc_STRVAR(scan_batch_doc,
"scan_batch(body, batch_props: bytes, max_body: int) -> (count, size) | None\n\n"
"Check a client batch body for the fast path: well formed, every body 1..max_body bytes,\n"
"joined properties valid UTF-8 without NUL and at most 32767 bytes, no DELAY property.\n"
"size = sum of 88 + body + 2 + joined properties per item (the topic field not included).\n"
"None: take the pure-Python path (decode_batch and the broker's checks), which answers.");

static PyObject *scan_batch(PyObject *self, PyObject *args) {
    Py_buffer body, bprops;
    Py_ssize_t max_body, count, size;
    if (!PyArg_ParseTuple(args, "y*y*n", &body, &bprops, &max_body)) return NULL;
    int ok = scan_body(body.buf, body.len, bprops.buf, bprops.len, max_body, &count, &size);
    PyBuffer_Release(&body);
    PyBuffer_Release(&bprops);
    if (!ok) Py_RETURN_NONE;
    return Py_BuildValue("nn", count, size);
}

/* The fields every record of one append shares (a batch's records, or a single message). */
typedef struct {
    const unsigned char *topic;   /* the record's topic field: length byte + name */
    Py_ssize_t topic_len;
    int queue_id, sysflag, born_port, store_port, reconsume;
    long long born_ts, store_ts;
    const unsigned char *born_ip, *store_ip;  /* 4 bytes each */
} record_common;

/* ValueError unless the buffers of a write are what it needs: pos inside buf, a topic field
 * (length byte + 1..127 bytes), 4-byte hosts, and no input inside the buffer written. */
static int check_write_args(const Py_buffer *buf, Py_ssize_t pos, const Py_buffer *topic,
                            const Py_buffer *born_ip, const Py_buffer *store_ip,
                            const Py_buffer *const *inputs, int ninputs) {
    const unsigned char *t = topic->buf;
    if (pos < 0 || pos > buf->len) {
        PyErr_SetString(PyExc_ValueError, "pos is outside the buffer");
        return -1;
    }
    if (topic->len < 2 || topic->len > MAX_TOPIC + 1 || t[0] != topic->len - 1) {
        PyErr_SetString(PyExc_ValueError, "topic_field must be a length byte and 1..127 bytes");
        return -1;
    }
    if (born_ip->len != 4 || store_ip->len != 4) {
        PyErr_SetString(PyExc_ValueError, "born_ip and store_ip must be 4 bytes");
        return -1;
    }
    for (int i = 0; i < ninputs; i++) {
        if (buffers_overlap(buf, inputs[i])) {
            PyErr_SetString(PyExc_ValueError, "an input lies inside the buffer written");
            return -1;
        }
    }
    return 0;
}

/* Body, topic and properties (properties = a + [0x02 when a does not end with one] + b) at
 * out, then the fixed part last, so that a torn write never looks like a valid record.  The
 * caller has checked that total bytes fit at out. */
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
    uint32_t crc = apogee_crc32(0, body, (size_t)body_len) & 0x7FFFFFFFu;
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

/* The size of a record, or -1 (ValueError set) when it would not fit at out[0..room) or
 * exceeds the 32-bit TOTALSIZE. */
static Py_ssize_t record_room(Py_ssize_t body_len, Py_ssize_t topic_len, Py_ssize_t props_len, Py_ssize_t room) {
    Py_ssize_t total = RECORD_FIXED + body_len + topic_len + 2 + props_len;
    if (props_len > MAX_PROPERTIES || total > INT_MAX32 || total > room) {
        PyErr_SetString(PyExc_ValueError, "the message does not fit in the buffer");
        return -1;
    }
    return total;
}

int index_keys(byte_sink *out, const unsigned char *props, Py_ssize_t plen, uint32_t prefix, int64_t phys,
               uint32_t ts_delta) {
    /* IndexService.build's keys: UNIQ_KEY, then each non-empty space-separated KEYS token */
    const unsigned char *spans[2];
    Py_ssize_t lens[2];
    spans[0] = text_property(props, plen, "UNIQ_KEY", &lens[0]);
    spans[1] = text_property(props, plen, "KEYS", &lens[1]);
    for (int which = 0; which < 2; which++) {
        const unsigned char *s = spans[which];
        if (!s) continue;
        Py_ssize_t sl = lens[which], a = 0;
        while (a < sl) {
            Py_ssize_t z = a;
            if (which == 1) { while (z < sl && s[z] != ' ') z++; } else { z = sl; }
            if (z > a) {
                if (out->len + INDEX_ENTRY_OUT > out->cap) {
                    Py_ssize_t cap = out->cap ? out->cap * 2 : 64 * INDEX_ENTRY_OUT;
                    unsigned char *nb = PyMem_Realloc(out->buf, cap);
                    if (!nb) { PyErr_NoMemory(); return -1; }
                    out->buf = nb; out->cap = cap;
                }
                uint32_t h = abs_hash(hash_utf8(prefix, s + a, z - a));
                memcpy(out->buf + out->len, &h, 4);
                memcpy(out->buf + out->len + 4, &ts_delta, 4);
                memcpy(out->buf + out->len + 8, &phys, 8);
                out->len += INDEX_ENTRY_OUT;
            }
            a = z + 1;
        }
    }
    return 0;
}

/* What the records of one append give the dispatcher and the producer: ConsumeQueue entries,
 * offset msg ids, index entries and the distinct tag codes. */
typedef struct {
    unsigned char *cqp, *cq_end;  /* next ConsumeQueue entry, end of their buffer */
    unsigned char *idp, *id_end;  /* next msg id character, end of their buffer */
    unsigned char store_id[8];    /* store ip + port, the first half of an offset msg id */
    long long index_prefix;       /* < 0: no index entries */
    byte_sink idx;
    int64_t tag_seen[8];
    int ntags, many_tags, count;
} run_notes;

/* Note one written record whose properties text is props[0..plen).  -1 on error. */
static int note_record(run_notes *r, const unsigned char *props, Py_ssize_t plen, int64_t phys,
                       Py_ssize_t total) {
    if (r->cq_end - r->cqp < CQ_UNIT || r->id_end - r->idp < (r->count ? 33 : 32)) {
        PyErr_SetString(PyExc_SystemError, "more records than counted");
        return -1;
    }
    /* tags code: Java hashCode of TAGS (signed, widened), 0 when absent or empty */
    Py_ssize_t vlen;
    const unsigned char *tv = text_property(props, plen, "TAGS", &vlen);
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
    return index_keys(&r->idx, props, plen, (uint32_t)r->index_prefix, phys, 0);
}

/* Start notes for n records: cq and ids are new objects the caller owns (NULL on error). */
static int notes_begin(run_notes *r, Py_ssize_t n, const record_common *rc, long long index_prefix,
                       PyObject **cq, PyObject **ids) {
    memset(r, 0, sizeof(*r));
    *cq = PyBytes_FromStringAndSize(NULL, n * CQ_UNIT);
    *ids = PyUnicode_New(n ? n * 33 - 1 : 0, 127);
    if (!*cq || !*ids) return -1;
    r->cqp = (unsigned char *)PyBytes_AS_STRING(*cq);
    r->cq_end = r->cqp + n * CQ_UNIT;
    r->idp = PyUnicode_1BYTE_DATA(*ids);
    r->id_end = r->idp + (n ? n * 33 - 1 : 0);
    memcpy(r->store_id, rc->store_ip, 4);
    be32(r->store_id + 4, (uint32_t)rc->store_port);
    r->index_prefix = index_prefix;
    return 0;
}

/* (cq, index, msg_ids, tags) of a finished run; consumes cq and ids, frees the notes. */
static PyObject *notes_end(run_notes *r, PyObject *cq, PyObject *ids) {
    PyObject *result = NULL, *idx = NULL, *tags = NULL;
    if (!cq || !ids) goto done;
    if (r->cqp != r->cq_end || r->idp != r->id_end) {
        PyErr_SetString(PyExc_SystemError, "fewer records than counted");
        goto done;
    }
    idx = PyBytes_FromStringAndSize((const char *)r->idx.buf, r->idx.len);
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
    PyMem_Free(r->idx.buf);
    r->idx.buf = NULL;
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
"None when there are more than 8).  ValueError, with buf unchanged, for a body scan_batch\n"
"declines (whatever its max_body), records that do not fit in buf[pos:], a topic_field that\n"
"is not one, hosts that are not 4 bytes, or an input inside buf.");

static PyObject *write_batch(PyObject *self, PyObject *args) {
    Py_buffer buf, body, bprops, topic, born_ip, store_ip;
    Py_ssize_t pos;
    int queue_id, sysflag, born_port, store_port, reconsume;
    long long first_qoff, first_phys, born_ts, store_ts, index_prefix;
    if (!PyArg_ParseTuple(args, "w*ny*y*y*iLLiLy*iLy*iiL", &buf, &pos, &body, &bprops, &topic,
                          &queue_id, &first_qoff, &first_phys, &sysflag, &born_ts, &born_ip,
                          &born_port, &store_ts, &store_ip, &store_port, &reconsume, &index_prefix))
        return NULL;
    /* From here on no Python code runs until the records are written. */
    PyObject *result = NULL, *cq = NULL, *ids = NULL;
    run_notes notes;
    memset(&notes, 0, sizeof(notes));
    record_common rc = {topic.buf, topic.len, queue_id, sysflag, born_port, store_port, reconsume,
                        born_ts, store_ts, born_ip.buf, store_ip.buf};
    const Py_buffer *inputs[] = {&body, &bprops, &topic, &born_ip, &store_ip};
    if (check_write_args(&buf, pos, &topic, &born_ip, &store_ip, inputs, 5) < 0) goto done;
    const unsigned char *b = body.buf, *bp = bprops.buf;
    Py_ssize_t bplen = bprops.len, end = body.len, n, size;
    if (!scan_body(b, end, bp, bplen, MAX_RECORD_BODY, &n, &size)) {
        PyErr_SetString(PyExc_ValueError, "write_batch takes only a body scan_batch accepts");
        goto done;
    }
    if (size + n * topic.len > buf.len - pos) {
        PyErr_SetString(PyExc_ValueError, "the batch does not fit in the buffer");
        goto done;
    }
    if (notes_begin(&notes, n, &rc, index_prefix, &cq, &ids) < 0) goto done;
    unsigned char *out = (unsigned char *)buf.buf + pos;
    Py_ssize_t room = buf.len - pos, src = 0;
    int64_t phys = first_phys, qoff = first_qoff;
    batch_item it;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!read_batch_item(b, end, src, &it)) {
            PyErr_SetString(PyExc_SystemError, "the batch body changed while being written");
            goto done;
        }
        Py_ssize_t jl = joined_len(it.props, it.props_len, bplen);
        Py_ssize_t total = record_room(it.body_len, topic.len, jl, room);
        if (total < 0) goto done;
        put_record(out, total, &rc, it.body, it.body_len, it.flag, it.props, it.props_len, bp, bplen, qoff, phys);
        if (note_record(&notes, out + total - jl, jl, phys, total) < 0) goto done;
        out += total;
        room -= total;
        phys = (int64_t)((uint64_t)phys + (uint64_t)total);
        qoff = (int64_t)((uint64_t)qoff + 1);
        src = it.next;
    }
    result = notes_end(&notes, cq, ids);
    cq = ids = NULL;
done:
    Py_XDECREF(cq); Py_XDECREF(ids);
    PyMem_Free(notes.idx.buf);
    PyBuffer_Release(&buf); PyBuffer_Release(&body); PyBuffer_Release(&bprops);
    PyBuffer_Release(&topic); PyBuffer_Release(&born_ip); PyBuffer_Release(&store_ip);
    return result;
}

/* ---- a single SEND_MESSAGE(_V2) -> one CommitLog record -------------------------------------- */

#define MAX_PAIRS 64

/* The pairs of a properties text the broker would store unchanged, minus WAIT: -1 when the
 * text needs the pure path (malformed, empty name or value, duplicate, or a property the
 * broker rewrites), else the number of spans written to starts/lens (MAX_PAIRS at most). */
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
    if (k < 0 || extra_len > MAX_PROPERTIES) return -1;
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

int field_values(PyObject *ext, PyObject *keys, PyObject **out, int n) {
    /* A lookup can run Python code (a key's __eq__) that changes the dict: each value found is
     * held, not borrowed, before the next lookup. */
    for (int i = 0; i < n; i++) {
        out[i] = PyDict_GetItemWithError(ext, PyTuple_GET_ITEM(keys, i));
        if (!out[i] && PyErr_Occurred()) {
            for (int k = 0; k < i; k++) Py_XDECREF(out[k]);
            return 0;
        }
        Py_XINCREF(out[i]);
    }
    return 1;
}

/* An int header field as Header.decode reads it, when it is plainly one: a JSON number or
 * ASCII [-]digits within [lo, hi].  0: decline (the full path judges it). */
int field_int(PyObject *v, long long lo, long long hi, long long *out) {
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
"missing, non-text or out-of-range field, a number that is not plain digits, a batch flag\n"
"other than \"false\" (or a JSON false),\n"
"or properties scan_single declines.");

static PyObject *send_v2_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyDict_CheckExact(args[0]) || !PyBytes_Check(args[1]) || !PyTuple_CheckExact(args[2]) ||
        PyTuple_GET_SIZE(args[2]) != 8) {
        PyErr_SetString(PyExc_TypeError, "send_v2_fields(ext: dict, extra: bytes, keys: 8-tuple)");
        return NULL;
    }
    PyObject *ext = args[0], *keys = args[2], *v[8], *out = NULL;
    if (!field_values(ext, keys, v, 8)) return NULL;
    long long queue_id, sysflag, born, flag, reconsume = 0;
    /* The Java client sends batch=false ("m":"false") with every single send: only that exact
     * spelling (or a JSON false) is taken here; any other value goes to the full decoder. */
    int not_batch = !v[7] || v[7] == Py_False ||
                    (PyUnicode_CheckExact(v[7]) && PyUnicode_CompareWithASCIIString(v[7], "false") == 0);
    if (!not_batch || !v[0] || !PyUnicode_CheckExact(v[0]) || !v[1] || !v[2] || !v[3] || !v[4]) goto decline;
    if (!field_int(v[1], -2147483648LL, 2147483647LL, &queue_id) ||
        !field_int(v[2], -2147483648LL, 2147483647LL, &sysflag) ||
        !field_int(v[3], -(1LL << 62), 1LL << 62, &born) ||
        !field_int(v[4], -2147483648LL, 2147483647LL, &flag) ||
        (v[6] && !field_int(v[6], -2147483648LL, 2147483647LL, &reconsume)))
        goto decline;
    PyObject *props = v[5];
    if (!props || props == Py_None) {
        props = PyUnicode_New(0, 0);
        if (!props) goto done;
        Py_XSETREF(v[5], props);
    }
    if (!PyUnicode_CheckExact(props)) goto decline;
    Py_ssize_t n;
    const char *text = text_bytes(props, &n);
    Py_ssize_t size = text ? single_props_len((const unsigned char *)text, n, PyBytes_GET_SIZE(args[1])) : -1;
    if (size < 0) goto decline;
    out = Py_BuildValue("OLLLLOLn", v[0], queue_id, sysflag, born, flag, props, reconsume, size);
    goto done;
decline:
    out = Py_None;
    Py_INCREF(out);
done:
    for (int k = 0; k < 8; k++) Py_XDECREF(v[k]);
    return out;
}

PyDoc_STRVAR(write_single_doc,
"write_single(buf, pos, body, props, extra, topic_field, queue_id, queue_offset, phys, sysflag,\n"
"             flag, born_ts, born_ip, born_port, store_ts, store_ip, store_port,\n"
"             reconsume_times, index_prefix) -> (cq, index, msg_id, tags)\n\n"
"Write one message that scan_single accepted at buf[pos:], exactly as CommitLog.put_message\n"
"writes the broker's rewritten message (properties: props without WAIT, then extra).  Returns\n"
"what write_batch returns for a batch of one.  ValueError, with buf unchanged, for props\n"
"scan_single declines, an empty body, a record that does not fit, a topic_field that is not\n"
"one, hosts that are not 4 bytes, or an input inside buf.");

/* write_single's arguments, as PyArg_ParseTuple's "i" and "L" read them. */
static int arg_int(PyObject *o, int *out) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return 0;
    if (v < INT_MIN || v > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "an int argument is outside the C int range");
        return 0;
    }
    *out = (int)v;
    return 1;
}

static int arg_ll(PyObject *o, long long *out) {
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return 0;
    *out = v;
    return 1;
}

/* A read-only bytes argument as "y*" ("s*" when text_ok: a str as its UTF-8) reads it, without
 * the buffer protocol for the exact bytes (and str) the broker passes: view->obj stays NULL, so
 * PyBuffer_Release does nothing; the object lives in the caller's arguments meanwhile. */
static int arg_bytes(PyObject *o, Py_buffer *view, int text_ok) {
    if (PyBytes_CheckExact(o)) {
        view->obj = NULL;
        view->buf = PyBytes_AS_STRING(o);
        view->len = PyBytes_GET_SIZE(o);
        return 1;
    }
    if (text_ok && PyUnicode_Check(o)) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(o, &n);
        if (!s) return 0;
        view->obj = NULL;
        view->buf = (void *)s;
        view->len = n;
        return 1;
    }
    if (PyUnicode_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "a bytes-like argument was given a str");
        return 0;
    }
    return PyObject_GetBuffer(o, view, PyBUF_SIMPLE) == 0;
}

static PyObject *write_single(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    /* METH_FASTCALL: called once per single send (PyArg_ParseTuple's buffer exports and the
     * argument tuple were a quarter of the call).  Every number is converted first -- any
     * __index__ runs before a buffer is taken -- then the buffers, in order. */
    if (nargs != 19) {
        PyErr_SetString(PyExc_TypeError, "write_single takes 19 arguments");
        return NULL;
    }
    Py_ssize_t pos;
    int queue_id, sysflag, flag, born_port, store_port, reconsume;
    long long qoff, phys, born_ts, store_ts, index_prefix;
    if (!PyIndex_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "pos must be an int");
        return NULL;
    }
    pos = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    if ((pos == -1 && PyErr_Occurred()) || !arg_int(args[6], &queue_id) || !arg_ll(args[7], &qoff) ||
        !arg_ll(args[8], &phys) || !arg_int(args[9], &sysflag) || !arg_int(args[10], &flag) ||
        !arg_ll(args[11], &born_ts) || !arg_int(args[13], &born_port) || !arg_ll(args[14], &store_ts) ||
        !arg_int(args[16], &store_port) || !arg_int(args[17], &reconsume) || !arg_ll(args[18], &index_prefix))
        return NULL;
    Py_buffer buf, body, props, extra, topic, born_ip, store_ip;
    Py_buffer *views[] = {&body, &props, &extra, &topic, &born_ip, &store_ip};
    PyObject *const sources[] = {args[2], args[3], args[4], args[5], args[12], args[15]};
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_WRITABLE) < 0) return NULL;
    for (int i = 0; i < 6; i++) {
        if (!arg_bytes(sources[i], views[i], i == 1)) {
            for (int k = 0; k < i; k++) PyBuffer_Release(views[k]);
            PyBuffer_Release(&buf);
            return NULL;
        }
    }
    PyObject *result = NULL, *cq = NULL, *ids = NULL;
    unsigned char *joined = NULL;
    run_notes notes;
    memset(&notes, 0, sizeof(notes));
    record_common rc = {topic.buf, topic.len, queue_id, sysflag, born_port, store_port, reconsume,
                        born_ts, store_ts, born_ip.buf, store_ip.buf};
    const Py_buffer *inputs[] = {&body, &props, &extra, &topic, &born_ip, &store_ip};
    if (check_write_args(&buf, pos, &topic, &born_ip, &store_ip, inputs, 6) < 0) goto done;
    const unsigned char *starts[MAX_PAIRS];
    Py_ssize_t lens[MAX_PAIRS];
    int k = plain_pairs(props.buf, props.len, starts, lens);
    if (k < 0 || body.len <= 0 || body.len > MAX_RECORD_BODY || extra.len > MAX_PROPERTIES) {
        PyErr_SetString(PyExc_ValueError, "write_single takes only properties scan_single accepts and a body");
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
    Py_ssize_t total = record_room(body.len, topic.len, jl, buf.len - pos);
    if (total < 0) goto done;
    if (notes_begin(&notes, 1, &rc, index_prefix, &cq, &ids) < 0) goto done;
    unsigned char *out = (unsigned char *)buf.buf + pos;
    put_record(out, total, &rc, body.buf, (int32_t)body.len, flag, joined, kept, extra.buf,
               extra.len, qoff, phys);
    if (note_record(&notes, out + total - jl, jl, phys, total) < 0) goto done;
    result = notes_end(&notes, cq, ids);
    cq = ids = NULL;
done:
    Py_XDECREF(cq); Py_XDECREF(ids);
    PyMem_Free(notes.idx.buf);
    PyMem_Free(joined);
    PyBuffer_Release(&buf); PyBuffer_Release(&body); PyBuffer_Release(&props); PyBuffer_Release(&extra);
    PyBuffer_Release(&topic); PyBuffer_Release(&born_ip); PyBuffer_Release(&store_ip);
    return result;
}

PyMethodDef apogee_records_methods[] = {
    {"scan_batch", scan_batch, METH_VARARGS, scan_batch_doc},
    {"write_batch", write_batch, METH_VARARGS, write_batch_doc},
    {"scan_single", (PyCFunction)(void (*)(void))scan_single, METH_FASTCALL, scan_single_doc},
    {"send_v2_fields", (PyCFunction)(void (*)(void))send_v2_fields, METH_FASTCALL, send_v2_fields_doc},
    {"write_single", (PyCFunction)(void (*)(void))write_single, METH_FASTCALL, write_single_doc},
    {NULL, NULL, 0, NULL},
};
