# memcached client (run_programs.sh case "memcached"), run natively: 40
# threads, one connection each to the server's unix socket, set 300 keys
# with values derived from (thread, key), read every one back byte for byte,
# then 50 pipelined increments of one shared counter each. Prints the
# counter (2000) and the errors (none).
import hashlib, socket, sys, threading
path = sys.argv[1]
N, K = 40, 300
errs = []
def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s
def recv_until(s, end):
    b = b""
    while not b.endswith(end):
        c = s.recv(65536)
        if not c:
            raise EOFError("connection closed")
        b += c
    return b
def value(w, k):
    return hashlib.sha256(f"{w}-{k}".encode()).hexdigest().encode() * (1 + k % 20)
def worker(w):
    try:
        s = connect()
        for k in range(K):
            v = value(w, k)
            s.sendall(b"set k%d_%d 0 0 %d\r\n%s\r\n" % (w, k, len(v), v))
            r = recv_until(s, b"\r\n")
            if r != b"STORED\r\n":
                errs.append((w, k, r)); return
        for k in range(K):
            v = value(w, k)
            s.sendall(b"get k%d_%d\r\n" % (w, k))
            r = recv_until(s, b"END\r\n")
            if r != b"VALUE k%d_%d 0 %d\r\n%s\r\nEND\r\n" % (w, k, len(v), v):
                errs.append((w, k, r[:60])); return
        s.sendall(b"incr ctr 1\r\n" * 50)
        got = 0
        while got < 50:
            got += recv_until(s, b"\r\n").count(b"\r\n")
        s.close()
    except Exception as e:
        errs.append((w, repr(e)))
s = connect()
s.sendall(b"set ctr 0 0 1\r\n0\r\n")
recv_until(s, b"\r\n")
ts = [threading.Thread(target=worker, args=(i,)) for i in range(N)]
for t in ts: t.start()
for t in ts: t.join()
s.sendall(b"get ctr\r\n")
print("ctr", recv_until(s, b"END\r\n").split(b"\r\n")[1].decode())
print("errors", len(errs), errs[:3])
sys.exit(1 if errs else 0)
