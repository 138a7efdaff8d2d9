#!/usr/bin/env python3
"""A fault-injecting HTTP proxy in front of moto, for hcpflow's tests (stdlib only).

Every request is forwarded to moto unchanged, unless a rule says otherwise. Rules and
the request log are kept per *key*: the access key id the request was signed with
(`Credential=<key>/...` in its Authorization header), so tests that each sign with their
own access key id never see each other's faults. moto accepts any access key. The
credentials of a role assumed through the proxy (STS AssumeRole) count as the key that
assumed it: its rules apply to them, and its log has their requests, marked assumed.

Control API (JSON):
  POST   /_fault/rules   {"key", "action", "fault", "times"?, "code"?, "status"?,
                          "message"?, "delay_ms"?}
           action: an AWS action (`CreateVpc`, from the form body or query; Route53's
                   from its method and path) or, for S3, "METHOD /path-prefix".
           fault:  "throttle" (the service's throttling error), "error" (`code`,
                   `status`, `message` as given), "unavailable" (503), "delay"
                   (`delay_ms`, then forward).
           times:  how many matching requests it hits; absent or null: until cleared.
  DELETE /_fault/rules?key=K     clears K's rules
  GET    /_fault/log?key=K       the actions K sent, in order: [{"action", "service",
                                  "fault", "assumed"}] (service: the signature's, e.g.
                                  "ec2", "s3"; assumed: sent with a role K assumed)
  DELETE /_fault/log?key=K       clears K's log
  GET    /_fault/health          {"ok": true}

One moto deviation is corrected on the way back, so the code under test sees what AWS
sends: moto 5 lists a new zone's SOA record with the value `{'Value': '<soa>'}` (a
Python dict turned into text) instead of `<soa>`; Route53 ListResourceRecordSets
answers are given the plain value.

One moto leniency is refused as AWS refuses it: moto deletes a VPC's main route table;
AWS answers DeleteRouteTable on it with DependencyViolation (a main table goes only with
its VPC).
"""

import argparse
import http.client
import json
import re
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CREDENTIAL = re.compile(r"Credential=([^/]+)/[^/]+/[^/]+/([^/]+)/")
RECORD_SETS = re.compile(r"^/2013-04-01/hostedzone/[^/]+/rrset")
QUOTE = "(?:'|&#x27;|&#39;|&apos;)"
DICT_VALUE = re.compile(
    r"<Value>\{" + QUOTE + "Value" + QUOTE + r": " + QUOTE + r"(.*?)" + QUOTE + r"\}</Value>")
THROTTLE_CODES = {"ec2": ("RequestLimitExceeded", 503), "s3": ("SlowDown", 503)}
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authorization", "proxy-authenticate", "host", "content-length"}

lock = threading.Lock()
rules = {}  # key -> list of rule dicts
logs = {}   # key -> list of {"action", "service", "fault", "assumed"}
sessions = {}  # access key id of an assumed role -> the key that assumed it
ASSUMED_KEY = re.compile(r"<AccessKeyId>([^<]+)</AccessKeyId>")


def signer(headers):
    match = CREDENTIAL.search(headers.get("Authorization", ""))
    return (match.group(1), match.group(2)) if match else ("", "")


# Route53 is a REST API: its actions by method and path.
ROUTE53_ACTIONS = [
    ("POST", r"/2013-04-01/hostedzone", "CreateHostedZone"),
    ("GET", r"/2013-04-01/hostedzone", "ListHostedZones"),
    ("GET", r"/2013-04-01/hostedzonesbyname", "ListHostedZonesByName"),
    ("GET", r"/2013-04-01/hostedzone/[^/]+", "GetHostedZone"),
    ("DELETE", r"/2013-04-01/hostedzone/[^/]+", "DeleteHostedZone"),
    ("POST", r"/2013-04-01/hostedzone/[^/]+/rrset/?", "ChangeResourceRecordSets"),
    ("GET", r"/2013-04-01/hostedzone/[^/]+/rrset/?", "ListResourceRecordSets"),
    ("POST", r"/2013-04-01/tags/hostedzone/[^/]+", "ChangeTagsForResource"),
    ("GET", r"/2013-04-01/tags/hostedzone/[^/]+", "ListTagsForResource"),
    ("POST", r"/2013-04-01/tags/hostedzone", "ListTagsForResources"),
]


def s3_action(method, path):
    """S3 is REST too: the operation of a path-style request (bucket in the path)."""
    url = urllib.parse.urlsplit(path)
    query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
    parts = [p for p in url.path.split("/") if p]
    if not parts:
        return "ListBuckets" if method == "GET" else None
    if len(parts) == 1:
        if method == "POST" and "delete" in query:
            return "DeleteObjects"
        if method == "GET" and "location" in query:
            return "GetBucketLocation"
        if method == "GET":
            return "ListObjectsV2" if query.get("list-type") == ["2"] else "ListObjects"
        return {"HEAD": "HeadBucket", "PUT": "CreateBucket", "DELETE": "DeleteBucket"}.get(method)
    return {"HEAD": "HeadObject", "GET": "GetObject", "PUT": "PutObject",
            "DELETE": "DeleteObject"}.get(method)


def action_of(method, path, body, service="", target=""):
    if target:  # JSON protocols (Secrets Manager, STS's JSON form): "Service.Action"
        return target.rsplit(".", 1)[-1]
    if service == "s3":
        action = s3_action(method, path)
        if action:
            return action
    query = urllib.parse.urlsplit(path).query
    for source in (query, body.decode("utf-8", "replace") if body else ""):
        values = urllib.parse.parse_qs(source).get("Action")
        if values:
            return values[0]
    bare = urllib.parse.urlsplit(path).path
    for verb, pattern, action in ROUTE53_ACTIONS:
        if method == verb and re.fullmatch(pattern, bare):
            return action
    return f"{method} {bare}"


def take_rule(key, action):
    """The first live rule of `key` matching `action`, counted down."""
    with lock:
        for rule in rules.get(key, []):
            target = rule["action"]
            if action != target and not (" " in target and action.startswith(target)):
                continue
            if rule.get("times") is not None:
                if rule["times"] <= 0:
                    continue
                rule["times"] -= 1
            return dict(rule)
    return None


def is_main_route_table(upstream, headers, body):
    """Whether the DeleteRouteTable in `body` names a table holding its VPC's main
    association (asked of moto with the request's own signature headers)."""
    table = urllib.parse.parse_qs(body.decode("utf-8", "replace")).get("RouteTableId")
    if not table:
        return False
    query = urllib.parse.urlencode({"Action": "DescribeRouteTables", "Version": "2016-11-15",
                                    "RouteTableId.1": table[0]}).encode()
    connection = http.client.HTTPConnection(*upstream, timeout=60)
    try:
        connection.request("POST", "/", body=query, headers={
            "Authorization": headers.get("Authorization", ""),
            "Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
        answer = connection.getresponse().read().decode("utf-8", "replace")
    except OSError:
        return False
    finally:
        connection.close()
    return re.search(r"<main>\s*true\s*</main>", answer) is not None


def error_body(service, code, message):
    request_id = str(uuid.uuid4())
    if service == "ec2":
        return (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error>"
                f"<Code>{code}</Code><Message>{message}</Message></Error></Errors>"
                f"<RequestID>{request_id}</RequestID></Response>")
    if service == "s3":
        return (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>"
                f"<Message>{message}</Message><RequestId>{request_id}</RequestId></Error>")
    return (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><ErrorResponse><Error><Type>Sender</Type>"
            f"<Code>{code}</Code><Message>{message}</Message></Error>"
            f"<RequestId>{request_id}</RequestId></ErrorResponse>")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream = None

    def log_message(self, *args):  # quiet: the moto log has the requests
        pass

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def reply(self, status, payload, content_type="application/json"):
        data = payload if isinstance(payload, bytes) else payload.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def control(self, method, body):
        url = urllib.parse.urlsplit(self.path)
        key = urllib.parse.parse_qs(url.query).get("key", [""])[0]
        if url.path == "/_fault/health":
            return self.reply(200, json.dumps({"ok": True}))
        if url.path == "/_fault/rules" and method == "POST":
            try:
                rule = json.loads(body or b"{}")
                assert isinstance(rule.get("key"), str) and rule["key"]
                assert isinstance(rule.get("action"), str) and rule["action"]
                assert rule.get("fault") in ("throttle", "error", "unavailable", "delay")
            except (ValueError, AssertionError):
                return self.reply(400, json.dumps({"error": "need key, action and a known fault"}))
            with lock:
                rules.setdefault(rule["key"], []).append(rule)
            return self.reply(200, json.dumps({"ok": True}))
        if url.path == "/_fault/rules" and method == "DELETE":
            with lock:
                rules.pop(key, None)
            return self.reply(200, json.dumps({"ok": True}))
        if url.path == "/_fault/log" and method == "GET":
            with lock:
                return self.reply(200, json.dumps(logs.get(key, [])))
        if url.path == "/_fault/log" and method == "DELETE":
            with lock:
                logs.pop(key, None)
            return self.reply(200, json.dumps({"ok": True}))
        return self.reply(404, json.dumps({"error": f"no control route {method} {url.path}"}))

    def handle_any(self, method):
        body = self.body()
        if self.path.startswith("/_fault/"):
            return self.control(method, body)
        signed, service = signer(self.headers)
        with lock:
            key = sessions.get(signed, signed)
        action = action_of(method, self.path, body, service, self.headers.get("X-Amz-Target", ""))
        rule = take_rule(key, action) if key else None
        fault = rule["fault"] if rule else None
        if key:
            with lock:
                logs.setdefault(key, []).append({"action": action, "service": service,
                                                 "fault": fault, "assumed": key != signed})
        if fault == "throttle":
            code, status = THROTTLE_CODES.get(service, ("Throttling", 400))
            return self.reply(status, error_body(service, code, "Rate exceeded"), "text/xml")
        if fault == "unavailable":
            return self.reply(503, error_body(service, "ServiceUnavailable",
                                              "Service is unavailable"), "text/xml")
        if fault == "error":
            return self.reply(int(rule.get("status", 400)),
                              error_body(service, rule.get("code", "InvalidParameterValue"),
                                         rule.get("message", "injected by the fault proxy")),
                              "text/xml")
        if fault == "delay":
            time.sleep(int(rule.get("delay_ms", 1000)) / 1000)
        if action == "DeleteRouteTable" and is_main_route_table(self.upstream, self.headers, body):
            table = urllib.parse.parse_qs(body.decode("utf-8", "replace"))["RouteTableId"][0]
            return self.reply(400, error_body(
                service, "DependencyViolation",
                f"The routeTable '{table}' has dependencies and cannot be deleted."), "text/xml")
        self.forward(method, body, key if action == "AssumeRole" else None)

    def forward(self, method, body, assuming=None):
        connection = http.client.HTTPConnection(*self.upstream, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Host"] = self.headers.get("Host", f"{self.upstream[0]}:{self.upstream[1]}")
        try:
            connection.request(method, self.path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except OSError as error:
            return self.reply(502, json.dumps({"error": f"moto unreachable: {error}"}))
        finally:
            connection.close()
        if assuming and response.status == 200:
            found = ASSUMED_KEY.search(data.decode("utf-8", "replace"))
            if found:
                with lock:
                    sessions[found.group(1)] = assuming
        if method == "GET" and RECORD_SETS.match(self.path):
            data = DICT_VALUE.sub(lambda m: "<Value>" + m.group(1) + "</Value>",
                                  data.decode("utf-8")).encode("utf-8")
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(data)

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_DELETE(self):
        self.handle_any("DELETE")

    def do_HEAD(self):
        self.handle_any("HEAD")

    def do_PATCH(self):
        self.handle_any("PATCH")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen-port", type=int, required=True)
    parser.add_argument("--upstream-port", type=int, required=True)
    args = parser.parse_args()
    Handler.upstream = ("127.0.0.1", args.upstream_port)
    server = ThreadingHTTPServer(("127.0.0.1", args.listen_port), Handler)
    server.daemon_threads = True
    print(f"aws fault proxy on 127.0.0.1:{args.listen_port} -> moto :{args.upstream_port}",
          file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
