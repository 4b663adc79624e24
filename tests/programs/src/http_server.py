# The Python standard library's threaded HTTP file server, as
# `python3 -m http.server` runs it (ThreadingHTTPServer: one thread per
# connection; SimpleHTTPRequestHandler), with two differences only: it
# listens on 127.0.0.1 on a free port that it prints on stdout, and its
# listen backlog is 1024 instead of socketserver's 5 (the client opens
# hundreds of connections at once; with 5 the kernel drops SYNs and the
# client waits for retransmissions).
#   python3 http_server.py DIR
import functools
import http.server
import sys


class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 1024


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass


handler = functools.partial(Handler, directory=sys.argv[1])
with Server(("127.0.0.1", 0), handler) as httpd:
    print(httpd.server_address[1], flush=True)
    httpd.serve_forever()
