"""More than one core: a broker container's throughput with 1, 2, ... brokers (issue 23, item 3).

Starts `apogee namesrv` and, for each --brokers count, one `apogee broker-container
--brokers N` (loopback only, ASYNC_FLUSH unless --flush), creates the send topic on every
broker, then drives all of a container's brokers at once from a raw-frame load generator in a
process of its own: broker_cpu_bench's generator, single SEND_MESSAGE_V2 frames of 1 KiB
shaped as the Java 4.9 client writes them, --inflight in flight over --connections
connections to *each* broker (the Java client's async send: one frame per message, no
batching), answers counted by their length words.  The configurations alternate within
every run (order reversed on odd runs), so they see the same machine.

Per run and configuration it reads the CPU of every process from /proc (each broker: all its
threads, and its event-loop thread alone; the supervisor; the generator from its rusage) and
of the whole machine from /proc/stat, so the CPU the rest of the machine took meanwhile
(other work on a shared machine) is known too.  It prints medians of --runs runs, then checks
a model against every run and predicts more cores:

    X(B brokers, C cores) = min(B / broker, C_free / (broker + generator + supervisor + softirq))

each term the CPU µs per request of a process (and the kernel's softirq time), measured with
one broker: a broker is at most about one core (its Python runs one thread at a time), and
all processes of the run share the free cores, C_free (the cores less what the rest of the
machine used during that run).  The prediction for C cores puts C brokers on a C-core server with the
clients elsewhere (the generator's share leaves).

Run: .venv/bin/python benchmarks/multicore_bench.py [--runs 5] [--sends 40000] [--brokers 1,2]
     [--inflight 128] [--connections 2] [--flush SYNC_FLUSH] [--generators 1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.broker_cpu_bench import (  # noqa: E402
    SEND_TOPIC,
    _Conn,
    cpu_seconds,
    create_topic_frame,
    drive,
    label,
    send_frame,
    workload_frames,
)
from tests.support.processes import ServerProcess, start_namesrv  # noqa: E402

_CHILD = re.compile(r"(\S+) (\S+):(\d+) pid (\d+)")


# --- the generator (its own process): broker_cpu_bench's connections, several brokers ---------------


def generate(spec: dict[str, object]) -> None:
    """Connect to every target, then run broker_cpu_bench's ``drive`` and report its JSON."""
    targets = [(str(h), int(p)) for h, p in spec["targets"]]  # type: ignore[attr-defined]
    per_broker, nconn, window = (int(spec[k]) for k in ("per_broker", "connections", "window"))  # type: ignore[call-overload]
    conns = []
    for b, addr in enumerate(targets):
        for c in range(nconn):
            share = per_broker // nconn + (1 if c < per_broker % nconn else 0)
            conns.append(_Conn(addr, workload_frames("send", b * nconn + c, share), share, max(1, window // nconn)))
    print(json.dumps(drive(conns)), flush=True)


# --- the driver ------------------------------------------------------------------------------------------


class Container:
    """A running `apogee broker-container --brokers N` and its brokers' pids and addresses."""

    def __init__(self, namesrv: str, root: Path, brokers: int, flush: str) -> None:
        conf = root / f"c{brokers}.conf"
        conf.write_text(f"brokerClusterName=Multicore{brokers}\nbrokerName=mc{brokers}\nflushDiskType={flush}\n")
        self.process = ServerProcess(
            ["broker-container", "--brokers", str(brokers), "-c", str(conf), "-n", namesrv,
             "--listen", "127.0.0.1:0", "--broker-ip", "127.0.0.1", "--store-dir", str(root / f"c{brokers}"),
             "--log-level", "WARNING"],
            ready_timeout_s=120,
        ).start()
        found = _CHILD.findall(self.process.ready_line.split("brokers: ", 1)[1])
        self.addrs = [(host, int(port)) for _name, host, port, _pid in found]
        self.pids = [int(pid) for *_rest, pid in found]
        for addr in self.addrs:
            call(addr, create_topic_frame(SEND_TOPIC))

    def rss_mb(self) -> list[float]:
        """Resident memory (MB) of the supervisor, then of each broker (the pages of its mapped
        files it has touched included)."""
        out = []
        for pid in (self.process.pid, *self.pids):
            with open(f"/proc/{pid}/status") as f:
                kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
            out.append(kb / 1024)
        return out

    def close(self) -> None:
        self.process.close()


def call(addr: tuple[str, int], frame: bytes) -> None:
    """One setup request on a connection of its own; its answer must be SUCCESS."""
    conn = _Conn(addr, [frame], 1, 1)
    try:
        conn.call(frame)
        if conn.errors:
            raise RuntimeError(f"a setup request to {addr} was refused")
    finally:
        conn.sock.close()


def machine_cpu() -> tuple[float, float]:
    """CPU seconds the whole machine has been busy (every core; idle and iowait excluded;
    time stolen by the hypervisor included: those cores were not ours), and of that the
    interrupt and softirq time, which the kernel charges to no process (loopback's receive
    work runs there)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields[:8]) - fields[3] - fields[4]) / tick, (fields[5] + fields[6]) / tick


def measure(container: Container, sends: int, connections: int, window: int, generators: int) -> dict[str, Any]:
    """One run against every broker of ``container``: rates and CPU per request."""
    targets = [list(a) for a in container.addrs]
    per_gen = [targets[g::generators] for g in range(generators)]
    procs = [subprocess.Popen(
        [sys.executable, __file__, "--generate", json.dumps(
            {"targets": t, "per_broker": sends, "connections": connections, "window": window})],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for t in per_gen if t]
    try:
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError("a generator did not start")
        before = [cpu_seconds(pid) for pid in container.pids]
        sup0, (busy0, irq0), t0 = cpu_seconds(container.process.pid)[0], machine_cpu(), time.perf_counter()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outs = []
        for proc in procs:
            assert proc.stdout is not None
            outs.append(json.loads(proc.stdout.readline()))
        wall = time.perf_counter() - t0
        after = [cpu_seconds(pid) for pid in container.pids]
        sup1, (busy1, irq1) = cpu_seconds(container.process.pid)[0], machine_cpu()
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(30)
    total = sends * len(container.pids)
    if sum(o["errors"] for o in outs) or sum(o["done"] for o in outs) != total:
        raise RuntimeError(f"not every send was answered SUCCESS: {outs}")
    gen_wall = max(o["wall"] for o in outs)
    broker_cpu = [a[0] - b[0] for a, b in zip(after, before, strict=True)]
    loop_cpu = [a[1] - b[1] for a, b in zip(after, before, strict=True)]
    gen_cpu = sum(o["cpu"] for o in outs)
    ours = sum(broker_cpu) + gen_cpu + (sup1 - sup0)
    return {
        "rate": total / gen_wall,
        "broker_us": sum(broker_cpu) / total * 1e6,
        "loop_us": sum(loop_cpu) / total * 1e6,
        "gen_us": gen_cpu / total * 1e6,
        "sup_us": (sup1 - sup0) / total * 1e6,
        "broker_pcts": [c / wall * 100 for c in broker_cpu],
        "gen_pct": gen_cpu / wall * 100,
        "irq_us": (irq1 - irq0) / total * 1e6,
        "rest_cores": max(0.0, (busy1 - busy0) - (irq1 - irq0) - ours) / wall,
        "load": os.getloadavg()[0],
    }


def med(rs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in rs))


def report(results: dict[int, list[dict[str, Any]]], args: argparse.Namespace, bytes_per_send: int) -> None:
    cores = os.cpu_count() or 1
    loads = [r["load"] for rs in results.values() for r in rs]
    print(f"\nmedians of {args.runs} runs, {args.flush}, 1 KiB single sends, {args.inflight} in flight per broker "
          f"over {args.connections} connections each; {cores} cores; load average 1 min {min(loads):.1f}-"
          f"{max(loads):.1f}; src {label(str(ROOT / 'src'))}")
    print(f"{'brokers':>7} {'sends/s':>9} {'per broker':>10} {'broker µs/req':>13} {'loop µs/req':>11} "
          f"{'CPU per broker':>16} {'generator µs/req':>16} {'gen CPU':>7} {'supervisor µs/req':>17} "
          f"{'softirq µs/req':>14} {'rest of machine':>15} {'sends/s per free core':>21}")
    for n, rs in results.items():
        per_core = statistics.median(r["rate"] / max(0.1, cores - r["rest_cores"]) for r in rs)
        pcts = [statistics.median(r["broker_pcts"][i] for r in rs) for i in range(n)]
        print(f"{n:>7} {med(rs, 'rate'):9,.0f} {med(rs, 'rate') / n:10,.0f} {med(rs, 'broker_us'):13.1f} "
              f"{med(rs, 'loop_us'):11.1f} {' '.join(f'{p:.0f}%' for p in pcts):>16} {med(rs, 'gen_us'):16.1f} "
              f"{med(rs, 'gen_pct'):6.0f}% {med(rs, 'sup_us'):17.2f} {med(rs, 'irq_us'):14.1f} "
              f"{med(rs, 'rest_cores'):9.2f} cores {per_core:21,.0f}")
    pairs = [b["rate"] / a["rate"] for a, b in zip(results.get(1, []), results.get(2, []), strict=False)]
    if pairs:
        print(f"2 brokers / 1 broker, run by run (each pair ran back to back): median {statistics.median(pairs):.2f}x, "
              f"{min(pairs):.2f}x to {max(pairs):.2f}x")
    one = results.get(1)
    if not one:
        return
    broker, gen, sup, irq = (med(one, k) for k in ("broker_us", "gen_us", "sup_us", "irq_us"))
    cost = broker + gen + sup + irq
    ceiling = 1e6 / broker
    print(f"\nmodel: X(B brokers, C free cores) = min(B / {broker:.1f} µs, C / {cost:.1f} µs): a broker is at most one "
          f"core (its Python runs one thread at a time), {cost:.1f} µs = broker {broker:.1f} + generator {gen:.1f} + "
          f"supervisor {sup:.2f} + softirq {irq:.1f} (CPU per request, medians of the 1-broker runs); C = the cores "
          "less the rest of the machine's use during the run")
    print("checked run by run (each run's own free cores; error = model / measured - 1):")
    print(f"{'brokers':>7} {'free cores':>10} {'model sends/s':>13} {'measured':>9} {'median error':>12} "
          f"{'error range':>13}")
    for n, rs in results.items():
        frees = [max(0.1, cores - r["rest_cores"]) for r in rs]
        models = [min(n * ceiling, free / cost * 1e6) for free in frees]
        errors = [(m - r["rate"]) / r["rate"] * 100 for m, r in zip(models, rs, strict=True)]
        print(f"{n:>7} {statistics.median(frees):10.2f} {statistics.median(models):13,.0f} {med(rs, 'rate'):9,.0f} "
              f"{statistics.median(errors):+11.0f}% {min(errors):+5.0f}% to {max(errors):+.0f}%")
    server = broker + sup + irq
    mb = bytes_per_send / 1e6
    print(f"\nprediction: C brokers on a C-core server, clients on other machines (no generator share), "
          f"X = C / {server:.1f} µs (broker + supervisor + all softirq); what it asks of "
          f"the NIC and the disk ({bytes_per_send} bytes per request in, about as much appended to the CommitLog):")
    print(f"{'cores':>5} {'sends/s':>10} {'network in':>11} {'CommitLog writes':>17}")
    for c in (1, 2, 4, 8, 16):
        x = c / server * 1e6
        print(f"{c:>5} {x:10,.0f} {x * mb:8,.0f} MB/s {x * mb:13,.0f} MB/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--generate", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sends", type=int, default=40_000, help="sends per broker per run")
    parser.add_argument("--brokers", default="1,2", help="container sizes to compare, alternating in every run")
    parser.add_argument("--connections", type=int, default=2, help="connections to each broker")
    parser.add_argument("--inflight", type=int, default=128, help="sends in flight to each broker")
    parser.add_argument("--generators", type=int, default=1, help="generator processes (brokers split among them)")
    parser.add_argument("--flush", default="ASYNC_FLUSH", choices=["ASYNC_FLUSH", "SYNC_FLUSH"])
    parser.add_argument("--store-dir", help="where the stores go (default: a temporary directory, removed after)")
    args = parser.parse_args()
    if args.generate:
        generate(json.loads(args.generate))
        return
    counts = [int(n) for n in args.brokers.split(",") if n]
    results: dict[int, list[dict[str, Any]]] = {n: [] for n in counts}
    with tempfile.TemporaryDirectory(dir=args.store_dir) as tmp:
        root = Path(tmp)
        namesrv = start_namesrv(root / "ns")
        containers: dict[int, Container] = {}
        try:
            for n in counts:
                containers[n] = Container(namesrv.addr, root, n, args.flush)
                print(f"container of {n}: {containers[n].process.ready_line}", flush=True)
            idle = {n: c.rss_mb() for n, c in containers.items()}
            for run in range(args.runs):
                for n in counts if run % 2 == 0 else counts[::-1]:
                    r = measure(containers[n], args.sends, args.connections, args.inflight, args.generators)
                    results[n].append(r)
                    print(f"  run {run + 1} {n} broker(s) {r['rate']:9,.0f} sends/s  broker {r['broker_us']:5.1f} "
                          f"µs/req (loop {r['loop_us']:5.1f})  generator {r['gen_us']:4.1f}  softirq "
                          f"{r['irq_us']:4.1f}  rest of machine {r['rest_cores']:.2f} cores  load {r['load']:.1f}",
                          flush=True)
            rss = {n: c.rss_mb() for n, c in containers.items()}
        finally:
            for container in containers.values():
                container.close()
            namesrv.close()
    report(results, args, len(send_frame(SEND_TOPIC, 0, 0)))
    print()
    for when, table in (("at start", idle), ("after the runs", rss)):
        print(f"resident memory {when}: " + "; ".join(
            f"{n} broker(s): supervisor {v[0]:.0f} MB, brokers {' '.join(f'{mb:.0f}' for mb in v[1:])} MB"
            for n, v in table.items()))


if __name__ == "__main__":
    main()
