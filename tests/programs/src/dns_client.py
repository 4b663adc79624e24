#!/usr/bin/env python3
"""A DNS client for the unbound case of tests/run_programs.sh (runs natively).

  dns_client.py conf NAMES              print unbound.conf local-data lines
  dns_client.py run PORT NAMES THREADS ROUNDS

run: THREADS threads, each with UDP and TCP sockets to 127.0.0.1:PORT, ask
ROUNDS times for every name's A and TXT records (and for a name that does
not exist), and check every answer against what conf gave unbound. UDP
queries wait for their answer (a lost datagram is asked again, with the
same id); stdout has only counts and a checksum of the answers (order-free).
"""
import hashlib, random, socket, struct, sys, threading


def addr(i):
    return "10.%d.%d.%d" % (i >> 16 & 255, i >> 8 & 255, i & 255)


def txt(i):
    return "t%d-%s" % (i, hashlib.sha256(str(i).encode()).hexdigest()[: 8 + i % 40])


def query(qid, name, qtype):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for part in name.split("."):
        if part:
            q += bytes([len(part)]) + part.encode()
    return q + b"\0" + struct.pack(">HH", qtype, 1)


def skip_name(m, o):
    while True:
        n = m[o]
        if n == 0:
            return o + 1
        if n & 0xC0 == 0xC0:
            return o + 2
        o += 1 + n


def parse(m, qid):
    """(rcode, [(type, rdata bytes)]) of an answer to query qid."""
    rid, flags, qd, an = struct.unpack(">HHHH", m[:8])
    if rid != qid or not flags & 0x8000:
        raise ValueError("answer %d to query %d, flags %x" % (rid, qid, flags))
    o = 12
    for _ in range(qd):
        o = skip_name(m, o) + 4
    rr = []
    for _ in range(an):
        o = skip_name(m, o)
        t, _c, _ttl, ln = struct.unpack(">HHIH", m[o : o + 10])
        o += 10
        rr.append((t, m[o : o + ln]))
        o += ln
    return flags & 15, rr


def expect(i, qtype):
    if i < 0:
        return (3, [])  # NXDOMAIN
    if qtype == 1:
        return (0, [(1, socket.inet_aton(addr(i)))])
    t = txt(i).encode()
    return (0, [(16, bytes([len(t)]) + t)])


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise ValueError("TCP connection closed")
        b += c
    return b


def worker(port, names, rounds, tid, out, errs):
    r = random.Random(tid)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(5)
    t = socket.create_connection(("127.0.0.1", port), timeout=60)
    h = hashlib.sha256()
    n = 0
    try:
        for rd in range(rounds):
            order = list(range(names)) + [-1]
            r.shuffle(order)
            for i in order:
                for qtype in (1, 16):
                    name = ("n%d.test." % i) if i >= 0 else ("none%d.test." % tid)
                    qid = r.randrange(65536)
                    q = query(qid, name, qtype)
                    if (i + rd) % 4 == 0:
                        t.sendall(struct.pack(">H", len(q)) + q)
                        ln = struct.unpack(">H", recv_exact(t, 2))[0]
                        got = parse(recv_exact(t, ln), qid)
                    else:
                        for _attempt in range(20):
                            u.sendto(q, ("127.0.0.1", port))
                            try:
                                m = u.recv(4096)
                            except socket.timeout:
                                continue
                            got = parse(m, qid)
                            break
                        else:
                            raise ValueError("no answer to %s" % name)
                    if got != expect(i, qtype):
                        raise ValueError("%s type %d: %r, expected %r" % (name, qtype, got, expect(i, qtype)))
                    n += 1
                    if i >= 0:
                        h.update(b"%d %d %d " % (i, qtype, rd) + repr(got).encode())
        out[tid] = (n, h.hexdigest())
    except Exception as e:  # reported by the main thread
        errs.append("thread %d: %s" % (tid, e))


def main():
    if sys.argv[1] == "conf":
        for i in range(int(sys.argv[2])):
            print("local-data: 'n%d.test. 3600 IN A %s'" % (i, addr(i)))
            print("local-data: 'n%d.test. 3600 IN TXT \"%s\"'" % (i, txt(i)))
        return 0
    port, names, nthreads, rounds = map(int, sys.argv[2:6])
    out, errs = {}, []
    ts = [threading.Thread(target=worker, args=(port, names, rounds, k, out, errs)) for k in range(nthreads)]
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    if errs:
        print("\n".join(errs[:5]), file=sys.stderr)
        return 1
    total = sum(v[0] for v in out.values())
    print("answers %d, all as configured" % total)
    # each thread's sequence of names is its own; the checksum is per thread
    print(hashlib.sha256("".join(out[k][1] for k in sorted(out)).encode()).hexdigest())
    return 0


if __name__ == "__main__":
    sys.exit(main())
