/*
 * The SYNC_FLUSH group commit's fdatasync on a thread that never takes the GIL: Flusher.
 *
 * Why: on a Python thread a group commit's flush starts only when that thread holds the GIL,
 * that is when the event loop next blocks; under load that took 84 us at the median and
 * 300-600 us at p90-p99 here, on top of the thread's wake-up (docs/performance.md).  This
 * thread waits on a condition variable, runs fdatasync(2) on its own dup of the CommitLog
 * file's descriptor as soon as a put asks, flushes again at once while more was asked
 * meanwhile, and tells the loop through an eventfd, whose reader (GroupCommit) resolves the
 * waiting puts.  It touches no Python object.
 *
 * The rules stay in store/flush.py (GroupCommit): which file, which end offset, when a flush
 * resolves a put, what an error means.  This only declines more: a request for another file
 * while this one still has bytes to flush is refused (the Python path takes it), and after a
 * failed fdatasync every request is refused.
 */
#include "native.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int running;         /* the thread was started and not joined yet */
    int stop;            /* close() asked the thread to end */
    int busy;            /* an fdatasync of fd is in progress (fd must stay open) */
    int efd;             /* eventfd: +1 per finished fdatasync, read by the loop */
    int fd;              /* this object's dup of the file being flushed, or -1 */
    long long file_key;  /* the owner's name for that file (its start offset) */
    long long wanted;    /* highest end offset asked for, in that file */
    long long wanted_ts; /* the store time the owner gave with it */
    long long durable;   /* highest end offset made durable by this thread */
    long long durable_ts;
    long long fsyncs;    /* fdatasyncs done */
    long long last_ns;   /* how long the last one took */
    int err;             /* errno of the failed fdatasync; then nothing more is done */
} Flusher;

static void *flusher_main(void *arg) {
    Flusher *f = (Flusher *)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals go to the interpreter's threads */
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->stop && !f->err && !(f->fd >= 0 && f->wanted > f->durable))
            pthread_cond_wait(&f->cv, &f->mu);
        if (f->stop || f->err) break;
        int fd = f->fd;
        long long target = f->wanted, ts = f->wanted_ts;
        f->busy = 1;
        pthread_mutex_unlock(&f->mu);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int failed = fdatasync(fd) != 0 ? errno : 0;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        pthread_mutex_lock(&f->mu);
        f->busy = 0;
        if (failed) {
            f->err = failed;
        } else {
            if (target > f->durable) {
                f->durable = target;
                f->durable_ts = ts;
            }
            f->fsyncs++;
            f->last_ns = (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
        }
        pthread_cond_broadcast(&f->cv); /* close() may wait for busy to clear */
        pthread_mutex_unlock(&f->mu);
        uint64_t one = 1;
        ssize_t w;
        do {
            w = write(f->efd, &one, sizeof(one));
        } while (w < 0 && errno == EINTR);
        /* EAGAIN (the counter is full) cannot happen: the loop reads it long before 2**64. */
        pthread_mutex_lock(&f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static PyObject *flusher_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (!PyArg_ParseTuple(args, ":Flusher")) return NULL;
    Flusher *f = (Flusher *)type->tp_alloc(type, 0);
    if (!f) return NULL;
    f->fd = -1;
    f->efd = -1;
    f->wanted = f->durable = -1;
    if (pthread_mutex_init(&f->mu, NULL) != 0 || pthread_cond_init(&f->cv, NULL) != 0) {
        PyErr_SetString(PyExc_OSError, "cannot create the flusher's lock");
        Py_DECREF(f);
        return NULL;
    }
    f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (f->efd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        Py_DECREF(f);
        return NULL;
    }
    int rc = pthread_create(&f->thread, NULL, flusher_main, f);
    if (rc != 0) {
        errno = rc;
        PyErr_SetFromErrno(PyExc_OSError);
        Py_DECREF(f);
        return NULL;
    }
    f->running = 1;
    return (PyObject *)f;
}

/* Stop and join the thread (the GIL released meanwhile: it may be inside an fdatasync), then
 * close both descriptors.  Idempotent. */
static void flusher_shutdown(Flusher *f) {
    if (f->running) {
        pthread_mutex_lock(&f->mu);
        f->stop = 1;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        Py_BEGIN_ALLOW_THREADS
        pthread_join(f->thread, NULL);
        Py_END_ALLOW_THREADS
        f->running = 0;
    }
    if (f->fd >= 0) {
        close(f->fd);
        f->fd = -1;
    }
    if (f->efd >= 0) {
        close(f->efd);
        f->efd = -1;
    }
}

static void flusher_dealloc(Flusher *f) {
    flusher_shutdown(f);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

PyDoc_STRVAR(request_doc,
"request(file_key, fd, end, store_ts) -> bool\n\n"
"Make the file open as fd (named file_key by the caller, e.g. its start offset) durable up to\n"
"the end offset end, with store_ts remembered for it; True when taken.  False, and nothing\n"
"done, when the flusher is closed or failed, when fd cannot be duplicated, or when another\n"
"file still has bytes asked for and not yet durable (the caller flushes this one itself).\n"
"Never blocks on the disk: it wakes the flusher thread.");

static PyObject *flusher_request(Flusher *f, PyObject *args) {
    long long key, end, ts;
    int fd;
    if (!PyArg_ParseTuple(args, "LiLL:request", &key, &fd, &end, &ts)) return NULL;
    int taken = 0;
    pthread_mutex_lock(&f->mu);
    if (!f->running || f->stop || f->err) goto done;
    if (f->fd < 0 || f->file_key != key) {
        if (f->fd >= 0 && (f->busy || f->wanted > f->durable)) goto done;
        int mine = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (mine < 0) goto done;
        if (f->fd >= 0) close(f->fd);
        f->fd = mine;
        f->file_key = key;
        f->wanted = -1;
    }
    if (end > f->wanted) {
        f->wanted = end;
        f->wanted_ts = ts;
    }
    pthread_cond_signal(&f->cv);
    taken = 1;
done:
    pthread_mutex_unlock(&f->mu);
    return PyBool_FromLong(taken);
}

PyDoc_STRVAR(take_doc,
"take() -> (durable, store_ts, fsyncs, last_ns, errno)\n\n"
"Clear the eventfd and read the state: the highest end offset made durable (-1: none yet) and\n"
"the store time given with it, fdatasyncs done, how long the last took (ns), and the errno of\n"
"a failed fdatasync (0: none).  For the loop's reader of fileno().");

static PyObject *flusher_take(Flusher *f, PyObject *Py_UNUSED(ignored)) {
    if (f->efd >= 0) {
        uint64_t count;
        ssize_t r = read(f->efd, &count, sizeof(count)); /* EAGAIN: nothing new, fine */
        (void)r;
    }
    pthread_mutex_lock(&f->mu);
    long long durable = f->durable, ts = f->durable_ts, n = f->fsyncs, ns = f->last_ns;
    int err = f->err;
    pthread_mutex_unlock(&f->mu);
    return Py_BuildValue("LLLLi", durable, ts, n, ns, err);
}

static PyObject *flusher_fileno(Flusher *f, PyObject *Py_UNUSED(ignored)) {
    if (f->efd < 0) {
        PyErr_SetString(PyExc_ValueError, "the flusher is closed");
        return NULL;
    }
    return PyLong_FromLong(f->efd);
}

static PyObject *flusher_close(Flusher *f, PyObject *Py_UNUSED(ignored)) {
    flusher_shutdown(f);
    Py_RETURN_NONE;
}

static PyMethodDef flusher_methods[] = {
    {"request", (PyCFunction)flusher_request, METH_VARARGS, request_doc},
    {"take", (PyCFunction)flusher_take, METH_NOARGS, take_doc},
    {"fileno", (PyCFunction)flusher_fileno, METH_NOARGS, "The eventfd the loop reads: readable after each fdatasync."},
    {"close", (PyCFunction)flusher_close, METH_NOARGS, "Stop the thread (after its fdatasync in progress) and close."},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(flusher_doc,
"Flusher()\n\n"
"A thread of its own, outside the GIL, that fdatasyncs the CommitLog file a SYNC_FLUSH put\n"
"asks for, back to back while more is asked, and signals an eventfd after each (see the\n"
"comment of _native/flusher.c and store/flush.py GroupCommit).");

PyTypeObject apogee_FlusherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "apogee._native.Flusher",
    .tp_basicsize = sizeof(Flusher),
    .tp_dealloc = (destructor)flusher_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = flusher_doc,
    .tp_methods = flusher_methods,
    .tp_new = flusher_new,
};
