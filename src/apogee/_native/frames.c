/*
 * Remoting frames with JSON headers, in both directions: decode_frames (bytes -> commands),
 * json_frame_head and fields_frame (a header's fields -> the frame's bytes).
 */
#include "native.h"

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

/* The command type's __slots__, in this order, and where its instances keep them: found once
 * per type (held while cached), so a decoded frame fills its command without an attribute
 * lookup per field. */
#define N_CMD_FIELDS 9
static const char *CMD_FIELDS[N_CMD_FIELDS] = {"code", "language", "version", "opaque", "flag",
                                               "remark", "ext_fields", "body", "serialize_type"};
static PyTypeObject *slots_type;
static Py_ssize_t slot_offsets[N_CMD_FIELDS];

/* 0 and TypeError unless cls is a class whose instances have every field as a slot. */
static int bind_command_type(PyObject *cls) {
    if ((PyObject *)slots_type == cls) return 1;
    if (!PyType_Check(cls)) { PyErr_SetString(PyExc_TypeError, "command_type must be a class"); return 0; }
    Py_ssize_t offsets[N_CMD_FIELDS];
    for (int i = 0; i < N_CMD_FIELDS; i++) {
        PyObject *name = PyUnicode_InternFromString(CMD_FIELDS[i]);
        if (!name) return 0;
        int ok = python_slot_offset((PyTypeObject *)cls, name, &offsets[i]);
        Py_DECREF(name);
        if (!ok) return 0;
    }
    memcpy(slot_offsets, offsets, sizeof(offsets));
    Py_INCREF(cls);
    Py_XSETREF(slots_type, (PyTypeObject *)cls);
    return 1;
}

/* One JSON-header frame (after its length word) as a new command of cls, whose slots are at
 * offsets; NULL to decline (no error left set) or on a real error (set). */
static PyObject *json_command(const unsigned char *frame, Py_ssize_t len, PyTypeObject *cls,
                              const Py_ssize_t *offsets, PyObject *lang_by_name, PyObject *other_lang) {
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
                /* the lookup may run Python code (a key's __eq__): the value is held at once */
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

    Py_ssize_t blen = len - 4 - hlen;
    PyObject *body = Py_None;
    if (blen > 0) body = PyBytes_FromStringAndSize((const char *)frame + 4 + hlen, blen); else Py_INCREF(body);
    if (!remark) { remark = Py_None; Py_INCREF(remark); }
    if (!ext) { ext = Py_None; Py_INCREF(ext); }
    /* every value a new reference, moved into the command's slots */
    PyObject *vals[N_CMD_FIELDS] = {
        PyLong_FromLong(code), language, PyLong_FromLong(version), PyLong_FromLong(opaque),
        PyLong_FromLong(flag), remark, ext, body, PyLong_FromLong(0),
    };
    int ok = 1;
    for (int i = 0; i < N_CMD_FIELDS; i++) if (!vals[i]) ok = 0;
    PyObject *cmd = ok ? cls->tp_alloc(cls, 0) : NULL;
    if (!cmd) {
        for (int i = 0; i < N_CMD_FIELDS; i++) Py_XDECREF(vals[i]);
        return NULL;
    }
    for (int i = 0; i < N_CMD_FIELDS; i++) *(PyObject **)((char *)cmd + offsets[i]) = vals[i];
    return cmd;
decline:
    PyErr_Clear();
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
"beyond int32).  TypeError for a command_type without RemotingCommand's slots.");

static PyObject *decode_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyType_Check(args[2]) || !PyDict_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "decode_frames(data, max_frame_size, command_type, language_by_name: dict, other_language)");
        return NULL;
    }
    long long max_frame = PyLong_AsLongLong(args[1]);
    if (max_frame == -1 && PyErr_Occurred()) return NULL;
    if (!bind_command_type(args[2])) return NULL;
    PyTypeObject *cls = (PyTypeObject *)args[2];
    Py_ssize_t offsets[N_CMD_FIELDS]; /* a finalizer run below may bind another type */
    memcpy(offsets, slot_offsets, sizeof(offsets));
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
        PyObject *cmd = json_command(b + pos + 4, length, cls, offsets, args[3], args[4]);
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
    return Py_BuildValue("(Nn)", out, pos);
decline:
    PyBuffer_Release(&view);
    Py_DECREF(out);
    Py_RETURN_NONE;
error:
    PyBuffer_Release(&view);
    Py_DECREF(out);
    return NULL;
}

/* ---- JSON headers written ------------------------------------------------------------------ */

/* The writers size their buffer for the worst case (every byte of a string escaped as \u00XX,
 * every number 20 digits) and check the room before each part; an overrun is impossible, and
 * a miscount would be a SystemError, never a write past the end. */
#define QUOTED_MAX(n) (6 * (n) + 2)
#define FIXED_TEXT 256 /* the header's fixed text, four numbers and the remark's key */
#define STACK_HEADER 2048

typedef struct { char *p, *end; } jwriter;

static int jw_fail(void) {
    PyErr_SetString(PyExc_SystemError, "a JSON header longer than it was sized");
    return 0;
}

static int put_text(jwriter *w, const char *s, Py_ssize_t n) {
    if (w->end - w->p < n) return jw_fail();
    memcpy(w->p, s, n);
    w->p += n;
    return 1;
}

static const char HEX_LOWER[] = "0123456789abcdef";

/* s[0..n) as a JSON string, escaped as orjson escapes it. */
static int put_quoted(jwriter *w, const char *s, Py_ssize_t n) {
    if (w->end - w->p < QUOTED_MAX(n)) return jw_fail();
    char *o = w->p;
    *o++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') { *o++ = (char)ch; continue; }
        *o++ = '\\';
        switch (ch) {
        case '"': case '\\': *o++ = (char)ch; break;
        case '\b': *o++ = 'b'; break;
        case '\t': *o++ = 't'; break;
        case '\n': *o++ = 'n'; break;
        case '\f': *o++ = 'f'; break;
        case '\r': *o++ = 'r'; break;
        default:
            *o++ = 'u'; *o++ = '0'; *o++ = '0';
            *o++ = HEX_LOWER[ch >> 4]; *o++ = HEX_LOWER[ch & 15];
        }
    }
    *o++ = '"';
    w->p = o;
    return 1;
}

/* v in decimal, as "%lld" writes it (snprintf's format parsing cost more than the rest of a
 * send's answer header). */
static int put_int(jwriter *w, long long v) {
    char digits[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        digits[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    if (w->end - w->p < n + (v < 0)) return jw_fail();
    if (v < 0) *w->p++ = '-';
    while (n) *w->p++ = digits[--n];
    return 1;
}

#define PUT_LITERAL(w, lit) put_text((w), (lit), (Py_ssize_t)sizeof(lit) - 1)

/* The header up to its first extFields key: {"code":N,"extFields":{ */
static int put_header_start(jwriter *w, long long code) {
    return PUT_LITERAL(w, "{\"code\":") && put_int(w, code) && PUT_LITERAL(w, ",\"extFields\":{");
}

/* The header after its extFields, as header_json writes it: flag, language, opaque, serialize
 * type, version and the remark when there is one, then the closing brace. */
static int put_header_end(jwriter *w, long long flag, const char *ls, Py_ssize_t ln, long long opaque,
                          long long version, const char *rs, Py_ssize_t rn) {
    if (!PUT_LITERAL(w, "},\"flag\":") || !put_int(w, flag) || !PUT_LITERAL(w, ",\"language\":") ||
        !put_quoted(w, ls, ln) || !PUT_LITERAL(w, ",\"opaque\":") || !put_int(w, opaque) ||
        !PUT_LITERAL(w, ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":") || !put_int(w, version))
        return 0;
    if (rs && (!PUT_LITERAL(w, ",\"remark\":") || !put_quoted(w, rs, rn))) return 0;
    return PUT_LITERAL(w, "}");
}

/* A buffer of cap bytes for a header: on the stack when it is small. */
typedef struct { char *buf; char stack[STACK_HEADER]; } header_space;

static char *header_alloc(header_space *hs, Py_ssize_t cap) {
    if (cap <= STACK_HEADER) return hs->buf = hs->stack;
    hs->buf = PyMem_Malloc(cap);
    if (!hs->buf) PyErr_NoMemory();
    return hs->buf;
}

static void header_free(header_space *hs) {
    if (hs->buf && hs->buf != hs->stack) PyMem_Free(hs->buf);
}

/* length word, serialize type and header length, header; then the body when `body` is given
 * (else only its length counts).  None past the protocol's limits. */
static PyObject *frame_bytes(const char *header, Py_ssize_t hlen, PyObject *body, long long body_len) {
    if (hlen > 0xFFFFFF || body_len < 0 || body_len > 0x7FFFFFFFLL - 4 - hlen) Py_RETURN_NONE;
    PyObject *out = PyBytes_FromStringAndSize(NULL, 8 + hlen + (body ? body_len : 0));
    if (!out) return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    be32(o, (uint32_t)(4 + hlen + body_len));
    be32(o + 4, (uint32_t)hlen);
    memcpy(o + 8, header, hlen);
    if (body) memcpy(o + 8 + hlen, PyBytes_AS_STRING(body), body_len);
    return out;
}

/* An int for a JSON number, read without running Python code: 0 to decline (not an int, a
 * bool, beyond 64 bits). */
static int plain_int(PyObject *o, long long *out) {
    if (!PyLong_Check(o) || PyBool_Check(o)) return 0; /* IntEnum codes are ints; orjson writes bools as true/false */
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
    return 1;
}

PyDoc_STRVAR(json_frame_head_doc,
"json_frame_head(code, language, version, opaque, flag, remark, ext_fields, body_length,\n"
"                language_names: dict[int, str]) -> bytes | None\n\n"
"The length prefix and JSON header of a frame whose body has body_length bytes: the first\n"
"buffer codec.encode returns for a JSON command (reference: header_json.encode_header and\n"
"codec.encode; the same bytes orjson writes).  None when the pure path must build it:\n"
"ext_fields neither None nor a dict of str keys and values, a string that is not encodable,\n"
"a number beyond 64 bits, a negative body_length or a frame beyond the protocol's limits.");

static PyObject *json_frame_head(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9 || !PyDict_CheckExact(args[8])) {
        PyErr_SetString(PyExc_TypeError,
                        "json_frame_head(code, language, version, opaque, flag, remark, ext_fields, body_length, "
                        "language_names: dict)");
        return NULL;
    }
    long long nums[4]; /* code, flag, opaque, version */
    PyObject *num_args[4] = {args[0], args[4], args[3], args[2]};
    for (int i = 0; i < 4; i++)
        if (!plain_int(num_args[i], &nums[i])) Py_RETURN_NONE;
    /* These two may run Python code (__index__, a key's __eq__): before anything is read. */
    long long body_len = PyLong_AsLongLong(args[7]);
    if (body_len == -1 && PyErr_Occurred()) return NULL;
    PyObject *lang = PyDict_GetItemWithError(args[8], args[1]);
    if (!lang && PyErr_Occurred()) { PyErr_Clear(); Py_RETURN_NONE; }
    Py_XINCREF(lang);
    PyObject *out = NULL;
    header_space hs;
    hs.buf = NULL; /* the stack part is not cleared: it is written before it is read */
    const char *ls = "OTHER";
    Py_ssize_t ln = 5;
    if (lang && (!PyUnicode_CheckExact(lang) || !(ls = PyUnicode_AsUTF8AndSize(lang, &ln)))) goto decline;
    const char *rs = NULL;
    Py_ssize_t rn = 0;
    PyObject *remark = args[5];
    if (remark != Py_None && (!PyUnicode_CheckExact(remark) || !(rs = PyUnicode_AsUTF8AndSize(remark, &rn))))
        goto decline;
    PyObject *ext = args[6];
    if (ext != Py_None && !PyDict_CheckExact(ext)) goto decline;
    int has_ext = ext != Py_None && PyDict_GET_SIZE(ext) > 0;

    /* From here on no Python code runs: the dict holds what was sized. */
    Py_ssize_t cap = FIXED_TEXT + QUOTED_MAX(ln) + (rs ? QUOTED_MAX(rn) : 0);
    PyObject *k, *v;
    Py_ssize_t it = 0;
    if (has_ext) {
        while (PyDict_Next(ext, &it, &k, &v)) {
            Py_ssize_t kn, vn;
            if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v) || !PyUnicode_AsUTF8AndSize(k, &kn) ||
                !PyUnicode_AsUTF8AndSize(v, &vn)) goto decline;
            cap += QUOTED_MAX(kn) + QUOTED_MAX(vn) + 2;
        }
    }
    if (!header_alloc(&hs, cap)) goto done;
    jwriter w = {hs.buf, hs.buf + cap};
    if (!put_header_start(&w, nums[0])) goto done;
    if (has_ext) {
        it = 0;
        int first = 1;
        while (PyDict_Next(ext, &it, &k, &v)) {
            Py_ssize_t kn, vn;
            const char *ks = PyUnicode_AsUTF8AndSize(k, &kn), *vs = PyUnicode_AsUTF8AndSize(v, &vn);
            if (!ks || !vs) goto done;
            if ((!first && !PUT_LITERAL(&w, ",")) || !put_quoted(&w, ks, kn) || !PUT_LITERAL(&w, ":") ||
                !put_quoted(&w, vs, vn))
                goto done;
            first = 0;
        }
    }
    if (!put_header_end(&w, nums[1], ls, ln, nums[2], nums[3], rs, rn)) goto done;
    out = frame_bytes(hs.buf, w.p - hs.buf, NULL, body_len);
    goto done;
decline:
    PyErr_Clear();
    out = Py_None;
    Py_INCREF(out);
done:
    header_free(&hs);
    Py_XDECREF(lang);
    return out;
}

PyDoc_STRVAR(fields_frame_doc,
"fields_frame(code, opaque, flag, language_name, version, keys: tuple[str, ...],\n"
"              values: tuple[str | int | None, ...], body: bytes | int | None) -> bytes | None\n\n"
"A whole JSON frame (a request, or with flag RPC_RESPONSE an answer), body included, whose\n"
"extFields are keys[i] -> str(values[i]) for every value that is not None, in order\n"
"(reference: codec.fields_frame_py, which builds the RemotingCommand and encodes it).  A frame\n"
"built this way needs no dict, no str() per number and no RemotingCommand.  body given as an\n"
"int is the length of a body the caller writes after the returned bytes (a pull's records):\n"
"the frame's head alone.  None when the reference must build it: a value that is neither str\n"
"nor int (bool included), a number beyond 64 bits, a string that is not encodable, a\n"
"body that is neither bytes nor an int, a frame beyond the protocol's limits.");

static PyObject *fields_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8 || !PyTuple_CheckExact(args[5]) || !PyTuple_CheckExact(args[6]) ||
        PyTuple_GET_SIZE(args[5]) != PyTuple_GET_SIZE(args[6]) || !PyUnicode_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "fields_frame(code, opaque, flag, language_name: str, version, keys: tuple, values: tuple "
                        "of the same length, body)");
        return NULL;
    }
    /* Only tuples, exact str, ints and bytes are read: no Python code runs in this function. */
    PyObject *body = args[7] == Py_None ? NULL : args[7];
    long long body_len = 0; /* a body written by the caller after the head (an int body) */
    if (body && PyLong_CheckExact(body)) {
        if (!plain_int(body, &body_len) || body_len < 0) Py_RETURN_NONE;
        body = NULL;
    } else if (body) {
        if (!PyBytes_CheckExact(body)) Py_RETURN_NONE;
        body_len = PyBytes_GET_SIZE(body);
    }
    long long nums[4]; /* code, opaque, flag, version */
    PyObject *num_args[4] = {args[0], args[1], args[2], args[4]};
    for (int i = 0; i < 4; i++)
        if (!plain_int(num_args[i], &nums[i])) Py_RETURN_NONE;
    Py_ssize_t ln;
    const char *ls = PyUnicode_AsUTF8AndSize(args[3], &ln);
    if (!ls) { PyErr_Clear(); Py_RETURN_NONE; }
    PyObject *keys = args[5], *values = args[6], *out = NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(keys);
    Py_ssize_t cap = FIXED_TEXT + QUOTED_MAX(ln);
    header_space hs;
    hs.buf = NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *k = PyTuple_GET_ITEM(keys, i), *v = PyTuple_GET_ITEM(values, i);
        if (v == Py_None) continue;
        Py_ssize_t kn, vn = 22; /* a quoted 64-bit number */
        long long num;
        if (!PyUnicode_CheckExact(k) || !PyUnicode_AsUTF8AndSize(k, &kn)) goto decline;
        if (PyUnicode_CheckExact(v)) {
            if (!PyUnicode_AsUTF8AndSize(v, &vn)) goto decline;
            vn = QUOTED_MAX(vn);
        } else if (!PyLong_CheckExact(v) || !plain_int(v, &num)) {
            goto decline;
        }
        cap += QUOTED_MAX(kn) + vn + 2;
    }
    if (!header_alloc(&hs, cap)) goto done;
    jwriter w = {hs.buf, hs.buf + cap};
    if (!put_header_start(&w, nums[0])) goto done;
    int first = 1;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *v = PyTuple_GET_ITEM(values, i);
        if (v == Py_None) continue;
        Py_ssize_t kn, vn;
        const char *ks = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(keys, i), &kn);
        if (!ks || (!first && !PUT_LITERAL(&w, ",")) || !put_quoted(&w, ks, kn) || !PUT_LITERAL(&w, ":")) goto done;
        first = 0;
        if (PyUnicode_CheckExact(v)) {
            const char *vs = PyUnicode_AsUTF8AndSize(v, &vn);
            if (!vs || !put_quoted(&w, vs, vn)) goto done;
        } else {
            long long num;
            if (!plain_int(v, &num) || !PUT_LITERAL(&w, "\"") || !put_int(&w, num) || !PUT_LITERAL(&w, "\""))
                goto done;
        }
    }
    if (!put_header_end(&w, nums[2], ls, ln, nums[1], nums[3], NULL, 0)) goto done;
    out = frame_bytes(hs.buf, w.p - hs.buf, body, body_len);
    goto done;
decline:
    PyErr_Clear();
    out = Py_None;
    Py_INCREF(out);
done:
    header_free(&hs);
    return out;
}

PyMethodDef apogee_frames_methods[] = {
    {"decode_frames", (PyCFunction)(void (*)(void))decode_frames, METH_FASTCALL, decode_frames_doc},
    {"json_frame_head", (PyCFunction)(void (*)(void))json_frame_head, METH_FASTCALL, json_frame_head_doc},
    {"fields_frame", (PyCFunction)(void (*)(void))fields_frame, METH_FASTCALL, fields_frame_doc},
    {NULL, NULL, 0, NULL},
};
