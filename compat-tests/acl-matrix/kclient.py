"""kclient: one principal's connection to a SASL_PLAINTEXT listener, on a raw socket.

A connection authenticates as Kafka's Java client does over SASL/PLAIN: SaslHandshake v1 naming
PLAIN, then SaslAuthenticate v2 whose auth_bytes are `\\0username\\0password` (an empty
authorization id, RFC 4616). Every later request is encoded and its answer decoded with Kafka's
own message specs (compat-tests/diff/kproto.py), so the requests are exactly those the matrix
names, at exactly the version it chooses. A connection the broker closed is opened and
authenticated again before the next request; a failed authentication raises AuthFailed with the
broker's answer (its error code is what the `auth.*` cases compare).
"""
import socket
import struct
import time

import kproto

READ_TIMEOUT_S = 15.0
FRAME_BYTES_MAX = 64 << 20
SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18
HANDSHAKE_VERSION, AUTHENTICATE_VERSION = 1, 2


class AuthFailed(Exception):
    def __init__(self, step, answer):
        super().__init__(f"{step}: {answer}")
        self.step, self.answer = step, answer


class Closed(Exception):
    pass


class Conn:
    """A connection as one principal: (username, password) on host:port."""

    def __init__(self, specs, addr, username, password, client_id="acl-matrix"):
        self.specs = specs
        host, port = addr.rsplit(":", 1)
        self.addr = (host, int(port))
        self.username, self.password = username, password
        self.client_id = client_id
        self.sock = None
        self.corr = 0

    # -- framing ---------------------------------------------------------------------------

    def _recv_exact(self, n, deadline):
        out = bytearray()
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout()
            self.sock.settimeout(left)
            chunk = self.sock.recv(min(n - len(out), 1 << 20))
            if not chunk:
                raise Closed("closed by the broker")
            out += chunk
        return bytes(out)

    def _exchange(self, api, version, body, timeout):
        """One request on the open socket; returns the decoded answer body."""
        self.corr += 1
        req = self.specs[(api, "request")]
        payload = kproto.encode_request(req, version, self.corr, body, client_id=self.client_id)
        try:
            self.sock.sendall(struct.pack(">i", len(payload)) + payload)
            deadline = time.monotonic() + timeout
            (n,) = struct.unpack(">i", self._recv_exact(4, deadline))
            if n < 4 or n > FRAME_BYTES_MAX:
                raise Closed(f"bad frame length {n}")
            data = self._recv_exact(n, deadline)
        except (OSError, Closed) as e:
            self.close()
            raise Closed(str(e)) from e
        _, answer = kproto.decode_response(api, self.specs[(api, "response")], version, data)
        if answer.get("_trailing_bytes"):
            raise kproto.DecodeError(f"{answer['_trailing_bytes']} bytes after the answer")
        return answer

    # -- authentication --------------------------------------------------------------------

    def connect(self):
        if self.sock is not None:
            return
        self.sock = socket.create_connection(self.addr, timeout=READ_TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            hs = self._exchange(SASL_HANDSHAKE, HANDSHAKE_VERSION, {"mechanism": "PLAIN"}, READ_TIMEOUT_S)
            if hs.get("error_code") != 0:
                raise AuthFailed("SaslHandshake", hs)
            token = b"\0" + self.username.encode() + b"\0" + self.password.encode()
            au = self._exchange(SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": token}, READ_TIMEOUT_S)
            if au.get("error_code") != 0:
                raise AuthFailed("SaslAuthenticate", au)
        except (AuthFailed, Closed, kproto.DecodeError):
            self.close()
            raise

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None

    # -- requests --------------------------------------------------------------------------

    def request(self, api, version, body, timeout=READ_TIMEOUT_S):
        """Sends one request as this principal (authenticating first if needed) and returns
        the decoded answer body. Raises Closed if the broker closed the connection."""
        self.connect()
        return self._exchange(api, version, body, timeout)


def try_authenticate(specs, addr, username, password):
    """The broker's answer to a SASL/PLAIN authentication: {"status": "authenticated"} or
    {"status": "refused", "step": ..., "answer": ...} or {"status": "closed"}."""
    c = Conn(specs, addr, username, password)
    try:
        c.connect()
        return {"status": "authenticated"}
    except AuthFailed as e:
        return {"status": "refused", "step": e.step, "answer": e.answer}
    except Closed:
        return {"status": "closed"}
    finally:
        c.close()
