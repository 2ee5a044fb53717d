#!/usr/bin/env python3
"""Writes the gRPC and REST seed inputs (seeds/grpc, seeds/rest): each a selector byte (the RPC
or the route, as the targets number them), for REST a key byte, then the request. Run from
fuzz/; the outputs are committed (the FEEL, BPMN and DMN seeds are copies of test models)."""
import hashlib, json, os

def varint(n):
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])

def field(number, value):
    if isinstance(value, bool):
        return varint(number << 3) + varint(int(value))
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | 2) + varint(len(value)) + value

def msg(*fields):
    return b"".join(field(n, v) for n, v in fields)

KEY = 2251799813685249
one_task = open("../workloads/one_task.bpmn", "rb").read()
rules = open("../workloads/rules.dmn", "rb").read()
create = msg((2, "fuzz"), (3, -1), (4, '{"key": "k1", "amount": 1500, "category": "gold"}'))
grpc = {
    0: [msg((1, "work"), (2, "w"), (3, 60000), (4, 10), (6, 100))],
    1: [msg((1, "work"), (2, "w"), (3, 60000))],
    2: [msg((1, KEY + 5))],
    3: [msg((1, KEY + 7), (2, '{"done": true}'))],
    4: [create, msg((1, KEY + 1), (4, "{}")), msg((2, "fuzz"), (5, msg((1, "catch"))))],
    5: [msg((1, create), (2, 100), (3, "key"))],
    6: [msg((2, "d"), (3, '{"amount": 1200, "category": "gold"}'))],
    7: [msg((1, msg((1, "p.bpmn"), (2, one_task))))],
    8: [msg((1, msg((1, "p.bpmn"), (2, one_task)))), msg((1, msg((1, "r.dmn"), (2, rules))))],
    9: [msg((1, KEY + 7), (2, 0), (3, "boom"), (5, '{"x": 1}'))],
    10: [msg((1, KEY + 7), (2, "E1"), (3, "err"))],
    11: [msg((1, "msg"), (2, "k1"), (3, 10000), (5, '{"m": [1, 2]}'))],
    12: [msg((1, KEY + 9))],
    13: [msg((1, KEY + 5), (2, '{"a": {"b": [1, null, "x"]}}'), (3, True))],
    14: [b""],
    15: [msg((1, KEY + 7), (2, 3))],
    16: [msg((1, KEY + 5), (2, msg((1, "task"), (3, msg((1, '{"v": 1}'), (2, "task"))))), (3, msg((1, KEY + 6))))],
    17: [msg((1, KEY + 5), (2, msg((1, KEY + 1), (2, msg((1, "job"), (2, "job"))))))],
    18: [msg((1, KEY + 7), (2, 30000))],
    19: [msg((1, KEY + 1))],
    20: [msg((1, "sig"), (2, '{"s": true}'))],
}
rest_json = {
    0: {"processDefinitionId": "fuzz", "variables": {"key": "k1", "amount": 1500}},
    1: {"filter": {"processDefinitionId": "fuzz", "state": "ACTIVE"}, "sort": [{"field": "startDate", "order": "desc"}], "page": {"limit": 5}},
    3: {"activateInstructions": [{"elementId": "task"}], "terminateInstructions": [{"elementInstanceKey": "2251799813685255"}]},
    8: {"variables": {"a": 1}, "local": True},
    13: {"type": "work", "timeout": 60000, "maxJobsToActivate": 5, "requestTimeout": 100},
    14: {"changeset": {"retries": 2, "timeout": 1000}},
    15: {"variables": {"done": True}},
    16: {"retries": 0, "errorMessage": "boom"},
    17: {"errorCode": "E1", "errorMessage": "err"},
    19: {"variables": {"approved": True}, "action": "complete"},
    20: {"assignee": "demo", "allowOverride": True},
    25: {"name": "msg", "correlationKey": "k1", "timeToLive": 1000, "variables": {"m": 1}},
    26: {"name": "msg", "correlationKey": "k1"},
    27: {"signalName": "sig", "variables": {}},
    28: {"decisionDefinitionId": "d", "variables": {"amount": 1200, "category": "gold"}},
    29: {"filter": {"decisionDefinitionId": "d"}},
}
multipart = (b"--X\r\nContent-Disposition: form-data; name=\"resources\"; filename=\"p.bpmn\"\r\n"
             b"Content-Type: application/xml\r\n\r\n" + one_task + b"\r\n--X--\r\n")

def write(target, data):
    os.makedirs(f"seeds/{target}", exist_ok=True)
    with open(f"seeds/{target}/{hashlib.sha1(data).hexdigest()[:16]}", "wb") as f:
        f.write(data)

for rpc, messages in grpc.items():
    for m in messages:
        write("grpc", bytes([rpc]) + m)
for route, body in rest_json.items():
    write("rest", bytes([route, 0]) + json.dumps(body).encode())
write("rest", bytes([33, 0]) + multipart)
write("rest", bytes([2, 0]) + b"")
