# A bounded HTTP/1.0 client of a forward proxy, for tests/run_programs.sh
# case tinyproxy (it runs natively; the proxy is the program under test).
#   python3 proxy_client.py PROXY_PORT BACKEND_PORT PROXY_PID DIR HELD TOTAL
# Phase 1: HELD connections to the proxy on 127.0.0.1, each sent the first
# line of a request for a file of DIR on the backend (127.0.0.1:
# BACKEND_PORT) and held: the proxy has a thread per client (tinyproxy),
# each blocked reading the rest of its request. Once the proxy holds a
# socket for each of them (/proc/PID/fd), its kernel threads are counted
# ("TASKS n" on stderr); then every request is completed and every body
# checked byte for byte against the file. Phase 2: TOTAL more requests in
# batches of 50 at a time, each checked. stdout is deterministic.
import hashlib
import os
import socket
import sys
import time

pport, bport, pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
root, held, total = sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
names = sorted(os.listdir(root))
data = {n: open(os.path.join(root, n), "rb").read() for n in names}


def connect():
    s = socket.create_connection(("127.0.0.1", pport), timeout=60)
    s.settimeout(60)
    return s


def finish(s, n, what):
    buf = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        buf += c
    s.close()
    head, _, body = buf.partition(b"\r\n\r\n")
    status = head.split(b"\r\n")[0].decode(errors="replace")
    if body != data[n]:
        print(f"proxy_client: {what} {n}: status {status!r}, {len(body)} bytes, "
              f"{len(data[n])} expected", file=sys.stderr)
        sys.exit(1)
    if not status.endswith(" 200 OK"):
        print(f"proxy_client: {what} {n}: status {status!r}", file=sys.stderr)
        sys.exit(1)
    return body


held_socks = []
for i in range(held):
    n = names[i % len(names)]
    s = connect()
    s.sendall(f"GET http://127.0.0.1:{bport}/{n} HTTP/1.0\r\n".encode())
    held_socks.append((s, n))
# The proxy holds a socket of its own for each (bounded wait).
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    socks = sum(1 for f in os.listdir(f"/proc/{pid}/fd")
                if os.readlink(f"/proc/{pid}/fd/{f}").startswith("socket:")) \
        if os.path.isdir(f"/proc/{pid}/fd") else 0
    if socks >= held + 1:  # and its listening socket
        break
    time.sleep(0.05)
else:
    print(f"proxy_client: the proxy holds {socks} sockets, {held + 1} expected", file=sys.stderr)
    sys.exit(1)
print("TASKS", len(os.listdir(f"/proc/{pid}/task")), file=sys.stderr, flush=True)
h = hashlib.sha256()
ok = 0
for s, n in held_socks:
    s.sendall(b"Host: 127.0.0.1\r\n\r\n")
for s, n in held_socks:
    h.update(finish(s, n, "held request"))
    ok += 1
for k in range(total // 50):
    batch = []
    for j in range(50):
        n = names[(k * 50 + j * 7) % len(names)]
        s = connect()
        s.sendall(f"GET http://127.0.0.1:{bport}/{n} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
        batch.append((s, n))
    for s, n in batch:
        h.update(finish(s, n, "request"))
        ok += 1
print(f"{ok} responses through the proxy, every body as the file; sha256 of all {h.hexdigest()}")
